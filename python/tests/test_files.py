"""save/load in kembed's HDF5 table format: the CLI's files, h5py's view of ours, and
damaged or unwritable paths refused with nothing lost."""
import os

import h5py
import numpy as np
import pytest

import kembed
from conftest import KJV, bits, cli, run


def test_save_writes_the_clis_table_format(tmp_path, rng):
    w = rng.standard_normal((50, 6)).astype(np.float32)
    emb = kembed.Embedding.from_pretrained(w, padding_idx=3, mode="deterministic", plan="sort")
    path = tmp_path / "t.h5"
    emb.save(path)
    with h5py.File(path, "r") as f:
        assert f.attrs["format"] == "kembed-embedding-1"
        assert bits(f["weight"][()]) == bits(w)
        assert (f.attrs["padding_idx"], f.attrs["plan"], f.attrs["numeric_mode"]) == (3, "sort", "deterministic")
    info = run(cli(), "info", str(path), "--check")
    assert info.returncode == 0, info.stderr
    assert "50 x 6" in info.stdout.replace(",", "") or "50" in info.stdout


def test_load_reads_what_the_cli_makes(tmp_path):
    path = tmp_path / "made.h5"
    made = run(cli(), "-q", "make-table", "--rows", "20", "--dim", "3", "--seed", "5", "--out", str(path),
               "--padding-idx", "-1", "--max-norm", "2.5")
    assert made.returncode == 0, made.stderr
    emb = kembed.Embedding.load(path)
    with h5py.File(path, "r") as f:
        assert bits(emb.weight) == bits(f["weight"][()])
    assert (emb.padding_idx, emb.max_norm) == (19, 2.5)


def test_every_setting_round_trips(tmp_path, rng):
    w = rng.standard_normal((12, 2)).astype(np.float32)
    emb = kembed.Embedding.from_pretrained(w, padding_idx=-1, max_norm=1.25, norm_type=1.0,
                                           scale_grad_by_freq="batch", sparse=True, mode="fast", plan="bucket")
    emb.save(tmp_path / "all.h5")
    back = kembed.Embedding.load(tmp_path / "all.h5", backend="serial")
    for name in ("num_embeddings", "embedding_dim", "padding_idx", "max_norm", "norm_type",
                 "scale_grad_by_freq", "sparse", "mode", "plan"):
        assert getattr(back, name) == getattr(emb, name), name
    assert bits(back.weight) == bits(w) and back.backend == "serial"


def test_the_bundled_table_loads_bit_for_bit():
    emb = kembed.Embedding.load(str(KJV / "table.h5"))
    with h5py.File(KJV / "table.h5", "r") as f:
        assert bits(emb.weight) == bits(f["weight"][()])


def test_a_damaged_file_is_refused_by_name(tmp_path):
    path = tmp_path / "bad.h5"
    path.write_bytes(b"not HDF5 at all")
    with pytest.raises(OSError, match="bad.h5"):
        kembed.Embedding.load(path)
    with pytest.raises(OSError, match="missing.h5"):
        kembed.Embedding.load(tmp_path / "missing.h5")


def test_a_failed_save_leaves_the_old_file(tmp_path, rng):
    emb = kembed.Embedding.from_pretrained(rng.standard_normal((4, 2)).astype(np.float32))
    with pytest.raises(OSError, match="no-such-folder"):
        emb.save(tmp_path / "no-such-folder" / "t.h5")
    # A folder where the file would go: the rename over it fails; nothing is left behind.
    folder = tmp_path / "taken.h5"
    folder.mkdir()
    (folder / "inside").write_bytes(b"kept")
    with pytest.raises(OSError, match="taken.h5"):
        emb.save(folder)
    assert (folder / "inside").read_bytes() == b"kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken.h5"]
