#!/usr/bin/env python3
"""kembed backward --sparse, checked with h5py against the dense run of the same batch.

- the sparse file lists exactly the rows the batch references, ascending, with the
  dense run's values and counts, bit for bit, and its digest is the records' SHA-256;
- kembed diff calls the sparse and the dense run identical; info says sparse;
- any --microbatch gives the same file contents; a table that asks for sparse gets it;
- with padding and scale_grad_by_freq=batch as well;
- a sparse job killed after its checkpoints and resumed gives the same file
  contents as one never interrupted; a dense job does not resume a sparse checkpoint.
"""
import hashlib
import os
import subprocess
import sys

import h5py
import numpy as np

kembed, work = sys.argv[1], sys.argv[2]
failures = []


def run(*args, ok=True):
    r = subprocess.run([kembed, "-q", *args], capture_output=True, text=True)
    if ok and r.returncode != 0:
        raise SystemExit(f"sparse_check: {' '.join(args)} failed: {r.stderr}")
    return r


def read(path):
    with h5py.File(path) as f:
        return {k: f[k][...] for k in ("gradient", "counts")} | ({"rows": f["rows"][...]} if "rows" in f else {}) | {
            "sha": f.attrs["gradient_sha256"], "format": f.attrs["format"]}


run("make-table", "--out", f"{work}/sp_t.h5", "--rows", "5000", "--dim", "6", "--seed", "5", "--padding-idx", "2")
run("make-table", "--out", f"{work}/sp_t_sparse.h5", "--rows", "5000", "--dim", "6", "--seed", "5", "--padding-idx", "2", "--sparse")
run("make-batch", "--out", f"{work}/sp_b.h5", "--zipf", "5000", "--positions", "4000", "--dim", "6", "--seed", "6")
for extra in ([], ["--scale-grad-by-freq", "batch"]):
    tag = "scaled" if extra else "plain"
    run("backward", "--table", f"{work}/sp_t.h5", "--batch", f"{work}/sp_b.h5", "--out", f"{work}/sp_dense_{tag}.h5", *extra)
    dense = read(f"{work}/sp_dense_{tag}.h5")
    seen = None
    for mb, table in ((65536, "sp_t.h5"), (333, "sp_t.h5"), (1, "sp_t_sparse.h5")):
        out = f"{work}/sp_sparse_{tag}_{mb}.h5"
        flag = [] if table.endswith("sparse.h5") else ["--sparse"]
        run("backward", "--table", f"{work}/{table}", "--batch", f"{work}/sp_b.h5", "--out", out, "--microbatch", str(mb), *flag, *extra)
        s = read(out)
        want_rows = np.nonzero(dense["counts"])[0]
        if s["format"] != "kembed-sparse-run-1":
            failures.append(f"{out}: format {s['format']}")
        if not np.array_equal(s["rows"], want_rows):
            failures.append(f"{out}: rows are not the referenced rows ({len(s['rows'])} vs {len(want_rows)})")
            continue
        if len(want_rows) > 3000:
            failures.append(f"{out}: the batch should leave most of the 5000 rows untouched")
        if not np.array_equal(s["gradient"].view(np.uint32), dense["gradient"][want_rows].view(np.uint32)):
            failures.append(f"{out}: values differ from the dense run's rows")
        if not np.array_equal(s["counts"], dense["counts"][want_rows]):
            failures.append(f"{out}: counts differ from the dense run's")
        rec = np.zeros(len(want_rows), dtype=[("row", "<i8"), ("v", "<f4", (6,))])
        rec["row"], rec["v"] = s["rows"], s["gradient"]
        if hashlib.sha256(rec.tobytes()).hexdigest() != s["sha"]:
            failures.append(f"{out}: gradient_sha256 is not the records' SHA-256")
        if seen is not None and not all(np.array_equal(seen[k], s[k]) for k in ("rows", "gradient", "counts")):
            failures.append(f"{out}: differs from the first sparse run")
        seen = s
        d = run("diff", f"{work}/sp_dense_{tag}.h5", out, ok=False)
        if d.returncode != 0 or "identical" not in d.stdout:
            failures.append(f"diff dense vs {out}: {d.returncode} {d.stdout}")
info = run("info", f"{work}/sp_sparse_plain_1.h5").stdout
if "rows listed" not in info:
    failures.append("info does not say the run is sparse")
# Killed (KEMBED_TEST_KILL_AT: after the third block of 70,000, when the first
# checkpoint is surely written) and resumed.
run("make-batch", "--out", f"{work}/sp_big.h5", "--zipf", "5000", "--positions", "300000", "--dim", "6", "--seed", "9")
common = ["backward", "--table", f"{work}/sp_t.h5", "--batch", f"{work}/sp_big.h5", "--sparse", "--microbatch", "70000"]
run(*common, "--out", f"{work}/sp_whole.h5")
for stale in (f"{work}/sp_resumed.h5", f"{work}/sp_resumed.h5.checkpoint"):
    if os.path.exists(stale):
        os.remove(stale)
killed = subprocess.run([kembed, "-q", *common, "--out", f"{work}/sp_resumed.h5", "--checkpoint-every", "70000"],
                        env=os.environ | {"KEMBED_TEST_KILL_AT": "0:210000"}, capture_output=True)
if killed.returncode == 0 or not os.path.exists(f"{work}/sp_resumed.h5.checkpoint"):
    failures.append(f"the killed sparse job: exit {killed.returncode}, checkpoint left: "
                    f"{os.path.exists(f'{work}/sp_resumed.h5.checkpoint')}")
dense_resume = run("backward", "--table", f"{work}/sp_t.h5", "--batch", f"{work}/sp_big.h5", "--microbatch", "70000",
                   "--out", f"{work}/sp_dense_resume.h5", "--resume", "--checkpoint", f"{work}/sp_resumed.h5.checkpoint",
                   ok=False)
if dense_resume.returncode != 2 or "it holds a row-sparse gradient, this job a dense one" not in dense_resume.stderr:
    failures.append(f"a dense job resuming a sparse checkpoint: {dense_resume.returncode} {dense_resume.stderr}")
resumed = subprocess.run([kembed, *common, "--out", f"{work}/sp_resumed.h5", "--checkpoint-every", "70000", "--resume"],
                         capture_output=True, text=True)
if resumed.returncode != 0 or "resuming from" not in resumed.stderr:
    failures.append(f"the sparse resume: exit {resumed.returncode}: {resumed.stderr[-300:]}")
else:
    a, b = read(f"{work}/sp_whole.h5"), read(f"{work}/sp_resumed.h5")
    if not all(np.array_equal(a[k], b[k]) for k in ("rows", "gradient", "counts")) or a["sha"] != b["sha"]:
        failures.append("the resumed sparse job differs from the uninterrupted one")
    if os.path.exists(f"{work}/sp_resumed.h5.checkpoint"):
        failures.append("the finished sparse job left its checkpoint")
for f in failures:
    print("sparse_check:", f, file=sys.stderr)
print(f"sparse_check: {'all passed' if not failures else str(len(failures)) + ' failed'}")
sys.exit(1 if failures else 0)
