#!/usr/bin/env bash
# The cost of authentication on a 3-node Strata cluster through its public
# API (issue 34: the cluster signature's body digest, then the native API's
# bearer tokens): two builds side by side in one run, alternated (before,
# after, before, after) so that drift in the machine shows as the spread
# between a build's two rounds. Every request carries a token of the root
# key (bench/lib.sh); a build before tokens ignores it. BEFORE_LABEL and
# AFTER_LABEL name the builds in the table.
#
#   bench/cluster_auth_cost.sh BEFORE_BINARY AFTER_BINARY
#
# Every PUT is replicated to three nodes over the node protocol (signed by
# the node that takes it, verified by each replica); a GET through a node
# that holds no copy is one signed replica read. The load generator is
# AFTER's `strata bench http` for both. Knobs (environment): DUR seconds
# per run (5), SIZES ("1KiB 1MiB"), CONC (16), PREFILL_1KiB (5000),
# PREFILL_1MiB (300), ROUNDS (2), base port BASE (18700).
set -euo pipefail
export STRATA_CLUSTER_SECRET=${STRATA_CLUSTER_SECRET:-$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')}
BEFORE=${1:?usage: $0 BEFORE_BINARY AFTER_BINARY}
AFTER=${2:?usage: $0 BEFORE_BINARY AFTER_BINARY}
STRATA=$AFTER
WEED=$BEFORE
DUR=${DUR:-5}
SIZES=${SIZES:-"1KiB 1MiB"}
CONC=${CONC:-16}
PREFILL_1KiB=${PREFILL_1KiB:-5000}
PREFILL_1MiB=${PREFILL_1MiB:-300}
ROUNDS=${ROUNDS:-2}
BASE=${BASE:-18700}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
setup_work strata-cluster-auth-cost

META=127.0.0.1:$BASE
NODES=()

prefill_of() { if [ "$1" = 1KiB ]; then echo "$PREFILL_1KiB"; else echo "$PREFILL_1MiB"; fi; }

echo "start $(date -u '+%Y-%m-%d %H:%M:%S') UTC, load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores" >"$RES/meta"
log "work dir $WORK"
for round in $(seq 1 "$ROUNDS"); do
  for build in before after; do
    if [ "$build" = before ]; then bin=$BEFORE; else bin=$AFTER; fi
    for size in $SIZES; do
      log "round $round, $build, $size: fresh cluster"
      start_strata_cluster "$bin"
      addrs=$(IFS=,; echo "${NODES[*]}")
      S=(--addr "$addrs" --cpu-pids "$STRATA_PIDS" --sizes "$size" --concurrency "$CONC")
      run "$build-put-$size-$round" "${S[@]}" --bucket put --read-fraction 0 --prefill 0
      run "$build-get-$size-$round" "${S[@]}" --bucket get --read-fraction 1 --prefill "$(prefill_of "$size")"
      stop_servers
    done
  done
done
echo "end $(date -u '+%Y-%m-%d %H:%M:%S') UTC, load average $(cut -d' ' -f1-3 /proc/loadavg)" >>"$RES/meta"

python3 - "$RES" "$SIZES" "$CONC" "$DUR" "$ROUNDS" <<'PY'
import json, os, sys
res, sizes, conc, dur, rounds = sys.argv[1], sys.argv[2].split(), sys.argv[3], sys.argv[4], int(sys.argv[5])

def load(name):
    p = os.path.join(res, name + ".json")
    if not os.path.exists(p):
        return None
    r = json.load(open(p))
    s = r["put"] if r["put"]["objects"] else r["get"]
    return s["objects_per_s"], r.get("server_cpu_us_per_object")

def cells(build, op, size):
    runs = [load(f"{build}-{op}-{size}-{i}") for i in range(1, rounds + 1)]
    ok = [r for r in runs if r]
    text = " / ".join(f"{o:,.0f}/s ({c:.0f} µs CPU)" if c is not None else f"{o:,.0f}/s" for o, c in ok) or "failed"
    mean = sum(o for o, _ in ok) / len(ok) if ok else None
    return text, mean

print(open(os.path.join(res, "meta")).read().strip().replace("\n", "; "))
print(f"\n{conc} connections, {dur} s per run, 3 nodes, three copies; each cell the rounds in order.\n")
print("| op | size | before (%s) | after (%s) | after / before (means) |" % (os.environ.get("BEFORE_LABEL", "BEFORE"), os.environ.get("AFTER_LABEL", "AFTER")))
print("| --- | --- | --- | --- | --- |")
for size in sizes:
    for op in ("put", "get"):
        b, bm = cells("before", op, size)
        a, am = cells("after", op, size)
        ratio = f"{am / bm:.3f}" if am and bm else "—"
        print(f"| {op.upper()} | {size} | {b} | {a} | {ratio} |")
PY
