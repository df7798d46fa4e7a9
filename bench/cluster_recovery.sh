#!/usr/bin/env bash
# Recovery scaling on loopback (docs/benchmarks.md, "Cluster (issue 7)").
#
# For each cluster size N (default 4 8 12 single-disk nodes) with the same
# data per node: start etcd, `strata meta` and N `strata server --meta`
# nodes, write N*PER_NODE objects of SIZE with R=3, SIGKILL one node, and
# time (a) detection: kill -> new table version, (b) recovery: new table ->
# last row copy done (the metadata service's recovery.seconds), then verify
# every object. Each node's recovery bandwidth is bounded by --recovery-rate
# (default 2MiB/s per disk, standing in for a disk's bandwidth on a 2-core
# VM where all nodes share the CPU), so the figure shows how the work
# spreads over the disks; RATE=0 removes the bound.
#
# Usage: bench/cluster_recovery.sh [N ...]   (env: PER_NODE, SIZE, RATE, STRATA)
set -euo pipefail
# Every node, the metadata service and the load generator share the
# cluster secret (docs/security.md).
export STRATA_CLUSTER_SECRET=${STRATA_CLUSTER_SECRET:-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')}
cd "$(dirname "$0")/.."
STRATA=${STRATA:-target/release/strata}
PER_NODE=${PER_NODE:-4000}
SIZE=${SIZE:-4KiB}
RATE=${RATE:-2MiB}
SIZES=("$@")
[ ${#SIZES[@]} -gt 0 ] || SIZES=(4 8 12)
command -v etcd >/dev/null || { echo "needs etcd (apt-get install etcd-server)" >&2; exit 1; }
[ -x "$STRATA" ] || { echo "build first: cargo build --release -p strata-cli" >&2; exit 1; }

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }

echo "nodes,objects,bytes_per_node,lost_bytes,detect_s,recovery_s,copies,verify_bad"
for N in "${SIZES[@]}"; do
  WORK=$(mktemp -d /dev/shm/strata-rec.XXXXXX 2>/dev/null || mktemp -d)
  PIDS=()
  cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
  trap cleanup EXIT
  EP=$(port); PP=$(port)
  etcd --name b --data-dir "$WORK/etcd" --listen-client-urls "http://127.0.0.1:$EP" \
    --advertise-client-urls "http://127.0.0.1:$EP" --listen-peer-urls "http://127.0.0.1:$PP" \
    --initial-advertise-peer-urls "http://127.0.0.1:$PP" --initial-cluster "b=http://127.0.0.1:$PP" \
    >/dev/null 2>&1 & PIDS+=($!)
  sleep 1
  MP=$(port); META=127.0.0.1:$MP
  "$STRATA" meta --listen "$META" --etcd "http://127.0.0.1:$EP" --initial-nodes "$N" \
    --suspect-after 1 --strikes 2 2>"$WORK/meta.log" & PIDS+=($!)
  NODE_PIDS=()
  for i in $(seq 0 $((N-1))); do
    P=$(port)
    if [ "$RATE" = 0 ]; then R=(); else R=(--recovery-rate "$RATE"); fi
    "$STRATA" server --meta "$META" --listen "127.0.0.1:$P" --data "$WORK/n$i" "${R[@]}" \
      --scrub-every 0 2>"$WORK/n$i.log" & PIDS+=($!); NODE_PIDS+=($!)
  done
  until "$STRATA" cluster status --meta "$META" --json 2>/dev/null | json 'd["table_version"]' | grep -q 1; do sleep 0.2; done
  OBJ=$((N * PER_NODE))
  "$STRATA" load --meta "$META" --objects "$OBJ" --size "$SIZE" --concurrency 128 >/dev/null
  BYTES_PER_NODE=$(du -sb "$WORK/n1/rows" | cut -f1)
  VICTIM=${NODE_PIDS[1]}
  T0=$(date +%s.%N)
  kill -9 "$VICTIM"
  until "$STRATA" cluster status --meta "$META" --json | json 'd["table_version"]' | grep -q 2; do sleep 0.05; done
  T1=$(date +%s.%N)
  "$STRATA" cluster wait --meta "$META" --timeout 600 >/dev/null
  ST=$("$STRATA" cluster status --meta "$META" --json)
  REC=$(echo "$ST" | json 'd["recovery"]["seconds"]')
  COPIES=$(echo "$ST" | json 'd["recovery"]["transfers_total"]')
  LOST=$(echo "$ST" | json 'd["recovery"]["bytes_copied"]')
  BAD=$("$STRATA" load --meta "$META" --objects "$OBJ" --size "$SIZE" --verify --json | json 'd["bad"] + d["errors"]')
  DET=$(python3 -c "print(round($T1 - $T0, 2))")
  echo "$N,$OBJ,$BYTES_PER_NODE,$LOST,$DET,$REC,$COPIES,$BAD"
  cleanup; trap - EXIT
done
