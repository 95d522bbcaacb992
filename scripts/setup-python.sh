#!/usr/bin/env bash
# The Python package into a venv (scripts/setup.sh python calls this): nanobind,
# scikit-build-core and pytest from PyPI; torch 2.15's CPU operators without the CUDA
# wheels a plain install pulls (about 5.9 GB): torch itself with --no-deps and its
# pure-Python dependencies; where this machine's libraries do not satisfy torch's
# loader (a CUDA toolkit without cuFile, cuSPARSELt, NVSHMEM or a new enough NCCL),
# those four wheels only (about 0.5 GB). Wheels are kept in ~/.cache/kembed/wheels;
# a missing cache only costs the download. Then `pip install .` of this repository,
# its CMake build kept in build/python so that a re-run rebuilds only what changed.
#
#   scripts/setup-python.sh VENV KOKKOS_PREFIX
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv=$1 kokkos=$2
log() { echo "setup-python: $*" >&2; }
cache=${KEMBED_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kembed}
wheels=$cache/wheels
pip=("$venv/bin/pip" --disable-pip-version-check -q)
torch_version=2.15.0
# torch's own pins for the libraries its CPU import needs (its wheel's METADATA).
torch_libraries=(nvidia-cufile==1.17.1.22 nvidia-cusparselt-cu13==0.8.1 nvidia-nvshmem-cu13==3.7.2
                 nvidia-nccl-cu13==2.30.7)

if ! "$venv/bin/python" -c "import nanobind, scikit_build_core, pytest" 2>/dev/null; then
  log "installing nanobind, scikit-build-core and pytest"
  "${pip[@]}" install "nanobind>=2" "scikit-build-core>=0.10" pytest
fi
torch_imports() { "$venv/bin/python" -c "import torch" 2>/dev/null; }
if ! "$venv/bin/python" -c "import importlib.metadata as m; assert m.version('torch') == '$torch_version'" 2>/dev/null; then
  log "installing torch $torch_version (CPU operators; the wheel is about 0.5 GB, cached in $wheels)"
  mkdir -p "$wheels"
  "${pip[@]}" download --no-deps -d "$wheels" "torch==$torch_version"
  "${pip[@]}" install --no-deps "$wheels"/torch-"$torch_version"-*.whl
  "${pip[@]}" install filelock typing-extensions sympy mpmath networkx jinja2 markupsafe fsspec
fi
if ! torch_imports; then
  log "torch does not load with this machine's libraries; adding ${torch_libraries[*]}"
  "${pip[@]}" download --no-deps -d "$wheels" "${torch_libraries[@]}"
  for lib in "${torch_libraries[@]}"; do
    name=${lib%%==*}
    "${pip[@]}" install --no-deps "$wheels/${name//-/_}-${lib##*==}"-*.whl
  done
  torch_imports || { "$venv/bin/python" -c "import torch"; log "torch $torch_version does not load here"; exit 1; }
fi

log "building and installing the kembed Python package (build/python)"
cd "$here"
if ! KEMBED_KOKKOS_ROOT=$kokkos "${pip[@]}" install --no-build-isolation . >"$here/build/python.install.log" 2>&1; then
  tail -n 40 "$here/build/python.install.log" >&2
  log "pip install . failed; the whole log is build/python.install.log"
  exit 1
fi
