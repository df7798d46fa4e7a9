# The listing index route alone (docs/benchmarks.md, "S3 API"): 500 pages of
# up to 1,000 entries of bucket "bench" from the node at 127.0.0.1:18401.
import http.client, json, time, random
lat = []
c = http.client.HTTPConnection("127.0.0.1", 18401)
for j in range(500):
    q = json.dumps({"prefix": "", "start_after": "obj/%08d" % random.randrange(20000), "max": 1000}).encode()
    t = time.perf_counter()
    c.request("POST", "/cluster/v1/index/bench", body=q, headers={"content-type": "application/json"})
    r = c.getresponse(); b = r.read()
    lat.append((time.perf_counter() - t) * 1000)
    assert r.status == 200
lat.sort()
print(f"index route, page of up to 1000 entries, 500 pages: p50 {lat[250]:.2f} ms p99 {lat[494]:.2f} ms max {lat[-1]:.2f} ms")
