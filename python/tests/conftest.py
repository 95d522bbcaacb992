"""Shared helpers for the kembed Python tests: the repository, the CLI, exact bits."""
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
KJV = REPO / "datasets" / "kjv"
# The README's SHA-256 of the bundled job's gradient (torch's CPU backward gives it too).
KJV_GRADIENT_SHA256 = "3e1ca048975c16830bc0ba0144b941f7dcb7c1f41bdb26a20b256dfad9a88a67"


def cli():
    """The kembed program of the OpenMP build (scripts/test.sh builds it first)."""
    path = pathlib.Path(os.environ.get("KEMBED_CLI", REPO / "build" / "openmp" / "cli" / "kembed"))
    if not path.exists():
        pytest.fail(f"{path} is missing: build it (scripts/setup.sh all) or set KEMBED_CLI")
    return str(path)


def run(*args, env=None, **kw):
    full = dict(os.environ, **(env or {}))
    return subprocess.run(list(args), capture_output=True, text=True, env=full, **kw)


def python(*args, env=None):
    return run(sys.executable, *args, env=env)


def bits(a):
    """An array's dtype, shape and bytes: equal means the same bits."""
    a = np.asarray(a)
    return (a.dtype.str, a.shape, a.tobytes())


def fold(ids, dy, v, carry=None, padding_idx=None):
    """The contract's gradient, independently: each row's terms added in position order,
    one float32 addition each (numpy's float32 `+` rounds once per element)."""
    ids = np.asarray(ids).reshape(-1)
    dy = np.asarray(dy, dtype=np.float32).reshape(len(ids), -1)
    g = np.zeros((v, dy.shape[1]), np.float32) if carry is None else np.array(carry, np.float32)
    for p, r in enumerate(ids):
        g[r] = g[r] + dy[p]
    if padding_idx is not None:
        g[padding_idx] = 0.0
    return g


@pytest.fixture
def rng():
    return np.random.default_rng(20261202)


def need_torch():
    """torch, or a skip; scripts/test.sh sets KEMBED_TESTS_NEED_TORCH=1, so in CI a torch
    that does not import fails the suite instead of skipping it."""
    if os.environ.get("KEMBED_TESTS_NEED_TORCH") == "1":
        import torch
        return torch
    return pytest.importorskip("torch")
