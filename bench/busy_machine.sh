#!/usr/bin/env bash
# The bundled job in many small microbatches (--microbatch 97: 731 of them) while a
# second process keeps both cores busy, on Serial and on OpenMP with 2 threads (and
# OpenMP with OMP_WAIT_POLICY=passive), as medians of several runs; BUSY_LOOPS busy
# loops (default: twice the cores) are the other work. With a second
# kembed binary (an older build), the same for it, side by side. Idle OpenMP threads
# spin between kernel calls, and on a busy machine that spinning fights the other work.
#
#   bench/busy_machine.sh build/openmp/cli/kembed [OLDER_KEMBED] [RUNS]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
now=$1 before=${2:-} runs=${3:-7} loops=${BUSY_LOOPS:-$((2 * $(nproc)))}
work=$(mktemp -d)
busy=()
cleanup() {
  ((${#busy[@]})) && kill "${busy[@]}" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
for _ in $(seq "$loops"); do
  (while :; do :; done) &
  busy+=($!)
done

median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
# time_job KEMBED [ENV=...] -- ARGS: median wall seconds of `runs` runs
time_job() {
  local kembed=$1
  shift
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  for _ in $(seq "$runs"); do
    local t0 t1
    t0=$(date +%s.%N)
    env "${envs[@]}" "$kembed" -q "$@" backward --table "$here/datasets/kjv/table.h5" \
      --batch "$here/datasets/kjv/batch.h5" --out "$work/r.h5" --microbatch 97 >/dev/null
    t1=$(date +%s.%N)
    awk -v a="$t0" -v b="$t1" 'BEGIN { print b - a }'
  done | median
}

echo "bundled job, --microbatch 97, $loops busy loops beside it, median of $runs runs (wall seconds)"
printf "%-22s %-10s %-10s %-14s\n" "binary" "serial" "openmp 2" "openmp passive"
for kembed in $before $now; do
  label=$([[ $kembed == "$now" ]] && echo "this build" || echo "older build")
  s=$(time_job "$kembed" X=1 -- --backend serial)
  o=$(time_job "$kembed" X=1 -- --backend openmp --threads 2)
  p=$(time_job "$kembed" OMP_WAIT_POLICY=passive -- --backend openmp --threads 2)
  printf "%-22s %-10.3f %-10.3f %-14.3f\n" "$label" "$s" "$o" "$p"
done
