#!/usr/bin/env python3
"""docs/PERFORMANCE.md quotes the peers comparisons between markers; the text there
must be exactly what `scripts/bench_peers.py --table CSV` prints for each committed
CSV (and `scripts/bench_bags.py --summary` for the bags'), so that the doc and the
results cannot drift apart."""
import difflib
import importlib.util
import pathlib
import sys

root = pathlib.Path(sys.argv[1])
spec = importlib.util.spec_from_file_location("bench_peers", root / "scripts" / "bench_peers.py")
peers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(peers)
doc = (root / "docs" / "PERFORMANCE.md").read_text()
end = "<!-- end of peers tables -->"
for csv in ("bench/results/peers.csv", "bench/results/peers-grid.csv"):
    want = peers.table(root / csv)
    begin = f"<!-- peers tables: scripts/bench_peers.py --table {csv} -->\n"
    if begin not in doc or end not in doc.split(begin, 1)[-1]:
        sys.exit(f"docs/PERFORMANCE.md has no tables of {csv} between the markers")
    got = doc.split(begin, 1)[1].split(end, 1)[0]
    if got.strip() != want.strip():
        sys.stdout.writelines(difflib.unified_diff(got.strip().splitlines(True), want.strip().splitlines(True),
                                                   "docs/PERFORMANCE.md", f"bench_peers.py --table {csv}"))
        sys.exit(f"docs/PERFORMANCE.md's tables differ from {csv}")
    print(f"docs/PERFORMANCE.md's tables match {csv} ({len(want.splitlines())} lines)")

# The bags' summaries (scripts/bench_bags.py --summary), each between its own markers.
spec = importlib.util.spec_from_file_location("bench_bags", root / "scripts" / "bench_bags.py")
bags = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bags)
# Every bags CSV committed has its summary in the doc: found, not listed.
for csv in sorted(str(p.relative_to(root)) for p in (root / "bench" / "results").glob("bags*.csv")):
    begin = f"<!-- bags summary: scripts/bench_bags.py --summary {csv} -->\n"
    end = "<!-- end of bags summary -->"
    if begin not in doc or end not in doc.split(begin, 1)[-1]:
        sys.exit(f"docs/PERFORMANCE.md has no summary of {csv} between the markers")
    want, got = bags.summary(root / csv), doc.split(begin, 1)[1].split(end, 1)[0]
    if got.strip() != want.strip():
        sys.stdout.writelines(difflib.unified_diff(got.strip().splitlines(True), want.strip().splitlines(True),
                                                   "docs/PERFORMANCE.md", f"bench_bags.py --summary {csv}"))
        sys.exit(f"docs/PERFORMANCE.md's bags summary differs from {csv}")
    print(f"docs/PERFORMANCE.md's bags summary matches {csv}")
