//! The one connection loop of every Strata listener (the node's object
//! API, the S3 API, the metadata service): a bounded number of connections,
//! idle ones dropped first, a few slots kept for health checks, a deadline
//! on request heads and on idleness, and the client's address handed to
//! the handlers (docs/security.md, "Per-client bounds").
//!
//! At `max_connections`, a new connection closes the connection that has
//! been idle longest (no request in a handler; hyper's graceful shutdown
//! lets a response being written finish). When every connection is busy, up
//! to [`HEALTH_SLOTS`] more are accepted that answer only `GET /healthz`
//! (anything else: 503 and `Connection: close`), so a load balancer's
//! health check is answered at once however many clients wait; beyond that
//! the loop stops accepting and new connections wait in the kernel's
//! accept queue until one ends.
//!
//! One client — a network, as [`crate::guard::network_of`] draws it: an
//! IPv4 /24, all of loopback, an IPv6 /64 — holds at most
//! `max_connections_per_client` of them, where the listener sets one (the
//! node port and the S3 listener; issue 34, finding 2: one client's 4,200
//! header-only POSTs took every slot of S3), addresses the listener
//! exempts ([`Exempt`]: a node port's cluster peers) not counted. Past it
//! that client's idlest connection is closed for the new one, or, when
//! none of its connections is idle, the new one is answered 503 (a plain
//! listener; a TLS one drops it) and closed: other clients keep their
//! slots and the health slots.
//!
//! A third deadline is on the answers: a connection whose client takes no
//! byte of a response for the write timeout (nginx's `send_timeout`) is
//! dropped, so that clients that ask and never read cannot hold every
//! connection slot (issue 34, finding 7).
//!
//! The first two deadlines are kept apart, as nginx keeps `client_header_timeout`
//! and `keepalive_timeout`: a request head must arrive whole within the
//! header timeout of the connection opening or of the head's first byte,
//! and a keep-alive connection between requests is closed after the idle
//! timeout. (hyper's own header timeout also runs while a keep-alive
//! connection waits for its next request, which closed every idle
//! connection at the header timeout: a client's pool that kept
//! connections longer raced the close and lost requests.)

use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{Either, Full};
use hyper::body::Incoming;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use parking_lot::Mutex;
use tokio::net::TcpListener;
use tokio::sync::Notify;

use crate::HttpLimits;

/// Connections accepted past the limit that answer only health checks.
pub const HEALTH_SLOTS: usize = 8;

/// A connection idle less than this is not closed to make room (a new
/// connection whose first request is on its way is not idle).
const MIN_IDLE_MS: u64 = 200;

/// The path a health-only connection answers.
pub const HEALTH_PATH: &str = "/healthz";

/// The client's address, in every request's extensions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientAddr(pub SocketAddr);

/// One live connection as the loop sees it.
struct Conn {
    /// Requests in a handler now.
    busy: AtomicU32,
    /// When the last request ended (or the connection opened), in ms since
    /// the loop started.
    idle_since_ms: AtomicU64,
    /// Told to close (graceful: a response being written finishes).
    close: Notify,
    /// Set once told, so a connection is picked for closing only once.
    closing: AtomicBool,
    /// When the request head now arriving began (the connection opened,
    /// or the first byte after the last request), in ms since the loop
    /// started; [`NO_HEAD`] between requests.
    head_since_ms: AtomicU64,
    /// Set when the head came too late: the connection is dropped, not
    /// shut down gracefully (there is no request to finish).
    head_expired: AtomicBool,
    /// Its client's network.
    client: IpAddr,
    /// Whether it counts against that network's share.
    counted: bool,
}

/// [`Conn::head_since_ms`] when no head is on its way.
const NO_HEAD: u64 = u64::MAX;

impl Conn {
    /// Whether no request is in a handler and no head is on its way.
    fn between_requests(&self) -> bool {
        self.busy.load(Ordering::Acquire) == 0
            && self.head_since_ms.load(Ordering::Acquire) == NO_HEAD
    }
}

/// The live connections, and what the loop counts.
#[derive(Default)]
struct Registry {
    conns: Mutex<HashMap<u64, Arc<Conn>>>,
    /// Health-only connections now.
    health_only: AtomicU32,
    /// A connection ended (the loop may accept again).
    freed: Notify,
    /// Idle connections closed to make room or for idleness.
    dropped_idle: AtomicU64,
    /// Full connections per client network (none kept at zero).
    per_client: Mutex<HashMap<IpAddr, usize>>,
}

impl Registry {
    fn len(&self) -> usize {
        self.conns.lock().len()
    }

    /// After the listener stopped accepting: tells every connection to
    /// close once its request in flight is answered (idle ones at once),
    /// and waits up to `deadline` for all of them to end.
    async fn drain(&self, deadline: Duration) {
        let until = tokio::time::Instant::now() + deadline;
        loop {
            let freed = self.freed.notified();
            {
                let g = self.conns.lock();
                if g.is_empty() && self.health_only.load(Ordering::Acquire) == 0 {
                    return;
                }
                for c in g.values() {
                    if !c.closing.swap(true, Ordering::AcqRel) {
                        c.close.notify_one();
                    }
                }
            }
            if tokio::time::timeout_at(until, freed).await.is_err() {
                return;
            }
        }
    }

    /// Whether some connection has been idle at least `min_idle_ms`.
    fn has_idle(&self, now_ms: u64, min_idle_ms: u64) -> bool {
        self.conns.lock().values().any(|c| {
            c.busy.load(Ordering::Acquire) == 0
                && !c.closing.load(Ordering::Acquire)
                && now_ms.saturating_sub(c.idle_since_ms.load(Ordering::Acquire)) >= min_idle_ms
        })
    }

    /// Tells the connection idle longest (and at least `min_idle_ms`) to
    /// close; whether there was one.
    fn close_idlest(&self, now_ms: u64, min_idle_ms: u64) -> bool {
        self.close_idlest_of(None, now_ms, min_idle_ms)
    }

    /// [`Registry::close_idlest`] among the connections of `client` only
    /// (of any client with None).
    fn close_idlest_of(&self, client: Option<IpAddr>, now_ms: u64, min_idle_ms: u64) -> bool {
        let g = self.conns.lock();
        let pick = g
            .values()
            .filter(|c| client.is_none_or(|n| c.client == n && c.counted))
            .filter(|c| c.busy.load(Ordering::Acquire) == 0 && !c.closing.load(Ordering::Acquire))
            .map(|c| (c.idle_since_ms.load(Ordering::Acquire), c))
            .filter(|(since, _)| now_ms.saturating_sub(*since) >= min_idle_ms)
            .min_by_key(|(since, _)| *since);
        match pick {
            Some((_, c)) => {
                c.closing.store(true, Ordering::Release);
                c.close.notify_one();
                self.dropped_idle.fetch_add(1, Ordering::Relaxed);
                true
            }
            None => false,
        }
    }

    /// Tells every connection idle between requests at least
    /// `min_idle_ms` to close, and drops every one whose request head has
    /// been arriving for `head_ms` or more (also one already told to close
    /// gracefully: a head that never ends would keep it open).
    /// Counts one more (`up`) or one fewer full connection of `client`.
    fn count(&self, client: IpAddr, up: bool) -> usize {
        let mut g = self.per_client.lock();
        let n = g.entry(client).or_insert(0);
        if up {
            *n += 1;
        } else {
            *n = n.saturating_sub(1);
        }
        let now = *n;
        if now == 0 {
            g.remove(&client);
        }
        now
    }

    /// Full connections of `client` now.
    fn of_client(&self, client: IpAddr) -> usize {
        self.per_client.lock().get(&client).copied().unwrap_or(0)
    }

    fn sweep(&self, now_ms: u64, min_idle_ms: u64, head_ms: u64) {
        let g = self.conns.lock();
        for c in g.values() {
            let head = c.head_since_ms.load(Ordering::Acquire);
            let late_head = head != NO_HEAD
                && !c.head_expired.load(Ordering::Acquire)
                && c.busy.load(Ordering::Acquire) == 0
                && now_ms.saturating_sub(head) >= head_ms;
            if late_head {
                c.head_expired.store(true, Ordering::Release);
                c.closing.store(true, Ordering::Release);
                c.close.notify_one();
            } else if !c.closing.load(Ordering::Acquire)
                && c.between_requests()
                && now_ms.saturating_sub(c.idle_since_ms.load(Ordering::Acquire)) >= min_idle_ms
            {
                c.closing.store(true, Ordering::Release);
                c.close.notify_one();
                self.dropped_idle.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// The service of one connection: tracks its requests, hands the handler
/// the client's address, and on a health-only connection answers anything
/// but `/healthz` with 503.
#[derive(Clone)]
struct Tracked<S> {
    inner: S,
    conn: Arc<Conn>,
    peer: SocketAddr,
    health_only: bool,
    epoch: Instant,
}

/// The whole answer to a connection of a client past its share.
const CLIENT_AT_LIMIT: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: 107\r\n\r\nthis client's network holds its share of this listener's connections (--max-connections-per-client); retry\n";

/// A 503 for a health-only connection.
fn at_limit() -> Response<Full<Bytes>> {
    let mut r = Response::new(Full::new(Bytes::from_static(
        b"the server is at its connection limit (--max-connections); retry later\n",
    )));
    *r.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    let h = r.headers_mut();
    h.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    h.insert(
        hyper::header::CONNECTION,
        hyper::header::HeaderValue::from_static("close"),
    );
    h.insert(
        hyper::header::RETRY_AFTER,
        hyper::header::HeaderValue::from_static("1"),
    );
    r
}

impl<S, B> hyper::service::Service<Request<Incoming>> for Tracked<S>
where
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = Response<Either<Answering<B>, Full<Bytes>>>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Self::Error>> + Send>>;

    fn call(&self, mut req: Request<Incoming>) -> Self::Future {
        if self.health_only && req.uri().path() != HEALTH_PATH {
            return Box::pin(async { Ok(at_limit().map(Either::Right)) });
        }
        req.extensions_mut().insert(ClientAddr(self.peer));
        let conn = self.conn.clone();
        conn.busy.fetch_add(1, Ordering::AcqRel);
        // The head is whole; the next one's deadline starts at its first
        // byte ([`Watched`]).
        conn.head_since_ms.store(NO_HEAD, Ordering::Release);
        let epoch = self.epoch;
        let sends_body = carries_body(&req);
        let fut = self.inner.call(req);
        Box::pin(async move {
            // Counted down however the request ends: its handler failing or
            // dropped, or its answer's body written whole (or dropped).
            let done = Done(conn, epoch);
            fut.await.map(|mut r| {
                if sends_body && r.status().as_u16() >= 400 {
                    close_after(&mut r);
                }
                r.map(|body| Either::Left(Answering { body, _done: done }))
            })
        })
    }
}

/// Whether a request carries a body (a length above 0, or chunked).
fn carries_body<T>(req: &Request<T>) -> bool {
    req.headers().contains_key(hyper::header::TRANSFER_ENCODING)
        || req
            .headers()
            .get(hyper::header::CONTENT_LENGTH)
            .is_some_and(|v| v.as_bytes() != b"0")
}

/// Marks an error answer to a request that carries a body as the
/// connection's last. Such an answer may come before the body was read
/// (a refused signature or token, an unsupported header, a full disk),
/// and hyper then closes the connection after it rather than wait for a
/// body nobody reads; saying so keeps the client from sending its next
/// request on a connection about to close (a client that sent `Expect:
/// 100-continue` sends no body after a final answer, and a pooled
/// connection's next write would fail). An error after the body was read
/// costs the client one new connection.
fn close_after<B>(r: &mut Response<B>) {
    r.headers_mut().insert(
        hyper::header::CONNECTION,
        hyper::header::HeaderValue::from_static("close"),
    );
}

/// A request in progress: counts down its connection's busy count when
/// dropped, and marks when it went idle.
struct Done(Arc<Conn>, Instant);

impl Drop for Done {
    fn drop(&mut self) {
        self.0
            .idle_since_ms
            .store(self.1.elapsed().as_millis() as u64, Ordering::Release);
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
    }
}

/// An answer's body, which keeps its request busy until hyper has written
/// it whole and dropped it: a connection streaming a long answer is
/// neither idle nor waiting for a head.
pub struct Answering<B> {
    body: B,
    _done: Done,
}

impl<B: hyper::body::Body + Unpin> hyper::body::Body for Answering<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<hyper::body::Frame<Self::Data>, Self::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        self.body.size_hint()
    }
}

/// Serves `svc` (cloned per connection) on `listener` until `shutdown`
/// resolves, within `limits` (see the module's description); then stops
/// accepting and drains: every connection closes once its request in
/// flight is answered, waited for up to [`DRAIN`].
pub async fn serve<S, B>(
    listener: TcpListener,
    limits: HttpLimits,
    svc: S,
    shutdown: impl Future<Output = ()>,
) where
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
    B: hyper::body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    serve_tls(listener, limits, svc, None, None, shutdown).await
}

/// Addresses whose connections hold no client share (a node port's
/// cluster peers).
pub type Exempt = Arc<dyn Fn(IpAddr) -> bool + Send + Sync>;

/// [`serve`], speaking TLS on every connection when `tls` is given (the S3
/// listener with `--s3-tls-cert`): the handshake has the request head's
/// deadline, so a client that connects and says nothing holds no slot for
/// longer than one that sends half a head.
pub async fn serve_tls<S, B>(
    listener: TcpListener,
    limits: HttpLimits,
    svc: S,
    tls: Option<Tls>,
    exempt: Option<Exempt>,
    shutdown: impl Future<Output = ()>,
) where
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>> + Send + 'static,
    B: hyper::body::Body<Data = Bytes> + Send + Unpin + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let reg = Arc::new(Registry::default());
    let epoch = Instant::now();
    let max = limits.max_connections.max(1);
    // A share at or above the limit is none: every connection may be one
    // client's, and the health slots stay reachable as before.
    let per_client = limits.max_connections_per_client.max(1);
    let per_client = if per_client >= max {
        usize::MAX
    } else {
        per_client
    };
    // Idle connections past the idle timeout are closed, and those whose
    // request head is late are dropped.
    let sweeper = {
        let reg = reg.clone();
        let idle = limits.idle_timeout;
        let head = limits.header_timeout;
        tokio::spawn(async move {
            let every =
                (idle.min(head) / 4).clamp(Duration::from_millis(100), Duration::from_secs(5));
            loop {
                tokio::time::sleep(every).await;
                reg.sweep(
                    epoch.elapsed().as_millis() as u64,
                    idle.as_millis() as u64,
                    head.as_millis() as u64,
                );
            }
        })
    };
    let _sweeper = AbortOnDrop(sweeper);
    tokio::pin!(shutdown);
    let mut next_id = 0u64;
    'accept: loop {
        // Wait until there is room for one more: under the limit, an idle
        // connection to close for it, or a health slot. Connections wait in
        // the accept queue meanwhile.
        loop {
            let now = epoch.elapsed().as_millis() as u64;
            if reg.len() < max
                || reg.has_idle(now, MIN_IDLE_MS)
                || (reg.health_only.load(Ordering::Acquire) as usize) < HEALTH_SLOTS
            {
                break;
            }
            let freed = reg.freed.notified();
            tokio::select! {
                _ = &mut shutdown => break 'accept,
                _ = freed => {}
                // A busy connection may have become idle meanwhile.
                _ = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => break 'accept,
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(_) => {
                    // Out of file descriptors or similar: back off a little.
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
        };
        // A client at its share: its idlest connection closes for this one,
        // or, none idle, this one is refused.
        let client = crate::guard::network_of(peer.ip());
        // Counted against its network's share (not an exempt peer's).
        let counted = per_client != usize::MAX && !exempt.as_ref().is_some_and(|f| f(peer.ip()));
        if counted
            && reg.of_client(client) >= per_client
            && !reg.close_idlest_of(
                Some(client),
                epoch.elapsed().as_millis() as u64,
                MIN_IDLE_MS,
            )
        {
            if tls.is_none() {
                tokio::spawn(async move {
                    use tokio::io::{AsyncReadExt, AsyncWriteExt};
                    let mut stream = stream;
                    // The answer, then FIN, then what the client sent is
                    // read away for a moment: a socket closed with unread
                    // bytes resets, and the reset can destroy the answer.
                    let _ = tokio::time::timeout(Duration::from_secs(1), async {
                        stream.write_all(CLIENT_AT_LIMIT).await?;
                        stream.shutdown().await?;
                        let mut sink = [0u8; 4096];
                        let mut left: usize = 64 << 10;
                        while left > 0 {
                            match stream.read(&mut sink).await? {
                                0 => break,
                                n => left = left.saturating_sub(n),
                            }
                        }
                        Ok::<_, std::io::Error>(())
                    })
                    .await;
                });
            }
            continue;
        }
        // Served in full when under the limit or when the idlest connection
        // closes for it; else on a health slot.
        let health_only =
            reg.len() >= max && !reg.close_idlest(epoch.elapsed().as_millis() as u64, MIN_IDLE_MS);
        let _ = stream.set_nodelay(true);
        let opened = epoch.elapsed().as_millis() as u64;
        let conn = Arc::new(Conn {
            busy: AtomicU32::new(0),
            idle_since_ms: AtomicU64::new(opened),
            close: Notify::new(),
            closing: AtomicBool::new(false),
            // The first head is due within the header timeout of opening.
            head_since_ms: AtomicU64::new(opened),
            head_expired: AtomicBool::new(false),
            client,
            counted,
        });
        let id = next_id;
        next_id += 1;
        if health_only {
            reg.health_only.fetch_add(1, Ordering::AcqRel);
        } else {
            reg.conns.lock().insert(id, conn.clone());
            if counted {
                reg.count(client, true);
            }
        }
        let tracked = Tracked {
            inner: svc.clone(),
            conn: conn.clone(),
            peer,
            health_only,
            epoch,
        };
        let reg = reg.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            // One HTTP/1 connection over `io` until it ends or is told to
            // close.
            // The registry's sweep keeps the head deadline of a connection
            // it tracks; hyper keeps it only on a health-only connection
            // (one request, no keep-alive, not in the registry).
            macro_rules! drive {
                ($io:expr) => {{
                    let io = Watched {
                        inner: $io,
                        conn: conn.clone(),
                        epoch,
                        write_timeout: limits.write_timeout,
                        stalled: None,
                    };
                    let served = hyper::server::conn::http1::Builder::new()
                        .timer(TokioTimer::new())
                        .header_read_timeout(health_only.then_some(limits.header_timeout))
                        .keep_alive(!health_only)
                        .serve_connection(TokioIo::new(io), tracked);
                    tokio::pin!(served);
                    let mut graceful = false;
                    loop {
                        tokio::select! {
                            _ = served.as_mut() => break,
                            _ = conn.close.notified() => {
                                // A late head has no request to finish:
                                // dropped, even during a graceful close.
                                if conn.head_expired.load(Ordering::Acquire) {
                                    break;
                                }
                                if !graceful {
                                    served.as_mut().graceful_shutdown();
                                    graceful = true;
                                }
                            }
                        }
                    }
                }};
            }
            match tls {
                None => drive!(stream),
                Some(acceptor) => {
                    let hello =
                        tokio::time::timeout(limits.header_timeout, acceptor.accept(stream));
                    // A failed or late handshake closes the connection.
                    if let Ok(Ok(stream)) = hello.await {
                        drive!(stream);
                    }
                }
            }
            if health_only {
                reg.health_only.fetch_sub(1, Ordering::AcqRel);
            } else {
                reg.conns.lock().remove(&id);
                if counted {
                    reg.count(client, false);
                }
            }
            reg.freed.notify_waiters();
        });
    }
    drop(listener);
    reg.drain(DRAIN).await;
}

/// How long a shut-down listener waits for the requests in flight.
pub const DRAIN: Duration = Duration::from_secs(8);

/// A connection's stream that notes when the first byte of a request head
/// arrives (bytes read while no request is in a handler and no head is on
/// its way), starting that head's deadline; and that fails a write the
/// client has taken nothing of for `write_timeout` (the write deadline).
struct Watched<T> {
    inner: T,
    conn: Arc<Conn>,
    epoch: Instant,
    write_timeout: Duration,
    /// Running while a write waits on a client that reads nothing.
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<T> Watched<T> {
    /// What a write (or flush) that `r` answered means under the write
    /// deadline: progress or an error clears the timer; waiting starts it,
    /// or fails the write once it has run out.
    fn deadline<R>(
        &mut self,
        cx: &mut std::task::Context<'_>,
        r: std::task::Poll<std::io::Result<R>>,
    ) -> std::task::Poll<std::io::Result<R>> {
        if r.is_ready() {
            self.stalled = None;
            return r;
        }
        let timeout = self.write_timeout;
        let timer = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(timeout)));
        match timer.as_mut().poll(cx) {
            std::task::Poll::Ready(()) => std::task::Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the client took no byte of the answer within the write timeout",
            ))),
            std::task::Poll::Pending => std::task::Poll::Pending,
        }
    }
}

impl<T: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for Watched<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        if buf.filled().len() > before && self.conn.between_requests() {
            let now = self.epoch.elapsed().as_millis() as u64;
            let _ = self.conn.head_since_ms.compare_exchange(
                NO_HEAD,
                now,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
        }
        r
    }
}

impl<T: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for Watched<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.deadline(cx, r)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.deadline(cx, r)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        self.deadline(cx, r)
    }

    fn poll_shutdown(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// A listener's TLS: the server side of rustls with the ring provider.
pub type Tls = tokio_rustls::TlsAcceptor;

/// What stops a TLS configuration from loading.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or parsed.
    #[error("{path}: {reason}")]
    Pem {
        /// The file.
        path: String,
        /// Why.
        reason: String,
    },
    /// The certificate file holds no certificate.
    #[error("{0}: no PEM certificate in it (-----BEGIN CERTIFICATE-----)")]
    NoCertificate(String),
    /// rustls refused the pair (a key that does not match the certificate,
    /// an unsupported key type).
    #[error("the certificate and key do not make a TLS configuration: {0}")]
    Config(String),
}

/// A TLS acceptor from a PEM certificate chain (the server's certificate
/// first, then any intermediates) and its PEM private key (PKCS#8, PKCS#1
/// or SEC1). TLS 1.2 and 1.3, ALPN `http/1.1`; no client certificates.
pub fn tls_acceptor(cert: &std::path::Path, key: &std::path::Path) -> Result<Tls, TlsError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let pem = |path: &std::path::Path, e: rustls::pki_types::pem::Error| TlsError::Pem {
        path: path.display().to_string(),
        reason: e.to_string(),
    };
    let certs = CertificateDer::pem_file_iter(cert)
        .map_err(|e| pem(cert, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| pem(cert, e))?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate(cert.display().to_string()));
    }
    let key = PrivateKeyDer::from_pem_file(key).map_err(|e| pem(key, e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| TlsError::Config(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| TlsError::Config(e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(tokio_rustls::TlsAcceptor::from(Arc::new(config)))
}

/// An axum router as a per-connection service for [`serve`].
pub fn router_service(app: axum::Router) -> hyper_util::service::TowerToHyperService<axum::Router> {
    hyper_util::service::TowerToHyperService::new(app)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_per_client_refusal_is_one_whole_answer() {
        let text = std::str::from_utf8(CLIENT_AT_LIMIT).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("Content-Length: "))
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(len, body.len());
        assert!(head.starts_with("HTTP/1.1 503 "));
    }

    #[test]
    fn connections_are_counted_per_client_network() {
        let reg = Registry::default();
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.1.1".parse().unwrap();
        assert_eq!(reg.count(a, true), 1);
        assert_eq!(reg.count(a, true), 2);
        assert_eq!(reg.count(b, true), 1);
        assert_eq!(reg.of_client(a), 2);
        assert_eq!(reg.count(a, false), 1);
        assert_eq!(reg.count(a, false), 0);
        assert_eq!(reg.of_client(a), 0);
        assert_eq!(
            reg.per_client.lock().len(),
            1,
            "a client at zero is forgotten"
        );
    }
}
