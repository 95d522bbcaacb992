"""kembed.optim: torch.optim's update steps on a kembed layer's own table, with the same
bits on every backend and thread count (docs/CONTRACT.md, "Updates").

    layer = kembed.Embedding(V, d, weight=table)
    opt = kembed.optim.Adam(layer, lr=1e-3)
    opt.step(layer.backward(ids, dy))          # or a SparseGradient: only its rows change
    opt.backward_step(ids, dy)                 # step(layer.backward_sparse(ids, dy)), fused

Each optimizer takes torch's constructor arguments and defaults. ``state_dict()`` gives
the state under torch's names (``step``, ``exp_avg``, ...), ``load_state_dict`` takes it
back (checked; nothing changes on a refusal).
"""
from . import _kembed
from ._embedding import SparseGradient

__all__ = ["SGD", "Adagrad", "RowWiseAdagrad", "Adam", "AdamW"]


class _Optimizer:
    _name = None

    def __init__(self, layer, settings):
        inner = getattr(layer, "_layer", None)
        if inner is None:
            raise TypeError(f"kembed: an optimizer steps a kembed.Embedding or kembed.EmbeddingBag, "
                            f"got {type(layer).__name__}")
        self._layer = layer
        self._impl = _kembed.Optimizer(inner.backend(), self._name, settings, layer.num_embeddings,
                                       layer.embedding_dim)

    def step(self, grad):
        """One step on the layer's table: a dense (V, d) gradient updates every row, a
        SparseGradient only its rows (as torch's sparse Adagrad and SparseAdam)."""
        if isinstance(grad, SparseGradient):
            self._layer._layer.step_sparse(self._impl, grad.rows, grad.values)
        else:
            self._layer._layer.step(self._impl, grad)

    def backward_step(self, ids, dy, *, batch_counts=None):
        """``step(layer.backward_sparse(ids, dy))`` in one pass: each row the ids list is
        folded and stepped at once, its gradient never made (kembed.Embedding only)."""
        if not hasattr(self._layer._layer, "backward_step"):
            raise TypeError(f"kembed: backward_step fuses kembed.Embedding's backward, not "
                            f"{type(self._layer).__name__}'s; use step(layer.backward_sparse(...))")
        self._layer._layer.backward_step(ids, dy, self._impl, batch_counts)

    def state_dict(self):
        return self._impl.state()

    def load_state_dict(self, state):
        self._impl.set_state(dict(state))

    @property
    def settings(self):
        import json
        return json.loads(self._impl.settings_json())

    def __repr__(self):
        s = self.settings
        args = ", ".join(f"{k}={v!r}" for k, v in s.items() if k != "optimizer")
        return f"kembed.optim.{type(self).__name__}({args})"


class SGD(_Optimizer):
    _name = "sgd"

    def __init__(self, layer, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, *,
                 maximize=False):
        super().__init__(layer, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                     nesterov=bool(nesterov), maximize=bool(maximize)))


class Adagrad(_Optimizer):
    _name = "adagrad"

    def __init__(self, layer, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10, *,
                 maximize=False):
        super().__init__(layer, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                     initial_accumulator_value=initial_accumulator_value, eps=eps,
                                     maximize=bool(maximize)))


class RowWiseAdagrad(_Optimizer):
    """FBGEMM's row-wise Adagrad: one accumulator per row, the mean of the row's squared
    gradient (folded in column order)."""
    _name = "rowwise_adagrad"

    def __init__(self, layer, lr=1e-2, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10, *,
                 maximize=False):
        super().__init__(layer, dict(lr=lr, weight_decay=weight_decay,
                                     initial_accumulator_value=initial_accumulator_value, eps=eps,
                                     maximize=bool(maximize)))


class Adam(_Optimizer):
    """torch.optim.Adam with a dense gradient; with a SparseGradient, the lazy form of
    torch.optim.SparseAdam (only the listed rows and their moments change)."""
    _name = "adam"

    def __init__(self, layer, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, *, maximize=False,
                 _decoupled=False):
        beta1, beta2 = betas
        super().__init__(layer, dict(lr=lr, beta1=beta1, beta2=beta2, eps=eps, weight_decay=weight_decay,
                                     maximize=bool(maximize), decoupled_weight_decay=bool(_decoupled)))


class AdamW(Adam):
    """torch.optim.AdamW: Adam with decoupled weight decay (torch's default 1e-2)."""

    def __init__(self, layer, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, *, maximize=False):
        super().__init__(layer, lr, betas, eps, weight_decay, maximize=maximize, _decoupled=True)
