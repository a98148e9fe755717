#!/bin/sh
# quant_cli.sh TESSERA MODELS_DIR — the quantized compile end to end on
# real data: the digits CNN (trained by scripts/gen_models.py on
# scikit-learn's handwritten digits) is profiled on training images,
# compiled in float32 and in int8, and both libraries' top-1 accuracy on
# the 360 test images is measured with `bench --labels`: int8 must stay
# within one point of float32. Then the usage and input errors.
set -u
T="$1"
M="$2"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
expect() {
  want=$1; shift
  "$@" >"$TMP/out" 2>"$TMP/err"
  got=$?
  [ "$got" = "$want" ] || { cat "$TMP/out" "$TMP/err"; fail "'$*' exited $got, expected $want"; }
}
contains() { grep -q -- "$2" "$TMP/$1" || { head -c 3000 "$TMP/$1"; fail "$1 lacks '$2'"; }; }

D="$M/digits_small.onnx"
if [ ! -s "$D" ]; then
  echo "SKIP: no $D (gen_models needs python3-sklearn for the digits data)"
  exit 77
fi

expect 0 "$T" quantize profile "$D" --inputs "$M/digits_calib.npz" -o "$TMP/p.json"
expect 0 "$T" graph show "$D" --quantize "$TMP/p.json" --after quantize
contains out "ConvInteger"
contains out "MatMulInteger"
contains out "QuantizeLinear"
expect 0 "$T" compile "$D" -o "$TMP/f.so"
expect 0 "$T" compile "$D" --quantize "$TMP/p.json" -o "$TMP/q.so"
# conv2 (16 input channels) and the classifier; conv1 (1 channel) stays float
contains err "quantized: 2 convolutions and matrix products int8, 1 kept float32"
contains out "fused_convinteger"

for v in f q; do
  expect 0 "$T" bench --model "$TMP/$v.so" --inputs "$M/digits_test.npz" \
    --labels "$M/digits_labels.npz" --threads 1 --json
  cp "$TMP/out" "$TMP/$v.json"
done
expect 0 "$T" bench --model "$TMP/q.so" --inputs "$M/digits_test.npz" \
  --labels "$M/digits_labels.npz" --threads 1
contains out "top-1 accuracy of"
python3 - "$TMP/f.json" "$TMP/q.json" <<'EOF' || fail "accuracy"
import json, sys
f, q = (json.load(open(p)) for p in sys.argv[1:])
print("digits top-1: float32 %.2f %%, int8 %.2f %% (%d samples)"
      % (f["top1_percent"], q["top1_percent"], f["samples"]))
assert f["samples"] == q["samples"] == 360
assert f["top1_percent"] >= 90, "the float32 model did not learn"
assert abs(f["top1_percent"] - q["top1_percent"]) <= 1.0, "int8 lost more than a point"
EOF
# agreement with the float32 build, sample by sample
expect 0 "$T" bench --model "$TMP/q.so" --reference "$TMP/f.so" \
  --inputs "$M/digits_test.npz" --threads 1 --json
python3 - "$TMP/out" <<'EOF' || fail "agreement"
import json, sys
r = json.load(open(sys.argv[1]))
print("digits int8 vs float32: top-1 agreement %.2f %%, relative L2 %.4f"
      % (r["top1_agreement_percent"], r["relative_l2"][0]))
assert r["samples"] == 360 and r["top1_agreement_percent"] >= 97
assert 0 < r["relative_l2"][0] < 0.05
EOF
expect 1 "$T" bench --model "$TMP/q.so" --reference "$M/digits_small.onnx" \
  --inputs "$M/digits_test.npz"
# weights prepared at compile time (a kernel's packing of its int8 weights
# run once, into the library) give the outputs that packing them at every
# run gives, bit for bit; on an AVX2 target the int8 conv and the
# classifier's product pack their weights
V="llvm -mcpu=x86-64-v3"
expect 0 "$T" compile "$D" --quantize "$TMP/p.json" --target "$V" -o "$TMP/v.so"
contains out "prepacked: 2 of 6 kernels read weights prepared at compile time"
expect 0 "$T" compile "$D" --quantize "$TMP/p.json" --target "$V" \
  --no-prepack -o "$TMP/vn.so"
! grep -q prepacked "$TMP/out" || fail "--no-prepack prepacked"
for v in v q; do
  expect 0 "$T" bench --model "$TMP/$v.so" --reference "$TMP/vn.so" \
    --inputs "$M/digits_test.npz" --threads 1 --json
  python3 - "$TMP/out" <<'EOF' || fail "prepacked $v.so against vn.so"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["samples"] == 360 and r["top1_agreement_percent"] == 100, r
assert r["relative_l2"][0] == 0, r["relative_l2"]
EOF
done
# the other calibrations and per-tensor weights compile too
expect 0 "$T" compile "$D" --quantize "$TMP/p.json" --calibration entropy \
  --per-tensor -o "$TMP/e.so"
expect 0 "$T" compile "$D" --quantize "$TMP/p.json" --keep-float Conv \
  -o "$TMP/k.so"
contains err "quantized: 1 convolution and matrix product int8, 2 kept float32"

# ---- errors ----
expect 2 "$T" compile "$D" --quantize "$TMP/p.json" --calibration best -o "$TMP/x.so"
contains err "minmax, percentile or entropy"
expect 1 "$T" compile "$D" --quantize "$TMP/none.json" -o "$TMP/x.so"
contains err "cannot read the quantization profile"
echo '{"format": "something else"}' >"$TMP/bad.json"
expect 1 "$T" compile "$D" --quantize "$TMP/bad.json" -o "$TMP/x.so"
contains err "not a tessera quantization profile"
[ ! -e "$TMP/x.so" ] || fail "a failed compile wrote its output"
expect 2 "$T" bench --model "$TMP/q.so" --labels "$M/digits_labels.npz"
contains err "--labels and --reference need --inputs"
expect 2 "$T" bench --model "$TMP/q.so" --inputs "$M/digits_test.npz" \
  --labels "$M/digits_labels.npz" --reference "$TMP/f.so"
contains err "not both"
expect 1 "$T" bench --model "$TMP/q.so" --inputs "$M/digits_calib.npz" \
  --labels "$M/digits_labels.npz"
contains err "must hold 360 samples"
expect 1 "$T" bench --model "$TMP/q.so" --inputs "$M/digits_test.npz" \
  --labels "$M/digits_test.npz"
contains err "labels"
echo "quant_cli: ok"
