#!/usr/bin/env bash
# Builds Kokkos 3.4.1 with the OpenMP (and Serial) backends from Debian's own
# trilinos source package, into a cache outside the repo. Debian ships Kokkos
# Serial-only; this gives kembed a parallel host backend without leaving the
# distribution's sources. A second run finds the install and returns at once.
#
#   scripts/build-kokkos-openmp.sh            # prints the install prefix
#   KEMBED_CACHE=/some/dir scripts/...        # cache elsewhere
set -euo pipefail

cache=${KEMBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kembed}
prefix=$cache/kokkos-3.4.1-openmp
stamp=$prefix/.kembed-complete

if [[ -f $stamp ]]; then
  echo "$prefix"
  exit 0
fi

log() { echo "build-kokkos-openmp: $*" >&2; }
mkdir -p "$cache/src"
cd "$cache/src"

# The trilinos source package; only packages/kokkos is unpacked from it.
if ! ls trilinos_*.orig.tar.* >/dev/null 2>&1; then
  if ! grep -rqs '^Types:.*deb-src' /etc/apt/sources.list.d/ && ! grep -rqs '^deb-src' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null; then
    log "adding a deb-src entry for bookworm main"
    cat > /etc/apt/sources.list.d/kembed-deb-src.sources <<'SRC'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    apt-get update -qq
  fi
  command -v dpkg-source >/dev/null || apt-get install -y -qq dpkg-dev >/dev/null
  log "downloading Debian's trilinos source package"
  # root downloads straight into the cache; apt's _apt sandbox user cannot write there
  apt-get -o APT::Sandbox::User=root source --download-only trilinos >/dev/null
fi

tarball=$(ls trilinos_*.orig.tar.* | head -n 1)
if [[ ! -d kokkos ]]; then
  log "unpacking packages/kokkos from $tarball"
  rm -rf unpack && mkdir unpack
  tar -xf "$tarball" -C unpack --wildcards '*/packages/kokkos/*'
  mv unpack/*/packages/kokkos kokkos
  rm -rf unpack
fi

version=$(awk '/^set\(Kokkos_VERSION_(MAJOR|MINOR|PATCH)/{gsub(/\)/,"",$2); printf "%s.", $2}' kokkos/CMakeLists.txt | sed 's/\.$//')
log "configuring Kokkos ${version:-?} with OpenMP and Serial"
rm -rf build && mkdir build
cmake -S kokkos -B build -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_CXX_STANDARD=17 \
  -DCMAKE_CXX_EXTENSIONS=OFF -DBUILD_SHARED_LIBS=ON \
  -DKokkos_ENABLE_OPENMP=ON -DKokkos_ENABLE_SERIAL=ON \
  -DKokkos_ENABLE_TESTS=OFF -DKokkos_ENABLE_EXAMPLES=OFF >build.log 2>&1 \
  || { tail -n 30 build.log >&2; exit 1; }
log "building (about half a minute on 2 cores)"
cmake --build build -j"$(nproc)" >>build.log 2>&1 || { tail -n 30 build.log >&2; exit 1; }
cmake --install build >>build.log 2>&1 || { tail -n 30 build.log >&2; exit 1; }
rm -rf build
touch "$stamp"
echo "$prefix"
