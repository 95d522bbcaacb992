#!/usr/bin/env python3
"""torch's CUDA (or ROCm) embedding forward and embedding_dense_backward on the shapes
kembed-device-bench --quick times, each against the device's copy bandwidth measured
in the same run (a copy of the bytes the operation moves), so that the fractions
compare with kembed-device-bench's. Run by scripts/device-check.sh where a Python
with torch and a GPU is found (KEMBED_TORCH_PYTHON, else python3); not in CI.

    python3 scripts/bench_torch_device.py [--full]
"""
import sys
import time

import torch

QUICK = [(100000, 64, 100000), (1000, 128, 100000)]
FULL = [(100000, 128, 1000000), (1000000, 64, 1000000), (1000, 512, 1000000), (100000, 16, 1000)]


def best(f, budget=0.3, reps=10):
    f()
    torch.cuda.synchronize()
    times, spent = [], 0.0
    while len(times) < 2 or (spent < budget and len(times) < reps):
        t0 = time.perf_counter()
        f()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        spent += times[-1]
    return min(times)


def zipf_ids(v, t, s=1.1):
    w = 1.0 / torch.arange(1, v + 1, dtype=torch.float64) ** s
    return torch.multinomial(w / w.sum(), t, replacement=True)


def main():
    if not torch.cuda.is_available():
        print("bench_torch_device: torch sees no GPU", file=sys.stderr)
        return 2
    dev = torch.device("cuda")
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
    for v, d, t in FULL if "--full" in sys.argv else QUICK:
        ids = zipf_ids(v, t).to(dev)
        w = torch.rand(v, d, device=dev)
        dy = torch.rand(t, d, device=dev) - 0.5

        def copy_bound(floats):
            a = torch.empty(floats, device=dev)
            b = torch.empty(floats, device=dev)
            return best(lambda: b.copy_(a))

        fwd_bound = copy_bound(t * d)
        bwd_bound = copy_bound((t * d + v * d) // 2 + 1)
        print(f"V = {v}, d = {d}, T = {t} (Zipf 1.1 ids) on torch {dev}")
        print(f"  {'':30} {'seconds':>12} {'copy bound':>12} {'fraction':>9}")
        for name, f, bound in [
            ("forward", lambda: torch.nn.functional.embedding(ids, w), fwd_bound),
            ("embedding_dense_backward", lambda: torch.ops.aten.embedding_dense_backward(dy, ids, v, -1, False),
             bwd_bound),
        ]:
            s = best(f)
            print(f"  {name:30} {s:12.6f} {bound:12.6f} {bound / s:8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
