#!/usr/bin/env bash
# Remakes datasets/kjv/ from its source: the books of Genesis and Exodus in the King
# James Version (1611), as Debian's bible-kjv package prints them. Words are
# lower-cased runs of letters (with inner apostrophes); ids are frequency ranks, so
# id 0 is the commonest word, as in real tokenisers. The table and batch are then
# made from the token stream with fixed seeds, so every file comes out the same.
#
#   scripts/make_dataset.sh [path/to/kembed]     (default: build/serial/cli/kembed)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$here"  # relative names, so the files record the same provenance from any clone
kembed=${1:-build/serial/cli/kembed}
out=datasets/kjv
dim=16

if ! command -v bible >/dev/null; then
  [[ $(id -u) -eq 0 ]] || { echo "make_dataset: needs bible-kjv; run as root: apt-get install -y bible-kjv" >&2; exit 1; }
  apt-get install -y -qq bible-kjv >/dev/null
fi
mkdir -p "$out"
text=$(mktemp)
trap 'rm -f "$text"' EXIT
bible "gen1:1-50:26" "ex1:1-40:38" >"$text"

python3 - "$text" "$out" <<'PY'
import collections, pathlib, re, sys
text, out = pathlib.Path(sys.argv[1]).read_text(), pathlib.Path(sys.argv[2])
verses = []
for line in text.splitlines():
    if re.match(r"^(Genesis|Exodus) \d+$", line.strip()):
        continue  # chapter headings
    words = re.findall(r"[a-z]+(?:'[a-z]+)*", line.lower())
    if re.match(r"^\s*\d+ ", line) or not verses:
        verses.append(words)  # a new verse starts with its number
    else:
        verses[-1].extend(words)  # a verse's continuation line
freq = collections.Counter(w for v in verses for w in v)
vocab = sorted(freq, key=lambda w: (-freq[w], w))
rank = {w: i for i, w in enumerate(vocab)}
(out / "vocab.txt").write_text("".join(f"{w}\n" for w in vocab))
(out / "tokens.txt").write_text("".join(" ".join(str(rank[w]) for w in v) + "\n" for v in verses if v))
print(f"make_dataset: {sum(freq.values())} tokens, {len(vocab)} words, {len(verses)} verses", file=sys.stderr)
PY

vocab=$(wc -l <"$out/vocab.txt")
"$kembed" -q make-table --out "$out/table.h5" --rows "$vocab" --dim "$dim" --seed 2026
"$kembed" -q make-batch --out "$out/batch.h5" --tokens "$out/tokens.txt" --dim "$dim" --vocab "$vocab" --seed 1611
ls -l "$out"
