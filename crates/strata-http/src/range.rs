//! The HTTP `Range` header: one byte range per request (RFC 9110 §14.1).

/// Why a `Range` header cannot be served.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RangeError {
    /// Not of the form `bytes=FIRST-LAST`, `bytes=FIRST-` or `bytes=-SUFFIX`.
    #[error(
        "malformed Range header {0:?}: expected bytes=FIRST-LAST, bytes=FIRST- or bytes=-SUFFIX"
    )]
    Malformed(String),
    /// More than one range was asked for.
    #[error("multiple ranges are not supported: {0:?}")]
    Multiple(String),
    /// The range starts at or past the end of the object.
    #[error("range {range:?} is outside the object ({size} bytes)")]
    Unsatisfiable {
        /// The header value.
        range: String,
        /// The object's size.
        size: u64,
    },
}

/// Parses `value` against an object of `size` bytes into the half-open byte
/// interval `[start, end)` to send.
pub fn parse_range(value: &str, size: u64) -> Result<(u64, u64), RangeError> {
    let malformed = || RangeError::Malformed(value.to_string());
    let spec = value
        .trim()
        .strip_prefix("bytes=")
        .ok_or_else(malformed)?
        .trim();
    if spec.contains(',') {
        return Err(RangeError::Multiple(value.to_string()));
    }
    let (first, last) = spec.split_once('-').ok_or_else(malformed)?;
    let (first, last) = (first.trim(), last.trim());
    let num = |s: &str| -> Result<u64, RangeError> {
        if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(malformed());
        }
        s.parse::<u64>().map_err(|_| malformed())
    };
    let unsat = || RangeError::Unsatisfiable {
        range: value.to_string(),
        size,
    };
    if first.is_empty() {
        let n = num(last)?;
        if n == 0 || size == 0 {
            return Err(unsat());
        }
        return Ok((size.saturating_sub(n), size));
    }
    let start = num(first)?;
    let end_incl = if last.is_empty() {
        None
    } else {
        Some(num(last)?)
    };
    if let Some(e) = end_incl {
        if e < start {
            return Err(malformed());
        }
    }
    if start >= size {
        return Err(unsat());
    }
    let end = match end_incl {
        Some(e) => e.saturating_add(1).min(size),
        None => size,
    };
    Ok((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms() {
        assert_eq!(parse_range("bytes=0-9", 100), Ok((0, 10)));
        assert_eq!(parse_range("bytes=90-", 100), Ok((90, 100)));
        assert_eq!(parse_range("bytes=-10", 100), Ok((90, 100)));
        assert_eq!(parse_range("bytes=-1000", 100), Ok((0, 100)));
        assert_eq!(parse_range("bytes=50-5000", 100), Ok((50, 100)));
    }

    #[test]
    fn bad() {
        for v in [
            "bytes=abc",
            "bytes=5-1",
            "items=0-1",
            "bytes=-",
            "bytes=1-x",
            "bytes=+1-2",
        ] {
            assert!(
                matches!(parse_range(v, 100), Err(RangeError::Malformed(_))),
                "{v}"
            );
        }
        assert!(matches!(
            parse_range("bytes=0-1,3-4", 100),
            Err(RangeError::Multiple(_))
        ));
        assert!(matches!(
            parse_range("bytes=100-", 100),
            Err(RangeError::Unsatisfiable { .. })
        ));
        assert!(matches!(
            parse_range("bytes=-0", 100),
            Err(RangeError::Unsatisfiable { .. })
        ));
    }
}
