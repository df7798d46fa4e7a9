//! The native part of `strata_lab`: Strata's lab crates called from
//! Python. Every entry point releases the GIL while the Rust code runs and
//! answers plain data (bytes of little-endian columns, JSON text) that the
//! Python side (`strata_lab/__init__.py`) turns into NumPy arrays, pandas
//! DataFrames and dataclasses. Errors are Python exceptions carrying the
//! Rust message.

use std::collections::HashMap;
use std::path::PathBuf;

use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use strata_policy::{PolicySpec, Unit};
use strata_provision::{AgeBuckets, Amount, CollectConfig, Collector, Config, Eviction, Prices};
use strata_sim::mrc::{ExactMrc, Shards, ShardsMode, DEFAULT_SEED};
use strata_sim::{run, working_set, AccessSource, RunOptions, SimConfig};
use strata_trace::{Format, Op, OpenOptions, TraceReader};

fn bad(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

fn io(path: &str, e: impl std::fmt::Display) -> PyErr {
    PyOSError::new_err(format!("{path}: {e}"))
}

fn format_of(format: Option<&str>) -> PyResult<Option<Format>> {
    format.map(|f| f.parse::<Format>().map_err(bad)).transpose()
}

fn unit_of(unit: &str) -> PyResult<Unit> {
    match unit {
        "bytes" => Ok(Unit::Bytes),
        "objects" => Ok(Unit::Objects),
        u => Err(bad(format!(
            "unknown unit {u:?}: use \"bytes\" or \"objects\""
        ))),
    }
}

/// A trace read in chunks of columns.
#[pyclass(unsendable)]
struct Reader {
    path: String,
    inner: Option<TraceReader>,
}

#[pymethods]
impl Reader {
    /// The next `n` requests as little-endian columns (time f64, op u8:
    /// 0 get 1 put 2 delete, object u64, workload u32, size u64), or None at
    /// the end of the trace.
    #[allow(clippy::type_complexity)]
    fn next_chunk<'py>(
        &mut self,
        py: Python<'py>,
        n: usize,
    ) -> PyResult<Option<Vec<Bound<'py, PyBytes>>>> {
        let Some(mut reader) = self.inner.take() else {
            return Ok(None);
        };
        let path = self.path.clone();
        let (cols, reader, err) = py.detach(move || {
            let mut cols: [Vec<u8>; 5] = Default::default();
            let mut err = None;
            let mut count = 0;
            while count < n {
                match reader.next() {
                    None => break,
                    Some(Err(e)) => {
                        err = Some(e.to_string());
                        break;
                    }
                    Some(Ok(r)) => {
                        cols[0].extend_from_slice(&r.time.to_le_bytes());
                        cols[1].push(match r.op {
                            Op::Get => 0,
                            Op::Put => 1,
                            Op::Delete => 2,
                        });
                        cols[2].extend_from_slice(&r.object.to_le_bytes());
                        cols[3].extend_from_slice(&r.workload.to_le_bytes());
                        cols[4].extend_from_slice(&r.size.to_le_bytes());
                        count += 1;
                    }
                }
            }
            let done = count < n;
            (cols, (!done).then_some(reader), err)
        });
        if let Some(e) = err {
            return Err(io(&path, e));
        }
        self.inner = reader;
        if cols[1].is_empty() {
            return Ok(None);
        }
        Ok(Some(cols.iter().map(|c| PyBytes::new(py, c)).collect()))
    }
}

/// Opens a trace (any format the command line reads, compressed or not).
#[pyfunction]
#[pyo3(signature = (path, format=None))]
fn open_trace(path: PathBuf, format: Option<&str>) -> PyResult<Reader> {
    let mut opts = OpenOptions::new();
    if let Some(f) = format_of(format)? {
        opts = opts.format(f);
    }
    let shown = path.display().to_string();
    let inner = opts.open(&path).map_err(|e| io(&shown, e))?;
    Ok(Reader {
        path: shown,
        inner: Some(inner),
    })
}

/// A size: "10%" of the working set, or a number of units.
fn resolve_sizes(
    sizes: &[String],
    path: &std::path::Path,
    format: Option<Format>,
    unit: Unit,
) -> PyResult<Vec<u64>> {
    let shown = path.display().to_string();
    let mut whole = None;
    let mut out = Vec::with_capacity(sizes.len());
    for s in sizes {
        let s = s.trim();
        if let Some(p) = s.strip_suffix('%') {
            let p: f64 = p
                .trim()
                .parse()
                .ok()
                .filter(|p: &f64| p.is_finite() && *p > 0.0 && *p <= 100.0)
                .ok_or_else(|| bad(format!("bad size {s:?}: a percentage in (0, 100]")))?;
            let w = match whole {
                Some(w) => w,
                None => {
                    let src = AccessSource::open(path, format).map_err(|e| io(&shown, e))?;
                    let ws = working_set(src, |_| {}).map_err(|e| io(&shown, e))?;
                    let w = match unit {
                        Unit::Bytes => ws.bytes,
                        Unit::Objects => ws.objects,
                    };
                    whole = Some(w);
                    w
                }
            };
            // Truncated, as the command line and libCacheSim do.
            out.push((w as f64 * p / 100.0) as u64);
        } else {
            let v: u64 = s.parse().map_err(|_| {
                bad(format!(
                    "bad size {s:?}: a whole number of units or a percentage like \"10%\""
                ))
            })?;
            out.push(v);
        }
    }
    if out.contains(&0) {
        return Err(bad("a cache size resolved to 0 units; give a larger size"));
    }
    Ok(out)
}

/// Simulates every policy at every size in one read of the trace, on all
/// cores; answers the reports as a JSON array (`strata sim --json`'s rows).
#[pyfunction]
#[pyo3(signature = (path, policies, sizes, unit="bytes", format=None, threads=None))]
fn simulate_json(
    py: Python<'_>,
    path: PathBuf,
    policies: &str,
    sizes: Vec<String>,
    unit: &str,
    format: Option<&str>,
    threads: Option<usize>,
) -> PyResult<String> {
    let unit = unit_of(unit)?;
    let format = format_of(format)?;
    let pols: Vec<PolicySpec> = strata_policy::parse_list(policies).map_err(bad)?;
    if pols.is_empty() {
        return Err(bad("no policy given"));
    }
    if pols.iter().any(|p| matches!(p, PolicySpec::Belady)) {
        return Err(bad(
            "belady needs every request's next use: run `strata sim` for it",
        ));
    }
    py.detach(|| {
        let sizes = resolve_sizes(&sizes, &path, format, unit)?;
        let configs: Vec<SimConfig> = pols
            .iter()
            .flat_map(|p| sizes.iter().map(|&s| SimConfig::single(p.clone(), s, unit)))
            .collect();
        let opts = RunOptions {
            threads: threads
                .unwrap_or_else(|| RunOptions::default().threads)
                .max(1),
        };
        let shown = path.display().to_string();
        let src = AccessSource::open(&path, format).map_err(|e| io(&shown, e))?;
        let reports = run(src, &configs, &opts, |_| {}).map_err(|e| io(&shown, e))?;
        serde_json::to_string(&reports).map_err(bad)
    })
}

/// The exact miss-ratio curve and/or the SHARDS estimate at `sizes`
/// (resolved as in [`simulate_json`]; `points` even steps of the working
/// set when empty); answers `{"exact": [...], "shards": [...]}`.
#[pyfunction]
#[pyo3(signature = (path, exact=true, sample=None, sizes=Vec::new(), points=20, unit="bytes", format=None, seed=None))]
#[allow(clippy::too_many_arguments)]
fn mrc_json(
    py: Python<'_>,
    path: PathBuf,
    exact: bool,
    sample: Option<f64>,
    sizes: Vec<String>,
    points: u32,
    unit: &str,
    format: Option<&str>,
    seed: Option<u64>,
) -> PyResult<String> {
    let unit = unit_of(unit)?;
    let format = format_of(format)?;
    if !exact && sample.is_none() {
        return Err(bad("ask for exact=True, a sample rate, or both"));
    }
    if let Some(r) = sample {
        if !(r > 0.0 && r <= 1.0) {
            return Err(bad(format!("sample={r}: a rate in (0, 1], e.g. 0.01")));
        }
    }
    if points == 0 {
        return Err(bad("points must be at least 1"));
    }
    py.detach(|| {
        let shown = path.display().to_string();
        let grid = if sizes.is_empty() {
            let src = AccessSource::open(&path, format).map_err(|e| io(&shown, e))?;
            let ws = working_set(src, |_| {}).map_err(|e| io(&shown, e))?;
            let whole = match unit {
                Unit::Bytes => ws.bytes,
                Unit::Objects => ws.objects,
            };
            (1..=points)
                .map(|i| (whole as f64 * f64::from(i) / f64::from(points)) as u64)
                .collect()
        } else {
            resolve_sizes(&sizes, &path, format, unit)?
        };
        let mut ex = exact.then(|| ExactMrc::new(unit, &grid));
        let mut sh = sample.map(|r| {
            Shards::new(unit, ShardsMode::FixedRate(r)).with_seed(seed.unwrap_or(DEFAULT_SEED))
        });
        let src = AccessSource::open(&path, format).map_err(|e| io(&shown, e))?;
        for batch in src {
            let batch = batch.map_err(|e| io(&shown, e))?;
            if let Some(e) = ex.as_mut() {
                e.access_batch(&batch);
            }
            if let Some(s) = sh.as_mut() {
                s.access_batch(&batch);
            }
        }
        let out = serde_json::json!({
            "exact": ex.map(|e| e.curve(&grid)),
            "shards": sh.map(|s| s.curve(&grid)),
        });
        Ok(out.to_string())
    })
}

/// The workload characterisation of `strata analyze --json`.
#[pyfunction]
#[pyo3(signature = (path, format=None))]
fn analyze_json(py: Python<'_>, path: PathBuf, format: Option<&str>) -> PyResult<String> {
    let format = format_of(format)?;
    py.detach(|| {
        let shown = path.display().to_string();
        let mut opts = OpenOptions::new();
        if let Some(f) = format {
            opts = opts.format(f);
        }
        let reader = opts.open(&path).map_err(|e| io(&shown, e))?;
        let mut a =
            strata_analyze::Analyzer::new(strata_analyze::AnalyzeConfig::default()).map_err(bad)?;
        for r in reader {
            a.push(&r.map_err(|e| io(&shown, e))?);
        }
        let out = a.finish();
        if out.requests == 0 {
            return Err(bad(format!("{shown}: the trace has no requests")));
        }
        serde_json::to_string(&out).map_err(bad)
    })
}

/// Janus provisioning (`strata provision`): `{"provision": ..., "plan": ...}`.
#[pyfunction]
#[pyo3(signature = (path, flash_bytes, policy="fifo", write_bound_bytes_per_s=None, format=None))]
fn provision_json(
    py: Python<'_>,
    path: PathBuf,
    flash_bytes: f64,
    policy: &str,
    write_bound_bytes_per_s: Option<f64>,
    format: Option<&str>,
) -> PyResult<String> {
    let format = format_of(format)?;
    let policy = match policy.to_ascii_lowercase().as_str() {
        "fifo" => Eviction::Fifo,
        "lru" => Eviction::Lru,
        p => return Err(bad(format!("unknown policy {p:?}: use fifo or lru"))),
    };
    if !(flash_bytes.is_finite() && flash_bytes > 0.0) {
        return Err(bad("flash_bytes must be a positive number of bytes"));
    }
    py.detach(|| {
        let shown = path.display().to_string();
        let buckets = AgeBuckets::geometric(0.01, 366.0 * 86400.0, 8).map_err(bad)?;
        let mut collector = Collector::new(CollectConfig::new(buckets.clone())).map_err(bad)?;
        let mut opts = OpenOptions::new();
        if let Some(f) = format {
            opts = opts.format(f);
        }
        let mut reader = opts.open(&path).map_err(|e| io(&shown, e))?;
        for r in reader.by_ref() {
            if !collector.push(&r.map_err(|e| io(&shown, e))?) {
                break;
            }
        }
        // Names may be given as the trace goes on: read them at its end.
        let names: Vec<String> = reader.workload_names().to_vec();
        let collected = collector
            .finish()
            .map_err(|e| bad(format!("{shown}: {e}")))?;
        let config = Config {
            policy,
            flash: Amount::Absolute(flash_bytes),
            write_bound: write_bound_bytes_per_s.map(Amount::Absolute),
            weights: HashMap::new(),
            prices: Prices::default(),
            // The warm-age recommendation is `strata provision --ec`'s.
            warm: None,
        };
        let mut result = strata_provision::provision(&collected, &buckets, &config).map_err(bad)?;
        for w in &mut result.workloads {
            w.name = names.get(w.id as usize).filter(|n| !n.is_empty()).cloned();
        }
        let plan = result.plan();
        Ok(serde_json::json!({ "provision": result, "plan": plan }).to_string())
    })
}

/// The native module.
#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Reader>()?;
    m.add_function(wrap_pyfunction!(open_trace, m)?)?;
    m.add_function(wrap_pyfunction!(simulate_json, m)?)?;
    m.add_function(wrap_pyfunction!(mrc_json, m)?)?;
    m.add_function(wrap_pyfunction!(analyze_json, m)?)?;
    m.add_function(wrap_pyfunction!(provision_json, m)?)?;
    Ok(())
}
