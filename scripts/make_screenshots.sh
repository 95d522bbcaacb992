#!/usr/bin/env bash
# Remakes the inspector screenshots in docs/images/ from the bundled dataset: one
# run in mode identical, one in mode deterministic (so the diff view has something
# to show), rendered headless with kembed-inspector --screenshot.
#   scripts/make_screenshots.sh [BUILD_DIR]      (default: build/serial)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=${1:-$here/build/serial}
cd "$here"
mkdir -p runs docs/images
args=(--table datasets/kjv/table.h5 --batch datasets/kjv/batch.h5)
"$build/cli/kembed" -q backward "${args[@]}" --out runs/kjv.h5 >/dev/null
"$build/cli/kembed" -q backward "${args[@]}" --out runs/kjv-deterministic.h5 --mode deterministic >/dev/null
"$build/cli/kembed" -q backward "${args[@]}" --out runs/kjv-scaled.h5 --scale-grad-by-freq batch >/dev/null
export QT_QPA_PLATFORM=offscreen
inspector=$build/gui/kembed-inspector
"$inspector" runs/kjv.h5 --view counts --row 3 --screenshot docs/images/inspector-counts.png
"$inspector" runs/kjv.h5 --view gradient --row 0 --screenshot docs/images/inspector-gradient.png
"$inspector" runs/kjv.h5 runs/kjv-scaled.h5 --view columns --screenshot docs/images/inspector-columns.png
"$inspector" runs/kjv.h5 --view info --screenshot docs/images/inspector-info.png
"$inspector" runs/kjv.h5 runs/kjv-deterministic.h5 --view diff --row 5 --screenshot docs/images/inspector-diff.png
"$inspector" runs/kjv.h5 runs/kjv-deterministic.h5 --view gradient --heatmap all --row 1 \
  --screenshot docs/images/inspector-difference.png
