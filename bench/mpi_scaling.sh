#!/usr/bin/env bash
# The MPI job at P = 1..4 ranks on one batch: bytes exchanged per position and the
# time split into read, exchange, fold and write (and the first rank's hashing of its
# part of the inputs, on a thread beside them), from each run's own report and run
# file (/timings). Every run's gradient SHA-256 must be the same; the script fails
# otherwise. docs/SCALING.md quotes and models these numbers.
#   bench/mpi_scaling.sh [KEMBED] [POSITIONS] [ROWS] [DIM]
# (default: build/openmp/cli/kembed, 1,000,000 positions, 100,000 rows, d = 64;
# one thread per rank, so that 4 ranks on 2 cores compete as 4 nodes would not).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
kembed=${1:-$here/build/openmp/cli/kembed} positions=${2:-1000000} rows=${3:-100000} dim=${4:-64}
work=$(mktemp -d "${TMPDIR:-/tmp}/kembed-mpi-scaling.XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
export OMP_WAIT_POLICY=passive KOKKOS_NUM_THREADS=1
"$kembed" -q make-table --out "$work/table.h5" --rows "$rows" --dim "$dim" --seed 1 >/dev/null
"$kembed" -q make-batch --out "$work/batch.h5" --zipf "$rows" --positions "$positions" --dim "$dim" --seed 2 >/dev/null
timing() { h5dump -a "/timings/$2" "$1" | sed -n 's/.*(0): *//p'; }
# The busiest rank's fold terms over the mean, as the run file records them (/rank_work).
busiest() {
  h5dump -d /rank_work/terms -y -w 0 "$1" | sed -n '/DATA {/,/}/p' | tr -cs '0-9' '\n' |
    awk 'NF { n++; s += $1; if ($1 > m) m = $1 } END { printf "%.2f", n && s ? m / (s / n) : 1 }'
}
echo "ranks,bytes_per_position,read_s,exchange_s,fold_s,write_s,hash_s,hash_wait_s,total_s,busiest_terms_over_mean,sha256"
first_sha=
for p in 1 2 3 4; do
  out=$("${MPIEXEC:-mpiexec}" -n "$p" --oversubscribe "$kembed" -q backward --table "$work/table.h5" \
        --batch "$work/batch.h5" --out "$work/run$p.h5" 2>&1)
  sha=$(sed -n 's/.*SHA-256 \([0-9a-f]*\).*/\1/p' <<<"$out")
  bytes=$(sed -n 's/^exchange: *\([0-9.]*\) bytes.*/\1/p' <<<"$out")
  run=$work/run$p.h5
  read_s=$(timing "$run" read_batch_seconds) backward_s=$(timing "$run" backward_seconds)
  total_s=$(timing "$run" total_seconds) hash_s=$(timing "$run" hash_inputs_seconds)
  hash_wait_s=$(timing "$run" hash_wait_seconds)
  exchange_s=$( ((p > 1)) && timing "$run" exchange_seconds || echo 0)
  # The gradient's hash and the file's write, as the first rank printed them.
  write_s=$(sed -n 's/^time: .* reading, \([0-9.]*\) \(ms\|s\) writing.*/\1 \2/p' <<<"$out" |
            awk '{ printf "%.3f", $2 == "ms" ? $1 / 1000 : $1 }')
  fold_s=$(awk -v b="$backward_s" -v e="$exchange_s" 'BEGIN { printf "%.3f", b - e }')
  balance=$( ((p > 1)) && busiest "$run" || echo 1.00)
  printf "%d,%s,%.3f,%.3f,%s,%s,%.3f,%.3f,%.3f,%s,%s\n" "$p" "${bytes:-0}" "$read_s" "$exchange_s" "$fold_s" "$write_s" \
    "$hash_s" "$hash_wait_s" "$total_s" "$balance" "$sha"
  first_sha=${first_sha:-$sha}
  [[ $sha == "$first_sha" ]] || { echo "mpi_scaling: $p ranks gave another gradient" >&2; exit 1; }
done
