#!/usr/bin/env bash
# A CUDA toolchain and Kokkos 3.4.1 for Kokkos::Cuda, from Debian 12's archive only,
# into a cache outside the repo (no GPU is needed: this compiles and links):
#   - nvcc 11.8 from Debian's non-free nvidia-cuda-toolkit and nvidia-cuda-dev, fetched
#     with a private apt configuration and unpacked (not installed) into one CUDA root;
#   - g++-11 as nvcc's host compiler (CUDA 11.8 refuses g++ 12), from Debian main;
#   - Kokkos 3.4.1 (CUDA + Serial, lambdas on) from the trilinos source package.
# Prints the Kokkos prefix; its bin/kembed-cxx is the C++ compiler to build kembed
# with (Kokkos' nvcc_wrapper with this toolkit and host compiler, whatever the
# caller's PATH), and its cuda-root names the toolkit. A second run returns at once.
#   KEMBED_CUDA_ARCH   Kokkos' GPU architecture (default AMPERE80, whose PTX newer
#                      GPUs compile at load time; Kokkos 3.4.1 knows no Hopper)
#   KEMBED_CUDA_ROOT   a CUDA 11.x toolkit of the machine's own, instead of Debian's
#   KEMBED_CUDA_HOST_CXX  nvcc's host compiler (default g++-11)
#
#   scripts/build-kokkos-cuda.sh
set -euo pipefail
source "$(dirname "$0")/lib/kokkos.sh"
log() { echo "build-kokkos-cuda: $*" >&2; }

arch=${KEMBED_CUDA_ARCH:-AMPERE80}
host_cxx=${KEMBED_CUDA_HOST_CXX:-g++-11}
cuda=${KEMBED_CUDA_ROOT:-$kembed_cache/cuda-11.8}
suffix=$(tr '[:upper:]' '[:lower:]' <<<"$arch")
[[ -z ${KEMBED_CUDA_ROOT:-} ]] || suffix+=-$(basename "$(realpath "$cuda")")
prefix=$kembed_cache/kokkos-3.4.1-cuda-$suffix

if [[ $host_cxx == g++-11 ]] && ! command -v g++-11 >/dev/null; then
  [[ $(id -u) -eq 0 ]] || { log "nvcc 11.8 needs g++-11; run as root: apt-get install -y g++-11"; exit 1; }
  log "installing g++-11 (nvcc 11.8's newest host compiler)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends g++-11 >/dev/null
fi

if [[ -z ${KEMBED_CUDA_ROOT:-} && ! -f $cuda/.kembed-complete ]]; then
  work=$kembed_cache/cuda-download
  conf=$(private_apt "$work/apt" deb "bookworm non-free")
  rm -rf "$work/debs" "$work/root" "$cuda" && mkdir -p "$work/debs" "$work/root"
  log "downloading nvidia-cuda-toolkit 11.8 and nvidia-cuda-dev from Debian's non-free (0.87 GB)"
  (cd "$work/debs" && APT_CONFIG=$conf apt-get download -q nvidia-cuda-toolkit nvidia-cuda-dev libcudart11.0 libnvvm4 >/dev/null)
  log "unpacking"
  for deb in "$work"/debs/{nvidia-cuda-toolkit,libcudart11.0,libnvvm4}_*.deb; do dpkg-deb -x "$deb" "$work/root"; done
  # The dev package's headers and runtime libraries are all we need of its 774 MB.
  dpkg-deb --fsys-tarfile "$work"/debs/nvidia-cuda-dev_*.deb | tar -x -C "$work/root" --wildcards \
    './usr/include/*' './usr/lib/x86_64-linux-gnu/libcudart*' './usr/lib/x86_64-linux-gnu/libcudadevrt.a' \
    './usr/lib/x86_64-linux-gnu/stubs/libcuda.so'
  rm -rf "$work/debs"
  # One CUDA root as NVIDIA lays it out. nvcc reads nvcc.profile beside its own
  # path, so it is a copy, with a profile that points at this root.
  root=$work/root
  mkdir -p "$cuda/bin" "$cuda/nvvm/bin"
  cp -a "$root"/usr/lib/nvidia-cuda-toolkit/bin/nvcc "$cuda/bin/"
  cp -a "$root"/usr/lib/nvidia-cuda-toolkit/bin/crt "$cuda/bin/"
  for tool in "$root"/usr/bin/*; do
    [[ $(basename "$tool") == nvcc ]] || cp -aL "$tool" "$cuda/bin/" 2>/dev/null || true
  done
  cp -aL "$root"/usr/lib/nvidia-cuda-toolkit/bin/cicc "$cuda/nvvm/bin/" 2>/dev/null ||
    cp -aL "$root"/usr/lib/nvidia-cuda-toolkit/libnvvm/bin/cicc "$cuda/nvvm/bin/" 2>/dev/null || true
  mv "$root/usr/lib/nvidia-cuda-toolkit/libdevice" "$cuda/nvvm/libdevice"
  mv "$root/usr/include" "$cuda/include"
  mv "$root/usr/lib/x86_64-linux-gnu" "$cuda/lib64"
  cat >"$cuda/bin/nvcc.profile" <<'PROFILE'
TOP = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
LD_LIBRARY_PATH += $(TOP)/lib64:
PATH += $(TOP)/nvvm/bin:$(_HERE_):
INCLUDES += "-I$(TOP)/include" $(_SPACE_)
LIBRARIES =+ $(_SPACE_) "-L$(TOP)/lib64/stubs" "-L$(TOP)/lib64"
PROFILE
  rm -rf "$work"
  [[ -x $cuda/nvvm/bin/cicc ]] || { log "cicc was not found in the toolkit package"; exit 1; }
  "$cuda/bin/nvcc" --version | grep -q "release 11.8" || { log "the unpacked nvcc does not run"; exit 1; }
  touch "$cuda/.kembed-complete"
fi

# Position-independent (.kembed-pic marks it): the Python module, a shared object, links it.
if [[ ! -f $prefix/.kembed-complete || ! -f $prefix/.kembed-pic || ! -x $prefix/bin/kembed-cxx ]]; then
  src=$(kokkos_source)
  # The compiler for Kokkos and kembed alike: Kokkos' nvcc_wrapper, told which nvcc
  # and host compiler to use, so builds do not depend on the caller's environment.
  mkdir -p "$kembed_cache/bin"
  cxx=$kembed_cache/bin/kembed-cxx-cuda-$suffix
  cat >"$cxx" <<WRAPPER
#!/bin/sh
# kembed's C++ compiler for Kokkos::Cuda (written by scripts/build-kokkos-cuda.sh)
PATH="$cuda/bin:\$PATH" NVCC_WRAPPER_DEFAULT_COMPILER="$host_cxx" exec "$src/bin/nvcc_wrapper" "\$@"
WRAPPER
  chmod +x "$cxx"
  build_kokkos "$prefix" "CUDA ($arch) and Serial (1-2 minutes on 2 cores)" \
    -DCMAKE_CXX_COMPILER="$cxx" -DBUILD_SHARED_LIBS=OFF \
    -DKokkos_ENABLE_SERIAL=ON -DKokkos_ENABLE_CUDA=ON -DKokkos_ENABLE_CUDA_LAMBDA=ON \
    -DKokkos_ARCH_"$arch"=ON -DCUDAToolkit_ROOT="$cuda" -DCMAKE_POSITION_INDEPENDENT_CODE=ON
  mkdir -p "$prefix/bin"
  sed "s|$src/bin/nvcc_wrapper|$prefix/bin/nvcc_wrapper|" "$cxx" >"$prefix/bin/kembed-cxx"
  chmod +x "$prefix/bin/kembed-cxx"
  echo "$cuda" >"$prefix/cuda-root"  # for the programs' run path (libcudart)
  rm -f "$cxx"
  touch "$prefix/.kembed-pic"
fi
echo "$prefix"
