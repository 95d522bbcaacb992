#!/usr/bin/env bash
# The README's second command: set up and build both variants (Serial and OpenMP),
# then run every test of each through CTest. The OpenMP tests run at 1-4 threads.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$here/scripts/setup.sh" all
cd "$here"
passed=0 failed=0 status=0
for preset in serial openmp; do
  echo "== tests: $preset =="
  log=build/$preset.ctest.log
  ctest --preset "$preset" -j"$(nproc)" 2>&1 | tee "$log" | grep -vE "^ +Start |Test +#[0-9]+: .* Passed" || true
  line=$(grep -E "tests passed, [0-9]+ tests failed out of [0-9]+" "$log" || true)
  if [[ -z $line ]]; then
    echo "test.sh: ctest ($preset) ran no test or did not finish" >&2
    status=1
    continue
  fi
  total=$(sed -E 's/.* out of ([0-9]+).*/\1/' <<<"$line")
  bad=$(sed -E 's/.* ([0-9]+) tests failed.*/\1/' <<<"$line")
  passed=$((passed + total - bad))
  failed=$((failed + bad))
  ((bad == 0)) || status=1
done
echo "kembed: $passed passed, $failed failed"
exit $status
