//! `resound legacy`: legacy multimedia applications, unmodified: trace a
//! process's blocking calls, find its period, analyse reservation periods,
//! and keep its threads under adaptive SCHED_DEADLINE reservations. A small
//! dispatcher over one file per subcommand; runs on the command's main
//! thread.

mod analyze;
mod detect;
mod experiment;
mod plot;
pub mod run;
mod server_ledger;
mod trace;

use clap::Subcommand;

/// The `legacy` subcommands.
#[derive(Debug, Subcommand)]
pub enum LegacyCmd {
    /// Record a process's blocking-call events (every thread) with timestamps.
    Trace(trace::TraceArgs),
    /// Find the period of a process (or of a recorded trace) from its events.
    Detect(detect::DetectArgs),
    /// Supply-bound function of a CBS and the minimum budget for each server period.
    Analyze(analyze::AnalyzeArgs),
    /// Start CMD and keep its threads under adaptive SCHED_DEADLINE reservations until it exits.
    Run(run::RunArgs),
    /// Put a running process's threads under adaptive SCHED_DEADLINE reservations until it exits or Ctrl-C.
    Attach(run::AttachArgs),
    /// The paper's experiments beside resound's results: detection,
    /// tracer-overhead, supply-bound, table2, goal, two-tasks.
    Experiment(experiment::ExperimentArgs),
}

/// Runs one `legacy` subcommand (`server`: the audio server whose admission
/// ledger reservations go through, from `resound -s NAME`).
pub fn run(server: Option<&str>, cmd: LegacyCmd) -> Result<(), String> {
    match cmd {
        LegacyCmd::Trace(a) => trace::run(a),
        LegacyCmd::Detect(a) => detect::run(a),
        LegacyCmd::Analyze(a) => analyze::run(a),
        LegacyCmd::Run(a) => run::run(server, a),
        LegacyCmd::Attach(a) => run::attach(server, a),
        LegacyCmd::Experiment(a) => experiment::run(a),
    }
}
