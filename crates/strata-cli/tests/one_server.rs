//! The one server: a single node is a cluster of one (its own embedded
//! metadata service and placement table), data directories of the
//! single-node server before 0.3 are refused with the command that
//! converts them, and `strata upgrade` converts them keeping every live
//! object and its cookie.

mod node_common;

use node_common::*;
use std::path::Path;
use std::process::Command;
use strata_node::object::{object_id, ObjectHeader};
use strata_store::{Store, StoreConfig, Tier};

fn strata(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_strata"))
        .env("STRATA_ADMIN_TOKEN", ADMIN_TOKEN)
        .env("STRATA_CLUSTER_SECRET", CLUSTER_SECRET)
        .args(args)
        .output()
        .expect("run strata")
}

/// Writes objects the way the single-node server before 0.3 did: needles
/// whose data is the `SNO1` object header and the bytes, in one store per
/// workload over `DEVICE/NAME/` of a flash and a disk directory.
fn old_store(data: &Path, name: &str) -> Store {
    let mut sc = StoreConfig::new(data.join("flash").join(name), Tier::Flash)
        .with_device(data.join("disk").join(name), Tier::Disk);
    sc.create_dirs = true;
    sc.segment_size = 1 << 20;
    Store::open(sc).expect("old store")
}

fn old_put(s: &Store, tier: Tier, bucket: &str, name: &str, cookie: u32, ms: u64, data: &[u8]) {
    let id = object_id(bucket, name);
    let h = ObjectHeader {
        workload: 1,
        created_ms: ms,
        full_name: format!("{bucket}/{name}"),
    };
    s.put(tier, id.key, id.alt, cookie, &h.encode_with(data))
        .expect("old put");
}

#[test]
fn upgrade_converts_a_single_node_directory_keeping_cookies() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("node");
    std::fs::create_dir_all(&data).unwrap();
    let now_ms = 1_700_000_000_000u64;
    let mut want: Vec<(String, u32, Vec<u8>)> = Vec::new();
    {
        let shared = old_store(&data, "_shared");
        for i in 0..300u32 {
            let body: Vec<u8> = (0..(i as usize * 37 % 5000))
                .map(|b| (b as u32 ^ i) as u8)
                .collect();
            let tier = if i % 2 == 0 { Tier::Flash } else { Tier::Disk };
            let cookie = 0x1000_0000 + i * 7919;
            old_put(
                &shared,
                tier,
                "photos",
                &format!("p{i}"),
                cookie,
                now_ms + i as u64,
                &body,
            );
            want.push((format!("photos/p{i}"), cookie, body));
        }
        // An overwrite (the newer version wins) and a delete.
        old_put(
            &shared,
            Tier::Disk,
            "photos",
            "p1",
            0x0bad_cafe,
            now_ms + 1_000,
            b"newer",
        );
        want[1] = ("photos/p1".into(), 0x0bad_cafe, b"newer".to_vec());
        let gone = object_id("photos", "p2");
        assert!(shared.delete(gone.key, gone.alt).unwrap());
        shared.close().unwrap();
        // A workload a plan listed had a store of its own.
        let own = old_store(&data, "logs");
        old_put(
            &own,
            Tier::Disk,
            "logs",
            "l0",
            0xdead_beef,
            now_ms,
            b"log line",
        );
        want.push(("logs/l0".into(), 0xdead_beef, b"log line".to_vec()));
        own.close().unwrap();
        std::fs::write(data.join("workloads.log"), "1 photos\n2 logs\n").unwrap();
    }

    // The one server refuses the old layout and names the command.
    let out = strata(&[
        "server",
        "--data",
        data.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("strata upgrade --data"), "{err}");

    let out = strata(&["upgrade", "--data", data.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains(" 300 objects"), "{said}");
    assert!(!data.join("flash").join("_shared").exists());
    assert!(!data.join("disk").join("logs").exists());
    assert!(!data.join("workloads.log").exists());

    // Every live object, its bytes and its cookie; the delete stays.
    let s = Server::start(&data, &[]);
    for (i, (name, cookie, body)) in want.iter().enumerate() {
        if name == "photos/p2" {
            continue;
        }
        let r = get(&s.addr, &format!("/{name}?cookie={cookie:08x}"));
        assert_eq!(r.status, 200, "{name}: {}", r.text());
        assert_eq!(&r.body, body, "{name}");
        // A wrong cookie for some of them (wrong cookies from one address
        // are rate-limited past a burst of 20: docs/security.md).
        if i % 20 == 0 {
            let wrong = get(&s.addr, &format!("/{name}?cookie={:08x}", cookie ^ 1));
            assert_eq!(wrong.status, 404, "{name} with a wrong cookie");
        }
    }
    assert_eq!(get(&s.addr, "/photos/p2").status, 404);
    // Running it again has nothing left to do.
    drop(s);
    let out = strata(&["upgrade", "--data", data.to_str().unwrap()]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing to upgrade"));
}

#[test]
fn a_single_node_is_a_cluster_of_one() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("node");
    let meta_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let meta = format!("127.0.0.1:{meta_port}");
    let s = Server::start(&data, &["--meta-listen", &meta]);
    // The public API and the Rust client's direct path see the same
    // objects: the embedded metadata service hands out a table of one row
    // per disk, one replica.
    assert_eq!(put(&s.addr, "/b/via-http", b"over http").status, 201);
    let file = dir.path().join("f.txt");
    std::fs::write(&file, b"over the client").unwrap();
    let out = strata(&[
        "put",
        "--meta",
        &meta,
        "b/via-client",
        file.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(get(&s.addr, "/b/via-client").body, b"over the client");
    let out = strata(&["get", "--meta", &meta, "b/via-http"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.stdout, b"over http");
    let st: serde_json::Value =
        serde_json::from_slice(&strata(&["cluster", "status", "--meta", &meta, "--json"]).stdout)
            .expect("status JSON");
    assert_eq!(st["replication"], 1, "{st}");
    assert_eq!(st["nodes"].as_array().map(Vec::len), Some(1), "{st}");
    drop(s);

    // Its directory cannot join another cluster (that would drop its rows),
    // and a cluster member's directory cannot start alone.
    let out = strata(&[
        "server",
        "--data",
        data.to_str().unwrap(),
        "--meta",
        "127.0.0.1:1",
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("cluster of one"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // Changing its devices would register them anew: refused, data kept.
    let other = dir.path().join("elsewhere");
    let out = strata(&[
        "server",
        "--data",
        data.to_str().unwrap(),
        "--disk",
        other.to_str().unwrap(),
        "--disk",
        dir.path().join("elsewhere2").to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
    ]);
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("devices"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = Server::start(&data, &[]);
    assert_eq!(get(&s.addr, "/b/via-http").body, b"over http");
}

/// The node protocol (`/cluster/v1`) and the metadata service's member
/// routes take only requests signed with the cluster secret: tried without
/// credentials, with a wrong secret, with a replayed header for another
/// path, sent again byte for byte, and with a same-length body swapped
/// under a good signature (issue 34, finding 4), nothing is stored; the
/// signed direct path works.
#[test]
fn the_node_protocol_needs_the_cluster_secret() {
    let dir = tempfile::tempdir().unwrap();
    let meta_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let meta = format!("127.0.0.1:{meta_port}");
    let s = Server::start(&dir.path().join("node"), &["--meta-listen", &meta]);
    let a = s.addr.as_str();
    let path = "/cluster/v1/rows/0/objects/b/forged";
    let version = [("x-strata-table-version", "1")];
    let r = request(a, "PUT", path, &version, Some(b"\x03\0\0\0\0forged")).unwrap();
    assert_eq!(r.status, 401, "{}", r.text());
    assert!(r.text().contains("STRATA_CLUSTER_SECRET"), "{}", r.text());
    // Signed with another secret, or a good signature for another path.
    let wrong = strata_meta::cluster_auth::ClusterSecret::new("not-the-cluster-secret").unwrap();
    let good = strata_meta::cluster_auth::ClusterSecret::new(CLUSTER_SECRET).unwrap();
    let body = b"\x03\0\0\0\0forged";
    let sign = |sec: &strata_meta::cluster_auth::ClusterSecret, p: &str| {
        sec.sign(
            &strata_meta::cluster_auth::Signed {
                method: "PUT",
                path: p,
                version: Some(1),
                stamp: None,
                host: a,
            },
            body,
        )
    };
    for auth in [
        sign(&wrong, path),
        sign(&good, "/cluster/v1/rows/0/objects/b/other"),
    ] {
        let h = [
            ("x-strata-table-version", "1"),
            ("x-strata-auth", auth.as_str()),
        ];
        let r = request(a, "PUT", path, &h, Some(body)).unwrap();
        assert_eq!(r.status, 403, "{}", r.text());
    }
    for p in ["/cluster/v1/rows/0/export", "/cluster/v1/status"] {
        assert_eq!(get(a, p).status, 401, "{p}");
    }
    // Nothing was stored; the health probe stays open.
    assert_eq!(get(a, "/b/forged").status, 404);
    assert_eq!(get(a, "/cluster/v1/health").status, 200);
    // The metadata service's member routes too.
    for (m, p) in [
        ("GET", "/v1/map"),
        ("POST", "/v1/register"),
        ("POST", "/v1/heartbeat"),
    ] {
        let r = request(&meta, m, p, &[], Some(b"{}")).unwrap();
        assert_eq!(r.status, 401, "{m} {p}: {}", r.text());
    }
    // The same request signed with the cluster's secret is served.
    let h = [
        ("x-strata-table-version", "1"),
        ("x-strata-auth", &*sign(&good, path)),
    ];
    let r = request(a, "PUT", path, &h, Some(body)).unwrap();
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(get(a, "/b/forged").body, b"forged");
    // Issue 34, finding 4. The same request again, byte for byte: a
    // replay, refused.
    let r = request(a, "PUT", path, &h, Some(body)).unwrap();
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(r.text().contains("admitted before"), "{}", r.text());
    // A fresh signature sent with another body of the same length: the
    // digest under the MAC does not match, nothing is stored.
    let h = [
        ("x-strata-table-version", "1"),
        ("x-strata-auth", &*sign(&good, path)),
    ];
    let r = request(a, "PUT", path, &h, Some(b"\x03\0\0\0\0FORGED")).unwrap();
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("does not match"), "{}", r.text());
    assert_eq!(get(a, "/b/forged").body, b"forged");
    // A member without the secret refuses to start, saying why.
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .env_remove("STRATA_CLUSTER_SECRET")
        .args(["server", "--meta", &meta, "--data"])
        .arg(dir.path().join("member"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("STRATA_CLUSTER_SECRET"));
    let out = Command::new(env!("CARGO_BIN_EXE_strata"))
        .env_remove("STRATA_CLUSTER_SECRET")
        .args(["meta", "--data"])
        .arg(dir.path().join("meta"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("STRATA_CLUSTER_SECRET"));
}
