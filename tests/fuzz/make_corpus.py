"""Makes the fuzz target's seed corpus (tests/fuzz/corpus): small files of every
kembed format, written by kembed itself, plus h5py-written and damaged variants.

    make_corpus.py KEMBED OUTDIR        (needs h5py and numpy)
"""
import os
import shutil
import subprocess
import sys

import h5py
import numpy as np

kembed, out = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
os.makedirs(out, exist_ok=True)
work = out + ".work"
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
os.chdir(work)


def k(*args):
    subprocess.run([kembed, "-q", *args], check=True, stdout=subprocess.DEVNULL)


k("make-table", "--out", "table.h5", "--rows", "12", "--dim", "4", "--padding-idx", "0")
k("make-batch", "--out", "batch.h5", "--zipf", "12", "--positions", "40", "--dim", "4")
k("backward", "--table", "table.h5", "--batch", "batch.h5", "--out", "run.h5", "--run-id", "seed")
k("backward", "--table", "table.h5", "--batch", "batch.h5", "--out", "run_sparse.h5", "--run-id", "seed", "--sparse")
k("forward", "--table", "table.h5", "--ids", "batch.h5", "--out", "forward.h5")
# A weighted bag batch (offsets, dy per bag, per_sample_weights).
k("make-batch", "--out", "bags.h5", "--zipf", "12", "--positions", "40", "--bags", "7", "--weighted", "--dim", "4")
files = {"table": "table.h5", "batch": "batch.h5", "run": "run.h5", "run_sparse": "run_sparse.h5",
         "forward": "forward.h5", "bags": "bags.h5"}

# Checkpoints as kembed writes them (digests included), dense and sparse: a job on a
# batch whose id 69,000 is bad stops there and keeps its checkpoint at 65,536.
with h5py.File("long_batch.h5", "w") as f:
    ids = np.arange(70000) % 12
    ids[69000] = 99
    f["ids"] = ids.astype("int64")
    f["dy"] = np.ones((70000, 4), dtype="float32")
for name, extra in [("checkpoint_kembed.h5", []), ("checkpoint_sparse.h5", ["--sparse"])]:
    status = subprocess.run([kembed, "-q", "backward", "--table", "table.h5", "--batch", "long_batch.h5", "--out",
                             "unfinished.h5", "--checkpoint-every", "65536", "--checkpoint", name, *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode
    assert status == 2 and os.path.exists(name), (name, status)
    files[name[:-3]] = name

with h5py.File("table.h5") as t, h5py.File("checkpoint.h5", "w") as c:  # an older kembed's: no digests
    for name, value in [("format", "kembed-checkpoint-1"), ("kembed_version", "0.1.0"), ("job_id", "seed"),
                        ("table_sha256", "0" * 64), ("batch_sha256", "1" * 64), ("plan", "auto"),
                        ("numeric_mode", "identical")]:
        c.attrs[name] = value
    for name, value in [("position", 20), ("microbatches", 2), ("microbatch_size", 10), ("padding_idx", 0),
                        ("num_embeddings", 12), ("embedding_dim", 4)]:
        c.attrs[name] = np.int64(value)
    c.attrs["elapsed_seconds"] = 0.5
    c.create_dataset("gradient", data=t["weight"][...], chunks=(12, 4), fletcher32=True)
    c.create_dataset("counts", data=np.arange(12, dtype="int64"), chunks=(12,), fletcher32=True)
files["checkpoint"] = "checkpoint.h5"

with h5py.File("plain_batch.h5", "w") as f:  # a batch made by another tool
    f["ids"] = np.arange(30, dtype="int32") % 12
    f["dy"] = np.ones((30, 4), dtype="float32")
    f["weight"] = np.ones((12, 4), dtype="float64")
files["plain"] = "plain_batch.h5"


def variant(name, src, edit):
    shutil.copyfile(src, name)
    with h5py.File(name, "r+") as f:
        edit(f)
    files[name[:-3]] = name


def reset(obj, name, value):
    if name in obj.attrs:
        del obj.attrs[name]
    obj.attrs[name] = value


variant("run_arrays.h5", "run.h5", lambda f: (reset(f, "plan", ["a", "b"]), reset(f["timings"], "x", [1.0, 2.0])))
variant("table_vlen_int.h5", "table.h5", lambda f: (reset(f, "kembed_version", np.int64(3)),
                                                    reset(f, "format", "kembed-embedding-999999999999999999999")))
variant("table_lzf.h5", "table.h5", lambda f: (f.__delitem__("weight"), f.create_dataset(
    "weight", data=np.ones((12, 4), dtype="float32"), compression="lzf")))
variant("batch_sparse.h5", "batch.h5", lambda f: (f.__delitem__("ids"), f.create_dataset(
    "ids", shape=(2 ** 40,), dtype="int64", chunks=(64,)).__setitem__(slice(0, 64), 1)))
layout = h5py.VirtualLayout(shape=(12, 4), dtype="float32")
layout[:] = h5py.VirtualSource("gone.h5", "w", shape=(12, 4))
variant("table_virtual.h5", "table.h5", lambda f: (f.__delitem__("weight"), f.create_virtual_dataset("weight", layout)))

def scaled_summary(f):
    level = f[f"summary/rows_{f['summary/block_rows'][0]}"]
    level["max"][...] = level["max"][...] * 1000


variant("run_summary_scaled.h5", "run.h5", scaled_summary)
variant("run_summary_levels.h5", "run_sparse.h5", lambda f: f["summary/block_rows"].__setitem__(0, 3))
variant("run_counts_negative.h5", "run.h5", lambda f: f["counts"].__setitem__(0, -5))
variant("checkpoint_edited.h5", "checkpoint_kembed.h5", lambda f: reset(f, "position", np.int64(1)))

shutil.copyfile("run.h5", "run_truncated.h5")
with open("run_truncated.h5", "r+b") as f:
    f.truncate(os.path.getsize("run.h5") * 2 // 3)
files["run_truncated"] = "run_truncated.h5"

for old in os.listdir(out):
    os.remove(os.path.join(out, old))
for name, path in sorted(files.items()):
    shutil.copyfile(path, os.path.join(out, name + ".h5"))
shutil.rmtree(work)
print(f"{len(files)} seed files in {out}, {sum(os.path.getsize(os.path.join(out, f)) for f in os.listdir(out))} bytes")
