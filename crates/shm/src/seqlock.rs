//! The one sequence lock of the shared-memory ABI: a sequence word that
//! guards a group of atomics, so a reader in another process either copies
//! the group as one writer left it or learns that it could not.
//!
//! Users: the transport cells ([`crate::transport`], driver → clients and
//! client mailboxes → driver), the timer fields of the control header
//! ([`crate::ControlHeader::publish_timer`], [`crate::ControlHeader::try_timer`]),
//! and the cycle and name records of the profile ring ([`crate::profile`]).
//! Runs on whichever thread reads or writes those: the driver, client
//! process threads, control threads, profilers.
//!
//! ## Protocol
//!
//! ```text
//!   writer                                reader (at most `tries` attempts)
//!   seq = s + 1            (odd: busy)     s1 = seq              (acquire)
//!   fence(release)                         s1 odd → next attempt
//!   data stores            (relaxed)       data loads            (relaxed)
//!   seq = s + 2            (release)       fence(acquire)
//!                                          seq == s1 → the copy, else next attempt
//! ```
//!
//! * The protected data are atomics (any bit pattern valid), so a read that
//!   races a writer is a detected retry, never undefined behaviour, and a
//!   hostile client scribbling on a client-writable page can only make
//!   readers retry or see numbers it chose (which they sanitise anyway).
//! * Readers never wait without bound: a writer killed between its two
//!   sequence stores leaves the word odd forever, and then every read gives
//!   up after its tries and returns `None`.
//! * Three writer roles, each a function that names its side:
//!   [`write_exclusive`] (one writer by construction: the driver's timer),
//!   [`try_write`] (several writers, e.g. two threads of one client, which
//!   serialise by claiming the odd value with a CAS, bounded as well), and
//!   [`write_numbered`] / [`read_numbered`] for ring slots, where the
//!   sequence value names the record a slot holds (`2n + 1` while record
//!   `n` is written, `2n + 2` once complete), so a reader also learns
//!   whether the record it wants is not written yet or already overwritten.
//! * [`SeqArray`] is the protocol over a fixed `#[repr(C)]` array of
//!   `u64` words, the shape every shared cell uses.
//!
//! Model-checked with loom in `crates/shm/tests/loom.rs` (`scripts/loom.sh`).
//!
//! ### Why the graph switch is not one of these
//!
//! [`crate::sync::switch::read_consistent`] also re-checks a counter (the
//! switch generation) after copying, but it guards a double buffer: the
//! writer never writes the table readers read (the current one), so there
//! is no "writer busy" phase for a reader to see, the word carries other
//! state (CUR, PENDING, WRITING) whose changes must not cause retries, and
//! the counter is bumped by the driver's switch, not by the writer. It lives
//! in the sealed control segment, so no client can scribble on it.

use crate::sync::{fence_acquire, fence_release, AtomicU32, AtomicU64, Ordering};

/// A word that can carry a sequence number (`AtomicU32` or `AtomicU64`).
/// Values are handled as `u64`; a 32-bit word keeps the low half, which
/// preserves parity and equality, all the protocol needs.
pub trait SeqWord {
    /// Loads the sequence value.
    fn load_seq(&self, order: Ordering) -> u64;
    /// Stores a sequence value.
    fn store_seq(&self, value: u64, order: Ordering);
    /// Replaces `current` by `new` if the word still holds `current`.
    fn claim_seq(&self, current: u64, new: u64) -> bool;
}

impl SeqWord for AtomicU32 {
    #[inline]
    fn load_seq(&self, order: Ordering) -> u64 {
        self.load(order) as u64
    }

    #[inline]
    fn store_seq(&self, value: u64, order: Ordering) {
        self.store(value as u32, order)
    }

    #[inline]
    fn claim_seq(&self, current: u64, new: u64) -> bool {
        self.compare_exchange(
            current as u32,
            new as u32,
            Ordering::Acquire,
            Ordering::Relaxed,
        )
        .is_ok()
    }
}

impl SeqWord for AtomicU64 {
    #[inline]
    fn load_seq(&self, order: Ordering) -> u64 {
        self.load(order)
    }

    #[inline]
    fn store_seq(&self, value: u64, order: Ordering) {
        self.store(value, order)
    }

    #[inline]
    fn claim_seq(&self, current: u64, new: u64) -> bool {
        self.compare_exchange(current, new, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    }
}

/// A pause between two attempts. Real-time safe (a CPU hint, no syscall).
#[inline]
fn pause() {
    #[cfg(loom)]
    loom::hint::spin_loop();
    #[cfg(not(loom))]
    std::hint::spin_loop();
}

/// Writer side, the only writer of `seq` by construction: runs `store`
/// (relaxed stores of the protected atomics) between an odd and the next
/// even sequence value. A word found odd (never the case for a sole writer
/// unless something scribbled on it) is completed to the next even value.
/// Real-time safe.
#[inline]
pub fn write_exclusive<W: SeqWord>(seq: &W, store: impl FnOnce()) {
    let busy = seq.load_seq(Ordering::Relaxed) | 1;
    seq.store_seq(busy, Ordering::Relaxed);
    // The data stores must not become visible before the odd value.
    fence_release();
    store();
    seq.store_seq(busy.wrapping_add(1), Ordering::Release);
}

/// Writer side, one of several writers: claims the odd value with a CAS,
/// runs `store`, releases to the next even value. Spins at most `tries`
/// times (at least once) while another writer holds the word; returns false,
/// with nothing written, if it never got it. Real-time safe.
#[inline]
pub fn try_write<W: SeqWord>(seq: &W, tries: u32, store: impl FnOnce()) -> bool {
    for _ in 0..tries.max(1) {
        let s = seq.load_seq(Ordering::Relaxed);
        if s & 1 == 1 {
            pause();
            continue;
        }
        if !seq.claim_seq(s, s.wrapping_add(1)) {
            continue;
        }
        // The data stores must not become visible before the odd value.
        fence_release();
        store();
        seq.store_seq(s.wrapping_add(2), Ordering::Release);
        return true;
    }
    false
}

/// Reader side: runs `load` (relaxed loads of the protected atomics) until
/// one copy was taken while no writer was busy and the sequence did not
/// move, at most `tries` times (at least once). None if no attempt
/// succeeded: a writer was busy or killed mid-write, or something keeps
/// scribbling. Real-time safe.
#[inline]
pub fn read<W: SeqWord, T>(seq: &W, tries: u32, mut load: impl FnMut() -> T) -> Option<T> {
    for _ in 0..tries.max(1) {
        let s1 = seq.load_seq(Ordering::Acquire);
        if s1 & 1 == 1 {
            pause();
            continue;
        }
        let copy = load();
        // The data loads must complete before the re-check.
        fence_acquire();
        if seq.load_seq(Ordering::Relaxed) == s1 {
            return Some(copy);
        }
    }
    None
}

/// Why [`read_numbered`] returned no copy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stale {
    /// The slot does not hold the wanted record yet (older record, or the
    /// wanted one is being written).
    NotYet,
    /// The slot holds, or is being overwritten by, a newer record.
    Overwritten,
}

/// Writer side of a ring slot, sole writer: runs `store` between `2n + 1`
/// and `2n + 2`, the sequence values of record `n`. Real-time safe.
#[inline]
pub fn write_numbered(seq: &AtomicU64, n: u64, store: impl FnOnce()) {
    seq.store(2 * n + 1, Ordering::Relaxed);
    // The data stores must not become visible before the odd value.
    fence_release();
    store();
    seq.store(2 * n + 2, Ordering::Release);
}

/// Reader side of a ring slot: one attempt at a copy of record `n` (a retry
/// could only find a newer record). Real-time safe.
#[inline]
pub fn read_numbered<T>(seq: &AtomicU64, n: u64, load: impl FnOnce() -> T) -> Result<T, Stale> {
    // `n` may come from memory someone scribbled on (a ring's record count):
    // a record past what any sequence word can name is simply not written.
    let Some(want) = n.checked_mul(2).and_then(|x| x.checked_add(2)) else {
        return Err(Stale::NotYet);
    };
    let s1 = seq.load(Ordering::Acquire);
    if s1 != want {
        return Err(if s1 < want {
            Stale::NotYet
        } else {
            Stale::Overwritten
        });
    }
    let copy = load();
    // The data loads must complete before the re-check.
    fence_acquire();
    if seq.load(Ordering::Relaxed) != want {
        return Err(Stale::Overwritten);
    }
    Ok(copy)
}

/// A sequence word and the `N` words it guards, as laid out in shared
/// memory (`8 + 8 N` bytes, 8-aligned).
#[repr(C)]
pub struct SeqArray<const N: usize> {
    /// Sequence word: odd while a writer stores `words`. Writers: see the
    /// owner's docs; every reader re-checks it around its copy.
    pub seq: AtomicU64,
    /// The guarded data, meaning defined by the owner.
    pub words: [AtomicU64; N],
}

impl<const N: usize> SeqArray<N> {
    /// A cell with the counter and every word at zero (for cells in
    /// process-private memory; shared ones start as zeroed pages).
    pub fn new() -> Self {
        SeqArray {
            seq: AtomicU64::new(0),
            words: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }

    fn store_words(&self, w: &[u64; N]) {
        for (a, v) in self.words.iter().zip(w) {
            a.store(*v, Ordering::Relaxed);
        }
    }

    /// Writer side, sole writer: stores `w` (see [`write_exclusive`]).
    /// Real-time safe.
    pub fn write_exclusive(&self, w: &[u64; N]) {
        write_exclusive(&self.seq, || self.store_words(w));
    }

    /// Writer side, one of several: stores `w`, spinning at most `tries`
    /// times for another writer (see [`try_write`]); false if nothing was
    /// written. Real-time safe.
    pub fn try_write(&self, w: &[u64; N], tries: u32) -> bool {
        try_write(&self.seq, tries, || self.store_words(w))
    }

    /// Reader side: a consistent copy in at most `tries` attempts (see
    /// [`read`]). Real-time safe.
    pub fn try_read(&self, tries: u32) -> Option<[u64; N]> {
        read(&self.seq, tries, || {
            let mut out = [0u64; N];
            for (o, a) in out.iter_mut().zip(&self.words) {
                *o = a.load(Ordering::Relaxed);
            }
            out
        })
    }

    /// Back to "never written" (sequence 0), for a slot handed to a new
    /// owner; the words keep their values. Not for use while writers run.
    pub fn clear(&self) {
        self.seq.store(0, Ordering::Release);
    }
}

impl<const N: usize> Default for SeqArray<N> {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn a_stuck_odd_word_makes_bounded_readers_and_writers_give_up() {
        let cell = SeqArray::<2>::new();
        cell.write_exclusive(&[1, 1]);
        assert_eq!(cell.try_read(1), Some([1, 1]));
        cell.seq.store(3, Ordering::Relaxed);
        assert_eq!(cell.try_read(5), None);
        assert!(!cell.try_write(&[2, 2], 5));
        // The sole writer completes a scribbled odd word and moves on.
        cell.write_exclusive(&[3, 3]);
        assert_eq!(cell.seq.load(Ordering::Relaxed), 4);
        assert_eq!(cell.try_read(1), Some([3, 3]));
    }

    #[test]
    fn a_32_bit_word_wraps_without_losing_parity() {
        let seq = AtomicU32::new(u32::MAX - 1);
        write_exclusive(&seq, || {});
        assert_eq!(seq.load(Ordering::Relaxed), 0);
        assert!(try_write(&seq, 1, || {}));
        assert_eq!(seq.load(Ordering::Relaxed), 2);
        assert_eq!(read(&seq, 1, || 7), Some(7));
    }

    #[test]
    fn numbered_slots_tell_not_yet_from_overwritten() {
        let seq = AtomicU64::new(0);
        assert_eq!(read_numbered(&seq, 0, || ()), Err(Stale::NotYet));
        write_numbered(&seq, 0, || {});
        assert_eq!(read_numbered(&seq, 0, || 5), Ok(5));
        write_numbered(&seq, 4, || {});
        assert_eq!(read_numbered(&seq, 0, || ()), Err(Stale::Overwritten));
        assert_eq!(read_numbered(&seq, 8, || ()), Err(Stale::NotYet));
    }

    /// A record number no sequence word can name (a scribbled record count
    /// in a profile ring) is "not yet", not an arithmetic overflow: found by
    /// the `profile_reader` fuzz target
    /// (fuzz/artifacts/profile_reader/crash-7e83873286…, `cycles_written`
    /// near 2^64 made `resound profile` panic in debug builds).
    #[test]
    fn a_record_number_past_every_sequence_is_not_yet() {
        let seq = AtomicU64::new(u64::MAX);
        for n in [u64::MAX, u64::MAX / 2, u64::MAX / 2 - 1] {
            let r = read_numbered(&seq, n, || ());
            assert!(r.is_err(), "record {n}: {r:?}");
        }
        assert_eq!(read_numbered(&seq, u64::MAX, || ()), Err(Stale::NotYet));
    }
}
