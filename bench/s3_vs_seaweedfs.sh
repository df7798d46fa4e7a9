#!/usr/bin/env bash
# Strata's S3 API vs SeaweedFS's S3 gateway, side by side on this machine,
# both driven by minio `warp` (PUT, GET and mixed), and the whole table
# printed as markdown at the end.
#
#   bench/s3_vs_seaweedfs.sh WEED_BINARY WARP_BINARY [STRATA_BINARY]
#
# WEED_BINARY is a `weed` you built yourself and WARP_BINARY a `warp`
# (`go install github.com/minio/warp@VERSION`); this script builds neither.
# Everything listens on 127.0.0.1 only and keeps its data under one
# temporary directory on the same filesystem.
#
# For each repetition (REPS) and object size (SIZES), a fresh Strata (one
# `strata server` with --s3-listen: a cluster of one) and a fresh SeaweedFS
# (`weed server -s3`: master, volume server, filer on its default leveldb
# store and S3 gateway in one process, with an access key, so both check
# SigV4) are started; then for each warp benchmark (OPS: put, get, mixed)
# warp runs against each, in alternating order (odd repetitions Strata
# first). Each warp run uses its own bucket and does not clear it
# (--noclear); get and mixed first upload OBJECTS objects (not timed).
# warp's defaults otherwise: signed payloads (x-amz-content-sha256 of the
# body, which both servers verify), one prefix per client thread; mixed
# is 45% GET, 30% HEAD (STAT), 15% PUT, 10% DELETE.
#
# A Strata PUT returns after fdatasync of the object and a durable commit
# of its listing-index entry; SeaweedFS as shipped syncs neither (its
# volume server and filer write to the page cache). The table is of
# objects/s (for mixed, all operations) and warp's latency percentiles.
#
# With PIN=1 (the default on 2 or more cores) both servers run on core 1
# (`taskset -c 1`: Strata's runtime and Go's GOMAXPROCS see one core) and
# warp on core 0, as bench/node_vs_seaweedfs.sh places them.
#
# Knobs (environment): DUR warp duration per run (20s), REPS (1), CONC
# (warp --concurrent, 16), SIZES ("1KiB 64KiB"), OPS ("put get mixed"),
# OBJECTS (2500), ports SPORT (18490, Strata S3; 18400/18401 meta and
# node), WPORT (19333, SeaweedFS S3; 19334 master, 19080 volume, 19888
# filer).
set -euo pipefail
WEED=${1:?usage: $0 WEED_BINARY WARP_BINARY [STRATA_BINARY]}
WARP=${2:?usage: $0 WEED_BINARY WARP_BINARY [STRATA_BINARY]}
STRATA=${3:-target/release/strata}
DUR=${DUR:-20s}
REPS=${REPS:-1}
CONC=${CONC:-16}
SIZES=${SIZES:-"1KiB 64KiB"}
OPS=${OPS:-"put get mixed"}
OBJECTS=${OBJECTS:-2500}
SPORT=${SPORT:-18490}
WPORT=${WPORT:-19333}
ACCESS=warpbench
SECRET=warpbench-secret-0123456789
[ -x "$WARP" ] || { echo "not an executable: $WARP" >&2; exit 2; }
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
pin_cores
setup_work strata-s3-vs-weed

cat >"$WORK/weed-s3.json" <<EOF
{"identities": [{"name": "bench",
  "credentials": [{"accessKey": "$ACCESS", "secretKey": "$SECRET"}],
  "actions": ["Admin", "Read", "List", "Tagging", "Write"]}]}
EOF

# CPU seconds (user + system, all threads) a process has used so far.
cpu_of() {
  awk -v hz="$(getconf CLK_TCK)" '{ printf "%.3f\n", ($14 + $15) / hz }' "/proc/$1/stat" 2>/dev/null || echo 0
}

start_servers() {
  local d="$WORK/data"
  rm -rf "$d"
  mkdir -p "$d/weed" "$d/strata"
  # No RAM object cache, like SeaweedFS: both read through the page cache.
  STRATA_ROOT_ACCESS_KEY=$ACCESS STRATA_ROOT_SECRET_KEY=$SECRET \
    "${SRV[@]}" "$STRATA" server --data "$d/strata" --listen 127.0.0.1:$((SPORT - 89)) \
    --meta-listen 127.0.0.1:$((SPORT - 90)) --s3-listen 127.0.0.1:"$SPORT" --ram-cache 0 \
    >"$WORK/strata.log" 2>&1 &
  PIDS+=($!)
  STRATA_PID=$!
  "${SRV[@]}" "$WEED" server -ip=127.0.0.1 -ip.bind=127.0.0.1 -dir="$d/weed" \
    -master.port=$((WPORT + 1)) -volume.port=$((WPORT - 253)) -filer.port=$((WPORT + 555)) \
    -s3 -s3.port="$WPORT" -s3.config="$WORK/weed-s3.json" \
    -master.volumeSizeLimitMB=1024 -volume.max=32 >"$WORK/weed.log" 2>&1 &
  PIDS+=($!)
  WEED_PID=$!
  for _ in $(seq 1 120); do
    # An unsigned request answers 403 once the S3 APIs are up.
    if [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$SPORT/")" = 403 ] &&
      [ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$WPORT/")" = 403 ]; then
      return 0
    fi
    sleep 0.5
  done
  log "servers did not start"
  tail -n 5 "$WORK"/*.log >&2
  exit 1
}

# warp_run NAME PID OP HOST SIZE: one measured warp run; its analysis in
# $RES/NAME.txt, the load average before and after in $RES/NAME.load, the
# server's CPU seconds over the whole run (upload of get/mixed included)
# in $RES/NAME.cpu.
warp_run() {
  local f=$1 pid=$2 op=$3 host=$4 size=$5
  local l0 l1 c0 c1
  local args=(--host "$host" --access-key "$ACCESS" --secret-key "$SECRET" --obj.size "$size"
    --duration "$DUR" --concurrent "$CONC" --bucket "$(echo "b-$f" | tr 'A-Z' 'a-z')" --noclear --no-color
    --benchdata "$RES/$f")
  [ "$op" = put ] || args+=(--objects "$OBJECTS")
  l0=$(cut -d' ' -f1 /proc/loadavg)
  c0=$(cpu_of "$pid")
  if ! "${GEN[@]}" "$WARP" "$op" "${args[@]}" >"$RES/$f.out" 2>&1; then
    log "FAILED $f: $(tail -n 3 "$RES/$f.out")"
    return 0
  fi
  c1=$(cpu_of "$pid")
  l1=$(cut -d' ' -f1 /proc/loadavg)
  echo "$l0 $l1" >"$RES/$f.load"
  echo "$c0 $c1" >"$RES/$f.cpu"
  # warp up to 1.3 writes its operations as CSV, 1.4 and later as JSON.
  local data="$RES/$f.csv.zst"
  [ -e "$data" ] || data="$RES/$f.json.zst"
  "$WARP" analyze --no-color --analyze.v "$data" >"$RES/$f.txt" 2>&1 || true
  local total
  total=$(grep -A2 -E 'Cluster Total|Report: Total' "$RES/$f.txt" | grep -m1 -E 'Cluster Total|Average:' || true)
  [ -n "$total" ] || total=$(grep -m1 'Average:' "$RES/$f.txt" || true)
  log "$f: $(echo "$total" | sed 's/^[* ]*//') (load $l0 -> $l1)"
}

log "work dir $WORK; load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "start $(date -u '+%Y-%m-%d %H:%M:%S') UTC, load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores, PIN=$PIN" >"$RES/meta"

for rep in $(seq 1 "$REPS"); do
  for size in $SIZES; do
    log "repetition $rep, $size: fresh Strata and SeaweedFS"
    start_servers
    for op in $OPS; do
      k="$op-$size-$rep"
      if [ $((rep % 2)) = 1 ]; then
        warp_run "strata-$k" "$STRATA_PID" "$op" 127.0.0.1:"$SPORT" "$size"
        warp_run "weed-$k" "$WEED_PID" "$op" 127.0.0.1:"$WPORT" "$size"
      else
        warp_run "weed-$k" "$WEED_PID" "$op" 127.0.0.1:"$WPORT" "$size"
        warp_run "strata-$k" "$STRATA_PID" "$op" 127.0.0.1:"$SPORT" "$size"
      fi
    done
    stop_servers
  done
done
echo "end $(date -u '+%Y-%m-%d %H:%M:%S') UTC, load average $(cut -d' ' -f1-3 /proc/loadavg)" >>"$RES/meta"

python3 - "$RES" "$SIZES" "$OPS" "$REPS" "$DUR" "$CONC" <<'EOF'
import os, re, statistics, sys
res, sizes, ops, reps, dur, conc = sys.argv[1], sys.argv[2].split(), sys.argv[3].split(), int(sys.argv[4]), sys.argv[5], sys.argv[6]

def ms(s):
    m = re.match(r"([\d.]+)(ns|µs|us|ms|s)$", s)
    if not m:
        return None
    return float(m.group(1)) * {"ns": 1e-6, "µs": 1e-3, "us": 1e-3, "ms": 1, "s": 1000}[m.group(2)]

def load(name):
    p = os.path.join(res, name + ".txt")
    if not os.path.exists(p):
        return None
    t = open(p).read()
    # The analysis of warp up to 1.3 ("Operation: PUT (N)", "Cluster
    # Total: ...") or of 1.4 and later ("Report: PUT (N reqs)", a mixed
    # run's sum in its "Report: Total" block).
    tot = re.search(r"Cluster Total: [\d.]+ \w+/s, ([\d.]+) obj/s", t)
    if not tot and "Report: Total" in t:
        tot = re.search(r"Average: [\d.]+ \w+/s, ([\d.]+) obj/s", t[t.find("Report: Total"):])
    if not tot:
        tot = re.search(r"Average: [\d.]+ \w+/s, ([\d.]+) obj/s", t)
    if not tot:
        return None
    # Latency of the PUT or GET block (for mixed, GET's).
    op = "PUT" if "-put-" in name else "GET"
    heads = [h for h in ("Operation: " + op, "Report: " + op + " (") if h in t]
    block = t[t.find(heads[0]):] if heads else t
    lat = re.search(r"Avg: (\S+), 50%: (\S+), 90%: (\S+), 99%: (\S+),", block)
    errs = sum(int(x) for x in re.findall(r"Errors: (\d+)", t))
    ops_done = [(o, n) for o, n in re.findall(r"(?:Operation|Report): (\w+) \((\d+)(?: reqs)?\)", t) if o != "Total"]
    c = open(os.path.join(res, name + ".cpu")).read().split()
    return {"ops": float(tot.group(1)),
            "p50": ms(lat.group(2).rstrip(",")) if lat else None,
            "p99": ms(lat.group(4).rstrip(",")) if lat else None,
            "cpu_s": float(c[1]) - float(c[0]),
            "n": sum(int(n) for _, n in ops_done),
            "err": errs,
            "load": [float(x) for x in open(os.path.join(res, name + ".load")).read().split()]}

def med(prog, op, size):
    runs = [load(f"{prog}-{op}-{size}-{i}") for i in range(1, reps + 1)]
    runs = [r for r in runs if r]
    if not runs:
        return None
    def m(k):
        v = [r[k] for r in runs if r[k] is not None]
        return statistics.median(v) if v else None
    return {"ops": m("ops"), "p50": m("p50"), "p99": m("p99"), "err": sum(r["err"] for r in runs),
            "cpu": m("cpu_s"), "runs": [r["ops"] for r in runs], "load": [x for r in runs for x in r["load"]]}

def f_ops(m):
    return "failed" if m is None else f"{m['ops']:,.0f}"

def f_ms(v):
    return "" if v is None else f"{v:.1f} ms"

print(open(os.path.join(res, "meta")).read().strip().replace("\n", "; "))
print()
print(f"warp, concurrency {conc}, {dur} per run, median of {reps} run(s); objects/s (mixed: all its operations), latency p50/p99 of PUT, GET or (mixed) GET:")
print()
print("| load | Strata obj/s | p50 | p99 | SeaweedFS obj/s | p50 | p99 | Strata / SeaweedFS |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
loads, errs, raw = [], 0, []
for size in sizes:
    for op in ops:
        s, w = med("strata", op, size), med("weed", op, size)
        for name, m in (("Strata", s), ("SeaweedFS", w)):
            if m:
                loads += m["load"]
                errs += m["err"]
                raw.append(f"{op.upper()} {size} {name}: " + ", ".join(f"{x:,.0f}" for x in m["runs"]))
        r = "" if s is None or w is None or not w["ops"] else f"**{s['ops'] / w['ops']:.2f}x**"
        print(f"| {op.upper()} {size} | {f_ops(s)} | {f_ms(s and s['p50'])} | {f_ms(s and s['p99'])} | {f_ops(w)} | {f_ms(w and w['p50'])} | {f_ms(w and w['p99'])} | {r} |")
print()
if loads:
    print(f"Load average (1 min) at the start and end of the runs: min {min(loads):.2f}, median {statistics.median(loads):.2f}, max {max(loads):.2f}; errors warp counted: {errs}.")
print()
print("Server CPU seconds per run (user + system, all threads, the whole warp run including the upload before get and mixed):")
print()
for size in sizes:
    for op in ops:
        s, w = med("strata", op, size), med("weed", op, size)
        cs = "" if s is None else "%.1f s" % s["cpu"]
        cw = "" if w is None else "%.1f s" % w["cpu"]
        print(f"- {op.upper()} {size}: Strata {cs}, SeaweedFS {cw}")
print()
print("Every run (objects/s):")
print()
for line in raw:
    print(f"- {line}")
EOF
