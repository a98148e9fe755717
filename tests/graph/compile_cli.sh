#!/bin/sh
# compile_cli.sh TESSERA MODELS PYTHON — `tessera compile` and `tessera run`
# through the real binary on the generated small models in MODELS: a
# compiled model run on an .npz file gives the reference executor's
# outputs (`tessera graph run`, compared with numpy under PYTHON); the
# report's text and JSON forms; a graph operator that is not a kernel yet,
# a missing model, a bad database, a bad runtime folder and inputs of the
# wrong shape exit 1 with a message and write nothing; usage errors exit 2
# (among them an output that is not a regular file: a fifo stays one).
set -u
T="$1"
M="$2"
PY="$3"
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
R="$M/resnet50_small.onnx"

# usage errors
expect 2 "$T" compile
expect 2 "$T" compile "$R"
contains "no output given"
expect 2 "$T" compile "$R" -o "$TMP/x.so" --bogus
expect 2 "$T" compile "$R" -o "$TMP/x.so" --threads 0
expect 2 "$T" compile "$R" -o "$TMP/x.so" --dispatch fastest
contains "tuned, vendor or best"
expect 0 "$T" compile --help
contains "input-shape"
# an output that is not a regular file (a renamed file would replace it)
mkfifo "$TMP/fifo"
expect 2 "$T" compile "$R" -o "$TMP/fifo"
contains "not a regular file"
[ -p "$TMP/fifo" ] || fail "compile replaced the fifo"
mkdir "$TMP/outdir"
expect 2 "$T" compile "$R" -o "$TMP/outdir"
contains "not a regular file"
expect 2 "$T" run
expect 2 "$T" run "$TMP/x.so"
contains "inputs"
expect 0 "$T" run --help

# bad input: nothing is written
expect 1 "$T" compile "$M/missing.onnx" -o "$TMP/x.so"
contains "cannot import"
expect 1 "$T" compile "$R" -o "$TMP/x.so" --runtime-dir "$TMP/nowhere"
contains "libtessera_rt.so"
mkdir "$TMP/dir.db"
expect 1 "$T" compile "$R" -o "$TMP/x.so" --db "$TMP/dir.db"
contains "database"
expect 1 "$T" compile "$R" -o "$TMP/no/such/folder/x.so"
contains "does not exist"
if "$T" graph show "$M/ops_small.onnx" | grep -q " = \(Concat\|Slice\|Gather\|Cast\)\["; then
  expect 1 "$T" compile "$M/ops_small.onnx" -o "$TMP/x.so"
  contains "node '"
fi
[ ! -e "$TMP/x.so" ] || fail "a failed compile left $TMP/x.so"
ls -a "$TMP" | grep -q "\.tmp-" && fail "a failed compile left a temporary file"

# compile, run, compare with the reference executor
expect 0 "$T" compile "$R" -o "$TMP/r.so" --threads 2 --json
contains '"source":.*"default"'
contains '"lower_bound_bytes"'
contains "tessera tune --model"
expect 0 "$T" compile "$R" -o "$TMP/r.so"
contains "arena: "
contains "lower bound"
contains "time: import"
"$PY" -c "
import numpy as np
np.savez('$TMP/in.npz', data=np.random.RandomState(1).uniform(-1, 1, (1, 3, 32, 32)).astype(np.float32))
np.savez('$TMP/bad.npz', data=np.zeros((1, 3, 16, 16), np.float32))
" || fail "numpy"
expect 0 "$T" run "$TMP/r.so" --inputs "$TMP/in.npz" --outputs "$TMP/out.npz" --threads 2 --repeat 3 --profile
contains "latency: median"
contains "kernel calls"
contains "medians of 3 profiled runs"
"$T" run "$TMP/r.so" --inputs "$TMP/in.npz" --threads 1 --repeat 2 --profile \
  --json >"$TMP/run.json" || fail "run --json"
"$PY" -c "
import json
d = json.load(open('$TMP/run.json'))
assert d['runs'] == 2 and d['median_ms'] > 0 and d['first_ms'] > 0, d
assert d['kernels'] and all(k['ms'] >= 0 and k['name'] for k in d['kernels']), d
" || fail "run --json fields"
expect 0 "$T" graph run "$R" --inputs "$TMP/in.npz" --outputs "$TMP/ref.npz"
"$PY" -c "
import numpy as np, sys
a = np.load('$TMP/out.npz'); b = np.load('$TMP/ref.npz')
assert sorted(a.files) == sorted(b.files), (a.files, b.files)
for k in b.files:
    err = np.abs(a[k] - b[k]).max() / max(np.abs(b[k]).max(), 1e-30)
    if err > 1e-5: sys.exit('output %s: relative error %g' % (k, err))
" || fail "compiled and reference outputs differ"
# --dispatch vendor: the convolutions run by oneDNN, same outputs
expect 0 "$T" compile "$R" -o "$TMP/v.so" --dispatch vendor --json
contains '"source":.*"vendor"'
expect 0 "$T" run "$TMP/v.so" --inputs "$TMP/in.npz" --outputs "$TMP/vout.npz" --threads 2 --profile
contains "oneDNN"
"$PY" -c "
import numpy as np, sys
a = np.load('$TMP/vout.npz'); b = np.load('$TMP/ref.npz')
for k in b.files:
    err = np.abs(a[k] - b[k]).max() / max(np.abs(b[k]).max(), 1e-30)
    if err > 1e-4: sys.exit('output %s: relative error %g' % (k, err))
" || fail "vendor-dispatched and reference outputs differ"
# --extern: a user's C function runs a task instead of its kernel (here
# 2x + 1 in place of relu then sigmoid, so its outputs show it ran), by
# the call's name or the task's hash; bad requests exit 1 or 2, write nothing
"$PY" -c "
import numpy as np, onnx
from onnx import helper, TensorProto
x = helper.make_tensor_value_info('x', TensorProto.FLOAT, [4, 256])
y = helper.make_tensor_value_info('y', TensorProto.FLOAT, [4, 256])
g = helper.make_graph([helper.make_node('Relu', ['x'], ['r'], name='relu0'),
                       helper.make_node('Sigmoid', ['r'], ['y'], name='sig0')],
                      'ew', [x], [y])
m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 17)])
m.ir_version = 8
onnx.save(m, '$TMP/ew.onnx')
np.savez('$TMP/ew_in.npz', x=np.random.RandomState(3).uniform(-1, 1, (4, 256)).astype(np.float32))
" || fail "onnx"
cat >"$TMP/affine.c" <<'EOF_C'
#include <stdint.h>
typedef int32_t (*ts_rt_task)(void *closure, int64_t begin, int64_t end);
int32_t ts_rt_parallel_for(void *rt, ts_rt_task task, void *closure, int64_t n);
struct job { const float *x; float *y; };
static int32_t rows(void *c, int64_t b, int64_t e) {
  struct job *j = c;
  for (int64_t i = b * 256; i < e * 256; i++) j->y[i] = 2.0f * j->x[i] + 1.0f;
  return 0;
}
int32_t affine(void *const *args, void *rt) {
  struct job j = {args[0], args[1]};
  return ts_rt_parallel_for(rt, rows, &j, 4);
}
EOF_C
EW="$TMP/ew.onnx"
H=$("$T" graph tasks "$EW" --json | "$PY" -c "import json,sys; print(json.load(sys.stdin)['tasks'][0]['hash'])") || fail "graph tasks --json"
CALL=$("$T" graph show "$EW" | sed -n 's/.*call_tir\[\([a-z_0-9]*\)\].*/\1/p' | head -1)
[ -n "$CALL" ] || fail "no call node in graph show"
expect 2 "$T" compile "$EW" -o "$TMP/e.so" --extern "$CALL"
contains "TASK=FILE:FUNCTION"
expect 2 "$T" compile "$EW" -o "$TMP/e.so" --extern "$CALL=$TMP/affine.c"
expect 1 "$T" compile "$EW" -o "$TMP/e.so" --extern "sig0=$TMP/affine.c:affine"
contains "no task has this hash"
expect 1 "$T" compile "$EW" -o "$TMP/e.so" --extern "$CALL=$TMP/none.c:affine"
contains "cannot read"
expect 1 "$T" compile "$EW" -o "$TMP/e.so" --extern "$CALL=$TMP/ew_in.npz:affine"
contains "not a C source"
expect 1 "$T" compile "$EW" -o "$TMP/e.so" --extern "$CALL=$TMP/affine.c:2x"
contains "not a C function name"
expect 1 "$T" compile "$EW" -o "$TMP/e.so" --extern "$CALL=$TMP/affine.c:nosuch"
contains "user function nosuch()"
expect 1 "$T" compile "$EW" -o "$TMP/e.so" --extern "$CALL=$TMP/affine.c:affine" \
  --extern "$H=$TMP/affine.c:affine"
contains "already runs"
[ ! -e "$TMP/e.so" ] || fail "a failed --extern compile wrote the library"
for key in "$CALL" "$H"; do
  expect 0 "$T" compile "$EW" -o "$TMP/e.so" --extern "$key=$TMP/affine.c:affine" --json
  contains '"source":.*"extern"'
  expect 0 "$T" run "$TMP/e.so" --inputs "$TMP/ew_in.npz" --outputs "$TMP/e_out.npz" --threads 2 --profile
  contains "\[extern affine\]"
  "$PY" -c "
import numpy as np, sys
x = np.load('$TMP/ew_in.npz')['x']; y = np.load('$TMP/e_out.npz')['y']
if np.abs(y - (2 * x + 1)).max() > 1e-6: sys.exit('the user function did not run')
" || fail "--extern output"
done
# quantize profile: three samples under a leading axis; the ranges,
# histograms and calibrations per tensor; bad shapes and usage refused
"$PY" -c "
import numpy as np
np.savez('$TMP/cal.npz', data=np.random.RandomState(2).uniform(-1, 1, (3, 1, 3, 32, 32)).astype(np.float32))
np.savez('$TMP/cal_bad.npz', data=np.zeros((2, 1, 3, 16, 16), np.float32))
" || fail "numpy"
expect 0 "$T" quantize profile "$R" --inputs "$TMP/cal.npz" -o "$TMP/prof.json" --bins 128
contains "over 3 samples"
"$PY" -c "
import json
d = json.load(open('$TMP/prof.json'))
assert d['samples'] == 3 and d['bins'] == 128, d.keys()
t = d['tensors'][0]
assert t['name'] == 'data' and t['count'] == 3 * 3 * 32 * 32, t['count']
assert len(t['hist']) == 128 and sum(t['hist']) == t['count']
assert -1 <= t['min'] < t['max'] <= 1 and 'entropy_symmetric' in t['ranges']
" || fail "profile fields"
# the int8 products through oneDNN (--dispatch vendor): uint8 x int8 with
# the dequantization, the float epilogue and the requantization as
# oneDNN's output scales and post-ops, giving what the reference executor
# gives for the quantized graph. Without VNNI oneDNN's int8 saturates
# 16-bit pair sums, so there the vendor call is refused with the reason
# and the tuned kernels run every int8 task.
"$T" compile "$R" --quantize "$TMP/prof.json" -o "$TMP/q.so" --dispatch vendor \
  --json >"$TMP/q.json" 2>/dev/null || fail "int8 compile --dispatch vendor"
if grep -qw -e avx512_vnni -e avx_vnni /proc/cpuinfo; then VNNI=1; else VNNI=0; fi
"$PY" -c "
import json, sys
d = json.load(open('$TMP/q.json'))
q = [t for t in d['tasks'] if 'integer' in t['name']]
v = [t['name'] for t in q if t['source'] == 'vendor']
if $VNNI and len(v) < 3: sys.exit('int8 tasks dispatched to oneDNN: %s' % v)
if not $VNNI:
    if v: sys.exit('int8 tasks dispatched to oneDNN without VNNI: %s' % v)
    why = [t.get('dispatch', '') for t in q]
    if len(q) < 3 or not all('without VNNI' in w for w in why):
        sys.exit('int8 tasks and their refusals: %s' % why)
" || fail "int8 vendor dispatch"
expect 0 "$T" run "$TMP/q.so" --inputs "$TMP/in.npz" --outputs "$TMP/qout.npz"
expect 0 "$T" graph run "$R" --quantize "$TMP/prof.json" --inputs "$TMP/in.npz" --outputs "$TMP/qref.npz"
"$PY" -c "
import numpy as np, sys
a = np.load('$TMP/qout.npz'); b = np.load('$TMP/qref.npz')
for k in b.files:
    err = np.linalg.norm(a[k] - b[k]) / max(np.linalg.norm(b[k]), 1e-30)
    if err > 1e-3: sys.exit('output %s: relative L2 %g' % (k, err))
" || fail "int8 vendor-dispatched and reference outputs differ"
expect 1 "$T" quantize profile "$R" --inputs "$TMP/cal_bad.npz" -o "$TMP/prof2.json"
contains "array 'data'"
[ ! -e "$TMP/prof2.json" ] || fail "a failed profile was written"
expect 2 "$T" quantize profile "$R" -o "$TMP/prof2.json"
contains "no calibration inputs"
expect 2 "$T" quantize profile "$R" --inputs "$TMP/cal.npz" -o "$TMP/p.json" --percentile 0
expect 2 "$T" quantize bogus
expect 1 "$T" run "$TMP/r.so" --inputs "$TMP/bad.npz" --outputs "$TMP/o.npz"
contains "the model wants"
expect 1 "$T" run "$TMP/missing.so" --inputs "$TMP/in.npz"
contains "cannot load"
echo "compile_cli: ok"
