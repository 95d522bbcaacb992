#!/usr/bin/env bash
# `kembed forward` as one process and under `mpiexec -n P` (P = 1..4) on one batch:
# the report's seconds looking up and in all, and each run's peak resident memory
# (the first rank's, /usr/bin/time). Every run's y must be the one process's, byte
# for byte (h5dump -b, SHA-256); the script fails otherwise. Each run starts with the
# page cache's dirty pages written (sync), so that one run's output does not slow the
# next. docs/SCALING.md, "The forward", quotes these numbers.
#   bench/mpi_forward.sh [KEMBED] [POSITIONS] [ROWS] [DIM]
# (default: build/openmp/cli/kembed, 4,000,000 positions, 100,000 rows, d = 64; one
# thread per rank.)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
kembed=${1:-$here/build/openmp/cli/kembed} positions=${2:-4000000} rows=${3:-100000} dim=${4:-64}
work=$(mktemp -d "${TMPDIR:-/tmp}/kembed-mpi-forward.XXXXXX")
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=${OMPI_ALLOW_RUN_AS_ROOT:-1} OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-1}
export OMP_WAIT_POLICY=passive KOKKOS_NUM_THREADS=1
"$kembed" -q make-table --out "$work/table.h5" --rows "$rows" --dim "$dim" --seed 1 >/dev/null
"$kembed" -q make-batch --out "$work/batch.h5" --zipf "$rows" --positions "$positions" --dim "$dim" --seed 2 >/dev/null
# "1.23 s" or "456.7 ms" as seconds.
secs() { awk '{ printf "%.3f", $2 == "ms" ? $1 / 1000 : $1 }'; }
echo "ranks,lookup_s,total_s,peak_rss_mib,y_sha256"
first_sha=
for p in one 1 2 3 4; do
  rm -f "$work/y.h5"
  sync
  if [[ $p == one ]]; then
    launch=()
  else
    launch=("${MPIEXEC:-mpiexec}" -n "$p" --oversubscribe)
  fi
  out=$(/usr/bin/time -f "rss %M" "${launch[@]}" "$kembed" -q forward --table "$work/table.h5" --ids "$work/batch.h5" \
        --out "$work/y.h5" 2>&1)
  total=$(sed -n 's/^time: *\([0-9.]*\) \(ms\|s\) (.*/\1 \2/p' <<<"$out" | secs)
  lookup=$(sed -n 's/^time: .*(\([0-9.]*\) \(ms\|s\) looking up.*/\1 \2/p' <<<"$out" | secs)
  rss=$(sed -n 's/^rss \([0-9]*\)/\1/p' <<<"$out" | awk '{ printf "%.0f", $1 / 1024 }')
  h5dump -d /y -b LE -o "$work/y.bin" "$work/y.h5" >/dev/null
  sha=$(sha256sum "$work/y.bin" | cut -c1-64)
  echo "$p,$lookup,$total,$rss,$sha"
  first_sha=${first_sha:-$sha}
  [[ $sha == "$first_sha" ]] || { echo "mpi_forward: $p ranks wrote another y" >&2; exit 1; }
done
