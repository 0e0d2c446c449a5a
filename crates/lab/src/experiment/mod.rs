//! `resound experiment`: runs the papers' experiments (and any other scenario
//! file) against resound and, where the policy exists there, Debian's jackd2,
//! and writes a report with the published values beside the measured ones.
//!
//! Modules: [`scenario`] (the scenario file: its model, parsing with
//! line-numbered errors, validation, the shipped catalogue of
//! reproductions, the metric vocabulary), [`results`] (what a run measured:
//! per-run metrics and per-cycle series), [`report`] (the files, figures
//! and `report.html` written from a result, and their redraw), [`policies`] (the older
//! one-scenario policy comparison, kept until the scenario runner replaces it).
//! Everything here runs on the command's main thread plus the helper threads
//! each module names.

pub mod policies;
pub mod report;
pub mod results;
pub mod scenario;

pub use policies::{run, ExperimentArgs};
