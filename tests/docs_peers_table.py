#!/usr/bin/env python3
"""docs/PERFORMANCE.md quotes the peers comparison between two markers; the text
there must be exactly what `scripts/bench_peers.py --table bench/results/peers.csv`
prints, so that the doc and the committed CSV cannot drift apart."""
import difflib
import importlib.util
import pathlib
import sys

root = pathlib.Path(sys.argv[1])
spec = importlib.util.spec_from_file_location("bench_peers", root / "scripts" / "bench_peers.py")
peers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(peers)
want = peers.table(root / "bench" / "results" / "peers.csv")
doc = (root / "docs" / "PERFORMANCE.md").read_text()
begin = "<!-- peers tables: scripts/bench_peers.py --table bench/results/peers.csv -->\n"
end = "<!-- end of peers tables -->"
if begin not in doc or end not in doc:
    sys.exit("docs/PERFORMANCE.md has no peers tables between the markers")
got = doc.split(begin, 1)[1].split(end, 1)[0]
if got.strip() != want.strip():
    sys.stdout.writelines(difflib.unified_diff(got.strip().splitlines(True), want.strip().splitlines(True),
                                               "docs/PERFORMANCE.md", "bench_peers.py --table"))
    sys.exit("docs/PERFORMANCE.md's peers tables differ from bench/results/peers.csv")
print(f"docs/PERFORMANCE.md's peers tables match bench/results/peers.csv ({len(want.splitlines())} lines)")
