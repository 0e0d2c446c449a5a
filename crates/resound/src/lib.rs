//! # resound (binaries)
//!
//! The three programs a user runs, as thin `main`s over this library:
//! `resoundd` ([`resound_server::main`]), `resound` ([`cli`]) and
//! `resound-tool` ([`tools`]). The end-to-end tests in `tests/` drive these
//! binaries as real processes.

pub mod cli;
pub mod demo;
pub mod experiment;
pub mod monitor;
pub mod profile;
pub mod rtapp;
pub mod tools;
