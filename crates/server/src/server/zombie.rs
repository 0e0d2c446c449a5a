//! Late clients evicted from the cycle (JACK's zombie state).
//!
//! A client that ran short itself (it was woken with its inputs ready and
//! did not finish) cycle after cycle, for longer than the client timeout
//! (`-t`, never less than two periods) or for `--evict-after` cycles, is
//! evicted: the server deactivates it, so its downstream runs every cycle
//! on silence and the driver waits for it no more; it is told through its
//! shutdown callback with the zombie status; its process and socket are
//! left alone until it closes. It does not come back by itself: it may
//! activate again. A client late only because its upstream was (still
//! waiting for its inputs) is never counted.
//!
//! [`LateStreaks`] is the pure bookkeeping (unit-tested); [`Server::evict`]
//! acts on its verdict.
//!
//! Threads: the housekeeping thread (not real-time).

use super::{Server, State};
use crate::config::ServerArgs;
use resound_engine::Command;
use resound_graph::ClientState;
use resound_protocol::wire::{Notification, ServerMsg};
use tracing::warn;

/// When a run of late cycles turns into an eviction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct EvictRule {
    /// Evict at all.
    pub enabled: bool,
    /// The client timeout (ns); the streak's length in time is its cycles
    /// times the period.
    pub timeout_ns: u64,
    /// Evict after this many late cycles in a row, if that comes first.
    pub max_cycles: Option<u64>,
}

impl EvictRule {
    /// The rule the server options ask for.
    pub fn from_args(args: &ServerArgs) -> EvictRule {
        EvictRule {
            enabled: !args.no_evict,
            timeout_ns: u64::from(args.timeout_ms) * 1_000_000,
            max_cycles: args.evict_after.map(u64::from),
        }
    }

    /// Whether a streak of `cycles` late cycles of `period_ns` each is
    /// long enough to evict.
    fn reached(&self, cycles: u64, period_ns: u64) -> bool {
        let timeout = self.timeout_ns.max(2 * period_ns);
        self.enabled
            && (cycles.saturating_mul(period_ns) >= timeout
                || self.max_cycles.is_some_and(|m| cycles >= m))
    }
}

/// One slot's run of consecutive cycles in which it ran short itself.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Streak {
    /// Last late cycle of the run.
    last: u64,
    /// Cycles in the run.
    cycles: u64,
}

/// Per slot: the current run of late cycles.
#[derive(Debug)]
pub(super) struct LateStreaks {
    rule: EvictRule,
    by_slot: Vec<Streak>,
}

impl LateStreaks {
    /// Empty streaks for `slots` slots.
    pub fn new(rule: EvictRule, slots: usize) -> LateStreaks {
        LateStreaks {
            rule,
            by_slot: vec![Streak::default(); slots],
        }
    }

    /// `slot` ran short itself in `cycle` (period `period_ns`). Returns
    /// the length of its run (cycles) when the run has just become long
    /// enough to evict it; the run then starts over.
    pub fn on_late(&mut self, slot: u32, cycle: u64, period_ns: u64) -> Option<u64> {
        let s = self.by_slot.get_mut(slot as usize)?;
        if s.cycles > 0 && cycle == s.last + 1 {
            s.cycles += 1;
        } else if cycle != s.last || s.cycles == 0 {
            s.cycles = 1;
        }
        s.last = cycle;
        if self.rule.reached(s.cycles, period_ns) {
            let n = s.cycles;
            *s = Streak::default();
            return Some(n);
        }
        None
    }
}

impl Server {
    /// Evicts the client in `slot` after `cycles` late cycles in a row of
    /// `period_ns` each (see the module docs). Does nothing if it already
    /// left or is not active.
    pub(super) fn evict(&self, slot: u32, cycles: u64, period_ns: u64) {
        let mut st = self.lock();
        let name = match st.graph.client(slot) {
            Some(c) if c.state == ClientState::Active => c.name.clone(),
            _ => return,
        };
        if st.graph.set_active(slot, false).is_err() {
            return;
        }
        self.publish(&mut st);
        self.command(Command::Detach { slot });
        self.leave_timebase(slot);
        if let Some(z) = st.zombies.get_mut(slot as usize) {
            *z = true;
        }
        let ms = (cycles * period_ns) as f64 / 1e6;
        warn!(
            "client {name:?} evicted from the cycle (zombie): it ran late in {cycles} cycles in a row ({ms:.0} ms); its downstream runs on silence, it may activate again"
        );
        let reason = format!(
            "evicted from the audio cycle: the process callback ran late in {cycles} cycles in a row ({ms:.0} ms, client timeout {} ms)",
            self.cfg.server.timeout_ms
        );
        Self::notify_slot(&mut st, slot, Notification::Evicted { reason });
        Self::announce_ports(&mut st, slot, false);
        Self::graph_order(&mut st);
    }

    /// Queues `n` to the client in `slot` only (never blocks; a full queue
    /// is left to the next broadcast, which drops the client).
    fn notify_slot(st: &mut State, slot: u32, n: Notification) {
        if let Some(s) = st.sessions.values().find(|s| s.slot == Some(slot)) {
            let _ = s.tx.try_send(ServerMsg::Notify(n));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PERIOD: u64 = 2_666_666;

    fn rule(timeout_ms: u64, max_cycles: Option<u64>) -> EvictRule {
        EvictRule {
            enabled: true,
            timeout_ns: timeout_ms * 1_000_000,
            max_cycles,
        }
    }

    /// Feeds late cycles `cycles` for `slot`; returns the evictions seen.
    fn feed(ls: &mut LateStreaks, slot: u32, cycles: impl Iterator<Item = u64>) -> Vec<(u64, u64)> {
        cycles
            .filter_map(|c| ls.on_late(slot, c, PERIOD).map(|n| (c, n)))
            .collect()
    }

    #[test]
    fn a_client_late_cycle_after_cycle_is_evicted_at_the_timeout() {
        let mut ls = LateStreaks::new(rule(100, None), 4);
        // 100 ms / 2.67 ms = 37.5: the 38th late cycle in a row evicts.
        assert_eq!(feed(&mut ls, 1, 10..60), vec![(47, 38)]);
    }

    #[test]
    fn a_gap_starts_the_run_over() {
        let mut ls = LateStreaks::new(rule(100, None), 4);
        let late = (10..40).chain(41..90);
        assert_eq!(feed(&mut ls, 1, late), vec![(78, 38)]);
    }

    #[test]
    fn slots_are_counted_apart_and_a_repeated_cycle_counts_once() {
        let mut ls = LateStreaks::new(rule(1000, Some(3)), 4);
        assert_eq!(ls.on_late(1, 5, PERIOD), None);
        assert_eq!(ls.on_late(2, 5, PERIOD), None);
        assert_eq!(ls.on_late(1, 5, PERIOD), None);
        assert_eq!(ls.on_late(1, 6, PERIOD), None);
        assert_eq!(ls.on_late(1, 7, PERIOD), Some(3));
        assert_eq!(ls.on_late(2, 6, PERIOD), None);
    }

    #[test]
    fn the_timeout_is_never_below_two_periods() {
        let mut ls = LateStreaks::new(rule(1, None), 4);
        assert_eq!(ls.on_late(1, 1, PERIOD), None);
        assert_eq!(ls.on_late(1, 2, PERIOD), Some(2));
    }

    #[test]
    fn eviction_can_be_turned_off() {
        let mut r = rule(1, Some(1));
        r.enabled = false;
        let mut ls = LateStreaks::new(r, 4);
        assert!(feed(&mut ls, 1, 0..10_000).is_empty());
    }

    #[test]
    fn out_of_range_slots_are_ignored() {
        let mut ls = LateStreaks::new(rule(1, Some(1)), 2);
        assert_eq!(ls.on_late(7, 1, PERIOD), None);
    }
}
