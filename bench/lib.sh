# Shared by the side-by-side benchmark scripts (sourced, not run): server
# process bookkeeping, logging and one measured `strata bench http` run.
# The sourcing script sets STRATA (the binary), WEED, DUR (seconds per
# run) and optionally GEN (a command prefix for the load generator, e.g.
# (taskset -c 0)); setup_work makes WORK and RES.

PIDS=()
declare -p GEN >/dev/null 2>&1 || GEN=()

# The root key of the Strata servers the scripts start: the object API
# takes no anonymous requests, and `strata bench http` sends a token of
# the root key in its environment (docs/security.md).
export STRATA_ROOT_ACCESS_KEY=${STRATA_ROOT_ACCESS_KEY:-benchroot}
export STRATA_ROOT_SECRET_KEY=${STRATA_ROOT_SECRET_KEY:-benchroot-secret-0123456789}

# bearer: curl's header with a token of that key.
bearer() { echo "Authorization: Bearer $("$STRATA" key token)"; }

# pin_cores: SRV and GEN, the command prefixes that put the servers on
# core 1 and the load generator on core 0 (PIN=0, or a one-core machine:
# no pinning).
pin_cores() {
  if [ "$(nproc)" -ge 2 ]; then PIN=${PIN:-1}; else PIN=0; fi
  if [ "$PIN" = 1 ]; then
    command -v taskset >/dev/null || { echo "PIN=1 needs taskset (util-linux)" >&2; exit 2; }
    SRV=(taskset -c 1)
    GEN=(taskset -c 0)
  else
    SRV=()
    GEN=()
  fi
}

stop_servers() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]}"; do wait "$p" 2>/dev/null || true; done
  PIDS=()
}

log() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }

# run FILE ARGS...: one measured run, its JSON report in $RES/FILE.json and
# the load average before and after in $RES/FILE.load.
run() {
  local f=$1
  shift
  local l0 l1
  # Each run starts on an idle device: what earlier runs left dirty in the
  # page cache (SeaweedFS does not sync its writes: gigabytes after a
  # 64 KiB PUT run) is written back first, not during the next server's
  # run. SETTLE=0 skips it.
  if [ "${SETTLE:-1}" = 1 ]; then sync; fi
  l0=$(cut -d' ' -f1 /proc/loadavg)
  "${GEN[@]}" "$STRATA" bench http --duration "$DUR" --json "$@" >"$RES/$f.json" 2>"$RES/$f.err" || {
    log "FAILED $f: $(tail -2 "$RES/$f.err")"
    rm -f "$RES/$f.json"
    return 0
  }
  l1=$(cut -d' ' -f1 /proc/loadavg)
  echo "$l0 $l1" >"$RES/$f.load"
  log "$f: $(python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
s = r["put"] if r["put"]["objects"] else r["get"]
print("%.0f obj/s, p99 %d us, %d errors" % (s["objects_per_s"], s["p99_us"], r["put"]["errors"] + r["get"]["errors"]))
' "$RES/$f.json") (load $l0 -> $l1)"
}

# setup_work NAME: checks $WEED and $STRATA and the tools the scripts use,
# makes the work directory $WORK (servers stopped and it removed at exit)
# and the results directory $RES in it.
setup_work() {
  for b in "$WEED" "$STRATA"; do
    [ -x "$b" ] || { echo "not an executable: $b" >&2; exit 2; }
  done
  command -v curl >/dev/null || { echo "needs curl" >&2; exit 2; }
  command -v python3 >/dev/null || { echo "needs python3 (for the table)" >&2; exit 2; }
  WORK=$(mktemp -d "${TMPDIR:-/tmp}/$1.XXXXXX")
  RES="$WORK/results"
  mkdir -p "$RES"
  trap 'stop_servers; rm -rf "$WORK"' EXIT
  # A Strata store stops preparing space (zeros ahead of its needles) on
  # a file system with less than 1/16 free, and its PUTs then append
  # (docs/store-format.md, "Prepared space"): a run that writes the file
  # system down past that line measures another store. Say so up front.
  local free size need
  free=$(df -Pk "$WORK" | awk 'NR == 2 {print $4}')
  size=$(df -Pk "$WORK" | awk 'NR == 2 {print $2}')
  need=$((size / 16 + ${BENCH_WRITES_GB:-12} * 1024 * 1024))
  if [ "$free" -lt "$need" ]; then
    log "warning: $((free / 1024 / 1024)) GB free under $WORK; the runs write about ${BENCH_WRITES_GB:-12} GB," \
      "and Strata stops preparing space below $((size / 16 / 1024 / 1024)) GB free: free some space for figures comparable to docs/benchmarks.md"
  fi
}

# start_strata_cluster BIN: a metadata service (replication 3) on $META and
# three `BIN server --meta` nodes on $BASE+1..3 with no RAM object cache
# (they read through the page cache, like SeaweedFS), each in a fresh
# directory under $WORK/strata; returns once every node answers 404 for an
# absent object (the first table exists). Sets NODES (their addresses) and
# STRATA_PIDS (comma-separated, for --cpu-pids).
start_strata_cluster() {
  local bin=$1 d="$WORK/strata"
  rm -rf "$d"
  mkdir -p "$d"
  "$bin" meta --listen "$META" --initial-nodes 3 --replication 3 --data "$d/meta" \
    >"$WORK/meta.log" 2>&1 &
  PIDS+=($!)
  NODES=()
  STRATA_PIDS=""
  for i in 1 2 3; do
    local a=127.0.0.1:$((BASE + i))
    "$bin" server --meta "$META" --listen "$a" --data "$d/n$i" --ram-cache 0 \
      >"$WORK/node$i.log" 2>&1 &
    PIDS+=($!)
    STRATA_PIDS="${STRATA_PIDS:+$STRATA_PIDS,}$!"
    NODES+=("$a")
  done
  for _ in $(seq 1 120); do
    local all=1
    for a in "${NODES[@]}"; do
      [ "$(curl -s -o /dev/null -w '%{http_code}' -H "$(bearer)" "http://$a/warm/up")" = 404 ] || all=
    done
    [ -n "$all" ] && return 0
    sleep 0.5
  done
  log "Strata cluster of $bin did not start"
  tail -5 "$WORK"/*.log >&2
  exit 1
}
