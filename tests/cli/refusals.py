"""Every refusal of the kembed program, fed to it as a user would.

    refusals.py KEMBED WORKDIR

Each case makes its inputs (good files, then files damaged or rewritten with h5py),
runs one command and checks three things: the exit status, the words of the message,
and that no file in the folder changed, appeared or vanished (refused commands touch
nothing). A command that does not finish in 60 s fails its case (a hang). A few
cases are the other side of a refusal: the command succeeds and leaves a file alone.
"""
import hashlib
import os
import re
import shutil
import struct
import subprocess
import sys
import threading

import h5py
import numpy as np

kembed, work = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
os.chdir(work)


def run(*args, timeout=60):
    try:
        p = subprocess.run([kembed, *args], capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        return "hang", f"did not finish in {timeout} s"


def peak_memory(*args):
    """Runs kembed alone and returns (status, output, its peak resident memory in bytes)."""
    with open("peak.out", "w+") as log:
        p = subprocess.Popen([kembed, *args], stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(p.pid, 0)
        log.seek(0)
        out = log.read()
    os.remove("peak.out")
    return os.waitstatus_to_exitcode(status), out, usage.ru_maxrss * 1024


def must(*args):
    status, out = run("-q", *args)
    if status != 0:
        sys.exit(f"refusals: setting up failed: kembed {' '.join(args)}: {out}")


def snapshot():
    files = {}
    for root, _, names in os.walk(work):
        for n in names:
            p = os.path.join(root, n)
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as f:
                    files[os.path.relpath(p, work)] = hashlib.sha256(f.read()).hexdigest()
            else:
                files[os.path.relpath(p, work)] = "special"
    return files


def copy_with(src, dst, edit):
    shutil.copyfile(src, dst)
    with h5py.File(dst, "r+") as f:
        edit(f)


def set_attr(obj, name, value):
    if name in obj.attrs:
        del obj.attrs[name]
    obj.attrs[name] = value


def flip_bytes_after(path, marker, skip, count=16):
    """Overwrites `count` bytes `skip` bytes after the first `marker` in the file."""
    with open(path, "r+b") as f:
        data = f.read()
        at = data.find(marker)
        assert at >= 0, f"{marker!r} not in {path}"
        f.seek(at + skip)
        f.write(bytes((b ^ 0x5A) for b in data[at + skip:at + skip + count]))


# ---- good inputs --------------------------------------------------------------------
must("make-table", "--out", "t.h5", "--rows", "100", "--dim", "8", "--seed", "1")
must("make-batch", "--out", "b.h5", "--zipf", "100", "--positions", "3000", "--dim", "8", "--seed", "2")
must("backward", "--table", "t.h5", "--batch", "b.h5", "--out", "r.h5")
with open("notes.txt", "w") as f:
    f.write("a user's file that kembed must never replace or remove\n")
# A checkpoint of an unfinished job: its batch has a bad id after the first checkpoint.
ids = np.arange(200000) % 100
ids[150000] = 150
with h5py.File("b_late_bad.h5", "w") as f:
    f["ids"] = ids.astype("int64")
    f["dy"] = np.ones((200000, 8), dtype="float32")
status, out = run("-q", "backward", "--table", "t.h5", "--batch", "b_late_bad.h5", "--out", "partial.h5",
                  "--checkpoint-every", "65536", "--checkpoint", "ckpt.h5")
assert status == 2 and os.path.exists("ckpt.h5"), (status, out)

# ---- damaged and rewritten files ----------------------------------------------------
# ---- digests, as docs/FORMAT.md gives them for h5py ---------------------------------
def sha(data):
    return hashlib.sha256(data).hexdigest()


def records(f):
    """A sparse file's (row, values) records, as its gradient_sha256 hashes them."""
    n, d = f["gradient"].shape
    r = np.zeros(n, [("row", "<i8"), ("v", "<f4", (d,))])
    r["row"], r["v"] = f["rows"][...], f["gradient"][...]
    return r.tobytes()


def checkpoint_text(f):
    a = f.attrs
    fields = ["job_id", "position", "microbatches", "microbatch_size", "table_sha256", "batch_sha256"]
    text = "kembed-checkpoint-1\n" + "".join(f"{k}={a[k]}\n" for k in fields)
    text += f"inputs_fingerprint={a['inputs_fingerprint']}\n" if "inputs_fingerprint" in a else ""
    text += f"plan={a['plan']}\nnumeric_mode={a['numeric_mode']}\n"
    text += f"scale_grad_by_freq={a.get('scale_grad_by_freq', 'none')}\npadding_idx={a['padding_idx']}\n"
    text += "elapsed_seconds=%.17g\n" % a["elapsed_seconds"]
    text += f"num_embeddings={a['num_embeddings']}\nembedding_dim={a['embedding_dim']}\n"
    text += f"listed_rows={a['listed_rows'] if 'listed_rows' in a else -1}\n"
    return text + f"gradient_sha256={a['gradient_sha256']}\ncounts_sha256={a['counts_sha256']}\n"


def redigest_checkpoint(f):
    """An edit made consistent: every digest recomputed, so only kembed's other checks can catch it."""
    sparse = "listed_rows" in f.attrs
    set_attr(f, "gradient_sha256", sha(records(f) if sparse else f["gradient"][...].astype("<f4").tobytes()))
    set_attr(f, "counts_sha256", sha(f["counts"][...].astype("<i8").tobytes()))
    set_attr(f, "checkpoint_sha256", sha(checkpoint_text(f).encode()))


def redigest_counts(f):
    set_attr(f, "counts_sha256", sha(f["counts"][...].astype("<i8").tobytes()))


def summary_sha256(f):
    h = hashlib.sha256()
    for b in f["summary/block_rows"][...]:
        level = f[f"summary/rows_{b}"]
        h.update(np.int64(b).astype("<i8").tobytes())
        h.update(level["counts"][...].astype("<i8").tobytes())
        for field in ("min", "max", "max_abs"):
            h.update(level[field][...].astype("<f4").tobytes())
    return h.hexdigest()


def scale_summary(f, redigest):
    b = f["summary/block_rows"][0]
    level = f[f"summary/rows_{b}"]
    level["min"][...] = level["min"][...] * 1000
    level["max"][...] = level["max"][...] * 1000
    if redigest:
        set_attr(f, "summary_sha256", summary_sha256(f))


def resize(f, name, data):
    del f[name]
    f.create_dataset(name, data=data, chunks=True if len(data) else None, fletcher32=bool(len(data)))


def empty_listing(f):
    set_attr(f, "listed_rows", np.int64(0))
    resize(f, "rows", np.zeros(0, "int64"))
    resize(f, "counts", np.zeros(0, "int64"))
    resize(f, "gradient", np.zeros((0, f["gradient"].shape[1]), "float32"))


def bad_batch(name, ids, bad_at):
    """A batch of ones whose id at `bad_at` is outside the 100-row table (None: all good)."""
    ids = ids.copy()
    if bad_at is not None:
        ids[bad_at] = 150
    with h5py.File(name, "w") as f:
        f["ids"] = ids.astype("int64")
        f["dy"] = np.ones((len(ids), 8), dtype="float32")


def keep_checkpoint(name, batch, *extra):
    status, out = run("-q", "backward", "--table", "t.h5", "--batch", batch, "--out", "partial.h5",
                      "--checkpoint-every", "65536", "--checkpoint", name, *extra)
    assert status == 2 and os.path.exists(name), (status, out)


# Good batches that agree with the bad ones' first 150,000 positions, and checkpoints
# of those positions: dense, with unreferenced rows (ids below 90), and sparse.
def chunked_sha(path):
    """A file's fingerprint as checkpoints record it by default (FORMAT.md, "Input fingerprints")."""
    digests = b""
    with open(path, "rb") as f:
        while block := f.read(1 << 24):
            digests += hashlib.sha256(block).digest()
    return sha(digests)


bad_batch("b_good.h5", np.arange(200000) % 100, None)
good_batch_sha = chunked_sha("b_good.h5")
bad_batch("b_gaps_bad.h5", np.arange(200000) % 90, 150000)
bad_batch("b_gaps.h5", np.arange(200000) % 90, None)
keep_checkpoint("ckpt_gaps.h5", "b_gaps_bad.h5")
keep_checkpoint("ckpt_sparse.h5", "b_gaps_bad.h5", "--sparse")
gaps_batch_sha = chunked_sha("b_gaps.h5")


def with_good_batch(f, batch_sha):
    set_attr(f, "batch_sha256", batch_sha)


def negative_count_kept_sum(f):
    c = f["counts"][...]
    c[1] += c[0] + 3
    c[0] = -3
    f["counts"][...] = c


def first_listed_count_moved(f):
    c = f["counts"][...]
    c[1] += c[0]
    c[0] = 0
    f["counts"][...] = c


def swap_listed_rows(f):
    r = f["rows"][...]
    r[0], r[1] = r[1], r[0]
    f["rows"][...] = r


edits = {  # name: (checkpoint it starts from, edit, recompute the digests after it)
    "ck_position_lowered": ("ckpt.h5", lambda f: set_attr(f, "position", np.int64(65536)), False),
    "ck_position_zero": ("ckpt.h5", lambda f: set_attr(f, "position", np.int64(0)), False),
    "ck_batch_digest": ("ckpt.h5", lambda f: with_good_batch(f, good_batch_sha), False),
    "ck_job_id": ("ckpt.h5", lambda f: set_attr(f, "job_id", "another"), False),
    "ck_microbatches": ("ckpt.h5", lambda f: set_attr(f, "microbatches", np.int64(1)), False),
    "ck_no_digest": ("ckpt.h5", lambda f: f.attrs.__delitem__("checkpoint_sha256"), False),
    "ck_count_negative": ("ckpt.h5", lambda f: f["counts"].__setitem__(3, -3), False),
    "ck_counts_zeroed": ("ckpt.h5", lambda f: f["counts"].__setitem__(Ellipsis, 0), False),
    "ck_gradient_nan": ("ckpt.h5", lambda f: f["gradient"].__setitem__((5, 2), np.nan), False),
    "ck_gradient_doubled": ("ckpt.h5", lambda f: f["gradient"].__setitem__(Ellipsis, 2 * f["gradient"][...]), False),
    "ck_sparse_empty": ("ckpt_sparse.h5", empty_listing, False),
    "ck_sparse_rows_swapped": ("ckpt_sparse.h5", swap_listed_rows, False),
    # consistent edits: the digests match, the invariants do not
    "ck_consistent_position": ("ckpt.h5", lambda f: (with_good_batch(f, good_batch_sha),
                                                     set_attr(f, "position", np.int64(65536))), True),
    "ck_consistent_negative": ("ckpt.h5", lambda f: (with_good_batch(f, good_batch_sha),
                                                     negative_count_kept_sum(f)), True),
    "ck_consistent_nan": ("ckpt.h5", lambda f: (with_good_batch(f, good_batch_sha),
                                                f["gradient"].__setitem__((5, 2), np.nan)), True),
    "ck_consistent_unreferenced": ("ckpt_gaps.h5", lambda f: (with_good_batch(f, gaps_batch_sha),
                                                              f["gradient"].__setitem__((95, 0), 1.0)), True),
    "ck_consistent_sparse_empty": ("ckpt_sparse.h5", lambda f: (with_good_batch(f, gaps_batch_sha),
                                                                empty_listing(f)), True),
    "ck_consistent_sparse_zero": ("ckpt_sparse.h5", lambda f: (with_good_batch(f, gaps_batch_sha),
                                                               first_listed_count_moved(f)), True),
    "ck_consistent_good_batch": ("ckpt.h5", lambda f: with_good_batch(f, good_batch_sha), True),
    "ck_consistent_good_gaps": ("ckpt_sparse.h5", lambda f: with_good_batch(f, gaps_batch_sha), True),
}
for name, (source, edit, redigest) in edits.items():
    copy_with(source, name + ".h5", lambda f: (edit(f), redigest_checkpoint(f) if redigest else None))

# Run files whose counts or summary lie, or whose structure is damaged.
copy_with("r.h5", "r_count_negative.h5", lambda f: f["counts"].__setitem__(0, -3))
copy_with("r.h5", "r_count_zero.h5", lambda f: f["counts"].__setitem__(5, 0))
copy_with("r.h5", "r_count_negative_redigested.h5", lambda f: (f["counts"].__setitem__(0, -3), redigest_counts(f)))
copy_with("r.h5", "r_count_moved_redigested.h5", lambda f: (
    f["counts"].__setitem__(slice(0, 2), f["counts"][0:2] + np.array([-1, 1])), redigest_counts(f)))
copy_with("r.h5", "r_summary_scaled.h5", lambda f: scale_summary(f, False))
copy_with("r.h5", "r_summary_redigested.h5", lambda f: scale_summary(f, True))
copy_with("r.h5", "r_summary_levels.h5", lambda f: f["summary/block_rows"].__setitem__(0, 3))
shutil.copyfile("r.h5", "r_inputs_damaged.h5")
with h5py.File("r.h5") as f:
    inputs_header = h5py.h5o.get_info(f["inputs"].id).addr
    command_line_at = f["provenance/command_line"].id.get_offset()
with open("r_inputs_damaged.h5", "r+b") as f:  # the /inputs group's object header signature
    f.seek(inputs_header)
    f.write(b"XXXX")
shutil.copyfile("r.h5", "r_vlen_huge.h5")
with open("r_vlen_huge.h5", "r+b") as f:  # the command line's stored length: 1.75 GiB
    f.seek(command_line_at)
    f.write(struct.pack("<I", 0x70000000))
must("backward", "--table", "t.h5", "--batch", "b.h5", "--out", "rs.h5", "--sparse")
copy_with("rs.h5", "rs_huge_v.h5", lambda f: set_attr(f, "num_embeddings", np.int64(10 ** 10)))
copy_with("t.h5", "t_nan.h5", lambda f: f["weight"].__setitem__((7, 0), np.nan))
copy_with("t.h5", "t_inf.h5", lambda f: f["weight"].__setitem__((99, 7), -np.inf))

copy_with("r.h5", "r_edited.h5", lambda f: f["gradient"].__setitem__((0, 0), 12345.0))
copy_with("r.h5", "r_edited_consistently.h5", lambda f: (  # and the summary that no longer fits it removed
    f["gradient"].__setitem__((0, 0), 12345.0),
    set_attr(f, "gradient_sha256", hashlib.sha256(f["gradient"][...].astype("<f4").tobytes()).hexdigest()),
    f.__delitem__("summary"), f.attrs.__delitem__("summary_sha256")))
copy_with("r.h5", "r_edited_summary_kept.h5", lambda f: (
    f["gradient"].__setitem__((0, 0), 12345.0),
    set_attr(f, "gradient_sha256", hashlib.sha256(f["gradient"][...].astype("<f4").tobytes()).hexdigest())))
with h5py.File("r.h5") as f:
    offset = f["gradient"].id.get_chunk_info(0).byte_offset
shutil.copyfile("r.h5", "r_damaged.h5")
with open("r_damaged.h5", "r+b") as f:
    f.seek(offset + 8)
    f.write(b"\x00\x01\x02\x03")
copy_with("r.h5", "r_format_array.h5", lambda f: set_attr(f, "format", ["a", "b"]))
copy_with("r.h5", "r_plan_array.h5", lambda f: set_attr(f, "plan", ["scan", "sort"]))
copy_with("r.h5", "r_timing_array.h5", lambda f: set_attr(f["timings"], "total_seconds", [1.0, 2.0]))
copy_with("r.h5", "r_path_array.h5", lambda f: set_attr(f["inputs/table"], "path", ["t.h5", "u.h5"]))
copy_with("r.h5", "r_threads_empty.h5", lambda f: set_attr(f, "threads", np.zeros(0, dtype="int64")))


def command_line_array(f):
    del f["provenance/command_line"]
    f["provenance/command_line"] = np.array([b"kembed", b"backward"], dtype=h5py.string_dtype())


copy_with("r.h5", "r_command_array.h5", command_line_array)
copy_with("r.h5", "r_version_20_digits.h5", lambda f: set_attr(f, "format", "kembed-run-99999999999999999999"))
copy_with("r.h5", "r_format_int.h5", lambda f: set_attr(f, "format", np.int64(1)))
copy_with("t.h5", "t_version_int.h5", lambda f: set_attr(f, "kembed_version", np.int64(1)))
copy_with("t.h5", "t_created_by_int.h5", lambda f: set_attr(f, "created_by", np.int64(7)))
copy_with("t.h5", "t_plan_array.h5", lambda f: set_attr(f, "plan", ["auto", "scan"]))
shutil.copyfile("r.h5", "r_heap.h5")
flip_bytes_after("r_heap.h5", b"GCOL", 16, 64)  # the global heap of the variable-length strings
# A table whose data lie in a file that is gone, as a virtual and as an external dataset.
with h5py.File("source.h5", "w") as f:
    f["w"] = np.ones((100, 8), dtype="float32")
layout = h5py.VirtualLayout(shape=(100, 8), dtype="float32")
layout[:] = h5py.VirtualSource("source.h5", "w", shape=(100, 8))
copy_with("t.h5", "t_virtual.h5", lambda f: (f.__delitem__("weight"), f.create_virtual_dataset("weight", layout)))
os.remove("source.h5")
np.ones((100, 8), dtype="<f4").tofile("raw.bin")
copy_with("t.h5", "t_external.h5", lambda f: (f.__delitem__("weight"), f.create_dataset(
    "weight", shape=(100, 8), dtype="<f4", external=[("raw.bin", 0, 100 * 8 * 4)])))
os.remove("raw.bin")
copy_with("t.h5", "t_lzf.h5", lambda f: (f.__delitem__("weight"), f.create_dataset(
    "weight", data=np.ones((100, 8), dtype="float32"), compression="lzf")))
# padding_idx in files: a row in [0, V) or -1 for none, never a row counted from the end.
copy_with("t.h5", "t_pad_negative.h5", lambda f: set_attr(f, "padding_idx", np.int64(-2)))
copy_with("t.h5", "t_pad_v.h5", lambda f: set_attr(f, "padding_idx", np.int64(100)))
copy_with("r.h5", "r_pad_negative.h5", lambda f: set_attr(f, "padding_idx", np.int64(-100)))
copy_with("ckpt.h5", "ckpt_pad_negative.h5", lambda f: set_attr(f, "padding_idx", np.int64(-3)))
# A 4 KB batch that declares 2^40 positions: one chunk stored, the rest would read as zeros.
with h5py.File("b_huge.h5", "w") as f:
    f.create_dataset("ids", shape=(2 ** 40,), dtype="int64", chunks=(1024,))[:1024] = 1
    f.create_dataset("dy", shape=(2 ** 40, 8), dtype="float32", chunks=(1024, 8))[:1024] = 1
with h5py.File("foreign.h5", "w") as f:
    f["model/emb"] = np.ones((50, 8), dtype="float32")
    f["model/emb64"] = np.array([[1e39, 1.0]], dtype="float64")
os.mkfifo("pipe.h5")
with open("r.h5.checkpoint", "w") as f:  # a user's file where the default checkpoint would go
    f.write("not a checkpoint\n")


def resume(checkpoint, batch="b_good.h5"):
    return ["backward", "--table", "t.h5", "--batch", batch, "--out", "x.h5", "--resume", "--checkpoint", checkpoint]


# kembed step's inputs: a first step (t1.h5 and its state), the next step's run, and
# states edited with h5py (a setting; an array).
must("step", "--table", "t.h5", "--run", "r.h5", "--out", "t1.h5", "--optimizer", "adam", "--lr", "0.01")
must("backward", "--table", "t1.h5", "--batch", "b.h5", "--out", "r1.h5")
copy_with("t1.h5.state", "s_lr.h5", lambda f: set_attr(f, "lr", 0.5))
copy_with("t1.h5.state", "s_moment.h5", lambda f: f["exp_avg"].__setitem__((3, 1), 1.0))
S = ["step", "--table", "t.h5", "--run", "r.h5", "--out", "x.h5"]
S1 = ["step", "--table", "t1.h5", "--run", "r1.h5", "--out", "x.h5"]

left = r"it is not resumed and was left as it is: remove it to start the job again"
B = ["backward", "--table", "t.h5", "--batch", "b.h5"]
cases = [
    # 13. kembed step: a mismatch between table, run and state, a setting the optimizer
    # does not read, an output over an input, an edited state
    ("step: a run computed on another table", ["step", "--table", "t1.h5", "--run", "r.h5", "--out", "x.h5",
                                              "--optimizer", "adam"], 2,
     r"--run r.h5 was computed on a table with SHA-256 of 16 MiB chunks [0-9a-f]{64}, and --table t1.h5 has SHA-256 of 16 MiB chunks"),
    ("step: a state that goes with another table", S + ["--state", "t1.h5.state"], 2,
     r"--state t1.h5.state goes with the table its step wrote"),
    ("step: another optimizer than the state's", S1 + ["--state", "t1.h5.state", "--optimizer", "sgd"], 2,
     r"--state t1.h5.state is adam's state; --optimizer sgd would need its own"),
    ("step: a setting the optimizer does not read", S + ["--optimizer", "adam", "--momentum", "0.9"], 2,
     r"--momentum is not a setting of adam \(it reads lr, weight_decay, eps, beta1, beta2, maximize, "
     r"decoupled_weight_decay\)"),
    ("step: a first step without --optimizer", S, 2, r"--optimizer is needed for a first step"),
    ("step: a negative learning rate", S + ["--optimizer", "sgd", "--lr", "-1"], 2, r"lr"),
    ("step: no such optimizer", S + ["--optimizer", "lamb"], 2, r"optimizer"),
    ("step: --out over the table", ["step", "--table", "t.h5", "--run", "r.h5", "--out", "t.h5", "--optimizer",
                                    "sgd"], 2, r"--out t.h5 is the same file as --table t.h5"),
    ("step: --state-out over the run", S + ["--optimizer", "sgd", "--state-out", "r.h5"], 2,
     r"--state-out r.h5 is the same file as --run r.h5"),
    ("step: a state whose setting was edited", S1 + ["--state", "s_lr.h5"], 2,
     r"s_lr.h5: its settings, step or digests do not match settings_sha256"),
    ("step: a state whose moment was edited", S1 + ["--state", "s_moment.h5"], 2,
     r"s_moment.h5: its arrays do not match their SHA-256"),
    # 12. a resume builds only on a checkpoint whose every digest and invariant holds
    ("resume: position lowered", resume("ck_position_lowered.h5"), 2, r"do not match checkpoint_sha256.*" + left),
    ("resume: position zero", resume("ck_position_zero.h5"), 2, r"do not match checkpoint_sha256"),
    ("resume: batch digest rewritten (the reproduction)", resume("ck_batch_digest.h5"), 2,
     r"ck_batch_digest.h5: is damaged or was edited: its attributes do not match checkpoint_sha256"),
    ("resume: job id rewritten", resume("ck_job_id.h5"), 2, r"do not match checkpoint_sha256"),
    ("resume: microbatches rewritten", resume("ck_microbatches.h5"), 2, r"do not match checkpoint_sha256"),
    ("resume: no checkpoint digest", resume("ck_no_digest.h5"), 2,
     r"has no checkpoint_sha256, so what it holds cannot be verified.*" + left),
    ("resume: a negative count", resume("ck_count_negative.h5"), 2,
     r"dataset '/counts': does not match its SHA-256.*" + left),
    ("resume: counts zeroed", resume("ck_counts_zeroed.h5"), 2, r"dataset '/counts': does not match its SHA-256"),
    ("resume: NaN in the carried gradient", resume("ck_gradient_nan.h5"), 2,
     r"dataset '/gradient': does not match its SHA-256.*" + left),
    ("resume: gradient doubled", resume("ck_gradient_doubled.h5"), 2, r"dataset '/gradient': does not match"),
    ("resume: sparse listing emptied", resume("ck_sparse_empty.h5", "b_gaps.h5") + ["--sparse"], 2,
     r"do not match checkpoint_sha256"),
    ("resume: sparse rows swapped", resume("ck_sparse_rows_swapped.h5", "b_gaps.h5") + ["--sparse"], 2,
     r"dataset '/rows': entry 1 = 0 is not ascending.*" + left),
    ("resume: position lowered, digests recomputed", resume("ck_consistent_position.h5"), 2,
     r"dataset '/counts': sums to more than the checkpoint's position 65536 by row \d+.*" + left),
    ("resume: a negative count, digests recomputed", resume("ck_consistent_negative.h5"), 2,
     r"dataset '/counts': row 0 has the count -3, which no job carries.*" + left),
    ("resume: NaN, digests recomputed", resume("ck_consistent_nan.h5"), 2,
     r"row 5 holds NaN at column 2 in mode identical, which no job carries"),
    ("resume: a value in an unreferenced row, digests recomputed", resume("ck_consistent_unreferenced.h5",
                                                                         "b_gaps.h5"), 2,
     r"row 95 holds a value other than \+0.0 at column 0 with 0 occurrences, which no job carries"),
    ("resume: sparse listing emptied, digests recomputed",
     resume("ck_consistent_sparse_empty.h5", "b_gaps.h5") + ["--sparse"], 2,
     r"sums to 0 but the checkpoint's position is 131072"),
    ("resume: a listed row with no occurrence, digests recomputed",
     resume("ck_consistent_sparse_zero.h5", "b_gaps.h5") + ["--sparse"], 2,
     r"row 0 has the count 0, which no job carries"),
    # 13. counts and the summary are covered: damaged, never "differ" or "identical"
    ("diff: a negative count", ["diff", "r.h5", "r_count_negative.h5"], 2,
     r"r_count_negative.h5: dataset '/counts': holds -3 at entry 0"),
    ("diff: a count zeroed", ["diff", "r.h5", "r_count_zero.h5"], 2,
     r"r_count_zero.h5: dataset '/counts': (sums to|does not match its SHA-256)"),
    ("diff: a negative count, digest recomputed", ["diff", "r_count_negative_redigested.h5", "r.h5"], 2,
     r"holds -3 at entry 0; a count is in \[0, positions = 3000\]"),
    ("info --check: a count zeroed", ["info", "--check", "r_count_zero.h5"], 2, r"r_count_zero.h5: dataset '/counts'"),
    ("diff: summary scaled", ["diff", "r.h5", "r_summary_scaled.h5"], 2,
     r"r_summary_scaled.h5: dataset '/summary': does not match its SHA-256"),
    ("info --check: summary scaled", ["info", "--check", "r_summary_scaled.h5"], 2,
     r"dataset '/summary': does not match its SHA-256"),
    ("diff: summary scaled, digest recomputed", ["diff", "r_summary_redigested.h5", "r.h5"], 2,
     r"r_summary_redigested.h5: dataset '/summary': is not the summary of this gradient"),
    ("info --check: summary scaled, digest recomputed", ["info", "--check", "r_summary_redigested.h5"], 2,
     r"is not the summary of this gradient"),
    ("diff: gradient and its digest rewritten, the summary kept", ["diff", "r.h5", "r_edited_summary_kept.h5"], 2,
     r"r_edited_summary_kept.h5: dataset '/summary': is not the summary of this gradient"),
    ("diff: summary levels that do not double", ["diff", "r.h5", "r_summary_levels.h5"], 2,
     r"r_summary_levels.h5: dataset '/summary/block_rows'"),
    # 14. damaged groups, strings that claim gigabytes, sizes a small file cannot back
    ("diff: a damaged /inputs group", ["diff", "r.h5", "r_inputs_damaged.h5"], 2,
     r"r_inputs_damaged.h5: dataset '/inputs': exists but cannot be opened as a group; the file is damaged"),
    ("diff: a string declaring 1.75 GiB", ["diff", "r.h5", "r_vlen_huge.h5"], 2,
     r"declares a string of 1879048192 bytes in a file of \d+ bytes; the file is damaged \(refused before HDF5"),
    ("diff: a sparse run declaring 10^10 rows", ["diff", "rs_huge_v.h5", "rs_huge_v.h5"], 2,
     r"needs \d+\.\d GiB to compare them: kembed diff holds both gradients and counts, more than this machine's"),
    # 15. the table a run names is finite
    ("backward: a table holding NaN", ["backward", "--table", "t_nan.h5", "--batch", "b.h5", "--out", "x.h5"], 2,
     r"t_nan.h5: dataset '/weight': holds NaN at row 7, column 0; a table must be finite"),
    ("backward: a table holding -inf, sparse", ["backward", "--table", "t_inf.h5", "--batch", "b.h5", "--out", "x.h5",
                                               "--sparse"], 2, r"holds -inf at row 99, column 7"),
    ("backward: a table holding NaN, checkpointing", ["backward", "--table", "t_nan.h5", "--batch", "b_good.h5",
                                                      "--out", "x.h5", "--checkpoint-every", "65536"], 2,
     r"holds NaN at row 7, column 0"),

    # 1. no command loses a user's file
    ("checkpoint is the batch", B + ["--out", "x.h5", "--checkpoint", "b.h5"], 2,
     r"--checkpoint b.h5 is the same file as --batch b.h5"),
    ("checkpoint is the batch by another name", B + ["--out", "x.h5", "--checkpoint", "./b.h5"], 2,
     r"is the same file as --batch"),
    ("checkpoint is the table", B + ["--out", "x.h5", "--checkpoint", "t.h5", "--checkpoint-every", "1"], 2,
     r"is the same file as --table"),
    ("checkpoint is the output", B + ["--out", "r.h5", "--checkpoint", "r.h5", "--checkpoint-every", "1"], 2,
     r"--checkpoint r.h5 is the same file as --out r.h5"),
    ("checkpoint holds a user's file", B + ["--out", "x.h5", "--checkpoint", "notes.txt", "--checkpoint-every",
                                            "100"], 2,
     r"notes.txt: is not an HDF5 file.*must be free or hold a kembed checkpoint; it was left as it is"),
    ("default checkpoint path holds a user's file", B + ["--out", "r.h5", "--resume"], 2,
     r"r.h5.checkpoint: is not an HDF5 file.*left as it is"),
    ("checkpoint holds a table", B + ["--out", "x.h5", "--checkpoint", "r.h5", "--resume"], 2,
     r"is the same file as --out|r.h5"),
    ("checkpoint of an unfinished job without --resume",
     B + ["--out", "x.h5", "--checkpoint", "ckpt.h5", "--checkpoint-every", "100"], 2,
     r"ckpt.h5 holds the checkpoint of an unfinished job \(at position 131,072\); continue it with --resume"),
    ("checkpoint of another job", B + ["--out", "x.h5", "--checkpoint", "ckpt.h5", "--resume"], 2,
     r"ckpt.h5: belongs to another job \(its batch's SHA-256 differs"),
    ("output is the batch", B + ["--out", "b.h5"], 2, r"--out b.h5 is the same file as --batch b.h5"),
    ("output is the table", B + ["--out", "./t.h5"], 2, r"is the same file as --table"),
    ("forward: output is the ids", ["forward", "--table", "t.h5", "--ids", "b.h5", "--out", "./b.h5"], 2,
     r"--out ./b.h5 is the same file as --ids b.h5"),
    ("output in a missing folder", B + ["--out", "no-such-folder/x.h5"], 3,
     r"no-such-folder/x.h5: cannot be written: its folder no-such-folder does not exist"),
    ("output is a folder", B + ["--out", "."], 2, r"--out \. is a folder"),
    # 2. diff compares the bits it reads, and a file that fails its checksum is damaged
    ("diff: gradient rewritten, digest kept", ["diff", "r.h5", "r_edited.h5"], 2,
     r"r_edited.h5: dataset '/gradient': does not match its SHA-256.*damaged"),
    ("diff: gradient rewritten, the other way round", ["diff", "r_edited.h5", "r.h5"], 2,
     r"r_edited.h5: dataset '/gradient': does not match its SHA-256"),
    ("diff: damaged data", ["diff", "r.h5", "r_damaged.h5"], 2, r"r_damaged.h5: dataset '/gradient'.*damaged"),
    ("info: damaged data is not read", ["info", "r_damaged.h5"], 0, r"kembed-run-1"),
    # 3. array-valued attributes and datasets
    ("diff: format is an array", ["diff", "r.h5", "r_format_array.h5"], 2,
     r"r_format_array.h5: .*attribute 'format' holds 2 values, where kembed expects one"),
    ("info: plan is an array", ["info", "r_plan_array.h5"], 2, r"attribute 'plan' holds 2 values"),
    ("info: a timing is an array", ["info", "r_timing_array.h5"], 2,
     r"r_timing_array.h5: dataset '/timings': attribute 'total_seconds' holds 2 values"),
    ("info: an input path is an array", ["info", "r_path_array.h5"], 2,
     r"dataset '/inputs/table': attribute 'path' holds 2 values"),
    ("info: threads is empty", ["info", "r_threads_empty.h5"], 2, r"attribute 'threads' holds 0 values"),
    ("info: the command line is an array", ["info", "r_command_array.h5"], 2,
     r"dataset '/provenance/command_line': dataset 'command_line' holds 2 values"),
    ("backward: table's plan is an array", ["backward", "--table", "t_plan_array.h5", "--batch", "b.h5", "--out",
                                            "x.h5"], 2, r"attribute 'plan' holds 2 values"),
    # 4. whatever a file holds, a failure to read it is exit 2
    ("diff: 20-digit format version", ["diff", "r.h5", "r_version_20_digits.h5"], 2,
     r"was written by a newer kembed \(format 'kembed-run-99999999999999999999'\)"),
    ("info: format is an integer", ["info", "r_format_int.h5"], 0, r"r_format_int.h5: HDF5"),
    ("diff: format is an integer", ["diff", "r.h5", "r_format_int.h5"], 2,
     r"attribute 'format' holds 64-bit integers, not a string"),
    ("backward: table's kembed_version is an integer",
     ["backward", "--table", "t_version_int.h5", "--batch", "b.h5", "--out", "x.h5"], 2,
     r"attribute 'kembed_version' holds 64-bit integers, not a string"),
    ("backward: table's created_by is an integer",
     ["backward", "--table", "t_created_by_int.h5", "--batch", "b.h5", "--out", "x.h5"], 2,
     r"attribute 'created_by' holds 64-bit integers"),
    # (HDF5 reads strings from a damaged heap as empty, without an error: said so, never "no format")
    ("info: damaged global heap", ["info", "r_heap.h5"], 0, r"'format' attribute is present but empty"),
    ("diff: damaged global heap", ["diff", "r.h5", "r_heap.h5"], 2,
     r"r_heap.h5: has an empty 'format' attribute; kembed never writes one, so the file is damaged"),
    # 8. nothing hangs
    ("info: a FIFO", ["info", "pipe.h5"], 2, r"pipe.h5: is not a regular file \(it is a FIFO\)"),
    ("backward: a FIFO table", ["backward", "--table", "pipe.h5", "--batch", "b.h5", "--out", "x.h5"], 2,
     r"pipe.h5: is not a regular file"),
    ("diff: a FIFO", ["diff", "r.h5", "pipe.h5"], 2, r"pipe.h5: is not a regular file"),
    ("backward: a batch declaring 2^40 positions", ["backward", "--table", "t.h5", "--batch", "b_huge.h5", "--out",
                                                   "x.h5"], 2,
     r"b_huge.h5: dataset '/ids': stores 1 of the 1073741824 chunks its shape declares"),
    # 9. no silent zeros
    ("backward: virtual table with a missing source",
     ["backward", "--table", "t_virtual.h5", "--batch", "b.h5", "--out", "x.h5"], 2,
     r"is a virtual dataset whose source file source.h5 is missing"),
    ("backward: external table data missing",
     ["backward", "--table", "t_external.h5", "--batch", "b.h5", "--out", "x.h5"], 2,
     r"keeps its data in the external file raw.bin, which is missing"),
    # padding_idx: torch's rule where it is given, the file's rule where it is stored
    ("backward: table's padding_idx is -2", ["backward", "--table", "t_pad_negative.h5", "--batch", "b.h5", "--out",
                                             "x.h5"], 2,
     r"t_pad_negative.h5: its padding_idx is -2, but a kembed file stores the padding row as a row number in "
     r"\[0, 100\) or -1 for none"),
    ("backward: table's padding_idx is V", ["backward", "--table", "t_pad_v.h5", "--batch", "b.h5", "--out",
                                            "x.h5"], 2, r"t_pad_v.h5: its padding_idx is 100, but"),
    ("info: run's padding_idx is -V", ["info", "r_pad_negative.h5"], 2,
     r"r_pad_negative.h5: its padding_idx is -100, but a kembed file stores"),
    ("diff: run's padding_idx is -V", ["diff", "r.h5", "r_pad_negative.h5"], 2, r"its padding_idx is -100"),
    ("backward: checkpoint's padding_idx is -3", B + ["--out", "x.h5", "--checkpoint", "ckpt_pad_negative.h5",
                                                      "--resume"], 2,
     r"ckpt_pad_negative.h5: its padding_idx is -3, but a kembed file stores"),
    ("backward: --padding-idx V", B + ["--out", "x.h5", "--padding-idx", "100"], 2,
     r"padding_idx must be within \[-100, 100\), got 100"),
    ("backward: --padding-idx -V-1", B + ["--out", "x.h5", "--padding-idx", "-101"], 2, r"got -101"),
    ("backward: --padding-idx with --no-padding", B + ["--out", "x.h5", "--padding-idx", "3", "--no-padding"], 2,
     r"--no-padding excludes --padding-idx|--padding-idx excludes --no-padding"),
    ("make-table: --padding-idx V", ["make-table", "--out", "x.h5", "--rows", "10", "--dim", "2",
                                     "--padding-idx", "10"], 2, r"padding_idx must be within \[-10, 10\), got 10"),
    ("import: --padding-idx -V-1", ["import", "foreign.h5", "--dataset", "model/emb", "--out", "x.h5",
                                    "--padding-idx", "-51"], 2, r"padding_idx must be within \[-50, 50\), got -51"),
    # 10. threads
    ("threads above the range", ["--threads", "513"] + B + ["--out", "x.h5"], 2,
     r"--threads must be between 1 and 512, got 513"),
    ("threads negative", ["--threads", "-1"] + B + ["--out", "x.h5"], 2, r"--threads must be between 1 and 512, got -1$"),
    ("threads zero", ["--threads", "0"] + B + ["--out", "x.h5"], 2, r"got 0"),
    ("threads on the serial backend", ["--backend", "serial", "--threads", "2"] + B + ["--out", "x.h5"], 2,
     r"--threads 2 asks for 2 threads, but the serial backend runs one"),
    # 11. messages that say what is wrong
    ("backward: an lzf table", ["backward", "--table", "t_lzf.h5", "--batch", "b.h5", "--out", "x.h5"], 2,
     r"is compressed with the HDF5 filter 'lzf' \(id 32000\), which this HDF5 does not have"),
    ("import: several candidates", ["import", "foreign.h5", "--out", "x.h5"], 2,
     r"holds several 2-D float datasets \(/model/emb 50 x 8, /model/emb64 1 x 2\); name the table with --dataset"),
    ("import: float64 without --convert", ["import", "foreign.h5", "--dataset", "model/emb64", "--out", "x.h5"], 2,
     r"holds 64-bit floats; kembed tables are float32.*kembed import --convert"),
    ("import: float64 that does not fit", ["import", "foreign.h5", "--dataset", "model/emb64", "--out", "x.h5",
                                           "--convert"], 2,
     r"holds a value at row 0, column 0 that is not finite or does not fit in float32"),
    ("import: onto itself", ["import", "foreign.h5", "--out", "./foreign.h5"], 2, r"is the file being imported"),
]

failures = 0


def check(name, status, out, want_status, pattern, before, allowed=()):
    global failures
    after = snapshot()
    problems = []
    if status != want_status:
        problems.append(f"exit status {status}, want {want_status}")
    if not re.search(pattern, out.replace("\n", " ").strip()):
        problems.append(f"output does not match /{pattern}/")
    for path in sorted(set(before) | set(after)):
        if path in allowed:
            continue
        if path not in after:
            problems.append(f"{path} vanished")
        elif path not in before:
            problems.append(f"{path} appeared")
        elif before[path] != after[path]:
            problems.append(f"{path} changed")
    if problems:
        failures += 1
        print(f"FAIL {name}: {'; '.join(problems)}\n  output: {out.strip()}")
    else:
        print(f"ok   {name}")


for name, args, want_status, pattern in cases:
    before = snapshot()
    status, out = run(*args)
    check(name, status, out, want_status, pattern, before)

# The other side: commands that succeed leave what is not theirs alone.
before = snapshot()
status, out = run("-q", *S1, "--state", "t1.h5.state")
check("step: the next step, from the state", status, out, 0,
      r"table: +x.h5 .*state: +x.h5.state \(adam after step 2,", before, allowed={"x.h5", "x.h5.state"})
os.remove("x.h5"), os.remove("x.h5.state")
before = snapshot()
status, out = run("info", "--check", "t1.h5.state")
check("info --check: a sound optimizer state", status, out, 0,
      r"ok +settings: settings_sha256 matches .*ok +state: state_sha256 matches", before)
before = snapshot()
status, out = run("-q", *B, "--out", "r2.h5", "--checkpoint", "r.h5.checkpoint")
check("a finished job leaves a file at its unused --checkpoint path", status, out, 0, r"run file: +r2.h5",
      before, allowed={"r2.h5"})
before = snapshot()
status, out = run("-q", *B, "--out", "r3.h5", "--checkpoint-every", "1000", "--microbatch", "100")
check("a finished job removes only its own checkpoint", status, out, 0, r"run file: +r3.h5", before,
      allowed={"r3.h5"})
before = snapshot()
status, out = run("diff", "r.h5", "r_edited_consistently.h5")
check("diff: a consistent rewrite is compared bit for bit", status, out, 1,
      r"differ: r.h5 and r_edited_consistently.h5 .*1 of 100 rows differ", before)
before = snapshot()
status, out = run("-q", "import", "foreign.h5", "--dataset", "/model/emb", "--out", "imported.h5")
check("import: a float32 dataset", status, out, 0, r"table: +imported.h5 \(50 x 8, from foreign.h5:/model/emb\)",
      before, allowed={"imported.h5"})

# Consistent edits that change nothing kembed relies on: a checkpoint moved to a batch
# that agrees with its positions resumes (the FORMAT.md recipe is the digest kembed
# checks), and its result is the fresh run's; a run whose counts moved is a different run.
other_side = 0
for name, batch, extra in [("ck_consistent_good_batch.h5", "b_good.h5", []),
                           ("ck_consistent_good_gaps.h5", "b_gaps.h5", ["--sparse"])]:
    fresh = "fresh_" + name
    must("backward", "--table", "t.h5", "--batch", batch, "--out", fresh, *extra)
    before = snapshot()
    status, out = run("-q", *resume(name, batch), *extra)
    check(f"resume: {name} (digests recomputed) continues", status, out, 0, r"resumed at 131,072", before,
          allowed={"x.h5", name})
    status, out = run("diff", "x.h5", fresh)
    check(f"resume: {name} gives the fresh run's bits", status, out, 0, r"identical", snapshot())
    os.remove("x.h5")
    other_side += 2
before = snapshot()
status, out = run("diff", "r.h5", "r_count_moved_redigested.h5")
check("diff: counts moved, digest recomputed, is another run", status, out, 1,
      r"per-row counts differ in 2 rows", before)
status, out = run("info", "--check", "r.h5")
check("info --check: a sound run", status, out, 0,
      r"ok +gradient: gradient_sha256 matches.*ok +counts: counts_sha256 matches.*ok +summary: summary_sha256 "
      r"matches, and it is the gradient's", before)
status, out = run("info", "--check", "rs.h5")
check("info --check: a sound sparse run", status, out, 0,
      r"ok +gradient: gradient_sha256 matches \(the listed rows' records\).*summary_sha256 matches", before)
status, out = run("info", "--check", "ckpt.h5")
check("info --check: a sound checkpoint", status, out, 0, r"ok +attributes: checkpoint_sha256 matches", before)
status, out = run("info", "--check", "t_nan.h5")
check("info --check: a table holding NaN", status, out, 2, r"holds NaN at row 7, column 0", before)
status, out, peak = peak_memory("diff", "r.h5", "r_vlen_huge.h5")
check(f"diff: a string declaring 1.75 GiB is refused in {peak >> 20} MiB", status, out, 2, r"declares a string",
      before)
if peak > 256 << 20:  # before: 3.6 GB resident (HDF5's conversion buffer and the string), then "identical"
    failures += 1
    print(f"FAIL diff held {peak >> 20} MiB refusing a string that declares 1.75 GiB")
status, out, peak = peak_memory("info", "rs_huge_v.h5")
check(f"info: a sparse run declaring 10^10 rows, in {peak >> 20} MiB", status, out, 0,
      r"gradient +10,000,000,000 x 8, sparse", before)
if peak > 512 << 20:  # the dense counts alone would be 80 GB (before: refused, or 8 GB at 10^9 rows)
    failures += 1
    print(f"FAIL info on a sparse run declaring 10^10 rows held {peak >> 20} MiB")
other_side += 7

# Every spelling of a padding row that is accepted, and what the files then store.
def stored_padding(path):
    with h5py.File(path) as f:
        return int(f.attrs["padding_idx"])


spellings = [  # (command, file written, padding_idx it must store)
    (["make-table", "--out", "tp_none.h5", "--rows", "100", "--dim", "8"], "tp_none.h5", -1),
    (["make-table", "--out", "tp_last.h5", "--rows", "100", "--dim", "8", "--padding-idx", "-1"], "tp_last.h5", 99),
    (["make-table", "--out", "tp_first.h5", "--rows", "100", "--dim", "8", "--padding-idx", "-100"], "tp_first.h5",
     0),
    (["make-table", "--out", "tp_5.h5", "--rows", "100", "--dim", "8", "--padding-idx", "5"], "tp_5.h5", 5),
    (["import", "foreign.h5", "--dataset", "model/emb", "--out", "ti_last.h5", "--padding-idx", "-1"], "ti_last.h5",
     49),
    (B[:2] + ["tp_5.h5"] + B[3:] + ["--out", "rp_table.h5"], "rp_table.h5", 5),  # the table file's
    (B[:2] + ["tp_5.h5"] + B[3:] + ["--out", "rp_none.h5", "--no-padding"], "rp_none.h5", -1),
    (B + ["--out", "rp_last.h5", "--padding-idx", "-1"], "rp_last.h5", 99),
    (B + ["--out", "rp_ckpt.h5", "--padding-idx", "-2", "--checkpoint-every", "1000", "--checkpoint",
          "rp_ckpt.h5.ck"], "rp_ckpt.h5", 98),
]
for args, written, want in spellings:
    before = snapshot()
    status, out = run("-q", *args)
    check(f"padding spelling: {' '.join(args[:1] + args[-2:])}", status, out, 0, r".*", before,
          allowed={written, written + ".ck"})
    if status == 0 and stored_padding(written) != want:
        failures += 1
        print(f"FAIL {written} stores padding_idx {stored_padding(written)}, want {want}")
# info and diff name the padding row.
before = snapshot()
status, out = run("info", "rp_last.h5")
check("info names the padding row", status, out, 0, r"padding +row 99 is the padding row", before)
status, out = run("diff", "rp_last.h5", "rp_none.h5")
check("diff says the padding rows differ and labels the row", status, out, 1,
      r"setting padding_idx: 99 / none.*99 .*\(padding in a\)", before)

# 11. a file open for writing elsewhere is locked, and is said to be.
holder = subprocess.Popen([sys.executable, "-c", "import h5py, sys, time\n"
                           "f = h5py.File(sys.argv[1], 'r+'); print('open', flush=True); time.sleep(60)",
                           os.path.join(work, "r3.h5")], stdout=subprocess.PIPE, text=True)
holder.stdout.readline()
before = snapshot()
status, out = run("info", "r3.h5")
holder.kill()
holder.wait()
check("info: a file another program has open for writing", status, out, 2,
      r"r3.h5: is locked: another program has it open for writing", before)

print(f"refusals: {len(cases) + 7 + other_side - failures} passed, {failures} failed")
sys.exit(1 if failures else 0)
