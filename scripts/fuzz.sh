#!/usr/bin/env bash
# Fuzzes every kembed file loader (tests/fuzz/load_fuzzer.cpp) for SECONDS (default
# 60): builds build/fuzz with clang, libFuzzer, ASan and UBSan, runs it on a working
# copy of the committed corpus (tests/fuzz/corpus), then replays every crash, leak and
# hang it saved and sorts them by where they happen:
#   kembed's own   a frame of this repository is nearer the fault than any libhdf5 frame
#   in libhdf5     the fault is inside HDF5, reached through a kembed call
# Exits 1 when any finding is kembed's own; those inside libhdf5 are counted by
# function and listed (docs/FORMAT.md says what kembed does about them).
#   scripts/fuzz.sh [SECONDS] [--keep]     (--keep: keep the corpus grown by earlier runs)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
seconds=${1:-60}
keep=${2:-}
"$here/scripts/setup.sh" fuzz
cd "$here"
fuzzer=build/fuzz/tests/fuzz/kembed_load_fuzzer
run=build/fuzz/run
if [[ $keep != --keep ]]; then rm -rf "$run"; fi
mkdir -p "$run/corpus" "$run/artifacts" "$run/replays"
export TMPDIR=$run  # the target writes each input to a file there
echo "fuzz: $seconds s on $(ls tests/fuzz/corpus | wc -l) seed files (log: $run/fuzz.log)"
# Leaks are looked for afterwards (below): inside libhdf5 they are frequent on damaged
# headers, and each would end a fuzzing job.
ASAN_OPTIONS=detect_leaks=0 "$fuzzer" "$run/corpus" tests/fuzz/corpus -fork=1 -ignore_crashes=1 \
  -ignore_timeouts=1 -ignore_ooms=1 -max_total_time="$seconds" -max_len=65536 -timeout=10 -rss_limit_mb=4096 \
  -artifact_prefix="$run/artifacts/" >"$run/fuzz.log" 2>&1 || true
runs=$(grep -oE '^#[0-9]+' "$run/fuzz.log" | tail -n 1 | tr -d '#')
grep -qE "INFO: fuzzed for|INFO: exiting" "$run/fuzz.log" || { tail -n 30 "$run/fuzz.log"; echo "fuzz: libFuzzer did not finish" >&2; exit 1; }

own=0 inside=0 replayed=0
declare -A places=()
# replay FILE KIND: runs one input alone with whole stacks, and files it under where it failed.
replay() {
  local input=$1 kind=$2 report first where status=0
  report="$run/replays/$kind-$(basename "$input").txt"
  ASAN_OPTIONS=detect_leaks=$([[ $kind == leak ]] && echo 1 || echo 0):fast_unwind_on_malloc=0:fast_unwind_on_fatal=1:malloc_context_size=40 \
    timeout 60 "$fuzzer" -timeout=10 -rss_limit_mb=4096 "$input" >"$report" 2>&1 || status=$?
  replayed=$((replayed + 1))
  ((status != 0)) || return 0  # does not fail on its own (a flaky or environment finding)
  # The first stack of the report, innermost frame first: whose frame comes first?
  first=$(awk '/^ +#[0-9]+ /{ if (seen && $1 == "#0") exit; seen = 1; print }' "$report" \
          | grep -E "libhdf5|$here/(io|core|cli|tests)/" | head -n 1 || true)
  if [[ $status -eq 124 ]]; then
    where=hang
  elif [[ -z $first ]]; then
    where="no stack"
  elif grep -q libhdf5 <<<"$first"; then
    # Named by the first HDF5 function that is not an allocator.
    where=$(grep -E "^ +#[0-9]+ .* in H5" "$report" | grep -vE " in H5(FL|MM)_" | sed -n '1s/.* in \(H5[A-Za-z0-9_]*\).*/\1/p' || true)
    [[ -n $where ]] || where=libhdf5
  else
    where=kembed
  fi
  if [[ $where == kembed ]]; then
    own=$((own + 1))
    echo "fuzz: kembed's own $kind: $input (report: $report)"
    grep -E "^ +#[0-9]+ |ERROR|runtime error" "$report" | head -n 14
  else
    inside=$((inside + 1))
    places["$kind in $where"]=$(( ${places["$kind in $where"]:-0} + 1 ))
  fi
}
for artifact in "$run"/artifacts/*; do
  [[ -s $artifact ]] || continue  # an empty file: a job ended while writing it
  replay "$artifact" "$(basename "$artifact" | cut -d- -f1)"
done
# The leak pass: every input the fuzzer kept, alone, with leak detection.
for input in "$run"/corpus/*; do
  [[ -e $input ]] && replay "$input" leak
done
echo "fuzz: ${runs:-0} inputs in $seconds s, $replayed replayed; findings in kembed's own code: $own; inside libhdf5 (or without a stack): $inside"
for place in "${!places[@]}"; do echo "fuzz:   ${places[$place]} x $place"; done | sort -k2 -nr
((own == 0))
