#!/usr/bin/env bash
# The README's second command: set up and build both variants (Serial and OpenMP),
# then run every test of each through CTest (the OpenMP tests at 1-4 threads), then
# install the Python package into the venv and run its pytest suite (python/tests).
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
echo "== tests: python =="
venv=${KEMBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kembed}/venv
if "$here/scripts/setup.sh" python; then
  log=build/python.pytest.log
  KEMBED_TESTS_NEED_TORCH=1 KEMBED_CLI="$here/build/openmp/cli/kembed" PYTHONDONTWRITEBYTECODE=1 \
    "$venv/bin/python" -m pytest -q -rfEs -p no:cacheprovider python/tests 2>&1 | tee "$log" || true
  # pytest's last line: "3 failed, 100 passed, 1 skipped, 1 warning in 50.1s" (any order)
  line=$(grep -E "^(=+ )?[0-9]+ (passed|failed|error|skipped).* in [0-9.]+s" "$log" | tail -n 1 || true)
  if [[ -z $line ]]; then
    echo "test.sh: pytest ran no test or did not finish" >&2
    status=1 failed=$((failed + 1))
  fi
  number() { grep -oE "[0-9]+ $1" <<<"$line" | grep -oE "^[0-9]+" || echo 0; }
  passed=$((passed + $(number passed)))
  bad=$(($(number failed) + $(number error) + $(number skipped)))  # a skip is a test that did not run
  failed=$((failed + bad))
  ((bad == 0)) || status=1
else
  echo "test.sh: the Python package did not install" >&2
  status=1 failed=$((failed + 1))
fi
echo "kembed: $passed passed, $failed failed"
exit $status
