#!/usr/bin/env python3
"""Writes tests/data/torch_reference.txt: gradients from torch's CPU embedding backward.

torch's CPU `embedding_dense_backward` for float32 is the reference the contract
names: it folds each row's positions in ascending order starting from zeros. This
script draws a few batches (edge cases included), runs torch's backward on them,
and stores inputs and outputs as hexadecimal bit patterns, so the C++ test compares
bits without torch installed. Re-run it only to extend the cases:

    python3 -m venv /tmp/torchenv && /tmp/torchenv/bin/pip install torch numpy
    /tmp/torchenv/bin/python scripts/make_torch_reference.py
"""
import pathlib
import sys

import numpy as np
import torch

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "torch_reference.txt"


def zipf_ids(rng, v, t, s=1.1):
    w = 1.0 / np.arange(1, v + 1) ** s
    return rng.choice(v, size=t, p=w / w.sum()).astype(np.int64)


def cases():
    rng = np.random.default_rng(20261130)
    f32 = np.float32

    def dy_for(t, d):
        return rng.uniform(-1, 1, size=(t, d)).astype(f32)

    ids = zipf_ids(rng, 50, 2000)
    yield "zipf", 50, 8, None, ids, dy_for(2000, 8)

    ids = zipf_ids(rng, 40, 600)
    yield "zipf_padding_hot_row", 40, 5, 0, ids, dy_for(600, 5)

    ids = rng.integers(0, 9, size=300)
    yield "uniform_padding_negative", 9, 3, -2, ids, dy_for(300, 3)

    ids = rng.integers(0, 6, size=120)
    dy = dy_for(120, 4)
    dy[(ids == 1) | (ids == 4)] = -0.0  # rows whose only terms are -0.0
    yield "negative_zero_rows", 6, 4, None, ids, dy

    ids = rng.integers(0, 5, size=200)
    bits = rng.integers(0, 1 << 23, size=(200, 7), dtype=np.uint32) | (rng.integers(0, 2, size=(200, 7), dtype=np.uint32) << 31)
    yield "subnormal", 5, 7, None, ids, bits.view(f32)

    ids = rng.integers(0, 4, size=64)
    dy = np.where(rng.uniform(size=(64, 3)) < 0.4, f32(-3.0e38), f32(3.0e38)).astype(f32)
    yield "overflow", 4, 3, None, ids, dy

    ids = np.concatenate([np.zeros(1, np.int64), np.zeros(6, np.int64)])
    dy = np.array([[1.0]] + [[2.0 ** -24]] * 6, dtype=f32)
    yield "order_sensitive", 1, 1, None, ids, dy

    ids = rng.integers(0, 3, size=5000)
    yield "t_much_larger_than_v", 3, 2, None, ids, dy_for(5000, 2)


def hexes(a):
    return " ".join(f"{x:08x}" for x in np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).ravel())


def main():
    torch.set_num_threads(1)
    lines = [f"# Made by scripts/make_torch_reference.py with torch {torch.__version__}; see that script.",
             "# case NAME V D PADDING(none|int) T / ids / dy (hex bits) / grad (hex bits) / counts"]
    for name, v, d, pad, ids, dy in cases():
        weight = torch.zeros((v, d), dtype=torch.float32, requires_grad=True)
        idx = torch.from_numpy(np.asarray(ids, dtype=np.int64))
        y = torch.nn.functional.embedding(idx, weight, padding_idx=pad)
        y.backward(torch.from_numpy(dy))
        grad = weight.grad.numpy()
        counts = np.bincount(ids, minlength=v)
        lines.append(f"case {name} {v} {d} {'none' if pad is None else pad} {len(ids)}")
        lines.append(" ".join(str(int(i)) for i in ids))
        lines.append(hexes(dy))
        lines.append(hexes(grad))
        lines.append(" ".join(str(int(c)) for c in counts))
    OUT.write_text("\n".join(lines) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
