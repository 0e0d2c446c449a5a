//! `resound legacy`: legacy multimedia applications, unmodified: trace a
//! process's blocking calls, find its period, analyse reservation periods.
//! A small dispatcher over one file per subcommand; runs on the command's
//! main thread.

mod analyze;
mod detect;
mod experiment;
mod plot;
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
    /// The paper's experiments beside resound's results: detection,
    /// tracer-overhead, supply-bound.
    Experiment(experiment::ExperimentArgs),
}

/// Run one `legacy` subcommand.
pub fn run(cmd: LegacyCmd) -> Result<(), String> {
    match cmd {
        LegacyCmd::Trace(a) => trace::run(a),
        LegacyCmd::Detect(a) => detect::run(a),
        LegacyCmd::Analyze(a) => analyze::run(a),
        LegacyCmd::Experiment(a) => experiment::run(a),
    }
}
