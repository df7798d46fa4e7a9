#!/usr/bin/env bash
# Memory per stored object: a SeaweedFS volume server vs Strata's segment
# store, same object count and sizes, one run on this machine.
#
#   bench/memory_vs_seaweedfs.sh WEED_BINARY [STRATA_BINARY]
#
# WEED_BINARY is a `weed` you built yourself (this script does not build
# it). SeaweedFS: a master and one volume server (in-memory needle map, its
# default `-index memory`), filled by SeaweedFS's own `weed benchmark
# -writeOnly` (objects of SIZE + 0..63 bytes); the volume server's RSS
# (/proc/PID/status VmRSS) and Go heap in use (its Prometheus
# `go_memstats_heap_inuse_bytes`, which includes garbage not yet collected)
# are read before the fill, after it, and after a restart of the volume
# server on the filled directory (the index at rest, loaded from its .idx
# files). Strata: `strata bench store` with the same count and size
# (its index's own accounting, `ram_bytes_per_object`, and the process's
# maximum RSS), then `strata store ls` on the kept directory under
# /usr/bin/time (the RSS of a process that only opened the store).
#
# Knobs (environment): N (10000000), SIZE (128), C (32 writers), ports
# MPORT (20333), VPORT (20080), METRICS (20091).
set -euo pipefail
WEED=${1:?usage: $0 WEED_BINARY [STRATA_BINARY]}
STRATA=${2:-target/release/strata}
N=${N:-10000000}
SIZE=${SIZE:-128}
C=${C:-32}
MPORT=${MPORT:-20333}
VPORT=${VPORT:-20080}
METRICS=${METRICS:-20091}
DUR=1
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
setup_work strata-mem-vs-weed
D="$WORK/data"
mkdir -p "$D/m" "$D/v"

rss_kib() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
heap_bytes() {
  curl -fsS "http://127.0.0.1:$METRICS/metrics" | awk '/^go_memstats_heap_inuse_bytes/ {printf "%d\n", $2}'
}
start_volume() {
  "$WEED" volume -ip=127.0.0.1 -ip.bind=127.0.0.1 -port="$VPORT" -dir="$D/v" \
    -mserver=127.0.0.1:"$MPORT" -max=64 -metricsPort="$METRICS" >>"$WORK/volume.log" 2>&1 &
  VPID=$!
  PIDS+=("$VPID")
  for _ in $(seq 1 100); do
    curl -fsS "http://127.0.0.1:$VPORT/status" >/dev/null 2>&1 && curl -fsS "http://127.0.0.1:$METRICS/metrics" >/dev/null 2>&1 && return 0
    sleep 0.2
  done
  echo "volume server did not start" >&2
  exit 1
}

log "uptime: $(uptime)"
"$WEED" master -ip=127.0.0.1 -ip.bind=127.0.0.1 -port="$MPORT" -mdir="$D/m" \
  -volumeSizeLimitMB=1024 -defaultReplication=000 >"$WORK/master.log" 2>&1 &
PIDS+=($!)
sleep 2
start_volume
sleep 2
log "seaweedfs volume empty: rss $(rss_kib "$VPID") KiB heap $(heap_bytes) B"
echo "empty $(rss_kib "$VPID") $(heap_bytes)" >"$RES/weed"
( cd "$WORK" && /usr/bin/time -f "%e s wall" "$WEED" benchmark -master=127.0.0.1:"$MPORT" -c="$C" -n="$N" \
  -size="$SIZE" -writeOnly -list="$WORK/list.txt" ) >"$WORK/weed-bench.log" 2>&1
grep -E "Completed|Requests per second|Transfer rate|wall" "$WORK/weed-bench.log" >&2 || true
log "seaweedfs volume filled: rss $(rss_kib "$VPID") KiB heap $(heap_bytes) B"
echo "filled $(rss_kib "$VPID") $(heap_bytes)" >>"$RES/weed"
kill "$VPID"
wait "$VPID" 2>/dev/null || true
start_volume
sleep 5
log "seaweedfs volume restarted: rss $(rss_kib "$VPID") KiB heap $(heap_bytes) B"
echo "restarted $(rss_kib "$VPID") $(heap_bytes)" >>"$RES/weed"
stored=$(wc -l <"$WORK/list.txt")
log "seaweedfs objects acknowledged: $stored; uptime: $(uptime)"
stop_servers
rm -rf "$D"

log "strata bench store, $N objects of $SIZE B"
/usr/bin/time -f "%M KiB max rss, %e s wall" "$STRATA" bench store --objects "$N" --size "$SIZE" \
  --batch 256 --threads 2 --segment-size 64MiB --gets 100000 --dir "$WORK/strata" --keep --json \
  >"$RES/strata.json" 2>"$RES/strata.err"
tail -1 "$RES/strata.err" >&2
cat "$RES/strata.json" >&2
/usr/bin/time -f "%M KiB max rss, %e s wall" "$STRATA" store ls "$WORK/strata" >/dev/null 2>"$RES/strata-ls.err"
tail -1 "$RES/strata-ls.err" >&2
log "uptime: $(uptime)"

python3 - "$RES" "$stored" "$N" <<'EOF'
import json, re, sys
res, stored, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
w = {l.split()[0]: (int(l.split()[1]) * 1024, int(l.split()[2])) for l in open(res + "/weed")}
s = json.load(open(res + "/strata.json"))
peak = int(re.search(r"(\d+) KiB max rss", open(res + "/strata.err").read()).group(1)) * 1024
rest = int(re.search(r"(\d+) KiB max rss", open(res + "/strata-ls.err").read()).group(1)) * 1024
print("| program | objects | RSS bytes/object (filled) | RSS bytes/object (restarted, at rest) | heap bytes/object | index bytes/object |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
e = w["empty"]
print("| SeaweedFS volume server | %d | %.1f | %.1f | %.1f (filled), %.1f (restarted) | — |" % (
    stored, (w["filled"][0] - e[0]) / stored, (w["restarted"][0] - e[0]) / stored,
    (w["filled"][1] - e[1]) / stored, (w["restarted"][1] - e[1]) / stored))
print("| Strata segment store | %d | %.1f (max RSS, merge peak) | %.1f (max RSS of `store ls`) | — | %.2f |" % (
    n, peak / n, rest / n, s["ram_bytes_per_object"]))
print("| Haystack (paper, §3.4) | — | — | — | — | 10 |")
EOF
