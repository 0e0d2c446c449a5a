//! # resound-cli
//!
//! The user-facing `resound` command (the binary in `crates/resound` is a
//! thin `main` over [`cli::main`]): it talks to a running `resoundd` over a
//! control session ([`cli`]: status, ports, connections, buffer size,
//! internal clients, reservations, running JACK programs), reads its timing
//! profile ([`profile`]), serves the live monitor page ([`monitor`]) and runs
//! the demo graph of the README's main command ([`demo`]), the long run
//! under churn ([`soak`]), the live hostile client ([`hostile`]) and lists
//! the sound devices ALSA knows ([`devices`]). Everything here
//! runs on the command's main thread (the monitor adds HTTP worker threads);
//! nothing here is on the real-time path.

pub mod cli;
pub mod demo;
pub mod legacy;

pub mod devices;
pub mod hostile;
pub mod monitor;
pub mod profile;
pub mod soak;
