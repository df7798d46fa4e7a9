//! A small etcd v3 client over etcd's own JSON gateway (`POST /v3/...`,
//! served by every etcd since 3.4 on the client port).
//!
//! Why not a gRPC client crate: the maintained one (etcd-client) generates
//! its protobuf code at build time and so needs `protoc` on the machine that
//! builds Strata. The metadata service needs three calls (range, a guarded
//! transaction, status), which the gateway serves as JSON over the HTTP/1
//! stack the service already uses; keys and values travel as base64 and
//! 64-bit integers as decimal strings, as protobuf's JSON mapping says.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::{connect::HttpConnector, Client};
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value};

/// What can go wrong talking to etcd.
#[derive(Debug, thiserror::Error)]
pub enum EtcdError {
    /// The endpoint is not an `http://host:port` URL.
    #[error("not an etcd URL ({0}); expected http://HOST:PORT")]
    BadUrl(String),
    /// The connection or the HTTP exchange failed.
    #[error("{0}")]
    Transport(String),
    /// etcd answered with an error.
    #[error("etcd answered {status}: {message}")]
    Server {
        /// The HTTP status.
        status: u16,
        /// etcd's error text.
        message: String,
    },
    /// etcd's answer was not the JSON the gateway documents.
    #[error("unexpected answer from etcd: {0}")]
    Decode(String),
}

/// One key as stored in etcd.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyValue {
    /// The value.
    pub value: Vec<u8>,
    /// The revision of the last change of the key.
    pub mod_revision: i64,
    /// The revision that created the key.
    pub create_revision: i64,
}

/// What a range read found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Range {
    /// Each key found, with its value, in key order.
    pub kvs: Vec<(Vec<u8>, KeyValue)>,
    /// Whether more keys are in the range past the limit.
    pub more: bool,
    /// The store's revision the read saw.
    pub revision: i64,
}

/// A condition of a transaction.
#[derive(Debug, Clone)]
pub enum Compare {
    /// The key's create revision equals this (0: the key is absent).
    CreateRevision(String, i64),
    /// The key's mod revision equals this.
    ModRevision(String, i64),
}

/// An operation of a transaction.
#[derive(Debug, Clone)]
pub enum Op {
    /// Sets a key.
    Put(String, Vec<u8>),
    /// Deletes one key.
    Delete(String),
    /// Deletes the keys in `[from, to)`.
    DeleteRange(String, String),
}

/// A connection to one etcd endpoint.
#[derive(Clone)]
pub struct EtcdClient {
    base: String,
    http: Client<HttpConnector, Full<Bytes>>,
}

impl EtcdClient {
    /// A client of `endpoint` (`http://HOST:PORT`); checks that etcd answers.
    pub async fn connect(endpoint: &str) -> Result<EtcdClient, EtcdError> {
        let base = endpoint.trim_end_matches('/').to_string();
        if !base.starts_with("http://") || base.parse::<hyper::Uri>().is_err() {
            return Err(EtcdError::BadUrl(endpoint.to_string()));
        }
        let c = EtcdClient {
            base,
            http: Client::builder(TokioExecutor::new()).build_http(),
        };
        c.status().await?;
        Ok(c)
    }

    /// The member's status (etcd's version and the current revision).
    pub async fn status(&self) -> Result<Value, EtcdError> {
        self.call("/v3/maintenance/status", json!({})).await
    }

    /// Reads one key.
    pub async fn get(&self, key: &str) -> Result<Option<KeyValue>, EtcdError> {
        let page = self.range(key.as_bytes(), None, 0, 1).await?;
        Ok(page.kvs.into_iter().next().map(|(_, kv)| kv))
    }

    /// Reads the keys in `[from, to)` (only `from` when `to` is None), at
    /// most `limit` (0: no limit), as of `revision` (0: the latest).
    pub async fn range(
        &self,
        from: &[u8],
        to: Option<&[u8]>,
        revision: i64,
        limit: i64,
    ) -> Result<Range, EtcdError> {
        let mut req = json!({ "key": B64.encode(from) });
        if let Some(to) = to {
            req["range_end"] = json!(B64.encode(to));
        }
        if revision > 0 {
            req["revision"] = json!(revision.to_string());
        }
        if limit > 0 {
            req["limit"] = json!(limit.to_string());
        }
        let v = self.call("/v3/kv/range", req).await?;
        let mut kvs = Vec::new();
        for kv in v
            .get("kvs")
            .and_then(|k| k.as_array())
            .into_iter()
            .flatten()
        {
            let field = |name: &str| -> Result<Vec<u8>, EtcdError> {
                match kv.get(name).and_then(|x| x.as_str()) {
                    Some(s) => B64
                        .decode(s)
                        .map_err(|e| EtcdError::Decode(format!("{name} of a key: {e}"))),
                    None => Ok(Vec::new()),
                }
            };
            kvs.push((
                field("key")?,
                KeyValue {
                    value: field("value")?,
                    mod_revision: int(kv, "mod_revision")?,
                    create_revision: int(kv, "create_revision")?,
                },
            ));
        }
        Ok(Range {
            kvs,
            more: v.get("more").and_then(|m| m.as_bool()).unwrap_or(false),
            revision: v.get("header").map_or(Ok(0), |h| int(h, "revision"))?,
        })
    }

    /// Runs `ops` if every condition holds: the revision it made (None
    /// when a condition failed).
    pub async fn txn(&self, when: &[Compare], ops: &[Op]) -> Result<Option<i64>, EtcdError> {
        let compare: Vec<Value> = when
            .iter()
            .map(|c| match c {
                Compare::CreateRevision(k, r) => json!({
                    "key": B64.encode(k), "target": "CREATE", "result": "EQUAL",
                    "create_revision": r.to_string(),
                }),
                Compare::ModRevision(k, r) => json!({
                    "key": B64.encode(k), "target": "MOD", "result": "EQUAL",
                    "mod_revision": r.to_string(),
                }),
            })
            .collect();
        let success: Vec<Value> = ops
            .iter()
            .map(|o| match o {
                Op::Put(k, v) => {
                    json!({ "request_put": { "key": B64.encode(k), "value": B64.encode(v) } })
                }
                Op::Delete(k) => json!({ "request_delete_range": { "key": B64.encode(k) } }),
                Op::DeleteRange(from, to) => json!({
                    "request_delete_range": { "key": B64.encode(from), "range_end": B64.encode(to) }
                }),
            })
            .collect();
        let v = self
            .call(
                "/v3/kv/txn",
                json!({ "compare": compare, "success": success }),
            )
            .await?;
        // Protobuf's JSON mapping leaves out false.
        if !v
            .get("succeeded")
            .and_then(|s| s.as_bool())
            .unwrap_or(false)
        {
            return Ok(None);
        }
        Ok(Some(v.get("header").map_or(Ok(0), |h| int(h, "revision"))?))
    }

    async fn call(&self, path: &str, body: Value) -> Result<Value, EtcdError> {
        let req = hyper::Request::post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body.to_string())))
            .map_err(|e| EtcdError::BadUrl(format!("{}: {e}", self.base)))?;
        let resp = self
            .http
            .request(req)
            .await
            .map_err(|e| EtcdError::Transport(format!("{}{path}: {e}", self.base)))?;
        let status = resp.status().as_u16();
        let bytes = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| EtcdError::Transport(format!("{}{path}: {e}", self.base)))?
            .to_bytes();
        let v: Value = serde_json::from_slice(&bytes).map_err(|e| {
            EtcdError::Decode(format!(
                "{path} answered {status} with non-JSON ({e}): {}",
                String::from_utf8_lossy(&bytes[..bytes.len().min(200)])
            ))
        })?;
        if status != 200 {
            let message = v
                .get("error")
                .or_else(|| v.get("message"))
                .and_then(|m| m.as_str())
                .unwrap_or("no message")
                .to_string();
            return Err(EtcdError::Server { status, message });
        }
        Ok(v)
    }
}

/// A 64-bit field, sent by the gateway as a decimal string (absent: 0).
fn int(v: &Value, field: &str) -> Result<i64, EtcdError> {
    match v.get(field) {
        None => Ok(0),
        Some(Value::String(s)) => s
            .parse()
            .map_err(|_| EtcdError::Decode(format!("{field} = {s:?} is not an integer"))),
        Some(Value::Number(n)) => n
            .as_i64()
            .ok_or_else(|| EtcdError::Decode(format!("{field} = {n} is not an integer"))),
        Some(other) => Err(EtcdError::Decode(format!("{field} = {other}"))),
    }
}
