#!/usr/bin/env bash
# Cold random-read IOPS of the segment store against fio, on the same
# directory, with the same request size and the same number of requests in
# flight. Prints both JSON results and the ratio.
#
#   bench/fio-vs-strata.sh [DIR]
#
# Environment: OBJECTS (default 1000000), SIZE (object bytes, default 4096),
# THREADS (requests in flight, default 4), GETS (default 50000),
# STRATA (the strata binary, default target/release/strata).
#
# Steps: `strata bench store --keep` fills DIR/store and measures cold GETs;
# then fio reads the store's own segment files at random, with requests of
# exactly one needle's length at needle alignment (bs = needle length,
# blockalign = 8), through the same kernel path the store uses (buffered
# pread, POSIX_FADV_RANDOM, page cache dropped first), THREADS jobs of depth
# 1; then the store's GET phase again on the now-existing store (--reuse);
# then fio once more; so that neither side is always first. For reference,
# fio with O_DIRECT at 4 KiB and 8 KiB follows (the device's raw IOPS).
set -euo pipefail
DIR=${1:-/tmp/strata-fio-vs-strata}
OBJECTS=${OBJECTS:-1000000}
SIZE=${SIZE:-4096}
THREADS=${THREADS:-4}
GETS=${GETS:-50000}
STRATA=${STRATA:-target/release/strata}
command -v fio >/dev/null || { echo "fio is not installed (apt-get install fio)" >&2; exit 1; }
[ -x "$STRATA" ] || { echo "build strata first: cargo build --release -p strata-cli" >&2; exit 1; }

mkdir -p "$DIR"
STORE="$DIR/store"
rm -rf "$STORE"
NEEDLE=$(( (40 + SIZE + 7) / 8 * 8 ))
IOS=$(( GETS / THREADS ))

drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches 2>/dev/null || true; }

run_fio() { # name extra-args...
  local name=$1; shift
  drop_caches
  # shellcheck disable=SC2046
  fio --name="$name" --filename="$(ls "$STORE"/*.seg | paste -sd:)" --readonly \
      --rw=randread --ioengine=psync --iodepth=1 --numjobs="$THREADS" --thread \
      --number_ios="$IOS" --group_reporting --invalidate=1 --output-format=json "$@" \
    | python3 -c 'import json,sys; j=json.load(sys.stdin)["jobs"][0]["read"]; print(json.dumps({"iops": round(j["iops"],1), "p50_us": j["clat_ns"]["percentile"]["50.000000"]/1000, "p99_us": j["clat_ns"]["percentile"]["99.000000"]/1000}))'
}

echo "# $(date -u +%FT%TZ) $(uname -r), $(nproc) CPUs; objects=$OBJECTS size=$SIZE needle=$NEEDLE threads=$THREADS gets=$GETS"
drop_caches
S1=$("$STRATA" bench store --dir "$STORE" --objects "$OBJECTS" --size "$SIZE" --threads "$THREADS" --gets "$GETS" --keep --json)
echo "strata (fill + cold GETs):   $S1"
F1=$(run_fio same-request --bs="$NEEDLE" --blockalign=8 --fadvise_hint=random)
echo "fio same request, buffered:  $F1"
drop_caches
S2=$("$STRATA" bench store --dir "$STORE" --objects "$OBJECTS" --size "$SIZE" --threads "$THREADS" --gets "$GETS" --reuse --json)
echo "strata (cold GETs, again):   $S2"
F2=$(run_fio same-request-2 --bs="$NEEDLE" --blockalign=8 --fadvise_hint=random)
echo "fio same request, again:     $F2"
echo "fio O_DIRECT 4 KiB:          $(run_fio direct4k --bs=4k --direct=1)"
echo "fio O_DIRECT 8 KiB:          $(run_fio direct8k --bs=8k --direct=1)"
python3 - "$S1" "$S2" "$F1" "$F2" <<'PY'
import json, sys
s = [json.loads(x)["get_objects_per_s"] for x in sys.argv[1:3]]
f = [json.loads(x)["iops"] for x in sys.argv[3:5]]
print(f"strata GET/s {s[0]:.0f}, {s[1]:.0f}; fio IOPS {f[0]:.0f}, {f[1]:.0f}; "
      f"ratio strata/fio = {sum(s)/sum(f):.3f} (target >= 0.90)")
PY
[ -n "${KEEP:-}" ] || rm -rf "$STORE"
