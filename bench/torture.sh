#!/usr/bin/env bash
# The full fault campaign (issue 15, docs/reliability.md): over 1,000 trials
# of `strata torture` over every kind, single node and cluster, run as five
# campaigns side by side (single-node kinds, cluster kinds, disk-full, which
# is slow: each trial fills a 64 MiB tmpfs, the erasure-coding kinds on a
# 6-node --ec 4+2 cluster, slow too, and the S3 kinds), then every
# linearizability history checked with Porcupine (tools/linearizability).
# The power-cut kinds run among them (power-put and power-compaction with
# the single-node kinds, cluster-power and cluster-power-all with the
# cluster kinds, ec-power with ec, power-s3 with s3); the `power_cuts` of
# the JSON reports count the processes whose power was cut.
# Needs root for the disk-full trials (mount -t tmpfs) and Go for the
# checker.
#
#   bench/torture.sh [SINGLE_TRIALS] [CLUSTER_TRIALS] [DISK_FULL_TRIALS] [SEED] [EC_TRIALS] [S3_TRIALS]
#   (defaults 726, 270, 20, 2026, 100, 200: 1,316 trials)
#   TORTURE_TIME_LIMIT=SECS: each campaign stops starting trials after SECS
#   (so the campaign ends on time; fewer trials may run than asked).
#
# Output in target/torture/: single.json, cluster.json, disk-full.json,
# ec.json, s3.json (every trial), report.txt (the table), histories/*.json, lincheck.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
SINGLE=${1:-726}
CLUSTER=${2:-270}
FULL=${3:-20}
SEED=${4:-2026}
EC=${5:-100}
S3=${6:-200}
OUT=target/torture
mkdir -p "$OUT"
rm -rf "$OUT/histories" "$OUT/anomalies"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
nice -n 15 cargo build --release -p strata-cli >&2 || exit 1
STRATA="$CARGO_TARGET_DIR/release/strata"
TL=()
[ -n "${TORTURE_TIME_LIMIT:-}" ] && TL=(--time-limit "$TORTURE_TIME_LIMIT")
SINGLE_KINDS=put,batch,delete,overwrite,compaction,tier-move,torn-write,flip-needle,flip-checkpoint,flip-superblock,slow-clients,power-put,power-compaction
nice -n 10 "$STRATA" torture "${TL[@]}" --trials "$SINGLE" --seed "$SEED" --kinds "$SINGLE_KINDS" \
    --json > "$OUT/single.json" 2> "$OUT/single.log" &
nice -n 10 "$STRATA" torture "${TL[@]}" --trials "$CLUSTER" --seed "$((SEED + 100000))" --kinds cluster \
    --history "$OUT/histories" --json > "$OUT/cluster.json" 2> "$OUT/cluster.log" &
nice -n 10 "$STRATA" torture "${TL[@]}" --trials "$FULL" --seed "$((SEED + 200000))" --kinds disk-full \
    --json > "$OUT/disk-full.json" 2> "$OUT/disk-full.log" &
nice -n 10 "$STRATA" torture "${TL[@]}" --trials "$EC" --seed "$((SEED + 300000))" --kinds ec \
    --json > "$OUT/ec.json" 2> "$OUT/ec.log" &
nice -n 10 "$STRATA" torture "${TL[@]}" --trials "$S3" --seed "$((SEED + 400000))" --kinds s3 \
    --json > "$OUT/s3.json" 2> "$OUT/s3.log" &
wait
python3 - "$OUT"/single.json "$OUT"/cluster.json "$OUT"/disk-full.json "$OUT"/ec.json "$OUT"/s3.json > "$OUT/report.txt" <<'PY'
import json, sys
kinds, results = [], []
for p in sys.argv[1:]:
    try:
        r = json.load(open(p))
    except Exception as e:
        print(f"{p}: no report ({e})")
        continue
    kinds += r["kinds"]
    results += r["results"]
print(f"{'kind':<17} {'trials':>6} {'passed':>6} {'failed':>6} {'skipped':>7} {'acked PUT':>10} {'acked DEL':>10} {'unknown':>8} {'reads':>9}")
for k in kinds:
    print(f"{k['kind']:<17} {k['trials']:>6} {k['passed']:>6} {k['failed']:>6} {k['skipped']:>7} {k['acked_puts']:>10} {k['acked_deletes']:>10} {k['unknown_ops']:>8} {k['reads']:>9}")
tot = lambda f: sum(k[f] for k in kinds)
print(f"{'total':<17} {tot('trials'):>6} {tot('passed'):>6} {tot('failed'):>6} {tot('skipped'):>7} {tot('acked_puts'):>10} {tot('acked_deletes'):>10} {tot('unknown_ops'):>8} {tot('reads'):>9}")
for t in results:
    if not t["passed"]:
        print(f"FAILED {t['kind']} seed {t['seed']}: {' | '.join(t['failures'])[:600]}")
        print(f"  repeat: {t['repro']}")
PY
cat "$OUT/report.txt"
status=0
grep -q "^FAILED" "$OUT/report.txt" && status=1
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
if ls "$OUT"/histories/*.json >/dev/null 2>&1; then
    (cd tools/linearizability && "$GO" build -o "../../$OUT/lincheck" .) || exit 1
    "$OUT/lincheck" -visualize "$OUT/anomalies" "$OUT"/histories/*.json > "$OUT/lincheck.txt" || status=1
    tail -1 "$OUT/lincheck.txt"
fi
exit $status
