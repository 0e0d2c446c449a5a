//! Putting an unmodified process's threads under SCHED_DEADLINE
//! reservations with period T = its period, adapting their budgets every
//! T_sample with a [`crate::lfs`] controller, and taking them off again.
//!
//! The loop ([`run`]) wakes once per reservation period: it reads each
//! thread's CPU time (for the percentile controller), and every T_sample it
//! builds each thread's [`crate::lfs::Observation`], steps its controller,
//! asks the [`Admission`] ledger before a budget grows, calls
//! `sched_setattr` only when the budget moved past the threshold, adopts
//! threads the process created since, and prints a status line. With
//! [`Options::redetect_ns`] a background [`Redetector`] traces the process
//! again every few seconds; when the period it finds differs from T by more
//! than [`Options::tolerance`], the loop re-tunes every reservation to the
//! new period (budget scaled to keep the bandwidth, admission asked again;
//! refused: the old reservation stays). Each thread's deadline misses
//! (postponed scheduling deadlines, see `thread`) are counted once per
//! period and shown in the status line. It ends when
//! the process exits, when `keep_going` says so (a `run` child reaped), or on
//! SIGINT/SIGTERM; then every thread still alive goes back to the policy it
//! had before and its bandwidth is released.
//!
//! Threads: everything runs on the caller's thread (the `resound legacy`
//! command's main thread) except the re-detection traces, which run on the
//! [`Redetector`]'s thread; nothing here is real-time.

mod admission;
pub mod procfs;
pub mod redetect;
mod retune;
pub mod signals;
mod status;
mod thread;

pub use admission::{Admission, LocalLedger};
pub use redetect::{detect_once, Detected, Redetector};
pub use thread::Reserved;

use crate::lfs::ControllerKind;
use resound_sched::SchedErrorKind;
use std::time::{Duration, Instant};

/// How to attach.
#[derive(Debug, Clone)]
pub struct Options {
    /// Reservation period T (ns).
    pub period_ns: u64,
    /// The threads to reserve (`None`: all threads of the process, and the
    /// ones it creates later).
    pub threads: Option<Vec<i32>>,
    /// The budget controller.
    pub controller: ControllerKind,
    /// LFSg's α (multiplicative increase on lateness).
    pub alpha: f64,
    /// LFSg's β (additive decrease, ns; default 1 % of T).
    pub beta_ns: Option<u64>,
    /// T_sample (ns).
    pub sample_ns: u64,
    /// Smallest budget (ns; default 1 % of T, at least 100 µs).
    pub min_ns: Option<u64>,
    /// Largest budget (ns; default T).
    pub max_ns: Option<u64>,
    /// First budget (ns; default: measured, see `observe_ns`).
    pub initial_ns: Option<u64>,
    /// Without `initial_ns`: watch the threads this long under a provisional
    /// reservation (T / 2, at most 0.9 CPU in all) and restart each at its
    /// CPU time per job + 15 %; 0: start at T / 10.
    pub observe_ns: u64,
    /// GRUB reclaiming (SCHED_FLAG_RECLAIM).
    pub reclaim: bool,
    /// Status lines as JSON.
    pub json: bool,
    /// Detect the period again this often while attached (ns; 0: never).
    pub redetect_ns: u64,
    /// How long each re-detection traces the process (ns).
    pub detect_ns: u64,
    /// Re-tune when the detected period differs from T by more than this
    /// fraction of T.
    pub tolerance: f64,
}

impl Options {
    /// The defaults for period `period_ns`.
    pub fn for_period(period_ns: u64) -> Options {
        Options {
            period_ns,
            threads: None,
            controller: ControllerKind::default(),
            alpha: 1.25,
            beta_ns: None,
            sample_ns: 500_000_000,
            min_ns: None,
            initial_ns: None,
            observe_ns: 500_000_000,
            max_ns: None,
            reclaim: false,
            json: false,
            redetect_ns: 0,
            detect_ns: 2_000_000_000,
            tolerance: 0.03,
        }
    }
}

/// What a finished attachment did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    /// T_sample windows run.
    pub samples: u64,
    /// Budget changes applied.
    pub changes: u64,
    /// Average reserved bandwidth over the samples (CPUs, all threads).
    pub mean_bandwidth: f64,
    /// Largest reserved bandwidth (CPUs).
    pub max_bandwidth: f64,
    /// Late windows, all threads.
    pub late: u64,
    /// Deadline misses (postponed scheduling deadlines), all threads.
    pub misses: u64,
    /// Re-tunes to a newly detected period.
    pub retunes: u64,
    /// Threads still alive that could not be restored.
    pub restore_failures: usize,
}

/// The attachment: the reserved threads of one process.
pub struct Attachment<'a> {
    pid: i32,
    o: Options,
    adm: &'a mut dyn Admission,
    threads: Vec<Reserved>,
    /// Late windows and misses of threads that ended.
    ended: (u64, u64),
}

impl<'a> Attachment<'a> {
    /// Puts the chosen threads of `pid` under reservations at the first
    /// budget. All or nothing: on any refusal (ledger, kernel, permission)
    /// the threads already moved are restored and the error says why.
    pub fn attach(pid: i32, o: Options, adm: &'a mut dyn Admission) -> Result<Self, String> {
        if !procfs::alive(pid) {
            return Err(format!("no running process {pid}"));
        }
        let mut a = Attachment {
            pid,
            o,
            adm,
            threads: Vec::new(),
            ended: (0, 0),
        };
        let tids = a.o.threads.clone().unwrap_or_else(|| procfs::threads(pid));
        // Provisional budget while the threads are watched (see `settle`):
        // generous, at most 0.9 CPU in all.
        let t = a.o.period_ns;
        let share = (t / 2).min((t as f64 * 0.9 / tids.len().max(1) as f64) as u64);
        let measure = a.o.initial_ns.is_none() && a.o.observe_ns > 0;
        let first =
            a.o.initial_ns
                .unwrap_or(if measure { share } else { t / 10 });
        for tid in tids {
            let r = match a.adopt(tid, first) {
                Err(_) if measure && first > t / 10 => a.adopt(tid, t / 10),
                r => r,
            };
            if let Err(e) = r {
                a.detach();
                return Err(e);
            }
        }
        if a.threads.is_empty() {
            return Err(format!("process {pid} has no threads to reserve"));
        }
        a.settle();
        Ok(a)
    }

    /// The reserved threads.
    pub fn threads(&self) -> &[Reserved] {
        &self.threads
    }

    /// Total reserved bandwidth (CPUs).
    pub fn bandwidth(&self) -> f64 {
        let t = self.o.period_ns as f64;
        self.threads.iter().map(|r| r.budget_ns as f64 / t).sum()
    }

    /// Without `initial_ns`: each thread's CPU time per job over
    /// `observe_ns`, watched under the provisional reservation, plus 15 %
    /// (its CPU rate × T if lower, for a thread that never blocked); the
    /// controllers restart from there. Threads that used no CPU start at the
    /// smallest budget; others that ended no job keep theirs.
    fn settle(&mut self) {
        if self.o.initial_ns.is_some() || self.o.observe_ns == 0 {
            return;
        }
        let pid = self.pid;
        let before: Vec<_> = self
            .threads
            .iter()
            .map(|r| procfs::counters(pid, r.tid))
            .collect();
        std::thread::sleep(Duration::from_nanos(self.o.observe_ns));
        let (t, obs) = (self.o.period_ns, self.o.observe_ns);
        let mut moves = Vec::new();
        for (r, b) in self.threads.iter_mut().zip(before) {
            if let (Some(b), Some(a)) = (b, procfs::counters(pid, r.tid)) {
                // The controllers count from here: the watched window is
                // not one reservation period's CPU time.
                r.rebase(a);
                if a.voluntary > b.voluntary {
                    let cpu = a.cpu_ns - b.cpu_ns;
                    let per_job = cpu / (a.voluntary - b.voluntary);
                    let per_period = (cpu as u128 * t as u128 / obs as u128) as u64;
                    let q = per_job.min(per_period);
                    moves.push((r.tid, r.restart(q + q * 15 / 100)));
                } else if a.cpu_ns == b.cpu_ns {
                    // Idle all along (a thread waiting in join, say): the
                    // smallest budget until the controller sees it work.
                    moves.push((r.tid, r.restart(0)));
                }
            }
        }
        for (tid, q) in moves {
            self.set_budget(tid, q);
        }
    }

    /// Applies budget `q` to `tid` (admission first when it grows).
    fn set_budget(&mut self, tid: i32, q: u64) -> bool {
        let o = self.o.clone();
        let Some(r) = self.threads.iter_mut().find(|r| r.tid == tid) else {
            return false;
        };
        let bw = q as f64 / o.period_ns as f64;
        if q > r.budget_ns {
            if let Err(e) = self.adm.reserve(tid, bw) {
                eprintln!("resound legacy: thread {tid}: growth refused: {e}");
                return false;
            }
        }
        match resound_sched::apply(tid, &Reserved::policy(q, &o)) {
            Ok(()) => {
                if q < r.budget_ns {
                    let _ = self.adm.reserve(tid, bw);
                }
                r.budget_ns = q;
                true
            }
            Err(e) => {
                let _ = self
                    .adm
                    .reserve(tid, r.budget_ns as f64 / o.period_ns as f64);
                eprintln!("resound legacy: thread {tid}: {e}");
                false
            }
        }
    }

    fn adopt(&mut self, tid: i32, first_ns: u64) -> Result<(), String> {
        let r = match Reserved::new(self.pid, tid, &self.o, first_ns) {
            None => {
                return Err(format!(
                    "thread {tid} is not a thread of process {}",
                    self.pid
                ))
            }
            Some(r) => r.map_err(|e| format!("thread {tid}: {e}"))?,
        };
        let bw = r.budget_ns as f64 / self.o.period_ns as f64;
        self.adm
            .reserve(tid, bw)
            .map_err(|e| format!("cannot reserve thread {tid}: {e}"))?;
        if let Err(e) = resound_sched::apply(tid, &Reserved::policy(r.budget_ns, &self.o)) {
            self.adm.release(tid);
            let hint = match e.kind {
                SchedErrorKind::Permission => {
                    " (SCHED_DEADLINE needs root or CAP_SYS_NICE, and no RLIMIT_RTTIME)"
                }
                SchedErrorKind::Busy => " (the kernel's admission test refused it)",
                _ => "",
            };
            return Err(format!("thread {tid}: {e}{hint}"));
        }
        self.threads.push(r);
        Ok(())
    }

    /// One T_sample step over every thread; returns the lines to print.
    fn sample(&mut self, now_ns: u64, window_ns: u64) -> u64 {
        let mut changes = 0;
        let (pid, period_ns) = (self.pid, self.o.period_ns);
        let (mut gone, mut moves) = (Vec::new(), Vec::new());
        for r in &mut self.threads {
            match r.on_sample(pid, now_ns, window_ns, period_ns) {
                None => gone.push(r.tid),
                Some(None) => {}
                Some(Some(q)) => moves.push((r.tid, q)),
            }
        }
        for (tid, q) in moves {
            changes += self.set_budget(tid, q) as u64;
        }
        self.forget(&gone);
        if self.o.threads.is_none() {
            for tid in procfs::threads(pid) {
                if !self.threads.iter().any(|r| r.tid == tid) {
                    let first = self.o.initial_ns.unwrap_or(self.o.period_ns / 10);
                    if let Err(e) = self.adopt(tid, first) {
                        eprintln!("resound legacy: new thread not reserved: {e}");
                    }
                }
            }
        }
        changes
    }

    fn forget(&mut self, gone: &[i32]) {
        for r in self.threads.iter().filter(|r| gone.contains(&r.tid)) {
            self.ended.0 += r.late;
            self.ended.1 += r.misses;
        }
        for tid in gone {
            self.adm.release(*tid);
        }
        self.threads.retain(|r| !gone.contains(&r.tid));
    }

    /// Late windows and deadline misses so far, all threads (ended ones too).
    pub fn late_and_misses(&self) -> (u64, u64) {
        let late: u64 = self.threads.iter().map(|r| r.late).sum();
        let misses: u64 = self.threads.iter().map(|r| r.misses).sum();
        (self.ended.0 + late, self.ended.1 + misses)
    }

    /// Every thread back to its old policy, every bandwidth released.
    /// Returns how many live threads could not be restored.
    pub fn detach(&mut self) -> usize {
        let mut failed = 0;
        for r in self.threads.drain(..) {
            if let Err(e) = r.restore(&self.o) {
                if procfs::counters(self.pid, r.tid).is_some() {
                    eprintln!("resound legacy: thread {}: cannot restore: {e}", r.tid);
                    failed += 1;
                }
            }
            self.adm.release(r.tid);
        }
        failed
    }
}

/// Runs the attachment until the process exits, `keep_going` returns false,
/// or SIGINT/SIGTERM (install [`signals::install`] first); then detaches.
/// With `redetect_ns` set, re-detects the period in the background and
/// re-tunes on a change.
pub fn run(mut a: Attachment<'_>, mut keep_going: impl FnMut() -> bool) -> Summary {
    let redetector = start_redetector(&a);
    let start = Instant::now();
    let mut next = start;
    let mut last_sample = start;
    let mut s = Summary::default();
    let mut bw_sum = 0.0;
    println!("{}", a.status_line(0.0, &s));
    while !signals::stopped() && keep_going() && procfs::alive(a.pid) && !a.threads.is_empty() {
        let period_ns = a.o.period_ns;
        next += Duration::from_nanos(period_ns);
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            next = now;
        }
        let pid = a.pid;
        let gone: Vec<i32> = a
            .threads
            .iter_mut()
            .filter_map(|r| (!r.on_period(pid, period_ns)).then_some(r.tid))
            .collect();
        a.forget(&gone);
        if let Some(rep) = redetector.as_ref().and_then(Redetector::poll) {
            s.retunes += a.on_redetect(rep) as u64;
        }
        let now = Instant::now();
        let window = now - last_sample;
        if window.as_nanos() as u64 + period_ns / 2 >= a.o.sample_ns {
            last_sample = now;
            let t = (now - start).as_nanos() as u64;
            s.changes += a.sample(t, window.as_nanos() as u64);
            s.samples += 1;
            let bw = a.bandwidth();
            bw_sum += bw;
            s.max_bandwidth = s.max_bandwidth.max(bw);
            println!("{}", a.status_line(t as f64 / 1e9, &s));
        }
    }
    drop(redetector);
    (s.late, s.misses) = a.late_and_misses();
    s.mean_bandwidth = if s.samples > 0 {
        bw_sum / s.samples as f64
    } else {
        0.0
    };
    s.restore_failures = a.detach();
    s
}

/// The background re-detector when `redetect_ns` asks for one.
fn start_redetector(a: &Attachment<'_>) -> Option<Redetector> {
    if a.o.redetect_ns == 0 {
        return None;
    }
    let every = Duration::from_nanos(a.o.redetect_ns);
    match Redetector::start(a.pid, every, Duration::from_nanos(a.o.detect_ns)) {
        Ok(r) => Some(r),
        Err(e) => {
            eprintln!("resound legacy: cannot start re-detection ({e}); the period stays fixed");
            None
        }
    }
}
