#!/usr/bin/env python3
"""What torch's CPU EmbeddingBag computes, bit for bit (issue 37's groundwork).

Compares torch.nn.EmbeddingBag's forward and backward on the CPU with candidate
sequences written out in numpy (one float32 rounding per step, or a fused
multiply-add), and prints for each the share of bit-equal values. A share of 1.0 on
every shape says torch computes that sequence; kembed's EmbeddingBag contract matches
torch wherever torch's arithmetic is such a fixed sequence.

    ~/.cache/kembed/venv/bin/python scripts/probe_torch_bag.py
"""
import numpy as np
import torch

f32 = np.float32
rng = np.random.default_rng(5)


def fma(a, b, c):
    # float32 a * b + c with one rounding: the float64 product of two float32 is exact.
    return (np.float64(a) * np.float64(b) + np.float64(c)).astype(f32)


def share(a, b):
    return float(np.mean(np.asarray(a, f32).view(np.uint32) == np.asarray(b, f32).view(np.uint32)))


def torch_bag(w, ids, offs, mode, psw=None, dy=None, pad=None, threads=1):
    torch.set_num_threads(threads)
    v, d = w.shape
    e = torch.nn.EmbeddingBag(v, d, mode=mode, padding_idx=pad)
    with torch.no_grad():
        e.weight.copy_(torch.from_numpy(w))
    p = None if psw is None else torch.from_numpy(np.asarray(psw, f32))
    y = e(torch.from_numpy(np.asarray(ids, np.int64)), torch.from_numpy(np.asarray(offs, np.int64)), per_sample_weights=p)
    if dy is not None:
        y.backward(torch.from_numpy(dy))
        return y.detach().numpy(), e.weight.grad.numpy().copy()
    return y.detach().numpy(), None


def random_bags(t, b):
    return np.concatenate([[0], np.sort(rng.integers(0, t + 1, b - 1))]).astype(np.int64)


def forward_candidates(w, ids, offs, psw):
    """Each bag's positions in ascending order: sum from +0.0; weighted as
    round(w * row) + acc or fma(row, w, acc); mean as sum / n or sum * float(1 / n)."""
    t, d = len(ids), w.shape[1]
    ends = np.append(offs[1:], t)
    out = {k: np.zeros((len(offs), d), f32) for k in ("sum", "w_round", "w_fma", "mean_div", "mean_mul")}
    for b, (s, e) in enumerate(zip(offs, ends)):
        acc, wr, wf = np.zeros(d, f32), np.zeros(d, f32), np.zeros(d, f32)
        for p in range(s, e):
            row = w[ids[p]]
            acc = (acc + row).astype(f32)
            wr = (wr + (row * psw[p]).astype(f32)).astype(f32)
            wf = fma(row, psw[p], wf)
        out["sum"][b], out["w_round"][b], out["w_fma"][b] = acc, wr, wf
        if e > s:
            out["mean_div"][b] = (acc / f32(e - s)).astype(f32)
            out["mean_mul"][b] = (acc * f32(1.0 / (e - s))).astype(f32)
    return out


def probe_forward():
    print("forward, ascending positions (share of bit-equal values):")
    for t, b, v, d in [(2000, 100, 50, 16), (5000, 64, 1000, 64), (3000, 300, 10, 128), (4000, 40, 500, 7)]:
        w = rng.standard_normal((v, d)).astype(f32)
        ids = rng.integers(0, v, t)
        offs = random_bags(t, b)
        psw = rng.standard_normal(t).astype(f32)
        c = forward_candidates(w, ids, offs, psw)
        plain, weighted, mean = (torch_bag(w, ids, offs, m, p)[0] for m, p in (("sum", None), ("sum", psw), ("mean", None)))
        print(f"  T={t} B={b} V={v} d={d}: sum {share(c['sum'], plain):.3f}; weighted round {share(c['w_round'], weighted):.3f}"
              f", fma {share(c['w_fma'], weighted):.3f}; mean divide {share(c['mean_div'], mean):.3f}"
              f", multiply {share(c['mean_mul'], mean):.3f}")
        threads = all(torch_bag(w, ids, offs, m, p, threads=1)[0].tobytes() == torch_bag(w, ids, offs, m, p, threads=2)[0].tobytes()
                      for m, p in (("sum", None), ("sum", psw), ("mean", None), ("max", None)))
        print(f"    1 and 2 threads the same bits, every mode: {threads}")


def probe_edges():
    w = np.array([[-0.0, 1.0], [2.0, -0.0], [2.0, 5.0], [0.0, 0.0]], f32)
    nan = np.array([[np.nan, 1.0], [2.0, 3.0]], f32)
    sign = lambda m, ids, offs=(0,), **k: np.signbit(torch_bag(w, ids, offs, m, **k)[0][-1]).tolist()
    print("edges:")
    print("  one -0.0 row: sum, mean, max sign bits", sign("sum", [0]), sign("mean", [0]), sign("max", [0]))
    print("  empty bag: sum, mean, max", [torch_bag(w, [0], [0, 1], m)[0][1].tolist() + sign(m, [0], (0, 1)) for m in ("sum", "mean", "max")])
    print("  max of -0.0 then +0.0, and +0.0 then -0.0 (sign bits):", sign("max", [0, 3]), sign("max", [3, 0]))
    print("  max, NaN first / NaN second:", torch_bag(nan, [0, 1], [0], "max")[0][0].tolist(), torch_bag(nan, [1, 0], [0], "max")[0][0].tolist())
    print("  mean with padding_idx 1 over ids [0, 1, 2]:", torch_bag(w, [0, 1, 2], [0], "mean", pad=1)[0][0].tolist(),
          "(rows 0 and 2 halved:", ((w[0] + w[2]) / 2).tolist(), ")")


def probe_backward():
    """Every row referenced exactly twice: a two-term sum is the same in either order,
    so plain sums show the terms; fma(dy, s, acc) is checked in both orders."""
    v, d, b = 4000, 32, 400
    ids = np.concatenate([np.arange(v), np.arange(v)])
    rng.shuffle(ids)
    t = len(ids)
    offs = random_bags(t, b)
    n = np.append(offs[1:], t) - offs
    bag = np.repeat(np.arange(b), n)
    w = rng.standard_normal((v, d)).astype(f32)
    dy = rng.standard_normal((b, d)).astype(f32)
    psw = rng.standard_normal(t).astype(f32)
    pos = {}
    for p in range(t):
        pos.setdefault(ids[p], []).append(p)

    def fma_pairs(g, scale):
        either = ascending = 0
        for r, (p1, p2) in pos.items():
            up = fma(dy[bag[p2]], scale(p2), fma(dy[bag[p1]], scale(p1), np.zeros(d, f32)))
            down = fma(dy[bag[p1]], scale(p1), fma(dy[bag[p2]], scale(p2), np.zeros(d, f32)))
            a = up.view(np.uint32) == g[r].view(np.uint32)
            ascending += a.sum()
            either += (a | (down.view(np.uint32) == g[r].view(np.uint32))).sum()
        return either / (v * d), ascending / (v * d)

    print("backward, every row referenced twice:")
    g = torch_bag(w, ids, offs, "sum", dy=dy)[1]
    plain = np.zeros((v, d), f32)
    for p in range(t):
        plain[ids[p]] = (plain[ids[p]] + dy[bag[p]]).astype(f32)
    print(f"  sum: dy added from +0.0 {share(plain, g):.3f}")
    g = torch_bag(w, ids, offs, "mean", dy=dy)[1]
    print("  mean: fma(dy, float(1/n), acc), either order / ascending: %.3f / %.3f" % fma_pairs(g, lambda p: f32(1.0 / n[bag[p]])))
    g = torch_bag(w, ids, offs, "sum", psw=psw, dy=dy)[1]
    print("  weighted: fma(dy, w, acc), either order / ascending: %.3f / %.3f" % fma_pairs(g, lambda p: psw[p]))


if __name__ == "__main__":
    print(f"torch {torch.__version__}, CPU")
    probe_forward()
    probe_edges()
    probe_backward()
