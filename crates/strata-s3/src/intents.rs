//! Write intents (docs/placement.md, "Write intents"): an S3 write changes
//! an object, then its listing entry. A coordinator killed between the two
//! would leave them disagreeing for ever (docs/reliability.md, finding 8).
//! So before the object changes, the coordinator records an *intent* for
//! its name, durably, in its own node's index file; once the entry is
//! written it removes it. Intents a crash (or a failed entry write) leaves
//! are *resolved*: at start, and every [`RESOLVE_EVERY`] for those older
//! than [`RESOLVE_AFTER`], the entry is set to what the object's head
//! record says (its size, ETag, metadata and record stamp) or removed if
//! the object is gone, on every replica of the bucket's index row, each
//! change applied only over nothing older, so a later write of the name
//! is never undone.
//!
//! An intent on the coordinator alone would be lost with it: a node lost
//! with its disk in the middle of a write would leave its object and
//! listing entry disagreeing for ever. So a coordinator whose bucket's
//! index row has other live replicas also records a *mirror* of the
//! intent on one of them (the first that takes it), and removes it with
//! its own. A node resolves the mirrors it holds only once they are
//! older than [`RESOLVE_AFTER`] (never at its start, as it does its own:
//! their writes may still be in flight on a live coordinator), so a
//! mirror resolves only what its coordinator did not.

use std::sync::Arc;
use std::time::Duration;

use strata_client::Client;
use strata_proto::{listing_entry, IndexEntry};

use crate::cluster::unavailable;
use crate::service::StrataS3;

/// How often the resolver looks for intents left behind.
pub const RESOLVE_EVERY: Duration = Duration::from_secs(10);

/// An intent this old is no write in flight any more (a client gives up
/// long before): it is resolved.
pub const RESOLVE_AFTER: Duration = Duration::from_secs(60);

/// [`RESOLVE_EVERY`] and [`RESOLVE_AFTER`], or, for tests that cannot wait
/// a minute, the milliseconds in `STRATA_TEST_RESOLVE_EVERY_MS` and
/// `STRATA_TEST_RESOLVE_AFTER_MS`.
pub(crate) fn resolver_times() -> (Duration, Duration) {
    let ms = |var: &str, default: Duration| {
        std::env::var(var)
            .ok()
            .and_then(|v| v.parse().ok())
            .map_or(default, Duration::from_millis)
    };
    (
        ms("STRATA_TEST_RESOLVE_EVERY_MS", RESOLVE_EVERY),
        ms("STRATA_TEST_RESOLVE_AFTER_MS", RESOLVE_AFTER),
    )
}

/// A recorded intent; [`Intent::done`] removes it. Its stamp is the
/// write's: the object's head record (or tombstone) and its listing entry
/// both carry it, so that a resolution can tell what the write itself
/// left from what a later write did.
pub(crate) struct Intent {
    client: Arc<Client>,
    names: Vec<(String, String)>,
    pub(crate) stamp: u64,
    recorded: bool,
    /// The node holding its mirror, if one does.
    mirror: Option<String>,
}

impl Intent {
    /// Removes the intent and its mirror (in the background: if either is
    /// lost, its resolution finds the entry already right).
    pub(crate) fn done(self) {
        if !self.recorded {
            return;
        }
        tokio::spawn(async move { self.remove().await });
    }

    async fn remove(&self) {
        let own = self.client.intent(&self.names, self.stamp, false, false);
        let mirror = async {
            if let (Some(to), Some((bucket, _))) = (&self.mirror, self.names.first()) {
                let names = &self.names;
                self.client
                    .mirror_intent(bucket, names, self.stamp, false, Some(to))
                    .await;
            }
        };
        let _ = tokio::join!(own, mirror);
    }

    /// The write failed, and its object and listing entry may disagree
    /// (either may have been written, on some replicas or all): resolves
    /// the intent now, in the background, rather than after
    /// [`RESOLVE_AFTER`]; if that fails too, the resolver does it later.
    pub(crate) fn failed(self) {
        if !self.recorded {
            return;
        }
        tokio::spawn(async move {
            for (bucket, key) in &self.names {
                if resolve(&self.client, bucket, key, self.stamp)
                    .await
                    .is_err()
                {
                    return;
                }
            }
            self.remove().await;
        });
    }
}

/// Sets the listing entry of `bucket/key` to what its head record says,
/// or removes it when the object is gone, over anything the write of
/// intent `stamp` may have left but never over a later write.
async fn resolve(client: &Client, bucket: &str, key: &str, stamp: u64) -> Result<(), String> {
    let head = client
        .read_head_info(bucket, key)
        .await
        .map_err(|e| e.to_string())?;
    match head {
        Some(r) => match listing_entry(&r.head, r.stamp) {
            Some(e) => client.index_resolve(bucket, key, Some(&e), 0, stamp).await,
            // Written over the native API meanwhile: not listed.
            None => Ok(()),
        },
        None => client.index_resolve(bucket, key, None, stamp, stamp).await,
    }
    .map_err(|e| e.to_string())
}

impl StrataS3 {
    /// Records, durably, that the objects `keys` of `bucket` are about to
    /// change (before they do).
    pub(crate) async fn intend(
        &self,
        client: &Arc<Client>,
        bucket: &str,
        keys: &[&str],
    ) -> s3s::S3Result<Intent> {
        let names: Vec<(String, String)> = keys
            .iter()
            .map(|k| (bucket.to_string(), k.to_string()))
            .collect();
        let stamp = client.next_stamp();
        if !self.listing_index {
            return Ok(Intent {
                client: client.clone(),
                names,
                stamp,
                recorded: false,
                mirror: None,
            });
        }
        // This node's intent and its mirror at once.
        let (own, mirror) = tokio::join!(
            client.intent(&names, stamp, true, false),
            client.mirror_intent(bucket, &names, stamp, true, None)
        );
        let intent = Intent {
            client: client.clone(),
            names,
            stamp,
            recorded: true,
            mirror,
        };
        match own {
            Ok(recorded) => Ok(Intent { recorded, ..intent }),
            Err(e) => {
                // The mirror alone is no record: removed.
                intent.done();
                Err(unavailable(e))
            }
        }
    }

    /// Changes `bucket/key`'s listing entry to `entry` (or removes it:
    /// `None`), stamped `stamp`, and records the write's intent in the same
    /// durable commit, when this node alone holds the bucket's index row (a
    /// cluster of one): the object's own change comes after, and a crash
    /// between leaves the intent to resolve. `None`, having sent nothing,
    /// when the row has other replicas: then [`StrataS3::intend`] first and
    /// the entry beside the object's change.
    pub(crate) async fn intend_listed(
        &self,
        client: &Arc<Client>,
        bucket: &str,
        key: &str,
        entry: Option<&IndexEntry>,
        stamp: u64,
    ) -> s3s::S3Result<Option<Intent>> {
        if !self.listing_index {
            return Ok(None);
        }
        let intent = Intent {
            client: client.clone(),
            names: vec![(bucket.to_string(), key.to_string())],
            stamp,
            recorded: true,
            mirror: None,
        };
        match client.index_write_intended(bucket, key, entry, stamp).await {
            Ok(true) => Ok(Some(intent)),
            Ok(false) => Ok(None),
            Err(e) => {
                // The commit may have been made: resolved now, not after
                // RESOLVE_AFTER.
                intent.failed();
                Err(unavailable(e))
            }
        }
    }

    /// Resolves every intent of this node's own recorded before `before`
    /// (a stamp), and every one it holds for another node recorded before
    /// `mirrored_before`: returns how many of each were resolved.
    pub async fn resolve_intents(
        &self,
        before: u64,
        mirrored_before: u64,
    ) -> Result<(usize, usize), String> {
        let client = self.cluster().client();
        let mut resolved = [0, 0];
        for (mirrored, before) in [(false, before), (true, mirrored_before)] {
            let left = client
                .intents_before(before, mirrored)
                .await
                .map_err(|e| e.to_string())?;
            for (bucket, key, stamp) in left {
                resolve(&client, &bucket, &key, stamp).await?;
                client
                    .intent(&[(bucket, key)], stamp, false, mirrored)
                    .await
                    .map_err(|e| e.to_string())?;
                resolved[usize::from(mirrored)] += 1;
            }
        }
        Ok((resolved[0], resolved[1]))
    }
}
