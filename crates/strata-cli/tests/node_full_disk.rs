//! A node whose volume is full comes back (issue 15): fill a 64 MiB tmpfs
//! through the HTTP API until the node answers 507, kill it, start it
//! again (twice) and read every acknowledged object back.
//!
//! Mounts a tmpfs of its own, so it needs root (as this project's test
//! machines run).

mod node_common;

use node_common::*;
use std::path::Path;
use std::process::Command;

struct SmallVolume(tempfile::TempDir);

impl SmallVolume {
    fn new(bytes: u64) -> SmallVolume {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .expect("running mount");
        assert!(
            out.status.success(),
            "this test mounts a {bytes}-byte tmpfs and needs root: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        SmallVolume(dir)
    }
    fn path(&self) -> &Path {
        self.0.path()
    }
}

impl Drop for SmallVolume {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(self.0.path()).status();
    }
}

/// Bytes still free on the file system holding `p` (`stat -f`).
fn free_bytes(p: &Path) -> u64 {
    let out = Command::new("stat")
        .args(["-f", "-c", "%a %S"])
        .arg(p)
        .output()
        .expect("stat -f");
    let t = String::from_utf8_lossy(&out.stdout);
    let mut it = t.split_whitespace().map(|x| x.parse::<u64>().unwrap());
    it.next().unwrap() * it.next().unwrap()
}

/// With the volume at zero bytes free, the store opens (tests/comes_back.rs
/// in strata-store) and the node's embedded metadata service rewrites
/// `meta/meta.json` when the node registers again (its address changed) in
/// the space `meta/meta.reserve` kept for it.
#[test]
fn a_node_on_a_full_volume_restarts_and_serves() {
    let vol = SmallVolume::new(64 << 20);
    let data = vol.path().join("data");
    let mut s = Server::start(&data, &[]);
    // (name, seed, len, cookie) of every acknowledged object.
    let mut acked: Vec<(String, u64, usize, String)> = Vec::new();
    let mut seq = 0u64;
    let status = loop {
        seq += 1;
        let len = 200_000 + (seq as usize * 7919) % 100_000;
        let name = format!("obj{seq}");
        let r = put(&s.addr, &format!("/full/{name}"), &content(seq, len));
        if r.status != 201 {
            break r.status;
        }
        let cookie = r.header("x-strata-cookie").expect("cookie").to_string();
        acked.push((name, seq, len, cookie));
        assert!(seq < 10_000, "a 64 MiB volume never filled");
    };
    // The node refused the write because the volume is full: 507
    // Insufficient Storage, not a 503 to retry.
    assert_eq!(status, 507, "the fill ended with {status}");
    assert!(
        free_bytes(vol.path()) < 300_000,
        "the fill ended with {status} and {} bytes still free",
        free_bytes(vol.path())
    );
    assert!(acked.len() > 50, "only {} objects fit", acked.len());
    // Four restarts at zero bytes free: each registers the node again (a
    // new address) and so saves the metadata state out of its reserve.
    for round in 0..4 {
        s.kill9();
        // The open removes what a killed process left in temporary files:
        // take that space too, so that the node starts on a volume with
        // no byte free.
        let mut n = 0;
        while std::fs::write(vol.path().join(format!("filler{round}-{n}")), [1u8; 4096]).is_ok() {
            n += 1;
        }
        let _ = std::fs::write(vol.path().join(format!("filler{round}-last")), [1u8; 1]);
        // Server::start panics with the server's error if it cannot start.
        s = Server::start(&data, &[]);
        assert_eq!(get(&s.addr, "/healthz").status, 200, "round {round}");
        // Still full: a new object is refused as such, at once.
        let r = put(&s.addr, "/full/one-more", &content(999_999, 100_000));
        assert_eq!(r.status, 507, "round {round}: {}", r.text());
        for (name, seed, len, cookie) in &acked {
            let g = get(&s.addr, &format!("/full/{name}?cookie={cookie}"));
            assert_eq!(g.status, 200, "round {round}: {name} lost: {}", g.text());
            assert!(
                g.body == content(*seed, *len),
                "round {round}: {name} corrupt"
            );
        }
    }
}
