//! The tier plan (docs/tier-plan.md): what the lab's `strata provision
//! --plan` writes, the metadata service stores, and each node's tier
//! manager loads. A format crate at the bottom of the workspace: the lab
//! and the store both depend on it, neither on the other.

#![warn(missing_docs)]

use serde::{Deserialize, Serialize};

/// A tier plan that does not parse or whose fields are out of range.
#[derive(Debug, thiserror::Error)]
#[error("tier plan: {0}")]
pub struct PlanError(pub String);

/// Results of this crate.
pub type Result<T> = std::result::Result<T, PlanError>;

/// The `format` field of every tier plan.
pub const PLAN_FORMAT: &str = "strata-tier-plan";
/// The version of the tier plan format this crate writes and reads.
pub const PLAN_VERSION: u32 = 1;

/// How a workload's flash evicts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Eviction {
    /// Oldest written first (eviction by age since creation).
    Fifo,
    /// Least recently read or written first.
    Lru,
}

impl Eviction {
    /// `fifo` or `lru`.
    pub fn as_str(self) -> &'static str {
        match self {
            Eviction::Fifo => "fifo",
            Eviction::Lru => "lru",
        }
    }
}

/// One workload's share of flash.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WorkloadPlan {
    /// The workload id (as in the trace).
    pub id: u32,
    /// The workload's name, when the trace names workloads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Flash bytes the workload may hold.
    pub flash_bytes: u64,
    /// Probability that a new object of the workload is written to flash.
    pub write_probability: f64,
    /// Eviction age: data older than this (FIFO: since creation; LRU: since
    /// its last access) leaves flash. `null`: the allocation holds the whole
    /// workload, nothing needs evicting by age.
    pub ttl_seconds: Option<f64>,
    /// The eviction policy.
    pub eviction: Eviction,
    /// The priority weight the plan was optimised with.
    pub weight: f64,
    /// Reads per second the plan expects flash to serve for this workload.
    pub predicted_flash_reads_per_s: f64,
    /// Reads per second the workload made in the training window: the
    /// denominator of its predicted flash hit ratio. Absent in plans
    /// written before the field existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_ops_per_s: Option<f64>,
    /// The erasure-coded warm tier for this workload: absent, the
    /// cluster's `--ec-after`; `{"after_seconds": S}`, its sealed segments
    /// are encoded once older than S; `"off"`, never encoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ec: Option<WarmTier>,
}

/// A workload's erasure-coding rule in a tier plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum WarmTier {
    /// Encode sealed segments older than this many seconds.
    After {
        /// The warm age in seconds.
        after_seconds: f64,
    },
    /// `"off"`: keep the workload replicated.
    Off(WarmOff),
}

/// The word `"off"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WarmOff {
    /// Erasure coding off.
    Off,
}

impl WorkloadPlan {
    /// The flash hit ratio the plan predicts for this workload (flash reads
    /// over all its reads), when the plan carries its read rate.
    pub fn predicted_flash_hit_ratio(&self) -> Option<f64> {
        match self.read_ops_per_s {
            Some(r) if r > 0.0 => Some((self.predicted_flash_reads_per_s / r).clamp(0.0, 1.0)),
            _ => None,
        }
    }
}

/// A tier plan: per workload flash bytes, write probability, TTL, policy.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TierPlan {
    /// Always [`PLAN_FORMAT`].
    pub format: String,
    /// Format version, [`PLAN_VERSION`].
    pub version: u32,
    /// Total flash bytes the plan divides.
    pub total_flash_bytes: u64,
    /// The bound on the flash write rate used (bytes/s), if any.
    pub write_bound_bytes_per_s: Option<f64>,
    /// The training window the plan was computed from (trace seconds).
    pub train_window: [f64; 2],
    /// The eviction policy of every workload.
    pub policy: Eviction,
    /// The predicted cell-wide flash hit ratio (flash reads / all reads).
    pub predicted_flash_hit_ratio: f64,
    /// One entry per workload seen in training; a workload not listed gets
    /// no flash (its writes go to disk).
    pub workloads: Vec<WorkloadPlan>,
}

/// The longest age a plan may give (a TTL or an erasure-coding age): 100
/// years, in seconds. Longer ones are refused: they mean "never", which
/// `null` TTLs and `"ec": "off"` say (a larger number overflowed the time
/// arithmetic of the loops that read it).
pub const MAX_AGE_SECONDS: f64 = 100.0 * 365.25 * 86_400.0;

/// `v` is a number in `[0, max]` (not NaN, not infinite).
fn in_range(v: f64, max: f64) -> bool {
    (0.0..=max).contains(&v)
}

impl TierPlan {
    /// Checks the format, version and every field's range: probabilities
    /// and hit ratios in [0, 1], ages (TTL, erasure-coding age) in
    /// [0, [`MAX_AGE_SECONDS`]], rates, weights and the write bound finite
    /// and non-negative, the training window in order; a refusal names the
    /// field.
    pub fn validate(&self) -> Result<()> {
        if self.format != PLAN_FORMAT {
            return Err(PlanError(format!(
                "format is {:?}, expected {PLAN_FORMAT:?}",
                self.format
            )));
        }
        if self.version != PLAN_VERSION {
            return Err(PlanError(format!(
                "version {} is not supported (this build reads version {PLAN_VERSION})",
                self.version
            )));
        }
        if let Some(b) = self.write_bound_bytes_per_s {
            if !in_range(b, f64::MAX) {
                return Err(PlanError(format!(
                    "write_bound_bytes_per_s {b} is not a non-negative number"
                )));
            }
        }
        let [from, to] = self.train_window;
        if !(from.is_finite() && to.is_finite() && from <= to) {
            return Err(PlanError(format!(
                "train_window [{from}, {to}] is not two finite times in order"
            )));
        }
        if !in_range(self.predicted_flash_hit_ratio, 1.0 + 1e-9) {
            return Err(PlanError(format!(
                "predicted_flash_hit_ratio {} is not in [0, 1]",
                self.predicted_flash_hit_ratio
            )));
        }
        let mut sum: u64 = 0;
        let mut ids = std::collections::HashSet::new();
        for w in &self.workloads {
            if !ids.insert(w.id) {
                return Err(PlanError(format!("workload {} is listed twice", w.id)));
            }
            if !(0.0..=1.0).contains(&w.write_probability) {
                return Err(PlanError(format!(
                    "workload {}: write_probability {} is not in [0, 1]",
                    w.id, w.write_probability
                )));
            }
            if let Some(t) = w.ttl_seconds {
                if !in_range(t, MAX_AGE_SECONDS) {
                    return Err(PlanError(format!(
                        "workload {}: ttl_seconds {t} is not in [0, {MAX_AGE_SECONDS}] (100 years; null keeps data on flash for any age)",
                        w.id
                    )));
                }
            }
            if let Some(WarmTier::After { after_seconds: a }) = w.ec {
                if !in_range(a, MAX_AGE_SECONDS) {
                    return Err(PlanError(format!(
                        "workload {}: ec.after_seconds {a} is not in [0, {MAX_AGE_SECONDS}] (100 years; \"ec\": \"off\" never encodes)",
                        w.id
                    )));
                }
            }
            for (field, v) in [
                ("weight", w.weight),
                ("predicted_flash_reads_per_s", w.predicted_flash_reads_per_s),
            ] {
                if !in_range(v, f64::MAX) {
                    return Err(PlanError(format!(
                        "workload {}: {field} {v} is not a non-negative number",
                        w.id
                    )));
                }
            }
            if let Some(r) = w.read_ops_per_s {
                if !(r >= 0.0 && r.is_finite()) {
                    return Err(PlanError(format!(
                        "workload {}: read_ops_per_s {r} is not a non-negative number",
                        w.id
                    )));
                }
            }
            sum = sum.saturating_add(w.flash_bytes);
        }
        if sum > self.total_flash_bytes {
            return Err(PlanError(format!(
                "workloads hold {sum} flash bytes, more than the total {}",
                self.total_flash_bytes
            )));
        }
        Ok(())
    }

    /// Parses and validates a plan from JSON text.
    pub fn from_json(text: &str) -> Result<TierPlan> {
        let p: TierPlan = serde_json::from_str(text).map_err(|e| PlanError(e.to_string()))?;
        p.validate()?;
        Ok(p)
    }

    /// The plan as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// The entry of a workload, if it has one.
    pub fn workload(&self, id: u32) -> Option<&WorkloadPlan> {
        self.workloads.iter().find(|w| w.id == id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan() -> TierPlan {
        TierPlan {
            format: PLAN_FORMAT.into(),
            version: PLAN_VERSION,
            total_flash_bytes: 100,
            write_bound_bytes_per_s: None,
            train_window: [0.0, 10.0],
            policy: Eviction::Fifo,
            predicted_flash_hit_ratio: 0.5,
            workloads: vec![WorkloadPlan {
                id: 3,
                name: None,
                flash_bytes: 60,
                write_probability: 0.5,
                ttl_seconds: Some(12.5),
                eviction: Eviction::Fifo,
                weight: 1.0,
                predicted_flash_reads_per_s: 4.0,
                read_ops_per_s: Some(10.0),
                ec: None,
            }],
        }
    }

    #[test]
    fn round_trip_and_checks() {
        let p = plan();
        let back = TierPlan::from_json(&p.to_json()).unwrap();
        assert_eq!(back, p);
        assert!(p.to_json().contains("\"eviction\": \"fifo\""));
        let mut bad = plan();
        bad.workloads[0].write_probability = 1.5;
        assert!(TierPlan::from_json(&bad.to_json()).is_err());
        let mut bad = plan();
        bad.version = 99;
        assert!(TierPlan::from_json(&bad.to_json()).is_err());
        let mut bad = plan();
        bad.workloads[0].flash_bytes = 101;
        assert!(TierPlan::from_json(&bad.to_json()).is_err());
        assert!(TierPlan::from_json("{").is_err());
        let mut bad = plan();
        bad.workloads[0].read_ops_per_s = Some(-1.0);
        assert!(TierPlan::from_json(&bad.to_json()).is_err());
    }

    #[test]
    fn every_number_out_of_its_range_is_refused_with_its_field_named() {
        let refused = |f: &dyn Fn(&mut TierPlan), field: &str| {
            let mut p = plan();
            f(&mut p);
            // Through JSON, as a plan arrives (1e300 is valid JSON).
            let text = p.to_json();
            let e = TierPlan::from_json(&text).expect_err(field).to_string();
            assert!(e.contains(field), "{field}: {e}");
        };
        refused(
            &|p| {
                p.workloads[0].ec = Some(WarmTier::After {
                    after_seconds: 1e300,
                })
            },
            "ec.after_seconds",
        );
        refused(
            &|p| {
                p.workloads[0].ec = Some(WarmTier::After {
                    after_seconds: -1.0,
                })
            },
            "ec.after_seconds",
        );
        refused(&|p| p.workloads[0].ttl_seconds = Some(1e300), "ttl_seconds");
        refused(&|p| p.workloads[0].weight = -2.0, "weight");
        refused(
            &|p| p.workloads[0].predicted_flash_reads_per_s = -1.0,
            "predicted_flash_reads_per_s",
        );
        refused(
            &|p| p.write_bound_bytes_per_s = Some(-5.0),
            "write_bound_bytes_per_s",
        );
        refused(&|p| p.train_window = [10.0, 0.0], "train_window");
        refused(
            &|p| p.predicted_flash_hit_ratio = 1.5,
            "predicted_flash_hit_ratio",
        );
        // The bounds themselves are allowed.
        let mut p = plan();
        p.workloads[0].ec = Some(WarmTier::After {
            after_seconds: MAX_AGE_SECONDS,
        });
        p.workloads[0].ttl_seconds = Some(0.0);
        p.write_bound_bytes_per_s = Some(0.0);
        assert!(TierPlan::from_json(&p.to_json()).is_ok());
    }

    #[test]
    fn predicted_ratio_per_workload() {
        let p = plan();
        assert_eq!(p.workloads[0].predicted_flash_hit_ratio(), Some(0.4));
        // A plan written before `read_ops_per_s` existed still loads.
        let old = p.to_json().replace(",\n      \"read_ops_per_s\": 10.0", "");
        assert!(!old.contains("read_ops_per_s"));
        let back = TierPlan::from_json(&old).unwrap();
        assert_eq!(back.workloads[0].predicted_flash_hit_ratio(), None);
    }
}
