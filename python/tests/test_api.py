"""kembed.Embedding against an independent numpy fold and against itself on every
backend, plan and split; inputs of every kind, read without a copy where they can be."""
import array

import numpy as np
import pytest

import kembed
from conftest import KJV, KJV_GRADIENT_SHA256, bits, fold, need_torch

BACKENDS = kembed.backends()
PLANS = ["auto", "scan", "sort", "bucket"]


def layer(rng, v=37, d=5, **kw):
    w = rng.standard_normal((v, d)).astype(np.float32)
    return w, kembed.Embedding.from_pretrained(w, **kw)


def batch(rng, v, d, shape=(6, 50)):
    ids = rng.integers(0, v, size=shape)
    dy = rng.standard_normal(shape + (d,)).astype(np.float32)
    return ids, dy


def test_forward_is_the_gather(rng):
    w, emb = layer(rng)
    for shape in [(), (7,), (3, 4), (2, 3, 4)]:
        ids = rng.integers(0, 37, size=shape)
        assert bits(emb(ids)) == bits(w[ids]), shape
        assert bits(emb.forward(ids.astype(np.int32))) == bits(w[ids])


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("plan", PLANS)
def test_backward_is_the_position_order_fold(rng, backend, plan):
    w, emb = layer(rng, plan=plan, backend=backend, padding_idx=4)
    ids, dy = batch(rng, 37, 5)
    ids[0, :5] = 4  # the padding row is referenced and stays +0.0
    want = fold(ids, dy, 37, padding_idx=4)
    assert bits(emb.backward(ids, dy)) == bits(want)
    assert emb.backend == backend and emb.plan == plan


def test_the_bundled_batch_gives_the_readmes_sha256():
    import hashlib
    import h5py
    with h5py.File(KJV / "batch.h5", "r") as f:
        ids, dy = f["ids"][()], f["dy"][()]
    emb = kembed.Embedding.load(KJV / "table.h5")
    assert hashlib.sha256(emb.backward(ids, dy).tobytes()).hexdigest() == KJV_GRADIENT_SHA256


@pytest.mark.parametrize("mode", ["identical", "deterministic"])
def test_every_backend_and_plan_gives_the_same_bits(rng, mode):
    w = rng.standard_normal((300, 8)).astype(np.float32)
    ids, dy = batch(rng, 300, 8, shape=(4000,))
    ids[:300] = 7  # one hot row
    results = {bits(kembed.Embedding.from_pretrained(w, mode=mode, plan=p, backend=b).backward(ids, dy))
               for b in BACKENDS for p in PLANS}
    assert len(results) == 1


@pytest.mark.parametrize("parts", [2, 3, 7])
def test_microbatches_with_a_carry_give_the_whole_batchs_bits(rng, parts):
    _, emb = layer(rng)
    ids, dy = batch(rng, 37, 5, shape=(700,))
    whole = emb.backward(ids, dy)
    grad = None
    for i, g in zip(np.array_split(ids, parts), np.array_split(dy, parts)):
        before = None if grad is None else grad.tobytes()
        new = emb.backward(i, g, grad)
        if grad is not None:
            assert grad.tobytes() == before  # the carry is not modified
        grad = new
    assert bits(grad) == bits(whole)


def test_backward_sparse_lists_the_dense_rows(rng):
    _, emb = layer(rng, padding_idx=0)
    ids, dy = batch(rng, 37, 5, shape=(40,))
    dense = emb.backward(ids, dy)
    s = emb.backward_sparse(ids, dy)
    assert list(s.rows) == sorted(set(ids.tolist()))
    assert bits(s.values) == bits(dense[s.rows])
    assert bits(s.counts) == bits(np.bincount(ids, minlength=37)[s.rows])
    assert bits(s.to_dense()) == bits(dense)
    # carried on, sparse: the dense carry's bits
    ids2, dy2 = batch(rng, 37, 5, shape=(30,))
    assert bits(emb.backward_sparse(ids2, dy2, s).to_dense()) == bits(emb.backward(ids2, dy2, dense))


def test_counts(rng):
    _, emb = layer(rng)
    ids, _ = batch(rng, 37, 5)
    assert bits(emb.counts(ids)) == bits(np.bincount(ids.reshape(-1), minlength=37).astype(np.int64))


def test_scale_grad_by_freq_batch_over_microbatches_is_the_whole_call(rng):
    w = rng.standard_normal((20, 3)).astype(np.float32)
    ids, dy = batch(rng, 20, 3, shape=(300,))
    whole = kembed.Embedding.from_pretrained(w, scale_grad_by_freq=True).backward(ids, dy)
    emb = kembed.Embedding.from_pretrained(w, scale_grad_by_freq="batch")
    counts = emb.counts(ids)
    grad = None
    for i, g in zip(np.array_split(ids, 4), np.array_split(dy, 4)):
        grad = emb.backward(i, g, grad, batch_counts=counts)
    assert bits(grad) == bits(whole)


def test_the_table_is_the_layers_own(rng):
    w, emb = layer(rng)
    original = w.copy()
    w[:] = 0  # the caller's array: does not reach the layer
    assert bits(emb.weight) == bits(original)
    got = emb.weight
    got[:] = 1  # a copy each time
    assert bits(emb.weight) == bits(original)
    emb.weight = np.full((37, 5), 2, np.float32)
    assert bits(emb(np.array([3]))) == bits(np.full((1, 5), 2, np.float32))


def test_settings_are_read_back(rng):
    _, emb = layer(rng, padding_idx=-2, max_norm=1.5, norm_type=3.0, mode="deterministic", plan="sort")
    assert (emb.num_embeddings, emb.embedding_dim, emb.padding_idx) == (37, 5, 35)
    assert (emb.max_norm, emb.norm_type, emb.mode, emb.plan) == (1.5, 3.0, "deterministic", "sort")
    assert emb.plan_for(10) == "sort"
    assert kembed.Embedding.from_pretrained(np.ones((4, 2), np.float32)).plan_for(10) == "scan"


def test_inputs_of_every_kind_give_the_same_bits(rng):
    torch = need_torch()
    w, emb = layer(rng)
    ids = rng.integers(0, 37, size=12)
    dy = rng.standard_normal((12, 5)).astype(np.float32)
    want_y, want_g = bits(emb(ids)), bits(emb.backward(ids, dy))
    kinds = [ids.astype(np.int32), ids.astype(np.uint8), ids.astype(np.int16), ids.astype(np.uint64),
             torch.from_numpy(ids), array.array("q", ids.tolist()), memoryview(ids.astype(np.int64))]
    for k in kinds:
        assert bits(emb(k)) == want_y, type(k)
        assert bits(emb.backward(k, torch.from_numpy(dy))) == want_g, type(k)


def test_contiguous_inputs_are_not_copied_and_others_are(rng):
    _, emb = layer(rng)
    ids, dy = batch(rng, 37, 5)
    carry = emb.backward(ids, dy)
    copies = kembed._kembed.input_copies
    n = copies()
    emb(ids), emb(ids.astype(np.int32)), emb.backward(ids, dy, carry), emb.counts(ids)
    emb.backward_sparse(ids, dy)
    assert copies() == n, "a contiguous int64/int32 or float32 input was copied"
    emb(ids[:, ::2])
    assert copies() == n + 1, "a strided input must be copied once"
    emb(ids.astype(np.int16))
    assert copies() == n + 2
    got = emb.backward(np.asfortranarray(ids), np.asfortranarray(dy))  # Fortran order: copied, same bits
    assert bits(got) == bits(carry) and copies() == n + 4


def test_outputs_are_new_writable_arrays(rng):
    _, emb = layer(rng)
    ids, dy = batch(rng, 37, 5)
    y1, y2 = emb(ids), emb(ids)
    assert y1.flags.writeable and y1.flags.c_contiguous
    assert not np.shares_memory(y1, y2)
    y1[:] = 0
    assert bits(emb(ids)) == bits(y2)


def test_threads_are_reported(rng):
    assert kembed.get_num_threads() >= 1
    kembed.set_num_threads(kembed.get_num_threads())  # the same count: accepted


def test_out_receives_the_same_bits_and_out_grad_continues_in_place(rng):
    _, emb = layer(rng)
    ids, dy = batch(rng, 37, 5)
    y = np.empty(ids.shape + (5,), np.float32)
    assert emb.forward(ids, out=y) is y and bits(y) == bits(emb(ids))
    whole = emb.backward(np.concatenate([ids, ids]), np.concatenate([dy, dy]))
    g = kembed.empty((37, 5))
    assert emb.backward(ids, dy, out=g) is g
    emb.backward(ids, dy, g, out=g)  # the carry continued in place
    assert bits(g) == bits(whole)


@pytest.mark.parametrize("out, kind, words", [
    (np.empty((37, 5)), TypeError, "out must be float32, got float64"),
    (np.empty((36, 5), np.float32), ValueError, "out has shape \\(36, 5\\), want \\(37, 5\\)"),
    (np.empty((5, 37), np.float32).T, ValueError, "out must be C-contiguous"),
])
def test_a_bad_out_is_refused_and_the_carry_kept(rng, out, kind, words):
    _, emb = layer(rng)
    ids, dy = batch(rng, 37, 5)
    carry = emb.backward(ids, dy)
    before = bits(carry)
    with pytest.raises(kind, match=words):
        emb.backward(ids, dy, carry, out=out)
    assert bits(carry) == before


def test_a_read_only_out_is_refused(rng):
    _, emb = layer(rng)
    y = np.empty((3, 5), np.float32)
    y.flags.writeable = False
    with pytest.raises(TypeError):
        emb.forward(np.array([1, 2, 3]), out=y)


def test_empty_is_a_writable_float32_array():
    a = kembed.empty((300, 7))
    assert a.dtype == np.float32 and a.shape == (300, 7) and a.flags.writeable and a.flags.c_contiguous
    a[:] = 1
    assert kembed.empty(4).shape == (4,) and kembed.empty((2, 3, 4)).shape == (2, 3, 4)
    with pytest.raises(ValueError):
        kembed.empty(())
