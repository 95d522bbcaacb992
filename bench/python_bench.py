#!/usr/bin/env python3
"""The Python package against its baselines, measured in the same run (docs/PYTHON.md,
docs/PERFORMANCE.md "Python"):

1. kembed.Embedding's forward and backward against kembed-bench's C++ calls on the same
   batch (kembed-bench --inputs): the goal is within 10% at T >= 1e5;
2. the per-call cost of kembed.torch.Embedding (forward + backward) against
   torch.nn.Embedding's, for T = 1e2 .. 1e6;
3. examples/kjv_skipgram.py's step time with kembed.torch.Embedding against
   torch.nn.Embedding.

  python bench/python_bench.py --kembed-bench build/openmp/bench/kembed-bench [--quick] [--out FILE.md]
"""
import argparse
import json
import os
import pathlib
import re
import subprocess
import sys
import tempfile
import time

import numpy as np

import kembed

REPO = pathlib.Path(__file__).resolve().parents[1]


def best(f, repeat):
    f()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return min(times)


def against_cpp(bench, v, d, t, repeat, threads):
    rng = np.random.default_rng(1)
    ids = rng.integers(0, v, t)
    dy = rng.standard_normal((t, d), dtype=np.float32)
    table = rng.standard_normal((v, d), dtype=np.float32)
    with tempfile.TemporaryDirectory() as folder:
        ids.astype("<i8").tofile(f"{folder}/ids.i64")
        dy.tofile(f"{folder}/dy.f32")
        table.tofile(f"{folder}/table.f32")
        out = subprocess.run([bench, "--inputs", folder, "--rows", str(v), "--dim", str(d), "--positions", str(t),
                              "--backend", "openmp", "--threads", str(threads)],
                             capture_output=True, text=True, check=True)
    cpp = json.loads(out.stdout.strip().splitlines()[-1])
    emb = kembed.Embedding.from_pretrained(table)
    y, g = np.empty((t, d), np.float32), np.empty((v, d), np.float32)
    fresh_f = best(lambda: emb.forward(ids), repeat)
    fresh_b = best(lambda: emb.backward(ids, dy), repeat)
    into_f = best(lambda: emb.forward(ids, out=y), repeat)
    into_b = best(lambda: emb.backward(ids, dy, out=g), repeat)
    # As kembed-bench holds them: every buffer allocated as kembed allocates (kembed.empty).
    ky, kg, kdy = kembed.empty((t, d)), kembed.empty((v, d)), kembed.empty((t, d))
    np.copyto(kdy, dy)
    same_f = best(lambda: emb.forward(ids, out=ky), repeat)
    same_b = best(lambda: emb.backward(ids, kdy, out=kg), repeat)
    import hashlib
    same = hashlib.sha256(emb.backward(ids, dy).tobytes()).hexdigest() == cpp["grad_sha256"]
    return cpp, (fresh_f, into_f, same_f), (fresh_b, into_b, same_b), same


def overhead(t, repeat):
    import torch
    import kembed.torch
    v, d = 10000, 64
    torch.manual_seed(0)
    ref = torch.nn.Embedding(v, d)
    mine = kembed.torch.Embedding.from_pretrained(ref.weight.detach().clone(), freeze=False)
    ids = torch.randint(0, v, (t,))
    dy = torch.randn(t, d)

    def step(m):
        def run():
            m.weight.grad = None
            m(ids).backward(dy)
        return run
    return best(step(ref), repeat), best(step(mine), repeat)


def example_step(kind, steps):
    out = subprocess.run([sys.executable, str(REPO / "examples" / "kjv_skipgram.py"), "--steps", str(steps),
                          "--embedding", kind], capture_output=True, text=True, check=True)
    return float(re.search(r"([0-9.]+) ms a step", out.stdout).group(1))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--kembed-bench", default=str(REPO / "build" / "openmp" / "bench" / "kembed-bench"))
    p.add_argument("--quick", action="store_true")
    p.add_argument("--out", default=None)
    a = p.parse_args()
    threads = kembed.get_num_threads()
    repeat = 20 if a.quick else 50
    lines = [f"# kembed from Python ({threads} OpenMP threads, best of {repeat})", "",
             "## The Python call against kembed-bench's C++ call (same batch; the gradient's SHA-256 checked equal)", "",
             "Python: a new result each call; `out=`: into a numpy array; `empty`: every buffer from "
             "`kembed.empty`, as kembed-bench's are. The ratios are `empty` / C++.", "",
             "| V | d | T | op | C++ ms | Python ms | out= ms | empty ms | ratio |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    shapes = [(100000, 64, 100000)] if a.quick else [(100000, 64, 100000), (1000000, 64, 1000000), (100000, 16, 1000000)]
    for v, d, t in shapes:
        cpp, fwd, bwd, same = against_cpp(a.kembed_bench, v, d, t, repeat, threads)
        if not same:
            sys.exit(f"python_bench: the Python gradient differs from kembed-bench's at V={v} d={d} T={t}")
        for op, key, ms in (("forward", "forward_seconds", fwd), ("backward", "backward_seconds", bwd)):
            lines.append(f"| {v:,} | {d} | {t:,} | {op} | {cpp[key] * 1e3:.2f} | " +
                         " | ".join(f"{x * 1e3:.2f}" for x in ms) + f" | {ms[2] / cpp[key]:.2f} |")
    lines += ["", "## kembed.torch.Embedding against torch.nn.Embedding (V = 10,000, d = 64; forward + backward)", "",
              "| T | torch ms | kembed.torch ms | ratio |", "| --- | --- | --- | --- |"]
    for t in ([100, 10000, 1000000] if a.quick else [100, 1000, 10000, 100000, 1000000]):
        ref, mine = overhead(t, repeat)
        lines.append(f"| {t:,} | {ref * 1e3:.3f} | {mine * 1e3:.3f} | {mine / ref:.2f} |")
    steps = 10 if a.quick else 30
    k, tt = example_step("kembed", steps), example_step("torch", steps)
    lines += ["", "## examples/kjv_skipgram.py", "", "| embedding | ms a step |", "| --- | --- |",
              f"| torch.nn.Embedding | {tt:.2f} |", f"| kembed.torch.Embedding | {k:.2f} |", ""]
    text = "\n".join(lines)
    print(text)
    if a.out:
        pathlib.Path(a.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
