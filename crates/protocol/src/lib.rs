//! # resound-protocol
//!
//! The socket protocol between the server and its clients:
//!
//! * [`wire`]: the messages on each client's Unix socket, their framing, and
//!   memfd passing (SCM_RIGHTS).
//! * [`hello`]: the server's check of a client's first frame ([`hello::check_hello`]).
//! * [`paths`]: where the per-user socket directory lives.
//!
//! The shared-memory ABI is the `resound-shm` crate. Everything here runs
//! on ordinary (non-real-time) threads.

pub mod hello;
pub mod paths;
pub mod status;
pub mod wire;
