//! `resound-tool`: small real clients for demos, tests and benchmarks.
//!
//! Each subcommand opens one client, registers its ports, activates, and runs
//! until SIGINT/SIGTERM (or `--seconds`), printing a JSON report line on
//! stdout every `--report-ms` and at exit. Process callbacks keep their
//! state in atomics so that nothing on the real-time path allocates; the
//! reports are built on the main thread.

use clap::{Parser, Subcommand};
use resound_client::{Client, Control, OpenOptions, PortFlags, PortKind, ProcessScope};
use resound_shm::time::frames_to_ns;
use serde_json::json;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Modulus of the counter test signal: sums of up to 16 copies stay exact in f32.
pub const COUNTER_MOD: u64 = 1 << 20;

#[derive(Debug, Parser)]
#[command(
    name = "resound-tool",
    version,
    about = "Real resound clients for demos, tests and benchmarks",
    after_help = "Also, a program that is not a client: resound-tool periodic [OPTIONS], a stand-in for an unmodified media player with a known frame rate (threads, blocking calls, rate change, aperiodic mode, per-frame work, frame log), for the legacy period detector and reservations, with its own --help. (The competing real-time load is Debian's rt-app, driven by the lab library's rtapp module.)"
)]
struct Cli {
    /// Client name.
    #[arg(short = 'n', long, global = true)]
    name: Option<String>,
    /// Server name.
    #[arg(short = 's', long, global = true)]
    server: Option<String>,
    /// Stop after this many seconds (default: run until SIGINT/SIGTERM).
    #[arg(long, global = true)]
    seconds: Option<f64>,
    /// Print a JSON report line this often (milliseconds); 0: only at exit.
    #[arg(long, global = true, default_value_t = 0)]
    report_ms: u64,
    /// Connect ports after activation: SRC=DST pairs (full names; "@" stands for this client's name).
    #[arg(short = 'c', long = "connect", global = true)]
    connect: Vec<String>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Sine generator: output `out`.
    Sine {
        /// Frequency (Hz).
        #[arg(long, default_value_t = 440.0)]
        freq: f32,
        /// Amplitude.
        #[arg(long, default_value_t = 0.3)]
        amp: f32,
    },
    /// Test signal generator: `out` carries the frame counter modulo 2^20, sample-exact.
    Counter,
    /// Copies `in` to `out`.
    Pass,
    /// Multiplies `in` by a gain into `out`.
    Gain {
        /// Gain factor.
        #[arg(long, default_value_t = 0.5)]
        gain: f32,
    },
    /// One-pole low-pass filter from `in` to `out`.
    Lowpass {
        /// Cutoff frequency (Hz).
        #[arg(long, default_value_t = 1000.0)]
        cutoff: f32,
    },
    /// Measures `in` (peak and RMS per report).
    Meter,
    /// Checks `in` against the counter signal at `ref`: in = gain x ref delayed by `latency` frames.
    Check {
        /// Expected delay of `in` behind `ref`, in frames.
        #[arg(long, default_value_t = 0)]
        latency: u64,
        /// Expected gain.
        #[arg(long, default_value_t = 1.0)]
        gain: f32,
    },
    /// Burns CPU (thread CPU clock) for a fraction of each period, passing `in` to `out`.
    Load {
        /// Percent of the period to stay busy.
        #[arg(long, default_value_t = 10.0)]
        busy: f64,
        /// Stay busy this many milliseconds of CPU time in one cycle (an
        /// overrun, as a plugin loading a preset in its callback would
        /// make), at --spike-after-s and then every --spike-every-s; 0:
        /// never.
        #[arg(long = "spike-ms", default_value_t = 0.0)]
        spike_ms: f64,
        /// When the spike comes: this many seconds after the first cycle.
        #[arg(long = "spike-after-s", default_value_t = 2.0)]
        spike_after_s: f64,
        /// Spike again every this many seconds after the first (0: once).
        #[arg(long = "spike-every-s", default_value_t = 0.0)]
        spike_every_s: f64,
    },
    /// Breaks a rule every client must follow (see --mode), to test that the server survives it.
    Misbehave {
        /// scribble: write garbage into its own activation record;
        /// stall: stop returning from process (sleeps 1 s per cycle);
        /// alloc: allocate in the process callback (must abort in debug builds).
        #[arg(long)]
        mode: String,
    },
}

/// The cycles of the xrun notifications a client was sent.
#[derive(Debug, Default, Clone)]
struct Xruns {
    /// Every one.
    all: Vec<u64>,
    /// Those naming no late client: the driver woke late (the machine
    /// stalled it) or the device had an xrun.
    driver: Vec<u64>,
}

/// Bad cycles and gaps remembered individually (to match them with xruns).
const EVENT_CAP: usize = 65536;

/// Statistics a process callback publishes.
struct Stats {
    cycles: AtomicU64,
    ok: AtomicU64,
    silent: AtomicU64,
    bad: AtomicU64,
    ref_gaps: AtomicU64,
    no_ref: AtomicU64,
    first_bad_cycle: AtomicU64,
    first_bad_got: AtomicU64,
    first_bad_want: AtomicU64,
    /// Cycles of the first EVENT_CAP bad cycles and ref gaps: cycle << 1 | (1 for a gap).
    events: Box<[AtomicU64]>,
    /// For each of those, the cycle's start (CLOCK_MONOTONIC ns), its
    /// period (ns) and, for a gap, the start of the last cycle the check
    /// had seen (0 otherwise), to match it with machine stalls.
    event_times: Box<[[AtomicU64; 3]]>,
    n_events: AtomicU64,
    peak_bits: AtomicU64,
    sumsq_bits: AtomicU64,
    samples: AtomicU64,
    last_frame_time: AtomicU64,
}

impl Default for Stats {
    fn default() -> Self {
        let z = || AtomicU64::new(0);
        Stats {
            cycles: z(),
            ok: z(),
            silent: z(),
            bad: z(),
            ref_gaps: z(),
            no_ref: z(),
            first_bad_cycle: z(),
            first_bad_got: z(),
            first_bad_want: z(),
            events: (0..EVENT_CAP).map(|_| z()).collect(),
            event_times: (0..EVENT_CAP).map(|_| [z(), z(), z()]).collect(),
            n_events: z(),
            peak_bits: z(),
            sumsq_bits: z(),
            samples: z(),
            last_frame_time: z(),
        }
    }
}

impl Stats {
    /// Remembers the cycle of a bad cycle or ref gap, with when it began,
    /// its period and (a gap) when the last cycle seen began (real-time safe).
    fn event(&self, ps: &ProcessScope, rate: f64, gap: bool, last_seen_ns: u64) {
        let i = self.n_events.fetch_add(1, Ordering::Relaxed) as usize;
        if i < EVENT_CAP {
            self.events[i].store(ps.cycle() << 1 | gap as u64, Ordering::Relaxed);
            let period_ns = (ps.frames() as f64 * 1e9 / rate) as u64;
            let [start, period, seen] = &self.event_times[i];
            start.store(ps.cycle_start_ns(), Ordering::Relaxed);
            period.store(period_ns, Ordering::Relaxed);
            seen.store(last_seen_ns, Ordering::Relaxed);
        }
    }

    /// Every remembered event as `[cycle, start_ns, period_ns, gap,
    /// last_seen_ns]`, for the final report.
    fn event_list(&self) -> Vec<[u64; 5]> {
        let n = (self.n_events.load(Ordering::Relaxed) as usize).min(EVENT_CAP);
        (0..n)
            .map(|i| {
                let v = self.events[i].load(Ordering::Relaxed);
                let [start, period, seen] = &self.event_times[i];
                let ld = |a: &AtomicU64| a.load(Ordering::Relaxed);
                [v >> 1, ld(start), ld(period), v & 1, ld(seen)]
            })
            .collect()
    }

    /// (bad cycles, gaps) no xrun of `xruns` (sorted) explains
    /// ([`Self::unexplained_events`]); events past the log's capacity count
    /// as unexplained (as bad cycles, once).
    fn unexplained(&self, xruns: &[u64]) -> (u64, u64) {
        let n = self.n_events.load(Ordering::Relaxed) as usize;
        let (mut bad, mut gaps) = (0, 0);
        for e in self.unexplained_events(xruns) {
            if e[3] == 1 {
                gaps += 1
            } else {
                bad += 1
            }
        }
        let over = n.saturating_sub(EVENT_CAP) as u64;
        (bad + over, gaps)
    }

    /// The remembered events ([`Self::event_list`]) that no xrun cycle of
    /// `xruns` (sorted) explains. An xrun in [cycle - 3, cycle + 1] explains an event; a
    /// gap, blocks missing since the last cycle the check saw, is
    /// explained from that cycle on too: an xrun anywhere in
    /// [seen - 3, cycle + 1], seen being the cycle that began at its
    /// `last_seen_ns`. A client held for many cycles sees one gap at its
    /// next cycle, while the xruns of its stall came when it began.
    fn unexplained_events(&self, xruns: &[u64]) -> Vec<[u64; 5]> {
        debug_assert!(xruns.is_sorted());
        let any_in = |lo: u64, hi: u64| {
            let i = xruns.partition_point(|&x| x < lo);
            xruns.get(i).is_some_and(|&x| x <= hi)
        };
        self.event_list()
            .into_iter()
            .filter(|&[cycle, start, period, gap, seen]| {
                let from = if gap == 1 && seen != 0 && period != 0 && seen < start {
                    cycle.saturating_sub((start - seen + period / 2) / period)
                } else {
                    cycle
                };
                !any_in(from.saturating_sub(3), cycle + 1)
            })
            .collect()
    }
}

fn fmax_atomic(a: &AtomicU64, v: f64) {
    let cur = f64::from_bits(a.load(Ordering::Relaxed));
    if v > cur {
        a.store(v.to_bits(), Ordering::Relaxed);
    }
}

fn fadd_atomic(a: &AtomicU64, v: f64) {
    let cur = f64::from_bits(a.load(Ordering::Relaxed));
    a.store((cur + v).to_bits(), Ordering::Relaxed);
}

/// Entry point of the binary.
pub fn main(argv: Vec<String>) -> i32 {
    if argv.get(1).map(String::as_str) == Some("periodic") {
        return periodic_main(argv);
    }
    client_main(argv)
}

/// `resound-tool periodic`: a program with a known period (not a client).
fn periodic_main(argv: Vec<String>) -> i32 {
    /// A stand-in for an unmodified media player with a known frame rate:
    /// each thread waits for its next frame in the chosen blocking call,
    /// burns --work-us of CPU and shows the frame; prints a JSON report with
    /// the inter-frame times.
    #[derive(Parser)]
    struct PeriodicCli {
        #[command(flatten)]
        args: crate::periodic::PeriodicArgs,
    }
    let argv = std::iter::once("resound-tool periodic".to_string()).chain(argv.into_iter().skip(2));
    match crate::periodic::run(PeriodicCli::parse_from(argv).args) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("resound-tool periodic: {e}");
            1
        }
    }
}

fn client_main(argv: Vec<String>) -> i32 {
    let cli = Cli::parse_from(argv);
    match run(cli) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("resound-tool: {e}");
            1
        }
    }
}

fn run(cli: Cli) -> Result<(), String> {
    let default_name = match &cli.cmd {
        Cmd::Sine { .. } => "sine",
        Cmd::Counter => "counter",
        Cmd::Pass => "pass",
        Cmd::Gain { .. } => "gain",
        Cmd::Lowpass { .. } => "lowpass",
        Cmd::Meter => "meter",
        Cmd::Check { .. } => "check",
        Cmd::Load { .. } => "load",
        Cmd::Misbehave { .. } => "misbehave",
    };
    let name = cli.name.clone().unwrap_or_else(|| default_name.to_string());
    let client = Client::open(
        &name,
        OpenOptions {
            server: cli.server.clone(),
            ..Default::default()
        },
    )
    .map_err(|e| e.to_string())?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone()).map_err(|e| e.to_string())?;
    }
    let gone = Arc::new(AtomicBool::new(false));
    let xruns = Arc::new(std::sync::Mutex::new(Xruns::default()));
    let (g, st, xr) = (gone.clone(), stop.clone(), xruns.clone());
    client.set_notification_handler(move |_c: &Client, n: &resound_client::Event| match n {
        resound_client::Event::Shutdown { reason } => {
            eprintln!("resound-tool: server shut down: {reason}");
            g.store(true, Ordering::Release);
            st.store(true, Ordering::Release);
        }
        resound_client::Event::Xrun { cycle, late } => {
            let mut x = xr.lock().unwrap_or_else(|e| e.into_inner());
            x.all.push(*cycle);
            if late.is_empty() {
                x.driver.push(*cycle);
            }
        }
        _ => {}
    });
    let stats = Arc::new(Stats::default());
    let rate = client.sample_rate() as f32;
    let audio_in = |c: &Client, n: &str| {
        c.register_port(n, PortKind::Audio, PortFlags::INPUT)
            .map_err(|e| e.to_string())
    };
    let audio_out = |c: &Client, n: &str| {
        c.register_port(n, PortKind::Audio, PortFlags::OUTPUT)
            .map_err(|e| e.to_string())
    };
    let s = stats.clone();
    match cli.cmd {
        Cmd::Sine { freq, amp } => {
            let mut out = audio_out(&client, "out")?;
            let mut phase = 0.0f32;
            let step = freq / rate;
            activate(&client, move |ps: &mut ProcessScope| {
                for y in out.audio_out(ps) {
                    *y = amp * (2.0 * std::f32::consts::PI * phase).sin();
                    phase = (phase + step).fract();
                }
                s.cycles.fetch_add(1, Ordering::Relaxed);
                Control::Continue
            })?;
        }
        Cmd::Counter => {
            let mut out = audio_out(&client, "out")?;
            activate(&client, move |ps: &mut ProcessScope| {
                let t = ps.last_frame_time();
                for (i, y) in out.audio_out(ps).iter_mut().enumerate() {
                    *y = ((t + i as u64) % COUNTER_MOD) as f32;
                }
                s.cycles.fetch_add(1, Ordering::Relaxed);
                s.last_frame_time.store(t, Ordering::Relaxed);
                Control::Continue
            })?;
        }
        Cmd::Pass | Cmd::Gain { .. } | Cmd::Lowpass { .. } | Cmd::Load { .. } => {
            let inp = audio_in(&client, "in")?;
            let mut out = audio_out(&client, "out")?;
            let (gain, coef, busy, spike) = match cli.cmd {
                Cmd::Gain { gain } => (gain, None, 0.0, (0.0, 0.0, 0.0)),
                Cmd::Lowpass { cutoff } => (
                    1.0,
                    Some(1.0 - (-2.0 * std::f32::consts::PI * cutoff / rate).exp()),
                    0.0,
                    (0.0, 0.0, 0.0),
                ),
                Cmd::Load {
                    busy,
                    spike_ms,
                    spike_after_s,
                    spike_every_s,
                } => (1.0, None, busy, (spike_ms, spike_after_s, spike_every_s)),
                _ => (1.0, None, 0.0, (0.0, 0.0, 0.0)),
            };
            let period_ns = frames_to_ns(client.buffer_size().into(), client.sample_rate()) as f64;
            let busy_ns = (period_ns * busy / 100.0) as u64;
            let spike_ns = (spike.0 * 1e6) as u64;
            let spike_cycle = (spike.1 * 1e9 / period_ns) as u64;
            let spike_every = (spike.2 * 1e9 / period_ns) as u64;
            let mut z = 0.0f32;
            activate(&client, move |ps: &mut ProcessScope| {
                let t0 = resound_shm::time::thread_cpu_ns();
                let x = inp.audio_in(ps);
                let y = out.audio_out(ps);
                match coef {
                    Some(a) => {
                        for (y, x) in y.iter_mut().zip(x) {
                            z += a * (x - z);
                            *y = z;
                        }
                    }
                    None => {
                        for (y, x) in y.iter_mut().zip(x) {
                            *y = gain * x;
                        }
                    }
                }
                let done = s.cycles.load(Ordering::Relaxed);
                let spiking = done == spike_cycle
                    || (spike_every > 0
                        && done > spike_cycle
                        && (done - spike_cycle).is_multiple_of(spike_every));
                let busy_ns = if spike_ns > 0 && spiking {
                    spike_ns
                } else {
                    busy_ns
                };
                while busy_ns > 0 && resound_shm::time::thread_cpu_ns() - t0 < busy_ns {
                    std::hint::spin_loop();
                }
                s.cycles.fetch_add(1, Ordering::Relaxed);
                Control::Continue
            })?;
        }
        Cmd::Meter => {
            let inp = audio_in(&client, "in")?;
            activate(&client, move |ps: &mut ProcessScope| {
                let x = inp.audio_in(ps);
                let mut peak = 0.0f64;
                let mut sq = 0.0f64;
                for &v in x {
                    peak = peak.max(v.abs() as f64);
                    sq += v as f64 * v as f64;
                }
                fmax_atomic(&s.peak_bits, peak);
                fadd_atomic(&s.sumsq_bits, sq);
                s.samples.fetch_add(x.len() as u64, Ordering::Relaxed);
                s.cycles.fetch_add(1, Ordering::Relaxed);
                Control::Continue
            })?;
        }
        Cmd::Check { latency, gain } => {
            let inp = audio_in(&client, "in")?;
            let rf = audio_in(&client, "ref")?;
            let mut last_ref: Option<u64> = None;
            // When the cycle that set last_ref began (CLOCK_MONOTONIC ns).
            let mut last_ref_start = 0u64;
            activate(&client, move |ps: &mut ProcessScope| {
                let (x, r) = (inp.audio_in(ps), rf.audio_in(ps));
                let n = x.len();
                s.cycles.fetch_add(1, Ordering::Relaxed);
                if n == 0 {
                    return Control::Continue;
                }
                if r.iter().all(|&v| v == 0.0) {
                    // No reference connected (yet): nothing to compare with.
                    last_ref = None;
                    s.no_ref.fetch_add(1, Ordering::Relaxed);
                    return Control::Continue;
                }
                // ref continuity: no lost or duplicated cycle upstream.
                let r0 = r[0] as u64;
                if let Some(prev) = last_ref {
                    if r0 != (prev + 1) % COUNTER_MOD {
                        s.ref_gaps.fetch_add(1, Ordering::Relaxed);
                        s.event(ps, rate as f64, true, last_ref_start);
                    }
                }
                last_ref = Some(r[n - 1] as u64);
                last_ref_start = ps.cycle_start_ns();
                if x.iter().all(|&v| v == 0.0) {
                    s.silent.fetch_add(1, Ordering::Relaxed);
                    return Control::Continue;
                }
                let mut good = true;
                for i in 0..n {
                    let want = gain
                        * ((r[i] as u64 + COUNTER_MOD - latency % COUNTER_MOD) % COUNTER_MOD)
                            as f32;
                    if x[i] != want {
                        good = false;
                        if s.bad.load(Ordering::Relaxed) == 0 {
                            s.first_bad_cycle.store(ps.cycle(), Ordering::Relaxed);
                            s.first_bad_got
                                .store((x[i] as f64).to_bits(), Ordering::Relaxed);
                            s.first_bad_want
                                .store((want as f64).to_bits(), Ordering::Relaxed);
                        }
                        break;
                    }
                }
                if good {
                    s.ok.fetch_add(1, Ordering::Relaxed);
                } else {
                    s.bad.fetch_add(1, Ordering::Relaxed);
                    s.event(ps, rate as f64, false, 0);
                }
                Control::Continue
            })?;
        }
        Cmd::Misbehave { mode } => {
            // An input too, so it can sit in the middle of a chain.
            let _inp = audio_in(&client, "in")?;
            let mut out = audio_out(&client, "out")?;
            let slot = client.slot();
            let view_client = client.clone();
            match mode.as_str() {
                "stall" => activate(&client, move |ps: &mut ProcessScope| {
                    out.audio_out(ps).fill(0.0);
                    std::thread::sleep(Duration::from_secs(1));
                    Control::Continue
                })?,
                "alloc" => activate(&client, move |ps: &mut ProcessScope| {
                    let v: Vec<f32> = vec![0.0; ps.frames()];
                    out.audio_out(ps).copy_from_slice(&v);
                    Control::Continue
                })?,
                "scribble" => {
                    activate(&client, move |ps: &mut ProcessScope| {
                        out.audio_out(ps).fill(f32::NAN);
                        Control::Continue
                    })?;
                    // Keep writing garbage over our whole activation record, as
                    // a client with a memory-corruption bug could.
                    std::thread::spawn(move || loop {
                        std::thread::sleep(Duration::from_millis(2));
                        let rec = view_client.view().record(slot).expect("own record");
                        let p = rec as *const _ as *mut u8;
                        // SAFETY: the record is 128 bytes of our own node segment,
                        // mapped read-write in this process; every field is an
                        // atomic integer, so any bytes are valid values. This
                        // deliberately corrupts it.
                        unsafe { std::ptr::write_bytes(p, 0xA5, std::mem::size_of_val(rec)) };
                    });
                }
                other => {
                    return Err(format!(
                        "unknown misbehave mode {other:?} (stall, alloc, scribble)"
                    ))
                }
            }
        }
    }
    for pair in &cli.connect {
        let (a, b) = pair
            .split_once('=')
            .ok_or_else(|| format!("--connect wants SRC=DST, got {pair:?}"))?;
        let (a, b) = (a.replace('@', client.name()), b.replace('@', client.name()));
        client
            .connect(&a, &b)
            .map_err(|e| format!("connect {a} -> {b}: {e}"))?;
    }
    println!(
        "{}",
        json!({"event": "ready", "name": client.name(), "sched": client.process_thread_sched()})
    );
    let t0 = Instant::now();
    let mut last_report = Instant::now();
    while !stop.load(Ordering::Acquire) {
        if let Some(sec) = cli.seconds {
            if t0.elapsed().as_secs_f64() >= sec {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(10));
        if cli.report_ms > 0 && last_report.elapsed() >= Duration::from_millis(cli.report_ms) {
            last_report = Instant::now();
            println!("{}", report(&client, &stats, &xruns, false));
        }
    }
    // Let xrun notifications about the last cycles arrive before judging them.
    std::thread::sleep(Duration::from_millis(100));
    println!("{}", report(&client, &stats, &xruns, true));
    if !gone.load(Ordering::Acquire) {
        client.close().map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn activate(
    client: &Client,
    f: impl FnMut(&mut ProcessScope) -> Control + Send + 'static,
) -> Result<(), String> {
    client.activate(f).map_err(|e| format!("activate: {e}"))
}

/// The first 8 events no xrun of `xruns` (sorted) explains, each as its
/// `[cycle, start_ns, period_ns, gap, last_seen_ns]` with the xrun cycles
/// just before and after it (null where there is none).
fn unexplained_with_neighbours(s: &Stats, xruns: &[u64]) -> serde_json::Value {
    let events: Vec<serde_json::Value> = s
        .unexplained_events(xruns)
        .into_iter()
        .take(8)
        .map(|e| {
            let i = xruns.partition_point(|&x| x < e[0]);
            let before = i.checked_sub(1).map(|j| xruns[j]);
            json!({ "event": e, "xrun_before": before, "xrun_after": xruns.get(i) })
        })
        .collect();
    json!(events)
}

fn report(
    client: &Client,
    s: &Stats,
    xruns: &std::sync::Mutex<Xruns>,
    last: bool,
) -> serde_json::Value {
    let ld = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let mut xruns = xruns.lock().unwrap_or_else(|e| e.into_inner()).clone();
    // Sorted once: every lookup below bisects them.
    xruns.all.sort_unstable();
    xruns.driver.sort_unstable();
    let (bad_unexplained, gaps_unexplained) = s.unexplained(&xruns.all);
    let (bad_not_driver, gaps_not_driver) = s.unexplained(&xruns.driver);
    let samples = ld(&s.samples).max(1) as f64;
    json!({
        "event": if last { "final" } else { "report" },
        "name": client.name(),
        "cycles": ld(&s.cycles),
        "ok": ld(&s.ok),
        "silent": ld(&s.silent),
        "bad": ld(&s.bad),
        "ref_gaps": ld(&s.ref_gaps),
        "xruns_seen": xruns.all.len(),
        "bad_unexplained": bad_unexplained,
        "gaps_unexplained": gaps_unexplained,
        // What to look at when either is not 0: the first unexplained
        // events, each with the xrun cycles nearest it.
        "unexplained": if last { unexplained_with_neighbours(s, &xruns.all) } else { serde_json::Value::Null },
        "driver_xruns_seen": xruns.driver.len(),
        "bad_unexplained_by_driver": bad_not_driver,
        "gaps_unexplained_by_driver": gaps_not_driver,
        "no_ref": ld(&s.no_ref),
        "first_bad": {
            "cycle": ld(&s.first_bad_cycle),
            "got": f64::from_bits(ld(&s.first_bad_got)),
            "want": f64::from_bits(ld(&s.first_bad_want)),
        },
        "peak": f64::from_bits(ld(&s.peak_bits)),
        "rms": (f64::from_bits(ld(&s.sumsq_bits)) / samples).sqrt(),
        "sched": client.process_thread_sched(),
        // [cycle, start_ns, period_ns, gap, last_seen_ns] of each bad block
        // or ref gap (the first EVENT_CAP), in the final report only.
        "lost_blocks": if last { json!(s.event_list()) } else { serde_json::Value::Null },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const P: u64 = 5_333_333;

    /// Stats holding `events` as the check would have remembered them:
    /// (cycle, gap, cycles since the last one seen; 0: none).
    fn stats_with(events: &[(u64, bool, u64)]) -> Stats {
        let s = Stats::default();
        for (i, &(cycle, gap, back)) in events.iter().enumerate() {
            s.events[i].store(cycle << 1 | gap as u64, Ordering::Relaxed);
            let start = 1_000_000_000 + cycle * P;
            let seen = if back == 0 { 0 } else { start - back * P };
            let [a, b, c] = &s.event_times[i];
            a.store(start, Ordering::Relaxed);
            b.store(P, Ordering::Relaxed);
            c.store(seen, Ordering::Relaxed);
        }
        s.n_events.store(events.len() as u64, Ordering::Relaxed);
        s
    }

    #[test]
    fn an_xrun_near_an_event_explains_it() {
        let s = stats_with(&[(100, false, 0), (200, true, 1)]);
        assert_eq!(s.unexplained(&[97, 201]), (0, 0));
        assert_eq!(s.unexplained(&[96, 202]), (1, 1));
    }

    #[test]
    fn a_long_gap_is_explained_by_an_xrun_where_it_began() {
        // The check last saw cycle 200 and next ran in 215: the xruns of
        // its stall came at 201-203.
        let s = stats_with(&[(215, true, 15)]);
        assert_eq!(s.unexplained(&[201]), (0, 0));
        assert_eq!(s.unexplained(&[150, 220]), (0, 1));
        // A bad block is not a gap: only the xruns around it count.
        let s = stats_with(&[(215, false, 0)]);
        assert_eq!(s.unexplained(&[201]), (1, 0));
    }

    #[test]
    fn the_report_names_the_xruns_around_an_unexplained_event() {
        let s = stats_with(&[(100, false, 0)]);
        let v = unexplained_with_neighbours(&s, &[20, 90, 150]);
        assert_eq!(v[0]["xrun_before"], 90, "{v}");
        assert_eq!(v[0]["xrun_after"], 150, "{v}");
        assert_eq!(v[0]["event"][0], 100, "{v}");
    }
}
