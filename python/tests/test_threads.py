"""kembed's OpenMP runtime (the system's libgomp) and torch's (its own bundled copy) in
one process: in either import order they run side by side without a crash, each keeps
the thread count it was given, the process holds one pool of each and no more, and
kembed's bits (an Embedding's and an EmbeddingBag's) do not depend on its threads or on
torch's work in between."""
import json

import pytest

from conftest import python, need_torch

need_torch()

SCRIPT = r"""
import json, sys, hashlib
import numpy as np
first, kembed_threads, torch_threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if first == "torch":
    import torch, kembed
else:
    import kembed, torch
import kembed.torch
kembed.set_num_threads(kembed_threads)
torch.set_num_threads(torch_threads)
rng = np.random.default_rng(7)
w = rng.standard_normal((5000, 32), dtype=np.float32)
ids = rng.integers(0, 5000, 30000)
dy = rng.standard_normal((30000, 32), dtype=np.float32)
layer = kembed.Embedding.from_pretrained(w)
module = kembed.torch.Embedding.from_pretrained(torch.from_numpy(w.copy()), freeze=False)
bags = kembed.torch.EmbeddingBag.from_pretrained(torch.from_numpy(w.copy()), freeze=False, mode="max")
offsets = torch.arange(0, 30000, 7)
bag_dy = torch.from_numpy(rng.standard_normal((len(offsets), 32), dtype=np.float32))
a, b = torch.randn(256, 256), torch.randn(256, 256)
digests, bag_digests = set(), set()
for _ in range(5):
    torch.mm(a, b)  # torch's pool between kembed's calls
    digests.add(hashlib.sha256(layer.backward(ids, dy).tobytes()).hexdigest())
    module.weight.grad = bags.weight.grad = None
    module(torch.from_numpy(ids)).backward(torch.from_numpy(dy))
    digests.add(hashlib.sha256(module.weight.grad.numpy().tobytes()).hexdigest())
    bags(torch.from_numpy(ids), offsets).backward(bag_dy)
    bag_digests.add(hashlib.sha256(bags.weight.grad.numpy().tobytes()).hexdigest())
with open("/proc/self/status") as f:
    threads = int(next(l for l in f if l.startswith("Threads:")).split()[1])
print(json.dumps({"digests": sorted(digests), "bags": sorted(bag_digests), "threads": threads, "kembed": kembed.get_num_threads(),
                  "torch": torch.get_num_threads()}))
"""


def run_case(first, k, t):
    out = python("-c", SCRIPT, first, str(k), str(t))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("first", ["torch", "kembed"])
def test_two_openmp_runtimes_in_one_process(first):
    base = {t: run_case(first, 1, t) for t in (1, 2)}
    assert len(base[1]["digests"]) == 1  # the module's gradient is the layer's, call after call
    assert len(base[1]["bags"]) == 1
    for k, t in [(2, 1), (2, 2), (4, 2)]:
        got = run_case(first, k, t)
        assert (got["kembed"], got["torch"]) == (k, t)
        assert got["digests"] == base[1]["digests"], (k, t)
        assert got["bags"] == base[1]["bags"], (k, t)
        # kembed adds its k - 1 workers and nothing else, beside whatever torch runs at t
        assert got["threads"] - base[t]["threads"] <= k - 1, (got, base[t])
