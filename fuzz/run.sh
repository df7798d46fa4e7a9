#!/usr/bin/env bash
# Builds every fuzz target with libFuzzer's coverage instrumentation on
# stable Rust (the flags `cargo fuzz build -s none` passes: SanitizerCoverage
# through LLVM options, no sanitizer, so no nightly), then runs each for
# SECONDS (default 10) from its corpus in fuzz/corpus/TARGET (kept between
# runs). A crash leaves its input in fuzz/artifacts/TARGET/ and fails.
#
#   fuzz/run.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")"
SECS=${1:-10}
shift || true
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
    TARGETS=(needle superblock checkpoint trace_reader batch plan_json row_record range cluster_auth s3_request)
fi
export CARGO_TARGET_DIR=${FUZZ_TARGET_DIR:-$PWD/target}
export RUSTFLAGS="--cfg fuzzing -Cpasses=sancov-module -Cllvm-args=-sanitizer-coverage-level=4 \
-Cllvm-args=-sanitizer-coverage-inline-8bit-counters -Cllvm-args=-sanitizer-coverage-pc-table \
-Cllvm-args=-sanitizer-coverage-trace-compares -Cdebug-assertions -Coverflow-checks"
# With --target, RUSTFLAGS reach only the targets, not build scripts and
# proc macros (which must not be instrumented), as with cargo fuzz.
TRIPLE=$(rustc -vV | sed -n 's/^host: //p')
nice -n 15 cargo build --release --target "$TRIPLE" $(printf -- '--bin %s ' "${TARGETS[@]}") >&2
status=0
for t in "${TARGETS[@]}"; do
    mkdir -p "corpus/$t" "artifacts/$t"
    echo "== $t: ${SECS}s" >&2
    if ! "$CARGO_TARGET_DIR/$TRIPLE/release/$t" -max_total_time="$SECS" -rss_limit_mb=2048 \
        -artifact_prefix="artifacts/$t/" "corpus/$t" 2> "artifacts/$t.log"; then
        echo "FAILED: $t (input in fuzz/artifacts/$t/, log fuzz/artifacts/$t.log)" >&2
        tail -30 "artifacts/$t.log" >&2
        status=1
    else
        grep -E "^#[0-9]+.*DONE|Done [0-9]+ runs" "artifacts/$t.log" | tail -1 >&2 || true
    fi
done
exit $status
