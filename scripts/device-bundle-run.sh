#!/usr/bin/env bash
# run.sh of a kembed device bundle (scripts/device-bundle.sh): on a GPU node, with
# no network, root or compiler, runs the device suite (every catalogue case, plan
# and mode on the GPU against the oracle and a host backend in one process), the
# bundled job on the GPU and on the host (each must give torch's CPU SHA-256), and
# the device benchmark; writes OUT/summary.txt and each step's log. About 5 minutes
# at most. Exit 0: all passed; 1: a step failed; 3: no GPU; 4: the driver or the C
# library is too old for this bundle.
#
#   ./run.sh OUT
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
out=${1:-}
[[ -n $out ]] || { echo "usage: $0 OUT (a folder for the summary and the logs)" >&2; exit 2; }
mkdir -p "$out" && out=$(cd "$out" && pwd)
# shellcheck disable=SC1091
source "$here/bundle.env"
export LD_LIBRARY_PATH=$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export KEMBED_TEST_DATA_DIR=$here/data/tests
start=$(date +%s)
summary=$out/summary.txt
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }
stop() {  # stop STATUS WHY
  say "device bundle: $2"
  exit "$1"
}

say "kembed device bundle ($kind, $built) on $(uname -n), $(date -u +%Y-%m-%dT%H:%M:%SZ)"
have=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
if [[ -n $have ]] && [[ $(printf '%s\n%s\n' "$glibc" "$have" | sort -t. -k1,1n -k2,2n | head -n 1) != "$glibc" ]]; then
  stop 4 "this machine's C library is glibc $have; the bundle's programs need $glibc or newer"
fi

# The GPU and its driver, before anything needs them.
if [[ $kind == cuda ]]; then
  driver_lib=$( (ldconfig -p 2>/dev/null | grep -m1 -o '/[^ ]*libcuda\.so\.1$') ||
    ls /usr/lib/x86_64-linux-gnu/libcuda.so.1 /usr/lib64/libcuda.so.1 /usr/local/nvidia/lib64/libcuda.so.1 2>/dev/null |
    head -n 1)
  if ! command -v nvidia-smi >/dev/null && [[ -z $driver_lib ]]; then
    stop 3 "no GPU: this machine has no NVIDIA driver (no nvidia-smi, no libcuda.so.1)"
  fi
  if command -v nvidia-smi >/dev/null; then
    gpus=$(nvidia-smi --query-gpu=name,driver_version,compute_cap --format=csv,noheader 2>&1) ||
      stop 3 "no GPU: nvidia-smi fails: $gpus"
    [[ -n $gpus ]] || stop 3 "no GPU: nvidia-smi lists none"
    say "GPU: $(head -n 1 <<<"$gpus")"
    driver=$(head -n 1 <<<"$gpus" | awk -F', ' '{print $2}')
    # CUDA 11.8's runtime and the PTX it carries (ISA 7.8) need driver 520 or newer.
    if [[ ${driver%%.*} =~ ^[0-9]+$ ]] && ((${driver%%.*} < 520)); then
      stop 4 "the NVIDIA driver is $driver; this bundle (CUDA 11.8) needs 520 or newer"
    fi
  fi
else
  command -v rocminfo >/dev/null && rocminfo 2>/dev/null | grep -q -m1 'gfx[0-9a-f]' ||
    stop 3 "no GPU: rocminfo finds no AMD GPU"
  say "GPU: $(rocminfo 2>/dev/null | grep -o -m1 'gfx[0-9a-f]*')"
fi

status=0
step() {  # step NAME SECONDS COMMAND...: its output to OUT/NAME.log
  local name=$1 limit=$2
  shift 2
  local t0=$(date +%s) rc=0
  timeout "$limit" "$@" >"$out/$name.log" 2>&1 || rc=$?
  ((rc == 0)) || status=1
  say "$name: exit $rc in $(($(date +%s) - t0)) s$([[ $rc -eq 124 ]] && echo " (stopped at its $limit s limit)")"
  return $rc
}

# 1. The device suite.
step device-suite 150 "$here/bin/kembed_tests_device" --gtest_brief=1
say "  $(grep -E '^\[  PASSED  \]|^\[  FAILED  \] [0-9]+ test' "$out/device-suite.log" | tr '\n' ' ')"
grep -E '^\[  FAILED  \] [^0-9]' "$out/device-suite.log" | head -n 20 | sed 's/^/  /' | tee -a "$summary"

# 2. The bundled job on the GPU (the default backend) and on the host: torch's SHA-256.
for backend in default serial; do
  step "kjv-$backend" 30 "$here/bin/kembed" --backend "$backend" backward --table "$here/data/kjv/table.h5" \
    --batch "$here/data/kjv/batch.h5" --out "$out/kjv-$backend.h5" --microbatch 1000
  sha=$(grep -oE 'SHA-256 [0-9a-f]{64}' "$out/kjv-$backend.log" | head -n 1 | cut -d' ' -f2)
  if [[ $sha == "$kjv_sha256" ]]; then
    say "  gradient SHA-256 $sha: torch's CPU backward's"
  else
    say "  gradient SHA-256 ${sha:-(none)}, want $kjv_sha256"
    status=1
  fi
done

# 3. The benchmark: forward and backward against the device's own copy kernel.
step device-bench 90 "$here/bin/kembed-device-bench" --quick
grep -E "^V = |forward|backward|SHA-256|!!" "$out/device-bench.log" | sed 's/^/  /' | tee -a "$summary"

say "device bundle: $([[ $status -eq 0 ]] && echo passed || echo FAILED) in $(($(date +%s) - start)) s; logs in $out"
exit $status
