//! The device directories of a node, shared by `strata server` and
//! `strata upgrade`.

use anyhow::bail;
use std::path::{Path, PathBuf};
use strata_meta::api::TierClass;

/// The device directories: `--flash` and `--disk`, or with neither,
/// DATA/flash and DATA/disk (`strata server` and `strata upgrade`).
pub fn device_list(
    data: &Path,
    flash: &[PathBuf],
    disk: &[PathBuf],
) -> anyhow::Result<Vec<strata_server::Device>> {
    let (flash, disk) = if flash.is_empty() && disk.is_empty() {
        (vec![data.join("flash")], vec![data.join("disk")])
    } else {
        (flash.to_vec(), disk.to_vec())
    };
    let devices: Vec<strata_server::Device> = flash
        .iter()
        .map(|p| (p, TierClass::Flash))
        .chain(disk.iter().map(|p| (p, TierClass::Disk)))
        .map(|(p, tier)| strata_server::Device {
            path: p.clone(),
            tier,
        })
        .collect();
    let mut seen = std::collections::HashSet::new();
    for d in &devices {
        if !seen.insert(d.path.clone()) {
            bail!("device directory {} is given twice", d.path.display());
        }
    }
    Ok(devices)
}
