#!/usr/bin/env python3
"""A training step of an embedding table, kembed against torch 2.15 on the CPU, in the
same run (docs/PERFORMANCE.md, "The update step"): for each optimizer, V, T (Zipf ids,
d = 64), the best of repeats of

- torch: ``table(ids).backward(dy)`` on ``nn.Embedding(sparse=True)``, then the
  optimizer's ``step()`` (Adagrad, SparseAdam; SGD with momentum takes no sparse
  gradient in torch, so it is left out);
- kembed unfused: ``opt.step(layer.backward_sparse(ids, dy))`` (kembed.optim);
- kembed fused: ``opt.backward_step(ids, dy)``.

kembed's two give the same bits (checked here); torch's differ from them by its own
arithmetic (docs/CONTRACT.md, "Updates").

  python bench/optim_torch.py [--threads 2] [--quick] [--csv FILE]
"""
import argparse
import csv
import sys

import numpy as np
import torch

import kembed
from python_bench import best  # the best of repeats, after one warm-up call

D = 64


def zipf_ids(v, t, rng):
    ranks = np.arange(1, v + 1, dtype=np.float64) ** -1.1
    return rng.choice(v, size=t, p=ranks / ranks.sum()).astype(np.int64)


CASES = {  # name: (torch optimizer, kembed optimizer), torch's defaults but lr
    "adagrad": (lambda p: torch.optim.Adagrad(p, lr=0.01), lambda l: kembed.optim.Adagrad(l, lr=0.01)),
    "adam": (lambda p: torch.optim.SparseAdam(p, lr=0.001), lambda l: kembed.optim.Adam(l, lr=0.001)),
}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--quick", action="store_true", help="one small point per optimizer")
    p.add_argument("--csv")
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    kembed.set_num_threads(a.threads)
    grid = [(10**4, 10**3)] if a.quick else [(v, t) for v in (10**5, 10**6) for t in (10**4, 10**5, 10**6)]
    repeat = 2 if a.quick else 5
    rows = []
    print(f"| optimizer | V | T | torch backward + step | kembed unfused | kembed fused | torch / fused |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for name, (make_torch, make_kembed) in CASES.items():
        for v, t in grid:
            rng = np.random.default_rng(7)
            table = rng.uniform(-1, 1, (v, D)).astype(np.float32)
            ids = zipf_ids(v, t, rng)
            dy = rng.uniform(-1, 1, (t, D)).astype(np.float32)
            emb = torch.nn.Embedding.from_pretrained(torch.from_numpy(table.copy()), freeze=False, sparse=True)
            topt = make_torch(emb.parameters())
            ids_t, dy_t = torch.from_numpy(ids), torch.from_numpy(dy)

            def torch_step():
                topt.zero_grad(set_to_none=True)
                emb(ids_t).backward(dy_t)
                topt.step()

            unfused_layer = kembed.Embedding(v, D, weight=table)
            fused_layer = kembed.Embedding(v, D, weight=table)
            unfused, fused = make_kembed(unfused_layer), make_kembed(fused_layer)
            unfused.step(unfused_layer.backward_sparse(ids, dy))
            fused.backward_step(ids, dy)
            if unfused_layer.weight.tobytes() != fused_layer.weight.tobytes():
                sys.exit(f"optim_torch: {name} V={v} T={t}: fused and unfused bits differ")
            s_torch = best(torch_step, repeat)
            s_unfused = best(lambda: unfused.step(unfused_layer.backward_sparse(ids, dy)), repeat)
            s_fused = best(lambda: fused.backward_step(ids, dy), repeat)
            rows.append(dict(optimizer=name, rows=v, dim=D, positions=t, threads=a.threads, torch_seconds=s_torch,
                             unfused_seconds=s_unfused, fused_seconds=s_fused))
            print(f"| {name} | {v:.0e} | {t:.0e} | {s_torch * 1e3:.2f} ms | {s_unfused * 1e3:.2f} ms | "
                  f"{s_fused * 1e3:.2f} ms | {s_torch / s_fused:.2f}x |", flush=True)
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
