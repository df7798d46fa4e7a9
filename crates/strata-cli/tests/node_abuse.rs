//! Bad input and slow clients against the real server: wrong cookies,
//! unknown keys, oversize bodies, malformed ranges, garbage bytes, and
//! clients sending one byte a second. The server keeps answering the
//! others promptly and never crashes.

mod node_common;
use node_common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// A client that sends `bytes` one per second (or until the server hangs up)
/// and returns what it got back.
fn trickle(addr: String, bytes: Vec<u8>) -> std::thread::JoinHandle<(Vec<u8>, Duration)> {
    std::thread::spawn(move || {
        let t0 = Instant::now();
        let mut s = TcpStream::connect(&addr).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        for b in bytes {
            if s.write_all(&[b]).is_err() {
                break;
            }
            let deadline = Instant::now() + Duration::from_secs(1);
            let mut closed = false;
            while Instant::now() < deadline {
                match s.read(&mut buf) {
                    Ok(0) => {
                        closed = true;
                        break;
                    }
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                    Err(_) => {}
                }
            }
            if closed {
                break;
            }
        }
        (got, t0.elapsed())
    })
}

#[test]
fn slow_and_bad_clients_do_not_stop_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Server::start(
        dir.path(),
        &[
            "--header-timeout",
            "2",
            "--body-timeout",
            "3",
            "--max-object-size",
            "4KiB",
        ],
    );
    let a = s.addr.clone();
    let obj = put(&a, "/b/known", b"0123456789");
    let url = obj.header("location").unwrap().to_string();

    // One byte a second in the request head, and in a PUT body.
    let slow_head = trickle(
        a.clone(),
        b"GET /b/known HTTP/1.1\r\nHost: x\r\n\r\n".to_vec(),
    );
    let mut body_req = b"PUT /b/slow HTTP/1.1\r\nHost: x\r\nContent-Length: 40\r\n\r\n".to_vec();
    body_req.extend_from_slice(&[b'z'; 40]);
    let slow_body = std::thread::spawn({
        let a = a.clone();
        move || {
            // Head at once, then the body one byte a second.
            let mut st = TcpStream::connect(&a).unwrap();
            let split = body_req.len() - 40;
            st.write_all(&body_req[..split]).unwrap();
            st.set_read_timeout(Some(Duration::from_millis(50)))
                .unwrap();
            let mut got = Vec::new();
            let mut buf = [0u8; 4096];
            for b in &body_req[split..] {
                if st.write_all(&[*b]).is_err() {
                    break;
                }
                let deadline = Instant::now() + Duration::from_secs(1);
                while Instant::now() < deadline {
                    match st.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                        Err(_) => {}
                    }
                }
                if !got.is_empty() {
                    break;
                }
            }
            got
        }
    });
    // Many idle connections that never send anything (slowloris).
    let idle: Vec<TcpStream> = (0..200).map(|_| TcpStream::connect(&a).unwrap()).collect();

    // Meanwhile everybody else is served promptly.
    let t0 = Instant::now();
    let mut worst = Duration::ZERO;
    for i in 0..200 {
        let t = Instant::now();
        let r = put(&a, &format!("/b/o{i}"), &content(i, 1000));
        assert_eq!(r.status, 201);
        let g = get(&a, &format!("/b/o{i}"));
        assert_eq!(g.body, content(i, 1000));
        worst = worst.max(t.elapsed());
    }
    assert!(
        worst < Duration::from_secs(1),
        "a PUT+GET took {worst:?} next to slow clients"
    );
    assert!(t0.elapsed() < Duration::from_secs(30));

    // Bad input: each answered with its status and a reason.
    // A cookie one bit off the real one: a 404 exactly like an absent key,
    // for GET, HEAD and a ranged GET alike.
    let real = url.rsplit("cookie=").next().unwrap();
    let real = u32::from_str_radix(real, 16).unwrap();
    let wrong_url = format!("/b/known?cookie={:08x}", real ^ 1);
    let wrong = get(&a, &wrong_url);
    let unknown = get(&a, "/b/unknown");
    assert_eq!(wrong.status, 404);
    assert_eq!(wrong.body, unknown.body);
    assert_eq!(unknown.status, 404);
    assert_eq!(
        request(&a, "HEAD", &wrong_url, &[], None).unwrap().status,
        404
    );
    let r = request(&a, "GET", &wrong_url, &[("Range", "bytes=0-3")], None).unwrap();
    assert_eq!(r.status, 404);
    assert_eq!(get(&a, &url).body, b"0123456789");
    let big = put(&a, "/b/big", &vec![1u8; 5000]);
    assert_eq!(big.status, 413);
    assert!(!big.text().is_empty());
    for bad in ["bytes=zz", "bytes=5-2", "bytes=100-", "octets=0-1"] {
        let r = request(&a, "GET", &url, &[("Range", bad)], None).unwrap();
        assert_eq!(r.status, 416, "{bad}");
        assert!(!r.text().is_empty());
    }
    // Declared oversize body, never sent: refused at once.
    let t = Instant::now();
    let r = request(
        &a,
        "PUT",
        "/b/huge",
        &[("Content-Length", "999999999999")],
        None,
    )
    .unwrap();
    assert_eq!(r.status, 413);
    assert!(t.elapsed() < Duration::from_secs(2));
    // Garbage bytes instead of HTTP.
    for junk in [
        &b"\x00\xff\xfe garbage\r\n\r\n"[..],
        b"GET\r\n\r\n",
        b"PUT /b/x HTTP/1.1\r\nContent-Length: -5\r\n\r\n",
    ] {
        let mut st = TcpStream::connect(&a).unwrap();
        st.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        st.write_all(junk).unwrap();
        let mut out = Vec::new();
        let _ = st.read_to_end(&mut out);
        if !out.is_empty() {
            let text = String::from_utf8_lossy(&out);
            assert!(text.starts_with("HTTP/1.1 4"), "{text}");
        }
    }

    // The slow clients were cut off by the timeouts, not served forever.
    let (_, took) = slow_head.join().unwrap();
    assert!(
        took < Duration::from_secs(20),
        "slow head held for {took:?}"
    );
    let got = slow_body.join().unwrap();
    let text = String::from_utf8_lossy(&got);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 408"),
        "{text}"
    );
    drop(idle);

    assert!(s.alive(), "the server died");
    assert_eq!(get(&a, "/healthz").status, 200);
    assert_eq!(get(&a, "/b/known").body, b"0123456789");
}
