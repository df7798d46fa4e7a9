# Quick S3 figures (docs/benchmarks.md, "S3 API"): 1 KiB PUTs over S3 (boto3,
# 8 threads) and over the native API, then ListObjectsV2 pages of 1,000 keys.
# Needs a node serving S3 on 127.0.0.1:18490 (root key bench/benchsecret) and
# its native API on 127.0.0.1:18401. Usage: python3 bench/s3_put_list.py N
import boto3, time, sys, threading, statistics, os, http.client
from botocore.config import Config
from concurrent.futures import ThreadPoolExecutor
N = int(sys.argv[1]); T = 8
mk = lambda: boto3.client("s3", endpoint_url="http://127.0.0.1:18490", region_name="us-east-1",
    aws_access_key_id="bench", aws_secret_access_key="benchsecret",
    config=Config(s3={"addressing_style": "path"}, max_pool_connections=T))
s3 = mk()
s3.create_bucket(Bucket="bench")
body = b"x" * 1024
def put(i):
    s3.put_object(Bucket="bench", Key="obj/%08d" % i, Body=body)
t = time.time()
with ThreadPoolExecutor(T) as ex:
    list(ex.map(put, range(N)))
dt = time.time() - t
print(f"S3 PUT 1 KiB, {T} threads boto3: {N} objects in {dt:.1f} s = {N/dt:.0f}/s")
# native API PUT, same size, same threads (plain http.client)
def nput(i):
    c = http.client.HTTPConnection("127.0.0.1", 18401)
    c.request("PUT", "/native/obj%08d" % i, body=body); c.getresponse().read(); c.close()
M = min(N, 5000)
t = time.time()
with ThreadPoolExecutor(T) as ex:
    list(ex.map(nput, range(M)))
dt = time.time() - t
print(f"native PUT 1 KiB, {T} threads http.client: {M} objects in {dt:.1f} s = {M/dt:.0f}/s")
lat = []
import random
for j in range(200):
    start = "obj/%08d" % random.randrange(N)
    t = time.perf_counter()
    r = s3.list_objects_v2(Bucket="bench", MaxKeys=1000, StartAfter=start)
    lat.append((time.perf_counter() - t) * 1000)
lat.sort()
print(f"ListObjectsV2 page of up to 1000 keys (boto3, incl. XML parse), 200 pages: p50 {lat[100]:.1f} ms p99 {lat[197]:.1f} ms max {lat[-1]:.1f} ms")
