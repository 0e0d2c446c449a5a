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
//! * `done_word*`: activation by done words: a node runs only after every
//!   upstream node released its cycle, sees their outputs (no data race),
//!   and a late release of an earlier cycle does not run it.
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
//!   #389): the models avoid mixing the two on one word.
#![cfg(loom)]

use std::collections::BTreeSet;
use std::fmt::Debug;

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicU32, Ordering};
use loom::sync::Arc;
use loom::thread;
use resound_shm::seqlock::{read_numbered, write_numbered, SeqArray, Stale};
use resound_shm::sync::{futex, switch};

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
// Activation by done words (resound_shm::cycle::release / readiness)
// ---------------------------------------------------------------------------

/// One upstream node: the output it writes for a cycle, then its done word
/// (as `cycle::release`: data, then the tag with release, then a wake).
struct Upstream {
    output: UnsafeCell<u64>,
    done: AtomicU32,
}

// SAFETY: `output` is written by the upstream thread only before it
// publishes `done` with release, and read by the downstream thread only
// after it saw that `done` with acquire; loom checks exactly that.
unsafe impl Sync for Upstream {}

impl Upstream {
    fn new() -> Self {
        Upstream {
            output: UnsafeCell::new(0),
            done: AtomicU32::new(0),
        }
    }

    /// Finishes cycle `tag` with `value` as its output.
    fn release(&self, tag: u32, value: u64) {
        // SAFETY: only this thread writes `output`, before publishing `done`.
        self.output.with_mut(|p| unsafe { *p = value });
        self.done.store(tag, Ordering::Release);
        futex::wake_all(&self.done);
    }
}

/// The downstream node's thread, as `RtContext::next_cycle`: look at every
/// upstream done word; sleep on one that has not released `tag` yet (until
/// it changes); run once all have. Returns the outputs it read and how many
/// times it had to sleep.
fn downstream(ups: &[Arc<Upstream>], tag: u32) -> (Vec<u64>, u32) {
    let mut slept = 0;
    loop {
        let behind = ups.iter().find_map(|u| {
            let d = u.done.load(Ordering::Acquire);
            (d != tag).then_some((u, d))
        });
        match behind {
            Some((u, seen)) => {
                slept += 1;
                futex::wait_changed(&u.done, seen, None);
            }
            None => {
                // SAFETY: every upstream published `done == tag` (acquire)
                // after writing its output, and writes nothing more.
                let got = ups
                    .iter()
                    .map(|u| u.output.with(|p| unsafe { *p }))
                    .collect();
                return (got, slept);
            }
        }
    }
}

/// One upstream, one downstream: the downstream runs only after the
/// upstream's release and then sees its output (no data race), whether it
/// arrived before or after the release.
#[test]
fn done_word_one_hop_publishes_the_output() {
    let seen = Seen::<bool>::new();
    let seen_in = seen.clone();
    loom::model(move || {
        let up = Arc::new(Upstream::new());
        let u = up.clone();
        let producer = thread::spawn(move || u.release(1, 42));
        let ups = vec![up.clone()];
        let consumer = thread::spawn(move || downstream(&ups, 1));
        producer.join().unwrap();
        let (got, slept) = consumer.join().unwrap();
        assert_eq!(got, vec![42], "the downstream saw the upstream's output");
        seen_in.add(slept > 0);
    });
    seen.assert_has(true, "downstream asleep before the release");
    seen.assert_has(false, "downstream arriving after the release");
}

/// Two upstream nodes releasing concurrently: the downstream runs once,
/// after both, and sees both outputs.
#[test]
fn done_words_two_upstreams_run_the_node_after_both() {
    let seen = Seen::<bool>::new();
    let seen_in = seen.clone();
    bounded(3).check(move || {
        let ups: Vec<_> = (0..2).map(|_| Arc::new(Upstream::new())).collect();
        let producers: Vec<_> = ups
            .iter()
            .enumerate()
            .map(|(i, u)| {
                let u = u.clone();
                thread::spawn(move || u.release(1, 10 + i as u64))
            })
            .collect();
        let mine = ups.clone();
        let consumer = thread::spawn(move || downstream(&mine, 1));
        for p in producers {
            p.join().unwrap();
        }
        let (got, slept) = consumer.join().unwrap();
        assert_eq!(got, vec![10, 11]);
        seen_in.add(slept > 0);
    });
    seen.assert_has(true, "downstream asleep before a release");
    seen.assert_has(false, "downstream arriving after both releases");
}

/// A late upstream still finishing cycle 1 when the downstream waits for
/// cycle 2 does not run it: the downstream runs cycle 2 only on the
/// release of 2 and sees that cycle's output.
#[test]
fn done_word_a_late_release_does_not_run_the_next_cycle() {
    loom::model(|| {
        let up = Arc::new(Upstream::new());
        let u = up.clone();
        let producer = thread::spawn(move || {
            u.release(1, 1);
            u.release(2, 2);
        });
        let ups = vec![up.clone()];
        let consumer = thread::spawn(move || downstream(&ups, 2));
        producer.join().unwrap();
        let (got, _) = consumer.join().unwrap();
        assert_eq!(got, vec![2], "ran on cycle 1's output");
    });
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
