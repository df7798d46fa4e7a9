#!/usr/bin/env bash
# Encode throughput inside the server, per CPU-second (docs/benchmarks.md,
# "Encode throughput per core in the server").
#
# For each code K+M (default 4+2 6+3 10+4) on K+M single-disk loopback
# nodes: start `strata meta --ec K+M --ec-after 1h` (nothing is encoded
# yet), write OBJECTS objects of SIZE with `strata load`, then restart the
# metadata service with `--ec-after 1s` (applied at every start) so that
# every sealed segment becomes due at once: one encoding pass over data
# already written. The CPU time of every node process (utime + stime from
# /proc/PID/stat) and the nodes' `strata_server_ec_bytes_encoded_total`
# (/metrics) are read when the pass starts and when the number of
# stripes has not changed for 5 s; the figure is encoded bytes per
# CPU-second, over all the node processes (the encoding nodes read,
# encode, fsync and send the shards; the others receive and fsync them and
# install the stripe indexes, dropping their replicas) and per encoding
# node (its own bytes over its own CPU time, which also includes what it
# received). Segments must seal to be encoded: SEG (default 1MiB) small
# enough that the data fills many segments per row (the coder then gets
# SEG/K bytes per shard; 1 MiB with the default 64 MiB segments). An
# idle baseline (CPU-seconds per second of the nodes doing
# nothing but heartbeats and their ticks, before the pass) is printed too.
#
# Usage: bench/ec-encode.sh [K+M ...]
# With PERF_OUT=FILE, `perf record -g` samples node 0 (an encoding node)
# through the pass, into FILE (read it with `perf report -i FILE`).
#
#   (env: OBJECTS, SIZE, SEG, BASE, STRATA, PERF_OUT)
set -euo pipefail
export STRATA_CLUSTER_SECRET=${STRATA_CLUSTER_SECRET:-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')}
# /metrics is a control endpoint: the nodes get an admin token.
export STRATA_ADMIN_TOKEN=${STRATA_ADMIN_TOKEN:-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')}
cd "$(dirname "$0")/.."
STRATA=${STRATA:-target/release/strata}
OBJECTS=${OBJECTS:-25000}
SIZE=${SIZE:-16KiB}
SEG=${SEG:-1MiB}
BASE=${BASE:-23000}
CODES=("$@")
[ ${#CODES[@]} -gt 0 ] || CODES=(4+2 6+3 10+4)
[ -x "$STRATA" ] || { echo "build first: cargo build --release -p strata-cli" >&2; exit 1; }
TCK=$(getconf CLK_TCK)
trap 'echo "bench/ec-encode.sh: failed at line $LINENO" >&2' ERR
json() { python3 -c "import json,sys; d=json.load(sys.stdin); print($1)"; }
st() { "$STRATA" cluster status --meta "$META" --json; }
# CPU seconds of each node process, space-separated.
cpu() {
  for p in "${NODE_PIDS[@]}"; do
    awk -v t="$TCK" '{ sub(/^.*\) /, ""); print ($12 + $13) / t }' "/proc/$p/stat"
  done | paste -sd' '
}
# strata_server_ec_bytes_encoded_total of each node, space-separated; a
# node that does not answer stops the run with its log.
enc() {
  local i v
  for i in "${!ADDRS[@]}"; do
    v=$(curl -sf -m 30 -H "Authorization: Bearer $STRATA_ADMIN_TOKEN" "http://${ADDRS[$i]}/metrics" \
      | awk '$1 == "strata_server_ec_bytes_encoded_total" { print $2 }') || true
    if [ -z "$v" ]; then
      echo "node $i (${ADDRS[$i]}) did not answer /metrics; its log:" >&2
      tail -5 "$WORK/n$i.log" >&2
      return 1
    fi
    echo "$v"
  done | paste -sd' '
}

run() { # K+M
  local CODE=$1 K=${1%+*} M=${1#*+}
  local N=$((K + M))
  WORK=$(mktemp -d /dev/shm/strata-ec-enc.XXXXXX 2>/dev/null || mktemp -d)
  PIDS=(); NODE_PIDS=(); ADDRS=()
  cleanup() { for p in "${PIDS[@]}"; do kill -9 "$p" 2>/dev/null || true; done; rm -rf "$WORK"; }
  trap cleanup EXIT INT TERM
  META=127.0.0.1:$BASE
  start_meta() {
    "$STRATA" meta --listen "$META" --data "$WORK/meta" --initial-nodes "$N" \
      --ec "$CODE" --ec-after "$1" 2>>"$WORK/meta.log" & META_PID=$!; PIDS+=($META_PID)
  }
  start_meta 1h
  for i in $(seq 0 $((N-1))); do
    ADDRS+=("127.0.0.1:$((BASE+1+i))")
    "$STRATA" server --meta "$META" --listen "${ADDRS[$i]}" --data "$WORK/n$i" \
      --segment-size "$SEG" --scrub-every 0 2>"$WORK/n$i.log" & PIDS+=($!); NODE_PIDS+=($!)
  done
  until st 2>/dev/null | json 'd["table_version"]' | grep -q 1; do sleep 0.2; done
  "$STRATA" load --meta "$META" --objects "$OBJECTS" --size "$SIZE" --concurrency 32 >/dev/null
  # Idle baseline: 10 s of nodes doing nothing but their ticks.
  local C0 C1
  C0=$(cpu); sleep 10; C1=$(cpu)
  local IDLE
  IDLE=$(python3 -c "a='$C0'.split(); b='$C1'.split(); print(round((sum(map(float,b))-sum(map(float,a)))/10, 3))")
  kill -9 "$META_PID"; wait "$META_PID" 2>/dev/null || true
  local E0 T0
  C0=$(cpu); E0=$(enc); T0=$(date +%s.%N)
  local PERF_PID=
  if [ -n "${PERF_OUT:-}" ]; then
    perf record -g -o "$PERF_OUT" -p "${NODE_PIDS[0]}" 2>>"$WORK/perf.log" & PERF_PID=$!; PIDS+=($PERF_PID)
  fi
  start_meta 1s
  until st >/dev/null 2>&1; do sleep 0.2; done
  local last=-1 now
  while :; do
    sleep 5
    now=$(st | json 'd["ec_segments"]')
    [ "$now" = "$last" ] && [ "$now" -gt 0 ] && break
    last=$now
  done
  local E1 T1
  C1=$(cpu); E1=$(enc); T1=$(date +%s.%N)
  if [ -n "$PERF_PID" ]; then kill -INT "$PERF_PID"; wait "$PERF_PID" 2>/dev/null || true; fi
  python3 - "$CODE" "$N" "$C0" "$C1" "$E0" "$E1" "$T0" "$T1" "$IDLE" <<'PY'
import sys
code, n, c0, c1, e0, e1, t0, t1, idle = sys.argv[1:]
c = [float(b) - float(a) for a, b in zip(c0.split(), c1.split())]
e = [int(b) - int(a) for a, b in zip(e0.split(), e1.split())]
wall = float(t1) - float(t0) - 5  # the last 5 s only confirmed the end
per = [ei / ci / 1e6 for ei, ci in zip(e, c) if ei > 0 and ci > 0]
print(f"{code},{n},{sum(e)},{sum(c):.1f},{wall:.1f},{sum(e)/max(sum(c),1e-9)/1e6:.1f},"
      f"{min(per):.1f}-{max(per):.1f},{idle}")
PY
  cleanup; trap - EXIT
}

echo "code,nodes,bytes_encoded,node_cpu_s,pass_wall_s,mb_per_node_cpu_s,mb_per_cpu_s_each_encoding_node,idle_cpu_s_per_s"
for c in "${CODES[@]}"; do run "$c"; done
