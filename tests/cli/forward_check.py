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
print("forward_check:", "1 passed, 0 failed" if ok else "0 passed, 1 failed")
sys.exit(0 if ok else 1)
