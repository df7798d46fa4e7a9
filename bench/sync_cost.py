#!/usr/bin/env python3
"""What one pwrite + fdatasync costs when it grows the file (appending) and
when it overwrites blocks written and synced earlier (what the store's
prepared space gives a batch; docs/store-format.md, *Prepared space*).

    python3 bench/sync_cost.py [DIR] [BLOCK_KIB] [BLOCKS] [REPS]

Writes BLOCKS blocks of BLOCK_KIB KiB of random bytes into DIR/sync_cost.tmp,
one fdatasync after each, alternating the two cases REPS times, and prints
MB/s and syncs/s of each run. Defaults: the current directory, 1024 KiB,
256 blocks, 3 repetitions. The file is removed afterwards.
"""
import os
import sys
import time

d = sys.argv[1] if len(sys.argv) > 1 else "."
block = int(sys.argv[2]) * 1024 if len(sys.argv) > 2 else 1 << 20
n = int(sys.argv[3]) if len(sys.argv) > 3 else 256
reps = int(sys.argv[4]) if len(sys.argv) > 4 else 3
path = os.path.join(d, "sync_cost.tmp")
buf = os.urandom(block)


def run(prefill):
    if os.path.exists(path):
        os.unlink(path)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if prefill:
            z = b"\0" * (4 << 20)
            for off in range(0, n * block, len(z)):
                os.pwrite(fd, z[: min(len(z), n * block - off)], off)
            os.fsync(fd)
        t = time.perf_counter()
        for i in range(n):
            os.pwrite(fd, buf, i * block)
            os.fdatasync(fd)
        dt = time.perf_counter() - t
    finally:
        os.close(fd)
        os.unlink(path)
    return n * block / dt / 1e6, n / dt


for _ in range(reps):
    for prefill in (False, True):
        mbs, sps = run(prefill)
        kind = "over written zeros" if prefill else "appending"
        print(f"{kind:>18}: {mbs:8.0f} MB/s {sps:8.0f} syncs/s ({block >> 10} KiB each)")
