#!/usr/bin/env python3
"""Issue 34's probe list, replayed against a Strata started here.

    python3 bench/probe.py [STRATA_BINARY]        (default target/release/strata)

Starts a server of one on loopback (metadata service, node and S3 in one
process) and a second node joining its metadata service, each in a fresh
directory, then tries every way in or down the issue's probe found, as an
attacker on the network would (raw sockets, curl-like requests, and, for
the cluster protocol, requests signed with the cluster secret standing in
for ones captured on the wire). Prints one line per probe: HELD (refused
as it must be), GOT IN (the attack worked: an open finding), or SKIPPED
(what it needs is missing, said why), and exits 1 if anything got in.

Signed probes need the `blake3` module (pip install blake3); S3 probes
that write through S3 need boto3. Both are PyPI packages; without them
those probes are SKIPPED, not passed. Run it before every release
(docs/security.md, "The probe").
"""
import hashlib
import hmac
import json
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time

try:
    import blake3  # type: ignore
except ImportError:  # pragma: no cover - reported as SKIPPED
    blake3 = None
try:
    import boto3  # type: ignore
    from botocore.config import Config  # type: ignore
except ImportError:  # pragma: no cover
    boto3 = None

SECRET = "probe-cluster-secret-" + "%016x" % random.getrandbits(64)
ADMIN = "probe-admin-token-" + "%016x" % random.getrandbits(64)
ACCESS, S3SECRET = "PROBEROOTKEY00000001", "probe-root-secret-key-0000000000000000000"
RESULTS = []


def token(access=ACCESS, secret=S3SECRET, life=3600):
    """A native bearer token (docs/security.md, "Native tokens")."""
    exp = int(time.time()) + life
    tag = hmac.new(secret.encode(), f"strata-token-v1\n{access}\n{exp}".encode(),
                   hashlib.sha256).hexdigest()
    return f"strata1.{access}.{exp}.{tag}"


# The Authorization of the probes' own (legitimate) native requests.
AUTH = {"Authorization": "Bearer " + token()}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def exchange(addr, head, body=b"", timeout=30.0, source=None):
    """Sends head and body on a new connection; (status, headers, body)."""
    host, port = addr.rsplit(":", 1)
    s = socket.socket()
    if source:
        s.bind((source, 0))
    s.settimeout(timeout)
    s.connect((host, int(port)))
    try:
        s.sendall(head if isinstance(head, bytes) else head.encode())
        if body:
            s.sendall(body)
    except (BrokenPipeError, ConnectionResetError):
        pass  # answered (and closed) before the body was taken: read it
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except socket.timeout:
        pass
    s.close()
    head_end = out.find(b"\r\n\r\n")
    if head_end < 0:
        return 0, "", out
    h = out[:head_end].decode("latin-1")
    try:
        code = int(h.split()[1])
    except (IndexError, ValueError):
        code = 0
    return code, h.lower(), out[head_end + 4:]


def request(addr, method, path, headers=None, body=b""):
    lines = [f"{method} {path} HTTP/1.1", f"Host: {addr}"]
    for k, v in (headers or {}).items():
        lines.append(f"{k}: {v}")
    lines += [f"Content-Length: {len(body)}", "Connection: close", "", ""]
    return exchange(addr, "\r\n".join(lines), body)


def sign(method, path, host, body, version=None, stamp=None, sender=None, seq=1):
    """An x-strata-auth v2 value (docs/security.md, "Cluster traffic")."""
    sender = sender if sender is not None else random.getrandbits(64)
    at = int(time.time() * 1000)
    digest = blake3.blake3(body).hexdigest()
    opt = lambda v: "" if v is None else str(v)
    text = "\n".join(["v2", method, path, opt(version), opt(stamp), host, str(len(body)),
                      "%016x" % sender, str(seq), str(at), digest])
    tag = hmac.new(SECRET.encode(), text.encode(), hashlib.sha256).hexdigest()
    return f"v2 {sender:016x} {seq} {at} {digest} {tag}"


def signed_head(addr, method, path, body, host=None, extra=""):
    host = host or addr
    auth = sign(method, path, host, body)
    return (f"{method} {path} HTTP/1.1\r\nHost: {host}\r\nx-strata-auth: {auth}\r\n{extra}"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n")


def probe(finding, what):
    def wrap(f):
        def run(*a):
            try:
                verdict, detail = f(*a)
            except Exception as e:  # a probe that breaks says so
                verdict, detail = "ERROR", f"{type(e).__name__}: {e}"
            RESULTS.append((finding, what, verdict, detail))
            print(f"[{verdict:7}] {finding}: {what} -- {detail}", flush=True)
        return run
    return wrap


def held(ok, detail):
    return ("HELD" if ok else "GOT IN"), detail


def need_blake3():
    return None if blake3 else ("SKIPPED", "pip install blake3 (signed probes)")


class Strata:
    def __init__(self, binary):
        self.dir = tempfile.mkdtemp(prefix="strata-probe.")
        self.meta = f"127.0.0.1:{free_port()}"
        self.node = f"127.0.0.1:{free_port()}"
        self.s3 = f"127.0.0.1:{free_port()}"
        self.node2 = f"127.0.0.1:{free_port()}"
        env = dict(os.environ, STRATA_CLUSTER_SECRET=SECRET, STRATA_ADMIN_TOKEN=ADMIN,
                   STRATA_ROOT_ACCESS_KEY=ACCESS, STRATA_ROOT_SECRET_KEY=S3SECRET)
        self.procs = []
        log = open(os.path.join(self.dir, "server.log"), "w")
        self.procs.append(subprocess.Popen(
            [binary, "server", "--meta-listen", self.meta, "--listen", self.node, "--data",
             os.path.join(self.dir, "one"), "--s3-listen", self.s3],
            env=env, stdout=subprocess.DEVNULL, stderr=log))
        self.wait(lambda: request(self.node, "PUT", "/ready/probe", AUTH, b"x")[0] == 201,
                  "the server of one")
        log2 = open(os.path.join(self.dir, "node2.log"), "w")
        self.procs.append(subprocess.Popen(
            [binary, "server", "--meta", self.meta, "--listen", self.node2, "--data",
             os.path.join(self.dir, "two"), "--disk", os.path.join(self.dir, "two")],
            env=env, stdout=subprocess.DEVNULL, stderr=log2))
        self.wait(lambda: self.connects(self.node2), "the second node")

    @staticmethod
    def connects(addr):
        try:
            socket.create_connection(tuple(addr.rsplit(":", 1)), timeout=1).close()
            return True
        except OSError:
            return False

    @staticmethod
    def wait(f, what, limit=60):
        end = time.time() + limit
        while time.time() < end:
            try:
                if f():
                    return
            except OSError:
                pass
            time.sleep(0.2)
        raise SystemExit(f"probe: {what} did not start")

    def stop(self):
        for p in self.procs:
            p.kill()
            p.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def s3_client(s, **cfg):
    return boto3.client("s3", endpoint_url=f"http://{s.s3}", aws_access_key_id=ACCESS,
                        aws_secret_access_key=S3SECRET, region_name="us-east-1",
                        config=Config(signature_version=cfg.get("sig", "s3v4"),
                                      retries={"max_attempts": 1}))


@probe("1", "an anonymous native GET of an object in a private S3 bucket")
def native_bypass(s):
    if not boto3:
        return "SKIPPED", "pip install boto3"
    c = s3_client(s)
    c.create_bucket(Bucket="private")
    c.put_object(Bucket="private", Key="secret", Body=b"the private bytes")
    code, _, body = request(s.node, "GET", "/private/secret")
    return held(code in (401, 403), f"native GET answered {code} ({body[:40]!r})")


@probe("1", "an anonymous native PUT and DELETE of an object in a private S3 bucket")
def native_write(s):
    if not boto3:
        return "SKIPPED", "pip install boto3"
    c = s3_client(s)
    c.create_bucket(Bucket="private-w")
    c.put_object(Bucket="private-w", Key="k", Body=b"kept")
    put, _, _ = request(s.node, "PUT", "/private-w/k", body=b"overwritten")
    delete, _, _ = request(s.node, "DELETE", "/private-w/k")
    kept = c.get_object(Bucket="private-w", Key="k")["Body"].read()
    return held(put in (401, 403) and delete in (401, 403) and kept == b"kept",
                f"PUT {put}, DELETE {delete}, the object holds {kept!r}")


@probe("1", "a native PUT over a multipart part (%01mpu/UPLOAD/PART), with the root key's token")
def part_overwrite(s):
    if not boto3:
        return "SKIPPED", "pip install boto3"
    c = s3_client(s)
    c.create_bucket(Bucket="parts")
    up = c.create_multipart_upload(Bucket="parts", Key="big")["UploadId"]
    c.upload_part(Bucket="parts", Key="big", UploadId=up, PartNumber=1, Body=b"original part")
    code, _, _ = request(s.node, "PUT", f"/parts/%01mpu/{up}/00001", AUTH, b"swapped bytes")
    return held(code == 400, f"answered {code}")


@probe("1", "a native write of an S3 bucket is listed with its size")
def native_listed(s):
    if not boto3:
        return "SKIPPED", "pip install boto3"
    c = s3_client(s)
    c.create_bucket(Bucket="listed")
    c.put_object(Bucket="listed", Key="o", Body=b"four")
    request(s.node, "PUT", "/listed/o", AUTH, b"eight!!!")
    request(s.node, "PUT", "/listed/n", AUTH, b"new")
    got = {o["Key"]: o["Size"] for o in c.list_objects_v2(Bucket="listed").get("Contents", [])}
    return held(got == {"o": 8, "n": 3}, f"listed {got}")


@probe("2", "an unsigned POST form with a 1 MiB field")
def form_bound(s):
    boundary = "probe"
    field = b"A" * (1 << 20)
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"policy\"\r\n\r\n".encode()
            + field + f"\r\n--{boundary}--\r\n".encode())
    code, _, answer = request(s.s3, "POST", "/anybucket",
                              {"Content-Type": f"multipart/form-data; boundary={boundary}"}, body)
    return held(400 <= code < 500, f"answered {code}")


@probe("2", "a PUT whose body never arrives is answered, not held open")
def stalled_body(s):
    head = (f"PUT /b/k HTTP/1.1\r\nHost: {s.s3}\r\nContent-Length: 1000\r\n"
            "Authorization: AWS4-HMAC-SHA256 Credential=x/20260101/us-east-1/s3/aws4_request, "
            "SignedHeaders=host, Signature=00\r\n\r\n")
    t = time.time()
    code, _, _ = exchange(s.s3, head, b"", timeout=90)
    return held(code != 0, f"answered {code} after {time.time() - t:.0f} s")


@probe("3", "a SigV2 header-signed request (off by default)")
def sigv2(s):
    code, _, body = request(s.s3, "GET", "/", {"Date": "Thu, 01 Jan 2015 00:00:00 GMT",
                                               "Authorization": f"AWS {ACCESS}:AAAAAAAAAAAAAAAAAAAAAAAAAAA="})
    return held(code in (400, 403), f"answered {code}")


@probe("3", "a SigV4 presigned URL with X-Amz-Expires=4294967295")
def presigned_forever(s):
    if not boto3:
        return "SKIPPED", "pip install boto3"
    url = s3_client(s).generate_presigned_url("get_object", Params={"Bucket": "private", "Key": "secret"},
                                             ExpiresIn=4294967295)
    path = url.split(s.s3, 1)[1]
    code, _, _ = request(s.s3, "GET", path)
    return held(code in (400, 403), f"answered {code}")


@probe("4", "an unsigned request to the node protocol")
def unsigned(s):
    code, _, _ = request(s.node, "GET", "/cluster/v1/status")
    return held(code == 401, f"answered {code}")


@probe("4", "a captured request sent again byte for byte")
def replay(s):
    if need_blake3():
        return need_blake3()
    head = signed_head(s.node, "GET", "/cluster/v1/status", b"")
    first, _, _ = exchange(s.node, head)
    again, _, _ = exchange(s.node, head)
    return held(first == 200 and again == 403, f"first {first}, again {again}")


@probe("4", "a captured register with its body swapped for one of the same length")
def swapped(s):
    if need_blake3():
        return need_blake3()
    body = json.dumps({"addr": "127.0.0.1:40001", "disks": [
        {"tier": "disk", "capacity_bytes": 1 << 30, "path": "/d"}]}).encode()
    other = body.replace(b"40001", b"40002")
    head = signed_head(s.meta, "POST", "/v1/register", body, extra="Content-Type: application/json\r\n")
    code, _, answer = exchange(s.meta, head, other)
    return held(code == 400, f"answered {code} {answer[:80]!r}")


@probe("4", "a request to one node delivered to another")
def misdelivered(s):
    if need_blake3():
        return need_blake3()
    head = signed_head(s.node2, "GET", "/cluster/v1/status", b"")
    kept, _, _ = exchange(s.node, head)
    rewritten, _, _ = exchange(s.node, head.replace(f"Host: {s.node2}", f"Host: {s.node}"))
    return held(kept == 403 and rewritten == 403, f"Host kept {kept}, rewritten {rewritten}")


@probe("4", "a register naming node 0 from another address, without its node key")
def register_as_another(s):
    if need_blake3():
        return need_blake3()
    body = json.dumps({"addr": "127.0.0.1:1", "node_id": 0, "disks": [
        {"tier": "disk", "capacity_bytes": 1 << 30, "path": "/d"}]}).encode()
    head = signed_head(s.meta, "POST", "/v1/register", body, extra="Content-Type: application/json\r\n")
    code, _, answer = exchange(s.meta, head, body)
    # Refused, or taken as a new pending node: either way node 0 stays.
    try:
        named = json.loads(answer).get("node_id")
    except ValueError:
        named = None
    return held(code == 403 or (code == 200 and named != 0),
                f"answered {code} (node {named})")


@probe("4", "a heartbeat as node 0 without its node key, naming a disk failed")
def heartbeat_as_another(s):
    if need_blake3():
        return need_blake3()
    body = json.dumps({"node_id": 0, "failed_disks": [0]}).encode()
    head = signed_head(s.meta, "POST", "/v1/heartbeat", body, extra="Content-Type: application/json\r\n")
    code, _, _ = exchange(s.meta, head, body)
    return held(code == 403, f"answered {code}")


def make_key(s, perms):
    """A key of the metadata service with perms ({bucket: "read"|"write"|"owner"})."""
    import urllib.request
    req = urllib.request.Request(f"http://{s.meta}/v1/keys", method="POST",
                                 data=json.dumps({"buckets": perms}).encode(),
                                 headers={"x-strata-admin-token": ADMIN,
                                          "content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        v = json.load(r)
    return {"Authorization": "Bearer " + token(v["access_key"], v["secret_key"])}


@probe("5", "8 header-only batch POSTs declaring 256 MiB each by one key, then another key's PUT")
def budget(s):
    attacker = make_key(s, {"budget": "write"})
    socks = []
    for _ in range(8):
        c = socket.create_connection(tuple(s.node.rsplit(":", 1)))
        c.sendall(f"POST /budget HTTP/1.1\r\nHost: {s.node}\r\nAuthorization: {attacker['Authorization']}\r\n"
                  f"Content-Length: {256 << 20}\r\n\r\n".encode())
        socks.append(c)
    time.sleep(1)
    code, _, _ = request(s.node, "PUT", "/budget/after", AUTH, b"x" * (8 << 20))
    for c in socks:
        c.close()
    return held(code in (200, 201), f"the PUT answered {code}")


@probe("5", "a PUT declaring 5 GB that trickles a byte a second")
def trickle(s):
    c = socket.create_connection(tuple(s.node.rsplit(":", 1)))
    c.sendall(f"PUT /budget/trickle HTTP/1.1\r\nHost: {s.node}\r\nAuthorization: {AUTH['Authorization']}\r\n"
              f"Content-Length: {5 * 10**9}\r\n\r\n".encode())
    c.setblocking(False)
    t, got = time.time(), b""
    while not got and time.time() - t < 120:
        try:
            c.send(b"x")
        except OSError:
            break
        time.sleep(1)
        try:
            got = c.recv(65536)
        except BlockingIOError:
            pass
    c.close()
    secs = time.time() - t
    return held(bool(got) and secs < 60, f"answered {got.split(b' ')[1:2]} after {secs:.0f} s "
                                          f"(the default body timeout is 30 s)")


@probe("7", "a GET of a 32 MiB object whose answer is never read (dropped at --write-timeout)")
def never_read(s):
    code, _, _ = request(s.node, "PUT", "/probe/big", AUTH, os.urandom(32 << 20))
    if code not in (200, 201):
        return "ERROR", f"the PUT answered {code}"
    c = socket.create_connection(tuple(s.node.rsplit(":", 1)))
    c.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    c.sendall(f"GET /probe/big HTTP/1.1\r\nHost: {s.node}\r\nAuthorization: {AUTH['Authorization']}\r\n\r\n".encode())
    time.sleep(45)  # the default write timeout is 30 s
    c.settimeout(5)
    got = 0
    try:
        while True:
            b = c.recv(1 << 20)
            if not b:
                break
            got += len(b)
    except (socket.timeout, ConnectionResetError):
        pass
    c.close()
    return held(got < 32 << 20, f"{got:,} bytes arrived before the connection ended")


@probe("9", "/metrics without the admin token")
def metrics_token(s):
    code, _, _ = request(s.node, "GET", "/metrics")
    return held(code == 401, f"answered {code}")


@probe("9", "DATA/meta/meta.json readable by others")
def meta_mode(s):
    p = os.path.join(s.dir, "one", "meta", "meta.json")
    if not os.path.exists(p):
        return "SKIPPED", f"no {p}"
    mode = os.stat(p).st_mode & 0o777
    return held(mode & 0o077 == 0, f"mode {mode:o}")


@probe("9", "S3 CreateBucket rewriting all metadata (1,000 buckets, then 100 more)")
def bucket_rewrite(s):
    if boto3 is None:
        return "SKIPPED", "pip install boto3"
    c = s3_client(s)
    for i in range(1000):
        c.create_bucket(Bucket=f"many-{i:05d}")
    p = os.path.join(s.dir, "one", "meta", "meta.json")
    rewrites, ino = 0, os.stat(p).st_ino
    started = time.time()
    for i in range(100):
        c.create_bucket(Bucket=f"more-{i:05d}")
        now = os.stat(p).st_ino
        rewrites += now != ino
        ino = now
    rate = 100 / (time.time() - started)
    return held(rewrites <= 2, f"meta.json replaced {rewrites} times in 100 creations; {rate:.0f} a second")


@probe("9", "an S3 XML body declared at 21 MiB")
def big_xml(s):
    head = (f"POST /private?delete HTTP/1.1\r\nHost: {s.s3}\r\nContent-Length: {21 << 20}\r\n"
            "Content-Type: application/xml\r\nConnection: close\r\n\r\n")
    code, _, _ = exchange(s.s3, head, b"<Delete>")
    return held(400 <= code < 500, f"answered {code}")


@probe("9", "a tier plan with a workload's ec.after_seconds = 1e300")
def tier_plan(s):
    plan = {"format": "strata-tier-plan", "version": 1, "total_flash_bytes": 1 << 20,
            "write_bound_bytes_per_s": None, "train_window": [0.0, 3600.0], "policy": "fifo",
            "predicted_flash_hit_ratio": 0.5,
            "workloads": [{"id": 0, "name": "w", "flash_bytes": 1 << 20, "write_probability": 1.0,
                           "ttl_seconds": 60.0, "eviction": "fifo", "weight": 1.0,
                           "predicted_flash_reads_per_s": 1.0, "ec": {"after_seconds": 1e300}}]}
    body = json.dumps(plan).encode()
    code, _, answer = request(s.meta, "PUT", "/v1/tier-plan",
                              {"Authorization": f"Bearer {ADMIN}", "Content-Type": "application/json"},
                              body)
    return held(code == 400 and b"after_seconds" in answer, f"answered {code} {answer[:100]!r}")


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "target/release/strata"
    if not os.access(binary, os.X_OK):
        raise SystemExit(f"probe: not an executable: {binary}")
    s = Strata(binary)
    try:
        for p in (native_bypass, native_write, part_overwrite, native_listed, form_bound, stalled_body, sigv2, presigned_forever, unsigned,
                  replay, swapped, misdelivered, register_as_another, heartbeat_as_another,
                  budget, trickle, never_read, metrics_token, meta_mode, bucket_rewrite, big_xml, tier_plan):
            p(s)
    finally:
        s.stop()
    got_in = [r for r in RESULTS if r[2] in ("GOT IN", "ERROR")]
    print(f"\n{len(RESULTS)} probes: {sum(r[2] == 'HELD' for r in RESULTS)} held, "
          f"{len(got_in)} got in or broke, {sum(r[2] == 'SKIPPED' for r in RESULTS)} skipped")
    print("\n| finding | probe | result | detail |\n| --- | --- | --- | --- |")
    for f, what, verdict, detail in RESULTS:
        print(f"| {f} | {what} | {verdict} | {detail.replace('|', '/')} |")
    sys.exit(1 if got_in else 0)


if __name__ == "__main__":
    main()
