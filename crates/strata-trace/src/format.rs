//! The trace formats Strata reads.

use std::fmt;
use std::str::FromStr;

/// A trace format. [`crate::open`] detects it; [`crate::OpenOptions::format`]
/// forces it. docs/trace-format.md says how each maps onto [`crate::Request`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Format {
    /// Strata's own compact binary trace format (`.strace`).
    Strata,
    /// libCacheSim oracleGeneral binary: packed little-endian 24-byte records
    /// `u32 time, u64 object, u32 size, i64 next_access_vtime`.
    OracleGeneral,
    /// libCacheSim LCS: an 8 KiB header (magic `0x123456789abcdef0`,
    /// version) then fixed-size records (v1 is oracleGeneral's record).
    Lcs,
    /// CloudPhysics/VMware vscsi binary (version 1: 32-byte records, version
    /// 2: 48-byte records), detected from the records' version field.
    Vscsi,
    /// libCacheSim's CSV with a `# time, object, size, next_access_vtime`
    /// header and `, ` separators (the Twitter cluster traces).
    TwitterCsv,
    /// libCacheSim's `cloudPhysicsIO.csv`: header `version,time,op,size,lbn`,
    /// op a SCSI opcode in hex (28 read, 2a write).
    CloudPhysicsCsv,
    /// MSR Cambridge CSV without header: Timestamp (Windows filetime),
    /// Hostname, DiskNumber, Type (Read/Write), Offset, Size, ResponseTime.
    Msr,
    /// One object id per line; every object has size 1.
    Text,
    /// Strata CSV: a header row naming columns among time, op, object, size,
    /// workload, offset, length, create_time, tier, latency_us, hint,
    /// next_access.
    StrataCsv,
    /// Any delimited text through a [`crate::ColumnMap`].
    Csv,
}

impl Format {
    /// Every format, in the order `--help` lists them.
    pub const ALL: [Format; 10] = [
        Format::Strata,
        Format::OracleGeneral,
        Format::Lcs,
        Format::Vscsi,
        Format::TwitterCsv,
        Format::CloudPhysicsCsv,
        Format::Msr,
        Format::Text,
        Format::StrataCsv,
        Format::Csv,
    ];

    /// The name used on the command line (`--format NAME`).
    pub fn name(self) -> &'static str {
        match self {
            Format::Strata => "strata",
            Format::OracleGeneral => "oracleGeneral",
            Format::Lcs => "lcs",
            Format::Vscsi => "vscsi",
            Format::TwitterCsv => "twitter-csv",
            Format::CloudPhysicsCsv => "cloudphysics-csv",
            Format::Msr => "msr",
            Format::Text => "txt",
            Format::StrataCsv => "strata-csv",
            Format::Csv => "csv",
        }
    }

    /// A one-line description for `--help` and error messages.
    pub fn description(self) -> &'static str {
        match self {
            Format::Strata => "Strata's compact binary trace (.strace)",
            Format::OracleGeneral => "libCacheSim oracleGeneral binary, 24-byte records",
            Format::Lcs => "libCacheSim LCS binary (8 KiB header, versions 1-8)",
            Format::Vscsi => "CloudPhysics vscsi binary (v1 32-byte / v2 48-byte records)",
            Format::TwitterCsv => {
                "libCacheSim CSV with '# time, object, size, next_access_vtime' header"
            }
            Format::CloudPhysicsCsv => "CloudPhysics CSV with 'version,time,op,size,lbn' header",
            Format::Msr => "MSR Cambridge CSV (filetime,host,disk,Read/Write,offset,size,latency)",
            Format::Text => "one object id per line (size 1)",
            Format::StrataCsv => "CSV whose header names columns time,op,object,size,workload,...",
            Format::Csv => "any delimited text, read through --columns",
        }
    }

    /// Whether the format is a binary one (fixed records or Strata blocks).
    pub fn is_binary(self) -> bool {
        matches!(
            self,
            Format::Strata | Format::OracleGeneral | Format::Lcs | Format::Vscsi
        )
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The error of parsing an unknown format name.
#[derive(Debug, thiserror::Error)]
#[error("unknown trace format {0:?} (known: strata, oracleGeneral, lcs, vscsi, twitter-csv, cloudphysics-csv, msr, txt, strata-csv, csv)")]
pub struct UnknownFormat(pub String);

impl FromStr for Format {
    type Err = UnknownFormat;

    fn from_str(s: &str) -> Result<Format, UnknownFormat> {
        let k: String = s
            .trim()
            .chars()
            .filter(|c| !matches!(c, '-' | '_' | ' '))
            .collect::<String>()
            .to_ascii_lowercase();
        Ok(match k.as_str() {
            "strata" | "strace" | "stratabin" => Format::Strata,
            "oraclegeneral" | "oracle" | "oraclegeneralbin" => Format::OracleGeneral,
            "lcs" => Format::Lcs,
            "vscsi" => Format::Vscsi,
            "twittercsv" | "twitter" | "libcachesimcsv" => Format::TwitterCsv,
            "cloudphysicscsv" | "cpcsv" | "cloudphysics" => Format::CloudPhysicsCsv,
            "msr" | "msrcsv" | "msrcambridge" => Format::Msr,
            "txt" | "text" | "plaintxt" => Format::Text,
            "stratacsv" => Format::StrataCsv,
            "csv" => Format::Csv,
            _ => return Err(UnknownFormat(s.to_string())),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for f in Format::ALL {
            assert_eq!(f.name().parse::<Format>().unwrap(), f);
        }
        assert_eq!(
            "oracle_general".parse::<Format>().unwrap(),
            Format::OracleGeneral
        );
        assert!("parquet".parse::<Format>().is_err());
    }
}
