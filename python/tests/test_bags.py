"""kembed.EmbeddingBag and kembed.torch.EmbeddingBag: torch's forward bits, torch's
gradient where each row has one term, the numpy layer and the module agreeing, whole-bag
microbatches that reproduce the big batch, and refusals that change nothing."""
import numpy as np
import pytest

from conftest import bits, need_torch

torch = need_torch()
import kembed  # noqa: E402
import kembed.torch as kt  # noqa: E402


def t(a):
    return bits(a.detach().numpy())


def bag_data(bags=40, longest=12, v=64, d=8, seed=1, unique=False):
    """1-D ids (Zipf-like, or each row at most once), offsets with empty bags, weights, dy."""
    rng = np.random.default_rng(seed)
    lengths = rng.integers(0, longest + 1, bags) * (rng.random(bags) > 0.2)
    total = int(lengths.sum())
    if unique:
        ids = rng.permutation(v)[:total]
    else:
        ids = np.minimum(v - 1, (rng.pareto(1.2, total) * 3).astype(np.int64))
    offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    weights = rng.integers(-1000, 1001, total).astype(np.float32) / 256
    dy = rng.standard_normal((bags, d)).astype(np.float32)
    return (torch.from_numpy(ids.astype(np.int64)), torch.from_numpy(offsets), torch.from_numpy(weights),
            torch.from_numpy(dy))


def pair(seed=0, **kw):
    """torch's module and kembed's, made from the same generator state."""
    torch.manual_seed(seed)
    ref = torch.nn.EmbeddingBag(64, 8, **kw)
    torch.manual_seed(seed)
    return ref, kt.EmbeddingBag(64, 8, **kw)


CASES = [dict(mode="sum"), dict(mode="mean"), dict(mode="max"), dict(mode="sum", padding_idx=0),
         dict(mode="mean", padding_idx=0), dict(mode="max", padding_idx=0)]


@pytest.mark.parametrize("kw", CASES + [dict(mode="sum", weighted=True)])
def test_forward_is_torchs_bits(kw):
    kw = dict(kw)
    weighted = kw.pop("weighted", False)
    ref, mine = pair(**kw)
    assert t(ref.weight) == t(mine.weight)  # initialised as torch does
    ids, offsets, w, _ = bag_data()
    psw = w if weighted else None
    assert t(ref(ids, offsets, psw)) == t(mine(ids, offsets, psw))
    grid = ids[:60].reshape(12, 5)  # 2-D input: one bag per row
    assert t(ref(grid)) == t(mine(grid))


@pytest.mark.parametrize("kw", CASES + [dict(mode="sum", weighted=True), dict(mode="mean", scale_grad_by_freq=True)])
def test_the_gradient_is_torchs_where_each_row_has_one_term(kw):
    # torch orders a row's terms by a sort that is not stable (docs/CONTRACT.md, Bags);
    # with each row at most once in the batch there is no order to differ.
    kw = dict(kw)
    weighted = kw.pop("weighted", False)
    ref, mine = pair(**kw)
    ids, offsets, w, dy = bag_data(unique=True, longest=3)
    psw = w if weighted else None
    ref(ids, offsets, psw).backward(dy)
    mine(ids, offsets, psw).backward(dy)
    assert t(ref.weight.grad) == t(mine.weight.grad)


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("sparse", [False, True])
def test_the_module_is_the_numpy_layers_bits(mode, sparse):
    ids, offsets, w, dy = bag_data(seed=3)
    psw = w if mode == "sum" else None
    torch.manual_seed(0)
    mine = kt.EmbeddingBag(64, 8, mode=mode, sparse=sparse, padding_idx=2)
    layer = kembed.EmbeddingBag.from_pretrained(mine.weight.detach().numpy(), mode=mode, padding_idx=2)
    a = None if psw is None else psw.numpy()
    assert t(mine(ids, offsets, psw)) == bits(layer(ids.numpy(), offsets.numpy(), a))
    mine(ids, offsets, psw).backward(dy)
    dense = layer.backward(ids.numpy(), offsets.numpy(), dy.numpy(), per_sample_weights=a)
    got = mine.weight.grad.to_dense() if sparse else mine.weight.grad
    assert mine.weight.grad.is_sparse == sparse
    assert t(got) == bits(dense)
    rows = layer.backward_sparse(ids.numpy(), offsets.numpy(), dy.numpy(), per_sample_weights=a)
    assert bits(rows.to_dense()) == bits(dense)
    assert bits(rows.rows) == bits(np.unique(ids.numpy()))


def test_max_hands_its_forwards_argmax_to_the_backward_with_the_same_bits():
    ids, offsets, _, dy = bag_data(seed=5)
    torch.manual_seed(0)
    table = torch.randn(64, 8).numpy()
    layer = kembed.EmbeddingBag.from_pretrained(table, mode="max", padding_idx=2)
    i, o, g = ids.numpy(), offsets.numpy(), dy.numpy()
    argmax = np.empty((len(o), 8), np.int64)
    y = layer(i, o, argmax=argmax)
    assert bits(y) == bits(layer(i, o))
    rows = np.where(argmax >= 0, i[np.maximum(argmax, 0)], -1)  # each value is its winner's
    assert bits(np.where(argmax >= 0, table[np.maximum(rows, 0), np.arange(8)], 0.0).astype(np.float32)) == bits(y)
    want = layer.backward(i, o, g)
    assert bits(layer.backward(i, o, g, argmax=argmax)) == bits(want)
    assert bits(layer.backward_sparse(i, o, g, argmax=argmax).to_dense()) == bits(want)
    # the module keeps its forward's argmax for its backward: the numpy layer's bits
    mine = kt.EmbeddingBag.from_pretrained(torch.from_numpy(table), freeze=False, mode="max", padding_idx=2)
    mine(ids, offsets).backward(dy)
    assert t(mine.weight.grad) == bits(want)
    grid = ids[:60].reshape(12, 5)
    mine.weight.grad = None
    mine(grid).backward(dy[:12])
    assert t(mine.weight.grad) == bits(layer.backward(grid.numpy(), None, g[:12]))
    # refused by name, nothing written
    out = np.full((64, 8), 3.0, np.float32)
    bad = argmax.copy()
    bad[np.argmax(argmax[:, 0] >= 0), 0] = len(i)
    with pytest.raises(ValueError, match="argmax"):
        layer.backward(i, o, g, out=out, argmax=bad)
    with pytest.raises(ValueError, match="argmax"):
        layer.backward(i, o, g, out=out, argmax=argmax[1:])
    with pytest.raises(TypeError, match="int64"):
        layer.backward(i, o, g, out=out, argmax=argmax.astype(np.int32))
    assert bits(out) == bits(np.full((64, 8), 3.0, np.float32))
    with pytest.raises(ValueError, match="mode 'max'"):
        kembed.EmbeddingBag.from_pretrained(table, mode="sum")(i, o, argmax=argmax)


def test_the_weights_gradient_flows_to_per_sample_weights():
    ids, offsets, w, dy = bag_data(seed=4)
    mine = kt.EmbeddingBag(64, 8, mode="sum", padding_idx=1)
    psw = w.clone().requires_grad_()
    mine(ids, offsets, psw).backward(dy)
    layer = kembed.EmbeddingBag.from_pretrained(mine.weight.detach().numpy(), mode="sum", padding_idx=1)
    want = layer.per_sample_weights_backward(ids.numpy(), offsets.numpy(), dy.numpy())
    assert t(psw.grad) == bits(want)
    assert not want[ids.numpy() == 1].any()  # +0.0 at the padding row's positions


def microbatched(module, ids, offsets, dy, psw, cuts):
    """Whole bags cut at `cuts`, each microbatch's backward in order."""
    bounds = list(offsets.tolist()) + [len(ids)]
    for b0, b1 in zip(cuts, cuts[1:]):
        p0, p1 = bounds[b0], bounds[b1]
        w = None if psw is None else psw[p0:p1]
        module(ids[p0:p1], offsets[b0:b1] - p0, w).backward(dy[b0:b1])
    return module.weight.grad


@pytest.mark.parametrize("mode", ["sum", "mean", "max"])
@pytest.mark.parametrize("sparse", [False, True])
def test_whole_bag_microbatches_with_a_carry_give_the_big_batchs_bits(mode, sparse):
    ids, offsets, w, dy = bag_data(bags=90, seed=5)
    psw = w if mode == "sum" else None
    table = torch.randn(64, 8)
    big = kt.EmbeddingBag.from_pretrained(table.clone(), freeze=False, mode=mode, sparse=sparse)
    big(ids, offsets, psw).backward(dy)
    carry = kt.EmbeddingBag.from_pretrained(table.clone(), freeze=False, mode=mode, sparse=sparse,
                                            accumulate="carry")
    rng = np.random.default_rng(7)
    cuts = [0] + sorted(rng.integers(0, 91, 5).tolist()) + [90]
    got = microbatched(carry, ids, offsets, dy, psw, cuts)
    dense = (lambda g: g.to_dense()) if sparse else (lambda g: g)
    assert t(dense(got)) == t(dense(big.weight.grad))


def test_numpy_layer_takes_int32_ids_2d_input_and_the_last_offset():
    table = np.arange(50 * 6, dtype=np.float32).reshape(50, 6) / 7
    grid = (np.arange(60) * 7 % 50).reshape(12, 5)
    bag = kembed.EmbeddingBag.from_pretrained(table, mode="mean")
    y = bag(grid)
    assert bits(y) == bits(bag(grid.astype(np.int32)))
    starts = np.arange(0, 60, 5)
    assert bits(y) == bits(bag(grid.reshape(-1), starts))
    csr = kembed.EmbeddingBag.from_pretrained(table, mode="mean", include_last_offset=True)
    assert bits(y) == bits(csr(grid.reshape(-1), np.append(starts, 60)))
    assert csr.include_last_offset and csr.mode == "mean" and csr.numerics == "identical"


def test_refusals_name_the_argument_and_change_nothing():
    mine = kt.EmbeddingBag(10, 3, mode="mean")
    before = t(mine.weight)
    ids = torch.tensor([1, 2, 3, 4])
    with pytest.raises(ValueError, match="offsets"):
        mine(ids, torch.tensor([1, 2]))
    with pytest.raises(ValueError, match="offsets"):
        mine(ids, torch.tensor([0, 3, 2]))
    with pytest.raises(ValueError, match="per_sample_weights"):
        mine(ids, torch.tensor([0, 2]), torch.ones(4))
    with pytest.raises(ValueError, match="offsets"):
        mine(ids.reshape(2, 2), torch.tensor([0, 1]))
    with pytest.raises(IndexError, match="holds 10"):
        mine(torch.tensor([1, 10]), torch.tensor([0]))
    with pytest.raises(TypeError, match="float id is refused"):
        mine(torch.tensor([1.0]), torch.tensor([0]))
    with pytest.raises(ValueError, match="scale_grad_by_freq"):
        kt.EmbeddingBag(10, 3, mode="max", scale_grad_by_freq=True)
    with pytest.raises(TypeError, match="mode"):
        kt.EmbeddingBag(10, 3, mode=1)
    with pytest.raises(ValueError, match="mode"):
        kt.EmbeddingBag(10, 3, mode="min")
    assert t(mine.weight) == before
    bags = kt.EmbeddingBag(10, 3, mode="max")
    y = bags(ids, torch.tensor([0, 2]))
    with torch.no_grad():
        bags.weight.mul_(2)
    with pytest.raises(RuntimeError, match="modified in place between its forward and backward"):
        y.backward(torch.ones(2, 3))
    assert bags.weight.grad is None
    layer = kembed.EmbeddingBag.from_pretrained(np.ones((10, 3), np.float32), mode="sum")
    with pytest.raises(ValueError, match="per_sample_weights"):
        layer(np.array([1, 2]), np.array([0]), np.array([1.0, np.inf], np.float32))
    with pytest.raises(ValueError, match="per_sample_weights"):
        layer(np.array([1, 2]), np.array([0]), np.ones(3, np.float32))
    with pytest.raises(ValueError, match="dy"):
        layer.backward(np.array([1, 2]), np.array([0]), np.ones((2, 3), np.float32))
