#!/usr/bin/env bash
# The CUDA build's Python module (build/cuda/python), here, without a GPU: it imports,
# lists "cuda" among its backends, and its first layer stops with Python's RuntimeError
# naming the missing device, never a crash. (On a GPU node the same module runs the
# device layer: docs/PYTHON.md, "Devices".)
#   tests/python_cuda_module_check.sh BUILD_DIR PYTHON
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
build=$1 python=$2
module=$(ls "$build"/python/_kembed*.so 2>/dev/null | head -n 1)
[[ -n $module ]] || { echo "python-cuda: no module in $build/python" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r "$here/python/kembed" "$work/kembed"
cp "$module" "$work/kembed/"
cd "$work"
PYTHONDONTWRITEBYTECODE=1 "$python" - <<'PY'
import numpy as np
import kembed
assert "cuda" in kembed.backends(), kembed.backends()
try:
    kembed.Embedding.from_pretrained(np.ones((4, 2), np.float32), backend="cuda")
except RuntimeError as e:
    assert "Kokkos could not start" in str(e), e
    print("python-cuda: the module imports; without a GPU:", str(e).splitlines()[0][:160])
else:
    raise SystemExit("python-cuda: a CUDA layer started without a GPU")
PY
