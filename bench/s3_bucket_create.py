#!/usr/bin/env python3
"""S3 CreateBucket per second as the bucket count grows (issue 34, finding 9).

    python3 bench/s3_bucket_create.py [--buckets 9000] [--timed 500] STRATA [STRATA ...]

For each binary given, in turn on the same machine: starts a server of
one with S3 in a fresh directory, creates --buckets buckets (8 clients at
once, not timed), then times --timed more CreateBucket calls made one
after another by one boto3 client, and prints buckets per second, the
median and the 99th percentile, and the bytes the metadata directory
wrote meanwhile (from /proc/PID/io's write_bytes, the server's own
writes to the medium). Before issue 34 the metadata service replaced its
whole state file on every change; after, it appends the change to
meta.log. Needs boto3 (the test venv has it).
"""
import argparse
import concurrent.futures
import os
import shutil
import socket
import statistics
import subprocess
import tempfile
import time

import boto3  # type: ignore
from botocore.config import Config  # type: ignore

ACCESS, SECRET = "BENCHROOTKEY00000001", "bench-root-secret-key-00000000000000000"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def client(addr):
    return boto3.client("s3", endpoint_url=f"http://{addr}", aws_access_key_id=ACCESS,
                        aws_secret_access_key=SECRET, region_name="us-east-1",
                        config=Config(retries={"max_attempts": 1}))


def write_bytes(pid):
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
    return 0


def run(binary, buckets, timed):
    d = tempfile.mkdtemp(prefix="strata-buckets.")
    node, s3 = f"127.0.0.1:{free_port()}", f"127.0.0.1:{free_port()}"
    env = dict(os.environ, STRATA_ROOT_ACCESS_KEY=ACCESS, STRATA_ROOT_SECRET_KEY=SECRET,
               STRATA_ADMIN_TOKEN="bench-admin-token-0123456789")
    p = subprocess.Popen([binary, "server", "--listen", node, "--s3-listen", s3, "--data", d + "/data"],
                         env=env, stdout=subprocess.DEVNULL, stderr=open(d + "/server.log", "w"))
    try:
        c = client(s3)
        end = time.time() + 60
        while True:
            try:
                c.list_buckets()
                break
            except Exception:
                if time.time() > end:
                    raise SystemExit(f"{binary}: S3 did not start (see {d}/server.log)")
                time.sleep(0.2)
        clients = [client(s3) for _ in range(8)]
        started = time.time()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: clients[i % 8].create_bucket(Bucket=f"fill-{i:06d}"), range(buckets)))
        fill = time.time() - started
        before = write_bytes(p.pid)
        lat = []
        started = time.time()
        for i in range(timed):
            t = time.perf_counter()
            c.create_bucket(Bucket=f"timed-{i:06d}")
            lat.append(time.perf_counter() - t)
        took = time.time() - started
        wrote = write_bytes(p.pid) - before
        lat.sort()
        return {
            "fill_s": fill,
            "per_s": timed / took,
            "p50_ms": statistics.median(lat) * 1e3,
            "p99_ms": lat[int(0.99 * (len(lat) - 1))] * 1e3,
            "bytes_per_bucket": wrote / timed,
        }
    finally:
        p.kill()
        p.wait()
        shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--buckets", type=int, default=9000, help="buckets made before the timed ones")
    ap.add_argument("--timed", type=int, default=500, help="CreateBucket calls timed")
    ap.add_argument("binaries", nargs="+", metavar="STRATA")
    a = ap.parse_args()
    print(f"| binary | buckets before | CreateBucket/s | p50 ms | p99 ms | bytes written per bucket | fill time |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for b in a.binaries:
        r = run(b, a.buckets, a.timed)
        print(f"| {b} | {a.buckets} | {r['per_s']:.0f} | {r['p50_ms']:.1f} | {r['p99_ms']:.1f} "
              f"| {r['bytes_per_bucket']:.0f} | {r['fill_s']:.0f} s |", flush=True)


if __name__ == "__main__":
    main()
