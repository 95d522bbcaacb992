#!/usr/bin/env bash
# The inputs' fingerprints a run file records are what docs/FORMAT.md's recipes give:
# 16 MiB chunks by default (split + sha256sum, and Python's hashlib), the same under
# mpiexec at 2 ranks; sha256sum's whole-file digest with --fingerprint file; and a
# checkpoint of whole-file fingerprints resumes with the default settings, keeping
# its kind.
#   fingerprints.sh KEMBED WORKDIR PYTHON [MPIEXEC]
set -euo pipefail
kembed=$1 work=$2 python=$3 mpiexec=${4:-}
rm -rf "$work" && mkdir -p "$work" && cd "$work"
fail() { echo "fingerprints: $*" >&2; exit 1; }
attr() { h5dump -a "$2" "$1" | sed -n 's/.*(0): *"\([0-9a-f]*\)".*/\1/p'; }
"$kembed" -q make-table --out table.h5 --rows 5000 --dim 16 --seed 1 >/dev/null
# About 40 MiB: three chunks, the last one short.
"$kembed" -q make-batch --out batch.h5 --zipf 5000 --positions 600000 --dim 16 --seed 2 >/dev/null

"$kembed" -q backward --table table.h5 --batch batch.h5 --out chunks.h5 >/dev/null
recorded=$(attr chunks.h5 /inputs/batch/sha256_of_16MiB_chunks)
mkdir parts
(cd parts && split -b 16M -a 6 -d ../batch.h5 chunk.)
[[ $(ls parts | wc -l) -eq 3 ]] || fail "the batch is not three chunks: $(ls parts)"
by_split=$(sha256sum parts/chunk.* | cut -c1-64 | xxd -r -p | sha256sum | cut -c1-64)
by_python=$("$python" - batch.h5 <<'PY'
import hashlib, sys
digests = b""
with open(sys.argv[1], "rb") as f:
    while block := f.read(1 << 24):
        digests += hashlib.sha256(block).digest()
print(hashlib.sha256(digests).hexdigest())
PY
)
[[ $recorded == "$by_split" ]] || fail "recorded $recorded, split + sha256sum give $by_split"
[[ $recorded == "$by_python" ]] || fail "recorded $recorded, Python gives $by_python"
info=$("$kembed" info chunks.h5)  # (grep -q on a pipe would cut kembed off: SIGPIPE under pipefail)
grep -q "SHA-256 of 16 MiB chunks $recorded" <<<"$info" || fail "kembed info does not show it: $info"
if [[ -n $mpiexec ]]; then
  "$mpiexec" -n 2 --oversubscribe "$kembed" -q backward --table table.h5 --batch batch.h5 --out two.h5 >/dev/null
  [[ $(attr two.h5 /inputs/batch/sha256_of_16MiB_chunks) == "$recorded" ]] || fail "2 ranks recorded another value"
  [[ $(attr two.h5 /inputs/table/sha256_of_16MiB_chunks) == $(attr chunks.h5 /inputs/table/sha256_of_16MiB_chunks) ]] ||
    fail "2 ranks recorded another value for the table"
fi

"$kembed" -q backward --table table.h5 --batch batch.h5 --out whole.h5 --fingerprint file >/dev/null
[[ $(attr whole.h5 /inputs/batch/sha256) == $(sha256sum batch.h5 | cut -c1-64) ]] || fail "--fingerprint file is not sha256sum's"
[[ -z $(attr whole.h5 /inputs/batch/sha256_of_16MiB_chunks) ]] || fail "--fingerprint file recorded chunks too"

# A checkpoint of whole-file fingerprints (as kembed wrote before chunks), resumed
# with no --fingerprint: the resume keeps the checkpoint's kind, and the bits.
args=(--table table.h5 --batch batch.h5 --microbatch 1000 --checkpoint-every 20000 --out run.h5)
for attempt in 1 2 3 4 5; do
  rm -f run.h5 run.h5.checkpoint
  "$kembed" -q backward "${args[@]}" --fingerprint file >/dev/null 2>&1 &
  pid=$!
  while kill -0 "$pid" 2>/dev/null && [[ ! -e run.h5.checkpoint ]]; do sleep 0.005; done
  kill -9 "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  [[ -e run.h5.checkpoint && ! -e run.h5 ]] && break
done
[[ -e run.h5.checkpoint ]] || fail "no checkpoint was left to resume in 5 tries"
[[ $(h5dump -a inputs_fingerprint run.h5.checkpoint 2>/dev/null | grep -c chunks) -eq 0 ]] ||
  fail "the --fingerprint file checkpoint says chunks"
"$kembed" -q backward "${args[@]}" --resume >/dev/null
[[ $(attr run.h5 /inputs/batch/sha256) == $(sha256sum batch.h5 | cut -c1-64) ]] ||
  fail "the resume did not keep its checkpoint's whole-file fingerprints"
"$kembed" diff chunks.h5 run.h5 >/dev/null || fail "the resumed run's gradient differs"
[[ ! -e run.h5.checkpoint ]] || fail "the finished job left its checkpoint"
echo "fingerprints: chunks $recorded as split + sha256sum and Python give; file kind and its resume kept"
