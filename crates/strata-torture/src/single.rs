//! Trials against a single node (a cluster of one).

use crate::damage::{files, flip_bit, written_end, Flip};
use crate::load::{self, Load, Mix, Model, Targets};
use crate::procs::{cut_summary, Power, Server};
use crate::trial::{Ctx, Trial};
use anyhow::Context;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::ffi::OsString;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

fn args(data: &Path, extra: &[&str]) -> Vec<OsString> {
    let mut a: Vec<OsString> = vec!["--data".into(), data.into()];
    for s in [
        "--listen",
        "127.0.0.1:0",
        "--threads",
        "2",
        "--ram-cache",
        "0",
    ] {
        a.push(s.into());
    }
    if !extra.contains(&"--segment-size") {
        a.extend(["--segment-size".into(), "256KiB".into()]);
    }
    a.extend(extra.iter().map(OsString::from));
    a
}

fn targets(s: &Server) -> Targets {
    Arc::new(RwLock::new(vec![s.addr.clone()]))
}

/// Starts a node on `data` and waits for it to take writes.
fn start(ctx: &Ctx, data: &Path, extra: &[&str], log: &Path) -> anyhow::Result<Server> {
    let s = Server::start(&ctx.env, args(data, extra), log)?;
    Server::wait_ready(&s.addr, Duration::from_secs(30))?;
    Ok(s)
}

/// Restarts after a fault: a node that does not come back is a failure.
fn restart(t: &mut Trial, s: &mut Server) -> bool {
    restart_as(t, s, false)
}

/// [`restart`] of a node whose volume may be full: a 507 to the probe
/// write counts as come back.
fn restart_full(t: &mut Trial, s: &mut Server) -> bool {
    restart_as(t, s, true)
}

fn restart_as(t: &mut Trial, s: &mut Server, full_ok: bool) -> bool {
    match s
        .restart()
        .and_then(|_| Server::wait_answering(&s.addr, Duration::from_secs(30), full_ok))
    {
        Ok(()) => true,
        Err(e) => {
            t.fail(format!("the node did not come back: {e:#}"));
            false
        }
    }
}

/// Kill -9 at a random moment of a load: the common shape of the crash
/// kinds. `extra`: server flags; `mix`: the load.
pub fn crash(
    ctx: &Ctx,
    t: &mut Trial,
    dir: &Path,
    extra: &[&str],
    mix: Mix,
    kill_ms: (u64, u64),
) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(t.seed);
    let data = dir.join("node");
    let log = dir.join("node.log");
    let mut s = start(ctx, &data, extra, &log)?;
    let model = Arc::new(Model::default());
    let tg = targets(&s);
    let kills = rng.random_range(1..=2);
    for round in 0..kills {
        let l = Load::start(
            model.clone(),
            tg.clone(),
            mix.clone(),
            ctx.workers,
            rng.random(),
            &format!("r{round}"),
            Duration::from_secs(10),
        );
        std::thread::sleep(Duration::from_millis(
            rng.random_range(kill_ms.0..=kill_ms.1),
        ));
        s.kill9();
        l.finish();
        if !restart(t, &mut s) {
            return t.absorb(&model, vec![]);
        }
        *tg.write().unwrap_or_else(|e| e.into_inner()) = vec![s.addr.clone()];
    }
    let unreadable = load::verify(&model, &tg, Duration::from_secs(5), rng.random());
    t.absorb(&model, unreadable)
}

/// Power cuts at random moments of a load: the node runs over the
/// power-loss model of its data directory (unsynced writes dropped, or
/// torn, in turn, unsynced directory changes undone); 2 or 3 cuts,
/// the node restarted over a fresh model between them and without it
/// after the last; after each restart every key is read back (no GET may
/// answer 500). `extra`: server flags; `mix`: the load; `cut_ms`: how
/// long each load runs before its cut.
pub fn power(
    ctx: &Ctx,
    t: &mut Trial,
    dir: &Path,
    extra: &[&str],
    mix: Mix,
    cut_ms: (u64, u64),
) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(t.seed);
    let data = dir.join("node");
    let log = dir.join("node.log");
    // The model's root must exist before the process starts.
    std::fs::create_dir_all(&data)?;
    let power = Power {
        root: data.clone(),
        trigger: dir.join("power-cut"),
        seed: rng.random(),
        tear: crate::procs::tears(t.seed),
    };
    let mut s = Server::start_powered(&ctx.env, args(&data, extra), &log, Some(power))?;
    Server::wait_ready(&s.addr, Duration::from_secs(30))?;
    let model = Arc::new(Model::default());
    model.strict_500.store(true, Ordering::Relaxed);
    let tg = targets(&s);
    let cuts = rng.random_range(2..=3);
    for round in 0..cuts {
        let l = Load::start(
            model.clone(),
            tg.clone(),
            mix.clone(),
            ctx.workers,
            rng.random(),
            &format!("r{round}"),
            Duration::from_secs(10),
        );
        let ms = rng.random_range(cut_ms.0..=cut_ms.1);
        std::thread::sleep(Duration::from_millis(ms));
        let cut = s.power_cut(Duration::from_secs(30));
        l.finish();
        if let Err(e) = cut {
            t.fail(format!("power cut {} of {cuts}: {e:#}", round + 1));
            return t.absorb(&model, vec![]);
        }
        t.power_cuts += 1;
        t.note(format!(
            "cut {} after {ms} ms: {}",
            round + 1,
            cut_summary(&log).unwrap_or_else(|| "no report in the log".into())
        ));
        if round + 1 == cuts {
            // The power back for good: no model any more.
            s.power = None;
        }
        if !restart(t, &mut s) {
            return t.absorb(&model, vec![]);
        }
        *tg.write().unwrap_or_else(|e| e.into_inner()) = vec![s.addr.clone()];
        let unreadable = load::verify(&model, &tg, Duration::from_secs(5), rng.random());
        if !unreadable.is_empty() {
            t.note(format!("read back after cut {}", round + 1));
            return t.absorb(&model, unreadable);
        }
    }
    t.absorb(&model, vec![])
}

/// Torn writes: a quiet load (every answer in), then a second load killed
/// at random; each segment that grew after the quiet point is cut at a
/// random offset past it, as if only part of the last writes had reached
/// the platter. What was acknowledged before the cut point must survive
/// whole; what came after may be lost but never served torn.
pub fn torn(ctx: &Ctx, t: &mut Trial, dir: &Path) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(t.seed);
    let data = dir.join("node");
    let log = dir.join("node.log");
    let mut s = start(ctx, &data, &[], &log)?;
    let model = Arc::new(Model::default());
    let tg = targets(&s);
    let mix = Mix::new(4, 3, 1, 2, 1);
    let l = Load::start(
        model.clone(),
        tg.clone(),
        mix.clone(),
        ctx.workers,
        rng.random(),
        "a",
        Duration::from_secs(10),
    );
    std::thread::sleep(Duration::from_millis(rng.random_range(100..400)));
    l.finish();
    let marks = model.marks();
    // Where each segment's needles end: a running store's file goes on
    // past them with prepared zeros (docs/store-format.md, "Prepared
    // space"), which a cut must not be spent on.
    let sizes: Vec<(std::path::PathBuf, u64)> = files(&data, ".seg")
        .into_iter()
        .filter_map(|p| Some((p.clone(), written_end(&p).ok()?)))
        .collect();
    let l = Load::start(
        model.clone(),
        tg.clone(),
        mix,
        ctx.workers,
        rng.random(),
        "b",
        Duration::from_secs(10),
    );
    std::thread::sleep(Duration::from_millis(rng.random_range(50..300)));
    s.kill9();
    l.finish();
    model.demote_since(&marks);
    let mut cut = 0;
    // Only the newest segment of each directory takes writes; an older one
    // was written and synced whole before the next was made (its last
    // batch acknowledged), so a crash cannot tear it.
    let mut newest: std::collections::BTreeMap<std::path::PathBuf, std::path::PathBuf> =
        Default::default();
    for p in files(&data, "-00000000.seg") {
        if let Some(dir) = p.parent() {
            let e = newest.entry(dir.to_path_buf()).or_insert_with(|| p.clone());
            if p > *e {
                *e = p;
            }
        }
    }
    for p in newest.into_values() {
        let Ok(now) = written_end(&p) else {
            continue;
        };
        // A segment made after the quiet point had its superblock
        // written and synced before it was named: keep the superblock.
        let before = sizes.iter().find(|(q, _)| *q == p).map_or(64, |(_, n)| *n);
        if now > before {
            let at = rng.random_range(before..now);
            let f = std::fs::OpenOptions::new().write(true).open(&p)?;
            let name = p
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .to_string();
            // Either the file cut there (an append the crash tore) or the
            // bytes from there zeroed, the file's length kept (a batch
            // torn in prepared space: the zeros written ahead of it show).
            if rng.random_bool(0.5) {
                f.set_len(at)?;
                t.note(format!("cut {name} from {now} to {at} bytes"));
            } else {
                std::os::unix::fs::FileExt::write_all_at(&f, &vec![0; (now - at) as usize], at)?;
                t.note(format!(
                    "zeroed {name} from byte {at} to {now}, its length kept"
                ));
            }
            cut += 1;
        }
    }
    if cut == 0 {
        t.note("no segment grew after the quiet point".into());
    }
    if !restart(t, &mut s) {
        return t.absorb(&model, vec![]);
    }
    *tg.write().unwrap_or_else(|e| e.into_inner()) = vec![s.addr.clone()];
    let unreadable = load::verify(&model, &tg, Duration::from_secs(5), rng.random());
    t.absorb(&model, unreadable)
}

/// A bit flipped in a stopped node's files. The node must start, must
/// never serve a wrong byte, and may lose only what the flip hit: one
/// object for a needle, nothing for a checkpoint (it is rebuilt from the
/// segment) nor for a superblock (its checksum corrects one bit).
pub fn bitflip(ctx: &Ctx, t: &mut Trial, dir: &Path, what: Flip) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(t.seed);
    let data = dir.join("node");
    let log = dir.join("node.log");
    // Small segments: several sealed ones, each with its checkpoint.
    let mut s = start(ctx, &data, &["--segment-size", "64KiB"], &log)?;
    let model = Arc::new(Model::default());
    let tg = targets(&s);
    let l = Load::start(
        model.clone(),
        tg.clone(),
        Mix::new(4, 2, 1, 2, 0),
        ctx.workers,
        rng.random(),
        "a",
        Duration::from_secs(10),
    );
    std::thread::sleep(Duration::from_millis(rng.random_range(200..500)));
    l.finish();
    s.kill9();
    let candidates: Vec<std::path::PathBuf> = match what {
        Flip::Checkpoint => files(&data, ".idx"),
        _ => files(&data, ".seg"),
    }
    .into_iter()
    .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.len() > 64 || !matches!(what, Flip::Needle)))
    .collect();
    if candidates.is_empty() {
        t.note(format!("no file to flip a {what:?} bit in"));
        t.skipped = true;
        return Ok(());
    }
    let f = &candidates[rng.random_range(0..candidates.len())];
    let Some((off, bit)) = flip_bit(f, what, &mut rng)? else {
        t.skipped = true;
        return Ok(());
    };
    t.note(format!(
        "flipped bit {bit} of byte {off} of {}",
        f.strip_prefix(&data).unwrap_or(f).display()
    ));
    if !restart(t, &mut s) {
        return t.absorb(&model, vec![]);
    }
    *tg.write().unwrap_or_else(|e| e.into_inner()) = vec![s.addr.clone()];
    let unreadable = load::verify(&model, &tg, Duration::from_secs(2), rng.random());
    let budget = match what {
        Flip::Needle => 1,
        Flip::Checkpoint | Flip::Superblock => 0,
    };
    t.absorb_with_budget(&model, unreadable, budget)
}

/// Disk full: the node's directory on a 64 MiB tmpfs, written until it
/// answers 507; then killed and started again (it must start), every
/// acknowledged object read back; then half of them deleted, and new
/// writes must be taken again once the space is reclaimed.
pub fn disk_full(ctx: &Ctx, t: &mut Trial, dir: &Path) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(t.seed);
    let mnt = dir.join("small-fs");
    std::fs::create_dir_all(&mnt)?;
    let st = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=64m", "tmpfs"])
        .arg(&mnt)
        .status()
        .context("running mount")?;
    anyhow::ensure!(
        st.success(),
        "mount -t tmpfs failed (disk-full trials need root)"
    );
    let _umount = Umount(mnt.clone());
    let data = mnt.join("node");
    let log = dir.join("node.log");
    let mut s = start(ctx, &data, &["--segment-size", "1MiB"], &log)?;
    let model = Arc::new(Model::default());
    let tg = targets(&s);
    let mix = Mix::new(6, 1, 0, 2, 1).sizes(8 << 10, 64 << 10);
    let l = Load::start(
        model.clone(),
        tg.clone(),
        mix,
        ctx.workers,
        rng.random(),
        "a",
        Duration::from_secs(10),
    );
    // Until full: most new writes refused.
    let start_t = Instant::now();
    let mut full = false;
    let mut seen = std::collections::BTreeMap::new();
    let mut refused = 0;
    while start_t.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(100));
        let probe = crate::http::request(
            &s.addr,
            "PUT",
            "/torture/full-probe",
            &[],
            &vec![7u8; 64 << 10],
            Duration::from_secs(10),
        );
        let what = match &probe {
            Ok(r) => format!("{} {}", r.status, String::from_utf8_lossy(&r.body).trim()),
            Err(e) => format!("no answer: {e}"),
        };
        *seen.entry(what).or_insert(0) += 1;
        if matches!(probe, Ok(ref r) if r.status == 507) {
            full = true;
            break;
        }
        refused = if matches!(probe, Ok(ref r) if r.status == 201) {
            0
        } else {
            refused + 1
        };
        if refused >= 20 {
            break; // full, but not saying so
        }
    }
    // A little more load while full, then the kill.
    std::thread::sleep(Duration::from_millis(rng.random_range(0..300)));
    s.kill9();
    l.finish();
    if !full {
        t.fail(format!(
            "a full 64 MiB filesystem did not answer 507; 64 KiB PUTs answered: {seen:?}"
        ));
    }
    t.note(format!(
        "{} PUTs acknowledged before full",
        model.acked_puts.load(Ordering::Relaxed)
    ));
    if !restart_full(t, &mut s) {
        return t.absorb(&model, vec![]);
    }
    *tg.write().unwrap_or_else(|e| e.into_inner()) = vec![s.addr.clone()];
    // Delete half of what exists; then new writes must be taken again.
    let names = model.key_names();
    for k in names.iter().filter(|_| rng.random_bool(0.5)) {
        match crate::http::request(
            &s.addr,
            "DELETE",
            &format!("/{}/{k}", load::BUCKET),
            &[],
            &[],
            Duration::from_secs(10),
        ) {
            Ok(r) if r.status == 204 || r.status == 404 => {
                model.record(k, load::Op::Del, load::Outcome::Acked)
            }
            Ok(r) => {
                model.record(k, load::Op::Del, load::Outcome::Unknown);
                t.fail(format!(
                    "DELETE on a full node answered {}: {}",
                    r.status,
                    String::from_utf8_lossy(&r.body).trim()
                ));
                break;
            }
            Err(e) => {
                model.record(k, load::Op::Del, load::Outcome::Unknown);
                t.fail(format!("DELETE on a full node: {e}"));
                break;
            }
        }
    }
    let mut taken = false;
    let start_t = Instant::now();
    while start_t.elapsed() < Duration::from_secs(20) {
        let key = format!("after-delete-{}", start_t.elapsed().as_millis());
        let ver = 1;
        let body = load::payload(&key, ver, 8 << 10);
        if let Ok(r) = crate::http::request(
            &s.addr,
            "PUT",
            &format!("/{}/{key}", load::BUCKET),
            &[],
            &body,
            Duration::from_secs(10),
        ) {
            if r.status == 201 {
                model.record(&key, load::Op::Put(ver), load::Outcome::Acked);
                taken = true;
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    if !taken {
        t.fail("after deleting half of the objects of a full node, new PUTs were still refused for 20 s (deleted space not reclaimed)".into());
    }
    // And once more across a restart.
    s.kill9();
    if !restart_full(t, &mut s) {
        return t.absorb(&model, vec![]);
    }
    *tg.write().unwrap_or_else(|e| e.into_inner()) = vec![s.addr.clone()];
    let unreadable = load::verify(&model, &tg, Duration::from_secs(5), rng.random());
    drop(s);
    t.absorb(&model, unreadable)
}

struct Umount(std::path::PathBuf);
impl Drop for Umount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// Slow and stalled clients: connections that send half a request head,
/// a body a byte at a time, or nothing, held open while a load runs and
/// the node is killed. The load must keep being answered and `/healthz`
/// too; then the usual check.
pub fn slow_clients(ctx: &Ctx, t: &mut Trial, dir: &Path) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(t.seed);
    let data = dir.join("node");
    let log = dir.join("node.log");
    let mut s = start(
        ctx,
        &data,
        &[
            "--header-timeout",
            "2",
            "--body-timeout",
            "3",
            "--write-timeout",
            "2",
        ],
        &log,
    )?;
    let model = Arc::new(Model::default());
    let tg = targets(&s);
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    // Clients that ask for a large object and never read the answer (issue
    // 34, finding 7): the server must drop them at --write-timeout. The
    // object is larger than what the sockets' buffers can take (a loopback
    // receive buffer may grow to 32 MiB).
    let big = vec![0x5au8; 64 << 20];
    let put_big = crate::http::request(
        &s.addr,
        "PUT",
        "/torture-big/never-read",
        &[],
        &big,
        Duration::from_secs(60),
    );
    if !matches!(put_big, Ok(ref r) if r.status == 201) {
        t.fail(format!(
            "the 64 MiB object for the never-reading clients was not stored: {:?}",
            put_big.map(|r| r.status)
        ));
    }
    let unread_since = Instant::now();
    let mut unread: Vec<std::net::TcpStream> = (0..rng.random_range(2..6))
        .filter_map(|_| {
            let mut c = std::net::TcpStream::connect(&s.addr).ok()?;
            c.write_all(
                format!(
                    "GET /torture-big/never-read HTTP/1.1\r\nHost: x\r\n{}\r\n",
                    crate::http::authorization_line()
                )
                .as_bytes(),
            )
            .ok()?;
            Some(c)
        })
        .collect();
    let n = rng.random_range(50..200);
    let mut slow = Vec::new();
    for i in 0..n {
        let (addr, stop) = (s.addr.clone(), stop.clone());
        slow.push(std::thread::spawn(move || slow_client(&addr, i % 4, &stop)));
    }
    std::thread::sleep(Duration::from_millis(200));
    let before = model.acked_puts.load(Ordering::Relaxed);
    let l = Load::start(
        model.clone(),
        tg.clone(),
        Mix::new(4, 2, 1, 2, 2),
        ctx.workers,
        rng.random(),
        "a",
        Duration::from_secs(10),
    );
    std::thread::sleep(Duration::from_millis(rng.random_range(300..900)));
    let h = crate::http::request(&s.addr, "GET", "/healthz", &[], &[], Duration::from_secs(5));
    if !matches!(h, Ok(ref r) if r.status == 200) {
        t.fail(format!(
            "/healthz not answered within 5 s with {n} slow clients connected"
        ));
    }
    if model.acked_puts.load(Ordering::Relaxed) == before {
        t.fail(format!(
            "no PUT acknowledged with {n} slow clients connected"
        ));
    }
    // Past the write timeout, each never-reading client was dropped with
    // only what the buffers took: read now, it ends short of the object.
    std::thread::sleep(Duration::from_secs(3).saturating_sub(unread_since.elapsed()));
    let mut taken = Vec::new();
    for c in unread.iter_mut() {
        let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
        let mut got = Vec::new();
        let _ = std::io::Read::read_to_end(c, &mut got);
        taken.push(got.len() >> 20);
        if got.len() >= big.len() {
            t.fail(format!(
                "a client that read nothing for 3 s still got all of a 64 MiB answer ({} bytes): not dropped at --write-timeout 2",
                got.len()
            ));
        }
    }
    t.note(format!(
        "{} never-reading GETs of 64 MiB dropped after taking {taken:?} MiB",
        unread.len()
    ));
    s.kill9();
    l.finish();
    stop.store(true, Ordering::SeqCst);
    for h in slow {
        let _ = h.join();
    }
    t.note(format!("{n} slow clients"));
    if !restart(t, &mut s) {
        return t.absorb(&model, vec![]);
    }
    *tg.write().unwrap_or_else(|e| e.into_inner()) = vec![s.addr.clone()];
    let unreadable = load::verify(&model, &tg, Duration::from_secs(5), rng.random());
    t.absorb(&model, unreadable)
}

fn slow_client(addr: &str, how: usize, stop: &std::sync::atomic::AtomicBool) {
    let Ok(mut c) = std::net::TcpStream::connect(addr) else {
        return;
    };
    let _ = c.set_write_timeout(Some(Duration::from_secs(1)));
    match how {
        0 => {
            let _ = c.write_all(b"PUT /torture/slow HTTP/1.1\r\nHost: x\r\nContent-Le");
        }
        1 => {
            // Authorised, so that the body is what the server waits for.
            let _ = c.write_all(
                format!(
                    "PUT /torture/slow-body HTTP/1.1\r\nHost: x\r\n{}Content-Length: 100000\r\n\r\n",
                    crate::http::authorization_line()
                )
                .as_bytes(),
            );
        }
        2 => {
            let _ = c.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n");
        }
        _ => {}
    }
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(100));
        if how == 1 && c.write_all(b"x").is_err() {
            return;
        }
    }
}
