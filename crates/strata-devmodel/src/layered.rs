//! The layered model: what a trace of object requests becomes beneath
//! replication, caches and the local store of one representative node.
//!
//! As in the study (§3.2), the node stands for every node of a symmetric
//! cluster: it holds the primary (local) replica of the objects its clients
//! write and R−1 replicas of its peers' objects, which by symmetry amount to
//! the same write volume. So a PUT of `b` bytes becomes R local writes and
//! (R−1)·b network bytes; a GET reads the local replica only.

use crate::disk::{Completion, DiskParams, IoClass};
use crate::node::Node;
use crate::stats::{LatencyHistogram, LatencySummary};
use serde::Serialize;
use std::collections::{HashMap, VecDeque};
use strata_trace::{Op, Request};

/// Where a read was served from by the caches above the disks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheOutcome {
    /// A hit in RAM.
    Ram,
    /// A hit in the flash cache.
    Flash,
    /// A miss: the read goes to disk.
    Miss,
}

/// The RAM/flash caches of the node, as the model sees them. The policies
/// themselves live in the simulator's crates; an adapter implements this.
pub trait TieredCache {
    /// A read of `bytes` of object `key`: where it hit. On a miss the cache
    /// admits the object as its policy says.
    fn read(&mut self, key: u64, bytes: u64) -> CacheOutcome;
    /// A write of `key` (the cache allocates it or drops a stale copy).
    fn write(&mut self, key: u64, bytes: u64);
    /// The object was deleted.
    fn remove(&mut self, key: u64);
    /// Bytes written to flash so far (for wear).
    fn flash_bytes_written(&self) -> u64;
}

/// No caches at all: every read goes to disk.
#[derive(Debug, Default)]
pub struct NoCache;

impl TieredCache for NoCache {
    fn read(&mut self, _key: u64, _bytes: u64) -> CacheOutcome {
        CacheOutcome::Miss
    }
    fn write(&mut self, _key: u64, _bytes: u64) {}
    fn remove(&mut self, _key: u64) {}
    fn flash_bytes_written(&self) -> u64 {
        0
    }
}

/// How objects map to local files.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Layout {
    /// Strata's own: needles appended to per-workload segment files of this
    /// many bytes; deletes and overwrites leave garbage that compaction
    /// reclaims.
    Segments {
        /// Bytes per segment file.
        segment_bytes: u64,
    },
    /// The study's HDFS view: every object is a file, cut into local files
    /// (blocks) of this many bytes.
    Files {
        /// Bytes per block (the study: 256 MB).
        block_bytes: u64,
    },
}

/// Everything the model can be told.
#[derive(Clone, Debug, Serialize)]
pub struct ModelConfig {
    /// Replicas per object (one local, R−1 remote).
    pub replicas: u32,
    /// Disks in the node.
    pub disks: u32,
    /// Each disk's performance.
    pub disk: DiskParams,
    /// Flash read or write latency, seconds (the study: 0.5 ms).
    pub flash_latency_s: f64,
    /// How objects are laid out in local files.
    pub layout: Layout,
    /// Compact a sealed segment once this fraction of it is garbage.
    pub compaction_threshold: f64,
    /// The §6.2 what-if: every replica compacts its own copy (reads R times
    /// locally, no network) instead of the primary compacting and sending
    /// the result to R−1 replicas.
    pub local_compaction: bool,
    /// The §6.3 what-if: all replicas' appends go to one log on a dedicated
    /// disk; segments are written to the data disks when sealed.
    pub combined_logging: bool,
    /// The §5.3 what-if: objects smaller than this are written to flash
    /// first (`None`: never).
    pub flash_buffer_threshold: Option<u64>,
    /// Bytes of flash given to the write buffer when it is on.
    pub flash_buffer_bytes: u64,
}

impl Default for ModelConfig {
    fn default() -> Self {
        ModelConfig {
            replicas: 3,
            disks: 10,
            disk: DiskParams::default(),
            flash_latency_s: 0.0005,
            layout: Layout::Segments {
                segment_bytes: 256 << 20,
            },
            compaction_threshold: 0.5,
            local_compaction: false,
            combined_logging: false,
            flash_buffer_threshold: None,
            flash_buffer_bytes: 0,
        }
    }
}

/// Errors in a model configuration.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// A setting is out of range.
    #[error("invalid model setting: {0}")]
    Invalid(String),
}

impl ModelConfig {
    /// Checks the settings make sense.
    pub fn validate(&self) -> Result<(), ModelError> {
        let bad = |s: &str| Err(ModelError::Invalid(s.to_string()));
        if self.replicas == 0 {
            return bad("replicas must be at least 1");
        }
        if self.disks == 0 {
            return bad("a node needs at least one disk");
        }
        if self.combined_logging && self.disks < 2 {
            return bad(
                "combined logging dedicates a disk to the log, so it needs at least 2 disks",
            );
        }
        if !(self.disk.bandwidth.is_finite() && self.disk.bandwidth > 0.0) {
            return bad("disk bandwidth must be positive");
        }
        if !(self.disk.seek_s.is_finite() && self.disk.seek_s >= 0.0) {
            return bad("seek time must be zero or positive");
        }
        if !(self.flash_latency_s.is_finite() && self.flash_latency_s >= 0.0) {
            return bad("flash latency must be zero or positive");
        }
        if !(0.0..=1.0).contains(&self.compaction_threshold) || self.compaction_threshold == 0.0 {
            return bad("compaction threshold must be in (0, 1]");
        }
        match self.layout {
            Layout::Segments { segment_bytes: 0 } => return bad("segment size must be positive"),
            Layout::Files { block_bytes: 0 } => return bad("block size must be positive"),
            _ => {}
        }
        if self.flash_buffer_threshold.is_some() && self.flash_buffer_bytes == 0 {
            return bad("the flash write buffer needs some flash (flash buffer bytes is 0)");
        }
        Ok(())
    }
}

/// Latency of one I/O class.
#[derive(Clone, Debug, Serialize)]
pub struct ClassLatency {
    /// The class.
    pub class: IoClass,
    /// Its latency distribution.
    pub latency: LatencySummary,
}

/// What the model measured.
#[derive(Clone, Debug, Serialize)]
pub struct ModelReport {
    /// The configuration that ran.
    pub config: ModelConfig,
    /// Trace requests processed.
    pub requests: u64,
    /// Seconds of trace time covered.
    pub duration_s: f64,
    /// Foreground reads: every GET, including cache hits (RAM 0, flash the
    /// flash latency, disk its queue and service time).
    pub foreground: LatencySummary,
    /// Disk latencies (queue plus service) per I/O class.
    pub disk_classes: Vec<ClassLatency>,
    /// GETs served from RAM.
    pub ram_hits: u64,
    /// GETs served from flash (cache or write buffer).
    pub flash_hits: u64,
    /// GETs that went to disk.
    pub disk_reads: u64,
    /// Bytes the trace read.
    pub trace_read_bytes: u64,
    /// Bytes the trace wrote.
    pub trace_write_bytes: u64,
    /// Bytes read from this node's disks.
    pub disk_read_bytes: u64,
    /// Bytes written to this node's disks.
    pub disk_write_bytes: u64,
    /// Bytes sent over the network to remote replicas.
    pub network_bytes: u64,
    /// Bytes written to flash (cache inserts and write buffer).
    pub flash_write_bytes: u64,
    /// Disk requests issued (after splitting into 1 MiB pieces).
    pub disk_requests: u64,
    /// Segments compacted.
    pub compactions: u64,
    /// Fraction of the trace's duration each disk was busy.
    pub disk_utilisation: Vec<f64>,
}

#[derive(Debug)]
struct Segment {
    /// Local file of replica 0; replica r is `base + r`.
    base: u64,
    workload: u32,
    fill: u64,
    dead: u64,
    sealed: bool,
    /// Whether the segment's contents still sit only in the combined log
    /// (and in memory): reads are served from RAM.
    in_memory: bool,
    needles: Vec<(u64, u64, u64)>,
}

#[derive(Clone, Copy, Debug)]
struct Loc {
    segment: u64,
    offset: u64,
    size: u64,
}

#[derive(Debug)]
struct Pending {
    remaining: u32,
    arrival: f64,
    class: IoClass,
    foreground: bool,
}

/// The layered model of one node, fed one trace request at a time.
pub struct Model<C: TieredCache> {
    cfg: ModelConfig,
    cache: C,
    node: Node,
    next_file: u64,
    next_io: u64,
    segments: HashMap<u64, Segment>,
    active: HashMap<u32, u64>,
    locs: HashMap<u64, Loc>,
    buffered: HashMap<u64, u64>,
    buffer_fifo: VecDeque<(u64, u64, u64)>,
    buffer_fill: u64,
    buffer_gen: u64,
    log_offset: u64,
    pending: HashMap<u64, Pending>,
    fg: LatencyHistogram,
    classes: HashMap<IoClass, LatencyHistogram>,
    requests: u64,
    first_time: Option<f64>,
    now: f64,
    ram_hits: u64,
    flash_hits: u64,
    disk_reads: u64,
    trace_read_bytes: u64,
    trace_write_bytes: u64,
    network_bytes: u64,
    buffer_flash_bytes: u64,
    compactions: u64,
}

const LOG_FILE: u64 = u64::MAX;

/// Cold segments per workload that data written before the trace fills.
pub const COLD_STREAMS: u64 = 64;

/// File ids of cold segments: a range the file counter never reaches.
const COLD_FILES: u64 = 1 << 62;

impl<C: TieredCache> Model<C> {
    /// A model of an empty node.
    pub fn new(cfg: ModelConfig, cache: C) -> Result<Model<C>, ModelError> {
        cfg.validate()?;
        let reserved = usize::from(cfg.combined_logging);
        let node = Node::new(cfg.disks as usize, cfg.disk, reserved);
        Ok(Model {
            cfg,
            cache,
            node,
            next_file: 0,
            next_io: 0,
            segments: HashMap::new(),
            active: HashMap::new(),
            locs: HashMap::new(),
            buffered: HashMap::new(),
            buffer_fifo: VecDeque::new(),
            buffer_fill: 0,
            buffer_gen: 0,
            log_offset: 0,
            pending: HashMap::new(),
            fg: LatencyHistogram::default(),
            classes: HashMap::new(),
            requests: 0,
            first_time: None,
            now: 0.0,
            ram_hits: 0,
            flash_hits: 0,
            disk_reads: 0,
            trace_read_bytes: 0,
            trace_write_bytes: 0,
            network_bytes: 0,
            buffer_flash_bytes: 0,
            compactions: 0,
        })
    }

    /// The cache (to read its counters).
    pub fn cache(&self) -> &C {
        &self.cache
    }

    /// Processes one trace request. Times that go backwards are treated as
    /// the latest time seen.
    pub fn apply(&mut self, req: &Request) {
        let t = if req.time.is_finite() {
            req.time.max(self.now)
        } else {
            self.now
        };
        self.first_time.get_or_insert(t);
        self.now = t;
        self.requests += 1;
        self.advance(t);
        match req.op {
            Op::Get => self.get(req, t),
            Op::Put => self.put(req.object, req.workload, req.size, t),
            Op::Delete => self.delete(req.object),
        }
    }

    fn advance(&mut self, t: f64) {
        let Model {
            node,
            pending,
            fg,
            classes,
            ..
        } = self;
        node.advance(t, &mut |c| complete(pending, fg, classes, c));
    }

    #[allow(clippy::too_many_arguments)]
    fn io(
        &mut self,
        disk: Option<usize>,
        t: f64,
        file: u64,
        offset: u64,
        len: u64,
        class: IoClass,
        write: bool,
    ) {
        let id = self.next_io;
        self.next_io += 1;
        let n = self
            .node
            .submit(disk, id, t, file, offset, len, class, write);
        self.pending.insert(
            id,
            Pending {
                remaining: n,
                arrival: t,
                class,
                foreground: class == IoClass::ForegroundRead,
            },
        );
    }

    fn new_file(&mut self) -> u64 {
        let f = self.next_file;
        self.next_file += u64::from(self.cfg.replicas);
        f
    }

    fn new_segment(&mut self, workload: u32, in_memory: bool) -> u64 {
        let base = self.new_file();
        self.segments.insert(
            base,
            Segment {
                base,
                workload,
                fill: 0,
                dead: 0,
                sealed: false,
                in_memory,
                needles: Vec::new(),
            },
        );
        base
    }

    fn segment_bytes(&self) -> u64 {
        match self.cfg.layout {
            Layout::Segments { segment_bytes } => segment_bytes,
            Layout::Files { block_bytes } => block_bytes,
        }
    }

    /// Where a GET of an object never written in the trace reads: it was
    /// written before the trace began into one of [`COLD_STREAMS`] cold
    /// segment files of its workload, both chosen by a hash of its id, so
    /// old data is spread over files (and so over disks) and costs no
    /// memory per object. Cold segments are never compacted.
    fn cold_loc(&self, object: u64, workload: u32) -> (u64, u64) {
        let h = file_id(object, 0, 0);
        let stream = (u64::from(workload) << 8) | (h % COLD_STREAMS);
        let cap = self.segment_bytes().max(1);
        (COLD_FILES | stream, file_id(h, 1, 1) % cap)
    }

    fn get(&mut self, req: &Request, t: f64) {
        let bytes = req.bytes();
        self.trace_read_bytes += bytes;
        if self.buffered.contains_key(&req.object) {
            self.flash_hits += 1;
            self.fg.record(self.cfg.flash_latency_s);
            return;
        }
        match self.cache.read(req.object, bytes) {
            CacheOutcome::Ram => {
                self.ram_hits += 1;
                self.fg.record(0.0);
                return;
            }
            CacheOutcome::Flash => {
                self.flash_hits += 1;
                self.fg.record(self.cfg.flash_latency_s);
                return;
            }
            CacheOutcome::Miss => {}
        }
        let (file, offset) = match self.cfg.layout {
            Layout::Files { block_bytes } => {
                let off = req.offset.unwrap_or(0);
                let block = off / block_bytes;
                (file_id(req.object, block, 0), off % block_bytes)
            }
            Layout::Segments { .. } => {
                let Some(loc) = self.locs.get(&req.object).copied() else {
                    let (file, offset) = self.cold_loc(req.object, req.workload);
                    let off = offset + req.offset.unwrap_or(0);
                    self.disk_reads += 1;
                    self.io(None, t, file, off, bytes, IoClass::ForegroundRead, false);
                    return;
                };
                if self.segments.get(&loc.segment).is_some_and(|s| s.in_memory) {
                    self.ram_hits += 1;
                    self.fg.record(0.0);
                    return;
                }
                (
                    loc.segment,
                    loc.offset + req.offset.unwrap_or(0).min(loc.size),
                )
            }
        };
        self.disk_reads += 1;
        self.io(None, t, file, offset, bytes, IoClass::ForegroundRead, false);
    }

    fn put(&mut self, object: u64, workload: u32, size: u64, t: f64) {
        self.trace_write_bytes += size;
        let r = u64::from(self.cfg.replicas);
        self.network_bytes += (r - 1) * size;
        self.kill(object);
        self.cache.write(object, size);
        if let Some(th) = self.cfg.flash_buffer_threshold {
            if size < th {
                self.buffer_gen += 1;
                self.buffered.insert(object, self.buffer_gen);
                self.buffer_fifo.push_back((object, size, self.buffer_gen));
                self.buffer_fill += size * r;
                self.buffer_flash_bytes += size * r;
                self.classes
                    .entry(IoClass::Log)
                    .or_default()
                    .record(self.cfg.flash_latency_s);
                self.destage(workload, t);
                return;
            }
        }
        self.append(object, workload, size, t, IoClass::Log);
    }

    /// Moves the oldest buffered needles to disk until the buffer fits.
    fn destage(&mut self, workload: u32, t: f64) {
        let r = u64::from(self.cfg.replicas);
        while self.buffer_fill > self.cfg.flash_buffer_bytes {
            let Some((object, size, gen)) = self.buffer_fifo.pop_front() else {
                break;
            };
            self.buffer_fill = self.buffer_fill.saturating_sub(size * r);
            if self.buffered.get(&object) == Some(&gen) {
                self.buffered.remove(&object);
                self.append(object, workload, size, t, IoClass::Destage);
            }
        }
    }

    /// Appends a needle to the workload's active segment on every replica.
    fn append(&mut self, object: u64, workload: u32, size: u64, t: f64, class: IoClass) {
        let r = u64::from(self.cfg.replicas);
        match self.cfg.layout {
            Layout::Files { block_bytes } => {
                let mut off = 0;
                while off < size.max(1) {
                    let len = (size - off).min(block_bytes);
                    for rep in 0..r {
                        let f = file_id(object, off / block_bytes, rep);
                        self.io(None, t, f, 0, len, class, true);
                    }
                    off += block_bytes;
                }
                self.locs.insert(
                    object,
                    Loc {
                        segment: 0,
                        offset: 0,
                        size,
                    },
                );
            }
            Layout::Segments { segment_bytes } => {
                let combined = self.cfg.combined_logging;
                let seg = match self.active.get(&workload) {
                    Some(&s)
                        if self
                            .segments
                            .get(&s)
                            .is_some_and(|sg| sg.fill == 0 || sg.fill + size <= segment_bytes) =>
                    {
                        s
                    }
                    other => {
                        if let Some(&old) = other {
                            self.seal(old, t);
                        }
                        let s = self.new_segment(workload, combined);
                        self.active.insert(workload, s);
                        s
                    }
                };
                let Some(sg) = self.segments.get_mut(&seg) else {
                    return;
                };
                let offset = sg.fill;
                sg.fill += size;
                sg.needles.push((object, offset, size));
                let base = sg.base;
                self.locs.insert(
                    object,
                    Loc {
                        segment: seg,
                        offset,
                        size,
                    },
                );
                if combined {
                    let off = self.log_offset;
                    self.log_offset += size * r;
                    self.io(Some(0), t, LOG_FILE, off, size * r, class, true);
                } else {
                    for rep in 0..r {
                        self.io(None, t, base + rep, offset, size, class, true);
                    }
                }
            }
        }
    }

    /// Seals a full segment: with combined logging its bytes now go from
    /// memory to the data disks; it may be compacted at once.
    fn seal(&mut self, seg: u64, t: f64) {
        let r = u64::from(self.cfg.replicas);
        let Some(sg) = self.segments.get_mut(&seg) else {
            return;
        };
        sg.sealed = true;
        let (base, fill, was_mem) = (sg.base, sg.fill, sg.in_memory);
        sg.in_memory = false;
        if was_mem {
            for rep in 0..r {
                self.io(None, t, base + rep, 0, fill, IoClass::Flush, true);
            }
        }
        self.maybe_compact(seg, t);
    }

    /// Marks an object's old needle dead (overwrite or delete).
    fn kill(&mut self, object: u64) {
        self.buffered.remove(&object);
        let Some(loc) = self.locs.remove(&object) else {
            return;
        };
        if let Some(sg) = self.segments.get_mut(&loc.segment) {
            sg.dead += loc.size;
            if sg.sealed {
                let seg = loc.segment;
                let now = self.now;
                self.maybe_compact(seg, now);
            }
        }
    }

    fn delete(&mut self, object: u64) {
        self.kill(object);
        self.cache.remove(object);
    }

    fn maybe_compact(&mut self, seg: u64, t: f64) {
        let Some(sg) = self.segments.get(&seg) else {
            return;
        };
        if !sg.sealed || sg.fill == 0 {
            return;
        }
        if (sg.dead as f64) < self.cfg.compaction_threshold * sg.fill as f64 {
            return;
        }
        let Some(sg) = self.segments.remove(&seg) else {
            return;
        };
        for rep in 0..u64::from(self.cfg.replicas) {
            self.node.forget(sg.base + rep);
        }
        self.compactions += 1;
        let r = u64::from(self.cfg.replicas);
        let readers = if self.cfg.local_compaction { r } else { 1 };
        // Live needles, coalesced into runs of adjacent ones.
        let mut live: Vec<(u64, u64, u64)> = sg
            .needles
            .iter()
            .copied()
            .filter(|(o, off, _)| {
                self.locs
                    .get(o)
                    .is_some_and(|l| l.segment == seg && l.offset == *off)
            })
            .collect();
        live.sort_by_key(|n| n.1);
        let mut runs: Vec<(u64, u64)> = Vec::new();
        for &(_, off, size) in &live {
            match runs.last_mut() {
                Some((s, l)) if *s + *l == off && *l + size <= crate::node::MAX_IO => *l += size,
                _ => runs.push((off, size)),
            }
        }
        for &(off, len) in &runs {
            for rep in 0..readers {
                self.io(None, t, sg.base + rep, off, len, IoClass::Compaction, false);
            }
        }
        let live_bytes: u64 = live.iter().map(|n| n.2).sum();
        if !self.cfg.local_compaction {
            self.network_bytes += (r - 1) * live_bytes;
        }
        for (object, _, size) in live {
            self.locs.remove(&object);
            self.append(object, sg.workload, size, t, IoClass::Compaction);
        }
    }

    /// Finishes all queued I/O and reports.
    pub fn finish(mut self) -> ModelReport {
        {
            let Model {
                node,
                pending,
                fg,
                classes,
                ..
            } = &mut self;
            node.drain(&mut |c| complete(pending, fg, classes, c));
        }
        let duration = self.first_time.map(|f| self.now - f).unwrap_or(0.0);
        let disk_classes = IoClass::ALL
            .iter()
            .filter_map(|c| {
                self.classes.get(c).map(|h| ClassLatency {
                    class: *c,
                    latency: h.summary(),
                })
            })
            .collect();
        let disk_utilisation = self
            .node
            .busy_seconds()
            .into_iter()
            .map(|b| if duration > 0.0 { b / duration } else { 0.0 })
            .collect();
        ModelReport {
            requests: self.requests,
            duration_s: duration,
            foreground: self.fg.summary(),
            disk_classes,
            ram_hits: self.ram_hits,
            flash_hits: self.flash_hits,
            disk_reads: self.disk_reads,
            trace_read_bytes: self.trace_read_bytes,
            trace_write_bytes: self.trace_write_bytes,
            disk_read_bytes: self.node.disk_read_bytes(),
            disk_write_bytes: self.node.disk_write_bytes(),
            network_bytes: self.network_bytes,
            flash_write_bytes: self.cache.flash_bytes_written() + self.buffer_flash_bytes,
            disk_requests: self.node.disk_requests(),
            compactions: self.compactions,
            disk_utilisation,
            config: self.cfg,
        }
    }
}

fn complete(
    pending: &mut HashMap<u64, Pending>,
    fg: &mut LatencyHistogram,
    classes: &mut HashMap<IoClass, LatencyHistogram>,
    c: Completion,
) {
    let id = c.request.id;
    let Some(p) = pending.get_mut(&id) else {
        return;
    };
    p.remaining = p.remaining.saturating_sub(1);
    if p.remaining == 0 {
        let latency = c.finish - p.arrival;
        classes.entry(p.class).or_default().record(latency);
        if p.foreground {
            fg.record(latency);
        }
        pending.remove(&id);
    }
}

/// A local file id for block `block` of `object` on replica `rep` (files
/// layout): a hash, so files of different objects are far apart.
fn file_id(object: u64, block: u64, rep: u64) -> u64 {
    let mut x = object
        ^ block.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ rep.wrapping_mul(0xC2B2_AE3D_27D4_EB4F);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    (x ^ (x >> 31)) & !(1 << 63)
}

/// Spreads requests that share a timestamp evenly over the gap to the next
/// distinct timestamp, so a trace with one-second resolution does not
/// arrive in bursts once a second. Keeps at most one timestamp's requests.
#[derive(Debug, Default)]
pub struct TimeSpreader {
    held: Vec<Request>,
    last_gap: f64,
}

impl TimeSpreader {
    /// A spreader holding nothing.
    pub fn new() -> TimeSpreader {
        TimeSpreader::default()
    }

    /// Feeds one request; releases the held group (with spread times) when
    /// a new timestamp starts.
    pub fn push(&mut self, req: Request, out: &mut impl FnMut(Request)) {
        if let Some(first) = self.held.first() {
            if req.time != first.time {
                let gap = req.time - first.time;
                if gap > 0.0 && gap.is_finite() {
                    self.last_gap = gap;
                }
                self.release(gap, out);
            }
        }
        self.held.push(req);
    }

    /// Releases what is held (the last group spreads over the last gap).
    pub fn finish(&mut self, out: &mut impl FnMut(Request)) {
        let gap = self.last_gap;
        self.release(gap, out);
    }

    fn release(&mut self, gap: f64, out: &mut impl FnMut(Request)) {
        let n = self.held.len() as f64;
        let gap = if gap > 0.0 && gap.is_finite() {
            gap
        } else {
            0.0
        };
        for (i, mut r) in self.held.drain(..).enumerate() {
            r.time += gap * i as f64 / n;
            out(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn get(t: f64, o: u64, size: u64) -> Request {
        Request::new(t, Op::Get, o, 0, size)
    }
    fn put(t: f64, o: u64, size: u64) -> Request {
        Request::new(t, Op::Put, o, 0, size)
    }

    #[test]
    fn replication_triples_writes_and_counts_network() {
        let cfg = ModelConfig::default();
        let mut m = Model::new(cfg, NoCache).unwrap();
        for i in 0..100 {
            m.apply(&put(i as f64, i, 1000));
        }
        for i in 0..100 {
            m.apply(&get(200.0 + i as f64, i, 1000));
        }
        let r = m.finish();
        assert_eq!(r.trace_write_bytes, 100_000);
        assert_eq!(r.disk_write_bytes, 300_000);
        assert_eq!(r.network_bytes, 200_000);
        assert_eq!(r.disk_read_bytes, 100_000);
        assert_eq!(r.disk_reads, 100);
        assert_eq!(r.foreground.count, 100);
    }

    #[test]
    fn local_compaction_trades_network_for_disk_reads() {
        let run = |local: bool| {
            let cfg = ModelConfig {
                local_compaction: local,
                layout: Layout::Segments {
                    segment_bytes: 10_000,
                },
                ..ModelConfig::default()
            };
            let mut m = Model::new(cfg, NoCache).unwrap();
            let mut t = 0.0;
            // Fill segments, then overwrite most objects so old segments
            // become garbage and are compacted.
            for round in 0..3 {
                for i in 0..100u64 {
                    if round == 0 || i % 4 != 0 {
                        m.apply(&put(t, i, 1000));
                    }
                    t += 0.1;
                }
            }
            m.finish()
        };
        let base = run(false);
        let local = run(true);
        assert!(base.compactions > 0);
        assert_eq!(base.compactions, local.compactions);
        assert!(local.network_bytes < base.network_bytes);
        assert!(local.disk_read_bytes > base.disk_read_bytes);
        // Exactly R-1 extra reads for every byte the network no longer carries.
        let saved_net = base.network_bytes - local.network_bytes;
        let extra_reads = local.disk_read_bytes - base.disk_read_bytes;
        assert_eq!(saved_net, extra_reads);
    }

    #[test]
    fn combined_logging_writes_the_log_sequentially_on_one_disk() {
        let run = |combined: bool| {
            let cfg = ModelConfig {
                combined_logging: combined,
                disks: 4,
                ..ModelConfig::default()
            };
            let mut m = Model::new(cfg, NoCache).unwrap();
            for i in 0..3000u64 {
                // three workloads interleaved: three streams of appends
                let mut r = put(i as f64 * 0.002, i, 4096);
                r.workload = (i % 3) as u32;
                m.apply(&r);
            }
            m.finish()
        };
        let base = run(false);
        let comb = run(true);
        let log = |r: &ModelReport| {
            r.disk_classes
                .iter()
                .find(|c| c.class == IoClass::Log)
                .map(|c| c.latency.mean_ms)
                .unwrap()
        };
        assert!(
            log(&comb) < log(&base) / 2.0,
            "{} vs {}",
            log(&comb),
            log(&base)
        );
    }

    #[test]
    fn flash_buffer_absorbs_small_writes() {
        let cfg = ModelConfig {
            flash_buffer_threshold: Some(10_000),
            flash_buffer_bytes: 1 << 30,
            ..ModelConfig::default()
        };
        let mut m = Model::new(cfg, NoCache).unwrap();
        m.apply(&put(0.0, 1, 5000));
        m.apply(&put(0.0, 2, 50_000));
        m.apply(&get(1.0, 1, 5000));
        m.apply(&get(1.0, 2, 50_000));
        let r = m.finish();
        assert_eq!(r.disk_write_bytes, 150_000);
        assert_eq!(r.flash_hits, 1);
        assert_eq!(r.disk_reads, 1);
        assert_eq!(r.flash_write_bytes, 15_000);
    }

    #[test]
    fn spreader_spreads_equal_timestamps() {
        let mut s = TimeSpreader::new();
        let mut out = Vec::new();
        for t in [0.0, 0.0, 0.0, 0.0, 1.0, 1.0] {
            s.push(get(t, 1, 1), &mut |r| out.push(r.time));
        }
        s.finish(&mut |r| out.push(r.time));
        assert_eq!(out, vec![0.0, 0.25, 0.5, 0.75, 1.0, 1.5]);
    }

    #[test]
    fn bad_settings_are_rejected() {
        let cfg = ModelConfig {
            replicas: 0,
            ..ModelConfig::default()
        };
        assert!(Model::new(cfg, NoCache).is_err());
        let cfg = ModelConfig {
            combined_logging: true,
            disks: 1,
            ..ModelConfig::default()
        };
        assert!(Model::new(cfg, NoCache).is_err());
    }
}
