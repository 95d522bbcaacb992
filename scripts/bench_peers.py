#!/usr/bin/env python3
"""kembed against its peers on the CPU, on the same inputs, in one sitting: torch's
embedding forward and dense backward, and FBGEMM's CPU kernels where `fbgemm_gpu` is
installed (its dense TBE module with PoolingMode.NONE, the split TBE's nobag forward,
and its dense CPU backward). Bits compared by SHA-256 for every peer; times as ratios.
Not run in CI (torch's wheel is several GB; with --no-deps and the four libraries its
CPU import needs, as scripts/setup-python.sh does for torch 2.15, about 1.2 GB):

    python3 -m venv /tmp/peersenv && /tmp/peersenv/bin/pip install torch==2.14.* fbgemm-gpu-cpu==1.9.0 numpy
    /tmp/peersenv/bin/python scripts/bench_peers.py build/openmp/bench/kembed-bench      # ~7 minutes
    /tmp/peersenv/bin/python scripts/bench_peers.py --table bench/results/peers.csv       # the doc's tables
    # the whole kembed-bench grid against torch alone, reused buffers (~21 minutes; in
    # 24 GiB the two points V = T = 1e6, d = 512 do not fit: kembed-bench holds 12 GB
    # there, the torch process 8 GB, the inputs in /dev/shm 4 GB):
    /tmp/peersenv/bin/python scripts/bench_peers.py build/openmp/bench/kembed-bench --peers torch --calls reused \
        --rows 1000 100000 1000000 --dims 16 64 128 512 --positions 1000 100000 1000000 --uniform \
        --csv bench/results/peers-grid.csv

Every peer is timed two ways, because the allocator, not the kernel, decided much of
the earlier comparison (glibc serves a block over 32 MiB with a fresh mmap, so an
output that size faults on every page of every call):
- `reused`: the output is written into a buffer the caller keeps, as kembed's are.
  torch: `index_select(table, 0, ids, out=y)`; backward `g.zero_(); g.index_add_(0, ids,
  dy)` (the same additions in position order as `embedding_dense_backward`, checked by
  the bits). FBGEMM's ops take no output, so they run in a process whose allocator
  keeps freed pages (glibc with M_MMAP_THRESHOLD and M_TRIM_THRESHOLD at 16 GiB): each
  call's output lands on the last call's pages.
- `fresh`: as usually called (F.embedding, embedding_dense_backward, FBGEMM's ops)
  with glibc's defaults.
Each run reports its page faults per call, which shows which case it was in.

Runs are interleaved: each round times kembed (`kembed-bench --inputs`) and each
peer process at every thread count, and a point's figure is its best over the rounds,
so a slow minute of the shared machine lands on all of them alike.
"""
import argparse
import csv
import ctypes
import hashlib
import json
import os
import pathlib
import subprocess
import sys
import time

ALL_CPUS = set(range(os.cpu_count()))
KEPT = {"MALLOC_MMAP_THRESHOLD_": str(16 << 30), "MALLOC_TRIM_THRESHOLD_": str(16 << 30)}
FIELDS = ["V", "d", "T", "ids", "threads", "op", "peer", "call", "allocator", "seconds", "faults_per_call",
          "peer_over_kembed", "bits_equal"]


def best(f, budget=0.3, reps=10):
    """Best of several calls after a warm-up (as kembed-bench's best_seconds), and the
    minor page faults per timed call."""
    import resource
    t0 = time.perf_counter()
    f()
    if time.perf_counter() - t0 < 1e-3:
        reps = 200
    out, spent, calls = 1e30, 0.0, 0
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for i in range(reps):
        t0 = time.perf_counter()
        f()
        s = time.perf_counter() - t0
        out, spent, calls = min(out, s), spent + s, calls + 1
        if i >= 1 and spent > budget:
            break
    return out, (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults) / calls


def trim_heap():
    """Freed pages handed back to the system (the reused peer keeps them otherwise: KEPT)."""
    ctypes.CDLL("libc.so.6").malloc_trim(0)


def digest(t):
    import numpy as np
    # The array's own bytes, not a copy of them: at V = 1e7 a copy is 2.56 GB more.
    return hashlib.sha256(np.ascontiguousarray(t.numpy(), dtype="<f4")).hexdigest()


def worker(kind):
    """A peer process: reads commands (JSON lines) on stdin, answers one JSON line each.
    kind 'reused' or 'fresh' (see the module's docstring)."""
    import numpy as np
    import torch
    PoolingMode, DenseTableBatchedEmbeddingBagsCodegen = fbgemm_classes()
    fbgemm = PoolingMode is not None
    s = {}
    for line in sys.stdin:
        cmd = json.loads(line)
        if cmd["cmd"] == "load":
            s.clear()
            # Hand the last point's buffers back: with freed pages kept (KEPT), the
            # whole grid's largest points piled up to 15 GB and met the OOM killer.
            trim_heap()
            v, d, t, work = cmd["V"], cmd["d"], cmd["T"], pathlib.Path(cmd["dir"])
            s.update(v=v, d=d, t=t)
            s["ids"] = torch.from_numpy(np.fromfile(work / "ids.i64", dtype="<i8"))
            s["dy"] = torch.from_numpy(np.fromfile(work / "dy.f32", dtype="<f4").reshape(t, d))
            s["table"] = torch.from_numpy(np.fromfile(work / "table.f32", dtype="<f4").reshape(v, d))
            if kind == "reused":
                s["y"], s["g"] = torch.empty(t, d), torch.empty(v, d)
            if fbgemm:
                m = DenseTableBatchedEmbeddingBagsCodegen([(v, d)], pooling_mode=PoolingMode.NONE, use_cpu=True)
                with torch.no_grad():
                    m.weights.copy_(s["table"].reshape(-1))
                s["module"], s["offsets"] = m, torch.arange(t + 1, dtype=torch.int64)
            print(json.dumps({"fbgemm": fbgemm, "torch": torch.__version__}), flush=True)
            continue
        torch.set_num_threads(cmd["threads"])
        v, d, ids, dy, table = s["v"], s["d"], s["ids"], s["dy"], s["table"]
        cases = {}
        if kind == "reused":
            y, g = s["y"], s["g"]
            cases["torch", "forward"] = lambda: torch.index_select(table, 0, ids, out=y)
            cases["torch", "backward"] = lambda: (g.zero_(), g.index_add_(0, ids, dy))[1]
        else:
            cases["torch", "forward"] = lambda: torch.nn.functional.embedding(ids, table)
            cases["torch", "backward"] = lambda: torch.ops.aten.embedding_dense_backward(dy, ids, v, -1, False)
        if fbgemm:
            m, offsets = s["module"], s["offsets"]
            w = m.weights.detach()
            cases["fbgemm", "forward"] = lambda: m(ids, offsets)
            cases["fbgemm-nobag", "forward"] = lambda: torch.ops.fbgemm.split_embedding_nobag_codegen_forward_cpu(
                w, m.weights_offsets, d, m.hash_size_cumsum, ids, offsets, 0)
            cases["fbgemm", "backward"] = lambda: torch.ops.fbgemm.split_embedding_backward_codegen_dense_cpu(
                dy, w, m.weights_offsets, m.D_offsets, d, m.hash_size_cumsum, m.total_hash_size_bits, ids, offsets,
                int(PoolingMode.NONE), None, 0.0).view(v, d)
        with torch.no_grad():
            print(json.dumps(time_cases(cases)), flush=True)


def fbgemm_classes():
    """FBGEMM's PoolingMode and dense TBE module, or (None, None) where it is not
    installed or --peers leaves it out."""
    try:
        if os.environ.get("KEMBED_PEERS_NO_FBGEMM"):
            raise ImportError("left out by --peers")
        from fbgemm_gpu.split_table_batched_embeddings_ops_common import PoolingMode
        from fbgemm_gpu.split_table_batched_embeddings_ops_training import DenseTableBatchedEmbeddingBagsCodegen
        return PoolingMode, DenseTableBatchedEmbeddingBagsCodegen
    except ImportError:
        return None, None


def time_cases(cases, grad_ops=()):
    """Each case timed (best()), its output's SHA-256 taken: {"peer/op": {...}}. Ops in
    grad_ops run with autograd on."""
    import torch
    out, held = {}, {}
    for (peer, op), f in cases.items():
        def call():
            held.clear()  # the last output goes first, so that a kept page can serve the next
            held["out"] = f()
        with torch.set_grad_enabled(op in grad_ops):
            seconds, faults = best(call)
        out[f"{peer}/{op}"] = {"seconds": seconds, "faults_per_call": faults, "sha256": digest(held["out"])}
        held.clear()
    return out


class Peer:
    """A worker process of `script` (this one's, or bench_bags.py's) of one kind."""

    def __init__(self, kind, fbgemm=True, script=__file__):
        env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
        if kind == "reused":
            env.update(KEPT)
        if not fbgemm:
            env["KEMBED_PEERS_NO_FBGEMM"] = "1"
        self.kind = kind
        self.allocator = "glibc, freed pages kept" if kind == "reused" else "glibc"
        # A peer gets every CPU whatever this process's mask (a parent's OMP_PROC_BIND).
        self.proc = subprocess.Popen([sys.executable, script, "--worker", kind], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True, env=env,
                                     preexec_fn=lambda: os.sched_setaffinity(0, ALL_CPUS))

    def ask(self, **cmd):
        self.proc.stdin.write(json.dumps(cmd) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise SystemExit(f"bench_peers: the {self.kind} peer process ended (exit {self.proc.wait()})")
        return json.loads(line)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait()


def zipf_ids(rng, v, t, s=1.1):
    import numpy as np
    w = 1.0 / np.arange(1, v + 1, dtype=np.float64) ** s
    cdf = np.cumsum(w)
    return np.minimum(np.searchsorted(cdf, rng.random(t) * cdf[-1], side="right"), v - 1).astype(np.int64)


def write_csv(path, rows, fields=FIELDS):
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)


def kembed_run(bench, work, v, d, t, threads):
    cmd = [bench, "--inputs", str(work), "--rows", str(v), "--dim", str(d), "--positions", str(t),
           "--backend", "openmp", "--threads", str(threads)]
    env = {k: val for k, val in os.environ.items() if k != "OMP_WAIT_POLICY" and not k.startswith("MALLOC_")}
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True, env=env,
                                     preexec_fn=lambda: os.sched_setaffinity(0, ALL_CPUS)).stdout)


def measure(a):
    import numpy as np
    vs = a.rows or [100000, 1000000]
    ds = a.dims or [64, 128]
    ts = a.positions or [100000, 1000000]
    dists = ["zipf", "uniform"] if a.uniform else ["zipf"]
    work = pathlib.Path("/dev/shm/kembed-bench-peers")
    work.mkdir(parents=True, exist_ok=True)
    pathlib.Path(a.csv).parent.mkdir(parents=True, exist_ok=True)
    peers = [Peer(call, fbgemm="fbgemm" in a.peers) for call in a.calls]
    rng = np.random.default_rng(2026)
    rows = []
    try:
        for d in ds:
            for v in vs:
                for t in ts:
                    for dist in dists:
                        ids = zipf_ids(rng, v, t) if dist == "zipf" else rng.integers(0, v, t, dtype=np.int64)
                        ids.tofile(work / "ids.i64")
                        rng.uniform(-1, 1, (t, d)).astype(np.float32).tofile(work / "dy.f32")
                        rng.uniform(-1, 1, (v, d)).astype(np.float32).tofile(work / "table.f32")
                        for p in peers:
                            info = p.ask(cmd="load", dir=str(work), V=v, d=d, T=t)
                        rows += point(a, peers, work, dict(V=v, d=d, T=t, ids=dist))
                        write_csv(a.csv, rows)  # after every point: a crash keeps what was measured
        print(f"bench_peers: torch {info['torch']}, FBGEMM {'yes' if info['fbgemm'] else 'not installed'}")
    finally:
        for p in peers:
            p.close()
        for f in work.iterdir():
            f.unlink()
    return rows


def point(a, peers, work, key):
    """Every run at one point, interleaved over rounds; the best of each kept."""
    bestof = {}

    def keep(k, seconds, **rest):
        if k not in bestof or seconds < bestof[k]["seconds"]:
            bestof[k] = dict(seconds=seconds, **rest)

    for r in range(a.rounds):
        order = a.threads if r % 2 == 0 else a.threads[::-1]
        for threads in order:
            ours = kembed_run(a.bench, work, key["V"], key["d"], key["T"], threads)
            keep((threads, "forward", "kembed", "reused"), ours["forward_seconds"], sha=ours["y_sha256"], faults="")
            keep((threads, "backward", "kembed", "reused"), ours["backward_seconds"], sha=ours["grad_sha256"],
                 faults="")
            keep((threads, "backward", "memcpy", "reused"), ours["memcpy_backward_bytes_seconds"], sha=None, faults="")
            for p in (peers if r % 2 == 0 else peers[::-1]):
                for name, got in p.ask(cmd="time", threads=threads).items():
                    peer, op = name.split("/")
                    keep((threads, op, peer, p.kind), got["seconds"], sha=got["sha256"],
                         faults=round(got["faults_per_call"]), allocator=p.allocator)
    rows = []
    for (threads, op, peer, call), b in sorted(bestof.items(), key=lambda kv: (kv[0][0], kv[0][1], kv[0][2] != "kembed")):
        ours = bestof[(threads, op, "kembed", "reused")]
        rows.append(dict(key, threads=threads, op=op, peer=peer, call=call,
                         allocator=b.get("allocator", "kembed::make_matrix"), seconds=f"{b['seconds']:.6g}",
                         faults_per_call=b["faults"], peer_over_kembed=f"{b['seconds'] / ours['seconds']:.4f}",
                         bits_equal="" if b["sha"] is None else b["sha"] == ours["sha"]))
        print(f"{key['V']:>8} {key['d']:>4} {key['T']:>8} {threads} {op:>8} {peer:>13} {call:>6} "
              f"{b['seconds'] * 1e3:9.3f} ms  x{b['seconds'] / ours['seconds']:5.2f}  faults {b['faults']!s:>7} "
              f"{'' if b['sha'] is None else 'equal' if b['sha'] == ours['sha'] else 'DIFFER'}", flush=True)
    return rows


def table(path):
    """The doc's tables from a CSV this script wrote (no torch needed)."""
    with open(path) as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        r["seconds"], r["peer_over_kembed"] = float(r["seconds"]), float(r["peer_over_kembed"])
    points = list(dict.fromkeys((r["V"], r["d"], r["T"], r["ids"]) for r in rows))
    threads = sorted({r["threads"] for r in rows}, key=int)
    cols = [("forward", "torch"), ("forward", "fbgemm"), ("forward", "fbgemm-nobag"), ("backward", "torch"),
            ("backward", "fbgemm")]
    cols = [c for c in cols if any((r["op"], r["peer"]) == c for r in rows)]
    both = len({p[3] for p in points}) > 1  # Zipf and uniform: say which row is which
    key_head, key_rule = ("| V | d | T | ids |", "| --- | --- | --- | --- |") if both else ("| V | d | T |", "| --- | --- | --- |")

    def key(v, d, t, ids):
        return f"| {int(v):g} | {d} | {int(t):g} |" + (f" {ids} |" if both else "")
    lines = []
    for call in ("reused", "fresh"):
        if not any(r["call"] == call and r["peer"] not in ("kembed", "memcpy") for r in rows):
            continue  # a run with --calls that left this one out
        lines.append(f"\nPeer time / kembed time, peers {'writing into a reused buffer' if call == 'reused' else 'as usually called (fresh outputs, glibc)'}"
                     " (above 1: kembed faster; kembed ms in brackets):\n")
        lines.append(f"{key_head} threads | " + " | ".join(f"{op} {peer}" for op, peer in cols) + " |")
        lines.append(f"{key_rule} --- | " + " | ".join("---" for _ in cols) + " |")
        for (v, d, t, ids) in points:
            for th in threads:
                at = {(r["op"], r["peer"]): r for r in rows if (r["V"], r["d"], r["T"], r["ids"], r["threads"]) == (v, d, t, ids, th)
                      and r["call"] in (call, "reused" if r["peer"] == "kembed" else call)}
                cells = []
                for op, peer in cols:
                    r = at.get((op, peer))
                    if r is None:
                        cells.append("-")
                        continue
                    bits = "" if r["bits_equal"] == "True" else " (other bits)"
                    cells.append(f"{r['peer_over_kembed']:.2f}{bits}")
                kb, kf = at[("backward", "kembed")], at[("forward", "kembed")]
                cells[0] += f" ({kf['seconds'] * 1e3:.3g})"
                cells[[c[0] for c in cols].index("backward")] += f" ({kb['seconds'] * 1e3:.3g})"
                lines.append(f"{key(v, d, t, ids)} {th} | " + " | ".join(cells) + " |")
    # The second thread: kembed's backward against a memcpy of the same bytes.
    if len(threads) >= 2:
        lo, hi = threads[0], threads[-1]
        lines.append(f"\nSpeed-up from {lo} to {hi} threads (time at {lo} / time at {hi}):\n")
        lines.append(f"{key_head} kembed backward | memcpy of its bytes | kembed forward | torch backward (reused) | FBGEMM backward |")
        lines.append(f"{key_rule} --- | --- | --- | --- | --- |")
        for (v, d, t, ids) in points:
            def up(op, peer, call="reused"):
                got = {r["threads"]: r["seconds"] for r in rows if (r["V"], r["d"], r["T"], r["ids"], r["op"], r["peer"], r["call"]) == (v, d, t, ids, op, peer, call)}
                return f"{got[lo] / got[hi]:.2f}" if lo in got and hi in got else "-"
            lines.append(f"{key(v, d, t, ids)} {up('backward', 'kembed')} | {up('backward', 'memcpy')} | "
                         f"{up('forward', 'kembed')} | {up('backward', 'torch')} | {up('backward', 'fbgemm')} |")
    bad = [r for r in rows if r["bits_equal"] == "False"]
    slower = [r for r in rows if r["peer"] not in ("kembed", "memcpy") and r["peer_over_kembed"] < 1]
    lines.append(f"\n{len(rows)} rows; other bits at {len(bad)}; a peer faster than kembed at {len(slower)}"
                 + (": " + "; ".join(f"{r['op']} {r['peer']} {r['call']} V={int(r['V']):g} d={r['d']} T={int(r['T']):g} "
                                     + (f"{r['ids']} " if both else "")
                                     + f"{r['threads']} thr {r['peer_over_kembed']:.2f}" for r in slower) if slower else "") + ".")
    return "\n".join(lines).lstrip("\n") + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("bench", nargs="?", help="path to kembed-bench (an OpenMP build)")
    p.add_argument("--csv", default="bench/results/peers.csv")
    p.add_argument("--table", metavar="CSV", help="print the markdown tables of a CSV and exit")
    p.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--uniform", action="store_true", help="uniform ids as well as Zipf")
    p.add_argument("--peers", nargs="+", choices=["torch", "fbgemm"], default=["torch", "fbgemm"],
                   help="fbgemm is used where installed, unless left out here")
    p.add_argument("--calls", nargs="+", choices=["reused", "fresh"], default=["reused", "fresh"],
                   help="the ways each peer is called (see above)")
    p.add_argument("--rows", type=int, nargs="+", help="V values (default 1e5 1e6)")
    p.add_argument("--dims", type=int, nargs="+", help="d values (default 64 128)")
    p.add_argument("--positions", type=int, nargs="+", help="T values (default 1e5 1e6)")
    p.add_argument("--worker", choices=["reused", "fresh"], help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.worker:
        return worker(a.worker)
    if a.table:
        sys.stdout.write(table(a.table))
        return 0
    if not a.bench:
        p.error("give the path to kembed-bench, or --table CSV")
    rows = measure(a)
    sys.stdout.write(table(a.csv))
    return 1 if any(r["bits_equal"] is False for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
