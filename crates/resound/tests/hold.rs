//! A client that ran a cycle late finds the next one ready at once; it
//! holds that cycle back until the client it feeds has taken the block it
//! just released, instead of overwriting it unread.
//!
//! Observed as a user would: client a numbers the blocks it writes and now
//! and then runs late on purpose; client b, on another CPU (a wake-up
//! there takes longer than a's next, short, cycle), reads the numbers and
//! counts the ones it never saw.

mod common;
use common::*;
use resound_client::{Control, PortFlags, PortKind, ProcessScope};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Frames per period: 21.3 ms at 48 kHz.
const FRAMES: u64 = 1024;
const PERIOD: Duration = Duration::from_micros(FRAMES * 1_000_000 / 48_000);
/// a runs late in every this many of its blocks, by 1.3 periods: the
/// driver has started the next cycle when a releases the late block.
const LATE_EVERY: u64 = 10;
/// How long the test watches, and the fewest late blocks it must see.
const WATCH: Duration = Duration::from_secs(4);
const MIN_LATE: u64 = 8;

/// What b saw: blocks read, numbers it never saw, and a's late blocks.
#[derive(Default)]
struct Seen {
    read: AtomicU64,
    missed: AtomicU64,
    late: AtomicU64,
}

#[test]
fn a_late_client_lets_the_client_it_feeds_take_its_block_before_writing_the_next() {
    let test = "a_late_client_lets_the_client_it_feeds_take_its_block_before_writing_the_next";
    if !two_cpus_or_skip(test) {
        return;
    }
    let _serial = one_at_a_time();
    let frames = FRAMES.to_string();
    let srv = Srv::start(&["-r", "-d", "dummy", "-p", &frames]);
    let seen = Arc::new(Seen::default());
    let _clients = numbered_chain(&srv, seen.clone());
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
    let counts = || [&seen.read, &seen.missed, &seen.late].map(|c| c.load(Ordering::Acquire));
    let before = counts();
    std::thread::sleep(WATCH);
    let after = counts();
    let [read, missed, late] = [0, 1, 2].map(|i| after[i] - before[i]);
    eprintln!("{test}: b read {read} blocks, missed {missed}; a was late {late} times");
    assert!(late >= MIN_LATE, "a ran late too rarely to judge: {late}");
    assert!(read > 100, "b ran too rarely: {read}");
    assert_eq!(missed, 0, "b never saw {missed} of a's blocks");
}

/// Clients a → b of `srv`: a writes its block number into every sample of
/// its output and sleeps 1.3 periods in every [`LATE_EVERY`]th block; b
/// counts in `seen` the blocks it reads and the numbers it skipped.
fn numbered_chain(srv: &Srv, seen: Arc<Seen>) -> (resound_client::Client, resound_client::Client) {
    let a = srv.client("a");
    let b = srv.client("b");
    let mut out = a
        .register_port("out", PortKind::Audio, PortFlags::OUTPUT)
        .unwrap();
    let input = b
        .register_port("in", PortKind::Audio, PortFlags::INPUT)
        .unwrap();
    let late = seen.clone();
    let mut number = 0u64;
    a.activate(move |ps: &mut ProcessScope| {
        number += 1;
        out.audio_out(ps).fill(number as f32);
        if number.is_multiple_of(LATE_EVERY) {
            late.late.fetch_add(1, Ordering::Release);
            std::thread::sleep(PERIOD * 13 / 10);
        }
        Control::Continue
    })
    .unwrap();
    let mut last = 0u64;
    b.activate(move |ps: &mut ProcessScope| {
        let got = input.audio_in(ps)[0] as u64;
        // 0: silence before a's first block reached b.
        if got > last && last > 0 {
            seen.missed.fetch_add(got - last - 1, Ordering::Release);
        }
        if got > last {
            seen.read.fetch_add(1, Ordering::Release);
        }
        last = last.max(got);
        Control::Continue
    })
    .unwrap();
    a.connect("a:out", "b:in").unwrap();
    (a, b)
}
