//! The body of a multi-write (`POST /BUCKET?batch`, docs/node.md, "Batch
//! PUT"): items one after another, each a little-endian `u16` name length,
//! a `u32` data length, the name (UTF-8) and the data.

use bytes::Bytes;

/// The framed body of a Strata multi-write (docs/node.md, "Batch PUT").
pub fn encode(items: &[(String, Bytes)]) -> Bytes {
    let total: usize = items.iter().map(|(n, d)| 6 + n.len() + d.len()).sum();
    let mut out = Vec::with_capacity(total);
    for (name, data) in items {
        out.extend_from_slice(&(name.len() as u16).to_le_bytes());
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(data);
    }
    Bytes::from(out)
}

/// The most items a batch may hold (docs/node.md, "Batch PUT"): a body of
/// one-byte items is bounded by its bytes no better than its count (before
/// issue 34, 1M one-byte items in 13.9 MB took a node 1.7 GB and 164 s).
pub const MAX_ITEMS: usize = 10_000;

/// Parses a batch body (docs/node.md, "Batch PUT"): repeated
/// `name_len u16 LE, data_len u32 LE, name, data`, at most [`MAX_ITEMS`]
/// of them.
pub fn parse(body: &Bytes) -> Result<Vec<(String, Bytes)>, String> {
    let mut out = Vec::new();
    let mut i = 0usize;
    while i < body.len() {
        if out.len() == MAX_ITEMS {
            return Err(format!(
                "a batch holds at most {MAX_ITEMS} items; send the rest in another"
            ));
        }
        if body.len() - i < 6 {
            return Err(format!(
                "batch item {} is truncated in its header",
                out.len() + 1
            ));
        }
        let nl = u16::from_le_bytes([body[i], body[i + 1]]) as usize;
        let dl = u32::from_le_bytes([body[i + 2], body[i + 3], body[i + 4], body[i + 5]]) as usize;
        i += 6;
        if body.len() - i < nl + dl {
            return Err(format!(
                "batch item {} says {nl} name bytes and {dl} data bytes but only {} remain",
                out.len() + 1,
                body.len() - i
            ));
        }
        let name = std::str::from_utf8(&body[i..i + nl])
            .map_err(|_| format!("batch item {}: name is not UTF-8", out.len() + 1))?
            .to_string();
        i += nl;
        out.push((name, body.slice(i..i + dl)));
        i += dl;
    }
    if out.is_empty() {
        return Err("empty batch".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_batch_holds_at_most_max_items() {
        let item = ("n".to_string(), Bytes::from_static(b"x"));
        let full = encode(&vec![item.clone(); MAX_ITEMS]);
        assert_eq!(parse(&full).unwrap().len(), MAX_ITEMS);
        let over = encode(&vec![item; MAX_ITEMS + 1]);
        let e = parse(&over).unwrap_err();
        assert!(e.contains("at most 10000 items"), "{e}");
    }

    #[test]
    fn a_batch_reads_back_as_written_and_truncation_is_refused() {
        let b = encode(&[
            ("a".into(), Bytes::from_static(b"1")),
            ("bc".into(), Bytes::from_static(b"")),
        ]);
        let v = parse(&b).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[0], ("a".to_string(), Bytes::from_static(b"1")));
        assert_eq!(v[1].0, "bc");
        assert!(parse(&b.slice(..b.len() - 1)).is_err());
        assert!(parse(&Bytes::from_static(&[1, 0, 9, 0, 0, 0, b'a'])).is_err());
        assert!(parse(&Bytes::new()).is_err());
    }
}
