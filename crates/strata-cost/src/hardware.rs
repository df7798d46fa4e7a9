//! The hardware model: prices, performance and failure rates, with the
//! study's Table 3 as defaults and a TOML file to override any of them.

use crate::CostError;
use serde::{Deserialize, Serialize};

/// Disks: price, failure rate, performance.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct DiskModel {
    /// Dollars per disk (Table 3: $100).
    pub price: f64,
    /// Annual failure rate (Table 3: 4%).
    pub afr: f64,
    /// Seek between files, ms (Table 3: 10).
    pub seek_ms: f64,
    /// Transfer rate, MB/s (Table 3: 100).
    pub bandwidth_mb_s: f64,
    /// Usable capacity, GB (for the erasure-coding figures: how many disks
    /// the stored bytes fill; default 4000).
    pub capacity_gb: f64,
}

impl Default for DiskModel {
    fn default() -> Self {
        DiskModel {
            price: 100.0,
            afr: 0.04,
            seek_ms: 10.0,
            bandwidth_mb_s: 100.0,
            capacity_gb: 4000.0,
        }
    }
}

/// RAM: price and failure rate (latency is zero).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct RamModel {
    /// Dollars per GB (Table 3: $5).
    pub price_per_gb: f64,
    /// Annual failure rate of one DIMM (Table 3: 4% for 8 GB).
    pub afr: f64,
    /// GB per DIMM, the unit that fails and is replaced (8).
    pub dimm_gb: f64,
}

impl Default for RamModel {
    fn default() -> Self {
        RamModel {
            price_per_gb: 5.0,
            afr: 0.04,
            dimm_gb: 8.0,
        }
    }
}

/// Flash: price, endurance, latency.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct FlashModel {
    /// Dollars per GB (Table 3: $0.80).
    pub price_per_gb: f64,
    /// Program/erase cycles before wear-out (Table 3: 10K).
    pub pe_cycles: f64,
    /// Read latency, ms (Table 3: 0.5).
    pub latency_ms: f64,
}

impl Default for FlashModel {
    fn default() -> Self {
        FlashModel {
            price_per_gb: 0.8,
            pe_cycles: 10_000.0,
            latency_ms: 0.5,
        }
    }
}

/// The grid of systems to evaluate (study §5.4: 3 × 4 × 3 = 36).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Grid {
    /// RAM levels in GB (10, 30, 100).
    pub ram_gb: Vec<f64>,
    /// Flash levels in GB (0, 60, 120, 240).
    pub flash_gb: Vec<f64>,
    /// Disks per node (10, 15, 20).
    pub disks: Vec<u32>,
}

impl Default for Grid {
    fn default() -> Self {
        Grid {
            ram_gb: vec![10.0, 30.0, 100.0],
            flash_gb: vec![0.0, 60.0, 120.0, 240.0],
            disks: vec![10, 15, 20],
        }
    }
}

/// How each system is simulated.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct Simulation {
    /// Replicas (3).
    pub replicas: u32,
    /// Policy of each cache tier, as `strata sim` names it (lru).
    pub policy: String,
    /// On a flash hit: "promote" (the study's PP, used for Figure 15) or "keep".
    pub flash_hit: String,
    /// Cache written objects (false: the study's no-write allocate).
    pub write_allocate: bool,
    /// The per-node data the study's sizes were chosen for, GB. Cache sizes
    /// are scaled by (the trace's working set / this) unless `scale` is set.
    pub reference_working_set_gb: f64,
    /// A fixed scale for cache sizes instead of the automatic one (1 = the
    /// sizes as written).
    pub scale: Option<f64>,
    /// Segment file size in MiB.
    pub segment_mib: u64,
}

impl Default for Simulation {
    fn default() -> Self {
        Simulation {
            replicas: 3,
            policy: "lru".into(),
            flash_hit: "promote".into(),
            write_allocate: false,
            reference_working_set_gb: 2944.0,
            scale: None,
            segment_mib: 256,
        }
    }
}

/// The whole cost model.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct CostModel {
    /// Disks.
    pub disk: DiskModel,
    /// RAM.
    pub ram: RamModel,
    /// Flash.
    pub flash: FlashModel,
    /// The systems.
    pub grid: Grid,
    /// How to simulate.
    pub simulation: Simulation,
}

impl CostModel {
    /// Reads a TOML override: any table or key left out keeps its Table 3
    /// default.
    pub fn from_toml(text: &str) -> Result<CostModel, CostError> {
        let m: CostModel =
            toml::from_str(text).map_err(|e| CostError::Config(e.message().to_string()))?;
        m.validate()?;
        Ok(m)
    }

    /// The defaults as a TOML document (for `--print-config`).
    pub fn to_toml(&self) -> String {
        toml::to_string_pretty(self).unwrap_or_default()
    }

    /// Checks every number is usable.
    pub fn validate(&self) -> Result<(), CostError> {
        let bad = |s: &str| Err(CostError::Config(s.to_string()));
        let nonneg = |v: f64| v.is_finite() && v >= 0.0;
        if !nonneg(self.disk.price)
            || !nonneg(self.ram.price_per_gb)
            || !nonneg(self.flash.price_per_gb)
        {
            return bad("prices must be zero or positive numbers");
        }
        if !(0.0..=1.0).contains(&self.disk.afr) || !(0.0..=1.0).contains(&self.ram.afr) {
            return bad("annual failure rates must be between 0 and 1 (4% is 0.04)");
        }
        if !(self.disk.bandwidth_mb_s.is_finite() && self.disk.bandwidth_mb_s > 0.0) {
            return bad("disk bandwidth_mb_s must be positive");
        }
        if !(self.disk.capacity_gb.is_finite() && self.disk.capacity_gb > 0.0) {
            return bad("disk capacity_gb must be positive");
        }
        if !nonneg(self.disk.seek_ms) || !nonneg(self.flash.latency_ms) {
            return bad("seek and latency times must be zero or positive");
        }
        if !(self.flash.pe_cycles.is_finite() && self.flash.pe_cycles > 0.0) {
            return bad("flash pe_cycles must be positive");
        }
        if !(self.ram.dimm_gb.is_finite() && self.ram.dimm_gb > 0.0) {
            return bad("ram dimm_gb must be positive");
        }
        let g = &self.grid;
        if g.ram_gb.is_empty() || g.flash_gb.is_empty() || g.disks.is_empty() {
            return bad("the grid needs at least one RAM, flash and disk level");
        }
        if g.ram_gb.iter().chain(&g.flash_gb).any(|v| !nonneg(*v)) {
            return bad("grid sizes must be zero or positive GB");
        }
        if g.disks.contains(&0) {
            return bad("a system needs at least one disk");
        }
        let s = &self.simulation;
        if s.replicas == 0 {
            return bad("replicas must be at least 1");
        }
        if s.policy.parse::<strata_policy::PolicySpec>().is_err() {
            return bad("simulation.policy is not a known policy (try lru)");
        }
        if !matches!(s.flash_hit.as_str(), "promote" | "keep") {
            return bad("simulation.flash_hit must be \"promote\" or \"keep\"");
        }
        if !(s.reference_working_set_gb.is_finite() && s.reference_working_set_gb > 0.0) {
            return bad("simulation.reference_working_set_gb must be positive");
        }
        if let Some(sc) = s.scale {
            if !(sc.is_finite() && sc > 0.0) {
                return bad("simulation.scale must be positive");
            }
        }
        if s.segment_mib == 0 {
            return bad("simulation.segment_mib must be positive");
        }
        Ok(())
    }

    /// Number of systems in the grid.
    pub fn systems(&self) -> usize {
        self.grid.ram_gb.len() * self.grid.flash_gb.len() * self.grid.disks.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_table_3() {
        let m = CostModel::default();
        assert_eq!(m.disk.price, 100.0);
        assert_eq!(m.disk.afr, 0.04);
        assert_eq!(m.disk.seek_ms, 10.0);
        assert_eq!(m.disk.bandwidth_mb_s, 100.0);
        assert_eq!(m.ram.price_per_gb, 5.0);
        assert_eq!(m.ram.afr, 0.04);
        assert_eq!(m.flash.price_per_gb, 0.8);
        assert_eq!(m.flash.pe_cycles, 10_000.0);
        assert_eq!(m.flash.latency_ms, 0.5);
        assert_eq!(m.systems(), 36);
    }

    #[test]
    fn toml_overrides_only_what_it_names() {
        let m = CostModel::from_toml("[flash]\nprice_per_gb = 0.1\n[grid]\ndisks = [4]\n").unwrap();
        assert_eq!(m.flash.price_per_gb, 0.1);
        assert_eq!(m.flash.pe_cycles, 10_000.0);
        assert_eq!(m.grid.disks, vec![4]);
        assert_eq!(m.systems(), 12);
        // round trip
        let back = CostModel::from_toml(&m.to_toml()).unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn bad_toml_is_a_clear_error() {
        let e = CostModel::from_toml("[disk]\nprise = 3\n").unwrap_err();
        assert!(e.to_string().contains("prise"), "{e}");
        let e = CostModel::from_toml("[disk]\nafr = 4\n").unwrap_err();
        assert!(e.to_string().contains("between 0 and 1"), "{e}");
        let e = CostModel::from_toml("[grid]\ndisks = [\"many\"]\n").unwrap_err();
        assert!(e.to_string().contains("invalid"), "{e}");
    }
}
