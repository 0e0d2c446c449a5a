//! Activation latency benchmark: `cargo bench -p resound --bench activation`.
//!
//! Prints, side by side from one run:
//!
//! 1. the raw cross-process futex one-way wake latency (the physical limit of
//!    one hop): this binary re-executes itself as a child process sharing one
//!    memfd page, and the two ping-pong on two futex words;
//! 2. resound's per-hop activation latency (`awake_ns - signal_ns` of each
//!    node's activation record) in a chain of five `resound-tool pass`
//!    processes ending in a native probe client inside this process, with
//!    the server's default GRUB reclaiming and with `--no-reclaim`;
//! 3. the driver thread's CPU time per cycle with 0, 1 and 10 clients;
//! 4. the cost of profiling: one profile record (10 client rows) written
//!    in-process into a real profile segment, and the driver's CPU per
//!    cycle with 10 clients with profiling on and off (`--profile-seconds 0`),
//!    runs alternated.
//!
//! Needs the release binaries next to the bench executable
//! (`cargo build --release --bins -p resound`). Every child process and
//! server is stopped by a drop guard, on error paths too.

use resound_client::prelude::*;
use resound_client::{Client, Control, PortFlags, PortKind};
use resound_lab::harness::{Bins, Child, ChildOptions, Server, ServerSpec, StderrMode};
use resound_shm::sync::current_cpu;
use resound_shm::sync::futex::{bump_and_wake, wait_changed, Wait};
use resound_shm::time::{frames_to_ns, monotonic_ns, sleep_until, thread_cpu_ns};
use resound_shm::ActivationRecord;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const RATE: u32 = 48_000;
const FRAMES: u32 = 128;
const PERIOD_NS: u64 = frames_to_ns(FRAMES as u64, RATE);
/// `pass` clients in the latency chain.
const CHAIN: usize = 5;
/// Hops recorded per cycle: the chain clients and the probe.
const HOPS: usize = CHAIN + 1;
/// Ping-pongs before the raw futex samples count.
const RAW_WARMUP: usize = 2_000;
/// Raw futex samples (back-to-back ping-pong).
const RAW_SAMPLES: usize = 20_000;
/// Raw futex samples paced at one per audio period.
const RAW_PACED_SAMPLES: usize = 1_500;
/// Cycles the hop measurement records (after the warm-up).
const HOP_CYCLES: usize = 5_200;
const HOP_WARMUP: Duration = Duration::from_secs(1);
/// Longest the hop measurement may take (it stops earlier once HOP_CYCLES are in).
const HOP_MAX: Duration = Duration::from_secs(30);
const DRIVER_WARMUP: Duration = Duration::from_millis(500);
const DRIVER_SECS: Duration = Duration::from_secs(3);
/// SCHED_FIFO priority of both raw ping-pong threads (the server's driver default).
const RAW_PRIO: i32 = 10;
/// Environment variable that turns this binary into the ping-pong child; holds the memfd number.
const CHILD_ENV: &str = "RESOUND_BENCH_CHILD";
/// Marks a hop sample that was not consistent.
const NONE: u64 = u64::MAX;

type Res<T> = Result<T, String>;

fn main() {
    if let Ok(fd) = std::env::var(CHILD_ENV) {
        std::process::exit(child_main(&fd));
    }
    match run() {
        Ok(table) => print!("{table}"),
        Err(e) => {
            eprintln!("activation bench: error: {e}");
            std::process::exit(1);
        }
    }
}

fn progress(msg: &str) {
    eprintln!("[activation] {msg}");
}

// ---------------------------------------------------------------------------
// Statistics and formatting

struct Stats {
    median: f64,
    p99: f64,
    max: f64,
    n: usize,
}

/// Median, p99 and max (ns) of the samples; None when there are none.
fn stats(v: &mut [u64]) -> Option<Stats> {
    if v.is_empty() {
        return None;
    }
    v.sort_unstable();
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2] as f64
    } else {
        (v[n / 2 - 1] as f64 + v[n / 2] as f64) / 2.0
    };
    let p99 = v[((n as f64 * 0.99).ceil() as usize).clamp(1, n) - 1] as f64;
    Some(Stats {
        median,
        p99,
        max: v[n - 1] as f64,
        n,
    })
}

fn us(ns: f64) -> String {
    format!("{:.1} us", ns / 1000.0)
}

fn row(out: &mut String, label: &str, s: &Option<Stats>) {
    let line = match s {
        Some(s) => format!(
            "{label:<42}{:>10}{:>10}{:>10}  {}\n",
            us(s.median),
            us(s.p99),
            us(s.max),
            s.n
        ),
        None => format!("{label:<42}{:>10}{:>10}{:>10}  0\n", "-", "-", "-"),
    };
    out.push_str(&line);
}

// ---------------------------------------------------------------------------
// 1. Raw cross-process futex ping-pong

/// A futex word and the timestamp that goes with it, on its own cache line.
#[repr(C, align(64))]
struct Line {
    word: AtomicU32,
    /// CPU the writer ran on (sched_getcpu), read after the stamp.
    cpu: AtomicU32,
    ns: AtomicU64,
}

/// The page both processes map.
#[repr(C)]
struct PingPage {
    /// A -> B: bumped by the parent; `ns` is its CLOCK_MONOTONIC stamp just before the wake.
    ping: Line,
    /// B -> A: bumped by the child; `ns` is its CLOCK_MONOTONIC stamp right after waking.
    pong: Line,
    /// 1: the child runs SCHED_FIFO; 2: SCHED_FIFO was refused (SCHED_OTHER).
    child_policy: AtomicU32,
    /// Non-zero: the child exits at its next wake-up.
    quit: AtomicU32,
}

const PAGE: usize = 4096;
const _: () = assert!(std::mem::size_of::<PingPage>() <= PAGE);

/// A shared mapping of one page of a memfd.
struct Shm {
    ptr: *mut libc::c_void,
}

impl Shm {
    fn map(fd: &OwnedFd) -> Res<Shm> {
        // SAFETY: maps PAGE bytes of a memfd that is (at least) PAGE bytes
        // long at a kernel-chosen address; the mapping is unmapped in Drop.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                PAGE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(format!("mmap: {}", std::io::Error::last_os_error()));
        }
        Ok(Shm { ptr })
    }

    fn page(&self) -> &PingPage {
        // SAFETY: the mapping is PAGE bytes, page aligned (so aligned for
        // PingPage), lives as long as `self`, and PingPage is only atomics,
        // valid for any bytes (the memfd starts zeroed). The other process
        // accesses it only through the same atomics.
        unsafe { &*(self.ptr as *const PingPage) }
    }
}

impl Drop for Shm {
    fn drop(&mut self) {
        // SAFETY: exactly the region mmap returned; no reference from page()
        // outlives `self`.
        unsafe { libc::munmap(self.ptr, PAGE) };
    }
}

fn memfd_page() -> Res<OwnedFd> {
    // SAFETY: a valid NUL-terminated name and valid flags.
    let fd = unsafe { libc::memfd_create(c"resound-bench-futex".as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(format!("memfd_create: {}", std::io::Error::last_os_error()));
    }
    // SAFETY: fd was just returned by memfd_create and nothing else owns it.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ftruncate on a valid fd we own.
    if unsafe { libc::ftruncate(fd.as_raw_fd(), PAGE as libc::off_t) } != 0 {
        return Err(format!("ftruncate: {}", std::io::Error::last_os_error()));
    }
    Ok(fd)
}

/// The ping-pong child (process B). Returns the exit code.
fn child_main(fd: &str) -> i32 {
    let Ok(raw) = fd.parse::<i32>() else {
        eprintln!("{CHILD_ENV} must hold a file descriptor number");
        return 2;
    };
    // SAFETY: the parent passed us this inherited fd number; nothing else in
    // this process uses or closes it.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let shm = match Shm::map(&fd) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("ping-pong child: {e}");
            return 2;
        }
    };
    let p = shm.page();
    let fifo = resound_sched::apply(0, &resound_sched::Policy::Fifo { priority: RAW_PRIO }).is_ok();
    p.child_policy
        .store(if fifo { 1 } else { 2 }, Ordering::Relaxed);
    let mut seen = p.ping.word.load(Ordering::Acquire);
    // Ready.
    bump_and_wake(&p.pong.word);
    loop {
        match wait_changed(&p.ping.word, seen, Some(monotonic_ns() + 5_000_000_000)) {
            Wait::Changed(v) => seen = v,
            Wait::TimedOut => {
                // SAFETY: getppid never fails.
                if unsafe { libc::getppid() } == 1 {
                    return 1;
                }
                continue;
            }
        }
        let t = monotonic_ns();
        if p.quit.load(Ordering::Acquire) != 0 {
            return 0;
        }
        p.pong.ns.store(t, Ordering::Relaxed);
        p.pong.cpu.store(current_cpu(), Ordering::Relaxed);
        // The Release in the bump publishes the stamp.
        bump_and_wake(&p.pong.word);
    }
}

struct RawResult {
    policy: String,
    one_way: Option<Stats>,
    round_trip: Option<Stats>,
    wake_call: Option<Stats>,
    waker_cpu: Option<Stats>,
    same_cpu: Option<Stats>,
    other_cpu: Option<Stats>,
    paced_one_way: Option<Stats>,
    paced_wake_call: Option<Stats>,
    paced_same_cpu: Option<Stats>,
    paced_other_cpu: Option<Stats>,
}

/// Samples of one ping-pong run (ns).
#[derive(Default)]
struct PingSamples {
    /// B's wake stamp - A's stamp before the wake.
    one_way: Vec<u64>,
    /// A's stamp after B's answer woke it - A's stamp before its wake.
    round_trip: Vec<u64>,
    /// Duration of A's bump_and_wake call (the FUTEX_WAKE syscall).
    wake_call: Vec<u64>,
    /// A's thread CPU time per round trip (one wake, one wait, one wake-up).
    waker_cpu: Vec<u64>,
    /// One-way samples where B woke on the CPU A ran on / on the other one.
    same_cpu: Vec<u64>,
    other_cpu: Vec<u64>,
}

/// Parent side (process A): `n` pings after `warmup`, optionally paced one per
/// `pace_ns` on absolute deadlines (as the driver sleeps between cycles).
fn ping_pong(p: &PingPage, warmup: usize, n: usize, pace_ns: Option<u64>) -> Res<PingSamples> {
    let mut s = PingSamples {
        one_way: Vec::with_capacity(n),
        round_trip: Vec::with_capacity(n),
        wake_call: Vec::with_capacity(n),
        waker_cpu: Vec::with_capacity(n),
        same_cpu: Vec::with_capacity(n),
        other_cpu: Vec::with_capacity(n),
    };
    let mut pong_seen = p.pong.word.load(Ordering::Acquire);
    let mut next = monotonic_ns();
    for i in 0..warmup + n {
        if let Some(pace) = pace_ns {
            next += pace;
            sleep_until(next);
        }
        let cpu0 = thread_cpu_ns();
        let my_cpu = current_cpu();
        let t0 = monotonic_ns();
        p.ping.ns.store(t0, Ordering::Relaxed);
        bump_and_wake(&p.ping.word);
        let t_ret = monotonic_ns();
        match wait_changed(&p.pong.word, pong_seen, Some(t0 + 1_000_000_000)) {
            Wait::Changed(v) => pong_seen = v,
            Wait::TimedOut => return Err("the ping-pong child stopped answering".into()),
        }
        let t2 = monotonic_ns();
        let cpu1 = thread_cpu_ns();
        // Acquire through the word's load in wait_changed: the child stored
        // the stamp and its CPU before its Release bump.
        let t1 = p.pong.ns.load(Ordering::Relaxed);
        let b_cpu = p.pong.cpu.load(Ordering::Relaxed);
        if i >= warmup {
            let one = t1.saturating_sub(t0);
            s.one_way.push(one);
            s.round_trip.push(t2.saturating_sub(t0));
            s.wake_call.push(t_ret.saturating_sub(t0));
            s.waker_cpu.push(cpu1.saturating_sub(cpu0));
            if b_cpu == my_cpu {
                s.same_cpu.push(one);
            } else {
                s.other_cpu.push(one);
            }
        }
    }
    Ok(s)
}

impl PingSamples {
    fn append(&mut self, mut o: PingSamples) {
        self.one_way.append(&mut o.one_way);
        self.round_trip.append(&mut o.round_trip);
        self.wake_call.append(&mut o.wake_call);
        self.waker_cpu.append(&mut o.waker_cpu);
        self.same_cpu.append(&mut o.same_cpu);
        self.other_cpu.append(&mut o.other_cpu);
    }
}

/// The ping-pong child process and the page shared with it. Run in two
/// halves (before and after the resound measurement) so that slow drift of a
/// noisy machine affects both sides of the comparison alike.
struct RawBench {
    shm: Shm,
    /// The ping-pong child process (stopped by its guard).
    _child: Child,
    child_fifo: bool,
    policy: String,
    tight: PingSamples,
    paced: PingSamples,
}

impl RawBench {
    fn start() -> Res<RawBench> {
        let fd = memfd_page()?;
        let shm = Shm::map(&fd)?;
        let exe = std::env::current_exe().map_err(|e| format!("current_exe: {e}"))?;
        let raw = fd.as_raw_fd();
        let mut cmd = Command::new(exe);
        cmd.env(CHILD_ENV, raw.to_string());
        // SAFETY: runs in the forked child before exec and only calls fcntl(2),
        // async-signal-safe, on the fd number copied into the closure: it clears
        // FD_CLOEXEC so that this one fd (and no other) survives the exec.
        unsafe {
            cmd.pre_exec(move || {
                if libc::fcntl(raw, libc::F_SETFD, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let opts = ChildOptions {
            die_with_parent: true,
            ..ChildOptions::default()
        };
        let child = Child::spawn(cmd, "the ping-pong child (this bench re-executed)", &opts)?;
        drop(fd);
        let p = shm.page();
        // The child bumps `pong` once when it is ready.
        if wait_changed(&p.pong.word, 0, Some(monotonic_ns() + 10_000_000_000)) == Wait::TimedOut {
            return Err("the ping-pong child did not start".into());
        }
        let child_fifo = p.child_policy.load(Ordering::Relaxed) == 1;
        Ok(RawBench {
            shm,
            _child: child,
            child_fifo,
            policy: String::new(),
            tight: PingSamples::default(),
            paced: PingSamples::default(),
        })
    }

    /// One half: `tight` back-to-back and `paced` period-paced ping-pongs,
    /// from a fresh SCHED_FIFO thread (the main thread stays SCHED_OTHER).
    fn run(&mut self, half: &str, tight: usize, paced: usize) -> Res<()> {
        let p = self.shm.page();
        let child_fifo = self.child_fifo;
        let (policy, t, pc) = std::thread::scope(|s| {
            s.spawn(|| -> Res<_> {
                let fifo = resound_sched::apply(0, &resound_sched::Policy::Fifo { priority: RAW_PRIO }).is_ok();
                let policy = match (fifo, child_fifo) {
                    (true, true) => format!("SCHED_FIFO {RAW_PRIO} (both processes)"),
                    (a, b) => format!(
                        "SCHED_OTHER: SCHED_FIFO refused for {}",
                        match (a, b) {
                            (false, false) => "both processes",
                            (false, true) => "the waker",
                            _ => "the woken process",
                        }
                    ),
                };
                progress(&format!(
                    "raw futex ({half}): {tight} back-to-back and {paced} period-paced ping-pongs, {policy}"
                ));
                let t = ping_pong(p, RAW_WARMUP, tight, None)?;
                let pc = ping_pong(p, 50, paced, Some(PERIOD_NS))?;
                Ok((policy, t, pc))
            })
            .join()
            .map_err(|_| "ping-pong thread panicked".to_string())?
        })?;
        self.policy = policy;
        self.tight.append(t);
        self.paced.append(pc);
        Ok(())
    }

    fn result(mut self) -> RawResult {
        let (t, p) = (&mut self.tight, &mut self.paced);
        RawResult {
            policy: std::mem::take(&mut self.policy),
            one_way: stats(&mut t.one_way),
            round_trip: stats(&mut t.round_trip),
            wake_call: stats(&mut t.wake_call),
            waker_cpu: stats(&mut t.waker_cpu),
            same_cpu: stats(&mut t.same_cpu),
            other_cpu: stats(&mut t.other_cpu),
            paced_one_way: stats(&mut p.one_way),
            paced_wake_call: stats(&mut p.wake_call),
            paced_same_cpu: stats(&mut p.same_cpu),
            paced_other_cpu: stats(&mut p.other_cpu),
        }
    }
}

impl Drop for RawBench {
    fn drop(&mut self) {
        let p = self.shm.page();
        p.quit.store(1, Ordering::Release);
        bump_and_wake(&p.ping.word);
        // `_child` is then killed and reaped by its own guard.
    }
}

/// Mean cost of one CLOCK_THREAD_CPUTIME_ID read (ns): resound's process
/// thread makes this call right after stamping `awake_ns` (outside the hop).
fn thread_cpu_clock_cost() -> f64 {
    let n = 100_000;
    let t0 = monotonic_ns();
    let mut x = 0u64;
    for _ in 0..n {
        x = x.wrapping_add(thread_cpu_ns());
    }
    std::hint::black_box(x);
    (monotonic_ns() - t0) as f64 / n as f64
}

// ---------------------------------------------------------------------------
// Server and tool processes (through resound_lab::harness)

/// How the bench spawns its servers and tools: killed with the bench.
fn bench_child_options() -> ChildOptions {
    ChildOptions {
        die_with_parent: true,
        ..ChildOptions::default()
    }
}

/// A `resoundd -S EXTRA -d dummy` at the bench's rate and period, in a
/// private socket directory; stopped and cleaned up on drop.
fn start_server(bins: &Bins, extra: &[&str]) -> Res<Server> {
    let (r, p) = (RATE.to_string(), FRAMES.to_string());
    let mut args = vec!["-S"];
    args.extend_from_slice(extra);
    args.extend_from_slice(&["-d", "dummy", "-r", &r, "-p", &p]);
    let mut spec = ServerSpec::new(bins.clone(), "bench", &args);
    spec.env.push(("RESOUND_LOG".into(), "info".into()));
    spec.child = ChildOptions {
        stderr: StderrMode::Keep {
            keep: 200,
            echo: None,
        },
        ..bench_child_options()
    };
    spec.tools = bench_child_options();
    Server::start(spec)
}

/// Starts `n` pass tools named `{prefix}1..{prefix}n` and waits until all are ready.
/// Returns them and the scheduling of their process threads.
fn pass_tools(srv: &Server, prefix: &str, n: usize) -> Res<(Vec<Child>, String)> {
    let mut tools = Vec::with_capacity(n);
    for i in 1..=n {
        tools.push(srv.spawn_tool(&format!("{prefix}{i}"), &["pass"])?);
    }
    let mut sched = String::new();
    for t in &mut tools {
        let v = t.wait_event("ready", Duration::from_secs(10), &mut || Ok(()))?;
        if v["name"] != t.what() {
            return Err(format!("tool {} got the name {}", t.what(), v["name"]));
        }
        let s = v["sched"].as_str().unwrap_or_default().to_string();
        if sched.is_empty() || !s.starts_with("SCHED_FIFO") {
            sched = s;
        }
    }
    Ok((tools, sched))
}

/// Connects capture_1 -> tools... -> `last` (a full input port name).
fn chain(c: &Client, tools: &[Child], last: &str) -> Res<()> {
    let mut src = "system:capture_1".to_string();
    for t in tools {
        let dst = format!("{}:in", t.what());
        c.connect(&src, &dst)
            .map_err(|e| format!("connect {src} -> {dst}: {e}"))?;
        src = format!("{}:out", t.what());
    }
    c.connect(&src, last)
        .map_err(|e| format!("connect {src} -> {last}: {e}"))
}

fn xruns(c: &Client) -> u64 {
    c.status().map(|s| s.xruns).unwrap_or(0)
}

// ---------------------------------------------------------------------------
// 2. resound per-hop latency

/// Hop samples written by the probe's process callback without allocating:
/// `data[cycle * HOPS + hop]`, NONE when inconsistent.
struct HopLog {
    recording: AtomicBool,
    len: AtomicUsize,
    data: Vec<AtomicU64>,
}

/// signal -> awake of `r` for `cycle`, if the record consistently describes that
/// cycle (and, unless `own`, a finished one).
fn hop_of(r: &ActivationRecord, cycle: u64, own: bool) -> u64 {
    let c1 = r.cycle.load(Ordering::Acquire);
    let f1 = r.finished_cycle.load(Ordering::Acquire);
    let sig = r.signal_ns.load(Ordering::Relaxed);
    let awk = r.awake_ns.load(Ordering::Relaxed);
    let c2 = r.cycle.load(Ordering::Acquire);
    let f2 = r.finished_cycle.load(Ordering::Acquire);
    let ok = c1 == cycle && c2 == cycle && (own || (f1 == cycle && f2 == cycle)) && awk >= sig;
    if ok {
        awk - sig
    } else {
        NONE
    }
}

struct HopResult {
    all: Option<Stats>,
    per_hop: Vec<Option<Stats>>,
    cycles: usize,
    dropped: usize,
    xruns: u64,
    driver_sched: String,
    client_sched: String,
}

fn hop_latency(bins: &Bins, extra: &[&str]) -> Res<HopResult> {
    progress(&format!(
        "hop latency: starting resoundd {} and a chain of 5 pass clients",
        extra.join(" ")
    ));
    let srv = start_server(bins, extra)?;
    let (tools, tool_sched) = pass_tools(&srv, "p", CHAIN)?;
    let probe = srv.open_client("probe")?;
    let inp = probe
        .register_port("in", PortKind::Audio, PortFlags::INPUT)
        .map_err(|e| format!("register probe:in: {e}"))?;
    let snap = probe.snapshot();
    let mut slots = [0u32; HOPS];
    for (i, t) in tools.iter().enumerate() {
        slots[i] = snap
            .clients
            .iter()
            .find(|(_, n, _)| n == t.what())
            .map(|(s, _, _)| *s)
            .ok_or_else(|| format!("client {} not in the graph", t.what()))?;
    }
    slots[CHAIN] = probe.slot();
    let log = Arc::new(HopLog {
        recording: AtomicBool::new(false),
        len: AtomicUsize::new(0),
        data: (0..HOP_CYCLES * HOPS)
            .map(|_| AtomicU64::new(NONE))
            .collect(),
    });
    let l = log.clone();
    let pc = probe.clone();
    probe
        .activate(move |ps: &mut resound_client::ProcessScope| {
            let _ = inp.audio_in(ps);
            if !l.recording.load(Ordering::Relaxed) {
                return Control::Continue;
            }
            let i = l.len.load(Ordering::Relaxed);
            if i >= HOP_CYCLES {
                return Control::Continue;
            }
            let view = pc.view();
            let c = ps.cycle();
            for (j, &slot) in slots.iter().enumerate() {
                let v = view.record(slot).map_or(NONE, |r| hop_of(r, c, j == CHAIN));
                l.data[i * HOPS + j].store(v, Ordering::Relaxed);
            }
            l.len.store(i + 1, Ordering::Release);
            Control::Continue
        })
        .map_err(|e| format!("activate probe: {e}"))?;
    let client_sched = probe.process_thread_sched();
    chain(&probe, &tools, "probe:in")?;
    let driver_sched = probe
        .status()
        .map(|s| s.driver_sched)
        .unwrap_or_else(|e| format!("unknown ({e})"));
    progress(&format!(
        "hop latency: chain running (driver {driver_sched}, pass clients {tool_sched}, probe {client_sched}); warm-up {} s",
        HOP_WARMUP.as_secs()
    ));
    std::thread::sleep(HOP_WARMUP);
    let x0 = xruns(&probe);
    log.recording.store(true, Ordering::Release);
    let t0 = Instant::now();
    let mut last_report = Instant::now();
    loop {
        let n = log.len.load(Ordering::Acquire);
        if n >= HOP_CYCLES || t0.elapsed() > HOP_MAX {
            break;
        }
        if last_report.elapsed() >= Duration::from_secs(3) {
            last_report = Instant::now();
            progress(&format!("hop latency: {n}/{HOP_CYCLES} cycles recorded"));
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    log.recording.store(false, Ordering::Release);
    let x1 = xruns(&probe);
    probe
        .deactivate()
        .map_err(|e| format!("deactivate probe: {e}"))?;
    let cycles = log.len.load(Ordering::Acquire).min(HOP_CYCLES);
    if cycles < HOP_CYCLES {
        progress(&format!(
            "hop latency: only {cycles} cycles recorded in {} s (server log:\n{})",
            HOP_MAX.as_secs(),
            srv.log().tail(20)
        ));
    }
    let mut all = Vec::with_capacity(cycles * HOPS);
    let mut per: Vec<Vec<u64>> = (0..HOPS).map(|_| Vec::with_capacity(cycles)).collect();
    let mut dropped = 0;
    for i in 0..cycles {
        for (j, p) in per.iter_mut().enumerate() {
            let v = log.data[i * HOPS + j].load(Ordering::Relaxed);
            if v == NONE {
                dropped += 1;
            } else {
                all.push(v);
                p.push(v);
            }
        }
    }
    drop(probe);
    drop(tools);
    drop(srv);
    Ok(HopResult {
        all: stats(&mut all),
        per_hop: per.iter_mut().map(|v| stats(v)).collect(),
        cycles,
        dropped,
        xruns: x1.saturating_sub(x0),
        driver_sched,
        client_sched: if client_sched.starts_with("SCHED_FIFO") {
            tool_sched
        } else {
            client_sched
        },
    })
}

// ---------------------------------------------------------------------------
// 3. Driver CPU per cycle

/// Samples `record(0)`'s CPU time once per cycle from this (non-client) thread for
/// `dur`. The driver stores it at the end of each cycle, so it is read 3/4 of
/// a period after the cycle began and kept only if the cycle did not change
/// around the read.
fn sample_driver_cpu(c: &Client, dur: Duration) -> Vec<u64> {
    let view = c.view();
    let h = view.header();
    let period = h.period_ns.load(Ordering::Relaxed).max(1);
    let Some(r0) = view.record(0) else {
        return Vec::new();
    };
    let mut out = Vec::with_capacity((dur.as_nanos() / period as u128) as usize + 16);
    let mut last = 0;
    let t0 = Instant::now();
    while t0.elapsed() < dur {
        let t = view.timer();
        let cycle = t.cycle;
        if cycle == last {
            sleep_until(t.next_start_ns + period * 3 / 4);
            continue;
        }
        sleep_until(t.start_ns + period * 3 / 4);
        let c1 = h.cycle.load(Ordering::Acquire);
        let cpu = r0.last_cpu().1;
        let c2 = h.cycle.load(Ordering::Acquire);
        if c1 == cycle && c2 == cycle {
            out.push(cpu);
        }
        last = cycle;
    }
    out
}

struct CpuResult {
    stats: Option<Stats>,
    xruns: u64,
}

fn driver_cpu(bins: &Bins, clients: usize, profiling: bool) -> Res<CpuResult> {
    progress(&format!(
        "driver CPU: fresh resoundd with {clients} pass client(s), profiling {}",
        if profiling { "on" } else { "off" }
    ));
    let extra: &[&str] = if profiling {
        &[]
    } else {
        &["--profile-seconds", "0"]
    };
    let srv = start_server(bins, extra)?;
    let (tools, _) = pass_tools(&srv, "q", clients)?;
    // Opened, never activated: not part of the graph, but maps the view.
    let probe = srv.open_client("cpuprobe")?;
    if clients > 0 {
        chain(&probe, &tools, "system:playback_1")?;
    }
    std::thread::sleep(DRIVER_WARMUP);
    let x0 = xruns(&probe);
    let mut v = sample_driver_cpu(&probe, DRIVER_SECS);
    let x1 = xruns(&probe);
    drop(probe);
    drop(tools);
    drop(srv);
    Ok(CpuResult {
        stats: stats(&mut v),
        xruns: x1.saturating_sub(x0),
    })
}

/// Time of one `ProfileRing::write_cycle` with 10 client rows into a real
/// (memfd) profile segment, as the driver does once per cycle: (hot: per-call
/// samples of batches of 100 back-to-back calls; cold: single calls, each
/// after sweeping 16 MiB through the caches, as when the driver comes back
/// to the ring one period later).
fn profile_write_cost() -> (Option<Stats>, Option<Stats>) {
    use resound_shm::profile::{CycleData, NodeData, ProfileLayout, ProfileSegment};
    progress("profile record write cost (in-process)");
    let l = ProfileLayout::for_history(30.0, RATE, FRAMES, 16, 64);
    let Ok(seg) = ProfileSegment::create(l) else {
        return (None, None);
    };
    let ring = seg.ring();
    let rows: Vec<NodeData> = (0..10)
        .map(|i| NodeData {
            uuid: i,
            slot: i as u32,
            flags: 7,
            signal_ns: 1,
            awake_ns: 2,
            finish_ns: 3,
            cpu_ns: 4,
            budget_ns: 5,
            predicted_ns: 6,
        })
        .collect();
    let mut v = Vec::with_capacity(2000);
    let mut c = CycleData::default();
    for batch in 0..2200u64 {
        let t0 = monotonic_ns();
        for k in 0..100 {
            c.cycle = batch * 100 + k;
            ring.write_cycle(&c, rows.iter().copied());
        }
        let dt = monotonic_ns() - t0;
        if batch >= 200 {
            v.push(dt / 100);
        }
    }
    let hot = stats(&mut v);
    let mut sweep = vec![0u64; 2 << 20];
    let mut cold = Vec::with_capacity(2000);
    for k in 0..2000u64 {
        for (i, x) in sweep.iter_mut().enumerate().step_by(8) {
            *x = x.wrapping_add(i as u64 ^ k);
        }
        std::hint::black_box(&sweep);
        c.cycle += 1;
        let t0 = monotonic_ns();
        ring.write_cycle(&c, rows.iter().copied());
        cold.push(monotonic_ns() - t0);
    }
    (hot, stats(&mut cold))
}

// ---------------------------------------------------------------------------

fn run() -> Res<String> {
    let bins = Bins::beside_current_exe()?;
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());

    let mut raw = RawBench::start()?;
    raw.run("1st half", RAW_SAMPLES / 2, RAW_PACED_SAMPLES / 2)?;
    let hop = hop_latency(&bins, &[])?;
    // The same chain without GRUB reclaiming (the server's default is on).
    let hop_norec = hop_latency(&bins, &["--no-reclaim"])?;
    raw.run("2nd half", RAW_SAMPLES / 2, RAW_PACED_SAMPLES / 2)?;
    let raw = raw.result();
    let cpu_clock = thread_cpu_clock_cost();
    let mut cpu = Vec::new();
    for n in [0, 1, 10] {
        cpu.push((n, driver_cpu(&bins, n, true)?));
    }
    let record = profile_write_cost();
    // Profiling on/off with 10 clients, alternated so drift hits both alike.
    let (mut on, mut off) = (Vec::new(), Vec::new());
    for _ in 0..3 {
        off.push(driver_cpu(&bins, 10, false)?);
        on.push(driver_cpu(&bins, 10, true)?);
    }
    // Mean of the runs' medians, and their spread (run-to-run noise).
    let median_of = |v: &[CpuResult]| {
        let m: Vec<f64> = v
            .iter()
            .filter_map(|r| r.stats.as_ref().map(|s| s.median))
            .collect();
        let lo = m.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = m.iter().copied().fold(0.0, f64::max);
        (!m.is_empty()).then(|| (m.iter().sum::<f64>() / m.len() as f64, lo, hi))
    };

    let fifo_everywhere = raw.policy.starts_with("SCHED_FIFO")
        && hop.driver_sched.starts_with("SCHED_FIFO")
        && hop.client_sched.starts_with("SCHED_FIFO");
    let mut out = String::new();
    out.push_str(&format!(
        "resound activation benchmark ({RATE} Hz, {FRAMES} frames, sync mode, {cores} cores, policy {})\n",
        if fifo_everywhere { "SCHED_FIFO" } else { "mixed, see below" }
    ));
    out.push_str(&format!(
        "  raw ping-pong: {}; resound driver: {}; clients: {}\n",
        raw.policy, hop.driver_sched, hop.client_sched
    ));
    out.push_str(&format!(
        "{:<42}{:>10}{:>10}{:>10}  samples\n",
        "measure", "median", "p99", "max"
    ));
    row(&mut out, "raw futex one-way (cross-process)", &raw.one_way);
    row(&mut out, "raw futex round trip", &raw.round_trip);
    row(
        &mut out,
        "raw futex one-way, paced 1 per period",
        &raw.paced_one_way,
    );
    row(
        &mut out,
        &format!("resound hop signal->awake ({CHAIN}-chain)"),
        &hop.all,
    );
    match (&hop.all, &raw.one_way) {
        (Some(h), Some(r)) if r.median > 0.0 => {
            let ratio = h.median / r.median;
            out.push_str(&format!(
                "  ratio hop/raw median                    {ratio:.2}x  (goal <= 1.5x: {})\n",
                if ratio <= 1.5 { "met" } else { "NOT met" }
            ));
        }
        _ => out.push_str("  ratio hop/raw median                    n/a\n"),
    }
    row(
        &mut out,
        &format!("resound hop, --no-reclaim ({CHAIN}-chain)"),
        &hop_norec.all,
    );
    if let (Some(h), Some(r)) = (&hop_norec.all, &raw.one_way) {
        out.push_str(&format!(
            "  ratio hop (no reclaim)/raw median       {:.2}x; driver {}\n",
            h.median / r.median.max(1.0),
            hop_norec.driver_sched
        ));
    }
    for (n, r) in &cpu {
        let label = match n {
            1 => "driver CPU per cycle, 1 client".to_string(),
            n => format!("driver CPU per cycle, {n} clients"),
        };
        row(&mut out, &label, &r.stats);
    }
    row(&mut out, "profile record write, 10 clients, hot", &record.0);
    row(
        &mut out,
        "profile record write, 10 clients, cold",
        &record.1,
    );
    if let (Some(w), Some(r)) = (&record.1, &raw.one_way) {
        out.push_str(&format!(
            "  profiling cost per cycle (cold) / raw futex one-way, medians: {:.3}x\n",
            w.median / r.median.max(1.0)
        ));
    }
    if let (Some(a), Some(b)) = (median_of(&on), median_of(&off)) {
        out.push_str(&format!(
            "  driver CPU, 10 clients, mean of 3 run medians: profiling on {} (runs {}..{}), off {} (runs {}..{}); on/off {:.2}x\n",
            us(a.0),
            us(a.1),
            us(a.2),
            us(b.0),
            us(b.1),
            us(b.2),
            a.0 / b.0.max(1.0),
        ));
    }
    out.push_str("details\n");
    if raw.same_cpu.is_some() || raw.paced_same_cpu.is_some() {
        row(
            &mut out,
            "  raw one-way, woken on the waker's CPU",
            &raw.same_cpu,
        );
        row(
            &mut out,
            "  raw one-way, woken on the other CPU",
            &raw.other_cpu,
        );
        row(
            &mut out,
            "  paced one-way, on the waker's CPU",
            &raw.paced_same_cpu,
        );
        row(
            &mut out,
            "  paced one-way, on the other CPU",
            &raw.paced_other_cpu,
        );
    } else {
        out.push_str("  raw: every wake-up ran on the other CPU than its waker\n");
    }
    row(
        &mut out,
        "  raw FUTEX_WAKE call (waker side)",
        &raw.wake_call,
    );
    row(&mut out, "  raw waker CPU per round trip", &raw.waker_cpu);
    row(
        &mut out,
        "  paced FUTEX_WAKE call (waker side)",
        &raw.paced_wake_call,
    );
    for (j, s) in hop.per_hop.iter().enumerate() {
        let label = if j == 0 {
            "  hop 1: driver -> p1".to_string()
        } else if j == CHAIN {
            format!("  hop {}: p{CHAIN} -> probe (in-process)", j + 1)
        } else {
            format!("  hop {}: p{j} -> p{}", j + 1, j + 1)
        };
        row(&mut out, &label, s);
    }
    out.push_str(&format!(
        "  hop run: {} cycles, {} inconsistent samples dropped, {} xruns; driver CPU runs: xruns {}\n",
        hop.cycles,
        hop.dropped,
        hop.xruns,
        cpu.iter()
            .map(|(n, r)| format!("{n} clients: {}", r.xruns))
            .collect::<Vec<_>>()
            .join(", ")
    ));
    out.push_str(&format!(
        "  CLOCK_THREAD_CPUTIME_ID read (made after the awake_ns stamp, so not in the hop): {:.2} us\n",
        cpu_clock / 1000.0
    ));
    Ok(out)
}
