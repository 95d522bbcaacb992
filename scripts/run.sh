#!/usr/bin/env bash
# The README's first command: set up (scripts/setup.sh openmp), then run the main
# job on its default data. Until the batch job lands this is kembed-demo: forward
# and backward on a generated Zipf batch with every plan, timed and fingerprinted.
# Arguments go to kembed-demo (--help lists them); OMP_NUM_THREADS sets threads.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$here/scripts/setup.sh" openmp
export OMP_PROC_BIND=${OMP_PROC_BIND:-spread} OMP_PLACES=${OMP_PLACES:-threads}
exec "$here/build/openmp/cli/kembed-demo" "$@"
