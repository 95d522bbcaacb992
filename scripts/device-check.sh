#!/usr/bin/env bash
# On a machine with a GPU: builds kembed for it, runs the device test suite (every
# catalogue case, plan and mode on the device, compared bit for bit with the oracle
# and with a host backend in the same process), the bundled job on the device, and
# a short benchmark; prints a summary. About 5-10 minutes.
#
#   scripts/device-check.sh                 # finds the GPU (nvidia-smi, or rocminfo)
#
# CUDA: the machine's nvcc where it is CUDA 11 (or KEMBED_CUDA_ROOT), else the
# toolkit scripts/build-kokkos-cuda.sh fetches from Debian 12, whose compute_80 PTX
# newer GPUs compile at load time. HIP: Debian 12's hipcc (scripts/build-kokkos-hip.sh).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
log() { echo "device-check: $*" >&2; }
start=$(date +%s)

kind="" arch=""
if command -v nvidia-smi >/dev/null && cap=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n 1) && [[ -n $cap ]]; then
  kind=cuda
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
  # Kokkos 3.4.1's architectures; newer GPUs run the newest one's PTX.
  case $cap in
    7.0) arch=VOLTA70 ;; 7.2) arch=VOLTA72 ;; 7.5) arch=TURING75 ;;
    8.0) arch=AMPERE80 ;; 8.6 | 8.7 | 8.9) arch=AMPERE86 ;;
    *) arch=AMPERE80 ;;
  esac
  log "$gpu (compute capability $cap): Kokkos arch $arch"
  if [[ -z ${KEMBED_CUDA_ROOT:-} ]] && command -v nvcc >/dev/null && nvcc --version | grep -q "release 11\."; then
    export KEMBED_CUDA_ROOT=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc)")")")
    export KEMBED_CUDA_HOST_CXX=${KEMBED_CUDA_HOST_CXX:-g++}
    log "using this machine's CUDA 11 toolkit at $KEMBED_CUDA_ROOT"
  fi
  prefix=$(KEMBED_CUDA_ARCH=$arch "$here/scripts/build-kokkos-cuda.sh")
  preset=cuda
elif command -v rocminfo >/dev/null && gfx=$(rocminfo 2>/dev/null | grep -o -m1 'gfx[0-9a-f]*') && [[ -n $gfx ]]; then
  kind=hip
  case $gfx in
    gfx900) arch=VEGA900 ;; gfx906) arch=VEGA906 ;; gfx908) arch=VEGA908 ;;
    *) log "Kokkos 3.4.1 knows gfx900, gfx906 and gfx908, not $gfx"; exit 2 ;;
  esac
  log "AMD $gfx: Kokkos arch $arch"
  prefix=$(KEMBED_HIP_ARCH=$arch "$here/scripts/build-kokkos-hip.sh")
  export HCC_AMDGPU_TARGET=$gfx
  preset=hip
else
  log "no GPU found (nvidia-smi and rocminfo show none); the device suite needs one"
  exit 2
fi

# Needs what a host build needs (CMake, GoogleTest, HDF5, CLI11: scripts/setup.sh none
# installs them on Debian); CMake names whatever is missing.
build=$here/build/device-$kind
cxx=$([[ $kind == cuda ]] && echo "$prefix/bin/kembed-cxx" || echo hipcc)
log "configuring $build"
rpath=$([[ $kind == cuda ]] && echo "$(cat "$prefix/cuda-root")/lib64" || echo "")
cmake --preset "$preset" -B "$build" -DCMAKE_CXX_COMPILER="$cxx" -DKokkos_ROOT="$prefix" -DCMAKE_BUILD_RPATH="$rpath" \
  -DKEMBED_ENABLE_INSPECTOR=OFF >"$build.configure.log" 2>&1 || { tail -n 30 "$build.configure.log" >&2; exit 1; }
log "building the device suite, the program and the benchmark"
cmake --build "$build" -j"$(nproc)" --target kembed_device \
  >"$build.build.log" 2>&1 || { tail -n 40 "$build.build.log" >&2; exit 1; }

log "running ctest -L device"
status=0
ctest --test-dir "$build" -L device -j1 --output-on-failure 2>&1 | tee "$build.ctest.log" |
  grep -vE "^ +Start |Test +#[0-9]+: .* Passed" || status=1
grep -q "100% tests passed" "$build.ctest.log" || status=1
log "benchmark (kembed-device-bench --quick)"
"$build/bench/kembed-device-bench" --quick | tee "$build.bench.log" || status=1

torch_python=${KEMBED_TORCH_PYTHON:-python3}
if "$torch_python" -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
  log "torch's own forward and embedding_dense_backward on the same shapes"
  "$torch_python" "$here/scripts/bench_torch_device.py" | tee "$build.torch.log" || true
else
  log "no Python with torch and a GPU (set KEMBED_TORCH_PYTHON): torch's device timings left out"
fi

echo
echo "== device check: $kind ($arch), $(($(date +%s) - start)) s =="
grep -E "tests passed|tests failed" "$build.ctest.log" || echo "ctest printed no summary"
grep -E "^V = |forward|backward|SHA-256|!!" "$build.bench.log" || true
[[ -f $build.torch.log ]] && grep -E "^torch|^V = |forward|backward" "$build.torch.log" || true
exit $status
