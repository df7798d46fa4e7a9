//! Simulating every system of the grid on a trace, in parallel, in one read
//! of the trace.

use crate::hardware::CostModel;
use crate::CostError;
use serde::Serialize;
use std::collections::HashMap;
use strata_devmodel::{
    DiskParams, FlashHit, LatencySummary, Layout, Model, ModelConfig, PolicyCache,
};
use strata_policy::PolicySpec;
use strata_trace::{Request, TraceError};

const GB: f64 = 1e9;
const YEAR_S: f64 = 365.25 * 86400.0;

/// One system of the grid and what it cost and did.
#[derive(Clone, Debug, Serialize)]
pub struct SystemResult {
    /// Label: RAM level letter (A, B, C, ...), flash level digit, disks,
    /// e.g. `A1/10d` (the study's naming, plus the disks).
    pub label: String,
    /// RAM, GB (as priced).
    pub ram_gb: f64,
    /// Flash, GB (as priced).
    pub flash_gb: f64,
    /// Disks.
    pub disks: u32,
    /// RAM simulated, bytes (after scaling).
    pub ram_bytes_simulated: u64,
    /// Flash simulated, bytes (after scaling).
    pub flash_bytes_simulated: u64,
    /// Purchase cost, dollars.
    pub capex: f64,
    /// Replacement of failed disks, dollars per year.
    pub opex_disk: f64,
    /// Replacement of failed DIMMs, dollars per year.
    pub opex_ram: f64,
    /// Replacement of worn-out flash, dollars per year.
    pub opex_flash: f64,
    /// Total opex, dollars per year.
    pub opex: f64,
    /// Years until the flash wears out at the trace's write rate (none
    /// when nothing is written to flash or there is no flash).
    pub flash_lifetime_years: Option<f64>,
    /// Foreground read latency (all GETs, including cache hits).
    pub latency: LatencySummary,
    /// Fraction of GETs served by RAM or flash.
    pub hit_ratio: f64,
    /// GETs served by RAM.
    pub ram_hits: u64,
    /// GETs served by flash.
    pub flash_hits: u64,
    /// GETs that went to disk.
    pub disk_reads: u64,
    /// Bytes read from disk.
    pub disk_read_bytes: u64,
    /// Bytes written to disk.
    pub disk_write_bytes: u64,
    /// Bytes written to flash.
    pub flash_write_bytes: u64,
    /// Network bytes to remote replicas.
    pub network_bytes: u64,
    /// Mean disk utilisation.
    pub disk_utilisation: f64,
    /// Whether the system is justifiable: no other system is both cheaper
    /// (or as cheap) and faster (or as fast), and strictly better in one.
    pub pareto: bool,
}

/// The whole exploration.
#[derive(Clone, Debug, Serialize)]
pub struct CostReport {
    /// The model used.
    pub model: CostModel,
    /// Scale applied to the grid's cache sizes for simulation.
    pub scale: f64,
    /// How the scale was chosen.
    pub scale_note: String,
    /// Working set of the trace (bytes of distinct objects).
    pub working_set_bytes: u64,
    /// Requests simulated.
    pub requests: u64,
    /// Trace seconds simulated.
    pub duration_s: f64,
    /// Every system, in grid order.
    pub systems: Vec<SystemResult>,
    /// Labels of the Pareto set, cheapest first.
    pub pareto: Vec<String>,
}

/// Bytes of distinct objects in a trace (each counted at its first size):
/// the working set the grid's cache sizes are scaled to.
pub fn working_set<E>(trace: impl Iterator<Item = Result<Request, E>>) -> Result<(u64, u64), E> {
    let mut seen: HashMap<u64, ()> = HashMap::new();
    let mut bytes = 0u64;
    let mut n = 0u64;
    for r in trace {
        let r = r?;
        n += 1;
        if seen.insert(r.object, ()).is_none() {
            bytes += r.size;
        }
    }
    Ok((bytes, n))
}

struct Spec {
    label: String,
    ram_gb: f64,
    flash_gb: f64,
    disks: u32,
    ram_bytes: u64,
    flash_bytes: u64,
}

fn letter(i: usize) -> char {
    (b'A' + (i % 26) as u8) as char
}

/// Simulates every system of `model`'s grid on `trace` and prices it.
///
/// `working_set_bytes` sets the automatic scale (see
/// [`crate::Simulation::reference_working_set_gb`]); `progress` is called
/// with the number of requests read so far.
pub fn explore(
    model: &CostModel,
    trace: impl Iterator<Item = Result<Request, TraceError>>,
    working_set_bytes: u64,
    threads: usize,
    progress: &(dyn Fn(u64) + Sync),
) -> Result<CostReport, CostError> {
    model.validate()?;
    let sim = &model.simulation;
    let (scale, scale_note) = match sim.scale {
        Some(s) => (s, format!("cache sizes scaled by {s} as configured")),
        None => {
            let s = working_set_bytes as f64 / (sim.reference_working_set_gb * GB);
            (
                s,
                format!(
                    "cache sizes scaled by {s:.3e}: the trace's working set ({:.3} GB) over the {} GB per node \
                     the study's sizes were chosen for; capex is priced at the unscaled sizes",
                    working_set_bytes as f64 / GB,
                    sim.reference_working_set_gb
                ),
            )
        }
    };
    let policy: PolicySpec = sim
        .policy
        .parse()
        .map_err(|e: strata_policy::PolicyError| CostError::Config(e.to_string()))?;
    let flash_hit = if sim.flash_hit == "keep" {
        FlashHit::Keep
    } else {
        FlashHit::Promote
    };
    let mut specs = Vec::new();
    for (ri, &ram) in model.grid.ram_gb.iter().enumerate() {
        for (fi, &flash) in model.grid.flash_gb.iter().enumerate() {
            for &disks in &model.grid.disks {
                specs.push(Spec {
                    label: format!("{}{}/{}d", letter(ri), fi, disks),
                    ram_gb: ram,
                    flash_gb: flash,
                    disks,
                    ram_bytes: (ram * GB * scale).round() as u64,
                    flash_bytes: (flash * GB * scale).round() as u64,
                });
            }
        }
    }
    let disk = DiskParams {
        seek_s: model.disk.seek_ms / 1e3,
        bandwidth: model.disk.bandwidth_mb_s * 1e6,
        ..DiskParams::default()
    };
    let make = |s: &Spec| -> Result<Model<PolicyCache>, CostError> {
        let cfg = ModelConfig {
            replicas: sim.replicas,
            disks: s.disks,
            disk,
            flash_latency_s: model.flash.latency_ms / 1e3,
            layout: Layout::Segments {
                segment_bytes: sim.segment_mib << 20,
            },
            ..ModelConfig::default()
        };
        let cache = PolicyCache::new(
            &policy,
            s.ram_bytes,
            s.flash_bytes,
            flash_hit,
            sim.write_allocate,
        );
        Model::new(cfg, cache).map_err(|e| CostError::Config(e.to_string()))
    };
    let mut models = Vec::with_capacity(specs.len());
    for s in &specs {
        models.push(make(s)?);
    }

    let (reports, requests) = strata_devmodel::run_models(models, trace, threads, true, progress)?;
    let duration_s = reports.first().map(|r| r.duration_s).unwrap_or(0.0);

    let mut systems: Vec<SystemResult> = specs
        .iter()
        .zip(&reports)
        .map(|(s, r)| price(model, s, r))
        .collect();
    mark_pareto(&mut systems);
    let mut pareto: Vec<&SystemResult> = systems.iter().filter(|s| s.pareto).collect();
    pareto.sort_by(|a, b| a.capex.total_cmp(&b.capex));
    let pareto = pareto.iter().map(|s| s.label.clone()).collect();
    Ok(CostReport {
        model: model.clone(),
        scale,
        scale_note,
        working_set_bytes,
        requests,
        duration_s,
        systems,
        pareto,
    })
}

fn price(model: &CostModel, s: &Spec, r: &strata_devmodel::ModelReport) -> SystemResult {
    let capex = f64::from(s.disks) * model.disk.price
        + s.ram_gb * model.ram.price_per_gb
        + s.flash_gb * model.flash.price_per_gb;
    let opex_disk = f64::from(s.disks) * model.disk.afr * model.disk.price;
    let dimms = (s.ram_gb / model.ram.dimm_gb).ceil();
    let opex_ram = dimms * model.ram.afr * model.ram.dimm_gb * model.ram.price_per_gb;
    let writes_per_year = if r.duration_s > 0.0 {
        r.flash_write_bytes as f64 / r.duration_s * YEAR_S
    } else {
        0.0
    };
    // Wear levelling spreads the simulated flash writes over the device as
    // bought (the priced capacity), not over the scaled simulated cache.
    let flash_lifetime_years = (s.flash_gb > 0.0 && writes_per_year > 0.0)
        .then(|| s.flash_gb * GB * model.flash.pe_cycles / writes_per_year);
    let opex_flash = match flash_lifetime_years {
        Some(y) if y > 0.0 => s.flash_gb * model.flash.price_per_gb / y,
        _ => 0.0,
    };
    let gets = r.ram_hits + r.flash_hits + r.disk_reads;
    let util = if r.disk_utilisation.is_empty() {
        0.0
    } else {
        r.disk_utilisation.iter().sum::<f64>() / r.disk_utilisation.len() as f64
    };
    SystemResult {
        label: s.label.clone(),
        ram_gb: s.ram_gb,
        flash_gb: s.flash_gb,
        disks: s.disks,
        ram_bytes_simulated: s.ram_bytes,
        flash_bytes_simulated: s.flash_bytes,
        capex,
        opex_disk,
        opex_ram,
        opex_flash,
        opex: opex_disk + opex_ram + opex_flash,
        flash_lifetime_years,
        latency: r.foreground.clone(),
        hit_ratio: if gets == 0 {
            0.0
        } else {
            (r.ram_hits + r.flash_hits) as f64 / gets as f64
        },
        ram_hits: r.ram_hits,
        flash_hits: r.flash_hits,
        disk_reads: r.disk_reads,
        disk_read_bytes: r.disk_read_bytes,
        disk_write_bytes: r.disk_write_bytes,
        flash_write_bytes: r.flash_write_bytes,
        network_bytes: r.network_bytes,
        disk_utilisation: util,
        pareto: false,
    }
}

/// Latency differences smaller than this fraction count as ties when
/// deciding dominance, so that simulation noise does not make a dearer
/// system "justifiable" by a hair's breadth.
pub const LATENCY_TIE: f64 = 0.005;

/// Marks the systems no other system dominates on (capex, mean latency):
/// `j` dominates `i` when it costs no more, is no slower (within
/// [`LATENCY_TIE`]), and is cheaper or clearly faster.
pub fn mark_pareto(systems: &mut [SystemResult]) {
    let pts: Vec<(f64, f64)> = systems
        .iter()
        .map(|s| (s.capex, s.latency.mean_ms))
        .collect();
    for (i, s) in systems.iter_mut().enumerate() {
        let (c, l) = pts[i];
        let tol = l.abs() * LATENCY_TIE;
        s.pareto = !pts
            .iter()
            .enumerate()
            .any(|(j, &(c2, l2))| j != i && c2 <= c && l2 <= l + tol && (c2 < c || l2 < l - tol));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use strata_trace::Op;

    fn sys(label: &str, capex: f64, lat: f64) -> SystemResult {
        SystemResult {
            label: label.into(),
            ram_gb: 0.0,
            flash_gb: 0.0,
            disks: 1,
            ram_bytes_simulated: 0,
            flash_bytes_simulated: 0,
            capex,
            opex_disk: 0.0,
            opex_ram: 0.0,
            opex_flash: 0.0,
            opex: 0.0,
            flash_lifetime_years: None,
            latency: LatencySummary {
                mean_ms: lat,
                ..LatencySummary::default()
            },
            hit_ratio: 0.0,
            ram_hits: 0,
            flash_hits: 0,
            disk_reads: 0,
            disk_read_bytes: 0,
            disk_write_bytes: 0,
            flash_write_bytes: 0,
            network_bytes: 0,
            disk_utilisation: 0.0,
            pareto: false,
        }
    }

    #[test]
    fn pareto_keeps_only_undominated_systems() {
        let mut v = vec![
            sys("cheap-slow", 1.0, 10.0),
            sys("mid", 2.0, 5.0),
            sys("dominated", 3.0, 6.0),
            sys("fast", 4.0, 1.0),
            sys("tie", 2.0, 5.0),
            sys("hair-faster-but-dearer", 2.5, 4.99),
        ];
        mark_pareto(&mut v);
        let p: Vec<&str> = v
            .iter()
            .filter(|s| s.pareto)
            .map(|s| s.label.as_str())
            .collect();
        assert_eq!(p, vec!["cheap-slow", "mid", "fast", "tie"]);
    }

    #[test]
    fn grid_runs_and_more_cache_is_never_slower_here() {
        // A skewed read trace: 2000 objects, 50 of them hot.
        let mut reqs = Vec::new();
        let mut x = 12345u64;
        for i in 0..60_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let o = if x.is_multiple_of(4) {
                x % 2000
            } else {
                x % 50
            };
            reqs.push(Ok(Request::new(i as f64 * 0.005, Op::Get, o, 0, 100_000)));
        }
        let model = CostModel {
            simulation: crate::Simulation {
                scale: Some(1e-4),
                ..crate::Simulation::default()
            },
            ..CostModel::default()
        };
        let rep = explore(&model, reqs.into_iter(), 200_000_000, 2, &|_| {}).unwrap();
        assert_eq!(rep.systems.len(), 36);
        assert_eq!(rep.requests, 60_000);
        assert!(!rep.pareto.is_empty());
        // The cheapest system is always justifiable.
        let cheapest = rep
            .systems
            .iter()
            .min_by(|a, b| a.capex.total_cmp(&b.capex))
            .unwrap();
        assert!(cheapest.pareto);
        assert_eq!(cheapest.capex, 10.0 * 100.0 + 10.0 * 5.0);
        // Flash raises the hit ratio at the same RAM and disks.
        let find = |l: &str| rep.systems.iter().find(|s| s.label == l).unwrap();
        assert!(find("A3/10d").hit_ratio > find("A0/10d").hit_ratio);
        assert!(find("A3/10d").latency.mean_ms < find("A0/10d").latency.mean_ms);
        assert_eq!(find("A0/10d").flash_write_bytes, 0);
        assert!(find("A3/10d").flash_lifetime_years.is_some());
    }
}
