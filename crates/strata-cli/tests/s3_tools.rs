//! The S3 API of a cluster node with the Debian S3 tools, started by the
//! tests: `rclone sync` of 1,000 small files up and back, compared byte
//! for byte, and s3cmd's bucket and object commands.

#[allow(unused_imports)]
mod cluster_common;
mod s3;

use s3::*;
use std::path::Path;
use std::process::Command;

fn rclone(c: &S3Cluster, args: &[&str]) -> String {
    let out = Command::new("rclone")
        .args(["--config", &c.path("rclone.conf").to_string_lossy()])
        .args(args)
        // A CA bundle set for HTTPS elsewhere makes rclone refuse a plain
        // HTTP endpoint.
        .env_remove("AWS_CA_BUNDLE")
        .env("RCLONE_CONFIG_STRATA_TYPE", "s3")
        .env("RCLONE_CONFIG_STRATA_PROVIDER", "Other")
        .env("RCLONE_CONFIG_STRATA_ACCESS_KEY_ID", ACCESS)
        .env("RCLONE_CONFIG_STRATA_SECRET_ACCESS_KEY", SECRET)
        .env("RCLONE_CONFIG_STRATA_ENDPOINT", c.endpoint())
        .env("RCLONE_CONFIG_STRATA_REGION", "us-east-1")
        .env("RCLONE_CONFIG_STRATA_FORCE_PATH_STYLE", "true")
        .output()
        .expect("rclone must be installed (apt-get install rclone)");
    assert_ok(&out, &format!("rclone {args:?}"), &c.logs());
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Every file under `dir`, relative path → bytes.
fn tree(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let mut out = std::collections::BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read dir").flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let rel = p
                    .strip_prefix(dir)
                    .expect("prefix")
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, std::fs::read(&p).expect("read"));
            }
        }
    }
    out
}

#[test]
fn rclone_syncs_1000_files_up_and_back() {
    let c = S3Cluster::start();
    let src = c.path("src");
    for i in 0..1000u32 {
        let dir = src.join(format!("d{}", i % 7));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let len = (i as usize * 37) % 3000;
        let data: Vec<u8> = (0..len).map(|j| (j as u32 * 31 + i) as u8).collect();
        std::fs::write(dir.join(format!("file {i:04}.bin")), data).expect("write");
    }
    rclone(&c, &["mkdir", "strata:sync"]);
    rclone(&c, &["sync", &src.to_string_lossy(), "strata:sync/data"]);
    let listed = rclone(&c, &["lsf", "-R", "--files-only", "strata:sync/data"]);
    assert_eq!(listed.lines().count(), 1000, "{listed}");
    let back = c.path("back");
    rclone(&c, &["sync", "strata:sync/data", &back.to_string_lossy()]);
    assert!(tree(&src) == tree(&back), "the files came back different");
    // A second sync has nothing to copy; a deleted file is deleted remotely.
    std::fs::remove_file(src.join("d0/file 0000.bin")).expect("rm");
    rclone(&c, &["sync", &src.to_string_lossy(), "strata:sync/data"]);
    let listed = rclone(&c, &["lsf", "-R", "--files-only", "strata:sync/data"]);
    assert_eq!(listed.lines().count(), 999);
    assert!(!listed.contains("file 0000.bin"));
}

#[test]
fn s3cmd_buckets_and_objects() {
    let c = S3Cluster::start();
    let cfg = c.path("s3cfg");
    std::fs::write(
        &cfg,
        format!(
            "[default]\naccess_key = {ACCESS}\nsecret_key = {SECRET}\nhost_base = {s3}\n\
             host_bucket = {s3}\nuse_https = False\nbucket_location = us-east-1\n\
             signature_v2 = False\n",
            s3 = c.s3
        ),
    )
    .expect("s3cfg");
    let s3cmd = |args: &[&str]| {
        let out = Command::new("s3cmd")
            .args(["-c", &cfg.to_string_lossy()])
            .args(args)
            .output()
            .expect("s3cmd must be installed (apt-get install s3cmd)");
        assert_ok(&out, &format!("s3cmd {args:?}"), &c.logs());
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let file = c.path("f.txt");
    std::fs::write(&file, b"s3cmd was here").expect("write");
    s3cmd(&["mb", "s3://tools"]);
    s3cmd(&["put", &file.to_string_lossy(), "s3://tools/dir/f.txt"]);
    let ls = s3cmd(&["ls", "-r", "s3://tools"]);
    assert!(ls.contains("s3://tools/dir/f.txt"), "{ls}");
    let got = c.path("got.txt");
    s3cmd(&["get", "s3://tools/dir/f.txt", &got.to_string_lossy()]);
    assert_eq!(std::fs::read(&got).expect("read"), b"s3cmd was here");
    assert!(s3cmd(&["ls"]).contains("s3://tools"));
    s3cmd(&["del", "s3://tools/dir/f.txt"]);
    assert!(!s3cmd(&["ls", "-r", "s3://tools"]).contains("f.txt"));
    s3cmd(&["rb", "s3://tools"]);
}

/// `--s3-tls-cert`/`--s3-tls-key`: the S3 API over HTTPS only. boto3 and
/// the aws CLI that trust the certificate work as over HTTP, including the
/// aws-chunked trailer uploads current SDKs send over HTTPS by default and
/// a multipart upload; a client that does not trust it is refused by its
/// own TLS check; plain HTTP to the port gets no HTTP answer; a bad key
/// file, or the certificate without --s3-listen, stops the server at start
/// with the reason.
#[test]
fn s3_over_tls() {
    let c = S3Cluster::start_full(&[], true);
    assert!(c.endpoint().starts_with("https://"));
    let out = c.python(&format!(
        r#"{PRELUDE}
import io
s3.create_bucket(Bucket="tls")
body = os.urandom(300 * 1024)
s3.put_object(Bucket="tls", Key="small", Body=body)
assert s3.get_object(Bucket="tls", Key="small")["Body"].read() == body
big = os.urandom(12 * 1024 * 1024)
s3.upload_fileobj(io.BytesIO(big), "tls", "big",
    Config=boto3.s3.transfer.TransferConfig(multipart_threshold=5 << 20, multipart_chunksize=5 << 20))
assert s3.get_object(Bucket="tls", Key="big")["Body"].read() == big
assert [o["Key"] for o in s3.list_objects_v2(Bucket="tls")["Contents"]] == ["big", "small"]
print("ok")
"#
    ));
    assert_eq!(out.trim(), "ok");
    let file = c.path("up.bin");
    std::fs::write(&file, vec![7u8; 100_000]).unwrap();
    c.aws_ok(&["s3", "cp", &file.to_string_lossy(), "s3://tls/cli"]);
    let back = c.path("back.bin");
    c.aws_ok(&["s3", "cp", "s3://tls/cli", &back.to_string_lossy()]);
    assert_eq!(std::fs::read(&back).unwrap(), vec![7u8; 100_000]);

    // A client that does not trust the certificate refuses the server.
    let out = c.python_env(
        &format!(
            r#"{PRELUDE}
try:
    s3.list_buckets()
    print("trusted")
except botocore.exceptions.SSLError:
    print("refused")
"#
        ),
        &[("AWS_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt")],
    );
    assert_eq!(out.trim(), "refused");

    // Plain HTTP to the TLS port: no HTTP answer.
    {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(&c.s3).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_secs(10)))
            .unwrap();
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf);
        assert!(
            !buf.starts_with(b"HTTP/"),
            "{}",
            String::from_utf8_lossy(&buf)
        );
    }

    // Refused at start, with the reason.
    let key = c.path("key.pem");
    let cert = c.path("cert.pem");
    let bad = c.path("bad.pem");
    std::fs::write(&bad, "not a key").unwrap();
    let start = |args: &[&std::ffi::OsStr]| {
        let out = cluster_common::strata()
            .args(["server", "--data"])
            .arg(c.path("other"))
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .env("STRATA_ROOT_ACCESS_KEY", ACCESS)
            .env("STRATA_ROOT_SECRET_KEY", SECRET)
            .output()
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = start(&[
        "--s3-listen".as_ref(),
        "127.0.0.1:0".as_ref(),
        "--s3-tls-cert".as_ref(),
        cert.as_os_str(),
        "--s3-tls-key".as_ref(),
        bad.as_os_str(),
    ]);
    assert!(err.contains("bad.pem"), "{err}");
    let err = start(&[
        "--s3-tls-cert".as_ref(),
        cert.as_os_str(),
        "--s3-tls-key".as_ref(),
        key.as_os_str(),
    ]);
    assert!(err.contains("needs --s3-listen"), "{err}");
    let err = start(&["--s3-tls-cert".as_ref(), cert.as_os_str()]);
    assert!(err.contains("--s3-tls-key"), "{err}");
}
