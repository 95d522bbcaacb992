"""kembed.torch: kembed's kernels as torch operators, and ``Embedding`` and
``EmbeddingBag``, drop-ins for ``torch.nn.Embedding`` and ``torch.nn.EmbeddingBag``
whose gradients keep kembed's promise.

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
from ._embedding_bag import _bag_layer

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


def _module_checks(num_embeddings, padding_idx, device, dtype, accumulate):
    """The module arguments torch checks itself; returns padding_idx in [0, V)."""
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
    return padding_idx


def _set_weight(module, weight, freeze, device):
    """The module's Parameter: ``weight`` itself, or a new table initialised as torch's."""
    shape = (module.num_embeddings, module.embedding_dim)
    if weight is None:
        module.weight = torch.nn.Parameter(torch.empty(shape, device=device), requires_grad=not freeze)
        module.reset_parameters()
        return
    if tuple(weight.shape) != shape:
        raise ValueError(f"kembed: _weight has shape {tuple(weight.shape)}, want {shape}")
    module.weight = torch.nn.Parameter(weight, requires_grad=not freeze)


def _repr_options(module):
    """The options torch's repr shows when they are set."""
    s = "" if module.padding_idx is None else f", padding_idx={module.padding_idx}"
    s += "" if module.max_norm is None else f", max_norm={module.max_norm}"
    return s + (", sparse=True" if module.sparse else "")


def _reset(module):
    torch.nn.init.normal_(module.weight)
    if module.padding_idx is not None:
        with torch.no_grad():
            module.weight[module.padding_idx].fill_(0)


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
        padding_idx = _module_checks(num_embeddings, padding_idx, device, dtype, accumulate)
        # The settings are checked by the C++ layer once, here (the table comes later).
        _layer(num_embeddings, embedding_dim, None, False, padding_idx, max_norm, norm_type, scale_grad_by_freq,
               sparse, mode, plan, backend)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx, self.max_norm, self.norm_type = padding_idx, max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        self.mode, self.plan, self.backend, self.accumulate = mode, plan, backend, accumulate
        _set_weight(self, _weight, _freeze, device)
        self._settings = _Settings(num_embeddings, _NONE if padding_idx is None else padding_idx,
                                   bool(scale_grad_by_freq), sparse, mode, plan, backend, accumulate)

    def reset_parameters(self):
        """As torch's: N(0, 1) from torch's generator, the padding row zero."""
        _reset(self)

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
        return f"{self.num_embeddings}, {self.embedding_dim}{_repr_options(self)}, mode={self.mode!r}, " \
               f"accumulate={self.accumulate!r}"


# ---- EmbeddingBag --------------------------------------------------------------------

class _BagSettings:
    """What the bag's autograd formula needs besides the tensors (one per module)."""

    def __init__(self, module):
        m = module
        self.mode, self.include_last_offset, self.padding_idx = m.mode, m.include_last_offset, m.padding_idx
        self.max_norm, self.norm_type, self.scale_grad_by_freq = m.max_norm, m.norm_type, m.scale_grad_by_freq
        self.sparse, self.numerics, self.plan = m.sparse, m.numerics, m.plan
        self.backend, self.accumulate = m.backend, m.accumulate

    def layer(self, weight, renorm=False):
        """A kembed bag layer over the Parameter's own memory (no copy); max_norm only
        where the call renormalises (the forward)."""
        w = weight.detach()
        if w.dtype != torch.float32:
            raise TypeError(f"kembed: weight must be float32, got {w.dtype}")
        if not w.is_contiguous():
            raise ValueError("kembed: weight must be contiguous (C order); call weight.data = weight.contiguous()")
        v, d = w.shape
        return _bag_layer(v, d, w, True, self.mode, self.include_last_offset, self.padding_idx,
                          self.max_norm if renorm else None, self.norm_type, self.scale_grad_by_freq, self.sparse,
                          self.numerics, self.plan, _where(w, self.backend))


def _bag_count(ids, offsets, include_last_offset):
    """B, where the ids and offsets say it (else None: the layer names what is wrong)."""
    if ids.dim() == 2:
        return ids.shape[0]
    if offsets is None or offsets.dim() != 1:
        return None
    return max(offsets.numel() - (1 if include_last_offset else 0), 0)


def _host_offsets(offsets):
    return None if offsets is None else offsets.detach().cpu()


def _bag_table_grad(ctx, s, grad_output, ids, offsets, psw):
    """The table's gradient, carried on from weight.grad when accumulate='carry'; max
    takes its forward's argmax (the same bits as finding it again in the table)."""
    weight, argmax = ctx.weight, ctx.argmax
    layer = s.layer(weight)
    carry = weight.grad if s.accumulate == "carry" else None
    if s.sparse:
        if carry is not None and not carry.is_sparse:
            raise RuntimeError("kembed: accumulate='carry' with sparse=True needs weight.grad sparse or None")
        c = None if carry is None else carry.coalesce()
        rows, values, _ = layer.backward_sparse(
            ids, offsets, grad_output, None if c is None else c.indices()[0].cpu(),
            None if c is None else c.values().detach().cpu(), None, psw, None, argmax)
        device = grad_output.device
        return _sparse_grad(torch.from_numpy(rows).to(device), torch.from_numpy(values).to(device), weight.shape)
    if carry is not None and carry.is_sparse:
        carry = carry.to_dense()
    if carry is not None and carry.dtype == torch.float32 and carry.is_contiguous():
        c = carry.detach()  # in place: the fold continues in .grad itself
        layer.backward(ids, offsets, grad_output, c, psw, None, c, argmax)
        return carry
    return _tensor(layer.backward(ids, offsets, grad_output, None if carry is None else carry.detach(), psw,
                                  None, None, argmax))


class _Bags(torch.autograd.Function):
    """The bag module's autograd node: kembed's pooled forward, kembed's fold backward,
    and the gradient of per_sample_weights. Its second output is max's argmax (each
    value's position, torch's max_indices), which the backward takes instead of
    finding it again; empty for the other modes."""

    @staticmethod
    def forward(weight, ids, offsets, per_sample_weights, settings):
        psw = None if per_sample_weights is None else per_sample_weights.detach()
        layer = settings.layer(weight, renorm=settings.max_norm is not None)
        bags = _bag_count(ids, offsets, settings.include_last_offset) if settings.mode == "max" else None
        argmax = torch.empty((0,) if bags is None else (bags, weight.shape[1]), dtype=torch.int64,
                             device=weight.device)
        y = _tensor(layer.forward(ids.detach(), _host_offsets(offsets), psw, None, None if bags is None else argmax))
        return y, argmax

    @staticmethod
    def setup_context(ctx, inputs, output):
        weight, ids, offsets, per_sample_weights, settings = inputs
        argmax = output[1]
        ctx.mark_non_differentiable(argmax)
        ctx.save_for_backward(ids, offsets, per_sample_weights)
        ctx.settings, ctx.weight = settings, weight
        ctx.argmax = argmax if argmax.dim() == 2 else None
        ctx.version = weight._version  # max's backward reads the table: it must not change first

    @staticmethod
    def backward(ctx, grad_output, _grad_argmax):
        ids, offsets, psw = ctx.saved_tensors
        s, weight = ctx.settings, ctx.weight
        if s.mode == "max" or ctx.needs_input_grad[3]:
            if weight._version != ctx.version:
                raise RuntimeError("kembed: the EmbeddingBag's weight was modified in place between its forward "
                                   "and backward; max's gradient and the weights' gradient read the table")
        dy = grad_output.detach().contiguous()
        ids, offsets = ids.detach(), _host_offsets(offsets)
        psw = None if psw is None else psw.detach()
        g_weight = g_psw = None
        if ctx.needs_input_grad[3]:
            g_psw = _tensor(s.layer(weight).per_sample_weights_backward(ids, offsets, dy))
        if ctx.needs_input_grad[0]:
            g = _bag_table_grad(ctx, s, dy, ids, offsets, psw)
            if s.accumulate == "carry" or (s.sparse and weight.grad is None):
                weight.grad = g  # as Embedding's: nothing for autograd to add
            else:
                g_weight = g
        return g_weight, None, None, g_psw, None


class EmbeddingBag(torch.nn.Module):
    """``torch.nn.EmbeddingBag`` with kembed's gradient: the same constructor,
    ``from_pretrained``, forward (``input``, ``offsets``, ``per_sample_weights``),
    ``weight`` Parameter and ``sparse=True`` gradients; plus kembed's ``numerics`` (its
    numeric mode: torch's ``mode`` is the pooling here), ``plan``, ``backend`` and
    ``accumulate`` ("add", or "carry": microbatches of whole bags reproduce the whole
    batch's gradient)."""

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                 mode="mean", sparse=False, _weight=None, include_last_offset=False, padding_idx=None, device=None,
                 dtype=None, *, numerics="identical", plan="auto", backend="default", accumulate="add"):
        super().__init__()
        padding_idx = _module_checks(num_embeddings, padding_idx, device, dtype, accumulate)
        # The settings are checked by the C++ layer once, here (the table comes later).
        _bag_layer(num_embeddings, embedding_dim, None, False, mode, include_last_offset, padding_idx, max_norm,
                   norm_type, scale_grad_by_freq, sparse, numerics, plan, backend)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.max_norm, self.norm_type, self.scale_grad_by_freq = max_norm, norm_type, scale_grad_by_freq
        self.mode, self.sparse, self.include_last_offset = mode, sparse, include_last_offset
        self.padding_idx, self.numerics, self.plan = padding_idx, numerics, plan
        self.backend, self.accumulate = backend, accumulate
        _set_weight(self, _weight, False, device)
        self._settings = _BagSettings(self)

    def reset_parameters(self):
        """As torch's: N(0, 1) from torch's generator, the padding row zero."""
        _reset(self)

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                        mode="mean", sparse=False, include_last_offset=False, padding_idx=None, *,
                        numerics="identical", plan="auto", backend="default", accumulate="add"):
        """As ``torch.nn.EmbeddingBag.from_pretrained``: the module's Parameter is ``embeddings``."""
        if embeddings.dim() != 2:
            raise ValueError("kembed: embeddings must be 2-D (num_embeddings, embedding_dim)")
        v, d = embeddings.shape
        bag = cls(v, d, max_norm, norm_type, scale_grad_by_freq, mode, sparse, embeddings, include_last_offset,
                  padding_idx, numerics=numerics, plan=plan, backend=backend, accumulate=accumulate)
        bag.weight.requires_grad = not freeze
        return bag

    def forward(self, input, offsets=None, per_sample_weights=None):
        if input.is_floating_point() or input.dtype == torch.bool:
            raise TypeError(f"kembed: input must hold integers, got {input.dtype}; a float id is refused "
                            "rather than truncated")
        return _Bags.apply(self.weight, input, offsets, per_sample_weights, self._settings)[0]

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}, mode={self.mode!r}{_repr_options(self)}, " \
               f"numerics={self.numerics!r}, accumulate={self.accumulate!r}"


from . import _torch_optim as optim  # noqa: E402  kembed.torch.optim: kembed's steps for torch's tables
