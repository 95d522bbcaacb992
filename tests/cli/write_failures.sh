#!/usr/bin/env bash
# Writes that fail or are killed leave nothing behind and exit 3 (I/O failure):
#   1. a full disk (a 1 MiB tmpfs) for every command that writes, checkpoints included;
#   2. a file-size limit (ulimit -f), which would otherwise kill with SIGXFSZ;
#   3. temporaries of saves killed with SIGKILL are removed by the next save of the
#      same file, and a live process's temporary is not.
#   write_failures.sh KEMBED WORKDIR
# The tmpfs part needs root (mount); without it that part is reported as skipped
# (exit 77, which CTest shows as "Skipped"), after the other parts ran.
set -uo pipefail
kembed=$(realpath "$1") work=$2
rm -rf "$work"
mkdir -p "$work/in" "$work/out"
cd "$work"
failures=0 passed=0
fail() { echo "FAIL $*"; failures=$((failures + 1)); }
pass() { echo "ok   $*"; passed=$((passed + 1)); }

# expect_io_failure NAME FOLDER-THAT-MUST-STAY-AS-IT-WAS COMMAND...
expect_io_failure() {
  local name=$1 folder=$2
  shift 2
  local before after output status
  before=$(ls -A "$folder" | sort | tr '\n' ' ')
  output=$("$@" 2>&1)
  status=$?
  after=$(ls -A "$folder" | sort | tr '\n' ' ')
  if [[ $status -ne 3 ]]; then
    fail "$name: exit status $status, want 3 (output: $output)"
  elif ! grep -qE "No space left on device|File too large" <<<"$output"; then
    fail "$name: the message does not say why: $output"
  elif grep -qiE "HDF5-DIAG|#[0-9]{3}:" <<<"$output"; then
    fail "$name: HDF5's raw error stack was printed: $output"
  elif [[ $before != "$after" ]]; then
    fail "$name: $folder held '$before' and now holds '$after'"
  else
    pass "$name"
  fi
}

"$kembed" -q make-table --out in/t.h5 --rows 20000 --dim 32 --seed 1 >/dev/null || exit 1
"$kembed" -q make-batch --out in/b.h5 --zipf 20000 --positions 200000 --dim 32 --seed 2 >/dev/null || exit 1

# ---- 1. a full disk --------------------------------------------------------------------
skipped=0
if [[ $(id -u) -eq 0 ]] && mount -t tmpfs -o size=1m kembed-test "$work/out" 2>/dev/null; then
  trap 'umount "$work/out" 2>/dev/null' EXIT
  expect_io_failure "disk full: make-table" out "$kembed" -q make-table --out out/t.h5 --rows 20000 --dim 32
  expect_io_failure "disk full: make-batch" out "$kembed" -q make-batch --out out/b.h5 --zipf 100 \
    --positions 200000 --dim 32
  expect_io_failure "disk full: backward's run file" out "$kembed" -q backward --table in/t.h5 --batch in/b.h5 \
    --out out/r.h5
  expect_io_failure "disk full: backward's checkpoint" out "$kembed" -q backward --table in/t.h5 \
    --batch in/b.h5 --out in/r.h5 --checkpoint out/ckpt.h5 --checkpoint-every 65536
  expect_io_failure "disk full: forward" out "$kembed" -q forward --table in/t.h5 --ids in/b.h5 --out out/y.h5
  expect_io_failure "disk full: import" out "$kembed" -q import in/t.h5 --dataset weight --out out/t2.h5
  umount "$work/out"
  trap - EXIT
else
  echo "skip disk full: mounting a tmpfs needs root"
  skipped=1
fi

# ---- 2. a file-size limit --------------------------------------------------------------
expect_io_failure "file-size limit: make-table" out bash -c "ulimit -f 500; exec $kembed -q make-table \
  --out out/t.h5 --rows 20000 --dim 32"
expect_io_failure "file-size limit: backward" out bash -c "ulimit -f 500; exec $kembed -q backward \
  --table in/t.h5 --batch in/b.h5 --out out/r.h5"

# ---- 3. temporaries of killed saves ------------------------------------------------------
host=$(hostname | tr './' '__')
sleep 0 & dead=$!
wait $dead
touch "out/.t.h5.tmp.$host.$dead.AbCdEf"   # a save by a process that has ended
touch "out/.t.h5.tmp.$host.1.AbCdEf"       # pid 1 runs: its file stays
touch "out/.t.h5.tmp.otherhost.$dead.AbCdEf"  # another host's: not ours to judge
for round in 1 2 3 4 5; do
  "$kembed" -q make-table --out out/t.h5 --rows 200000 --dim 64 >/dev/null 2>&1 &
  pid=$!
  sleep "0.$((RANDOM % 4))$((RANDOM % 10))"
  kill -9 "$pid" 2>/dev/null
  wait "$pid" 2>/dev/null
done
"$kembed" -q make-table --out out/t.h5 --rows 1000 --dim 8 >/dev/null || exit 1
left=$(ls -A out | grep -E '^\.t\.h5\.tmp\.' | sort | tr '\n' ' ')
want=$(printf '%s\n' ".t.h5.tmp.$host.1.AbCdEf" ".t.h5.tmp.otherhost.$dead.AbCdEf" | sort | tr '\n' ' ')
if [[ $left == "$want" ]]; then
  pass "killed saves' temporaries are removed by the next save; a live or foreign one stays"
else
  fail "temporaries after five killed saves and one that finished: '$left'"
fi

echo "write failures: $passed passed, $failures failed"
((failures == 0)) || exit 1
((skipped == 0)) || exit 77
exit 0
