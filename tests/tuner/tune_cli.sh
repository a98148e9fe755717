#!/bin/sh
# tune_cli.sh TESSERA — `tessera tune` through the real binary: usage
# errors, and --compare-models (two jobs, two databases, a side-by-side
# table) on a small workload with a small budget; --threads filed in the
# target (-num-cores), kept on resume, a conflicting resume refused.
set -u
T="$1"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
expect() {
  want=$1; shift
  "$@" >"$TMP/out" 2>"$TMP/err"
  got=$?
  [ "$got" = "$want" ] || { cat "$TMP/out" "$TMP/err"; fail "'$*' exited $got, expected $want"; }
}
contains() { grep -q -- "$2" "$TMP/$1" || { head -c 2000 "$TMP/$1"; fail "$1 lacks '$2'"; }; }

# --population 16 where the search's size is not what a step checks: the
# evolutionary search's own tests are in tests/tuner, and a population of
# 256 per round is most of these jobs' time under the sanitizers
W="matmul M=64 N=64 K=64"
expect 2 "$T" tune --compare-models;                     contains err "give at least one --workload"
expect 2 "$T" tune --workload "$W" --compare-models --cost-model xgb
contains err "chooses the cost models"
expect 2 "$T" tune --workload "$W" --trials x;           contains err "--trials"

expect 2 "$T" tune --workload "$W" --compare-rounds 3
contains err "goes with --compare-models"
expect 2 "$T" tune --workload "$W" --compare-models --compare-rounds 0
contains err "compare-rounds"
expect 0 "$T" tune --workload "$W" --trials 12 --batch 6 --db "$TMP/c.db" \
  --compare-models --compare-rounds 3 --quiet --json --population 16
[ -s "$TMP/c-xgb.db" ] || fail "no xgb database"
[ -s "$TMP/c-random.db" ] || fail "no random database"
[ ! -e "$TMP/c.db" ] || fail "--compare-models wrote the plain database"
for k in '"xgb_gflops": [0-9]' '"random_gflops": [0-9]' \
         '"xgb_gflops_side_by_side": [0-9]' '"ratio_side_by_side": [0-9]' \
         '"trials": \[12, 12\], "rounds": 3'; do
  contains out "$k"
done
# each job holds its own 12 records
"$T" db list --db "$TMP/c-xgb.db" >"$TMP/out" 2>&1 || fail "db list"
contains out " 12 "
# benchmarking the database's best stores the vendor levels as baselines
expect 0 "$T" bench --workload "$W" --db "$TMP/c-xgb.db" --threads 1 \
  --repeat 1 --min-repeat-ms 1 --json
contains out '"check": "ok"'
# (the job measured on every core: no record of one thread, said so)
contains err "no record of '.*' measured on 1 thread"
"$T" db export --db "$TMP/c-xgb.db" >"$TMP/out" 2>&1 || fail "db export"
grep '"type": *"baseline"' "$TMP/out" >"$TMP/base"
contains base '"vendor": *"onednn"'; contains base '"vendor": *"openblas"'
# the measurement threads are part of the target: records measured on one
# thread are filed under -num-cores=1, a resume measures on one thread
# again, and a resume asking for another count is refused naming both
W2="matmul M=16 N=16 K=16"
expect 0 "$T" tune --workload "$W2" --trials 4 --batch 4 --threads 1 \
  --db "$TMP/t1.db" --job one --quiet --population 16
"$T" db list --db "$TMP/t1.db" >"$TMP/out" 2>&1 || fail "db list"
contains out "num-cores=1"
expect 0 "$T" tune --job one --db "$TMP/t1.db" --trials 8
contains out "(1 thread)"
# the job's batch is kept; another one given on resume is used and noted
expect 0 "$T" tune --job one --db "$TMP/t1.db" --trials 10 --batch 2
contains err "--batch 2 (started with 4)"
expect 2 "$T" tune --job one --db "$TMP/t1.db" --trials 12 --threads 2
contains err "--threads 2 but the target"
contains err "measures on 1"
expect 2 "$T" tune --workload "$W2" --trials 4 --threads 2 \
  --target "llvm -num-cores=1" --db "$TMP/t2.db"
contains err "--threads 2 but the target"
# bench and db confirm with --threads 1 find the records of one thread
expect 0 "$T" bench --workload "$W2" --db "$TMP/t1.db" --threads 1 \
  --repeat 1 --min-repeat-ms 1
lacks_err() { ! grep -q -- "$1" "$TMP/err" || { cat "$TMP/err"; fail "err has '$1'"; }; }
lacks_err "no record"
expect 0 "$T" db confirm --db "$TMP/t1.db" --threads 1 --top 2 --rounds 2
contains out "matmul_16x16x16_float32"

# a job keeps its --rule traces: a resume without --rule applies them even
# when the file is gone; a --rule given on resume is used and noted
cat >"$TMP/rule.json" <<'EOF'
{"version":1,"instructions":[{"kind":"get_block","inputs":[],"attrs":["C"],"outputs":["b0"]},{"kind":"get_loops","inputs":["b0"],"attrs":[],"outputs":["l1","l2","l3"]},{"kind":"split","inputs":["l1",null,4],"attrs":[],"outputs":["l4","l5"]}],"decisions":[]}
EOF
expect 0 "$T" tune --workload "$W2" --trials 4 --batch 4 --threads 1 \
  --db "$TMP/r.db" --job ruled --rule "C=$TMP/rule.json" --quiet --no-summary-measure
mv "$TMP/rule.json" "$TMP/rule2.json"
expect 0 "$T" tune --job ruled --db "$TMP/r.db" --trials 8 --quiet --no-summary-measure
expect 0 "$T" tune --job ruled --db "$TMP/r.db" --trials 10 --quiet \
  --rule "C=$TMP/rule2.json" --no-summary-measure
contains err "the --rule given apply to this run (the job started with 1 rule"
"$T" db export --db "$TMP/r.db" >"$TMP/out" 2>&1 || fail "db export"
grep '"type":"record"' "$TMP/out" >"$TMP/recs"
[ "$(wc -l <"$TMP/recs")" = 10 ] || fail "expected 10 records"
[ "$(grep -c '"split","inputs":\["l1",null,4\]' "$TMP/recs")" = 10 ] ||
  fail "a record does not follow the job's rule"

# show --best --json: the best record's figures and its trace as an object
"$T" show --db "$TMP/r.db" --workload "$W2" --best --trace --json >"$TMP/j" ||
  fail "show --best --json"
python3 -c "
import json, sys
d = json.load(open(sys.argv[1]))
assert d['job'] == 'ruled' and d['target'].endswith('-num-cores=1'), d
assert d['latency_s'] > 0 and d['gflops'] > 0 and d['peak_gflops'] is None
assert d['trace']['instructions'][0]['kind'] == 'get_block'
assert 'split' in d['script']
" "$TMP/j" || { head -c 2000 "$TMP/j"; fail "show --best --json fields"; }

# --winograd: a 3x3 conv's Winograd forms tuned as tasks of the job, the
# summary weighing them against the direct form (text and JSON, and again
# on resume), bench timing each form with every stage checked; refusals
CW="conv2d_nhwc N=1 H=6 W=6 CI=32 CO=32 KH=3 KW=3 pad=1"
expect 2 "$T" tune --model m.onnx --winograd;            contains err "goes with --workload"
expect 0 "$T" tune --workload "$CW" --workload "$W2" --winograd --trials 14 \
  --batch 2 --threads 1 --db "$TMP/w.db" --job w --no-summary-measure --population 16
contains err "has no Winograd form: it is not a conv2d_nhwc workload"
contains err "2 forms, 6 tasks added"
contains out "F(2x2) input transform (conv2d_nhwc_1x6x6x32x32"
contains out "F(4x4) output transform (conv2d_nhwc_1x6x6x32x32"
contains out "forms of conv2d_nhwc_1x6x6x32x32x3x3_float32_pad1"
contains out "fastest: "
expect 0 "$T" tune --job w --db "$TMP/w.db" --trials 16 --quiet --no-summary-measure --json
contains out '"winograd_forms": \[{"workload": "conv2d_nhwc_1x6x6x32x32x3x3_float32_pad1", "direct_seconds": [0-9]'
contains out '"f2x2_seconds": [0-9][^,]*, "f4x4_seconds": [0-9]'
expect 0 "$T" bench --workload "$CW" --db "$TMP/w.db" --threads 1 --repeat 2 \
  --min-repeat-ms 1
contains out "forms:     2 Winograd forms from the database"
contains out "^F(2x2) .*Winograd F(2x2), 3 kernels"
contains out "^F(4x4) .*Winograd F(4x4), 3 kernels"
expect 0 "$T" bench --workload "$CW" --db "$TMP/w.db" --threads 1 --repeat 2 \
  --min-repeat-ms 1 --json
contains out '"winograd_f4x4_gflops": [0-9]'
# --cold: each side again as a model's layer runs (weights evicted)
expect 0 "$T" bench --workload "$CW" --db "$TMP/w.db" --threads 1 --repeat 1 \
  --min-repeat-ms 1 --cold
contains out "^cold: 3 rounds of one call each"
contains out "^F(4x4) .*its speed over oneDNN's"
contains out "^onednn  *[0-9.]*  *[0-9.]*  *[0-9.]*$"
expect 0 "$T" bench --workload "$CW" --db "$TMP/w.db" --threads 1 --repeat 1 \
  --min-repeat-ms 1 --cold --json
contains out '"cold": {"rounds": 3, "tessera_seconds": [0-9]'
contains out '"ratio_to_onednn": [0-9]'
# --cold with --tir: the function's inputs after the first evicted
printf '%s\n' 'func add1(X: float32[64], W: float32[64], Y: float32[64]) {' \
  '  block root() {' '    reads(X[0 +: 64], W[0 +: 64])' '    writes(Y[0 +: 64])' \
  '    for i in range(64) {' '      block Y(v: spatial(64) = i) {' \
  '        reads(X[v], W[v])' '        writes(Y[v])' '        Y[v] = X[v] + W[v]' \
  '      }' '    }' '  }' '}' > "$TMP/add1.tir"
expect 0 "$T" bench --tir "$TMP/add1.tir" --cold --threads 1 --repeat 1 --min-repeat-ms 1
contains out "^cold: 3 rounds"
# a strided conv has no form: said, and tuned alone
expect 0 "$T" tune --workload "conv2d_nhwc N=1 H=6 W=6 CI=32 CO=32 KH=3 KW=3 stride=2 pad=1" \
  --winograd --trials 2 --batch 2 --threads 1 --db "$TMP/w2.db" --quiet --no-summary-measure \
  --population 16
contains err "has no Winograd form: its stride is not 1"

# costmodel collect stores each record with its measurement context
expect 0 "$T" costmodel collect --db "$TMP/cc.db" --workload "$W2" --n 3 --threads 1 --repeat 2
"$T" db export --db "$TMP/cc.db" | grep '"type":"record"' >"$TMP/ccrecs" || fail "export of collect"
[ "$(grep -c '"measure":{"number":1,"repeat":2,"min_repeat_ms":[0-9]*,"warmup":1,"flush_cache":false,"threads":1,' "$TMP/ccrecs")" = 3 ] \
  || { cat "$TMP/ccrecs"; fail "costmodel collect records lack their context"; }
# costmodel train/eval spell the output and threads as every command does
# (-o/--output, --threads; --out and --nthread still read)
expect 0 "$T" costmodel train --db "$TMP/r.db" -o "$TMP/cm.model" --threads 1
[ -s "$TMP/cm.model" ] || fail "costmodel train -o wrote nothing"
expect 0 "$T" costmodel train --db "$TMP/r.db" --out "$TMP/cm2.model" --nthread 1
[ -s "$TMP/cm2.model" ] || fail "costmodel train --out wrote nothing"
expect 0 "$T" costmodel eval --db "$TMP/r.db" --threads 1 --folds 2 --json
contains out '"records": 10'

# every sub-subcommand has its own --help
expect 0 "$T" costmodel train --help
contains out "usage: tessera costmodel train"
contains out "fit a model on the records"

echo "tune_cli: all checks passed"
