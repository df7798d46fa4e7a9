//! Checksummed payloads, the model of what was acknowledged, the load
//! workers and the final check.
//!
//! Every payload is a pure function of (key, version): `STRT`, the version
//! (u64 LE), the data length (u32 LE), then bytes drawn from a generator
//! seeded by XXH3(key) ^ version. A body read back is compared byte for
//! byte with the payload of the version it claims, so a wrong, torn, stale
//! or foreign byte is always detected. Each key is written by one worker at
//! a time, so the model of each key is a sequence of operations, each
//! acknowledged (2xx) or of unknown effect (no answer, or an error status).

use crate::http::{self, Resp};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

/// The bucket every trial writes.
pub const BUCKET: &str = "torture";

/// The payload of `key` at `ver`, `len` data bytes.
pub fn payload(key: &str, ver: u64, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + len);
    out.extend_from_slice(b"STRT");
    out.extend_from_slice(&ver.to_le_bytes());
    out.extend_from_slice(&(len as u32).to_le_bytes());
    let mut x =
        xxhash_rust::xxh3::xxh3_64(key.as_bytes()) ^ ver.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x |= 1;
    let mut i = 0;
    while i < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = x.to_le_bytes();
        let n = (len - i).min(8);
        out.extend_from_slice(&b[..n]);
        i += n;
    }
    out
}

/// The version a body read for `key` holds, if it is exactly that
/// version's payload; else what is wrong with it.
pub fn decode(key: &str, body: &[u8]) -> Result<u64, String> {
    if body.len() < 16 || &body[..4] != b"STRT" {
        return Err(format!(
            "{} bytes that are no payload of the harness",
            body.len()
        ));
    }
    let ver = u64::from_le_bytes(body[4..12].try_into().unwrap_or_default());
    let len = u32::from_le_bytes(body[12..16].try_into().unwrap_or_default()) as usize;
    if body.len() != 16 + len {
        return Err(format!(
            "version {ver}: {} bytes where {} were written",
            body.len(),
            16 + len
        ));
    }
    let want = payload(key, ver, len);
    if let Some(at) = want.iter().zip(body).position(|(a, b)| a != b) {
        return Err(format!(
            "version {ver}: byte {at} of {} differs from what was written",
            body.len()
        ));
    }
    Ok(ver)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Put(u64),
    Del,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Acked,
    Unknown,
}

/// The operations on one key, in order.
#[derive(Default, Clone)]
pub struct KeyLog {
    pub ops: Vec<(Op, Outcome)>,
    pub next_ver: u64,
}

impl KeyLog {
    /// The states the key may be in now: `None` absent, `Some(v)` version
    /// v. The result of the last acknowledged operation, or of any later
    /// one of unknown effect.
    pub fn allowed(&self) -> Vec<Option<u64>> {
        let last = self.ops.iter().rposition(|(_, o)| *o == Outcome::Acked);
        let mut out = vec![];
        let start = match last {
            Some(i) => i,
            None => {
                out.push(None);
                0
            }
        };
        for (op, _) in &self.ops[start.min(self.ops.len())..] {
            out.push(match op {
                Op::Put(v) => Some(*v),
                Op::Del => None,
            });
        }
        out
    }

    /// Whether version `v` was ever attempted.
    pub fn attempted(&self, v: u64) -> bool {
        self.ops.iter().any(|(op, _)| *op == Op::Put(v))
    }

    /// The latest state that must hold (described), for messages.
    pub fn describe(&self) -> String {
        let a: Vec<String> = self
            .allowed()
            .iter()
            .map(|s| match s {
                None => "absent".to_string(),
                Some(v) => format!("v{v}"),
            })
            .collect();
        a.join(" or ")
    }
}

/// What was done and acknowledged, and what went wrong.
#[derive(Default)]
pub struct Model {
    pub keys: Mutex<HashMap<String, KeyLog>>,
    /// Wrong bytes served (never allowed).
    pub wrong: Mutex<Vec<String>>,
    /// Acknowledged writes or deletes not read back.
    pub lost: Mutex<Vec<String>>,
    pub acked_puts: AtomicU64,
    pub acked_deletes: AtomicU64,
    pub unknown: AtomicU64,
    pub reads: AtomicU64,
    pub read_errors: AtomicU64,
    /// When set, a GET answering 500 in the read-back after a fault (not
    /// under load, where a process losing its power may fail a read) is
    /// a failure (the power kinds): a restarted node must serve what it
    /// holds, or answer that it has not got it.
    pub strict_500: AtomicBool,
    /// The GETs that answered 500 in a strict read-back.
    pub errors_500: Mutex<Vec<String>>,
}

impl Model {
    pub fn record(&self, key: &str, op: Op, o: Outcome) {
        match (op, o) {
            (Op::Put(_), Outcome::Acked) => self.acked_puts.fetch_add(1, Ordering::Relaxed),
            (Op::Del, Outcome::Acked) => self.acked_deletes.fetch_add(1, Ordering::Relaxed),
            _ => self.unknown.fetch_add(1, Ordering::Relaxed),
        };
        let mut k = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        k.entry(key.to_string()).or_default().ops.push((op, o));
    }

    pub fn next_ver(&self, key: &str) -> u64 {
        let mut k = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        let e = k.entry(key.to_string()).or_default();
        e.next_ver += 1;
        e.next_ver
    }

    pub fn log(&self, key: &str) -> KeyLog {
        let k = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        k.get(key).cloned().unwrap_or_default()
    }

    pub fn wrong(&self, s: String) {
        self.wrong.lock().unwrap_or_else(|e| e.into_inner()).push(s);
    }

    pub fn lost(&self, s: String) {
        self.lost.lock().unwrap_or_else(|e| e.into_inner()).push(s);
    }

    /// Marks, per key, how many operations it has (see `demote_since`).
    pub fn marks(&self) -> HashMap<String, usize> {
        let k = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        k.iter().map(|(n, l)| (n.clone(), l.ops.len())).collect()
    }

    /// Operations after `marks` become of unknown effect.
    pub fn demote_since(&self, marks: &HashMap<String, usize>) {
        let mut k = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        for (n, l) in k.iter_mut() {
            let from = marks.get(n).copied().unwrap_or(0);
            for o in l.ops.iter_mut().skip(from) {
                o.1 = Outcome::Unknown;
            }
        }
    }

    pub fn key_names(&self) -> Vec<String> {
        let k = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<String> = k.keys().cloned().collect();
        v.sort();
        v
    }
}

/// The operation mix of a load (weights).
#[derive(Clone, Debug)]
pub struct Mix {
    pub put: u32,
    pub overwrite: u32,
    pub delete: u32,
    pub batch: u32,
    pub get: u32,
    /// Data bytes of an object: uniform in this range.
    pub sizes: (usize, usize),
}

impl Mix {
    pub fn new(put: u32, overwrite: u32, delete: u32, batch: u32, get: u32) -> Mix {
        Mix {
            put,
            overwrite,
            delete,
            batch,
            get,
            sizes: (64, 8 << 10),
        }
    }
    pub fn sizes(mut self, lo: usize, hi: usize) -> Mix {
        self.sizes = (lo, hi);
        self
    }
}

/// Where the workers send requests (the harness swaps addresses when it
/// restarts a node elsewhere).
pub type Targets = Arc<RwLock<Vec<String>>>;

pub struct Load {
    pub stop: Arc<AtomicBool>,
    handles: Vec<std::thread::JoinHandle<()>>,
}

impl Load {
    /// Starts `workers` threads; worker w owns keys `w{w}-{n}`.
    pub fn start(
        model: Arc<Model>,
        targets: Targets,
        mix: Mix,
        workers: usize,
        seed: u64,
        prefix: &str,
        timeout: Duration,
    ) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let handles = (0..workers)
            .map(|w| {
                let (model, targets, mix, stop) =
                    (model.clone(), targets.clone(), mix.clone(), stop.clone());
                let prefix = format!("{prefix}w{w}-");
                std::thread::spawn(move || {
                    worker(
                        &model,
                        &targets,
                        &mix,
                        &stop,
                        seed ^ ((w as u64 + 1) * 7919),
                        &prefix,
                        timeout,
                    )
                })
            })
            .collect();
        Load { stop, handles }
    }

    /// Stops the workers once their requests in flight end.
    pub fn finish(self) {
        self.stop.store(true, Ordering::SeqCst);
        for h in self.handles {
            let _ = h.join();
        }
    }
}

fn pick(targets: &Targets, rng: &mut StdRng) -> Option<String> {
    let t = targets.read().unwrap_or_else(|e| e.into_inner());
    if t.is_empty() {
        return None;
    }
    Some(t[rng.random_range(0..t.len())].clone())
}

/// Checks a read of `key` against its model: wrong bytes, or a state the
/// model does not allow. `Ok(true)` when the answer was a definite state.
pub fn check_read(model: &Model, key: &str, r: &Resp, log: &KeyLog, when: &str) -> bool {
    match r.status {
        200 => match decode(key, &r.body) {
            Err(e) => {
                model.wrong(format!("{when}: GET {key} served {e}"));
                true
            }
            Ok(v) => {
                if !log.attempted(v) {
                    model.wrong(format!(
                        "{when}: GET {key} served version {v}, never written"
                    ));
                } else if !log.allowed().contains(&Some(v)) {
                    model.lost(format!(
                        "{when}: GET {key} served v{v}, must be {}",
                        log.describe()
                    ));
                }
                true
            }
        },
        404 => {
            if !log.allowed().contains(&None) {
                model.lost(format!(
                    "{when}: GET {key} is 404, must be {}",
                    log.describe()
                ));
            }
            true
        }
        500 => {
            if when == AFTER && model.strict_500.load(Ordering::Relaxed) {
                let body = String::from_utf8_lossy(&r.body);
                let body: String = body.trim().chars().take(300).collect();
                let head = format!("{when}: GET {key} answered 500");
                let mut v = model.errors_500.lock().unwrap_or_else(|e| e.into_inner());
                // Once a key (the read-back retries it).
                if !v.iter().any(|e| e.starts_with(&head)) {
                    v.push(format!("{head}: {body}"));
                }
            }
            false
        }
        _ => false,
    }
}

/// The `when` of [`check_read`] in the read-back after a trial's fault.
const AFTER: &str = "after the trial";

fn path(key: &str) -> String {
    format!("/{BUCKET}/{key}")
}

fn worker(
    model: &Model,
    targets: &Targets,
    mix: &Mix,
    stop: &AtomicBool,
    seed: u64,
    prefix: &str,
    timeout: Duration,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    // Keys this worker wrote (and may now overwrite, delete or read).
    let mut mine: Vec<String> = Vec::new();
    let mut n = 0u64;
    let total = mix.put + mix.overwrite + mix.delete + mix.batch + mix.get;
    while !stop.load(Ordering::SeqCst) {
        let Some(addr) = pick(targets, &mut rng) else {
            std::thread::sleep(Duration::from_millis(20));
            continue;
        };
        let mut r = rng.random_range(0..total.max(1));
        let choice = if r < mix.put || mine.is_empty() {
            0
        } else {
            r -= mix.put;
            if r < mix.overwrite {
                1
            } else if r < mix.overwrite + mix.delete {
                2
            } else if r < mix.overwrite + mix.delete + mix.batch {
                3
            } else {
                4
            }
        };
        let sizes = mix.sizes;
        let size = |rng: &mut StdRng| rng.random_range(sizes.0..=sizes.1);
        match choice {
            0 | 1 => {
                let key = if choice == 0 {
                    n += 1;
                    let k = format!("{prefix}{n}");
                    mine.push(k.clone());
                    k
                } else {
                    mine[rng.random_range(0..mine.len())].clone()
                };
                let ver = model.next_ver(&key);
                let body = payload(&key, ver, size(&mut rng));
                let res = http::request(&addr, "PUT", &path(&key), &[], &body, timeout);
                let o = match res {
                    Ok(r) if r.status == 201 || r.status == 200 => Outcome::Acked,
                    _ => Outcome::Unknown,
                };
                model.record(&key, Op::Put(ver), o);
            }
            2 => {
                let key = mine[rng.random_range(0..mine.len())].clone();
                let log = model.log(&key);
                let res = http::request(&addr, "DELETE", &path(&key), &[], &[], timeout);
                match res {
                    Ok(r) if r.status == 204 || r.status == 200 => {
                        model.record(&key, Op::Del, Outcome::Acked)
                    }
                    Ok(r) if r.status == 404 => {
                        if !log.allowed().contains(&None) {
                            model.lost(format!(
                                "DELETE {key} answered 404 but it must be {}",
                                log.describe()
                            ));
                        }
                        model.record(&key, Op::Del, Outcome::Acked)
                    }
                    _ => model.record(&key, Op::Del, Outcome::Unknown),
                }
            }
            3 => {
                let items = rng.random_range(2..=8);
                let mut body = Vec::new();
                let mut done = Vec::new();
                for _ in 0..items {
                    let key = if rng.random_bool(0.6) || mine.is_empty() {
                        n += 1;
                        let k = format!("{prefix}{n}");
                        mine.push(k.clone());
                        k
                    } else {
                        mine[rng.random_range(0..mine.len())].clone()
                    };
                    if done.iter().any(|(k, _)| *k == key) {
                        continue;
                    }
                    let ver = model.next_ver(&key);
                    let data = payload(&key, ver, size(&mut rng));
                    body.extend_from_slice(&(key.len() as u16).to_le_bytes());
                    body.extend_from_slice(&(data.len() as u32).to_le_bytes());
                    body.extend_from_slice(key.as_bytes());
                    body.extend_from_slice(&data);
                    done.push((key, ver));
                }
                let res = http::request(&addr, "POST", &format!("/{BUCKET}"), &[], &body, timeout);
                let o = match res {
                    Ok(r) if r.status == 201 || r.status == 200 => Outcome::Acked,
                    _ => Outcome::Unknown,
                };
                for (k, v) in done {
                    model.record(&k, Op::Put(v), o);
                }
            }
            _ => {
                let key = mine[rng.random_range(0..mine.len())].clone();
                let log = model.log(&key);
                model.reads.fetch_add(1, Ordering::Relaxed);
                match http::request(&addr, "GET", &path(&key), &[], &[], timeout) {
                    Ok(r) => {
                        if !check_read(model, &key, &r, &log, "under load") {
                            model.read_errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    Err(_) => {
                        model.read_errors.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
    }
}

/// Reads `key` with `get` until an answer passes [`check_read`] (returned)
/// or `deadline` passes (then the last failure goes on `unreadable` and
/// None is returned); `get` answers None when there is nothing to read
/// from. Shared by the native and the S3 read-back after a trial.
pub fn read_back(
    model: &Model,
    key: &str,
    deadline: std::time::Instant,
    unreadable: &mut Vec<String>,
    mut get: impl FnMut() -> Option<std::io::Result<Resp>>,
) -> Option<Resp> {
    let log = model.log(key);
    loop {
        let Some(res) = get() else {
            unreadable.push(format!("{key}: no node to read from"));
            return None;
        };
        model.reads.fetch_add(1, Ordering::Relaxed);
        let last = match res {
            Ok(r) => {
                if check_read(model, key, &r, &log, AFTER) {
                    return Some(r);
                }
                format!(
                    "status {}: {}",
                    r.status,
                    String::from_utf8_lossy(&r.body).trim()
                )
            }
            Err(e) => e.to_string(),
        };
        if std::time::Instant::now() > deadline {
            unreadable.push(format!("{key} ({}): {last}", log.describe()));
            return None;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Reads every key of the model back (retrying errors, which a node still
/// recovering may answer, for up to `patience`) and checks each against
/// its model. Returns how many keys stayed unreadable (errors only).
pub fn verify(model: &Model, targets: &Targets, patience: Duration, seed: u64) -> Vec<String> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut unreadable = Vec::new();
    let deadline = std::time::Instant::now() + patience;
    for key in model.key_names() {
        read_back(model, &key, deadline, &mut unreadable, || {
            let addr = pick(targets, &mut rng)?;
            Some(http::request(
                &addr,
                "GET",
                &path(&key),
                &[],
                &[],
                Duration::from_secs(10),
            ))
        });
    }
    unreadable
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payload_decodes_to_its_version_and_any_change_is_caught() {
        let p = payload("aw0-7", 3, 1000);
        assert_eq!(p.len(), 1016);
        assert_eq!(decode("aw0-7", &p), Ok(3));
        // Another key's payload of the same version and length.
        assert!(decode("aw0-8", &p).is_err());
        for at in [0, 5, 13, 16, 500, 1015] {
            let mut q = p.clone();
            q[at] ^= 0x10;
            assert!(decode("aw0-7", &q).is_err(), "byte {at} flipped");
        }
        assert!(decode("aw0-7", &p[..1015]).is_err());
        assert!(decode("aw0-7", b"").is_err());
    }

    #[test]
    fn a_key_may_be_its_last_acknowledged_state_or_any_later_unknown_one() {
        let mut l = KeyLog::default();
        // Never acknowledged: absent, or what an unknown write made it.
        assert_eq!(l.allowed(), [None]);
        l.ops.push((Op::Put(1), Outcome::Unknown));
        assert_eq!(l.allowed(), [None, Some(1)]);
        l.ops.push((Op::Put(2), Outcome::Acked));
        assert_eq!(l.allowed(), [Some(2)]);
        l.ops.push((Op::Del, Outcome::Unknown));
        l.ops.push((Op::Put(3), Outcome::Unknown));
        assert_eq!(l.allowed(), [Some(2), None, Some(3)]);
        l.ops.push((Op::Del, Outcome::Acked));
        assert_eq!(l.allowed(), [None]);
        assert!(l.attempted(1) && !l.attempted(4));
    }

    #[test]
    fn a_read_the_model_forbids_is_lost_and_a_foreign_body_is_wrong() {
        let m = Model::default();
        m.record("k", Op::Put(1), Outcome::Acked);
        m.record("k", Op::Put(2), Outcome::Acked);
        let log = m.log("k");
        let ok = |status, body: Vec<u8>| Resp {
            status,
            headers: vec![],
            body,
        };
        assert!(check_read(
            &m,
            "k",
            &ok(200, payload("k", 2, 10)),
            &log,
            "t"
        ));
        assert!(m.lost.lock().unwrap().is_empty() && m.wrong.lock().unwrap().is_empty());
        // An older version, then a 404: both lost.
        check_read(&m, "k", &ok(200, payload("k", 1, 10)), &log, "t");
        check_read(&m, "k", &ok(404, vec![]), &log, "t");
        assert_eq!(m.lost.lock().unwrap().len(), 2);
        // A version never written, and bytes that are no payload: wrong.
        check_read(&m, "k", &ok(200, payload("k", 9, 10)), &log, "t");
        check_read(&m, "k", &ok(200, b"garbage".to_vec()), &log, "t");
        assert_eq!(m.wrong.lock().unwrap().len(), 2);
        // A 503 is no state at all.
        assert!(!check_read(&m, "k", &ok(503, vec![]), &log, "t"));
    }
}
