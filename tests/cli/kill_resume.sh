#!/usr/bin/env bash
# A backward job killed with SIGKILL at a random moment and resumed gives the same
# bits as an uninterrupted run, ROUNDS times in a row (default 20).
#   kill_resume.sh KEMBED WORKDIR [ROUNDS] [BACKEND]
set -euo pipefail
kembed=$1 work=$2 rounds=${3:-20} backend=${4:-default}
mkdir -p "$work"
cd "$work"
rm -f run.h5 run.h5.checkpoint
"$kembed" -q make-table --out table.h5 --rows 20000 --dim 16 --seed 7 >/dev/null
"$kembed" -q make-batch --out batch.h5 --zipf 20000 --positions 600000 --dim 16 --seed 8 >/dev/null
args=(--backend "$backend" --table table.h5 --batch batch.h5 --microbatch 5000 --checkpoint-every 20000)
start=$(date +%s%N)
"$kembed" -q backward "${args[@]}" --out whole.h5 >/dev/null
whole_ms=$(( ($(date +%s%N) - start) / 1000000 ))
echo "kill_resume: an uninterrupted run takes ${whole_ms} ms"
killed_mid_run=0
for round in $(seq 1 "$rounds"); do
  rm -f run.h5 run.h5.checkpoint
  # Kill at a random point of the run (0 .. its whole duration), then resume; a
  # resumed run may itself be killed again before a last resume finishes it.
  for attempt in 1 2; do
    delay_ms=$(( RANDOM % (whole_ms + 1) ))
    "$kembed" -q backward "${args[@]}" --out run.h5 --resume >/dev/null 2>&1 &
    pid=$!
    sleep "$(printf '%d.%03d' $((delay_ms / 1000)) $((delay_ms % 1000)))"
    if kill -9 "$pid" 2>/dev/null; then killed_mid_run=$((killed_mid_run + 1)); fi
    wait "$pid" 2>/dev/null || true
  done
  "$kembed" -q backward "${args[@]}" --out run.h5 --resume >/dev/null
  if ! "$kembed" diff whole.h5 run.h5 >/dev/null; then
    "$kembed" diff whole.h5 run.h5 || true
    echo "kill_resume: round $round differs from the uninterrupted run" >&2
    exit 1
  fi
  [[ ! -e run.h5.checkpoint ]] || { echo "kill_resume: the finished job left its checkpoint" >&2; exit 1; }
done
echo "kill_resume: $rounds rounds identical, $killed_mid_run kills landed while a job ran"
[[ $killed_mid_run -gt 0 ]] || { echo "kill_resume: no kill landed mid-run; the test proved nothing" >&2; exit 1; }
