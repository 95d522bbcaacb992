#!/usr/bin/env python3
"""Which IEEE binary32 operations torch's CPU optimizers perform per element, found by
experiment: each optimizer steps a float32 table (41 x 23 = 943 elements, so both the
vectorised body and the scalar tail of torch's loops run) and every candidate sequence
of operations, written out below with numpy's float32 arithmetic and libm's fmaf (one
rounding), is compared with torch's result bit for bit. A candidate that matches every
element at every step is torch's sequence on this machine's code path (torch picks its
kernels by CPU: ATEN_CPU_CAPABILITY=default|avx2|avx512 forces one, and the script
prints which ran). Issue 38 wrote kembed's optimizer contract from this; not run in CI:

    ~/.cache/kembed/venv/bin/python scripts/probe_torch_optim.py
    ATEN_CPU_CAPABILITY=avx2 ~/.cache/kembed/venv/bin/python scripts/probe_torch_optim.py
"""
import ctypes
import warnings
import itertools
import math
import sys

import numpy as np
import torch

F = np.float32
warnings.filterwarnings("ignore", message="Sparse invariant checks")
_fmaf = ctypes.CDLL("libm.so.6").fmaf
_fmaf.restype = ctypes.c_float
_fmaf.argtypes = [ctypes.c_float] * 3
fma = np.vectorize(lambda a, b, c: _fmaf(float(a), float(b), float(c)), otypes=[F])


def f32(x):
    return F(x)


def add(a, b):
    return (np.asarray(a, F) + np.asarray(b, F)).astype(F)


def mul(a, b):
    return (np.asarray(a, F) * np.asarray(b, F)).astype(F)


def div(a, b):
    return (np.asarray(a, F) / np.asarray(b, F)).astype(F)


# torch's float32 sqrt of a tensor is MKL's vector math (vsSqrt), not correctly
# rounded: the candidates run with the IEEE sqrt and again with torch's own, so the
# rest of torch's sequence shows through.
TORCH_SQRT = False


def sqrt(a):
    if TORCH_SQRT:
        return torch.from_numpy(np.array(a, F)).sqrt().numpy()
    return np.sqrt(np.asarray(a, F)).astype(F)


SHAPE = (41, 23)


def data(seed):
    rng = np.random.default_rng(seed)
    p = (rng.standard_normal(SHAPE) * 0.5).astype(F)
    grads = [(rng.standard_normal(SHAPE) * 0.1).astype(F) for _ in range(4)]
    return p, grads


def same(a, b):
    return np.asarray(a, F).tobytes() == np.asarray(b, F).tobytes()


def probe(name, make_opt, candidates, sparse=False, steps=4):
    """Steps torch's optimizer, and each candidate (a function of the state before the
    step returning (param, state) after it) from torch's own state before each step."""
    p0, grads = data(hash(name) % 1000)
    w = torch.nn.Parameter(torch.from_numpy(p0.copy()))
    opt = make_opt([w])
    ok = {c: 0 for c in candidates}
    equal = {c: 0 for c in candidates}  # elements equal, over all steps
    state = None
    for k, g in enumerate(grads[:steps]):
        before = w.detach().numpy().copy()
        if sparse:  # every row listed: the same arithmetic as the dense update, through sparse code
            idx = torch.arange(SHAPE[0]).unsqueeze(0)
            w.grad = torch.sparse_coo_tensor(idx, torch.from_numpy(g), SHAPE)
        else:
            w.grad = torch.from_numpy(g.copy())
        opt.step()
        after = w.detach().numpy()
        for c, fn in candidates.items():
            want, new_state = fn(before, g, state, k + 1)
            ok[c] += same(want, after)
            equal[c] += int(np.sum(np.asarray(want, F).view(np.uint32) == after.view(np.uint32)))
        # The state torch holds now, for the next step's candidates.
        st = opt.state[w]
        state = {key: (val.detach().numpy().copy() if torch.is_tensor(val) and val.numel() > 1 else val)
                 for key, val in st.items()}
    hits = [c for c, n in ok.items() if n == steps]
    print(f"{name}: {', '.join(hits) if hits else 'no candidate matches'}"
          f"  ({', '.join(f'{c} {n}/{steps} steps, {equal[c]}/{steps * p0.size} elements' for c, n in ok.items())})")


def sgd():
    lr = 0.1
    probe("sgd p + lr*g", lambda ps: torch.optim.SGD(ps, lr=lr), {
        "fma(g, -lr, p)": lambda p, g, s, t: (fma(g, f32(-lr), p), None),
        "p + (-lr * g)": lambda p, g, s, t: (add(p, mul(f32(-lr), g)), None),
    })
    wd = 0.01
    probe("sgd weight_decay", lambda ps: torch.optim.SGD(ps, lr=lr, weight_decay=wd), {
        "g' = fma(p, wd, g)": lambda p, g, s, t: (fma(fma(p, f32(wd), g), f32(-lr), p), None),
        "g' = g + wd * p": lambda p, g, s, t: (fma(add(g, mul(f32(wd), p)), f32(-lr), p), None),
    })
    m, d = 0.9, 0.1

    def momentum(fused_buf, nesterov, d=d):
        def fn(p, g, s, t):
            buf = g if s is None else (fma(g, f32(1 - d), mul(s["momentum_buffer"], f32(m))) if fused_buf
                                       else add(mul(s["momentum_buffer"], f32(m)), mul(g, f32(1 - d))))
            step = fma(buf, f32(m), g) if nesterov else buf
            return fma(step, f32(-lr), p), None
        return fn
    probe("sgd momentum, dampening", lambda ps: torch.optim.SGD(ps, lr=lr, momentum=m, dampening=d), {
        "buf = fma(g, 1 - d, buf * m)": momentum(True, False),
        "buf = buf * m + g * (1 - d)": momentum(False, False),
    })
    probe("sgd nesterov", lambda ps: torch.optim.SGD(ps, lr=lr, momentum=m, nesterov=True), {
        "buf = fma(g, 1, buf * m), g' = fma(buf, m, g)": momentum(True, True, 0.0),
    })


def adagrad():
    lr, eps, decay, init = 0.05, 1e-10, 0.01, 0.1

    def dense(sum_fused, upd):
        def fn(p, g, s, t):
            s0 = np.full(SHAPE, F(init)) if s is None else s["sum"]
            s1 = fma(g, g, s0) if sum_fused else add(s0, mul(g, g))
            std = add(sqrt(s1), f32(eps))
            clr = f32(-(lr / (1 + (t - 1) * decay)))
            return upd(p, g, std, clr), None
        return fn
    updates = {
        "p + (v * g) / std": lambda p, g, std, v: add(p, div(mul(v, g), std)),
        "p + v * (g / std)": lambda p, g, std, v: add(p, mul(v, div(g, std))),
        "fma(g / std, v, p)": lambda p, g, std, v: fma(div(g, std), v, p),
    }
    cands = {f"sum {'fma(g, g, s)' if sf else 's + g * g'}; {u}": dense(sf, fn)
             for sf, (u, fn) in itertools.product([True, False], updates.items())}
    probe("adagrad dense", lambda ps: torch.optim.Adagrad(ps, lr=lr, eps=eps, lr_decay=decay,
                                                         initial_accumulator_value=init), cands)
    probe("adagrad sparse", lambda ps: torch.optim.Adagrad(ps, lr=lr, eps=eps, lr_decay=decay,
                                                          initial_accumulator_value=init), cands, sparse=True)


def sparse_adam():
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8

    def fn(p, g, s, t):
        m0 = np.zeros(SHAPE, F) if s is None else s["exp_avg"]
        v0 = np.zeros(SHAPE, F) if s is None else s["exp_avg_sq"]
        mu = mul(add(g, -m0), f32(1 - b1))
        vu = mul(add(mul(g, g), -v0), f32(1 - b2))
        numer, denom = add(mu, m0), add(sqrt(add(vu, v0)), f32(eps))
        step = lr * math.sqrt(1 - b2 ** t) / (1 - b1 ** t)
        return add(p, mul(f32(-step), div(numer, denom))), None
    probe("sparse_adam", lambda ps: torch.optim.SparseAdam(ps, lr=lr, betas=(b1, b2), eps=eps),
          {"m += (g - m) * (1 - b1) ...; p + (-step * (m / (sqrt(v) + eps)))": fn}, sparse=True)


def adam(decoupled, wd):
    lr, b1, b2, eps = 0.01, 0.9, 0.999, 1e-8

    def make(lerp, sq, scale):
        def fn(p, g, s, t):
            m0 = np.zeros(SHAPE, F) if s is None else s["exp_avg"]
            v0 = np.zeros(SHAPE, F) if s is None else s["exp_avg_sq"]
            if wd and decoupled:
                p = mul(p, f32(1 - lr * wd))
            elif wd:
                g = fma(p, f32(wd), g)
            w = f32(1 - b1)
            m1 = fma(w, add(g, -m0), m0) if lerp == "fma" else add(m0, mul(w, add(g, -m0)))
            vb, c = mul(v0, f32(b2)), f32(1 - b2)
            v1 = {"fma(c * g, g, v * b2)": lambda: fma(mul(c, g), g, vb),
                  "v * b2 + (c * g) * g": lambda: add(vb, mul(mul(c, g), g))}[sq]()
            bc2 = (1 - b2 ** t) ** 0.5
            root = div(sqrt(v1), f32(bc2)) if scale == "div" else mul(sqrt(v1), f32(1 / bc2))
            denom = add(root, f32(eps))
            step = f32(-(lr / (1 - b1 ** t)))
            return add(p, div(mul(step, m1), denom)), None
        return fn
    cands = {f"lerp {lerp}; {sq}; sqrt(v) {scale} bc2": make(lerp, sq, scale)
             for lerp in ["fma", "m + w * (g - m)"]
             for sq in ["fma(c * g, g, v * b2)", "v * b2 + (c * g) * g"]
             for scale in ["div", "mul"]}
    name = ("adamw" if decoupled else "adam") + (f" weight_decay {wd}" if wd else "")
    cls = torch.optim.AdamW if decoupled else torch.optim.Adam
    probe(name, lambda ps: cls(ps, lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd, foreach=False), cands)


def powers():
    """beta^t by square-and-multiply (kembed's rule) against Python's pow (glibc's):
    the binary64 values differ in their last bits, the binary32 constants Adam forms
    from them are compared here."""
    def power(x, n):
        r = 1.0
        for bit in bin(n)[2:]:
            r = r * r
            if bit == "1":
                r = r * x
        return r
    values = constants = 0
    for beta in (0.5, 0.9, 0.95, 0.99, 0.999, 0.9999):
        for t in range(1, 20001):
            a, b = beta ** t, power(beta, t)
            values += a != b
            for lr in (1e-4, 1e-3, 1e-2, 0.1):
                constants += f32(-lr / (1 - a)) != f32(-lr / (1 - b))
            constants += f32((1 - a) ** 0.5) != f32(math.sqrt(1 - b))
    print(f"beta^t, 6 betas x t = 1..20000: {values} binary64 values differ from pow, "
          f"{constants} binary32 constants (step size at 4 lr, sqrt of the correction)")


if __name__ == "__main__":
    print(f"torch {torch.__version__}, CPU capability {torch.backends.cpu.get_cpu_capability()}")
    torch.set_num_threads(1)
    rng = np.random.default_rng(1)
    z = (rng.random(100000) * 4).astype(F)
    ulps = torch.from_numpy(z).sqrt().numpy().view(np.int32).astype(np.int64) - sqrt(z).view(np.int32)
    print(f"torch's sqrt of 1e5 floats in [0, 4): {np.count_nonzero(ulps)} not correctly rounded, "
          f"at most {np.abs(ulps).max()} ULP")
    powers()
    sgd()
    for TORCH_SQRT in (False, True):
        print(f"-- with {'torch' if TORCH_SQRT else 'the IEEE'} sqrt")
        adagrad()
        sparse_adam()
        adam(False, 0.0)
        adam(False, 0.01)
        adam(True, 0.01)
    sys.exit(0)
