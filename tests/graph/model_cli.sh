#!/bin/sh
# model_cli.sh TESSERA MODELS_DIR SOURCE_DIR — a model end to end through
# the real binary: `tune --model` (a small budget shared by every task,
# then resumed), `compile` with that database, `run` on an .npz, and
# `bench --model` against onnxruntime when the project's venv has it; with
# the usage and input errors of each.
set -u
T="$1"
M="$2"
SRC="$3"
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

# The tuning jobs take --population 16: the evolutionary search's size is
# not what they check (tests/tuner has the search's own tests), and a
# population of 256 per round was most of their time under the sanitizers.
MODEL="$M/ops_small.onnx"
[ -s "$MODEL" ] || fail "no $MODEL (the graph_models fixture writes it)"

# ---- tune --model ----
expect 2 "$T" tune --model "$MODEL" --workload "matmul M=8 N=8 K=8"
contains err "no --workload/--tir beside it"
expect 2 "$T" tune --input-shape x=1x2 --workload "matmul M=8 N=8 K=8"
contains err "goes with --model"
expect 1 "$T" tune --model "$TMP/none.onnx" --db "$TMP/none.db"
contains err "cannot import the model"
[ ! -e "$TMP/none.db" ] || fail "a failed import created the database"

# every task gets trials although the budget is below a batch per task
# (ops_small has 29 tasks; a batch is 32 candidates)
expect 0 "$T" tune --model "$MODEL" --trials 32 --db "$TMP/m.db" --job m \
  --no-summary-measure --json --population 16
contains err "distinct tasks"
python3 - "$TMP/out" <<'EOF' || fail "a task got no trial"
import json, sys
r = json.load(open(sys.argv[1]))
assert len(r["tasks"]) > 1, r
assert all(t["trials"] >= 1 for t in r["tasks"]), r["tasks"]
EOF
# the job resumes from the database alone, and measures only what is left
expect 0 "$T" tune --job m --db "$TMP/m.db" --trials 36 --no-summary-measure \
  --json
contains out '"trials_now": 4'

# --shape-buckets: the tasks of every size of a named dimension in one job
expect 0 "$T" tune --model "$M/dyn_cnn.onnx" --shape-buckets batch=1,3 \
  --trials 6 --db "$TMP/sb.db" --job sb --no-summary-measure --json --population 16
contains err "6 distinct tasks over 2 sizes"
contains out '@batch=1"'
contains out '@batch=3"'
# a size tuned for compiles from the records; another one's hint says --dim
expect 0 "$T" compile "$M/dyn_cnn.onnx" --dim batch=3 --db "$TMP/sb.db" -o "$TMP/sb3.so" --json
lacks_err() { ! grep -q -- "$1" "$TMP/err" || { cat "$TMP/err"; fail "err has '$1'"; }; }
lacks_err "use the default schedule"
expect 0 "$T" compile "$M/dyn_cnn.onnx" --dim batch=2 --db "$TMP/sb.db" -o "$TMP/sb2.so"
contains err "tune --model $M/dyn_cnn.onnx --db $TMP/sb.db --dim batch=2"
expect 2 "$T" tune --model "$M/dyn_cnn.onnx" --shape-buckets batch=3,1
contains err "sizes ascending"
expect 2 "$T" tune --workload "matmul M=8 N=8 K=8" --shape-buckets batch=1
contains err "--shape-buckets goes with --model"
expect 1 "$T" tune --model "$M/dyn_cnn.onnx" --shape-buckets seq=3 --db "$TMP/sb2.db"
contains err "the model's dynamic dimension left is 'batch'"
[ ! -e "$TMP/sb2.db" ] || fail "a failed import created the database"

# the confirmation at the end times each task's oneDNN call beside its
# best (stored as the task's onednn level), and compile --dispatch best
# reads those levels; the library is right whichever side each task takes
# (two convolutions and a matrix product: a few tasks keep this short)
R="$TMP/convs.onnx"
/usr/bin/python3 - "$R" <<'EOF' || fail "cannot write the conv model"
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.RandomState(0)
def w(name, *shape):
    return numpy_helper.from_array(
        (rng.standard_normal(shape) * 0.1).astype(np.float32), name)
nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1],
                          kernel_shape=[3, 3]),
         helper.make_node("Relu", ["c1"], ["r1"]),
         helper.make_node("Conv", ["r1", "w2"], ["c2"], kernel_shape=[1, 1]),
         helper.make_node("Flatten", ["c2"], ["f"]),
         helper.make_node("MatMul", ["f", "w3"], ["y"])]
g = helper.make_graph(
    nodes, "convs",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 8, 8])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 10])],
    [w("w1", 32, 16, 3, 3), w("w2", 8, 32, 1, 1), w("w3", 512, 10)])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
onnx.save(m, sys.argv[1])
EOF
expect 0 "$T" tune --model "$R" --trials 24 --db "$TMP/r.db" --job r \
  --confirm-top 1 --json --population 16
# the in-model confirmation follows the confirmation by default (its table
# on stderr beside --json)
contains err "in-model confirmation ("
python3 - "$TMP/out" <<'EOF' || fail "no task's oneDNN call was timed"
import json, sys
r = json.load(open(sys.argv[1]))
assert any(t.get("onednn_gflops") for t in r["tasks"]), r["tasks"]
EOF
expect 0 "$T" compile "$R" --db "$TMP/r.db" -o "$TMP/rb.so" --json
contains out '"source"'
expect 0 "$T" compile "$R" --db "$TMP/r.db" -o "$TMP/rt.so" --dispatch tuned \
  --json
grep -q '"vendor"' "$TMP/out" && fail "--dispatch tuned chose oneDNN"

# --confirm-in-model: the model compiled once per rank of each task's
# records and once with the vendor calls, run side by side; each task's
# times in the model become its confirmation (5 rounds of 6 runs) and
# compile chooses by them
expect 2 "$T" tune --workload "matmul M=8 N=8 K=8" --confirm-in-model
contains err "--confirm-in-model goes with --model"
expect 2 "$T" tune --model "$M/dyn_cnn.onnx" --shape-buckets batch=1,3 \
  --confirm-in-model
contains err "without --shape-buckets"
expect 0 "$T" tune --model "$R" --trials 3 --db "$TMP/r.db" --job r1 \
  --confirm-top 1 --no-confirm-in-model --population 16
grep -q "in-model" "$TMP/out" "$TMP/err" && fail "--no-confirm-in-model ran it"
expect 0 "$T" tune --model "$R" --trials 6 --db "$TMP/r.db" --job r2 \
  --no-summary-measure --confirm-in-model --population 16
contains out "in-model confirmation ("
contains out "with the choices now stored"
contains err "compiling variant 1 of"
python3 - "$TMP/r.db" <<'EOF' || fail "the in-model figures were not stored"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
n = c.execute("select count(distinct workload_id) from records "
              "where confirmed_rounds = 30").fetchone()[0]
tasks = c.execute("select count(*) from workloads").fetchone()[0]
assert n == tasks, (n, tasks)
EOF
expect 0 "$T" compile "$R" --db "$TMP/r.db" -o "$TMP/rc.so"
# the same on a database as it is: `db confirm --model`, with the pass
# options compile takes
expect 0 "$T" db confirm --db "$TMP/r.db" --model "$R" --top 2 --rounds 1 \
  --layout nhwc
contains out "in-model confirmation ([34] variants"
expect 2 "$T" db confirm --db "$TMP/r.db" --input-shape x=1x16x8x8
contains err "--input-shape goes with --model"
expect 2 "$T" db confirm --db "$TMP/r.db" --model "$R" --json
contains err "takes no WORKLOAD"
expect 2 "$T" db confirm --db "$TMP/r.db" --model "$R" --layout sideways
contains err "unknown layout 'sideways'"
expect 1 "$T" db confirm --db "$TMP/r.db" --model "$TMP/none.onnx"
contains err "cannot import the model"

# --winograd-tile measure: the Winograd forms weighed in the model. Two
# kinds of 3x3 conv the pass can take; each is compiled in its other forms
# beside the model as it is, and each form's time per run is stored in the
# database's `choices`, by which the pass then chooses
WM="$TMP/wino.onnx"
/usr/bin/python3 - "$WM" <<'EOF' || fail "cannot write the Winograd model"
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.RandomState(1)
def w(name, *shape):
    return numpy_helper.from_array(
        (rng.standard_normal(shape) * 0.1).astype(np.float32), name)
nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1],
                          kernel_shape=[3, 3]),
         helper.make_node("Relu", ["c1"], ["r1"]),
         helper.make_node("Conv", ["r1", "w2"], ["y"], pads=[1, 1, 1, 1],
                          kernel_shape=[3, 3])]
g = helper.make_graph(
    nodes, "wino",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 32, 12, 12])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 40, 12, 12])],
    [w("w1", 32, 32, 3, 3), w("b1", 32), w("w2", 40, 32, 3, 3)])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
onnx.save(m, sys.argv[1])
EOF
expect 0 "$T" tune --model "$WM" --trials 2 --db "$TMP/w.db" --job w \
  --no-summary-measure --no-confirm-in-model --population 16
expect 0 "$T" db confirm --db "$TMP/w.db" --model "$WM" --winograd-tile measure \
  --top 1 --rounds 1
contains out "winograd in the model (5 variants"
contains err "Conv_0 as direct"
python3 - "$TMP/w.db" <<'EOF' || fail "the forms' figures were not stored"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
rows = c.execute("select subject, option, seconds from choices "
                 "where kind = 'winograd'").fetchall()
assert len({r[0] for r in rows}) == 2, rows
assert len(rows) == 6 and all(r[2] > 0 for r in rows), rows
EOF
expect 0 "$T" graph show "$WM" --winograd-tile measure --db "$TMP/w.db" \
  --after winograd
contains out "# winograd: Conv_0: in the model: direct"
# the pass follows the figures: F(2x2) fastest for both, then direct
figures() {
  python3 - "$TMP/w.db" "$1" "$2" "$3" <<'EOF' || fail "cannot set the figures"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
for opt, s in zip(("direct", "F(2x2)", "F(4x4)"), sys.argv[2:]):
    c.execute("update choices set seconds = ? where option = ?", (float(s), opt))
c.commit()
EOF
}
figures 3e-3 1e-3 2e-3
expect 0 "$T" graph show "$WM" --winograd-tile measure --db "$TMP/w.db" \
  --after winograd
contains out "Conv_0: in the model: direct 3000.0 us, F(2x2) 1000.0 us, F(4x4) 2000.0 us: F(2x2)"
contains out "Conv_2: in the model: .*: F(2x2)"
figures 1e-3 2e-3 3e-3
expect 0 "$T" graph show "$WM" --winograd-tile measure --db "$TMP/w.db" \
  --after winograd
contains out "Conv_2: in the model: .*: direct"
grep -q "WinogradInput" "$TMP/out" && fail "direct was fastest, Winograd taken"

# ---- compile, run ----
if "$T" compile --help >/dev/null 2>&1; then
  expect 0 "$T" compile "$MODEL" --db "$TMP/m.db" -o "$TMP/m.so"
  [ -s "$TMP/m.so" ] || fail "no library"
  expect 1 "$T" bench --model "$TMP/none.so"
  contains err "cannot load the compiled model"
  expect 1 "$T" bench --model "$MODEL"
  contains err "cannot load the compiled model"
  expect 0 "$T" bench --model "$TMP/m.so" --rounds 2 --min-round-ms 1 --settle-ms 0 --json
  contains out '"settle_ms": 0'
  contains out '"tessera_seconds": [0-9]'
  contains out '"kernels": \[{'
  expect 2 "$T" bench --model "$TMP/m.so" --settle-ms -1
  contains err "--settle-ms"
  if [ -x "$SRC/.venv/bin/python" ] &&
     "$SRC/.venv/bin/python" -c "import onnxruntime" 2>/dev/null; then
    expect 0 "$T" bench --model "$TMP/m.so" --onnx "$MODEL" --threads 1 \
      --rounds 2 --min-round-ms 1 --settle-ms 20 --json
    contains out '"settle_ms": 20'
    contains out '"speedup": [0-9]'
    contains out '"onnxruntime_seconds": [0-9]'
    # channels-last edges: onnxruntime still gets and gives the model's own
    # NCHW arrays, and the outputs agree
    expect 0 "$T" compile "$MODEL" --db "$TMP/m.db" -o "$TMP/mh.so" \
      --input-layout nhwc --output-layout nhwc
    expect 0 "$T" bench --model "$TMP/mh.so" --onnx "$MODEL" --threads 1 \
      --rounds 1 --min-round-ms 1 --settle-ms 0 --json
    contains out '"speedup": [0-9]'
  else
    echo "model_cli: no onnxruntime in $SRC/.venv: the side-by-side bench is skipped"
  fi
fi
# ---- --pet: tune the candidates' tasks too; compile weighs them by it ----
/usr/bin/python3 - "$TMP/dil.onnx" <<'EOF' || fail "cannot write the dilated model"
import sys
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
rng = np.random.RandomState(0)
def w(name):
    return numpy_helper.from_array(
        (rng.standard_normal((64, 64, 3, 3)) * 0.05).astype(np.float32), name)
dil = dict(pads=[2, 2, 2, 2], dilations=[2, 2], kernel_shape=[3, 3])
nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], **dil),
         helper.make_node("Relu", ["c1"], ["r1"]),
         helper.make_node("Conv", ["r1", "w2"], ["y"], **dil)]
io = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 64, 24, 24])
g = helper.make_graph(nodes, "dil", [io("x")], [io("y")], [w("w1"), w("w2")])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
m.ir_version = 8
onnx.save(m, sys.argv[1])
EOF
expect 0 "$T" graph show "$TMP/dil.onnx" --pet --after pet
contains out "dilated_to_batch: 9 boxes, 0 differ; est\. "
contains out "pet: 2 of 10 mutants applied"
contains out "0 subprograms chosen by measurement"
expect 0 "$T" tune --model "$TMP/dil.onnx" --pet --trials 12 \
  --trials-per-task 2 --db "$TMP/p.db" --job p --no-summary-measure --population 16
# the mutants' tasks are the model's own; the original conv alone is new
contains err "pet: 1 task of the candidates it weighed added"
expect 0 "$T" compile "$TMP/dil.onnx" --pet --db "$TMP/p.db" -o "$TMP/p.so"
contains err "2 subprograms chosen by measurement"
# graph show weighs them the same way with --db, each line saying so
expect 0 "$T" graph show "$TMP/dil.onnx" --pet --db "$TMP/p.db" --after pet
contains out "dilated_to_batch: 9 boxes, 0 differ; measured "
contains out "2 subprograms chosen by measurement"
expect 1 "$T" graph show "$TMP/dil.onnx" --pet --db "$TMP/nonexistent/p.db"
contains err "cannot open the database"
# quantized with --pet: the profile of the rewritten graph covers its new
# values, so both convs become int8
/usr/bin/python3 -c "
import numpy as np
np.savez('$TMP/dcal.npz', x=np.random.RandomState(1).rand(2, 1, 64, 24, 24).astype(np.float32))" ||
  fail "cannot write the calibration samples"
expect 2 "$T" quantize profile "$TMP/dil.onnx" --pet-trials 0 --inputs "$TMP/dcal.npz" -o "$TMP/q.json"
expect 0 "$T" quantize profile "$TMP/dil.onnx" --pet --inputs "$TMP/dcal.npz" -o "$TMP/q.json"
expect 0 "$T" compile "$TMP/dil.onnx" --pet --quantize "$TMP/q.json" -o "$TMP/q.so"
contains err "quantized: 2 convolutions and matrix products int8, 0 kept float32"
echo "model_cli: all checks passed"
