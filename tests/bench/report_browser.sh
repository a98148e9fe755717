#!/bin/sh
# report_browser.sh TESSERA — the `tessera report` page as a browser shows
# it: a small database is imported from a JSON Lines file made here (two
# workloads, a probed target with FMA peaks per vector width and copy/triad
# bandwidths, a target never probed, vendor baselines of onednn and naive),
# the report is written and headless Chromium renders it. Checks: the page
# asks for nothing outside itself (no src=, <link>, url(), scripts, no file
# loaded but the page); Chromium logs no console message (the page has no
# scripts, so any message is an error; that Chromium's console messages do
# reach the log is checked first on a page that logs one); the screenshot is
# a 1200x2000 PNG that is not blank and shows the roofline's vendor points
# in their palette colours (decoded in pure Python: zlib and the PNG
# filters); the parsed DOM holds the roofline charts and their points.
# Without chromium the test is skipped (exit 77) and says so.
set -u
T="$1"
case "$T" in /*) ;; *) T="$PWD/$T" ;; esac
fail() { echo "FAIL: $*"; exit 1; }

CHROMIUM=""
for c in chromium chromium-browser; do
  if command -v "$c" >/dev/null 2>&1; then CHROMIUM=$(command -v "$c"); break; fi
done
if [ -z "$CHROMIUM" ]; then
  echo "SKIP: chromium is not installed (Debian package 'chromium'; scripts/install-deps.sh installs it)"
  exit 77
fi
command -v python3 >/dev/null 2>&1 || fail "python3 is needed to read the screenshot"

TMP=$(mktemp -d)
trap '[ -n "${KEEP:-}" ] || rm -rf "$TMP"' EXIT

# chromium URL [ARGS...]: headless Chromium on URL with its log on stderr
# (--v=1: console messages and each file it loads); stdout and stderr are
# kept in $TMP/chromium.out and $TMP/chromium.log.
chromium() {
  url=$1; shift
  timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu \
    --disable-dev-shm-usage --no-first-run --hide-scrollbars \
    --user-data-dir="$TMP/profile" --enable-logging=stderr --v=1 \
    "$@" "$url" >"$TMP/chromium.out" 2>"$TMP/chromium.log"
}
# console_messages: the console lines of the last run's log.
console_messages() { grep ':CONSOLE' "$TMP/chromium.log"; }

# The log carries console messages on this Chromium: a page that logs an
# error shows up, or the check below would prove nothing.
printf '%s\n' '<!DOCTYPE html><title>c</title><script>console.error("probe-console-error")</script>' >"$TMP/console.html"
chromium "file://$TMP/console.html" --dump-dom || fail "chromium did not run: $(tail -5 "$TMP/chromium.log")"
console_messages | grep -q "probe-console-error" ||
  fail "chromium's log does not show console messages (--enable-logging=stderr): cannot check the report for errors"

# ---- the database ----
tir_json() {
  awk 'BEGIN { ORS = "" } !/^#/ { gsub(/\\/, "\\\\"); gsub(/"/, "\\\""); print $0 "\\n" }' "$1"
}
"$T" show --workload "matmul M=64 N=64 K=64" >"$TMP/mm.tir" || fail "show mm"
"$T" show --workload "softmax N=64 D=64" >"$TMP/sm.tir" || fail "show softmax"
H1=$(sed -n 's/^# hash: //p' "$TMP/mm.tir")
H2=$(sed -n 's/^# hash: //p' "$TMP/sm.tir")
F1=$(sed -n 's/^# flops: //p' "$TMP/mm.tir")
F2=$(sed -n 's/^# flops: //p' "$TMP/sm.tir")
A="llvm -mcpu=skylake-avx512 -num-cores=3"
B="llvm -mcpu=skylake-avx512 -num-cores=5"
C="\"created\":\"2025-01-01T00:00:00.000Z\""
TR='{"version":1,"instructions":[{"kind":"get_block","inputs":[],"attrs":["C"],"outputs":["b0"]},{"kind":"get_loops","inputs":["b0"],"attrs":[],"outputs":["l1","l2","l3"]},{"kind":"split","inputs":["l1",null,4],"attrs":[],"outputs":["l4","l5"]}],"decisions":[]}'
TS='{"version":1,"instructions":[],"decisions":[]}'
rec() { # workload target status median trace
  printf "%s\n" "{\"type\":\"record\",\"workload\":$1,\"target\":$2,\"job\":null,\"trial\":null,\"status\":\"$3\",\"run_secs\":[$4],\"median_s\":$4,\"error\":\"\",\"worker\":\"w0\",\"tessera\":\"0.1.0\",$C,\"trace\":$5}"
}
base() { # workload vendor threads gflops
  printf "%s\n" "{\"type\":\"baseline\",\"workload\":$1,\"target\":1,\"vendor\":\"$2\",\"threads\":$3,\"gflops\":$4,$C}"
}
PROBE='{"fp32_gflops_per_core":40,"fp32_gflops_all_cores":120,"fp32_gflops_per_core_512":40,"fp32_gflops_all_cores_512":120,"fp32_gflops_per_core_256":22,"fp32_gflops_all_cores_256":66,"mem_copy_gbs":18,"mem_triad_gbs":21,"mem_bandwidth_gbs":21}'
{
  printf "%s\n" '{"format":"tessera-db","format_version":1,"schema_version":2,"tessera":"0.1.0"}'
  printf "%s\n" "{\"type\":\"target\",\"id\":1,\"target\":\"$A\",\"probe\":$PROBE,\"probed\":\"2025-01-01T00:00:00.000Z\",$C}"
  printf "%s\n" "{\"type\":\"target\",\"id\":2,\"target\":\"$B\",\"probe\":null,\"probed\":null,$C}"
  printf "%s\n" "{\"type\":\"workload\",\"id\":1,\"hash\":\"$H1\",\"name\":\"matmul_64\",\"flops\":$F1,$C,\"tir\":\"$(tir_json "$TMP/mm.tir")\"}"
  printf "%s\n" "{\"type\":\"workload\",\"id\":2,\"hash\":\"$H2\",\"name\":\"softmax_64\",\"flops\":$F2,$C,\"tir\":\"$(tir_json "$TMP/sm.tir")\"}"
  for s in 4e-05 2e-05 1.5e-05 3e-05 1.2e-05 2.5e-05 1.1e-05; do rec 1 1 ok "$s" "$TR"; done
  rec 1 2 ok 2e-05 "$TR"
  for s in 3e-06 2e-06 4e-06 1.8e-06; do rec 2 1 ok "$s" "$TS"; done
  base 1 onednn 3 60
  base 1 naive 3 8
  base 2 onednn 3 2.5
  base 2 naive 3 1.2
} >"$TMP/in.jsonl"
DB="$TMP/t.db"
"$T" db import "$TMP/in.jsonl" --db "$DB" >"$TMP/import.out" 2>&1 ||
  { cat "$TMP/import.out"; fail "db import"; }
"$T" report --db "$DB" -o "$TMP/report.html" >"$TMP/report.out" 2>&1 ||
  { cat "$TMP/report.out"; fail "tessera report"; }
[ "$(grep -c '<svg class="chart roofline"' "$TMP/report.html")" = 2 ] || fail "two rooflines in the page"

# ---- self-contained: nothing to load ----
! grep -Eiq '<script|<link|<img|<iframe|<object| src=|url\(|@import' "$TMP/report.html" ||
  fail "the page refers to something outside itself: $(grep -Eio '<script|<link|<img|<iframe|<object| src=[^ ]*|url\([^)]*\)|@import' "$TMP/report.html" | head -3)"
! grep -Eo '(href|xlink:href)="[^"#][^"]*"' "$TMP/report.html" | grep -q . ||
  fail "a link out of the page: $(grep -Eo '(href|xlink:href)="[^"#][^"]*"' "$TMP/report.html" | head -3)"

# ---- the screenshot; no console message ----
chromium "file://$TMP/report.html" --screenshot="$TMP/shot.png" --window-size=1200,2000 ||
  fail "chromium --screenshot failed: $(tail -5 "$TMP/chromium.log")"
if console_messages >/dev/null; then
  console_messages
  fail "console messages while rendering the report"
fi
# every file Chromium loaded is the page itself (its --v=1 log names them)
loads=$(sed -n 's/.*FileURLLoader::Start: //p' "$TMP/chromium.log" | sort -u)
[ -z "$loads" ] || [ "$loads" = "file://$TMP/report.html" ] ||
  fail "chromium loaded more than the page: $loads"
[ -s "$TMP/shot.png" ] || fail "no screenshot"
python3 - "$TMP/shot.png" <<'PY' || fail "the screenshot"
import struct, sys, zlib

def decode(path):
    """Width, height, bytes per pixel and the unfiltered rows of a PNG
    (8-bit grey, RGB, grey+alpha or RGBA, not interlaced)."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat = 8, []
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            assert depth == 8 and interlace == 0 and ctype in (0, 2, 4, 6), body
        elif kind == b"IDAT":
            idat.append(body)
        pos += 12 + n
    raw = zlib.decompress(b"".join(idat))
    bpp = {0: 1, 2: 3, 4: 2, 6: 4}[ctype]
    stride = w * bpp
    assert len(raw) == (stride + 1) * h, "truncated image data"
    prev, rows = bytearray(stride), []
    for y in range(h):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        if f == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif f == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif f == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif f == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b, c = prev[i], prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else b if pb <= pc else c
                line[i] = (line[i] + pred) & 255
        else:
            assert f == 0, "bad filter %d" % f
        rows.append(bytes(line))
        prev = line
    return w, h, bpp, rows

w, h, bpp, rows = decode(sys.argv[1])
assert (w, h) == (1200, 2000), (w, h)
counts = {}
for row in rows:
    for x in range(0, w * bpp, bpp):
        px = row[x:x + 3] if bpp >= 3 else row[x:x + 1] * 3
        counts[px] = counts.get(px, 0) + 1
background = max(counts, key=counts.get)
others = w * h - counts[background]
print("screenshot: %d colours, %.1f%% of the pixels not the background"
      % (len(counts), 100.0 * others / (w * h)))
assert len(counts) > 16, "the screenshot is (almost) one colour"
assert others > 0.02 * w * h, "the screenshot is almost blank"
# the roofline's vendor points, in the fixed palette: onednn, naive
for name, rgb in (("onednn", (0x82, 0x50, 0xdf)), ("naive", (0x1a, 0x7f, 0x37))):
    n = counts.get(bytes(rgb), 0)
    assert n >= 40, "the %s points are not drawn (%d pixels of their colour)" % (name, n)
PY

# ---- the DOM Chromium parsed ----
chromium "file://$TMP/report.html" --dump-dom || fail "chromium --dump-dom failed"
if console_messages >/dev/null; then console_messages; fail "console messages in --dump-dom"; fi
DOM="$TMP/chromium.out"
[ "$(grep -o '<svg class="chart roofline"' "$DOM" | wc -l)" = 2 ] || fail "the DOM lacks the two rooflines"
# on the probed target 2 tessera and 4 vendor points, 1 tessera point on the other
[ "$(grep -o '<circle class="pt"' "$DOM" | wc -l)" = 7 ] || fail "the DOM lacks roofline points"
[ "$(grep -o '<g class="roof compute">' "$DOM" | wc -l)" = 2 ] || fail "the DOM lacks the compute roofs"
[ "$(grep -o '<g class="roof memory">' "$DOM" | wc -l)" = 2 ] || fail "the DOM lacks the memory roofs"
grep -q '<details class="lowered">' "$DOM" || fail "the DOM lacks the lowered loops"
echo "report_browser: all checks passed"
