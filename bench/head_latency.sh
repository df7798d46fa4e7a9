#!/bin/bash
# HEAD latency of large objects, native API and S3, on one server.
#
#   bench/head_latency.sh STRATA_BINARY [N] [SIZE_BYTES]
#
# Starts `strata server` (a cluster of one, S3 on, no RAM cache) on core 1
# in a fresh directory, PUTs N objects of SIZE bytes over each API, drops
# the page cache (root), then HEADs each object once from core 0 and
# prints the median and 90th percentile in milliseconds. Needs python3
# with boto3 (pip install boto3). Defaults: N 60, SIZE 4 MiB.
set -euo pipefail
BIN=$(realpath "$1")
N=${2:-60}
SIZE=${3:-4194304}
D=$(mktemp -d /tmp/strata-head-XXXXXX)
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null || true; rm -rf "$D"' EXIT
export STRATA_ROOT_ACCESS_KEY=headbench STRATA_ROOT_SECRET_KEY=headbench-secret-0123456789
taskset -c 1 "$BIN" server --data "$D/node" --listen 127.0.0.1:18601 --meta-listen 127.0.0.1:18600 \
  --s3-listen 127.0.0.1:18690 --ram-cache 0 > "$D/server.log" 2>&1 &
PID=$!
for _ in $(seq 1 100); do
  [ "$(curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:18690/)" = 403 ] && break
  sleep 0.3
done
taskset -c 0 python3 - "$N" "$SIZE" <<'PY'
import http.client, os, sys, time, statistics
import boto3
from botocore.config import Config
n, size = int(sys.argv[1]), int(sys.argv[2])
s3 = boto3.client("s3", endpoint_url="http://127.0.0.1:18690", region_name="us-east-1",
    aws_access_key_id=os.environ["STRATA_ROOT_ACCESS_KEY"],
    aws_secret_access_key=os.environ["STRATA_ROOT_SECRET_KEY"],
    config=Config(s3={"addressing_style": "path"}))
c = http.client.HTTPConnection("127.0.0.1", 18601)
def native(method, path, body=None):
    c.request(method, path, body=body)
    r = c.getresponse(); r.read()
    return r
body = os.urandom(size)
s3.create_bucket(Bucket="s3heads")
for i in range(n):
    assert native("PUT", f"/heads/o{i}", body).status == 201
    s3.put_object(Bucket="s3heads", Key=f"o{i}", Body=body)
os.system("sync; echo 1 > /proc/sys/vm/drop_caches")
def timed(f):
    ts = []
    for i in range(n):
        t = time.perf_counter(); f(i); ts.append((time.perf_counter() - t) * 1e3)
    return f"median {statistics.median(ts):.2f} ms, p90 {sorted(ts)[int(n * 0.9)]:.2f} ms"
def head(i):
    r = native("HEAD", f"/heads/o{i}")
    assert r.status == 200 and int(r.getheader("content-length")) == size
def s3head(i):
    assert s3.head_object(Bucket="s3heads", Key=f"o{i}")["ContentLength"] == size
print(f"native HEAD of {size} bytes: {timed(head)}")
print(f"S3 HeadObject of {size} bytes: {timed(s3head)}")
PY
