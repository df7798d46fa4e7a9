#!/usr/bin/env bash
# A 3-node Strata cluster through its public API (every node serves every
# object) vs SeaweedFS with 3 volume servers and replication 002 (three
# copies), side by side on this machine's loopback, driven by the same load
# generator (`strata bench http`), in one run; the table is printed as
# markdown at the end.
#
#   bench/cluster_vs_seaweedfs.sh WEED_BINARY [STRATA_BINARY]
#
# WEED_BINARY is a `weed` you built yourself (this script does not build
# it). Strata: `strata meta` (replication 3) and three `strata server
# --meta` nodes; the load generator spreads its connections over the three
# nodes (connection i writes and reads through node i mod 3, so most reads
# go through a node other than the one that wrote the object). SeaweedFS:
# one master with -defaultReplication=002 and three volume servers; a PUT
# is an assign (with dataSize) plus an upload to the volume server the
# master names, which replicates to the two others before it answers, timed
# together; a GET goes to a volume server holding the object. Both keep
# three copies; a Strata PUT answers after every replica's fdatasync, a
# SeaweedFS one without fsync (as it ships) and, in a third column, with
# ?fsync=true.
#
# Knobs (environment): DUR seconds per run (5), SIZES ("1KiB 1MiB"), CONC
# (16), PREFILL_1KiB (5000), PREFILL_1MiB (300), base port BASE (18600).
set -euo pipefail
# Every node, the metadata service and the load generator share the
# cluster secret (docs/security.md).
export STRATA_CLUSTER_SECRET=${STRATA_CLUSTER_SECRET:-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')}
WEED=${1:?usage: $0 WEED_BINARY [STRATA_BINARY]}
STRATA=${2:-target/release/strata}
DUR=${DUR:-5}
SIZES=${SIZES:-"1KiB 1MiB"}
CONC=${CONC:-16}
PREFILL_1KiB=${PREFILL_1KiB:-5000}
PREFILL_1MiB=${PREFILL_1MiB:-300}
BASE=${BASE:-18600}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
setup_work strata-server-vs-weed

META=127.0.0.1:$BASE
NODES=()

MPORT=$((BASE + 10))
start_weed() {
  local d="$WORK/weed"
  rm -rf "$d"
  mkdir -p "$d/m"
  "$WEED" master -ip=127.0.0.1 -ip.bind=127.0.0.1 -port="$MPORT" -mdir="$d/m" \
    -volumeSizeLimitMB=1024 -defaultReplication=002 >"$WORK/master.log" 2>&1 &
  PIDS+=($!)
  WEED_PIDS=$!
  for i in 1 2 3; do
    mkdir -p "$d/v$i"
    "$WEED" volume -ip=127.0.0.1 -ip.bind=127.0.0.1 -port=$((MPORT + i)) -dir="$d/v$i" \
      -mserver=127.0.0.1:"$MPORT" -max=32 >"$WORK/volume$i.log" 2>&1 &
    PIDS+=($!)
    WEED_PIDS="$WEED_PIDS,$!"
  done
  for _ in $(seq 1 120); do
    curl -fs "http://127.0.0.1:$MPORT/vol/grow?count=4&replication=002" 2>/dev/null | grep -q '"count"' && break
    sleep 0.5
  done
  for _ in $(seq 1 120); do
    curl -fs "http://127.0.0.1:$MPORT/dir/assign?dataSize=1" 2>/dev/null | grep -q '"fid"' && return 0
    sleep 0.5
  done
  log "SeaweedFS gave no writable volume"
  tail -5 "$WORK"/*.log >&2
  exit 1
}

prefill_of() { if [ "$1" = 1KiB ]; then echo "$PREFILL_1KiB"; else echo "$PREFILL_1MiB"; fi; }

echo "start $(date -u '+%Y-%m-%d %H:%M:%S') UTC, load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores" >"$RES/meta"
log "work dir $WORK"
for size in $SIZES; do
  pre=$(prefill_of "$size")
  log "$size: fresh Strata cluster"
  start_strata_cluster "$STRATA"
  addrs=$(IFS=,; echo "${NODES[*]}")
  S=(--addr "$addrs" --cpu-pids "$STRATA_PIDS" --sizes "$size" --concurrency "$CONC")
  run "strata-put-$size" "${S[@]}" --bucket put --read-fraction 0 --prefill 0
  run "strata-get-$size" "${S[@]}" --bucket get --read-fraction 1 --prefill "$pre"
  stop_servers
  log "$size: fresh SeaweedFS"
  start_weed
  W=(--seaweedfs 127.0.0.1:"$MPORT" --cpu-pids "$WEED_PIDS" --sizes "$size" --concurrency "$CONC")
  run "weed-put-$size" "${W[@]}" --read-fraction 0 --prefill 0
  run "weedfsync-put-$size" "${W[@]}" --read-fraction 0 --prefill 0 --seaweedfs-fsync
  run "weed-get-$size" "${W[@]}" --read-fraction 1 --prefill "$pre"
  stop_servers
done
echo "end $(date -u '+%Y-%m-%d %H:%M:%S') UTC, load average $(cut -d' ' -f1-3 /proc/loadavg)" >>"$RES/meta"

python3 - "$RES" "$SIZES" "$CONC" "$DUR" <<'EOF'
import json, os, sys
res, sizes, conc, dur = sys.argv[1], sys.argv[2].split(), sys.argv[3], sys.argv[4]

def load(name):
    p = os.path.join(res, name + ".json")
    if not os.path.exists(p):
        return None
    r = json.load(open(p))
    s = r["put"] if r["put"]["objects"] else r["get"]
    return {"ops": s["objects_per_s"], "p99": s["p99_us"], "err": r["put"]["errors"] + r["get"]["errors"],
            "cpu": r.get("server_cpu_us_per_object")}

def cell(m):
    if m is None:
        return "failed"
    cpu = f", {m['cpu']:.0f} µs CPU/obj" if m["cpu"] is not None else ""
    err = f", {m['err']} errors" if m["err"] else ""
    return f"{m['ops']:,.0f}/s, p99 {m['p99'] / 1000:.2f} ms{cpu}{err}"

def ratio(a, b):
    return "—" if not a or not b or not b["ops"] else f"{a['ops'] / b['ops']:.2f}x"

print(open(os.path.join(res, "meta")).read().strip().replace("\n", "; "))
print(f"\n{conc} connections, {dur} s per run, three copies of every object on both.\n")
print("| op | size | Strata (3 nodes, any node) | SeaweedFS 002 as shipped | SeaweedFS 002 fsync | Strata / as shipped |")
print("| --- | --- | --- | --- | --- | --- |")
for size in sizes:
    s, w, f = load(f"strata-put-{size}"), load(f"weed-put-{size}"), load(f"weedfsync-put-{size}")
    print(f"| PUT | {size} | {cell(s)} | {cell(w)} | {cell(f)} | {ratio(s, w)} |")
    s, w = load(f"strata-get-{size}"), load(f"weed-get-{size}")
    print(f"| GET | {size} | {cell(s)} | {cell(w)} | — | {ratio(s, w)} |")
EOF
