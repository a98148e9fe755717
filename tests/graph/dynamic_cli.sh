#!/bin/sh
# dynamic_cli.sh TESSERA MODELS SOURCE — a model with a dynamic dimension
# compiled into one library for a range of sizes (`compile
# --shape-buckets`): a transformer's sequence and a CNN's batch, run by
# `tessera run` at sizes inside, between and above the buckets, match
# onnxruntime (scripts/ort_check.py; those parts skipped without the
# project's .venv), with the kernels' loops cut to the length and the
# arena poisoned; a size past the range, a second symbol and a model that
# padding cannot serve are refused with a message.
set -u
T="$1"
M="$2"
SRC="$3"
TMP=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
expect() {
  want=$1; shift
  "$@" >"$TMP/out" 2>&1
  got=$?
  [ "$got" = "$want" ] || { cat "$TMP/out"; fail "'$*' exited $got, expected $want"; }
}
contains() { grep -q -- "$1" "$TMP/out" || { cat "$TMP/out"; fail "output lacks '$1'"; }; }
B="$M/bert_small.onnx"

# usage errors
expect 2 "$T" compile "$B" -o "$TMP/x.so" --shape-buckets sequence=16,8
contains "ascending"
expect 2 "$T" compile "$B" -o "$TMP/x.so" --shape-buckets sequence=8 --dim-max batch=4
contains "no --shape-buckets batch"
expect 2 "$T" compile "$B" -o "$TMP/x.so" --shape-buckets sequence=8,16 --dim-max sequence=4
contains "below the largest"
# two dynamic dimensions left, a model padding cannot serve: nothing written
expect 1 "$T" compile "$B" -o "$TMP/x.so" --shape-buckets sequence=8
contains "give the others a size"
expect 1 "$T" compile "$M/dyn_concat.onnx" -o "$TMP/x.so" --shape-buckets seq=8
contains "2\*seq"
[ ! -e "$TMP/x.so" ] || fail "a refused compile wrote a library"

# the transformer: buckets 8 and 16, sizes up to 32
expect 0 "$T" compile "$B" --dim batch=1 --shape-buckets sequence=8,16 \
  --dim-max sequence=32 -o "$TMP/bert.so"
contains "## sequence up to 32"
# the weights are stored once: three programs in less than twice one's size
expect 0 "$T" compile "$B" --dim batch=1 --dim sequence=32 -o "$TMP/bert32.so"
one=$(stat -c %s "$TMP/bert32.so"); three=$(stat -c %s "$TMP/bert.so")
[ "$three" -lt $((2 * one)) ] || fail "three programs take $three bytes, one $one"
CHECK="$SRC/scripts/ort_check.py"
# the kernels cut their loops to the length, leaving positions past it
# unwritten: every run starts from an arena of NaN bytes, so that a read of
# such a position shows in the outputs
export TESSERA_POISON_ARENA=1
ort=1
for n in 1 5 8 11 16 17 32; do
  /usr/bin/python3 "$CHECK" "$T" "$B" --library "$TMP/bert.so" --size batch=1 \
    --size sequence=$n --work "$TMP/w" >"$TMP/out" 2>&1
  rc=$?
  [ $rc = 77 ] && { ort=0; echo "onnxruntime missing: the runs against it skipped"; break; }
  [ $rc = 0 ] || { cat "$TMP/out"; fail "bert_small at sequence=$n differs from onnxruntime"; }
  grep "max relative" "$TMP/out"
done
# past the range: refused by the library, named
/usr/bin/python3 - "$TMP/big.npz" <<'PY'
import sys, numpy as np
np.savez(sys.argv[1], input_ids=np.zeros((1, 33), np.int64),
         attention_mask=np.ones((1, 33), np.int64))
PY
expect 1 "$T" run "$TMP/bert.so" --inputs "$TMP/big.npz"
contains "sequence=33: out of the compiled range 1..32"

# the CNN's batch: buckets 2 and 4, sizes up to 6
expect 0 "$T" compile "$M/dyn_cnn.onnx" --shape-buckets batch=2,4 --dim-max batch=6 \
  -o "$TMP/cnn.so"
if [ $ort = 1 ]; then
  for n in 1 2 3 4 6; do
    expect 0 /usr/bin/python3 "$CHECK" "$T" "$M/dyn_cnn.onnx" --library "$TMP/cnn.so" \
      --size batch=$n --work "$TMP/w"
  done
fi
# an edge whose layout a pass changes is not padded: refused
expect 1 "$T" compile "$M/dyn_cnn.onnx" --shape-buckets batch=2,4 --input-layout nhwc \
  -o "$TMP/nhwc.so"
contains "are not the ones padded"
# the dispatcher through <tessera/model.h> alone
expect 0 "$(dirname "$T")/graph_abi_main" "$TMP/cnn.so" --dynamic batch
echo "dynamic_cli: ok"
