#!/usr/bin/env python3
"""How evenly rules for owning rows spread a run's fold terms over P ranks.

A row's owner folds every term of that row, so the busiest owner's terms (its
rows' counts) bound the fold's time. For each P this prints, from a run file's
/counts, the busiest owner's terms over the mean (T / P) under each rule, and the
least any assignment can reach: max(1, hottest row's terms x P / T).

    bench/ownership_balance.py RUN.h5 [--ranks 2 3 4 8 ... 1024]

Rules: contiguous ranges (what `mpiexec kembed backward` uses), row mod P, row mod
P with every other block of P rows reversed ("snake"), splitmix64(row) mod P, and
greedy by count (the heaviest rows first, each to the least loaded rank), the one
rule here that reads the counts. docs/SCALING.md shows its output for the
benchmark's batch. Needs numpy and h5py.
"""
import argparse
import heapq

import h5py
import numpy as np


def splitmix64(x):
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def owners(rule, v, p, counts):
    rows = np.arange(v)
    if rule == "contiguous":  # mpi::rows_of: the first V mod P ranks hold one row more
        ends = [v // p * (r + 1) + min(r + 1, v % p) for r in range(p)]
        return np.searchsorted(ends, rows, side="right")
    if rule == "mod":
        return rows % p
    if rule == "snake":
        return np.where((rows // p) % 2 == 0, rows % p, p - 1 - rows % p)
    if rule == "hash":
        return (splitmix64(rows.astype(np.uint64)) % np.uint64(p)).astype(np.int64)
    if rule == "greedy":
        owner = np.zeros(v, dtype=np.int64)
        load = [(0, r) for r in range(p)]
        for row in np.argsort(-counts, kind="stable"):
            if counts[row] == 0:
                break
            terms, r = heapq.heappop(load)
            owner[row] = r
            heapq.heappush(load, (terms + int(counts[row]), r))
        return owner
    raise ValueError(rule)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="a run file (kembed backward's output)")
    parser.add_argument("--ranks", type=int, nargs="+", default=[2, 3, 4, 8, 16, 32, 64, 128, 256, 512, 1024])
    args = parser.parse_args()
    with h5py.File(args.run, "r") as f:
        counts = f["counts"][...].astype(np.int64)
    v, t = len(counts), int(counts.sum())
    if t == 0:
        raise SystemExit(f"{args.run}: no terms (every count is 0)")
    rules = ["contiguous", "mod", "snake", "hash", "greedy"]
    print(f"{args.run}: V = {v:,}, T = {t:,}, the hottest row {100 * counts.max() / t:.2f} % of the terms")
    print("| P | " + " | ".join(rules) + " | least possible |")
    print("| --- " * (len(rules) + 2) + "|")
    for p in args.ranks:
        mean = t / p
        cells = [np.bincount(owners(rule, v, p, counts), weights=counts, minlength=p).max() / mean for rule in rules]
        print(f"| {p} | " + " | ".join(f"{x:.2f}x" for x in cells) + f" | {max(1.0, counts.max() * p / t):.2f}x |")


if __name__ == "__main__":
    main()
