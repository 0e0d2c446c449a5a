//! `resound-tool rtapp`: placeholder, being written.

use clap::Args;

/// Options of `resound-tool rtapp`.
#[derive(Debug, Clone, Args)]
pub struct RtappArgs {}

/// Runs the periodic task.
pub fn run(_a: RtappArgs) -> Result<(), String> {
    Err("not written yet".into())
}
