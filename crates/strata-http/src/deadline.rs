//! A request body with a deadline, for a listener whose handlers read
//! bodies through a library (the S3 API through s3s): the body fails with
//! [`TimedOut`] when no byte arrives for the idle time, or when what has
//! arrived falls behind [`MIN_BODY_RATE`] once the idle time has passed
//! (at time t after the start, at least (t − idle) × 64 KiB must be in) —
//! a client that trickles bytes holds a connection no longer than the
//! idle time, however large the length it declared (issue 34, finding 5:
//! a 5 GB declaration trickled a byte every 20 s held its connection and
//! its buffer for 21 hours), and an upload at 64 KiB/s or more gets the
//! time it needs.
//! The object API's PUT applies the same rule to its own stream
//! (strata-server `gateway.rs`).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use tokio::time::{Instant, Sleep};

/// The slowest rate a body may arrive at, past the idle time: 64 KiB/s.
pub const MIN_BODY_RATE: u64 = 64 << 10;

/// How long `seen` bytes take at [`MIN_BODY_RATE`]: a body that has taken
/// longer than the idle time plus this is behind.
pub fn rate_time(seen: u64) -> Duration {
    Duration::from_micros(seen.saturating_mul(1_000_000) / MIN_BODY_RATE)
}

/// The error of a body past its deadline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimedOut {
    /// No byte arrived for the idle time (else: the whole body was late).
    pub idle: bool,
}

impl std::fmt::Display for TimedOut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.idle {
            f.write_str("no byte of the request body arrived within the body timeout")
        } else {
            write!(
                f,
                "the request body arrived slower than {} KiB/s",
                MIN_BODY_RATE >> 10
            )
        }
    }
}

impl std::error::Error for TimedOut {}

/// Whether a [`Deadline`] fired: kept by whoever answers the request, to
/// say so rather than whatever error the handler made of it.
#[derive(Clone, Debug, Default)]
pub struct Fired(Arc<AtomicBool>);

impl Fired {
    /// The deadline fired.
    pub fn fired(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// `B` with the deadline of the module comment.
pub struct Deadline<B> {
    inner: B,
    started: Instant,
    idle: Duration,
    seen: u64,
    sleep: Pin<Box<Sleep>>,
    /// The sleep's instant is the idle time after the last byte (else the
    /// whole body's due time).
    sleep_is_idle: bool,
    fired: Fired,
}

impl<B> Deadline<B> {
    /// `inner`, given `idle` without a byte; must be made inside a Tokio
    /// runtime.
    pub fn new(inner: B, idle: Duration) -> (Deadline<B>, Fired) {
        let started = Instant::now();
        let fired = Fired::default();
        let mut d = Deadline {
            inner,
            started,
            idle,
            seen: 0,
            sleep: Box::pin(tokio::time::sleep_until(started + idle)),
            sleep_is_idle: true,
            fired: fired.clone(),
        };
        d.rearm();
        (d, fired)
    }

    fn rearm(&mut self) {
        let due = self.started + self.idle + rate_time(self.seen);
        let idle = Instant::now() + self.idle;
        self.sleep_is_idle = idle <= due;
        self.sleep.as_mut().reset(idle.min(due));
    }
}

impl<B> Body for Deadline<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        if this.fired.fired() {
            return Poll::Ready(None);
        }
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(d) = frame.data_ref() {
                    this.seen += d.len() as u64;
                    this.rearm();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => match this.sleep.as_mut().poll(cx) {
                Poll::Ready(()) => {
                    this.fired.0.store(true, Ordering::Release);
                    let e = TimedOut {
                        idle: this.sleep_is_idle,
                    };
                    Poll::Ready(Some(Err(Box::new(e))))
                }
                Poll::Pending => Poll::Pending,
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::{BodyExt, StreamBody};

    type Chunks = StreamBody<
        futures_util::stream::BoxStream<'static, Result<Frame<Bytes>, std::convert::Infallible>>,
    >;

    /// A body sending `n` bytes, one every `every`.
    fn trickle(n: usize, every: Duration) -> Chunks {
        let s = futures_util::stream::unfold(0usize, move |i| async move {
            if i == n {
                return None;
            }
            tokio::time::sleep(every).await;
            Some((Ok(Frame::data(Bytes::from_static(b"x"))), i + 1))
        });
        StreamBody::new(Box::pin(s) as futures_util::stream::BoxStream<'static, _>)
    }

    async fn collect(b: Deadline<Chunks>) -> Result<usize, TimedOut> {
        match b.collect().await {
            Ok(c) => Ok(c.to_bytes().len()),
            Err(e) => Err(*e.downcast::<TimedOut>().expect("a TimedOut")),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_in_time_is_passed_whole() {
        let (b, fired) = Deadline::new(
            trickle(5, Duration::from_millis(300)),
            Duration::from_secs(2),
        );
        assert_eq!(collect(b).await, Ok(5));
        assert!(!fired.fired());
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_stops_fails_after_the_idle_time() {
        let at = Instant::now();
        let never: Chunks = StreamBody::new(Box::pin(futures_util::stream::pending()));
        let (b, fired) = Deadline::new(never, Duration::from_secs(2));
        assert_eq!(collect(b).await, Err(TimedOut { idle: true }));
        assert_eq!(at.elapsed(), Duration::from_secs(2));
        assert!(fired.fired());
    }

    #[tokio::test(start_paused = true)]
    async fn a_trickle_fails_once_it_falls_behind_the_minimum_rate() {
        // A byte a second never lets the idle time (2 s) pass, but past it
        // the body is behind 64 KiB/s: it fails then, whatever it declared.
        let at = Instant::now();
        let (b, fired) = Deadline::new(
            trickle(1_000, Duration::from_secs(1)),
            Duration::from_secs(2),
        );
        assert_eq!(collect(b).await, Err(TimedOut { idle: false }));
        // The two bytes in bought 2 × 15 µs at 64 KiB/s (the paused clock
        // rounds to the millisecond).
        let took = at.elapsed();
        assert!(
            took >= Duration::from_secs(2) && took <= Duration::from_millis(2_002),
            "{took:?}"
        );
        assert!(fired.fired());
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_at_the_minimum_rate_gets_the_time_it_needs() {
        // 64 KiB a second for 10 s, idle time 2 s: never behind.
        let s = futures_util::stream::unfold(0usize, move |i| async move {
            if i == 10 {
                return None;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            Some((
                Ok(Frame::data(Bytes::from(vec![0u8; MIN_BODY_RATE as usize]))),
                i + 1,
            ))
        });
        let body = StreamBody::new(Box::pin(s) as futures_util::stream::BoxStream<'static, _>);
        let (b, fired) = Deadline::new(body, Duration::from_secs(2));
        assert_eq!(collect(b).await, Ok(10 * MIN_BODY_RATE as usize));
        assert!(!fired.fired());
    }
}
