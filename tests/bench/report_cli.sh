#!/bin/sh
# report_cli.sh TESSERA — `tessera report` and `tessera show --db ... --best`
# through the real binary, on a database imported from a JSON Lines file
# made here (two workloads, two targets, a probed peak, a vendor baseline, a
# workload with only failures): the report file and its numbers, the
# roofline of each target (or the note naming `tessera probe`), the best
# schedule's lowered loops (the same text as `show --best --lowered`), stdout
# output, the workload filter, no partial file on failure; --json (parsed by
# python3, its numbers checked, its default file); the best record's
# header (latency, GFLOP/s, % of peak) and its TIR, trace, lowered program,
# LLVM IR and assembly; target choice; errors exit 1 with a message, usage
# errors exit 2.
set -u
T="$1"
case "$T" in /*) ;; *) T="$PWD/$T" ;; esac
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
in_report() { grep -q -- "$1" "$TMP/r.html" || fail "report lacks '$1'"; }

# The TIR text of a workload as a JSON string body.
tir_json() {
  awk 'BEGIN { ORS = "" } !/^#/ { gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); print $0 "\\n" }' "$1"
}
"$T" show --workload "matmul M=16 N=8 K=4" >"$TMP/mm.tir" || fail "show mm"
"$T" show --workload "softmax N=4 D=8" >"$TMP/sm.tir" || fail "show softmax"
H1=$(sed -n 's/^# hash: //p' "$TMP/mm.tir")
H2=$(sed -n 's/^# hash: //p' "$TMP/sm.tir")
[ ${#H1} = 32 ] && [ ${#H2} = 32 ] || fail "no hashes"

# Odd core counts: neither target can be this host.
A="llvm -mcpu=skylake-avx512 -num-cores=3"
B="llvm -mcpu=skylake-avx512 -num-cores=5"
C="\"created\":\"2025-01-01T00:00:00.000Z\""
# split the i loop of matmul by 4
TR='{"version":1,"instructions":[{"kind":"get_block","inputs":[],"attrs":["C"],"outputs":["b0"]},{"kind":"get_loops","inputs":["b0"],"attrs":[],"outputs":["l1","l2","l3"]},{"kind":"split","inputs":["l1",null,4],"attrs":[],"outputs":["l4","l5"]}],"decisions":[]}'
rec() { # workload target status median run_secs [job trial]
  printf "%s\n" "{\"type\":\"record\",\"workload\":$1,\"target\":$2,\"job\":${6:-null},\"trial\":${7:-null},\"status\":\"$3\",\"run_secs\":$5,\"median_s\":$4,\"error\":\"\",\"worker\":\"w0\",\"tessera\":\"0.1.0\",$C,\"trace\":$TR}"
}
{
  printf "%s\n" '{"format":"tessera-db","format_version":1,"schema_version":2,"tessera":"0.1.0"}'
  printf "%s\n" "{\"type\":\"target\",\"id\":1,\"target\":\"$A\",\"probe\":{\"fp32_gflops_all_cores\":2.048,\"mem_bandwidth_gbs\":100},\"probed\":\"2025-01-01T00:00:00.000Z\",$C}"
  printf "%s\n" "{\"type\":\"target\",\"id\":2,\"target\":\"$B\",\"probe\":null,\"probed\":null,$C}"
  printf "%s\n" "{\"type\":\"workload\",\"id\":1,\"hash\":\"$H1\",\"name\":\"mm_small\",\"flops\":1024,$C,\"tir\":\"$(tir_json "$TMP/mm.tir")\"}"
  printf "%s\n" "{\"type\":\"workload\",\"id\":2,\"hash\":\"$H2\",\"name\":\"softmax_small\",\"flops\":160,$C,\"tir\":\"$(tir_json "$TMP/sm.tir")\"}"
  printf "%s\n" "{\"type\":\"job\",\"id\":1,\"name\":\"nightly\",\"config\":{},\"state\":\"finished\",\"started\":\"2025-01-01T00:00:00.000Z\",\"finished\":\"2025-01-01T01:00:00.000Z\",\"trials_budget\":8,\"trials_done\":2}"
  rec 1 1 ok 2e-06 '[2e-06]' 1 0
  rec 1 1 ok 1e-06 '[1e-06,1e-06,2e-06]' 1 1
  rec 1 1 build_error null '[]'
  rec 1 2 ok 4e-06 '[4e-06]'
  rec 2 1 timeout null '[]'
  printf "%s\n" "{\"type\":\"baseline\",\"workload\":1,\"target\":1,\"vendor\":\"onednn\",\"threads\":3,\"gflops\":0.512,$C}"
} >"$TMP/in.jsonl"
DB="$TMP/t.db"
expect 0 "$T" db import "$TMP/in.jsonl" --db "$DB"

# ---- report ----
expect 0 "$T" report --help;  contains "usage: tessera report"
expect 2 "$T" report --bogus; contains "unknown option '--bogus'"
expect 2 "$T" report --points 3 --db "$DB"; contains "--points wants a number"
expect 2 "$T" report --db;    contains "--db needs a path"
expect 2 "$T" report --db -o "$TMP/r.html"; contains "--db needs a path"
mkdir "$TMP/outdir"
expect 2 "$T" report --db "$DB" -o "$TMP/outdir"; contains "not a regular file"
expect 1 "$T" report --db "$TMP/none.db" -o "$TMP/none.html"
contains "no such database"
[ ! -e "$TMP/none.db" ] && [ ! -e "$TMP/none.html" ] || fail "files made for a missing database"
expect 1 "$T" report --db "$DB" -o "$TMP/no/such/dir/r.html"; contains "cannot write"

expect 0 "$T" report --db "$DB" -o "$TMP/r.html" --title "runs <1>"
contains "r.html: 2 workloads, 3 workload x target pairs, 5 measurements"
[ -s "$TMP/r.html" ] && [ ! -e "$TMP/r.html.part" ] || fail "report file"
in_report "<title>runs &lt;1&gt;</title>"
in_report "<td class=\"num\">1 µs</td><td class=\"num\">1.02</td><td class=\"num peak\">50.0%</td>"
in_report "onednn 0.512 <span class=\"ratio\" title=\"two figures measured apart"
in_report "(×2.00, apart)</span>"
in_report "<td class=\"num\">3</td><td class=\"num\">2</td><td class=\"failed\">1 build_error</td>"
in_report "<td class=\"failed\">1 timeout</td>"
in_report "best schedule: record 2, job nightly trial 1, worker w0"
in_report "l4, l5 = split(loop=l1, factors=\[None, 4\])"
[ "$(grep -c '<svg class="chart curve"' "$TMP/r.html")" = 3 ] || fail "three curves"
! grep -q "<script" "$TMP/r.html" || fail "a script in the report"
# the rooflines: one per target; the probed one with its roofs and the
# matmul's best and vendor points, the other one saying how to probe it
[ "$(grep -c '<svg class="chart roofline"' "$TMP/r.html")" = 2 ] || fail "two rooflines"
in_report ">fp32 FMA 2.05 GFLOP/s</text>"
in_report ">memory 100 GB/s</text>"
in_report "<title>#1 mm_small: tessera 1.02 GFLOP/s at 1.14 FLOP/byte, % of the roofline: 50.0%</title>"
in_report "<title>#1 mm_small: onednn (3 threads) 0.512 GFLOP/s</title>"
in_report "Not probed: no roofs. Measure them on the machine of this target with <code>tessera probe --db "
# the lowered loops of the best schedule are what show --best --lowered prints
"$T" show --db "$DB" --workload mm_small --target "$A" --best --lowered |
  grep -v '^#' >"$TMP/lowered.show" || fail "show --lowered"
python3 - "$TMP/r.html" >"$TMP/lowered.report" <<'PY' || fail "no lowered loops in the report"
import html, re, sys
page = open(sys.argv[1], encoding="utf-8").read()
section = page[page.index('id="task-1"'):]
section = section[:section.index("</section>")]
m = re.search(r'<details class="lowered"><summary>lowered loops of the best '
              r'schedule \(\d+ lines\)</summary>\n<pre>(.*?)</pre>', section, re.S)
sys.stdout.write(html.unescape(m.group(1)))
PY
[ -s "$TMP/lowered.report" ] || fail "empty lowered loops"
cmp -s "$TMP/lowered.show" "$TMP/lowered.report" ||
  { diff "$TMP/lowered.show" "$TMP/lowered.report"; fail "lowered loops differ from show --lowered"; }

# ---- report --json ----
expect 0 "$T" report --db "$DB" --json -o "$TMP/r.json"
contains "r.json: 2 workloads, 3 workload x target pairs, 5 measurements"
[ ! -e "$TMP/r.json.part" ] || fail "partial JSON left"
python3 - "$TMP/r.json" <<'PY' || fail "the JSON report"
import json, sys
r = json.load(open(sys.argv[1], encoding="utf-8"))
assert r["format"] == "tessera-report" and r["format_version"] == 1, r
assert (r["workloads"], r["pairs"], r["records"]) == (2, 3, 5), r
rows = r["rows"]
assert [x["workload"] for x in rows] == ["mm_small", "mm_small", "softmax_small"]
mm = rows[0]
assert mm["target"].startswith("llvm -mcpu=skylake-avx512") and "num-cores=3" in mm["target"]
assert (mm["records"], mm["ok"], mm["failed"]) == (3, 2, {"build_error": 1}), mm
assert mm["best_record"] == 2 and mm["best_seconds"] == 1e-06 and not mm["confirmed"]
assert abs(mm["gflops"] - 1.024) < 1e-9 and abs(mm["peak_percent"] - 50) < 1e-9
assert abs(mm["roofline_percent"] - 50) < 1e-9 and mm["peak_source"] == "fp32_gflops_all_cores"
assert mm["bytes"] == 896 and abs(mm["intensity"] - 1024 / 896) < 1e-12
v = mm["vendors"]
assert len(v) == 1 and v[0]["vendor"] == "onednn" and v[0]["threads"] == 3
assert abs(v[0]["ratio"] - 2) < 1e-9
other = rows[1]
assert other["peak_percent"] is None and other["roofline_percent"] is None
assert other["vendors"] == [] and abs(other["gflops"] - 0.256) < 1e-9
sm = rows[2]
assert sm["best_seconds"] is None and sm["gflops"] is None and sm["failed"] == {"timeout": 1}
t = r["targets"]
assert len(t) == 2 and t[1]["probe"] is None
assert t[0]["roofs"]["compute"] == [{"label": "fp32 FMA", "key": "fp32_gflops_all_cores", "gflops": 2.048}]
assert t[0]["roofs"]["memory"][0]["gbs"] == 100
PY
expect 0 "$T" report --db "$DB" --json -o - --workload softmax_small
contains '"format":'; contains '"softmax_small"'; lacks "mm_small"; lacks "<svg"
(cd "$TMP" && "$T" report --db t.db --json >/dev/null) || fail "report --json"
python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$TMP/report.json" ||
  fail "report --json writes report.json by default"

expect 0 "$T" report --db "$DB" -o - --workload softmax_small
contains "<!DOCTYPE html>"; contains "1 workload, 1 workload x target pair,"
lacks "mm_small"; contains "no successful measurement"
# a workload may be named by its spec too (hashed)
expect 0 "$T" report --db "$DB" -o - --workload "softmax N=4 D=8"
contains "1 workload, 1 workload x target pair,"; lacks "mm_small"
expect 1 "$T" report --db "$DB" -o "$TMP/x.html" --workload nosuch
contains "nosuch"
[ ! -e "$TMP/x.html" ] && [ ! -e "$TMP/x.html.part" ] || fail "partial report left"

# ---- show --best ----
expect 0 "$T" show --db "$DB" --workload mm_small --target "$A" --best
contains "# workload: mm_small (hash $H1)"
contains "# record: 2, job nightly trial 1, measured 2025-01-01T00:00:00.000Z on w0"
contains "# latency: 1 µs (median of 3 runs)"
contains "# GFLOP/s: 1.024"
contains "# % of peak: 50.0% of 2.048 GFLOP/s (fp32_gflops_all_cores)"
contains "# % of roofline: 50.0%"
contains "func matmul"; contains "i_0 \* 4 + i_1"
expect 0 "$T" show --db "$DB" --workload mm_small --target "$A" --best --tir
contains "i_0 \* 4 + i_1"
expect 0 "$T" show --db "$DB" --workload mm_small --target "$A" --best --trace
contains "b0 = get_block(name=\"C\")"; contains "l4, l5 = split"; lacks "func matmul"
expect 0 "$T" show --db "$DB" --workload mm_small --target "$A" --best --lowered
contains "# latency: "; contains "func "; lacks "block C("
expect 0 "$T" show --db "$DB" --workload mm_small --target "$A" --best --llvm
contains "define "
expect 0 "$T" show --db "$DB" --workload mm_small --target "$A" --best --asm
contains "ret"
# the other target: no probe figures
expect 0 "$T" show --db "$DB" --workload mm_small --target "$B" --best
contains "# latency: 4 µs"; contains "# % of peak: unknown (target not probed"
# the workload found from a spec, a hash prefix, a TIR file
expect 0 "$T" show --db "$DB" --workload "matmul M=16 N=8 K=4" --target "$A" --best --trace
contains "# workload: mm_small"
P=$(printf "%s" "$H1" | cut -c1-8)
expect 0 "$T" show --db "$DB" --workload "$P" --target "$A" --best --trace
contains "# workload: mm_small"
expect 0 "$T" show --db "$DB" --tir "$TMP/mm.tir" --target "$A" --best --trace
contains "# workload: mm_small"
# the target: required when several have ok records; found when one does
expect 1 "$T" show --db "$DB" --workload mm_small --best
contains "ok records on 2 targets"; contains "num-cores=3"; contains "num-cores=5"
expect 1 "$T" show --db "$DB" --workload softmax_small --best
contains "no successful measurement"
expect 1 "$T" show --db "$DB" --workload softmax_small --target "$A" --best
contains "no ok record"
expect 1 "$T" show --db "$DB" --workload nosuch --best;  contains "nosuch"
expect 1 "$T" show --db "$DB" --workload "matmul M=2 N=2 K=2" --best
contains "nothing structurally equal"
expect 1 "$T" show --db "$TMP/none.db" --workload mm_small --best
contains "no such database"
# usage
expect 2 "$T" show --workload mm_small --best;  contains "--db and --best go together"
expect 2 "$T" show --db "$DB" --workload mm_small; contains "--db and --best go together"
printf "%s\n" "$TR" >"$TMP/tr.json"
expect 2 "$T" show --db "$DB" --workload mm_small --best --trace "$TMP/tr.json"
contains "does not apply"
expect 2 "$T" show --db "$DB" --workload mm_small --best --llvm --asm
contains "give one of"
expect 2 "$T" show --db "$DB" --best;  contains "exactly one of --workload or --tir"
expect 2 "$T" show --tir;              contains "--tir needs a file"
expect 2 "$T" show --workload "matmul M=2 N=2 K=2" --trace; contains "--trace needs a file"
echo "report_cli: all checks passed"
