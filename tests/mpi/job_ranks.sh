#!/usr/bin/env bash
# `mpiexec -n RANKS kembed backward` against one process, on the bundled dataset and on
# generated cases: hot rows across slab and owner boundaries, V not divisible by the
# ranks, ranks that own no referenced row or no row at all, ranks with an empty slab
# (T < ranks), padding rows, every identical plan, mode deterministic with microbatch
# splits, int64 and (with PYTHON) int32 ids. The run files' /gradient, /counts and
# /summary must be byte-identical (h5dump -b) to the one process's. Then: a bad id stops every
# rank with the one-process message and no output file; a rank killed mid-run stops
# the job, and --resume with another number of ranks (and another ownership of the rows:
# spread, the default, or --owners ranges) finishes with the same bits.
#   job_ranks.sh KEMBED MPIEXEC RANKS WORKDIR KJV_DIR [PYTHON]
set -euo pipefail
kembed=$1 mpiexec=$2 ranks=$3 work=$4 kjv=$5 python=${6:-}
rm -rf "$work" && mkdir -p "$work" && cd "$work"
export KOKKOS_NUM_THREADS=1
run_ranks() { "$mpiexec" -n "$1" --oversubscribe "$kembed" -q backward "${@:2}"; }
checked=0
# Byte comparison of a run file's datasets with the one process's.
same_datasets() {
  local a=$1 b=$2 what=$3
  local summary
  summary=$(h5ls -r "$a/summary" | awk '$2 == "Dataset" {print "summary" $1}')
  [[ -n $summary ]] || { echo "job_ranks: $what: $a has no /summary" >&2; exit 1; }
  local extra=""
  h5ls "$a/rows" >/dev/null 2>&1 && extra=rows  # a sparse run's listed rows
  # One h5dump per file writes every dataset's bytes, one after another (a dump per
  # dataset was half of this script's time); only a difference is looked into by name.
  local args=() d
  for d in gradient counts $extra $summary; do args+=(-d "/$d"); done
  h5dump "${args[@]}" -b LE -o a.bin "$a" >/dev/null
  h5dump "${args[@]}" -b LE -o b.bin "$b" >/dev/null
  if ! cmp -s a.bin b.bin; then
    for d in gradient counts $extra $summary; do
      h5dump -d "/$d" -b LE -o a.bin "$a" >/dev/null
      h5dump -d "/$d" -b LE -o b.bin "$b" >/dev/null
      cmp -s a.bin b.bin || echo "job_ranks: $what: /$d differs between one process and $ranks ranks" >&2
    done
    "$kembed" diff "$a" "$b" >&2 || true
    exit 1
  fi
  [[ $(h5dump -a /ranks "$b" | grep -c "(0): $ranks") -eq 1 ]] || { echo "job_ranks: $what: /ranks is not $ranks" >&2; exit 1; }
  # The inputs' fingerprints: each rank hashed its own chunks, and the value is one process's.
  local role fp
  for role in table batch; do
    fp=$(h5dump -a "/inputs/$role/sha256_of_16MiB_chunks" "$a" | grep "(0)")
    [[ -n $fp && $fp == $(h5dump -a "/inputs/$role/sha256_of_16MiB_chunks" "$b" | grep "(0)") ]] ||
      { echo "job_ranks: $what: the $role's fingerprint differs between one process and $ranks ranks" >&2; exit 1; }
  done
  checked=$((checked + 1))
}
# One process (no mpiexec) and RANKS ranks on the same arguments.
compare() {
  local name=$1
  shift
  "$kembed" -q backward "$@" --out "one-$name.h5" >/dev/null
  run_ranks "$ranks" "$@" --out "many-$name.h5" >/dev/null
  same_datasets "one-$name.h5" "many-$name.h5" "$name"
}

# The bundled dataset: the README's SHA-256.
out=$(run_ranks "$ranks" --table "$kjv/table.h5" --batch "$kjv/batch.h5" --out kjv.h5 2>&1)
grep -q "SHA-256 3e1ca048975c16830bc0ba0144b941f7dcb7c1f41bdb26a20b256dfad9a88a67" <<<"$out" ||
  { echo "job_ranks: the bundled job on $ranks ranks: $out" >&2; exit 1; }
[[ $(grep -c "SHA-256" <<<"$out") -eq 1 ]] || { echo "job_ranks: more than one rank printed: $out" >&2; exit 1; }
compare kjv --table "$kjv/table.h5" --batch "$kjv/batch.h5"

# V = 1001 (not divisible by 2, 3 or 4), Zipf ids: hot rows in every slab, owned by rank 0.
"$kembed" -q make-table --out t1001.h5 --rows 1001 --dim 8 --seed 1 --padding-idx 0 >/dev/null
"$kembed" -q make-batch --out zipf.h5 --zipf 1001 --positions 9001 --dim 8 --seed 2 >/dev/null
for plan in scan sort bucket auto; do
  compare "zipf-$plan" --table t1001.h5 --batch zipf.h5 --plan "$plan"
done
compare zipf-nopad --table t1001.h5 --batch zipf.h5 --no-padding
compare zipf-pad-last --table t1001.h5 --batch zipf.h5 --padding-idx -1
# Row-sparse runs: each rank lists its own rows; the file is the one process's
# (rows, values, counts, summary), also with batch scaling and tiny microbatches.
compare zipf-sparse --table t1001.h5 --batch zipf.h5 --sparse
compare zipf-ranges --table t1001.h5 --batch zipf.h5 --owners ranges
compare zipf-sparse-ranges --table t1001.h5 --batch zipf.h5 --sparse --owners ranges
compare zipf-sparse-scaled --table t1001.h5 --batch zipf.h5 --sparse --scale-grad-by-freq batch --microbatch 7
# scale_grad_by_freq: per call (each microbatch's counts, every rank's positions of
# it) and per batch (a first pass, counts summed to the rows' owners).
for mb in 7 4096; do
  compare "zipf-scale-call-$mb" --table t1001.h5 --batch zipf.h5 --scale-grad-by-freq call --microbatch "$mb"
  compare "zipf-scale-batch-$mb" --table t1001.h5 --batch zipf.h5 --scale-grad-by-freq batch --microbatch "$mb"
done
for mb in 1 7 4096; do
  compare "zipf-det-$mb" --table t1001.h5 --batch zipf.h5 --mode deterministic --microbatch "$mb"
done
# Every id among the first 5 rows: the other ranks own no referenced row. Hot rows
# straddle the owner boundary of rows_of(V, P) when V is small.
printf '0 1 2 3 4 4 4 3 ' >few.txt
"$kembed" -q make-batch --out few.h5 --tokens few.txt --repeat 300 --vocab 1001 --dim 8 --seed 3 >/dev/null
compare few --table t1001.h5 --batch few.h5
"$kembed" -q make-table --out t7.h5 --rows 7 --dim 3 --seed 4 >/dev/null
printf '1 2 1 2 5 6 3 1 ' >hot.txt
"$kembed" -q make-batch --out hot.h5 --tokens hot.txt --repeat 50 --vocab 7 --dim 3 --seed 5 >/dev/null
compare hot-boundary --table t7.h5 --batch hot.h5 --mode deterministic --microbatch 3
# V < ranks (a rank without rows) and T < ranks (ranks with empty slabs).
"$kembed" -q make-table --out t3.h5 --rows 3 --dim 5 --seed 6 >/dev/null
printf '2 0 ' >two.txt
"$kembed" -q make-batch --out two.h5 --tokens two.txt --vocab 3 --dim 5 --seed 7 >/dev/null
compare tiny --table t3.h5 --batch two.h5
compare tiny-det --table t3.h5 --batch two.h5 --mode deterministic --microbatch 1
# int32 ids (a plain HDF5 file, as h5py writes it).
if [[ -n $python ]]; then
  "$python" - <<'PY'
import h5py, numpy as np
with h5py.File("zipf.h5", "r") as f:
    ids, dy = f["ids"][...], f["dy"][...]
with h5py.File("int32.h5", "w") as g:
    g["tokens"] = ids.astype(np.int32)
    g["grad"] = dy
PY
  compare int32 --table t1001.h5 --batch int32.h5 --ids-dataset tokens --dy-dataset grad
fi

# Bag batches (EmbeddingBag): each rank reads whole bags, turns them into positions
# with their terms and factors, and sends those to the rows' owners. Every pooling,
# weights, padding (row 0, which a mean leaves out of n), empty bags, row-sparse,
# scale_grad_by_freq, deterministic splits of whole bags.
"$kembed" -q make-batch --out bags.h5 --zipf 1001 --positions 9001 --bags 700 --dim 8 --seed 11 >/dev/null
"$kembed" -q make-batch --out wbags.h5 --zipf 1001 --positions 9001 --bags 700 --weighted --dim 8 --seed 12 >/dev/null
for pooling in sum mean max; do
  compare "bags-$pooling" --table t1001.h5 --batch bags.h5 --pooling "$pooling"
  compare "bags-$pooling-det" --table t1001.h5 --batch bags.h5 --pooling "$pooling" --mode deterministic --microbatch 9
  compare "bags-$pooling-sparse" --table t1001.h5 --batch bags.h5 --pooling "$pooling" --sparse --microbatch 5
done
compare bags-weighted --table t1001.h5 --batch wbags.h5
compare bags-weighted-det --table t1001.h5 --batch wbags.h5 --mode deterministic --microbatch 13 --sparse
compare bags-scale-call --table t1001.h5 --batch bags.h5 --scale-grad-by-freq call --microbatch 11
compare bags-scale-batch --table t1001.h5 --batch bags.h5 --scale-grad-by-freq batch --no-padding
# Fewer bags than ranks: ranks with no bag (and no position) take part in every call.
"$kembed" -q make-batch --out twobags.h5 --tokens two.txt --vocab 3 --bags 2 --dim 5 --seed 7 >/dev/null
compare bags-tiny --table t3.h5 --batch twobags.h5 --pooling mean
# scale_grad_by_freq with a mean or weights: each position's n or weight travels to its
# row's owner, which forms the factor with its row's count (the call's or the batch's).
compare bags-mean-scale-call --table t1001.h5 --batch bags.h5 --pooling mean --scale-grad-by-freq call --microbatch 11
compare bags-mean-scale-batch --table t1001.h5 --batch bags.h5 --pooling mean --scale-grad-by-freq batch \
  --mode deterministic --microbatch 9 --sparse
compare bags-weighted-scale-call --table t1001.h5 --batch wbags.h5 --scale-grad-by-freq call --microbatch 11 --sparse
compare bags-weighted-scale-batch --table t1001.h5 --batch wbags.h5 --scale-grad-by-freq batch --mode deterministic \
  --microbatch 13

# One bad id, at position 118 of 120: in the last rank's part for every P here, so
# the other ranks must learn of it; every rank stops with the one-process message.
{ for i in $(seq 1 118); do printf '%d ' $((i % 3)); done; printf '5 1 '; } >bad.txt
"$kembed" -q make-batch --out bad.h5 --tokens bad.txt --vocab 7 --dim 5 --seed 8 >/dev/null
set +e
"$kembed" -q backward --table t3.h5 --batch bad.h5 --out one-bad.h5 2>one-bad.err
one_status=$?
run_ranks "$ranks" --table t3.h5 --batch bad.h5 --out many-bad.h5 2>many-bad.err
many_status=$?
set -e
[[ $one_status -eq 2 && $many_status -ne 0 ]] || { echo "job_ranks: bad id: exit $one_status / $many_status" >&2; exit 1; }
[[ ! -e many-bad.h5 ]] || { echo "job_ranks: a failed job left many-bad.h5" >&2; exit 1; }
grep -q "holds 5 at position 118," many-bad.err || { echo "job_ranks: bad id message:" >&2; cat many-bad.err >&2; exit 1; }
[[ $(grep -c "kembed: error" many-bad.err) -eq 1 ]] || { echo "job_ranks: the error was not printed once:" >&2; cat many-bad.err >&2; exit 1; }
checked=$((checked + 1))

# Other commands would each run whole on every rank: refused (forward_ranks.sh runs forward).
if ((ranks > 1)); then
  set +e
  "$mpiexec" -n "$ranks" --oversubscribe "$kembed" -q make-table --out t9.h5 --rows 9 --dim 2 --seed 1 2>make.err
  status=$?
  set -e
  [[ $status -ne 0 && ! -e t9.h5 ]] || { echo "job_ranks: make-table ran on $ranks ranks" >&2; exit 1; }
  grep -q "only \`kembed backward\`, \`kembed forward\` and \`kembed step\` run on many MPI ranks" make.err ||
    { echo "job_ranks: make-table's refusal:" >&2; cat make.err >&2; exit 1; }
  checked=$((checked + 1))
fi

# A rank killed mid-run: no output file; resumed with another number of ranks (and
# with one process), the same bits as the uninterrupted one-process run; for a
# sparse run too (each rank reads its own rows of the sparse checkpoint).
"$kembed" -q make-table --out t5003.h5 --rows 5003 --dim 8 --seed 9 >/dev/null
"$kembed" -q make-batch --out long.h5 --zipf 5003 --positions 300000 --dim 8 --seed 10 >/dev/null
"$kembed" -q make-batch --out longbags.h5 --zipf 5003 --positions 300000 --bags 20000 --weighted --dim 8 \
  --seed 13 >/dev/null
for mode in identical deterministic sparse bags; do  # sparse: a row-sparse run and its checkpoints
  args=(--table t5003.h5 --batch long.h5 --microbatch 1000 --checkpoint-every 65536)
  if [[ $mode == sparse ]]; then args+=(--sparse); else args+=(--mode "$mode"); fi
  # bags: a weighted bag batch in mode deterministic, killed past bag 9,000
  [[ $mode != bags ]] ||
    args=(--table t5003.h5 --batch longbags.h5 --microbatch 100 --checkpoint-every 4000 --mode deterministic)
  kill_at=140000
  [[ $mode != bags ]] || kill_at=9000
  "$kembed" -q backward "${args[@]}" --out "one-long-$mode.h5" >/dev/null
  victim=$((ranks - 1))
  set +e
  KEMBED_TEST_KILL_AT="$victim:$kill_at" run_ranks "$ranks" "${args[@]}" --out "killed-$mode.h5" >/dev/null 2>&1
  status=$?
  set -e
  [[ $status -ne 0 ]] || { echo "job_ranks: the job with a killed rank exited 0" >&2; exit 1; }
  [[ ! -e "killed-$mode.h5" ]] || { echo "job_ranks: a killed job left its output" >&2; exit 1; }
  [[ -e "killed-$mode.h5.checkpoint" ]] || { echo "job_ranks: the killed job left no checkpoint" >&2; exit 1; }
  other=$((ranks % 4 + 1))  # resume with another number of ranks
  cp "killed-$mode.h5.checkpoint" "again-$mode.h5.checkpoint"
  [[ $mode != identical ]] || cp "killed-$mode.h5.checkpoint" edited.checkpoint  # for the tampering below
  owners=()  # mode identical resumes with rows owned in ranges (the killed job spread them)
  [[ $mode != identical ]] || owners=(--owners ranges)
  run_ranks "$other" "${args[@]}" "${owners[@]}" --out "killed-$mode.h5" --resume >/dev/null
  same_datasets_ranks=$ranks
  ranks=$other same_datasets "one-long-$mode.h5" "killed-$mode.h5" "resumed $mode on $other ranks"
  [[ ! -e "killed-$mode.h5.checkpoint" ]] || { echo "job_ranks: the finished job left its checkpoint" >&2; exit 1; }
  "$kembed" -q backward "${args[@]}" --out "again-$mode.h5" --resume >/dev/null  # one process
  ranks=1 same_datasets "one-long-$mode.h5" "again-$mode.h5" "resumed $mode as one process"
  ranks=$same_datasets_ranks
done
# What the ranks build on is verified: a checkpoint whose last row (the last rank's)
# was edited after it was written is refused, each rank hashing the rows it read in
# rank order, and left as it was; a table holding NaN in the last rank's rows stops
# every rank with the one-process message, before any output.
if [[ -n $python ]]; then
  "$python" - <<'PY'
import h5py, numpy as np, shutil
with h5py.File("edited.checkpoint", "r+") as f:
    f["gradient"][-1, 0] = f["gradient"][-1, 0] + 1
shutil.copyfile("t5003.h5", "tnan.h5")
with h5py.File("tnan.h5", "r+") as f:
    f["weight"][5002, 3] = np.nan
PY
  before=$(sha256sum edited.checkpoint)
  set +e
  run_ranks "$ranks" --table t5003.h5 --batch long.h5 --microbatch 1000 --mode identical --out edited.h5 \
    --checkpoint edited.checkpoint --resume 2>edited.err
  edited_status=$?
  run_ranks "$ranks" --table tnan.h5 --batch long.h5 --out nan.h5 2>nan.err
  nan_status=$?
  set -e
  [[ $edited_status -ne 0 && ! -e edited.h5 && $(sha256sum edited.checkpoint) == "$before" ]] ||
    { echo "job_ranks: an edited checkpoint was resumed or changed (exit $edited_status)" >&2; cat edited.err >&2; exit 1; }
  grep -q "edited.checkpoint: dataset '/gradient': does not match its SHA-256.*left as it is" edited.err ||
    { echo "job_ranks: the edited checkpoint's refusal:" >&2; cat edited.err >&2; exit 1; }
  [[ $nan_status -ne 0 && ! -e nan.h5 && $(grep -c "kembed: error" nan.err) -eq 1 ]] ||
    { echo "job_ranks: a table holding NaN (exit $nan_status):" >&2; cat nan.err >&2; exit 1; }
  grep -q "tnan.h5: dataset '/weight': holds NaN at row 5002, column 3" nan.err ||
    { echo "job_ranks: the NaN table's refusal:" >&2; cat nan.err >&2; exit 1; }
  checked=$((checked + 2))
fi
echo "job_ranks: $checked cases on $ranks rank(s): datasets byte-identical to one process"
