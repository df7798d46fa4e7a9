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

impl TierPlan {
    /// Checks the format, version and every field's range.
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
                if !(t >= 0.0 && t.is_finite()) {
                    return Err(PlanError(format!(
                        "workload {}: ttl_seconds {t} is not a non-negative number",
                        w.id
                    )));
                }
            }
            if let Some(WarmTier::After { after_seconds: a }) = w.ec {
                if !(a >= 0.0 && a.is_finite()) {
                    return Err(PlanError(format!(
                        "workload {}: ec.after_seconds {a} is not a non-negative number",
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
