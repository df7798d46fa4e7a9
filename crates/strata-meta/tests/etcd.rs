//! The metadata service against a real etcd (Debian's etcd-server), started
//! here on free loopback ports with a temporary data directory.
// Files are written and damaged as the medium would, bypassing strata-fs.
#![allow(clippy::disallowed_methods)]

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use strata_meta::api::{DiskSpec, HeartbeatRequest, RegisterRequest, TierClass};
use strata_meta::backend::{Backend, FileBackend};
use strata_meta::state::{BucketRecord, ClusterConfig, ClusterState};
use strata_meta::{HealthConfig, MetaError, MetaService};
use strata_placement::NodeId;

struct Etcd {
    child: Child,
    url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Etcd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn start_etcd() -> Etcd {
    let dir = tempfile::tempdir().unwrap();
    let (client, peer) = (free_port(), free_port());
    let url = format!("http://127.0.0.1:{client}");
    let peer_url = format!("http://127.0.0.1:{peer}");
    let child = Command::new("etcd")
        .args(["--name", "t", "--data-dir"])
        .arg(dir.path())
        .args([
            "--listen-client-urls",
            &url,
            "--advertise-client-urls",
            &url,
        ])
        .args(["--listen-peer-urls", &peer_url])
        .args(["--initial-advertise-peer-urls", &peer_url])
        .args(["--initial-cluster", &format!("t={peer_url}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("etcd must be installed (apt-get install etcd-server)");
    let etcd = Etcd {
        child,
        url,
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if strata_meta::etcd::EtcdClient::connect(&etcd.url)
            .await
            .is_ok()
        {
            return etcd;
        }
        assert!(Instant::now() < deadline, "etcd did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn reg(addr: &str) -> RegisterRequest {
    RegisterRequest {
        addr: addr.into(),
        disks: vec![DiskSpec {
            tier: TierClass::Disk,
            capacity_bytes: 1 << 40,
            path: "/srv/d0".into(),
        }],
        node_id: None,
        node_key: None,
    }
}

fn config(n: usize) -> ClusterConfig {
    ClusterConfig {
        initial_nodes: n,
        ..ClusterConfig::default()
    }
}

#[tokio::test]
async fn state_and_table_versions_survive_a_restart_in_etcd() {
    let etcd = start_etcd().await;
    let backend = Backend::etcd(&etcd.url, "/strata-test").await.unwrap();
    let svc = MetaService::open(backend, config(4), HealthConfig::default())
        .await
        .unwrap();
    for i in 0..5 {
        svc.register(reg(&format!("127.0.0.1:{}", 7000 + i)))
            .await
            .unwrap();
    }
    svc.add_node(NodeId(4)).await.unwrap();
    let before = svc.state().await;
    assert_eq!(before.table_version(), 2);
    drop(svc);

    // A second service on the same prefix sees exactly the same state.
    let backend = Backend::etcd(&etcd.url, "/strata-test").await.unwrap();
    let again = MetaService::open(backend, config(99), HealthConfig::default())
        .await
        .unwrap();
    let after = again.state().await;
    assert_eq!(after, before);
    assert_eq!(after.config.initial_nodes, 4, "saved config wins");

    // The keys are where docs/placement.md says.
    let c = strata_meta::etcd::EtcdClient::connect(&etcd.url)
        .await
        .unwrap();
    let cur = c.get("/strata-test/table/current").await.unwrap().unwrap();
    assert_eq!(cur.value, b"2");
    let v1 = c
        .get("/strata-test/table/00000000000000000001")
        .await
        .unwrap();
    assert!(v1.is_some(), "older versions are kept");
    assert!(c.get("/strata-test/nothing-here").await.unwrap().is_none());
}

#[tokio::test]
async fn two_services_on_one_prefix_cannot_overwrite_each_other() {
    let etcd = start_etcd().await;
    let mut a = Backend::etcd(&etcd.url, "/p").await.unwrap();
    let mut b = Backend::etcd(&etcd.url, "/p").await.unwrap();
    assert!(a.load().await.unwrap().is_none());
    assert!(b.load().await.unwrap().is_none());
    a.save(None, &ClusterState::new(config(3))).await.unwrap();
    // b read nothing before a wrote: its save must fail, not overwrite.
    let err = b
        .save(None, &ClusterState::new(config(5)))
        .await
        .unwrap_err();
    assert!(matches!(err, MetaError::Conflict), "{err}");
    // After loading, b may write; then a's now stale save fails.
    let loaded = b.load().await.unwrap().unwrap();
    assert_eq!(loaded.config.initial_nodes, 3);
    let mut s2 = loaded.clone();
    s2.next_node = 42;
    b.save(Some(&loaded), &s2).await.unwrap();
    let err = a
        .save(None, &ClusterState::new(config(3)))
        .await
        .unwrap_err();
    assert!(matches!(err, MetaError::Conflict));
    assert_eq!(a.load().await.unwrap().unwrap().next_node, 42);
}

fn bucket(created_ms: u64) -> BucketRecord {
    BucketRecord {
        created_ms,
        public_read: false,
    }
}

/// Issue 34, finding 9: a bucket is its own key; creating one writes that
/// key (and the save counter), not the state; a save of more changes
/// than one etcd transaction takes goes in several, and everything reads
/// back.
#[tokio::test]
async fn a_bucket_is_its_own_key_and_large_saves_are_split() {
    let etcd = start_etcd().await;
    let c = strata_meta::etcd::EtcdClient::connect(&etcd.url)
        .await
        .unwrap();
    let mut a = Backend::etcd(&etcd.url, "/s").await.unwrap();
    let s0 = ClusterState::new(config(3));
    a.save(None, &s0).await.unwrap();
    let state_rev = c.get("/s/state").await.unwrap().unwrap().mod_revision;
    let mut s1 = s0.clone();
    s1.buckets.insert("photos".into(), bucket(5));
    a.save(Some(&s0), &s1).await.unwrap();
    let entry = c.get("/s/e/bucket/photos").await.unwrap().unwrap();
    assert_eq!(
        serde_json::from_slice::<BucketRecord>(&entry.value).unwrap(),
        bucket(5)
    );
    assert_eq!(
        c.get("/s/state").await.unwrap().unwrap().mod_revision,
        state_rev,
        "a bucket creation rewrote the state"
    );
    // 450 buckets at once (etcd takes at most 128 operations a
    // transaction), then 200 of them deleted.
    let mut s2 = s1.clone();
    for i in 0..450 {
        s2.buckets.insert(format!("b{i:04}"), bucket(i));
    }
    s2.next_node = 9;
    a.save(Some(&s1), &s2).await.unwrap();
    let mut s3 = s2.clone();
    for i in 0..200 {
        s3.buckets.remove(&format!("b{i:04}"));
    }
    a.save(Some(&s2), &s3).await.unwrap();
    let mut b = Backend::etcd(&etcd.url, "/s").await.unwrap();
    assert_eq!(b.load().await.unwrap().unwrap(), s3);
    // The other service's saves still guard each other.
    let mut s4 = s3.clone();
    s4.buckets.insert("late".into(), bucket(1));
    a.save(Some(&s3), &s4).await.unwrap();
    let err = b.save(Some(&s3), &s4).await.unwrap_err();
    assert!(matches!(err, MetaError::Conflict), "{err}");
}

/// A prefix of format 1 (the whole state under `state`, as the last
/// release wrote it) opens, and its first save moves the entries to their
/// own keys.
#[tokio::test]
async fn a_format_1_prefix_opens_and_is_moved_to_format_2() {
    let etcd = start_etcd().await;
    let c = strata_meta::etcd::EtcdClient::connect(&etcd.url)
        .await
        .unwrap();
    let mut old = ClusterState::new(config(3));
    old.format = 1;
    for i in 0..150 {
        old.buckets.insert(format!("old{i:03}"), bucket(i));
    }
    let made = c
        .txn(
            &[],
            &[strata_meta::etcd::Op::Put(
                "/o/state".into(),
                serde_json::to_vec(&old).unwrap(),
            )],
        )
        .await
        .unwrap();
    assert!(made.is_some());
    let backend = Backend::etcd(&etcd.url, "/o").await.unwrap();
    let svc = MetaService::open(backend, config(3), HealthConfig::default())
        .await
        .unwrap();
    let mut want = old.clone();
    want.format = strata_meta::state::STATE_FORMAT;
    assert_eq!(svc.state().await, want);
    svc.register(reg("127.0.0.1:7100")).await.unwrap();
    let after = svc.state().await;
    drop(svc);
    assert!(c.get("/o/e/bucket/old149").await.unwrap().is_some());
    let core: ClusterState =
        serde_json::from_slice(&c.get("/o/state").await.unwrap().unwrap().value).unwrap();
    assert!(core.buckets.is_empty(), "the entries left the state key");
    assert_eq!(core.format, 2);
    let mut again = Backend::etcd(&etcd.url, "/o").await.unwrap();
    assert_eq!(again.load().await.unwrap().unwrap(), after);
}

#[tokio::test]
async fn unreachable_etcd_is_a_clear_error() {
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let res = async {
        let backend = Backend::etcd(&url, "/x").await?;
        MetaService::open(backend, config(3), HealthConfig::default()).await
    }
    .await;
    let err = res.err().expect("no etcd there");
    assert!(err.to_string().contains(&url), "{err}");
}

#[tokio::test]
async fn silent_node_is_declared_dead_and_recovery_is_planned() {
    let dir = tempfile::tempdir().unwrap();
    let backend = Backend::File(FileBackend::new(dir.path()).unwrap());
    let health = HealthConfig {
        heartbeat: Duration::from_millis(50),
        suspect_after: Duration::from_millis(300),
        strikes: 2,
        check_every: Duration::from_millis(100),
        probe_timeout: Duration::from_millis(200),
    };
    let svc = MetaService::open(backend, config(5), health).await.unwrap();
    // Addresses where nothing listens: probes fail.
    // Each node's id and the key it heartbeats with.
    let (ids, keys): (Vec<NodeId>, Vec<Option<String>>) = {
        let mut v = Vec::new();
        for _ in 0..5 {
            let port = free_port();
            let r = svc
                .register(reg(&format!("127.0.0.1:{port}")))
                .await
                .unwrap();
            v.push((r.node_id, r.node_key));
        }
        v.into_iter().unzip()
    };
    let checker = tokio::spawn(svc.clone().run_health_checker());
    // Nodes 0..4 keep beating; node 4 falls silent.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        for (&id, key) in ids[..4].iter().zip(&keys) {
            svc.heartbeat(HeartbeatRequest {
                node_id: id,
                node_key: key.clone(),
                ..HeartbeatRequest::default()
            })
            .await
            .unwrap();
        }
        let st = svc.status().await;
        if st.table_version == 2 {
            assert!(st.rows_under_replicated > 0);
            assert_eq!(st.recovery.transfers_done, 0);
            let dead: Vec<_> = st
                .nodes
                .iter()
                .filter(|n| n.state == strata_meta::api::NodeState::Dead)
                .map(|n| n.id)
                .collect();
            assert_eq!(dead, vec![ids[4]]);
            break;
        }
        assert!(Instant::now() < deadline, "node never declared dead");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    checker.abort();
    // The file store holds the new version.
    let back = FileBackend::new(dir.path()).unwrap();
    let s = Backend::File(back).load().await.unwrap().unwrap();
    assert_eq!(s.table_version(), 2);
}
