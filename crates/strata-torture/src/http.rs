//! A small blocking HTTP/1.1 client over one fresh connection per request
//! (`Connection: close`): the harness must see exactly what the server
//! sent, time out on a stalled server, and tell "no answer" (the request
//! may or may not have taken effect) from an answer.

use std::io::{Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// An answer.
pub struct Resp {
    pub status: u16,
    /// Header lines, lower-cased names.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
}

/// The `Authorization` of the campaign's object requests: a token of its
/// servers' root key ([`authenticate_as`]).
static BEARER: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// Sends `Authorization: Bearer TOKEN` with every object request from now
/// on that names no `authorization` of its own (the node protocol's
/// `/cluster/` requests carry their own signature instead).
pub fn authenticate_as(token: String) {
    let _ = BEARER.set(format!("Bearer {token}"));
}

/// The `Authorization: ...\r\n` header line of [`authenticate_as`], or
/// nothing, for requests written by hand.
pub fn authorization_line() -> String {
    BEARER
        .get()
        .map(|b| format!("Authorization: {b}\r\n"))
        .unwrap_or_default()
}

/// One request. `Err` means no complete answer arrived (connection refused,
/// reset, timed out): the request's effect is unknown.
pub fn request(
    addr: &str,
    method: &str,
    path: &str,
    headers: &[(&str, String)],
    body: &[u8],
    timeout: Duration,
) -> std::io::Result<Resp> {
    let sa = addr
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other("no address"))?;
    let mut s = TcpStream::connect_timeout(&sa, timeout)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    s.set_nodelay(true)?;
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if let Some(b) = BEARER.get() {
        let own = headers
            .iter()
            .any(|(k, _)| k.eq_ignore_ascii_case("authorization"));
        if !own && !path.starts_with("/cluster/") {
            head.push_str(&format!("Authorization: {b}\r\n"));
        }
    }
    if method != "GET" && method != "HEAD" || !body.is_empty() {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    out.extend_from_slice(body);
    s.write_all(&out)?;
    let mut raw = Vec::new();
    s.read_to_end(&mut raw)?;
    parse(&raw, method == "HEAD")
}

/// [`request`] of an `http::Request` (a signed one: [`crate::sigv4`]):
/// its method, target, headers and body; `Host` is `addr`, as the
/// request's URI says when it was signed.
pub fn send(addr: &str, req: &http::Request<&[u8]>, timeout: Duration) -> std::io::Result<Resp> {
    let target = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let headers: Vec<(&str, String)> = req
        .headers()
        .iter()
        .filter(|(k, _)| *k != http::header::HOST)
        .map(|(k, v)| {
            (
                k.as_str(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    request(
        addr,
        req.method().as_str(),
        target,
        &headers,
        req.body(),
        timeout,
    )
}

fn bad(what: &str) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, what.to_string())
}

/// Parses a whole answer (read until the server closed).
pub fn parse(raw: &[u8], head_only: bool) -> std::io::Result<Resp> {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| bad("incomplete answer"))?;
    let head = String::from_utf8_lossy(&raw[..end]);
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| bad("bad status line"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let rest = &raw[end + 4..];
    let mut r = Resp {
        status,
        headers,
        body: Vec::new(),
    };
    if head_only {
        return Ok(r);
    }
    if r.header("transfer-encoding")
        .is_some_and(|t| t.eq_ignore_ascii_case("chunked"))
    {
        r.body = dechunk(rest).ok_or_else(|| bad("truncated chunked body"))?;
    } else if let Some(n) = r
        .header("content-length")
        .and_then(|v| v.parse::<usize>().ok())
    {
        if rest.len() < n {
            return Err(bad("body shorter than its Content-Length"));
        }
        r.body = rest[..n].to_vec();
    } else {
        r.body = rest.to_vec();
    }
    Ok(r)
}

/// A chunked body; `None` when it is cut short (no last chunk).
fn dechunk(mut b: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    loop {
        let eol = b.windows(2).position(|w| w == b"\r\n")?;
        let size_s = std::str::from_utf8(&b[..eol]).ok()?;
        let size = usize::from_str_radix(size_s.split(';').next()?.trim(), 16).ok()?;
        b = &b[eol + 2..];
        if size == 0 {
            return Some(out);
        }
        if b.len() < size + 2 {
            return None;
        }
        out.extend_from_slice(&b[..size]);
        b = &b[size + 2..];
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_answer_with_a_content_length_is_read_to_its_length() {
        let r = parse(
            b"HTTP/1.1 201 Created\r\nContent-Length: 5\r\nETag: \"x\"\r\n\r\nhello",
            false,
        )
        .expect("parsed");
        assert_eq!(r.status, 201);
        assert_eq!(r.header("etag"), Some("\"x\""));
        assert_eq!(r.body, b"hello");
    }

    #[test]
    fn a_body_shorter_than_its_content_length_is_no_answer() {
        let e = parse(b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nhello", false);
        assert!(e.is_err());
    }

    #[test]
    fn a_chunked_body_is_joined_and_a_cut_one_is_no_answer() {
        let whole = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n3;x=y\r\n ab\r\n0\r\n\r\n";
        assert_eq!(parse(whole, false).expect("parsed").body, b"hello ab");
        // No last chunk: the server died mid-body.
        let cut = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n";
        assert!(parse(cut, false).is_err());
    }

    #[test]
    fn an_incomplete_head_is_no_answer_and_head_has_no_body() {
        assert!(parse(b"HTTP/1.1 200 OK\r\nContent-Le", false).is_err());
        let r =
            parse(b"HTTP/1.1 404 Not Found\r\nContent-Length: 7\r\n\r\n", true).expect("parsed");
        assert_eq!((r.status, r.body.len()), (404, 0));
    }
}
