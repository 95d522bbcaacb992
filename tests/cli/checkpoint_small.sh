#!/usr/bin/env bash
# --checkpoint-every smaller than a block of the batch (65,536 positions) still
# checkpoints: after the first microbatch reaching each multiple of N. A job killed
# mid-way (KEMBED_TEST_KILL_AT) leaves a checkpoint on a microbatch boundary, and
# the resumed run has the uninterrupted run's bits, dense (both modes) and sparse.
#   checkpoint_small.sh KEMBED WORKDIR
set -euo pipefail
kembed=$1 work=$2
mkdir -p "$work"
cd "$work"
"$kembed" -q make-table --out t.h5 --rows 3000 --dim 8 --seed 1 >/dev/null
"$kembed" -q make-batch --out b.h5 --zipf 3000 --positions 20000 --dim 8 --seed 2 >/dev/null
for variant in identical deterministic sparse; do
  case $variant in
    sparse) args=(--sparse) ;;
    *) args=(--mode "$variant") ;;
  esac
  args+=(--table t.h5 --batch b.h5 --microbatch 7 --checkpoint-every 1000)
  rm -f "run_$variant.h5" "run_$variant.h5.checkpoint" "whole_$variant.h5" "whole_$variant.h5.checkpoint"
  "$kembed" -q backward "${args[@]}" --out "whole_$variant.h5" >/dev/null
  if KEMBED_TEST_KILL_AT=0:12345 "$kembed" -q backward "${args[@]}" --out "run_$variant.h5" >/dev/null 2>&1; then
    echo "checkpoint_small: $variant: the job meant to be killed finished" >&2; exit 1
  fi
  [[ -e "run_$variant.h5.checkpoint" ]] || { echo "checkpoint_small: $variant: no checkpoint written" >&2; exit 1; }
  position=$("$kembed" info "run_$variant.h5.checkpoint" | awk '$1 == "position" {print $2}')
  if [[ -z $position ]] || (( position < 1001 || position > 12345 || position % 7 != 0 )); then
    echo "checkpoint_small: $variant: checkpoint at position '$position', want a multiple of 7 in [1001, 12345]" >&2
    exit 1
  fi
  "$kembed" -q backward "${args[@]}" --out "run_$variant.h5" --resume >/dev/null
  "$kembed" diff "whole_$variant.h5" "run_$variant.h5" >/dev/null ||
    { echo "checkpoint_small: $variant: the resumed run differs" >&2; exit 1; }
  echo "checkpoint_small: $variant: killed past 12,345, checkpoint at $position, resumed to the same bits"
done
