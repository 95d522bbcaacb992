"""kembed.EmbeddingBag: pooled lookups on any array, over kembed's C++ layer."""
from . import _kembed
from ._embedding import SparseGradient, _Table, _check_str, _layer_arguments, _shape

_POOLINGS = ("sum", "mean", "max")


def _bag_layer(num_embeddings, embedding_dim, weight, borrowed, mode, include_last_offset, padding_idx, max_norm,
               norm_type, scale_grad_by_freq, sparse, numerics, plan, backend):
    """A _kembed.BagLayer after Python's own type checks (the values are the C++ layer's to check)."""
    _check_str("mode", mode, _POOLINGS)
    if not isinstance(include_last_offset, bool):
        raise TypeError(f"kembed: include_last_offset must be a bool, got {type(include_last_offset).__name__}")
    a = _layer_arguments(num_embeddings, embedding_dim, padding_idx, max_norm, norm_type, scale_grad_by_freq,
                         sparse, numerics, plan, backend, mode_name="numerics")
    return _kembed.BagLayer(a["backend"], a["num_embeddings"], a["embedding_dim"], weight, borrowed, mode,
                            include_last_offset, a["padding_idx"], a["plan"], a["mode"], a["max_norm"],
                            a["norm_type"], a["scale_grad_by_freq"], a["sparse"])


class EmbeddingBag(_Table):
    """Pooled lookups as ``torch.nn.EmbeddingBag`` (``mode`` "sum", "mean" or "max",
    ``offsets`` or 2-D ids, ``per_sample_weights`` with "sum", ``padding_idx``,
    ``include_last_offset``), whose gradient has the same bits on every backend, thread
    count and plan, and through microbatches of whole bags that carry it forward.

    As ``kembed.Embedding``: the table is the layer's own float32 copy and is required
    (no random initialisation). ``mode`` is torch's pooling, so kembed's numeric mode is
    ``numerics`` here ("identical", "deterministic", "fast"); ``plan`` and ``backend`` are
    ``Embedding``'s.
    """

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                 mode="mean", sparse=False, weight=None, include_last_offset=False, padding_idx=None, *,
                 numerics="identical", plan="auto", backend="default"):
        if weight is None:
            raise ValueError("kembed: weight is required: there is no random initialisation in the contract; "
                             "pass the table, or use EmbeddingBag.from_pretrained")
        self._layer = _bag_layer(num_embeddings, embedding_dim, weight, False, mode, include_last_offset,
                                 padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse, numerics, plan,
                                 backend)
        self._settings = self._layer.settings()

    @classmethod
    def from_pretrained(cls, embeddings, max_norm=None, norm_type=2.0, scale_grad_by_freq=False, mode="mean",
                        sparse=False, include_last_offset=False, padding_idx=None, *, numerics="identical",
                        plan="auto", backend="default"):
        """A layer over a copy of a (V, d) table, as ``torch.nn.EmbeddingBag.from_pretrained``."""
        shape = _shape(embeddings)
        if len(shape) != 2:
            raise ValueError(f"kembed: embeddings has shape {shape}; from_pretrained wants a 2-D "
                             "(num_embeddings, embedding_dim) table")
        return cls(shape[0], shape[1], max_norm, norm_type, scale_grad_by_freq, mode, sparse, weight=embeddings,
                   include_last_offset=include_last_offset, padding_idx=padding_idx, numerics=numerics, plan=plan,
                   backend=backend)

    mode = property(lambda self: self._settings["pooling"], doc="torch's mode: 'sum', 'mean' or 'max'")
    include_last_offset = property(lambda self: self._settings["include_last_offset"])
    numerics = property(lambda self: self._settings["mode"], doc="kembed's numeric mode")

    def forward(self, input, offsets=None, per_sample_weights=None, *, out=None, argmax=None):
        """Each bag's rows pooled: a (B, embedding_dim) array. ``input`` is 1-D with
        ``offsets`` (where each bag starts) or 2-D (B, L) without; ``per_sample_weights``
        (the ids' shape) with mode "sum". With max_norm the referenced rows of the layer's
        table are first renormalised, as torch does. With mode "max", ``argmax`` (a (B,
        embedding_dim) int64 array where the layer computes) receives each value's
        position (-1 for a bag with none): hand it to ``backward`` to spare it the
        search (torch's max_indices)."""
        return self._layer.forward(input, offsets, per_sample_weights, out, argmax)

    __call__ = forward

    def backward(self, input, offsets, dy, grad=None, *, per_sample_weights=None, batch_counts=None, out=None,
                 argmax=None):
        """The dense (V, d) gradient of ``forward`` for ``dy`` (B, d). A ``grad`` is carried
        (not modified): microbatches of whole bags, in order, reproduce the whole batch's
        gradient. ``out=grad`` continues it in place; ``batch_counts`` is for
        scale_grad_by_freq='batch'; ``argmax``, the forward's (mode "max", the same table,
        ids and offsets), gives the same bits without reading the table."""
        return self._layer.backward(input, offsets, dy, grad, per_sample_weights, batch_counts, out, argmax)

    def backward_sparse(self, input, offsets, dy, grad=None, *, per_sample_weights=None, batch_counts=None,
                        argmax=None):
        """The gradient as a SparseGradient: the rows the bags (and a carried SparseGradient
        ``grad``) hold, each bit for bit that row of ``backward``'s result."""
        if grad is not None and not isinstance(grad, SparseGradient):
            raise TypeError(f"kembed: backward_sparse's grad must be a SparseGradient, got {type(grad).__name__}")
        rows, values, counts = self._layer.backward_sparse(
            input, offsets, dy, None if grad is None else grad.rows, None if grad is None else grad.values,
            None if grad is None else grad.counts, per_sample_weights, batch_counts, argmax)
        return SparseGradient(rows, values, counts, self.num_embeddings, self.embedding_dim)

    def per_sample_weights_backward(self, input, offsets, dy):
        """The gradient of ``per_sample_weights`` (mode "sum"): the ids' shape, each
        position's row dotted with its bag's dy, columns in order."""
        return self._layer.per_sample_weights_backward(input, offsets, dy)

    def __repr__(self):
        extra = "".join(f", {k}={self._settings[k]!r}" for k in ("padding_idx", "max_norm")
                        if self._settings[k] is not None)
        return (f"kembed.EmbeddingBag({self.num_embeddings}, {self.embedding_dim}, mode={self.mode!r}{extra}, "
                f"numerics={self.numerics!r}, plan={self.plan!r}, backend={self.backend!r})")


__all__ = ["EmbeddingBag"]
