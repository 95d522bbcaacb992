#!/usr/bin/env bash
# What a machine without a GPU can check of a device bundle (scripts/device-bundle.sh):
# its packed size (at most 60 MiB), that every program and library in it resolves every
# library it needs from the bundle or the system's C library (the GPU driver aside),
# and that run.sh stops with "no GPU" and a non-zero status before it needs one.
#   device_bundle_check.sh BUNDLE
set -uo pipefail
bundle=$(cd "$1" && pwd)
passed=0 failed=0
check() {  # check NAME CONDITION-STATUS DETAIL
  if [[ $2 -eq 0 ]]; then
    passed=$((passed + 1))
    echo "ok   $1"
  else
    failed=$((failed + 1))
    echo "FAIL $1: $3"
  fi
}

# What travels is the packed bundle: a device call carries 64 MiB in all.
packed=$(du -sk "$bundle.tar.gz" 2>/dev/null | cut -f1)
((${packed:-999999} <= 60 * 1024))
check "the packed bundle is at most 60 MiB ($((${packed:-0} / 1024)) MiB; $(($(du -sk "$bundle" | cut -f1) / 1024)) MiB unpacked)" \
  $? "${packed:-no} KiB in $bundle.tar.gz"
tar -tzf "$bundle.tar.gz" >/dev/null 2>&1
check "the packed bundle unpacks" $? "tar -tzf $bundle.tar.gz failed"

glibc='^(linux-vdso|ld-linux-x86-64|libc|libm|libpthread|libdl|librt|libresolv|libutil)\.so'
driver='^(libcuda|libnvidia-|libamdhip64|libhsa-runtime64|libamd_comgr|libdrm)'
for f in "$bundle"/bin/* "$bundle"/lib/*; do
  bad=$(LD_LIBRARY_PATH=$bundle/lib ldd "$f" 2>&1 | awk -v lib="$bundle/lib/" -v glibc="$glibc" -v driver="$driver" '
    /not a dynamic executable|statically linked/ { next }
    $2 == "=>" && $3 == "not" { if ($1 !~ driver) print $1 " not found"; next }
    $2 == "=>" && index($3, lib) != 1 && $1 !~ glibc && $1 !~ driver { print $1 " from " $3 }')
  [[ -z $bad ]]
  check "$(basename "$f") loads only the bundle's libraries and the C library" $? "$(tr '\n' ';' <<<"$bad")"
done

# The libraries load for real, not only by ldd's reckoning: a program that needs no
# GPU (reading a file's header) runs from the bundle.
out=$(LD_LIBRARY_PATH=$bundle/lib "$bundle/bin/kembed" info "$bundle/data/kjv/table.h5" 2>&1)
grep -q "kembed-embedding-1" <<<"$out"
check "the bundle's kembed runs here (kembed info on its table)" $? "$out"

work=$(mktemp -d)
out=$("$bundle/run.sh" "$work/out" 2>&1)
status=$?
[[ $status -ne 0 ]] && grep -q "no GPU" <<<"$out"
check "run.sh on a machine without a GPU says so (exit $status)" $? "$out"
[[ -s $work/out/summary.txt ]]
check "run.sh wrote its summary" $? "no $work/out/summary.txt"
rm -rf "$work"
echo "device bundle: $passed passed, $failed failed"
((failed == 0))
