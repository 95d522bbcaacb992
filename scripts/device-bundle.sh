#!/usr/bin/env bash
# A self-contained GPU check, built here and run on a GPU node that has a driver but
# no network, no Debian archive, no compiler and perhaps no root: the device suite,
# the bundled job on the GPU and the device benchmark, with every shared library
# they load except the C library and the GPU driver, the data they read, and run.sh.
#
#   scripts/device-bundle.sh [cuda|hip] [FOLDER]     (default: cuda build/device-bundle)
#   copy FOLDER.tar.gz to the node, then there:  tar xzf FOLDER.tar.gz && FOLDER/run.sh OUT
#   (OUT: summary and logs)
#
# Builds (or reuses) build/cuda or build/hip through scripts/setup.sh: nvcc 11.8 and
# Kokkos 3.4.1 from Debian 12, sm_80 code plus compute_80 PTX, which the driver
# compiles for newer GPUs (sm_90) as the programs load.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
kind=${1:-cuda}
out=${2:-$here/build/device-bundle}
log() { echo "device-bundle: $*" >&2; }
case $kind in
  cuda | hip) ;;
  *) log "unknown kind '$kind': cuda or hip"; exit 2 ;;
esac
build=$here/build/$kind
"$here/scripts/setup.sh" "$kind"

# The programs, stripped of their symbol tables (the device code stays).
programs=(tests/kembed_tests_device cli/kembed bench/kembed-device-bench)
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/data/kjv" "$out/data/tests"
for p in "${programs[@]}"; do
  [[ -x $build/$p ]] || { log "$build/$p was not built"; exit 1; }
  strip --strip-unneeded -o "$out/bin/$(basename "$p")" "$build/$p"
done

# Their shared libraries as ldd resolves them here, each copied once, except the C
# library (glibc's own: the node's must be at least as new as the one named below)
# and the GPU driver, which must be the node's.
system_lib='^(linux-vdso|ld-linux-x86-64|libc|libm|libpthread|libdl|librt|libresolv|libutil)\.so'
driver_lib='^(libcuda|libnvidia-|libamdhip64|libhsa-runtime64|libamd_comgr|libdrm)'
for p in "$out"/bin/*; do
  ldd "$p" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r name path; do
  if grep -qE "$system_lib" <<<"$name" || grep -qE "$driver_lib" <<<"$name"; then continue; fi
  [[ -e $out/lib/$name ]] || cp -L "$path" "$out/lib/$name"
done
chmod u+w "$out"/lib/*
strip --strip-unneeded "$out"/lib/* 2>/dev/null || true

# The data: the bundled job and the tests' stored torch results.
cp "$here/datasets/kjv/table.h5" "$here/datasets/kjv/batch.h5" "$out/data/kjv/"
cp "$here"/tests/data/*.txt "$out/data/tests/"
# The newest glibc symbol version any file needs: the node's glibc must have it.
glibc=$(for f in "$out"/bin/* "$out"/lib/*; do objdump -T "$f" 2>/dev/null; done |
  grep -oE 'GLIBC_[0-9]+\.[0-9]+' | sort -t. -k2 -n -u | tail -n 1 | sed 's/GLIBC_//')
kjv_sha=$(sed -n 's/^set(kjv_torch_sha256 \([0-9a-f]\{64\}\))$/\1/p' "$here/tests/CMakeLists.txt")
[[ ${#kjv_sha} -eq 64 ]] || { log "the bundled job's SHA-256 is not in tests/CMakeLists.txt"; exit 1; }
{
  echo "kind=$kind"
  echo "glibc=$glibc"
  echo "kjv_sha256=$kjv_sha"
  echo "built='$(date -u +%Y-%m-%dT%H:%M:%SZ) from $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo unknown)'"
} >"$out/bundle.env"
cp "$here/scripts/device-bundle-run.sh" "$out/run.sh"
chmod +x "$out/run.sh"
# The folder packed, which is what travels to the node (gzip: every node can unpack it).
tar -C "$(dirname "$out")" -czf "$out.tar.gz" "$(basename "$out")"
size=$(du -sk "$out" | cut -f1) packed=$(du -sk "$out.tar.gz" | cut -f1)
log "$out: $(ls "$out/bin" | wc -l) programs, $(ls "$out/lib" | wc -l) libraries, $((size / 1024)) MiB," \
  "$((packed / 1024)) MiB packed in $out.tar.gz (needs glibc >= $glibc)"
echo "$out"
