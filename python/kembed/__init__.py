"""kembed: embedding tables whose gradient has the same bits everywhere.

``kembed.Embedding`` is ``torch.nn.Embedding``'s forward and backward on any array
(numpy, torch CPU tensors, DLPack, the buffer protocol); ``kembed.torch.Embedding`` is
a drop-in ``torch.nn.Module``; ``kembed.EmbeddingBag`` and ``kembed.torch.EmbeddingBag``
are the same for ``torch.nn.EmbeddingBag``'s pooled lookups. The gradient is bit for bit torch's CPU one, on every
backend and thread count, and microbatches that carry the gradient forward reproduce
the whole batch's. docs/PYTHON.md in the repository is the guide.
"""
from . import _kembed
from ._embedding import Embedding, SparseGradient
from ._embedding_bag import EmbeddingBag
from . import optim

__version__ = _kembed.build_info()["version"]


def set_num_threads(threads):
    """Set kembed's OpenMP threads. Call it before the first layer is made: the count is
    fixed for the process from then on (KEMBED_NUM_THREADS sets it too). It does not
    change torch's threads (torch.set_num_threads), nor do they change it."""
    if isinstance(threads, bool) or not isinstance(threads, int):
        raise TypeError(f"kembed: set_num_threads takes an int, got {type(threads).__name__}")
    _kembed.set_num_threads(threads)


def get_num_threads():
    """The threads kembed's OpenMP backend runs with (fixes the count if no layer exists yet)."""
    return _kembed.num_threads()


def empty(shape):
    """A new float32 numpy array, not written, in memory as kembed allocates its own:
    huge pages advised, so the backward's scattered reads of dy's rows miss the TLB less
    than in an ordinary numpy array (docs/PYTHON.md, Speed). Fill it, then pass it."""
    if isinstance(shape, int):
        shape = (shape,)
    return _kembed.empty([int(s) for s in shape])


def backends():
    """The backends this build has, as ``backend=`` takes them ("serial", "openmp")."""
    return list(_kembed.backends())


__all__ = ["Embedding", "EmbeddingBag", "SparseGradient", "optim", "set_num_threads", "get_num_threads", "backends",
           "empty"]
