//! The properties the fuzz targets check, one function per target, each
//! taking arbitrary bytes. Shared by the coverage-guided targets
//! (`fuzz_targets/*.rs`, built by `run.sh`) and by the workspace's test
//! `crates/strata-cli/tests/parsers_total.rs`, which runs every one over
//! proptest's arbitrary bytes in CI (the fuzzer needs its own build).
#![allow(dead_code)]

use std::io::Write;
use strata_meta::cluster_auth::{ClusterSecret, Signed};
use strata_store::format::checkpoint;
use strata_store::format::needle;
use strata_store::format::superblock::{Superblock, SUPERBLOCK_LEN};

fn needle_roundtrip(data: &[u8]) {
    use needle::FlagCode;
    for code in [FlagCode::Plain, FlagCode::Coded, FlagCode::Ignored] {
        let _ = needle::parse_header(data, code);
        let Ok((h, body)) = needle::parse(data, code) else {
            continue;
        };
        let mut out = Vec::new();
        needle::encode_in_batch(
            &mut out,
            h.cookie,
            h.key,
            h.alt_key,
            code.word(h.flags),
            body,
            h.batch_end,
        );
        // Padding bytes are not checked by the parser, and the flags word
        // is read through its code; everything else must match byte for
        // byte.
        let used = needle::HEADER_LEN + body.len() + needle::FOOTER_LEN;
        assert_eq!(&out[..20], &data[..20]);
        assert_eq!(&out[24..used], &data[24..used]);
        assert_eq!(out.len() as u64, h.needle_len());
        let stored = u32::from_le_bytes([data[20], data[21], data[22], data[23]]);
        let off = code.word(h.flags) ^ stored;
        match code {
            FlagCode::Plain => assert_eq!(off, 0),
            FlagCode::Coded => {
                assert!((off & 0xFFFF).count_ones() <= 3 && (off >> 16).count_ones() <= 3)
            }
            FlagCode::Ignored => assert_eq!(h.flags, 0),
        }
    }
}

/// Needle parser: never panics on any bytes, and whatever it accepts
/// re-encodes to the same bytes. A second pass fixes up the input's
/// checksums, so that the fuzzer also reaches the footer and data checks.
pub fn needle(data: &[u8]) {
    needle_roundtrip(data);
    if data.len() < needle::HEADER_LEN + needle::FOOTER_LEN {
        return;
    }
    let mut b = data.to_vec();
    b[0..4].copy_from_slice(&needle::HEADER_MAGIC.to_le_bytes());
    let room = (b.len() - needle::HEADER_LEN - needle::FOOTER_LEN) as u32;
    let size = u32::from_le_bytes([b[24], b[25], b[26], b[27]]) % (room + 1);
    b[24..28].copy_from_slice(&size.to_le_bytes());
    if b[20] & 4 == 0 {
        // half the time a flags word of the coded kind, a bit flipped
        let w = needle::FlagCode::Coded.word(u32::from(b[21] & 3)) ^ (1 << (b[22] % 32));
        b[20..24].copy_from_slice(&w.to_le_bytes());
    }
    let hcrc = crc32c::crc32c_append(crc32c::crc32c(&b[0..20]), &b[24..28]);
    b[28..32].copy_from_slice(&hcrc.to_le_bytes());
    let n = size as usize;
    if b[32 + n] & 1 == 0 {
        // half the time also a valid footer and data checksum
        let dcrc = crc32c::crc32c(&b[32..32 + n]);
        b[32 + n..36 + n].copy_from_slice(&needle::FOOTER_MAGIC.to_le_bytes());
        b[36 + n..40 + n].copy_from_slice(&dcrc.to_le_bytes());
    }
    needle_roundtrip(&b);
}

/// Superblock parser: never panics, and accepts only what it would write;
/// the mending parser accepts that, or bytes exactly one bit from it.
pub fn superblock(data: &[u8]) {
    if let Ok(sb) = Superblock::parse(data) {
        assert_eq!(&sb.encode()[..], &data[..SUPERBLOCK_LEN]);
    }
    if let Ok((sb, mended)) = Superblock::parse_mending(data) {
        let off: u32 = sb
            .encode()
            .iter()
            .zip(&data[..SUPERBLOCK_LEN])
            .map(|(a, b)| (a ^ b).count_ones())
            .sum();
        assert_eq!(off, u32::from(mended));
    }
    // A whole superblock made from the input, one bit of it flipped: the
    // mending parser gives back exactly the whole one.
    if data.len() >= SUPERBLOCK_LEN + 2 {
        let mut b = data[..SUPERBLOCK_LEN].to_vec();
        b[0..8].copy_from_slice(b"STRATSEG");
        b[8..12].copy_from_slice(&u32::from(data[8] % 3 + 1).to_le_bytes());
        b[12] = data[12] % 2;
        let crc = crc32c::crc32c(&b[0..60]);
        b[60..64].copy_from_slice(&crc.to_le_bytes());
        let whole = Superblock::parse(&b).expect("a whole superblock");
        let bit = usize::from(u16::from_le_bytes([data[64], data[65]])) % (SUPERBLOCK_LEN * 8);
        b[bit / 8] ^= 1 << (bit % 8);
        assert_eq!(Superblock::parse_mending(&b), Ok((whole, true)));
    }
}

/// Checkpoint parser and decoders: never panic or allocate wildly on any
/// bytes; a decoded index answers lookups without panicking. The input's
/// checksums (and, for version 3, its section sizes) are fixed up, once as
/// a version-2 file and once as a version-3 one, so that the fuzzer reaches
/// the decoders; of a version-3 file, what the open reads of it (header
/// and offsets section) agrees with the whole file's decoding.
pub fn checkpoint(data: &[u8]) {
    let _ = checkpoint::parse(data);
    if let Some(p) = checkpoint::prefix_len(data) {
        let end = usize::try_from(p).unwrap_or(usize::MAX).min(data.len());
        if let Ok((h, sec)) = checkpoint::parse_prefix(&data[..end]) {
            let _ = checkpoint::decode_sealed_prefix(&h, sec);
        }
    }
    let _ = strata_store::format::run::decode(data);
    if data.len() < checkpoint::HEADER_LEN_V2 {
        return;
    }
    let mut b = data.to_vec();
    b[0..8].copy_from_slice(&checkpoint::MAGIC);
    b[8..12].copy_from_slice(&checkpoint::VERSION_2.to_le_bytes());
    let body_len = (b.len() - checkpoint::HEADER_LEN_V2) as u64;
    b[48..56].copy_from_slice(&body_len.to_le_bytes());
    let body_crc = crc32c::crc32c(&b[checkpoint::HEADER_LEN_V2..]);
    b[56..60].copy_from_slice(&body_crc.to_le_bytes());
    let crc = crc32c::crc32c(&b[0..60]);
    b[60..64].copy_from_slice(&crc.to_le_bytes());
    let (h, body) = checkpoint::parse(&b).expect("fixed-up checkpoint parses");
    checkpoint_decoders(&h, body);
    if data.len() < checkpoint::HEADER_LEN {
        return;
    }
    let b = checkpoint_v3_fixed_up(data);
    let (h, body) = checkpoint::parse(&b).expect("fixed-up version-3 checkpoint parses");
    checkpoint_decoders(&h, body);
    let plen = checkpoint::prefix_len(&b).expect("a version-3 header") as usize;
    let (hp, sec) = checkpoint::parse_prefix(&b[..plen]).expect("its prefix parses");
    assert_eq!(hp, h);
    let pre = checkpoint::decode_sealed_prefix(&hp, sec);
    if let Ok(full) = checkpoint::decode_sealed_parts(&h, body) {
        let pre = pre.expect("the prefix of a decodable checkpoint decodes");
        assert_eq!(
            (&pre.offsets, &pre.deleted, pre.live_bytes),
            (&full.offsets, &full.deleted, full.live_bytes)
        );
    }
}

fn checkpoint_decoders(h: &checkpoint::CheckpointHeader, body: &[u8]) {
    if let Ok(a) = checkpoint::decode_active(h, body) {
        for &o in a.map.values() {
            assert!(a.needle(o).is_some());
        }
    }
    if let Ok((s, deleted)) = checkpoint::decode_sealed(h, body) {
        for &o in s.map.values() {
            assert!(s.needle(o).is_some());
        }
        assert_eq!(deleted.len() as u64, s.needle_count().div_ceil(64));
    }
}

/// `data` (at least a header long) made a version-3 checkpoint whose sizes
/// and checksums agree: a needle count below 64 taken from its bytes, the
/// body cut or zero-padded to whole sections.
pub fn checkpoint_v3_fixed_up(data: &[u8]) -> Vec<u8> {
    let hl = checkpoint::HEADER_LEN;
    let mut b = data.to_vec();
    b[0..8].copy_from_slice(&checkpoint::MAGIC);
    b[8..12].copy_from_slice(&checkpoint::VERSION.to_le_bytes());
    b[72..76].copy_from_slice(&[0; 4]);
    let n = u64::from(b[40]) % 64;
    b[40..48].copy_from_slice(&n.to_le_bytes());
    let a = ((n as usize + 1) * 4).next_multiple_of(8) + (n as usize).div_ceil(64) * 8;
    if b.len() < hl + a {
        b.resize(hl + a, 0);
    }
    let m = (b.len() - hl - a) / 16;
    b.truncate(hl + a + m * 16);
    b[48..56].copy_from_slice(&(m as u64).to_le_bytes());
    let ca = crc32c::crc32c(&b[hl..hl + a]);
    let cb = crc32c::crc32c(&b[hl + a..]);
    b[64..68].copy_from_slice(&ca.to_le_bytes());
    b[68..72].copy_from_slice(&cb.to_le_bytes());
    let crc = crc32c::crc32c(&b[0..76]);
    b[76..80].copy_from_slice(&crc.to_le_bytes());
    b
}

/// Every trace reader (the format is detected from the bytes, as `strata
/// trace` does): never panics, never allocates wildly, always ends on
/// arbitrary bytes; a record it accepts has sane fields.
pub fn trace_reader(data: &[u8]) {
    // The readers open files (detection reads the magic and the name).
    let dir = std::env::temp_dir();
    for ext in ["strace", "csv", "bin"] {
        let p = dir.join(format!("strata-fuzz-{}.{ext}", std::process::id()));
        {
            let mut f = std::fs::File::create(&p).expect("temp file");
            f.write_all(data).expect("write");
        }
        if let Ok(mut r) = strata_trace::open(&p) {
            let mut out = Vec::new();
            let mut rounds = 0;
            loop {
                out.clear();
                match r.read_batch(&mut out) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => assert!(n <= out.len()),
                }
                rounds += 1;
                assert!(rounds < 1_000_000, "reader does not end");
            }
        }
        let _ = std::fs::remove_file(&p);
    }
}

/// The batch PUT framing (docs/node.md): never panics; what it accepts
/// re-frames to exactly the input.
pub fn batch(data: &[u8]) {
    let body = bytes::Bytes::copy_from_slice(data);
    if let Ok(items) = strata_proto::batch::parse(&body) {
        let mut out = Vec::new();
        for (n, d) in &items {
            out.extend_from_slice(&(n.len() as u16).to_le_bytes());
            out.extend_from_slice(&(d.len() as u32).to_le_bytes());
            out.extend_from_slice(n.as_bytes());
            out.extend_from_slice(d);
        }
        assert_eq!(out, data);
    }
}

/// Tier plan JSON (docs/tier-plan.md), as every server reads it from a
/// file, `/_admin/plan` or the metadata service: never panics; a plan that
/// validates survives the node's own checks.
pub fn plan_json(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(plan) = strata_provision::TierPlan::from_json(text) {
        let _ = plan.validate();
        let _ = strata_node::plan::check(&plan, 1024);
    }
}

/// Row records (docs/recovery.md: the needle data of a cluster row) and
/// the head-record parser of the client: never panic on any bytes.
pub fn row_record(data: &[u8]) {
    if let Some(d) = strata_proto::row::decode(data) {
        let _ = strata_proto::parse_head(&bytes::Bytes::copy_from_slice(d.record));
    }
    let _ = strata_proto::parse_head(&bytes::Bytes::copy_from_slice(data));
    let _ = strata_node::object::ObjectHeader::decode(&bytes::Bytes::copy_from_slice(data));
}

/// The `Range` header of GET: never panics, and an accepted range (the
/// half-open interval `[start, end)`) is non-empty and lies within the
/// object.
pub fn range(data: &[u8]) {
    if data.len() < 8 {
        return;
    }
    let size = u64::from_le_bytes(data[..8].try_into().unwrap()) % (1 << 40);
    let Ok(v) = std::str::from_utf8(&data[8..]) else {
        return;
    };
    if let Ok((a, b)) = strata_http::range::parse_range(v, size) {
        assert!(a < b && b <= size, "{v:?} of {size} gave [{a}, {b})");
    }
}

/// The cluster's request signatures (`x-strata-auth`, docs/security.md):
/// never panic on any header value, and never accept a forged one.
pub fn cluster_auth(data: &[u8]) {
    let secret = ClusterSecret::new("strata-fuzz-cluster-secret").expect("secret");
    let text = String::from_utf8_lossy(data);
    let s = Signed {
        method: "PUT",
        path: "/cluster/v1/rows/1/objects/b/k",
        version: Some(3),
        stamp: Some(5),
        host: "127.0.0.1:7001",
    };
    assert!(
        secret.verify(Some(&text), &s, 10).is_err(),
        "a fuzzed header was accepted: {text:?}"
    );
    // Headers as a request would carry them, one `name: value` per line.
    let mut h = http::HeaderMap::new();
    for line in text.lines() {
        if let Some((k, v)) = line.split_once(':') {
            if let (Ok(k), Ok(v)) = (
                http::HeaderName::from_bytes(k.trim().as_bytes()),
                http::HeaderValue::from_str(v.trim()),
            ) {
                h.append(k, v);
            }
        }
    }
    assert!(secret.verify_head("GET", "/cluster/v1/status", &h).is_err());
}

/// The S3 API's own parsers of request parts (the SigV4 signature itself
/// is checked by the s3s crate): listing continuation tokens, copy source
/// ranges, content headers and user metadata. Never panic.
pub fn s3_request(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    if let Ok(name) = strata_s3::list::decode_token(&text) {
        assert_eq!(
            strata_s3::list::encode_token(&name),
            text.trim_end_matches('=')
        );
    }
    let size = data.len() as u64 * 977;
    if let Ok((a, b)) = strata_s3::multipart::copy_range(&text, size) {
        assert!(a <= b && b <= size);
    }
    let mut h = http::HeaderMap::new();
    for line in text.lines() {
        if let Some((k, v)) = line.split_once(':') {
            if let (Ok(k), Ok(v)) = (
                http::HeaderName::from_bytes(k.trim().as_bytes()),
                http::HeaderValue::from_bytes(v.trim().as_bytes()),
            ) {
                h.append(k, v);
            }
        }
    }
    let _ = strata_s3::meta::from_headers(&h);
    let _ = strata_s3::meta::refuse_unsupported_write(&h);
    let _ = strata_s3::meta::refuse_unsupported_read(&h);
    let _ = strata_s3::meta::Checks::from_request(&h, None);
}
