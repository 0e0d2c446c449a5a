//! The sample-exact chain the long runs watch: counter → pass → pass →
//! check, each its own `resound-tool` process, the reference going straight
//! from the counter to the check. The check compares every sample with the
//! reference and prints a JSON report every second (its last one `final`):
//! a block that came back wrong is `bad`, a reference block that skipped a
//! cycle is a gap (`ref_gaps`). `resound soak` and `resound hostile`'s test
//! run it around whatever they throw at the server.
//!
//! Runs on the caller's thread.

use super::{Child, Server};
use resound_client::prelude::*;
use resound_client::ControlSession;
use serde_json::Value;
use std::time::Duration;

/// The chain: name and `resound-tool` arguments, upstream first.
pub const CHAIN: [(&str, &[&str]); 4] = [
    ("gen", &["counter"]),
    ("p1", &["pass"]),
    ("p2", &["pass"]),
    ("check", &["--report-ms", "1000", "check"]),
];

/// Its wiring: the reference goes straight from the counter to the check.
pub const CHAIN_WIRING: [(&str, &str); 4] = [
    ("gen:out", "p1:in"),
    ("p1:out", "p2:in"),
    ("p2:out", "check:in"),
    ("gen:out", "check:ref"),
];

/// The chain's outputs (what another client may read without disturbing it).
pub const CHAIN_OUTPUTS: [&str; 3] = ["gen:out", "p1:out", "p2:out"];

/// Starts the chain's processes on `server` (each waited for until ready)
/// and wires them through `ctl`; returns them upstream first, the check last.
pub fn start_chain(server: &Server, ctl: &ControlSession) -> Result<Vec<Child>, String> {
    let mut procs = Vec::new();
    for (name, args) in CHAIN {
        procs.push(server.tool(name, args, &mut || Ok(()))?.0);
    }
    for (s, d) in CHAIN_WIRING {
        ctl.connect_ports(s, d)
            .map_err(|e| format!("connect {s} -> {d}: {e}"))?;
    }
    Ok(procs)
}

/// The check's last report so far (None before its first).
pub fn check_report(chain: &[Child]) -> Option<Value> {
    chain.last().and_then(|c| c.lines().last())
}

/// The chain's lost cycles so far from the check's last report: (bad or
/// missing blocks, of which unexplained by an xrun, xruns it was told of).
pub fn lost_cycles(chain: &[Child]) -> (u64, u64, u64) {
    let Some(r) = check_report(chain) else {
        return (0, 0, 0);
    };
    let n = |k: &str| r[k].as_u64().unwrap_or(0);
    (
        n("bad") + n("ref_gaps"),
        n("bad_unexplained") + n("gaps_unexplained"),
        n("xruns_seen"),
    )
}

/// Stops the chain (SIGTERM, the check prints its final report) and returns
/// the check's final figures as [`lost_cycles`] does.
pub fn stop_chain(chain: &mut [Child]) -> (u64, u64, u64) {
    for c in chain.iter_mut() {
        let _ = c.stop(Duration::from_secs(10));
    }
    if let Some(c) = chain.last() {
        c.lines().wait_closed(Duration::from_secs(2));
    }
    lost_cycles(chain)
}

/// One bad block or reference gap the check saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LostBlock {
    /// The check's cycle.
    pub cycle: u64,
    /// When that cycle began (CLOCK_MONOTONIC ns).
    pub start_ns: u64,
    /// Its period (ns).
    pub period_ns: u64,
    /// A reference gap (the counter, or the check itself, missed a
    /// cycle), not a wrong block.
    pub gap: bool,
    /// For a gap: when the last cycle the check had seen began
    /// (CLOCK_MONOTONIC ns; 0 if unknown).
    pub last_seen_ns: u64,
}

impl LostBlock {
    /// The time in which a stall could have cost this block: from three
    /// periods before its cycle began (as the check matches xruns: a
    /// block is lost in an upstream node's late cycle, and seen missing up
    /// to three cycles later), or for a gap from two periods before the
    /// last cycle the check had seen if that is earlier (the check itself
    /// missed the cycles between), to the end of its cycle.
    pub fn window_ns(&self) -> (u64, u64) {
        let mut from = self.start_ns.saturating_sub(3 * self.period_ns);
        if self.gap && self.last_seen_ns > 0 {
            from = from.min(self.last_seen_ns.saturating_sub(2 * self.period_ns));
        }
        (from, self.start_ns + self.period_ns)
    }
}

/// The lost blocks listed in the check's final report (empty before it).
pub fn lost_blocks(chain: &[Child]) -> Vec<LostBlock> {
    let Some(report) = chain.last().and_then(|c| c.lines().last_event("final")) else {
        return Vec::new();
    };
    let Some(list) = report["lost_blocks"].as_array() else {
        return Vec::new();
    };
    list.iter()
        .filter_map(|e| {
            let n = |i: usize| e.get(i).and_then(Value::as_u64);
            Some(LostBlock {
                cycle: n(0)?,
                start_ns: n(1)?,
                period_ns: n(2)?,
                gap: n(3)? == 1,
                last_seen_ns: n(4).unwrap_or(0),
            })
        })
        .collect()
}
