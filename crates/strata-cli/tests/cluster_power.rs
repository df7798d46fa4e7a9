//! A power cut to a whole cluster: the metadata service and three nodes
//! (replication 3) run over strata-fs's power-loss model
//! (`STRATA_POWER_ROOT`), acknowledged PUTs are made, then every process
//! loses its power at once (the model drops what was not synced, then the
//! process stops). Started again as after the power came back, every node
//! must come back as itself (the same node ids, no rows removed) and every
//! acknowledged object must read back byte-identical.
//!
//! Before issue 33 the node's identity file was rewritten at every start
//! without fsync or rename: a power cut left it empty, the node took
//! itself for a node declared dead, registered anew and removed its rows
//! (every GET then answered 503).

mod cluster_common;

use cluster_common::*;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

/// `cmd` over the power-loss model for `root`, cut when `trigger` appears.
fn powered(cmd: &mut Command, root: &Path, trigger: &Path, seed: u64, tear: bool) {
    cmd.env("STRATA_POWER_ROOT", root)
        .env("STRATA_POWER_CUT_ON", trigger)
        .env("STRATA_POWER_SEED", seed.to_string())
        .env("STRATA_POWER_TEAR", if tear { "1" } else { "0" });
}

struct Cluster {
    meta: (Proc, String),
    nodes: Vec<(Proc, String)>,
}

fn start(
    dir: &Path,
    meta_addr: &str,
    node_addrs: &[String],
    power: Option<(u64, bool)>,
) -> Cluster {
    let trigger = dir.join("power-cut");
    let meta_dir = dir.join("meta");
    std::fs::create_dir_all(&meta_dir).unwrap();
    let mut m = strata();
    m.args(["meta", "--listen", meta_addr, "--initial-nodes", "3"])
        // Not declared dead while the power is off.
        .args(["--suspect-after", "120", "--data"])
        .arg(&meta_dir)
        .stdout(Stdio::null())
        .stderr(log(dir, "meta"));
    if let Some((seed, tear)) = power {
        powered(&mut m, &meta_dir, &trigger, seed, tear);
    }
    let meta = Proc {
        child: m.spawn().expect("meta"),
        name: "meta".into(),
    };
    wait_until(Duration::from_secs(20), "meta to listen", || {
        std::net::TcpStream::connect(meta_addr).is_ok()
    });
    let nodes: Vec<(Proc, String)> = node_addrs
        .iter()
        .enumerate()
        .map(|(i, addr)| {
            let data = dir.join(format!("n{i}"));
            std::fs::create_dir_all(&data).unwrap();
            let mut c = strata();
            c.args(["server", "--meta", meta_addr, "--listen", addr, "--data"])
                .arg(&data)
                .arg("--disk")
                .arg(&data)
                .stdout(Stdio::null())
                .stderr(log(dir, &format!("n{i}")));
            if let Some((seed, tear)) = power {
                powered(&mut c, &data, &trigger, seed * 10 + i as u64, tear);
            }
            (
                Proc {
                    child: c.spawn().expect("node"),
                    name: format!("node {i}"),
                },
                addr.clone(),
            )
        })
        .collect();
    for (_, addr) in &nodes {
        wait_until(Duration::from_secs(30), "a node to listen", || {
            std::net::TcpStream::connect(addr).is_ok()
        });
    }
    Cluster {
        meta: (meta, meta_addr.to_string()),
        nodes,
    }
}

/// The log file of `name`, appended to across restarts.
fn log(dir: &Path, name: &str) -> std::fs::File {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(format!("{name}.log")))
        .expect("log")
}

fn node_ids(meta: &str) -> Vec<u64> {
    let mut ids: Vec<u64> = status(meta)["nodes"]
        .as_array()
        .map(|a| a.iter().filter_map(|n| n["id"].as_u64()).collect())
        .unwrap_or_default();
    ids.sort_unstable();
    ids
}

fn whole_cluster_power_cut(tear: bool, seed: u64) {
    let dir = tempfile::tempdir().unwrap();
    let meta_addr = format!("127.0.0.1:{}", free_port());
    let addrs: Vec<String> = (0..3)
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    let mut c = start(dir.path(), &meta_addr, &addrs, Some((seed, tear)));
    wait_until(Duration::from_secs(30), "the first table", || {
        status(&meta_addr)["table_version"].as_u64() == Some(1)
    });
    let ids_before = node_ids(&meta_addr);
    assert_eq!(ids_before.len(), 3, "{}", logs(dir.path()));
    let objects: Vec<(String, Vec<u8>)> = (0..8)
        .map(|i| {
            (
                format!("/power/k{i}"),
                xorshift_bytes(seed * 100 + i, 1000 + 997 * i as usize),
            )
        })
        .collect();
    for (path, body) in &objects {
        let mut acked = false;
        for _ in 0..50 {
            let (code, _, _) = http_full(&addrs[0], "PUT", path, None, "", body);
            if code == 201 || code == 200 {
                acked = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(
            acked,
            "PUT {path} was not acknowledged: {}",
            logs(dir.path())
        );
    }

    // The power goes off everywhere at once.
    std::fs::write(dir.path().join("power-cut"), b"").unwrap();
    for p in std::iter::once(&mut c.meta.0).chain(c.nodes.iter_mut().map(|(p, _)| p)) {
        let st = p.child.wait().expect("wait");
        assert_eq!(
            st.code(),
            Some(86),
            "{} stopped by the power cut: {st:?}",
            p.name
        );
    }
    drop(c);
    std::fs::remove_file(dir.path().join("power-cut")).unwrap();
    for i in 0..3 {
        let id = dir.path().join(format!("n{i}/cluster-node.json"));
        let len = std::fs::metadata(&id).map_or(0, |m| m.len());
        assert!(
            len > 0,
            "{} holds {len} bytes after the power cut",
            id.display()
        );
    }

    // The power comes back.
    let _c = start(dir.path(), &meta_addr, &addrs, None);
    for (path, body) in &objects {
        let mut last = (0, Vec::new());
        let served = (0..300).any(|_| {
            let (code, _, got) = http_full(&addrs[0], "GET", path, None, "", b"");
            last = (code, got);
            if last.0 == 200 {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
            false
        });
        assert!(
            served,
            "GET {path} after the power cut answered {}: {}",
            last.0,
            logs(dir.path())
        );
        assert!(last.1 == *body, "GET {path} served other bytes");
    }
    assert_eq!(
        node_ids(&meta_addr),
        ids_before,
        "the nodes came back under other ids: {}",
        logs(dir.path())
    );
    let text = logs(dir.path());
    assert!(
        !text.contains("dropping them"),
        "a node dropped its rows: {text}"
    );
}

#[test]
fn a_power_cut_to_the_whole_cluster_loses_nothing_acknowledged() {
    whole_cluster_power_cut(false, 1);
}

#[test]
fn a_power_cut_that_tears_writes_to_the_whole_cluster_loses_nothing_acknowledged() {
    whole_cluster_power_cut(true, 2);
}
