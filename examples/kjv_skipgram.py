#!/usr/bin/env python3
"""Skip-gram embeddings of the bundled KJV text (Genesis and Exodus), trained by torch
with kembed.torch.Embedding, and the SHA-256 of the tables it ends with.

Each step takes a batch of (word, neighbour) pairs from a window of 2 and as many
(word, random word) pairs, scores each pair by the dot product of the word's row of
one table and the other word's row of a second table, and takes an SGD step on the
squared error against 1 (neighbours) and 0 (random). Whatever --threads, --backend and
--microbatches are, the tables end with the same bits; with --embedding torch and one
microbatch, torch.nn.Embedding gives those bits too.

  python examples/kjv_skipgram.py                      # 30 steps (loss 0.50 -> 0.31), the tables' SHA-256
  python examples/kjv_skipgram.py --microbatches 16    # the same SHA-256
  python examples/kjv_skipgram.py --embedding torch --microbatches 4   # another one: torch adds
"""
import argparse
import hashlib
import os
import sys
import time

import numpy as np
import torch

import kembed
import kembed.torch

HERE = os.path.dirname(os.path.abspath(__file__))


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--batch", default=os.path.join(HERE, "..", "datasets", "kjv", "batch.h5"),
                   help="a kembed batch file whose /ids are the text's token ids")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--pairs", type=int, default=4096, help="neighbour pairs per step (as many random ones)")
    p.add_argument("--dim", type=int, default=16)
    p.add_argument("--lr", type=float, default=20.0)
    p.add_argument("--microbatches", type=int, default=1, help="backward passes per step, in position order")
    p.add_argument("--threads", type=int, default=None, help="kembed's and torch's threads")
    p.add_argument("--backend", default="default", help="kembed's backend: default, serial, openmp")
    p.add_argument("--embedding", choices=("kembed", "torch"), default="kembed")
    p.add_argument("--optimizer", choices=("torch-sgd", "sgd", "adagrad", "rowwise_adagrad", "adam", "adamw"),
                   default="torch-sgd", help="torch.optim.SGD, or one of kembed.torch.optim's (kembed's bits)")
    p.add_argument("--seed", type=int, default=1611)
    return p.parse_args()


def load_ids(path):
    import h5py  # kembed's batch files are HDF5
    with h5py.File(path, "r") as f:
        return np.asarray(f["ids"], dtype=np.int64), int(f.attrs["num_embeddings"])


def make_pairs(ids, num_embeddings, count, rng):
    """`count` (word, neighbour) pairs and `count` (word, random word) pairs, labels 1 and 0."""
    at = rng.integers(2, len(ids) - 2, size=count)
    offset = rng.choice(np.array([-2, -1, 1, 2]), size=count)
    words = np.concatenate([ids[at], ids[at]])
    others = np.concatenate([ids[at + offset], rng.integers(0, num_embeddings, size=count)])
    labels = np.concatenate([np.ones(count, np.float32), np.zeros(count, np.float32)])
    return torch.from_numpy(words), torch.from_numpy(others), torch.from_numpy(labels)


def table(kind, v, d, backend):
    if kind == "torch":
        return torch.nn.Embedding(v, d)
    return kembed.torch.Embedding(v, d, backend=backend, accumulate="carry")


def score(u, c):
    # Column by column, elementwise only: a reduction's order inside torch (sum, matmul)
    # may depend on the batch's size, and every position must get the same bits however
    # the batch is split.
    s = u[:, 0] * c[:, 0]
    for k in range(1, u.shape[1]):
        s = s + u[:, k] * c[:, k]
    return s


def optimizer(a, params):
    """torch's SGD, or kembed's step for a table (the same bits everywhere)."""
    import kembed.torch
    o = kembed.torch.optim
    return {"torch-sgd": lambda: torch.optim.SGD(params, lr=a.lr),
            "sgd": lambda: o.SGD(params, lr=a.lr),
            "adagrad": lambda: o.Adagrad(params, lr=a.lr / 20),
            "rowwise_adagrad": lambda: o.RowWiseAdagrad(params, lr=a.lr / 20),
            "adam": lambda: o.Adam(params, lr=a.lr / 200),
            "adamw": lambda: o.AdamW(params, lr=a.lr / 200)}[a.optimizer]()


def train(a):
    if a.threads:
        kembed.set_num_threads(a.threads)
        torch.set_num_threads(a.threads)
    ids, v = load_ids(a.batch)
    torch.manual_seed(a.seed)
    words, others = table(a.embedding, v, a.dim, a.backend), table(a.embedding, v, a.dim, a.backend)
    with torch.no_grad():
        words.weight.mul_(0.1)
        others.weight.mul_(0.1)
    opt = optimizer(a, list(words.parameters()) + list(others.parameters()))
    rng = np.random.default_rng(a.seed)
    n = 2 * a.pairs
    scale = 1.0 / n  # each position's loss weight is the whole batch's, in every microbatch
    bounds = np.linspace(0, n, a.microbatches + 1).astype(int)
    start = time.perf_counter()
    for step in range(a.steps):
        w, o, label = make_pairs(ids, v, a.pairs, rng)
        total = 0.0
        for lo, hi in zip(bounds[:-1], bounds[1:]):
            err = score(words(w[lo:hi]), others(o[lo:hi])) - label[lo:hi]
            loss = (err * err * scale).sum()
            loss.backward()
            total += float(loss.detach())
        opt.step()
        opt.zero_grad(set_to_none=True)
        if step % 10 == 0 or step == a.steps - 1:
            print(f"step {step:3d}  loss {total:.6f}", flush=True)
    seconds = time.perf_counter() - start
    digest = hashlib.sha256(words.weight.detach().numpy().tobytes() + others.weight.detach().numpy().tobytes())
    print(f"steps: {a.steps}, {seconds / a.steps * 1e3:.2f} ms a step ({a.embedding}, {a.optimizer}, {a.microbatches} microbatches, "
          f"kembed threads {kembed.get_num_threads()}, torch threads {torch.get_num_threads()})")
    print(f"tables SHA-256 {digest.hexdigest()}")


if __name__ == "__main__":
    args = parse()
    if args.microbatches < 1 or args.microbatches > 2 * args.pairs:
        sys.exit(f"kjv_skipgram: --microbatches must be between 1 and {2 * args.pairs}")
    train(args)
