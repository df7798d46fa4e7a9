//! The S3 API of a cluster node (docs/s3-compatibility.md), driven by real
//! S3 clients started by the tests: boto3 and the aws CLI.

mod cluster_common;
mod s3;

use cluster_common::*;
use s3::*;

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
# GET and HEAD carry the same version ETag (not the MD5, which is not
# stored with the object yet); an overwrite changes it.
assert g["ETag"] == h["ETag"] and "-" in h["ETag"], (g["ETag"], h["ETag"])
s3.put_object(Bucket="photos", Key="a/b c.txt", Body=small)
assert s3.head_object(Bucket="photos", Key="a/b c.txt")["ETag"] != h["ETag"]
g = s3.get_object(Bucket="photos", Key="a/b c.txt", Range="bytes=7-12")
assert g["Body"].read() == small[7:13]
assert g["ContentRange"] == "bytes 7-12/%d" % len(small), g["ContentRange"]
assert g["ResponseMetadata"]["HTTPStatusCode"] == 206
assert code(lambda: s3.get_object(Bucket="photos", Key="a/b c.txt", Range="bytes=500-")) == ("InvalidRange", 416)

# Larger than a tract (8 MiB): striped over rows, read back whole and across a tract boundary.
big = bytes((i * 7919 + 13) % 251 for i in range(20 * 1024 * 1024 + 77))
r = s3.put_object(Bucket="photos", Key="big.bin", Body=big)
assert r["ETag"] == '"%s"' % hashlib.md5(big).hexdigest()
assert s3.get_object(Bucket="photos", Key="big.bin")["Body"].read() == big
part = s3.get_object(Bucket="photos", Key="big.bin", Range="bytes=8388600-8388615")["Body"].read()
assert part == big[8388600:8388616]

# A wrong Content-MD5 is BadDigest and stores nothing.
import base64
bad = base64.b64encode(hashlib.md5(b"other").digest()).decode()
assert code(lambda: s3.put_object(Bucket="photos", Key="bad", Body=b"data", ContentMD5=bad)) == ("BadDigest", 400)
assert code(lambda: s3.head_object(Bucket="photos", Key="bad"))[1] == 404
assert code(lambda: s3.get_object(Bucket="photos", Key="bad")) == ("NoSuchKey", 404)

s3.delete_object(Bucket="photos", Key="a/b c.txt")
assert code(lambda: s3.get_object(Bucket="photos", Key="a/b c.txt")) == ("NoSuchKey", 404)
# S3 deletes of absent keys succeed.
s3.delete_object(Bucket="photos", Key="never-written")
print("ok")
"#
    ));
    assert_eq!(out.trim(), "ok");
}

/// Only signed requests with a known key and the right secret get in; a
/// presigned URL works with a plain HTTP client; an unsupported operation
/// is 501 NotImplemented.
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
    urllib.request.urlopen(url.replace("Signature=", "Signature=0"))
    raise AssertionError("a tampered presigned URL was served")
except urllib.error.HTTPError as e:
    assert e.code == 403, e.code

assert code(lambda: s3.get_bucket_tagging(Bucket="docs")) == ("NotImplemented", 501)
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
    // The secret never reaches the node's log.
    assert!(!c.logs().contains(SECRET), "the root secret was logged");
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

/// Buckets: create, head, list, location, delete only when empty; objects
/// of unknown buckets are NoSuchBucket.
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
s3.head_bucket(Bucket="b-one")
assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["b-one", "b-two"]
assert s3.get_bucket_location(Bucket="b-one").get("LocationConstraint") in (None, "")
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
s3.abort_multipart_upload(Bucket="mpu", Key="other/x", UploadId=u2)
e1 = s3.upload_part(Bucket="mpu", Key="small", UploadId=u, PartNumber=1, Body=b"a")["ETag"]
e2 = s3.upload_part(Bucket="mpu", Key="small", UploadId=u, PartNumber=2, Body=b"b")["ETag"]
assert code(lambda: s3.complete_multipart_upload(Bucket="mpu", Key="small", UploadId=u, MultipartUpload={{"Parts": [{{"PartNumber": 1, "ETag": e1}}, {{"PartNumber": 2, "ETag": e2}}]}})) == ("EntityTooSmall", 400)
# Abort: the upload is gone, nothing was written.
s3.abort_multipart_upload(Bucket="mpu", Key="small", UploadId=u)
assert code(lambda: s3.list_parts(Bucket="mpu", Key="small", UploadId=u)) == ("NoSuchUpload", 404)
assert code(lambda: s3.upload_part(Bucket="mpu", Key="small", UploadId=u, PartNumber=3, Body=b"c")) == ("NoSuchUpload", 404)
assert code(lambda: s3.head_object(Bucket="mpu", Key="small"))[1] == 404
assert s3.list_multipart_uploads(Bucket="mpu").get("Uploads", []) == []
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
