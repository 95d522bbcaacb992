#!/usr/bin/env python3
"""kembed forward's output is the table's rows at the ids, bit for bit (checked with h5py)."""
import subprocess
import sys

import h5py
import numpy as np

kembed, work = sys.argv[1], sys.argv[2]
subprocess.run([kembed, "-q", "make-table", "--out", f"{work}/ft.h5", "--rows", "300", "--dim", "7", "--seed", "2"], check=True, capture_output=True)
subprocess.run([kembed, "-q", "make-batch", "--out", f"{work}/fb.h5", "--zipf", "300", "--positions", "5000", "--dim", "7"], check=True, capture_output=True)
subprocess.run([kembed, "-q", "forward", "--table", f"{work}/ft.h5", "--ids", f"{work}/fb.h5", "--out", f"{work}/fy.h5", "--microbatch", "333"], check=True, capture_output=True)
with h5py.File(f"{work}/ft.h5") as t, h5py.File(f"{work}/fb.h5") as b, h5py.File(f"{work}/fy.h5") as y:
    want = t["weight"][...][b["ids"][...]]
    got = y["y"][...]
    ok = got.shape == want.shape and np.array_equal(got.view(np.uint32), want.view(np.uint32))
    ok = ok and y.attrs["format"] == "kembed-forward-1"

# With max_norm (one forward call: --microbatch covers the batch), y holds each
# referenced row renormalised once by kembed's rule (docs/CONTRACT.md): a binary64
# norm summed over columns in order, scale = float32(max_norm / (norm + 1e-7)).
subprocess.run([kembed, "-q", "make-table", "--out", f"{work}/ft_norm.h5", "--rows", "300", "--dim", "7", "--seed", "2",
                "--max-norm", "0.9"], check=True, capture_output=True)
subprocess.run([kembed, "-q", "forward", "--table", f"{work}/ft_norm.h5", "--ids", f"{work}/fb.h5", "--out",
                f"{work}/fy_norm.h5", "--microbatch", "5000"], check=True, capture_output=True)
with h5py.File(f"{work}/ft_norm.h5") as t, h5py.File(f"{work}/fb.h5") as b, h5py.File(f"{work}/fy_norm.h5") as y:
    table, ids = t["weight"][...], b["ids"][...]
    rows = np.unique(ids)
    acc = np.zeros(len(rows))
    for c in range(table.shape[1]):
        w = table[rows, c].astype(np.float64)
        acc = acc + w * w
    norm = np.sqrt(acc)
    over = norm > 0.9
    renormed = table.copy()
    renormed[rows[over]] = table[rows[over]] * (0.9 / (norm[over] + 1e-7)).astype(np.float32)[:, None]
    want = renormed[ids]
    got = y["y"][...]
    ok_norm = over.sum() > 10 and np.array_equal(got.view(np.uint32), want.view(np.uint32))
    ok_norm = ok_norm and np.array_equal(t["weight"][...].view(np.uint32), table.view(np.uint32))  # file unchanged
    if not ok_norm:
        print("forward_check: max_norm: y differs from the renormalised rows", file=sys.stderr)
# --max-norm on the command line does what the table's setting does.
subprocess.run([kembed, "-q", "forward", "--table", f"{work}/ft.h5", "--ids", f"{work}/fb.h5", "--out",
                f"{work}/fy_flag.h5", "--microbatch", "5000", "--max-norm", "0.9"], check=True, capture_output=True)
with h5py.File(f"{work}/fy_flag.h5") as a, h5py.File(f"{work}/fy_norm.h5") as b:
    if not np.array_equal(a["y"][...].view(np.uint32), b["y"][...].view(np.uint32)):
        print("forward_check: --max-norm differs from the table's max_norm", file=sys.stderr)
        ok_norm = False
ok = ok and ok_norm
print("forward_check:", "2 passed, 0 failed" if ok else "not all passed")
sys.exit(0 if ok else 1)
