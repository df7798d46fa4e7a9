//! The replica interface the coordinator calls: one typed call per
//! operation of the node protocol, with two implementations. [`Remote`]
//! sends each call as its HTTP request to a node in another process; a
//! node's own process implements [`Replica`] with direct calls into its
//! row stores and listing index (strata-server's `local` module), so a
//! coordinator that holds one of a row's replicas reaches it with no
//! request built, signed or parsed and no body copied.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use bytes::Bytes;
use hyper::{Method, StatusCode};
use strata_proto::replica::{IndexChange, IndexOrder, RecordRead, Refusal, Replaced};
use strata_proto::{
    extend_path, index_list_path, index_path, object_path, ExtendRequest, ExtendResponse,
    IntentChange, ListPage, ListQuery, HEAD_START_PARAM, RECORD_MANIFEST,
};

use crate::http::{Http, HttpResponse};

/// A call's answer, once the replica has it.
pub type Call<'a, T> = Pin<Box<dyn Future<Output = Result<T, Refusal>> + Send + 'a>>;

/// The write intents a node holds with a stamp below a bound: (bucket,
/// key, stamp).
pub type Intents = Vec<(String, String, u64)>;

/// One replica of the cluster's rows, as the coordinator calls it. Every
/// call on a row carries the caller's table `version`; a replica with a
/// newer table refuses it ([`Refusal::Stale`]).
pub trait Replica: Send + Sync {
    /// Stores `record` as `bucket/key` in `row` with `stamp`, durably
    /// before it answers; answers the tier it went to.
    fn put<'a>(
        &'a self,
        version: u64,
        row: usize,
        bucket: &'a str,
        key: &'a str,
        stamp: u64,
        record: Bytes,
    ) -> Call<'a, Option<String>>;

    /// Reads `bucket/key` of `row` (its first `limit` bytes only, when
    /// given).
    fn get<'a>(
        &'a self,
        version: u64,
        row: usize,
        bucket: &'a str,
        key: &'a str,
        limit: Option<usize>,
    ) -> Call<'a, RecordRead>;

    /// Writes a tombstone of `stamp` over `bucket/key` of `row`; answers
    /// what it replaced.
    fn delete<'a>(
        &'a self,
        version: u64,
        row: usize,
        bucket: &'a str,
        key: &'a str,
        stamp: u64,
    ) -> Call<'a, Replaced>;

    /// FDS's extend-blob, at the first live replica of the object's
    /// metadata row: reserves `req.lens` tracts at the object's end.
    fn extend<'a>(
        &'a self,
        version: u64,
        row: usize,
        bucket: &'a str,
        key: &'a str,
        req: &'a ExtendRequest,
    ) -> Call<'a, ExtendResponse>;

    /// Applies one change of a listing entry.
    fn index_change<'a>(&'a self, version: u64, change: &'a IndexChange) -> Call<'a, ()>;

    /// One page of `bucket`'s listing.
    fn index_list<'a>(
        &'a self,
        version: u64,
        bucket: &'a str,
        q: &'a ListQuery,
    ) -> Call<'a, ListPage>;

    /// Records or removes write intents.
    fn intents<'a>(&'a self, change: &'a IntentChange) -> Call<'a, ()>;

    /// The write intents held with a stamp below `before` (`mirrored`:
    /// those held for other nodes).
    fn intents_before(&self, before: u64, mirrored: bool) -> Call<'_, Intents>;
}

/// A replica in another process, at `addr`, called over the node protocol
/// (HTTP, signed with the cluster secret).
pub struct Remote<'h> {
    /// The connection pool.
    pub http: &'h Http,
    /// `host:port`.
    pub addr: &'h str,
    /// One request's timeout.
    pub timeout: Duration,
    /// The digest of the record a [`Replica::put`] sends, when the caller
    /// hashed it once for all the replicas it goes to.
    pub digest: Option<strata_meta::cluster_auth::Digest>,
}

impl Remote<'_> {
    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    async fn send(
        &self,
        method: Method,
        path: &str,
        version: Option<u64>,
        stamp: Option<u64>,
        body: Bytes,
    ) -> Result<HttpResponse, Refusal> {
        self.send_digested(method, path, version, stamp, body, None)
            .await
    }

    /// [`send`](Self::send) of a body whose digest the caller may have.
    async fn send_digested(
        &self,
        method: Method,
        path: &str,
        version: Option<u64>,
        stamp: Option<u64>,
        body: Bytes,
        digest: Option<strata_meta::cluster_auth::Digest>,
    ) -> Result<HttpResponse, Refusal> {
        let url = self.url(path);
        self.http
            .send_digested(method, &url, version, stamp, body, digest, self.timeout)
            .await
            .map_err(Refusal::Unreachable)
    }
}

/// The refusal of a non-2xx answer.
fn refusal(r: &HttpResponse) -> Refusal {
    Refusal::from_status(r.status.as_u16(), r.table_version, &r.body)
}

fn json<T: serde::de::DeserializeOwned>(r: &HttpResponse) -> Result<T, Refusal> {
    serde_json::from_slice(&r.body).map_err(|e| Refusal::Failed(format!("bad answer: {e}")))
}

fn to_json(v: &impl serde::Serialize) -> Bytes {
    Bytes::from(serde_json::to_vec(v).unwrap_or_default())
}

impl Replica for Remote<'_> {
    fn put<'a>(
        &'a self,
        version: u64,
        row: usize,
        bucket: &'a str,
        key: &'a str,
        stamp: u64,
        record: Bytes,
    ) -> Call<'a, Option<String>> {
        Box::pin(async move {
            let path = object_path(row, bucket, key);
            let r = self
                .send_digested(
                    Method::PUT,
                    &path,
                    Some(version),
                    Some(stamp),
                    record,
                    self.digest,
                )
                .await?;
            if r.status.is_success() {
                Ok(r.tier)
            } else {
                Err(refusal(&r))
            }
        })
    }

    fn get<'a>(
        &'a self,
        version: u64,
        row: usize,
        bucket: &'a str,
        key: &'a str,
        limit: Option<usize>,
    ) -> Call<'a, RecordRead> {
        Box::pin(async move {
            let mut path = object_path(row, bucket, key);
            if let Some(n) = limit {
                path = format!("{path}?{HEAD_START_PARAM}={n}");
            }
            let r = self
                .send(Method::GET, &path, Some(version), None, Bytes::new())
                .await?;
            match r.status {
                StatusCode::OK => Ok(RecordRead::Found {
                    record: r.body,
                    stamp: r.stamp.unwrap_or(0),
                    len: r.record_len,
                    tier: r.tier,
                }),
                StatusCode::NOT_FOUND => Ok(match r.stamp {
                    Some(stamp) => RecordRead::Deleted { stamp },
                    None => RecordRead::Absent,
                }),
                _ => Err(refusal(&r)),
            }
        })
    }

    fn delete<'a>(
        &'a self,
        version: u64,
        row: usize,
        bucket: &'a str,
        key: &'a str,
        stamp: u64,
    ) -> Call<'a, Replaced> {
        Box::pin(async move {
            let path = object_path(row, bucket, key);
            let r = self
                .send(
                    Method::DELETE,
                    &path,
                    Some(version),
                    Some(stamp),
                    Bytes::new(),
                )
                .await?;
            if !r.status.is_success() && r.status != StatusCode::NOT_FOUND {
                return Err(refusal(&r));
            }
            let live = r.status.is_success();
            Ok(Replaced {
                stamp: r.stamp,
                live,
                manifest: (live && r.body.first() == Some(&RECORD_MANIFEST)).then_some(r.body),
            })
        })
    }

    fn extend<'a>(
        &'a self,
        version: u64,
        row: usize,
        bucket: &'a str,
        key: &'a str,
        req: &'a ExtendRequest,
    ) -> Call<'a, ExtendResponse> {
        Box::pin(async move {
            let path = extend_path(row, bucket, key);
            let r = self
                .send(Method::POST, &path, Some(version), None, to_json(req))
                .await?;
            if r.status.is_success() {
                json(&r)
            } else {
                Err(refusal(&r))
            }
        })
    }

    fn index_change<'a>(&'a self, version: u64, c: &'a IndexChange) -> Call<'a, ()> {
        Box::pin(async move {
            let order = match c.order {
                IndexOrder::Write => String::new(),
                IndexOrder::Copy => "order=copy&".into(),
                IndexOrder::Resolve { upto } => format!("order=resolve&upto={upto}&"),
            };
            let intent = if c.intent { "intent=1&" } else { "" };
            let path = format!(
                "{}?{intent}{order}stamp={}",
                index_path(&c.bucket, &c.key),
                c.stamp
            );
            let (method, body) = match &c.entry {
                Some(e) => (Method::PUT, to_json(e)),
                None => (Method::DELETE, Bytes::new()),
            };
            let r = self.send(method, &path, Some(version), None, body).await?;
            if r.status.is_success() {
                Ok(())
            } else {
                Err(refusal(&r))
            }
        })
    }

    fn index_list<'a>(
        &'a self,
        version: u64,
        bucket: &'a str,
        q: &'a ListQuery,
    ) -> Call<'a, ListPage> {
        Box::pin(async move {
            let r = self
                .send(
                    Method::POST,
                    &index_list_path(bucket),
                    Some(version),
                    None,
                    to_json(q),
                )
                .await?;
            if r.status.is_success() {
                json(&r)
            } else {
                Err(refusal(&r))
            }
        })
    }

    fn intents<'a>(&'a self, change: &'a IntentChange) -> Call<'a, ()> {
        Box::pin(async move {
            let r = self
                .send(
                    Method::POST,
                    "/cluster/v1/intents",
                    None,
                    None,
                    to_json(change),
                )
                .await?;
            if r.status.is_success() {
                Ok(())
            } else {
                Err(refusal(&r))
            }
        })
    }

    fn intents_before(&self, before: u64, mirrored: bool) -> Call<'_, Intents> {
        Box::pin(async move {
            let kind = if mirrored { "&mirrored=1" } else { "" };
            let path = format!("/cluster/v1/intents?before={before}{kind}");
            let r = self
                .send(Method::GET, &path, None, None, Bytes::new())
                .await?;
            if r.status.is_success() {
                json(&r)
            } else {
                Err(refusal(&r))
            }
        })
    }
}
