//! The whole provisioning computation on collected statistics: curves,
//! optimised allocation, baselines, TTLs, economics, the tier plan, and
//! (after a replay) the measured hit ratios.

use std::collections::HashMap;

use serde::Serialize;

use crate::baseline::{proportional, single_ttl};
use crate::collect::{Collected, WorkloadStats};
use crate::curve::CacheabilityCurve;
use crate::econ::{cost_optimum, CostOptimum, Prices};
use crate::error::{ProvisionError, Result};
use crate::replay::{Layout, Measured};
use crate::solver::{allocate, Item, Solution};
use strata_plan::{Eviction, TierPlan, WorkloadPlan, PLAN_FORMAT, PLAN_VERSION};

/// An amount given absolutely or as a fraction of a whole the command knows.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Amount {
    /// Absolute (bytes, or bytes per second).
    Absolute(f64),
    /// A fraction (0.05 = 5%) of the total size or total write rate.
    Fraction(f64),
}

impl Amount {
    fn resolve(self, whole: f64) -> f64 {
        match self {
            Amount::Absolute(v) => v,
            Amount::Fraction(f) => f * whole,
        }
    }
}

/// What to optimise.
#[derive(Clone, Debug)]
pub struct Config {
    /// Eviction policy (selects FIFO-age or LRU-age curves).
    pub policy: Eviction,
    /// Total flash.
    pub flash: Amount,
    /// Bound on the total flash write rate.
    pub write_bound: Option<Amount>,
    /// Priority weight per workload id (default 1).
    pub weights: HashMap<u32, f64>,
    /// Prices for the economics.
    pub prices: Prices,
    /// Recommend each workload's erasure-coded warm age with this code and
    /// rule (None: the plan leaves the warm tier to the cluster).
    pub warm: Option<crate::warm::WarmConfig>,
}

/// One allocation method's result for a workload.
#[derive(Clone, Debug, Default, Serialize)]
pub struct Share {
    /// Flash bytes.
    pub flash_bytes: f64,
    /// Write probability.
    pub write_probability: f64,
    /// Predicted flash reads per second.
    pub predicted_flash_reads_per_s: f64,
    /// Measured flash reads per second on the evaluation window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_flash_reads_per_s: Option<f64>,
}

/// The per-workload result.
#[derive(Clone, Debug, Serialize)]
pub struct WorkloadReport {
    /// Workload id.
    pub id: u32,
    /// Workload name, when the trace names workloads.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Flash bytes of the optimised allocation.
    pub flash_bytes: u64,
    /// Write probability of the optimised allocation.
    pub write_probability: f64,
    /// Eviction TTL (seconds) of the optimised allocation (§8.4): the age at
    /// which the workload's youngest `flash/p` bytes end; `null` when the
    /// allocation holds the whole workload.
    pub ttl_seconds: Option<f64>,
    /// Predicted flash reads per second (training window).
    pub predicted_flash_reads_per_s: f64,
    /// Measured flash reads per second on the evaluation window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_flash_reads_per_s: Option<f64>,
    /// Priority weight.
    pub weight: f64,
    /// Average bytes stored in the training window (the workload's size).
    pub size_bytes: f64,
    /// Reads per second in training.
    pub read_ops_per_s: f64,
    /// Reads per second on the evaluation window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eval_read_ops_per_s: Option<f64>,
    /// New bytes written per second in training.
    pub write_bytes_per_s: f64,
    /// Whether the cacheability curve is concave to within 1% of its
    /// height (see `concavity_gap`).
    pub concave: bool,
    /// Largest distance between the curve and its concave upper bound, as
    /// a fraction of the curve's height.
    pub concavity_gap: f64,
    /// Objects whose LRU age is censored (created before the trace).
    pub censored_objects: u64,
    /// Flash reads of this workload as a percentage of all reads of the cell.
    pub normalized_flash_hit_pct: f64,
    /// Flash bytes of this workload as a percentage of all bytes of the cell.
    pub normalized_flash_size_pct: f64,
    /// The optimised allocation on the upper-bound LRU curves (LRU only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub upper_bound: Option<Share>,
    /// The single FIFO (one TTL for all).
    pub single_fifo: Share,
    /// Flash proportional to read rate.
    pub prop_reads: Share,
    /// Flash proportional to size.
    pub prop_size: Share,
    /// The cost-optimal flash for this workload alone (§5).
    pub cost: CostOptimum,
    /// The recommended erasure-coded warm age (with [`Config::warm`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warm: Option<crate::warm::WarmAge>,
}

/// A baseline's cell-wide result.
#[derive(Clone, Debug, Serialize)]
pub struct Baseline {
    /// Predicted cell-wide flash hit ratio.
    pub flash_hit_ratio: f64,
    /// Measured on the evaluation window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_flash_hit_ratio: Option<f64>,
}

/// The three baselines.
#[derive(Clone, Debug, Serialize)]
pub struct Baselines {
    /// One TTL for all workloads (a single shared FIFO or LRU).
    pub single_fifo: Baseline,
    /// Flash proportional to read rate.
    pub prop_reads: Baseline,
    /// Flash proportional to size.
    pub prop_size: Baseline,
}

/// Sampling rates applied while collecting.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct Sampling {
    /// Fraction of reads in the FIFO read histograms.
    pub read_rate: f64,
    /// Fraction of objects tracked for LRU age.
    pub object_rate: f64,
}

/// The curves of one workload (not serialised; for plots).
#[derive(Clone, Debug)]
pub struct Curves {
    /// Workload id.
    pub id: u32,
    /// By FIFO age.
    pub fifo: CacheabilityCurve,
    /// Lower bound by LRU age.
    pub lru_lower: CacheabilityCurve,
    /// Upper bound by LRU age.
    pub lru_upper: CacheabilityCurve,
}

/// The whole result (the `--json` object).
#[derive(Clone, Debug, Serialize)]
pub struct Provision {
    /// Eviction policy.
    pub policy: Eviction,
    /// Per workload, by id.
    pub workloads: Vec<WorkloadReport>,
    /// Predicted cell-wide flash hit ratio of the optimised allocation.
    pub predicted_flash_hit_ratio: f64,
    /// The same on the upper-bound LRU curves (LRU only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub predicted_flash_hit_ratio_upper: Option<f64>,
    /// Measured cell-wide flash hit ratio on the evaluation window.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_flash_hit_ratio: Option<f64>,
    /// The baselines.
    pub baselines: Baselines,
    /// Total flash bytes divided.
    pub total_flash_bytes: f64,
    /// Total size of all workloads (bytes).
    pub total_size_bytes: f64,
    /// Total reads per second (training).
    pub read_ops_per_s: f64,
    /// Total new bytes per second (training).
    pub write_bytes_per_s: f64,
    /// The flash write bound (bytes/s), if any.
    pub write_bound_bytes_per_s: Option<f64>,
    /// Flash write rate of the optimised allocation (bytes/s).
    pub flash_write_bytes_per_s: f64,
    /// Measured flash write rate on the evaluation window (bytes/s).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub measured_flash_write_bytes_per_s: Option<f64>,
    /// The Lagrange multiplier λ found by bisection (0 without a bound).
    pub lambda: f64,
    /// Bound on the objective lost to non-concave curves (weighted reads/s).
    pub error_bound: f64,
    /// Relaxed problems solved.
    pub solver_iterations: u32,
    /// The training window (trace seconds).
    pub train_window: [f64; 2],
    /// The evaluation window, if one was replayed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub eval_window: Option<[f64; 2]>,
    /// Sampling rates (counts scaled back by their inverse).
    pub sampling: Sampling,
    /// Break-even IOPS per GiB (§5).
    pub break_even_iops_per_gib: f64,
    /// Prices used.
    pub prices: Prices,
    /// Cost of the per-workload cost optima against all-disk/all-flash
    /// (sum over workloads), as savings in [0, 1).
    pub cost_savings: f64,
    /// Curves per workload (for plots).
    #[serde(skip)]
    pub curves: Vec<Curves>,
    /// Single-FIFO TTL (seconds), `None` when everything fits.
    pub single_fifo_ttl_seconds: Option<f64>,
}

fn curves_of(w: &WorkloadStats, b: &crate::age::AgeBuckets) -> Curves {
    Curves {
        id: w.id,
        fifo: CacheabilityCurve::from_histograms(b, &w.fifo.bytes, &w.fifo.reads),
        lru_upper: CacheabilityCurve::from_histograms(
            b,
            &w.lru_age_upper.bytes,
            &w.lru_age_lower.reads,
        ),
        lru_lower: CacheabilityCurve::from_histograms(
            b,
            &w.lru_age_lower.bytes,
            &w.lru_age_upper.reads,
        ),
    }
}

fn shares(curves: &[&CacheabilityCurve], x: &[f64]) -> Vec<Share> {
    curves
        .iter()
        .zip(x)
        .map(|(c, &x)| Share {
            flash_bytes: x,
            write_probability: if x > 0.0 { 1.0 } else { 0.0 },
            predicted_flash_reads_per_s: c.eval(x),
            measured_flash_reads_per_s: None,
        })
        .collect()
}

/// Computes curves, the optimised allocation, baselines and economics.
pub fn provision(
    collected: &Collected,
    buckets: &crate::age::AgeBuckets,
    cfg: &Config,
) -> Result<Provision> {
    cfg.prices.validate()?;
    let all: Vec<Curves> = collected
        .workloads
        .iter()
        .map(|w| curves_of(w, buckets))
        .collect();
    let main: Vec<&CacheabilityCurve> = all
        .iter()
        .map(|c| match cfg.policy {
            Eviction::Fifo => &c.fifo,
            Eviction::Lru => &c.lru_lower,
        })
        .collect();
    let total_reads: f64 = main.iter().map(|c| c.total_reads).sum();
    if total_reads <= 0.0 {
        return Err(ProvisionError::NoReads);
    }
    let total_size: f64 = main.iter().map(|c| c.size()).sum();
    let total_write: f64 = collected
        .workloads
        .iter()
        .map(|w| w.write_bytes_per_s)
        .sum();
    let flash = cfg.flash.resolve(total_size);
    if !(flash.is_finite() && flash >= 0.0) {
        return Err(ProvisionError::BadParameter(format!(
            "the flash size must be non-negative, got {flash}"
        )));
    }
    let write_bound = cfg.write_bound.map(|a| a.resolve(total_write));
    for &id in cfg.weights.keys() {
        if !collected.workloads.iter().any(|w| w.id == id) {
            return Err(ProvisionError::BadParameter(format!(
                "the weights name workload {id}, which the training window does not have"
            )));
        }
    }
    let weights: Vec<f64> = collected
        .workloads
        .iter()
        .map(|w| cfg.weights.get(&w.id).copied().unwrap_or(1.0))
        .collect();
    let solve = |curves: &[&CacheabilityCurve]| -> Result<Solution> {
        let items: Vec<Item<'_>> = curves
            .iter()
            .zip(&collected.workloads)
            .zip(&weights)
            .map(|((c, w), &rho)| Item {
                curve: c,
                weight: rho,
                write_rate: w.write_bytes_per_s,
            })
            .collect();
        allocate(&items, flash, write_bound)
    };
    let sol = solve(&main)?;
    let upper = match cfg.policy {
        Eviction::Lru => Some(solve(
            &all.iter().map(|c| &c.lru_upper).collect::<Vec<_>>(),
        )?),
        Eviction::Fifo => None,
    };
    let (ttl_single, x_single) = single_ttl(&main, flash);
    let read_rates: Vec<f64> = main.iter().map(|c| c.total_reads).collect();
    let sizes: Vec<f64> = main.iter().map(|c| c.size()).collect();
    let x_reads = proportional(&read_rates, &sizes, flash);
    let x_size = proportional(&sizes, &sizes, flash);
    let s_single = shares(&main, &x_single);
    let s_reads = shares(&main, &x_reads);
    let s_size = shares(&main, &x_size);
    let ratio =
        |s: &[Share]| s.iter().map(|s| s.predicted_flash_reads_per_s).sum::<f64>() / total_reads;
    let mut cost_opt = 0.0;
    let mut cost_single = 0.0;
    let mut workloads = Vec::with_capacity(all.len());
    for (i, w) in collected.workloads.iter().enumerate() {
        let c = main[i];
        let x = sol.flash[i];
        let p = sol.write_probability[i];
        let ttl = if p > 0.0 && x > 0.0 {
            c.age_at_bytes(x / p)
        } else {
            Some(0.0)
        };
        let cost = cost_optimum(c, c.total_reads, w.write_ops_per_s, &cfg.prices);
        cost_opt += cost.cost;
        cost_single += cost.all_disk_cost.min(cost.all_flash_cost);
        workloads.push(WorkloadReport {
            id: w.id,
            name: None,
            flash_bytes: x.floor() as u64,
            write_probability: p,
            ttl_seconds: ttl,
            predicted_flash_reads_per_s: sol.flash_reads[i],
            measured_flash_reads_per_s: None,
            weight: weights[i],
            size_bytes: c.size(),
            read_ops_per_s: c.total_reads,
            eval_read_ops_per_s: None,
            write_bytes_per_s: w.write_bytes_per_s,
            concave: c.concavity_gap() <= 0.01,
            concavity_gap: c.concavity_gap(),
            censored_objects: w.censored_objects,
            normalized_flash_hit_pct: 100.0 * sol.flash_reads[i] / total_reads,
            normalized_flash_size_pct: if total_size > 0.0 {
                100.0 * x / total_size
            } else {
                0.0
            },
            upper_bound: upper.as_ref().map(|u| Share {
                flash_bytes: u.flash[i],
                write_probability: u.write_probability[i],
                predicted_flash_reads_per_s: u.flash_reads[i],
                measured_flash_reads_per_s: None,
            }),
            single_fifo: s_single[i].clone(),
            prop_reads: s_reads[i].clone(),
            prop_size: s_size[i].clone(),
            cost,
            warm: cfg
                .warm
                .as_ref()
                .map(|wc| crate::warm::warm_age(&w.fifo, buckets, wc)),
        });
    }
    let predicted = sol.flash_reads.iter().sum::<f64>() / total_reads;
    let upper_total: Option<f64> = upper.as_ref().map(|u| {
        let tr: f64 = all.iter().map(|c| c.lru_upper.total_reads).sum();
        u.flash_reads.iter().sum::<f64>() / tr.max(f64::MIN_POSITIVE)
    });
    Ok(Provision {
        policy: cfg.policy,
        workloads,
        predicted_flash_hit_ratio: predicted,
        predicted_flash_hit_ratio_upper: upper_total,
        measured_flash_hit_ratio: None,
        baselines: Baselines {
            single_fifo: Baseline {
                flash_hit_ratio: ratio(&s_single),
                measured_flash_hit_ratio: None,
            },
            prop_reads: Baseline {
                flash_hit_ratio: ratio(&s_reads),
                measured_flash_hit_ratio: None,
            },
            prop_size: Baseline {
                flash_hit_ratio: ratio(&s_size),
                measured_flash_hit_ratio: None,
            },
        },
        total_flash_bytes: flash,
        total_size_bytes: total_size,
        read_ops_per_s: total_reads,
        write_bytes_per_s: total_write,
        write_bound_bytes_per_s: write_bound,
        flash_write_bytes_per_s: sol.write_rate,
        measured_flash_write_bytes_per_s: None,
        lambda: sol.lambda,
        error_bound: sol.error_bound,
        solver_iterations: sol.iterations,
        train_window: [collected.window.0, collected.window.1],
        eval_window: None,
        sampling: Sampling {
            read_rate: collected.read_sample_rate,
            object_rate: collected.object_sample_rate,
        },
        break_even_iops_per_gib: cfg.prices.break_even_iops_per_gib(),
        prices: cfg.prices,
        cost_savings: if cost_single > 0.0 {
            (1.0 - cost_opt / cost_single).max(0.0)
        } else {
            0.0
        },
        curves: all,
        single_fifo_ttl_seconds: ttl_single,
    })
}

impl Provision {
    /// The layouts to replay, in order: optimised, single, prop. reads,
    /// prop. size.
    pub fn layouts(&self) -> Vec<Layout> {
        let per = |f: &dyn Fn(&WorkloadReport) -> (f64, f64)| {
            Layout::PerWorkload(
                self.workloads
                    .iter()
                    .map(|w| {
                        let (x, p) = f(w);
                        (w.id, (x.floor() as u64, p))
                    })
                    .collect(),
            )
        };
        vec![
            per(&|w| (w.flash_bytes as f64, w.write_probability)),
            Layout::Shared(self.total_flash_bytes.floor() as u64),
            per(&|w| (w.prop_reads.flash_bytes, w.prop_reads.write_probability)),
            per(&|w| (w.prop_size.flash_bytes, w.prop_size.write_probability)),
        ]
    }

    /// Records the measured figures of the four layouts of
    /// [`Provision::layouts`] replayed over `window`.
    pub fn set_measured(&mut self, measured: &[HashMap<u32, Measured>], window: (f64, f64)) {
        let len = (window.1 - window.0).max(f64::MIN_POSITIVE);
        let ratio = |m: &HashMap<u32, Measured>| crate::replay::hit_ratio(m);
        self.eval_window = Some([window.0, window.1]);
        if let Some(m) = measured.first() {
            self.measured_flash_hit_ratio = Some(ratio(m));
            self.measured_flash_write_bytes_per_s =
                Some(m.values().map(|v| v.flash_write_bytes as f64).sum::<f64>() / len);
        }
        let get = |k: usize, id: u32| -> Option<f64> {
            measured
                .get(k)
                .map(|m| m.get(&id).map_or(0.0, |v| v.flash_hits as f64 / len))
        };
        for w in &mut self.workloads {
            w.measured_flash_reads_per_s = get(0, w.id);
            w.single_fifo.measured_flash_reads_per_s = get(1, w.id);
            w.prop_reads.measured_flash_reads_per_s = get(2, w.id);
            w.prop_size.measured_flash_reads_per_s = get(3, w.id);
            w.eval_read_ops_per_s = measured
                .first()
                .map(|m| m.get(&w.id).map_or(0.0, |v| v.reads as f64 / len));
        }
        let b = &mut self.baselines;
        b.single_fifo.measured_flash_hit_ratio = measured.get(1).map(ratio);
        b.prop_reads.measured_flash_hit_ratio = measured.get(2).map(ratio);
        b.prop_size.measured_flash_hit_ratio = measured.get(3).map(ratio);
    }

    /// The tier plan of the optimised allocation.
    pub fn plan(&self) -> TierPlan {
        TierPlan {
            format: PLAN_FORMAT.into(),
            version: PLAN_VERSION,
            total_flash_bytes: self.total_flash_bytes.floor() as u64,
            write_bound_bytes_per_s: self.write_bound_bytes_per_s,
            train_window: self.train_window,
            policy: self.policy,
            predicted_flash_hit_ratio: self.predicted_flash_hit_ratio,
            workloads: self
                .workloads
                .iter()
                .map(|w| WorkloadPlan {
                    id: w.id,
                    name: w.name.clone(),
                    flash_bytes: w.flash_bytes,
                    write_probability: w.write_probability,
                    ttl_seconds: w.ttl_seconds,
                    eviction: self.policy,
                    weight: w.weight,
                    predicted_flash_reads_per_s: w.predicted_flash_reads_per_s,
                    read_ops_per_s: Some(w.read_ops_per_s),
                    ec: w.warm.as_ref().map(|a| match a.after_seconds {
                        Some(s) => strata_plan::WarmTier::After { after_seconds: s },
                        None => strata_plan::WarmTier::Off(strata_plan::WarmOff::Off),
                    }),
                })
                .collect(),
        }
    }
}
