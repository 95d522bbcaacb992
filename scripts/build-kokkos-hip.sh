#!/usr/bin/env bash
# Debian 12's HIP compiler (hipcc 5.2.3, ROCm 5.2) and Kokkos 3.4.1 for
# Kokkos::Experimental::HIP, built from the trilinos source package into a cache
# outside the repo. No GPU is needed: this compiles and links. Prints the Kokkos
# prefix; a second run returns at once. KEMBED_HIP_ARCH picks Kokkos' GPU
# architecture (default VEGA908, MI100; Kokkos 3.4.1 knows VEGA900, 906 and 908).
#
#   scripts/build-kokkos-hip.sh
set -euo pipefail
source "$(dirname "$0")/lib/kokkos.sh"
log() { echo "build-kokkos-hip: $*" >&2; }

arch=${KEMBED_HIP_ARCH:-VEGA908}
prefix=$kembed_cache/kokkos-3.4.1-hip-$(tr '[:upper:]' '[:lower:]' <<<"$arch")

if ! command -v hipcc >/dev/null || ! dpkg-query -W -f='${Status}' libamdhip64-dev 2>/dev/null | grep -q "ok installed"; then
  [[ $(id -u) -eq 0 ]] || { log "run as root: apt-get install -y hipcc libamdhip64-dev"; exit 1; }
  log "installing hipcc and libamdhip64-dev (Debian 12 main, 66 MB)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends hipcc libamdhip64-dev >/dev/null
fi

if [[ ! -f $prefix/.kembed-complete ]]; then
  build_kokkos "$prefix" "HIP ($arch) and Serial (under a minute on 2 cores)" \
    -DCMAKE_CXX_COMPILER=hipcc -DBUILD_SHARED_LIBS=OFF \
    -DKokkos_ENABLE_SERIAL=ON -DKokkos_ENABLE_HIP=ON -DKokkos_ARCH_"$arch"=ON
fi
echo "$prefix"
