//! Strata's own binary trace format (see docs/trace-format.md).

use crate::input::Input;
use crate::reader::{Ctx, Source};
use crate::{Request, TraceError};

/// The file magic.
pub(crate) const MAGIC: [u8; 8] = *b"STRTRACE";

pub(crate) struct StrataReader {}

impl StrataReader {
    pub fn new(input: Input) -> Result<StrataReader, TraceError> {
        Err(Ctx::new(&input.path).format("Strata binary traces are not readable yet"))
    }
}

impl Source for StrataReader {
    fn fill(&mut self, _out: &mut Vec<Request>, _max: usize) -> Result<usize, TraceError> {
        Ok(0)
    }
}
