//! Real SCHED_DEADLINE threads on this machine's kernel.
//!
//! Every test first checks [`deadline_permitted`]; when it is not, the test
//! prints `SKIP: <reason>` and returns. The tests take one global lock: they
//! all use the kernel's (global) admission bandwidth, so they must not run
//! concurrently with each other. Bandwidth a thread gives back becomes
//! admissible at its 0-lag time, up to one period after it left, so each
//! test starts by waiting 25 ms (2.5 periods of the 10 ms used here).

use resound_sched::policy::{
    get_attr, gettid, set_attr, SCHED_FLAG_RECLAIM, SCHED_FLAG_RESET_ON_FORK,
};
use resound_sched::{
    apply, current, deadline_permitted, drop_own_reservation, Policy, SchedError, SchedErrorKind,
};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Mutex, MutexGuard};
use std::thread::JoinHandle;

static KERNEL: Mutex<()> = Mutex::new(());

/// Takes the global lock, or returns None after printing why the test is skipped.
fn start(test: &str) -> Option<MutexGuard<'static, ()>> {
    if !deadline_permitted() {
        let why = match resound_sched::policy::deadline_probe() {
            Err(e) => e.to_string(),
            Ok(()) => "probe succeeded but reported not permitted".into(),
        };
        println!("SKIP: {test}: SCHED_DEADLINE not usable here: {why}");
        return None;
    }
    let g = KERNEL.lock().unwrap_or_else(|e| e.into_inner());
    std::thread::sleep(std::time::Duration::from_millis(25));
    Some(g)
}

/// Scheduler state letter of one of our threads ('R', 'S', ...).
fn thread_state(tid: i32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap_or_default();
    stat.rsplit(')')
        .next()
        .and_then(|s| s.trim().chars().next())
        .unwrap_or('?')
}

const MS: u64 = 1_000_000;

fn dl(runtime_ns: u64, period_ns: u64) -> Policy {
    Policy::Deadline {
        runtime_ns,
        deadline_ns: period_ns,
        period_ns,
        reclaim: false,
    }
}

type Job = Box<dyn FnOnce() -> Result<(), SchedError> + Send>;

/// A thread that sleeps on a channel and runs jobs on itself; on drop it
/// leaves any reservation itself (while running) and exits.
struct Holder {
    tid: i32,
    jobs: Option<Sender<Job>>,
    results: Receiver<Result<(), SchedError>>,
    thread: Option<JoinHandle<()>>,
}

impl Holder {
    fn new() -> Holder {
        let (jtx, jrx) = channel::<Job>();
        let (rtx, rrx) = channel();
        let (ttx, trx) = channel();
        let thread = std::thread::spawn(move || {
            ttx.send(gettid()).unwrap();
            while let Ok(job) = jrx.recv() {
                if rtx.send(job()).is_err() {
                    break;
                }
            }
            drop_own_reservation().expect("leaving own reservation");
        });
        let h = Holder {
            tid: trx.recv().unwrap(),
            jobs: Some(jtx),
            results: rrx,
            thread: Some(thread),
        };
        h.wait_sleeping();
        h
    }

    /// Waits until the thread sleeps in its channel.
    fn wait_sleeping(&self) {
        for _ in 0..10_000 {
            if thread_state(self.tid) == 'S' {
                return;
            }
            std::thread::sleep(std::time::Duration::from_micros(100));
        }
    }

    /// Runs `f` on the holder thread and waits for its result.
    fn run(
        &self,
        f: impl FnOnce() -> Result<(), SchedError> + Send + 'static,
    ) -> Result<(), SchedError> {
        self.jobs.as_ref().unwrap().send(Box::new(f)).unwrap();
        self.results.recv().unwrap()
    }

    /// The holder puts itself under `p`.
    fn take(&self, p: Policy) -> Result<(), SchedError> {
        self.run(move || apply(0, &p))
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        self.jobs.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn apply_by_tid_and_read_back() {
    let Some(_g) = start("apply_by_tid_and_read_back") else {
        return;
    };
    let h = Holder::new();
    assert_eq!(current(h.tid).unwrap(), Policy::Other);

    apply(h.tid, &Policy::Fifo { priority: 3 }).unwrap();
    assert_eq!(current(h.tid).unwrap(), Policy::Fifo { priority: 3 });

    // FIFO -> DEADLINE from outside is fine (only leaving DEADLINE from outside is not).
    let p = Policy::Deadline {
        runtime_ns: 500_000,
        deadline_ns: 5 * MS,
        period_ns: 10 * MS,
        reclaim: true,
    };
    apply(h.tid, &p).unwrap();
    assert_eq!(current(h.tid).unwrap(), p);
    let a = get_attr(h.tid).unwrap();
    assert_ne!(a.sched_flags & SCHED_FLAG_RESET_ON_FORK, 0, "{a:?}");
    assert_ne!(a.sched_flags & SCHED_FLAG_RECLAIM, 0, "{a:?}");
    assert_eq!(p.describe(), "SCHED_DEADLINE 500/5000/10000 us reclaim");

    // A budget change of a sleeping deadline thread.
    let q = Policy::Deadline {
        runtime_ns: 700_000,
        deadline_ns: 10 * MS,
        period_ns: 10 * MS,
        reclaim: false,
    };
    apply(h.tid, &q).unwrap();
    assert_eq!(current(h.tid).unwrap(), q);

    h.run(|| {
        drop_own_reservation()?;
        assert_eq!(current(0)?, Policy::Other);
        Ok(())
    })
    .unwrap();
    assert_eq!(current(h.tid).unwrap(), Policy::Other);

    let tid = h.tid;
    drop(h);
    // The thread is gone now.
    let e = current(tid).unwrap_err();
    assert_eq!(e.kind, SchedErrorKind::NoSuchThread, "{e}");
}

#[test]
fn invalid_parameters_are_einval() {
    let Some(_g) = start("invalid_parameters_are_einval") else {
        return;
    };
    let h = Holder::new();
    // runtime > deadline
    let e = apply(
        h.tid,
        &Policy::Deadline {
            runtime_ns: 2 * MS,
            deadline_ns: MS,
            period_ns: 10 * MS,
            reclaim: false,
        },
    )
    .unwrap_err();
    assert_eq!(
        (e.kind, e.errno),
        (SchedErrorKind::Invalid, libc::EINVAL),
        "{e}"
    );
    assert!(
        e.message.contains("SCHED_DEADLINE 2000/1000/10000 us"),
        "{e}"
    );
    assert_eq!(current(h.tid).unwrap(), Policy::Other);
}

#[test]
fn reset_on_fork_lets_a_deadline_thread_create_threads() {
    let Some(_g) = start("reset_on_fork_lets_a_deadline_thread_create_threads") else {
        return;
    };
    let h = Holder::new();
    // With the flag (always set by `apply`): the child starts as SCHED_OTHER.
    h.run(|| {
        apply(0, &dl(MS, 10 * MS))?;
        let child = std::thread::Builder::new()
            .spawn(|| (current(0), get_attr(0)))
            .expect("spawn with RESET_ON_FORK");
        let (policy, attr) = child.join().unwrap();
        assert_eq!(policy?, Policy::Other);
        assert_eq!(
            attr?.sched_flags & SCHED_FLAG_RESET_ON_FORK,
            0,
            "reset-on-fork is not inherited either"
        );
        assert!(matches!(current(0)?, Policy::Deadline { .. }));
        Ok(())
    })
    .unwrap();

    // Without the flag (raw sched_setattr): thread creation fails with EAGAIN.
    h.run(|| {
        let mut a = dl(MS, 10 * MS).to_attr();
        a.sched_flags = 0;
        set_attr(0, &a).expect("deadline without RESET_ON_FORK");
        let spawned = std::thread::Builder::new().spawn(|| ());
        // Leave the reservation before asserting, so a failure cannot leave it behind.
        drop_own_reservation()?;
        match spawned {
            Ok(_) => panic!("a SCHED_DEADLINE thread without RESET_ON_FORK created a thread"),
            Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EAGAIN), "{e}"),
        }
        // And as SCHED_OTHER again it can.
        std::thread::spawn(|| ()).join().unwrap();
        Ok(())
    })
    .unwrap();
}

#[test]
fn reservation_beyond_the_free_bandwidth_is_busy() {
    let Some(_g) = start("reservation_beyond_the_free_bandwidth_is_busy") else {
        return;
    };
    // 0.9 CPU each: at most two fit in 1.80 (2 CPUs x 0.95 - fair servers).
    let mut holders = Vec::new();
    let mut refused = None;
    for _ in 0..8 {
        let h = Holder::new();
        match h.take(dl(9 * MS, 10 * MS)) {
            Ok(()) => holders.push(h),
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    let ncpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let e = refused.expect("eight 0.9-CPU reservations admitted");
    assert_eq!(
        (e.kind, e.errno),
        (SchedErrorKind::Busy, libc::EBUSY),
        "{e}"
    );
    assert!(e.message.contains("admission refused"), "{e}");
    assert!(
        holders.len() <= ncpus,
        "{} x 0.9 admitted on {ncpus} CPUs",
        holders.len()
    );
    println!(
        "admitted {} x 0.9 CPU before EBUSY on {ncpus} CPUs: {e}",
        holders.len()
    );
    // Holders leave their reservations themselves on drop.
}

#[test]
fn drop_own_reservation_returns_the_bandwidth() {
    let Some(_g) = start("drop_own_reservation_returns_the_bandwidth") else {
        return;
    };
    let big = dl(9 * MS, 10 * MS);
    let a = Holder::new();
    if let Err(e) = a.take(big) {
        println!("SKIP: drop_own_reservation_returns_the_bandwidth: 0.9 CPU not free (other processes hold deadline bandwidth): {e}");
        return;
    }
    // Fill up so that a second 0.9 only fits if A's bandwidth comes back:
    // take the largest filler (in 1% steps) that is still admitted.
    let filler = Holder::new();
    let mut filled = None;
    for pct in (1..=95).rev() {
        if filler.take(dl(pct * MS / 10, 10 * MS)).is_ok() {
            filled = Some(pct);
            break;
        }
    }
    let probe = Holder::new();
    let e = probe
        .take(big)
        .expect_err("0.9 more admitted with 0.9 + filler held");
    assert_eq!(e.kind, SchedErrorKind::Busy, "{e}");
    println!(
        "held 0.90 + filler 0.{:02}; a further 0.90 refused: {e}",
        filled.unwrap_or(0)
    );

    a.run(|| {
        drop_own_reservation()?;
        assert_eq!(current(0)?, Policy::Other);
        Ok(())
    })
    .unwrap();
    assert_eq!(current(a.tid).unwrap(), Policy::Other);
    probe
        .take(big)
        .expect("0.9 admitted after A dropped its own reservation");
    assert_eq!(current(probe.tid).unwrap(), big);
}

#[test]
fn permission_errors() {
    // EPERM needs a thread without CAP_SYS_NICE (or another user's thread);
    // as root neither is reachable without dropping capabilities process-wide.
    // SAFETY: geteuid has no arguments and cannot fail.
    if unsafe { libc::geteuid() } == 0 {
        println!("SKIP: permission_errors: running as root, EPERM is not reachable here");
        return;
    }
    if !deadline_permitted() {
        let e = resound_sched::policy::deadline_probe()
            .as_ref()
            .unwrap_err();
        assert_eq!(e.kind, SchedErrorKind::Permission, "{e}");
    } else {
        println!(
            "SKIP: permission_errors: not root but SCHED_DEADLINE is permitted (CAP_SYS_NICE)"
        );
    }
}
