#!/bin/sh
# h5dump (Debian's hdf5-tools) shows a kembed table's structure: format tag,
# settings, and the checksummed, chunked weight dataset.
set -eu
probe=$1 work=$2
mkdir -p "$work"
"$probe" save-table "$work/dump.h5" 100 8 1 deflate
out=$(h5dump -p -A "$work/dump.h5")
for want in '"kembed-embedding-1"' 'DATASET "weight"' 'H5T_IEEE_F32LE' 'FLETCHER32' 'DEFLATE' 'CHUNKED' 'ATTRIBUTE "padding_idx"'; do
  if ! printf '%s\n' "$out" | grep -qF -- "$want"; then
    printf '%s\n' "$out"
    echo "h5dump_check: '$want' not in h5dump's output" >&2
    exit 1
  fi
done
echo "h5dump shows the format tag, settings, chunking, deflate and Fletcher32"
