#!/usr/bin/env bash
# One 5-second run of PUTs (64 KiB, or SIZE) against a fresh `strata server`, the
# server pinned to core 1 and the load generator to core 0, with the two
# cores' time split (user, system, idle, iowait, softirq) over 2 s of the
# load, from /proc/stat.
#
#   bench/pinned_put.sh STRATA_BINARY
#
# Knobs: SIZE (64KiB, the object size), C (16, clients), DATA (a fresh directory under $TMPDIR or /tmp;
# removed first when given), PORT (18590), ENVX (environment for the
# server, e.g. "STRATA_X=1"), EXTRA (more server arguments). Needs 2 cores.
set -euo pipefail
BIN=$(realpath "${1:?usage: $0 STRATA_BINARY}")
C=${C:-16}
PORT=${PORT:-18590}
WORK=$(mktemp -d "${TMPDIR:-/tmp}/strata-pinned-put.XXXXXX")
D=${DATA:-$WORK/data}
rm -rf "$D"
mkdir -p "$D"
PID=
# The object API takes no anonymous writes: the server gets a root key and
# `strata bench http` sends a token of it.
export STRATA_ROOT_ACCESS_KEY=${STRATA_ROOT_ACCESS_KEY:-benchroot}
export STRATA_ROOT_SECRET_KEY=${STRATA_ROOT_SECRET_KEY:-benchroot-secret-0123456789}
trap '[ -n "$PID" ] && kill "$PID" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$WORK"' EXIT
# shellcheck disable=SC2086
env ${ENVX:-} taskset -c 1 "$BIN" server --data "$D" --listen 127.0.0.1:"$PORT" --ram-cache 0 \
  ${EXTRA:-} >"$WORK/server.log" 2>&1 &
PID=$!
for _ in $(seq 1 100); do
  curl -fs "http://127.0.0.1:$PORT/healthz" >/dev/null 2>&1 && break
  sleep 0.3
done
(
  sleep 2
  grep '^cpu[01] ' /proc/stat >"$WORK/before"
  sleep 2
  grep '^cpu[01] ' /proc/stat >"$WORK/after"
) &
SNAP=$!
taskset -c 0 "$BIN" bench http --addr 127.0.0.1:"$PORT" --cpu-pids "$PID" --sizes "${SIZE:-64KiB}" \
  --concurrency "$C" --bucket p --read-fraction 0 --prefill 0 --duration 5 2>&1 | grep -E "^put|CPU"
wait "$SNAP"
cat "$WORK/before" "$WORK/after" | awk '
  { n = ++seen[$1]; for (i = 2; i <= 11; i++) v[$1, n, i] = $i }
  END {
    for (k in seen) {
      t = 0
      for (i = 2; i <= 11; i++) { d[i] = v[k, 2, i] - v[k, 1, i]; t += d[i] }
      printf "%s: user %.0f%% sys %.0f%% idle %.0f%% iowait %.0f%% softirq %.0f%%\n", k,
        100 * d[2] / t, 100 * d[4] / t, 100 * d[5] / t, 100 * d[6] / t, 100 * d[8] / t
    }
  }'
