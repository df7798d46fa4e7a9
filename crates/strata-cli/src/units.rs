//! Parsing and printing of byte sizes and durations given on the command line.

#![allow(dead_code)]

use anyhow::{bail, Context};

/// A size on the command line: absolute bytes, or a percentage of something
/// the command knows (the trace's working set, a device's capacity).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum SizeArg {
    /// An absolute number of bytes (or objects, in object mode).
    Bytes(u64),
    /// A percentage (0 < p <= 100 usually, but not limited).
    Percent(f64),
}

impl SizeArg {
    /// The absolute size, given what a percentage is of.
    pub fn resolve(self, whole: u64) -> u64 {
        match self {
            SizeArg::Bytes(b) => b,
            SizeArg::Percent(p) => ((whole as f64) * p / 100.0).round() as u64,
        }
    }
}

/// Parses `4096`, `4k`, `4KiB`, `1.5GB`, `10%`.
/// Decimal suffixes (k, KB, M, MB, ...) are powers of 1000 and binary ones
/// (KiB, MiB, ...) powers of 1024, except a bare `k`/`m`/`g`/`t`, which
/// is binary (as `dd` and most storage tools read it).
pub fn parse_size_arg(s: &str) -> anyhow::Result<SizeArg> {
    let t = s.trim();
    if let Some(p) = t.strip_suffix('%') {
        let v: f64 = p
            .trim()
            .parse()
            .with_context(|| format!("bad percentage {s:?}"))?;
        if !(v.is_finite() && v > 0.0) {
            bail!("percentage must be positive: {s:?}");
        }
        return Ok(SizeArg::Percent(v));
    }
    Ok(SizeArg::Bytes(parse_bytes(t)?))
}

/// Parses an absolute byte count with an optional unit suffix.
pub fn parse_bytes(s: &str) -> anyhow::Result<u64> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let num: f64 = num.replace('_', "").parse().with_context(|| {
        format!("bad size {s:?}: expected a number with an optional unit such as 4KiB, 1GB or 10%")
    })?;
    let mult: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kib" => 1024.0,
        "m" | "mib" => 1024.0 * 1024.0,
        "g" | "gib" => 1024.0 * 1024.0 * 1024.0,
        "t" | "tib" => 1024.0f64.powi(4),
        "kb" => 1e3,
        "mb" => 1e6,
        "gb" => 1e9,
        "tb" => 1e12,
        other => bail!(
            "bad size {s:?}: unknown unit {other:?} (use B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)"
        ),
    };
    let v = num * mult;
    if !(v.is_finite() && v >= 0.0) {
        bail!("bad size {s:?}");
    }
    Ok(v.round() as u64)
}

/// Formats bytes with a binary unit, e.g. `1.5 GiB`.
pub fn format_bytes(b: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = b as f64;
    let mut i = 0;
    while v >= 1024.0 && i + 1 < UNITS.len() {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{b} B")
    } else {
        format!("{v:.2} {}", UNITS[i])
    }
}

/// Parses a duration: a number and a unit, `ms`, `s`, `m`, `h` or `d`
/// (`500ms`, `30s`, `2.5h`, `7d`); a bare number is seconds.
pub fn parse_duration(s: &str) -> anyhow::Result<std::time::Duration> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let v: f64 = num
        .parse()
        .map_err(|_| anyhow::anyhow!("{s:?} is not a duration (for instance 30s, 10m, 2h, 7d)"))?;
    let mult = match unit.trim() {
        "ms" => 0.001,
        "" | "s" => 1.0,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        u => anyhow::bail!("unknown unit {u:?} in {s:?} (use ms, s, m, h or d)"),
    };
    let secs = v * mult;
    if !secs.is_finite() || !(0.0..=1e10).contains(&secs) {
        anyhow::bail!("{s:?} is out of range");
    }
    Ok(std::time::Duration::from_secs_f64(secs))
}

/// Parses an erasure code `K+M` (1 ≤ K, 1 ≤ M, K+M ≤ 32).
pub fn parse_code(s: &str) -> anyhow::Result<(usize, usize)> {
    let (k, m) = s
        .split_once('+')
        .ok_or_else(|| anyhow::anyhow!("{s:?} is not a code K+M (for instance 4+2, 6+3, 10+4)"))?;
    let k: usize = k
        .trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("{s:?}: K is not a number"))?;
    let m: usize = m
        .trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("{s:?}: M is not a number"))?;
    if k == 0 || m == 0 || k + m > 32 {
        anyhow::bail!("code {k}+{m}: K and M must be at least 1 and K+M at most 32");
    }
    Ok((k, m))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_bytes("4096").unwrap(), 4096);
        assert_eq!(parse_bytes("4KiB").unwrap(), 4096);
        assert_eq!(parse_bytes("4k").unwrap(), 4096);
        assert_eq!(parse_bytes("1GB").unwrap(), 1_000_000_000);
        assert_eq!(parse_bytes("1.5MiB").unwrap(), 1_572_864);
        assert!(parse_bytes("12 parsecs").is_err());
        assert!(parse_bytes("").is_err());
        assert_eq!(parse_size_arg("10%").unwrap(), SizeArg::Percent(10.0));
        assert_eq!(SizeArg::Percent(10.0).resolve(1000), 100);
        assert!(parse_size_arg("-5%").is_err());
    }
}
