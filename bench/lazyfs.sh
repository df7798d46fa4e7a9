#!/usr/bin/env bash
# Power loss on a real FUSE file system (issue 33): a single `strata
# server` whose data directory lies on Jepsen's LazyFS
# (github.com/dsrhaslab/lazyfs), a FUSE file system with a page cache of
# its own that writes data to the disk below only when it is fsynced.
# `lazyfs::clear-cache` on its control FIFO drops what was not synced, as
# a power cut does (kill -9 alone keeps the kernel's page cache: nothing
# is lost).
#
# Each of ROUNDS rounds (default 3): WRITERS shell writers (default 4)
# PUT objects of random bytes and DELETE some of them through the node's
# HTTP API for LOAD_SECS seconds (default 5); at a random moment of the
# load the node is killed with SIGKILL, then LazyFS drops its unsynced
# data (clear-cache), then the node is started again on the same
# directory and every key is checked:
#   - an acknowledged PUT (201) must read back byte for byte (sha256),
#   - an acknowledged DELETE (204) must answer 404,
#   - a PUT or DELETE without an answer may have happened or not, but a
#     200 must then serve exactly the bytes that PUT sent,
#   - no GET may answer anything but 200 or 404.
# The node is killed before the cache is cleared: a power cut stops the
# process and loses the unsynced data at the same instant, and nothing
# may be written between the two.
#
# NOT RUN BY CI, and not tested end to end where it was written: that
# machine reaches package registries only, not GitHub, so the fetch step
# fails there (with the message below); what follows the build (the
# load, the cut and the check) was tried there over a stand-in for LazyFS
# (a bind mount), and its check reported the keys lost when the stand-in's
# clear-cache removed the node's data. It needs:
#   - Linux with FUSE 3: /dev/fuse, fusermount3 (Debian: fuse3,
#     libfuse3-dev), and to be root or to have `user_allow_other` in
#     /etc/fuse.conf (LazyFS mounts with allow_other);
#   - git, cmake, g++ (C++17), curl, sha256sum;
#   - network access to GitHub for the fetch (or LAZYFS_SRC=DIR: a LazyFS
#     source tree already on the machine);
#   - the strata binary (STRATA, default target/release/strata).
#
# LazyFS is fetched and built under WORK (default target/lazyfs, which git
# ignores); nothing of it is committed to this repository.
#
# Known LazyFS bug: stock LazyFS races on concurrent writes to one file
# (FUSE calls its write, read, fsync and truncate from several threads at
# once and its page cache is not safe for that): a file written by two
# threads at once can come out with zeros where data was written, or a
# read can see zeros, which looks like data loss that the store did not
# cause. The store writes segment files from several threads, so this
# script patches LazyFS: one process-wide lock (a recursive mutex) taken
# at the top of LazyFS::lfs_write, lfs_read, lfs_fsync and lfs_truncate,
# so that those calls run one at a time. LAZYFS_NO_PATCH=1 skips the
# patch (results then unreliable: a zero-filled object may be LazyFS's
# doing). If the patch finds fewer than the four functions (LazyFS's
# sources moved), the script says so and stops unless LAZYFS_NO_PATCH=1.
#
# Usage: bench/lazyfs.sh
#   (env: STRATA, WORK, LAZYFS_REPO, LAZYFS_REF, LAZYFS_SRC,
#    LAZYFS_NO_PATCH, ROUNDS, WRITERS, LOAD_SECS, PORT, CACHE)
set -euo pipefail
cd "$(dirname "$0")/.."
STRATA=${STRATA:-$PWD/target/release/strata}
WORK=${WORK:-$PWD/target/lazyfs}
LAZYFS_REPO=${LAZYFS_REPO:-https://github.com/dsrhaslab/lazyfs.git}
# A release tag or commit; empty: the default branch (LazyFS's README
# recommends a release over its main branch).
LAZYFS_REF=${LAZYFS_REF:-}
ROUNDS=${ROUNDS:-3}
WRITERS=${WRITERS:-4}
LOAD_SECS=${LOAD_SECS:-5}
PORT=${PORT:-23480}
CACHE=${CACHE:-1GB}
ADDR=127.0.0.1:$PORT

log() { echo "[$(date -u +%H:%M:%S)] $*" >&2; }
die() {
  echo "bench/lazyfs.sh: $*" >&2
  exit 1
}

# --- what the machine needs -------------------------------------------------
[ "$(uname -s)" = Linux ] || die "needs Linux (FUSE 3)"
[ -e /dev/fuse ] || die "no /dev/fuse: FUSE is not available here (in a container: --device /dev/fuse --cap-add SYS_ADMIN)"
command -v fusermount3 >/dev/null || die "no fusermount3: install FUSE 3 (Debian: apt-get install fuse3 libfuse3-dev)"
for t in git cmake g++ curl sha256sum mkfifo timeout mountpoint perl; do
  command -v "$t" >/dev/null || die "$t is missing (Debian: apt-get install git cmake g++ curl coreutils util-linux perl)"
done
[ -x "$STRATA" ] || die "no strata binary at $STRATA (cargo build --release -p strata-cli, or STRATA=...)"
if [ "$(id -u)" -ne 0 ] && ! grep -qs '^[[:space:]]*user_allow_other' /etc/fuse.conf; then
  die "LazyFS mounts with allow_other: run as root or add user_allow_other to /etc/fuse.conf"
fi
mkdir -p "$WORK"

# --- fetch ---------------------------------------------------------------------
SRC=${LAZYFS_SRC:-$WORK/lazyfs-src}
if [ -z "${LAZYFS_SRC:-}" ] && [ ! -d "$SRC/.git" ]; then
  log "fetching LazyFS from $LAZYFS_REPO"
  rm -rf "$SRC"
  if ! timeout 120 git clone --quiet "$LAZYFS_REPO" "$SRC"; then
    rm -rf "$SRC"
    die "could not fetch LazyFS from $LAZYFS_REPO: this script needs network access to GitHub (a machine that reaches only package registries cannot run it; give LAZYFS_SRC=DIR, a LazyFS source tree copied here, instead)"
  fi
  if [ -n "$LAZYFS_REF" ]; then
    git -C "$SRC" checkout --quiet "$LAZYFS_REF" || die "no $LAZYFS_REF in $LAZYFS_REPO"
  else
    log "WARNING: LazyFS's default branch (set LAZYFS_REF to a release tag for a tested version)"
  fi
fi
[ -d "$SRC/lazyfs" ] && [ -d "$SRC/libs/libpcache" ] || die "$SRC is not a LazyFS source tree (no lazyfs/ and libs/libpcache/)"

# --- the race fix ------------------------------------------------------------
if [ "${LAZYFS_NO_PATCH:-0}" = 1 ]; then
  log "WARNING: LAZYFS_NO_PATCH=1: stock LazyFS races on concurrent writes to one file and may fill zeros; a lost or zeroed object may be LazyFS's doing, not the store's"
elif ! grep -rqs strata_io_lock "$SRC/lazyfs/src"; then
  log "patching LazyFS: one lock around lfs_write, lfs_read, lfs_fsync, lfs_truncate (stock LazyFS races on concurrent writes to one file and fills zeros)"
  found=0
  for f in $(grep -rlE 'LazyFS::lfs_(write|read|fsync|truncate)[[:space:]]*\(' "$SRC/lazyfs/src" || true); do
    # One process-wide recursive mutex (a C++17 inline variable: the
    # same object in every file that defines it), taken first thing in
    # each of the four functions.
    perl -0pi -e '
      s/((?:^|\n)[^\n]*LazyFS::lfs_(?:write|read|fsync|truncate)\s*\([^{;]*\)\s*\{)/$1\n    std::lock_guard<std::recursive_mutex> strata_io_guard (strata_io_lock);/g;
      $_ = "#include <mutex>\ninline std::recursive_mutex strata_io_lock;\n" . $_;
    ' "$f"
  done
  found=$(grep -rh 'strata_io_guard' "$SRC/lazyfs/src" | wc -l)
  if [ "$found" -lt 4 ]; then
    die "the race fix found $found of the 4 functions (lfs_write, lfs_read, lfs_fsync, lfs_truncate) in $SRC/lazyfs/src: LazyFS's sources changed; add the lock by hand, or LAZYFS_NO_PATCH=1 to run unpatched (unreliable)"
  fi
  log "race fix applied in $found function(s)"
fi

# --- build ---------------------------------------------------------------------
if [ ! -x "$SRC/lazyfs/build/lazyfs" ]; then
  log "building libpcache and LazyFS"
  (cd "$SRC/libs/libpcache" && ./build.sh) >"$WORK/build.log" 2>&1 || die "building libpcache failed: see $WORK/build.log"
  (cd "$SRC/lazyfs" && ./build.sh) >>"$WORK/build.log" 2>&1 || die "building LazyFS failed: see $WORK/build.log"
fi

# --- mount ---------------------------------------------------------------------
MNT=$WORK/mnt
ROOT=$WORK/root
FIFO=$WORK/faults.fifo
DONE=$WORK/faults-done.fifo
RUN=$WORK/run
SRV=""
cleanup() {
  [ -n "$SRV" ] && kill -9 "$SRV" 2>/dev/null || true
  jobs -p | xargs -r kill 2>/dev/null || true
  if mountpoint -q "$MNT"; then
    (cd "$SRC/lazyfs" && ./scripts/umount-lazyfs.sh -m "$MNT") >/dev/null 2>&1 || fusermount3 -uz "$MNT" || true
  fi
}
trap cleanup EXIT
if mountpoint -q "$MNT"; then fusermount3 -uz "$MNT" || true; fi
rm -rf "$MNT" "$ROOT" "$RUN" "$FIFO" "$DONE"
mkdir -p "$MNT" "$ROOT" "$RUN"
mkfifo "$DONE"
cat >"$WORK/lazyfs.toml" <<EOF
[faults]
fifo_path="$FIFO"
fifo_path_completed="$DONE"

[cache]
apply_eviction=false

[cache.simple]
custom_size="$CACHE"
blocks_per_page=1

[file system]
log_all_operations=false
logfile="$WORK/lazyfs.log"
EOF
log "mounting LazyFS on $MNT (over $ROOT)"
(cd "$SRC/lazyfs" && ./scripts/mount-lazyfs.sh -c "$WORK/lazyfs.toml" -m "$MNT" -r "$ROOT") >"$WORK/mount.log" 2>&1 &
for _ in $(seq 100); do
  mountpoint -q "$MNT" && [ -p "$FIFO" ] && break
  sleep 0.1
done
mountpoint -q "$MNT" || die "LazyFS did not mount on $MNT: $(tail -5 "$WORK/mount.log")"

# clear_cache: LazyFS drops every unsynced write, and says when it is done
# (on the completion FIFO).
clear_cache() {
  timeout 60 cat "$DONE" >"$RUN/clear.done" &
  local reader=$!
  echo "lazyfs::clear-cache" >"$FIFO"
  wait "$reader" || die "LazyFS did not confirm lazyfs::clear-cache within 60 s (see $WORK/lazyfs.log)"
}

# --- the node ----------------------------------------------------------------
DATA=$MNT/node
# The object API takes no anonymous requests: the node gets a root key,
# curl a token of it.
export STRATA_ROOT_ACCESS_KEY=${STRATA_ROOT_ACCESS_KEY:-lazyfsroot}
export STRATA_ROOT_SECRET_KEY=${STRATA_ROOT_SECRET_KEY:-lazyfsroot-secret-0123456789}
AUTH="Authorization: Bearer $("$STRATA" key token --expires 7d)"
start_node() {
  "$STRATA" server --data "$DATA" --listen "$ADDR" --threads 2 --segment-size 1MiB \
    >/dev/null 2>>"$WORK/node.log" &
  SRV=$!
  for _ in $(seq 300); do
    if curl -s -o /dev/null -w '%{http_code}' -H "$AUTH" -X PUT --data-binary ready "http://$ADDR/lazyfs-ready/probe" 2>/dev/null | grep -qE '^20[01]$'; then
      return 0
    fi
    kill -0 "$SRV" 2>/dev/null || die "the node exited at start: $(tail -5 "$WORK/node.log")"
    sleep 0.1
  done
  die "the node takes no write 30 s after its start: $(tail -5 "$WORK/node.log")"
}

# writer W ROUND: PUTs new keys (and DELETEs some of its own) until
# $RUN/stop exists; one line per operation in $RUN/ops-W (key, op, body
# hash, outcome: acked or unknown). Each key has one writer.
writer() {
  local w=$1 r=$2 n=0 key body code sum
  while [ ! -e "$RUN/stop" ]; do
    n=$((n + 1))
    key="r$r-w$w-$n"
    body=$RUN/body-$w
    head -c $((64 + RANDOM % 16384)) /dev/urandom >"$body"
    sum=$(sha256sum "$body" | cut -c1-64)
    code=$(curl -s -o /dev/null -w '%{http_code}' -H "$AUTH" --max-time 10 -X PUT --data-binary "@$body" "http://$ADDR/lazyfs/$key" || true)
    case $code in 200 | 201) echo "$key put $sum acked" ;; *) echo "$key put $sum unknown" ;; esac >>"$RUN/ops-$w"
    if [ $((RANDOM % 4)) = 0 ] && [ "$code" = 201 ]; then
      code=$(curl -s -o /dev/null -w '%{http_code}' -H "$AUTH" --max-time 10 -X DELETE "http://$ADDR/lazyfs/$key" || true)
      case $code in 200 | 204) echo "$key del - acked" ;; *) echo "$key del - unknown" ;; esac >>"$RUN/ops-$w"
    fi
  done
}

# verify: every key's last operations against what the node serves now.
verify() {
  local bad=0 checked=0 key op sum outcome code got
  declare -A last_acked may
  while read -r key op sum outcome; do
    if [ "$outcome" = acked ]; then
      last_acked[$key]="$op $sum"
      may[$key]="$op:$sum"
    else
      may[$key]="${may[$key]:-} $op:$sum"
    fi
  done < <(cat "$RUN"/ops-* 2>/dev/null)
  for key in "${!may[@]}"; do
    checked=$((checked + 1))
    code=$(curl -s -o "$RUN/got" -w '%{http_code}' -H "$AUTH" --max-time 10 "http://$ADDR/lazyfs/$key" || echo 000)
    case $code in
      200)
        got=$(sha256sum "$RUN/got" | cut -c1-64)
        # The bytes must be those of a PUT the state may be in.
        if ! [[ " ${may[$key]} " == *" put:$got "* ]]; then
          echo "WRONG: $key served bytes (sha256 $got) that no allowed PUT sent (allowed: ${may[$key]}; last acknowledged: ${last_acked[$key]:-none})" >&2
          bad=$((bad + 1))
        fi
        ;;
      404)
        if [ -n "${last_acked[$key]:-}" ] && [[ ${last_acked[$key]} == put* ]] && ! [[ " ${may[$key]} " == *" del:-"* ]]; then
          echo "LOST: $key is 404, its PUT was acknowledged (${last_acked[$key]})" >&2
          bad=$((bad + 1))
        fi
        ;;
      *)
        echo "ERROR: GET $key answered $code" >&2
        bad=$((bad + 1))
        ;;
    esac
  done
  log "checked $checked key(s): $bad bad"
  [ "$bad" = 0 ]
}

failed=0
start_node
for r in $(seq "$ROUNDS"); do
  rm -f "$RUN/stop"
  pids=()
  for w in $(seq "$WRITERS"); do
    writer "$w" "$r" &
    pids+=($!)
  done
  # A random moment of the load.
  sleep "$(awk -v s="$LOAD_SECS" -v r="$RANDOM" 'BEGIN { printf "%.2f", s * (0.3 + 0.7 * r / 32768) }')"
  kill -9 "$SRV"
  wait "$SRV" 2>/dev/null || true
  SRV=""
  clear_cache
  touch "$RUN/stop"
  wait "${pids[@]}" 2>/dev/null || true
  log "round $r: node killed, LazyFS's unsynced data dropped ($(cat "$RUN"/ops-* 2>/dev/null | grep -c ' acked$' || true) acknowledged operations so far)"
  start_node
  verify || failed=1
done
kill -9 "$SRV" 2>/dev/null || true
wait "$SRV" 2>/dev/null || true
SRV=""
if [ "$failed" = 1 ]; then
  die "FAILED: see above; the node's log is $WORK/node.log, LazyFS's $WORK/lazyfs.log"
fi
log "passed: $ROUNDS power cut(s), every acknowledged operation held"
