#!/usr/bin/env bash
# The product's promise: the same batch at microbatch sizes 1, 7, 4096 and
# all-at-once, with every plan, on every backend and 1-4 threads, gives one
# gradient; `kembed diff` must say identical for each run against the first.
#   microbatch_matrix.sh KEMBED WORKDIR BACKEND...    (BACKEND: serial | openmp)
set -euo pipefail
kembed=$1 work=$2
shift 2
mkdir -p "$work"
cd "$work"
"$kembed" -q make-table --out table.h5 --rows 700 --dim 9 --seed 5 --padding-idx 3 >/dev/null
"$kembed" -q make-batch --out batch.h5 --zipf 700 --positions 6000 --dim 9 --seed 6 >/dev/null
"$kembed" -q backward --backend serial --table table.h5 --batch batch.h5 --out reference.h5 --microbatch 6000 >/dev/null
runs=0
for backend in "$@"; do
  threads_list=1
  [[ $backend == openmp ]] && threads_list="1 2 3 4"
  for threads in $threads_list; do
    for mb in 1 7 4096 6000; do
      for plan in scan sort auto; do
        out=run-$backend-$threads-$mb-$plan.h5
        "$kembed" -q backward --backend "$backend" --threads "$threads" --plan "$plan" --table table.h5 \
          --batch batch.h5 --out "$out" --microbatch "$mb" >/dev/null
        if ! "$kembed" diff reference.h5 "$out"; then
          echo "microbatch_matrix: $backend, $threads thread(s), microbatch $mb, plan $plan differs" >&2
          exit 1
        fi
        runs=$((runs + 1))
      done
    done
  done
done
echo "microbatch_matrix: $runs runs, all identical to the reference"
