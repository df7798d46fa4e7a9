//! The fault-injecting TCP proxy the harness runs in-process: one listener
//! forwarding every connection to one target, which the harness can cut
//! (`Mode::Blackhole`: bytes stop flowing both ways on every connection,
//! new connections are accepted and then hang, as behind a dropped link;
//! healed, the held bytes flow on, as TCP retransmits them) or reset
//! (`Mode::Reset`: every connection is closed and new ones refused).

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    Open = 0,
    Blackhole = 1,
    Reset = 2,
}

struct Inner {
    mode: AtomicU8,
    stop: AtomicBool,
    conns: Mutex<Vec<TcpStream>>,
}

impl Inner {
    fn mode(&self) -> Mode {
        match self.mode.load(Ordering::SeqCst) {
            0 => Mode::Open,
            1 => Mode::Blackhole,
            _ => Mode::Reset,
        }
    }
}

/// A proxy listening on `addr` and forwarding to a target.
pub struct Proxy {
    pub addr: String,
    inner: Arc<Inner>,
}

impl Proxy {
    /// Listens on 127.0.0.1 (port chosen by the OS) and forwards to `target`.
    pub fn start(target: &str) -> std::io::Result<Proxy> {
        let l = TcpListener::bind("127.0.0.1:0")?;
        let addr = l.local_addr()?.to_string();
        let inner = Arc::new(Inner {
            mode: AtomicU8::new(Mode::Open as u8),
            stop: AtomicBool::new(false),
            conns: Mutex::new(Vec::new()),
        });
        let (i2, target) = (inner.clone(), target.to_string());
        std::thread::Builder::new()
            .name("torture-proxy".into())
            .spawn(move || accept_loop(l, i2, target))?;
        Ok(Proxy { addr, inner })
    }

    pub fn set(&self, m: Mode) {
        self.inner.mode.store(m as u8, Ordering::SeqCst);
        if m == Mode::Reset {
            self.cut_all();
        }
    }

    fn cut_all(&self) {
        let mut c = self.inner.conns.lock().unwrap_or_else(|e| e.into_inner());
        for s in c.drain(..) {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.inner.stop.store(true, Ordering::SeqCst);
        self.cut_all();
        // Wake the accept loop.
        let _ = TcpStream::connect(&self.addr);
    }
}

fn accept_loop(l: TcpListener, inner: Arc<Inner>, target: String) {
    for s in l.incoming() {
        if inner.stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(client) = s else { continue };
        if inner.mode() == Mode::Reset {
            continue; // dropped: closed at once
        }
        let (i2, t2) = (inner.clone(), target.clone());
        let _ = std::thread::Builder::new()
            .name("torture-proxy-conn".into())
            .spawn(move || {
                // Behind a blackhole even the connection to the target waits.
                while i2.mode() == Mode::Blackhole && !i2.stop.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(10));
                }
                let Ok(server) = TcpStream::connect(&t2) else {
                    return;
                };
                let _ = server.set_nodelay(true);
                let _ = client.set_nodelay(true);
                let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
                    return;
                };
                {
                    let mut c = i2.conns.lock().unwrap_or_else(|e| e.into_inner());
                    if let (Ok(a), Ok(b)) = (client.try_clone(), server.try_clone()) {
                        c.push(a);
                        c.push(b);
                    }
                    // Forget closed ones now and then.
                    if c.len() > 512 {
                        c.retain(|s| s.peer_addr().is_ok());
                    }
                }
                let i3 = i2.clone();
                let up = std::thread::spawn(move || pump(client, s2, &i3));
                pump(server, c2, &i2);
                let _ = up.join();
            });
    }
}

/// Copies `from` to `to` until either closes, holding bytes while the
/// link is cut.
fn pump(mut from: TcpStream, mut to: TcpStream, inner: &Inner) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        while inner.mode() == Mode::Blackhole && !inner.stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(10));
        }
        if inner.mode() == Mode::Reset || inner.stop.load(Ordering::SeqCst) {
            break;
        }
        if to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
    let _ = from.shutdown(Shutdown::Read);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server on loopback: its address.
    fn echo() -> String {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr").to_string();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                std::thread::spawn(move || {
                    let mut s = s;
                    let mut buf = [0u8; 1024];
                    while let Ok(n) = s.read(&mut buf) {
                        if n == 0 || s.write_all(&buf[..n]).is_err() {
                            break;
                        }
                    }
                });
            }
        });
        addr
    }

    fn round_trip(s: &mut TcpStream, msg: &[u8]) -> std::io::Result<Vec<u8>> {
        s.write_all(msg)?;
        let mut got = vec![0u8; msg.len()];
        s.read_exact(&mut got)?;
        Ok(got)
    }

    fn connect(addr: &str) -> TcpStream {
        let s = TcpStream::connect(addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(2)))
            .expect("timeout");
        s
    }

    #[test]
    fn open_forwards_blackhole_holds_and_delivers_when_healed() {
        let p = Proxy::start(&echo()).expect("proxy");
        let mut s = connect(&p.addr);
        assert_eq!(round_trip(&mut s, b"one").expect("open"), b"one");
        p.set(Mode::Blackhole);
        s.set_read_timeout(Some(Duration::from_millis(300)))
            .expect("timeout");
        s.write_all(b"two").expect("write");
        let mut got = [0u8; 3];
        assert!(s.read_exact(&mut got).is_err(), "nothing flows while cut");
        p.set(Mode::Open);
        s.set_read_timeout(Some(Duration::from_secs(2)))
            .expect("timeout");
        s.read_exact(&mut got).expect("the held bytes");
        assert_eq!(&got, b"two");
    }

    #[test]
    fn reset_closes_every_connection_and_refuses_new_ones() {
        let p = Proxy::start(&echo()).expect("proxy");
        let mut s = connect(&p.addr);
        assert_eq!(round_trip(&mut s, b"x").expect("open"), b"x");
        p.set(Mode::Reset);
        assert!(round_trip(&mut s, b"y").is_err(), "cut");
        let mut t = connect(&p.addr);
        assert!(round_trip(&mut t, b"z").is_err(), "refused");
        p.set(Mode::Open);
        let mut u = connect(&p.addr);
        assert_eq!(round_trip(&mut u, b"w").expect("healed"), b"w");
    }
}
