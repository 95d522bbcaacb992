#!/usr/bin/env python3
"""Plots and tables from kembed-bench CSVs: time against T, fraction of the memcpy
bound, and whether `auto` picked the faster plan.  plot_bench.py RESULTS_DIR IMAGES_DIR"""
import csv
import pathlib
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

results, images = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
images.mkdir(parents=True, exist_ok=True)
rows = []
for f in sorted(results.glob("*.csv")):
    if f.name.startswith(("torch", "peers", "ceilings")):  # the peers scripts', and kembed-ceilings' (below)
        continue
    with open(f) as fh:
        rows += list(csv.DictReader(fh))
for r in rows:
    for k in ("V", "d", "T", "threads"):
        r[k] = int(r[k])
    for k in ("seconds", "bytes", "memcpy_seconds", "fraction_of_bound"):
        r[k] = float(r[k])
    # The point's own bare access pattern (bench/patterns.hpp); CSVs from before it have none.
    r["pattern"] = r.get("pattern") or "-"
    r["pattern_seconds"] = float(r.get("pattern_seconds") or 0)


def label(r):
    return f"{r['backend']}-{r['threads']}"


def pick(**kw):
    return [r for r in rows if all(r[k] == v for k, v in kw.items())]


# Time of the identical backward (auto) against T, one line per (V, d), per backend.
backends = sorted({label(r) for r in rows})
fig, axes = plt.subplots(1, len(backends), figsize=(6 * len(backends), 4.5), squeeze=False)
for ax, b in zip(axes[0], backends):
    for (v, d) in sorted({(r["V"], r["d"]) for r in rows}):
        pts = sorted((r["T"], r["seconds"]) for r in rows if label(r) == b and r["V"] == v and r["d"] == d
                     and r["op"] == "backward" and r["mode"] == "identical" and r["plan"] == "auto" and r["ids"] == "zipf")
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"V={v:g}, d={d}")
    ax.set_xscale("log"), ax.set_yscale("log"), ax.set_xlabel("T (positions)"), ax.set_ylabel("seconds")
    ax.set_title(f"backward, identical, auto, Zipf ids: {b}")
    ax.grid(True, which="both", alpha=0.3)
axes[0][-1].legend(fontsize=7, ncol=2)
fig.tight_layout()
fig.savefig(images / "perf-backward-time.png", dpi=90)

# Fraction of the memcpy bound, forward and backward, per d.
fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
for ax, op in zip(axes, ("forward", "backward")):
    for b in backends:
        pts = sorted((r["d"], r["T"], r["fraction_of_bound"]) for r in rows if label(r) == b and r["op"] == op
                     and (op == "forward" or (r["mode"] == "identical" and r["plan"] == "auto")))
        ax.scatter([p[0] * (1 + 0.05 * backends.index(b)) for p in pts], [p[2] for p in pts], s=12, label=b)
    ax.set_xscale("log", base=2), ax.set_xlabel("d"), ax.set_ylabel("memcpy time / kembed time")
    ax.axhline(0.7 if op == "forward" else 0.4, color="grey", ls="--", lw=1)
    ax.set_title(f"{op}: fraction of the memcpy bound (dashed: the goal)")
    ax.grid(True, alpha=0.3), ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(images / "perf-bound-fraction.png", dpi=90)

# Tables (markdown) and the goals, counted per backend.
plans = ("scan", "sort", "bucket")
print("| backend | V | d | T | ids | forward ms (bound) | scan ms | sort ms | bucket ms | auto ms (plan, bound) | deterministic ms | fast ms |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
points = sorted({(label(r), r["V"], r["d"], r["T"], r["ids"]) for r in rows})
goals = {}
for (b, v, d, t, ids) in points:
    g = {(r["op"], r["mode"], r["plan"]): r for r in rows if (label(r), r["V"], r["d"], r["T"], r["ids"]) == (b, v, d, t, ids)}
    f, au = g[("forward", "-", "-")], g[("backward", "identical", "auto")]
    by_plan = {p: g[("backward", "identical", p)] for p in plans if ("backward", "identical", p) in g}
    de, fa = g[("backward", "deterministic", "auto")], g[("backward", "fast", "auto")]
    best = min(r["seconds"] for r in by_plan.values())
    faster = min(by_plan, key=lambda p: by_plan[p]["seconds"])
    k = goals.setdefault(b, dict(points=0, auto_strict=0, auto_10=0, fwd_n=0, fwd_ok=0, bwd_n=0, bwd_ok=0, fracs=[]))
    k["points"] += 1
    k["auto_strict"] += au["plan_used"] == faster
    # Within 10% of the fastest: two runs of one point differ by more than that here.
    k["auto_10"] += by_plan[au["plan_used"]]["seconds"] <= best * 1.1
    if d >= 64:
        k["fwd_n"] += 1
        k["fwd_ok"] += f["fraction_of_bound"] >= 0.7
    if d >= 64 and t >= 100000:
        k["bwd_n"] += 1
        k["bwd_ok"] += au["fraction_of_bound"] >= 0.4
        k["fracs"].append(au["fraction_of_bound"])
    ms = lambda r: f"{r['seconds'] * 1e3:.3g}"
    cells = " | ".join(ms(by_plan[p]) if p in by_plan else "-" for p in plans)
    print(f"| {b} | {v:g} | {d} | {t:g} | {ids} | {ms(f)} ({f['fraction_of_bound']:.0%}) | {cells} | "
          f"{ms(au)} ({au['plan_used']}, {au['fraction_of_bound']:.0%}) | {ms(de)} | {ms(fa)} |")

# Linearity: auto's time at T = 1e6 over T = 1e5, per (V, d, ids); linear is 10 (+-20%).
print("\n| backend | auto picked the fastest plan (within 10%) | forward >= 70% of bound (d >= 64) | "
      "backward >= 40% of bound (T >= 1e5, d >= 64; median) | t(1e6) / t(1e5): range, pairs above 12; "
      "the same over the bound's growth |")
print("| --- | --- | --- | --- | --- |")
for b, k in goals.items():
    ratios, normalised = [], []
    for (v, d, ids) in sorted({(r["V"], r["d"], r["ids"]) for r in rows if label(r) == b}):
        sel = {r["T"]: r for r in rows if label(r) == b and (r["V"], r["d"], r["ids"]) == (v, d, ids)
               and r["op"] == "backward" and r["mode"] == "identical" and r["plan"] == "auto"}
        if 100000 in sel and 1000000 in sel:
            lo, hi = sel[100000], sel[1000000]
            ratios.append(hi["seconds"] / lo["seconds"])
            # The same growth measured against the bound's own (the memcpy's bytes grow
            # less than 10x when V * d is large, and leave the cache at T = 1e6 too).
            normalised.append((hi["seconds"] / lo["seconds"]) / (hi["memcpy_seconds"] / lo["memcpy_seconds"]))
    fr = sorted(k["fracs"])
    med = fr[len(fr) // 2] if fr else float("nan")
    lin = (f"{min(ratios):.1f}-{max(ratios):.1f}, {sum(x > 12 for x in ratios)} of {len(ratios)}; "
           f"against the bound's growth {min(normalised):.2f}-{max(normalised):.2f}, "
           f"{sum(abs(x - 1) <= 0.2 for x in normalised)} within 20%") if ratios else "-"
    print(f"| {b} | {k['auto_strict']} of {k['points']} ({k['auto_10']}) | {k['fwd_ok']} of {k['fwd_n']} | "
          f"{k['bwd_ok']} of {k['bwd_n']} ({med:.0%}) | {lin} |")

# Against each point's own access pattern (bench/patterns.hpp, timed on the point's
# data in the same run): the forward against the gather, the identical backward
# (auto) against the pattern of the plan that ran. Goals: forward >= 90% and backward
# >= 80% of the pattern at T >= 1e5, d >= 64; kembed / pattern within +-20% of its
# median over T = 1e3..1e6 for each V, d and ids.
def of_pattern(r):
    return r["pattern_seconds"] / r["seconds"] if r["pattern_seconds"] > 0 else None


with_pattern = [r for r in rows if r["pattern_seconds"] > 0]
if with_pattern:
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, (op, goal) in zip(axes, (("forward", 0.9), ("backward", 0.8))):
        for b in backends:
            pts = [(r["T"], of_pattern(r)) for r in with_pattern if label(r) == b and r["op"] == op
                   and (op == "forward" or r["plan"] == "auto") and r["d"] >= 64]
            ax.scatter([p[0] * (1 + 0.15 * backends.index(b)) for p in pts], [p[1] for p in pts], s=12, label=b)
        ax.set_xscale("log"), ax.set_xlabel("T (positions)"), ax.set_ylabel("pattern time / kembed time")
        ax.axhline(goal, color="grey", ls="--", lw=1)
        ax.set_title(f"{op}{' (auto)' if op == 'backward' else ''}, d >= 64: fraction of its access pattern")
        ax.grid(True, alpha=0.3), ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(images / "perf-pattern-fraction.png", dpi=90)

    print("\n| backend | forward >= 90% of the gather (T >= 1e5, d >= 64; least) | backward (auto) >= 80% of its "
          "plan's pattern (T >= 1e5, d >= 64; least) | kembed / pattern within 20% of its median over T "
          "(forward; backward) | points short of a goal |")
    print("| --- | --- | --- | --- | --- |")
    for b in backends:
        mine = [r for r in with_pattern if label(r) == b]
        fw = [r for r in mine if r["op"] == "forward" and r["T"] >= 100000 and r["d"] >= 64]
        bw = [r for r in mine if r["op"] == "backward" and r["plan"] == "auto" and r["mode"] == "identical"
              and r["T"] >= 100000 and r["d"] >= 64]
        short = [r for r in fw if of_pattern(r) < 0.9] + [r for r in bw if of_pattern(r) < 0.8]
        lin = {}
        for op in ("forward", "backward"):
            ok = n = 0
            for (v, d, ids) in sorted({(r["V"], r["d"], r["ids"]) for r in mine}):
                sel = [r["seconds"] / r["pattern_seconds"] for r in mine if (r["V"], r["d"], r["ids"]) == (v, d, ids)
                       and r["op"] == op and (op == "forward" or r["plan"] == "auto")]
                if len(sel) < 2:
                    continue
                med = sorted(sel)[len(sel) // 2]
                n += 1
                ok += all(abs(x / med - 1) <= 0.2 for x in sel)
            lin[op] = f"{ok} of {n}"
        least = lambda rs: f"{min(of_pattern(r) for r in rs):.0%}" if rs else "-"
        names = "; ".join(f"{r['op']} V={r['V']:g} d={r['d']} T={r['T']:g} {r['ids']} {r['plan_used']} "
                          f"{of_pattern(r):.0%}" for r in short)
        print(f"| {b} | {sum(of_pattern(r) >= 0.9 for r in fw)} of {len(fw)} ({least(fw)}) | "
              f"{sum(of_pattern(r) >= 0.8 for r in bw)} of {len(bw)} ({least(bw)}) | "
              f"{lin['forward']}; {lin['backward']} | {names or '-'} |")

# Against torch (torch.csv, from bench_peers.py's earlier version; not run by bench.sh).
torch_csv = results / "torch.csv"
if torch_csv.exists():
    with open(torch_csv) as fh:
        tr = list(csv.DictReader(fh))
    for r in tr:
        for k in ("kembed_forward", "torch_forward", "kembed_backward", "torch_backward"):
            r[k] = float(r[k])
    equal = sum(r["bits_equal"] == "True" for r in tr)
    slower = [r for r in tr if r["kembed_backward"] > r["torch_backward"]]
    big = [r["torch_backward"] / r["kembed_backward"] for r in tr
           if int(r["V"]) == 1000000 and int(r["T"]) == 1000000 and int(r["d"]) == 16]
    ratios = sorted(r["torch_backward"] / r["kembed_backward"] for r in tr)
    fwd = sorted(r["torch_forward"] / r["kembed_forward"] for r in tr)
    print(f"\nAgainst torch ({len(tr)} comparisons): bits equal at {equal}; kembed's backward faster at "
          f"{len(tr) - len(slower)} (torch time / kembed time {ratios[0]:.2f}-{ratios[-1]:.1f}, median "
          f"{ratios[len(ratios) // 2]:.1f}); at V = T = 1e6, d = 16: {min(big):.1f}-{max(big):.1f}x; "
          f"forward {fwd[0]:.2f}-{fwd[-1]:.1f}x (median {fwd[len(fwd) // 2]:.1f}).")
    if slower:
        print("\n| V | d | T | ids | threads | kembed backward ms | torch ms | plan |")
        print("| --- | --- | --- | --- | --- | --- | --- | --- |")
        for r in slower:
            print(f"| {int(r['V']):g} | {r['d']} | {int(r['T']):g} | {r['ids']} | {r['threads']} | "
                  f"{r['kembed_backward'] * 1e3:.3g} | {r['torch_backward'] * 1e3:.3g} | {r['plan_used']} |")

# The bare access patterns (kembed-ceilings, run by bench.sh after the grid).
ceilings_csv = results / "ceilings.csv"
if ceilings_csv.exists():
    with open(ceilings_csv) as fh:
        cr = list(csv.DictReader(fh))
    print("\nThe access patterns without kembed (kembed-ceilings), fraction of the memcpy bound (ms):\n")
    print("| threads | row bytes | MiB | " + " | ".join(dict.fromkeys(r["pattern"] for r in cr)) + " |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in dict.fromkeys(r["pattern"] for r in cr)) + " |")
    for key in dict.fromkeys((r["threads"], r["row_bytes"], r["mib"]) for r in cr):
        got = [r for r in cr if (r["threads"], r["row_bytes"], r["mib"]) == key]
        print(f"| {key[0]} | {key[1]} | {key[2]} | " + " | ".join(
            f"{float(r['fraction_of_bound']):.0%} ({float(r['seconds']) * 1e3:.3g} ms)" for r in got) + " |")
