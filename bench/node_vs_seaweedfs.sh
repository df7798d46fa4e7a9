#!/usr/bin/env bash
# Strata node vs SeaweedFS (master + volume server), side by side on this
# machine, driven by the same load generator (`strata bench http`), and the
# whole table printed as markdown at the end.
#
#   bench/node_vs_seaweedfs.sh WEED_BINARY [STRATA_BINARY]
#
# WEED_BINARY is a `weed` you built yourself (this script does not build
# it). Everything listens on 127.0.0.1 only and keeps its data under one
# temporary directory on the same filesystem.
#
# For each repetition (REPS) and object size (SIZES) a fresh Strata node and
# a fresh SeaweedFS (master + volume server, volumes grown before the first
# upload) are started; then for each concurrency (CONCS):
#   PUT  Strata | SeaweedFS as it ships (no fsync) | SeaweedFS ?fsync=true
#   GET  Strata | SeaweedFS        (each over a prefill of its own objects)
# in alternating order (odd repetitions Strata first, even ones SeaweedFS
# first). The table shows the median of the REPS runs of each cell. A
# Strata PUT returns after fdatasync (group commit), so "SeaweedFS fsync" is
# the durable-against-durable comparison. A SeaweedFS PUT is what its own
# `weed benchmark` does: one /dir/assign (with dataSize) then one upload,
# timed together.
#
# With PIN=1 (the default on a machine of 2 or more cores) the servers run
# on core 1 (`taskset -c 1`: Strata's runtime and Go's GOMAXPROCS both see
# one core) and the load generator on core 0, so each server has one whole
# core and the load generator's own CPU does not count against either; PIN=0
# lets the kernel place everything (all three compete for every core).
#
# Before the table, the load generator is run once per size against a
# trivial server that stores nothing (`strata bench http --serve-null`) to
# show its own ceiling.
#
# Knobs (environment): DUR seconds per run (5), REPS (3), CONCS ("16 64"),
# SIZES ("1KiB 64KiB"), PREFILL_1KiB (20000), PREFILL_64KiB (4000), ports
# SPORT (18490), MPORT (19334), VPORT (18084). Default settings take about
# 8.5 minutes (under 10 on this 2-core machine).
set -euo pipefail
WEED=${1:?usage: $0 WEED_BINARY [STRATA_BINARY]}
STRATA=${2:-target/release/strata}
DUR=${DUR:-5}
REPS=${REPS:-3}
CONCS=${CONCS:-"16 64"}
SIZES=${SIZES:-"1KiB 64KiB"}
PREFILL_1KiB=${PREFILL_1KiB:-20000}
PREFILL_64KiB=${PREFILL_64KiB:-4000}
SPORT=${SPORT:-18490}
MPORT=${MPORT:-19334}
VPORT=${VPORT:-18084}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
pin_cores
setup_work strata-vs-weed


start_servers() {
  local d="$WORK/data"
  rm -rf "$d"
  mkdir -p "$d/weed/m" "$d/weed/v" "$d/strata"
  # -volumeSizeLimitMB 1024: a few GB per run at most, so 8 pre-grown volumes
  # hold every run without growing mid-measurement.
  "${SRV[@]}" "$WEED" master -ip=127.0.0.1 -ip.bind=127.0.0.1 -port="$MPORT" -mdir="$d/weed/m" \
    -volumeSizeLimitMB=1024 -defaultReplication=000 >"$WORK/master.log" 2>&1 &
  PIDS+=($!)
  WEED_PIDS=$!
  "${SRV[@]}" "$WEED" volume -ip=127.0.0.1 -ip.bind=127.0.0.1 -port="$VPORT" -dir="$d/weed/v" \
    -mserver=127.0.0.1:"$MPORT" -max=32 >"$WORK/volume.log" 2>&1 &
  PIDS+=($!)
  WEED_PIDS="$WEED_PIDS,$!"
  # No RAM object cache, like SeaweedFS: both read through the page cache.
  "${SRV[@]}" "$STRATA" server --data "$d/strata" --listen 127.0.0.1:"$SPORT" --ram-cache 0 \
    >"$WORK/strata.log" 2>&1 &
  PIDS+=($!)
  STRATA_PIDS=$!
  local ok=
  for _ in $(seq 1 120); do
    if curl -fs "http://127.0.0.1:$SPORT/healthz" >/dev/null 2>&1 &&
      curl -fs "http://127.0.0.1:$MPORT/vol/grow?count=8" 2>/dev/null | grep -q '"count"'; then
      ok=1
      break
    fi
    sleep 0.5
  done
  [ -n "$ok" ] || { log "servers did not start"; tail -5 "$WORK"/*.log >&2; exit 1; }
  for _ in $(seq 1 120); do
    curl -fs "http://127.0.0.1:$MPORT/dir/assign?dataSize=1" 2>/dev/null | grep -q '"fid"' && return 0
    sleep 0.5
  done
  log "SeaweedFS gave no writable volume"
  tail -5 "$WORK"/*.log >&2
  exit 1
}

prefill_of() { if [ "$1" = 1KiB ]; then echo "$PREFILL_1KiB"; else echo "$PREFILL_64KiB"; fi; }

log "work dir $WORK; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "start $(date -u '+%Y-%m-%d %H:%M:%S') UTC, load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores, PIN=$PIN" >"$RES/meta"

# The load generator's own ceiling: the same runs against a server that
# stores nothing (placed like the real servers).
NPORT=$((SPORT + 1))
for size in $SIZES; do
  "${SRV[@]}" "$STRATA" bench http --serve-null 127.0.0.1:"$NPORT" --sizes "$size" >"$WORK/null.log" 2>&1 &
  PIDS+=($!)
  for _ in $(seq 1 50); do curl -fs "http://127.0.0.1:$NPORT/" >/dev/null 2>&1 && break; sleep 0.2; done
  run "null-put-$size-16" --addr 127.0.0.1:"$NPORT" --sizes "$size" --read-fraction 0 --prefill 0 --concurrency 16
  run "null-get-$size-16" --addr 127.0.0.1:"$NPORT" --sizes "$size" --read-fraction 1 --prefill 1000 --concurrency 16
  stop_servers
done

for rep in $(seq 1 "$REPS"); do
  for size in $SIZES; do
    log "repetition $rep, $size: fresh Strata and SeaweedFS"
    start_servers
    pre=$(prefill_of "$size")
    for c in $CONCS; do
      S=(--addr 127.0.0.1:"$SPORT" --cpu-pids "$STRATA_PIDS" --sizes "$size" --concurrency "$c")
      W=(--seaweedfs 127.0.0.1:"$MPORT" --cpu-pids "$WEED_PIDS" --sizes "$size" --concurrency "$c")
      S_PUT=("${S[@]}" --bucket "put$c" --read-fraction 0 --prefill 0)
      W_PUT=("${W[@]}" --read-fraction 0 --prefill 0)
      S_GET=("${S[@]}" --bucket "get$c" --read-fraction 1 --prefill "$pre")
      W_GET=("${W[@]}" --read-fraction 1 --prefill "$pre")
      k="$size-$c-$rep"
      if [ $((rep % 2)) = 1 ]; then
        run "strata-put-$k" "${S_PUT[@]}"
        run "weed-put-$k" "${W_PUT[@]}"
        run "weedfsync-put-$k" "${W_PUT[@]}" --seaweedfs-fsync
        run "strata-get-$k" "${S_GET[@]}"
        run "weed-get-$k" "${W_GET[@]}"
      else
        run "weedfsync-put-$k" "${W_PUT[@]}" --seaweedfs-fsync
        run "weed-put-$k" "${W_PUT[@]}"
        run "strata-put-$k" "${S_PUT[@]}"
        run "weed-get-$k" "${W_GET[@]}"
        run "strata-get-$k" "${S_GET[@]}"
      fi
    done
    stop_servers
  done
done
echo "end $(date -u '+%Y-%m-%d %H:%M:%S') UTC, load average $(cut -d' ' -f1-3 /proc/loadavg)" >>"$RES/meta"

python3 - "$RES" "$SIZES" "$CONCS" "$REPS" "$DUR" <<'EOF'
import json, os, statistics, sys
res, sizes, concs, reps, dur = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), int(sys.argv[4]), sys.argv[5]

def load(name):
    p = os.path.join(res, name + ".json")
    if not os.path.exists(p):
        return None
    r = json.load(open(p))
    s = r["put"] if r["put"]["objects"] else r["get"]
    la = open(os.path.join(res, name + ".load")).read().split()
    return {"ops": s["objects_per_s"], "p50": s["p50_us"], "p99": s["p99_us"],
            "cpu": r.get("server_cpu_us_per_object"),
            "err": r["put"]["errors"] + r["get"]["errors"], "load": [float(x) for x in la]}

def med(prog, op, size, c):
    runs = [load(f"{prog}-{op}-{size}-{c}-{i}") for i in range(1, reps + 1)]
    runs = [r for r in runs if r]
    if not runs:
        return None
    return {"ops": statistics.median(r["ops"] for r in runs),
            "p50": statistics.median(r["p50"] for r in runs),
            "p99": statistics.median(r["p99"] for r in runs),
            "cpu": statistics.median(r["cpu"] for r in runs) if all(r["cpu"] is not None for r in runs) else None,
            "runs": [r["ops"] for r in runs], "err": sum(r["err"] for r in runs),
            "load": [x for r in runs for x in r["load"]]}

def ms(us):
    return f"{us / 1000:.2f} ms"

def ops(m):
    return "failed" if m is None else f"{m['ops']:,.0f}"

def lat(m, k):
    return "" if m is None else ms(m[k])

def ratio(a, b):
    return "" if a is None or b is None or b["ops"] == 0 else f"**{a['ops'] / b['ops']:.2f}x**"

print(open(os.path.join(res, "meta")).read().strip().replace("\n", "; "))
print()
print(f"Load generator alone against a server that stores nothing (`strata bench http --serve-null`, placed like the servers; concurrency 16, {dur} s, one run):")
print()
print("| load | requests/s | p50 | p99 |")
print("| --- | ---: | ---: | ---: |")
for size in sizes:
    for op in ("put", "get"):
        r = load(f"null-{op}-{size}-16")
        if r:
            print(f"| {op.upper()} {size} | {r['ops']:,.0f} | {ms(r['p50'])} | {ms(r['p99'])} |")
print()
print(f"Median of {reps} runs of {dur} s each (objects/s, latency per request):")
print()
print("| load | conc | Strata obj/s | p50 | p99 | SeaweedFS obj/s | p50 | p99 | SeaweedFS fsync obj/s | p50 | p99 | Strata / SeaweedFS | Strata / SeaweedFS fsync |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
loads, errs, raw = [], 0, []
for size in sizes:
    for c in concs:
        for op in ("put", "get"):
            s, w = med("strata", op, size, c), med("weed", op, size, c)
            f = med("weedfsync", op, size, c) if op == "put" else None
            for name, m in (("Strata", s), ("SeaweedFS", w), ("SeaweedFS fsync", f)):
                if m:
                    loads += m["load"]
                    errs += m["err"]
                    raw.append(f"{op.upper()} {size} c{c} {name}: " + ", ".join(f"{x:,.0f}" for x in m["runs"]))
            fcols = f"{ops(f)} | {lat(f, 'p50')} | {lat(f, 'p99')}" if op == "put" else "— | | "
            print(f"| {op.upper()} {size} | {c} | {ops(s)} | {lat(s, 'p50')} | {lat(s, 'p99')} | {ops(w)} | {lat(w, 'p50')} | {lat(w, 'p99')} | {fcols} | {ratio(s, w)} | {ratio(s, f) if op == 'put' else ''} |")
print()
print("Server CPU per object (user + system time of the server processes in the measured phase, all threads; for SeaweedFS master + volume server), median of the runs: the cost of each load to the server whatever else ran on the machine.")
print()
print("| load | conc | Strata us/object | SeaweedFS us/object | SeaweedFS fsync us/object | SeaweedFS / Strata | SeaweedFS fsync / Strata |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
def cpu(m):
    return "" if m is None or m["cpu"] is None else f"{m['cpu']:.1f}"
def cratio(a, b):
    return "" if a is None or b is None or a["cpu"] is None or b["cpu"] is None or a["cpu"] == 0 else f"{b['cpu'] / a['cpu']:.2f}x"
for size in sizes:
    for c in concs:
        for op in ("put", "get"):
            s, w = med("strata", op, size, c), med("weed", op, size, c)
            f = med("weedfsync", op, size, c) if op == "put" else None
            print(f"| {op.upper()} {size} | {c} | {cpu(s)} | {cpu(w)} | {cpu(f) if op == 'put' else '—'} | {cratio(s, w)} | {cratio(s, f) if op == 'put' else ''} |")
print()
if loads:
    print(f"Load average (1 min) at the start and end of the measured runs: min {min(loads):.2f}, median {statistics.median(loads):.2f}, max {max(loads):.2f}; failed requests in all runs: {errs}.")
print()
print("Every run (objects/s):")
print()
for line in raw:
    print(f"- {line}")
EOF
