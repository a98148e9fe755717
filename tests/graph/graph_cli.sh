#!/bin/sh
# graph_cli.sh TESSERA MODELS GOLDEN — `tessera graph` through the real
# binary, on the generated small models in MODELS: show (text, JSON, --after
# every pass; the operator model's text against GOLDEN/ops_small.txt, which
# `tessera graph show ops_small.onnx` regenerates when the format changes on
# purpose), tasks, run (.npz in and out, compiled and interpreted give the same
# arrays), --override (a node becomes a call and a task; a mismatch names
# both shapes); bad models exit 1 with a message, usage errors exit 2.
set -u
T="$1"
M="$2"
G="$3"
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
lacks() { ! grep -q -- "$1" "$TMP/out" || { cat "$TMP/out"; fail "output has '$1'"; }; }
R="$M/resnet50_small.onnx"

# usage errors
expect 2 "$T" graph
expect 2 "$T" graph frobnicate "$R"
expect 2 "$T" graph show
expect 2 "$T" graph show "$R" --bogus
expect 0 "$T" graph --help
contains "graph tasks"

# show at every stage
for p in none shape fold dce cse bn_fold patterns lower fuse; do
  expect 0 env TS_VERIFY=1 "$T" graph show "$R" --after $p
  contains "input %data: float32\[1, 3, 32, 32\] NCHW"
done
expect 0 "$T" graph show "$R" --after none
contains " = BatchNormalization\["
expect 0 "$T" graph show "$R" --after bn_fold
lacks " = BatchNormalization\["
expect 0 "$T" graph show "$R"
contains "call_tir\[fused_conv_add_relu"
contains "; task "
# channels-last edges: the input given NHWC under its name, no transpose
expect 0 "$T" graph show "$R" --input-layout nhwc
contains "input %data: float32\[1, 32, 32, 3\] NHWC"
if grep -q "fused_transpose" "$TMP/out"; then cat "$TMP/out"; fail "a transpose left with an NHWC input"; fi
expect 2 "$T" graph show "$R" --input-layout nchw16c
contains "--input-layout: unknown layout 'nchw16c'"
expect 2 "$T" graph show "$R" --output-layout
contains "--output-layout needs nchw or nhwc"
expect 1 "$T" graph show "$R" --after nosuchpass
contains "unknown pass 'nosuchpass'"
expect 0 "$T" graph show "$R" --json
contains '"nodes"'
contains '"task"'

# golden: the printed graph of the small operator model after every pass
expect 0 "$T" graph show "$M/ops_small.onnx"
diff -u "$G/ops_small.txt" "$TMP/out" || fail "graph show ops_small differs from the golden file"

# tasks
expect 0 "$T" graph tasks "$R"
contains "distinct tasks"
contains "fused_conv_add_relu"
expect 0 "$T" graph tasks "$R" --json --tir
contains '"flops"'
contains 'func fused_conv_relu'

# bad models and shapes
expect 1 "$T" graph show "$M/truncated.onnx"
contains "truncated or corrupt"
expect 1 "$T" graph show "$M/unknown_op.onnx"
contains "operator 'FooBar'"
expect 1 "$T" graph show "$M/missing_external.onnx"
contains "missing.bin"
expect 1 "$T" graph show "$M/bert_small.onnx"
contains "--input-shape input_ids="
expect 0 "$T" graph show "$M/bert_small.onnx" --input-shape input_ids=1x16 \
  --input-shape attention_mask=1x16
expect 1 "$T" graph show "$M/nonexistent.onnx"

# run: compiled and interpreted agree
/usr/bin/python3 -c "
import numpy as np
np.savez('$TMP/in.npz', data=np.random.RandomState(0).uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32))
np.savez('$TMP/wrong.npz', other=np.zeros(3, np.float32))" || fail "numpy"
expect 0 "$T" graph run "$R" --inputs "$TMP/in.npz" --outputs "$TMP/a.npz"
expect 0 "$T" graph run "$R" --inputs "$TMP/in.npz" --outputs "$TMP/b.npz" --interpret
expect 0 "$T" graph run "$R" --inputs "$TMP/in.npz" --outputs "$TMP/c.npz" --after lower
/usr/bin/python3 -c "
import numpy as np
a, b, c = (np.load('$TMP/%s.npz' % k) for k in 'abc')
for k in a.files:
    assert a[k].shape == (1, 10), a[k].shape
    assert np.allclose(a[k], b[k], rtol=1e-5, atol=1e-6), k
    assert np.allclose(a[k], c[k], rtol=1e-5, atol=1e-6), k" || fail "outputs differ"
expect 1 "$T" graph run "$R" --inputs "$TMP/wrong.npz" --outputs "$TMP/d.npz"
contains "no array 'data'"
expect 1 "$T" graph run "$R" --inputs "$TMP/none.npz" --outputs "$TMP/d.npz"
expect 2 "$T" graph run "$R" --inputs "$TMP/in.npz"

# --override: a node becomes a call of the user's function
"$T" show --workload "elementwise op=relu shape=1x8x16x16" >"$TMP/relu.tir" || fail "show relu"
expect 0 "$T" graph show "$R" --override Relu_11="$TMP/relu.tir"
contains "call_tir\[Relu_11\] @elementwise"
expect 0 "$T" graph run "$R" --override Relu_11="$TMP/relu.tir" \
  --inputs "$TMP/in.npz" --outputs "$TMP/e.npz"
/usr/bin/python3 -c "
import numpy as np
a, e = np.load('$TMP/a.npz'), np.load('$TMP/e.npz')
assert all(np.allclose(a[k], e[k], rtol=1e-5, atol=1e-6) for k in a.files)" || fail "override output"
expect 1 "$T" graph show "$R" --override Relu_24="$TMP/relu.tir"
contains "float32\[1, 8, 16, 16\]"
contains "float32\[1, 8, 8, 8\]"
expect 1 "$T" graph show "$R" --override NoSuchNode="$TMP/relu.tir"
contains "no node named 'NoSuchNode'"
# --pet: the mutants' lines, the summary; bad values are usage errors
C="$M/csrnet_small.onnx"
expect 0 env TS_VERIFY=1 "$T" graph show "$C" --after pet --pet
contains "# pet: Conv Conv_34_3 \[1, 2, 2, 64\]: dilated_to_batch: est. 1.3 -> 2.3 us, pruned before checking"
contains "# pet: Conv .*: split_rows: 18 boxes, 6 differ, corrected"
contains "# pet: 0 of 42 mutants applied (0 duplicate, 39 pruned, 0 exact, 3 corrected, 0 wrong"
expect 0 "$T" graph show "$C" --after pet
lacks "# pet"
expect 2 "$T" graph show "$C" --pet-trials 0
contains "--pet-trials wants a count from 1 to 64"
expect 0 "$T" graph show "$C" --pet-trials 3 --after pet
contains "# pet: 0 of 42 mutants applied"
expect 2 "$T" graph show "$C" --pet-depth 4
contains "--pet-depth wants a depth from 1 to 3"
expect 0 "$T" graph show "$C" --pet-depth 1 --after pet
contains "# pet: 0 of 35 mutants applied"
# --pet-only tries one mutator, --pet-apply-all keeps what the estimate drops
expect 0 "$T" graph show "$C" --pet-only split_rows --pet-apply-all --after pet
contains "# pet: 3 of 3 mutants applied (0 duplicate, 0 pruned, 0 exact, 3 corrected"
lacks "dilated_to_batch"
expect 1 "$T" graph show "$C" --pet-only bogus
contains "no mutator of kind 'bogus' (kinds: dilated_to_batch, split_rows"
expect 2 "$T" graph show "$C" --pet-only
contains "--pet-only wants a mutator's kind"
# --winograd-tile: 2, 4, auto or measure; anything else is a usage error
expect 2 "$T" graph show "$C" --winograd-tile 3
contains "--winograd-tile wants 2, 4, auto or measure"
expect 2 "$T" graph show "$C" --winograd-tile
contains "--winograd-tile wants 2, 4, auto or measure"
expect 0 "$T" graph show "$C" --winograd-tile 4
expect 0 "$T" graph show "$C" --winograd-tile auto
# named dynamic dimensions: --dim sizes them, --symbolic keeps them
B="$M/bert_small.onnx"
expect 1 "$T" graph show "$B"
contains "give it a size with --dim batch=N"
expect 0 "$T" graph show "$B" --dim batch=1 --dim sequence=7 --after shape
contains "input %input_ids: int64\[1, 7\]"
expect 1 "$T" graph show "$B" --dim seq=7
contains "'seq', which no graph input's dimension is called"
expect 2 "$T" graph show "$B" --dim batch
contains "--dim needs SYMBOL=SIZE"
expect 0 "$T" graph show "$B" --symbolic --after dce
contains "input %input_ids: int64\[batch, sequence\]"
contains "float32\[batch, 4, sequence, sequence\]"
expect 0 "$T" graph show "$B" --symbolic --dim batch=1
contains "call_tir.*float32\[1, sequence, 64\]"
expect 1 "$T" graph show "$M/dyn_strided.onnx" --symbolic
contains "dimension 2 of 'y' follows no polynomial in height"
expect 2 "$T" graph show "$B" --symbolic --layout nchw
contains "go alone, with the default passes"
expect 2 "$T" graph tasks "$B" --symbolic
echo "graph_cli: ok"
