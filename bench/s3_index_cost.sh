#!/usr/bin/env bash
# What the S3 listing index costs a PUT: minio warp PUTs against a fresh
# cluster of one with the index (as shipped: each PUT records a write
# intent, then writes its head record and its listing entry together) and
# without it (`strata server --s3-bench-no-listing-index`, hidden and for
# this benchmark only: nothing is listed), alternating on, off, off, on
# (REPS times) so that a drifting machine load falls on both alike.
#
#   bench/s3_index_cost.sh WARP_BINARY [STRATA_BINARY]
#
# WARP_BINARY is a `warp` you built yourself (`go install
# github.com/minio/warp@latest`); nothing is downloaded here. With PIN=1
# (the default on 2 or more cores) the server runs on core 1 and warp on
# core 0. Knobs: DUR (15s), SIZE (1KiB), CONC (16), REPS (1), PORT (18690;
# PORT-89 and PORT-90 for the node and metadata service).
set -euo pipefail
WARP=${1:?usage: $0 WARP_BINARY [STRATA_BINARY]}
STRATA=${2:-target/release/strata}
DUR=${DUR:-15s}
SIZE=${SIZE:-1KiB}
CONC=${CONC:-16}
REPS=${REPS:-1}
PORT=${PORT:-18690}
ACCESS=warpbench
SECRET=warpbench-secret-0123456789
for b in "$WARP" "$STRATA"; do
  [ -x "$b" ] || { echo "not an executable: $b" >&2; exit 2; }
done
if [ "$(nproc)" -ge 2 ] && [ "${PIN:-1}" = 1 ]; then
  SRV=(taskset -c 1)
  GEN=(taskset -c 0)
else
  SRV=()
  GEN=()
fi
WORK=$(mktemp -d "${TMPDIR:-/tmp}/strata-s3-index-cost.XXXXXX")
PID=
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$WORK"' EXIT
log() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }

# one MODE: a fresh server (MODE on or off), one warp PUT run; prints
# "MODE obj/s load-before load-after".
one() {
  local mode=$1 extra=() l0 l1 rate
  [ "$mode" = off ] && extra=(--s3-bench-no-listing-index)
  rm -rf "$WORK/data"
  mkdir -p "$WORK/data"
  STRATA_ROOT_ACCESS_KEY=$ACCESS STRATA_ROOT_SECRET_KEY=$SECRET \
    "${SRV[@]}" "$STRATA" server --data "$WORK/data" --listen 127.0.0.1:$((PORT - 89)) \
    --meta-listen 127.0.0.1:$((PORT - 90)) --s3-listen 127.0.0.1:"$PORT" --ram-cache 0 \
    "${extra[@]}" >"$WORK/strata.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 120); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/")" = 403 ] && break
    sleep 0.5
  done
  l0=$(cut -d' ' -f1 /proc/loadavg)
  "${GEN[@]}" "$WARP" put --host 127.0.0.1:"$PORT" --access-key "$ACCESS" --secret-key "$SECRET" \
    --obj.size "$SIZE" --duration "$DUR" --concurrent "$CONC" --bucket index-cost --noclear \
    --no-color --benchdata "$WORK/warp" >"$WORK/warp.out" 2>&1 || { log "warp failed: $(tail -n 3 "$WORK/warp.out")"; }
  l1=$(cut -d' ' -f1 /proc/loadavg)
  kill "$PID" 2>/dev/null || true
  wait "$PID" 2>/dev/null || true
  PID=
  rate=$(grep -m1 -oE '[0-9.]+ obj/s' "$WORK/warp.out" | cut -d' ' -f1 || echo 0)
  log "index $mode: $rate obj/s (load $l0 -> $l1)"
  echo "$mode $rate $l0 $l1"
}

log "start $(date -u '+%Y-%m-%d %H:%M:%S') UTC, load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"
results=()
for _ in $(seq 1 "$REPS"); do
  for mode in on off off on; do
    results+=("$(one "$mode")")
  done
done
printf '%s\n' "${results[@]}" | python3 -c '
import sys, statistics
rows = [l.split() for l in sys.stdin if l.strip()]
print("| index | warp PUT obj/s, each run | median | load average (1 min) |")
print("| --- | --- | ---: | --- |")
for mode in ("on", "off"):
    r = [x for x in rows if x[0] == mode]
    rates = [float(x[1]) for x in r]
    loads = [float(v) for x in r for v in x[2:]]
    print("| %s | %s | %.0f | %.2f-%.2f |" % (mode, ", ".join("%.0f" % v for v in rates),
          statistics.median(rates), min(loads), max(loads)))
on = statistics.median(float(x[1]) for x in rows if x[0] == "on")
off = statistics.median(float(x[1]) for x in rows if x[0] == "off")
print()
print("With the index, PUTs run at %.0f%% of the rate without it." % (100 * on / off))
'
