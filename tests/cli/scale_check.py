#!/usr/bin/env python3
"""kembed backward --scale-grad-by-freq, checked with h5py.

- `batch` gives the same bits at every --microbatch (the counts are the whole batch's),
  and equals `call` when one call holds the whole batch;
- `call` at a smaller --microbatch differs (each call counts its own ids), and equals
  the gradient folded call by call with numpy (each term fmaf(dy, float32(1/n), acc),
  fmaf from the C library);
- the run file records the setting; a table's setting is the default, the flag wins.
"""
import ctypes
import subprocess
import sys

import h5py
import numpy as np

kembed, work = sys.argv[1], sys.argv[2]
libm = ctypes.CDLL("libm.so.6")
libm.fmaf.restype = ctypes.c_float
libm.fmaf.argtypes = [ctypes.c_float] * 3


def run(*args):
    subprocess.run([kembed, "-q", *args], check=True, capture_output=True)


def grad(path):
    with h5py.File(path) as f:
        return f["gradient"][...], f.attrs.get("scale_grad_by_freq", "none")


run("make-table", "--out", f"{work}/st.h5", "--rows", "40", "--dim", "3", "--seed", "3")
run("make-table", "--out", f"{work}/st_batch.h5", "--rows", "40", "--dim", "3", "--seed", "3", "--scale-grad-by-freq", "batch")
run("make-batch", "--out", f"{work}/sb.h5", "--zipf", "40", "--positions", "900", "--dim", "3", "--seed", "4")
failures = []
bits = {}
for mb in (1, 37, 900, 5000):
    run("backward", "--table", f"{work}/st_batch.h5", "--batch", f"{work}/sb.h5", "--out", f"{work}/sr_b{mb}.h5", "--microbatch", str(mb))
    bits[mb], attr = grad(f"{work}/sr_b{mb}.h5")
    if attr != "batch":
        failures.append(f"run file says scale_grad_by_freq={attr!r}, want 'batch'")
for mb in (37, 900, 5000):
    if not np.array_equal(bits[mb].view(np.uint32), bits[1].view(np.uint32)):
        failures.append(f"batch: --microbatch {mb} differs from --microbatch 1")
run("backward", "--table", f"{work}/st.h5", "--batch", f"{work}/sb.h5", "--out", f"{work}/sr_c.h5", "--scale-grad-by-freq", "--microbatch", "900")
whole, attr = grad(f"{work}/sr_c.h5")
if attr != "call" or not np.array_equal(whole.view(np.uint32), bits[1].view(np.uint32)):
    failures.append("call with one call over the batch differs from batch")
run("backward", "--table", f"{work}/st_batch.h5", "--batch", f"{work}/sb.h5", "--out", f"{work}/sr_c100.h5", "--scale-grad-by-freq", "call", "--microbatch", "100")
split, _ = grad(f"{work}/sr_c100.h5")
with h5py.File(f"{work}/sb.h5") as b:
    ids, dy = b["ids"][...], b["dy"][...]
want = np.zeros((40, 3), np.float32)
for lo in range(0, len(ids), 100):
    part = ids[lo:lo + 100]
    counts = np.bincount(part, minlength=40)
    for p, r in enumerate(part):
        s = float(np.float32(1.0 / counts[r]))
        for c in range(3):
            want[r, c] = libm.fmaf(float(dy[lo + p, c]), s, float(want[r, c]))
if not np.array_equal(split.view(np.uint32), want.view(np.uint32)):
    failures.append("call at --microbatch 100 differs from numpy's fold call by call")
if np.array_equal(split.view(np.uint32), whole.view(np.uint32)):
    failures.append("call at --microbatch 100 should differ from one call")
run("backward", "--table", f"{work}/st_batch.h5", "--batch", f"{work}/sb.h5", "--out", f"{work}/sr_none.h5", "--scale-grad-by-freq", "none")
plain, attr = grad(f"{work}/sr_none.h5")
with h5py.File(f"{work}/sr_none.h5") as f:
    if "scale_grad_by_freq" in f.attrs:
        failures.append("an unscaled run file has a scale_grad_by_freq attribute")
for f in failures:
    print("scale_check:", f, file=sys.stderr)
print(f"scale_check: {6 - len(failures)} passed, {len(failures)} failed")
sys.exit(1 if failures else 0)
