//! A client that ran a cycle late finds the next one ready at once; it
//! holds that cycle back until the client it feeds has taken the block it
//! just released, instead of overwriting it unread. A client on time is
//! never held back by a client it feeds, however late that one runs.
//!
//! Observed as a user would: client a numbers the blocks it writes, client
//! b reads the numbers and counts the ones it never saw, and one of them
//! runs late on purpose now and then. b runs on another CPU than a (a
//! wake-up there takes longer than a's next, short, cycle).

mod common;
use common::*;
use resound_client::{Control, PortFlags, PortKind, ProcessScope};
use resound_shm::time::monotonic_ns;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Frames per period: 21.3 ms at 48 kHz.
const FRAMES: u64 = 1024;
const PERIOD: Duration = Duration::from_micros(FRAMES * 1_000_000 / 48_000);
/// The late client runs late in every this many of its blocks, by 1.3
/// periods: the driver has started the next cycle when it ends the block.
const LATE_EVERY: u64 = 10;
/// How long a test watches, and the fewest late blocks it must see.
const WATCH: Duration = Duration::from_secs(4);
const MIN_LATE: u64 = 8;
/// a's callback began this long after its cycle's start: held back (a
/// hold lasts up to a quarter period; a wake-up takes far less).
const HELD_BACK: Duration = Duration::from_micros(FRAMES * 1_000_000 / 48_000 / 5);

/// Which client runs late now and then.
#[derive(Clone, Copy, PartialEq)]
enum LateOne {
    A,
    B,
}

/// What the clients counted: blocks b read, numbers b never saw, late
/// blocks, and a's cycles that began [`HELD_BACK`] or more after their start.
#[derive(Default)]
struct Counts {
    read: AtomicU64,
    missed: AtomicU64,
    late: AtomicU64,
    a_held_back: AtomicU64,
}

impl Counts {
    fn now(&self) -> [u64; 4] {
        [&self.read, &self.missed, &self.late, &self.a_held_back].map(|c| c.load(Ordering::Acquire))
    }
}

#[test]
fn a_late_client_lets_the_client_it_feeds_take_its_block_before_writing_the_next() {
    let test = "a_late_client_lets_the_client_it_feeds_take_its_block_before_writing_the_next";
    let Some([read, missed, _, _]) = watch_chain(test, LateOne::A) else {
        return;
    };
    assert!(read > 100, "b ran too rarely: {read}");
    assert_eq!(missed, 0, "b never saw {missed} of a's blocks");
}

#[test]
fn an_on_time_client_is_not_held_back_by_a_late_client_it_feeds() {
    let test = "an_on_time_client_is_not_held_back_by_a_late_client_it_feeds";
    let Some([_, _, late, held_back]) = watch_chain(test, LateOne::B) else {
        return;
    };
    // A machine stall may delay a cycle's start as much, now and then;
    // a hold would delay one after each of b's late blocks.
    assert!(
        held_back * 4 < late,
        "a began {held_back} cycles {HELD_BACK:?} late or more, for b's {late} late blocks"
    );
}

/// Runs a → b (pinned to two CPUs) on a fresh server with `late_one`
/// running late now and then, and returns what the clients counted over
/// [`WATCH`], once it checked that `late_one` was late often enough to
/// judge; None, with a printed reason, on a machine with one CPU.
fn watch_chain(test: &str, late_one: LateOne) -> Option<[u64; 4]> {
    if !two_cpus_or_skip(test) {
        return None;
    }
    let _serial = one_at_a_time();
    let frames = FRAMES.to_string();
    let srv = Srv::start(&["-r", "-d", "dummy", "-p", &frames]);
    let counts = Arc::new(Counts::default());
    let _clients = numbered_chain(&srv, counts.clone(), late_one);
    wait_for(
        "a's and b's process threads",
        Duration::from_secs(5),
        || {
            thread_file("resound-rt:a", "stat").is_some()
                && thread_file("resound-rt:b", "stat").is_some()
        },
    );
    pin_thread("resound-rt:a", 0);
    pin_thread("resound-rt:b", 1);
    std::thread::sleep(Duration::from_millis(300));
    let before = counts.now();
    std::thread::sleep(WATCH);
    let after = counts.now();
    let seen = [0, 1, 2, 3].map(|i| after[i] - before[i]);
    let [read, missed, late, held_back] = seen;
    let who = if late_one == LateOne::A { "a" } else { "b" };
    eprintln!(
        "{test}: b read {read} blocks, missed {missed}; {who} late {late} times; \
         a began {held_back} cycles held back"
    );
    assert!(
        late >= MIN_LATE,
        "{who} ran late too rarely to judge: {late}"
    );
    Some(seen)
}

/// Sleeps 1.3 periods in every [`LATE_EVERY`]th call of the client that
/// runs late, counting it in `counts`.
fn maybe_late(calls: &mut u64, counts: &Counts) {
    *calls += 1;
    if calls.is_multiple_of(LATE_EVERY) {
        counts.late.fetch_add(1, Ordering::Release);
        std::thread::sleep(PERIOD * 13 / 10);
    }
}

/// Clients a → b of `srv`: a writes its block number into every sample of
/// its output and counts its cycles that began held back; b counts the
/// blocks it reads and the numbers it skipped; `late_one` runs late now
/// and then ([`maybe_late`]).
fn numbered_chain(
    srv: &Srv,
    counts: Arc<Counts>,
    late_one: LateOne,
) -> (resound_client::Client, resound_client::Client) {
    let a = srv.client("a");
    let b = srv.client("b");
    let mut out = a
        .register_port("out", PortKind::Audio, PortFlags::OUTPUT)
        .unwrap();
    let input = b
        .register_port("in", PortKind::Audio, PortFlags::INPUT)
        .unwrap();
    let a_counts = counts.clone();
    let mut number = 0u64;
    a.activate(move |ps: &mut ProcessScope| {
        let began = Duration::from_nanos(monotonic_ns().saturating_sub(ps.cycle_start_ns()));
        if began >= HELD_BACK {
            a_counts.a_held_back.fetch_add(1, Ordering::Release);
        }
        out.audio_out(ps).fill((number + 1) as f32);
        if late_one == LateOne::A {
            maybe_late(&mut number, &a_counts);
        } else {
            number += 1;
        }
        Control::Continue
    })
    .unwrap();
    let (mut last, mut calls) = (0u64, 0u64);
    b.activate(move |ps: &mut ProcessScope| {
        let got = input.audio_in(ps)[0] as u64;
        // 0: silence before a's first block reached b.
        if got > last && last > 0 {
            counts.missed.fetch_add(got - last - 1, Ordering::Release);
        }
        if got > last {
            counts.read.fetch_add(1, Ordering::Release);
        }
        last = last.max(got);
        if late_one == LateOne::B {
            maybe_late(&mut calls, &counts);
        }
        Control::Continue
    })
    .unwrap();
    a.connect("a:out", "b:in").unwrap();
    (a, b)
}
