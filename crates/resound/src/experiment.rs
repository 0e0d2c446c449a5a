//! `resound experiment`: the seeds' reservation experiment (Table 2 of the
//! SHRUB paper, thesis section 4.5) as one command.
//!
//! For each scheduling policy it starts a fresh `resoundd` in sync mode on the
//! dummy driver in a private socket directory, a chain of `resound-tool load`
//! client processes (`system:capture_1 -> load1 -> ... -> loadN ->
//! system:playback_1`, each busy for a fraction of the period), and a
//! competing periodic real-time task (`resound-tool rtapp`) at a higher
//! SCHED_FIFO priority than the audio threads. After a warm-up it measures:
//!
//! * xruns: the server's count, difference over the measurement;
//! * end-of-chain time: `finish_ns` of the last load client relative to the
//!   start of the same cycle (the header's `cycle_start_ns`), from a poller
//!   thread in this process that reads the activation records of an opened
//!   but never activated probe client (so the probe adds no node to the
//!   graph, and late cycles are seen with their real finish times instead of
//!   being skipped as a downstream node would skip them);
//! * the competing task's deadline misses and response times (its final JSON);
//! * bandwidth efficiency: mean budget allocated per audio period (status
//!   `reservations`, polled every 100 ms) / mean CPU used per cycle (sum of
//!   `cpu_ns` of the driver's and the load clients' records).
//!
//! Every process and the temporary directory are cleaned up by drop guards,
//! on error paths and on SIGINT/SIGTERM too; children also get a parent-death
//! signal in case this process is killed outright.

use clap::{Args, ValueEnum};
use resound_client::prelude::*;
use resound_client::{Client, ControlSession, OpenOptions};
use resound_protocol::wire::Status;
use resound_shm::time::{monotonic_ns, sleep_until};
use resound_shm::{Timer, View};
use serde_json::json;
use std::collections::VecDeque;
use std::io::{BufRead, BufReader, IsTerminal, Write};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

/// A scheduling policy of the audio graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Policy {
    /// No real-time scheduling (`resoundd -r`).
    Other,
    /// SCHED_FIFO (`resoundd --sched fifo -P PRIO`).
    Fifo,
    /// SCHED_DEADLINE reservations with feedback-controlled budgets, no reclaiming (`--no-reclaim`).
    Deadline,
    /// The same with GRUB reclaiming (resoundd's default).
    #[value(name = "deadline+reclaim")]
    DeadlineReclaim,
}

impl Policy {
    /// Name as in the table and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Policy::Other => "other",
            Policy::Fifo => "fifo",
            Policy::Deadline => "deadline",
            Policy::DeadlineReclaim => "deadline+reclaim",
        }
    }

    /// The `resoundd` server options (before `-d`) that select this policy.
    pub fn server_flags(self, priority: i32) -> Vec<String> {
        let prio = priority.to_string();
        let v: &[&str] = match self {
            Policy::Other => &["-r"],
            Policy::Fifo => &["--sched", "fifo", "-P", &prio],
            Policy::Deadline => &["--sched", "deadline", "--no-reclaim"],
            Policy::DeadlineReclaim => &["--sched", "deadline", "--reclaim"],
        };
        v.iter().map(|s| s.to_string()).collect()
    }
}

/// Options of `resound experiment`.
#[derive(Debug, Clone, Args)]
pub struct ExperimentArgs {
    /// Policies to run, in order (comma-separated).
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "other,fifo,deadline,deadline+reclaim"
    )]
    pub policies: Vec<Policy>,
    /// Measurement time per policy (seconds).
    #[arg(long, default_value_t = 20.0)]
    pub seconds: f64,
    /// Warm-up per policy before measuring (seconds).
    #[arg(long, default_value_t = 2.0)]
    pub warmup: f64,
    /// Also write the results as JSON to this file.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Load clients in the chain.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=60))]
    pub clients: u32,
    /// Percent of the period each load client stays busy.
    #[arg(long, default_value_t = 7.5)]
    pub busy: f64,
    /// Sample rate (Hz).
    #[arg(short = 'r', long, default_value_t = 48_000)]
    pub rate: u32,
    /// Frames per period.
    #[arg(short = 'p', long, default_value_t = 128)]
    pub period: u32,
    /// SCHED_FIFO priority of the driver under the fifo policy (clients get one less).
    #[arg(short = 'P', long, default_value_t = 10, value_parser = clap::value_parser!(i32).range(2..=99))]
    pub priority: i32,
    /// Competing task: period (microseconds).
    #[arg(long, default_value_t = 10_000)]
    pub rt_period_us: u64,
    /// Competing task: CPU time per job (microseconds); 0 = no competing task (baseline).
    #[arg(long, default_value_t = 1_700)]
    pub rt_run_us: u64,
    /// Competing task: SCHED_FIFO priority (0 = SCHED_OTHER).
    #[arg(long, default_value_t = 50)]
    pub rt_fifo: i32,
    /// Pin the server, the clients and the competing task to this CPU, so that
    /// they contend for one CPU as in the seeds' runs. Not with the deadline
    /// policies: the kernel refuses SCHED_DEADLINE to a thread whose affinity
    /// is narrower than its root domain (use an exclusive cpuset for that).
    #[arg(long, value_name = "N")]
    pub cpu: Option<usize>,
    /// Extra resoundd server options for every policy, whitespace-separated
    /// (e.g. "--overprovision 20 --period-multiplier 2").
    #[arg(long, value_name = "OPTS", allow_hyphen_values = true)]
    pub server_args: Option<String>,
}

type Res<T> = Result<T, String>;

/// SCHED_FIFO priority of the in-process poller: above the competing task,
/// so that its reads are never late; it runs a few microseconds per cycle.
const POLLER_PRIO: i32 = 60;
/// Audio cycles the end-of-chain poller waits for a late last client before
/// counting the cycle as lost.
const GIVE_UP_CYCLES: u64 = 3;

fn progress(msg: &str) {
    eprintln!("[experiment] {msg}");
}

// ---------------------------------------------------------------------------
// Pure parts: statistics and formatting

/// Nearest-rank percentile `p` (0..=100) of sorted samples; None when empty.
pub fn percentile(sorted: &[u64], p: f64) -> Option<u64> {
    let n = sorted.len() as u64;
    crate::rtapp::nearest_rank(n, p).map(|r| sorted[(r - 1) as usize])
}

/// What the competing task reported at its end.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RtReport {
    /// Jobs counted (after its warm-up).
    pub jobs: u64,
    /// Jobs that finished after their deadline.
    pub misses: u64,
    /// Response-time median (us).
    pub p50_us: f64,
    /// Response-time 99th percentile (us).
    pub p99_us: f64,
    /// Largest response time (us).
    pub max_us: f64,
    /// Its scheduling ("SCHED_FIFO 50").
    pub policy: String,
}

impl RtReport {
    /// From rtapp's `{"event":"final",...}` line.
    pub fn from_json(v: &serde_json::Value) -> Option<RtReport> {
        if v["event"] != "final" {
            return None;
        }
        Some(RtReport {
            jobs: v["jobs"].as_u64()?,
            misses: v["misses"].as_u64()?,
            p50_us: v["resp_p50_us"].as_f64().unwrap_or(f64::NAN),
            p99_us: v["resp_p99_us"].as_f64().unwrap_or(f64::NAN),
            max_us: v["resp_max_us"].as_f64().unwrap_or(f64::NAN),
            policy: v["policy"].as_str().unwrap_or("?").to_string(),
        })
    }
}

/// One policy's results.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PolicyResult {
    /// Policy name.
    pub policy: String,
    /// Xruns during the measurement.
    pub xruns: u64,
    /// Cycles whose end-of-chain time was measured.
    pub cycles: u64,
    /// Cycles in which the last client never finished (skipped or given up).
    pub lost: u64,
    /// Cycles the poller could not judge (it was too late to read them).
    pub unobserved: u64,
    /// End-of-chain time (us): p50, p99, max over the measured cycles.
    pub end_us: Option<(f64, f64, f64)>,
    /// The competing task's report.
    pub rt: Option<RtReport>,
    /// Mean budget allocated per audio period, summed over the graph's
    /// SCHED_DEADLINE reservations (ns).
    pub budget_ns: Option<f64>,
    /// Mean CPU used per cycle by the threads that held those reservations,
    /// each weighted by the share of status polls it held one in (ns).
    pub used_reserved_ns: Option<f64>,
    /// Mean number of graph threads under a reservation per status poll.
    pub reserved_threads: f64,
    /// Threads of the graph (the driver and the clients).
    pub graph_threads: usize,
    /// Mean CPU used per cycle by all the graph's threads (ns).
    pub used_ns: Option<f64>,
    /// Server scheduling mode (status `sched`).
    pub sched: String,
    /// Driver thread scheduling.
    pub driver_sched: String,
    /// Load clients' process thread scheduling (distinct values).
    pub client_sched: String,
    /// Most resound processes not started by this run seen during it (they disturb it).
    pub others_running: usize,
    /// CPU time (in CPUs) used during the measurement by processes outside this run.
    pub foreign_cpus: Option<f64>,
    /// CPU time (in CPUs) the hypervisor stole during the measurement.
    pub steal_cpus: Option<f64>,
    /// Why the policy could not be measured.
    pub error: Option<String>,
}

impl PolicyResult {
    /// Budget allocated / CPU used by the reserved threads, when both exist.
    pub fn efficiency(&self) -> Option<f64> {
        match (self.budget_ns, self.used_reserved_ns) {
            (Some(b), Some(u)) if u > 0.0 => Some(b / u),
            _ => None,
        }
    }

    fn to_json(&self) -> serde_json::Value {
        let f = |v: Option<f64>| v.map_or(serde_json::Value::Null, |v| json!(v));
        json!({
            "policy": self.policy,
            "error": self.error,
            "xruns": self.xruns,
            "cycles_measured": self.cycles,
            "cycles_lost": self.lost,
            "cycles_unobserved": self.unobserved,
            "end_p50_us": f(self.end_us.map(|e| e.0)),
            "end_p99_us": f(self.end_us.map(|e| e.1)),
            "end_max_us": f(self.end_us.map(|e| e.2)),
            "rt": self.rt.as_ref().map(|r| json!({
                "jobs": r.jobs, "misses": r.misses, "resp_p50_us": r.p50_us,
                "resp_p99_us": r.p99_us, "resp_max_us": r.max_us, "policy": r.policy,
            })),
            "budget_mean_us": f(self.budget_ns.map(|v| v / 1000.0)),
            "used_reserved_mean_us": f(self.used_reserved_ns.map(|v| v / 1000.0)),
            "reserved_threads": self.reserved_threads,
            "graph_threads": self.graph_threads,
            "used_mean_us": f(self.used_ns.map(|v| v / 1000.0)),
            "budget_over_used": f(self.efficiency()),
            "sched": self.sched,
            "driver_sched": self.driver_sched,
            "client_sched": self.client_sched,
            "other_resound_processes": self.others_running,
            "foreign_cpus": f(self.foreign_cpus),
            "steal_cpus": f(self.steal_cpus),
        })
    }
}

fn us1(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.1}")
    } else {
        "-".into()
    }
}

/// The result table (one header line, one line per policy).
pub fn format_table(rows: &[PolicyResult]) -> String {
    let mut o = format!(
        "{:<17} {:>6} {:>5} {:>11} {:>11} {:>11} {:>9} {:>10} {:>15}\n",
        "policy",
        "xruns",
        "lost",
        "end p50 us",
        "end p99 us",
        "end max us",
        "rt misses",
        "rt max us",
        "budget/used"
    );
    for r in rows {
        if r.error.is_some() {
            o += &format!("{:<17} {:>6}\n", r.policy, "error (see below)");
            continue;
        }
        let (p50, p99, max) = r
            .end_us
            .map_or(("-".into(), "-".into(), "-".into()), |(a, b, c)| {
                (us1(a), us1(b), us1(c))
            });
        let (miss, rtmax) = r.rt.as_ref().map_or(("-".into(), "-".into()), |rt| {
            (format!("{}/{}", rt.misses, rt.jobs), us1(rt.max_us))
        });
        let eff = match r.efficiency() {
            None => "n/a".into(),
            Some(e) if r.reserved_threads + 0.05 < r.graph_threads as f64 => {
                let k = r.reserved_threads;
                if (k - k.round()).abs() < 0.05 {
                    format!("{e:.2} ({k:.0}/{})", r.graph_threads)
                } else {
                    format!("{e:.2} ({k:.1}/{})", r.graph_threads)
                }
            }
            Some(e) => format!("{e:.2}"),
        };
        o += &format!(
            "{:<17} {:>6} {:>5} {:>11} {:>11} {:>11} {:>9} {:>10} {:>15}\n",
            r.policy, r.xruns, r.lost, p50, p99, max, miss, rtmax, eff
        );
    }
    o
}

/// Details under the table: scheduling obtained, counts, errors.
fn format_details(rows: &[PolicyResult]) -> String {
    let mut o = String::new();
    for r in rows {
        if let Some(e) = &r.error {
            o += &format!("  {}: error: {e}\n", r.policy);
            continue;
        }
        o += &format!(
            "  {}: server sched \"{}\", driver {}, clients {}, rtapp {}\n",
            r.policy,
            r.sched,
            r.driver_sched,
            r.client_sched,
            r.rt.as_ref().map_or("-", |rt| rt.policy.as_str())
        );
        let mut line = format!("      {} cycles measured", r.cycles);
        if r.unobserved > 0 {
            line += &format!(", {} not observed", r.unobserved);
        }
        if let Some(rt) = &r.rt {
            line += &format!(
                "; rtapp response p50/p99/max {}/{}/{} us",
                us1(rt.p50_us),
                us1(rt.p99_us),
                us1(rt.max_us)
            );
        }
        if let Some(u) = r.used_ns {
            line += &format!("; CPU used {} us/cycle", us1(u / 1000.0));
        }
        if let (Some(b), Some(u)) = (r.budget_ns, r.used_reserved_ns) {
            line += &format!(
                "; budget {} us/cycle for {:.1} reserved thread(s) using {} us/cycle",
                us1(b / 1000.0),
                r.reserved_threads,
                us1(u / 1000.0)
            );
        }
        o += &line;
        o += "\n";
        let foreign = r.foreign_cpus.unwrap_or(0.0);
        let steal = r.steal_cpus.unwrap_or(0.0);
        if foreign >= 0.05 || steal >= 0.05 {
            o += &format!(
                "      note: other processes used {foreign:.2} CPU and the hypervisor stole {steal:.2} CPU during the measurement\n"
            );
        }
        if r.others_running > 0 {
            o += &format!(
                "      note: {} other resound process(es) ran on this machine meanwhile; they disturbed the measurement\n",
                r.others_running
            );
        }
    }
    o
}

// ---------------------------------------------------------------------------
// Budget allocated, from the server status

/// The budget each of `slots` (index into it, budget ns) holds per audio
/// period of `audio_period_ns` under a SCHED_DEADLINE reservation; threads
/// without one (policies other and fifo, refused reservations) are left out.
/// This is the one place that knows `Status::reservations`.
pub fn reserved_budgets(st: &Status, slots: &[u32], audio_period_ns: f64) -> Vec<(usize, f64)> {
    st.reservations
        .iter()
        .filter(|r| r.period_ns > 0 && r.budget_ns > 0 && r.policy.starts_with("SCHED_DEADLINE"))
        .filter_map(|r| {
            let i = slots.iter().position(|&s| s == r.slot)?;
            Some((i, r.budget_ns as f64 / r.period_ns as f64 * audio_period_ns))
        })
        .collect()
}

/// Scheduling of the threads at `slots` as the status reports it, counted:
/// "SCHED_DEADLINE x3, SCHED_FIFO x7"; None when the status lists none of them.
fn policies_of(st: &Status, slots: &[u32]) -> Option<String> {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for r in st.reservations.iter().filter(|r| slots.contains(&r.slot)) {
        match counts.iter_mut().find(|(p, _)| *p == r.policy) {
            Some((_, n)) => *n += 1,
            None => counts.push((r.policy.clone(), 1)),
        }
    }
    (!counts.is_empty()).then(|| {
        counts
            .iter()
            .map(|(p, n)| format!("{p} x{n}"))
            .collect::<Vec<_>>()
            .join(", ")
    })
}

// ---------------------------------------------------------------------------
// End-of-chain poller

/// What the poller measured.
#[derive(Debug, Default)]
struct ChainLog {
    /// End-of-chain times (ns), one per measured cycle.
    ends: Vec<u64>,
    lost: u64,
    unobserved: u64,
    /// Per thread (in `cpu_slots` order): sum of `cpu_ns` samples, one per cycle.
    cpu_sum: Vec<u128>,
    cpu_n: u64,
    /// Scheduling the poller got.
    sched: String,
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

/// The timer fields, read under the seqlock without spinning: this thread
/// runs at a higher priority than the driver, so it sleeps while the driver
/// is in the middle of writing them.
fn read_timer(view: &View) -> Timer {
    let h = view.header();
    loop {
        let s1 = h.timer_seq.load(Ordering::Acquire);
        if s1 & 1 == 0 {
            let t = Timer {
                cycle: h.cycle.load(Ordering::Acquire),
                start_ns: h.cycle_start_ns.load(Ordering::Acquire),
                frame_time: h.frame_time.load(Ordering::Acquire),
                next_start_ns: h.next_start_ns.load(Ordering::Acquire),
                frames: h.cycle_frames.load(Ordering::Acquire),
            };
            if h.timer_seq.load(Ordering::Acquire) == s1 {
                return t;
            }
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

// ---------------------------------------------------------------------------
// Processes

/// Makes a spawned child receive `sig` when this process's spawning thread
/// (always the main thread here) dies, so a killed experiment leaves nothing running.
/// Makes a spawned child run on `cpu` only.
fn pin_to_cpu(cmd: &mut Command, cpu: usize) {
    // SAFETY: cpu_set_t is plain data for which all zeroes is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t; run() checked cpu < CPU_SETSIZE.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: the closure runs in the forked child before exec and only calls
    // sched_setaffinity(2), a plain async-signal-safe syscall, on its own copy of `set`.
    unsafe {
        cmd.pre_exec(move || {
            if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

fn die_with_parent(cmd: &mut Command, sig: libc::c_int) {
    // SAFETY: the closure runs in the forked child before exec and only calls
    // prctl(2), which is async-signal-safe; it touches no memory but `sig`.
    unsafe {
        cmd.pre_exec(move || {
            if libc::prctl(libc::PR_SET_PDEATHSIG, sig as libc::c_ulong) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// Last lines of a child's stderr.
#[derive(Clone, Default)]
struct LogTail(Arc<Mutex<VecDeque<String>>>);

impl LogTail {
    fn follow(&self, r: impl std::io::Read + Send + 'static) {
        let l = self.0.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(r).lines().map_while(Result::ok) {
                let mut g = l.lock().unwrap_or_else(|e| e.into_inner());
                if g.len() >= 40 {
                    g.pop_front();
                }
                g.push_back(line);
            }
        });
    }

    fn tail(&self, n: usize) -> String {
        let g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let from = g.len().saturating_sub(n);
        g.iter().skip(from).map(|l| format!("    {l}\n")).collect()
    }
}

/// A child process, stopped (SIGTERM, then SIGKILL) and reaped on drop; its
/// stdout JSON lines arrive on `lines`, its stderr is kept in `log`.
struct Proc {
    child: Child,
    what: String,
    lines: mpsc::Receiver<serde_json::Value>,
    log: LogTail,
}

impl Proc {
    fn spawn(mut cmd: Command, what: &str, dir: &Path, cpu: Option<usize>) -> Res<Proc> {
        cmd.env("RESOUND_DIR", dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        die_with_parent(&mut cmd, libc::SIGTERM);
        // Own process group: a Ctrl-C at the terminal reaches only this
        // process, which then stops everything in order.
        cmd.process_group(0);
        if let Some(c) = cpu {
            pin_to_cpu(&mut cmd, c);
        }
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {what}: {e}"))?;
        let log = LogTail::default();
        if let Some(err) = child.stderr.take() {
            log.follow(err);
        }
        let (tx, lines) = mpsc::channel();
        if let Some(out) = child.stdout.take() {
            std::thread::spawn(move || {
                for line in BufReader::new(out).lines().map_while(Result::ok) {
                    if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) {
                        if tx.send(v).is_err() {
                            break;
                        }
                    }
                }
            });
        }
        Ok(Proc {
            child,
            what: what.to_string(),
            lines,
            log,
        })
    }

    /// Waits for a stdout line with `"event": event`.
    fn wait_event(
        &mut self,
        event: &str,
        timeout: Duration,
        intr: &AtomicBool,
    ) -> Res<serde_json::Value> {
        let t0 = Instant::now();
        loop {
            match self.lines.recv_timeout(Duration::from_millis(50)) {
                Ok(v) if v["event"] == event => return Ok(v),
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let st = self.child.wait().map(|s| s.to_string()).unwrap_or_default();
                    return Err(format!(
                        "{} exited ({st}) before printing {event:?}:\n{}",
                        self.what,
                        self.log.tail(10)
                    ));
                }
            }
            check_interrupt(intr)?;
            if t0.elapsed() > timeout {
                return Err(format!(
                    "{} did not print {event:?} within {timeout:?}",
                    self.what
                ));
            }
        }
    }

    fn exited(&mut self) -> Option<String> {
        match self.child.try_wait() {
            Ok(Some(st)) => Some(st.to_string()),
            _ => None,
        }
    }

    /// SIGTERM, then SIGKILL after `grace`; reaps the child.
    fn stop(&mut self, grace: Duration) {
        if self.exited().is_some() {
            return;
        }
        // SAFETY: kill(2) on the pid of our own child that has not been reaped
        // (try_wait above found it running), so the pid cannot have been reused.
        unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM) };
        let t0 = Instant::now();
        while t0.elapsed() < grace {
            if self.exited().is_some() {
                return;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.stop(Duration::from_secs(3));
    }
}

/// A private socket directory, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Res<TempDir> {
        let p =
            std::env::temp_dir().join(format!("resound-experiment-{}-{tag}", std::process::id()));
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o700))
            .map_err(|e| format!("{}: {e}", p.display()))?;
        Ok(TempDir(p))
    }
}

/// Removes the directories of earlier runs whose process is gone (killed
/// outright, so its guards never ran).
fn remove_stale_dirs() {
    let Ok(dir) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in dir.filter_map(Result::ok) {
        let name = e.file_name().to_string_lossy().into_owned();
        let Some(pid) = name
            .strip_prefix("resound-experiment-")
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Stops and joins the poller thread on drop.
struct Poller {
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<ChainLog>>,
}

impl Poller {
    fn finish(mut self) -> Res<ChainLog> {
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

/// resoundd / resound-tool processes on this machine that this process did
/// not start (another experiment, a test run): they compete for the CPUs.
fn other_resound_processes() -> usize {
    let me = std::process::id().to_string();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    dir.filter_map(|e| {
        let pid = e.ok()?.file_name().into_string().ok()?;
        pid.bytes().all(|b| b.is_ascii_digit()).then_some(pid)
    })
    .filter(|pid| {
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
        if !matches!(comm.trim(), "resoundd" | "resound-tool") {
            return false;
        }
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
        let ppid = status
            .lines()
            .find_map(|l| l.strip_prefix("PPid:"))
            .map(str::trim);
        ppid != Some(me.as_str())
    })
    .count()
}

/// CPU accounting snapshot: the machine's busy and stolen clock ticks (all
/// CPUs), the total, and the ticks of this run's processes.
#[derive(Debug, Clone, Copy, Default)]
struct CpuTicks {
    busy: u64,
    steal: u64,
    total: u64,
    ours: u64,
}

/// user+system ticks of a process (all its threads) from /proc/PID/stat.
fn proc_ticks(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the parenthesised command: state is field 3, utime 14, stime 15.
    let rest = s.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().unwrap_or(0))
        .collect();
    f.get(10).copied().unwrap_or(0) + f.get(11).copied().unwrap_or(0)
}

fn cpu_ticks(ours: &[u32]) -> Option<CpuTicks> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    // user nice system idle iowait irq softirq steal (guest time is inside user).
    let v: Vec<u64> = line
        .split_whitespace()
        .take(8)
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    if v.len() < 8 {
        return None;
    }
    let total: u64 = v.iter().sum();
    Some(CpuTicks {
        busy: total - v[3] - v[4] - v[7],
        steal: v[7],
        total,
        ours: ours.iter().map(|&p| proc_ticks(p)).sum(),
    })
}

/// (CPUs used by processes outside this run, CPUs stolen) between two snapshots.
fn foreign_load(a: CpuTicks, b: CpuTicks) -> Option<(f64, f64)> {
    let total = b.total.checked_sub(a.total).filter(|&t| t > 0)? as f64;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    let busy = b.busy.saturating_sub(a.busy) as f64;
    let ours = b.ours.saturating_sub(a.ours) as f64;
    let steal = b.steal.saturating_sub(a.steal) as f64;
    Some((
        ((busy - ours) / total * cpus).max(0.0),
        steal / total * cpus,
    ))
}

fn check_interrupt(intr: &AtomicBool) -> Res<()> {
    if intr.load(Ordering::Acquire) {
        Err("interrupted".into())
    } else {
        Ok(())
    }
}

/// Sleeps `d`, returning early with an error on SIGINT/SIGTERM.
fn sleep_checked(d: Duration, intr: &AtomicBool) -> Res<()> {
    let t0 = Instant::now();
    while t0.elapsed() < d {
        check_interrupt(intr)?;
        std::thread::sleep((d - t0.elapsed().min(d)).min(Duration::from_millis(50)));
    }
    check_interrupt(intr)
}

// ---------------------------------------------------------------------------
// One policy

struct Bins {
    resoundd: PathBuf,
    tool: PathBuf,
}

fn distinct(v: &[String]) -> String {
    let mut d: Vec<&str> = Vec::new();
    for s in v {
        if !d.contains(&s.as_str()) {
            d.push(s);
        }
    }
    d.join(", ")
}

fn run_policy(
    a: &ExperimentArgs,
    bins: &Bins,
    policy: Policy,
    intr: &AtomicBool,
) -> Res<PolicyResult> {
    let tag = policy.name().replace('+', "-");
    let name = format!("exp{}-{tag}", std::process::id());
    // Declared in reverse order of teardown: the poller stops first, then the
    // probe and control session, the competing task, the clients, the server,
    // and last the directory.
    let dir = TempDir::new(&tag)?;
    let mut flags = policy.server_flags(a.priority);
    if let Some(extra) = &a.server_args {
        flags.extend(extra.split_whitespace().map(String::from));
    }
    let mut cmd = Command::new(&bins.resoundd);
    cmd.args(["-n", &name, "-S"]).args(&flags).args([
        "-d",
        "dummy",
        "-r",
        &a.rate.to_string(),
        "-p",
        &a.period.to_string(),
    ]);
    progress(&format!(
        "{}: starting resoundd -S {} -d dummy -r {} -p {}",
        policy.name(),
        flags.join(" "),
        a.rate,
        a.period
    ));
    let mut server = Proc::spawn(cmd, "resoundd", &dir.0, a.cpu)?;
    let t0 = Instant::now();
    let ctl = loop {
        if let Ok(c) = ControlSession::connect(Some(&name), Some(&dir.0)) {
            break c;
        }
        if let Some(st) = server.exited() {
            return Err(format!("resoundd exited ({st}):\n{}", server.log.tail(10)));
        }
        if t0.elapsed() > Duration::from_secs(10) {
            return Err(format!(
                "resoundd did not accept connections within 10 s:\n{}",
                server.log.tail(10)
            ));
        }
        check_interrupt(intr)?;
        std::thread::sleep(Duration::from_millis(20));
    };
    let busy = a.busy.to_string();
    let mut loads = Vec::new();
    for i in 1..=a.clients {
        let n = format!("load{i}");
        let mut cmd = Command::new(&bins.tool);
        cmd.args(["-s", &name, "-n", &n, "load", "--busy", &busy]);
        loads.push(Proc::spawn(cmd, &n, &dir.0, a.cpu)?);
    }
    let mut client_sched = Vec::new();
    for (i, p) in loads.iter_mut().enumerate() {
        let v = p.wait_event("ready", Duration::from_secs(10), intr)?;
        let want = format!("load{}", i + 1);
        if v["name"] != want.as_str() {
            return Err(format!("client {want} got the name {}", v["name"]));
        }
        client_sched.push(v["sched"].as_str().unwrap_or("?").to_string());
    }
    let mut src = "system:capture_1".to_string();
    for i in 1..=a.clients {
        let dst = format!("load{i}:in");
        ctl.connect_ports(&src, &dst)
            .map_err(|e| format!("connect {src} -> {dst}: {e}"))?;
        src = format!("load{i}:out");
    }
    ctl.connect_ports(&src, "system:playback_1")
        .map_err(|e| format!("connect {src} -> system:playback_1: {e}"))?;
    let probe = Client::open(
        "exp-probe",
        OpenOptions {
            server: Some(name.clone()),
            dir: Some(dir.0.clone()),
            exact_name: true,
        },
    )
    .map_err(|e| format!("open the probe client: {e}"))?;
    let snap = probe.snapshot();
    let slot_of = |n: &str| {
        snap.clients
            .iter()
            .find(|(_, cn, _)| cn == n)
            .map(|(s, _, _)| *s)
            .ok_or_else(|| format!("client {n} not in the graph"))
    };
    let mut slots = vec![0u32];
    for i in 1..=a.clients {
        slots.push(slot_of(&format!("load{i}"))?);
    }
    let last = *slots.last().expect("at least one client");

    let mut rtapp = if a.rt_run_us > 0 {
        let mut cmd = Command::new(&bins.tool);
        cmd.args([
            "rtapp",
            "--period-us",
            &a.rt_period_us.to_string(),
            "--run-us",
            &a.rt_run_us.to_string(),
            "--fifo",
            &a.rt_fifo.to_string(),
            "--warmup-s",
            &a.warmup.to_string(),
        ]);
        let mut p = Proc::spawn(cmd, "rtapp", &dir.0, a.cpu)?;
        p.wait_event("ready", Duration::from_secs(10), intr)?;
        Some(p)
    } else {
        None
    };
    progress(&format!(
        "{}: graph{} running; warm-up {} s",
        policy.name(),
        if rtapp.is_some() {
            " and competing task"
        } else {
            ""
        },
        a.warmup
    ));
    sleep_checked(Duration::from_secs_f64(a.warmup), intr)?;

    let mut others_running = other_resound_processes();
    if others_running > 0 {
        progress(&format!(
            "{}: warning: {others_running} other resound process(es) are running on this machine; they will disturb the measurement",
            policy.name()
        ));
    }
    let our_pids: Vec<u32> = [std::process::id(), server.child.id()]
        .into_iter()
        .chain(rtapp.iter().map(|p| p.child.id()))
        .chain(loads.iter().map(|p| p.child.id()))
        .collect();
    let ticks0 = cpu_ticks(&our_pids);
    let st0 = ctl.status().map_err(|e| format!("status: {e}"))?;
    let audio_period_ns = a.period as f64 * 1e9 / a.rate as f64;
    let cap = (a.seconds * 1e9 / audio_period_ns) as usize + 1024;
    let stop = Arc::new(AtomicBool::new(false));
    let poller = {
        let (view_client, s, cpu_slots) = (probe.clone(), stop.clone(), slots.clone());
        let handle = std::thread::Builder::new()
            .name("exp-poller".into())
            .spawn(move || poll_chain(view_client.view(), last, &cpu_slots, cap, &s))
            .map_err(|e| format!("poller thread: {e}"))?;
        Poller {
            stop,
            handle: Some(handle),
        }
    };
    let tty = std::io::stderr().is_terminal();
    // Status polls; sum over polls of the reserved budget; per graph thread,
    // the polls in which it held a reservation.
    let (mut polls, mut budget_total) = (0u64, 0.0);
    let mut reserved_polls = vec![0u64; slots.len()];
    let t0 = Instant::now();
    let mut next_poll = Duration::ZERO;
    let mut last_left = u64::MAX;
    loop {
        let el = t0.elapsed();
        if el.as_secs_f64() >= a.seconds {
            break;
        }
        check_interrupt(intr)?;
        if let Some(st) = server.exited() {
            return Err(format!(
                "resoundd exited during the measurement ({st}):\n{}",
                server.log.tail(10)
            ));
        }
        if let Some(p) = rtapp.as_mut() {
            if let Some(st) = p.exited() {
                return Err(format!(
                    "rtapp exited during the measurement ({st}):\n{}",
                    p.log.tail(10)
                ));
            }
        }
        if el >= next_poll {
            next_poll += Duration::from_millis(100);
            let st = ctl.status().map_err(|e| format!("status: {e}"))?;
            polls += 1;
            for (i, b) in reserved_budgets(&st, &slots, audio_period_ns) {
                budget_total += b;
                reserved_polls[i] += 1;
            }
            let left = (a.seconds - el.as_secs_f64()).ceil() as u64;
            if left != last_left {
                last_left = left;
                let msg = format!(
                    "{}: {left:>3} s left, xruns {}",
                    policy.name(),
                    st.xruns.saturating_sub(st0.xruns)
                );
                if tty {
                    eprint!("\r[experiment] {msg}   ");
                    let _ = std::io::stderr().flush();
                } else if left.is_multiple_of(5) {
                    progress(&msg);
                }
            }
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    if tty {
        eprintln!();
    }
    let st1 = ctl.status().map_err(|e| format!("status: {e}"))?;
    others_running = others_running.max(other_resound_processes());
    let foreign = ticks0
        .zip(cpu_ticks(&our_pids))
        .and_then(|(a, b)| foreign_load(a, b));
    let chain = poller.finish()?;
    // The competing task's window ends now too.
    let rt = rtapp.as_mut().and_then(|p| {
        p.stop(Duration::from_secs(2));
        drain_final(p)
    });
    let used: Vec<f64> = chain
        .cpu_sum
        .iter()
        .map(|&s| s as f64 / chain.cpu_n.max(1) as f64)
        .collect();
    let reserved = reserved_polls.iter().any(|&n| n > 0) && chain.cpu_n > 0;
    let polls_f = polls.max(1) as f64;
    let used_reserved: f64 = reserved_polls
        .iter()
        .zip(&used)
        .map(|(&n, &u)| n as f64 * u)
        .sum();
    let mut ends = chain.ends;
    ends.sort_unstable();
    let us = |v: Option<u64>| v.map_or(f64::NAN, |v| v as f64 / 1000.0);
    let end_us = (!ends.is_empty()).then(|| {
        (
            us(percentile(&ends, 50.0)),
            us(percentile(&ends, 99.0)),
            us(ends.last().copied()),
        )
    });
    progress(&format!(
        "{}: done ({} cycles measured, poller {})",
        policy.name(),
        ends.len(),
        chain.sched
    ));
    let result = PolicyResult {
        policy: policy.name().to_string(),
        xruns: st1.xruns.saturating_sub(st0.xruns),
        cycles: ends.len() as u64,
        lost: chain.lost,
        unobserved: chain.unobserved,
        end_us,
        rt,
        budget_ns: reserved.then(|| budget_total / polls_f),
        used_reserved_ns: reserved.then(|| used_reserved / polls_f),
        reserved_threads: reserved_polls.iter().sum::<u64>() as f64 / polls_f,
        graph_threads: slots.len(),
        used_ns: (chain.cpu_n > 0).then(|| used.iter().sum()),
        sched: st1.sched.clone(),
        driver_sched: st1.driver_sched.clone(),
        client_sched: policies_of(&st1, &slots[1..]).unwrap_or_else(|| distinct(&client_sched)),
        others_running,
        foreign_cpus: foreign.map(|f| f.0),
        steal_cpus: foreign.map(|f| f.1),
        error: None,
    };
    drop(probe);
    drop(ctl);
    drop(rtapp);
    drop(loads);
    drop(server);
    drop(dir);
    Ok(result)
}

/// The `final` report of a stopped rtapp (its stdout reader delivers it
/// shortly after the process exits).
fn drain_final(p: &mut Proc) -> Option<RtReport> {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(3) {
        match p.lines.recv_timeout(Duration::from_millis(100)) {
            Ok(v) => {
                if let Some(r) = RtReport::from_json(&v) {
                    return Some(r);
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => return None,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
    }
    None
}

// ---------------------------------------------------------------------------

/// Runs the experiment.
pub fn run(a: ExperimentArgs) -> Result<(), String> {
    if a.policies.is_empty() {
        return Err("no policies given".into());
    }
    if !(a.seconds.is_finite() && a.seconds > 0.0 && a.warmup.is_finite() && a.warmup >= 0.0) {
        return Err("--seconds must be > 0 and --warmup >= 0".into());
    }
    let bins = Bins {
        resoundd: crate::demo::sibling("resoundd")?,
        tool: crate::demo::sibling("resound-tool")?,
    };
    remove_stale_dirs();
    let intr = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, intr.clone()).map_err(|e| e.to_string())?;
    }
    let period_us = a.period as f64 * 1e6 / a.rate as f64;
    if let Some(c) = a.cpu {
        if c >= libc::CPU_SETSIZE as usize {
            return Err(format!("--cpu {c} is out of range"));
        }
        if a.policies
            .iter()
            .any(|p| matches!(p, Policy::Deadline | Policy::DeadlineReclaim))
        {
            return Err(
                "--cpu cannot be combined with the deadline policies: the kernel refuses \
                SCHED_DEADLINE to threads whose affinity is narrower than their root domain \
                (use an exclusive cpuset instead)"
                    .into(),
            );
        }
    }
    let rt_sched = if a.rt_fifo > 0 {
        format!("SCHED_FIFO {}", a.rt_fifo)
    } else {
        "SCHED_OTHER".into()
    };
    let competing = if a.rt_run_us > 0 {
        format!(
            "competing task {}/{} us at {rt_sched}",
            a.rt_run_us, a.rt_period_us
        )
    } else {
        "no competing task".into()
    };
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let placement = match a.cpu {
        Some(c) => format!("all pinned to CPU {c} of {cpus}"),
        None => format!("{cpus} CPUs"),
    };
    let title = format!(
        "resound experiment: {} clients x {}% in a chain, {} Hz / {} frames ({period_us:.0} us), {competing}, {} s per policy, {placement}",
        a.clients, a.busy, a.rate, a.period, a.seconds
    );
    progress(&title);
    let mut rows = Vec::new();
    for (i, &p) in a.policies.iter().enumerate() {
        progress(&format!(
            "policy {} of {}: {}",
            i + 1,
            a.policies.len(),
            p.name()
        ));
        let r = run_policy(&a, &bins, p, &intr).unwrap_or_else(|e| PolicyResult {
            policy: p.name().to_string(),
            error: Some(e),
            ..Default::default()
        });
        if let Some(e) = &r.error {
            progress(&format!("{}: failed: {e}", p.name()));
        }
        rows.push(r);
        if intr.load(Ordering::Acquire) {
            break;
        }
    }
    let mut out = format!("{title}\n");
    out += &format_table(&rows);
    out += &format_details(&rows);
    out += "  end = last client's finish - cycle start; lost = cycles the last client never finished;\n";
    out += "  rt misses = competing jobs past their deadline / jobs; budget/used = mean reserved budget per period / mean CPU used per cycle\n";
    out += "  by the reserved threads; (k/n): only k of the graph's n threads held a reservation\n";
    print!("{out}");
    if let Some(path) = &a.json {
        let v = json!({
            "config": {
                "clients": a.clients, "busy_pct": a.busy, "rate": a.rate, "frames": a.period,
                "period_us": period_us, "seconds": a.seconds, "warmup": a.warmup,
                "rt_period_us": a.rt_period_us, "rt_run_us": a.rt_run_us, "rt_sched": rt_sched,
                "fifo_priority": a.priority, "server_args": a.server_args,
                "cpus": cpus, "pinned_cpu": a.cpu,
            },
            "results": rows.iter().map(PolicyResult::to_json).collect::<Vec<_>>(),
        });
        let s = serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?;
        std::fs::write(path, s + "\n").map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if intr.load(Ordering::Acquire) {
        return Err("interrupted".into());
    }
    let failed = rows.iter().filter(|r| r.error.is_some()).count();
    if failed > 0 {
        return Err(format!("{failed} policy run(s) failed"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_nearest_rank() {
        assert_eq!(percentile(&[], 50.0), None);
        let v: Vec<u64> = (1..=200).collect();
        assert_eq!(percentile(&v, 50.0), Some(100));
        assert_eq!(percentile(&v, 99.0), Some(198));
        assert_eq!(percentile(&v, 100.0), Some(200));
        assert_eq!(percentile(&[7], 99.0), Some(7));
    }

    #[test]
    fn policy_flags() {
        assert_eq!(Policy::Other.server_flags(10), ["-r"]);
        assert_eq!(
            Policy::Fifo.server_flags(12),
            ["--sched", "fifo", "-P", "12"]
        );
        assert_eq!(
            Policy::Deadline.server_flags(10),
            ["--sched", "deadline", "--no-reclaim"]
        );
        assert_eq!(
            Policy::DeadlineReclaim.server_flags(10),
            ["--sched", "deadline", "--reclaim"]
        );
        assert_eq!(
            Policy::from_str("deadline+reclaim", false),
            Ok(Policy::DeadlineReclaim)
        );
    }

    #[test]
    fn table_rows_and_efficiency() {
        let rows = vec![
            PolicyResult {
                policy: "fifo".into(),
                xruns: 3,
                lost: 1,
                cycles: 7000,
                end_us: Some((2050.04, 2400.0, 4100.26)),
                rt: Some(RtReport {
                    jobs: 2000,
                    misses: 0,
                    p50_us: 1700.0,
                    p99_us: 1710.0,
                    max_us: 1720.5,
                    policy: "SCHED_FIFO 50".into(),
                }),
                used_ns: Some(2_000_000.0),
                ..Default::default()
            },
            PolicyResult {
                policy: "deadline".into(),
                budget_ns: Some(2_300_000.0),
                used_reserved_ns: Some(2_000_000.0),
                reserved_threads: 11.0,
                graph_threads: 11,
                used_ns: Some(2_000_000.0),
                ..Default::default()
            },
            PolicyResult {
                policy: "deadline+reclaim".into(),
                budget_ns: Some(690_000.0),
                used_reserved_ns: Some(600_000.0),
                reserved_threads: 3.02,
                graph_threads: 11,
                ..Default::default()
            },
            PolicyResult {
                policy: "deadline".into(),
                budget_ns: Some(2_600_000.0),
                used_reserved_ns: Some(2_000_000.0),
                reserved_threads: 10.8,
                graph_threads: 11,
                ..Default::default()
            },
            PolicyResult {
                policy: "other".into(),
                error: Some("boom".into()),
                ..Default::default()
            },
        ];
        let t = format_table(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 6);
        assert!(lines[0].starts_with("policy"));
        assert!(lines[0].ends_with("budget/used"));
        let f: Vec<&str> = lines[1].split_whitespace().collect();
        assert_eq!(
            f,
            ["fifo", "3", "1", "2050.0", "2400.0", "4100.3", "0/2000", "1720.5", "n/a"]
        );
        assert!(lines[2].ends_with("1.15"));
        assert!(lines[3].ends_with(" 1.15 (3/11)"));
        assert!(lines[4].ends_with(" 1.30 (10.8/11)"));
        assert!(lines[5].starts_with("other") && lines[5].contains("error"));
        // Columns line up: every data line is as wide as the header.
        for l in &lines[1..5] {
            assert_eq!(l.len(), lines[0].len(), "{l:?}");
        }
        assert!(format_details(&rows).contains("other: error: boom"));
    }

    #[test]
    fn foreign_load_subtracts_our_processes() {
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let a = CpuTicks {
            busy: 1000,
            steal: 10,
            total: 5000,
            ours: 300,
        };
        // 1000 ticks elapsed on all CPUs together: 500 busy, 300 of them ours, 50 stolen.
        let b = CpuTicks {
            busy: 1500,
            steal: 60,
            total: 6000,
            ours: 600,
        };
        let (foreign, steal) = foreign_load(a, b).unwrap();
        assert!((foreign - 0.2 * cpus).abs() < 1e-9);
        assert!((steal - 0.05 * cpus).abs() < 1e-9);
        assert!(foreign_load(b, b).is_none());
        // This process's own accounting reads back.
        assert!(cpu_ticks(&[std::process::id()]).is_some());
    }

    #[test]
    fn rt_report_parses_final_line() {
        let v: serde_json::Value = serde_json::from_str(
            r#"{"event":"final","jobs":2000,"misses":3,"resp_p50_us":1701.0,"resp_p99_us":1800.0,"resp_max_us":3400.5,"policy":"SCHED_FIFO 50"}"#,
        )
        .unwrap();
        let r = RtReport::from_json(&v).unwrap();
        assert_eq!(
            (r.jobs, r.misses, r.policy.as_str()),
            (2000, 3, "SCHED_FIFO 50")
        );
        assert_eq!(r.max_us, 3400.5);
        assert!(RtReport::from_json(&serde_json::json!({"event":"ready"})).is_none());
    }
}
