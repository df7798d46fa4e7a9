# ListObjectsV2 pages over S3 (docs/benchmarks.md, "S3 API", the 100M-name
# bucket): PAGES pages of up to 1,000 keys from random places of a bucket
# filled by `strata bench listing` (names DDDDD/NNNNNNNNNNN, 10,000 to a
# directory), timed from sending the request to the last byte of the
# answer over one keep-alive connection. The URLs are presigned by boto3
# beforehand, so the client's own signing and XML parsing are not timed.
#
#   python3 bench/s3_list_pages.py ENDPOINT ACCESS SECRET BUCKET NAMES [PAGES]
import http.client, random, statistics, sys, time, urllib.parse
import boto3
from botocore.config import Config

endpoint, access, secret, bucket, names = sys.argv[1:6]
names = int(names)
pages = int(sys.argv[6]) if len(sys.argv) > 6 else 1000
s3 = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                  aws_access_key_id=access, aws_secret_access_key=secret,
                  config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
name = lambda i: "%05d/%011d" % (i // 10000, i)
rng = random.Random(7)
host = urllib.parse.urlparse(endpoint).netloc
for kind in ("flat", "delimiter under a prefix", "delimiter at the top"):
    urls = []
    for _ in range(pages):
        n = rng.randrange(names)
        p = {"Bucket": bucket, "MaxKeys": 1000}
        if kind == "flat":
            p["StartAfter"] = name(n)
        elif kind == "delimiter under a prefix":
            p.update(Prefix="%05d/" % (n // 10000), StartAfter=name(n), Delimiter="/")
        else:
            p.update(StartAfter="%05d/" % (n // 10000), Delimiter="/")
        urls.append(s3.generate_presigned_url("list_objects_v2", Params=p, ExpiresIn=3600))
    conn = http.client.HTTPConnection(host)
    lat, keys = [], 0
    for u in urls:
        path = u[len(endpoint):]
        t = time.perf_counter()
        conn.request("GET", path)
        r = conn.getresponse()
        body = r.read()
        lat.append((time.perf_counter() - t) * 1000)
        assert r.status == 200, (r.status, body[:300])
        keys += body.count(b"<Key>") + body.count(b"<CommonPrefixes>")
    lat.sort()
    print(f"S3 ListObjectsV2, {kind}: {pages} pages, {keys / pages:.0f} keys/prefixes a page on average: "
          f"p50 {lat[len(lat) // 2]:.2f} ms, p99 {lat[int(len(lat) * 0.99) - 1]:.2f} ms, max {lat[-1]:.2f} ms")
