//! One module per trace format family.

pub(crate) mod csv;
pub(crate) mod fixed;
pub(crate) mod source;
pub(crate) mod strata;

use crate::columns::ColumnMap;
use crate::format::Format;
use crate::input::Input;
use crate::{Op, TraceError};
use source::Source;

/// The reader for `format` over `input`.
pub(crate) fn make(
    format: Format,
    input: Input,
    columns: Option<&ColumnMap>,
) -> Result<Box<dyn Source>, TraceError> {
    Ok(match format {
        Format::OracleGeneral => Box::new(fixed::FixedReader::oracle_general(input)),
        Format::Lcs => Box::new(fixed::FixedReader::lcs(input)?),
        Format::Vscsi => Box::new(fixed::FixedReader::vscsi(input)?),
        Format::Strata => Box::new(strata::StrataReader::new(input)?),
        Format::TwitterCsv
        | Format::CloudPhysicsCsv
        | Format::Msr
        | Format::Text
        | Format::StrataCsv
        | Format::Csv => Box::new(csv::CsvReader::new(format, input, columns)?),
    })
}

/// The op of a SCSI command code: READ(6/10/12/16) and WRITE(6/10/12/16).
pub(crate) fn scsi_op(code: u32) -> Option<Op> {
    match code {
        0x08 | 0x28 | 0xa8 | 0x88 => Some(Op::Get),
        0x0a | 0x2a | 0xaa | 0x8a => Some(Op::Put),
        _ => None,
    }
}

/// The op of a libCacheSim op code (its `req_op_e`): nop, get, gets, incr,
/// decr, read are gets; set, add, cas, replace, append, prepend, write,
/// update are puts; delete is a delete.
pub(crate) fn libcachesim_op(code: u32) -> Option<Op> {
    match code {
        0 | 1 | 2 | 10 | 11 | 12 => Some(Op::Get),
        3..=8 | 13 | 14 => Some(Op::Put),
        9 => Some(Op::Delete),
        _ => None,
    }
}
