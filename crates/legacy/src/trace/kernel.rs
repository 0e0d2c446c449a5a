//! The kernel tracer (being written).

use super::{Options, Trace, TraceError};

/// Trace with perf-event tracepoints.
pub fn trace(_opts: &Options) -> Result<Trace, TraceError> {
    Err(TraceError::Unavailable("not built yet".into()))
}
