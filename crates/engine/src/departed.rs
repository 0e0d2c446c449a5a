//! Threads that left the graph while the kernel still holds their reservation.
//!
//! A thread leaves SCHED_DEADLINE only by itself, while it runs (resetting a
//! sleeping deadline thread from another thread can leak the kernel's
//! admission bandwidth; see [`crate::reserve`]). A client thread that is
//! stopped (SIGSTOP) or hung inside its callback when it leaves the graph
//! (evicted as a zombie, or its client closed from another thread) keeps its
//! reservation in the kernel until it runs again and drops it, or dies, and
//! the kernel counts that bandwidth in every admission test meanwhile. So the
//! ledger keeps such a thread's entry, and says what the kernel will admit,
//! instead of letting the bandwidth go at once and then seeing the kernel
//! refuse (`EBUSY`) raises it had admitted (measured in a 60-minute soak
//! before this: 400 kernel refusals a minute while stopped, evicted clients
//! held up to 0.9 CPU each).
//!
//! The driver thread asks the kernel (`sched_getattr`, no allocation) about
//! each held thread every [`CHECK_CYCLES`] cycles, and lets the entry go once
//! the thread is gone (`ESRCH`) or no longer has the reservation it was given
//! (it dropped it, or its thread id now belongs to another thread).
//!
//! Threads: owned by the driver thread ([`crate::reserve::Reservations`]);
//! its list is allocated once and never grows.

use resound_sched::Policy;

/// How often the held threads are checked (cycles).
pub const CHECK_CYCLES: u64 = 8;

/// Reads the kernel's policy of thread `tid` without allocating; Err carries
/// the errno (`ESRCH`: no such thread). A fake in tests.
pub type Prober = fn(tid: i32) -> Result<Policy, i32>;

/// The kernel's policy of `tid` (`sched_getattr`). The default [`Prober`].
/// Real-time safe.
pub fn probe_rt(tid: i32) -> Result<Policy, i32> {
    resound_sched::policy::get_attr_rt(tid).map(|a| Policy::from_attr(&a))
}

/// Whether the kernel still has thread `tid` under the reservation
/// `runtime_ns` / `period_ns` it was last given. Real-time safe.
pub fn still_holds(probe: Prober, tid: i32, runtime_ns: u64, period_ns: u64) -> bool {
    matches!(
        probe(tid),
        Ok(Policy::Deadline { runtime_ns: r, period_ns: p, .. }) if r == runtime_ns && p == period_ns
    )
}

/// One thread held: its id, the reservation it was last given, and the
/// cycle it left the graph at.
#[derive(Debug, Clone, Copy)]
struct Held {
    tid: i32,
    runtime_ns: u64,
    period_ns: u64,
    since_cycle: u64,
}

/// See the [module docs](self).
#[derive(Debug)]
pub struct Departed {
    held: Vec<Held>,
}

impl Departed {
    /// Room for `capacity` threads (allocates once).
    pub fn new(capacity: usize) -> Self {
        Departed {
            held: Vec::with_capacity(capacity),
        }
    }

    /// Holds `tid`, which still has `runtime_ns` / `period_ns` in the kernel,
    /// from cycle `cycle` on. False (nothing held) when the list is full: the
    /// caller then lets the bandwidth go at once, as before this list
    /// existed. Real-time safe.
    pub fn hold(&mut self, tid: i32, runtime_ns: u64, period_ns: u64, cycle: u64) -> bool {
        self.forget(tid);
        if self.held.len() == self.held.capacity() {
            return false;
        }
        self.held.push(Held {
            tid,
            runtime_ns,
            period_ns,
            since_cycle: cycle,
        });
        true
    }

    /// Stops holding `tid` (it joined the graph again); true if it was held.
    /// Real-time safe.
    pub fn forget(&mut self, tid: i32) -> bool {
        match self.held.iter().position(|h| h.tid == tid) {
            Some(i) => {
                self.held.swap_remove(i);
                true
            }
            None => false,
        }
    }

    /// Asks the kernel about every held thread; each that no longer holds
    /// its reservation is forgotten and passed to `let_go` with the cycle it
    /// left the graph at. Real-time safe.
    pub fn check(&mut self, probe: Prober, mut let_go: impl FnMut(i32, u64)) {
        let mut i = 0;
        while i < self.held.len() {
            let h = self.held[i];
            if still_holds(probe, h.tid, h.runtime_ns, h.period_ns) {
                i += 1;
            } else {
                self.held.swap_remove(i);
                let_go(h.tid, h.since_cycle);
            }
        }
    }

    /// Threads held.
    pub fn tids(&self) -> impl Iterator<Item = i32> + '_ {
        self.held.iter().map(|h| h.tid)
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stopped(tid: i32) -> Result<Policy, i32> {
        match tid {
            1 => Ok(Policy::Deadline {
                runtime_ns: 100,
                deadline_ns: 1000,
                period_ns: 1000,
                reclaim: true,
            }),
            2 => Ok(Policy::Other),
            _ => Err(libc::ESRCH),
        }
    }

    #[test]
    fn only_a_thread_still_under_its_own_reservation_is_kept() {
        let mut d = Departed::new(4);
        assert!(d.hold(1, 100, 1000, 5));
        assert!(d.hold(2, 100, 1000, 6));
        assert!(d.hold(3, 100, 1000, 7));
        // Same tid, other parameters: another thread now has that id.
        assert!(!still_holds(stopped, 1, 200, 1000));
        let mut gone = vec![];
        d.check(stopped, |tid, since| gone.push((tid, since)));
        gone.sort();
        assert_eq!(gone, vec![(2, 6), (3, 7)]);
        assert_eq!(d.tids().collect::<Vec<_>>(), vec![1]);
    }

    #[test]
    fn a_full_list_refuses_and_a_returning_thread_is_forgotten() {
        let mut d = Departed::new(1);
        assert!(d.hold(1, 100, 1000, 0));
        assert!(!d.hold(2, 100, 1000, 0), "full");
        assert!(d.forget(1));
        assert!(!d.forget(1));
        assert!(d.is_empty());
    }
}
