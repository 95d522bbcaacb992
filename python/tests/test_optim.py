"""kembed.optim: torch.optim's steps on a kembed layer's own table. The same bits on
every backend and thread count, dense and sparse; SGD's bits are torch's; a saved and
restored state continues as if never stopped; bad settings and states are refused by
name with nothing changed."""
import numpy as np
import pytest

import kembed
from conftest import python, need_torch

V, D = 50, 8


def table(seed=3):
    return np.random.default_rng(seed).uniform(-1, 1, (V, D)).astype(np.float32)


def batch(step):
    rng = np.random.default_rng(100 + step)
    return rng.integers(0, V, 64), rng.uniform(-1, 1, (64, D)).astype(np.float32)


def run(make, steps=5, sparse=False, backend="default"):
    layer = kembed.Embedding(V, D, weight=table(), backend=backend)
    opt = make(layer)
    for k in range(steps):
        ids, dy = batch(k)
        opt.step(layer.backward_sparse(ids, dy) if sparse else layer.backward(ids, dy))
    return layer.weight, opt


OPTIMIZERS = {
    "sgd": lambda l: kembed.optim.SGD(l, lr=0.1, momentum=0.9, weight_decay=0.01),
    "adagrad": lambda l: kembed.optim.Adagrad(l, lr=0.1, lr_decay=0.01, initial_accumulator_value=0.1),
    "rowwise": lambda l: kembed.optim.RowWiseAdagrad(l, lr=0.1),
    "adam": lambda l: kembed.optim.Adam(l, lr=0.01, betas=(0.8, 0.99), weight_decay=0.01),
    "adamw": lambda l: kembed.optim.AdamW(l, lr=0.01),
}


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("sparse", [False, True])
def test_every_backend_gives_the_same_bits(name, sparse):
    want, _ = run(OPTIMIZERS[name], sparse=sparse)
    for backend in kembed.backends():
        got, _ = run(OPTIMIZERS[name], sparse=sparse, backend=backend)
        assert got.tobytes() == want.tobytes(), backend
    assert want.tobytes() != table().tobytes()  # it stepped


def test_a_sparse_step_changes_only_its_rows():
    layer = kembed.Embedding(V, D, weight=table())
    opt = kembed.optim.Adam(layer, lr=0.01)
    ids, dy = np.array([3, 7, 7]), np.ones((3, D), np.float32)
    opt.step(layer.backward_sparse(ids, dy))
    changed = np.flatnonzero((layer.weight != table()).any(axis=1))
    assert changed.tolist() == [3, 7]
    state = opt.state_dict()
    assert state["step"] == 1 and state["exp_avg"].shape == (V, D)
    assert not state["exp_avg"][[0, 1, 2, 4]].any()


def test_a_restored_state_continues_bit_for_bit():
    want, _ = run(OPTIMIZERS["adam"], steps=6)
    layer = kembed.Embedding(V, D, weight=table())
    opt = OPTIMIZERS["adam"](layer)
    for k in range(3):
        opt.step(layer.backward(*batch(k)))
    saved, weight = opt.state_dict(), layer.weight
    layer2 = kembed.Embedding(V, D, weight=weight)
    opt2 = OPTIMIZERS["adam"](layer2)
    opt2.load_state_dict(saved)
    for k in range(3, 6):
        opt2.step(layer2.backward(*batch(k)))
    assert layer2.weight.tobytes() == want.tobytes()


def test_sgd_gives_torchs_bits():
    torch = need_torch()
    layer = kembed.Embedding(V, D, weight=table())
    opt = kembed.optim.SGD(layer, lr=0.1, momentum=0.9, weight_decay=0.01)
    w = torch.nn.Parameter(torch.from_numpy(table()))
    ref = torch.optim.SGD([w], lr=0.1, momentum=0.9, weight_decay=0.01, foreach=False)
    for k in range(5):
        grad = layer.backward(*batch(k))
        opt.step(grad)
        w.grad = torch.from_numpy(grad.copy())
        ref.step()
    assert layer.weight.tobytes() == w.detach().numpy().tobytes()


def test_threads_do_not_change_the_bits():
    code = ("import numpy as np, kembed, hashlib, sys; sys.path.insert(0, %r);"
            "from test_optim import run, OPTIMIZERS;"
            "print(hashlib.sha256(run(OPTIMIZERS['rowwise'])[0].tobytes()).hexdigest())") % __file__.rsplit("/", 1)[0]
    outs = {python("-c", code, env={"KEMBED_NUM_THREADS": str(t)}).stdout.strip() for t in (1, 2, 3)}
    assert len(outs) == 1 and len(next(iter(outs))) == 64, outs


@pytest.mark.parametrize("make, message", [
    (lambda l: kembed.optim.SGD(l, lr=-1.0), "lr"),
    (lambda l: kembed.optim.Adam(l, betas=(1.5, 0.9)), "beta"),
    (lambda l: kembed.optim.SGD(l, nesterov=True), "nesterov"),
])
def test_bad_settings_are_refused_by_name(make, message):
    layer = kembed.Embedding(V, D, weight=table())
    with pytest.raises(ValueError, match=message):
        make(layer)


def test_bad_states_and_gradients_change_nothing():
    layer = kembed.Embedding(V, D, weight=table())
    opt = kembed.optim.Adam(layer, lr=0.01)
    opt.step(layer.backward(*batch(0)))
    before, state = layer.weight, opt.state_dict()
    bad = dict(state, exp_avg=np.zeros((V - 1, D), np.float32))
    with pytest.raises(ValueError, match="exp_avg"):
        opt.load_state_dict(bad)
    grad = layer.backward(*batch(1))
    grad[4, 2] = np.nan
    with pytest.raises(ValueError, match="grad"):
        opt.step(grad)
    with pytest.raises(ValueError, match="grad"):
        opt.step(np.zeros((V, D + 1), np.float32))
    assert layer.weight.tobytes() == before.tobytes()
    assert opt.state_dict()["exp_avg"].tobytes() == state["exp_avg"].tobytes()
    with pytest.raises(TypeError, match="kembed.Embedding"):
        kembed.optim.SGD(np.zeros((V, D), np.float32))


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
def test_backward_step_is_the_sparse_backward_then_the_step(name):
    want, want_opt = run(OPTIMIZERS[name], sparse=True)
    for backend in kembed.backends():
        layer = kembed.Embedding(V, D, weight=table(), backend=backend)
        opt = OPTIMIZERS[name](layer)
        for k in range(5):
            opt.backward_step(*batch(k))
        assert layer.weight.tobytes() == want.tobytes(), backend
        got, expected = opt.state_dict(), want_opt.state_dict()
        assert all(np.asarray(got[k]).tobytes() == np.asarray(expected[k]).tobytes() for k in expected), backend


def test_backward_step_refuses_with_nothing_changed():
    layer = kembed.Embedding(V, D, weight=table())
    opt = kembed.optim.Adagrad(layer, lr=0.1)
    ids, dy = batch(0)
    dy[3, 1] = np.inf
    with pytest.raises(ValueError, match="dy"):
        opt.backward_step(ids, dy)
    with pytest.raises(IndexError, match="outside"):
        opt.backward_step(np.array([0, V]), np.ones((2, D), np.float32))
    assert layer.weight.tobytes() == table().tobytes() and opt.state_dict()["step"] == 0
    bag = kembed.EmbeddingBag(V, D, weight=table())
    with pytest.raises(TypeError, match="backward_step"):
        kembed.optim.SGD(bag).backward_step(ids, dy)
