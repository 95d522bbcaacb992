"""Replays inputs that crash, hang or leak inside libhdf5 1.10.8 (scripts/fuzz.sh's
findings) through the HDF5 that h5py bundles, making the reads kembed's loaders make,
to measure what a newer HDF5 would change for kembed.

    replay_newer_hdf5.py INPUT...       (h5py from PyPI; prints one line per input and a tally)

Each input is read in a child process with a 20 s limit, so a crash (a signal) or a
hang (the limit) is counted rather than ending the replay. An exception is the right
answer to a damaged file: "refused".
"""
import subprocess
import sys
from collections import Counter

READS = r"""
import sys, h5py
f = h5py.File(sys.argv[1], "r")
names = ["format", "kembed_version", "created_by", "num_embeddings", "embedding_dim", "padding_idx", "plan",
         "numeric_mode", "run_id", "created", "backend", "threads", "plan_used", "positions", "microbatches",
         "microbatch_size", "gradient_sha256", "job_id", "position", "table_sha256", "batch_sha256",
         "elapsed_seconds", "source", "seed"]
for n in names:                                  # the loaders' attributes, by name
    if n in f.attrs:
        f.attrs[n]
for n in list(f.attrs):                          # kembed info lists every root attribute
    f.attrs[n]
f.visit(lambda name: None)                       # and every link
for d in ["weight", "gradient", "counts", "ids", "dy", "y"]:
    if d in f and isinstance(f[d], h5py.Dataset):
        f[d].shape, f[d].dtype, f[d].id.get_num_chunks() if f[d].chunks else None
        f[d][:4] if f[d].ndim else f[d][()]
if "inputs" in f:
    for g in f["inputs"].values():
        [g.attrs[a] for a in g.attrs]
if "timings" in f:
    [f["timings"].attrs[a] for a in f["timings"].attrs]
if "provenance" in f:
    [f["provenance"][d][()] for d in f["provenance"]]
"""

tally = Counter()
for path in sys.argv[1:]:
    try:
        p = subprocess.run([sys.executable, "-c", READS, path], capture_output=True, text=True, timeout=20)
        outcome = "read or refused" if p.returncode in (0, 1) else f"crash (status {p.returncode})"
    except subprocess.TimeoutExpired:
        outcome = "hang"
    tally[outcome] += 1
    print(f"{outcome}: {path}")
import h5py  # noqa: E402

print(f"newer HDF5 ({h5py.version.hdf5_version}, h5py {h5py.version.version}): " +
      ", ".join(f"{n} {what}" for what, n in tally.most_common()) + f" of {len(sys.argv) - 1} inputs")
