//! The scenario file of `resound experiment`: what a researcher writes to
//! describe an experiment (server settings, the configurations compared, the
//! load clients and competing rt-app tasks and when they join, timeline
//! events, the measures, the duration) and the published values it is
//! compared with. [`model`] holds the types (the file's schema, documented
//! field by field), [`metric`] the names of what a run measures, [`mod@parse`]
//! reads the TOML text with line-numbered errors, [`mod@validate`] checks what
//! the schema cannot (ranges, names, times inside the run), [`catalog`]
//! holds the reproductions shipped with resound. The format is described in
//! `docs/scenarios.md`. Parsed on the command's main thread.

pub mod catalog;
pub mod metric;
pub mod model;
pub mod parse;
mod spans;
pub mod validate;

pub use metric::Metric;
pub use model::*;
pub use parse::{parse, ScenarioError};
pub use validate::{check, validate};
