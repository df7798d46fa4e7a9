//! What an open does about damage before it repairs it: the damage note,
//! written before the first repair that hides damage, and the quarantine
//! of segment files it cannot read.

use super::locks::lock;
use super::report::Quarantined;
use crate::config::StoreConfig;
use crate::error::{Result, StoreError};
#[cfg(doc)]
use crate::{OpenReport, Store};
use std::path::PathBuf;
use std::sync::Mutex;

/// The file in a store's first device directory that says an open found
/// damage that may have lost acknowledged needles (what
/// [`OpenReport::may_lack_records`] reports), until
/// [`Store::damage_dealt_with`]. It is written, whole, before the open
/// changes anything that shows the damage (a torn tail cut, a file set
/// aside, a checkpoint written over a damaged region), so that a crash or
/// a power cut in the middle of the repair cannot make the store forget
/// it: the next open reports it as [`OpenReport::earlier_damage`].
pub const DAMAGE_NOTE: &str = "damage-found";

/// Writes the [`DAMAGE_NOTE`] once, before the first repair that hides
/// damage; shared by the open's loading threads.
pub(super) struct DamageNote {
    path: PathBuf,
    written: Mutex<bool>,
}

impl DamageNote {
    pub(super) fn new(cfg: &StoreConfig) -> DamageNote {
        DamageNote {
            path: cfg.devices[0].path.join(DAMAGE_NOTE),
            written: Mutex::new(false),
        }
    }

    /// Makes the note durable (if it is not already) before a repair of
    /// damage that `why` describes.
    pub(super) fn before_repair(&self, why: &str) -> Result<()> {
        let mut w = lock(&self.written);
        if !*w {
            strata_fs::write_atomic(&self.path, why.as_bytes())
                .map_err(StoreError::io("recording the damage found in", &self.path))?;
            *w = true;
        }
        Ok(())
    }
}

/// The subdirectory of a device directory where unreadable segment files
/// are moved.
pub const QUARANTINE_DIR: &str = "quarantine";

/// Moves `path` (and `also`, its checkpoint, if present) to the quarantine
/// directory beside it, never over an earlier file of the same name.
pub(super) fn quarantine(
    note: &DamageNote,
    path: &std::path::Path,
    also: Option<PathBuf>,
    reason: String,
) -> Quarantined {
    let moved_to = (|| -> std::io::Result<PathBuf> {
        note.before_repair(&format!("{} set aside: {reason}", path.display()))
            .map_err(std::io::Error::other)?;
        let dir = path.parent().unwrap_or(std::path::Path::new("."));
        let q = dir.join(QUARANTINE_DIR);
        strata_fs::create_dir_all(&q)?;
        let free = |name: &std::ffi::OsStr| {
            let mut to = q.join(name);
            let mut n = 1;
            while to.exists() {
                let mut s = name.to_owned();
                s.push(format!(".{n}"));
                to = q.join(s);
                n += 1;
            }
            to
        };
        let to = free(path.file_name().unwrap_or_default());
        strata_fs::rename(path, &to)?;
        if let Some(a) = also.filter(|a| a.exists()) {
            let _ = strata_fs::rename(&a, &free(a.file_name().unwrap_or_default()));
        }
        strata_fs::sync_dir(&q)?;
        strata_fs::sync_dir(dir)?;
        Ok(to)
    })();
    let (moved_to, reason) = match moved_to {
        Ok(to) => (Some(to), reason),
        Err(e) => (None, format!("{reason} (could not be moved: {e})")),
    };
    Quarantined {
        path: path.to_path_buf(),
        moved_to,
        reason,
    }
}
