//! What the driver thread shares with the control side: atomics written by
//! the driver thread, read by the control threads (and the stop flag, the
//! other way round).

use crate::external::ExternalReply;
use crate::reserve::ResStat;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};

/// What the driver thread shares with the control side.
pub struct EngineShared {
    /// Set (control side) to stop the driver thread.
    pub stop: AtomicBool,
    /// True while the driver loop runs (written by the driver thread).
    pub running: AtomicBool,
    /// Scheduling the driver thread got ("SCHED_FIFO 10", or the fallback);
    /// written once by the driver thread before its loop.
    pub sched: Mutex<String>,
    /// Events lost because the ring to the control side was full.
    pub dropped_events: AtomicU64,
    /// Per-slot reservation figures (slot 0 = driver).
    pub res: Arc<[ResStat]>,
    /// Bandwidth admitted by the ledger, millionths of a CPU.
    pub ledger_ppm: AtomicU64,
    /// Of `ledger_ppm`, what threads that left the graph still hold in the
    /// kernel (see [`crate::departed`]), millionths of a CPU.
    pub departed_ppm: AtomicU64,
    /// Answers to admission requests for threads outside the graph.
    pub external: Arc<ExternalReply>,
}

impl EngineShared {
    /// Fresh state for `slots` slots (not running, nothing reserved).
    pub fn new(slots: u32) -> EngineShared {
        EngineShared {
            stop: AtomicBool::new(false),
            running: AtomicBool::new(false),
            sched: Mutex::new(String::new()),
            dropped_events: AtomicU64::new(0),
            res: (0..slots).map(|_| ResStat::default()).collect(),
            ledger_ppm: AtomicU64::new(0),
            departed_ppm: AtomicU64::new(0),
            external: Arc::new(ExternalReply::default()),
        }
    }
}
