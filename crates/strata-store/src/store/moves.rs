//! Tier moves: a sealed segment moved whole to another device directory
//! (flash to disk, say) starts only when the destination has room for it
//! and still keeps headroom for client writes; the copy itself is the
//! rewrite's ([`super::rewrite`]).

use super::report::{RewriteProgress, RewriteReport};
use super::Inner;
use crate::error::{Result, StoreError};
#[cfg(doc)]
use crate::Store;
use std::sync::atomic::Ordering;

/// Bytes a segment move leaves free on its destination, of a file system of
/// `fs_bytes`: 1/32 of it, at least 1 MiB.
pub fn move_headroom(fs_bytes: u64) -> u64 {
    (fs_bytes / 32).max(1 << 20)
}

impl Inner {
    /// [`Store::move_segment`]: the room check, then the rewrite.
    pub(super) fn move_segment(
        &self,
        segment: u64,
        device: usize,
        progress: &mut dyn FnMut(RewriteProgress),
    ) -> Result<RewriteReport> {
        let Some(dev) = self.devices.get(device) else {
            return Err(StoreError::NoSuchDevice(device));
        };
        let size = self.find(segment)?.len.load(Ordering::Acquire);
        if let Ok(st) = rustix::fs::statvfs(&dev.path) {
            let available = st.f_bavail.saturating_mul(st.f_frsize);
            let needed = size + move_headroom(st.f_blocks.saturating_mul(st.f_frsize));
            if available < needed {
                return Err(StoreError::NoRoom {
                    dir: dev.path.clone(),
                    segment,
                    available,
                    needed,
                });
            }
        }
        self.rewrite(segment, Some(device), progress)
    }
}
