#!/usr/bin/env bash
# expect.sh STATUS PATTERN command [args...]
# Runs the command; passes when it exits with STATUS and its output (stdout and
# stderr together, lines joined by spaces, so ^ is the start of all output)
# matches the extended regular expression PATTERN.
set -u
want_status=$1 pattern=$2
shift 2
output=$("$@" 2>&1)
status=$?
if [[ $status -ne $want_status ]]; then
  printf '%s\n' "$output"
  echo "expect.sh: exit status $status, want $want_status: $*" >&2
  exit 1
fi
if ! tr '\n' ' ' <<<"$output" | grep -Eq -- "$pattern"; then
  printf '%s\n' "$output"
  echo "expect.sh: output does not match /$pattern/: $*" >&2
  exit 1
fi
echo "ok: exit $status and /$pattern/"
