//! The node's view of the tier plan (docs/tier-plan.md): per workload, the
//! flash bytes it may hold, the probability that a new object goes to
//! flash, and how its flash evicts.

use std::path::Path;
use strata_plan::{Eviction, TierPlan, WorkloadPlan};

/// Checks `plan` as every Strata server does before putting it in force
/// (from a file, `/_admin/plan` or the metadata service): the plan
/// format's own checks, and at most `max_workloads` workloads (each listed
/// workload gets segment stores of its own).
pub fn check(plan: &TierPlan, max_workloads: usize) -> Result<(), String> {
    plan.validate().map_err(|e| e.to_string())?;
    if plan.workloads.len() > max_workloads {
        return Err(format!(
            "the plan lists {} workloads; this node takes at most {max_workloads} (--max-workloads)",
            plan.workloads.len()
        ));
    }
    Ok(())
}

/// Reads a plan file (`strata provision --plan`'s JSON).
pub fn read_file(path: &Path) -> Result<TierPlan, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    TierPlan::from_json(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// What the node does for one workload.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rule {
    /// Probability that a new object is written to flash.
    pub write_probability: f64,
    /// Flash bytes the workload may hold; `None`: it shares the node's flash
    /// capacity with every other workload without a limit of its own (the
    /// default plan: one FIFO over all of flash).
    pub flash_bytes: Option<u64>,
    /// How the tier mover frees its flash.
    pub eviction: Eviction,
    /// The plan's eviction age (`ttl_seconds`): data written (FIFO) or
    /// last read (LRU) longer ago than this leaves flash. `None`: evict by
    /// bytes only.
    pub ttl: Option<std::time::Duration>,
}

/// The plan in force: a loaded tier plan, or the default.
#[derive(Clone, Debug)]
pub struct ActivePlan {
    /// The loaded plan (`None`: the default plan).
    pub plan: Option<TierPlan>,
}

impl ActivePlan {
    /// The default plan: every new object to flash (when there is flash),
    /// one FIFO over the node's whole flash capacity.
    pub fn default_plan() -> ActivePlan {
        ActivePlan { plan: None }
    }

    /// The loaded plan's entry for workload `id` named `name`: the entry
    /// with that name, else the unnamed (or same-named) entry with that id.
    pub fn entry(&self, id: u32, name: &str) -> Option<&WorkloadPlan> {
        let p = self.plan.as_ref()?;
        let by_name = p.workloads.iter().find(|w| w.name.as_deref() == Some(name));
        by_name.or_else(|| {
            p.workloads
                .iter()
                .find(|w| w.id == id && w.name.as_deref().is_none_or(|n| n == name))
        })
    }

    /// The rule for workload `id` named `name`. A loaded plan matches a
    /// workload by name when its entry has one, else by id; a workload the
    /// plan does not list gets no flash.
    pub fn rule(&self, id: u32, name: &str) -> Rule {
        let Some(p) = &self.plan else {
            return Rule {
                write_probability: 1.0,
                flash_bytes: None,
                eviction: Eviction::Fifo,
                ttl: None,
            };
        };
        match self.entry(id, name) {
            Some(w) => Rule {
                write_probability: w.write_probability,
                flash_bytes: Some(w.flash_bytes),
                eviction: w.eviction,
                ttl: w
                    .ttl_seconds
                    .and_then(|t| std::time::Duration::try_from_secs_f64(t).ok()),
            },
            None => Rule {
                write_probability: 0.0,
                flash_bytes: Some(0),
                eviction: p.policy,
                ttl: None,
            },
        }
    }
}
