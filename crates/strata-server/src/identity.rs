//! What a node remembers across restarts: its node and disk ids and its
//! metadata service, in `DATA/cluster-node.json` and a copy in every
//! device directory, written so that a power cut at any step leaves one
//! whole copy (docs/node.md).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use strata_placement::{DiskId, NodeId};

use crate::ClusterError;

/// The copy of a node's identity in each of its device directories.
pub const DEVICE_IDENTITY: &str = "strata-device.json";

/// Reads an identity file: `Ok(None)` when it does not exist, `Err` with
/// what is wrong when it cannot be read or parsed (empty, damaged).
pub(crate) fn read_identity(path: &Path) -> Result<Option<Identity>, String> {
    let bytes = match strata_fs::read_if_exists(path) {
        Ok(None) => return Ok(None),
        Ok(Some(b)) => b,
        Err(e) => return Err(format!("{} cannot be read ({e})", path.display())),
    };
    if bytes.is_empty() {
        return Err(format!("{} is empty", path.display()));
    }
    let mut i: Identity = serde_json::from_slice(&bytes)
        .map_err(|e| format!("{} is damaged ({e})", path.display()))?;
    if i.disk_ids.is_empty() {
        i.disk_ids.extend(i.disk_id);
    }
    Ok(Some(i))
}

/// The identity a node had: `primary` (`DATA/cluster-node.json`), or,
/// when that is missing, empty or damaged, the copy every device
/// directory keeps ([`DEVICE_IDENTITY`], written with it), so that a node
/// whose own directory lost the file to a power cut (or an operator)
/// comes back as itself (docs/recovery.md, *A node comes back as
/// itself*). Copies that disagree are refused: which devices belong to
/// which node is then for a person to say.
pub(crate) fn recover_identity(
    primary: &Path,
    devices: &[PathBuf],
) -> Result<Option<Identity>, ClusterError> {
    let why = match read_identity(primary) {
        Ok(Some(i)) => return Ok(Some(i)),
        Ok(None) => "missing".to_string(),
        Err(e) => e,
    };
    let mut found: Vec<(PathBuf, Identity)> = Vec::new();
    for d in devices {
        let p = d.join(DEVICE_IDENTITY);
        match read_identity(&p) {
            Ok(Some(i)) => found.push((p, i)),
            Ok(None) => {}
            Err(e) => eprintln!("strata server: {e}; not used"),
        }
    }
    let Some((first_path, first)) = found.first().cloned() else {
        return Ok(None);
    };
    if let Some((p, other)) = found
        .iter()
        .find(|(_, i)| i.node_id != first.node_id || i.disk_ids != first.disk_ids)
    {
        return Err(ClusterError::Refused(format!(
            "{} is {why}, and the device directories disagree on whose they are: {} says \
             node {} (disks {:?}), {} says node {} (disks {:?}); start the node with the \
             devices of one node",
            primary.display(),
            first_path.display(),
            first.node_id,
            first.disk_ids,
            p.display(),
            other.node_id,
            other.disk_ids
        )));
    }
    eprintln!(
        "strata server: {} is {why}; this node is {} again, as {} says",
        primary.display(),
        first.node_id,
        first_path.display()
    );
    Ok(Some(first))
}

/// Writes the identity to every device directory ([`DEVICE_IDENTITY`]),
/// then to `primary`, each crash-safely ([`strata_fs::write_atomic_with`]:
/// temporary file, fsync, rename, directory fsync) and readable by the
/// service's user only (mode 0600: it holds the node key).
pub(crate) fn save_identity(
    id: &Identity,
    primary: &Path,
    devices: &[PathBuf],
) -> Result<(), ClusterError> {
    let bytes = serde_json::to_vec_pretty(id).unwrap_or_default();
    let paths = devices
        .iter()
        .map(|d| d.join(DEVICE_IDENTITY))
        .chain(std::iter::once(primary.to_path_buf()));
    for path in paths {
        strata_fs::write_atomic_with(&path, |f| {
            use std::os::unix::fs::PermissionsExt;
            f.set_permissions(std::fs::Permissions::from_mode(0o600))?;
            strata_fs::write_all_at(f, &bytes, 0)
        })
        .map_err(|source| ClusterError::Io {
            path: path.display().to_string(),
            source,
        })?;
    }
    Ok(())
}

/// What a node remembers across restarts: `DATA/cluster-node.json`, and a
/// copy in every device directory ([`DEVICE_IDENTITY`]).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Identity {
    pub(crate) node_id: NodeId,
    /// One id per device, in the order of [`NodeOptions::devices`].
    #[serde(default)]
    pub(crate) disk_ids: Vec<DiskId>,
    /// The single disk of the first layout of this file.
    #[serde(default, skip_serializing)]
    pub(crate) disk_id: Option<DiskId>,
    pub(crate) meta: String,
    /// The device directories, in order, as `tier:path` (empty in files
    /// written before they were kept).
    #[serde(default)]
    pub(crate) devices: Vec<String>,
    /// The node key the metadata service gave this id (absent in files
    /// written before keys existed: the next register gets one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) node_key: Option<String>,
}

#[cfg(test)]
// The tests damage and write files as the medium would, bypassing strata-fs.
#[allow(clippy::disallowed_methods)]
mod tests {
    use super::*;

    fn ident(node: u32, disks: &[u32]) -> Identity {
        Identity {
            node_id: NodeId(node),
            disk_ids: disks.iter().map(|&d| DiskId(d)).collect(),
            disk_id: None,
            meta: "127.0.0.1:1".into(),
            devices: disks.iter().map(|d| format!("disk:/d{d}")).collect(),
            node_key: None,
        }
    }

    fn layout(dir: &Path) -> (PathBuf, Vec<PathBuf>) {
        let devices: Vec<PathBuf> = (0..2).map(|i| dir.join(format!("dev{i}"))).collect();
        for d in &devices {
            std::fs::create_dir_all(d).unwrap();
        }
        (dir.join("cluster-node.json"), devices)
    }

    #[test]
    fn an_empty_damaged_or_missing_identity_file_is_recovered_from_the_devices() {
        let dir = tempfile::tempdir().unwrap();
        let (primary, devices) = layout(dir.path());
        assert!(recover_identity(&primary, &devices).unwrap().is_none());
        save_identity(&ident(7, &[11, 12]), &primary, &devices).unwrap();
        let whole = recover_identity(&primary, &devices).unwrap().unwrap();
        assert_eq!((whole.node_id, whole.disk_ids.len()), (NodeId(7), 2));
        for damage in [&b""[..], &b"{\"node_id\": 7, \"disk_"[..]] {
            std::fs::write(&primary, damage).unwrap();
            let back = recover_identity(&primary, &devices).unwrap().unwrap();
            assert_eq!(back.node_id, NodeId(7));
            assert_eq!(back.disk_ids, vec![DiskId(11), DiskId(12)]);
        }
        std::fs::remove_file(&primary).unwrap();
        std::fs::remove_file(devices[0].join(DEVICE_IDENTITY)).unwrap();
        assert_eq!(
            recover_identity(&primary, &devices)
                .unwrap()
                .unwrap()
                .node_id,
            NodeId(7)
        );
    }

    #[test]
    fn device_copies_that_disagree_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (primary, devices) = layout(dir.path());
        save_identity(&ident(7, &[11, 12]), &primary, &devices[..1]).unwrap();
        save_identity(
            &ident(8, &[13, 14]),
            &dir.path().join("other.json"),
            &devices[1..],
        )
        .unwrap();
        std::fs::write(&primary, b"").unwrap();
        let e = recover_identity(&primary, &devices)
            .unwrap_err()
            .to_string();
        assert!(e.contains("disagree"), "{e}");
    }

    /// A power cut at every step of an identity update (the node's
    /// registration under a new id): the node reads back either identity,
    /// whole, never none (before issue 33 the file was rewritten in place
    /// without fsync: empty after a power cut).
    #[test]
    fn the_identity_survives_a_power_cut_at_every_step_of_its_update() {
        use strata_fs::power::{cut_at_every_step, Cut};
        let dir = tempfile::tempdir().unwrap();
        for how in [Cut::Drop, Cut::Tear] {
            cut_at_every_step(
                dir.path(),
                how,
                |r| {
                    let (primary, devices) = layout(r);
                    save_identity(&ident(1, &[1, 2]), &primary, &devices).unwrap();
                },
                |r| {
                    let (primary, devices) = layout(r);
                    save_identity(&ident(4, &[5, 6]), &primary, &devices)
                        .map_err(|e| std::io::Error::other(e.to_string()))
                },
                |r, n| {
                    let (primary, devices) = layout(r);
                    let got = recover_identity(&primary, &devices)
                        .unwrap_or_else(|e| panic!("{how:?} step {n}: {e}"))
                        .unwrap_or_else(|| panic!("{how:?} step {n}: no identity"));
                    assert!(
                        matches!(got.node_id.0, 1 | 4),
                        "{how:?} step {n}: {:?}",
                        got.node_id
                    );
                },
            )
            .unwrap();
        }
    }
}
