#!/usr/bin/env bash
# Read throughput of every trace reader (docs/benchmarks.md, "Trace readers").
#
#   bench/trace-readers.sh [TRACES_DIR] [WORK_DIR]
#
# Builds nothing but `strata` (release), converts the shared 10M-request
# Twitter trace to oracleGeneral and Strata's binary format in WORK_DIR, then
# reads each file several times with `strata trace bench` and prints the
# median pass: wall-clock and on-CPU records/s and MB/s (the CPU figure
# matters on a shared, loaded machine). Warm page cache: one untimed pass first.
# The 113,872-request CloudPhysics files are too small to time, so each is
# repeated 100 times into a valid file of the same format (11.4M requests).
#
# PEER=/path/to/prog: also time a libCacheSim reader loop on the same files
# (a program taking `FILE TYPE REPEAT` and printing `... wall W s cpu C s ...`
# per pass; docs/benchmarks.md says what was used). This script builds no peer.
set -euo pipefail
cd "$(dirname "$0")/.."
TRACES=${1:-../shared/traces}
WORK=${2:-$(mktemp -d)}
if [ -n "${STRATA_BIN:-}" ]; then
  BIN=$STRATA_BIN
else
  cargo build --release -p strata-cli >/dev/null
  BIN=${CARGO_TARGET_DIR:-target}/release/strata
fi

tw10m="$TRACES/twitter_cluster52_10m.csv.zst"
[ -f "$WORK/tw10m.oracleGeneral.bin" ] || "$BIN" trace convert "$tw10m" "$WORK/tw10m.oracleGeneral.bin"
[ -f "$WORK/tw10m.strace" ] || "$BIN" trace convert "$tw10m" "$WORK/tw10m.strace"
[ -f "$WORK/tw10m.csv" ] || zstd -q -d -c "$tw10m" > "$WORK/tw10m.csv"
cp="$TRACES/cloudPhysicsIO"
x100() { for _ in $(seq 100); do cat "$@"; done; }
[ -f "$WORK/cp100.oracleGeneral.bin" ] || x100 "$cp.oracleGeneral.bin" > "$WORK/cp100.oracleGeneral.bin"
[ -f "$WORK/cp100.vscsi" ] || x100 "$cp.vscsi" > "$WORK/cp100.vscsi"
# awk 1: the .txt has no final newline; without one the copies would merge.
[ -f "$WORK/cp100.txt" ] || for _ in $(seq 100); do awk 1 "$cp.txt"; done > "$WORK/cp100.txt"
[ -f "$WORK/cp100.csv" ] || { head -1 "$cp.csv"; for _ in $(seq 100); do tail -n +2 "$cp.csv"; done; } > "$WORK/cp100.csv"
# LCS: the same header with its request count (u64 at byte 24) times 100.
[ -f "$WORK/cp100.lcs" ] || { head -c 8192 "$cp.vscsi.lcs" | python3 -c '
import struct, sys
h = bytearray(sys.stdin.buffer.read())
h[24:32] = struct.pack("<q", struct.unpack_from("<q", h, 24)[0] * 100)
sys.stdout.buffer.write(h)'; for _ in $(seq 100); do tail -c +8193 "$cp.vscsi.lcs"; done; } > "$WORK/cp100.lcs"

run() { # file repeat
  "$BIN" trace bench "$1" --repeat 1 >/dev/null
  "$BIN" trace bench "$1" --repeat "$2" --json | python3 -c '
import json, os, sys, statistics as st
rows = [json.loads(l) for l in sys.stdin]
r = rows[0]
n = r["records"]
wall = st.median(x["seconds"] for x in rows)
cpu = st.median(x["cpu_seconds"] or float("nan") for x in rows)
size = os.path.getsize(r["file"])
name = os.path.basename(r["file"])
print("| %s | %s | %s | %.1f | %.1f | %.0f | %.1f | %.0f |" % (
    name, r["format"], format(n, ","), size / 1e6, n / wall / 1e6, size / wall / 1e6, n / cpu / 1e6, size / cpu / 1e6))
'
}

echo "| file | format | records | MB on disk | M rec/s (wall) | MB/s (wall) | M rec/s (CPU) | MB/s (CPU) |"
echo "|---|---|---|---|---|---|---|---|"
run "$WORK/tw10m.oracleGeneral.bin" 5
run "$WORK/tw10m.strace" 5
run "$tw10m" 3
run "$WORK/tw10m.csv" 3
run "$TRACES/twitter_cluster52.csv" 5
for f in cp100.oracleGeneral.bin cp100.lcs cp100.vscsi cp100.csv cp100.txt; do
  run "$WORK/$f" 5
done

if [ -n "${PEER:-}" ]; then
  echo
  echo "| file | peer reader | records | M rec/s (wall) | M rec/s (CPU) |"
  echo "|---|---|---|---|---|"
  peer() { # file type
    "$PEER" "$1" "$2" 1 >/dev/null 2>&1
    "$PEER" "$1" "$2" 5 2>/dev/null | python3 -c '
import re, sys, statistics as st, os
rows = [l for l in sys.stdin if " wall " in l]
n = int(re.search(r": (\d+) records", rows[0]).group(1))
w = st.median(float(re.search(r"wall ([0-9.]+) s", l).group(1)) for l in rows)
c = st.median(float(re.search(r"cpu ([0-9.]+) s", l).group(1)) for l in rows)
print("| %s | %s | %s | %.1f | %.1f |" % (os.path.basename(sys.argv[1]), sys.argv[2], format(n, ","), n / w / 1e6, n / c / 1e6))
' "$1" "$2"
  }
  peer "$WORK/tw10m.oracleGeneral.bin" oracleGeneral
  peer "$WORK/tw10m.csv" twcsv
  peer "$TRACES/twitter_cluster52.csv" twcsv
  peer "$WORK/cp100.oracleGeneral.bin" oracleGeneral
  peer "$WORK/cp100.vscsi" vscsi
  peer "$WORK/cp100.csv" cpcsv
  peer "$WORK/cp100.txt" txt
fi
