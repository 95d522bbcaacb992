"""kembed.torch: kembed's kernels as torch operators, and ``Embedding``, a drop-in
``torch.nn.Embedding`` whose gradient keeps kembed's promise.

The operators (``torch.ops.kembed.*``) are ``torch.library.custom_op``s with fake
implementations and autograd formulas, so ``torch.compile`` traces through them. With
``accumulate="carry"`` the module's backward continues the fold from ``weight.grad``
instead of adding to it: k microbatches in position order then leave ``.grad``
bit-identical to one backward over their concatenation (docs/PYTHON.md).
"""
from typing import List, Optional

import numpy as np
import torch
from torch import Tensor

from ._embedding import _BACKENDS, _layer

_NONE = -1  # padding_idx: no padding row


def _where(tensor, backend):
    """The backend that runs on the tensor's device: a host one for CPU tensors, 'cuda' for
    CUDA tensors in a CUDA build (kembed.torch computes where the tensors are)."""
    kind = tensor.device.type
    if kind == "cpu":
        if backend not in ("default", "serial", "openmp"):
            raise TypeError(f"kembed: backend {backend!r} is a device's, but the tensors are on the CPU")
        return backend
    if kind == "cuda" and "cuda" in _BACKENDS and backend in ("default", "cuda"):
        torch.cuda.current_stream(tensor.device).synchronize()  # kembed's kernels run on Kokkos' stream
        return "cuda"
    hosts = ", ".join(b for b in _BACKENDS if b in ("serial", "openmp"))
    if "cuda" in _BACKENDS:
        raise TypeError(f"kembed: the tensors are on {tensor.device}, but backend {backend!r} runs elsewhere")
    raise TypeError(f"kembed: {tensor.device} tensors are refused: this kembed module has host backends only "
                    f"({hosts}); use CPU tensors")


def _tensor(array):
    """A result as a tensor, without a copy: numpy's on the host, DLPack's on a device."""
    return torch.from_numpy(array) if isinstance(array, np.ndarray) else torch.from_dlpack(array)


def _borrowed(weight, backend, padding_idx=_NONE, max_norm=None, norm_type=2.0, mode="identical", plan="auto"):
    """A kembed layer over the tensor's own memory (no copy): the Parameter is the table."""
    w = weight.detach()
    backend = _where(w, backend)
    if w.dtype != torch.float32:
        raise TypeError(f"kembed: weight must be float32, got {w.dtype}")
    if not w.is_contiguous():
        raise ValueError("kembed: weight must be contiguous (C order); call weight.data = weight.contiguous()")
    v, d = w.shape
    return _layer(v, d, w, True, None if padding_idx == _NONE else padding_idx, max_norm, norm_type, False,
                  False, mode, plan, backend)


def _ids(ids):
    return ids.detach()


@torch.library.custom_op("kembed::embedding", mutates_args=())
def embedding(weight: Tensor, ids: Tensor, padding_idx: int, scale_grad_by_freq: bool, mode: str, plan: str,
              backend: str) -> Tensor:
    """``weight[ids]`` by kembed's gather; its gradient is kembed's fold (the settings are the backward's)."""
    return _tensor(_borrowed(weight, backend).forward(_ids(ids)))


@embedding.register_fake
def _(weight, ids, padding_idx, scale_grad_by_freq, mode, plan, backend):
    return weight.new_empty(tuple(ids.shape) + (weight.shape[1],))


@torch.library.custom_op("kembed::embedding_renorm_", mutates_args=("weight",))
def embedding_renorm_(weight: Tensor, ids: Tensor, max_norm: float, norm_type: float, backend: str) -> None:
    """torch's max_norm: each referenced row whose norm exceeds max_norm rescaled in place."""
    _borrowed(weight, backend, max_norm=max_norm, norm_type=norm_type).forward(_ids(ids))


@embedding_renorm_.register_fake
def _(weight, ids, max_norm, norm_type, backend):
    return None


@torch.library.custom_op("kembed::embedding_backward", mutates_args=())
def embedding_backward(grad_output: Tensor, ids: Tensor, num_weights: int, padding_idx: int,
                       scale_grad_by_freq: bool, mode: str, plan: str, backend: str,
                       carry: Optional[Tensor]) -> Tensor:
    """The dense (num_weights, d) gradient; ``carry`` is continued (not modified)."""
    d = grad_output.shape[-1]
    layer = _layer(num_weights, d, None, False, None if padding_idx == _NONE else padding_idx, None, 2.0,
                   scale_grad_by_freq, False, mode, plan, _where(grad_output, backend))
    g = layer.backward(_ids(ids), grad_output.detach(), None if carry is None else carry.detach(), None, None)
    return _tensor(g)


@embedding_backward.register_fake
def _(grad_output, ids, num_weights, padding_idx, scale_grad_by_freq, mode, plan, backend, carry):
    return grad_output.new_empty((num_weights, grad_output.shape[-1]))


@torch.library.custom_op("kembed::embedding_backward_sparse", mutates_args=())
def embedding_backward_sparse(grad_output: Tensor, ids: Tensor, num_weights: int, padding_idx: int,
                              scale_grad_by_freq: bool, mode: str, backend: str,
                              carry_rows: Optional[Tensor], carry_values: Optional[Tensor]) -> List[Tensor]:
    """The rows the ids (and the carry) hold, ascending, and their values."""
    d = grad_output.shape[-1]
    layer = _layer(num_weights, d, None, False, None if padding_idx == _NONE else padding_idx, None, 2.0,
                   scale_grad_by_freq, True, mode, "auto", _where(grad_output, backend))
    rows, values, _ = layer.backward_sparse(  # on the host, whatever the layer's device
        _ids(ids), grad_output.detach(), None if carry_rows is None else carry_rows.detach().cpu(),
        None if carry_values is None else carry_values.detach().cpu(), None, None)
    device = grad_output.device
    return [torch.from_numpy(rows).to(device), torch.from_numpy(values).to(device)]


@embedding_backward_sparse.register_fake
def _(grad_output, ids, num_weights, padding_idx, scale_grad_by_freq, mode, backend, carry_rows, carry_values):
    n = torch.library.get_ctx().new_dynamic_size()
    return [ids.new_empty((n,), dtype=torch.int64), grad_output.new_empty((n, grad_output.shape[-1]))]


def _embedding_setup(ctx, inputs, output):
    weight, ids, padding_idx, scale_grad_by_freq, mode, plan, backend = inputs
    ctx.save_for_backward(ids)
    ctx.args = (weight.shape[0], padding_idx, scale_grad_by_freq, mode, plan, backend)


def _embedding_grad(ctx, grad_output):
    (ids,) = ctx.saved_tensors
    v, padding_idx, scale, mode, plan, backend = ctx.args
    g = embedding_backward(grad_output.contiguous(), ids, v, padding_idx, scale, mode, plan, backend, None)
    return g, None, None, None, None, None, None


embedding.register_autograd(_embedding_grad, setup_context=_embedding_setup)


class _Settings:
    """What the autograd formula needs besides the tensors (one per module)."""

    def __init__(self, num_weights, padding_idx, scale_grad_by_freq, sparse, mode, plan, backend, accumulate):
        self.num_weights, self.padding_idx = num_weights, padding_idx
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        self.mode, self.plan, self.backend, self.accumulate = mode, plan, backend, accumulate


def _sparse_grad(rows, values, shape):
    return torch.sparse_coo_tensor(rows.unsqueeze(0), values, shape, is_coalesced=True, check_invariants=False)


def _gradient(s, weight, grad_output, ids):
    """The table's gradient, carried on from weight.grad when accumulate='carry'."""
    shape = (s.num_weights, grad_output.shape[-1])
    carry = weight.grad if s.accumulate == "carry" else None
    if s.sparse:
        if carry is not None and not carry.is_sparse:
            raise RuntimeError("kembed: accumulate='carry' with sparse=True needs weight.grad sparse or None")
        c = None if carry is None else carry.coalesce()
        rows, values = embedding_backward_sparse(
            grad_output, ids, s.num_weights, s.padding_idx, s.scale_grad_by_freq, s.mode, s.backend,
            None if c is None else c.indices()[0], None if c is None else c.values())
        return _sparse_grad(rows, values, shape)
    if carry is not None and carry.is_sparse:
        carry = carry.to_dense()
    if carry is not None and carry.dtype == torch.float32 and carry.is_contiguous():
        # In place: the fold continues in .grad itself, touching only the rows the ids hit.
        layer = _layer(s.num_weights, shape[1], None, False, None if s.padding_idx == _NONE else s.padding_idx,
                       None, 2.0, s.scale_grad_by_freq, False, s.mode, s.plan, _where(carry, s.backend))
        c = carry.detach()
        layer.backward(_ids(ids), grad_output.detach(), c, None, c)
        return carry
    return embedding_backward(grad_output, ids, s.num_weights, s.padding_idx, s.scale_grad_by_freq,
                              s.mode, s.plan, s.backend, carry)


class _Lookup(torch.autograd.Function):
    """The module's autograd node: forward by kembed::embedding, backward by kembed's fold."""

    @staticmethod
    def forward(weight, ids, settings):
        s = settings
        return embedding(weight, ids, s.padding_idx, s.scale_grad_by_freq, s.mode, s.plan, s.backend)

    @staticmethod
    def setup_context(ctx, inputs, output):
        weight, ids, settings = inputs
        ctx.save_for_backward(ids)
        ctx.settings = settings
        ctx.weight = weight if settings.accumulate == "carry" or settings.sparse else None

    @staticmethod
    def backward(ctx, grad_output):
        (ids,) = ctx.saved_tensors
        s = ctx.settings
        g = _gradient(s, ctx.weight, grad_output.contiguous(), ids)
        # With a carry .grad is the fold continued, not a sum of folds; a first sparse
        # gradient is set as it is, since autograd's copy into .grad drops "coalesced".
        # Either way autograd is given nothing to add.
        if s.accumulate == "carry" or (s.sparse and ctx.weight.grad is None):
            ctx.weight.grad = g
            return None, None, None
        return g, None, None


class Embedding(torch.nn.Module):
    """``torch.nn.Embedding`` with kembed's gradient: the same constructor, ``from_pretrained``,
    ``weight`` Parameter (initialised as torch does, from torch's generator) and
    ``sparse=True`` gradients; plus kembed's ``mode``, ``plan``, ``backend`` and
    ``accumulate`` ("add": torch's ``.grad +=``; "carry": microbatches reproduce the whole
    batch's gradient). Its default gradient is torch's CPU one, bit for bit."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, _freeze=False, device=None, dtype=None,
                 *, mode="identical", plan="auto", backend="default", accumulate="add"):
        super().__init__()
        kind = torch.device(device).type if device is not None else "cpu"
        if kind != "cpu" and not (kind == "cuda" and "cuda" in _BACKENDS):
            raise TypeError(f"kembed: device {device} is not available: this kembed module has host backends only")
        if dtype is not None and dtype != torch.float32:
            raise TypeError(f"kembed: dtype must be torch.float32, got {dtype}")
        if accumulate not in ("add", "carry"):
            raise ValueError(f"kembed: accumulate must be 'add' or 'carry', got {accumulate!r}")
        if padding_idx is not None and not isinstance(padding_idx, bool) and isinstance(padding_idx, int):
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise ValueError(f"kembed: padding_idx must be within [-{num_embeddings}, {num_embeddings}), "
                                 f"got {padding_idx}")
            padding_idx = padding_idx + num_embeddings if padding_idx < 0 else padding_idx
        # The settings are checked by the C++ layer once, here (the table comes later).
        _layer(num_embeddings, embedding_dim, None, False, padding_idx, max_norm, norm_type, scale_grad_by_freq,
               sparse, mode, plan, backend)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx, self.max_norm, self.norm_type = padding_idx, max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        self.mode, self.plan, self.backend, self.accumulate = mode, plan, backend, accumulate
        if _weight is None:
            self.weight = torch.nn.Parameter(torch.empty((num_embeddings, embedding_dim), device=device),
                                             requires_grad=not _freeze)
            self.reset_parameters()
        else:
            if tuple(_weight.shape) != (num_embeddings, embedding_dim):
                raise ValueError(f"kembed: _weight has shape {tuple(_weight.shape)}, want "
                                 f"({num_embeddings}, {embedding_dim})")
            self.weight = torch.nn.Parameter(_weight, requires_grad=not _freeze)
        self._settings = _Settings(num_embeddings, _NONE if padding_idx is None else padding_idx,
                                   bool(scale_grad_by_freq), sparse, mode, plan, backend, accumulate)

    def reset_parameters(self):
        """As torch's: N(0, 1) from torch's generator, the padding row zero."""
        torch.nn.init.normal_(self.weight)
        if self.padding_idx is not None:
            with torch.no_grad():
                self.weight[self.padding_idx].fill_(0)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, sparse=False, *, mode="identical", plan="auto",
                        backend="default", accumulate="add"):
        """As ``torch.nn.Embedding.from_pretrained``: the module's Parameter is ``embeddings``."""
        if embeddings.dim() != 2:
            raise ValueError("kembed: embeddings must be 2-D (num_embeddings, embedding_dim)")
        v, d = embeddings.shape
        return cls(v, d, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse, _weight=embeddings,
                   _freeze=freeze, mode=mode, plan=plan, backend=backend, accumulate=accumulate)

    def forward(self, ids):
        if ids.is_floating_point() or ids.dtype == torch.bool:
            raise TypeError(f"kembed: ids must hold integers, got {ids.dtype}; a float id is refused rather than truncated")
        if self.max_norm is not None:
            with torch.no_grad():
                embedding_renorm_(self.weight, ids, float(self.max_norm), float(self.norm_type), self.backend)
        if self.accumulate == "carry" or self.sparse:
            return _Lookup.apply(self.weight, ids, self._settings)
        s = self._settings
        return embedding(self.weight, ids, s.padding_idx, s.scale_grad_by_freq, s.mode, s.plan, s.backend)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.sparse:
            s += ", sparse=True"
        return s + f", mode={self.mode!r}, accumulate={self.accumulate!r}"
