//! Column maps: how the fields of a delimited text trace map onto a request.

use std::fmt;
use std::str::FromStr;

/// Where a field is: a column number or a header name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Column {
    /// A 0-based column index (the command line's `time=1` is index 0).
    Index(usize),
    /// A column named in the header row.
    Name(String),
}

/// How the columns of a CSV (or other delimited text) trace map onto the
/// fields of a [`crate::Request`].
///
/// Parsed from `key=value` pairs separated by commas, as the command line's
/// `--columns` takes them: `time=1,object=3,size=4,op=2`. Column numbers are
/// 1-based; a value that is not a number names a header column
/// (`object=key`, which implies `header=true`). Keys:
///
/// * fields: `time`, `op`, `object`, `size`, `workload`, `offset`, `length`,
///   `create_time`, `tier`, `latency_us`, `hint`, `next_access`;
/// * `delimiter=` one character, or `comma`, `tab`, `space` (runs of spaces
///   and tabs), `semicolon`, `pipe` (default: detected from the first line);
/// * `header=true|false`: whether the first line names the columns (default:
///   true when a column is given by name, else false; lines starting with
///   `#` are always skipped);
/// * `time_unit=s|ms|us|ns` (default `s`): the unit of the time and
///   create_time columns.
///
/// Only `object` is required. Without `time`, the time is the record's index
/// (a virtual clock); without `size`, every object has size 1; without `op`,
/// every request is a get; without `workload`, the workload is 0.
#[derive(Clone, Debug, PartialEq)]
pub struct ColumnMap {
    /// Request time.
    pub time: Option<Column>,
    /// Operation (get/put/delete names, or libCacheSim's numeric op codes).
    pub op: Option<Column>,
    /// Object id (a decimal u64, else hashed).
    pub object: Option<Column>,
    /// Object size in bytes.
    pub size: Option<Column>,
    /// Workload id (a number) or name.
    pub workload: Option<Column>,
    /// Byte offset of a ranged request.
    pub offset: Option<Column>,
    /// Byte length of a ranged request.
    pub length: Option<Column>,
    /// Object creation time.
    pub create_time: Option<Column>,
    /// Tier that served the request (ram, flash, disk).
    pub tier: Option<Column>,
    /// Latency in microseconds.
    pub latency_us: Option<Column>,
    /// Caching hint (true/false, 1/0, admit/bypass).
    pub hint: Option<Column>,
    /// Index of the next request to the same object.
    pub next_access: Option<Column>,
    /// The field delimiter; `None` detects it. `b' '` means runs of blanks.
    pub delimiter: Option<u8>,
    /// Whether the first line is a header row; `None` decides as documented.
    pub header: Option<bool>,
    /// Seconds per unit of the time columns.
    pub time_unit: f64,
}

/// A malformed column map.
#[derive(Debug, thiserror::Error)]
#[error("bad column map {map:?}: {reason}")]
pub struct BadColumnMap {
    /// The map as given.
    pub map: String,
    /// What is wrong with it.
    pub reason: String,
}

impl ColumnMap {
    /// An empty map (time unit: seconds).
    pub fn new() -> ColumnMap {
        ColumnMap {
            time: None,
            op: None,
            object: None,
            size: None,
            workload: None,
            offset: None,
            length: None,
            create_time: None,
            tier: None,
            latency_us: None,
            hint: None,
            next_access: None,
            delimiter: None,
            header: None,
            time_unit: 1.0,
        }
    }

    /// The field slots with their names, in a fixed order.
    pub(crate) fn fields(&self) -> [(&'static str, &Option<Column>); 12] {
        [
            ("time", &self.time),
            ("op", &self.op),
            ("object", &self.object),
            ("size", &self.size),
            ("workload", &self.workload),
            ("offset", &self.offset),
            ("length", &self.length),
            ("create_time", &self.create_time),
            ("tier", &self.tier),
            ("latency_us", &self.latency_us),
            ("hint", &self.hint),
            ("next_access", &self.next_access),
        ]
    }

    fn slot(&mut self, key: &str) -> Option<&mut Option<Column>> {
        Some(match key {
            "time" | "timestamp" | "ts" | "clock_time" => &mut self.time,
            "op" | "operation" | "type" => &mut self.op,
            "object" | "obj" | "obj_id" | "id" | "key" | "lbn" => &mut self.object,
            "size" | "obj_size" | "object_size" => &mut self.size,
            "workload" | "tenant" | "bucket" => &mut self.workload,
            "offset" => &mut self.offset,
            "length" | "len" => &mut self.length,
            "create_time" | "ctime" => &mut self.create_time,
            "tier" => &mut self.tier,
            "latency_us" | "latency" => &mut self.latency_us,
            "hint" | "cache_hint" => &mut self.hint,
            "next_access" | "next_access_vtime" => &mut self.next_access,
            _ => return None,
        })
    }

    /// Sets a field from a header or map key name (with common aliases such
    /// as `key`, `obj_id`, `timestamp`, `tenant`); false if the name is not
    /// a known field.
    pub(crate) fn set_named(&mut self, key: &str, col: Column) -> bool {
        let k = key.trim().to_ascii_lowercase().replace('-', "_");
        match self.slot(&k) {
            Some(s) => {
                if s.is_none() {
                    *s = Some(col);
                }
                true
            }
            None => false,
        }
    }

    /// Whether any field is given by header name.
    pub(crate) fn uses_names(&self) -> bool {
        self.fields()
            .iter()
            .any(|(_, c)| matches!(c, Some(Column::Name(_))))
    }
}

fn parse_delimiter(v: &str) -> Option<u8> {
    Some(match v.to_ascii_lowercase().as_str() {
        "" | "," | "comma" => b',',
        "tab" | "\\t" | "\t" => b'\t',
        "space" | " " | "whitespace" => b' ',
        ";" | "semicolon" => b';',
        "|" | "pipe" => b'|',
        _ if v.len() == 1 && v.as_bytes()[0].is_ascii_punctuation() => v.as_bytes()[0],
        _ => return None,
    })
}

impl Default for ColumnMap {
    fn default() -> ColumnMap {
        ColumnMap::new()
    }
}

impl FromStr for ColumnMap {
    type Err = BadColumnMap;

    fn from_str(s: &str) -> Result<ColumnMap, BadColumnMap> {
        let bad = |reason: String| BadColumnMap {
            map: s.to_string(),
            reason,
        };
        let mut m = ColumnMap::new();
        let pieces: Vec<&str> = s.split(',').collect();
        let mut i = 0;
        while i < pieces.len() {
            let piece = pieces[i].trim();
            i += 1;
            if piece.is_empty() {
                continue;
            }
            let (k, v) = piece
                .split_once('=')
                .ok_or_else(|| bad(format!("{piece:?} is not key=value")))?;
            let key = k.trim().to_ascii_lowercase().replace('-', "_");
            let v = v.trim();
            match key.as_str() {
                "delimiter" | "delim" | "sep" => {
                    // `delimiter=,` splits into "delimiter=" and "".
                    m.delimiter = Some(
                        parse_delimiter(v)
                            .ok_or_else(|| bad(format!("unknown delimiter {v:?}")))?,
                    );
                }
                "header" | "has_header" => {
                    m.header = Some(match v.to_ascii_lowercase().as_str() {
                        "1" | "true" | "yes" | "y" => true,
                        "0" | "false" | "no" | "n" => false,
                        _ => return Err(bad(format!("header must be true or false, not {v:?}"))),
                    })
                }
                "time_unit" | "time_scale" => {
                    m.time_unit = match v.to_ascii_lowercase().as_str() {
                        "s" | "sec" | "seconds" => 1.0,
                        "ms" => 1e-3,
                        "us" | "µs" => 1e-6,
                        "ns" => 1e-9,
                        _ => {
                            return Err(bad(format!(
                                "time_unit must be s, ms, us or ns, not {v:?}"
                            )))
                        }
                    }
                }
                _ => {
                    if v.is_empty() {
                        return Err(bad(format!("no column given for {key:?}")));
                    }
                    let col = match v.parse::<usize>() {
                        Ok(0) => return Err(bad(format!("column numbers start at 1 ({key}=0)"))),
                        Ok(n) => Column::Index(n - 1),
                        Err(_) => Column::Name(v.to_string()),
                    };
                    let slot = m.slot(&key).ok_or_else(|| {
                        bad(format!(
                            "unknown key {key:?} (fields: time, op, object, size, workload, offset, length, create_time, tier, latency_us, hint, next_access; options: delimiter, header, time_unit)"
                        ))
                    })?;
                    if slot.is_some() {
                        return Err(bad(format!("{key:?} given twice")));
                    }
                    *slot = Some(col);
                }
            }
        }
        if m.object.is_none() {
            return Err(bad("an object column is required (e.g. object=2)".into()));
        }
        Ok(m)
    }
}

impl fmt::Display for ColumnMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (name, col) in self.fields() {
            if let Some(c) = col {
                if !first {
                    f.write_str(",")?;
                }
                first = false;
                match c {
                    Column::Index(i) => write!(f, "{name}={}", i + 1)?,
                    Column::Name(n) => write!(f, "{name}={n}")?,
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_indexes_names_and_options() {
        let m: ColumnMap = "time=1,object=3,size=4,op=2,delimiter=tab,time_unit=us"
            .parse()
            .unwrap();
        assert_eq!(m.time, Some(Column::Index(0)));
        assert_eq!(m.object, Some(Column::Index(2)));
        assert_eq!(m.op, Some(Column::Index(1)));
        assert_eq!(m.delimiter, Some(b'\t'));
        assert_eq!(m.time_unit, 1e-6);
        let m: ColumnMap = "object=key,size=4,delimiter=,".parse().unwrap();
        assert_eq!(m.object, Some(Column::Name("key".into())));
        assert_eq!(m.delimiter, Some(b','));
        assert!(m.uses_names());
        assert_eq!(m.to_string(), "object=key,size=4");
    }

    #[test]
    fn rejects_bad_maps() {
        for bad in [
            "size=4",
            "object=0",
            "object=1,colour=2",
            "object=1,object=2",
            "object",
            "object=1,header=maybe",
        ] {
            assert!(bad.parse::<ColumnMap>().is_err(), "{bad}");
        }
    }
}
