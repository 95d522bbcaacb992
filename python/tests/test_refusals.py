"""Every refusal: the exception type Python users expect, a message that names the
problem, and nothing changed (the table, the carry and the inputs as they were)."""
import ctypes

import numpy as np
import pytest

import kembed
from conftest import bits


@pytest.fixture
def emb():
    w = np.arange(40, dtype=np.float32).reshape(10, 4) / 7
    return kembed.Embedding.from_pretrained(w, padding_idx=1)


def unchanged(emb, *arrays):
    """A snapshot of the layer's table and the arrays; call it again to compare."""
    return [bits(emb.weight)] + [bits(a) for a in arrays]


CALLS = {
    "forward": lambda e, ids, dy, g: e.forward(ids),
    "backward": lambda e, ids, dy, g: e.backward(ids, dy, g),
    "backward_sparse": lambda e, ids, dy, g: e.backward_sparse(ids, dy),
    "counts": lambda e, ids, dy, g: e.counts(ids),
}


def good(emb):
    ids = np.array([[0, 1, 2], [3, 2, 9]])
    return ids, np.ones((2, 3, 4), np.float32), emb.backward(ids, np.ones((2, 3, 4), np.float32))


@pytest.mark.parametrize("call", CALLS)
@pytest.mark.parametrize("bad, kind, words", [
    (np.array([1.0, 2.0]), TypeError, "float id is refused rather than truncated"),
    (np.array([True, False]), TypeError, "must hold integers, got dtype bool"),
    (np.array([1, 10]), IndexError, "holds 10 at position 1, outside \\[0, 10\\)"),
    (np.array([3, -1, 2]), IndexError, "holds -1 at position 1"),
    (np.array([2, 2**64 - 1], np.uint64), IndexError, "holds 18446744073709551615 at position 1"),
    (np.zeros((0,), np.int64), ValueError, "no positions; want at least one id"),
])
def test_bad_ids(emb, call, bad, kind, words):
    ids, dy, g = good(emb)
    if call.startswith("backward"):
        dy = np.ones(bad.shape + (4,), np.float32)
    before = unchanged(emb, bad, dy, g)
    with pytest.raises(kind, match=words):
        CALLS[call](emb, bad, dy, g)
    assert unchanged(emb, bad, dy, g) == before


@pytest.mark.parametrize("edit, kind, words", [
    (lambda dy, g: (dy.astype(np.float64), g), TypeError, "dy must be float32, got float64"),
    (lambda dy, g: (dy[:, :2], g), ValueError, "dy has shape \\(2, 2, 4\\)"),
    (lambda dy, g: (np.where(dy > 0, np.nan, dy).astype(np.float32), g), ValueError, "dy holds NaN at position 0"),
    (lambda dy, g: (dy, g[:5]), ValueError, "grad has shape \\(5, 4\\)"),
    (lambda dy, g: (dy, np.where(g > 1, np.inf, g).astype(np.float32)), ValueError, "carry holds \\+inf"),
    (lambda dy, g: (dy, g.astype(np.float16)), TypeError, "grad must be float32, got float16"),
])
def test_bad_gradients(emb, edit, kind, words):
    ids, dy, g = good(emb)
    dy, g = edit(dy, g)
    before = unchanged(emb, ids, dy, g)
    with pytest.raises(kind, match=words):
        emb.backward(ids, dy, g)
    assert unchanged(emb, ids, dy, g) == before


@pytest.mark.parametrize("kwargs, kind, words", [
    (dict(num_embeddings="10"), TypeError, "num_embeddings must be an int"),
    (dict(num_embeddings=True), TypeError, "num_embeddings must be an int"),
    (dict(num_embeddings=0), ValueError, "num_embeddings"),
    (dict(padding_idx=10), ValueError, "padding_idx"),
    (dict(padding_idx=1.0), TypeError, "padding_idx must be an int or None"),
    (dict(plan="fastest"), ValueError, "plan"),
    (dict(mode=2), TypeError, "mode must be a str"),
    (dict(mode="exact"), ValueError, "mode"),
    (dict(max_norm=-1.0), ValueError, "max_norm"),
    (dict(scale_grad_by_freq="sometimes"), ValueError, "scale_grad_by_freq"),
    (dict(backend="cuda"), ValueError, "backend 'cuda' is not in this build"),
    (dict(weight=None), ValueError, "weight is required"),
    (dict(weight=np.ones((10, 3), np.float32)), ValueError, "weight has shape \\(10, 3\\), want \\(10, 4\\)"),
    (dict(weight=np.ones((10, 4))), TypeError, "weight must be float32, got float64"),
    (dict(weight=np.full((10, 4), np.nan, np.float32)), ValueError, "weight holds NaN at row 0, column 0"),
])
def test_bad_settings(kwargs, kind, words):
    args = dict(num_embeddings=10, embedding_dim=4, weight=np.ones((10, 4), np.float32))
    args.update(kwargs)
    with pytest.raises(kind, match=words):
        kembed.Embedding(**args)


def test_a_refused_table_leaves_the_old_one(emb):
    before = bits(emb.weight)
    bad = np.ones((10, 4), np.float32)
    bad[3, 2] = np.inf
    with pytest.raises(ValueError, match="weight holds \\+inf at row 3, column 2"):
        emb.weight = bad
    with pytest.raises(ValueError, match="weight has shape"):
        emb.weight = np.ones((9, 4), np.float32)
    assert bits(emb.weight) == before


def test_not_an_array():
    with pytest.raises(TypeError):
        kembed.Embedding.from_pretrained("a table")
    emb = kembed.Embedding.from_pretrained(np.ones((3, 2), np.float32))
    with pytest.raises(TypeError):
        emb.forward([0, 1])  # a list is not an array: numpy.asarray it first


def test_threads_cannot_change_once_started():
    kembed.get_num_threads()  # starts kembed
    other = kembed.get_num_threads() + 1
    with pytest.raises(ValueError, match="fixed when its first layer was made"):
        kembed.set_num_threads(other)
    with pytest.raises(TypeError):
        kembed.set_num_threads(1.0)


# A DLPack array on a CUDA device, made by hand: this machine has no GPU, and the data
# pointer is never read (the device is refused first).
class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32), ("dtype", _DLDataType),
                ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
                ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


class CudaArray:
    def __init__(self, code, bits_, n):
        self.shape = (ctypes.c_int64 * 1)(n)
        self.t = _DLManagedTensor()
        self.t.dl_tensor = _DLTensor(ctypes.c_void_p(0x1000), _DLDevice(2, 0), 1, _DLDataType(code, bits_, 1),
                                     self.shape, None, 0)

    def __dlpack__(self, *args, **kwargs):
        new = ctypes.pythonapi.PyCapsule_New
        new.restype, new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
        return new(ctypes.addressof(self.t), b"dltensor", None)

    def __dlpack_device__(self):
        return (2, 0)


def test_a_cuda_array_is_refused_by_name(emb):
    with pytest.raises(TypeError, match="ids is on cuda:0, but this kembed module has host backends only"):
        emb.forward(CudaArray(0, 64, 3))
    with pytest.raises(TypeError, match="dy is on cuda:0"):
        emb.backward(np.array([1, 2, 3]), CudaArray(2, 32, 3))
