#!/usr/bin/env bash
# kembed backward on a bag batch, end to end: microbatches of whole bags give the
# unsplit run's bits in mode identical; a job killed (SIGKILL) between checkpoints
# and resumed gives the uninterrupted run's bits, dense and sparse, every pooling;
# info and diff read bag runs; a checkpoint of another pooling is refused.
#   bag_job.sh KEMBED WORKDIR [BACKEND]
set -euo pipefail
kembed=$1 work=$2 backend=${3:-default}
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
mkdir -p "$work"
cd "$work"
rm -f ./*.h5 ./*.checkpoint
k() { "$kembed" -q --backend "$backend" "$@"; }
k make-table --out t.h5 --rows 5000 --dim 12 --seed 3 >/dev/null
k make-batch --out b.h5 --zipf 5000 --positions 300000 --bags 20000 --dim 12 --seed 4 >/dev/null
k make-batch --out bw.h5 --zipf 5000 --positions 300000 --bag-size 16 --weighted --dim 12 --seed 5 >/dev/null
same() {  # same A B: the two run files hold the same gradient and counts
  "$kembed" diff "$1" "$2" >/dev/null || { "$kembed" diff "$1" "$2" || true; echo "bag_job: $1 and $2 differ" >&2; exit 1; }
}
checked=0
for case in "b.h5 sum" "b.h5 mean" "b.h5 max" "bw.h5 sum"; do
  read -r batch pooling <<<"$case"
  for sparse in "" --sparse; do
    base=(backward --table t.h5 --batch "$batch" --pooling "$pooling" $sparse)
    k "${base[@]}" --out whole.h5 >/dev/null
    # Identical: the split does not change a bit.
    k "${base[@]}" --out split.h5 --microbatch 37 >/dev/null
    same whole.h5 split.h5
    # Deterministic: killed at a bag past a checkpoint, resumed, the same bits.
    det=("${base[@]}" --mode deterministic --microbatch 50 --checkpoint-every 3000)
    k "${det[@]}" --out det_whole.h5 >/dev/null
    rm -f det.h5 det.h5.checkpoint
    for at in 7000 13000; do
      KEMBED_TEST_KILL_AT=0:$at k "${det[@]}" --out det.h5 --resume >/dev/null 2>&1 && { echo "bag_job: not killed" >&2; exit 1; }
      [[ -e det.h5.checkpoint ]] || { echo "bag_job: no checkpoint after a kill at bag $at" >&2; exit 1; }
    done
    "$kembed" --backend "$backend" "${det[@]}" --out det.h5 --resume 2>resume.log >/dev/null
    # (where: the last checkpoint written before the kill, written beside the fold)
    grep -Eq "resuming from det.h5.checkpoint at bag [0-9,]+ of (20,000|18,750)" resume.log ||
      { cat resume.log; echo "bag_job: did not resume from its checkpoint" >&2; exit 1; }
    same det_whole.h5 det.h5
    [[ ! -e det.h5.checkpoint ]] || { echo "bag_job: the finished job left its checkpoint" >&2; exit 1; }
    checked=$((checked + 1))
  done
done
# info and diff read bag runs; a checkpoint of another pooling is refused.
"$kembed" info whole.h5 | grep -E "bags +18,750 bags of 300,000 positions, pooling sum" >/dev/null ||
  { "$kembed" info whole.h5; echo "bag_job: info does not show the bags" >&2; exit 1; }
k backward --table t.h5 --batch b.h5 --pooling mean --out mean.h5 >/dev/null
k backward --table t.h5 --batch b.h5 --pooling sum --out sum.h5 >/dev/null
bash "$here/expect.sh" 1 "setting pooling: mean / sum" "$kembed" diff mean.h5 sum.h5 >/dev/null
rm -f x.h5 x.h5.checkpoint
KEMBED_TEST_KILL_AT=0:9000 k backward --table t.h5 --batch b.h5 --pooling mean --microbatch 1000 --checkpoint-every 4000 --out x.h5 \
  >/dev/null 2>&1 || true
bash "$here/expect.sh" 2 "belongs to another job \(it ran with pooling mean, this job with pooling max\)" \
  "$kembed" backward --table t.h5 --batch b.h5 --pooling max --out x.h5 --resume >/dev/null
[[ ! -e x.h5 ]] || { echo "bag_job: a refused resume wrote its run file" >&2; exit 1; }
"$kembed" info --check bw.h5 | grep -E "ok +per_sample_weights: every value finite" >/dev/null ||
  { "$kembed" info --check bw.h5; echo "bag_job: info --check does not check the bags" >&2; exit 1; }
# forward pools each bag into one row; a batch of positions has no bags to pool.
bash "$here/expect.sh" 0 "output: +y.h5 \(y: 20,000 x 12 float32, one row per bag, pooling max\)" \
  "$kembed" --backend "$backend" forward --table t.h5 --ids b.h5 --pooling max --out y.h5 >/dev/null
k make-batch --out positions.h5 --zipf 5000 --positions 1000 --dim 12 >/dev/null
for command in "backward --batch positions.h5" "forward --ids positions.h5"; do
  # shellcheck disable=SC2086
  bash "$here/expect.sh" 2 "--pooling pools bags, but positions.h5 is a batch of positions \(it has no /offsets\)" \
    "$kembed" $command --table t.h5 --pooling sum --out refused.h5 >/dev/null
done
[[ ! -e refused.h5 ]] || { echo "bag_job: a refused job wrote its output" >&2; exit 1; }
echo "bag_job: $checked cases (3 poolings and weighted sum, dense and sparse) identical across splits and kills"
