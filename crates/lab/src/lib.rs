//! # resound-lab
//!
//! The lab tools around the server (the binary `resound-tool` in
//! `crates/resound` is a thin `main` over [`tools::main`]):
//!
//! * [`tools`]: the test and demo clients (sine, counter, pass, gain,
//!   lowpass, meter, check, load, misbehave), each a client process whose
//!   process callback runs on its real-time thread;
//! * [`rtapp`]: competing real-time load through Debian's `rt-app`: its
//!   JSON, the running process, its per-job logs (slack, response time);
//! * [`periodic`]: a stand-in for an unmodified media player with a known
//!   frame rate (wait for the frame, work, show), for the legacy period
//!   detector and reservations;
//! * [`experiment`]: `resound experiment`, the papers' experiments as
//!   scenario files played on resound and Debian's jackd2 with load clients
//!   and rt-app, every cycle recorded, reported beside the published values;
//! * [`harness`]: the one child-process harness (a server under a unique
//!   name in its own runtime directory, tool clients, readiness, JSON
//!   results, stop guards) that the end-to-end tests, the activation bench,
//!   the experiment and the demo share;
//! * [`vsjackd`]: `resound bench jackd`, the same chain of C JACK clients on
//!   Debian's jackd2 and on resound, alternated, with the ratios;
//! * [`vsfifo`]: `resound bench reservations`, rt-app's periodic tasks under
//!   SCHED_FIFO and under reservations, alternated: what the machine itself
//!   costs a reservation.

pub mod experiment;
pub mod harness;
pub mod periodic;
pub mod rtapp;
pub mod tools;
pub mod vsfifo;
pub mod vsjackd;
