#!/usr/bin/env bash
# The README's MPI example is mpi/example/sharded_backward.cpp, character for
# character, and it runs: row 7 gets 2 terms of 1.0 from each of 3 ranks.
#   readme_example.sh README EXAMPLE_SOURCE EXAMPLE_BINARY MPIEXEC
set -euo pipefail
readme=$1 source=$2 binary=$3 mpiexec=$4
shown=$(awk '/^```cpp$/ { block = ""; inside = 1; next } /^```$/ && inside { if (block ~ /sharded_embedding.hpp/) print block; inside = 0; next } inside { block = block $0 "\n" }' "$readme")
if [[ "$shown" != "$(cat "$source")" ]]; then
  echo "readme_example: README's MPI example differs from $source:" >&2
  diff <(printf '%s\n' "$shown") "$source" >&2 || true
  exit 1
fi
out=$(KOKKOS_NUM_THREADS=1 "$mpiexec" -n 3 --oversubscribe "$binary" 2>/dev/null)
grep -q "grad\[7\]\[0\] = 6 on rank 0" <<<"$out" || { echo "readme_example: printed: $out" >&2; exit 1; }
echo "readme_example: the README's example is the file, and it runs: $out"
