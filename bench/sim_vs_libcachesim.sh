#!/usr/bin/env bash
# Side-by-side single-thread throughput of `strata sim` and libCacheSim's
# `cachesim` on one oracleGeneral trace, alternating the two programs; and
# the exact miss-ratio curve's time against one LRU run.
#
#   bench/sim_vs_libcachesim.sh CACHESIM STRATA TRACE SIZE_BYTES "lru fifo s3fifo" REPS
#   bench/sim_vs_libcachesim.sh mrc CACHESIM STRATA TRACE SIZE_BYTES WSS_BYTES REPS
#   bench/sim_vs_libcachesim.sh all CACHESIM STRATA DIR
#
# The third form runs every row of docs/benchmarks.md's simulator tables
# that exists in DIR: cloudPhysicsIO.oracleGeneral.bin (5 runs),
# tw10m.oracleGeneral.bin (5) and zipf100m.oracleGeneral.bin (3), the speed
# rows of lru/fifo/s3fifo and the MRC rows. Make the two large files first:
#   strata trace convert ../shared/traces/twitter_cluster52_10m.csv.zst DIR/tw10m.oracleGeneral.bin
#   cargo run --release -p strata-sim --example zipf -- DIR/zipf100m.oracleGeneral.bin 100000000 10000000 1.0
#
# CACHESIM is a cachesim binary you built yourself from libCacheSim (this
# script does not fetch or build it). The first form prints one markdown row
# per policy: miss ratios of both (they must agree) and the median wall-clock
# seconds and requests/s of each over REPS runs (each run reads the trace and
# simulates one cache of SIZE_BYTES bytes, absolute, so neither program
# pre-scans). The second form alternates four commands REPS times: cachesim
# LRU at SIZE_BYTES, `strata sim` LRU at SIZE_BYTES, the exact object-mode
# curve at every size (`strata mrc --objects`), and the exact byte-mode curve
# at 20 sizes, 1..20% of WSS_BYTES; it prints the median wall and user-CPU
# seconds of each and the curves' ratios to the Strata LRU run. Every line
# of output carries the load average at the end of its runs: on a shared
# machine, report it with the figures.
set -euo pipefail
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
now() { date +%s.%N; }
load() { cut -d' ' -f1-3 /proc/loadavg; }

if [ "${1:-}" = all ]; then
  cachesim=$2 strata=$3 dir=$4 self=$0
  echo "started $(date -u +%FT%TZ), load $(load), $(nproc) CPUs"
  # file, cache size (B), working set (B), reps
  while read -r f size wss reps; do
    [ -f "$dir/$f" ] || { echo "skipping $f (not in $dir)"; continue; }
    echo; echo "### $f: lru fifo s3fifo at $size B, $reps runs"
    "$self" "$cachesim" "$strata" "$dir/$f" "$size" "lru fifo s3fifo" "$reps"
    echo; echo "### $f: exact MRC vs one LRU run"
    "$self" mrc "$cachesim" "$strata" "$dir/$f" "$size" "$wss" "$reps"
  done <<'ROWS'
cloudPhysicsIO.oracleGeneral.bin 202976972 2029769728 5
tw10m.oracleGeneral.bin 17472257 174722570 5
zipf100m.oracleGeneral.bin 2147483648 15180733721 3
ROWS
  echo; echo "finished $(date -u +%FT%TZ), load $(load)"
  exit 0
fi

if [ "${1:-}" = mrc ]; then
  cachesim=$2 strata=$3 trace=$4 size=$5 wss=$6 reps=${7:-3}
  sizes=$(for i in $(seq 20); do printf '%s,' $((wss * i / 100)); done)
  sizes=${sizes%,}
  declare -A wall user
  names=(cachesim-lru strata-lru mrc-objects mrc-bytes20)
  timed() { # NAME CMD...: appends wall and user seconds
    local n=$1; shift
    local t tmp
    tmp=$(mktemp)
    /usr/bin/time -o "$tmp" -f '%e %U' "$@" >/dev/null 2>&1
    t=$(tail -1 "$tmp")
    rm -f "$tmp"
    wall[$n]+="${t% *} "; user[$n]+="${t#* } "
  }
  for _ in $(seq "$reps"); do
    timed cachesim-lru "$cachesim" "$trace" oracleGeneral lru "$size"
    timed strata-lru "$strata" sim "$trace" --format oracleGeneral --policy lru --size "$size" --threads 1 --json
    timed mrc-objects "$strata" mrc "$trace" --format oracleGeneral --objects --csv
    timed mrc-bytes20 "$strata" mrc "$trace" --format oracleGeneral --size "$sizes" --csv
  done
  lw=$(tr ' ' '\n' <<<"${wall[strata-lru]}" | grep . | median)
  lu=$(tr ' ' '\n' <<<"${user[strata-lru]}" | grep . | median)
  echo "| command | median wall | median user CPU | wall / strata LRU | CPU / strata LRU | wall runs |"
  echo "|---|---|---|---|---|---|"
  for n in "${names[@]}"; do
    w=$(tr ' ' '\n' <<<"${wall[$n]}" | grep . | median)
    u=$(tr ' ' '\n' <<<"${user[$n]}" | grep . | median)
    ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else printf "-" }'; }
    printf '| %s | %.2f s | %.2f s | %s | %s | %s|\n' "$n" "$w" "$u" \
      "$(ratio "$w" "$lw")" "$(ratio "$u" "$lu")" "${wall[$n]}"
  done
  echo "load average after the runs: $(load)"
  exit 0
fi

cachesim=$1 strata=$2 trace=$3 size=$4 policies=$5 reps=${6:-3}
for p in $policies; do
  ct=() st=() cmr="" smr="" n=""
  for _ in $(seq "$reps"); do
    t0=$(now)
    out=$("$cachesim" "$trace" oracleGeneral "$p" "$size" 2>/dev/null | grep -i "miss ratio" | tail -1)
    t1=$(now)
    cmr=$(sed -E 's/.*miss ratio ([0-9.]+).*/\1/' <<<"$out")
    n=$(sed -E 's/.* ([0-9]+) req.*/\1/' <<<"$out")
    ct+=("$(echo "$t1 - $t0" | bc -l)")
    t0=$(now)
    out=$("$strata" sim "$trace" --format oracleGeneral --policy "$p" --size "$size" --threads 1 --json 2>/dev/null)
    t1=$(now)
    smr=$(sed -E 's/.*"miss_ratio":([0-9.]+).*/\1/' <<<"$out")
    st+=("$(echo "$t1 - $t0" | bc -l)")
  done
  c=$(printf '%s\n' "${ct[@]}" | median)
  s=$(printf '%s\n' "${st[@]}" | median)
  printf '| %s | %s | %.4f | %.4f | %.2f s (%.1f M/s) | %.2f s (%.1f M/s) | %.2fx | load %s |\n' \
    "$(basename "$trace")" "$p" "$cmr" "$smr" "$c" "$(echo "$n / $c / 1000000" | bc -l)" \
    "$s" "$(echo "$n / $s / 1000000" | bc -l)" "$(echo "$c / $s" | bc -l)" "$(load)"
done
