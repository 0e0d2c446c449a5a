//! `resound experiment`: placeholder, being written.

use clap::Args;

/// Options of `resound experiment`.
#[derive(Debug, Clone, Args)]
pub struct ExperimentArgs {}

/// Runs the experiment.
pub fn run(_a: ExperimentArgs) -> Result<(), String> {
    Err("not written yet".into())
}
