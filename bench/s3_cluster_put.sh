#!/usr/bin/env bash
# S3 PUTs through one node of a 3-node cluster (replication 3, every node
# serving S3): minio warp against a fresh cluster for each run, the
# binaries given alternating A B B A (REPS times) so that a drifting
# machine load falls on both alike. Prints one line per run:
# "BINARY obj/s load-before load-after".
#
#   bench/s3_cluster_put.sh WARP_BINARY STRATA_A [STRATA_B]
#
# WARP_BINARY is a `warp` you built yourself (`go install
# github.com/minio/warp@latest`); nothing is downloaded here. Knobs: DUR
# (15s), SIZE (1KiB), CONC (16), REPS (1), PORT (18790: the S3 endpoint;
# the nodes and the metadata service take the ports below it).
set -euo pipefail
WARP=${1:?usage: $0 WARP_BINARY STRATA_A [STRATA_B]}
A=${2:?usage: $0 WARP_BINARY STRATA_A [STRATA_B]}
B=${3:-}
DUR=${DUR:-15s}
SIZE=${SIZE:-1KiB}
CONC=${CONC:-16}
REPS=${REPS:-1}
PORT=${PORT:-18790}
ACCESS=warpbench
SECRET=warpbench-secret-0123456789
export STRATA_CLUSTER_SECRET=s3-cluster-put-bench-secret
for b in "$WARP" "$A" ${B:+"$B"}; do
  [ -x "$b" ] || { echo "not an executable: $b" >&2; exit 2; }
done
WORK=$(mktemp -d "${TMPDIR:-/tmp}/strata-s3-cluster.XXXXXX")
PIDS=()
stop() { for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done; for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done; PIDS=(); }
trap 'stop; rm -rf "$WORK"' EXIT

# one BINARY: a fresh cluster, one warp PUT run through the first node.
one() {
  local bin=$1 l0 l1 rate
  rm -rf "$WORK/c"
  mkdir -p "$WORK/c/meta"
  "$bin" meta --listen 127.0.0.1:$((PORT - 10)) --data "$WORK/c/meta" --initial-nodes 3 \
    >"$WORK/c/meta.log" 2>&1 &
  PIDS+=($!)
  for i in 0 1 2; do
    mkdir -p "$WORK/c/n$i"
    STRATA_ROOT_ACCESS_KEY=$ACCESS STRATA_ROOT_SECRET_KEY=$SECRET \
      "$bin" server --meta 127.0.0.1:$((PORT - 10)) --listen 127.0.0.1:$((PORT - 9 + i)) \
      --data "$WORK/c/n$i" --disk "$WORK/c/n$i" --s3-listen 127.0.0.1:$((PORT + i)) \
      --ram-cache 0 >"$WORK/c/n$i.log" 2>&1 &
    PIDS+=($!)
  done
  for _ in $(seq 1 120); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' -X PUT --data x \
      -H "Authorization: Bearer $(STRATA_ROOT_ACCESS_KEY=$ACCESS STRATA_ROOT_SECRET_KEY=$SECRET "$bin" key token 2>/dev/null)" \
      "http://127.0.0.1:$((PORT - 9))/ready/probe")" = 201 ] &&
      [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$PORT/")" = 403 ] && break
    sleep 0.5
  done
  l0=$(cut -d' ' -f1 /proc/loadavg)
  "$WARP" put --host 127.0.0.1:"$PORT" --access-key "$ACCESS" --secret-key "$SECRET" \
    --obj.size "$SIZE" --duration "$DUR" --concurrent "$CONC" --bucket cluster-put --noclear \
    --no-color --benchdata "$WORK/warp" >"$WORK/warp.out" 2>&1 || echo "warp failed: $(tail -n 3 "$WORK/warp.out")" >&2
  l1=$(cut -d' ' -f1 /proc/loadavg)
  rate=$(grep -m1 -oE '[0-9.]+ obj/s' "$WORK/warp.out" | cut -d' ' -f1 || true)
  echo "$bin ${rate:-?} $l0 $l1"
  stop
}

for _ in $(seq 1 "$REPS"); do
  one "$A"
  if [ -n "$B" ]; then
    one "$B"
    one "$B"
  fi
  one "$A"
done
