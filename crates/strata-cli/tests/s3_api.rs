//! The S3 API of a cluster node (docs/s3-compatibility.md), driven by real
//! S3 clients started by the tests: boto3 and the aws CLI.

mod cluster_common;
mod flip_common;
mod s3;

use cluster_common::*;
use flip_common::*;
use s3::*;
use std::time::Duration;

/// Objects over boto3: put, get (whole and ranges), head, delete, a
/// multi-tract object, Content-MD5 checked, errors as S3 codes.
#[test]
fn boto3_objects_round_trip() {
    let c = S3Cluster::start();
    let out = c.python(&format!(
        r#"{PRELUDE}
small = b"hello, strata over s3"
s3.create_bucket(Bucket="photos")
r = s3.put_object(Bucket="photos", Key="a/b c.txt", Body=small)
assert r["ETag"] == '"%s"' % hashlib.md5(small).hexdigest(), r["ETag"]
g = s3.get_object(Bucket="photos", Key="a/b c.txt")
assert g["Body"].read() == small
assert g["ContentLength"] == len(small)
h = s3.head_object(Bucket="photos", Key="a/b c.txt")
assert h["ContentLength"] == len(small), h
import datetime
age = datetime.datetime.now(datetime.timezone.utc) - h["LastModified"]
assert abs(age.total_seconds()) < 120, h["LastModified"]
# GET and HEAD answer the MD5 ETag the PUT answered (kept in the head record).
assert g["ETag"] == h["ETag"] == '"%s"' % hashlib.md5(small).hexdigest(), (g["ETag"], h["ETag"])
g = s3.get_object(Bucket="photos", Key="a/b c.txt", Range="bytes=7-12")
assert g["Body"].read() == small[7:13]
assert g["ContentRange"] == "bytes 7-12/%d" % len(small), g["ContentRange"]
assert g["ResponseMetadata"]["HTTPStatusCode"] == 206
assert code(lambda: s3.get_object(Bucket="photos", Key="a/b c.txt", Range="bytes=500-")) == ("InvalidRange", 416)

# Larger than a tract (8 MiB): striped over rows, read back whole and across a tract boundary.
big = bytes((i * 7919 + 13) % 251 for i in range(20 * 1024 * 1024 + 77))
r = s3.put_object(Bucket="photos", Key="big.bin", Body=big)
assert r["ETag"] == '"%s"' % hashlib.md5(big).hexdigest()
assert s3.head_object(Bucket="photos", Key="big.bin")["ETag"] == r["ETag"]
assert s3.get_object(Bucket="photos", Key="big.bin")["Body"].read() == big
part = s3.get_object(Bucket="photos", Key="big.bin", Range="bytes=8388600-8388615")["Body"].read()
assert part == big[8388600:8388616]

# A wrong Content-MD5 is BadDigest and stores nothing.
import base64
bad = base64.b64encode(hashlib.md5(b"other").digest()).decode()
assert code(lambda: s3.put_object(Bucket="photos", Key="bad", Body=b"data", ContentMD5=bad)) == ("BadDigest", 400)
# Not the base64 of 16 bytes: InvalidDigest.
assert code(lambda: s3.put_object(Bucket="photos", Key="bad", Body=b"data", ContentMD5="YWJj")) == ("InvalidDigest", 400)
assert code(lambda: s3.head_object(Bucket="photos", Key="bad"))[1] == 404
assert code(lambda: s3.get_object(Bucket="photos", Key="bad")) == ("NoSuchKey", 404)

s3.delete_object(Bucket="photos", Key="a/b c.txt")
assert code(lambda: s3.get_object(Bucket="photos", Key="a/b c.txt")) == ("NoSuchKey", 404)
# S3 deletes of absent keys succeed.
s3.delete_object(Bucket="photos", Key="never-written")

# Two writes of one name: the one whose body ends last wins, even if it
# began first (s3-tests' atomic dual write), in the object and its listing.
import http.client, urllib.parse
for n in (1000, 3 << 20):
    url = urllib.parse.urlsplit(s3.generate_presigned_url("put_object", Params={{"Bucket": "photos", "Key": "dual"}}))
    slow = http.client.HTTPConnection(url.hostname, url.port)
    slow.putrequest("PUT", url.path + "?" + url.query)
    slow.putheader("Content-Length", str(n))
    slow.endheaders()
    slow.send(b"B" * (n // 2))
    s3.put_object(Bucket="photos", Key="dual", Body=b"A" * n)
    assert s3.get_object(Bucket="photos", Key="dual")["Body"].read() == b"A" * n
    slow.send(b"B" * (n - n // 2))
    assert slow.getresponse().status == 200
    assert s3.get_object(Bucket="photos", Key="dual")["Body"].read() == b"B" * n, n
    listed = [o for o in s3.list_objects_v2(Bucket="photos", Prefix="dual")["Contents"]]
    assert [(o["Key"], o["Size"], o["ETag"]) for o in listed] == [("dual", n, '"%s"' % hashlib.md5(b"B" * n).hexdigest())], listed
print("ok")
"#
    ));
    assert_eq!(out.trim(), "ok");
}

/// Only signed requests with a known key and the right secret get in,
/// signed within 15 minutes of the server's clock (RequestTimeTooSkewed);
/// a presigned URL works with a plain HTTP client; an unsupported
/// operation is 501 NotImplemented.
#[test]
fn signatures_keys_presigned_and_not_implemented() {
    let c = S3Cluster::start();
    let out = c.python(&format!(
        r#"{PRELUDE}
import urllib.request, urllib.error
s3.create_bucket(Bucket="docs")
s3.put_object(Bucket="docs", Key="k", Body=b"secret bytes")
wrong = client(os.environ["ACCESS"], "not-the-secret")
assert code(lambda: wrong.get_object(Bucket="docs", Key="k")) == ("SignatureDoesNotMatch", 403)
assert code(lambda: wrong.put_object(Bucket="docs", Key="k", Body=b"x")) == ("SignatureDoesNotMatch", 403)
unknown = client("NOSUCHKEY", "whatever")
assert code(lambda: unknown.get_object(Bucket="docs", Key="k")) == ("InvalidAccessKeyId", 403)
anon = client(None, None, signature_version=botocore.UNSIGNED)
assert code(lambda: anon.get_object(Bucket="docs", Key="k")) == ("AccessDenied", 403)
assert code(lambda: anon.put_object(Bucket="docs", Key="k2", Body=b"x")) == ("AccessDenied", 403)
assert code(lambda: s3.get_object(Bucket="docs", Key="k2")) == ("NoSuchKey", 404)
# The object was not overwritten by the refused requests.
assert s3.get_object(Bucket="docs", Key="k")["Body"].read() == b"secret bytes"

url = s3.generate_presigned_url("get_object", Params={{"Bucket": "docs", "Key": "k"}}, ExpiresIn=300)
assert urllib.request.urlopen(url).read() == b"secret bytes"
try:
    sig = url.split("X-Amz-Signature=", 1)[1][:64]
    urllib.request.urlopen(url.replace(sig, sig[:-1] + ("1" if sig[-1] == "0" else "0")))
    raise AssertionError("a tampered presigned URL was served")
except urllib.error.HTTPError as e:
    assert e.code == 403, e.code

assert code(lambda: s3.get_bucket_tagging(Bucket="docs")) == ("NotImplemented", 501)
# A request signed 20 minutes off the server's clock (the window is 15).
import datetime, botocore.auth
real_now = botocore.auth.get_current_datetime
for skew in (-20, 20):
    botocore.auth.get_current_datetime = lambda: real_now() + datetime.timedelta(minutes=skew)
    try:
        assert code(lambda: s3.get_object(Bucket="docs", Key="k")) == ("RequestTimeTooSkewed", 403), skew
    finally:
        botocore.auth.get_current_datetime = real_now
botocore.auth.get_current_datetime = lambda: real_now() + datetime.timedelta(minutes=10)
try:
    assert s3.get_object(Bucket="docs", Key="k")["Body"].read() == b"secret bytes"
finally:
    botocore.auth.get_current_datetime = real_now
# UNSIGNED-PAYLOAD (the body is not hashed into the signature).
import io
unsigned = boto3.client("s3", endpoint_url=os.environ["ENDPOINT"], region_name="us-east-1",
    aws_access_key_id=os.environ["ACCESS"], aws_secret_access_key=os.environ["SECRET"],
    config=Config(s3={{"addressing_style": "path", "payload_signing_enabled": False}}))
unsigned.put_object(Bucket="docs", Key="unsigned", Body=io.BytesIO(b"no payload hash"))
assert s3.get_object(Bucket="docs", Key="unsigned")["Body"].read() == b"no payload hash"
print(url)
"#
    ));
    // curl, the plain HTTP client of the issue, with the same presigned URL.
    let url = out.trim().lines().last().expect("url").to_string();
    let got = std::process::Command::new("curl")
        .args(["-sf", &url])
        .output()
        .expect("curl");
    assert!(got.status.success(), "curl {url}: {got:?}");
    assert_eq!(got.stdout, b"secret bytes");
    // The secret never reaches the node's log; a refused signature does,
    // as the request was read (not its signature).
    let logs = c.logs();
    assert!(!logs.contains(SECRET), "the root secret was logged");
    let refused: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("signature does not match"))
        .collect();
    assert!(
        refused
            .iter()
            .any(|l| l.contains(": GET /docs/k (signed headers host;")
                && l.contains("x-amz-date 20")),
        "no refused GET in the log:\n{logs}"
    );
    assert!(
        refused.iter().any(|l| l.contains(": PUT /docs/k (")),
        "no refused PUT in the log:\n{logs}"
    );
    assert!(
        refused
            .iter()
            .any(|l| l.contains(": GET /docs/k?") && l.contains("Signature=(hidden)")),
        "no refused presigned GET in the log:\n{logs}"
    );
    assert!(
        !refused.iter().any(|l| l.contains("Signature=0")
            || l.contains("Signature=") && !l.contains("Signature=(hidden)")),
        "a signature was logged:\n{logs}"
    );
}

/// An object written over S3 reads over the native API, and one written
/// over the native API reads over S3.
#[test]
fn s3_and_native_api_see_the_same_objects() {
    let c = S3Cluster::start();
    c.python(&format!(
        r#"{PRELUDE}
s3.create_bucket(Bucket="mixed")
s3.put_object(Bucket="mixed", Key="from-s3", Body=b"written over s3")
"#
    ));
    let (code, _, body) = http_full(&c.node.1, "GET", "/mixed/from-s3", None, "", b"");
    assert_eq!(code, 200);
    assert_eq!(body, b"written over s3");
    let (code, _, _) = http_full(
        &c.node.1,
        "PUT",
        "/mixed/from-native",
        None,
        "",
        b"written natively",
    );
    assert_eq!(code, 201);
    let out = c.python(&format!(
        r#"{PRELUDE}
print(s3.get_object(Bucket="mixed", Key="from-native")["Body"].read().decode())
"#
    ));
    assert_eq!(out.trim(), "written natively");
}

/// The aws CLI: s3api put/head/get/delete and `aws s3 cp` up and down.
#[test]
fn aws_cli_copies_up_and_down() {
    let c = S3Cluster::start();
    let src = c.path("up.bin");
    let data: Vec<u8> = (0..300_000u32).map(|i| (i * 31 % 253) as u8).collect();
    std::fs::write(&src, &data).expect("write");
    let src_s = src.to_string_lossy().into_owned();
    c.aws_ok(&["s3", "mb", "s3://cli"]);
    c.aws_ok(&["s3", "cp", &src_s, "s3://cli/dir/up.bin"]);
    let down = c.path("down.bin");
    let down_s = down.to_string_lossy().into_owned();
    c.aws_ok(&["s3", "cp", "s3://cli/dir/up.bin", &down_s]);
    assert_eq!(std::fs::read(&down).expect("read"), data);

    let head = c.aws_ok(&[
        "s3api",
        "head-object",
        "--bucket",
        "cli",
        "--key",
        "dir/up.bin",
    ]);
    let head: serde_json::Value = serde_json::from_str(&head).expect("json");
    assert_eq!(head["ContentLength"], data.len());
    c.aws_ok(&[
        "s3api",
        "put-object",
        "--bucket",
        "cli",
        "--key",
        "k2",
        "--body",
        &src_s,
    ]);
    let out2 = c.path("k2.bin");
    c.aws_ok(&[
        "s3api",
        "get-object",
        "--bucket",
        "cli",
        "--key",
        "k2",
        &out2.to_string_lossy(),
    ]);
    assert_eq!(std::fs::read(&out2).expect("read"), data);
    c.aws_ok(&["s3api", "delete-object", "--bucket", "cli", "--key", "k2"]);
    let gone = c.aws(&["s3api", "head-object", "--bucket", "cli", "--key", "k2"]);
    assert!(!gone.status.success());
    assert!(
        String::from_utf8_lossy(&gone.stderr).contains("404"),
        "{gone:?}"
    );
    let ls = c.aws_ok(&["s3", "ls", "s3://cli/dir/"]);
    assert!(ls.contains("up.bin") && ls.contains("300000"), "{ls}");
    let ls = c.aws_ok(&["s3", "ls", "s3://cli/"]);
    assert!(ls.contains("PRE dir/") && !ls.contains("k2"), "{ls}");
    let buckets = c.aws_ok(&["s3", "ls"]);
    assert!(buckets.contains("cli"), "{buckets}");
    let rb = c.aws(&["s3", "rb", "s3://cli"]);
    assert!(!rb.status.success(), "a bucket with objects was removed");
    c.aws_ok(&["s3", "rm", "s3://cli/dir/up.bin"]);
    c.aws_ok(&["s3", "rb", "s3://cli"]);
    assert!(!c.aws_ok(&["s3", "ls"]).contains("cli"));
}

/// Buckets: create (names checked), head, list (paged, by prefix),
/// location, delete only when empty; objects of unknown buckets are
/// NoSuchBucket.
#[test]
fn buckets_over_boto3() {
    let c = S3Cluster::start();
    let out = c.python(&format!(
        r#"{PRELUDE}
assert code(lambda: s3.put_object(Bucket="nobucket", Key="k", Body=b"x")) == ("NoSuchBucket", 404)
assert code(lambda: s3.head_bucket(Bucket="nobucket"))[1] == 404
s3.create_bucket(Bucket="b-one")
s3.create_bucket(Bucket="b-two")
assert code(lambda: s3.create_bucket(Bucket="b-one")) == ("BucketAlreadyOwnedByYou", 409)
assert code(lambda: s3.create_bucket(Bucket="Bad_Name")) == ("InvalidBucketName", 400)
for bad in ("foo.-bar", "foo-.bar", "192.168.5.4", "ab", "a" * 64):
    assert code(lambda: s3.create_bucket(Bucket=bad)) == ("InvalidBucketName", 400), bad
s3.head_bucket(Bucket="b-one")
assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["b-one", "b-two"]
# ListBuckets pages with max-buckets and continuation tokens, and filters by prefix.
s3.create_bucket(Bucket="c-three")
r = s3.list_buckets(MaxBuckets=2)
assert [b["Name"] for b in r["Buckets"]] == ["b-one", "b-two"] and r.get("ContinuationToken"), r
r = s3.list_buckets(MaxBuckets=2, ContinuationToken=r["ContinuationToken"])
assert [b["Name"] for b in r["Buckets"]] == ["c-three"] and not r.get("ContinuationToken"), r
assert [b["Name"] for b in s3.list_buckets(Prefix="b-")["Buckets"]] == ["b-one", "b-two"]
s3.delete_bucket(Bucket="c-three")
assert s3.get_bucket_location(Bucket="b-one").get("LocationConstraint") in (None, "")
assert code(lambda: s3.create_bucket(Bucket="b-far", CreateBucketConfiguration={{"LocationConstraint": "eu-west-1"}})) == ("IllegalLocationConstraintException", 400)
# Every answer has a request id; an error's XML carries the same one.
import urllib.request, urllib.error, xml.etree.ElementTree as ET
url = s3.generate_presigned_url("get_object", Params={{"Bucket": "b-two", "Key": "absent"}})
try:
    urllib.request.urlopen(url)
    raise AssertionError("an absent key was found")
except urllib.error.HTTPError as e:
    assert e.code == 404
    rid = e.headers["x-amz-request-id"]
    doc = ET.fromstring(e.read())
    assert doc.find("Code").text == "NoSuchKey" and rid and doc.find("RequestId").text == rid, (rid, ET.tostring(doc))
other = s3.head_bucket(Bucket="b-two")["ResponseMetadata"]["HTTPHeaders"]["x-amz-request-id"]
assert other and other != rid
s3.put_object(Bucket="b-one", Key="k", Body=b"x")
assert code(lambda: s3.delete_bucket(Bucket="b-one")) == ("BucketNotEmpty", 409)
s3.delete_object(Bucket="b-one", Key="k")
s3.delete_bucket(Bucket="b-one")
assert code(lambda: s3.head_bucket(Bucket="b-one"))[1] == 404
assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["b-two"]
print("ok")
"#
    ));
    assert_eq!(out.trim(), "ok");
}

/// ListObjectsV2 and ListObjects against a model: prefix, delimiter,
/// max-keys, continuation, start-after, marker, encoding-type=url, keys in
/// UTF-8 byte order.
#[test]
fn listing_matches_a_model() {
    let c = S3Cluster::start();
    let out = c.python(&format!(
        r#"{PRELUDE}
import itertools
s3.create_bucket(Bucket="list")
names = ["a", "a/1", "a/2", "a/b/c", "a/b/d", "b", "b c/x", "Z", "été/1", "z+plus", "a/b/c/deep"]
names += ["many/%03d" % i for i in range(25)]
for n in names:
    s3.put_object(Bucket="list", Key=n, Body=n.encode())
s3.put_object(Bucket="list", Key="gone", Body=b"x")
s3.delete_object(Bucket="list", Key="gone")
order = sorted(names, key=lambda n: n.encode())

def model(prefix="", delimiter=None, after=""):
    keys, prefixes = [], []
    for n in order:
        if not n.startswith(prefix) or n.encode() <= after.encode():
            continue
        rest = n[len(prefix):]
        if delimiter and delimiter in rest:
            p = prefix + rest[:rest.index(delimiter) + len(delimiter)]
            if p not in prefixes and p.encode() > after.encode():
                prefixes.append(p)
        else:
            keys.append(n)
    return keys, prefixes

def v2(max_keys, **kw):
    keys, prefixes, token, pages = [], [], None, 0
    while True:
        args = dict(Bucket="list", MaxKeys=max_keys, **kw)
        if token:
            args["ContinuationToken"] = token
        r = s3.list_objects_v2(**args)
        pages += 1
        got = [o["Key"] for o in r.get("Contents", [])]
        cps = [p["Prefix"] for p in r.get("CommonPrefixes", [])]
        assert len(got) + len(cps) <= max_keys and r["KeyCount"] == len(got) + len(cps)
        keys += got
        prefixes += cps
        if not r["IsTruncated"]:
            return keys, prefixes, pages
        token = r["NextContinuationToken"]

for max_keys in (1, 3, 1000):
    for prefix, delim in itertools.product(["", "a/", "a", "many/", "zz"], [None, "/"]):
        kw = dict(Prefix=prefix)
        if delim:
            kw["Delimiter"] = delim
        keys, prefixes, _ = v2(max_keys, **kw)
        want = model(prefix, delim)
        assert (keys, prefixes) == want, (max_keys, prefix, delim, keys, prefixes, want)

keys, prefixes, pages = v2(1000, StartAfter="a/b/c")
assert (keys, prefixes) == model(after="a/b/c")
# Sizes and ETags come from the index.
r = s3.list_objects_v2(Bucket="list", Prefix="a/1")
o = r["Contents"][0]
assert o["Size"] == 3 and o["ETag"] == '"%s"' % hashlib.md5(b"a/1").hexdigest(), o
# botocore asks for encoding-type=url on every listing and decodes the
# answer (so the model checks above went through it); asked for explicitly,
# the keys come back encoded.
r = s3.list_objects_v2(Bucket="list", Prefix="b c/", EncodingType="url")
assert [o["Key"] for o in r["Contents"]] == ["b%20c/x"], r["Contents"]
r = s3.list_objects_v2(Bucket="list", Prefix="\u00e9", EncodingType="url")
assert [o["Key"] for o in r["Contents"]] == ["%C3%A9t%C3%A9/1"], r["Contents"]

# max-keys=0: nothing, not truncated; v1 always answers its Marker; an
# empty delimiter is no delimiter.
r = s3.list_objects_v2(Bucket="list", MaxKeys=0)
assert r["KeyCount"] == 0 and r["IsTruncated"] is False and "Contents" not in r, r
r = s3.list_objects(Bucket="list", MaxKeys=1)
assert r["Marker"] == "" and [o["Key"] for o in r["Contents"]] == [order[0]], r
r = s3.list_objects_v2(Bucket="list", Delimiter="", Prefix="a/b")
assert "Delimiter" not in r and [o["Key"] for o in r["Contents"]] == ["a/b/c", "a/b/c/deep", "a/b/d"], r
# v1 answers its Prefix as sent (botocore does not decode it there).
r = s3.list_objects(Bucket="list", Prefix="\n")
assert r["Prefix"] == "\n" and "Contents" not in r, r
r = s3.list_objects(Bucket="list", Prefix="b c/")
assert r["Prefix"] == "b c/" and [o["Key"] for o in r["Contents"]] == ["b c/x"], r
r = s3.list_objects_v2(Bucket="list", Prefix="a/1", FetchOwner=True)
assert r["Contents"][0]["Owner"]["ID"] == "strata", r

# ListObjects (v1) with markers.
keys, marker = [], ""
while True:
    r = s3.list_objects(Bucket="list", MaxKeys=4, Marker=marker)
    page = [o["Key"] for o in r.get("Contents", [])]
    keys += page
    if not r["IsTruncated"]:
        break
    marker = r.get("NextMarker") or page[-1]
assert keys == order, keys
print("ok")
"#
    ));
    assert_eq!(out.trim(), "ok");
}

/// An acknowledged PUT is listed and an acknowledged DELETE is not after
/// the node is killed (SIGKILL) and restarted.
#[test]
fn listing_survives_a_killed_node() {
    let mut c = S3Cluster::start();
    c.python(&format!(
        r#"{PRELUDE}
s3.create_bucket(Bucket="durable")
for i in range(40):
    s3.put_object(Bucket="durable", Key="k%02d" % i, Body=b"v%d" % i)
for i in range(0, 40, 3):
    s3.delete_object(Bucket="durable", Key="k%02d" % i)
"#
    ));
    c.node.0.kill();
    let node = S3Cluster::node(&c.meta, c.dir.path(), &c.s3, &c.node.1);
    c.node = (node, c.node.1.clone());
    c.wait_ready();
    let out = c.python(&format!(
        r#"{PRELUDE}
keys = [o["Key"] for o in s3.list_objects_v2(Bucket="durable")["Contents"]]
want = ["k%02d" % i for i in range(40) if i % 3]
assert keys == want, keys
for k in want:
    assert s3.get_object(Bucket="durable", Key=k)["Body"].read() == b"v%d" % int(k[1:])
print("ok")
"#
    ));
    assert_eq!(out.trim(), "ok");
}

/// A listing index redb refuses as corrupt (here its magic number flipped
/// while the node was down; `strata torture --kinds s3-flip-listing`
/// found random flips doing the same) no longer keeps the node down: the
/// file is moved to DATA/quarantine/, the node says so, starts with an
/// empty index, serves every object, and rebuilds the index (in a
/// cluster of one from the objects' head records): every name listed
/// again, with its size, ETag and metadata, deleted ones not
/// (docs/reliability.md, finding 7).
#[test]
fn a_corrupt_listing_index_is_quarantined_and_rebuilt() {
    let mut c = S3Cluster::start();
    c.python(&format!(
        r#"{PRELUDE}
s3.create_bucket(Bucket="flip")
for i in range(20):
    s3.put_object(Bucket="flip", Key="k%02d" % i, Body=b"v%d" % i)
s3.delete_object(Bucket="flip", Key="k05")
s3.put_object(Bucket="flip", Key="k07", Body=b"seven again", ContentType="text/x-seven",
              Metadata={{"colour": "blue"}})
s3.create_bucket(Bucket="other")
s3.put_object(Bucket="other", Key="o", Body=b"o")
"#
    ));
    c.node.0.kill();
    let file = c.dir.path().join("node").join("listing.redb");
    let mut bytes = std::fs::read(&file).expect("listing.redb");
    bytes[0] ^= 0x10;
    std::fs::write(&file, &bytes).expect("write listing.redb");
    let node = S3Cluster::node(&c.meta, c.dir.path(), &c.s3, &c.node.1);
    c.node = (node, c.node.1.clone());
    c.wait_ready();
    let quarantined: Vec<_> = std::fs::read_dir(c.dir.path().join("node").join("quarantine"))
        .expect("DATA/quarantine")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("listing.redb."))
        .collect();
    assert_eq!(
        quarantined.len(),
        1,
        "the damaged index was not moved aside"
    );
    assert_eq!(
        std::fs::read(quarantined[0].path()).expect("quarantined file"),
        bytes,
        "the quarantined file is not the damaged one"
    );
    assert!(
        c.logs().contains("listing index") && c.logs().contains("is corrupt"),
        "the node did not say what it found:\n{}",
        c.logs()
    );
    let out = c.python(&format!(
        r#"{PRELUDE}
for i in range(20):
    if i not in (5, 7):
        assert s3.get_object(Bucket="flip", Key="k%02d" % i)["Body"].read() == b"v%d" % i
s3.put_object(Bucket="flip", Key="new", Body=b"after")
got = [(o["Key"], o["Size"], o["ETag"]) for o in s3.list_objects_v2(Bucket="flip").get("Contents", [])]
def body(i):
    return b"seven again" if i == 7 else b"v%d" % i
want = [("k%02d" % i, len(body(i)), '"%s"' % hashlib.md5(body(i)).hexdigest()) for i in range(20) if i != 5]
want.append(("new", 5, '"%s"' % hashlib.md5(b"after").hexdigest()))
assert got == want, (got, want)
assert [o["Key"] for o in s3.list_objects_v2(Bucket="other")["Contents"]] == ["o"]
print("ok")
"#
    ));
    assert_eq!(out.trim(), "ok");
    assert!(
        c.logs().contains("the listing index is rebuilt"),
        "the node did not say the index was rebuilt:\n{}",
        c.logs()
    );
}

/// `--s3-listen` without a root key is refused with the reason (no
/// anonymous access), on a cluster of one as on a member.
#[test]
fn s3_listen_refused_without_a_root_key() {
    let dir = scratch();
    for meta in [None, Some("127.0.0.1:1")] {
        let mut cmd = strata();
        cmd.arg("server");
        if let Some(m) = meta {
            cmd.args(["--meta", m]);
        }
        let out = run(cmd
            .arg("--data")
            .arg(
                dir.path()
                    .join(if meta.is_some() { "member" } else { "alone" }),
            )
            .args(["--listen", "127.0.0.1:0", "--s3-listen", "127.0.0.1:0"])
            .env_remove("STRATA_ROOT_ACCESS_KEY")
            .env_remove("STRATA_ROOT_SECRET_KEY"));
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("STRATA_ROOT_SECRET_KEY"), "{err}");
    }
}

/// `strata key create|list|delete` with per-bucket permissions: a key
/// reads where it may read, writes where it may write, nothing elsewhere;
/// a deleted key is refused; the key routes need the admin token.
#[test]
fn keys_with_per_bucket_permissions() {
    let c = S3Cluster::start();
    let meta = c.meta.clone();
    let created = ok(strata()
        .args(["key", "create", "--meta", &meta])
        .args(["--bucket", "rdonly:read", "--bucket", "rdwr:write"])
        .env("STRATA_ADMIN_TOKEN", ADMIN));
    let field = |name: &str| {
        created
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
            .expect("key field")
    };
    let (access, secret) = (field("access key:"), field("secret key:"));
    let listed = ok(strata()
        .args(["key", "list", "--meta", &meta])
        .env("STRATA_ADMIN_TOKEN", ADMIN));
    assert!(
        listed.contains(&access) && listed.contains("rdonly:read") && listed.contains("rdwr:write")
    );
    assert!(!listed.contains(&secret), "key list printed a secret");
    // The key routes hold secrets: not without the admin token (401), not
    // with a wrong one (403).
    let (code, _, _) = http_full(&meta, "GET", "/v1/keys", None, "", b"");
    assert_eq!(code, 401);
    let (code, _, _) = http_full(
        &meta,
        "GET",
        "/v1/keys",
        None,
        "x-strata-admin-token: wrong\r\n",
        b"",
    );
    assert_eq!(code, 403);
    let (code, _, _) = http_full(
        &meta,
        "POST",
        "/v1/keys",
        None,
        "content-type: application/json\r\n",
        b"{}",
    );
    assert_eq!(code, 401);
    let refused = run(strata()
        .args(["key", "list", "--meta", &meta])
        .env("STRATA_ADMIN_TOKEN", "wrong"));
    assert!(!refused.status.success());

    let script = format!(
        r#"{PRELUDE}
import time
for b in ("rdonly", "rdwr", "other"):
    s3.create_bucket(Bucket=b)
    s3.put_object(Bucket=b, Key="k", Body=b"root wrote " + b.encode())
k = client(os.environ["KEY"], os.environ["KEY_SECRET"])
assert k.get_object(Bucket="rdonly", Key="k")["Body"].read() == b"root wrote rdonly"
assert [o["Key"] for o in k.list_objects_v2(Bucket="rdonly")["Contents"]] == ["k"]
assert code(lambda: k.put_object(Bucket="rdonly", Key="x", Body=b"x")) == ("AccessDenied", 403)
assert code(lambda: k.delete_object(Bucket="rdonly", Key="k")) == ("AccessDenied", 403)
k.put_object(Bucket="rdwr", Key="x", Body=b"key wrote")
assert k.get_object(Bucket="rdwr", Key="x")["Body"].read() == b"key wrote"
k.delete_object(Bucket="rdwr", Key="x")
assert code(lambda: k.get_object(Bucket="other", Key="k")) == ("AccessDenied", 403)
assert code(lambda: k.list_objects_v2(Bucket="other")) == ("AccessDenied", 403)
assert code(lambda: k.delete_bucket(Bucket="rdwr")) == ("AccessDenied", 403)
assert code(lambda: k.create_bucket(Bucket="newone")) == ("AccessDenied", 403)
# ListBuckets shows a key only its own buckets; the root key every one.
assert sorted(b["Name"] for b in k.list_buckets()["Buckets"]) == ["rdonly", "rdwr"]
assert sorted(b["Name"] for b in s3.list_buckets()["Buckets"]) == ["other", "rdonly", "rdwr"]
wrong = client(os.environ["KEY"], "wrong-secret")
assert code(lambda: wrong.get_object(Bucket="rdonly", Key="k")) == ("SignatureDoesNotMatch", 403)
print("ok")
"#
    );
    let out = c.python_env(&script, &[("KEY", &access), ("KEY_SECRET", &secret)]);
    assert_eq!(out.trim(), "ok");

    ok(strata()
        .args(["key", "delete", "--meta", &meta, &access])
        .env("STRATA_ADMIN_TOKEN", ADMIN));
    let out = c.python_env(
        &format!(
            r#"{PRELUDE}
import time
k = client(os.environ["KEY"], os.environ["KEY_SECRET"])
# Nodes cache keys for a second.
deadline = time.time() + 10
while True:
    try:
        k.get_object(Bucket="rdonly", Key="k")
    except botocore.exceptions.ClientError as e:
        assert e.response["Error"]["Code"] == "InvalidAccessKeyId", e.response
        break
    assert time.time() < deadline, "a deleted key still signs requests"
    time.sleep(0.2)
print("ok")
"#
        ),
        &[("KEY", &access), ("KEY_SECRET", &secret)],
    );
    assert_eq!(out.trim(), "ok");
    assert!(!c.logs().contains(&secret), "a key's secret was logged");
}

/// Multipart upload: parts, ListParts, the part rules of
/// CompleteMultipartUpload, the `-N` ETag, abort; and the aws CLI's own
/// multipart `s3 cp` of a 100 MiB file up and back.
#[test]
fn multipart_uploads() {
    let c = S3Cluster::start();
    let out = c.python(&format!(
        r#"{PRELUDE}
s3.create_bucket(Bucket="mpu")
MiB = 1 << 20
parts = [bytes([i]) * (6 * MiB) for i in (1, 2)] + [b"tail" * 1000]
u = s3.create_multipart_upload(Bucket="mpu", Key="big")["UploadId"]
etags = [s3.upload_part(Bucket="mpu", Key="big", UploadId=u, PartNumber=i + 1, Body=p)["ETag"] for i, p in enumerate(parts)]
assert etags[0] == '"%s"' % hashlib.md5(parts[0]).hexdigest()
listed = s3.list_parts(Bucket="mpu", Key="big", UploadId=u)["Parts"]
assert [(p["PartNumber"], p["Size"], p["ETag"]) for p in listed] == [(i + 1, len(p), etags[i]) for i, p in enumerate(parts)], listed
# Nothing is listed before completion.
assert s3.list_objects_v2(Bucket="mpu").get("KeyCount") == 0
done = [{{"PartNumber": i + 1, "ETag": e}} for i, e in enumerate(etags)]
assert code(lambda: s3.complete_multipart_upload(Bucket="mpu", Key="big", UploadId=u, MultipartUpload={{"Parts": done[::-1]}})) == ("InvalidPartOrder", 400)
bad = [dict(done[0], ETag='"%s"' % ("0" * 32))] + done[1:]
assert code(lambda: s3.complete_multipart_upload(Bucket="mpu", Key="big", UploadId=u, MultipartUpload={{"Parts": bad}})) == ("InvalidPart", 400)
r = s3.complete_multipart_upload(Bucket="mpu", Key="big", UploadId=u, MultipartUpload={{"Parts": done}})
want = hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts)).hexdigest() + "-3"
assert r["ETag"] == '"%s"' % want, r["ETag"]
assert s3.get_object(Bucket="mpu", Key="big")["Body"].read() == b"".join(parts)
objs = s3.list_objects_v2(Bucket="mpu")["Contents"]
assert [(o["Key"], o["Size"], o["ETag"]) for o in objs] == [("big", sum(map(len, parts)), '"%s"' % want)], objs
assert code(lambda: s3.list_parts(Bucket="mpu", Key="big", UploadId=u)) == ("NoSuchUpload", 404)

# A part below 5 MiB that is not the last: EntityTooSmall.
u = s3.create_multipart_upload(Bucket="mpu", Key="small")["UploadId"]
u2 = s3.create_multipart_upload(Bucket="mpu", Key="other/x")["UploadId"]
ups = s3.list_multipart_uploads(Bucket="mpu")["Uploads"]
assert sorted((x["Key"], x["UploadId"]) for x in ups) == sorted([("small", u), ("other/x", u2)]), ups
assert [x["UploadId"] for x in s3.list_multipart_uploads(Bucket="mpu", Prefix="oth")["Uploads"]] == [u2]
# Paged one at a time (boto3's paginator follows NextKeyMarker / NextUploadIdMarker).
first = s3.list_multipart_uploads(Bucket="mpu", MaxUploads=1)
assert first["IsTruncated"] and len(first["Uploads"]) == 1, first
pages = s3.get_paginator("list_multipart_uploads").paginate(Bucket="mpu", MaxUploads=1)
assert [x["UploadId"] for pg in pages for x in pg.get("Uploads", [])] == [u2, u]
d = s3.list_multipart_uploads(Bucket="mpu", Delimiter="/")
assert [p["Prefix"] for p in d.get("CommonPrefixes", [])] == ["other/"], d
assert [x["Key"] for x in d["Uploads"]] == ["small"], d
s3.abort_multipart_upload(Bucket="mpu", Key="other/x", UploadId=u2)
e1 = s3.upload_part(Bucket="mpu", Key="small", UploadId=u, PartNumber=1, Body=b"a")["ETag"]
e2 = s3.upload_part(Bucket="mpu", Key="small", UploadId=u, PartNumber=2, Body=b"b")["ETag"]
p1 = s3.list_parts(Bucket="mpu", Key="small", UploadId=u, MaxParts=1)
assert p1["IsTruncated"] and [p["PartNumber"] for p in p1["Parts"]] == [1] and p1["NextPartNumberMarker"] == 1, p1
p2 = s3.list_parts(Bucket="mpu", Key="small", UploadId=u, MaxParts=1, PartNumberMarker=1)
assert not p2["IsTruncated"] and [p["PartNumber"] for p in p2["Parts"]] == [2], p2
assert code(lambda: s3.complete_multipart_upload(Bucket="mpu", Key="small", UploadId=u, MultipartUpload={{"Parts": [{{"PartNumber": 1, "ETag": e1}}, {{"PartNumber": 2, "ETag": e2}}]}})) == ("EntityTooSmall", 400)
# Abort: the upload is gone, nothing was written.
s3.abort_multipart_upload(Bucket="mpu", Key="small", UploadId=u)
assert code(lambda: s3.list_parts(Bucket="mpu", Key="small", UploadId=u)) == ("NoSuchUpload", 404)
assert code(lambda: s3.upload_part(Bucket="mpu", Key="small", UploadId=u, PartNumber=3, Body=b"c")) == ("NoSuchUpload", 404)
assert code(lambda: s3.head_object(Bucket="mpu", Key="small"))[1] == 404
assert s3.list_multipart_uploads(Bucket="mpu").get("Uploads", []) == []
# A part sent twice (the first send finishing last, both answers kept by
# the client): its number listed twice is the one part stored.
u = s3.create_multipart_upload(Bucket="mpu", Key="twice")["UploadId"]
eb = s3.upload_part(Bucket="mpu", Key="twice", UploadId=u, PartNumber=1, Body=b"B" * 8)["ETag"]
ea = s3.upload_part(Bucket="mpu", Key="twice", UploadId=u, PartNumber=1, Body=b"A" * 8)["ETag"]
twice = lambda parts: s3.complete_multipart_upload(Bucket="mpu", Key="twice", UploadId=u, MultipartUpload={{"Parts": [{{"PartNumber": 1, "ETag": e}} for e in parts]}})
assert code(lambda: twice([eb])) == ("InvalidPart", 400)
twice([eb, ea])
assert s3.get_object(Bucket="mpu", Key="twice")["Body"].read() == b"A" * 8
print("ok")
"#
    ));
    assert_eq!(out.trim(), "ok");

    // The aws CLI cuts files above 8 MiB into parts itself.
    let src = c.path("big.bin");
    let data: Vec<u8> = (0..100u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    std::fs::write(&src, &data).expect("write");
    let src_s = src.to_string_lossy().into_owned();
    c.aws_ok(&["s3", "cp", "--no-progress", &src_s, "s3://mpu/cli/big.bin"]);
    let back = c.path("back.bin");
    c.aws_ok(&[
        "s3",
        "cp",
        "--no-progress",
        "s3://mpu/cli/big.bin",
        &back.to_string_lossy(),
    ]);
    assert!(
        std::fs::read(&back).expect("read") == data,
        "the 100 MiB file came back different"
    );
    let ls = c.aws_ok(&["s3", "ls", "s3://mpu/cli/"]);
    assert!(ls.contains("104857600 big.bin"), "{ls}");
}

/// Uploads nobody completes or aborts are reclaimed after
/// `--s3-abandoned-uploads-after` (their parts' objects deleted, read
/// over the direct path to be sure); a repeated Complete answers the
/// first one's ETag; DeleteBucket takes the bucket's unfinished uploads
/// with it, so a bucket made again under its name starts bare.
#[test]
fn abandoned_and_completed_uploads_are_reclaimed() {
    let c = S3Cluster::start_with(&["--s3-abandoned-uploads-after", "4s"]);
    let out = c.python(&format!(
        r#"{PRELUDE}{STORED}
s3.create_bucket(Bucket="sweep")
part = os.urandom(100 * 1024)
u = s3.create_multipart_upload(Bucket="sweep", Key="left")["UploadId"]
s3.upload_part(Bucket="sweep", Key="left", UploadId=u, PartNumber=1, Body=part)
hidden = "/sweep/%01mpu/" + u + "/00001"
assert stored(hidden) == 200, stored(hidden)

# Completed: a repeated Complete answers the same ETag; the upload is no longer listed.
v = s3.create_multipart_upload(Bucket="sweep", Key="done")["UploadId"]
e = s3.upload_part(Bucket="sweep", Key="done", UploadId=v, PartNumber=1, Body=b"whole")["ETag"]
parts = {{"Parts": [{{"PartNumber": 1, "ETag": e}}]}}
first = s3.complete_multipart_upload(Bucket="sweep", Key="done", UploadId=v, MultipartUpload=parts)["ETag"]
again = s3.complete_multipart_upload(Bucket="sweep", Key="done", UploadId=v, MultipartUpload=parts)["ETag"]
assert first == again, (first, again)
assert code(lambda: s3.list_parts(Bucket="sweep", Key="done", UploadId=v)) == ("NoSuchUpload", 404)
assert code(lambda: s3.upload_part(Bucket="sweep", Key="done", UploadId=v, PartNumber=2, Body=b"x")) == ("NoSuchUpload", 404)
assert [x["UploadId"] for x in s3.list_multipart_uploads(Bucket="sweep").get("Uploads", [])] == [u]

# The sweep aborts the abandoned upload and deletes its part.
deadline = time.time() + 60
while s3.list_multipart_uploads(Bucket="sweep").get("Uploads") and time.time() < deadline:
    time.sleep(0.5)
assert s3.list_multipart_uploads(Bucket="sweep").get("Uploads", []) == []
assert code(lambda: s3.list_parts(Bucket="sweep", Key="left", UploadId=u)) == ("NoSuchUpload", 404)
while stored(hidden) != 404 and time.time() < deadline:
    time.sleep(0.5)
assert stored(hidden) == 404, stored(hidden)
# ... and the completed object is untouched.
assert s3.get_object(Bucket="sweep", Key="done")["Body"].read() == b"whole"
assert code(lambda: s3.get_object(Bucket="sweep", Key="left")) == ("NoSuchKey", 404)

# DeleteBucket with an unfinished upload: its parts go with it.
s3.create_bucket(Bucket="gone")
w = s3.create_multipart_upload(Bucket="gone", Key="k")["UploadId"]
s3.upload_part(Bucket="gone", Key="k", UploadId=w, PartNumber=1, Body=part)
assert stored("/gone/%01mpu/" + w + "/00001") == 200
s3.delete_bucket(Bucket="gone")
assert stored("/gone/%01mpu/" + w + "/00001") == 404
s3.create_bucket(Bucket="gone")
assert s3.list_multipart_uploads(Bucket="gone").get("Uploads", []) == []
print("ok")
"#
    ));
    assert_eq!(out.trim(), "ok");
    let logs = c.logs();
    assert!(
        logs.lines()
            .any(|l| l.contains("S3 upload sweep: 1 abandoned uploads aborted")),
        "no sweep in the log:\n{logs}"
    );
}

/// A part whose bytes were stored but whose record was not (the node
/// crashed in between, at the crash point `s3-part-stored`) is not left
/// behind: the pending record written before the part's bytes leads the
/// sweep to them once the upload is aborted; ListParts never shows it.
#[test]
fn a_part_stored_but_never_recorded_is_reclaimed() {
    let mut c = S3Cluster::start();
    let restart = |c: &mut S3Cluster, extra: &[&str], env: &[(&str, &str)]| {
        let node = S3Cluster::node_with_env(&c.meta, c.dir.path(), &c.s3, &c.node.1, extra, env);
        c.node = (node, c.node.1.clone());
        c.wait_ready();
    };
    let upload = c.python(&format!(
        r#"{PRELUDE}
s3.create_bucket(Bucket="crash")
u = s3.create_multipart_upload(Bucket="crash", Key="k")["UploadId"]
s3.upload_part(Bucket="crash", Key="k", UploadId=u, PartNumber=1, Body=b"one" * 1000)
print(u)
"#
    ));
    let upload = upload.trim();
    c.node.0.kill();
    restart(&mut c, &[], &[("STRATA_CRASH_AT", "s3-part-stored")]);
    let out = c.python_env(
        &format!(
            r#"{PRELUDE}
try:
    s3.upload_part(Bucket="crash", Key="k", UploadId=os.environ["U"], PartNumber=2, Body=b"two" * 1000)
    print("answered")
except Exception as e:
    print("no answer")
"#
        ),
        &[("U", upload)],
    );
    assert_eq!(out.trim(), "no answer", "{}", c.logs());
    let status = c.node.0.child.wait().expect("wait");
    assert!(!status.success(), "the node did not crash: {status}");
    assert!(c.logs().contains("crash point s3-part-stored reached"));
    // The part's bytes are there; its record is not.
    restart(&mut c, &[], &[]);
    let out = c.python_env(
        &format!(
            r#"{PRELUDE}{STORED}
u = os.environ["U"]
assert stored("/crash/%01mpu/" + u + "/00002") == 200
parts = s3.list_parts(Bucket="crash", Key="k", UploadId=u)["Parts"]
assert [p["PartNumber"] for p in parts] == [1], parts
print("ok")
"#
        ),
        &[("U", upload)],
    );
    assert_eq!(out.trim(), "ok");
    // Aborted: part 1 goes at once, part 2's bytes with the sweep.
    c.node.0.kill();
    restart(&mut c, &["--s3-abandoned-uploads-after", "2s"], &[]);
    let out = c.python_env(
        &format!(
            r#"{PRELUDE}{STORED}
u = os.environ["U"]
# The sweep (abandoned after 2 s, the upload is older) may abort it first.
try:
    s3.abort_multipart_upload(Bucket="crash", Key="k", UploadId=u)
except botocore.exceptions.ClientError as e:
    assert e.response["Error"]["Code"] == "NoSuchUpload", e
deadline = time.time() + 60
while stored("/crash/%01mpu/" + u + "/00001") != 404 and time.time() < deadline:
    time.sleep(0.5)
assert stored("/crash/%01mpu/" + u + "/00001") == 404
deadline = time.time() + 60
while stored("/crash/%01mpu/" + u + "/00002") != 404 and time.time() < deadline:
    time.sleep(0.5)
assert stored("/crash/%01mpu/" + u + "/00002") == 404
print("ok")
"#
        ),
        &[("U", upload)],
    );
    assert_eq!(out.trim(), "ok", "{}", c.logs());
}

/// What S3 keeps with an object besides its bytes: Content-Type,
/// Content-Encoding, Content-Disposition, Content-Language, Cache-Control,
/// Expires and `x-amz-meta-*` are answered by GET and HEAD, for a small
/// object (one record), a striped one (the manifest) and a multipart one;
/// the ETag is the MD5 of a single PUT and `MD5(part MD5s)-N` of a
/// multipart upload on PUT, GET, HEAD and in listings; response-*
/// parameters override the stored headers; user metadata over 2 KiB is
/// MetadataTooLarge.
#[test]
fn content_headers_metadata_and_etags_are_kept() {
    let c = S3Cluster::start();
    let out = c.python(&format!(
        r#"{PRELUDE}
import datetime
s3.create_bucket(Bucket="meta")
expires = datetime.datetime(2030, 1, 2, 3, 4, 5, tzinfo=datetime.timezone.utc)
headers = dict(ContentType="text/x-strata; charset=utf-8", ContentEncoding="gzip",
    ContentDisposition='attachment; filename="r.txt"', ContentLanguage="fr",
    CacheControl="max-age=60, public", Expires=expires,
    Metadata={{"colour": "blue", "two-words": "a b"}})
def check(key, body, etag):
    for r in (s3.head_object(Bucket="meta", Key=key), s3.get_object(Bucket="meta", Key=key)):
        assert r["ContentType"] == "text/x-strata; charset=utf-8", r
        assert r["ContentEncoding"] == "gzip", r
        assert r["ContentDisposition"] == 'attachment; filename="r.txt"', r
        assert r["ContentLanguage"] == "fr", r
        assert r["CacheControl"] == "max-age=60, public", r
        assert r["Expires"] == expires, r
        assert r["Metadata"] == {{"colour": "blue", "two-words": "a b"}}, r
        assert r["ETag"] == etag, (r["ETag"], etag)
        assert r["ContentLength"] == len(body)
    assert s3.get_object(Bucket="meta", Key=key)["Body"].read() == body
    listed = s3.list_objects_v2(Bucket="meta", Prefix=key)["Contents"]
    assert [(o["Key"], o["ETag"]) for o in listed] == [(key, etag)], listed

small = b"small object, one record"
r = s3.put_object(Bucket="meta", Key="small", Body=small, **headers)
check("small", small, '"%s"' % hashlib.md5(small).hexdigest())
# Over a tract (8 MiB): the metadata is in the manifest.
big = bytes(range(256)) * (9 * 4096)
s3.put_object(Bucket="meta", Key="big", Body=big, **headers)
check("big", big, '"%s"' % hashlib.md5(big).hexdigest())
# Multipart: the headers of CreateMultipartUpload, the -N ETag.
u = s3.create_multipart_upload(Bucket="meta", Key="multi", **headers)["UploadId"]
parts = [b"p" * (5 << 20), b"q" * 1000]
done = [{{"PartNumber": i + 1, "ETag": s3.upload_part(Bucket="meta", Key="multi", UploadId=u, PartNumber=i + 1, Body=p)["ETag"]}} for i, p in enumerate(parts)]
s3.complete_multipart_upload(Bucket="meta", Key="multi", UploadId=u, MultipartUpload={{"Parts": done}})
check("multi", b"".join(parts), '"%s-2"' % hashlib.md5(b"".join(hashlib.md5(p).digest() for p in parts)).hexdigest())

# An object without any: no content headers, no metadata; an overwrite
# drops the old ones.
s3.put_object(Bucket="meta", Key="small", Body=b"plain")
h = s3.head_object(Bucket="meta", Key="small")
assert h.get("Metadata") == {{}} and "ContentEncoding" not in h and "CacheControl" not in h, h
assert h["ETag"] == '"%s"' % hashlib.md5(b"plain").hexdigest()

# response-* query parameters override what is stored.
g = s3.get_object(Bucket="meta", Key="big", ResponseContentType="application/x-other",
    ResponseContentDisposition="inline", ResponseCacheControl="no-cache")
assert (g["ContentType"], g["ContentDisposition"], g["CacheControl"]) == ("application/x-other", "inline", "no-cache"), g
assert code(lambda: s3.put_object(Bucket="meta", Key="huge-meta", Body=b"x", Metadata={{"m": "v" * 2100}})) == ("MetadataTooLarge", 400)
assert code(lambda: s3.head_object(Bucket="meta", Key="huge-meta"))[1] == 404
print("ok")
"#
    ));
    assert_eq!(out.trim(), "ok");
    // The aws CLI sets and reads them too.
    let src = c.path("page.html");
    std::fs::write(&src, b"<p>hi</p>").expect("write");
    let put = c.aws_ok(&[
        "s3api",
        "put-object",
        "--bucket",
        "meta",
        "--key",
        "page.html",
        "--body",
        &src.to_string_lossy(),
        "--content-type",
        "text/html",
        "--metadata",
        "author=strata",
    ]);
    let head = c.aws_ok(&[
        "s3api",
        "head-object",
        "--bucket",
        "meta",
        "--key",
        "page.html",
    ]);
    let head: serde_json::Value = serde_json::from_str(&head).expect("json");
    assert_eq!(head["ContentType"], "text/html");
    assert_eq!(head["Metadata"]["author"], "strata");
    let put: serde_json::Value = serde_json::from_str(&put).expect("json");
    // The MD5 of "<p>hi</p>" (md5sum).
    assert_eq!(head["ETag"], "\"343fc7b27c1b966b623aa483c880210c\"");
    assert_eq!(put["ETag"], head["ETag"]);
}

/// Conditional GET and HEAD: If-Match and If-Unmodified-Since fail with
/// 412 PreconditionFailed, If-None-Match and If-Modified-Since with 304
/// Not Modified, as S3 evaluates them together.
#[test]
fn conditional_get_and_head() {
    let c = S3Cluster::start();
    let out = c.python(&format!(
        r#"{PRELUDE}
import datetime
s3.create_bucket(Bucket="cond")
body = b"conditional"
etag = s3.put_object(Bucket="cond", Key="k", Body=body)["ETag"]
assert etag == '"%s"' % hashlib.md5(body).hexdigest()
lm = s3.head_object(Bucket="cond", Key="k")["LastModified"]
hour = datetime.timedelta(hours=1)
other = '"%s"' % ("0" * 32)
for op in (s3.get_object, s3.head_object):
    f = lambda **kw: op(Bucket="cond", Key="k", **kw)
    assert f(IfMatch=etag)["ETag"] == etag
    assert f(IfMatch="*")["ETag"] == etag
    assert code(lambda: f(IfMatch=other))[1] == 412
    assert code(lambda: f(IfNoneMatch=etag))[1] == 304
    assert code(lambda: f(IfNoneMatch="*"))[1] == 304
    assert f(IfNoneMatch=other)["ETag"] == etag
    assert code(lambda: f(IfModifiedSince=lm))[1] == 304
    assert code(lambda: f(IfModifiedSince=lm + hour))[1] == 304
    assert f(IfModifiedSince=lm - hour)["ETag"] == etag
    assert code(lambda: f(IfUnmodifiedSince=lm - hour))[1] == 412
    assert f(IfUnmodifiedSince=lm)["ETag"] == etag
    # If-Match true wins over If-Unmodified-Since false; If-None-Match
    # false over If-Modified-Since true.
    assert f(IfMatch=etag, IfUnmodifiedSince=lm - hour)["ETag"] == etag
    assert f(IfNoneMatch=other, IfModifiedSince=lm + hour)["ETag"] == etag
# GET's 412 has an S3 XML body with the code (HEAD's has no body).
assert code(lambda: s3.get_object(Bucket="cond", Key="k", IfMatch=other)) == ("PreconditionFailed", 412)
# The 304 carries the ETag.
try:
    s3.get_object(Bucket="cond", Key="k", IfNoneMatch=etag)
except botocore.exceptions.ClientError as e:
    assert e.response["ResponseMetadata"]["HTTPHeaders"].get("etag") == etag, e.response
assert s3.get_object(Bucket="cond", Key="k", IfMatch=etag)["Body"].read() == body
print("ok")
"#
    ));
    assert_eq!(out.trim(), "ok");
}

/// HeadObject reads the start of the object's head record (kind, cookie,
/// metadata), not the object: the length, ETag, content type and metadata
/// of a 4 MiB object whose bytes are damaged 3 MiB in come back (until
/// this change a HEAD read and checked the whole record, and failed
/// here). A record whose metadata runs past what a HEAD reads first (a
/// 20 KB Content-Disposition) is read whole.
#[test]
fn head_object_reads_the_record_start() {
    let c = S3Cluster::start();
    let out = c.python(&format!(
        r#"{PRELUDE}
s3.create_bucket(Bucket="heads")
body = os.urandom(4 << 20)
etag = s3.put_object(Bucket="heads", Key="big", Body=body, ContentType="image/x-big",
                     Metadata={{"colour": "blue"}})["ETag"]
disp = "attachment; filename=" + "x" * 20000
s3.put_object(Bucket="heads", Key="wide", Body=body[:1 << 20], ContentDisposition=disp)
print(etag, body[3 << 20:(3 << 20) + 32].hex())
"#
    ));
    let (etag, probe) = out.trim().split_once(' ').expect("etag and probe");
    let probe: Vec<u8> = (0..probe.len() / 2)
        .map(|i| u8::from_str_radix(&probe[2 * i..2 * i + 2], 16).unwrap())
        .collect();
    assert!(
        flip_on_disk(c.dir.path(), &probe, 5) == 1,
        "the object's bytes were not found on disk"
    );
    let out = c.python_env(
        &format!(
            r#"{PRELUDE}
h = s3.head_object(Bucket="heads", Key="big")
assert h["ContentLength"] == 4 << 20, h
assert h["ETag"] == os.environ["ETAG"], h
assert h["ContentType"] == "image/x-big", h
assert h["Metadata"] == {{"colour": "blue"}}, h
r = s3.head_object(Bucket="heads", Key="big", Range="bytes=0-9")
assert (r["ContentLength"], r["ContentRange"]) == (10, "bytes 0-9/4194304"), r
w = s3.head_object(Bucket="heads", Key="wide")
assert w["ContentLength"] == 1 << 20, w
assert w["ContentDisposition"] == "attachment; filename=" + "x" * 20000
assert code(lambda: s3.head_object(Bucket="heads", Key="none"))[1] == 404
print("ok")
"#
        ),
        &[("ETAG", etag)],
    );
    assert_eq!(out.trim(), "ok");
}

/// x-amz-checksum-crc32, -crc32c, -sha256 (and -sha1) sent with a PUT or
/// an UploadPart are verified: a right one stores the object (and HEAD
/// with checksum mode answers it), a wrong one is BadDigest and stores
/// nothing.
#[test]
fn checksums_are_verified() {
    let c = S3Cluster::start();
    let out = c.python(&format!(
        r#"{PRELUDE}
import base64, zlib
def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF
s3.create_bucket(Bucket="sums")
body = b"checksummed bytes"
crc32 = base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode()
sha256 = base64.b64encode(hashlib.sha256(body).digest()).decode()
c32c = base64.b64encode(crc32c(body).to_bytes(4, "big")).decode()
s3.put_object(Bucket="sums", Key="crc32c", Body=body, ChecksumCRC32C=c32c)
assert s3.head_object(Bucket="sums", Key="crc32c", ChecksumMode="ENABLED").get("ChecksumCRC32C") == c32c
# (CRC32C computed by botocore itself needs awscrt.)
for algo in ("CRC32", "SHA256", "SHA1"):
    # botocore computes the checksum itself and sends it.
    r = s3.put_object(Bucket="sums", Key="k-" + algo, Body=body, ChecksumAlgorithm=algo)
    assert s3.get_object(Bucket="sums", Key="k-" + algo)["Body"].read() == body
r = s3.put_object(Bucket="sums", Key="crc32", Body=body, ChecksumCRC32=crc32)
h = s3.head_object(Bucket="sums", Key="crc32", ChecksumMode="ENABLED")
assert h.get("ChecksumCRC32") == crc32, h
s3.put_object(Bucket="sums", Key="sha", Body=body, ChecksumSHA256=sha256)
wrong = base64.b64encode(b"\0\0\0\1").decode()
wrong_sha = base64.b64encode(hashlib.sha256(b"other").digest()).decode()
for kw in (dict(ChecksumCRC32=wrong), dict(ChecksumCRC32C=wrong), dict(ChecksumSHA256=wrong_sha)):
    assert code(lambda: s3.put_object(Bucket="sums", Key="bad", Body=body, **kw)) == ("BadDigest", 400), kw
    assert code(lambda: s3.head_object(Bucket="sums", Key="bad"))[1] == 404
u = s3.create_multipart_upload(Bucket="sums", Key="mp")["UploadId"]
assert code(lambda: s3.upload_part(Bucket="sums", Key="mp", UploadId=u, PartNumber=1, Body=body, ChecksumCRC32=wrong)) == ("BadDigest", 400)
assert s3.list_parts(Bucket="sums", Key="mp", UploadId=u).get("Parts", []) == []
s3.upload_part(Bucket="sums", Key="mp", UploadId=u, PartNumber=1, Body=body, ChecksumCRC32=crc32)
print("ok")
"#
    ));
    assert_eq!(out.trim(), "ok");
}

/// CopyObject keeps or replaces the source's headers and metadata, honours
/// the copy-source conditions, refuses a copy onto itself that changes
/// nothing; a key needs read on the source; UploadPartCopy cuts parts
/// from stored objects by range; DeleteObjects deletes many
/// keys at once (absent ones too, as S3 does), quietly if asked.
#[test]
fn copy_object_and_delete_objects() {
    let c = S3Cluster::start();
    let created = ok(strata()
        .args(["key", "create", "--meta", &c.meta])
        .args(["--bucket", "dst:write"])
        .env("STRATA_ADMIN_TOKEN", ADMIN));
    let field = |name: &str| {
        created
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.trim().to_string())
            .expect("key field")
    };
    let (access, secret) = (field("access key:"), field("secret key:"));
    let out = c.python_env(
        &format!(
            r#"{PRELUDE}
s3.create_bucket(Bucket="src")
s3.create_bucket(Bucket="dst")
body = b"copy me" * 1000
etag = s3.put_object(Bucket="src", Key="a", Body=body, ContentType="text/plain", Metadata={{"m": "1"}})["ETag"]
r = s3.copy_object(Bucket="dst", Key="b", CopySource={{"Bucket": "src", "Key": "a"}})
assert r["CopyObjectResult"]["ETag"] == etag, r
g = s3.get_object(Bucket="dst", Key="b")
assert g["Body"].read() == body and g["ContentType"] == "text/plain" and g["Metadata"] == {{"m": "1"}} and g["ETag"] == etag, g
assert [o["Key"] for o in s3.list_objects_v2(Bucket="dst")["Contents"]] == ["b"]
# REPLACE takes the request's headers and metadata.
s3.copy_object(Bucket="dst", Key="c", CopySource="src/a", MetadataDirective="REPLACE", ContentType="image/png", Metadata={{"n": "2"}})
h = s3.head_object(Bucket="dst", Key="c")
assert h["ContentType"] == "image/png" and h["Metadata"] == {{"n": "2"}}, h
# Onto itself: only with REPLACE.
assert code(lambda: s3.copy_object(Bucket="src", Key="a", CopySource="src/a")) == ("InvalidRequest", 400)
s3.copy_object(Bucket="src", Key="a", CopySource="src/a", MetadataDirective="REPLACE", Metadata={{"m": "3"}})
assert s3.head_object(Bucket="src", Key="a")["Metadata"] == {{"m": "3"}}
assert s3.get_object(Bucket="src", Key="a")["Body"].read() == body
assert code(lambda: s3.copy_object(Bucket="dst", Key="d", CopySource="src/a", CopySourceIfMatch='"%s"' % ("0" * 32))) == ("PreconditionFailed", 412)
assert code(lambda: s3.copy_object(Bucket="dst", Key="d", CopySource="src/a", CopySourceIfNoneMatch=etag)) == ("PreconditionFailed", 412)
assert code(lambda: s3.copy_object(Bucket="dst", Key="d", CopySource="src/nothing")) == ("NoSuchKey", 404)
assert code(lambda: s3.copy_object(Bucket="nobucket", Key="d", CopySource="src/a")) == ("NoSuchBucket", 404)
assert code(lambda: s3.head_object(Bucket="dst", Key="d"))[1] == 404
# A key that may write dst but not read src cannot copy from it.
k = client(os.environ["KEY"], os.environ["KEY_SECRET"])
assert code(lambda: k.copy_object(Bucket="dst", Key="e", CopySource="src/a")) == ("AccessDenied", 403)
k.copy_object(Bucket="dst", Key="e", CopySource="dst/b")

# UploadPartCopy: parts cut from stored objects by range.
MiB = 1 << 20
big = bytes(range(256)) * (40 * 1024)
s3.put_object(Bucket="src", Key="big", Body=big)
u = s3.create_multipart_upload(Bucket="dst", Key="joined")["UploadId"]
e1 = s3.upload_part_copy(Bucket="dst", Key="joined", UploadId=u, PartNumber=1, CopySource="src/big", CopySourceRange="bytes=0-%d" % (5 * MiB - 1))["CopyPartResult"]["ETag"]
assert e1 == '"%s"' % hashlib.md5(big[:5 * MiB]).hexdigest(), e1
e2 = s3.upload_part_copy(Bucket="dst", Key="joined", UploadId=u, PartNumber=2, CopySource="src/big", CopySourceRange="bytes=%d-%d" % (5 * MiB, len(big) - 1))["CopyPartResult"]["ETag"]
e3 = s3.upload_part_copy(Bucket="dst", Key="joined", UploadId=u, PartNumber=3, CopySource="src/a")["CopyPartResult"]["ETag"]
assert code(lambda: s3.upload_part_copy(Bucket="dst", Key="joined", UploadId=u, PartNumber=4, CopySource="src/big", CopySourceRange="bytes=0-%d" % len(big)))[0] == "InvalidRange"
assert code(lambda: s3.upload_part_copy(Bucket="dst", Key="joined", UploadId=u, PartNumber=4, CopySource="src/big", CopySourceRange="0-1")) == ("InvalidArgument", 400)
assert code(lambda: k.upload_part_copy(Bucket="dst", Key="joined", UploadId=u, PartNumber=4, CopySource="src/big")) == ("AccessDenied", 403)
s3.complete_multipart_upload(Bucket="dst", Key="joined", UploadId=u, MultipartUpload={{"Parts": [{{"PartNumber": 1, "ETag": e1}}, {{"PartNumber": 2, "ETag": e2}}, {{"PartNumber": 3, "ETag": e3}}]}})
assert s3.get_object(Bucket="dst", Key="joined")["Body"].read() == big + body

for i in range(5):
    s3.put_object(Bucket="dst", Key="many/%d" % i, Body=b"x")
r = s3.delete_objects(Bucket="dst", Delete={{"Objects": [{{"Key": "many/0"}}, {{"Key": "many/1"}}, {{"Key": "absent"}}]}})
assert sorted(d["Key"] for d in r["Deleted"]) == ["absent", "many/0", "many/1"] and not r.get("Errors"), r
r = s3.delete_objects(Bucket="dst", Delete={{"Objects": [{{"Key": "many/2"}}, {{"Key": "many/3"}}], "Quiet": True}})
assert not r.get("Deleted") and not r.get("Errors"), r
assert [o["Key"] for o in s3.list_objects_v2(Bucket="dst", Prefix="many/")["Contents"]] == ["many/4"]
for n in range(4):
    assert code(lambda: s3.get_object(Bucket="dst", Key="many/%d" % n)) == ("NoSuchKey", 404)
assert code(lambda: s3.delete_objects(Bucket="nobucket", Delete={{"Objects": [{{"Key": "x"}}]}})) == ("NoSuchBucket", 404)
print("ok")
"#
        ),
        &[("KEY", &access), ("KEY_SECRET", &secret)],
    );
    assert_eq!(out.trim(), "ok");
    // The aws CLI's copy (CopyObject, and UploadPartCopy above its 8 MiB
    // multipart threshold) and its batch delete (`s3 rm --recursive`).
    c.aws_ok(&["s3", "cp", "s3://dst/b", "s3://dst/cli-copy"]);
    c.aws_ok(&["s3", "cp", "s3://src/big", "s3://dst/cli-big"]);
    let ls = c.aws_ok(&["s3", "ls", "s3://dst/"]);
    assert!(
        ls.contains("cli-copy") && ls.contains("10485760 cli-big"),
        "{ls}"
    );
    let back = c.path("cli-big");
    c.aws_ok(&["s3", "cp", "s3://dst/cli-big", &back.to_string_lossy()]);
    let want: Vec<u8> = (0..40 * 1024).flat_map(|_| 0..=255u8).collect();
    assert!(
        std::fs::read(&back).expect("read") == want,
        "the copied 10 MiB object differs"
    );
    c.aws_ok(&["s3", "rm", "--recursive", "s3://dst/"]);
    assert_eq!(c.aws_ok(&["s3", "ls", "s3://dst/"]).trim(), "");
}

/// Virtual-host-style requests (`Host: BUCKET.localhost:PORT`) reach the
/// same buckets as path-style ones.
#[test]
fn virtual_host_style_requests() {
    let c = S3Cluster::start_with(&["--s3-region", "eu-central-1"]);
    let out = c.python(&format!(
        r#"{PRELUDE}
import socket
# BUCKET.localhost is loopback; the resolver here may not know it.
real = socket.getaddrinfo
def local(host, *a, **kw):
    if isinstance(host, str) and host.endswith(".localhost"):
        host = "127.0.0.1"
    return real(host, *a, **kw)
socket.getaddrinfo = local
port = os.environ["ENDPOINT"].rsplit(":", 1)[1]
vh = boto3.client("s3", endpoint_url="http://localhost:" + port, region_name="us-east-1",
    aws_access_key_id=os.environ["ACCESS"], aws_secret_access_key=os.environ["SECRET"],
    config=Config(s3={{"addressing_style": "virtual"}}, retries={{"max_attempts": 1}}))
s3.create_bucket(Bucket="vhost")
vh.put_object(Bucket="vhost", Key="dir/k", Body=b"virtual", ContentType="text/plain")
got = vh.get_object(Bucket="vhost", Key="dir/k")
assert got["Body"].read() == b"virtual" and got["ContentType"] == "text/plain"
assert got["ResponseMetadata"]["HTTPHeaders"] is not None
# It was a virtual-host request: the bucket is not in the path.
assert s3.get_object(Bucket="vhost", Key="dir/k")["Body"].read() == b"virtual"
assert [o["Key"] for o in vh.list_objects_v2(Bucket="vhost")["Contents"]] == ["dir/k"]
vh.head_bucket(Bucket="vhost")
assert code(lambda: vh.get_object(Bucket="nobucket", Key="k")) == ("NoSuchBucket", 404)
req = []
vh.meta.events.register("before-send.s3.GetObject", lambda request, **kw: req.append((request.url, request.headers.get("host"))))
vh.get_object(Bucket="vhost", Key="dir/k")
assert req[0][0].startswith("http://vhost.localhost:"), req
# --s3-region: buckets are in it, a CreateBucket for elsewhere is refused.
assert s3.get_bucket_location(Bucket="vhost")["LocationConstraint"] == "eu-central-1"
s3.create_bucket(Bucket="here", CreateBucketConfiguration={{"LocationConstraint": "eu-central-1"}})
assert code(lambda: s3.create_bucket(Bucket="far", CreateBucketConfiguration={{"LocationConstraint": "ap-south-1"}})) == ("IllegalLocationConstraintException", 400)
assert code(lambda: s3.head_bucket(Bucket="far"))[1] == 404
print("ok")
"#
    ));
    assert_eq!(out.trim(), "ok");
}

/// Operations Strata does not implement answer 501 NotImplemented in S3
/// XML, never a success that did nothing; versions other than `null`
/// (buckets are not versioned) are refused.
#[test]
fn unsupported_operations_are_not_implemented() {
    let c = S3Cluster::start();
    let out = c.python(&format!(
        r#"{PRELUDE}
s3.create_bucket(Bucket="nimpl")
s3.put_object(Bucket="nimpl", Key="k", Body=b"x")
NI = ("NotImplemented", 501)
calls = [
    lambda: s3.put_bucket_versioning(Bucket="nimpl", VersioningConfiguration={{"Status": "Enabled"}}),
    lambda: s3.put_bucket_tagging(Bucket="nimpl", Tagging={{"TagSet": []}}),
    lambda: s3.put_object_tagging(Bucket="nimpl", Key="k", Tagging={{"TagSet": []}}),
    lambda: s3.get_object(Bucket="nimpl", Key="k", PartNumber=1),
    lambda: s3.put_object(Bucket="nimpl", Key="k", Body=b"y", IfNoneMatch="*"),
    lambda: s3.put_bucket_lifecycle_configuration(Bucket="nimpl", LifecycleConfiguration={{"Rules": [{{"ID": "r", "Status": "Enabled", "Filter": {{"Prefix": ""}}, "Expiration": {{"Days": 1}}}}]}}),
    lambda: s3.put_bucket_policy(Bucket="nimpl", Policy="{{}}"),
    lambda: s3.put_bucket_acl(Bucket="nimpl", ACL="authenticated-read"),
    # Writes asking for what Strata does not do are refused, not obeyed
    # in part.
    lambda: s3.put_object(Bucket="nimpl", Key="k", Body=b"y", ServerSideEncryption="AES256"),
    lambda: s3.put_object(Bucket="nimpl", Key="k", Body=b"y", ACL="public-read"),
    lambda: s3.put_object(Bucket="nimpl", Key="k", Body=b"y", Tagging="a=b"),
    lambda: s3.put_object(Bucket="nimpl", Key="k", Body=b"y", ObjectLockLegalHoldStatus="ON"),
    lambda: s3.create_multipart_upload(Bucket="nimpl", Key="k", ServerSideEncryption="AES256"),
    lambda: s3.copy_object(Bucket="nimpl", Key="k", CopySource="nimpl/k", MetadataDirective="REPLACE", ServerSideEncryption="AES256"),
    lambda: s3.delete_object(Bucket="nimpl", Key="k", IfMatch='"%s"' % hashlib.md5(b"x").hexdigest()),
]
for i, f in enumerate(calls):
    got = code(f)
    assert got == NI, (i, got)
# Refused before its body was read, a request's connection is closed after
# the answer, and the answer says so (the client sent `Expect:
# 100-continue` and no body); a write that succeeds keeps its connection.
import socket, urllib.parse, botocore.auth, botocore.awsrequest, botocore.credentials
def raw_put(extra):
    url = urllib.parse.urlsplit(os.environ["ENDPOINT"])
    req = botocore.awsrequest.AWSRequest(method="PUT", url=os.environ["ENDPOINT"] + "/nimpl/raw",
        data=b"z", headers=dict(extra, **{{"Expect": "100-continue", "Content-Length": "1"}}))
    botocore.auth.S3SigV4Auth(botocore.credentials.Credentials(os.environ["ACCESS"], os.environ["SECRET"]), "s3", "us-east-1").add_auth(req)
    head = "PUT /nimpl/raw HTTP/1.1\r\nHost: %s\r\n" % url.netloc
    head += "".join("%s: %s\r\n" % (k, v) for k, v in req.prepare().headers.items() if k.lower() != "host")
    sock = socket.create_connection((url.hostname, url.port), timeout=10)
    sock.sendall((head + "\r\n").encode())
    got = b""
    while b"\r\n\r\n" not in got:
        got += sock.recv(65536)
    if got.startswith(b"HTTP/1.1 100"):
        sock.sendall(b"z")
        got = got.split(b"\r\n\r\n", 1)[1]
        while b"\r\n\r\n" not in got:
            got += sock.recv(65536)
    status, headers = got.split(b"\r\n", 1)
    return status, headers.lower(), sock
status, headers, sock = raw_put({{"x-amz-server-side-encryption": "AES256"}})
assert status.startswith(b"HTTP/1.1 501") and b"connection: close" in headers, (status, headers)
rest = b"x"
while rest and b"</Error>" not in rest:
    rest = sock.recv(65536)
assert sock.recv(65536) == b"", "the connection stayed open"
status, headers, sock = raw_put({{}})
assert status.startswith(b"HTTP/1.1 200") and b"connection: close" not in headers, (status, headers)
assert s3.get_object(Bucket="nimpl", Key="raw")["Body"].read() == b"z"
s3.delete_object(Bucket="nimpl", Key="raw")
# A conditional entry of DeleteObjects is an error of its own.
r = s3.delete_objects(Bucket="nimpl", Delete={{"Objects": [{{"Key": "k", "ETag": '"%s"' % hashlib.md5(b"x").hexdigest()}}]}})
assert [(e["Key"], e["Code"]) for e in r["Errors"]] == [("k", "NotImplemented")] and not r.get("Deleted"), r
# A browser upload (POST Object with a policy) is refused.
import urllib.request, urllib.error
post = s3.generate_presigned_post("nimpl", "k")
boundary = "strata-boundary"
form = b"".join(b"--%s\r\nContent-Disposition: form-data; name=\"%s\"\r\n\r\n%s\r\n" % (boundary.encode(), k.encode(), v.encode()) for k, v in post["fields"].items())
form += b"--%s\r\nContent-Disposition: form-data; name=\"file\"; filename=\"f\"\r\n\r\nposted\r\n--%s--\r\n" % (boundary.encode(), boundary.encode())
try:
    urllib.request.urlopen(urllib.request.Request(post["url"], data=form, headers={{"Content-Type": "multipart/form-data; boundary=" + boundary}}))
    raise AssertionError("POST Object succeeded")
except urllib.error.HTTPError as e:
    assert e.code == 501, (e.code, e.read())
# Nothing changed.
assert s3.get_object(Bucket="nimpl", Key="k")["Body"].read() == b"x"
h = s3.head_object(Bucket="nimpl", Key="k")
assert "ServerSideEncryption" not in h and h["ETag"] == '"%s"' % hashlib.md5(b"x").hexdigest(), h
# Buckets are not versioned: each object is its one version "null".
v = s3.list_object_versions(Bucket="nimpl")
assert [(x["Key"], x["VersionId"], x["IsLatest"]) for x in v["Versions"]] == [("k", "null", True)], v
assert s3.get_object(Bucket="nimpl", Key="k", VersionId="null")["Body"].read() == b"x"
assert code(lambda: s3.get_object(Bucket="nimpl", Key="k", VersionId="3HL4kqtJlcpXroDTDmJ")) == ("InvalidArgument", 400)
assert code(lambda: s3.delete_object(Bucket="nimpl", Key="k", VersionId="3HL4kqtJlcpXroDTDmJ")) == ("InvalidArgument", 400)
assert s3.get_object(Bucket="nimpl", Key="k")["Body"].read() == b"x"
print("ok")
"#
    ));
    assert_eq!(out.trim(), "ok");
}

/// A bucket made public-read (PutBucketAcl or CreateBucket with the canned
/// ACL) serves unsigned GET, HEAD and listings, and nothing else; other
/// buckets stay closed; `private` closes it again; other ACLs are 501.
#[test]
fn public_read_buckets() {
    let c = S3Cluster::start();
    let out = c.python(&format!(
        r#"{PRELUDE}
import time, urllib.request
anon = client(None, None, signature_version=botocore.UNSIGNED)
s3.create_bucket(Bucket="pub")
s3.create_bucket(Bucket="closed")
for b in ("pub", "closed"):
    s3.put_object(Bucket=b, Key="k", Body=b"bytes of " + b.encode())
assert code(lambda: anon.get_object(Bucket="pub", Key="k")) == ("AccessDenied", 403)
def until(f, what):
    deadline = time.time() + 10
    while True:
        try:
            return f()
        except botocore.exceptions.ClientError:
            assert time.time() < deadline, what
            time.sleep(0.2)
s3.put_bucket_acl(Bucket="pub", ACL="public-read")
# Nodes cache the public buckets for a second.
assert until(lambda: anon.get_object(Bucket="pub", Key="k"), "public read")["Body"].read() == b"bytes of pub"
assert anon.head_object(Bucket="pub", Key="k")["ContentLength"] == 12
assert [o["Key"] for o in anon.list_objects_v2(Bucket="pub")["Contents"]] == ["k"]
url = os.environ["ENDPOINT"] + "/pub/k"
assert urllib.request.urlopen(url).read() == b"bytes of pub"
assert code(lambda: anon.put_object(Bucket="pub", Key="x", Body=b"x")) == ("AccessDenied", 403)
assert code(lambda: anon.delete_object(Bucket="pub", Key="k")) == ("AccessDenied", 403)
assert code(lambda: anon.delete_bucket(Bucket="pub")) == ("AccessDenied", 403)
assert code(lambda: anon.put_bucket_acl(Bucket="pub", ACL="private")) == ("AccessDenied", 403)
assert code(lambda: anon.get_object(Bucket="closed", Key="k")) == ("AccessDenied", 403)
assert code(lambda: anon.list_objects_v2(Bucket="closed")) == ("AccessDenied", 403)
assert code(lambda: anon.list_buckets()) == ("AccessDenied", 403)
assert s3.get_object(Bucket="pub", Key="k")["Body"].read() == b"bytes of pub"
grants = s3.get_bucket_acl(Bucket="pub")["Grants"]
assert any(g["Grantee"].get("URI", "").endswith("/AllUsers") and g["Permission"] == "READ" for g in grants), grants
# Closed again.
s3.put_bucket_acl(Bucket="pub", ACL="private")
deadline = time.time() + 10
while True:
    try:
        anon.get_object(Bucket="pub", Key="k")
    except botocore.exceptions.ClientError as e:
        assert e.response["Error"]["Code"] == "AccessDenied"
        break
    assert time.time() < deadline, "a private bucket still serves unsigned reads"
    time.sleep(0.2)
assert not any("AllUsers" in g["Grantee"].get("URI", "") for g in s3.get_bucket_acl(Bucket="pub")["Grants"])
# Public from creation.
s3.create_bucket(Bucket="born-public", ACL="public-read")
s3.put_object(Bucket="born-public", Key="k", Body=b"hi")
assert until(lambda: anon.get_object(Bucket="born-public", Key="k"), "born public")["Body"].read() == b"hi"
assert code(lambda: s3.put_bucket_acl(Bucket="pub", ACL="public-read-write")) == ("NotImplemented", 501)
assert code(lambda: s3.put_bucket_acl(Bucket="nobucket", ACL="public-read")) == ("NoSuchBucket", 404)
print("ok")
"#
    ));
    assert_eq!(out.trim(), "ok");
}

/// The aws-chunked payloads: the `STREAMING-UNSIGNED-PAYLOAD-TRAILER`
/// form with a trailing checksum, as boto3 sends it by default over HTTPS
/// (here made to choose it over plain HTTP), and the signed
/// `STREAMING-AWS4-HMAC-SHA256-PAYLOAD` form, built by hand with a
/// signature per chunk (no Python SDK sends it): both store the decoded
/// bytes; a chunk with a wrong signature or a wrong trailing checksum
/// stores nothing.
#[test]
fn aws_chunked_payloads() {
    let c = S3Cluster::start();
    let out = c.python(&format!(
        r#"{PRELUDE}
import base64, datetime, hmac, http.client, urllib.parse, zlib
import botocore.httpchecksum as hc
s3.create_bucket(Bucket="chunks")
body = bytes((i * 31 + 7) % 256 for i in range(200 * 1024 + 5))

# boto3's own trailer form: it chooses it for https endpoints only, so
# its scheme test is told this one is https.
real = hc.urlparse
hc.urlparse = lambda u: real(u.replace("http://", "https://", 1))
sent = []
s3.meta.events.register("before-send.s3.*", lambda request, **kw: sent.append(dict(request.headers)))
try:
    s3.put_object(Bucket="chunks", Key="trailer", Body=body, ChecksumAlgorithm="CRC32")
    u = s3.create_multipart_upload(Bucket="chunks", Key="mp")["UploadId"]
    p = s3.upload_part(Bucket="chunks", Key="mp", UploadId=u, PartNumber=1, Body=body, ChecksumAlgorithm="CRC32")
    s3.complete_multipart_upload(Bucket="chunks", Key="mp", UploadId=u,
        MultipartUpload={{"Parts": [{{"PartNumber": 1, "ETag": p["ETag"]}}]}})
finally:
    hc.urlparse = real
h = {{k.lower(): (v.decode() if isinstance(v, bytes) else v) for k, v in sent[0].items()}}
assert h["x-amz-content-sha256"] == "STREAMING-UNSIGNED-PAYLOAD-TRAILER", h
assert h["x-amz-trailer"] == "x-amz-checksum-crc32" and "aws-chunked" in h["content-encoding"], h
crc = base64.b64encode(zlib.crc32(body).to_bytes(4, "big")).decode()
assert s3.get_object(Bucket="chunks", Key="trailer")["Body"].read() == body
assert s3.head_object(Bucket="chunks", Key="trailer", ChecksumMode="ENABLED").get("ChecksumCRC32") == crc
assert s3.get_object(Bucket="chunks", Key="mp")["Body"].read() == body

host = urllib.parse.urlparse(os.environ["ENDPOINT"]).netloc
secret, access = os.environ["SECRET"], os.environ["ACCESS"]
def sha(b):
    return hashlib.sha256(b).hexdigest()
def mac(k, m):
    return hmac.new(k, m.encode(), hashlib.sha256).digest()
def send(key, headers, payload):
    conn = http.client.HTTPConnection(host)
    conn.request("PUT", "/chunks/" + key, body=payload, headers=headers)
    r = conn.getresponse()
    return r.status, r.read().decode()

def sign(key, headers, content_sha):
    """SigV4 of a PUT of /chunks/KEY with these headers: the headers with
    authorization added, the signing key, date, scope and seed signature."""
    now = datetime.datetime.now(datetime.timezone.utc)
    amz, date = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    scope = date + "/us-east-1/s3/aws4_request"
    k = mac(mac(mac(mac(("AWS4" + secret).encode(), date), "us-east-1"), "s3"), "aws4_request")
    headers = dict(headers, host=host, **{{"x-amz-content-sha256": content_sha, "x-amz-date": amz}})
    names = sorted(headers)
    canonical = "\n".join(["PUT", "/chunks/" + key, ""] + ["%s:%s" % (n, headers[n]) for n in names]
        + ["", ";".join(names), content_sha])
    seed = hmac.new(k, "\n".join(["AWS4-HMAC-SHA256", amz, scope, sha(canonical.encode())]).encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = "AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s" % (access, scope, ";".join(names), seed)
    del headers["host"]
    return headers, k, amz, scope, seed

def signed_streaming(key, data, chunk=64 * 1024, tamper=False):
    chunks = [data[i:i + chunk] for i in range(0, len(data), chunk)] + [b""]
    length = sum(len("%x" % len(c)) + len(";chunk-signature=") + 64 + 2 + len(c) + 2 for c in chunks)
    headers, k, amz, scope, seed = sign(key, {{"content-encoding": "aws-chunked", "content-length": str(length),
        "x-amz-decoded-content-length": str(len(data))}}, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD")
    prev, payload = seed, b""
    for i, c in enumerate(chunks):
        to_sign = "\n".join(["AWS4-HMAC-SHA256-PAYLOAD", amz, scope, prev, sha(b""), sha(c)])
        sig = hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()
        prev = sig
        if tamper and i == 1:
            sig = "0" * 64
        payload += ("%x;chunk-signature=%s\r\n" % (len(c), sig)).encode() + c + b"\r\n"
    assert len(payload) == length
    return send(key, headers, payload)

st, text = signed_streaming("signed", body)
assert st == 200, (st, text)
assert s3.get_object(Bucket="chunks", Key="signed")["Body"].read() == body
assert s3.head_object(Bucket="chunks", Key="signed")["ETag"] == '"%s"' % hashlib.md5(body).hexdigest()
st, text = signed_streaming("tampered", body, tamper=True)
assert st == 403 and "SignatureDoesNotMatch" in text, (st, text)
assert code(lambda: s3.head_object(Bucket="chunks", Key="tampered"))[1] == 404

# The unsigned trailer form by hand: the right trailing checksum stores
# the object, a wrong one is BadDigest and stores nothing.
def unsigned_trailer(key, data, trailer_crc):
    payload = b"".join(b"%x\r\n" % len(data[i:i + 50000]) + data[i:i + 50000] + b"\r\n" for i in range(0, len(data), 50000))
    payload += b"0\r\nx-amz-checksum-crc32:" + trailer_crc.encode() + b"\r\n\r\n"
    headers, _, _, _, _ = sign(key, {{"content-encoding": "aws-chunked", "content-length": str(len(payload)),
        "x-amz-trailer": "x-amz-checksum-crc32", "x-amz-decoded-content-length": str(len(data))}},
        "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
    return send(key, headers, payload)
st, text = unsigned_trailer("goodtrailer", body, crc)
assert st == 200, (st, text)
assert s3.get_object(Bucket="chunks", Key="goodtrailer")["Body"].read() == body
st, text = unsigned_trailer("badtrailer", body, base64.b64encode(b"\0\0\0\1").decode())
assert st == 400 and "BadDigest" in text, (st, text)
assert code(lambda: s3.head_object(Bucket="chunks", Key="badtrailer"))[1] == 404
print("ok")
"#
    ));
    assert_eq!(out.trim(), "ok");
}

/// Objects have no ACL of their own: each is as readable as its bucket.
/// GetObjectAcl answers the bucket's grants; a canned ACL on PutObject,
/// CopyObject, CreateMultipartUpload or PutObjectAcl is accepted when it
/// says just that (`private` in a private bucket, `public-read` in a
/// public-read one, `bucket-owner-*`), and is 501 otherwise, never a
/// success that leaves the object readable otherwise than asked.
#[test]
fn object_acls_follow_the_bucket() {
    let c = S3Cluster::start();
    let out = c.python(&format!(
        r#"{PRELUDE}
import time
NI = ("NotImplemented", 501)
ALL = "http://acs.amazonaws.com/groups/global/AllUsers"
def public(grants):
    return any(g["Grantee"].get("URI") == ALL and g["Permission"] == "READ" for g in grants)
s3.create_bucket(Bucket="closed")
s3.create_bucket(Bucket="open", ACL="public-read")
for acl in ("private", "bucket-owner-full-control", "bucket-owner-read"):
    s3.put_object(Bucket="closed", Key=acl, Body=b"x", ACL=acl)
    s3.put_object_acl(Bucket="closed", Key=acl, ACL=acl)
g = s3.get_object_acl(Bucket="closed", Key="private")
assert not public(g["Grants"]) and g["Grants"][0]["Permission"] == "FULL_CONTROL", g
assert code(lambda: s3.put_object(Bucket="closed", Key="p", Body=b"x", ACL="public-read")) == NI
assert code(lambda: s3.put_object_acl(Bucket="closed", Key="private", ACL="public-read")) == NI
assert code(lambda: s3.put_object_acl(Bucket="closed", Key="private", ACL="authenticated-read")) == NI
assert code(lambda: s3.put_object_acl(Bucket="closed", Key="private", GrantRead='uri="%s"' % ALL)) == NI
assert code(lambda: s3.copy_object(Bucket="closed", Key="c", CopySource="closed/private", ACL="public-read")) == NI
assert code(lambda: s3.create_multipart_upload(Bucket="closed", Key="m", ACL="public-read")) == NI
assert code(lambda: s3.head_object(Bucket="closed", Key="p"))[1] == 404
assert code(lambda: s3.head_object(Bucket="closed", Key="c"))[1] == 404
assert code(lambda: s3.get_object_acl(Bucket="closed", Key="absent")) == ("NoSuchKey", 404)
# In a public-read bucket: public-read is what the object gets anyway;
# private would be a lie (the object stays readable by anyone).
deadline = time.time() + 10
while True:
    try:
        s3.put_object(Bucket="open", Key="k", Body=b"y", ACL="public-read")
        break
    except botocore.exceptions.ClientError:
        assert time.time() < deadline, "the bucket never became public"
        time.sleep(0.2)
assert public(s3.get_object_acl(Bucket="open", Key="k")["Grants"])
s3.put_object_acl(Bucket="open", Key="k", ACL="public-read")
s3.copy_object(Bucket="open", Key="k2", CopySource="open/k", ACL="public-read")
assert code(lambda: s3.put_object(Bucket="open", Key="q", Body=b"x", ACL="private")) == NI
assert code(lambda: s3.put_object_acl(Bucket="open", Key="k", ACL="private")) == NI
assert code(lambda: s3.head_object(Bucket="open", Key="q"))[1] == 404
print("ok")
"#
    ));
    assert_eq!(out.trim(), "ok");
}

/// Runs a boto3 script against one S3 endpoint (as [`S3Cluster::python`]).
fn python_at(endpoint: &str, script: &str, logs: &str) -> String {
    let out = std::process::Command::new("python3")
        .env_remove("AWS_CA_BUNDLE")
        .arg("-c")
        .arg(script)
        .env("ENDPOINT", format!("http://{endpoint}"))
        .env("ACCESS", ACCESS)
        .env("SECRET", SECRET)
        .output()
        .expect("python3 with boto3");
    assert_ok(&out, "python3", logs);
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A node of a multi-node S3 cluster: `strata server` with S3 on `s3`,
/// data and disk `root/n{i}`, log appended to `root/node{i}.log`, and
/// `env` (crash points, test knobs).
fn s3_member(
    meta: &str,
    root: &std::path::Path,
    i: usize,
    (addr, s3): (&str, &str),
    env: &[(&str, &str)],
) -> Proc {
    let data = root.join(format!("n{i}"));
    std::fs::create_dir_all(&data).expect("node dir");
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(root.join(format!("node{i}.log")))
        .expect("log");
    let mut cmd = strata();
    cmd.args(["server", "--meta", meta, "--listen", addr, "--data"])
        .arg(&data)
        .arg("--disk")
        .arg(&data)
        .args(["--s3-listen", s3])
        .env("STRATA_ROOT_ACCESS_KEY", ACCESS)
        .env("STRATA_ROOT_SECRET_KEY", SECRET)
        .envs(env.iter().copied())
        .stdout(std::process::Stdio::null())
        .stderr(log);
    Proc {
        child: cmd.spawn().expect("strata server"),
        name: format!("node {addr}"),
    }
}

/// The addresses of the replicas of `bucket`'s index row.
fn index_holders(meta: &str, bucket: &str) -> Vec<String> {
    let (table, map) = map_of(meta);
    let row = strata_proto::index_row(&table, bucket);
    table
        .row(row)
        .iter()
        .map(|&d| addr_of(&map, &table, d))
        .collect()
}

/// A member of [`s3_members`]: its process, address and S3 address.
type S3Member = (Proc, String, String);

/// Whether a member serves: both listeners up and a native PUT taken.
fn s3_member_ready(n: &S3Member) -> bool {
    std::net::TcpStream::connect(&n.1).is_ok()
        && std::net::TcpStream::connect(&n.2).is_ok()
        && http_full(&n.1, "PUT", "/ready/probe", None, "", b"x").0 == 201
}

/// A metadata service with replication 2 and four [`s3_member`]s under
/// `root` (each with `env`), returned once the table is out and every
/// member serves.
fn s3_members(root: &std::path::Path, env: &[(&str, &str)]) -> ((Proc, String), Vec<S3Member>) {
    std::fs::create_dir_all(root.join("meta")).expect("meta dir");
    let meta = start_meta_with(
        &["--initial-nodes", "4", "--replication", "2"],
        &root.join("meta"),
        &root.join("meta.log"),
    );
    let nodes: Vec<S3Member> = (0..4)
        .map(|i| {
            let s3 = format!("127.0.0.1:{}", free_port());
            let addr = format!("127.0.0.1:{}", free_port());
            (s3_member(&meta.1, root, i, (&addr, &s3), env), addr, s3)
        })
        .collect();
    wait_until(Duration::from_secs(60), "a table over 4 nodes", || {
        status(&meta.1)["table_version"].as_u64().unwrap_or(0) >= 1
            && nodes.iter().all(s3_member_ready)
    });
    (meta, nodes)
}

/// A bucket's listing index lives on the replicas of its index row. When
/// one of them is lost for good, recovery copies the row's index entries
/// (and tombstones) to the disk that replaces it, with the row's records,
/// and listings avoid the new replica until its copy is done
/// (docs/reliability.md, finding 9). Here, replication 2 on 4 nodes: one
/// replica of the index row is killed and replaced, then the other one is
/// killed too, so the replacement alone serves the listing: it must list
/// every name written before it joined, none deleted.
#[test]
fn a_replacement_replica_gets_the_listing_index() {
    let dir = scratch();
    let root = dir.path();
    let ((_meta_p, meta), mut nodes) = s3_members(root, &[]);
    let all_logs = || logs(root);
    let holders = index_holders(&meta, "copied");
    let node_at = |addr: &str| nodes.iter().position(|n| n.1 == addr).expect("node");
    let (first, second) = (node_at(&holders[0]), node_at(&holders[1]));
    let bystander = (0..4)
        .find(|i| *i != first && *i != second)
        .expect("a node outside the row");
    let endpoint = nodes[bystander].2.clone();
    wait_until(Duration::from_secs(30), "S3 on the bystander", || {
        std::net::TcpStream::connect(&endpoint).is_ok()
    });
    python_at(
        &endpoint,
        &format!(
            r#"{PRELUDE}
s3.create_bucket(Bucket="copied")
for i in range(60):
    s3.put_object(Bucket="copied", Key="k%02d" % i, Body=b"v%d" % i)
for i in range(0, 60, 4):
    s3.delete_object(Bucket="copied", Key="k%02d" % i)
for i in range(1, 60, 5):
    s3.put_object(Bucket="copied", Key="k%02d" % i, Body=b"again %d" % i)
"#
        ),
        &all_logs(),
    );
    // One replica of the index row lost for good: declared dead, its rows
    // re-replicated (the index row's replacement copies its entries).
    nodes[first].0.kill();
    wait_until(
        Duration::from_secs(60),
        "the killed node declared dead",
        || {
            status(&meta)["nodes"]
                .as_array()
                .is_some_and(|ns| ns.iter().any(|n| n["state"] == "dead"))
        },
    );
    ok(strata().args(["cluster", "wait", "--meta", &meta, "--timeout", "120"]));
    let replacement = index_holders(&meta, "copied")
        .into_iter()
        .find(|a| *a != holders[1])
        .expect("the row's new replica");
    assert_ne!(replacement, holders[0], "the dead node is still in the row");
    // The other original replica goes too: only the replacement holds the
    // bucket's index now.
    nodes[second].0.kill();
    let survivor = (0..4)
        .find(|i| *i != first && *i != second)
        .expect("a live node");
    let out = python_at(
        &nodes[survivor].2,
        &format!(
            r#"{PRELUDE}
keys = []
kw = {{}}
while True:
    r = s3.list_objects_v2(Bucket="copied", MaxKeys=17, **kw)
    keys += [(o["Key"], o["Size"]) for o in r.get("Contents", [])]
    if not r["IsTruncated"]:
        break
    kw = {{"ContinuationToken": r["NextContinuationToken"]}}
want = [("k%02d" % i, len(b"again %d" % i) if i % 5 == 1 else len(b"v%d" % i))
        for i in range(60) if i % 4 or i % 5 == 1]
assert keys == want, (keys, want)
print("ok", len(keys))
"#
        ),
        &all_logs(),
    );
    assert_eq!(out.trim(), "ok 48", "{out}");
}

/// A coordinator lost for good between an object's change and its
/// listing entry's: its write intent is gone with it, but the mirror it
/// recorded on a replica of the bucket's index row is resolved there once
/// old enough, so the listing agrees with GetObject again without the
/// coordinator (docs/placement.md, "Write intents"). Replication 2 on 4
/// nodes; the two nodes outside the bucket's index row are restarted with
/// a crash point each (a PUT stopped with its object stored and not
/// listed, a DELETE with its tombstone written and the entry kept) and
/// never come back. The resolver's grace is cut to 1.5 s for the test.
#[test]
fn a_lost_coordinators_write_is_resolved_by_its_mirror() {
    let dir = scratch();
    let root = dir.path();
    let knobs = [
        ("STRATA_TEST_RESOLVE_AFTER_MS", "1500"),
        ("STRATA_TEST_RESOLVE_EVERY_MS", "300"),
    ];
    let ((_meta_p, meta), mut nodes) = s3_members(root, &knobs);
    let all_logs = || logs(root);
    let holders = index_holders(&meta, "lost");
    let outside: Vec<usize> = (0..4).filter(|i| !holders.contains(&nodes[*i].1)).collect();
    assert_eq!(outside.len(), 2, "{holders:?}");
    let holder = (0..4)
        .find(|i| holders.contains(&nodes[*i].1))
        .expect("a holder");
    python_at(
        &nodes[holder].2,
        &format!(
            r#"{PRELUDE}
s3.create_bucket(Bucket="lost")
s3.put_object(Bucket="lost", Key="old", Body=b"to be deleted")
s3.put_object(Bucket="lost", Key="kept", Body=b"kept")
"#
        ),
        &all_logs(),
    );
    // The two coordinators, restarted with a crash point each.
    for (&i, point) in outside
        .iter()
        .zip(["s3-object-stored", "s3-object-deleted"])
    {
        let (addr, s3) = (nodes[i].1.clone(), nodes[i].2.clone());
        nodes[i].0.kill();
        let env = [knobs.as_slice(), &[("STRATA_CRASH_AT", point)]].concat();
        nodes[i].0 = s3_member(&meta, root, i, (&addr, &s3), &env);
        wait_until(Duration::from_secs(60), "the coordinator back", || {
            s3_member_ready(&nodes[i])
        });
    }
    for (&i, op) in outside.iter().zip([
        r#"s3.put_object(Bucket="lost", Key="new", Body=b"stored, not listed")"#,
        r#"s3.delete_object(Bucket="lost", Key="old")"#,
    ]) {
        let out = python_at(
            &nodes[i].2,
            &format!(
                r#"{PRELUDE}
try:
    {op}
    print("answered")
except Exception as e:
    print("no answer")
"#
            ),
            &all_logs(),
        );
        assert_eq!(out.trim(), "no answer", "{}", all_logs());
        let status = nodes[i].0.child.wait().expect("wait");
        assert!(!status.success(), "node {i} did not crash");
    }
    // Neither comes back: the mirrors, on the index row's replicas,
    // resolve both writes.
    let out = python_at(
        &nodes[holder].2,
        &format!(
            r#"{PRELUDE}
import time
deadline = time.time() + 60
while True:
    got = [(o["Key"], o["Size"]) for o in s3.list_objects_v2(Bucket="lost").get("Contents", [])]
    if got == [("kept", 4), ("new", 18)] or time.time() > deadline:
        break
    time.sleep(0.3)
assert got == [("kept", 4), ("new", 18)], got
assert s3.get_object(Bucket="lost", Key="new")["Body"].read() == b"stored, not listed"
assert code(lambda: s3.get_object(Bucket="lost", Key="old"))[0] == "NoSuchKey"
print("ok")
"#
        ),
        &all_logs(),
    );
    assert_eq!(out.trim(), "ok", "{}", all_logs());
    assert!(
        all_logs().contains("mirrored for another node"),
        "no node said it resolved a mirror:\n{}",
        all_logs()
    );
}

/// A coordinator killed between an object's change and its listing
/// entry's (crash points `s3-object-stored` and `s3-object-listed` in a
/// PUT, `s3-object-deleted` and `s3-object-unlisted` in a DELETE; in this
/// cluster of one the entry goes first, in one commit with the write's
/// intent, then the object: `s3-object-listed` and `s3-object-unlisted`
/// stop a write with its entry changed and its object not, the other two
/// after both, before the intent is removed), leaves a write intent,
/// recorded durably with or before either; the node resolves it at its next start against
/// the object's head record, so the listing agrees with GetObject again:
/// the stored object is listed with its size, the deleted one is not, the
/// object listed but never stored is neither, the one unlisted but never
/// deleted is both (docs/reliability.md, finding 8).
#[test]
fn an_interrupted_write_is_resolved_against_the_object() {
    let mut c = S3Cluster::start();
    let restart = |c: &mut S3Cluster, env: &[(&str, &str)]| {
        let node = S3Cluster::node_with_env(&c.meta, c.dir.path(), &c.s3, &c.node.1, &[], env);
        c.node = (node, c.node.1.clone());
        c.wait_ready();
    };
    c.python(&format!(
        r#"{PRELUDE}
s3.create_bucket(Bucket="cut")
s3.put_object(Bucket="cut", Key="k1", Body=b"one")
s3.put_object(Bucket="cut", Key="k2", Body=b"two")
# A finished write's intent is removed lazily (with the next commit, at
# most 20 ms later): the kill below must not find these two still held.
import time
time.sleep(0.5)
"#
    ));
    for (point, op) in [
        (
            "s3-object-stored",
            r#"s3.put_object(Bucket="cut", Key="new", Body=b"stored, not listed")"#,
        ),
        (
            "s3-object-deleted",
            r#"s3.delete_object(Bucket="cut", Key="k1")"#,
        ),
        (
            "s3-object-listed",
            r#"s3.put_object(Bucket="cut", Key="ghost", Body=b"listed, not stored")"#,
        ),
        (
            "s3-object-unlisted",
            r#"s3.delete_object(Bucket="cut", Key="k2")"#,
        ),
    ] {
        c.node.0.kill();
        restart(&mut c, &[("STRATA_CRASH_AT", point)]);
        let out = c.python(&format!(
            r#"{PRELUDE}
try:
    {op}
    print("answered")
except Exception as e:
    print("no answer")
"#
        ));
        assert_eq!(out.trim(), "no answer", "{}", c.logs());
        let status = c.node.0.child.wait().expect("wait");
        assert!(!status.success(), "the node did not crash at {point}");
        assert!(c.logs().contains(&format!("crash point {point} reached")));
    }
    restart(&mut c, &[]);
    let out = c.python(&format!(
        r#"{PRELUDE}
import time
assert s3.get_object(Bucket="cut", Key="new")["Body"].read() == b"stored, not listed"
assert code(lambda: s3.get_object(Bucket="cut", Key="k1"))[0] == "NoSuchKey"
assert code(lambda: s3.get_object(Bucket="cut", Key="ghost"))[0] == "NoSuchKey"
assert s3.get_object(Bucket="cut", Key="k2")["Body"].read() == b"two"
want = [("k2", 3), ("new", len(b"stored, not listed"))]
deadline = time.time() + 60
while True:
    got = [(o["Key"], o["Size"]) for o in s3.list_objects_v2(Bucket="cut").get("Contents", [])]
    if got == want or time.time() > deadline:
        break
    time.sleep(0.5)
assert got == want, got
print("ok")
"#
    ));
    assert_eq!(out.trim(), "ok");
    // Each restart resolved the one intent its crash left.
    let resolved: usize = c
        .logs()
        .lines()
        .filter_map(|l| l.split("S3 write intents: ").nth(1))
        .filter_map(|r| r.split(' ').next()?.parse::<usize>().ok())
        .sum();
    assert_eq!(resolved, 4, "{}", c.logs());
}
