//! `resound legacy ...`: legacy (unmodified) multimedia programs. This
//! branch has `run` and `attach` ([`run`]: adaptive reservations); trace,
//! detect and analyze come with the detector's branch.
//!
//! Threads: the command's main thread.

pub mod experiment;
pub mod run;
mod server_ledger;

/// The `resound legacy` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum LegacyCmd {
    /// Start CMD and keep its threads under adaptive SCHED_DEADLINE reservations until it exits.
    Run(run::RunArgs),
    /// Put a running process's threads under adaptive SCHED_DEADLINE reservations until it exits or Ctrl-C.
    Attach(run::AttachArgs),
    /// Adaptive-reservation experiments on a 25 fps player, beside the paper's values: table2 (LFS with T = 20..100 ms), goal (no reservation / lfs / percentile under an interfering real-time load), two-tasks (Fig. 3-4).
    ReserveExperiment(experiment::ExperimentArgs),
}

/// Runs a `resound legacy` subcommand.
pub fn main(server: Option<&str>, cmd: LegacyCmd) -> Result<(), String> {
    match cmd {
        LegacyCmd::Run(a) => run::run(server, a),
        LegacyCmd::Attach(a) => run::attach(server, a),
        LegacyCmd::ReserveExperiment(a) => experiment::run(a),
    }
}
