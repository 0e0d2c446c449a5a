//! `resound experiment`: runs the papers' experiments (and any other scenario
//! file) against resound and, where the policy exists there, Debian's jackd2,
//! with competing rt-app tasks, and writes a report with the published values
//! beside the measured ones.
//!
//! Modules: [`scenario`] (the scenario file: its model, parsing with
//! line-numbered errors, validation, the shipped catalogue of
//! reproductions, the metric vocabulary), [`run`] (a scenario played on
//! real servers, clients and rt-app, every cycle recorded), [`results`]
//! (what a run measured: per-run metrics and per-cycle series), [`report`]
//! (the files, figures and `report.html` of a run, and redrawing them from
//! those files) and [`command`] (the command line).
//! Everything here runs on the command's main thread plus the threads each
//! module names.

pub mod command;
pub mod report;
pub mod results;
pub mod run;
pub mod scenario;

pub use command::{main, ExperimentCmd};
