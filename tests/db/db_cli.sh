#!/bin/sh
# db_cli.sh TESSERA — `tessera db` through the real binary: import builds a
# database from a JSON Lines file made here (workloads printed by
# `tessera show`), then list, show, best, confirm, export (and export -> import into an
# empty database -> export is byte-identical), prune, stats, sync and a
# small bench; an unreachable server; bad files and bad imports exit 1 with a message naming the problem
# and leave the database untouched; usage errors exit 2.
set -u
T="$1"
TMP=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$TMP"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# expect CODE CMD... : runs CMD, checks the exit code, keeps output in $TMP/out
expect() {
  want=$1; shift
  "$@" >"$TMP/out" 2>&1
  got=$?
  [ "$got" = "$want" ] || { cat "$TMP/out"; fail "'$*' exited $got, expected $want"; }
}
contains() { grep -q -- "$1" "$TMP/out" || { cat "$TMP/out"; fail "output lacks '$1'"; }; }
lacks() { ! grep -q -- "$1" "$TMP/out" || { cat "$TMP/out"; fail "output has '$1'"; }; }

# The TIR text of a workload as a JSON string body, and its hash.
tir_json() {
  awk 'BEGIN { ORS = "" } !/^#/ { gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); print $0 "\\n" }' "$1"
}
"$T" show --workload "matmul M=16 N=8 K=4" >"$TMP/mm.tir" || fail "show mm"
"$T" show --workload "softmax N=4 D=8" >"$TMP/sm.tir" || fail "show softmax"
H1=$(sed -n 's/^# hash: //p' "$TMP/mm.tir")
H2=$(sed -n 's/^# hash: //p' "$TMP/sm.tir")
[ ${#H1} = 32 ] && [ ${#H2} = 32 ] || fail "no hashes"

SKX="llvm -mcpu=skylake-avx512 -num-cores=2"
C="\"created\":\"2025-01-01T00:00:00.000Z\""
rec() { # workload target job trial status median run_secs worker trace [measure]
  M=""; [ $# -ge 10 ] && M="\"measure\":${10},"
  printf "%s\n" "{\"type\":\"record\",\"workload\":$1,\"target\":$2,\"job\":$3,\"trial\":$4,\"status\":\"$5\",\"run_secs\":$7,\"median_s\":$6,\"error\":\"\",\"worker\":\"$8\",\"tessera\":\"0.1.0\",$C,$M\"trace\":$9}"
}
# how a record was measured: nested, as a string holding the JSON, null
HOW='{"number":1,"repeat":3,"min_repeat_ms":10,"warmup":0,"flush_cache":false,"threads":2,"timeout_ms":2000,"cpus":"0-1"}'
HOW_TEXT='"{ \"threads\": 1, \"cpus\": \"0,2-3\" }"'
{
  printf "%s\n" '{"format":"tessera-db","format_version":1,"schema_version":1,"tessera":"0.1.0"}'
  printf "%s\n" "{\"type\":\"target\",\"id\":1,\"target\":\"$SKX\",\"probe\":null,\"probed\":null,$C}"
  printf "%s\n" "{\"type\":\"target\",\"id\":2,\"target\":\"cuda -arch=sm_80\",\"probe\":null,\"probed\":null,$C}"
  printf "%s\n" "{\"type\":\"workload\",\"id\":1,\"hash\":\"$H1\",\"name\":\"mm_small\",\"flops\":1024,$C,\"tir\":\"$(tir_json "$TMP/mm.tir")\"}"
  printf "%s\n" "{\"type\":\"workload\",\"id\":2,\"hash\":\"$H2\",\"name\":\"softmax_small\",\"flops\":160,$C,\"tir\":\"$(tir_json "$TMP/sm.tir")\"}"
  printf "%s\n" "{\"type\":\"job\",\"id\":1,\"name\":\"nightly\",\"config\":{\"trials\":8},\"state\":\"finished\",\"started\":\"2025-01-01T00:00:00.000Z\",\"finished\":\"2025-01-01T01:00:00.000Z\",\"trials_budget\":8,\"trials_done\":5}"
  rec 1 1 1 0 ok 4e-06 '[4e-06]' w0 '{"version":1,"insts":[],"decisions":[[0,4]]}' null
  rec 1 1 1 1 ok 2e-06 '[2e-06,3e-06,1e-06]' w0 '{"version":1,"insts":[],"decisions":[[0,8]]}' "$HOW"
  rec 1 1 1 2 wrong_result 1e-06 '[1e-06]' w1 '{"version":1,"insts":[],"decisions":[[0,16]]}' "$HOW_TEXT"
  rec 1 1 1 3 build_error null '[]' w1 '{"version":1,"insts":[],"decisions":[[0,32]]}'
  rec 1 2 1 4 timeout null '[]' gpu0 '{"version":1,"insts":[],"decisions":[[0,64]]}'
  rec 2 1 null null ok 5e-07 '[5e-07]' w0 '{"version":1,"insts":[{"kind":"vectorize"}],"decisions":[]}'
} >"$TMP/in.jsonl"

DB="$TMP/t.db"
expect 0 "$T" db import "$TMP/in.jsonl" --db "$DB"
contains "imported 6 records"; contains "workloads 2 new"; contains "targets 2 new"; contains "jobs 1 new"

# list: workloads x targets with best latency and GFLOP/s (1024 flop / 2 us)
expect 0 "$T" db list --db "$DB"
contains "mm_small"; contains "softmax_small"; contains "llvm -mcpu=skylake-avx512 -num-cores=2"
contains "2.000"; contains "0.51"; contains "0.32"
lacks "-mattr"
expect 0 "$T" db list --db "$DB" --json
contains '"workload":	"mm_small"'; contains '"best_seconds":	2e-06'
contains '"target":	"llvm -mcpu=skylake-avx512'

# best: the fastest ok record's trace (not the faster wrong_result), by name,
# hash, hash prefix, spec or the function itself
BEST='{"version":1,"insts":[],"decisions":[[0,8]]}'
for key in mm_small "$H1" "$(echo "$H1" | cut -c1-8)" "matmul M=16 N=8 K=4"; do
  expect 0 "$T" db best "$key" --target "$SKX" --db "$DB"
  [ "$(cat "$TMP/out")" = "$BEST" ] || { cat "$TMP/out"; fail "best $key"; }
done
expect 0 "$T" db best --workload "matmul M=16 N=8 K=4" --target "$SKX" --db "$DB"
[ "$(cat "$TMP/out")" = "$BEST" ] || fail "best --workload"
expect 0 "$T" db best --tir "$TMP/mm.tir" --target "$SKX" --db "$DB"
[ "$(cat "$TMP/out")" = "$BEST" ] || fail "best --tir"
expect 1 "$T" db best mm_small --target "cuda -arch=sm_80" --db "$DB"; contains "no ok record"
expect 1 "$T" db best mm_small --target "cuda -arch=sm_90" --db "$DB"; contains "no records for target"
expect 1 "$T" db best nosuch --target "$SKX" --db "$DB"; contains "no workload matches 'nosuch'"
expect 1 "$T" db best --workload "matmul M=2 N=2 K=2" --target "$SKX" --db "$DB"; contains "no workload with hash"
expect 1 "$T" db best mm_small --target "lvm" --db "$DB"; contains "bad target 'lvm'"
# without --target: this machine, which has no records here
expect 1 "$T" db best mm_small --db "$DB"; contains "no records for target"
expect 2 "$T" db best --target "$SKX" --db "$DB"; contains "name exactly one workload"

# show: TIR, best trace (readable), newest records
expect 0 "$T" db show mm_small --db "$DB"
contains "hash      $H1"; contains "func "; contains "# target \[1\] llvm -mcpu=skylake-avx512"
contains "best: 2.000 us, 0.51 GFLOP/s"; contains '"decisions": \[\[0, 8\]\]'
contains "#   measured: $HOW"
contains "newest records"; contains "wrong_result"; contains "timeout"; contains "1#4"
# a best record without a measurement context prints no such line
expect 0 "$T" db show softmax_small --db "$DB"; contains "best: 0.500 us"; lacks "measured:"
expect 0 "$T" db show mm_small --last 0 --db "$DB"; lacks "newest records"
expect 0 "$T" db show mm_small --last 3 --db "$DB" --json
contains "\"hash\":	\"$H1\""; contains '"seconds":	2e-06'; contains '"decisions":	\[\[0, 8\]\]'
contains '"status":	"wrong_result"'
contains '"measure":	{'; contains '"cpus":	"0-1"'; contains '"timeout_ms":	2000'
expect 0 "$T" db show softmax_small --db "$DB" --json; contains '"measure":	null'

# stats
expect 0 "$T" db stats --db "$DB"
contains "records    6"; contains "ok             3"; contains "wrong_result   1"
contains "nightly"; contains "trials 5 / 8, 5 records kept"; contains "schema version 7"
expect 0 "$T" db stats --db "$DB" --json
contains '"records":	6'; contains '"wrong_result":	1'; contains '"name":	"nightly"'
contains '"trials_done":	5'; contains '"schema_version":	7'
expect 0 "$T" db migrate --db "$DB"; contains "schema version 7"
expect 0 "$T" db migrate --db "$DB" --json; contains '"schema_version":	7'

# export -> import into an empty database -> export: identical bytes
mkfifo "$TMP/fifo"
expect 2 "$T" db export --db "$DB" -o "$TMP/fifo"
grep -q "not a regular file" "$TMP/out" || fail "export onto a fifo: no message"
[ -p "$TMP/fifo" ] || fail "export replaced the fifo"
expect 0 "$T" db export --db "$DB" -o "$TMP/a.jsonl"
[ -s "$TMP/a.jsonl" ] || fail "empty export"
[ ! -e "$TMP/a.jsonl.part" ] || fail "export left a partial file"
expect 0 "$T" db import "$TMP/a.jsonl" --db "$TMP/b.db"
expect 0 "$T" db export --db "$TMP/b.db" -o "$TMP/b.jsonl"
cmp "$TMP/a.jsonl" "$TMP/b.jsonl" || fail "export -> import -> export differs"
# the measurement context: nested when compact, else a string, else null
grep -q -F "\"created\":\"2025-01-01T00:00:00.000Z\",\"measure\":$HOW,\"trace\":" "$TMP/a.jsonl" || fail "export: no nested measure"
grep -q -F "\"measure\":$HOW_TEXT,\"trace\":" "$TMP/a.jsonl" || fail "export: no measure string"
[ "$(grep -c '"measure":null,"trace":' "$TMP/a.jsonl")" = 4 ] || fail "export: records without measure"
# an invalid measure in an import: line and field named
sed 's/"measure":null,/"measure":[1],/' "$TMP/in.jsonl" >"$TMP/badm.jsonl"
expect 1 "$T" db import "$TMP/badm.jsonl" --db "$TMP/e.db"
contains 'badm.jsonl:7: field "measure" is not a JSON object'
"$T" db export --db "$TMP/b.db" >"$TMP/c.jsonl" || fail "export to stdout"
cmp "$TMP/a.jsonl" "$TMP/c.jsonl" || fail "stdout export differs"
expect 0 sh -c "'$T' db import - --db '$TMP/d.db' <'$TMP/a.jsonl'"; contains "from <stdin>"
expect 0 "$T" db import "$TMP/a.jsonl" --db "$TMP/d.db" --json
contains '"records":	0'; contains '"records_existing":	6'; contains '"from":'

# a corrupt trace in an import: line and field named, database unchanged
cp "$TMP/in.jsonl" "$TMP/bad.jsonl"
printf "%s\n" "$(rec 1 1 null null ok 1e-06 '[1e-06]' w0 '"{\"version\":1,\"insts\":["')" >>"$TMP/bad.jsonl"
"$T" db export --db "$DB" >"$TMP/before.jsonl"
expect 1 "$T" db import "$TMP/bad.jsonl" --db "$DB"
contains "bad.jsonl:13: field \"trace\": trace JSON is corrupt"; contains "nothing was added"
"$T" db export --db "$DB" >"$TMP/after.jsonl"
cmp "$TMP/before.jsonl" "$TMP/after.jsonl" || fail "a failed import changed the database"
expect 1 "$T" db import "$TMP/nonexistent.jsonl" --db "$DB"; contains "nonexistent.jsonl"

# prune: keep the best of each workload x target, drop failures
expect 0 "$T" db prune --keep 1 --db "$DB"; contains "deleted 4 records"
expect 0 "$T" db stats --db "$DB"; contains "records    2"
expect 0 "$T" db best mm_small --target "$SKX" --db "$DB"
[ "$(cat "$TMP/out")" = "$BEST" ] || fail "best after prune"
expect 0 "$T" db prune --keep 1 --keep-failed --vacuum --db "$DB"; contains "deleted 0 records"; contains "vacuumed"
expect 0 "$T" db prune --keep 1 --db "$DB" --json; contains '"deleted":	0'; contains '"vacuumed":	false'
expect 2 "$T" db prune --db "$DB"; contains "--keep K is required"
expect 2 "$T" db prune --keep 0 --db "$DB"; contains "--keep wants a number >= 1"

# bad files: exit 1, the problem named, the file untouched, nothing created
printf 'not a database\n' >"$TMP/notes.db"
cp "$TMP/notes.db" "$TMP/notes.orig"
expect 1 "$T" db list --db "$TMP/notes.db"; contains "not an SQLite file"
cmp "$TMP/notes.db" "$TMP/notes.orig" || fail "a refused file changed"
[ ! -e "$TMP/notes.db-wal" ] || fail "a refused file got a WAL"
head -c 5000 "$TMP/b.db" >"$TMP/cut.db"
cp "$TMP/cut.db" "$TMP/cut.orig"
expect 1 "$T" db stats --db "$TMP/cut.db"; contains "truncated database"
cmp "$TMP/cut.db" "$TMP/cut.orig" || fail "a truncated file changed"
expect 1 "$T" db list --db "$TMP/missing.db"; contains "no such database"
[ ! -e "$TMP/missing.db" ] || fail "list created a database"

# sync: a target's records into another database, once
expect 0 "$T" db sync --from "$DB" --to "$TMP/copy.db" --target "$SKX"
contains "records copied (0 already there)"
expect 0 "$T" db sync --from "$DB" --to "$TMP/copy.db" --target "$SKX"
contains " 0 records copied"
expect 0 "$T" db sync --from "$DB" --to "$TMP/copy.db" --target "$SKX" --json
contains '"records":	0'; contains '"target":'
expect 0 "$T" db best mm_small --target "$SKX" --db "$TMP/copy.db"
expect 0 "$T" db show mm_small --db "$TMP/copy.db"; contains "#   measured: $HOW"
expect 1 "$T" db sync --from "$TMP/missing.db" --to "$TMP/copy.db"
contains "cannot open the source database"; contains "no such database"
[ ! -e "$TMP/missing.db" ] || fail "sync created its source"
expect 2 "$T" db sync --from "$DB"; contains "sync needs --from DB and --to DB"
expect 2 "$T" db sync --from "$DB" --to "$DB"; contains "the same database"
# a server that is not there: the server named, the password not
expect 1 "$T" db stats --db "postgresql://tuner:pw-secret@127.0.0.1:1/tuning"
contains "cannot connect to the server"; contains "tuner:\*\*\*@127.0.0.1:1"
lacks "pw-secret"
expect 2 "$T" db bench --db "$DB"; contains "--db takes a postgresql:// URL"

# confirm: a small job's top schedules measured again on this host; the
# confirmed figure is what `db list` and `db best` report afterwards
J="$TMP/job.db"
expect 0 "$T" tune --workload "matmul M=32 N=32 K=32" --trials 6 --db "$J" --job j --quiet --no-summary-measure
# every record the tuner committed says how it was measured, on which CPUs
"$T" db export --db "$J" | grep '"type":"record"' >"$TMP/jrecs" || fail "export of the job"
[ "$(wc -l <"$TMP/jrecs")" = 6 ] || fail "the job has $(wc -l <"$TMP/jrecs") records"
CTX='"measure":\{"number":1,"repeat":3,"min_repeat_ms":10,"warmup":0,"flush_cache":false,"threads":[1-9][0-9]*,"timeout_ms":[1-9][0-9]*,"cpus":'
[ "$(grep -c -E "$CTX(\"[0-9][0-9,-]*\"|null)\},\"trace\":" "$TMP/jrecs")" = 6 ] \
  || { cat "$TMP/jrecs"; fail "tuner records lack their measurement context"; }
# a measured (ok) record names the CPUs of its measuring process
grep '"status":"ok"' "$TMP/jrecs" | grep -q -E "$CTX\"[0-9][0-9,-]*\"\}" \
  || { cat "$TMP/jrecs"; fail "an ok tuner record without its CPU set"; }
expect 0 "$T" db confirm --db "$J" --top 3 --rounds 3
contains "matmul_32x32x32_float32"; contains "re-run (us)"; contains " record"
# the vendor libraries ran in the same rounds (the job stored the spec)
NC=$(nproc)
contains "onednn, $NC thread"; contains "side by side (median of the rounds' onednn / tessera)"
# records are filed under their thread count: --threads picks the host's
# target of that count, and refuses a target measured on another
expect 0 "$T" db confirm --db "$J" --threads $((NC + 1))
contains "no ok record on target"; contains "num-cores=$((NC + 1))"
contains "ok records are on target"; contains "num-cores=$NC'"
expect 2 "$T" db confirm --db "$J" --target "llvm -num-cores=$NC" --threads $((NC + 1))
contains "not measured on another"
expect 0 "$T" db confirm matmul_32x32x32_float32 --db "$J" --top 2 --rounds 2 --json
contains '"candidates": '; contains '"best_seconds": '; contains '"search_best_confirmed_seconds": '
contains '"vendors": '; contains '{"vendor": "openblas", "threads": 2, "seconds": '
contains '{"vendor": "onednn", "threads": 2, "seconds": '; contains '"side_ratio": '
"$T" db export --db "$J" >"$TMP/jexp" || fail "export after confirm"
grep -q '"type":"baseline".*"vendor":"onednn","threads":2,.*"side_ratio":[0-9.e-]*,"side_rounds":2}' "$TMP/jexp" \
  || fail "the confirmation's oneDNN level is not stored side by side"
# the report's headline says it is the confirmed figure, and the vendor
# ratio the side-by-side one
expect 0 "$T" report --db "$J" -o "$TMP/confirmed.html"
grep -q "confirmed: median of 2 interleaved rounds" "$TMP/confirmed.html" || fail "report: no confirmed headline"
grep -q "<strong>side by side</strong> (median of 2 interleaved rounds of the confirmation" "$TMP/confirmed.html" \
  || fail "report: the vendor ratio is not the side-by-side one"
if grep -q "search-time figure, not confirmed" "$TMP/confirmed.html"; then fail "report: a confirmed best called search-time"; fi
expect 0 "$T" db confirm --db "$DB"; contains "no ok record on target"
expect 1 "$T" db confirm nosuch --db "$J"; contains "no workload matches 'nosuch'"
expect 2 "$T" db confirm --db "$J" --rounds 0; contains "--rounds wants a number >= 1"

# usage
expect 2 "$T" db; contains "usage: tessera db"
expect 0 "$T" db --help; contains "usage: tessera db"
expect 0 "$T" db list --help; contains "usage: tessera db list"; lacks "prune --keep"; contains "--db PATH"
expect 0 "$T" db confirm --help; contains "usage: tessera db confirm"; contains "interleaved rounds"; lacks "usage: tessera db <command>"
expect 2 "$T" db frobnicate; contains "unknown command 'frobnicate'"
expect 2 "$T" db list --bogus; contains "unknown option '--bogus'"
expect 2 "$T" db list extra; contains "unexpected argument 'extra'"
expect 2 "$T" db list --db; contains "--db needs a path"
expect 2 "$T" db bench --records x; contains "--records wants a number"

# a small benchmark run, JSON keys as documented
expect 0 "$T" db bench --records 400 --workloads 8 --queries 50 --json
contains '"records": 400'; contains '"median_us": '; contains '"p99_us": '
echo "db_cli: all checks passed"
