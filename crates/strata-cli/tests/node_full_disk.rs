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

/// Fills the volume until 507, with 1 MiB segments and a small flash
/// capacity so that the tier mover moves sealed flash segments to the disk
/// device (a moved segment then has the highest id there), then:
///
/// - kill -9 and a start at zero bytes free: the node takes requests
///   again (a new object: 507 at once), which it did not when opening the
///   row meant creating a new active segment on the full disk;
/// - deletes of half of the objects each answer 200 (the tombstones go in
///   the space kept back for them, `space.reserve`), never hang;
/// - new objects are taken again once compaction has reclaimed the
///   deleted needles and the reserve is whole again;
/// - after another kill -9, every remaining object reads back identical
///   and every deleted one is absent.
#[test]
fn deletes_on_a_full_volume_free_space_for_new_writes() {
    let vol = SmallVolume::new(64 << 20);
    let data = vol.path().join("data");
    let args = [
        "--segment-size",
        "1MiB",
        "--flash-capacity",
        "8MiB",
        "--mover-rate",
        "64MiB",
    ];
    let mut s = Server::start(&data, &args);
    let mut acked: Vec<(String, u64, usize, String)> = Vec::new();
    let mut seq = 0u64;
    let status = loop {
        seq += 1;
        let len = 100_000 + (seq as usize * 7919) % 100_000;
        let name = format!("obj{seq}");
        let r = put(&s.addr, &format!("/full/{name}"), &content(seq, len));
        if r.status != 201 {
            break r.status;
        }
        let cookie = r.header("x-strata-cookie").expect("cookie").to_string();
        acked.push((name, seq, len, cookie));
        assert!(seq < 10_000, "a 64 MiB volume never filled");
    };
    assert_eq!(status, 507, "the fill ended with {status}");
    assert!(acked.len() > 100, "only {} objects fit", acked.len());
    let moved = std::fs::read_dir(data.join("disk/rows/00000000"))
        .map(|rd| {
            rd.flatten()
                .filter(|e| e.file_name().to_string_lossy().ends_with("-00000001.seg"))
                .count()
        })
        .unwrap_or(0);
    assert!(moved > 0, "the tier mover moved no segment to disk");

    s.kill9();
    let mut n = 0;
    while std::fs::write(vol.path().join(format!("filler{n}")), [1u8; 4096]).is_ok() {
        n += 1;
    }
    let _ = std::fs::write(vol.path().join("filler-last"), [1u8; 1]);
    s = Server::start(&data, &args);
    // The open removed what the killed process left in temporary files
    // (e.g. a tier move's copy): fill that too, through the node.
    let status = loop {
        seq += 1;
        let name = format!("obj{seq}");
        let r = put(&s.addr, &format!("/full/{name}"), &content(seq, 20_000));
        if r.status != 201 {
            break r.status;
        }
        let cookie = r.header("x-strata-cookie").expect("cookie").to_string();
        acked.push((name, seq, 20_000, cookie));
        assert!(seq < 20_000, "the volume never filled again");
    };
    assert_eq!(status, 507, "after a restart on the full volume");
    let mut n = 0;
    while std::fs::write(vol.path().join(format!("filler-b{n}")), [1u8; 4096]).is_ok() {
        n += 1;
    }
    assert!(free_bytes(vol.path()) < 8192);
    // The fillers stay: the space the deletes free is all there is.
    let mut deleted = std::collections::HashSet::new();
    for (name, _, _, cookie) in acked.iter().step_by(2) {
        let r = request(
            &s.addr,
            "DELETE",
            &format!("/full/{name}?cookie={cookie}"),
            &[],
            None,
        )
        .expect("DELETE on a full volume answered");
        assert!(
            r.status == 200 || r.status == 204,
            "DELETE {name} on a full volume: {} {}",
            r.status,
            r.text()
        );
        deleted.insert(name.clone());
    }
    // Compaction reclaims the deleted needles, the reserve is refilled,
    // and writes are taken again (a liveness bound, not a speed test).
    let mut taken = None;
    for attempt in 0..240 {
        let r = put(
            &s.addr,
            &format!("/full/after{attempt}"),
            &content(500_000 + attempt, 50_000),
        );
        if r.status == 201 {
            let cookie = r.header("x-strata-cookie").expect("cookie").to_string();
            taken = Some((format!("after{attempt}"), 500_000 + attempt, 50_000, cookie));
            break;
        }
        assert_eq!(r.status, 507, "a write after the deletes: {}", r.text());
        std::thread::sleep(std::time::Duration::from_millis(250));
    }
    let taken = taken.expect("no write was taken within a minute of deleting half the objects");
    acked.push(taken);

    s.kill9();
    s = Server::start(&data, &args);
    for (name, seed, len, cookie) in &acked {
        let g = get(&s.addr, &format!("/full/{name}?cookie={cookie}"));
        if deleted.contains(name) {
            assert_eq!(g.status, 404, "deleted {name} came back");
        } else {
            assert_eq!(g.status, 200, "{name} lost: {}", g.text());
            assert!(g.body == content(*seed, *len), "{name} corrupt");
        }
    }
}
