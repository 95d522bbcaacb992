#!/usr/bin/env python3
"""Writes tests/data/torch_bag.txt: torch's CPU EmbeddingBag on small bag calls.

For each case it stores the inputs (table, ids, offsets, per-sample weights, dy) and
torch's forward output, table gradient and per-sample-weight gradient, all as
hexadecimal bit patterns, so the C++ test compares kembed's contract with torch bit
for bit without torch installed (docs/CONTRACT.md, "Bags": the forward matches torch
everywhere; the backward where torch's order is fixed, with the shares recorded).
Re-run it only to extend the cases (scripts/setup-python.sh makes the venv):

    ~/.cache/kembed/venv/bin/python scripts/make_torch_bag_reference.py
"""
import pathlib
import sys

import numpy as np
import torch

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "data" / "torch_bag.txt"
f32 = np.float32


def zipf_ids(rng, v, t, s=1.1):
    w = 1.0 / np.arange(1, v + 1) ** s
    return rng.choice(v, size=t, p=w / w.sum()).astype(np.int64)


def offsets_for(rng, t, b):
    # b bags, some empty: sorted starts from 0.
    return np.concatenate([[0], np.sort(rng.integers(0, t + 1, b - 1))]).astype(np.int64)


def cases():
    rng = np.random.default_rng(20261204)
    table = lambda v, d: rng.standard_normal((v, d)).astype(f32)
    ids = zipf_ids(rng, 50, 400)
    yield dict(name="sum_zipf", mode="sum", w=table(50, 8), ids=ids, offsets=offsets_for(rng, 400, 40))
    yield dict(name="mean_padding_hot_row", mode="mean", w=table(50, 8), ids=ids, offsets=offsets_for(rng, 400, 40),
               pad=0)
    ties = np.round(rng.standard_normal((30, 5)) * 2).astype(f32)  # few values: ties in every column
    yield dict(name="max_ties", mode="max", w=ties, ids=zipf_ids(rng, 30, 300), offsets=offsets_for(rng, 300, 50))
    yield dict(name="max_padding", mode="max", w=ties, ids=zipf_ids(rng, 30, 300), offsets=offsets_for(rng, 300, 50),
               pad=1)
    yield dict(name="weighted_padding_negative", mode="sum", w=table(20, 6), ids=rng.integers(0, 20, 300),
               offsets=offsets_for(rng, 300, 30), psw=rng.standard_normal(300).astype(f32), pad=-2)
    yield dict(name="sum_freq", mode="sum", w=table(40, 4), ids=zipf_ids(rng, 40, 300),
               offsets=offsets_for(rng, 300, 25), freq=True)
    yield dict(name="mean_freq", mode="mean", w=table(40, 4), ids=zipf_ids(rng, 40, 300),
               offsets=offsets_for(rng, 300, 25), freq=True)
    t = 250
    yield dict(name="sum_last_offset", mode="sum", w=table(25, 7), ids=rng.integers(0, 25, t),
               offsets=np.append(offsets_for(rng, t, 20), t), last=True)
    yield dict(name="mean_2d", mode="mean", w=table(15, 3), ids=rng.integers(0, 15, (20, 7)))
    yield dict(name="order_sensitive", mode="sum", w=np.array([[1.0], [2.0 ** -24]], f32),
               ids=np.array([0, 1, 1, 1, 1], np.int64), offsets=np.array([0], np.int64))


def hexes(a):
    return " ".join(f"{x:08x}" for x in np.ascontiguousarray(a, dtype=f32).view(np.uint32).ravel()) or "-"


def ints(a):
    return " ".join(str(int(i)) for i in np.ravel(a)) or "-"


def run(c, rng):
    w = c["w"]
    v, d = w.shape
    e = torch.nn.EmbeddingBag(v, d, mode=c["mode"], padding_idx=c.get("pad"), scale_grad_by_freq=c.get("freq", False),
                              include_last_offset=c.get("last", False))
    with torch.no_grad():
        e.weight.copy_(torch.from_numpy(w))
    ids = torch.from_numpy(np.asarray(c["ids"], np.int64))
    offs = None if "offsets" not in c else torch.from_numpy(c["offsets"])
    psw = None if "psw" not in c else torch.from_numpy(c["psw"]).requires_grad_(True)
    y = e(ids, offs, per_sample_weights=psw)
    dy = rng.uniform(-1, 1, size=tuple(y.shape)).astype(f32)
    y.backward(torch.from_numpy(dy))
    psw_grad = None if psw is None else psw.grad.numpy()
    return y.detach().numpy(), dy, e.weight.grad.numpy(), psw_grad


def main():
    torch.set_num_threads(1)
    rng = np.random.default_rng(7)
    lines = [f"# Made by scripts/make_torch_bag_reference.py with torch {torch.__version__}; see that script.",
             "# case NAME V D MODE PADDING(none|int) FREQ LAST_OFFSET IDS_SHAPE(T or BxL)",
             "# then: table, ids, offsets, per_sample_weights, dy, torch y, torch grad, torch weights grad",
             "# (floats as hex bits; '-' for none)"]
    for c in cases():
        y, dy, grad, psw_grad = run(c, rng)
        v, d = c["w"].shape
        pad = c.get("pad")
        shape = "x".join(str(n) for n in np.shape(c["ids"]))
        lines.append(f"case {c['name']} {v} {d} {c['mode']} {'none' if pad is None else pad} "
                     f"{int(c.get('freq', False))} {int(c.get('last', False))} {shape}")
        lines += [hexes(c["w"]), ints(c["ids"]), ints(c.get("offsets", [])), hexes(c.get("psw", [])), hexes(dy),
                  hexes(y), hexes(grad), hexes([] if psw_grad is None else psw_grad)]
    OUT.write_text("\n".join(lines) + "\n")
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes)", file=sys.stderr)


if __name__ == "__main__":
    main()
