//! The HTTP load generator behind `strata bench http` (Haystack's Haystress):
//! an object size distribution, a read/write mix, multi-writes of K objects,
//! a number of concurrent connections, a duration, and key popularity
//! (uniform, Zipf, or by age: the newest objects most read). It drives a
//! Strata node or, for side-by-side runs, a SeaweedFS master + volume server,
//! and reports throughput and latency percentiles per operation.

use crate::client::{Client, ClientError};
use bytes::Bytes;
use hdrhistogram::Histogram;
use hyper::Method;
use rand::rngs::SmallRng;
use rand::{Rng, RngCore, SeedableRng};
use rand_distr::{Distribution, Zipf};
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a load run talks to.
#[derive(Clone, Debug)]
pub enum Target {
    /// Strata nodes (host:port each), objects under `bucket`. Worker `i`
    /// talks to node `i mod n` for its writes and its reads, so with the
    /// nodes of one cluster every object is written through one node and
    /// read through any.
    Strata {
        /// host:port of each node.
        addrs: Vec<String>,
        /// The bucket (= workload) to use.
        bucket: String,
        /// The `Authorization` header of every request (`Bearer TOKEN`,
        /// `strata key token`), if any.
        authorization: Option<String>,
    },
    /// A SeaweedFS master at `master` (host:port); fids are assigned by the
    /// master in blocks of the batch size and uploaded to the volume server
    /// it names.
    Seaweed {
        /// host:port of the master.
        master: String,
        /// Ask the volume server to fsync each upload (`?fsync=true`), as
        /// durable as a Strata PUT; SeaweedFS does not by default.
        fsync: bool,
    },
}

/// Object size distribution.
#[derive(Clone, Debug, PartialEq)]
pub enum SizeDist {
    /// Every object has this size.
    Fixed(u64),
    /// Uniform between the two bounds (inclusive).
    Uniform(u64, u64),
    /// A weighted mix of sizes, e.g. Haystack's 70% 8 KiB, 30% 64 KiB.
    Mix(Vec<(u64, f64)>),
}

impl SizeDist {
    fn sample(&self, rng: &mut SmallRng) -> u64 {
        match self {
            SizeDist::Fixed(s) => *s,
            SizeDist::Uniform(a, b) => rng.random_range(*a..=*b),
            SizeDist::Mix(v) => {
                let total: f64 = v.iter().map(|x| x.1).sum();
                let mut r = rng.random::<f64>() * total;
                for (s, w) in v {
                    if r < *w {
                        return *s;
                    }
                    r -= w;
                }
                v.last().map(|x| x.0).unwrap_or(0)
            }
        }
    }

    /// The largest size this distribution can produce.
    pub fn max(&self) -> u64 {
        match self {
            SizeDist::Fixed(s) => *s,
            SizeDist::Uniform(_, b) => *b,
            SizeDist::Mix(v) => v.iter().map(|x| x.0).max().unwrap_or(0),
        }
    }
}

/// Which stored objects reads go to.
#[derive(Clone, Debug, PartialEq)]
pub enum Popularity {
    /// Every stored object equally.
    Uniform,
    /// Zipf with this exponent over a fixed random ranking of the objects.
    Zipf(f64),
    /// Zipf with this exponent over recency: the newest object is the most
    /// read (Haystack's photos are read most just after upload).
    Age(f64),
}

/// One load run.
#[derive(Clone, Debug)]
pub struct LoadSpec {
    /// What to drive.
    pub target: Target,
    /// Object sizes.
    pub sizes: SizeDist,
    /// Fraction of operations that are reads (0 = only writes, 1 = only reads).
    pub read_fraction: f64,
    /// Objects per write operation (a multi-write when > 1).
    pub batch: usize,
    /// Concurrent connections (one worker task each).
    pub concurrency: usize,
    /// How long the measured phase runs.
    pub duration: Duration,
    /// Objects written before the measured phase, so reads have targets.
    pub prefill: u64,
    /// Key popularity of reads.
    pub popularity: Popularity,
    /// Random seed.
    pub seed: u64,
    /// Processes (the server's) whose CPU time over the measured phase is
    /// reported, from /proc/PID/stat.
    pub cpu_pids: Vec<u32>,
}

/// Throughput and latency of one operation kind.
#[derive(Clone, Debug, Default, Serialize)]
pub struct OpStats {
    /// Requests completed successfully.
    pub requests: u64,
    /// Objects moved by them (a multi-write moves `batch` objects).
    pub objects: u64,
    /// Failed requests (transport errors or unexpected statuses).
    pub errors: u64,
    /// Objects per second over the measured phase.
    pub objects_per_s: f64,
    /// Payload megabytes (10^6) per second.
    pub mb_per_s: f64,
    /// Request latency percentiles, microseconds.
    pub p50_us: u64,
    /// 90th percentile.
    pub p90_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// 99.9th percentile.
    pub p999_us: u64,
    /// Slowest request.
    pub max_us: u64,
    /// Mean.
    pub mean_us: f64,
}

/// The result of a load run.
#[derive(Clone, Debug, Serialize)]
pub struct LoadReport {
    /// `strata` or `seaweedfs`.
    pub target: String,
    /// Length of the measured phase, seconds.
    pub seconds: f64,
    /// Connections.
    pub concurrency: usize,
    /// Objects per write.
    pub batch: usize,
    /// Fraction of reads asked for.
    pub read_fraction: f64,
    /// Objects written by the prefill.
    pub prefill_objects: u64,
    /// Writes (each of `batch` objects).
    pub put: OpStats,
    /// Reads.
    pub get: OpStats,
    /// The first error seen, if any.
    pub first_error: Option<String>,
    /// CPU seconds (user + system) the processes of
    /// [`LoadSpec::cpu_pids`] spent during the measured phase; `None` when
    /// none were given or /proc could not be read.
    pub server_cpu_seconds: Option<f64>,
    /// Server CPU microseconds per object moved (reads and writes), from
    /// `server_cpu_seconds`: what the load cost the server, whatever else
    /// ran on the machine.
    pub server_cpu_us_per_object: Option<f64>,
}

/// CPU seconds (user + system, all threads) of the processes `pids`, from
/// /proc/PID/stat; `None` if any cannot be read.
pub fn cpu_seconds(pids: &[u32]) -> Option<f64> {
    let tick = rustix::param::clock_ticks_per_second() as f64;
    let mut total = 0u64;
    for pid in pids {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // Fields after the command name (which may hold spaces), 1-based
        // field 14 is utime and 15 stime: indices 11 and 12 after ") ".
        let rest = &stat[stat.rfind(')')? + 2..];
        let f: Vec<&str> = rest.split_whitespace().collect();
        total += f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    }
    Some(total as f64 / tick)
}

/// Why a load run could not run.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The server could not be reached or answered garbage before any
    /// measurement could start.
    #[error(transparent)]
    Client(#[from] ClientError),
    /// The server refused a request during the prefill.
    #[error("{what} failed with HTTP {status}: {body}")]
    Refused {
        /// What was being done.
        what: String,
        /// The status.
        status: u16,
        /// The response body (the reason).
        body: String,
    },
    /// The spec makes no sense.
    #[error("bad load spec: {0}")]
    Spec(String),
}

/// One stored object a reader can ask for.
#[derive(Clone)]
struct Stored {
    addr: Arc<str>,
    path: Arc<str>,
}

/// The objects written so far, in write order.
struct KeySpace {
    objs: parking_lot::RwLock<Vec<Stored>>,
}

struct Recorder {
    hist: Histogram<u64>,
    requests: u64,
    objects: u64,
    bytes: u64,
    errors: u64,
}

impl Recorder {
    fn new() -> Recorder {
        Recorder {
            // 1 us .. 100 s at 3 significant digits: cannot fail for these bounds.
            hist: Histogram::new_with_bounds(1, 100_000_000, 3)
                .unwrap_or_else(|_| Histogram::new(3).unwrap_or_else(|_| unreachable!())),
            requests: 0,
            objects: 0,
            bytes: 0,
            errors: 0,
        }
    }
    fn record(&mut self, t: Duration, objects: u64, bytes: u64) {
        let us = (t.as_micros() as u64).clamp(1, 100_000_000);
        let _ = self.hist.record(us);
        self.requests += 1;
        self.objects += objects;
        self.bytes += bytes;
    }
    fn merge(&mut self, o: &Recorder) {
        let _ = self.hist.add(&o.hist);
        self.requests += o.requests;
        self.objects += o.objects;
        self.bytes += o.bytes;
        self.errors += o.errors;
    }
    fn stats(&self, secs: f64) -> OpStats {
        let empty = self.hist.is_empty();
        let q = |p: f64| {
            if empty {
                0
            } else {
                self.hist.value_at_quantile(p)
            }
        };
        OpStats {
            requests: self.requests,
            objects: self.objects,
            errors: self.errors,
            objects_per_s: self.objects as f64 / secs,
            mb_per_s: self.bytes as f64 / 1e6 / secs,
            p50_us: q(0.5),
            p90_us: q(0.9),
            p99_us: q(0.99),
            p999_us: q(0.999),
            max_us: if empty { 0 } else { self.hist.max() },
            mean_us: if empty { 0.0 } else { self.hist.mean() },
        }
    }
}

/// Random bytes that object payloads are sliced from.
fn payload_pool(max: u64, seed: u64) -> Bytes {
    let mut v = vec![0u8; (max as usize).max(1) * 2];
    SmallRng::seed_from_u64(seed).fill_bytes(&mut v);
    Bytes::from(v)
}

#[derive(serde::Deserialize)]
struct BatchAnswer {
    objects: Vec<BatchItem>,
}
#[derive(serde::Deserialize)]
struct BatchItem {
    url: String,
}

#[derive(serde::Deserialize)]
struct Assign {
    fid: String,
    url: String,
    #[serde(default)]
    count: u64,
}

struct Worker {
    id: u64,
    spec: Arc<LoadSpec>,
    client: Client,
    rng: SmallRng,
    pool: Bytes,
    seq: u64,
    keys: Arc<KeySpace>,
    ranking: Option<Zipf<f64>>,
}

impl Worker {
    fn payload(&mut self) -> Bytes {
        let size = self.spec.sizes.sample(&mut self.rng) as usize;
        let off = self
            .rng
            .random_range(0..=self.pool.len() - size.min(self.pool.len()));
        self.pool.slice(off..off + size.min(self.pool.len()))
    }

    /// One multi-write of `batch` objects; returns (objects, payload bytes).
    async fn write(&mut self) -> Result<(u64, u64), String> {
        let k = self.spec.batch.max(1);
        let items: Vec<Bytes> = (0..k).map(|_| self.payload()).collect();
        let bytes: u64 = items.iter().map(|b| b.len() as u64).sum();
        match &self.spec.target {
            Target::Strata {
                addrs,
                bucket,
                authorization,
            } => {
                let addr: Arc<str> = Arc::from(self.node_addr(addrs));
                let auth: Vec<(&str, &str)> = authorization
                    .iter()
                    .map(|a| ("authorization", a.as_str()))
                    .collect();
                let mut stored = Vec::with_capacity(k);
                if k == 1 {
                    self.seq += 1;
                    let path = format!("/{bucket}/w{}-{}", self.id, self.seq);
                    let r = self
                        .client
                        .request(&addr, Method::PUT, &path, &auth, items[0].clone())
                        .await
                        .map_err(|e| e.to_string())?;
                    if !r.status.is_success() {
                        return Err(format!("PUT {path}: HTTP {}", r.status));
                    }
                    let cookie = r
                        .headers
                        .get("x-strata-cookie")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or("")
                        .to_string();
                    stored.push(Stored {
                        addr: addr.clone(),
                        path: Arc::from(format!("{path}?cookie={cookie}")),
                    });
                } else {
                    let named: Vec<(String, Bytes)> = items
                        .into_iter()
                        .map(|d| {
                            self.seq += 1;
                            (format!("w{}-{}", self.id, self.seq), d)
                        })
                        .collect();
                    let path = format!("/{bucket}?batch");
                    let r = self
                        .client
                        .request(
                            &addr,
                            Method::POST,
                            &path,
                            &auth,
                            strata_proto::batch::encode(&named),
                        )
                        .await
                        .map_err(|e| e.to_string())?;
                    if !r.status.is_success() {
                        return Err(format!(
                            "batch PUT: HTTP {} {}",
                            r.status,
                            String::from_utf8_lossy(&r.body)
                        ));
                    }
                    let ans: BatchAnswer = serde_json::from_slice(&r.body)
                        .map_err(|e| format!("batch PUT answer: {e}"))?;
                    for it in ans.objects {
                        stored.push(Stored {
                            addr: addr.clone(),
                            path: Arc::from(it.url),
                        });
                    }
                }
                self.keys.objs.write().extend(stored);
            }
            Target::Seaweed { master, fsync } => {
                let fsync = *fsync;
                // `dataSize` tells the master how many bytes each fid will
                // hold, as `weed benchmark` does (ExpectedDataSize). Without
                // it the master books 1 MB per fid against the volume's size
                // limit (topology.DefaultNeedleSizeEstimate) and, under a
                // fast stream of small uploads, takes every volume out of the
                // writable list long before any is full: "No writable
                // volumes and no free volumes left" after ~100 volumes x
                // ~1,000 assigns.
                let per_fid = items.iter().map(|b| b.len()).max().unwrap_or(0).max(1);
                let assign = format!("/dir/assign?count={k}&dataSize={per_fid}");
                // The master answers "volume growth in progress" while it
                // creates volumes: wait and ask again, as its clients do.
                let mut tries = 0;
                let a: Assign = loop {
                    let r = self
                        .client
                        .request(master, Method::GET, &assign, &[], Bytes::new())
                        .await
                        .map_err(|e| e.to_string())?;
                    match serde_json::from_slice::<Assign>(&r.body) {
                        Ok(a) => break a,
                        Err(e) => {
                            tries += 1;
                            if tries > 200 {
                                return Err(format!(
                                    "assign: {e}: {}",
                                    String::from_utf8_lossy(&r.body)
                                ));
                            }
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    }
                };
                if a.count < k as u64 {
                    return Err(format!("assign gave {} fids, wanted {k}", a.count));
                }
                let addr: Arc<str> = Arc::from(a.url.as_str());
                let mut stored = Vec::with_capacity(k);
                for (i, data) in items.into_iter().enumerate() {
                    let fid = if i == 0 {
                        a.fid.clone()
                    } else {
                        format!("{}_{i}", a.fid)
                    };
                    let path = format!("/{fid}");
                    let put_path = if fsync {
                        format!("{path}?fsync=true")
                    } else {
                        path.clone()
                    };
                    let r = self
                        .client
                        .request(
                            &addr,
                            Method::PUT,
                            &put_path,
                            &[("content-type", "application/octet-stream")],
                            data,
                        )
                        .await
                        .map_err(|e| e.to_string())?;
                    if !r.status.is_success() {
                        return Err(format!("PUT {path}: HTTP {}", r.status));
                    }
                    stored.push(Stored {
                        addr: addr.clone(),
                        path: Arc::from(path),
                    });
                }
                self.keys.objs.write().extend(stored);
            }
        }
        Ok((k as u64, bytes))
    }

    fn pick(&mut self) -> Option<Stored> {
        let objs = self.keys.objs.read();
        let n = objs.len();
        if n == 0 {
            return None;
        }
        let i = match &self.spec.popularity {
            Popularity::Uniform => self.rng.random_range(0..n),
            Popularity::Zipf(_) => {
                let r = self
                    .ranking
                    .as_ref()
                    .map(|z| z.sample(&mut self.rng) as u64)?;
                // A fixed pseudo-random ranking: rank r -> object (r * odd) mod n.
                ((r.saturating_sub(1)).wrapping_mul(0x9E37_79B9_7F4A_7C15) % n as u64) as usize
            }
            Popularity::Age(_) => {
                let r = self
                    .ranking
                    .as_ref()
                    .map(|z| z.sample(&mut self.rng) as usize)?;
                n - r.clamp(1, n)
            }
        };
        objs.get(i).cloned()
    }

    /// This worker's Strata node.
    fn node_addr<'a>(&self, addrs: &'a [String]) -> &'a str {
        addrs
            .get(self.id as usize % addrs.len().max(1))
            .map_or("", String::as_str)
    }

    async fn read(&mut self) -> Result<Option<u64>, String> {
        let Some(s) = self.pick() else {
            return Ok(None);
        };
        // Strata: through this worker's node, whichever node wrote it;
        // SeaweedFS: at the volume server that holds it.
        let (addr, auth): (Arc<str>, Vec<(&str, &str)>) = match &self.spec.target {
            Target::Strata {
                addrs,
                authorization,
                ..
            } => (
                Arc::from(self.node_addr(addrs)),
                authorization
                    .iter()
                    .map(|a| ("authorization", a.as_str()))
                    .collect(),
            ),
            Target::Seaweed { .. } => (s.addr.clone(), Vec::new()),
        };
        let r = self
            .client
            .request(&addr, Method::GET, &s.path, &auth, Bytes::new())
            .await
            .map_err(|e| e.to_string())?;
        if !r.status.is_success() {
            return Err(format!("GET {}: HTTP {}", s.path, r.status));
        }
        Ok(Some(r.body.len() as u64))
    }
}

/// Runs a prefill, then the measured mix, and reports.
pub async fn run(spec: LoadSpec, progress: Arc<AtomicU64>) -> Result<LoadReport, LoadError> {
    if spec.concurrency == 0 || spec.batch == 0 {
        return Err(LoadError::Spec(
            "concurrency and batch must be at least 1".into(),
        ));
    }
    if spec.batch > strata_proto::batch::MAX_ITEMS {
        return Err(LoadError::Spec(format!(
            "batch must be at most {} objects (a node refuses larger batches)",
            strata_proto::batch::MAX_ITEMS
        )));
    }
    if !(0.0..=1.0).contains(&spec.read_fraction) {
        return Err(LoadError::Spec("read fraction must be within 0..1".into()));
    }
    let spec = Arc::new(spec);
    let keys = Arc::new(KeySpace {
        objs: parking_lot::RwLock::new(Vec::new()),
    });
    let pool = payload_pool(spec.sizes.max(), spec.seed);
    let ranking_n = (spec.prefill.max(1) * 4).max(1_000_000);
    let ranking = match spec.popularity {
        Popularity::Zipf(s) | Popularity::Age(s) => Some(
            Zipf::new(ranking_n as f64, s)
                .map_err(|e| LoadError::Spec(format!("bad Zipf exponent {s}: {e}")))?,
        ),
        Popularity::Uniform => None,
    };
    let mut workers: Vec<Worker> = (0..spec.concurrency as u64)
        .map(|id| Worker {
            id,
            spec: spec.clone(),
            client: Client::new(),
            rng: SmallRng::seed_from_u64(spec.seed ^ (id + 1).wrapping_mul(0xA24B_AED4_963E_E407)),
            pool: pool.clone(),
            seq: 0,
            keys: keys.clone(),
            ranking,
        })
        .collect();

    // Prefill: writes shared among the workers, errors are fatal.
    let per = spec
        .prefill
        .div_ceil(spec.concurrency as u64 * spec.batch as u64);
    let mut tasks = Vec::new();
    for mut w in workers.drain(..) {
        let progress = progress.clone();
        tasks.push(tokio::spawn(async move {
            for _ in 0..per {
                w.write().await?;
                progress.fetch_add(w.spec.batch as u64, Ordering::Relaxed);
            }
            Ok(w)
        }));
    }
    for t in tasks {
        match t.await {
            Ok(Ok(w)) => workers.push(w),
            Ok(Err(e)) => {
                return Err(LoadError::Refused {
                    what: "prefill".into(),
                    status: 0,
                    body: e,
                })
            }
            Err(e) => return Err(LoadError::Spec(format!("worker panicked: {e}"))),
        }
    }
    let prefill_objects = keys.objs.read().len() as u64;

    // Measured phase.
    let stop = Arc::new(AtomicBool::new(false));
    let cpu0 = (!spec.cpu_pids.is_empty())
        .then(|| cpu_seconds(&spec.cpu_pids))
        .flatten();
    let start = Instant::now();
    let mut tasks = Vec::new();
    for mut w in workers {
        let stop = stop.clone();
        let progress = progress.clone();
        tasks.push(tokio::spawn(async move {
            let mut put = Recorder::new();
            let mut get = Recorder::new();
            let mut first_error = None;
            while !stop.load(Ordering::Relaxed) {
                let is_read = w.rng.random::<f64>() < w.spec.read_fraction;
                let t0 = Instant::now();
                if is_read {
                    match w.read().await {
                        Ok(Some(b)) => get.record(t0.elapsed(), 1, b),
                        Ok(None) => {
                            // Nothing written yet: write instead.
                            match w.write().await {
                                Ok((o, b)) => put.record(t0.elapsed(), o, b),
                                Err(e) => {
                                    put.errors += 1;
                                    first_error.get_or_insert(e);
                                }
                            }
                        }
                        Err(e) => {
                            get.errors += 1;
                            first_error.get_or_insert(e);
                        }
                    }
                } else {
                    match w.write().await {
                        Ok((o, b)) => put.record(t0.elapsed(), o, b),
                        Err(e) => {
                            put.errors += 1;
                            first_error.get_or_insert(e);
                        }
                    }
                }
                progress.fetch_add(1, Ordering::Relaxed);
            }
            (put, get, first_error)
        }));
    }
    tokio::time::sleep(spec.duration).await;
    stop.store(true, Ordering::Relaxed);
    let mut put = Recorder::new();
    let mut get = Recorder::new();
    let mut first_error = None;
    for t in tasks {
        if let Ok((p, g, e)) = t.await {
            put.merge(&p);
            get.merge(&g);
            if first_error.is_none() {
                first_error = e;
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let server_cpu_seconds = cpu0.and_then(|c0| Some(cpu_seconds(&spec.cpu_pids)? - c0));
    let moved = put.objects + get.objects;
    Ok(LoadReport {
        server_cpu_seconds,
        server_cpu_us_per_object: server_cpu_seconds
            .filter(|_| moved > 0)
            .map(|c| c * 1e6 / moved as f64),
        target: match spec.target {
            Target::Strata { .. } => "strata".into(),
            Target::Seaweed { .. } => "seaweedfs".into(),
        },
        seconds: secs,
        concurrency: spec.concurrency,
        batch: spec.batch,
        read_fraction: spec.read_fraction,
        prefill_objects,
        put: put.stats(secs),
        get: get.stats(secs),
        first_error,
    })
}

/// Runs [`run`] on a runtime of its own with `threads` worker threads.
pub fn run_blocking(
    spec: LoadSpec,
    progress: Arc<AtomicU64>,
    threads: usize,
) -> Result<LoadReport, LoadError> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(threads.max(1))
        .enable_all()
        .build()
        .map_err(|e| LoadError::Spec(format!("cannot start the runtime: {e}")))?;
    rt.block_on(run(spec, progress))
}

/// A trivial HTTP server for measuring the load generator itself: every
/// PUT or POST is answered 201 with a cookie header and a small JSON body
/// (the body is read and dropped), every GET with `get_bytes` bytes. It
/// stores nothing and touches no disk, so a run against it shows how many
/// requests per second the load generator can drive on this machine, the
/// ceiling of any figure measured with it. Serves on `listener` until the
/// task is dropped.
pub async fn null_server(listener: tokio::net::TcpListener, get_bytes: usize) {
    use http_body_util::{BodyExt, Full};
    use hyper::service::service_fn;
    let body = Bytes::from(vec![b'x'; get_bytes]);
    let written = Bytes::from_static(
        br#"{"name":"x","cookie":"00000001","url":"/null/x?cookie=00000001","tier":"flash"}"#,
    );
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            continue;
        };
        let _ = stream.set_nodelay(true);
        let (body, written) = (body.clone(), written.clone());
        tokio::spawn(async move {
            let svc = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let (body, written) = (body.clone(), written.clone());
                async move {
                    let is_get = req.method() == Method::GET;
                    // Read the whole upload, as a real server must.
                    let _ = req.into_body().collect().await;
                    let resp = if is_get {
                        hyper::Response::new(Full::new(body))
                    } else {
                        let mut r = hyper::Response::new(Full::new(written));
                        *r.status_mut() = hyper::StatusCode::CREATED;
                        r.headers_mut().insert(
                            "x-strata-cookie",
                            hyper::header::HeaderValue::from_static("00000001"),
                        );
                        r
                    };
                    Ok::<_, std::convert::Infallible>(resp)
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), svc)
                .await;
        });
    }
}

/// Parses a size distribution: `4KiB` (fixed), `1KiB-64KiB` (uniform) or
/// `8KiB:70,64KiB:30` (weighted mix), with `parse_bytes` turning one size
/// string into bytes.
pub fn parse_sizes(
    s: &str,
    parse_bytes: impl Fn(&str) -> Option<u64>,
) -> Result<SizeDist, LoadError> {
    let bad = || {
        LoadError::Spec(format!(
            "bad size distribution {s:?}: use 4KiB, 1KiB-64KiB or 8KiB:70,64KiB:30"
        ))
    };
    if s.contains(':') {
        let mut v = Vec::new();
        for part in s.split(',') {
            let (a, w) = part.split_once(':').ok_or_else(bad)?;
            let w: f64 = w.trim().parse().map_err(|_| bad())?;
            if !(w.is_finite() && w > 0.0) {
                return Err(bad());
            }
            v.push((parse_bytes(a).ok_or_else(bad)?, w));
        }
        return Ok(SizeDist::Mix(v));
    }
    if let Some((a, b)) = s.split_once('-') {
        let (a, b) = (
            parse_bytes(a).ok_or_else(bad)?,
            parse_bytes(b).ok_or_else(bad)?,
        );
        if a > b {
            return Err(bad());
        }
        return Ok(SizeDist::Uniform(a, b));
    }
    Ok(SizeDist::Fixed(parse_bytes(s).ok_or_else(bad)?))
}

/// Parses `uniform`, `zipf[:S]` or `age[:S]` (default exponent 0.99).
pub fn parse_popularity(s: &str) -> Result<Popularity, LoadError> {
    let (name, exp) = match s.split_once(':') {
        Some((n, e)) => (
            n,
            e.trim()
                .parse::<f64>()
                .map_err(|_| LoadError::Spec(format!("bad exponent in {s:?}")))?,
        ),
        None => (s, 0.99),
    };
    if !(exp.is_finite() && exp > 0.0) {
        return Err(LoadError::Spec(format!(
            "Zipf exponent must be positive: {s:?}"
        )));
    }
    match name.trim().to_ascii_lowercase().as_str() {
        "uniform" => Ok(Popularity::Uniform),
        "zipf" => Ok(Popularity::Zipf(exp)),
        "age" => Ok(Popularity::Age(exp)),
        _ => Err(LoadError::Spec(format!(
            "unknown popularity {s:?}: use uniform, zipf[:S] or age[:S]"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pb(s: &str) -> Option<u64> {
        let s = s.trim().to_ascii_lowercase();
        if let Some(k) = s.strip_suffix("kib") {
            return k.parse::<u64>().ok().map(|v| v * 1024);
        }
        s.parse().ok()
    }

    #[test]
    fn size_specs() {
        assert_eq!(parse_sizes("4KiB", pb).unwrap(), SizeDist::Fixed(4096));
        assert_eq!(
            parse_sizes("1KiB-64KiB", pb).unwrap(),
            SizeDist::Uniform(1024, 65536)
        );
        assert_eq!(
            parse_sizes("8KiB:70,64KiB:30", pb).unwrap(),
            SizeDist::Mix(vec![(8192, 70.0), (65536, 30.0)])
        );
        assert!(parse_sizes("64KiB-1KiB", pb).is_err());
        assert!(parse_sizes("8KiB:x", pb).is_err());
        let mut rng = SmallRng::seed_from_u64(1);
        let mix = SizeDist::Mix(vec![(1, 1.0), (2, 3.0)]);
        let twos = (0..10_000).filter(|_| mix.sample(&mut rng) == 2).count();
        assert!((7_000..8_000).contains(&twos), "{twos}");
    }

    #[test]
    fn popularity_specs() {
        assert_eq!(parse_popularity("uniform").unwrap(), Popularity::Uniform);
        assert_eq!(parse_popularity("zipf").unwrap(), Popularity::Zipf(0.99));
        assert_eq!(parse_popularity("age:1.2").unwrap(), Popularity::Age(1.2));
        assert!(parse_popularity("zipf:-1").is_err());
        assert!(parse_popularity("lru").is_err());
    }

    #[test]
    fn cpu_seconds_of_this_process_grow_with_work() {
        let me = [std::process::id()];
        let c0 = cpu_seconds(&me).expect("own /proc/PID/stat");
        let t = Instant::now();
        let mut x = 1u64;
        while t.elapsed() < Duration::from_millis(300) {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
        }
        std::hint::black_box(x);
        let c1 = cpu_seconds(&me).expect("own /proc/PID/stat");
        assert!(c1 - c0 >= 0.1, "{c0} -> {c1} after 0.3 s of spinning");
        assert!(cpu_seconds(&[u32::MAX]).is_none());
    }

    #[test]
    fn drives_the_null_server_and_reports_its_cpu() {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        let listener = rt
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap().to_string();
        rt.spawn(null_server(listener, 100));
        let spec = LoadSpec {
            target: Target::Strata {
                addrs: vec![addr],
                bucket: "b".into(),
                authorization: None,
            },
            sizes: SizeDist::Fixed(100),
            read_fraction: 0.5,
            batch: 1,
            concurrency: 4,
            duration: Duration::from_millis(500),
            prefill: 20,
            popularity: Popularity::Uniform,
            seed: 7,
            cpu_pids: vec![std::process::id()],
        };
        let r = rt.block_on(run(spec, Arc::new(AtomicU64::new(0)))).unwrap();
        assert_eq!(r.prefill_objects, 20);
        assert!(r.put.objects > 0 && r.get.objects > 0, "{r:?}");
        assert_eq!(r.put.errors + r.get.errors, 0, "{:?}", r.first_error);
        // Every GET got the null server's 100 bytes.
        assert!((r.get.mb_per_s * 1e6 * r.seconds / r.get.objects as f64 - 100.0).abs() < 1.0);
        assert!(r.server_cpu_seconds.is_some_and(|c| c > 0.0), "{r:?}");
        assert!(r.server_cpu_us_per_object.is_some_and(|c| c > 0.0));
    }

    #[test]
    fn batch_framing() {
        let b = strata_proto::batch::encode(&[("a".into(), Bytes::from_static(b"xyz"))]);
        assert_eq!(&b[..], &[1, 0, 3, 0, 0, 0, b'a', b'x', b'y', b'z']);
    }
}
