"""kembed.Embedding: the layer on any array, over kembed's C++ layer."""
import numbers

from . import _kembed

_MODES = ("identical", "deterministic", "fast")
_BACKENDS = tuple(_kembed.backends())  # fixed by the build: asked once, not on every call
_PLANS = ("auto", "scan", "sort", "bucket")


def _check_int(name, value, optional=False):
    if optional and value is None:
        return
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        want = "an int or None" if optional else "an int"
        raise TypeError(f"kembed: {name} must be {want}, got {type(value).__name__}")


def _check_str(name, value, choices):
    if not isinstance(value, str):
        raise TypeError(f"kembed: {name} must be a str, one of {', '.join(choices)}; got {type(value).__name__}")


def _scale_name(value):
    """torch's bool, or kembed's 'none' | 'call' | 'batch'."""
    if isinstance(value, bool):
        return "call" if value else "none"
    if isinstance(value, str):
        return value
    raise TypeError(f"kembed: scale_grad_by_freq must be a bool or 'none', 'call', 'batch'; got {type(value).__name__}")


def _shape(array):
    shape = getattr(array, "shape", None)
    if shape is None:
        try:
            shape = memoryview(array).shape
        except TypeError:
            raise TypeError(f"kembed: a table must be an array (numpy, torch, DLPack, buffer), got {type(array).__name__}") from None
    return tuple(int(s) for s in shape)


def _layer_arguments(num_embeddings, embedding_dim, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                     mode, plan, backend, mode_name="mode"):
    """The settings an Embedding and an EmbeddingBag share, type-checked and converted
    (the values are the C++ layer's to check)."""
    _check_int("num_embeddings", num_embeddings)
    _check_int("embedding_dim", embedding_dim)
    _check_int("padding_idx", padding_idx, optional=True)
    if max_norm is not None and (isinstance(max_norm, bool) or not isinstance(max_norm, numbers.Real)):
        raise TypeError(f"kembed: max_norm must be a number or None, got {type(max_norm).__name__}")
    if isinstance(norm_type, bool) or not isinstance(norm_type, numbers.Real):
        raise TypeError(f"kembed: norm_type must be a number, got {type(norm_type).__name__}")
    if not isinstance(sparse, bool):
        raise TypeError(f"kembed: sparse must be a bool, got {type(sparse).__name__}")
    _check_str(mode_name, mode, _MODES)
    _check_str("plan", plan, _PLANS)
    _check_str("backend", backend, ("default",) + _BACKENDS)
    return dict(backend=backend, num_embeddings=int(num_embeddings), embedding_dim=int(embedding_dim),
                padding_idx=None if padding_idx is None else int(padding_idx), plan=plan, mode=mode,
                max_norm=None if max_norm is None else float(max_norm), norm_type=float(norm_type),
                scale_grad_by_freq=_scale_name(scale_grad_by_freq), sparse=sparse)


def _layer(num_embeddings, embedding_dim, weight, borrowed, padding_idx, max_norm, norm_type,
           scale_grad_by_freq, sparse, mode, plan, backend):
    """A _kembed.Layer after Python's own type checks."""
    a = _layer_arguments(num_embeddings, embedding_dim, padding_idx, max_norm, norm_type, scale_grad_by_freq,
                         sparse, mode, plan, backend)
    return _kembed.Layer(a["backend"], a["num_embeddings"], a["embedding_dim"], weight, borrowed, a["padding_idx"],
                         a["plan"], a["mode"], a["max_norm"], a["norm_type"], a["scale_grad_by_freq"], a["sparse"])


class SparseGradient:
    """A row-sparse gradient: ``rows`` (ascending, unique), their ``values`` (rows x d)
    and ``counts`` (each row's occurrences among the call's ids; 0 for a carried row).
    Every listed row is bit for bit that row of the dense gradient; the others are +0.0."""

    def __init__(self, rows, values, counts, num_embeddings, embedding_dim):
        self.rows, self.values, self.counts = rows, values, counts
        self.shape = (int(num_embeddings), int(embedding_dim))

    def to_dense(self):
        import numpy as np
        out = np.zeros(self.shape, dtype=np.float32)
        out[self.rows] = self.values
        return out

    def __repr__(self):
        return f"SparseGradient({len(self.rows)} of {self.shape[0]} rows, embedding_dim={self.shape[1]})"


class _Table:
    """What Embedding and EmbeddingBag share: the settings, read-only (a new setting is a
    new layer), and the table."""
    num_embeddings = property(lambda self: self._settings["num_embeddings"])
    embedding_dim = property(lambda self: self._settings["embedding_dim"])
    padding_idx = property(lambda self: self._settings["padding_idx"], doc="normalised to [0, V), or None")
    max_norm = property(lambda self: self._settings["max_norm"])
    norm_type = property(lambda self: self._settings["norm_type"])
    scale_grad_by_freq = property(lambda self: self._settings["scale_grad_by_freq"], doc="'none', 'call' or 'batch'")
    sparse = property(lambda self: self._settings["sparse"])
    plan = property(lambda self: self._settings["plan"])
    backend = property(lambda self: self._layer.backend())

    @property
    def weight(self):
        """A copy of the table (a new numpy array each time); assign to replace it."""
        return self._layer.weight()

    @weight.setter
    def weight(self, table):
        self._layer.set_weight(table)


class Embedding(_Table):
    """An embedding table as ``torch.nn.Embedding``, whose gradient has the same bits on
    every backend, thread count and plan.

    The table is the layer's own float32 copy, taken at construction and whenever
    ``weight`` is assigned; writing into the array you passed does not reach it. There
    is no random initialisation: pass ``weight`` or use ``from_pretrained``.

    ``mode``: "identical" (torch's CPU bits, every row's terms in position order),
    "deterministic" (a fixed pairwise order: the same bits everywhere, not torch's) or
    "fast" (atomics; not reproducible). ``plan``: how the identical backward groups
    positions ("auto", "scan", "sort", "bucket"); every plan gives the same bits.
    ``backend``: "default", or one of ``kembed.backends()``.
    """

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, weight=None, *, mode="identical", plan="auto",
                 backend="default"):
        if weight is None:
            raise ValueError("kembed: weight is required: there is no random initialisation in the contract; "
                             "pass the table, or use Embedding.from_pretrained")
        self._layer = _layer(num_embeddings, embedding_dim, weight, False, padding_idx, max_norm, norm_type,
                             scale_grad_by_freq, sparse, mode, plan, backend)
        self._settings = self._layer.settings()

    @classmethod
    def from_pretrained(cls, embeddings, padding_idx=None, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, sparse=False, *, mode="identical", plan="auto", backend="default"):
        """A layer over a copy of a (V, d) table, as ``torch.nn.Embedding.from_pretrained``
        (there is no ``freeze``: nothing here updates the table)."""
        shape = _shape(embeddings)
        if len(shape) != 2:
            raise ValueError(f"kembed: embeddings has shape {shape}; from_pretrained wants a 2-D "
                             "(num_embeddings, embedding_dim) table")
        return cls(shape[0], shape[1], padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse,
                   weight=embeddings, mode=mode, plan=plan, backend=backend)

    mode = property(lambda self: self._settings["mode"])

    def plan_for(self, positions):
        """The plan the identical backward runs for this many positions ('auto' resolved)."""
        _check_int("positions", positions)
        return self._layer.plan_for(int(positions))

    def forward(self, ids, *, out=None):
        """``weight[ids]``: an array of shape ``ids.shape + (embedding_dim,)`` (written into
        ``out``, a C-order float32 array of that shape, when given). With max_norm the
        referenced rows of the layer's table are first renormalised, as torch does."""
        return self._layer.forward(ids, out)

    __call__ = forward

    def backward(self, ids, dy, grad=None, *, batch_counts=None, out=None):
        """The dense (V, d) gradient of ``forward(ids)`` for ``dy``. A ``grad`` is carried:
        the fold continues from it (it is not modified), so microbatches in position order
        reproduce the whole batch's gradient bit for bit. ``out`` (C-order float32, (V, d))
        receives the result; ``out=grad`` continues the carry in place, touching only the
        rows the ids hit. ``batch_counts`` (V entries) is for scale_grad_by_freq='batch'."""
        return self._layer.backward(ids, dy, grad, batch_counts, out)

    def backward_sparse(self, ids, dy, grad=None, *, batch_counts=None):
        """The gradient as a SparseGradient: the rows the ids (and a carried ``grad``, a
        SparseGradient) hold, each bit for bit that row of ``backward``'s result."""
        if grad is not None and not isinstance(grad, SparseGradient):
            raise TypeError(f"kembed: backward_sparse's grad must be a SparseGradient, got {type(grad).__name__}")
        rows, values, counts = self._layer.backward_sparse(
            ids, dy, None if grad is None else grad.rows, None if grad is None else grad.values,
            None if grad is None else grad.counts, batch_counts)
        return SparseGradient(rows, values, counts, self.num_embeddings, self.embedding_dim)

    def counts(self, ids):
        """Each row's occurrences among the ids: an int64 array of V entries."""
        return self._layer.counts(ids)

    def save(self, path):
        """Write the table and every setting to an HDF5 table file (kembed's format, the
        one ``kembed backward --table`` reads); crash-safe: a failed save leaves ``path`` as it was."""
        self._layer.save(str(path), "kembed (Python) Embedding.save")

    @classmethod
    def load(cls, path, *, backend="default"):
        """A layer from a kembed table file (``save``'s, or the CLI's ``make-table``/``import``)."""
        weight, s = _kembed.load(str(path))
        return cls(s["num_embeddings"], s["embedding_dim"], s["padding_idx"], s["max_norm"], s["norm_type"],
                   s["scale_grad_by_freq"], s["sparse"], weight=weight, mode=s["mode"], plan=s["plan"],
                   backend=backend)

    def __repr__(self):
        extra = "".join(f", {k}={self._settings[k]!r}" for k in ("padding_idx", "max_norm") if self._settings[k] is not None)
        return (f"kembed.Embedding({self.num_embeddings}, {self.embedding_dim}{extra}, mode={self.mode!r}, "
                f"plan={self.plan!r}, backend={self.backend!r})")
