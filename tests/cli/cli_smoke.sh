#!/bin/sh
# cli_smoke.sh TESSERA SOURCE_DIR — the command-line contract: help and
# version, exit code 2 with a usage message for unknown commands and bad
# options, exit code 1 with a clear error for bad input, `show`/`check`
# on a real workload, and an interrupted `bench --suite`. Every expectation
# is checked; the first failure stops.
set -u
T="$1"
SRC="$2"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# expect CODE CMD... : runs CMD, checks the exit code, keeps output in $TMP/out
expect() {
  want=$1; shift
  "$@" >"$TMP/out" 2>&1
  got=$?
  [ "$got" = "$want" ] || { cat "$TMP/out"; fail "'$*' exited $got, expected $want"; }
}
contains() { grep -q -- "$1" "$TMP/out" || { cat "$TMP/out"; fail "output lacks '$1'"; }; }

expect 0 "$T" --help;            contains "usage: tessera"
expect 0 "$T" --version;         contains "tessera "
expect 2 "$T";                   contains "usage: tessera"
expect 2 "$T" frobnicate;        contains "unknown command 'frobnicate'"
expect 2 "$T" show --bogus;      contains "unknown option '--bogus'"
expect 2 "$T" show;              contains "exactly one of --workload or --tir"
expect 2 "$T" show --workload;   contains "needs a spec"
expect 2 "$T" check --seed x --workload "matmul M=2 N=2 K=2"; contains "wants a number"
expect 0 "$T" show --help;       contains "usage: tessera show"
expect 0 "$T" show --ops;        contains "matmul"
expect 0 "$T" show --target "llvm -mcpu=x86-64-v3"; contains "isa: AVX2 (16 vector registers of 256 bits)"
contains "bfloat16   computed in float32"
expect 1 "$T" show --target "llvm -mcpu=nosuchcpu"; contains "nosuchcpu"

# --json: one object on stdout with the same fields as the text
jq_py() { # FILE PYTHON-ASSERTIONS (d is the parsed object)
  python3 -c "import json,sys; d=json.load(open(sys.argv[1])); $2" "$1" ||
    { head -c 2000 "$1"; fail "JSON check failed: $2"; }
}
"$T" show --workload "matmul M=16 N=8 K=4" --json >"$TMP/j" || fail "show --json"
jq_py "$TMP/j" "assert d['name']=='matmul_16x8x4_float32' and d['flops']==1024 and len(d['hash'])==32 and d['tir'].startswith('func matmul')"
"$T" show --workload "matmul M=16 N=8 K=4" --lowered --json >"$TMP/j" || fail "show --lowered --json"
jq_py "$TMP/j" "assert d['target'].startswith('llvm') and 'for ' in d['lowered']"
"$T" show --ops --json >"$TMP/j" || fail "show --ops --json"
jq_py "$TMP/j" "assert any(o['name']=='matmul' for o in d['operators'])"
"$T" show --target "llvm -mcpu=x86-64-v3" --json >"$TMP/j" || fail "show --target --json"
jq_py "$TMP/j" "assert d['isa']=='AVX2' and d['vector_bits']==256 and 'float32' in d['dtypes']"
"$T" check --workload "matmul M=16 N=8 K=4" --quiet --json >"$TMP/j" || fail "check --json"
jq_py "$TMP/j" "assert d['check']=='ok' and d['verify'] and d['outputs'][0]['compiled_matches'] and 'tir' not in d"
expect 0 "$T" show --help --json; contains "usage: tessera show"

# Bad input: exit 1 and a message naming the problem.
expect 1 "$T" show --workload "matmull M=1";        contains "matmull"
expect 1 "$T" show --workload "matmul M=4 N=4";     contains "K"
expect 1 "$T" show --workload "matmul M=0 N=4 K=4"; contains "M"
expect 1 "$T" show --tir "$TMP/does-not-exist.tir"; contains "does-not-exist.tir"
printf 'func f(A: float32[4]) {\n  A[0] = float32(1\n}\n' >"$TMP/bad.tir"
expect 1 "$T" show --tir "$TMP/bad.tir";            contains "bad.tir:3:1: expected ')'"

# show prints valid TIR with hash and FLOPs; its output reads back with the
# same hash.
expect 0 "$T" show --workload "matmul M=16 N=8 K=4"
contains "# hash: "; contains "# flops: 1024"; contains "func "
cp "$TMP/out" "$TMP/mm.tir"
h1=$(grep '# hash:' "$TMP/mm.tir")
expect 0 "$T" show --tir "$TMP/mm.tir"
h2=$(grep '# hash:' "$TMP/out")
[ "$h1" = "$h2" ] || fail "hash changed through the text form: $h1 vs $h2"
# --default: the schedule an untuned task gets (here: a parallel loop and a
# vectorized one), as TIR or lowered code; not with a trace or a database
expect 0 "$T" show --tir "$TMP/mm.tir" --default
contains "parallel"; contains "vectorized"
expect 0 "$T" show --tir "$TMP/mm.tir" --default --lowered
contains "# target: "
expect 2 "$T" show --tir "$TMP/mm.tir" --default --trace "$TMP/mm.tir"
contains "--default does not go with"

# check runs the interpreter and reports ok.
expect 0 "$T" check --workload "conv2d_nhwc N=1 H=8 W=8 CI=4 CO=4 KH=3 KW=3 pad=1" --quiet
contains "check:     ok"
expect 0 "$T" check --tir "$TMP/mm.tir" --quiet
contains "check:     ok"

# bench: a TIR file (a model's task) as well as a spec; JSON figures keep
# their significant digits (a microsecond kernel is not 0.0000 s)
expect 0 "$T" bench --tir "$TMP/mm.tir" --default --threads 1 --repeat 1 --min-repeat-ms 1
contains "tessera"; contains "check"
# the output is checked after several runs (4 by default): a race between
# threads shows in some runs only
contains ", 4 runs)"
expect 0 "$T" bench --tir "$TMP/mm.tir" --default --threads 2 --repeat 1 --min-repeat-ms 1 --check-runs 9
contains ", 9 runs)"
expect 2 "$T" bench --tir "$TMP/mm.tir" --check-runs 0; contains "--check-runs wants an integer in"
expect 0 "$T" bench --workload "matmul M=16 N=8 K=4" --threads 1 --repeat 1 --min-repeat-ms 1 --json
grep -Eq '"tessera_seconds": [1-9][0-9.]*e-0[5-9]' "$TMP/out" || { cat "$TMP/out"; fail "tessera_seconds lost its digits"; }
# after each library's turn the rounds idle --settle-ms (its spinning
# threads stop first): two rounds of at least one library, 300 ms each
t0=$(date +%s%N)
expect 0 "$T" bench --workload "matmul M=16 N=8 K=4" --threads 1 --repeat 2 --min-repeat-ms 1 --settle-ms 300 --json
t1=$(date +%s%N)
contains '"settle_ms": 300'
[ $(( (t1 - t0) / 1000000 )) -ge 600 ] || fail "--settle-ms 300 over two rounds took under 600 ms"
expect 2 "$T" bench --workload "matmul M=16 N=8 K=4" --settle-ms -1; contains "--settle-ms wants an integer in"
expect 2 "$T" bench --tir "$TMP/mm.tir" --workload "matmul M=2 N=2 K=2"; contains "exactly one of --workload or --tir"
# the broad set: drawn from its seed, the same list every time, another
# with another seed; its options go with --suite only
expect 0 "$T" bench --suite --set broad --list
cp "$TMP/out" "$TMP/broad1"
[ "$(wc -l < "$TMP/broad1")" = 16 ] || { cat "$TMP/broad1"; fail "the broad set is not 16 workloads"; }
contains "dtype=int8"
contains "KH=7 KW=7 stride=2"
expect 0 "$T" bench --suite --set broad --set-seed 1 --list
cmp -s "$TMP/out" "$TMP/broad1" || fail "the broad set of seed 1 changed between runs"
expect 0 "$T" bench --suite --set broad --set-seed 2 --list
cmp -s "$TMP/out" "$TMP/broad1" && fail "seeds 1 and 2 drew the same set"
expect 0 "$T" bench --suite --list; contains "matmul M=1024 N=1024 K=1024 dtype=int8"
# --only: the rows whose spec contains the text, in the set's order
expect 0 "$T" bench --suite --set broad --only depthwise --list
[ "$(wc -l < "$TMP/out")" = 2 ] || { cat "$TMP/out"; fail "--only depthwise kept other rows"; }
grep -v depthwise "$TMP/out" && fail "--only depthwise listed another workload"
expect 2 "$T" bench --suite --set broad --only "op=nothing" --list; contains "no workload of the broad set contains it"
# --const-weights: the convolutions declare their weights constant, the
# other rows are unchanged
expect 0 "$T" bench --suite --set broad --const-weights --list
[ "$(grep -c 'const=weight' "$TMP/out")" = "$(grep -c conv2d "$TMP/broad1")" ] || { cat "$TMP/out"; fail "--const-weights did not mark every conv"; }
grep -v conv2d "$TMP/out" | grep -q const= && fail "--const-weights marked a row that is not a conv"
expect 0 "$T" bench --workload "dense M=4 N=64 K=32 const=W" --default --repeat 1; contains "const=W"
expect 1 "$T" bench --workload "dense M=4 N=64 K=32 const=Y"; contains "'Y' is an output; its inputs are X, W, bias"
expect 2 "$T" bench --only depthwise --workload "matmul M=2 N=2 K=2"; contains "go with --suite"
expect 2 "$T" bench --suite --set wide --list; contains "--set wants fixed or broad"
expect 2 "$T" bench --suite --isa sse --list; contains "--isa wants native or avx2"
expect 2 "$T" bench --set broad --workload "matmul M=2 N=2 K=2"; contains "go with --suite"
# An interrupted bench suite stops (here in its first step, the machine
# probe), says how to resume, exits 130 and writes no table.
"$T" bench --suite --budget quick --db "$TMP/suite.db" -o "$TMP/suite" \
  >"$TMP/suite.out" 2>"$TMP/suite.err" &
pid=$!
i=0
until grep -q "probing" "$TMP/suite.err" 2>/dev/null; do
  i=$((i + 1))
  [ $i -lt 200 ] || { kill -9 $pid; fail "the suite never started probing"; }
  sleep 0.1
done
kill -INT $pid
i=0
while kill -0 $pid 2>/dev/null && [ $i -lt 300 ]; do
  i=$((i + 1))
  sleep 0.1
done
if kill -0 $pid 2>/dev/null; then
  pkill -9 -P $pid; kill -9 $pid
  fail "the suite went on for 30 s after SIGINT"
fi
wait $pid
got=$?
[ "$got" = 130 ] || { cat "$TMP/suite.err"; fail "interrupted suite exited $got, expected 130"; }
grep -q "interrupted during the machine probe" "$TMP/suite.err" ||
  { cat "$TMP/suite.err"; fail "no interrupt message"; }
grep -q "run the same command again to resume" "$TMP/suite.err" ||
  fail "no resume hint"
[ ! -e "$TMP/suite/latest.json" ] || fail "an interrupted suite wrote its table"

# The default int8 product packs B for VNNI four k of a column side by side:
# 16 columns read as one vector per k and stored as one run of 64 bytes
# (an interleaving copy: the lowered stores are ramps of stride 4 whose
# loads are contiguous), not a byte at a time.
"$T" show --workload "matmul M=64 N=64 K=64 dtype=int8" --default --lowered \
  --target "llvm -mcpu=cascadelake" >"$TMP/pack.txt" 2>&1 ||
  { cat "$TMP/pack.txt"; fail "show --lowered of the int8 default failed"; }
n=$(grep -c 'B_global\[ramp(.*, 4, 16)\] = B\[ramp(.*, 1, 16)\]' "$TMP/pack.txt")
[ "$n" -ge 4 ] || { cat "$TMP/pack.txt"; fail "int8 B pack not interleaved ($n runs)"; }

echo "cli_smoke: all checks passed"
