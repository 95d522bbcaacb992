#!/usr/bin/env bash
# `mpiexec -n RANKS kembed step` against one process: a short training run through the
# CLI (backward, then step, each step's table and state the next one's inputs) for
# every optimizer, dense and sparse, with V not divisible by the ranks and a V smaller
# than the ranks (a rank with no rows). Every table and state file must be the one
# process's, byte for byte. Then a mismatched state stops every rank with the
# one-process message and writes nothing.
#   step_ranks.sh KEMBED MPIEXEC RANKS WORKDIR
set -euo pipefail
kembed=$1 mpiexec=$2 ranks=$3 work=$4
rm -rf "$work" && mkdir -p "$work" && cd "$work"
export KOKKOS_NUM_THREADS=1
checked=0
# steps PROCS V OPTIMIZER SPARSE: in the current folder, three steps from t0.h5, each
# step by PROCS ranks (0: one process without mpiexec, which also makes the batches
# and runs; the ranks take ../one's, whose table SHA-256 they must then match).
steps() {
  local procs=$1 v=$2 opt=$3 sparse=$4 state=() k
  if [[ $procs -eq 0 ]]; then
    "$kembed" -q make-table --out t0.h5 --rows "$v" --dim 5 --seed 3
  else
    cp ../one/t0.h5 .
  fi
  for k in 0 1 2; do
    if [[ $procs -eq 0 ]]; then
      "$kembed" -q make-batch --out "b$k.h5" --zipf "$v" --positions 700 --dim 5 --seed $((k + 11))
      "$kembed" -q backward --table "t$k.h5" --batch "b$k.h5" --out "r$k.h5" --run-id "step-$k" $sparse
    else
      cp "../one/r$k.h5" .
    fi
    local cmd=(step --table "t$k.h5" --run "r$k.h5" --out "t$((k + 1)).h5" "${state[@]}")
    [[ $k -eq 0 ]] && cmd+=(--optimizer "$opt" --lr 0.05 --weight-decay 0.01)
    [[ $k -eq 0 && $opt == sgd ]] && cmd+=(--momentum 0.9)
    if [[ $procs -eq 0 ]]; then
      "$kembed" -q "${cmd[@]}"
    else
      "$mpiexec" -n "$procs" --oversubscribe "$kembed" -q "${cmd[@]}"
    fi
    state=(--state "t$((k + 1)).h5.state")
  done
}
for v in 1001 3; do
  for opt in sgd adagrad rowwise_adagrad adam; do
    for sparse in "" --sparse; do
      what="V=$v $opt ${sparse:-dense}"
      mkdir one many
      (cd one && steps 0 "$v" "$opt" "$sparse")
      (cd many && steps "$ranks" "$v" "$opt" "$sparse")
      for f in t1.h5 t1.h5.state t2.h5 t2.h5.state t3.h5 t3.h5.state; do
        if ! cmp -s "one/$f" "many/$f"; then
          echo "step_ranks: $what: $f differs between one process and $ranks ranks" >&2
          diff <("$kembed" info "one/$f") <("$kembed" info "many/$f") >&2 || true
          exit 1
        fi
      done
      checked=$((checked + 1))
      rm -rf one many
    done
  done
done
# A mismatched state stops every rank with the one-process message, nothing written.
"$kembed" -q make-table --out t.h5 --rows 40 --dim 3 --seed 1
"$kembed" -q make-batch --out b.h5 --zipf 40 --positions 100 --dim 3
"$kembed" -q backward --table t.h5 --batch b.h5 --out r.h5
"$kembed" -q step --table t.h5 --run r.h5 --out t1.h5 --optimizer adam
set +e
one=$("$kembed" -q step --table t.h5 --run r.h5 --out x.h5 --state t1.h5.state 2>&1)
many=$("$mpiexec" -n "$ranks" --oversubscribe "$kembed" -q step --table t.h5 --run r.h5 --out x.h5 \
  --state t1.h5.state 2>&1)
status=$?
set -e
[[ $status -eq 2 && -n $one && $many == *"goes with the table its step wrote"* && ! -e x.h5 ]] ||
  { echo "step_ranks: a mismatched state on $ranks ranks: status $status, '$many'" >&2; exit 1; }
checked=$((checked + 1))
echo "step_ranks: $checked cases on $ranks ranks, the one process's bytes"
