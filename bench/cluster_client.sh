#!/usr/bin/env bash
# One client process, many requests in flight (docs/benchmarks.md,
# "Cluster (issue 7)"): etcd, `strata meta`, NODES `strata server --meta`
# nodes on loopback, then `strata load` writes and verifies OBJECTS objects
# of SIZE at each concurrency.
#
# Usage: bench/cluster_client.sh   (env: NODES, OBJECTS, SIZE, CONC, STRATA, DATA_ROOT)
set -euo pipefail
# Every node, the metadata service and the load generator share the
# cluster secret (docs/security.md).
export STRATA_CLUSTER_SECRET=${STRATA_CLUSTER_SECRET:-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')}
cd "$(dirname "$0")/.."
STRATA=${STRATA:-target/release/strata}
NODES=${NODES:-6}
OBJECTS=${OBJECTS:-20000}
SIZE=${SIZE:-4KiB}
CONC=${CONC:-"1 8 64 256"}
DATA_ROOT=${DATA_ROOT:-/dev/shm}
port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
WORK=$(mktemp -d "$DATA_ROOT/strata-cli.XXXXXX")
PIDS=()
trap 'for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$WORK"' EXIT
EP=$(port); PP=$(port)
etcd --name b --data-dir "$WORK/etcd" --listen-client-urls "http://127.0.0.1:$EP" \
  --advertise-client-urls "http://127.0.0.1:$EP" --listen-peer-urls "http://127.0.0.1:$PP" \
  --initial-advertise-peer-urls "http://127.0.0.1:$PP" --initial-cluster "b=http://127.0.0.1:$PP" \
  >/dev/null 2>&1 & PIDS+=($!)
sleep 1
META=127.0.0.1:$(port)
"$STRATA" meta --listen "$META" --etcd "http://127.0.0.1:$EP" --initial-nodes "$NODES" 2>"$WORK/meta.log" & PIDS+=($!)
for i in $(seq 0 $((NODES-1))); do
  "$STRATA" server --meta "$META" --listen "127.0.0.1:$(port)" --data "$WORK/n$i" --scrub-every 0 2>"$WORK/n$i.log" & PIDS+=($!)
done
until "$STRATA" cluster status --meta "$META" >/dev/null 2>&1; do sleep 0.2; done
"$STRATA" cluster wait --meta "$META" --timeout 60 >/dev/null
for c in $CONC; do
  "$STRATA" load --meta "$META" --objects "$OBJECTS" --size "$SIZE" --concurrency "$c" --prefix "c$c-" --json
  "$STRATA" load --meta "$META" --objects "$OBJECTS" --size "$SIZE" --concurrency "$c" --prefix "c$c-" --verify --json
done
