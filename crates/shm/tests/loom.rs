//! Loom model checks of the lock-free primitives in `resound_shm::sync` and
//! `resound_shm::seqlock`.
//!
//! Run with `scripts/loom.sh` (`RUSTFLAGS="--cfg loom"`); without `cfg(loom)`
//! this file compiles to nothing.
//!
//! * `switch_*`: the two-state graph switch word, from the real-time side
//!   (the driver reads the current table with no retry, so the writer must
//!   never write it) and from the non-real-time side (seqlock-style
//!   `read_consistent`).
//! * `activation_*`: the cycle-tagged activation counter (exactly one
//!   decrement per cycle reaches zero; stale-cycle decrements are no-ops).
//! * `one_hop_*`: counter + trigger + futex word end to end (the node is
//!   woken exactly once and sees the cycle it was triggered for).
//! * `seqlock_*`: the crate's one seqlock (`resound_shm::seqlock`): readers
//!   never return a torn copy, bounded retries always return (a busy or
//!   dead writer makes them give up), shared writers serialise, ring slots
//!   tell "not yet" from "overwritten".
//!
//! Two loom 0.7 limitations shape these models:
//!
//! * Exploration holes (tokio-rs/loom#392, #166): a thread whose first
//!   operation is an atomic *load* that later does an RMW on the same word
//!   (every `begin_write` / `try_switch` / `decrement` does that) is not
//!   interleaved with loads the main thread did earlier; loom may then stop
//!   after one execution and pass vacuously. So every party runs on a
//!   spawned thread (the main thread only spawns and joins), and every model
//!   records which outcomes it saw and asserts afterwards that the
//!   interesting interleavings were actually explored ([`Seen`]).
//! * No RMW atomicity against a concurrent plain store (tokio-rs/loom#254,
//!   #389): see [`reset_as_rmw`].
#![cfg(loom)]

use std::collections::BTreeSet;
use std::fmt::Debug;

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use loom::sync::Arc;
use loom::thread;
use resound_shm::seqlock::{read_numbered, write_numbered, SeqArray, Stale};
use resound_shm::sync::{activation, futex, switch};

/// Contents of table 1 before the writer first fills it: deliberately not a
/// "complete" table, so reading it as current fails the completeness checks.
const NEVER_WRITTEN: [u32; 3] = [97, 98, 99];

/// Number of graph versions the writer publishes (version 0 is the initial graph).
const VERSIONS: u32 = 2;

/// A model with a preemption bound, for models whose full state space is too
/// large to explore in reasonable time.
fn bounded(preemptions: usize) -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(preemptions);
    b
}

/// Outcomes observed across all executions of a model (outside the model:
/// a std mutex, invisible to loom), to assert coverage afterwards.
struct Seen<T>(std::sync::Arc<std::sync::Mutex<BTreeSet<T>>>);

impl<T: Ord + Debug> Seen<T> {
    fn new() -> Self {
        Seen(Default::default())
    }

    fn add(&self, t: T) {
        self.0.lock().unwrap().insert(t);
    }

    fn assert_has(&self, t: T, what: &str) {
        let set = self.0.lock().unwrap();
        assert!(
            set.contains(&t),
            "loom never explored {what} ({t:?}); outcomes seen: {set:?}"
        );
    }
}

impl<T> Clone for Seen<T> {
    fn clone(&self) -> Self {
        Seen(self.0.clone())
    }
}

fn assert_complete(t: [u32; 3], what: &str) {
    assert!(
        t.iter().all(|&f| f == t[0]) && t[0] <= VERSIONS,
        "{what}: torn or never-written table {t:?}"
    );
}

// ---------------------------------------------------------------------------
// Graph switch, real-time side
// ---------------------------------------------------------------------------

/// The two graph tables as plain (non-atomic) memory: loom reports any access
/// to one that is not ordered by happens-before with a write to it.
struct Tables([UnsafeCell<[u32; 3]>; 2]);

// SAFETY: access is coordinated by the switch word; checking that it really is
// is the point of the test (loom's UnsafeCell flags any data race).
unsafe impl Sync for Tables {}

impl Tables {
    fn new() -> Self {
        Tables([UnsafeCell::new([0; 3]), UnsafeCell::new(NEVER_WRITTEN)])
    }

    fn write(&self, idx: usize, version: u32) {
        // SAFETY: loom checks this access for races.
        self.0[idx].with_mut(|p| unsafe { *p = [version; 3] });
    }

    fn read(&self, idx: usize) -> [u32; 3] {
        // SAFETY: loom checks this access for races.
        self.0[idx].with(|p| unsafe { *p })
    }
}

/// Writer publishes versions 1 and 2 while the driver switches at cycle
/// starts and reads the current table without any retry. Loom's UnsafeCell
/// fails the model if the writer ever writes the table the driver reads as
/// current (or the driver reads a table whose write is not published to it).
#[test]
fn switch_rt_reader_never_races_writer() {
    // Versions the driver read in its three cycles.
    let seen = Seen::<[u32; 3]>::new();
    let seen_in = seen.clone();
    loom::model(move || {
        let w = Arc::new(AtomicU32::new(0));
        let tables = Arc::new(Tables::new());

        let writer = {
            let (w, tables) = (w.clone(), tables.clone());
            thread::spawn(move || {
                for version in 1..=VERSIONS {
                    let next = switch::begin_write(&w);
                    tables.write(next, version);
                    switch::end_write(&w);
                }
            })
        };
        let driver = {
            let (w, tables) = (w.clone(), tables.clone());
            thread::spawn(move || {
                let mut versions = [0; 3];
                let mut switches = 0;
                for v in &mut versions {
                    let (cur, switched) = switch::try_switch(&w);
                    switches += u32::from(switched);
                    let t = tables.read(cur);
                    assert_complete(t, "driver");
                    *v = t[0];
                }
                (versions, switches)
            })
        };

        writer.join().unwrap();
        let (versions, mut switches) = driver.join().unwrap();
        assert!(
            versions.windows(2).all(|p| p[0] <= p[1]),
            "graph version went back: {versions:?}"
        );
        seen_in.add(versions);

        // Once the writer is done, the next cycle start lands on the last version.
        let (cur, switched) = switch::try_switch(&w);
        switches += u32::from(switched);
        assert_eq!(tables.read(cur), [VERSIONS; 3], "last version not reached");
        assert_eq!(
            switch::generation(w.load(Ordering::Relaxed)),
            switches,
            "generation must count the switches"
        );
    });
    seen.assert_has([0, 0, 0], "driver running before the writer");
    seen.assert_has([2, 2, 2], "driver running after the writer");
    seen.assert_has([0, 1, 2], "a switch to each version in turn");
    seen.assert_has([1, 1, 1], "a switch while version 2 is being written");
}

// ---------------------------------------------------------------------------
// Graph switch, non-real-time reader side
// ---------------------------------------------------------------------------

/// The two graph tables as atomics (Relaxed field accesses): a seqlock reader
/// may race with the writer by design and must detect it and retry.
struct AtomicTables([[AtomicU32; 3]; 2]);

impl AtomicTables {
    fn new() -> Self {
        let table = |init: [u32; 3]| init.map(AtomicU32::new);
        AtomicTables([table([0; 3]), table(NEVER_WRITTEN)])
    }

    fn write(&self, idx: usize, version: u32) {
        for f in &self.0[idx] {
            f.store(version, Ordering::Relaxed);
        }
    }

    fn read(&self, idx: usize) -> [u32; 3] {
        let t = &self.0[idx];
        [
            t[0].load(Ordering::Relaxed),
            t[1].load(Ordering::Relaxed),
            t[2].load(Ordering::Relaxed),
        ]
    }
}

/// Writer publishes versions 1 and 2, a driver switches, and a non-real-time
/// reader copies the current table twice with `read_consistent`: every copy
/// must be complete (one version in all fields) and versions never go back.
///
/// The reader's retry loop is bounded: it retries only when the generation
/// moved, and the driver switches at most twice. Preemption bound 2 (this
/// 4-thread model takes ~2 min with bound 3, ~12 s with bound 2); the
/// coverage assertions below check the bound still reaches the interesting
/// interleavings.
#[test]
fn switch_read_consistent_never_torn() {
    // (first version, second version, a retry happened)
    let seen = Seen::<(u32, u32, bool)>::new();
    let seen_in = seen.clone();
    bounded(2).check(move || {
        let w = Arc::new(AtomicU32::new(0));
        let tables = Arc::new(AtomicTables::new());

        let writer = {
            let (w, tables) = (w.clone(), tables.clone());
            thread::spawn(move || {
                for version in 1..=VERSIONS {
                    let next = switch::begin_write(&w);
                    tables.write(next, version);
                    switch::end_write(&w);
                }
            })
        };
        let driver = {
            let w = w.clone();
            thread::spawn(move || {
                for _ in 0..2 {
                    switch::try_switch(&w);
                }
            })
        };
        let reader = {
            let (w, tables) = (w.clone(), tables.clone());
            thread::spawn(move || {
                let mut tries = 0;
                let mut copy = || {
                    switch::read_consistent(&w, |i| {
                        tries += 1;
                        tables.read(i)
                    })
                };
                let first = copy();
                assert_complete(first, "read_consistent (first)");
                let second = copy();
                assert_complete(second, "read_consistent (second)");
                assert!(
                    second[0] >= first[0],
                    "version went back: {first:?} then {second:?}"
                );
                (first[0], second[0], tries > 2)
            })
        };

        writer.join().unwrap();
        driver.join().unwrap();
        seen_in.add(reader.join().unwrap());
    });
    seen.assert_has((0, 0, false), "reader before any switch");
    seen.assert_has((0, 1, false), "reader across the first switch");
    seen.assert_has((2, 2, false), "reader after both switches");
    seen.assert_has((0, 2, true), "a retry after a switch during a copy");
}

// ---------------------------------------------------------------------------
// Activation counter
// ---------------------------------------------------------------------------

/// `activation::reset` as a `swap` instead of a plain store, for models where
/// the reset races with a decrement's CAS.
///
/// Loom 0.7 does not enforce RMW atomicity against a concurrent plain store
/// (tokio-rs/loom#254, #389; fix pending in PR #391): when the CAS runs first
/// but the store does not observe it, loom can later let readers see the
/// CAS's value as if it came *after* the store, which C++/Rust forbid (the
/// CAS would then have had to read the store's value). That yields false
/// failures ("both cycle-1 decrements see cycle 0"). In the Rust memory model
/// a Release swap whose result is ignored is interchangeable with a Release
/// store here (same modification-order placements, no extra synchronisation),
/// and loom models RMW-vs-RMW correctly.
fn reset_as_rmw(c: &AtomicU64, cycle: u32, count: u32) {
    c.swap(activation::pack(cycle, count), Ordering::Release);
}

/// Spawns the two upstream nodes of cycle `cycle` and returns which of them
/// reported "reached zero".
fn two_upstreams(c: &Arc<AtomicU64>, cycle: u32) -> Vec<bool> {
    let ups: Vec<_> = (0..2)
        .map(|_| {
            let c = c.clone();
            thread::spawn(move || activation::decrement(&c, cycle))
        })
        .collect();
    ups.into_iter().map(|h| h.join().unwrap()).collect()
}

/// Two upstream nodes finish cycle 1 concurrently: exactly one of them brings
/// the counter to zero.
#[test]
fn activation_exactly_one_reaches_zero() {
    let seen = Seen::<Vec<bool>>::new();
    let seen_in = seen.clone();
    loom::model(move || {
        let c = Arc::new(AtomicU64::new(activation::pack(0, 0)));
        // Driver arms the node before triggering its upstream nodes.
        activation::reset(&c, 1, 2);

        let zeros = two_upstreams(&c, 1);
        assert_eq!(
            zeros.iter().filter(|&&z| z).count(),
            1,
            "exactly one decrement must reach zero: {zeros:?}"
        );
        assert_eq!(c.load(Ordering::Relaxed), activation::pack(1, 0));
        seen_in.add(zeros);
    });
    seen.assert_has(vec![true, false], "first upstream reaching zero");
    seen.assert_has(vec![false, true], "second upstream reaching zero");
}

/// As above, plus an upstream node late from cycle 0 decrementing while the
/// driver re-arms the counter for cycle 1: the stale decrement never reports
/// zero and never disturbs cycle 1. (The reset is [`reset_as_rmw`], see there.)
#[test]
fn activation_stale_decrement_is_noop() {
    loom::model(|| {
        // Cycle 0 still waits for two upstream nodes; one of them is late.
        let c = Arc::new(AtomicU64::new(activation::pack(0, 2)));

        let stale = {
            let c = c.clone();
            thread::spawn(move || activation::decrement(&c, 0))
        };

        // Driver starts cycle 1, then its upstream nodes run.
        reset_as_rmw(&c, 1, 2);
        let zeros = two_upstreams(&c, 1);

        assert!(
            !stale.join().unwrap(),
            "stale decrement must never reach zero"
        );
        assert_eq!(
            zeros.iter().filter(|&&z| z).count(),
            1,
            "exactly one cycle-1 decrement must reach zero: {zeros:?}"
        );
        assert_eq!(c.load(Ordering::Relaxed), activation::pack(1, 0));
    });
}

/// The late node is the *last* input of cycle 0 and races with the reset for
/// cycle 1: it may legitimately report zero for cycle 0 (if it got in before
/// the reset), but cycle 1 is unaffected either way. Asserts both orders were
/// explored, i.e. the stale-vs-reset race is really modelled.
#[test]
fn activation_late_last_input_races_reset() {
    let seen = Seen::<bool>::new();
    let seen_in = seen.clone();
    loom::model(move || {
        let c = Arc::new(AtomicU64::new(activation::pack(0, 1)));

        let stale = {
            let c = c.clone();
            thread::spawn(move || activation::decrement(&c, 0))
        };

        reset_as_rmw(&c, 1, 2);
        let zeros = two_upstreams(&c, 1);

        assert_eq!(
            zeros.iter().filter(|&&z| z).count(),
            1,
            "exactly one cycle-1 decrement must reach zero: {zeros:?}"
        );
        assert_eq!(c.load(Ordering::Relaxed), activation::pack(1, 0));
        seen_in.add(stale.join().unwrap());
    });
    seen.assert_has(true, "late node finishing cycle 0 before the reset");
    seen.assert_has(false, "late node arriving after the reset");
}

// ---------------------------------------------------------------------------
// End to end: counter, trigger, futex word
// ---------------------------------------------------------------------------

const WAITING: u32 = 1;
const TRIGGERED: u32 = 2;

/// The parts of an activation record the hop uses (see `shm::ActivationRecord`).
struct Record {
    counter: AtomicU64,
    trigger: AtomicU32,
    cycle: AtomicU64,
    status: AtomicU32,
}

impl Record {
    fn new() -> Self {
        Record {
            counter: AtomicU64::new(activation::pack(0, 0)),
            trigger: AtomicU32::new(0),
            cycle: AtomicU64::new(0),
            status: AtomicU32::new(0),
        }
    }

    /// What `cycle::signal` does: decrement and, on the last input, trigger.
    fn signal(&self, cycle: u64) {
        if activation::decrement(&self.counter, cycle as u32) {
            self.cycle.store(cycle, Ordering::Relaxed);
            self.status.store(TRIGGERED, Ordering::Relaxed);
            futex::bump_and_wake(&self.trigger);
        }
    }

    /// The node's thread: sleeps until triggered, then reads the cycle.
    /// Returns (cycle, status, whether it found the word unchanged at first,
    /// i.e. really had to wait).
    fn wait(&self, seen: u32) -> (u64, u32, bool) {
        let slept = self.trigger.load(Ordering::Relaxed) == seen;
        match futex::wait_changed(&self.trigger, seen, None) {
            futex::Wait::Changed(v) => assert_ne!(v, seen),
            futex::Wait::TimedOut => panic!("no deadline, cannot time out"),
        }
        (
            self.cycle.load(Ordering::Relaxed),
            self.status.load(Ordering::Relaxed),
            slept,
        )
    }
}

/// The driver arms a node with one input (itself) and signals it; the node's
/// thread, asleep on its trigger word, wakes and sees cycle 1.
#[test]
fn one_hop_wakes_and_publishes_cycle() {
    let seen = Seen::<bool>::new();
    let seen_in = seen.clone();
    loom::model(move || {
        let r = Arc::new(Record::new());
        // The value the node's thread last saw, before going to sleep.
        let seen = r.trigger.load(Ordering::Acquire);

        let driver = {
            let r = r.clone();
            thread::spawn(move || {
                r.status.store(WAITING, Ordering::Relaxed);
                activation::reset(&r.counter, 1, 1);
                r.signal(1);
            })
        };
        let node = {
            let r = r.clone();
            thread::spawn(move || r.wait(seen))
        };

        driver.join().unwrap();
        let (cycle, status, slept) = node.join().unwrap();
        assert_eq!(cycle, 1, "woken thread must see the triggered cycle");
        assert_eq!(status, TRIGGERED);
        assert_eq!(r.trigger.load(Ordering::Relaxed), seen + 1, "one bump");
        seen_in.add(slept);
    });
    seen.assert_has(true, "node asleep before the trigger");
    seen.assert_has(false, "node arriving after the trigger");
}

/// Like `one_hop_wakes_and_publishes_cycle`, with two upstream nodes
/// finishing concurrently: the node is triggered exactly once and sees cycle 1.
#[test]
fn one_hop_two_upstreams_trigger_once() {
    let seen = Seen::<bool>::new();
    let seen_in = seen.clone();
    bounded(3).check(move || {
        let r = Arc::new(Record::new());
        let seen = r.trigger.load(Ordering::Acquire);

        // Driver arms the node for cycle 1, then its two upstream nodes run.
        r.status.store(WAITING, Ordering::Relaxed);
        activation::reset(&r.counter, 1, 2);
        let ups: Vec<_> = (0..2)
            .map(|_| {
                let r = r.clone();
                thread::spawn(move || r.signal(1))
            })
            .collect();
        let node = {
            let r = r.clone();
            thread::spawn(move || r.wait(seen))
        };

        for h in ups {
            h.join().unwrap();
        }
        let (cycle, status, slept) = node.join().unwrap();
        assert_eq!(cycle, 1, "woken thread must see the triggered cycle");
        assert_eq!(status, TRIGGERED);
        assert_eq!(
            r.trigger.load(Ordering::Relaxed),
            seen + 1,
            "triggered exactly once"
        );
        assert_eq!(r.counter.load(Ordering::Relaxed), activation::pack(1, 0));
        seen_in.add(slept);
    });
    seen.assert_has(true, "node asleep before the trigger");
    seen.assert_has(false, "node arriving after the trigger");
}

// ---------------------------------------------------------------------------
// Seqlock (resound_shm::seqlock)
// ---------------------------------------------------------------------------

/// Words of the cells in the seqlock models: two, so a torn copy shows as
/// two different values.
type Cell = SeqArray<2>;

/// Attempts the seqlock readers of these models make: small and bounded,
/// which is the property under test (a reader always returns).
const READ_TRIES: u32 = 2;

/// A copy a reader returned must be one a writer wrote whole.
fn assert_whole(w: [u64; 2], what: &str) {
    assert_eq!(w[0], w[1], "{what}: torn copy {w:?}");
}

/// The sole writer (the driver's role for the timer and the published
/// transport) stores versions 1 and 2 while a reader takes two bounded
/// copies: every copy it gets is whole, versions never go back, and a
/// reader that meets the writer mid-store gives up instead of waiting.
#[test]
fn seqlock_exclusive_writer_reader_never_torn() {
    let seen = Seen::<(Option<u64>, Option<u64>)>::new();
    let seen_in = seen.clone();
    bounded(3).check(move || {
        let cell = Arc::new(Cell::new());
        let writer = {
            let cell = cell.clone();
            thread::spawn(move || {
                for v in 1..=2 {
                    cell.write_exclusive(&[v, v]);
                }
            })
        };
        let reader = {
            let cell = cell.clone();
            thread::spawn(move || {
                let mut copies = [None; 2];
                for c in &mut copies {
                    *c = cell.try_read(READ_TRIES).map(|w| {
                        assert_whole(w, "exclusive");
                        w[0]
                    });
                }
                copies
            })
        };
        writer.join().unwrap();
        let [a, b] = reader.join().unwrap();
        if let (Some(a), Some(b)) = (a, b) {
            assert!(a <= b, "version went back: {a} then {b}");
        }
        assert_eq!(cell.try_read(1), Some([2, 2]), "last version not readable");
        seen_in.add((a, b));
    });
    seen.assert_has((Some(0), Some(0)), "reader before the writer");
    seen.assert_has((Some(2), Some(2)), "reader after the writer");
    seen.assert_has((Some(0), Some(2)), "reader across the writes");
}

/// A reader meets the writer mid-store and gives up (None) within its tries.
#[test]
fn seqlock_reader_gives_up_on_a_busy_writer() {
    let seen = Seen::<Option<u64>>::new();
    let seen_in = seen.clone();
    loom::model(move || {
        let cell = Arc::new(Cell::new());
        let writer = {
            let cell = cell.clone();
            thread::spawn(move || cell.write_exclusive(&[1, 1]))
        };
        let reader = {
            let cell = cell.clone();
            thread::spawn(move || {
                cell.try_read(1).map(|w| {
                    assert_whole(w, "busy");
                    w[0]
                })
            })
        };
        writer.join().unwrap();
        seen_in.add(reader.join().unwrap());
    });
    seen.assert_has(None, "a reader that gave up on a busy writer");
    seen.assert_has(Some(0), "a reader before the writer");
    seen.assert_has(Some(1), "a reader after the writer");
}

/// Two writers of one cell (two threads of a client posting to its mailbox)
/// serialise through the CAS on the sequence word: at least one of them
/// writes, a bounded reader only ever copies one writer's words, and the
/// final contents are one writer's words whole.
#[test]
fn seqlock_shared_writers_serialise() {
    let seen = Seen::<(bool, bool)>::new();
    let seen_in = seen.clone();
    bounded(2).check(move || {
        let cell = Arc::new(Cell::new());
        let writers: Vec<_> = [1u64, 2]
            .into_iter()
            .map(|v| {
                let cell = cell.clone();
                thread::spawn(move || cell.try_write(&[v, v], 2))
            })
            .collect();
        let reader = {
            let cell = cell.clone();
            thread::spawn(move || {
                if let Some(w) = cell.try_read(READ_TRIES) {
                    assert_whole(w, "shared");
                }
            })
        };
        let wrote: Vec<bool> = writers.into_iter().map(|h| h.join().unwrap()).collect();
        reader.join().unwrap();
        assert!(wrote[0] || wrote[1], "both writers gave up");
        let last = cell.try_read(1).expect("no writer left busy");
        assert_whole(last, "final");
        assert!(last[0] == 0 || wrote[last[0] as usize - 1]);
        assert!(last[0] != 0, "a successful write was lost");
        seen_in.add((wrote[0], wrote[1]));
    });
    seen.assert_has((true, true), "both writers in turn");
}

/// A writer killed between its two sequence stores (a crashed server, or a
/// client that died in its mailbox) leaves the word odd and a word half
/// written: readers return within their tries, never with the half-written
/// words.
#[test]
fn seqlock_dead_writer_never_hangs_or_tears_readers() {
    let seen = Seen::<Option<[u64; 2]>>::new();
    let seen_in = seen.clone();
    loom::model(move || {
        let cell = Arc::new(Cell::new());
        let dying = {
            let cell = cell.clone();
            thread::spawn(move || {
                // What write_exclusive does up to the data stores, then death.
                cell.seq.store(1, Ordering::Relaxed);
                loom::sync::atomic::fence(Ordering::Release);
                cell.words[0].store(9, Ordering::Relaxed);
            })
        };
        let reader = {
            let cell = cell.clone();
            thread::spawn(move || cell.try_read(READ_TRIES))
        };
        dying.join().unwrap();
        let copy = reader.join().unwrap();
        assert!(copy.is_none() || copy == Some([0, 0]), "torn: {copy:?}");
        assert_eq!(
            cell.try_read(READ_TRIES),
            None,
            "odd word must stay unreadable"
        );
        seen_in.add(copy);
    });
    seen.assert_has(None, "a reader after the death");
    seen.assert_has(Some([0, 0]), "a reader before the death");
}

/// A ring slot (capacity 1) receives records 0 then 1 while a reader wants
/// record 0: it gets record 0 whole, or learns it is not written yet or
/// already overwritten, never record 1's words or a mix.
#[test]
fn seqlock_numbered_slot_reader_gets_its_record_or_knows_why_not() {
    let seen = Seen::<Result<u64, Stale>>::new();
    let seen_in = seen.clone();
    bounded(3).check(move || {
        let cell = Arc::new(Cell::new());
        let writer = {
            let cell = cell.clone();
            thread::spawn(move || {
                for n in 0..2u64 {
                    write_numbered(&cell.seq, n, || {
                        for w in &cell.words {
                            w.store(10 + n, Ordering::Relaxed);
                        }
                    });
                }
            })
        };
        let reader = {
            let cell = cell.clone();
            thread::spawn(move || {
                read_numbered(&cell.seq, 0, || {
                    [
                        cell.words[0].load(Ordering::Relaxed),
                        cell.words[1].load(Ordering::Relaxed),
                    ]
                })
            })
        };
        writer.join().unwrap();
        let got = reader.join().unwrap().map(|w| {
            assert_eq!(w, [10, 10], "record 0 torn or from record 1");
            w[0]
        });
        seen_in.add(got);
    });
    seen.assert_has(Ok(10), "record 0 read whole");
    seen.assert_has(Err(Stale::NotYet), "record 0 not written yet");
    seen.assert_has(Err(Stale::Overwritten), "record 0 overwritten");
}
