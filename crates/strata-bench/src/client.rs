//! A minimal HTTP/1.1 client over one kept-alive connection per peer, used
//! by the load generator and the demo (one connection per worker task, as
//! Haystress does, so no pool sits between the worker and the server).

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper::{Method, Request, StatusCode};
use hyper_util::rt::TokioIo;
use std::collections::HashMap;
use tokio::net::TcpStream;

/// What went wrong talking to a server.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// Could not connect.
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        /// The server address.
        addr: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// The HTTP exchange failed (connection reset, malformed response).
    #[error("HTTP request to {addr} failed: {source}")]
    Http {
        /// The server address.
        addr: String,
        /// The underlying error.
        source: hyper::Error,
    },
    /// The request could not be built (bad URL path or header).
    #[error("bad request for {0}")]
    Build(String),
}

/// A response: status, selected headers and the whole body.
#[derive(Debug)]
pub struct Response {
    /// The status code.
    pub status: StatusCode,
    /// Response headers.
    pub headers: hyper::HeaderMap,
    /// The body.
    pub body: Bytes,
}

/// Kept-alive connections to any number of servers, reconnecting on error.
#[derive(Default)]
pub struct Client {
    conns: HashMap<String, SendRequest<Full<Bytes>>>,
}

impl Client {
    /// A client with no connections yet.
    pub fn new() -> Client {
        Client::default()
    }

    async fn connect(addr: &str) -> Result<SendRequest<Full<Bytes>>, ClientError> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|source| ClientError::Connect {
                addr: addr.to_string(),
                source,
            })?;
        let _ = stream.set_nodelay(true);
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|source| ClientError::Http {
                addr: addr.to_string(),
                source,
            })?;
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(sender)
    }

    /// Sends one request to `addr` (host:port) and reads the whole response.
    /// A dead kept-alive connection is replaced and the request retried once.
    pub async fn request(
        &mut self,
        addr: &str,
        method: Method,
        path_and_query: &str,
        headers: &[(&str, &str)],
        body: Bytes,
    ) -> Result<Response, ClientError> {
        for attempt in 0..2 {
            // The kept-alive connection stays in the map (no key allocation
            // per request); a closed one is replaced.
            if self.conns.get(addr).is_none_or(|s| s.is_closed()) {
                let s = Self::connect(addr).await?;
                self.conns.insert(addr.to_string(), s);
            }
            let Some(sender) = self.conns.get_mut(addr) else {
                continue;
            };
            let mut b = Request::builder()
                .method(method.clone())
                .uri(path_and_query)
                .header(hyper::header::HOST, addr);
            for (k, v) in headers {
                b = b.header(*k, *v);
            }
            let req = b
                .body(Full::new(body.clone()))
                .map_err(|_| ClientError::Build(path_and_query.to_string()))?;
            if sender.ready().await.is_err() {
                self.conns.remove(addr);
                if attempt == 0 {
                    continue;
                }
                return Err(ClientError::Connect {
                    addr: addr.to_string(),
                    source: std::io::Error::other("connection closed"),
                });
            }
            let resp = match sender.send_request(req).await {
                Ok(r) => r,
                Err(e) if attempt == 0 && (e.is_closed() || e.is_incomplete_message()) => {
                    self.conns.remove(addr);
                    continue;
                }
                Err(source) => {
                    self.conns.remove(addr);
                    return Err(ClientError::Http {
                        addr: addr.to_string(),
                        source,
                    });
                }
            };
            let (parts, body) = resp.into_parts();
            let body = match body.collect().await {
                Ok(b) => b.to_bytes(),
                Err(source) => {
                    self.conns.remove(addr);
                    return Err(ClientError::Http {
                        addr: addr.to_string(),
                        source,
                    });
                }
            };
            return Ok(Response {
                status: parts.status,
                headers: parts.headers,
                body,
            });
        }
        Err(ClientError::Build(path_and_query.to_string()))
    }
}
