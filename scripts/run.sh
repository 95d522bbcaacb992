#!/usr/bin/env bash
# The README's first command: set up (scripts/setup.sh openmp), then run the main
# job, `kembed backward`, on the bundled dataset (datasets/kjv: Genesis and Exodus,
# 70,950 positions) into runs/kjv.h5, and say how to look at the result.
# Extra arguments go to `kembed backward` (--microbatch N, --plan sort, --threads N,
# --backend serial, ...; see build/openmp/cli/kembed backward --help).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
"$here/scripts/setup.sh" openmp
cd "$here"
mkdir -p runs
export OMP_PROC_BIND=${OMP_PROC_BIND:-spread} OMP_PLACES=${OMP_PLACES:-threads}
# kembed waits passively by itself, but not once threads are bound (docs/CLI.md).
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
exec build/openmp/cli/kembed backward --table datasets/kjv/table.h5 --batch datasets/kjv/batch.h5 \
  --out runs/kjv.h5 "$@"
