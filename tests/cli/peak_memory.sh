#!/usr/bin/env bash
# Batches are streamed: the peak memory of a batch ten times the bundled one stays
# within a few MiB of the bundled one's (both printed by kembed backward).
#   peak_memory.sh KEMBED WORKDIR DATASET_DIR [LIMIT_MIB]
set -euo pipefail
kembed=$1 work=$2 data=$3 limit=${4:-8}
mkdir -p "$work"
"$kembed" -q make-batch --out "$work/batch10.h5" --tokens "$data/tokens.txt" --repeat 10 --dim 16 \
  --vocab "$(wc -l <"$data/vocab.txt")" --seed 1611 >/dev/null
peak() { "$kembed" -q backward --table "$data/table.h5" --batch "$1" --out "$work/peak.h5" | sed -n 's/^peak memory: \([0-9.]*\) MiB$/\1/p'; }
one=$(peak "$data/batch.h5")
ten=$(peak "$work/batch10.h5")
echo "peak memory: bundled batch $one MiB, ten times the bundled batch $ten MiB"
awk -v a="$one" -v b="$ten" -v l="$limit" 'BEGIN { d = b - a; if (d < 0) d = -d; exit !(d <= l) }' \
  || { echo "peak_memory: the difference is more than $limit MiB" >&2; exit 1; }
