#!/usr/bin/env bash
# Runs the benchmark grid (bench/kembed_bench.cpp) on Serial and on OpenMP with 1
# and 2 threads, then draws the plots and tables of docs/PERFORMANCE.md.
#   scripts/bench.sh            the whole grid on the three (about 15 minutes on 2 cores)
#   scripts/bench.sh --quick    a subset, OpenMP with 2 threads only (under a minute)
# Both also run kembed-job-bench: the whole batch job against each of its stages alone,
# kembed-small-calls-bench: microbatches call by call against calls of 4096,
# and bench/python_bench.py: the Python package against the C++ calls and torch.
# Results: bench/results/*.csv (ceilings.csv: kembed-ceilings, the bare access
# patterns), docs/images/perf-*.png, bench/results/summary.md.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
quick=${1:-}
"$here/scripts/setup.sh" openmp
bench=$here/build/openmp/bench/kembed-bench
out=$here/bench/results
mkdir -p "$out"
export OMP_PROC_BIND=${OMP_PROC_BIND:-spread} OMP_PLACES=${OMP_PLACES:-threads}
# The jobs run as `kembed backward` and `forward` run them: OpenMP threads that sleep
# when idle and are not pinned, so that they make way for the jobs' hashing and I/O
# threads (pinned, a thread sharing its core with one of them holds up every fold).
job_bench() {
  env -u OMP_PROC_BIND -u OMP_PLACES OMP_WAIT_POLICY=passive "$here/build/openmp/bench/kembed-job-bench" "$@"
}
# Microbatches folded call by call, 1 thread then 2 against it (docs/PERFORMANCE.md, "Small calls").
small_calls() {
  local calls=$here/build/openmp/bench/kembed-small-calls-bench
  OMP_NUM_THREADS=1 "$calls" "$@" --csv "$out/small-calls-1.csv" | tee "$out/small-calls.md"
  OMP_NUM_THREADS=2 "$calls" "$@" --csv "$out/small-calls-2.csv" --baseline "$out/small-calls-1.csv" |
    tee -a "$out/small-calls.md"
}
if [[ $quick == --quick ]]; then
  out=$out/quick  # keeps the whole grid's results, which the docs quote
  mkdir -p "$out"
  "$bench" --backend openmp --threads 2 --quick --csv "$out/openmp-2.csv"
  job_bench --quick --threads 2 | tee "$out/job.md"
  small_calls --rows 1e4,1e6 --dim 16
else
  # The whole job against its stages alone, on a 1.06 GB batch (docs/PERFORMANCE.md, "The whole job").
  for threads in 2 1; do job_bench --threads $threads; done | tee "$out/job.md"
  "$bench" --backend openmp --threads 2 --csv "$out/openmp-2.csv"
  "$bench" --backend openmp --threads 1 --csv "$out/openmp-1.csv"
  "$bench" --backend serial --csv "$out/serial.csv"
  small_calls
  # The access patterns themselves, without kembed (docs/PERFORMANCE.md, "ceilings").
  # Sizes as the grid's T = 1e6 points: d = 128 (512 MB of dy) and d = 512 (2 GB).
  rm -f "$out/ceilings.csv"
  for threads in 2 1; do
    "$here/build/openmp/bench/kembed-ceilings" --threads $threads --row-bytes 512 --mib 512 --csv "$out/ceilings.csv"
    "$here/build/openmp/bench/kembed-ceilings" --threads $threads --row-bytes 2048 --mib 2048 --csv "$out/ceilings.csv"
  done
fi
venv=${KEMBED_CACHE:-$HOME/.cache/kembed}/venv
"$here/scripts/setup.sh" python
quick_flag=()
[[ $quick == --quick ]] && quick_flag=(--quick)
"$venv/bin/python" "$here/bench/python_bench.py" --kembed-bench "$bench" "${quick_flag[@]}" --out "$out/python.md"
"$venv/bin/python" -c "import matplotlib" 2>/dev/null || "$venv/bin/pip" install -q matplotlib
images=$here/docs/images
[[ $quick == --quick ]] && images=$out
"$venv/bin/python" "$here/scripts/plot_bench.py" "$out" "$images" | tee "$out/summary.md"
