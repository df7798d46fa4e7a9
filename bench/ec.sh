#!/usr/bin/env bash
# The erasure-coded warm tier on loopback (docs/benchmarks.md, "Erasure
# coding in the server (issue 16)").
#
# For each cluster size N (default 6 9 12 single-disk nodes, code 4+2):
# start `strata meta --ec 4+2 --ec-after 1s` (its own state file, no etcd)
# and N `strata server` nodes on ports from $BASE (default 23000), write
# N*PER_NODE objects of SIZE with `strata load`, wait until every sealed
# segment is encoded and every stripe installed, then print
#   - stored bytes per logical byte (`cluster status --json`),
#   - GET latency p50/p99 healthy (`strata load --verify --json`),
#   - kill -9 of one node, GET p50/p99 degraded (before it is declared
#     dead: its shards are decoded from the others),
#   - once it is declared dead: the rebuild time of its shards (from the
#     new table to `stripes_degraded` = 0), the survivors each rebuilding
#     their share at --ec-rebuild-rate (default 2MiB/s per node, standing
#     in for a disk's bandwidth on a 2-core VM where all nodes share the
#     CPU, as bench/cluster_recovery.sh does for replicas).
# With REPL=1 a cluster without --ec is measured too (3 replicas), for the
# stored-per-logical baseline.
#
# With RATIO_ONLY=1 only the stored-per-logical figure is taken (no GET
# latency, no kill, no rebuild), with a breakdown of the stored bytes:
# replicated segment files vs shard files. SEG sets --segment-size
# (default 1MiB), CODE the code (default 4+2).
#
# Usage: bench/ec.sh [N ...]
#   (env: PER_NODE, SIZE, RATE, BASE, STRATA, REPL, SEG, CODE, RATIO_ONLY)
set -euo pipefail
export STRATA_CLUSTER_SECRET=${STRATA_CLUSTER_SECRET:-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')}
cd "$(dirname "$0")/.."
STRATA=${STRATA:-target/release/strata}
PER_NODE=${PER_NODE:-2000}
SIZE=${SIZE:-16KiB}
RATE=${RATE:-2MiB}
BASE=${BASE:-23000}
REPL=${REPL:-1}
SEG=${SEG:-1MiB}
CODE=${CODE:-4+2}
RATIO_ONLY=${RATIO_ONLY:-0}
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(6 9 12)
[ -x "$STRATA" ] || { echo "build first: cargo build --release -p strata-cli" >&2; exit 1; }
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
st() { "$STRATA" cluster status --meta "$META" --json; }

run() { # N EC(0/1)
  local N=$1 EC=$2
  WORK=$(mktemp -d /dev/shm/strata-ec.XXXXXX 2>/dev/null || mktemp -d)
  PIDS=()
  cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
  trap cleanup EXIT
  META=127.0.0.1:$BASE
  local ECARGS=()
  [ "$EC" = 1 ] && ECARGS=(--ec "$CODE" --ec-after 1s)
  "$STRATA" meta --listen "$META" --data "$WORK/meta" --initial-nodes "$N" \
    --suspect-after 1 --strikes 2 "${ECARGS[@]}" 2>"$WORK/meta.log" & PIDS+=($!)
  NODE_PIDS=()
  for i in $(seq 0 $((N-1))); do
    "$STRATA" server --meta "$META" --listen "127.0.0.1:$((BASE+1+i))" --data "$WORK/n$i" \
      --segment-size "$SEG" --scrub-every 0 --ec-rebuild-rate "$RATE" \
      2>"$WORK/n$i.log" & PIDS+=($!); NODE_PIDS+=($!)
  done
  until st 2>/dev/null | json 'd["table_version"]' | grep -q 1; do sleep 0.2; done
  OBJ=$((N * PER_NODE))
  "$STRATA" load --meta "$META" --objects "$OBJ" --size "$SIZE" --concurrency 32 >/dev/null
  if [ "$EC" = 1 ]; then
    # Settled: the number of stripes unchanged for 5 s.
    local last=-1 now
    while :; do
      sleep 5
      now=$(st | json 'd["ec_segments"]')
      [ "$now" = "$last" ] && [ "$now" -gt 0 ] && break
      last=$now
    done
  else
    sleep 5
  fi
  local S L
  S=$(st); L=$(echo "$S" | json 'd["logical_bytes"]')
  local STORED
  STORED=$(echo "$S" | json 'd["stored_bytes"]')
  local RATIO
  RATIO=$(python3 -c "print(round($STORED / max($L, 1), 3))")
  # Where the stored bytes are: segment files (replicated rows, before
  # encoding) vs shard files (stripes).
  local SEGB SHB
  SEGB=$(find "$WORK" -name '*.seg' -printf '%s\n' | awk '{s+=$1} END {print s+0}')
  SHB=$(find "$WORK" -name 'shard-*' ! -name '*.part' -printf '%s\n' | awk '{s+=$1} END {print s+0}')
  # Every other file of the nodes, which stored_bytes does not count:
  # the space reserve files (docs/store-format.md), and the rest (row
  # and stripe indexes, the nodes' state).
  local ALLB RESB
  ALLB=$(find "$WORK" -path "$WORK/meta" -prune -o -type f ! -name '*.log' -printf '%s\n' | awk '{s+=$1} END {print s+0}')
  RESB=$(find "$WORK" -type f -name 'space.reserve' -printf '%s\n' | awk '{s+=$1} END {print s+0}')
  echo "# N=$N ec=$EC seg_files=$SEGB shard_files=$SHB reserve_files=$RESB other_files=$((ALLB - SEGB - SHB - RESB)) stored=$STORED logical=$L" >&2
  if [ "$EC" = 0 ] || [ "$RATIO_ONLY" = 1 ]; then
    local LAYOUT=replicated
    [ "$EC" = 1 ] && LAYOUT="ec $CODE"
    echo "$N,$LAYOUT,$OBJ,$L,$STORED,$RATIO,,,,,,"
    cleanup; trap - EXIT; return
  fi
  local H
  H=$("$STRATA" load --meta "$META" --objects "$OBJ" --size "$SIZE" --verify --json --concurrency 8)
  local H50 H99
  H50=$(echo "$H" | json 'd["latency_ms"]["p50"]'); H99=$(echo "$H" | json 'd["latency_ms"]["p99"]')
  kill -9 "${NODE_PIDS[1]}"
  local T0 D D50 D99 BAD
  T0=$(date +%s.%N)
  D=$("$STRATA" load --meta "$META" --objects "$((OBJ / 4))" --size "$SIZE" --verify --json --concurrency 8)
  D50=$(echo "$D" | json 'd["latency_ms"]["p50"]'); D99=$(echo "$D" | json 'd["latency_ms"]["p99"]')
  until st | json 'd["stripes_degraded"]' | grep -qv '^0$'; do sleep 0.1; done
  local T1; T1=$(date +%s.%N)
  until st | json 'd["stripes_degraded"]' | grep -q '^0$'; do sleep 0.2; done
  local T2; T2=$(date +%s.%N)
  BAD=$("$STRATA" load --meta "$META" --objects "$OBJ" --size "$SIZE" --verify --json | json 'd["bad"] + d["errors"]')
  echo "$N,ec $CODE,$OBJ,$L,$STORED,$RATIO,$H50,$H99,$D50,$D99,$(python3 -c "print(round($T2 - $T1, 1))"),$BAD"
  cleanup; trap - EXIT
}

echo "nodes,layout,objects,logical_bytes,stored_bytes,stored_per_logical,get_p50_ms,get_p99_ms,degraded_p50_ms,degraded_p99_ms,rebuild_s,verify_bad"
for N in "${SIZES[@]}"; do
  [ "$REPL" = 1 ] && run "$N" 0
  run "$N" 1
done
