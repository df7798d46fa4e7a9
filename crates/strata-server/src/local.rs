//! This node's own replica as its coordinator calls it: the node
//! protocol's operations as direct calls into the row stores and the
//! listing index (the same functions the protocol's HTTP handlers call),
//! with no request built, signed or parsed and no body copied.

use std::sync::Arc;

use bytes::Bytes;
use strata_client::replica::{Call, Intents};
use strata_client::Replica;
use strata_proto::replica::{IndexChange, RecordRead, Refusal, Replaced};
use strata_proto::{ExtendRequest, ExtendResponse, IntentChange, ListPage, ListQuery};

use crate::index::ListingIndex;
use crate::node::ClusterNode;

/// The replica in this process.
pub struct LocalReplica {
    pub(crate) node: Arc<ClusterNode>,
    pub(crate) index: Arc<ListingIndex>,
}

impl Replica for LocalReplica {
    fn put<'a>(
        &'a self,
        version: u64,
        row: usize,
        bucket: &'a str,
        key: &'a str,
        stamp: u64,
        record: Bytes,
    ) -> Call<'a, Option<String>> {
        Box::pin(crate::server::put_record(
            &self.node, version, row, bucket, key, stamp, record,
        ))
    }

    fn get<'a>(
        &'a self,
        version: u64,
        row: usize,
        bucket: &'a str,
        key: &'a str,
        limit: Option<usize>,
    ) -> Call<'a, RecordRead> {
        Box::pin(crate::server::get_record(
            &self.node, version, row, bucket, key, false, limit,
        ))
    }

    fn delete<'a>(
        &'a self,
        version: u64,
        row: usize,
        bucket: &'a str,
        key: &'a str,
        stamp: u64,
    ) -> Call<'a, Replaced> {
        Box::pin(crate::server::delete_record(
            &self.node, version, row, bucket, key, stamp,
        ))
    }

    fn extend<'a>(
        &'a self,
        version: u64,
        row: usize,
        bucket: &'a str,
        key: &'a str,
        req: &'a ExtendRequest,
    ) -> Call<'a, ExtendResponse> {
        Box::pin(crate::server::extend_record(
            &self.node, version, row, bucket, key, req,
        ))
    }

    fn index_change<'a>(&'a self, version: u64, change: &'a IndexChange) -> Call<'a, ()> {
        Box::pin(async move {
            self.node.admit_index(version, &change.bucket).await?;
            crate::index::apply_change(&self.index, change).await
        })
    }

    fn index_list<'a>(
        &'a self,
        version: u64,
        bucket: &'a str,
        q: &'a ListQuery,
    ) -> Call<'a, ListPage> {
        Box::pin(async move {
            self.node.admit_index(version, bucket).await?;
            crate::index::list_page(&self.index, bucket, q).await
        })
    }

    fn intents<'a>(&'a self, c: &'a IntentChange) -> Call<'a, ()> {
        Box::pin(async move {
            self.index
                .intents(&c.names, c.stamp, c.add, c.mirrored)
                .await
                .map_err(|e| Refusal::Failed(e.to_string()))
        })
    }

    fn intents_before(&self, before: u64, mirrored: bool) -> Call<'_, Intents> {
        Box::pin(crate::index::intents_below(&self.index, before, mirrored))
    }
}
