//! Format detection: by magic, then by name, then by the first lines.

use crate::format::Format;
use crate::input::Input;
use crate::readers::csv::detect_delimiter;
use crate::readers::fixed::{looks_like_oracle, looks_like_vscsi, LCS_MAGIC};
use crate::readers::strata::MAGIC as STRATA_MAGIC;
use crate::TraceError;

/// Names (and aliases) of Strata CSV header columns.
const KNOWN_COLUMNS: &[&str] = &[
    "time",
    "timestamp",
    "ts",
    "clock_time",
    "op",
    "operation",
    "type",
    "object",
    "obj",
    "obj_id",
    "id",
    "key",
    "lbn",
    "size",
    "obj_size",
    "object_size",
    "workload",
    "tenant",
    "bucket",
    "offset",
    "length",
    "len",
    "create_time",
    "ctime",
    "tier",
    "latency_us",
    "latency",
    "hint",
    "cache_hint",
    "next_access",
    "next_access_vtime",
];

pub(crate) fn detect(input: &Input) -> Result<Format, TraceError> {
    let head = &input.head;
    let bad = |reason: String| TraceError::BadFormat {
        path: input.path.clone(),
        reason,
    };
    if head.is_empty() {
        return Err(bad("the file is empty".into()));
    }
    if head.starts_with(&STRATA_MAGIC) {
        return Ok(Format::Strata);
    }
    if head.len() >= 8 && head[..8] == LCS_MAGIC.to_le_bytes() {
        return Ok(Format::Lcs);
    }
    let name = input.logical_name();
    if name.contains("oraclegeneral") {
        return Ok(Format::OracleGeneral);
    }
    if name.ends_with(".vscsi") {
        return Ok(Format::Vscsi);
    }
    if name.ends_with(".strace") {
        return Ok(Format::Strata);
    }
    if name.ends_with(".lcs") {
        return Ok(Format::Lcs);
    }
    if is_text(head) {
        return detect_text(head, &name).ok_or_else(|| {
            bad(format!(
                "a text trace of unknown layout (first line {:?}); give --format or --columns time=N,object=N,size=N,...",
                first_line(head)
            ))
        });
    }
    if looks_like_vscsi(head) {
        return Ok(Format::Vscsi);
    }
    if looks_like_oracle(head) {
        return Ok(Format::OracleGeneral);
    }
    Err(bad(
        "unrecognised binary trace (no Strata or LCS magic, not vscsi or oracleGeneral records); give --format".into(),
    ))
}

fn is_text(head: &[u8]) -> bool {
    // Cut at the last newline: the head may end inside a UTF-8 character.
    let cut = memchr::memrchr(b'\n', head).map_or(head.len(), |i| i + 1);
    let body = &head[..cut];
    !body.contains(&0) && std::str::from_utf8(body).is_ok()
}

fn first_line(head: &[u8]) -> String {
    let end = memchr::memchr(b'\n', head).unwrap_or(head.len()).min(120);
    String::from_utf8_lossy(&head[..end]).trim_end().to_string()
}

fn lines(head: &[u8]) -> impl Iterator<Item = &str> {
    let cut = memchr::memrchr(b'\n', head).unwrap_or(head.len());
    std::str::from_utf8(&head[..cut])
        .unwrap_or("")
        .lines()
        .map(|l| l.trim())
        .filter(|l| !l.is_empty())
}

fn names_of(line: &str) -> Vec<String> {
    let d = detect_delimiter(line.as_bytes()) as char;
    line.split(d)
        .map(|s| {
            s.trim()
                .trim_matches('"')
                .to_ascii_lowercase()
                .replace('-', "_")
        })
        .filter(|s| !s.is_empty())
        .collect()
}

fn detect_text(head: &[u8], name: &str) -> Option<Format> {
    let first = lines(head).next()?;
    if let Some(h) = first.strip_prefix('#') {
        let names = names_of(h);
        if names.len() >= 3 && names[0] == "time" && names[1] == "object" && names[2] == "size" {
            return Some(Format::TwitterCsv);
        }
    }
    let names = names_of(first);
    if names == ["version", "time", "op", "size", "lbn"] {
        return Some(Format::CloudPhysicsCsv);
    }
    let first_data = lines(head).find(|l| !l.starts_with('#'))?;
    let header = names_of(first_data);
    if header
        .iter()
        .any(|n| matches!(n.as_str(), "object" | "key" | "obj_id" | "id" | "lbn"))
        && header
            .iter()
            .all(|n| KNOWN_COLUMNS.contains(&n.as_str()) || n.parse::<f64>().is_err())
    {
        return Some(Format::StrataCsv);
    }
    // MSR: 7 comma fields, a filetime, and Read/Write in the fourth.
    let msr = lines(head).take(64).all(|l| {
        let f: Vec<&str> = l.split(',').map(str::trim).collect();
        f.len() == 7
            && f[0].parse::<u64>().is_ok()
            && (f[3].eq_ignore_ascii_case("read") || f[3].eq_ignore_ascii_case("write"))
            && f[4].parse::<u64>().is_ok()
            && f[5].parse::<u64>().is_ok()
    });
    if msr {
        return Some(Format::Msr);
    }
    // One token per line.
    let single = lines(head)
        .take(256)
        .all(|l| !l.contains([',', '\t', ';', '|', ' ']));
    if single && (name.ends_with(".txt") || lines(head).take(256).all(|l| l.parse::<u64>().is_ok()))
    {
        return Some(Format::Text);
    }
    None
}
