#!/bin/sh
# ops_cli.sh TESSERA MODELS SOURCE — the wider ONNX operator set (the
# elementwise table of graph/ew_ops.c, the rewrites of graph/lower_more.c
# and graph/lower_index.c): the small ops, ops2 (opset 13), ops3 and ops4
# (opset 18) models of
# scripts/gen_models.py compiled, each library run by `tessera run` on an
# arena of NaN bytes and checked against onnxruntime (skipped without the
# project's .venv); malformed or unsupported uses of the new operators are
# refused with a message naming the node, and nothing is written.
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

export TESSERA_POISON_ARENA=1
for m in ops ops2 ops3 ops4; do
  expect 0 "$T" compile "$M/${m}_small.onnx" -o "$TMP/$m.so"
  /usr/bin/python3 "$SRC/scripts/ort_check.py" "$T" "$M/${m}_small.onnx" \
    --library "$TMP/$m.so" --work "$TMP/w_$m" >"$TMP/out" 2>&1
  rc=$?
  [ $rc = 77 ] && { echo "onnxruntime missing: the runs against it skipped"; break; }
  [ $rc = 0 ] || { cat "$TMP/out"; fail "the compiled $m differs from onnxruntime"; }
  grep "max relative" "$TMP/out"
done
# after lowering only core operators are left
expect 0 "$T" graph show "$M/ops2_small.onnx" --after lower
for op in Split Expand Tile DepthToSpace SpaceToDepth InstanceNormalization \
  Pad Resize ReduceMin ReduceL2 ReduceLogSumExp; do
  if grep -q "= $op\[" "$TMP/out"; then cat "$TMP/out"; fail "$op left after lowering"; fi
done
contains "= Gather\["
contains "= LayerNormalization\["

# refusals: one model per case, each naming the node and the reason
/usr/bin/python3 - "$TMP" <<'PY' || fail "could not write the bad models"
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
out = sys.argv[1]
def model(name, nodes, inits, oshape, opset=13, itype=TensorProto.FLOAT):
    g = helper.make_graph(nodes, name,
                          [helper.make_tensor_value_info("x", itype, [1, 2, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, oshape)],
                          [numpy_helper.from_array(a, n) for n, a in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    onnx.save(m, "%s/%s.onnx" % (out, name))
i64 = lambda v: np.array(v, np.int64)
f32 = lambda v: np.array(v, np.float32)
model("antialias", [helper.make_node("Resize", ["x", "", "s"], ["y"], name="up",
                                     mode="linear", antialias=1)],
      {"s": f32([1, 1, 2, 2])}, [1, 2, 8, 8], opset=18)
model("reflect", [helper.make_node("Pad", ["x", "p"], ["y"], name="pad", mode="reflect")],
      {"p": i64([0, 0, 4, 0, 0, 0, 0, 0])}, [1, 2, 8, 4])
model("split", [helper.make_node("Split", ["x", "s"], ["y", "z"], name="cut", axis=1)],
      {"s": i64([1, 2])}, [1, 1, 4, 4])
model("where", [helper.make_node("Where", ["x", "x", "x"], ["y"], name="pick")],
      {}, [1, 2, 4, 4])
model("tf_crop", [helper.make_node("Resize", ["x", "r", "s"], ["y"], name="crop",
                                   coordinate_transformation_mode="tf_crop_and_resize")],
      {"r": f32([0, 0, 0, 0, 1, 1, 1, 1]), "s": f32([1, 1, 2, 2])}, [1, 2, 8, 8])
model("nonzero", [helper.make_node("NonZero", ["x"], ["y"], name="nz")], {}, [4, 32])
model("diagonal", [helper.make_node("Einsum", ["x"], ["y"], name="tr", equation="bcii->bci")],
      {}, [1, 2, 4])
# scatters and gathers: indices computed at run time, a reduction onto a
# position written 65 times, an index past the data's extent
model("dyn_index", [helper.make_node("Cast", ["x"], ["i"], to=TensorProto.INT64),
                    helper.make_node("ScatterElements", ["x", "i", "x"], ["y"], name="se")],
      {}, [1, 2, 4, 4])
model("dup_add", [helper.make_node("ScatterND", ["x", "i", "u"], ["y"], name="acc",
                                   reduction="add")],
      {"i": i64([[0, 1]] * 65), "u": f32(np.ones((65, 4, 4)))}, [1, 2, 4, 4], opset=16)
model("far", [helper.make_node("GatherND", ["x", "i"], ["y"], name="far")],
      {"i": i64([[0, 2]])}, [1, 4, 4])
# two outputs computing the same value stay two outputs (common
# subexpression elimination keeps a graph output's node)
g = helper.make_graph([helper.make_node("Relu", ["x"], ["a"]), helper.make_node("Relu", ["x"], ["b"])],
                      "twins", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
                      [helper.make_tensor_value_info(o, TensorProto.FLOAT, [1, 2, 4, 4]) for o in "ab"])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), out + "/twins.onnx")

# older opsets: their forms of Upsample, Resize, Slice, Pad, Split,
# Squeeze, Unsqueeze, ReduceSum, Clip, and Softmax / LogSoftmax over the
# input coerced to 2-D at the axis; LRN
def old(opset, nodes, outs, inits=()):
    g = helper.make_graph(nodes, "opset%d" % opset,
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 5, 6])],
                          [helper.make_tensor_value_info(o, TensorProto.FLOAT, s) for o, s in outs],
                          list(inits))
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]),
              "%s/opset%d.onnx" % (out, opset))
N = helper.make_node
old(7, [N("Upsample", ["x"], ["up"], scales=[1.0, 1.0, 2.0, 3.0], mode="nearest"),
        N("Slice", ["x"], ["sl"], starts=[1, 0], ends=[3, -1], axes=[1, 3]),
        N("Pad", ["x"], ["pd"], pads=[0, 0, 1, 2, 0, 0, 0, 1], value=0.5),
        N("Softmax", ["x"], ["sm"])],
    [("up", [1, 4, 10, 18]), ("sl", [1, 2, 5, 5]), ("pd", [1, 4, 6, 9]), ("sm", [1, 4, 5, 6])])
old(9, [N("Upsample", ["x", "s"], ["up"], mode="linear"),
        N("LogSoftmax", ["x"], ["ls"], axis=2),
        N("LRN", ["x"], ["lrn"], size=3, alpha=0.2, beta=0.75, bias=1.5),
        N("Split", ["x"], ["a", "b"], axis=1, split=[1, 3]),
        N("Squeeze", ["a"], ["sq"], axes=[1]),
        N("Unsqueeze", ["sq"], ["us"], axes=[0]),
        N("ReduceSum", ["b"], ["rs"], axes=[1], keepdims=0),
        N("Clip", ["x"], ["cl"], min=-0.25, max=0.5)],
    [("up", [1, 4, 10, 12]), ("ls", [1, 4, 5, 6]), ("lrn", [1, 4, 5, 6]), ("us", [1, 1, 5, 6]),
     ("rs", [1, 5, 6]), ("cl", [1, 4, 5, 6])],
    [numpy_helper.from_array(f32([1, 1, 2, 2]), "s")])
old(10, [N("Resize", ["x", "s"], ["rn"], mode="nearest"),
         N("Resize", ["x", "s"], ["rl"], mode="linear"),
         N("Slice", ["x", "st", "en"], ["sl"])],
    [("rn", [1, 4, 10, 12]), ("rl", [1, 4, 10, 12]), ("sl", [1, 3, 4, 6])],
    [numpy_helper.from_array(f32([1, 1, 2, 2]), "s"), numpy_helper.from_array(i64([0, 1, 1]), "st"),
     numpy_helper.from_array(i64([1, 4, 5]), "en")])
old(12, [N("Softmax", ["x"], ["sm"], axis=2), N("LogSoftmax", ["x"], ["ls"], axis=-1)],
    [("sm", [1, 4, 5, 6]), ("ls", [1, 4, 5, 6])])

# convs around the lowered data movement: Split's slices, Resize's and
# reflect Pad's gathers and a Slice run channels-last between them
rng = np.random.default_rng(0)
nodes, inits = [], {}
def node(t, ins, n_out=1, **kw):
    outs = ["%s_%d_%d" % (t, len(nodes), i) for i in range(n_out)]
    nodes.append(helper.make_node(t, ins, outs, name="%s_%d" % (t, len(nodes)), **kw))
    return outs if n_out > 1 else outs[0]
def const(a):
    inits["c%d" % len(inits)] = a
    return "c%d" % (len(inits) - 1)
def conv(x, ci, co):
    w = (rng.standard_normal((co, ci, 3, 3)) / np.sqrt(ci * 9)).astype(np.float32)
    return node("Conv", [x, const(w)], pads=[1, 1, 1, 1])
y = conv("x", 2, 16)
a, b = node("Split", [y, const(i64([8, 8]))], n_out=2, axis=1)
y = node("Concat", [conv(a, 8, 8), conv(b, 8, 8), y], axis=1)
u = conv(node("Resize", [y, "", const(f32([1, 1, 2, 2]))], mode="nearest",
              coordinate_transformation_mode="asymmetric", nearest_mode="floor"), 32, 16)
p = conv(node("Pad", [u, const(i64([0, 0, 1, 1, 0, 0, 1, 1]))], mode="reflect"), 16, 8)
s = node("Slice", [p, const(i64([1, 2])), const(i64([9, 6])), const(i64([2, 3]))])
g = helper.make_graph(nodes, "moves", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
                      [helper.make_tensor_value_info(s, TensorProto.FLOAT, [1, 8, 8, 4])],
                      [numpy_helper.from_array(v, k) for k, v in inits.items()])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), out + "/moves.onnx")
PY
for o in 7 9 10 12; do
  expect 0 "$T" compile "$TMP/opset$o.onnx" -o "$TMP/opset$o.so"
  /usr/bin/python3 "$SRC/scripts/ort_check.py" "$T" "$TMP/opset$o.onnx" \
    --library "$TMP/opset$o.so" --work "$TMP/w_o$o" >"$TMP/out" 2>&1
  rc=$?
  [ $rc = 0 ] || [ $rc = 77 ] || { cat "$TMP/out"; fail "the compiled opset$o.onnx differs from onnxruntime"; }
  grep "max relative" "$TMP/out"
done

# the layout pass keeps them channels-last: a transpose at each edge only
expect 0 "$T" graph show "$TMP/moves.onnx" --after layout
[ "$(grep -c '= Transpose\[' "$TMP/out")" = 2 ] || { cat "$TMP/out"; fail "transposes inside moves.onnx"; }
contains "= Gather\[.*{axis=1}.*NHWC"
expect 0 "$T" compile "$TMP/moves.onnx" -o "$TMP/moves.so"
/usr/bin/python3 "$SRC/scripts/ort_check.py" "$T" "$TMP/moves.onnx" \
  --library "$TMP/moves.so" --work "$TMP/w_moves" >"$TMP/out" 2>&1
rc=$?
[ $rc = 0 ] || [ $rc = 77 ] || { cat "$TMP/out"; fail "the compiled moves.onnx differs from onnxruntime"; }

check_refused() {
  expect 1 "$T" compile "$TMP/$1.onnx" -o "$TMP/$1.so"
  contains "$2"
  contains "$3"
  [ ! -e "$TMP/$1.so" ] || fail "a refused compile ($1) wrote a library"
}
check_refused antialias "'up' (Resize" "antialias=1 is not supported"
check_refused reflect "'pad' (Pad" "too large for mode reflect"
check_refused split "'cut' (Split" "do not split axis 1 into 2 outputs"
check_refused where "'pick' (Where" "input 0 must be bool"
check_refused tf_crop "'crop' (Resize" "tf_crop_and_resize' is not supported"
check_refused nonzero "'nz'" "operator 'NonZero' is not supported"
check_refused diagonal "'tr' (Einsum" "label 'i' repeats in operand 0 (a diagonal is not supported)"
check_refused dyn_index "'se' (ScatterElements" "the indices must be constants"
check_refused dup_add "'acc' (ScatterND" "reduction 'add' writes a position 65 times (at most 64)"
check_refused far "'far' (GatherND" "index 1 of the indices is out of range for the data's axis 1 (extent 2)"
expect 0 "$T" graph show "$TMP/twins.onnx"
contains "output %a"
contains "output %b"
echo "ops_cli: ok"
