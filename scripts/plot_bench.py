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
    if f.name.startswith("torch"):  # scripts/bench_torch.py writes these
        continue
    with open(f) as fh:
        rows += list(csv.DictReader(fh))
for r in rows:
    for k in ("V", "d", "T", "threads"):
        r[k] = int(r[k])
    for k in ("seconds", "bytes", "memcpy_seconds", "fraction_of_bound"):
        r[k] = float(r[k])


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

# Tables (markdown) and the auto check.
print("| backend | V | d | T | ids | forward ms (bound) | scan ms | sort ms | auto ms (plan, bound) | deterministic ms | fast ms |")
print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
points = sorted({(label(r), r["V"], r["d"], r["T"], r["ids"]) for r in rows})
auto_right = 0
for (b, v, d, t, ids) in points:
    g = {(r["op"], r["mode"], r["plan"]): r for r in rows if (label(r), r["V"], r["d"], r["T"], r["ids"]) == (b, v, d, t, ids)}
    f, sc, so, au = g[("forward", "-", "-")], g[("backward", "identical", "scan")], g[("backward", "identical", "sort")], g[("backward", "identical", "auto")]
    de, fa = g[("backward", "deterministic", "auto")], g[("backward", "fast", "auto")]
    faster = "scan" if sc["seconds"] <= so["seconds"] else "sort"
    # `auto` is right when it took the faster plan, or one within 10% of it (noise).
    auto_right += au["plan_used"] == faster or min(sc["seconds"], so["seconds"]) * 1.1 >= g[("backward", "identical", au["plan_used"])]["seconds"]
    ms = lambda r: f"{r['seconds'] * 1e3:.3g}"
    print(f"| {b} | {v:g} | {d} | {t:g} | {ids} | {ms(f)} ({f['fraction_of_bound']:.0%}) | {ms(sc)} | {ms(so)} | "
          f"{ms(au)} ({au['plan_used']}, {au['fraction_of_bound']:.0%}) | {ms(de)} | {ms(fa)} |")
print(f"\n`auto` took the faster plan (or one within 10% of it) at {auto_right} of {len(points)} points.")
