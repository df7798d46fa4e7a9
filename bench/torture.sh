#!/usr/bin/env bash
# The full fault campaign (issue 15, docs/reliability.md): at least 1,000
# trials of `strata torture` over every kind, single node and cluster, then
# every linearizability history checked with Porcupine
# (tools/linearizability). Needs root for the disk-full trials (a 64 MiB
# tmpfs is mounted and unmounted per trial) and Go for the checker.
#
#   bench/torture.sh [TRIALS] [SEED]     # default 1080 trials, seed 2026
#
# Output in target/torture/: report.json (every trial), report.txt (the
# table), histories/*.json, lincheck.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
TRIALS=${1:-1080}
SEED=${2:-2026}
OUT=target/torture
mkdir -p "$OUT"
rm -rf "$OUT/histories"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-target}
nice -n 15 cargo build --release -p strata-cli >&2
STRATA="$CARGO_TARGET_DIR/release/strata"
status=0
"$STRATA" torture --trials "$TRIALS" --seed "$SEED" --keep-failed \
    --history "$OUT/histories" --json > "$OUT/report.json" || status=$?
python3 - "$OUT/report.json" > "$OUT/report.txt" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
print(f"{'kind':<17} {'trials':>6} {'passed':>6} {'failed':>6} {'acked PUT':>10} {'acked DEL':>10} {'unknown':>8} {'reads':>9}")
for k in r["kinds"]:
    print(f"{k['kind']:<17} {k['trials']:>6} {k['passed']:>6} {k['failed']:>6} {k['acked_puts']:>10} {k['acked_deletes']:>10} {k['unknown_ops']:>8} {k['reads']:>9}")
print(f"{r['trials']} trials, {r['passed']} passed, {r['failed']} failed (seed {r['seed']})")
for t in r["results"]:
    if not t["passed"]:
        print(f"FAILED {t['kind']} seed {t['seed']}: {' | '.join(t['failures'])[:400]}")
        print(f"  repeat: {t['repro']}")
PY
cat "$OUT/report.txt"
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
if ls "$OUT"/histories/*.json >/dev/null 2>&1; then
    (cd tools/linearizability && "$GO" build -o "../../$OUT/lincheck" .)
    "$OUT/lincheck" -visualize "$OUT/anomalies" "$OUT"/histories/*.json | tee "$OUT/lincheck.txt" | tail -1 || status=1
fi
exit $status
