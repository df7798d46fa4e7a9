//! Trials through the S3 API (`strata server --s3-listen`, a cluster of
//! one with its embedded metadata service): PutObject, DeleteObject,
//! DeleteObjects, multipart uploads (CreateMultipartUpload, UploadPart,
//! CompleteMultipartUpload) and GetObject, every request signed with
//! SigV4 ([`crate::sigv4`]). After the fault every key is read back with
//! GetObject and checked against the model, and ListObjectsV2 (paged) is
//! compared with the acknowledged set: no acknowledged object missing, no
//! acknowledged delete listed, no name the harness never wrote, no name
//! twice, names in order.

use crate::http::Resp;
use crate::load::{self, KeyLog, Model, Op, Outcome};
use crate::procs::{cut_summary, listen_port, Power, Server};
use crate::sigv4::Signer;
use crate::trial::{Ctx, Trial};
use anyhow::{bail, Context};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::HashMap;
use std::ffi::OsString;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

/// The bucket of the S3 trials.
const BUCKET: &str = "torture-s3";
/// The smallest part but the last (S3's 5 MiB, which Strata enforces).
const MIN_PART: usize = 5 << 20;

/// Multipart uploads acknowledged (CompleteMultipartUpload answered 200)
/// in the trial running (trials run one after the other).
static MULTIPART_ACKED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// The S3 faults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// kill -9 during PutObject (new names and overwrites).
    Put,
    /// kill -9 during multipart uploads (UploadPart, CompleteMultipartUpload).
    Multipart,
    /// kill -9 during DeleteObjects (and DeleteObject).
    Delete,
    /// A bit flipped in the listing index (`DATA/listing.redb`) of a
    /// stopped node.
    FlipListing,
    /// Power cuts (the node over the power-loss model) during PutObject,
    /// DeleteObject(s) and multipart uploads.
    Power,
}

/// The faults of the S3 trials on a multi-node cluster.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterFault {
    /// kill -9 of a member under PutObject, DeleteObject(s) and GetObject.
    Kill,
    /// The same load with multipart uploads, a member killed mid-upload.
    Multipart,
    /// A member cut from the others and the metadata service, healed.
    Partition,
    /// A member killed for good under load: detection, recovery (rows and
    /// their listing index copied to new replicas) under the load.
    Loss,
}

/// Every text between `<tag>` and `</tag>` in `xml`, XML-unescaped.
fn tags(xml: &str, tag: &str) -> Vec<String> {
    let (open, close) = (format!("<{tag}>"), format!("</{tag}>"));
    let mut out = Vec::new();
    let mut rest = xml;
    while let Some(a) = rest.find(&open) {
        let after = &rest[a + open.len()..];
        let Some(b) = after.find(&close) else { break };
        out.push(unescape(&after[..b]));
        rest = &after[b + close.len()..];
    }
    out
}

fn unescape(s: &str) -> String {
    s.replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&amp;", "&")
}

/// The operation mix of an S3 load (weights).
#[derive(Clone, Copy)]
struct Mix {
    put: u32,
    overwrite: u32,
    delete: u32,
    delete_objects: u32,
    multipart: u32,
    get: u32,
}

fn key_path(key: &str) -> String {
    format!("/{BUCKET}/{key}")
}

/// A key this worker owns, new or old.
fn choose(
    rng: &mut StdRng,
    mine: &mut Vec<String>,
    n: &mut u64,
    prefix: &str,
    new: bool,
) -> String {
    if new || mine.is_empty() {
        *n += 1;
        let k = format!("{prefix}{n}");
        mine.push(k.clone());
        k
    } else {
        mine[rng.random_range(0..mine.len())].clone()
    }
}

/// The state of a key read back: `Some(len)` present with that body
/// length, `None` absent.
type ReadState = Option<usize>;

struct Worker<'a> {
    model: &'a Model,
    /// The S3 endpoints to send requests to (one at random each time).
    addrs: &'a RwLock<Vec<String>>,
    signer: &'a Signer,
}

impl Worker<'_> {
    fn addr(&self) -> String {
        let a = self.addrs.read().unwrap_or_else(|e| e.into_inner());
        if a.is_empty() {
            return String::from("127.0.0.1:1");
        }
        a[rand::rng().random_range(0..a.len())].clone()
    }

    fn req(
        &self,
        method: &str,
        path: &str,
        query: &[(&str, &str)],
        extra: &[(&str, String)],
        body: &[u8],
    ) -> std::io::Result<Resp> {
        self.signer
            .request(&self.addr(), method, path, query, extra, body)
    }

    fn put(&self, key: &str, ver: u64, len: usize) {
        let body = load::payload(key, ver, len);
        let o = match self.req("PUT", &key_path(key), &[], &[], &body) {
            Ok(r) if r.status == 200 => Outcome::Acked,
            _ => Outcome::Unknown,
        };
        self.model.record(key, Op::Put(ver), o);
    }

    fn delete(&self, key: &str) {
        let o = match self.req("DELETE", &key_path(key), &[], &[], &[]) {
            Ok(r) if r.status == 204 || r.status == 200 => Outcome::Acked,
            _ => Outcome::Unknown,
        };
        self.model.record(key, Op::Del, o);
    }

    /// DeleteObjects of `keys`: each key the answer lists as deleted is
    /// acknowledged; the others (an error, no answer) are of unknown effect.
    fn delete_objects(&self, keys: &[String]) {
        use base64::Engine;
        use md5::Md5;
        let mut xml = String::from("<Delete>");
        for k in keys {
            xml.push_str(&format!("<Object><Key>{k}</Key></Object>"));
        }
        xml.push_str("</Delete>");
        let md5 = base64::engine::general_purpose::STANDARD
            .encode(<Md5 as md5::Digest>::digest(xml.as_bytes()));
        let res = self.req(
            "POST",
            &format!("/{BUCKET}"),
            &[("delete", "")],
            &[("content-md5", md5)],
            xml.as_bytes(),
        );
        let deleted: Vec<String> = match res {
            Ok(r) if r.status == 200 => {
                let body = String::from_utf8_lossy(&r.body).to_string();
                body.split("<Deleted>")
                    .skip(1)
                    .filter_map(|d| {
                        tags(d.split("</Deleted>").next()?, "Key")
                            .into_iter()
                            .next()
                    })
                    .collect()
            }
            _ => Vec::new(),
        };
        for k in keys {
            let o = if deleted.contains(k) {
                Outcome::Acked
            } else {
                Outcome::Unknown
            };
            self.model.record(k, Op::Del, o);
        }
    }

    /// A multipart upload of `key` at `ver`: parts of 5 MiB and a last,
    /// smaller one. Only a CompleteMultipartUpload sent makes an
    /// operation of the key (acknowledged on a 200 without an error in
    /// its body); an upload cut before it leaves the key as it was.
    fn multipart(&self, key: &str, ver: u64, rng: &mut StdRng) {
        let full = rng.random_range(1..=2usize);
        let len = full * MIN_PART + rng.random_range(1..256 << 10) - 16;
        let body = load::payload(key, ver, len);
        let p = key_path(key);
        let Ok(r) = self.req("POST", &p, &[("uploads", "")], &[], &[]) else {
            return;
        };
        let xml = String::from_utf8_lossy(&r.body).to_string();
        let Some(id) = tags(&xml, "UploadId")
            .into_iter()
            .next()
            .filter(|_| r.status == 200)
        else {
            return;
        };
        let mut etags = Vec::new();
        for (i, chunk) in body.chunks(MIN_PART).enumerate() {
            let n = (i + 1).to_string();
            match self.req(
                "PUT",
                &p,
                &[("partNumber", &n), ("uploadId", &id)],
                &[],
                chunk,
            ) {
                Ok(r) if r.status == 200 => match r.header("etag") {
                    Some(e) => etags.push(e.to_string()),
                    None => return,
                },
                _ => return,
            }
        }
        let mut done = String::from("<CompleteMultipartUpload>");
        for (i, e) in etags.iter().enumerate() {
            done.push_str(&format!(
                "<Part><PartNumber>{}</PartNumber><ETag>{}</ETag></Part>",
                i + 1,
                e.replace('"', "&quot;")
            ));
        }
        done.push_str("</CompleteMultipartUpload>");
        let o = match self.req("POST", &p, &[("uploadId", &id)], &[], done.as_bytes()) {
            Ok(r) if r.status == 200 && !String::from_utf8_lossy(&r.body).contains("<Error>") => {
                Outcome::Acked
            }
            _ => Outcome::Unknown,
        };
        if o == Outcome::Acked {
            MULTIPART_ACKED.fetch_add(1, Ordering::Relaxed);
        }
        self.model.record(key, Op::Put(ver), o);
    }

    fn get(&self, key: &str) {
        let log = self.model.log(key);
        self.model.reads.fetch_add(1, Ordering::Relaxed);
        if let Ok(r) = self.req("GET", &key_path(key), &[], &[], &[]) {
            if !load::check_read(self.model, key, &r, &log, "under load") {
                self.model.read_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    fn run(&self, mix: Mix, stop: &AtomicBool, seed: u64, prefix: &str) {
        let mut rng = StdRng::seed_from_u64(seed);
        let mut mine: Vec<String> = Vec::new();
        let mut n = 0u64;
        let total =
            mix.put + mix.overwrite + mix.delete + mix.delete_objects + mix.multipart + mix.get;
        while !stop.load(Ordering::SeqCst) {
            let mut r = rng.random_range(0..total.max(1));
            let mut pick = |w: u32| {
                let hit = r < w;
                r = r.saturating_sub(w);
                hit
            };
            if pick(mix.put) || mine.is_empty() {
                let key = choose(&mut rng, &mut mine, &mut n, prefix, true);
                let ver = self.model.next_ver(&key);
                self.put(&key, ver, rng.random_range(64..=16 << 10));
            } else if pick(mix.overwrite) {
                let key = choose(&mut rng, &mut mine, &mut n, prefix, false);
                let ver = self.model.next_ver(&key);
                self.put(&key, ver, rng.random_range(64..=16 << 10));
            } else if pick(mix.delete) {
                let key = choose(&mut rng, &mut mine, &mut n, prefix, false);
                self.delete(&key);
            } else if pick(mix.delete_objects) {
                let mut keys: Vec<String> = Vec::new();
                for _ in 0..rng.random_range(2..=12) {
                    let k = choose(&mut rng, &mut mine, &mut n, prefix, false);
                    if !keys.contains(&k) {
                        keys.push(k);
                    }
                }
                self.delete_objects(&keys);
            } else if pick(mix.multipart) {
                let new = rng.random_bool(0.5);
                let key = choose(&mut rng, &mut mine, &mut n, prefix, new);
                let ver = self.model.next_ver(&key);
                self.multipart(&key, ver, &mut rng);
            } else {
                let key = choose(&mut rng, &mut mine, &mut n, prefix, false);
                self.get(&key);
            }
        }
    }
}

/// The node of an S3 trial: `strata server --meta-listen --s3-listen`.
struct Node {
    server: Server,
    s3: String,
}

fn start_node(ctx: &Ctx, dir: &Path, power: Option<Power>) -> anyhow::Result<Node> {
    let mut last = None;
    // A port found free may be taken before the node binds it: try others.
    for _ in 0..3 {
        let (meta, native, s3) = (listen_port()?, listen_port()?, listen_port()?);
        let data = dir.join("node");
        let args: Vec<OsString> = vec![
            "--meta-listen".into(),
            format!("127.0.0.1:{meta}").into(),
            "--listen".into(),
            format!("127.0.0.1:{native}").into(),
            "--s3-listen".into(),
            format!("127.0.0.1:{s3}").into(),
            "--data".into(),
            data.into(),
            "--threads".into(),
            "2".into(),
            "--ram-cache".into(),
            "0".into(),
            "--segment-size".into(),
            "1MiB".into(),
        ];
        match Server::start_powered(&ctx.env, args, &dir.join("node.log"), power.clone()) {
            Ok(server) => {
                Server::wait_ready(&server.addr, Duration::from_secs(30))?;
                return Ok(Node {
                    server,
                    s3: format!("127.0.0.1:{s3}"),
                });
            }
            Err(e) if format!("{e:#}").contains("Address already in use") => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(last.unwrap_or_else(|| anyhow::anyhow!("the S3 node did not start")))
}

/// Waits until the S3 listener answers a signed request (any answer).
fn wait_s3(signer: &Signer, s3: &str) -> anyhow::Result<()> {
    let start = std::time::Instant::now();
    loop {
        match signer.request(s3, "GET", "/", &[], &[], &[]) {
            Ok(r) if r.status == 200 => return Ok(()),
            Ok(r) if start.elapsed() > Duration::from_secs(30) => bail!(
                "ListBuckets on {s3} answers {}: {}",
                r.status,
                String::from_utf8_lossy(&r.body)
            ),
            Err(e) if start.elapsed() > Duration::from_secs(30) => {
                bail!("ListBuckets on {s3}: no answer: {e}")
            }
            _ => std::thread::sleep(Duration::from_millis(100)),
        }
    }
}

fn restart(t: &mut Trial, ctx: &Ctx, n: &mut Node) -> bool {
    let res = n
        .server
        .restart()
        .and_then(|_| Server::wait_ready(&n.server.addr, Duration::from_secs(30)))
        .and_then(|_| wait_s3(&ctx.s3_signer(), &n.s3));
    match res {
        Ok(()) => true,
        Err(e) => {
            t.fail(format!("the node did not come back: {e:#}"));
            false
        }
    }
}

/// An S3 load running in the background.
struct S3Load {
    stop: Arc<AtomicBool>,
    handles: Vec<std::thread::JoinHandle<()>>,
}

impl S3Load {
    /// Starts `ctx.workers` threads of `mix` against `addrs` (worker w
    /// owns keys `PREFIXw{w}-N`).
    fn start(
        ctx: &Ctx,
        model: &Arc<Model>,
        addrs: &Arc<RwLock<Vec<String>>>,
        mix: Mix,
        seed: u64,
        prefix: &str,
    ) -> S3Load {
        let stop = Arc::new(AtomicBool::new(false));
        let mut signer = ctx.s3_signer();
        signer.timeout = Duration::from_secs(15);
        let handles = (0..ctx.workers)
            .map(|w| {
                let (model, addrs, signer, stop) =
                    (model.clone(), addrs.clone(), signer.clone(), stop.clone());
                let prefix = format!("{prefix}w{w}-");
                std::thread::spawn(move || {
                    let wk = Worker {
                        model: &model,
                        addrs: &addrs,
                        signer: &signer,
                    };
                    wk.run(mix, &stop, seed ^ ((w as u64 + 1) * 7919), &prefix)
                })
            })
            .collect();
        S3Load { stop, handles }
    }

    /// Stops the workers once their requests in flight end.
    fn finish(self) {
        self.stop.store(true, Ordering::SeqCst);
        for h in self.handles {
            let _ = h.join();
        }
    }
}

/// When a load ends.
enum End {
    /// kill -9 of the node after this many milliseconds, requests in flight.
    Kill(u64),
    /// Every request answered after this many milliseconds, then kill -9.
    Quiet(u64),
}

/// Runs an S3 load of `mix` on the node, then kills it as `end` says.
fn load_then_kill(
    ctx: &Ctx,
    model: &Arc<Model>,
    node: &mut Node,
    mix: Mix,
    end: End,
    seed: u64,
    prefix: &str,
) {
    let addrs = Arc::new(RwLock::new(vec![node.s3.clone()]));
    let l = S3Load::start(ctx, model, &addrs, mix, seed, prefix);
    let (ms, quiet) = match end {
        End::Kill(ms) => (ms, false),
        End::Quiet(ms) => (ms, true),
    };
    std::thread::sleep(Duration::from_millis(ms));
    if quiet {
        l.finish();
        node.server.kill9();
    } else {
        node.server.kill9();
        l.finish();
    }
}

/// Reads every key back with GetObject (retrying errors for a while),
/// checking each against the model; returns each key's state and the
/// keys that stayed unreadable.
fn verify(
    model: &Model,
    signer: &Signer,
    s3: &str,
    patience: Duration,
) -> (HashMap<String, ReadState>, Vec<String>) {
    let deadline = std::time::Instant::now() + patience;
    let mut states = HashMap::new();
    let mut unreadable = Vec::new();
    for key in model.key_names() {
        let got = load::read_back(model, &key, deadline, &mut unreadable, || {
            Some(signer.request(s3, "GET", &key_path(&key), &[], &[], &[]))
        });
        if let Some(r) = got {
            states.insert(key.clone(), (r.status == 200).then_some(r.body.len()));
        }
    }
    (states, unreadable)
}

/// Every (name, size) ListObjectsV2 lists in the bucket, page by page.
fn list_all(signer: &Signer, s3: &str, page: usize) -> anyhow::Result<Vec<(String, u64)>> {
    let mut out = Vec::new();
    let mut token: Option<String> = None;
    let max = page.to_string();
    for _ in 0..100_000 {
        let mut q: Vec<(&str, &str)> = vec![("list-type", "2"), ("max-keys", &max)];
        if let Some(t) = &token {
            q.push(("continuation-token", t));
        }
        let r = signer
            .request(s3, "GET", &format!("/{BUCKET}"), &q, &[], &[])
            .context("ListObjectsV2: no answer")?;
        let xml = String::from_utf8_lossy(&r.body).to_string();
        if r.status != 200 {
            bail!("ListObjectsV2 answered {}: {}", r.status, xml.trim());
        }
        for c in xml.split("<Contents>").skip(1) {
            let c = c.split("</Contents>").next().unwrap_or_default();
            let key = tags(c, "Key").into_iter().next().unwrap_or_default();
            let size = tags(c, "Size")
                .into_iter()
                .next()
                .and_then(|s| s.parse().ok())
                .unwrap_or(u64::MAX);
            out.push((key, size));
        }
        let truncated = tags(&xml, "IsTruncated")
            .first()
            .is_some_and(|s| s == "true");
        if !truncated {
            return Ok(out);
        }
        token = tags(&xml, "NextContinuationToken").into_iter().next();
        if token.is_none() {
            bail!("ListObjectsV2 answered a truncated page without a NextContinuationToken");
        }
    }
    bail!("ListObjectsV2 did not end after 100,000 pages")
}

/// Compares the listing with the model and with what GetObject read:
/// failures for what the model forbids, notes for a listing that
/// disagrees with the store on a key of unknown effect.
fn check_listing(
    t: &mut Trial,
    model: &Model,
    states: &HashMap<String, ReadState>,
    listed: &[(String, u64)],
) {
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (k, _) in listed {
        *seen.entry(k.as_str()).or_default() += 1;
    }
    let mut bad = Vec::new();
    for (k, n) in &seen {
        if *n > 1 {
            bad.push(format!("listed {n} times: {k}"));
        }
    }
    if listed.windows(2).any(|w| w[0].0 >= w[1].0) {
        bad.push("the listing is not in strictly increasing name order".into());
    }
    let mut disagree = Vec::new();
    for key in model.key_names() {
        let log: KeyLog = model.log(&key);
        let allowed = log.allowed();
        let entry = listed.iter().find(|(k, _)| *k == key);
        match entry {
            Some(_) if !allowed.iter().any(Option::is_some) => bad.push(format!(
                "listed but deleted (acknowledged): {key}, must be {}",
                log.describe()
            )),
            None if !allowed.contains(&None) => bad.push(format!(
                "not listed but acknowledged: {key}, must be {}",
                log.describe()
            )),
            _ => {}
        }
        match (states.get(&key), entry) {
            (Some(Some(len)), Some((_, size))) if *size != *len as u64 => disagree.push(format!(
                "{key}: listed with {size} bytes, GetObject read {len}"
            )),
            (Some(Some(_)), None) => disagree.push(format!("{key}: readable but not listed")),
            (Some(None), Some(_)) => disagree.push(format!("{key}: listed but absent")),
            _ => {}
        }
    }
    for (k, _) in listed {
        if model.log(k).ops.is_empty() {
            bad.push(format!("listed but never written: {k}"));
        }
    }
    for b in bad.iter().take(10) {
        t.fail(format!("LISTING: {b}"));
    }
    if bad.len() > 10 {
        t.fail(format!("LISTING: ... and {} more", bad.len() - 10));
    }
    if !disagree.is_empty() {
        t.note(format!(
            "the listing disagrees with GetObject on {} key(s): {}",
            disagree.len(),
            disagree
                .iter()
                .take(5)
                .cloned()
                .collect::<Vec<_>>()
                .join("; ")
        ));
    }
}

/// S3 on a loopback cluster (`ctx.nodes` members, replication 3, each
/// with `--s3-listen`): requests spread over every node's S3 endpoint
/// (each a coordinator; the bucket's listing index lives on the replicas
/// of its index row), kill -9 of a random member under load, restarted
/// 0-1.5 s later; after every row is replicated again, GetObject and
/// ListObjectsV2 through a random live node are checked as on one node.
pub fn cluster_trial(
    ctx: &Ctx,
    t: &mut Trial,
    dir: &Path,
    fault: ClusterFault,
) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(t.seed);
    MULTIPART_ACKED.store(0, Ordering::Relaxed);
    let signer = ctx.s3_signer();
    let mut c = crate::cluster::Cluster::start_with(
        ctx,
        dir,
        ctx.nodes,
        &["--tract-size", "8MiB"],
        &[crate::cluster::S3_LISTEN],
    )?;
    let s3_of = |c: &crate::cluster::Cluster| -> Vec<String> {
        c.nodes
            .iter()
            .filter(|n| n.up)
            .filter_map(|n| n.s3.clone())
            .collect()
    };
    let addrs = Arc::new(RwLock::new(s3_of(&c)));
    let first = s3_of(&c).into_iter().next().context("no S3 endpoint")?;
    wait_s3(&signer, &first)?;
    let r = signer
        .request(&first, "PUT", &format!("/{BUCKET}"), &[], &[], &[])
        .context("CreateBucket")?;
    if r.status != 200 {
        bail!(
            "CreateBucket answered {}: {}",
            r.status,
            String::from_utf8_lossy(&r.body)
        );
    }
    for a in s3_of(&c) {
        wait_s3(&signer, &a)?;
    }
    let model = Arc::new(Model::default());
    let mix = Mix {
        put: 4,
        overwrite: 2,
        delete: 1,
        delete_objects: 1,
        multipart: if fault == ClusterFault::Multipart {
            3
        } else {
            0
        },
        get: 2,
    };
    let l = S3Load::start(ctx, &model, &addrs, mix, rng.random(), "a");
    let (lo, hi) = match fault {
        ClusterFault::Multipart => (600, 2500),
        _ => (300, 1500),
    };
    std::thread::sleep(Duration::from_millis(rng.random_range(lo..hi)));
    let victim = rng.random_range(0..c.nodes.len());
    let back = match fault {
        ClusterFault::Kill | ClusterFault::Multipart => {
            c.kill(victim);
            *addrs.write().unwrap_or_else(|e| e.into_inner()) = s3_of(&c);
            std::thread::sleep(Duration::from_millis(rng.random_range(0..1500)));
            let back = c.restart(t, victim);
            if back {
                if let Some(a) = &c.nodes[victim].s3 {
                    if let Err(e) = wait_s3(&signer, a) {
                        t.fail(format!("node {victim}'s S3 API did not come back: {e:#}"));
                    }
                }
                *addrs.write().unwrap_or_else(|e| e.into_inner()) = s3_of(&c);
            }
            t.note(format!("node {victim} killed and restarted"));
            back
        }
        ClusterFault::Loss => {
            c.kill(victim);
            *addrs.write().unwrap_or_else(|e| e.into_inner()) = s3_of(&c);
            std::thread::sleep(Duration::from_millis(rng.random_range(2500..5000)));
            t.note(format!("node {victim} killed for good"));
            true
        }
        ClusterFault::Partition => {
            // The member keeps its S3 clients; what it loses is every other
            // member and the metadata service.
            let mode = if rng.random_bool(0.5) {
                crate::proxy::Mode::Blackhole
            } else {
                crate::proxy::Mode::Reset
            };
            let ms = rng.random_range(300..4000);
            c.nodes[victim].peer.set(mode);
            std::thread::sleep(Duration::from_millis(ms));
            c.nodes[victim].peer.set(crate::proxy::Mode::Open);
            t.note(format!(
                "node {victim} cut from the other members and the metadata service ({mode:?}) for {ms} ms"
            ));
            true
        }
    };
    std::thread::sleep(Duration::from_millis(rng.random_range(300..1000)));
    l.finish();
    if fault == ClusterFault::Multipart {
        t.note(format!(
            "{} multipart upload(s) completed (acknowledged)",
            MULTIPART_ACKED.load(Ordering::Relaxed)
        ));
    }
    if !back {
        return t.absorb(&model, vec![]);
    }
    c.settle(t, Duration::from_secs(90));
    let live = s3_of(&c);
    let at = live[rng.random_range(0..live.len())].clone();
    let (states, unreadable) = verify(&model, &signer, &at, Duration::from_secs(20));
    match list_all(&signer, &at, rng.random_range(50..=1000)) {
        Ok(listed) => check_listing(t, &model, &states, &listed),
        Err(e) => t.fail(format!("LISTING: {e:#}")),
    }
    t.absorb(&model, unreadable)
}

/// One S3 trial.
pub fn trial(ctx: &Ctx, t: &mut Trial, dir: &Path, fault: Fault) -> anyhow::Result<()> {
    let mut rng = StdRng::seed_from_u64(t.seed);
    MULTIPART_ACKED.store(0, Ordering::Relaxed);
    let signer = ctx.s3_signer();
    let power = (fault == Fault::Power).then(|| Power {
        root: dir.join("node"),
        trigger: dir.join("power-cut"),
        seed: rng.random(),
        tear: crate::procs::tears(t.seed),
    });
    if let Some(p) = &power {
        // The model's root must exist before the process starts.
        std::fs::create_dir_all(&p.root)?;
    }
    let mut node = start_node(ctx, dir, power)?;
    wait_s3(&signer, &node.s3)?;
    let r = signer
        .request(&node.s3, "PUT", &format!("/{BUCKET}"), &[], &[], &[])
        .context("CreateBucket")?;
    if r.status != 200 {
        bail!(
            "CreateBucket answered {}: {}",
            r.status,
            String::from_utf8_lossy(&r.body)
        );
    }
    let model = Arc::new(Model::default());
    model
        .strict_500
        .store(fault == Fault::Power, Ordering::Relaxed);
    let mix = |put, overwrite, delete, delete_objects, multipart, get| Mix {
        put,
        overwrite,
        delete,
        delete_objects,
        multipart,
        get,
    };
    match fault {
        Fault::Put | Fault::Multipart | Fault::Delete => {
            let (m, ms) = match fault {
                Fault::Put => (mix(4, 3, 1, 0, 0, 2), (150, 1200)),
                Fault::Multipart => (mix(2, 1, 1, 0, 3, 1), (400, 2500)),
                _ => (mix(4, 1, 1, 3, 0, 1), (300, 1500)),
            };
            let kills = rng.random_range(1..=2);
            for round in 0..kills {
                load_then_kill(
                    ctx,
                    &model,
                    &mut node,
                    m,
                    End::Kill(rng.random_range(ms.0..=ms.1)),
                    rng.random(),
                    &format!("r{round}"),
                );
                if !restart(t, ctx, &mut node) {
                    return t.absorb(&model, vec![]);
                }
            }
            t.note(format!("{kills} kill(s)"));
            if fault == Fault::Multipart {
                t.note(format!(
                    "{} multipart upload(s) completed (acknowledged)",
                    MULTIPART_ACKED.load(Ordering::Relaxed)
                ));
            }
        }
        Fault::Power => {
            let m = mix(3, 2, 1, 1, 2, 1);
            let cuts = rng.random_range(2..=3);
            let log = dir.join("node.log");
            for round in 0..cuts {
                let addrs = Arc::new(RwLock::new(vec![node.s3.clone()]));
                let l = S3Load::start(ctx, &model, &addrs, m, rng.random(), &format!("r{round}"));
                let ms = rng.random_range(400..=2500);
                std::thread::sleep(Duration::from_millis(ms));
                let cut = node.server.power_cut(Duration::from_secs(30));
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
                    node.server.power = None;
                }
                if !restart(t, ctx, &mut node) {
                    return t.absorb(&model, vec![]);
                }
                if round + 1 < cuts {
                    // Every key and the listing checked after each cut
                    // (after the last, below).
                    let (states, unreadable) =
                        verify(&model, &signer, &node.s3, Duration::from_secs(10));
                    if !unreadable.is_empty() {
                        t.note(format!("read back after cut {}", round + 1));
                        return t.absorb(&model, unreadable);
                    }
                    match list_all(&signer, &node.s3, rng.random_range(50..=1000)) {
                        Ok(listed) => check_listing(t, &model, &states, &listed),
                        Err(e) => t.fail(format!("LISTING after cut {}: {e:#}", round + 1)),
                    }
                }
            }
            t.note(format!(
                "{} multipart upload(s) completed (acknowledged)",
                MULTIPART_ACKED.load(Ordering::Relaxed)
            ));
        }
        Fault::FlipListing => {
            load_then_kill(
                ctx,
                &model,
                &mut node,
                mix(4, 2, 1, 1, 0, 0),
                End::Quiet(rng.random_range(300..1200)),
                rng.random(),
                "a",
            );
            let f = dir.join("node").join("listing.redb");
            let len = std::fs::metadata(&f).map(|m| m.len()).unwrap_or(0);
            if len == 0 {
                t.note("no listing index to flip a bit in".into());
                t.skipped = true;
                return t.absorb(&model, vec![]);
            }
            let off = rng.random_range(0..len);
            let bit = rng.random_range(0..8u8);
            let mut bytes = std::fs::read(&f)?;
            bytes[off as usize] ^= 1 << bit;
            std::fs::write(&f, &bytes)?;
            t.note(format!(
                "flipped bit {bit} of byte {off} of listing.redb ({len} bytes)"
            ));
            if !restart(t, ctx, &mut node) {
                return t.absorb(&model, vec![]);
            }
        }
    }
    let (states, unreadable) = verify(&model, &signer, &node.s3, Duration::from_secs(10));
    match list_all(&signer, &node.s3, rng.random_range(50..=1000)) {
        Ok(listed) => check_listing(t, &model, &states, &listed),
        Err(e) => t.fail(format!("LISTING: {e:#}")),
    }
    t.absorb(&model, unreadable)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_are_found_in_order_and_unescaped() {
        let xml = "<R><Deleted><Key>a&amp;b</Key></Deleted><Key>&lt;c&gt;</Key><Key>open";
        assert_eq!(tags(xml, "Key"), ["a&b", "<c>"]);
        assert!(tags(xml, "UploadId").is_empty());
        assert_eq!(unescape("&amp;lt; &quot;&apos;"), "&lt; \"'");
    }
}
