//! The end-of-chain poller: a SCHED_FIFO thread in the experiment process
//! that reads the activation records of the graph once per cycle (through an
//! opened but never activated probe client) and logs when the last client
//! finished each cycle and the CPU time each graph thread used. It runs on
//! its own thread (`exp-poller`), started and joined by [`Poller`].

use resound_shm::time::{monotonic_ns, sleep_until};
use resound_shm::{Timer, View};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// SCHED_FIFO priority of the in-process poller: above the competing task,
/// so that its reads are never late; it runs a few microseconds per cycle.
const POLLER_PRIO: i32 = 60;
/// Audio cycles the end-of-chain poller waits for a late last client before
/// counting the cycle as lost.
const GIVE_UP_CYCLES: u64 = 3;

/// What the poller measured.
#[derive(Debug, Default)]
pub(super) struct ChainLog {
    /// End-of-chain times (ns), one per measured cycle.
    pub ends: Vec<u64>,
    /// Cycles in which the last client never finished (skipped or given up).
    pub lost: u64,
    /// Cycles the poller could not judge (it was too late to read them).
    pub unobserved: u64,
    /// Per thread (in `cpu_slots` order): sum of `cpu_ns` samples, one per cycle.
    pub cpu_sum: Vec<u128>,
    /// Cycles in the `cpu_sum` samples.
    pub cpu_n: u64,
    /// Scheduling the poller got.
    pub sched: String,
}

/// How the last client's record stands for a cycle `k` that is over.
#[derive(Debug, PartialEq)]
enum Judged {
    /// It finished `k` at this CLOCK_MONOTONIC time.
    Done(u64),
    /// It is (or may still be) running `k`.
    Running,
    /// It cannot finish `k` any more: never triggered for it, or it moved on.
    Lost,
}

fn judge(rec: &resound_shm::ActivationRecord, k: u64) -> Judged {
    let c1 = rec.cycle.load(Ordering::Acquire);
    let f1 = rec.finished_cycle.load(Ordering::Acquire);
    let ns = rec.finish_ns.load(Ordering::Acquire);
    let f2 = rec.finished_cycle.load(Ordering::Acquire);
    let c2 = rec.cycle.load(Ordering::Acquire);
    if f1 == k && f2 == k {
        // finish_ns belongs to `k` unless the node finished a later cycle
        // between the two loads of finished_cycle (nanoseconds apart).
        return Judged::Done(ns);
    }
    if f2 > k {
        return Judged::Lost;
    }
    if c1 >= k || c2 >= k {
        // Triggered for k (still running it), or for a later cycle while
        // still on an earlier one: wait and see.
        return Judged::Running;
    }
    // Never triggered for k: the chain broke upstream, and once the next
    // cycle is armed nothing can trigger it for k any more.
    Judged::Lost
}

/// The timer fields, read under the header's `timer_seq` seqlock without
/// spinning: this thread runs at a higher priority than the driver, so it
/// sleeps while the driver is in the middle of writing them.
///
/// One attempt at a time through the shared-memory seqlock
/// (`ControlHeader::try_timer`), sleeping 20 us between attempts.
fn read_timer(view: &View) -> Timer {
    loop {
        if let Some(t) = view.header().try_timer(1) {
            return t;
        }
        sleep_until(monotonic_ns() + 20_000);
    }
}

/// Polls until `stop`: the end-of-chain time of every cycle (finish of the
/// record at `last` minus the cycle's start) and, once per cycle, the sum of
/// `cpu_ns` of the records at `cpu_slots`. Wakes once per cycle, a little
/// after the next cycle began, and every 150 us while the last client is late
/// (it needs more CPU than that per cycle, so no finish goes unseen).
fn poll_chain(
    view: &View,
    last: u32,
    cpu_slots: &[u32],
    cap: usize,
    stop: &AtomicBool,
) -> ChainLog {
    let mut log = ChainLog {
        ends: Vec::with_capacity(cap),
        ..Default::default()
    };
    log.sched = match resound_sched::apply(
        0,
        &resound_sched::Policy::Fifo {
            priority: POLLER_PRIO,
        },
    ) {
        Ok(()) => resound_sched::describe_thread(0),
        Err(e) => format!("SCHED_OTHER (SCHED_FIFO {POLLER_PRIO} refused: {e})"),
    };
    let Some(rec) = view.record(last) else {
        return log;
    };
    let recs: Vec<_> = cpu_slots.iter().map(|&s| view.record(s)).collect();
    log.cpu_sum = vec![0; recs.len()];
    let period = view.header().period_ns.load(Ordering::Relaxed).max(1);
    let offset = period / 8;
    // Cycles waiting to be judged: (cycle, start ns).
    let mut pending: VecDeque<(u64, u64)> = VecDeque::with_capacity(16);
    // Start with the first cycle that begins after now.
    let mut seen = read_timer(view).cycle;
    while !stop.load(Ordering::Acquire) {
        let t = read_timer(view);
        if t.cycle > seen {
            log.unobserved += t.cycle - seen - 1;
            pending.push_back((t.cycle, t.start_ns));
            seen = t.cycle;
            for (sum, r) in log.cpu_sum.iter_mut().zip(&recs) {
                *sum += r.map_or(0, |r| r.last_cpu().1) as u128;
            }
            log.cpu_n += 1;
        }
        let mut waiting = false;
        while let Some(&(k, start)) = pending.front() {
            if k >= t.cycle {
                break;
            }
            match judge(rec, k) {
                Judged::Done(ns) => {
                    if log.ends.len() < cap {
                        log.ends.push(ns.saturating_sub(start));
                    }
                }
                Judged::Running if t.cycle <= k + GIVE_UP_CYCLES => {
                    waiting = true;
                    break;
                }
                Judged::Running | Judged::Lost => log.lost += 1,
            }
            pending.pop_front();
        }
        if waiting {
            sleep_until(monotonic_ns() + 150_000);
        } else {
            sleep_until(t.next_start_ns.max(t.start_ns + period) + offset);
        }
    }
    log
}

/// The poller thread; stopped and joined on drop.
pub(super) struct Poller {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<ChainLog>>,
}

impl Poller {
    /// Starts the poller thread on the records of `probe`'s view: the end of
    /// the chain is the record at `last`, the CPU time is summed over the
    /// records at `slots`; it keeps at most `cap` end-of-chain times.
    pub(super) fn start(
        probe: resound_client::Client,
        last: u32,
        slots: Vec<u32>,
        cap: usize,
    ) -> Result<Poller, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::Builder::new()
            .name("exp-poller".into())
            .spawn(move || poll_chain(probe.view(), last, &slots, cap, &s))
            .map_err(|e| format!("poller thread: {e}"))?;
        Ok(Poller {
            stop,
            handle: Some(handle),
        })
    }

    /// Stops the thread and returns what it measured.
    pub(super) fn finish(mut self) -> Result<ChainLog, String> {
        self.stop.store(true, Ordering::Release);
        self.handle
            .take()
            .map(|h| {
                h.join()
                    .map_err(|_| "the poller thread panicked".to_string())
            })
            .unwrap_or_else(|| Err("no poller".into()))
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}
