//! The priority weights file: one `WORKLOAD WEIGHT` pair per line.

use std::collections::HashMap;
use std::path::Path;

use crate::error::{ProvisionError, Result};

/// Parses weights text: each non-empty line that is not a `#` comment holds
/// a workload id and a non-negative weight, separated by whitespace, a comma
/// or `=`. Workloads not listed keep weight 1.
pub fn parse_weights(path: &Path, text: &str) -> Result<HashMap<u32, f64>> {
    let mut out = HashMap::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let bad = |reason: String| ProvisionError::BadWeights {
            path: path.to_path_buf(),
            line: i + 1,
            reason,
        };
        let parts: Vec<&str> = line
            .split(|c: char| c.is_whitespace() || c == ',' || c == '=')
            .filter(|s| !s.is_empty())
            .collect();
        if parts.len() != 2 {
            return Err(bad(format!(
                "expected `WORKLOAD WEIGHT` (a workload id and a weight), got {line:?}"
            )));
        }
        let id: u32 = parts[0].parse().map_err(|_| {
            bad(format!(
                "workload {:?} is not a workload id (a whole number)",
                parts[0]
            ))
        })?;
        let w: f64 = parts[1]
            .parse()
            .map_err(|_| bad(format!("weight {:?} is not a number", parts[1])))?;
        if !(w.is_finite() && w >= 0.0) {
            return Err(bad(format!("weight {w} must be a non-negative number")));
        }
        if out.insert(id, w).is_some() {
            return Err(bad(format!("workload {id} is given a weight twice")));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_rejects() {
        let p = Path::new("w.txt");
        let w = parse_weights(p, "# weights\n1 2.5\n2,0\n\n3=1e1 # ten\n").unwrap();
        assert_eq!(w[&1], 2.5);
        assert_eq!(w[&2], 0.0);
        assert_eq!(w[&3], 10.0);
        let e = parse_weights(p, "1 2\nfoo 3\n").unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("foo"), "{e}");
        assert!(parse_weights(p, "1 -2").is_err());
        assert!(parse_weights(p, "1 2 3").is_err());
        assert!(parse_weights(p, "1 2\n1 3").is_err());
    }
}
