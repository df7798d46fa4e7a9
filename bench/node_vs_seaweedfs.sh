#!/usr/bin/env bash
# Strata node vs SeaweedFS (master + volume server), side by side on this
# machine, driven by the same load generator (`strata bench http`).
#
#   bench/node_vs_seaweedfs.sh WEED_BINARY [STRATA_BINARY]
#
# WEED_BINARY is a `weed` you built yourself (this script does not build
# it). Both servers listen on 127.0.0.1 only and keep their data under one
# temporary directory on the same filesystem. For each object size (1 KiB,
# 64 KiB): a PUT-only run, then a GET-only run over the objects written.
# SeaweedFS is run twice for PUTs: as it ships (no fsync per write) and with
# ?fsync=true (as durable as a Strata PUT, which returns only after
# fdatasync).
set -euo pipefail
WEED=${1:?usage: $0 WEED_BINARY [STRATA_BINARY]}
STRATA=${2:-target/release/strata}
DUR=${DUR:-15}
CONC=${CONC:-16}
PREFILL=${PREFILL:-20000}
WORK=$(mktemp -d ${TMPDIR:-/tmp}/strata-vs-weed.XXXXXX)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$WORK"; }
trap cleanup EXIT

mkdir -p "$WORK/weed/m" "$WORK/weed/v" "$WORK/strata"
"$WEED" master -ip=127.0.0.1 -ip.bind=127.0.0.1 -port=9333 -mdir="$WORK/weed/m" -volumeSizeLimitMB=1024 >"$WORK/master.log" 2>&1 &
PIDS+=($!)
sleep 2
"$WEED" volume -ip=127.0.0.1 -ip.bind=127.0.0.1 -port=8081 -dir="$WORK/weed/v" -mserver=127.0.0.1:9333 -max=100 >"$WORK/volume.log" 2>&1 &
PIDS+=($!)
"$STRATA" server --data "$WORK/strata" --listen 127.0.0.1:18480 --ram-cache 0 >"$WORK/strata.log" 2>&1 &
PIDS+=($!)
for i in $(seq 1 60); do
  curl -fs http://127.0.0.1:9333/dir/assign >/dev/null 2>&1 && curl -fs http://127.0.0.1:18480/healthz >/dev/null 2>&1 && break
  sleep 1
done

# Let the master create volumes up front (it refuses assigns while growing).
curl -fs "http://127.0.0.1:9333/vol/grow?count=8" >/dev/null || true
for i in $(seq 1 60); do
  curl -fs http://127.0.0.1:9333/dir/assign | grep -q '"fid"' && break
  sleep 1
done

run() { echo "## $*"; "$STRATA" bench http --duration "$DUR" --concurrency "$CONC" "$@"; echo; }
for size in 1KiB 64KiB; do
  run --addr 127.0.0.1:18480 --bucket put$size --sizes $size --read-fraction 0 --prefill 0
  run --seaweedfs 127.0.0.1:9333 --sizes $size --read-fraction 0 --prefill 0
  run --seaweedfs 127.0.0.1:9333 --seaweedfs-fsync --sizes $size --read-fraction 0 --prefill 0
  run --addr 127.0.0.1:18480 --bucket get$size --sizes $size --read-fraction 1 --prefill "$PREFILL"
  run --seaweedfs 127.0.0.1:9333 --sizes $size --read-fraction 1 --prefill "$PREFILL"
done
