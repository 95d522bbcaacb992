#!/usr/bin/env python3
"""kembed's EmbeddingBag against its peers on the CPU, on the same inputs, in one
sitting: torch's `embedding_bag` forward and its dense backward
(`_embedding_bag_dense_backward`, the one `nn.EmbeddingBag` runs on the CPU) in every
pooling, weighted and not, and FBGEMM's pooled CPU kernels (its dense TBE module with
PoolingMode.SUM and MEAN, and their dense backward) where `fbgemm_gpu` is installed.
Bits compared by SHA-256; times as ratios against kembed's, and kembed's against a
memcpy of the bytes its access pattern moves, in the same run. Not run in CI (see
bench_peers.py for the peers' venv):

    /tmp/peersenv/bin/python scripts/bench_bags.py build/openmp/bench/kembed-bench
    /tmp/peersenv/bin/python scripts/bench_bags.py --table bench/results/bags.csv

Shapes are DLRM-like: B bags of L ids each (fixed) or of 1 to 2L - 1 (variable, the
same mean), Zipf ids over V rows. Neither peer writes into a caller's buffer, so each
runs twice: in a process whose allocator keeps freed pages (`reused`: the next call's
output lands on the last one's pages, as kembed's reused buffers do) and with glibc's
defaults (`fresh`), as bench_peers.py does for FBGEMM. Runs are interleaved over
rounds, and a figure is its best.
"""
import argparse
import csv
import json
import os
import pathlib
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_peers import ALL_CPUS, Peer, fbgemm_classes, time_cases, trim_heap, write_csv, zipf_ids  # noqa: E402


FIELDS = ["V", "d", "B", "L", "lengths", "pooling", "threads", "op", "peer", "call", "seconds",
          "peer_over_kembed", "bits_equal", "worst_seconds"]


def worker(kind):
    """A peer process: a 'load' command reads a point's files, a 'time' command times
    every peer at a thread count; one JSON line each."""
    import numpy as np
    import torch
    PoolingMode, DenseTableBatchedEmbeddingBagsCodegen = fbgemm_classes()
    fbgemm = PoolingMode is not None
    with_torch = not os.environ.get("KEMBED_PEERS_NO_TORCH")  # --peers fbgemm: FBGEMM alone
    s = {}
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["cmd"] == "load":
            s.clear()
            cases = table = ids = offsets = dy = w = None  # the last point's, as bench_peers.py
            trim_heap()
            work, v, d, t, b = pathlib.Path(cmd["dir"]), cmd["V"], cmd["d"], cmd["T"], cmd["B"]
            pooling, weighted = cmd["pooling"], cmd["weighted"]
            ids = torch.from_numpy(np.fromfile(work / "ids.i64", dtype="<i8"))
            offsets = torch.from_numpy(np.fromfile(work / "offsets.i64", dtype="<i8"))
            dy = torch.from_numpy(np.fromfile(work / "dy.f32", dtype="<f4").reshape(b, d))
            table = torch.from_numpy(np.fromfile(work / "table.f32", dtype="<f4").reshape(v, d))
            w = torch.from_numpy(np.fromfile(work / "weights.f32", dtype="<f4")) if weighted else None
            # torch's backward through autograd, as nn.EmbeddingBag runs it: one forward
            # kept, its graph walked again at each call. The leaf shares the table's bytes
            # (nothing writes them): a copy put V = 1e7's three 2.56 GB arrays out of memory.
            leaf = table.detach().requires_grad_() if with_torch else None
            kept = torch.nn.functional.embedding_bag(ids, leaf, offsets, mode=pooling,
                                                     per_sample_weights=w) if with_torch else None
            s.update(v=v, d=d, ids=ids, offsets=offsets, dy=dy, table=table, w=w, pooling=pooling, leaf=leaf,
                     kept=kept)
            if fbgemm and pooling != "max":
                pm = PoolingMode.SUM if pooling == "sum" else PoolingMode.MEAN
                m = DenseTableBatchedEmbeddingBagsCodegen([(v, d)], pooling_mode=pm, use_cpu=True)
                with torch.no_grad():
                    m.weights.copy_(table.reshape(-1))
                s.update(module=m, pm=pm, csr=torch.cat([offsets, torch.tensor([t])]))
            if not with_torch:  # FBGEMM reads its own copy: at V = 1e7, 2.56 GB handed back
                s["table"] = table = None
                trim_heap()
            print(json.dumps({"fbgemm": fbgemm, "torch": torch.__version__}), flush=True)
            continue
        torch.set_num_threads(cmd["threads"])
        v, ids, offsets, dy, table, w = s["v"], s["ids"], s["offsets"], s["dy"], s["table"], s["w"]
        cases = {
            ("torch", "forward"): lambda: torch.nn.functional.embedding_bag(ids, table, offsets, mode=s["pooling"],
                                                                            per_sample_weights=w),
            ("torch", "backward"): lambda: torch.autograd.grad(s["kept"], s["leaf"], dy, retain_graph=True)[0],
        } if with_torch else {}
        if "module" in s:
            m, csr = s["module"], s["csr"]
            flat = m.weights.detach()
            cases["fbgemm", "forward"] = lambda: m(ids, csr, per_sample_weights=w)
            cases["fbgemm", "backward"] = lambda: torch.ops.fbgemm.split_embedding_backward_codegen_dense_cpu(
                dy, flat, m.weights_offsets, m.D_offsets, s["d"], m.hash_size_cumsum, m.total_hash_size_bits, ids,
                csr, int(s["pm"]), w, 0.0).view(v, s["d"])
        print(json.dumps(time_cases(cases, grad_ops=("backward",))), flush=True)


def bag_lengths(rng, b, mean, variable):
    import numpy as np
    if not variable:
        return np.full(b, mean, dtype=np.int64)
    return rng.integers(1, 2 * mean, b, dtype=np.int64)  # 1 .. 2L - 1: mean L


def kembed_run(bench, work, key, t, threads):
    cmd = [bench, "--inputs", str(work), "--rows", str(key["V"]), "--dim", str(key["d"]), "--positions", str(t),
           "--bags", str(key["B"]), "--pooling", key["pooling"].split("-")[0], "--backend", "openmp",
           "--threads", str(threads)] + (["--weighted"] if key["pooling"] == "sum-weighted" else [])
    env = {k: val for k, val in os.environ.items() if k != "OMP_WAIT_POLICY" and not k.startswith("MALLOC_")}
    done = subprocess.run(cmd, capture_output=True, text=True, env=env,
                          preexec_fn=lambda: os.sched_setaffinity(0, ALL_CPUS))
    if done.returncode != 0:
        raise SystemExit(f"bench_bags: {' '.join(cmd)} failed ({done.returncode}): {done.stderr.strip()}")
    return json.loads(done.stdout)


def measure(a):
    import numpy as np
    work = pathlib.Path("/dev/shm/kembed-bench-bags")
    work.mkdir(parents=True, exist_ok=True)
    pathlib.Path(a.csv).parent.mkdir(parents=True, exist_ok=True)
    if "torch" not in a.peers:
        os.environ["KEMBED_PEERS_NO_TORCH"] = "1"  # the peer processes inherit it
    peers = [Peer(call, fbgemm="fbgemm" in a.peers, script=__file__) for call in a.calls]
    rng = np.random.default_rng(2026)
    rows = []
    try:
        for d in a.dims:
            for v in a.rows:
                for b in a.bags:
                    for length in a.lengths:
                        for variable in ([False, True] if a.variable else [False]):
                            sizes = bag_lengths(rng, b, length, variable)
                            t = int(sizes.sum())
                            zipf_ids(rng, v, t).tofile(work / "ids.i64")
                            np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64).tofile(work / "offsets.i64")
                            rng.uniform(-1, 1, (b, d)).astype(np.float32).tofile(work / "dy.f32")
                            rng.uniform(-1, 1, (v, d)).astype(np.float32).tofile(work / "table.f32")
                            rng.uniform(0, 2, t).astype(np.float32).tofile(work / "weights.f32")
                            for pooling in a.poolings:
                                key = dict(V=v, d=d, B=b, L=length, lengths="variable" if variable else "fixed",
                                           pooling=pooling)
                                for p in peers:
                                    p.ask(cmd="load", dir=str(work), V=v, d=d, T=t, B=b,
                                          pooling=pooling.split("-")[0], weighted=pooling == "sum-weighted")
                                rows += point(a, peers, work, key, t)
                                write_csv(a.csv, rows, FIELDS)
    finally:
        for p in peers:
            p.close()
        for f in work.iterdir():
            f.unlink()
    return rows


def point(a, peers, work, key, t):
    """Every run at one point, interleaved over rounds; the best of each kept, and the
    worst too (each run is itself a best of repeats: the worst shows the spread between
    runs, which a best alone hides)."""
    bestof, worstof = {}, {}

    def keep(k, seconds, sha):
        if k not in bestof or seconds < bestof[k][0]:
            bestof[k] = (seconds, sha)
        worstof[k] = max(worstof.get(k, 0.0), seconds)

    for r in range(a.rounds):
        for threads in (a.threads if r % 2 == 0 else a.threads[::-1]):
            ours = kembed_run(a.bench, work, key, t, threads)
            for op in ("forward", "backward"):
                keep((threads, op, "kembed", "reused"), ours[f"{op}_seconds"], ours["y_sha256" if op == "forward"
                                                                                     else "grad_sha256"])
                keep((threads, op, "memcpy", "reused"), ours[f"memcpy_{op}_bytes_seconds"], None)
            for p in (peers if r % 2 == 0 else peers[::-1]):
                for name, got in p.ask(cmd="time", threads=threads).items():
                    peer, op = name.split("/")
                    keep((threads, op, peer, p.kind), got["seconds"], got["sha256"])
    rows = []
    for (threads, op, peer, call), (seconds, sha) in sorted(bestof.items()):
        ours = bestof[(threads, op, "kembed", "reused")]
        rows.append(dict(key, threads=threads, op=op, peer=peer, call=call, seconds=f"{seconds:.6g}",
                         peer_over_kembed=f"{seconds / ours[0]:.4f}", bits_equal="" if sha is None else sha == ours[1],
                         worst_seconds=f"{worstof[threads, op, peer, call]:.6g}"))
        print(f"{key['V']:>8} {key['d']:>4} {key['B']:>6} {key['L']:>4} {key['lengths']:>8} {key['pooling']:>12} "
              f"{threads} {op:>8} {peer:>7} {call:>6} {seconds * 1e3:9.3f} ms  x{seconds / ours[0]:5.2f} "
              f"{'' if sha is None else 'equal' if sha == ours[1] else 'other bits'}", flush=True)
    return rows


def table(path):
    """The doc's table from a CSV this script wrote: peer time / kembed time."""
    with open(path) as f:
        rows = list(csv.DictReader(f))
    cols = [(op, peer, call) for op in ("forward", "backward") for peer in ("torch", "fbgemm", "memcpy")
            for call in ("reused", "fresh") if any((r["op"], r["peer"], r["call"]) == (op, peer, call) for r in rows)]
    keys = list(dict.fromkeys((r["V"], r["d"], r["B"], r["L"], r["lengths"], r["pooling"], r["threads"]) for r in rows))
    lines = ["| V | d | B | L | lengths | pooling | threads | kembed fwd, bwd ms | "
             + " | ".join(f"{op} {peer} {call}" for op, peer, call in cols) + " |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | " + " | ".join("---" for _ in cols) + " |"]
    for k in keys:
        at = {(r["op"], r["peer"], r["call"]): r for r in rows
              if (r["V"], r["d"], r["B"], r["L"], r["lengths"], r["pooling"], r["threads"]) == k}
        ms = f"{float(at['forward', 'kembed', 'reused']['seconds']) * 1e3:.3g}, " \
             f"{float(at['backward', 'kembed', 'reused']['seconds']) * 1e3:.3g}"
        cells = []
        for c in cols:
            r = at.get(c)
            cells.append("-" if r is None else f"{float(r['peer_over_kembed']):.2f}"
                         + ("" if r["bits_equal"] in ("True", "") else "*"))
        lines.append(f"| {int(k[0]):g} | " + " | ".join(k[1:]) + f" | {ms} | " + " | ".join(cells) + " |")
    slower = [r for r in rows if r["peer"] not in ("kembed", "memcpy") and float(r["peer_over_kembed"]) < 1]
    other = [r for r in rows if r["bits_equal"] == "False"]
    lines.append(f"\n{len(rows)} rows; * other bits than kembed's ({len(other)}); a peer faster than kembed at "
                 f"{len(slower)}.")
    return "\n".join(lines) + "\n"


def summary(path):
    """Per pooling, operation and peer: at how many points kembed is faster, the peer's
    time over kembed's (lowest, median, highest), and where the bits are kembed's."""
    import statistics
    with open(path) as f:
        rows = [r for r in csv.DictReader(f) if r["peer"] not in ("kembed",)]
    groups = {}
    for r in rows:
        groups.setdefault((r["pooling"], r["op"], r["peer"], r["call"]), []).append(r)
    lines = ["| pooling | op | peer | points | kembed faster | lowest | median | highest | bits equal |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    poolings = ["sum", "mean", "max", "sum-weighted"]
    order = sorted(groups, key=lambda k: (poolings.index(k[0]), k[1] != "forward", k[2], k[3]))
    for k in order:
        g = groups[k]
        ratio = sorted(float(r["peer_over_kembed"]) for r in g)
        bits = "-" if k[2] == "memcpy" else f"{sum(r['bits_equal'] == 'True' for r in g)}"
        lines.append(f"| {k[0]} | {k[1]} | {k[2]} ({k[3]}) | {len(g)} | {sum(x > 1 for x in ratio)} | "
                     f"{ratio[0]:.2f} | {statistics.median(ratio):.2f} | {ratio[-1]:.2f} | {bits} |")
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("bench", nargs="?", help="path to kembed-bench (an OpenMP build)")
    p.add_argument("--csv", default="bench/results/bags.csv")
    p.add_argument("--table", metavar="CSV", help="print the markdown table of a CSV and exit")
    p.add_argument("--summary", metavar="CSV", help="print the summary table of a CSV and exit")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--peers", nargs="+", choices=["torch", "fbgemm"], default=["torch", "fbgemm"])
    p.add_argument("--calls", nargs="+", choices=["reused", "fresh"], default=["reused", "fresh"])
    p.add_argument("--rows", type=int, nargs="+", default=[100000, 1000000], help="V values")
    p.add_argument("--dims", type=int, nargs="+", default=[64, 128], help="d values")
    p.add_argument("--bags", type=int, nargs="+", default=[2048, 16384], help="B values")
    p.add_argument("--lengths", type=int, nargs="+", default=[1, 32], help="L values (mean bag length)")
    p.add_argument("--variable", action="store_true", help="variable bag lengths as well as fixed")
    p.add_argument("--poolings", nargs="+", choices=["sum", "mean", "max", "sum-weighted"],
                   default=["sum", "mean", "max", "sum-weighted"])
    p.add_argument("--worker", choices=["reused", "fresh"], help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker:
        return worker(a.worker)
    if a.table:
        sys.stdout.write(table(a.table))
        return 0
    if a.summary:
        sys.stdout.write(summary(a.summary))
        return 0
    if not a.bench:
        p.error("give the path to kembed-bench, or --table CSV")
    measure(a)
    sys.stdout.write(table(a.csv))
    return 0


if __name__ == "__main__":
    sys.exit(main())
