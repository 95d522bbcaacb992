#!/usr/bin/env python3
"""Writes tests/data/torch_options.txt: torch's CPU results for scale_grad_by_freq and max_norm.

- `scale` cases: F.embedding(..., scale_grad_by_freq=True).backward on zeros. kembed's
  scale_grad_by_freq=call must give these bits (each term fmaf(dy, float(1/count), acc)).
- `renorm` cases: F.embedding(..., max_norm, norm_type) on a table, which torch
  renormalises in place (embedding_renorm_). The file keeps the table before and
  after; kembed's test asserts bit equality for norm_type = inf (torch's max |w| is
  exact, so the scale is the same) and, for the others, that exactly `agree` of the
  renormalised rows equal torch's bit for bit: kembed's norm is an exactly specified
  binary64 sum, torch's a vectorised float reduction (docs/CONTRACT.md). `agree` is
  computed here with kembed's definition of the norm, in numpy.

It prints, per norm_type, how many renormalised rows agree and the largest difference
in units in the last place where they do not (the figures docs/CONTRACT.md quotes).
torch is needed only to re-run it:

    python3 -m venv /tmp/torchenv && /tmp/torchenv/bin/pip install torch numpy
    /tmp/torchenv/bin/python scripts/make_torch_options_reference.py
"""
import math
import pathlib
import sys

import numpy as np
import torch

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "torch_options.txt"


def zipf_ids(rng, v, t, s=1.1):
    w = 1.0 / np.arange(1, v + 1) ** s
    return rng.choice(v, size=t, p=w / w.sum()).astype(np.int64)


def hexes(a):
    return " ".join(f"{x:08x}" for x in np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).ravel())


def kembed_norm(rows, p):
    """kembed's norm: binary64, columns ascending (reference::row_norm)."""
    w = np.abs(rows.astype(np.float64))
    if math.isinf(p):
        return w.max(axis=1)
    acc = np.zeros(rows.shape[0])
    for c in range(rows.shape[1]):
        acc = acc + (w[:, c] if p == 1 else w[:, c] * w[:, c] if p == 2 else np.power(w[:, c], p))
    return acc if p == 1 else np.sqrt(acc) if p == 2 else np.power(acc, 1.0 / p)


def kembed_renorm(table, ids, max_norm, p):
    out = table.copy()
    rows = np.unique(ids)
    norm = kembed_norm(table[rows], p)
    over = norm > max_norm
    scale = (max_norm / (norm[over] + 1e-7)).astype(np.float32)
    out[rows[over]] = table[rows[over]] * scale[:, None]
    return out


def scale_cases(rng):
    for name, v, d, pad, t in [("zipf_d8", 50, 8, None, 2000), ("zipf_d3_padding", 40, 3, 0, 1500),
                               ("zipf_d13", 60, 13, None, 1200), ("uniform_d64", 30, 64, 7, 300)]:
        ids = zipf_ids(rng, v, t) if name.startswith("zipf") else rng.integers(0, v, size=t)
        yield name, v, d, pad, ids, rng.standard_normal((t, d)).astype(np.float32)


def renorm_cases(rng):
    for p in [float("inf"), 2.0, 1.0, 3.0, 0.5]:
        for d in [16, 40]:
            v = 100
            table = rng.standard_normal((v, d)).astype(np.float32)
            ids = zipf_ids(rng, v, 500)
            max_norm = {1.0: 0.6 * d, 2.0: 0.9 * math.sqrt(d), 3.0: 0.9 * d ** (1 / 3), 0.5: 0.5 * d * d}.get(p, 2.0)
            yield f"p{p:g}_d{d}", v, d, max_norm, p, ids, table


def main():
    torch.set_num_threads(1)
    rng = np.random.default_rng(20261202)
    lines = [f"# Made by scripts/make_torch_options_reference.py with torch {torch.__version__}; see that script.",
             "# scale NAME V D PADDING(none|int) T / ids / dy (hex bits) / grad (hex bits)",
             "# renorm NAME V D MAX_NORM NORM_TYPE T RENORMALISED AGREE / ids / table before / table after (hex bits)"]
    for name, v, d, pad, ids, dy in scale_cases(rng):
        weight = torch.zeros((v, d), dtype=torch.float32, requires_grad=True)
        y = torch.nn.functional.embedding(torch.from_numpy(ids), weight, padding_idx=pad, scale_grad_by_freq=True)
        y.backward(torch.from_numpy(dy))
        lines += [f"scale {name} {v} {d} {'none' if pad is None else pad} {len(ids)}",
                  " ".join(str(int(i)) for i in ids), hexes(dy), hexes(weight.grad.numpy())]
    print("norm_type  d  renormalised  bit-equal  largest |ulp| apart", file=sys.stderr)
    for name, v, d, max_norm, p, ids, table in renorm_cases(rng):
        weight = torch.from_numpy(table.copy())
        torch.nn.functional.embedding(torch.from_numpy(ids), weight, max_norm=max_norm, norm_type=p)
        after = weight.numpy()
        mine = kembed_renorm(table, ids, max_norm, p)
        rows = np.unique(ids)
        changed = rows[np.any(after[rows] != table[rows], axis=1) | np.any(mine[rows] != table[rows], axis=1)]
        agree = int(np.sum(np.all(after[changed].view(np.uint32) == mine[changed].view(np.uint32), axis=1)))
        ulps = np.abs(after[changed].view(np.int32).astype(np.int64) - mine[changed].view(np.int32).astype(np.int64))
        print(f"{p:9g} {d:3d} {len(changed):13d} {agree:10d} {int(ulps.max()) if ulps.size else 0:6d}", file=sys.stderr)
        lines += [f"renorm {name} {v} {d} {max_norm!r} {p!r} {len(ids)} {len(changed)} {agree}",
                  " ".join(str(int(i)) for i in ids), hexes(table), hexes(after)]
    OUT.write_text("\n".join(lines) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
