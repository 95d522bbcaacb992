#!/usr/bin/env bash
# Installs what kembed needs on Debian 12 and builds it, both ways:
#   build/serial  against Debian's Kokkos 3.4.1 (Serial backend)
#   build/openmp  against Kokkos 3.4.1 with OpenMP, built from Debian's sources
#                 into ~/.cache/kembed by scripts/build-kokkos-openmp.sh
# and a Python venv with h5py and numpy (from PyPI) in ~/.cache/kembed/venv for the
# HDF5 interoperability test.
# Safe to re-run: installed packages, the cached Kokkos and the builds are reused.
#
#   scripts/setup.sh [serial|openmp|all]     (default: all)
#   scripts/setup.sh asan|fuzz               the sanitizer builds (CI)
#   scripts/setup.sh cuda|hip                what runs on a GPU (target kembed_device), compiled and linked
#                                            (build/cuda, build/hip; runs on a GPU node)
#   scripts/setup.sh python                  the Python package (kembed, kembed.torch) with
#                                            torch's CPU operators, into the venv
#   scripts/setup.sh none                    packages and the venv only
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
variants=${1:-all}  # serial, openmp, all, asan, fuzz, cuda, hip, python or none
log() { echo "setup: $*" >&2; }
case $variants in
  serial | openmp | all | asan | fuzz | cuda | hip | python | none) ;;
  *) log "unknown variant '$variants': serial, openmp, all, asan, fuzz, cuda, hip, python or none"; exit 2 ;;
esac

packages=(cmake make g++ libtrilinos-kokkos-dev libgtest-dev libhdf5-dev hdf5-tools libcli11-dev
          qt6-base-dev libqcustomplot-dev libgl-dev fonts-dejavu-core xvfb xauth dpkg-dev xz-utils
          libopenmpi-dev openmpi-bin libhdf5-openmpi-dev libssl-dev)
# The sanitizer builds: GCC's runtimes come with g++; libFuzzer with clang's.
[[ $variants == fuzz ]] && packages+=(clang libclang-rt-14-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  if [[ $(id -u) -ne 0 ]]; then
    log "missing packages: ${missing[*]}; run as root: apt-get install -y ${missing[*]}"
    exit 1
  fi
  log "installing ${missing[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

cache=${KEMBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kembed}
venv=$cache/venv
if [[ ! -x $venv/bin/python ]] || ! "$venv/bin/python" -c "import h5py, numpy" 2>/dev/null; then
  log "making a Python venv with h5py and numpy in $venv"
  rm -rf "$venv"
  if ! python3 -m venv "$venv" 2>/dev/null; then
    [[ $(id -u) -eq 0 ]] || { log "python3 -m venv failed; run as root: apt-get install -y python3-venv"; exit 1; }
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3-venv >/dev/null
    python3 -m venv "$venv"
  fi
  "$venv/bin/pip" install -q --disable-pip-version-check h5py numpy
fi

jobs=$(nproc)
configure_and_build() {  # preset, extra cmake arguments...
  local preset=$1 target=()
  shift
  # A device build compiles what runs on a device; host-only targets add nothing there.
  [[ $preset == cuda || $preset == hip ]] && target=(--target kembed_device)
  log "configuring and building build/$preset ${target[*]}"
  cmake --preset "$preset" "$@" >"$here/build/$preset.configure.log" 2>&1 \
    || { cat "$here/build/$preset.configure.log" >&2; exit 1; }
  if ! cmake --build --preset "$preset" -j"$jobs" "${target[@]}" >"$here/build/$preset.build.log" 2>&1; then
    tail -n 60 "$here/build/$preset.build.log" >&2
    log "build/$preset failed; the whole log is build/$preset.build.log"
    exit 1
  fi
}

cd "$here"
mkdir -p build
if [[ $variants == all || $variants == serial ]]; then
  configure_and_build serial -DKEMBED_PYTHON="$venv/bin/python"
fi
if [[ $variants == asan ]]; then
  configure_and_build asan -DKEMBED_PYTHON="$venv/bin/python"
fi
if [[ $variants == fuzz ]]; then
  configure_and_build fuzz
fi
# A device build compiles the Python module too, where the venv has nanobind (setup.sh python).
python_module=()
if [[ $variants == cuda ]] && "$venv/bin/python" -c "import nanobind" 2>/dev/null; then
  python_module=(-DKEMBED_ENABLE_PYTHON=ON -DPython_EXECUTABLE="$venv/bin/python")
fi
if [[ $variants == cuda ]]; then
  kokkos=$("$here/scripts/build-kokkos-cuda.sh")
  ((${#python_module[@]})) || log "no nanobind in $venv: build/cuda leaves the Python module out (scripts/setup.sh python first)"
  configure_and_build cuda -DKokkos_ROOT="$kokkos" -DCMAKE_CXX_COMPILER="$kokkos/bin/kembed-cxx" \
    -DCMAKE_BUILD_RPATH="$(cat "$kokkos/cuda-root")/lib64" -DKEMBED_PYTHON="$venv/bin/python" "${python_module[@]}"
fi
if [[ $variants == hip ]]; then
  kokkos=$("$here/scripts/build-kokkos-hip.sh")
  configure_and_build hip -DKokkos_ROOT="$kokkos" -DKEMBED_PYTHON="$venv/bin/python"
fi
if [[ $variants == all || $variants == openmp ]]; then
  kokkos=$("$here/scripts/build-kokkos-openmp.sh")
  configure_and_build openmp -DKokkos_ROOT="$kokkos" -DKEMBED_PYTHON="$venv/bin/python"
fi
if [[ $variants == python ]]; then
  "$here/scripts/setup-python.sh" "$venv" "$("$here/scripts/build-kokkos-openmp.sh")"
fi
