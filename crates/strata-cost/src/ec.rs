//! Pricing the erasure-coded warm tier (f4, OSDI'14) against replication:
//! storage (`1 + M/K` bytes per logical byte instead of `R`), the disks
//! and dollars that saves, the extra traffic of degraded reads (a read
//! whose data shard is on a lost disk reads the same range from K other
//! shards) and of rebuilds (a lost disk's encoded bytes are rebuilt from K
//! survivors each, instead of copied from one replica).
//!
//! Pure arithmetic over the hardware model; the `strata cost --ec`
//! command measures the trace's inputs (bytes, and the share of bytes and
//! reads past the warm age).

use serde::Serialize;

use crate::hardware::DiskModel;

/// What the trace says, and the code.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct EcInputs {
    /// Data shards.
    pub k: usize,
    /// Parity shards.
    pub m: usize,
    /// Replicas of data that is not encoded.
    pub replicas: u32,
    /// Logical bytes stored (every object once).
    pub logical_bytes: f64,
    /// Share of those bytes past the warm age (encoded).
    pub warm_bytes_fraction: f64,
    /// Reads per second, all of them.
    pub reads_per_s: f64,
    /// Share of reads going to data past the warm age.
    pub warm_reads_fraction: f64,
    /// Mean bytes per read.
    pub read_bytes: f64,
}

/// Storage, dollars and traffic, replicated beside erasure-coded.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EcPrice {
    /// The inputs.
    pub inputs: EcInputs,
    /// Stored bytes per logical byte, everything replicated (R).
    pub overhead_replicated: f64,
    /// Stored bytes per logical byte of encoded data (1 + M/K).
    pub overhead_encoded: f64,
    /// Stored bytes per logical byte with the warm share encoded.
    pub overhead_blended: f64,
    /// Bytes stored, everything replicated.
    pub stored_replicated: f64,
    /// Bytes stored with the warm share encoded.
    pub stored_with_ec: f64,
    /// Disks those bytes fill, replicated.
    pub disks_replicated: u64,
    /// Disks they fill with the warm share encoded.
    pub disks_with_ec: u64,
    /// Disk capex saved (dollars).
    pub capex_saved: f64,
    /// Disk replacements saved per year (dollars, at the disks' AFR).
    pub opex_saved_per_year: f64,
    /// Shard reads a degraded read of encoded data makes (K).
    pub degraded_read_amplification: f64,
    /// Probability that the disk holding a given shard is lost at a given
    /// moment (AFR × rebuild time / year).
    pub disk_down_probability: f64,
    /// Extra bytes read per second by degraded reads, on average.
    pub degraded_read_bytes_per_s: f64,
    /// Seconds to rebuild one lost disk when every other disk takes a
    /// share, replicated (one source read per byte).
    pub rebuild_seconds_replicated: f64,
    /// The same with the warm share encoded (K source reads per byte).
    pub rebuild_seconds_with_ec: f64,
    /// Bytes read per lost disk's rebuild, replicated.
    pub rebuild_read_bytes_replicated: f64,
    /// Bytes read per lost disk's rebuild with the warm share encoded.
    pub rebuild_read_bytes_with_ec: f64,
    /// Rebuild bytes read per year over the cluster (disks × AFR × each).
    pub rebuild_read_bytes_per_year_with_ec: f64,
}

/// Prices the inputs on `disk`.
pub fn price_ec(disk: &DiskModel, i: EcInputs) -> EcPrice {
    let r = f64::from(i.replicas.max(1));
    let k = i.k.max(1) as f64;
    let enc = 1.0 + i.m as f64 / k;
    let f = i.warm_bytes_fraction.clamp(0.0, 1.0);
    let blended = (1.0 - f) * r + f * enc;
    let cap = disk.capacity_gb * 1e9;
    let stored_r = i.logical_bytes * r;
    let stored_e = i.logical_bytes * blended;
    let disks = |b: f64| ((b / cap).ceil() as u64).max(1);
    let (dr, de) = (disks(stored_r), disks(stored_e));
    let bw = disk.bandwidth_mb_s * 1e6;
    // One lost disk: its bytes are rebuilt by every other disk at once
    // (FDS); the bound is the disks' bandwidth, read and write together.
    let per_disk_r = stored_r / dr as f64;
    let per_disk_e = stored_e / de as f64;
    let enc_share = if blended > 0.0 {
        f * enc / blended
    } else {
        0.0
    };
    let read_r = per_disk_r;
    let read_e = per_disk_e * ((1.0 - enc_share) + enc_share * k);
    let secs = |read: f64, written: f64, n: u64| (read + written) / (bw * (n.max(2) - 1) as f64);
    let rebuild_r = secs(read_r, per_disk_r, dr);
    let rebuild_e = secs(read_e, per_disk_e, de);
    let down = (disk.afr * rebuild_e / (365.25 * 86400.0)).min(1.0);
    EcPrice {
        inputs: i,
        overhead_replicated: r,
        overhead_encoded: enc,
        overhead_blended: blended,
        stored_replicated: stored_r,
        stored_with_ec: stored_e,
        disks_replicated: dr,
        disks_with_ec: de,
        capex_saved: (dr as f64 - de as f64) * disk.price,
        opex_saved_per_year: (dr as f64 - de as f64) * disk.afr * disk.price,
        degraded_read_amplification: k,
        disk_down_probability: down,
        // Nothing encoded, no read of encoded data.
        degraded_read_bytes_per_s: i.reads_per_s
            * if f > 0.0 { i.warm_reads_fraction } else { 0.0 }
            * down
            * (k - 1.0)
            * i.read_bytes,
        rebuild_seconds_replicated: rebuild_r,
        rebuild_seconds_with_ec: rebuild_e,
        rebuild_read_bytes_replicated: read_r,
        rebuild_read_bytes_with_ec: read_e,
        rebuild_read_bytes_per_year_with_ec: de as f64 * disk.afr * read_e,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inputs(f: f64) -> EcInputs {
        EcInputs {
            k: 10,
            m: 4,
            replicas: 3,
            logical_bytes: 1e15,
            warm_bytes_fraction: f,
            reads_per_s: 1000.0,
            warm_reads_fraction: 0.01,
            read_bytes: 100e3,
        }
    }

    #[test]
    fn everything_encoded_is_one_plus_m_over_k() {
        let d = DiskModel::default();
        let p = price_ec(&d, inputs(1.0));
        assert!((p.overhead_blended - 1.4).abs() < 1e-12);
        assert_eq!(p.disks_replicated, 750); // 3 PB on 4 TB disks
        assert_eq!(p.disks_with_ec, 350);
        assert!((p.capex_saved - 400.0 * d.price).abs() < 1e-6);
        assert_eq!(p.degraded_read_amplification, 10.0);
        // A lost disk's encoded bytes are read K times over.
        assert!((p.rebuild_read_bytes_with_ec / (p.stored_with_ec / 350.0) - 10.0).abs() < 1e-9);
        assert!(p.degraded_read_bytes_per_s > 0.0);
    }

    #[test]
    fn nothing_encoded_changes_nothing() {
        let p = price_ec(&DiskModel::default(), inputs(0.0));
        assert_eq!(p.stored_with_ec, p.stored_replicated);
        assert_eq!(p.disks_with_ec, p.disks_replicated);
        assert_eq!(p.capex_saved, 0.0);
        assert_eq!(
            p.rebuild_read_bytes_with_ec,
            p.rebuild_read_bytes_replicated
        );
        assert_eq!(p.degraded_read_bytes_per_s, 0.0);
    }

    #[test]
    fn half_encoded_blends() {
        let p = price_ec(&DiskModel::default(), inputs(0.5));
        assert!((p.overhead_blended - 2.2).abs() < 1e-12);
    }
}
