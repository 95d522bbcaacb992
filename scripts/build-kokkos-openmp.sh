#!/usr/bin/env bash
# Builds Kokkos 3.4.1 with the OpenMP (and Serial) backends from Debian's own
# trilinos source package, into a cache outside the repo. Debian ships Kokkos
# Serial-only; this gives kembed a parallel host backend without leaving the
# distribution's sources. A second run finds the install and returns at once.
#
#   scripts/build-kokkos-openmp.sh            # prints the install prefix
#   KEMBED_CACHE=/some/dir scripts/...        # cache elsewhere
set -euo pipefail
source "$(dirname "$0")/lib/kokkos.sh"

prefix=$kembed_cache/kokkos-3.4.1-openmp
if [[ ! -f $prefix/.kembed-complete ]]; then
  build_kokkos "$prefix" "OpenMP and Serial (about half a minute on 2 cores)" \
    -DBUILD_SHARED_LIBS=ON -DKokkos_ENABLE_OPENMP=ON -DKokkos_ENABLE_SERIAL=ON
fi
echo "$prefix"
