# Shared by the side-by-side benchmark scripts (sourced, not run): server
# process bookkeeping, logging and one measured `strata bench http` run.
# The sourcing script sets STRATA (the binary), RES (results directory),
# DUR (seconds per run) and optionally GEN (a command prefix for the load
# generator, e.g. (taskset -c 0)).

PIDS=()
declare -p GEN >/dev/null 2>&1 || GEN=()

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
