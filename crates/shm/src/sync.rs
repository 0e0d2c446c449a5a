//! Lock-free primitives shared by the server and its clients.
//!
//! Everything here is real-time safe: plain atomics plus, for waiting and
//! waking, the `futex` syscall on a word in shared memory. Under
//! `RUSTFLAGS="--cfg loom"` the atomics are loom's, so `tests/loom.rs` can
//! model-check the two algorithms below exhaustively.
//!
//! ## The graph switch word ([`switch`])
//!
//! The graph lives in two tables, *current* and *next* ("jackdmp: Jack server for multi-processor machines", §3.3.1). One
//! `u32` says which is which:
//!
//! ```text
//!   bit 0      CUR      index of the current table (0 or 1)
//!   bit 1      PENDING  the next table holds a complete newer graph
//!   bit 2      WRITING  the (single) writer is filling the next table
//!   bits 3..31 GEN      switch generation, +1 on every switch (wraps)
//! ```
//!
//! * The writer (one non-real-time server thread) calls [`switch::begin_write`],
//!   fills table `!CUR`, then [`switch::end_write`].
//! * The driver thread calls [`switch::try_switch`] once at cycle start: if
//!   PENDING and not WRITING it flips CUR, clears PENDING and bumps GEN in one
//!   CAS. The writer never touches table `CUR`, so everything the real-time
//!   side reads during a cycle is stable for that cycle.
//! * Non-real-time readers read GEN, copy what they need from table `CUR`, and
//!   retry if GEN moved ([`switch::read_consistent`]): the writer can only
//!   write a table after a switch made it non-current, which moves GEN.
//!   This looks like a seqlock but is deliberately not [`crate::seqlock`]:
//!   the data are double-buffered, so readers never meet a busy writer and
//!   have no odd phase to wait out; GEN is bumped by the driver's switch,
//!   not by the writer; and the word's other bits (CUR, PENDING, WRITING)
//!   change without invalidating a copy. The word is in the sealed control
//!   segment, so no client can make a reader retry.
//!
//! ## The activation counter ([`activation`])
//!
//! One `u64` per graph node: high 32 bits the cycle tag, low 32 bits the
//! number of upstream nodes still to finish this cycle. The driver resets it
//! at cycle start to `(cycle, init_count)`; each finishing upstream node
//! decrements it with a CAS *that only succeeds for its own cycle tag*; the
//! one that brings it to zero triggers the node. A node that is late from an
//! earlier cycle therefore cannot disturb the current one: its decrements are
//! no-ops. Exactly one decrement per (node, cycle) returns "reached zero".

#[cfg(loom)]
pub use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The two-state graph switch (see the module docs).
pub mod switch {
    use super::{AtomicU32, Ordering};

    /// Bit: index of the current table.
    pub const CUR: u32 = 1;
    /// Bit: the next table holds a newer complete graph.
    pub const PENDING: u32 = 2;
    /// Bit: the writer is filling the next table.
    pub const WRITING: u32 = 4;
    /// Increment of the generation field.
    pub const GEN_ONE: u32 = 8;

    /// Index (0/1) of the current table in a switch word value.
    #[inline]
    pub fn cur(v: u32) -> usize {
        (v & CUR) as usize
    }

    /// Generation of a switch word value.
    #[inline]
    pub fn generation(v: u32) -> u32 {
        v >> 3
    }

    /// Writer: marks the next table as being written and returns its index.
    /// Only one writer may exist at a time (the server serialises graph changes).
    pub fn begin_write(w: &AtomicU32) -> usize {
        let mut v = w.load(Ordering::Acquire);
        loop {
            debug_assert!(v & WRITING == 0, "two writers on one graph switch word");
            match w.compare_exchange_weak(v, v | WRITING, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => {
                    // Seqlock writer: the table stores that follow must not be
                    // visible before this word change to a reader that then
                    // re-checks GEN (a release CAS only orders what precedes it).
                    // Found by the loom model (tests/loom.rs).
                    super::fence_release();
                    return 1 - cur(v);
                }
                Err(x) => v = x,
            }
        }
    }

    /// Writer: the next table is complete; the driver may switch to it.
    pub fn end_write(w: &AtomicU32) {
        let mut v = w.load(Ordering::Acquire);
        loop {
            let nv = (v & !WRITING) | PENDING;
            match w.compare_exchange_weak(v, nv, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return,
                Err(x) => v = x,
            }
        }
    }

    /// Driver, at cycle start: switches to the next table when one is pending
    /// and not being written. Returns (index of the current table, switched?).
    /// One CAS at most; never waits.
    #[inline]
    pub fn try_switch(w: &AtomicU32) -> (usize, bool) {
        let v = w.load(Ordering::Acquire);
        if v & PENDING != 0 && v & WRITING == 0 {
            let nv = ((v ^ CUR) & !PENDING).wrapping_add(GEN_ONE);
            match w.compare_exchange(v, nv, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return (cur(nv), true),
                Err(x) => return (cur(x), false),
            }
        }
        (cur(v), false)
    }

    /// Non-real-time reader: waits, at most `max_wait`, until a graph change
    /// written but not yet taken by the driver (PENDING, or being written)
    /// is taken, so that a query made right after a change sees it even
    /// though the server answered the change before the driver's switch
    /// (connection changes are answered at once, so that back-to-back
    /// requests reach the driver together). Returns whether it settled.
    /// Sleeps in steps of 100 us; not real-time safe.
    pub fn settle(w: &AtomicU32, max_wait: std::time::Duration) -> bool {
        let t0 = std::time::Instant::now();
        let start = w.load(Ordering::Acquire);
        loop {
            let v = w.load(Ordering::Acquire);
            if v & (PENDING | WRITING) == 0 || generation(v) != generation(start) {
                return true;
            }
            if t0.elapsed() >= max_wait {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
    }

    /// Non-real-time reader: runs `read` on the current table index until no
    /// switch happened while it ran, then returns its result. `read` must only
    /// copy (it may see a half-written table on a try that is then retried).
    pub fn read_consistent<T>(w: &AtomicU32, mut read: impl FnMut(usize) -> T) -> T {
        loop {
            let before = w.load(Ordering::Acquire);
            let out = read(cur(before));
            // The fence orders the table reads in `read` before the re-check.
            super::fence_acquire();
            let after = w.load(Ordering::Acquire);
            if generation(before) == generation(after) {
                return out;
            }
        }
    }
}

#[inline]
pub(crate) fn fence_release() {
    #[cfg(loom)]
    loom::sync::atomic::fence(Ordering::Release);
    #[cfg(not(loom))]
    std::sync::atomic::fence(Ordering::Release);
}

#[inline]
pub(crate) fn fence_acquire() {
    #[cfg(loom)]
    loom::sync::atomic::fence(Ordering::Acquire);
    #[cfg(not(loom))]
    std::sync::atomic::fence(Ordering::Acquire);
}

/// The cycle-tagged activation counter (see the module docs).
pub mod activation {
    use super::{AtomicU64, Ordering};

    /// Packs a cycle tag and a remaining count.
    #[inline]
    pub fn pack(cycle: u32, count: u32) -> u64 {
        ((cycle as u64) << 32) | count as u64
    }

    /// Cycle tag of a counter value.
    #[inline]
    pub fn tag(v: u64) -> u32 {
        (v >> 32) as u32
    }

    /// Remaining count of a counter value.
    #[inline]
    pub fn count(v: u64) -> u32 {
        v as u32
    }

    /// Driver: arms the counter for `cycle` with `count` upstream nodes.
    #[inline]
    pub fn reset(c: &AtomicU64, cycle: u32, count: u32) {
        c.store(pack(cycle, count), Ordering::Release);
    }

    /// Upstream node finished `cycle`: decrements the counter if it is still
    /// armed for that cycle. Returns true for exactly the call that brought it
    /// to zero; that caller must trigger the node.
    #[inline]
    pub fn decrement(c: &AtomicU64, cycle: u32) -> bool {
        let mut v = c.load(Ordering::Acquire);
        loop {
            if tag(v) != cycle || count(v) == 0 {
                return false;
            }
            let nv = v - 1;
            match c.compare_exchange_weak(v, nv, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return count(nv) == 0,
                Err(x) => v = x,
            }
        }
    }
}

/// Cross-process wake-ups on a `u32` futex word in shared memory.
///
/// The waker bumps the word then wakes; the waiter remembers the value it
/// last saw and sleeps only while the word still holds it, so no wake-up is
/// ever lost.
pub mod futex {
    use super::{AtomicU32, Ordering};

    /// Outcome of a wait.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub enum Wait {
        /// The word changed; carries its new value.
        Changed(u32),
        /// The absolute deadline passed first.
        TimedOut,
    }

    /// Bumps the word and wakes every waiter on it.
    #[inline]
    pub fn bump_and_wake(word: &AtomicU32) {
        word.fetch_add(1, Ordering::Release);
        wake_all(word);
    }

    #[cfg(not(loom))]
    #[inline]
    fn wake_all(word: &AtomicU32) {
        use rustix::thread::futex;
        // Shared (non-private) futex: the word lives in memory mapped by
        // several processes. Errors are impossible for a valid address.
        let _ = futex::wake(word, futex::Flags::empty(), i32::MAX as u32);
    }

    #[cfg(loom)]
    #[inline]
    fn wake_all(_word: &AtomicU32) {}

    /// Waits until the word differs from `seen` or CLOCK_MONOTONIC reaches
    /// `deadline_ns` (`None`: no deadline).
    #[cfg(not(loom))]
    pub fn wait_changed(word: &AtomicU32, seen: u32, deadline_ns: Option<u64>) -> Wait {
        use rustix::thread::futex;
        use std::num::NonZeroU32;
        let ts = deadline_ns.map(crate::time::ns_to_ts);
        let any = NonZeroU32::new(u32::MAX).expect("non-zero");
        loop {
            let now = word.load(Ordering::Acquire);
            if now != seen {
                return Wait::Changed(now);
            }
            if let Some(d) = deadline_ns {
                if crate::time::monotonic_ns() >= d {
                    return Wait::TimedOut;
                }
            }
            // FUTEX_WAIT_BITSET takes an absolute CLOCK_MONOTONIC timeout.
            match futex::wait_bitset(word, futex::Flags::empty(), seen, ts.as_ref(), any) {
                Ok(()) => {}
                Err(rustix::io::Errno::AGAIN) | Err(rustix::io::Errno::INTR) => {}
                Err(rustix::io::Errno::TIMEDOUT) => {
                    let now = word.load(Ordering::Acquire);
                    return if now != seen {
                        Wait::Changed(now)
                    } else {
                        Wait::TimedOut
                    };
                }
                Err(_) => {}
            }
        }
    }

    /// Loom model of the wait: yields until the word changes (no deadline in models).
    #[cfg(loom)]
    pub fn wait_changed(word: &AtomicU32, seen: u32, _deadline_ns: Option<u64>) -> Wait {
        loop {
            let now = word.load(Ordering::Acquire);
            if now != seen {
                return Wait::Changed(now);
            }
            loom::thread::yield_now();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn switch_happens_only_when_pending_and_not_writing() {
        let w = AtomicU32::new(0);
        assert_eq!(switch::try_switch(&w), (0, false));
        let next = switch::begin_write(&w);
        assert_eq!(next, 1);
        assert_eq!(
            switch::try_switch(&w),
            (0, false),
            "must not switch while writing"
        );
        switch::end_write(&w);
        assert_eq!(switch::try_switch(&w), (1, true));
        assert_eq!(switch::generation(w.load(Ordering::Relaxed)), 1);
        assert_eq!(
            switch::try_switch(&w),
            (1, false),
            "nothing pending any more"
        );
        assert_eq!(switch::begin_write(&w), 0);
    }

    #[test]
    fn stale_decrements_are_no_ops() {
        let c = AtomicU64::new(0);
        activation::reset(&c, 7, 2);
        assert!(!activation::decrement(&c, 6), "stale cycle must not count");
        assert!(!activation::decrement(&c, 7));
        assert!(
            activation::decrement(&c, 7),
            "second decrement reaches zero"
        );
        assert!(!activation::decrement(&c, 7), "never below zero");
        assert_eq!(c.load(Ordering::Relaxed), activation::pack(7, 0));
    }

    #[test]
    fn futex_wait_times_out_and_sees_changes() {
        let w = AtomicU32::new(5);
        let deadline = crate::time::monotonic_ns() + 2_000_000;
        assert_eq!(
            futex::wait_changed(&w, 5, Some(deadline)),
            futex::Wait::TimedOut
        );
        assert!(crate::time::monotonic_ns() >= deadline);
        futex::bump_and_wake(&w);
        assert_eq!(futex::wait_changed(&w, 5, None), futex::Wait::Changed(6));
    }
}
