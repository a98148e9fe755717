#!/bin/sh
# Reruns the tuning measurements of docs/tuning.md#performance and prints
# them as one table: for each seed a 1000-trial search of the 1024³ fp32
# matmul (trials per minute, the trial reaching 90% of the final best), a
# 1000-trial search of the ResNet-50 3x3 conv2d, every best benchmarked next
# to oneDNN in interleaved series (median ratio), and 300-trial searches with
# the XGBoost and the random cost model compared side by side.
#
#   scripts/tuning-perf.sh [OUT_DIR]      (default perf/)
#
# Settings through the environment: SEEDS (default "1 2 3 4"), CMP_SEEDS
# (default "1 2 3 4 5 6 7 8"; empty: no model comparison), TRIALS (1000),
# CMP_TRIALS (300), SERIES (3), TESSERA (./build/tessera), SKIP_TUNE=1
# (benchmark existing databases only), TARGET (a target string for tuning and
# benchmarking, default this machine).
# The AVX2 figures on a wider machine: TARGET="llvm -mcpu=x86-64-v3" with
# ONEDNN_MAX_CPU_ISA=AVX2, which caps oneDNN to the same instructions.
# Runs are resumable: a finished job is not tuned again. Nothing else should
# run on the machine meanwhile; it takes about an hour on two cores.
set -e
OUT=${1:-perf}
SEEDS=${SEEDS:-"1 2 3 4"}
CMP_SEEDS=${CMP_SEEDS-"1 2 3 4 5 6 7 8"}
TRIALS=${TRIALS:-1000}
CMP_TRIALS=${CMP_TRIALS:-300}
SERIES=${SERIES:-3}
T=${TESSERA:-./build/tessera}
TARGET=${TARGET:-llvm}
MM="matmul M=1024 N=1024 K=1024"
CONV="conv2d_nhwc N=1 H=56 W=56 CI=64 CO=64 KH=3 KW=3 stride=1 pad=1 dtype=float32"
mkdir -p "$OUT"

# field NAME: the number after "NAME": in the JSON on stdin (first match)
field() { sed -n "s/.*\"$1\": \([-0-9.e+]*\).*/\1/p" | head -1; }

tune() { # name workload seed trials
  if [ -z "$SKIP_TUNE" ]; then
    "$T" tune --workload "$2" --trials "$4" --seed "$3" --db "$OUT/$1.db" \
      --target "$TARGET" \
      --job "$1" --log "$OUT/$1.jsonl" --json --quiet >"$OUT/$1.json"
  fi
}

for s in $SEEDS; do tune "mm-s$s" "$MM" "$s" "$TRIALS"; done
tune conv-s1 "$CONV" 1 "$TRIALS"

# Interleaved series: every database once per series, so load that drifts
# over the minutes hits them all alike.
: >"$OUT/bench.txt"
for r in $(seq "$SERIES"); do
  for s in $SEEDS; do
    "$T" bench --workload "$MM" --db "$OUT/mm-s$s.db" --target "$TARGET" \
      --threads 2 --json |
      { read -r j; echo "mm-s$s $(echo "$j" | field tessera_gflops) \
$(echo "$j" | field onednn_gflops)"; } >>"$OUT/bench.txt"
  done
  "$T" bench --workload "$CONV" --db "$OUT/conv-s1.db" --target "$TARGET" \
    --threads 2 --json |
    { read -r j; echo "conv-s1 $(echo "$j" | field tessera_gflops) \
$(echo "$j" | field onednn_gflops)"; } >>"$OUT/bench.txt"
done

for s in $CMP_SEEDS; do
  if [ -z "$SKIP_TUNE" ]; then
    "$T" tune --workload "$MM" --trials "$CMP_TRIALS" --seed "$s" \
      --target "$TARGET" \
      --compare-models --db "$OUT/cmp-s$s" --job "cmp-s$s" --json --quiet \
      >"$OUT/cmp-s$s.json"
  fi
done

median() { sort -n | awk '{v[NR] = $1} END {
  if (NR == 0) print "-"; else if (NR % 2) print v[(NR + 1) / 2];
  else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

echo "search          best GFLOP/s  trials/min  90%@  tessera/oneDNN (median; range)"
for name in $(for s in $SEEDS; do echo "mm-s$s"; done) conv-s1; do
  j=$(cat "$OUT/$name.json")
  ratios=$(awk -v n="$name" '$1 == n && $3 > 0 {printf "%.3f\n", $2 / $3}' \
    "$OUT/bench.txt")
  printf "%-15s %12s %11s %5s  %s (%s)\n" "$name" \
    "$(echo "$j" | field gflops)" "$(echo "$j" | field trials_per_minute)" \
    "$(echo "$j" | field trial_90pct)" "$(echo "$ratios" | median)" \
    "$(echo "$ratios" | sort -n | tr '\n' ' ' | sed 's/ $//')"
done
echo
echo "model comparison at $CMP_TRIALS trials  xgb  random  xgb/random side by side"
for s in $CMP_SEEDS; do
  j=$(cat "$OUT/cmp-s$s.json")
  printf "seed %-28s %6s %7s %8s\n" "$s" "$(echo "$j" | field xgb_gflops)" \
    "$(echo "$j" | field random_gflops)" \
    "$(echo "$j" | field ratio_side_by_side)"
done
