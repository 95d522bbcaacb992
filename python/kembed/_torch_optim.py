"""kembed.torch.optim: torch.optim's SGD, Adagrad, Adam and AdamW (and FBGEMM's row-wise
Adagrad) for embedding tables, whose steps are kembed's: the same bits on every
backend and thread count (docs/CONTRACT.md, "Updates"). Drop-ins for torch.optim's
classes on 2-D float32 parameters (kembed.torch.Embedding's weight, or any table);
torch's own optimizers keep working on those modules too, with torch's bits.

A dense gradient steps every row, a sparse one (``sparse=True`` modules) only its rows,
as torch's sparse Adagrad and SparseAdam. A learning rate changed between steps (a
scheduler) is taken at the next step; the moments carry over.
"""
import torch

from . import _kembed

__all__ = ["SGD", "Adagrad", "RowWiseAdagrad", "Adam", "AdamW"]


class _TableOptimizer(torch.optim.Optimizer):
    _name = None

    def __init__(self, params, defaults, backend):
        super().__init__(params, defaults)
        self._backend = backend
        self._kembed = {}  # parameter -> (_kembed.Optimizer, the settings it was made with)

    def _settings(self, group):
        raise NotImplementedError

    def _optimizer(self, p, settings):
        from .torch import _where
        held = self._kembed.get(p)
        if held is not None and held[1] == settings:
            return held[0]
        if held is not None:
            try:  # new settings (a schedule's lr): the same moments, where they stay
                held[0].set_settings(settings)
                self._kembed[p] = (held[0], settings)
                return held[0]
            except ValueError:  # the state's shape changes (SGD's momentum on or off)
                pass
        v, d = p.shape
        new = _kembed.Optimizer(_where(p.detach(), self._backend), self._name, settings, v, d)
        state = self.state.get(p)
        if held is not None:
            new.set_state(held[0].state())
        elif state:  # from load_state_dict
            new.set_state({k: (v.numpy() if isinstance(v, torch.Tensor) else v) for k, v in state.items()})
        self._kembed[p] = (new, settings)
        return new

    @torch.no_grad()
    def step(self, closure=None):
        from .torch import _borrowed
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            settings = self._settings(group)
            for p in group["params"]:
                if p.grad is None:
                    continue
                if p.dim() != 2:
                    raise ValueError(f"kembed: kembed.torch.optim steps 2-D tables, got a parameter of shape "
                                     f"{tuple(p.shape)}; use torch.optim for the others")
                opt = self._optimizer(p, settings)
                layer = _borrowed(p, self._backend)
                g = p.grad
                if g.is_sparse:
                    g = g.coalesce()
                    layer.step_sparse(opt, g.indices()[0].contiguous(), g.values().contiguous())
                else:
                    layer.step(opt, g.contiguous())
        return loss

    def state_dict(self):
        for p, (opt, _) in self._kembed.items():
            self.state[p] = {k: (torch.from_numpy(v) if hasattr(v, "shape") else v) for k, v in opt.state().items()}
        return super().state_dict()

    def load_state_dict(self, state_dict):
        super().load_state_dict(state_dict)
        self._kembed.clear()  # made again from self.state at the next step


class SGD(_TableOptimizer):
    _name = "sgd"

    def __init__(self, params, lr=1e-3, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False, *,
                 maximize=False, backend="default"):
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                                      nesterov=nesterov, maximize=maximize), backend)

    def _settings(self, g):
        return dict(lr=g["lr"], momentum=g["momentum"], dampening=g["dampening"], weight_decay=g["weight_decay"],
                    nesterov=bool(g["nesterov"]), maximize=bool(g["maximize"]))


class Adagrad(_TableOptimizer):
    _name = "adagrad"

    def __init__(self, params, lr=1e-2, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10,
                 *, maximize=False, backend="default"):
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, eps=eps,
                                      maximize=maximize), backend)

    def _settings(self, g):
        return dict(lr=g["lr"], lr_decay=g["lr_decay"], weight_decay=g["weight_decay"],
                    initial_accumulator_value=g["initial_accumulator_value"], eps=g["eps"],
                    maximize=bool(g["maximize"]))


class RowWiseAdagrad(_TableOptimizer):
    _name = "rowwise_adagrad"

    def __init__(self, params, lr=1e-2, weight_decay=0.0, initial_accumulator_value=0.0, eps=1e-10, *,
                 maximize=False, backend="default"):
        super().__init__(params, dict(lr=lr, weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value, eps=eps,
                                      maximize=maximize), backend)

    def _settings(self, g):
        return dict(lr=g["lr"], weight_decay=g["weight_decay"],
                    initial_accumulator_value=g["initial_accumulator_value"], eps=g["eps"],
                    maximize=bool(g["maximize"]))


class Adam(_TableOptimizer):
    _name = "adam"
    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.0, *, maximize=False,
                 backend="default"):
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                                      maximize=maximize), backend)

    def _settings(self, g):
        return dict(lr=g["lr"], beta1=g["betas"][0], beta2=g["betas"][1], eps=g["eps"],
                    weight_decay=g["weight_decay"], maximize=bool(g["maximize"]),
                    decoupled_weight_decay=self._decoupled)


class AdamW(Adam):
    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2, *, maximize=False,
                 backend="default"):
        super().__init__(params, lr, betas, eps, weight_decay, maximize=maximize, backend=backend)
