#!/usr/bin/env python3
"""kembed's HDF5 files against h5py: other tools' tables load, kembed's files read back.

Run by CTest as `h5py_interop.py PROBE WORKDIR` (PROBE is kembed_io_probe). Every
comparison of floats is on their bit patterns (uint32 views), never a tolerance.
"""
import hashlib
import json
import pathlib
import subprocess
import sys

import h5py
import numpy as np

probe, work = sys.argv[1], pathlib.Path(sys.argv[2])
work.mkdir(parents=True, exist_ok=True)
passed = failed = 0


def check(name, ok, detail=""):
    global passed, failed
    if ok:
        passed += 1
        print(f"ok   {name}")
    else:
        failed += 1
        print(f"FAIL {name} {detail}")


def run(*args, expect=0):
    p = subprocess.run([probe, *map(str, args)], capture_output=True, text=True)
    if p.returncode != expect:
        raise SystemExit(f"probe {args} exited {p.returncode}, want {expect}: {p.stderr}")
    return p


def bits(a):
    return np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)


rng = np.random.default_rng(5)
table = rng.standard_normal((37, 11)).astype(np.float32)
table[0, 0] = -0.0
table[1, 1] = np.float32(1e-45)

# 1. Tables as other tools write them load through kembed bit for bit.
layouts = {
    "contiguous": dict(),
    "chunked": dict(chunks=(5, 11)),
    "gzip": dict(chunks=(8, 11), compression="gzip", compression_opts=6, shuffle=True),
    "fletcher32": dict(chunks=(8, 11), fletcher32=True),
}
for name, kwargs in layouts.items():
    src = work / f"foreign_{name}.h5"
    with h5py.File(src, "w") as f:
        f.create_dataset("model/embeddings", data=table, **kwargs)
    out = work / f"kembed_{name}.h5"
    run("load-foreign", src, "model/embeddings", out)
    with h5py.File(out, "r") as f:
        check(f"{name}: loads bit for bit", np.array_equal(bits(f["weight"][...]), bits(table)))
for order in (">f4", "<f4"):
    src = work / f"foreign_{order[0] == '>' and 'big' or 'little'}_endian.h5"
    with h5py.File(src, "w") as f:
        f.create_dataset("emb", data=table.astype(order))
    out = work / "kembed_endian.h5"
    run("load-foreign", src, "/emb", out)
    with h5py.File(out, "r") as f:
        check(f"{order}: loads bit for bit", np.array_equal(bits(f["weight"][...]), bits(table)))

# 2. float64 and float16 are refused with advice, and convert on request.
for dtype in ("f8", "f2"):
    src = work / f"foreign_{dtype}.h5"
    with h5py.File(src, "w") as f:
        f.create_dataset("emb", data=table.astype(dtype))
    p = run("load-foreign", src, "emb", work / "refused.h5", expect=3)
    check(f"{dtype}: refused with advice", "astype('float32')" in p.stderr and "convert" in p.stderr, p.stderr)
    run("load-foreign", src, "emb", work / f"converted_{dtype}.h5", "convert")
    with h5py.File(work / f"converted_{dtype}.h5", "r") as f:
        want = table.astype(dtype).astype(np.float32)
        check(f"{dtype}: converts to the nearest float32", np.array_equal(bits(f["weight"][...]), bits(want)))
with h5py.File(work / "foreign_int.h5", "w") as f:
    f.create_dataset("emb", data=np.arange(12, dtype=np.int32).reshape(3, 4))
p = run("load-foreign", work / "foreign_int.h5", "emb", work / "refused.h5", expect=3)
check("int32 table refused", "32-bit integers" in p.stderr, p.stderr)

# 3. kembed's own table: attributes and data as h5py users see them.
ours = work / "ours.h5"
run("save-table", ours, 1000, 24, 9, "deflate")
with h5py.File(ours, "r") as f:
    check("format tag", f.attrs["format"] == "kembed-embedding-1", repr(f.attrs.get("format")))
    check("settings", (int(f.attrs["num_embeddings"]), int(f.attrs["embedding_dim"]), int(f.attrs["padding_idx"]),
                       f.attrs["plan"], f.attrs["numeric_mode"]) == (1000, 24, 1, "sort", "deterministic"))
    w = f["weight"]
    check("weight is float32 little-endian", w.dtype == np.dtype("<f4"), str(w.dtype))
    check("weight is chunked by rows", w.chunks is not None and w.chunks[1] == 24, str(w.chunks))
    check("fletcher32 and deflate on", w.fletcher32 and w.compression == "gzip", f"{w.fletcher32} {w.compression}")
    data = w[...]
out = run("load-table", ours).stdout.split()
check("kembed reads back what h5py reads", out[-1] == hashlib.sha256(bits(data).tobytes()).hexdigest(), " ".join(out))
check("special values kept", bits(data)[0, 0] == 0x80000000 and bits(data)[0, 1] == 1, str(bits(data)[0, :3]))

# 4. A run file: h5py recomputes the gradient's SHA-256 and reads the provenance.
runf = work / "run.h5"
run("write-run", runf, 300, 5, 4)
with h5py.File(runf, "r") as f:
    check("run format tag", f.attrs["format"] == "kembed-run-1")
    g = f["gradient"][...]
    check("gradient SHA-256 matches", hashlib.sha256(bits(g).tobytes()).hexdigest() == f.attrs["gradient_sha256"])
    check("gradient keeps +inf", np.isinf(g[0, 0]) and g[0, 0] > 0)
    check("counts are int64", f["counts"].dtype == np.dtype("<i8") and int(f["counts"][5]) == 3)
    cmd = json.loads(f["provenance/command_line"][()].decode() if isinstance(f["provenance/command_line"][()], bytes)
                     else f["provenance/command_line"][()])
    check("command line is JSON", cmd[-1] == 'with "quotes"', repr(cmd))
    check("inputs recorded", f["inputs/table"].attrs["path"] == "table.h5" and int(f["inputs/batch"].attrs["bytes"]) == 456)
    check("timings recorded", float(f["timings"].attrs["backward_seconds"]) == 1.5)

# 5. h5py can write kembed's format itself, and kembed loads it.
handmade = work / "handmade.h5"
with h5py.File(handmade, "w") as f:
    f.attrs.update({"format": "kembed-embedding-1", "num_embeddings": np.int64(37), "embedding_dim": np.int64(11),
                    "padding_idx": np.int64(-1), "plan": "auto", "numeric_mode": "identical"})
    f.create_dataset("weight", data=table)
out = run("load-table", handmade).stdout.split()
check("a kembed table written by h5py loads", out[:5] == ["37", "11", "-1", "auto", "identical"] and
      out[5] == hashlib.sha256(bits(table).tobytes()).hexdigest(), " ".join(out))

# 6. A table whose root attributes' continuation chunk (OCHK) fails its checksum: the
# probe, a kembed program like the CLI, refuses it and exits without HDF5's "infinite
# loop closing library" (HDF5 1.10.8 keeps internal state from the failed lookup even
# though every id kembed opened is closed; kembed's programs skip its exit clean-up).
data = bytearray(handmade.read_bytes())
at = data.find(b"OCHK")
if at < 0:  # h5py may keep every attribute in the first header: a kembed-written table has the chunk
    run("save-table", work / "saved.h5", 37, 11, 3)
    data = bytearray((work / "saved.h5").read_bytes())
    at = data.find(b"OCHK")
check("a table's attributes continue in an OCHK chunk", at >= 0, "no OCHK signature")
data[at + 8] ^= 1
damaged = work / "damaged_header.h5"
damaged.write_bytes(bytes(data))
p = subprocess.run([probe, "load-table", damaged], capture_output=True, text=True)
check("a damaged attribute header is refused", p.returncode != 0 and "damaged" in p.stderr, p.stderr)
check("and nothing of HDF5's is left to print at exit", "infinite loop" not in p.stdout + p.stderr, p.stderr)

# 7. An optimizer state: torch's names, the settings as attributes, both digests
# recomputed by h5py (state_sha256: each row's first-array values, then its second's).
state = work / "adam.state"
run("save-state", state, 23, 7)
with h5py.File(state, "r") as f:
    check("state format tag", f.attrs["format"] == "kembed-optim-state-1" and f.attrs["optimizer"] == "adam")
    m, v = f["exp_avg"][...], f["exp_avg_sq"][...]
    check("torch's array names and shapes", m.shape == v.shape == (23, 7) and m.dtype == np.float32)
    check("the settings it reads", int(f.attrs["step"]) == 3 and float(f.attrs["lr"]) == 0.01 and
          int(f.attrs["decoupled_weight_decay"]) == 1 and "momentum" not in f.attrs, str(dict(f.attrs)))
    records = np.concatenate([bits(m), bits(v)], axis=1).tobytes()
    check("state_sha256 matches", hashlib.sha256(records).hexdigest() == f.attrs["state_sha256"])
    check("moments as written", m.any() and (v >= 0).all())
    a = f.attrs
    text = "kembed-optim-state-1\n" + "".join(
        f"{k}={a[k]}\n" for k in ("optimizer", "num_embeddings", "embedding_dim", "step"))
    text += "".join(f"{k}={float(a[k]):.17g}\n" for k in ("lr", "weight_decay", "eps", "beta1", "beta2"))
    text += "".join(f"{k}={int(a[k])}\n" for k in ("maximize", "decoupled_weight_decay"))
    text += f"table_sha256={a['table_sha256']}\nstate_sha256={a['state_sha256']}\n"
    check("settings_sha256 matches docs/FORMAT.md's text", hashlib.sha256(text.encode()).hexdigest() ==
          a["settings_sha256"], text)

print(f"h5py interop: {passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
