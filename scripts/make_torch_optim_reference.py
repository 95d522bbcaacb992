#!/usr/bin/env python3
"""Writes tests/data/torch_optim.txt: torch's CPU optimizers stepping small tables.

Each case steps a 16 x 8 table 100 times with torch.optim (foreach=False, the CPU
default) and stores the table after steps 1, 10 and 100 as hexadecimal bit patterns.
The table and every step's gradient come from an integer hash that the C++ test
computes too (`value` below), so only torch's results are stored; the test runs
kembed's oracle on the same inputs and holds the counts of bit-equal values and the
largest ULP distance (docs/CONTRACT.md, "Updates": the table there is these counts).
Re-run it only to extend the cases (scripts/setup-python.sh makes the venv); the file
records torch's version and CPU capability, which decide its bits:

    ~/.cache/kembed/venv/bin/python scripts/make_torch_optim_reference.py
"""
import pathlib
import warnings

import numpy as np
import torch

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "torch_optim.txt"
V, D, STEPS, KEPT = 16, 8, 100, (1, 10, 100)
warnings.filterwarnings("ignore", message="Sparse invariant checks")


def value(i, seed, scale):
    """A multiple of 2^-11 in [-1, 1), times scale (a power of two): exact in binary32."""
    return np.float32(((i * 2654435761 + seed * 40503) % 4093 - 2046) / 2048.0 * scale)


def table():
    return np.array([value(i, 1, 1.0) for i in range(V * D)], np.float32).reshape(V, D)


def gradient(step):
    return np.array([value(i, 100 + step, 0.125) for i in range(V * D)], np.float32).reshape(V, D)


def listed(step):
    """The rows a sparse step lists: every row but those with (r + step) % 3 == 0."""
    return [r for r in range(V) if (r + step) % 3 != 0]


# name, optimizer, kembed's settings as the C++ test reads them, torch's constructor, sparse
CASES = [
    ("sgd", "sgd", "lr=0.1", lambda p: torch.optim.SGD(p, lr=0.1), False),
    ("sgd_momentum", "sgd", "lr=0.1 momentum=0.9 dampening=0.1 weight_decay=0.01",
     lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, dampening=0.1, weight_decay=0.01), False),
    ("sgd_nesterov", "sgd", "lr=0.05 momentum=0.8 nesterov=1 maximize=1",
     lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.8, nesterov=True, maximize=True), False),
    ("adagrad", "adagrad", "lr=0.05 lr_decay=0.01 weight_decay=0.01 initial_accumulator_value=0.1 eps=1e-10",
     lambda p: torch.optim.Adagrad(p, lr=0.05, lr_decay=0.01, weight_decay=0.01, initial_accumulator_value=0.1),
     False),
    ("adagrad_sparse", "adagrad", "lr=0.05 initial_accumulator_value=0.1 eps=1e-10",
     lambda p: torch.optim.Adagrad(p, lr=0.05, initial_accumulator_value=0.1), True),
    ("adam", "adam", "lr=0.01 eps=1e-8", lambda p: torch.optim.Adam(p, lr=0.01, foreach=False), False),
    ("adam_l2", "adam", "lr=0.01 eps=1e-8 weight_decay=0.01",
     lambda p: torch.optim.Adam(p, lr=0.01, weight_decay=0.01, foreach=False), False),
    ("adamw", "adam", "lr=0.01 eps=1e-8 weight_decay=0.01 decoupled_weight_decay=1",
     lambda p: torch.optim.AdamW(p, lr=0.01, weight_decay=0.01, foreach=False), False),
    ("sparse_adam", "adam", "lr=0.01 eps=1e-8", lambda p: torch.optim.SparseAdam(p, lr=0.01), True),
]


def run(make, sparse):
    w = torch.nn.Parameter(torch.from_numpy(table()))
    opt = make([w])
    kept = []
    for step in range(1, STEPS + 1):
        g = torch.from_numpy(gradient(step))
        if sparse:
            rows = listed(step)
            w.grad = torch.sparse_coo_tensor(torch.tensor([rows]), g[rows], (V, D))
        else:
            w.grad = g
        opt.step()
        if step in KEPT:
            kept.append(w.detach().numpy().copy())
    return kept


def main():
    torch.set_num_threads(1)
    lines = [f"# Made by scripts/make_torch_optim_reference.py with torch {torch.__version__}, "
             f"CPU capability {torch.backends.cpu.get_cpu_capability()}; see that script.",
             f"# case NAME OPTIMIZER SPARSE(0|1) SETTINGS...; then the {V} x {D} table after steps "
             f"{', '.join(map(str, KEPT))}, one line each (floats as hex bits)"]
    for name, optimizer, settings, make, sparse in CASES:
        lines.append(f"case {name} {optimizer} {int(sparse)} {settings}")
        for t in run(make, sparse):
            lines.append(" ".join(f"{x:08x}" for x in t.view(np.uint32).ravel()))
    OUT.write_text("\n".join(lines) + "\n")
    print(f"wrote {OUT} ({len(CASES)} cases)")


if __name__ == "__main__":
    main()
