//! resound scheduling: policies, reservations, the feedback budget
//! controller and its predictor, admission bookkeeping.
//!
//! What it owns, and where each part runs:
//!
//! | module | owns | threads |
//! |---|---|---|
//! | [`policy`] | [`Policy`] (SCHED_OTHER / FIFO / DEADLINE), the `sched_attr` layout, [`apply`] / [`current`] / [`drop_own_reservation`] by kernel TID, the permission probes | any thread; `apply`, `current`, `drop_own_reservation` are real-time safe on success (one syscall); the probes spawn a helper thread once (start-up only) |
//! | [`predictor`] | [`Predictor`]: moving-window percentile of per-cycle CPU time (Bagnoli's thesis on low-latency audio with reservations, §3.4.4) | driver thread; allocates only in `new` |
//! | [`controller`] | [`Controller`]: per reserved thread, turns the CPU-time trace into SCHED_DEADLINE budgets (-F/-I/-D, min/max clamps, flush + bump on new clients and xruns, change threshold) | driver thread, at cycle begin; allocates only in `new`, makes no syscalls |
//! | [`multiplier`] | [`multiplier_for`]: the reservation-period multiplier in use, with the thesis's automatic rule for short periods | any thread, pure |
//! | [`ledger`] | [`Ledger`]: our own record of admitted bandwidth per thread, and the system capacity | built on the control thread; `reserve`/`release`/`get` on the driver thread, without allocation |
//! | [`thread_run`] | [`thread_run::read_thread_run`]: whether a thread is runnable and its CPU time so far, from procfs | the driver thread, for a client thread that stopped finishing its cycles; real-time safe |
//! | [`cpu_latency`] | a held request on idle CPUs' wake-up latency (`/dev/cpu_dma_latency`) | start-up only (`resoundd --cpu-dma-latency`, the bench) |
//!
//! Critical-path deadlines (`--deadlines critical-path`) are computed over
//! the compiled graph, in `resound_graph::CriticalPath`; the controller
//! applies them (`Controller::set_deadline`).
//!
//! The controller decides, the caller applies: a typical cycle begin on the
//! driver thread is
//!
//! ```no_run
//! use resound_sched::{apply, Controller, ControllerConfig, Ledger};
//! let mut ctl = Controller::new(ControllerConfig::default());
//! let mut ledger = Ledger::from_system();
//! let tid = 1234; // the reserved thread
//! let used_ns = 180_000; // its CPU time in the last cycle
//! if let Some(r) = ctl.cycle_begin(used_ns) {
//!     if ledger.reserve(tid, r.bandwidth()).is_ok() {
//!         let _ = apply(tid, &r.policy(false));
//!     }
//! }
//! ```
//!
//! Kernel facts this crate is written around (see [`policy`] for the list;
//! measured by `cargo run -p resound-sched --release --example kernel_pitfalls`):
//! admission capacity is 0.95 per CPU minus the fair server (1.80 on 2
//! CPUs); a deadline thread cannot create threads without
//! `SCHED_FLAG_RESET_ON_FORK` (always set by [`apply`]); a thread must leave
//! its reservation itself, while running ([`drop_own_reservation`]), and its
//! bandwidth comes back at its 0-lag time (up to a period later); overruns
//! are enforced at tick granularity; a throttled thread keeps its old
//! deadline across a budget change.

pub mod controller;
pub mod cpu_latency;
pub mod ledger;
pub mod multiplier;
pub mod owner;
pub mod policy;
pub mod predictor;
pub mod thread_run;

pub use controller::{Controller, ControllerConfig, Reservation};
pub use ledger::{AdmissionError, Ledger};
pub use multiplier::multiplier_for;
pub use policy::{
    apply, current, deadline_permitted, describe_thread, drop_own_reservation, fifo_permitted,
    Policy, SchedError, SchedErrorKind,
};
pub use predictor::prefetch_bytes;
pub use predictor::Predictor;
