#!/usr/bin/env bash
# `mpiexec -n RANKS kembed forward` against one process: y (h5dump -b) and the inputs'
# digests must be the one process's, byte for byte, on the bundled dataset and on
# generated cases: Zipf ids, every microbatch split (each block is one forward call
# over all ranks), max_norm renormalising the rows a call references (norms 2, 1 and
# inf), a padding row, V < ranks and T < ranks. Then: a bad id stops every rank with
# the one-process message and no output; a bag batch is refused by name on many ranks.
#   forward_ranks.sh KEMBED MPIEXEC RANKS WORKDIR KJV_DIR
set -euo pipefail
kembed=$1 mpiexec=$2 ranks=$3 work=$4 kjv=$5
rm -rf "$work" && mkdir -p "$work" && cd "$work"
export KOKKOS_NUM_THREADS=1
checked=0
digest() { h5dump -a "/$2" "$1" | grep "(0)"; }
# One process (no mpiexec) and RANKS ranks on the same arguments.
compare() {
  local name=$1
  shift
  "$kembed" -q forward "$@" --out "one-$name.h5" >/dev/null
  "$mpiexec" -n "$ranks" --oversubscribe "$kembed" -q forward "$@" --out "many-$name.h5" >/dev/null
  h5dump -d /y -b LE -o a.bin "one-$name.h5" >/dev/null
  h5dump -d /y -b LE -o b.bin "many-$name.h5" >/dev/null
  cmp -s a.bin b.bin || { echo "forward_ranks: $name: /y differs between one process and $ranks ranks" >&2; exit 1; }
  local role
  for role in table_sha256 ids_sha256; do
    [[ $(digest "one-$name.h5" "$role") == $(digest "many-$name.h5" "$role") ]] ||
      { echo "forward_ranks: $name: $role differs between one process and $ranks ranks" >&2; exit 1; }
  done
  checked=$((checked + 1))
}

compare kjv --table "$kjv/table.h5" --ids "$kjv/batch.h5"
# V = 1001 (not divisible by 2, 3 or 4), Zipf ids: hot rows, a padding row.
"$kembed" -q make-table --out t1001.h5 --rows 1001 --dim 8 --seed 1 --padding-idx 0 >/dev/null
"$kembed" -q make-batch --out zipf.h5 --zipf 1001 --positions 9001 --dim 8 --seed 2 >/dev/null
for mb in 1 7 4096 65536; do
  compare "zipf-$mb" --table t1001.h5 --ids zipf.h5 --microbatch "$mb"
done
# max_norm: each call renormalises the rows it references, once; a row's output
# depends on the calls before it, so the ranks' parts of a block must be one call.
# max_norm 0.5 is below most rows' norms of every type here.
for norm in 2 1 inf; do
  for mb in 1 7 4096; do
    compare "norm-$norm-$mb" --table t1001.h5 --ids zipf.h5 --microbatch "$mb" --max-norm 0.5 --norm-type "$norm"
  done
done
# V < ranks (a rank without rows) and T < ranks (ranks with no position).
"$kembed" -q make-table --out t3.h5 --rows 3 --dim 5 --seed 6 >/dev/null
printf '2 0 ' >two.txt
"$kembed" -q make-batch --out two.h5 --tokens two.txt --vocab 3 --dim 5 --seed 7 >/dev/null
compare tiny --table t3.h5 --ids two.h5
compare tiny-mb1 --table t3.h5 --ids two.h5 --microbatch 1 --max-norm 0.5

# One bad id, at position 118 of 120: in the last rank's part for every P here, so
# the other ranks must learn of it; every rank stops with the one-process message.
{ for i in $(seq 1 118); do printf '%d ' $((i % 3)); done; printf '5 1 '; } >bad.txt
"$kembed" -q make-batch --out bad.h5 --tokens bad.txt --vocab 7 --dim 5 --seed 8 >/dev/null
set +e
"$kembed" -q forward --table t3.h5 --ids bad.h5 --out one-bad.h5 2>one-bad.err
one_status=$?
"$mpiexec" -n "$ranks" --oversubscribe "$kembed" -q forward --table t3.h5 --ids bad.h5 --out many-bad.h5 2>many-bad.err
many_status=$?
set -e
[[ $one_status -eq 2 && $many_status -ne 0 ]] || { echo "forward_ranks: bad id: exit $one_status / $many_status" >&2; exit 1; }
[[ ! -e many-bad.h5 ]] || { echo "forward_ranks: a failed job left many-bad.h5" >&2; exit 1; }
one_message=$(grep "kembed: error" one-bad.err)
[[ $(grep -c "kembed: error" many-bad.err) -eq 1 && $(grep "kembed: error" many-bad.err) == "$one_message" ]] ||
  { echo "forward_ranks: bad id: not the one-process message once:" >&2; cat many-bad.err >&2; exit 1; }
checked=$((checked + 1))

# A bag batch's forward runs on one process: refused by name, nothing written.
if ((ranks > 1)); then
  "$kembed" -q make-batch --out bags.h5 --zipf 1001 --positions 901 --bags 70 --dim 8 --seed 11 >/dev/null
  set +e
  "$mpiexec" -n "$ranks" --oversubscribe "$kembed" -q forward --table t1001.h5 --ids bags.h5 --out y.h5 2>bags.err
  status=$?
  set -e
  [[ $status -eq 2 && ! -e y.h5 ]] || { echo "forward_ranks: a bag batch ran on $ranks ranks ($status)" >&2; exit 1; }
  grep -q "the forward of a bag batch runs on one process" bags.err ||
    { echo "forward_ranks: the bag batch's refusal:" >&2; cat bags.err >&2; exit 1; }
  checked=$((checked + 1))
fi
echo "forward_ranks: $checked cases on $ranks ranks, y and digests as one process's"
