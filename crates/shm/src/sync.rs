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
//! ## Activation by done words ([`futex`], [`crate::cycle`])
//!
//! There is no shared activation counter: nobody writes anything of
//! another node's. Each node has a `u32` *done* word in its own record (the
//! cycle tag it last released) and sleeps on the done word of an upstream
//! node that has not released the cycle yet ([`futex::wait_any`], with the
//! control header's `epoch` and a private wake word beside it). Releasing a
//! cycle is one store and one `FUTEX_WAKE` on the releaser's own word,
//! which wakes every node waiting on it ([`futex::wake_all`]). A node late
//! from an earlier cycle cannot disturb the current one: its done word
//! carries the earlier tag, which nobody waits for any more.
//!
//! A node that starts a cycle may also wake its downstream *early*
//! ([`futex::wake_early`]), so their wake-up overlaps its work; they spin
//! for the release. That wake carries the futex bit [`futex::EARLY`]. A
//! waiter that gains nothing from waking before the release (the driver
//! waiting for the graph's end) sleeps with [`futex::wait_released`], whose
//! bit set excludes it, so the early wake-up does not cost it a wake-up
//! and a second sleep every cycle.

#[cfg(loom)]
pub use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// The CPU the calling thread runs on (the vDSO's `getcpu`: no system
/// call). It may move right after; callers use it only to choose between
/// spinning and sleeping. Real-time safe.
pub fn current_cpu() -> u32 {
    rustix::thread::sched_getcpu() as u32
}

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

/// A full (sequentially consistent) fence: orders every store before it
/// against every load after it (the store-load order a plain release or
/// acquire does not give; see `ActivationRecord::sleeps_on_driver`).
#[inline]
pub fn fence_full() {
    #[cfg(loom)]
    loom::sync::atomic::fence(Ordering::SeqCst);
    #[cfg(not(loom))]
    std::sync::atomic::fence(Ordering::SeqCst);
}

#[inline]
pub(crate) fn fence_acquire() {
    #[cfg(loom)]
    loom::sync::atomic::fence(Ordering::Acquire);
    #[cfg(not(loom))]
    std::sync::atomic::fence(Ordering::Acquire);
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

    /// Wakes every waiter on the word without changing it (the caller has
    /// already stored the new value). Works on a read-only mapping too.
    #[cfg(not(loom))]
    #[inline]
    pub fn wake_all(word: &AtomicU32) {
        use rustix::thread::futex;
        // Shared (non-private) futex: the word lives in memory mapped by
        // several processes. Errors are impossible for a valid address.
        let _ = futex::wake(word, futex::Flags::empty(), i32::MAX as u32);
    }

    /// Loom model of the wake: nothing to do, waiters poll.
    #[cfg(loom)]
    #[inline]
    pub fn wake_all(_word: &AtomicU32) {}

    /// The futex bit of an early wake-up ([`wake_early`]).
    pub const EARLY: u32 = 1 << 1;
    /// The futex bit a [`wait_released`] waiter sleeps with: a release's
    /// plain wake ([`wake_all`], every bit) reaches it, an early wake-up
    /// does not.
    pub const RELEASE: u32 = 1 << 0;

    /// Wakes the waiters on the word that want an early wake-up: those of
    /// [`wait_any`] and [`wait_changed`] (they wait with every bit), not
    /// those of [`wait_released`]. The word does not change (its waiters
    /// sleep again or spin until it does). Works on a read-only mapping too.
    /// Real-time safe.
    #[cfg(not(loom))]
    #[inline]
    pub fn wake_early(word: &AtomicU32) {
        use rustix::thread::futex;
        use std::num::NonZeroU32;
        let early = NonZeroU32::new(EARLY).expect("non-zero");
        // Shared (non-private) futex, as in `wake_all`; errors are
        // impossible for a valid address.
        let _ = futex::wake_bitset(word, futex::Flags::empty(), i32::MAX as u32, early);
    }

    /// Loom model of the early wake: nothing to do, waiters poll.
    #[cfg(loom)]
    #[inline]
    pub fn wake_early(_word: &AtomicU32) {}

    /// Sleeps until any of `words` (at most [`WAIT_ANY_MAX`]) differs from
    /// the value given with it, or CLOCK_MONOTONIC reaches `deadline_ns`
    /// (`None`: no deadline), or a spurious wake-up: the caller re-checks
    /// what it waits for and calls again. One `futex_waitv` (Linux 5.16);
    /// the words may lie in read-only mappings. Real-time safe.
    #[cfg(not(loom))]
    pub fn wait_any(words: &[(&AtomicU32, u32)], deadline_ns: Option<u64>) -> Wait {
        use rustix::thread::futex::{self, WaitFlags, WaitPtr, WaitvFlags};
        let mut w = [futex::Wait::new(); WAIT_ANY_MAX];
        let n = words.len().min(WAIT_ANY_MAX);
        for (slot, (word, seen)) in w.iter_mut().zip(words) {
            slot.val = *seen as u64;
            slot.uaddr = WaitPtr::new(word.as_ptr().cast());
            slot.flags = WaitFlags::SIZE_U32;
        }
        let ts = deadline_ns.map(crate::time::ns_to_ts);
        let clock = rustix::time::ClockId::Monotonic;
        match futex::waitv(&w[..n], WaitvFlags::empty(), ts.as_ref(), clock) {
            Err(rustix::io::Errno::TIMEDOUT) => Wait::TimedOut,
            Ok(i) => Wait::Changed(words.get(i).map_or(0, |(w, _)| w.load(Ordering::Acquire))),
            Err(_) => Wait::Changed(0),
        }
    }

    /// Loom model of [`wait_any`]: yields once (the caller re-checks).
    #[cfg(loom)]
    pub fn wait_any(_words: &[(&AtomicU32, u32)], _deadline_ns: Option<u64>) -> Wait {
        loom::thread::yield_now();
        Wait::Changed(0)
    }

    /// Most words [`wait_any`] sleeps on at once.
    pub const WAIT_ANY_MAX: usize = 4;

    /// Waits until the word differs from `seen` or CLOCK_MONOTONIC reaches
    /// `deadline_ns` (`None`: no deadline). Every wake on the word wakes
    /// the sleep (the loop then sleeps again if the word did not change).
    #[cfg(not(loom))]
    pub fn wait_changed(word: &AtomicU32, seen: u32, deadline_ns: Option<u64>) -> Wait {
        wait_with_bits(word, seen, deadline_ns, u32::MAX)
    }

    /// As [`wait_changed`], but an early wake-up ([`wake_early`]) does not
    /// wake the sleep: only a plain wake ([`wake_all`]) does, or the
    /// deadline. For a waiter that would only look and sleep again.
    #[cfg(not(loom))]
    pub fn wait_released(word: &AtomicU32, seen: u32, deadline_ns: Option<u64>) -> Wait {
        wait_with_bits(word, seen, deadline_ns, RELEASE)
    }

    /// The sleep of [`wait_changed`] and [`wait_released`]: woken by the
    /// wakes whose bit set meets `bits`.
    #[cfg(not(loom))]
    fn wait_with_bits(word: &AtomicU32, seen: u32, deadline_ns: Option<u64>, bits: u32) -> Wait {
        use rustix::thread::futex;
        use std::num::NonZeroU32;
        let ts = deadline_ns.map(crate::time::ns_to_ts);
        let bits = NonZeroU32::new(bits).expect("non-zero bit set");
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
            match futex::wait_bitset(word, futex::Flags::empty(), seen, ts.as_ref(), bits) {
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

    /// Loom model of [`wait_released`]: the same as [`wait_changed`]'s.
    #[cfg(loom)]
    pub fn wait_released(word: &AtomicU32, seen: u32, deadline_ns: Option<u64>) -> Wait {
        wait_changed(word, seen, deadline_ns)
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

    /// The calling thread's voluntary context switches so far.
    fn voluntary_switches() -> i64 {
        // SAFETY: `ru` is a valid, writable rusage that getrusage fills in
        // whole; RUSAGE_THREAD asks for the calling thread's figures only.
        let ru = unsafe {
            let mut ru: libc::rusage = std::mem::zeroed();
            libc::getrusage(libc::RUSAGE_THREAD, &mut ru);
            ru
        };
        ru.ru_nvcsw
    }

    /// How many times a thread sleeping on a word with `wait` is woken while
    /// 40 early wake-ups and then a release reach the word.
    fn wake_ups_of(wait: fn(&AtomicU32, u32, Option<u64>) -> futex::Wait) -> i64 {
        let word = std::sync::Arc::new(AtomicU32::new(0));
        let waiter = {
            let word = word.clone();
            std::thread::spawn(move || {
                let before = voluntary_switches();
                let far = crate::time::monotonic_ns() + 10_000_000_000;
                assert_eq!(wait(&word, 0, Some(far)), futex::Wait::Changed(1));
                voluntary_switches() - before
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(20));
        for _ in 0..40 {
            futex::wake_early(&word);
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        word.store(1, Ordering::Release);
        futex::wake_all(&word);
        waiter.join().unwrap()
    }

    #[test]
    fn an_early_wake_up_reaches_every_waiter_but_those_waiting_for_the_release() {
        let released = wake_ups_of(futex::wait_released);
        let changed = wake_ups_of(futex::wait_changed);
        assert!(released <= 5, "woken {released} times");
        assert!(changed >= 10, "woken only {changed} times");
    }

    #[test]
    fn an_early_wake_up_ends_a_wait_any() {
        let word = std::sync::Arc::new(AtomicU32::new(0));
        let done = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let waiter = {
            let (word, done) = (word.clone(), done.clone());
            std::thread::spawn(move || {
                let far = crate::time::monotonic_ns() + 10_000_000_000;
                let r = futex::wait_any(&[(&word, 0)], Some(far));
                done.store(true, Ordering::Release);
                r
            })
        };
        while !done.load(Ordering::Acquire) {
            futex::wake_early(&word);
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert_eq!(waiter.join().unwrap(), futex::Wait::Changed(0));
        assert_eq!(word.load(Ordering::Relaxed), 0, "the word never changed");
    }

    #[test]
    fn wait_any_wakes_on_any_word_and_times_out() {
        let (a, b) = (AtomicU32::new(1), AtomicU32::new(2));
        let deadline = crate::time::monotonic_ns() + 2_000_000;
        assert_eq!(
            futex::wait_any(&[(&a, 1), (&b, 2)], Some(deadline)),
            futex::Wait::TimedOut
        );
        // A word that already differs returns at once.
        b.store(3, Ordering::Relaxed);
        assert_ne!(
            futex::wait_any(&[(&a, 1), (&b, 2)], None),
            futex::Wait::TimedOut
        );
        // A change and wake from another thread ends the sleep.
        let a = std::sync::Arc::new(a);
        let waker = {
            let a = a.clone();
            std::thread::spawn(move || {
                std::thread::sleep(std::time::Duration::from_millis(20));
                a.store(9, Ordering::Release);
                futex::wake_all(&a);
            })
        };
        let far = crate::time::monotonic_ns() + 5_000_000_000;
        while a.load(Ordering::Acquire) == 1 {
            assert_ne!(
                futex::wait_any(&[(&a, 1), (&b, 3)], Some(far)),
                futex::Wait::TimedOut
            );
        }
        waker.join().unwrap();
    }
}
