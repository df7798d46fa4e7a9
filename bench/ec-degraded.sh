#!/usr/bin/env bash
# GET latency through the public API, healthy vs degraded, on the same
# objects (docs/benchmarks.md, "GET healthy vs degraded").
#
# On N single-disk loopback nodes (default 6) with code CODE (default
# 4+2), N*PER_NODE objects of SIZE are written with `strata load` and
# left to be encoded (--ec-after 1s, SEG segments) until every stripe is
# installed. The metadata service runs with --suspect-after 3600, so a
# killed node is never declared dead (no rebuild: the stripes stay
# degraded for as long as the measurement lasts).
#  1. kill -9 of node VICTIM; every object is read once through a live
#     node's public API (`GET /load/KEY`), and the objects whose read
#     decoded (the nodes' `reads_degraded` rose) are the degraded set:
#     those whose needle lies on a data shard of the killed node;
#  2. the node is started again (same data): RUNS runs of
#     `strata load --verify --indices SET --json --concurrency CONC` over
#     that set, healthy (every read one data-shard read);
#  3. kill -9 of the same node again: RUNS runs over the same set,
#     degraded (every read tries the dead node's shard, is refused, and
#     decodes the range from K survivors).
# The nodes' reads_degraded counters are printed for each run (healthy:
# 0 decoded; degraded: one per object). The nodes run without a RAM or
# flash read cache (--ram-cache 0 --flash-cache 0): with one, the healthy
# runs would warm it and the degraded ones be served from it.
#
# Usage: bench/ec-degraded.sh
#   (env: N, CODE, PER_NODE, SIZE, SEG, RUNS, CONC, VICTIM, BASE, STRATA)
set -euo pipefail
export STRATA_CLUSTER_SECRET=${STRATA_CLUSTER_SECRET:-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')}
# /metrics is a control endpoint: the nodes get an admin token.
export STRATA_ADMIN_TOKEN=${STRATA_ADMIN_TOKEN:-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')}
cd "$(dirname "$0")/.."
STRATA=${STRATA:-target/release/strata}
N=${N:-6}
CODE=${CODE:-4+2}
PER_NODE=${PER_NODE:-1000}
SIZE=${SIZE:-16KiB}
SEG=${SEG:-256KiB}
RUNS=${RUNS:-3}
CONC=${CONC:-1}
VICTIM=${VICTIM:-1}
BASE=${BASE:-23000}
[ -x "$STRATA" ] || { echo "build first: cargo build --release -p strata-cli" >&2; exit 1; }
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
st() { "$STRATA" cluster status --meta "$META" --json; }
WORK=$(mktemp -d /dev/shm/strata-ec-deg.XXXXXX 2>/dev/null || mktemp -d)
PIDS=()
cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
trap cleanup EXIT INT TERM
trap 'echo "bench/ec-degraded.sh: failed at line $LINENO" >&2' ERR
META=127.0.0.1:$BASE
"$STRATA" meta --listen "$META" --data "$WORK/meta" --initial-nodes "$N" \
  --suspect-after 3600 --ec "$CODE" --ec-after 1s 2>"$WORK/meta.log" & PIDS+=($!)
NODE_PIDS=(); ADDRS=()
start_node() {
  "$STRATA" server --meta "$META" --listen "${ADDRS[$1]}" --data "$WORK/n$1" \
    --segment-size "$SEG" --scrub-every 0 --ram-cache 0 --flash-cache 0 2>>"$WORK/n$1.log" & PIDS+=($!); NODE_PIDS[$1]=$!
}
for i in $(seq 0 $((N-1))); do ADDRS+=("127.0.0.1:$((BASE+1+i))"); start_node "$i"; done
until st 2>/dev/null | json 'd["table_version"]' | grep -q 1; do sleep 0.2; done
OBJ=$((N * PER_NODE))
"$STRATA" load --meta "$META" --objects "$OBJ" --size "$SIZE" --concurrency 32 >/dev/null
# Settled: every stripe recorded and installed on the 3 replicas of its row.
# The sum of a /metrics counter over the nodes that answer.
ecsum() {
  for a in "${ADDRS[@]}"; do
    curl -sf -H "Authorization: Bearer $STRATA_ADMIN_TOKEN" "http://$a/metrics" 2>/dev/null \
      | awk -v m="strata_server_ec_$1_total" '$1 == m { print $2 }' || true
  done | awk '{s+=$1} END {print s+0}'
}
last=-1
while :; do
  sleep 5
  now=$(st | json 'd["ec_segments"]')
  [ "$now" = "$last" ] && [ "$now" -gt 0 ] && [ "$(ecsum stripes_installed)" -ge $((3 * now)) ] && break
  last=$now
done
echo "# $(date -u +%FT%TZ) $(uptime); $OBJ objects, $now stripes" >&2

kill -9 "${NODE_PIDS[$VICTIM]}"; wait "${NODE_PIDS[$VICTIM]}" 2>/dev/null || true
LIVE=()
for i in $(seq 0 $((N-1))); do [ "$i" = "$VICTIM" ] || LIVE+=("${ADDRS[$i]}"); done
python3 - "$OBJ" "$WORK/degraded" "${LIVE[@]}" <<'PY'
import http.client, os, sys
n, out, live = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
conns = {a: http.client.HTTPConnection(a, timeout=60) for a in live}
def get(a, path):
    c = conns[a]
    c.request("GET", path)
    r = c.getresponse()
    return r.status, r.read()
auth = {"Authorization": "Bearer " + os.environ["STRATA_ADMIN_TOKEN"]}
def decoded():
    total = 0
    for a in live:
        c = conns[a]
        c.request("GET", "/metrics", headers=auth)
        r = c.getresponse()
        body = r.read().decode()
        if r.status != 200:
            sys.exit(f"{a}/metrics: {r.status} {body}")
        for line in body.splitlines():
            if line.startswith("strata_server_ec_reads_degraded_total "):
                total += int(line.split()[1])
    return total
width = max(8, len(str(n)))
before, hits = decoded(), []
for i in range(n):
    code, _ = get(live[i % len(live)], f"/load/obj-{i:0{width}d}")
    if code != 200:
        sys.exit(f"GET obj-{i:0{width}d}: {code}")
    now = decoded()
    if now > before:
        hits.append(i)
    before = now
open(out, "w").write("".join(f"{i}\n" for i in hits))
print(f"# degraded set: {len(hits)} of {n} objects", file=sys.stderr)
PY
D=$(wc -l < "$WORK/degraded")

measure() { # kind
  for r in $(seq 1 "$RUNS"); do
    local d0 out d1
    d0=$(ecsum reads_degraded)
    out=$("$STRATA" load --meta "$META" --objects "$OBJ" --size "$SIZE" --verify --json \
      --concurrency "$CONC" --indices "$WORK/degraded")
    d1=$(ecsum reads_degraded)
    echo "$1,$r,$D,$(echo "$out" | json 'd["latency_ms"]["p50"]'),$(echo "$out" | json 'd["latency_ms"]["p99"]'),$(echo "$out" | json 'd["client"]["failovers"]'),$((d1 - d0)),$(echo "$out" | json 'd["bad"] + d["errors"]'),$(cut -d' ' -f1-3 /proc/loadavg | tr ' ' '/')"
  done
}
echo "kind,run,objects,get_p50_ms,get_p99_ms,client_failovers,reads_decoded,bad,loadavg"
start_node "$VICTIM"
until curl -sf "http://${ADDRS[$VICTIM]}/cluster/v1/health" >/dev/null 2>&1; do sleep 0.2; done
sleep 5
measure healthy
kill -9 "${NODE_PIDS[$VICTIM]}"; wait "${NODE_PIDS[$VICTIM]}" 2>/dev/null || true
measure degraded
echo "# $(date -u +%FT%TZ) $(uptime)" >&2
