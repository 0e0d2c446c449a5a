//! Measures, on this machine, the kernel facts the scheduling design rests on:
//!
//! 1. SCHED_DEADLINE admission capacity (one thread, several threads);
//! 2. the cost of `sched_setattr` changing the budget of a sleeping deadline thread;
//! 3. how much CPU a busy deadline thread gets before it is throttled (overrun
//!    enforcement granularity, against the budget and the scheduler tick);
//! 4. whether a throttled thread keeps its old deadline across a budget change;
//! 5. whether switching a *sleeping* deadline thread to SCHED_OTHER from
//!    another thread leaks admission bandwidth.
//!
//! Run as root (or with CAP_SYS_NICE): `cargo run -p resound-sched --release --example kernel_pitfalls`.
//! Takes about 10 s. All reservations are released before it exits; if step 5
//! leaks kernel bandwidth, it rebuilds the root domain (a temporary cgroup-v1
//! cpuset) to get it back, and says whether that worked.

use resound_sched::ledger::SystemBandwidth;
use resound_sched::policy::{deadline_probe, gettid};
use resound_sched::{
    apply, current, deadline_permitted, drop_own_reservation, Policy, SchedErrorKind,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const US: u64 = 1_000;
const MS: u64 = 1_000_000;
/// Period used for the admission measurements.
const P: u64 = 10 * MS;

fn clock(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes it.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CLOCK_MONOTONIC (ns).
fn now() -> u64 {
    clock(libc::CLOCK_MONOTONIC)
}

/// CPU time of the calling thread (ns).
fn cpu() -> u64 {
    clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Busy-loops until the calling thread used `ns` more CPU.
fn burn(ns: u64) {
    let end = cpu() + ns;
    while cpu() < end {}
}

fn dl(runtime_ns: u64, period_ns: u64) -> Policy {
    Policy::Deadline {
        runtime_ns,
        deadline_ns: period_ns,
        period_ns,
        reclaim: false,
    }
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

fn pctl(v: &mut [u64], p: f64) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[resound_sched::predictor::nearest_rank(p, v.len()) - 1]
}

/// Scheduler state letter of one of our threads ('R', 'S', ...).
fn thread_state(tid: i32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).unwrap_or_default();
    stat.rsplit(')')
        .next()
        .and_then(|s| s.trim().chars().next())
        .unwrap_or('?')
}

type Job = Box<dyn FnOnce() + Send>;

/// A thread sleeping on a channel that runs jobs on itself. On drop it leaves
/// any reservation itself, while running (the safe way), and exits.
struct Holder {
    tid: i32,
    jobs: Option<Sender<Job>>,
    thread: Option<JoinHandle<()>>,
}

impl Holder {
    fn new() -> Holder {
        let (jtx, jrx) = channel::<Job>();
        let (ttx, trx) = channel();
        let thread = std::thread::spawn(move || {
            ttx.send(gettid()).unwrap();
            while let Ok(job) = jrx.recv() {
                job();
            }
            let _ = drop_own_reservation();
        });
        let tid = trx.recv().unwrap();
        Holder {
            tid,
            jobs: Some(jtx),
            thread: Some(thread),
        }
    }

    /// Runs `f` on the holder thread and waits for its result.
    fn run<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let (tx, rx) = channel();
        self.jobs
            .as_ref()
            .unwrap()
            .send(Box::new(move || tx.send(f()).unwrap()))
            .unwrap();
        rx.recv().unwrap()
    }

    /// Starts `f` on the holder thread without waiting.
    fn start(&self, f: impl FnOnce() + Send + 'static) {
        self.jobs.as_ref().unwrap().send(Box::new(f)).unwrap();
    }

    /// Waits until the thread sleeps (blocked in its channel).
    fn wait_sleeping(&self) {
        let t = Instant::now();
        while thread_state(self.tid) != 'S' && t.elapsed() < Duration::from_secs(1) {
            std::thread::sleep(Duration::from_micros(50));
        }
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

/// Largest bandwidth (period 10 ms, 5 us steps) the kernel admits for the
/// sleeping holder `h`, which is left holding it (or SCHED_OTHER if none).
/// Parameters change from outside only DEADLINE -> DEADLINE, never to OTHER.
fn max_admissible(h: &Holder) -> f64 {
    let (mut lo, mut hi) = (0u64, P + 1);
    if apply(h.tid, &dl(P, P)).is_ok() {
        return 1.0;
    }
    while hi - lo > 5 * US {
        let mid = ((lo + hi) / 2).max(1024);
        if apply(h.tid, &dl(mid, P)).is_ok() {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    if lo > 0 {
        apply(h.tid, &dl(lo, P)).expect("re-applying an admitted reservation");
    }
    lo as f64 / P as f64
}

/// Fills the free bandwidth with holders (each taking the most it can).
fn fill() -> Vec<(Holder, f64)> {
    let mut v = Vec::new();
    for _ in 0..16 {
        let h = Holder::new();
        let x = max_admissible(&h);
        if x < 0.001 {
            break;
        }
        v.push((h, x));
    }
    v
}

/// Free kernel bandwidth right now (CPUs, to 0.0005 per thread).
fn measure_free() -> (f64, usize) {
    let f = fill();
    (f.iter().map(|x| x.1).sum(), f.len())
}

fn section(title: &str) {
    println!("\n== {title}");
}

fn admission() -> f64 {
    section("1. admission capacity");
    let sys = SystemBandwidth::read();
    println!("expected from /proc and /sys: {sys}");
    let h = Holder::new();
    let mut single = 0.0;
    for step in 1..=20 {
        let x = step as f64 * 0.05;
        match apply(h.tid, &dl((x * P as f64) as u64, P)) {
            Ok(()) => single = x,
            Err(e) => {
                println!(
                    "one thread: {x:.2} CPU refused ({:?}, errno {})",
                    e.kind, e.errno
                );
                break;
            }
        }
    }
    let refined = max_admissible(&h);
    println!(
        "one thread: largest admitted {refined:.3} CPU (coarse {single:.2}){}",
        if refined >= 1.0 {
            " -- runtime = period is accepted: one thread may take a whole CPU"
        } else {
            ""
        }
    );
    drop(h);
    // Several threads of 0.45 CPU, then fill the rest.
    let mut hs = Vec::new();
    let refused = loop {
        let h = Holder::new();
        match apply(h.tid, &dl(4_500 * US, P)) {
            Ok(()) => hs.push(h),
            Err(e) => break e,
        }
        if hs.len() > 16 {
            panic!("more than 16 x 0.45 CPU admitted");
        }
    };
    println!(
        "0.45-CPU threads: {} admitted ({:.2} CPU), the next refused: {:?} (errno {})",
        hs.len(),
        hs.len() as f64 * 0.45,
        refused.kind,
        refused.errno
    );
    let rest = measure_free();
    println!(
        "  plus {:.3} CPU more in {} filler thread(s): total {:.3} CPU",
        rest.0,
        rest.1,
        hs.len() as f64 * 0.45 + rest.0
    );
    drop(hs);
    let (free, n) = measure_free();
    println!(
        "greedy fill from empty: {free:.3} CPU in {n} threads ({:.3} per CPU of {} CPUs); predicted {:.3}",
        free / sys.cpus as f64,
        sys.cpus,
        sys.capacity()
    );
    free
}

fn setattr_cost() {
    section(
        "2. sched_setattr cost (budget change of a sleeping deadline thread, from another thread)",
    );
    let h = Holder::new();
    apply(h.tid, &dl(MS, P)).unwrap();
    h.wait_sleeping();
    let mut t = Vec::with_capacity(1000);
    for i in 0..1000 {
        let p = dl(if i % 2 == 0 { 1_100 * US } else { MS }, P);
        let a = now();
        apply(h.tid, &p).unwrap();
        t.push(now() - a);
    }
    let med = pctl(&mut t, 50.0);
    let p99 = pctl(&mut t, 99.0);
    let max = pctl(&mut t, 100.0);
    println!(
        "1000 calls: median {:.2} us, p99 {:.2} us, max {:.2} us",
        med as f64 / 1e3,
        p99 as f64 / 1e3,
        max as f64 / 1e3
    );
    // The same on the calling (running) deadline thread itself.
    let own = h.run(|| {
        let mut t = Vec::with_capacity(1000);
        for i in 0..1000 {
            let p = dl(if i % 2 == 0 { 1_100 * US } else { MS }, P);
            let a = now();
            apply(0, &p).unwrap();
            t.push(now() - a);
        }
        t
    });
    let mut own = own;
    println!(
        "on itself (running):  median {:.2} us, p99 {:.2} us",
        pctl(&mut own, 50.0) as f64 / 1e3,
        pctl(&mut own, 99.0) as f64 / 1e3
    );
}

fn overrun() {
    section("3. overrun enforcement: runtime 1 ms / period 10 ms, busy loop");
    let h = Holder::new();
    let (segs, gaps, cpu_total, wall) = h.run(|| {
        apply(0, &dl(MS, P)).unwrap();
        let mut segs = Vec::with_capacity(1000);
        let mut gaps = Vec::with_capacity(1000);
        let (start, cpu0) = (now(), cpu());
        let (mut last, mut seg0) = (start, cpu0);
        loop {
            let t = now();
            if t - last > 200 * US {
                let c = cpu();
                segs.push(c - seg0);
                gaps.push(t - last);
                seg0 = c;
            }
            last = t;
            if t - start > 500 * MS {
                break;
            }
        }
        let r = (segs, gaps, cpu() - cpu0, now() - start);
        drop_own_reservation().unwrap();
        r
    });
    let (mut segs, mut gaps) = (segs, gaps);
    println!(
        "{} throttles in {:.0} ms; CPU got between throttles: median {:.2} ms, max {:.2} ms, min {:.2} ms (budget 1 ms, tick 4 ms at HZ=250)",
        segs.len(),
        ms(wall),
        ms(pctl(&mut segs, 50.0)),
        ms(pctl(&mut segs, 100.0)),
        ms(pctl(&mut segs, 0.0))
    );
    println!(
        "throttled for: median {:.2} ms, max {:.2} ms; long-run share {:.1}% of a CPU (reserved 10%)",
        ms(pctl(&mut gaps, 50.0)),
        ms(pctl(&mut gaps, 100.0)),
        100.0 * cpu_total as f64 / wall as f64
    );
    let over = segs.iter().filter(|&&s| s > MS + 100 * US).count();
    println!(
        "=> {over}/{} runs overran the 1 ms budget by > 0.1 ms: the overrun is noticed at the next tick \
         (up to 4 ms late), then repaid by longer throttling",
        segs.len()
    );
}

fn throttled_deadline() {
    section("4. budget change while throttled: runtime 10 ms / period 200 ms, busy; changed to 1 ms / 10 ms while throttled");
    let last_seen = Arc::new(AtomicU64::new(0));
    let h = Holder::new();
    let seen = last_seen.clone();
    let (tx, rx) = channel();
    h.start(move || {
        apply(0, &dl(10 * MS, 200 * MS)).unwrap();
        let t0 = now();
        seen.store(t0, Ordering::Relaxed);
        let mut last = t0;
        let mut events = Vec::with_capacity(8); // (throttled at, resumed at, cpu at resume)
        loop {
            let t = now();
            seen.store(t, Ordering::Relaxed);
            if t - last > MS {
                events.push((last - t0, t - t0, cpu()));
                if events.len() == 2 {
                    break;
                }
            }
            last = t;
            if t - t0 > 2_000 * MS {
                break;
            }
        }
        drop_own_reservation().unwrap();
        tx.send((t0, events)).unwrap();
    });
    // Wait until it is throttled (not seen running for 3 ms), then change its budget.
    let mut change = None;
    let begin = Instant::now();
    while begin.elapsed() < Duration::from_secs(1) {
        let s = last_seen.load(Ordering::Relaxed);
        if s != 0 && now() - s > 3 * MS {
            let t = now();
            let r = apply(h.tid, &dl(MS, P));
            change = Some((t, r));
            break;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let (t0, ev) = rx
        .recv_timeout(Duration::from_secs(5))
        .expect("throttle probe finished");
    let Some((tc, r)) = change else {
        println!("the thread was never seen throttled: no measurement");
        return;
    };
    println!(
        "change applied at t0 + {:.1} ms: {}",
        ms(tc - t0),
        r.map_or_else(|e| e.to_string(), |()| "ok".into())
    );
    if ev.len() < 2 {
        println!("events: {ev:?} (incomplete)");
        return;
    }
    let (th1, re1, _) = ev[0];
    let (th2, _, _) = ev[1];
    println!(
        "throttled at t0 + {:.1} ms (10 ms budget + overrun), resumed at t0 + {:.1} ms",
        ms(th1),
        ms(re1)
    );
    println!(
        "  old deadline / replenishment: t0 + 200 ms; under the new 10 ms period it could have run again by t0 + {:.1} ms",
        ms(tc - t0 + P)
    );
    println!(
        "  after resuming it ran {:.1} ms before the next throttle (new budget 1 ms + overrun)",
        ms(th2 - re1)
    );
    if re1 + 5 * MS >= 200 * MS {
        println!("=> observed: the throttled thread kept its OLD deadline: the new parameters took effect only at its old replenishment time");
    } else {
        println!("=> observed: the thread resumed before its old deadline: the new parameters took effect at once");
    }
}

/// Step 5. Returns the bandwidth leaked (CPUs, from the before/after measurement).
fn sleeping_switch_leak(free_before: f64) -> f64 {
    section("5. switching a deadline thread to SCHED_OTHER: who may do it, and when is the bandwidth back");
    let b = 0.02;
    let res = dl((b * P as f64) as u64, P); // 200 us / 10 ms
                                            // Fill everything but `b`: a placeholder holds `b` while fillers take the rest.
    let placeholder = Holder::new();
    placeholder
        .run(move || apply(0, &res))
        .expect("placeholder reservation");
    let fillers = fill();
    let residual = {
        let h = Holder::new();
        max_admissible(&h)
    };
    drop(placeholder); // leaves itself, having used nothing: returned at once
    println!(
        "machine filled to {:.3} CPU + one slot of {b:.2} (residual free {:.4}); probes ask {b:.2}",
        fillers.iter().map(|x| x.1).sum::<f64>(),
        residual
    );
    let probe = || {
        let u = Holder::new();
        let r = u.run(move || apply(0, &res));
        r.map_or_else(
            |e| {
                if e.kind == SchedErrorKind::Busy {
                    "REFUSED (EBUSY)".to_string()
                } else {
                    e.to_string()
                }
            },
            |()| "admitted".to_string(),
        )
        // `u` leaves its reservation itself on drop (used nothing: returned at once).
    };

    // a) The thread drops its own reservation while running, after using 80% of its budget.
    let t = Holder::new();
    t.run(move || {
        apply(0, &res).unwrap();
        burn(160 * US);
        drop_own_reservation().unwrap();
    });
    let at_once = probe();
    std::thread::sleep(Duration::from_millis(20));
    let later = probe();
    println!("a) own drop while running (80% of the budget used): probe at once: {at_once}; 20 ms later: {later}");
    drop(t);

    // b) Switched from another thread right after it went to sleep (0-lag timer still armed).
    let t = Holder::new();
    t.run(move || {
        apply(0, &res).unwrap();
        burn(160 * US);
    });
    t.wait_sleeping();
    apply(t.tid, &Policy::Other).unwrap();
    let at_once = probe();
    std::thread::sleep(Duration::from_millis(20));
    let later = probe();
    println!("b) switched by another thread <1 ms after it slept (80% used): probe at once: {at_once}; 20 ms later: {later}");
    drop(t);

    // c) Switched from another thread after sleeping 50 ms (past its 0-lag time), repeated.
    let rounds = 5;
    let mut failed_at = None;
    for round in 1..=rounds {
        let t = Holder::new();
        let took = t.run(move || {
            let r = apply(0, &res);
            burn(160 * US);
            r
        });
        if let Err(e) = took {
            println!("c) round {round}: the thread itself could not get its {b:.2}: {e}");
            failed_at = Some(round);
            break;
        }
        t.wait_sleeping();
        std::thread::sleep(Duration::from_millis(50));
        apply(t.tid, &Policy::Other).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let p = probe();
        println!("c) round {round}: switched by another thread after sleeping 50 ms; probe 20 ms later: {p}");
        drop(t);
        if p != "admitted" {
            failed_at = Some(round);
            break;
        }
    }
    drop(fillers);
    std::thread::sleep(Duration::from_millis(20));
    let (free_after, _) = measure_free();
    let leaked = free_before - free_after;
    println!("free bandwidth: {free_before:.3} CPU before step 5, {free_after:.3} after ({leaked:+.3} CPU lost)");
    match failed_at {
        Some(r) => println!(
            "=> observed: admission failed at round {r} of {rounds}: the bandwidth of a sleeping thread switched to SCHED_OTHER \
             by another thread was NOT returned (a permanent leak of the kernel's admission accounting)"
        ),
        None => println!("=> observed: no leak in {rounds} rounds"),
    }
    leaked
}

/// Rebuilds the scheduler's root domains (which recomputes deadline
/// admission accounting from the existing deadline tasks) by creating and
/// removing an empty cgroup-v1 cpuset spanning all CPUs.
fn rebuild_root_domain() -> Result<(), String> {
    let root = "/sys/fs/cgroup/cpuset";
    let cpus = std::fs::read_to_string(format!("{root}/cpuset.cpus"))
        .map_err(|e| format!("{root}: {e}"))?;
    let mems = std::fs::read_to_string(format!("{root}/cpuset.mems"))
        .map_err(|e| format!("{root}: {e}"))?;
    let dir = format!("{root}/resound-rebuild-{}", std::process::id());
    std::fs::create_dir(&dir).map_err(|e| format!("mkdir {dir}: {e}"))?;
    let r = std::fs::write(format!("{dir}/cpuset.cpus"), cpus.trim())
        .and_then(|()| std::fs::write(format!("{dir}/cpuset.mems"), mems.trim()))
        .map_err(|e| format!("{dir}: {e}"));
    std::fs::remove_dir(&dir).map_err(|e| format!("rmdir {dir}: {e}"))?;
    r
}

fn main() {
    let started = Instant::now();
    println!(
        "kernel_pitfalls on {}",
        std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .unwrap_or_default()
            .trim()
    );
    if !deadline_permitted() {
        let why = deadline_probe()
            .as_ref()
            .err()
            .map_or(String::new(), |e| e.to_string());
        println!("SKIP: SCHED_DEADLINE is not usable here: {why}");
        return;
    }
    if std::env::args().nth(1).as_deref() == Some("scratch") {
        let f0 = measure_free().0;
        println!("start {f0:.3}");
        let probe_like = |busy: u64| {
            std::thread::spawn(move || {
                apply(0, &dl(MS, 100 * MS)).unwrap();
                burn(busy);
                drop_own_reservation().unwrap();
            })
            .join()
            .unwrap();
        };
        for (name, busy, wait_ms) in [("probe 0us", 0u64, 0u64), ("probe 0us", 0, 50), ("probe 5us", 5 * US, 0), ("probe 5us", 5 * US, 150), ("probe 500us", 500 * US, 0), ("probe 500us", 500 * US, 150)] {
            for _ in 0..3 {
                let a = measure_free().0;
                probe_like(busy);
                std::thread::sleep(Duration::from_millis(wait_ms));
                let b = measure_free().0;
                std::thread::sleep(Duration::from_millis(150));
                let c = measure_free().0;
                println!("{name} wait {wait_ms} ms: before {a:.3} after {b:.3} 150ms later {c:.3}");
            }
        }
        return;
    }
    if std::env::args().nth(1).as_deref() == Some("free") {
        let (f, n) = measure_free();
        println!("free SCHED_DEADLINE bandwidth: {f:.3} CPU ({n} threads)");
        return;
    }
    println!(
        "main thread: {}",
        current(0).map_or_else(|e| e.to_string(), |p| p.describe())
    );
    let free = admission();
    setattr_cost();
    overrun();
    throttled_deadline();
    let leaked = sleeping_switch_leak(free);
    if leaked > 0.001 {
        section("repair");
        match rebuild_root_domain() {
            Ok(()) => {
                let (after, _) = measure_free();
                println!(
                    "rebuilt the root domain (temporary cpuset): free bandwidth now {after:.3} CPU ({})",
                    if (after - free).abs() < 0.002 { "leak recovered" } else { "NOT recovered" }
                );
            }
            Err(e) => println!(
                "could not rebuild the root domain ({e}); {leaked:.3} CPU of deadline bandwidth stays lost until a \
                 cpuset change, CPU hotplug or reboot"
            ),
        }
    }
    println!("\ntotal time {:.1} s", started.elapsed().as_secs_f64());
}
