#!/usr/bin/env bash
# Side-by-side single-thread throughput of `strata sim` and libCacheSim's
# `cachesim` on one oracleGeneral trace, alternating the two programs.
#
#   bench/sim_vs_libcachesim.sh CACHESIM STRATA TRACE SIZE_BYTES "lru fifo s3fifo" REPS
#
# CACHESIM is a cachesim binary you built yourself from libCacheSim (this
# script does not fetch or build it). Prints one markdown row per policy:
# miss ratios of both (they must agree) and the median wall-clock seconds and
# requests/s of each over REPS runs (each run reads the trace and simulates
# one cache of SIZE_BYTES bytes, absolute, so neither program pre-scans).
set -euo pipefail
cachesim=$1 strata=$2 trace=$3 size=$4 policies=$5 reps=${6:-3}
median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
now() { date +%s.%N; }
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
  printf '| %s | %s | %.4f | %.4f | %.2f s (%.1f M/s) | %.2f s (%.1f M/s) | %.2fx |\n' \
    "$(basename "$trace")" "$p" "$cmr" "$smr" "$c" "$(echo "$n / $c / 1000000" | bc -l)" \
    "$s" "$(echo "$n / $s / 1000000" | bc -l)" "$(echo "$c / $s" | bc -l)"
done
