"""kembed.torch.optim: torch.optim's classes whose steps are kembed's, on torch tables.
The bits are kembed.optim's on kembed.Embedding, dense and sparse; a state_dict saved
and loaded continues bit for bit; a learning rate a scheduler changes is taken at the
next step with the moments kept; torch.optim keeps working on the same modules."""
import numpy as np
import pytest

from conftest import need_torch

torch = need_torch()

import kembed  # noqa: E402
import kembed.torch as kt  # noqa: E402

V, D = 40, 6


def table():
    return np.random.default_rng(5).uniform(-1, 1, (V, D)).astype(np.float32)


def batch(k):
    rng = np.random.default_rng(200 + k)
    return rng.integers(0, V, 48), rng.uniform(-1, 1, (48, D)).astype(np.float32)


def torch_run(make, steps, sparse, start=0, module=None, opt=None):
    module = module or kt.Embedding.from_pretrained(torch.from_numpy(table()), freeze=False, sparse=sparse)
    opt = opt or make(module.parameters())
    for k in range(start, start + steps):
        ids, dy = batch(k)
        opt.zero_grad()
        module(torch.from_numpy(ids)).backward(torch.from_numpy(dy))
        opt.step()
    return module, opt


MAKERS = {
    "sgd": (lambda p: kt.optim.SGD(p, lr=0.1, momentum=0.9), lambda l: kembed.optim.SGD(l, lr=0.1, momentum=0.9)),
    "adagrad": (lambda p: kt.optim.Adagrad(p, lr=0.1), lambda l: kembed.optim.Adagrad(l, lr=0.1)),
    "rowwise": (lambda p: kt.optim.RowWiseAdagrad(p, lr=0.1), lambda l: kembed.optim.RowWiseAdagrad(l, lr=0.1)),
    "adamw": (lambda p: kt.optim.AdamW(p, lr=0.01), lambda l: kembed.optim.AdamW(l, lr=0.01)),
}


@pytest.mark.parametrize("name", sorted(MAKERS))
@pytest.mark.parametrize("sparse", [False, True])
def test_the_bits_are_kembed_optims(name, sparse):
    make_torch, make_kembed = MAKERS[name]
    module, _ = torch_run(make_torch, 4, sparse)
    layer = kembed.Embedding(V, D, weight=table())
    opt = make_kembed(layer)
    for k in range(4):
        ids, dy = batch(k)
        opt.step(layer.backward_sparse(ids, dy) if sparse else layer.backward(ids, dy))
    assert module.weight.detach().numpy().tobytes() == layer.weight.tobytes()


@pytest.mark.parametrize("sparse", [False, True])
def test_a_loaded_state_dict_continues_bit_for_bit(sparse):
    make = MAKERS["adamw"][0]
    want, _ = torch_run(make, 6, sparse)
    module, opt = torch_run(make, 3, sparse)
    saved = opt.state_dict()
    again = kt.Embedding.from_pretrained(module.weight.detach().clone(), freeze=False, sparse=sparse)
    opt2 = make(again.parameters())
    opt2.load_state_dict(saved)
    torch_run(make, 3, sparse, start=3, module=again, opt=opt2)
    assert again.weight.detach().numpy().tobytes() == want.weight.detach().numpy().tobytes()


def test_a_scheduled_lr_keeps_the_moments():
    make = MAKERS["adamw"][0]
    module, opt = torch_run(make, 2, False)
    for g in opt.param_groups:
        g["lr"] = 0.005
    torch_run(make, 2, False, start=2, module=module, opt=opt)
    layer = kembed.Embedding(V, D, weight=table())
    k1 = kembed.optim.AdamW(layer, lr=0.01)
    for k in range(2):
        k1.step(layer.backward(*batch(k)))
    k2 = kembed.optim.AdamW(layer, lr=0.005)
    k2.load_state_dict(k1.state_dict())
    for k in range(2, 4):
        k2.step(layer.backward(*batch(k)))
    assert module.weight.detach().numpy().tobytes() == layer.weight.tobytes()


def test_torch_optim_still_steps_the_module():
    module, _ = torch_run(lambda p: torch.optim.Adam(p, lr=0.01), 2, False)
    ref = torch.nn.Embedding.from_pretrained(torch.from_numpy(table()), freeze=False)
    torch_run(lambda p: torch.optim.Adam(p, lr=0.01), 2, False, module=ref)
    assert module.weight.detach().numpy().tobytes() == ref.weight.detach().numpy().tobytes()


def test_a_parameter_that_is_not_a_table_is_refused():
    bias = torch.nn.Parameter(torch.zeros(D))
    opt = kt.optim.SGD([bias], lr=0.1)
    bias.grad = torch.ones(D)
    with pytest.raises(ValueError, match="2-D tables"):
        opt.step()
    assert not bias.detach().any()
