//! `resound soak`: a long run under churn. A server on the dummy driver
//! runs a sample-exact chain (counter → pass → pass → check, each its own
//! process) while client processes join and leave, connections change,
//! clients are killed with SIGKILL or stopped with SIGSTOP at random points
//! and the buffer size changes now and then. Every few seconds it reads
//! the server's open descriptors, memfds, resident memory, threads and
//! ledger, and the chain's lost cycles; at the end it prints them at start
//! and end, writes them as CSV with a plot, and fails if a resource did not
//! come back to where it started or the chain lost a cycle that no xrun
//! explains.
//!
//! Runs on the command's main thread; every process it starts is stopped
//! on the way out (drop guards), on error paths too.

mod churn;
mod sample;

use clap::Args;
use resound_client::prelude::*;
use resound_client::ControlSession;
use resound_lab::harness::chain::{self, lost_blocks, lost_cycles, stop_chain, CHAIN_OUTPUTS};
use resound_lab::harness::losses;
use resound_lab::harness::stalls::{StallWatch, Stalls};
use resound_lab::harness::{dummy_driver_args, Bins, Child, Server, ServerSpec, StderrMode};
use resound_profiler::plots::{render, Chart, Series};
use sample::Sample;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// Options of `resound soak`.
#[derive(Debug, Clone, Args)]
pub struct SoakArgs {
    /// How long to run (minutes).
    #[arg(long, default_value_t = 60.0)]
    pub minutes: f64,
    /// Where to write the samples (soak.csv) and the plot (soak.png, soak.svg);
    /// default: resound-soak in the temporary directory.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
    /// Seed of the random churn (default: from the clock; printed, so a run
    /// can be repeated).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Churn clients running at most at once.
    #[arg(long, default_value_t = 6)]
    pub max_clients: usize,
    /// Frames per period at the start (the buffer size changes between
    /// this and half of it).
    #[arg(short = 'p', long, default_value_t = 256)]
    pub period: u32,
    /// An extra resoundd server option (repeatable), e.g.
    /// `--server-arg=--sched=fifo` or `--server-arg=--early-wake=0`.
    #[arg(long = "server-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub server_args: Vec<String>,
    /// A CPU unavailable this long (us) to a SCHED_FIFO 99 probe
    /// (cyclictest, one thread per CPU) is a machine stall; a lost cycle
    /// with one in its window is counted as the machine's, not resound's.
    /// cyclictest keeps idle CPUs polling while it runs; 0: no probe.
    #[arg(long, value_name = "US", default_value_t = 500)]
    pub stall_us: u32,
}

/// The dummy driver's sample rate (Hz).
const SAMPLE_RATE: u32 = 48000;
/// Seconds between two samples.
const SAMPLE_EVERY: Duration = Duration::from_secs(2);
/// Seconds between two progress lines.
const PRINT_EVERY: Duration = Duration::from_secs(10);
/// Seconds between two buffer-size changes.
const BUFSIZE_EVERY: Duration = Duration::from_secs(25);

/// Runs the soak.
pub fn run(a: SoakArgs) -> Result<(), String> {
    let seed = a.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    let out = a
        .out
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("resound-soak"));
    std::fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;
    println!(
        "== soak: {:.1} min, seed {seed}, at most {} churn clients (repeat with --seed {seed})",
        a.minutes, a.max_clients
    );
    let watch = start_stall_watch(&a);
    let (mut server, ctl) = start_server(a.period, &a.server_args)?;
    let mut chain = start_chain(&server, &ctl)?;
    std::thread::sleep(Duration::from_secs(1));
    let pid = server.pid();
    let lost = |chain: &[Child]| lost_cycles(chain).0;
    let first = sample::read(pid, 0.0, &status(&ctl)?, lost(&chain))?;
    let mut churn = churn::Churn::new(seed, a.max_clients, &CHAIN_OUTPUTS, &ctl);
    let t0_ns = resound_shm::time::monotonic_ns();
    let samples = soak(&a, &server, &ctl, &chain, &mut churn, first)?;
    churn.finish();
    set_period(&ctl, a.period);
    wait_settled(&ctl, first.clients)?;
    let last_t = samples.last().map_or(0.0, |s| s.t) + 1.0;
    let last = sample::read(pid, last_t, &status(&ctl)?, lost(&chain))?;
    let (lost_total, unexplained, xruns_seen) = stop_chain(&mut chain);
    let stalls = watch.map(StallWatch::stop).and_then(|r| r);
    let _ = server.stop();
    let log = out.join("resoundd.log");
    std::fs::write(&log, server.log().text()).map_err(|e| format!("{}: {e}", log.display()))?;
    println!("== server log in {}", log.display());
    let mut all = samples;
    all.push(last);
    let blocks = lost_blocks(&chain);
    let stall_min_ns = a.stall_us as u64 * 1000;
    let split = stalls
        .as_ref()
        .ok()
        .map(|s| losses::attribute(&blocks, s, stall_min_ns));
    let machine = MachineCurves {
        t0_ns,
        split: split.as_ref(),
        stalls: stalls.as_ref().ok(),
        min_ns: stall_min_ns,
    };
    write_outputs(&out, &all, &machine)?;
    report(
        &churn.counts,
        &first,
        &last,
        lost_total,
        unexplained,
        xruns_seen,
    );
    let chance = stalls.as_ref().ok().map(|s| {
        let period_ns = |frames: u32| frames as u64 * 1_000_000_000 / SAMPLE_RATE as u64;
        let periods = [period_ns(a.period), period_ns(a.period / 2)];
        let end_ns = resound_shm::time::monotonic_ns();
        losses::by_chance(s, t0_ns, end_ns, &periods, stall_min_ns)
    });
    report_stalls(&stalls, split.as_ref(), chance, a.stall_us, lost_total);
    verdict(&first, &last, unexplained)
}

/// Starts cyclictest for the whole run (and a margin for the end); a soak
/// without it runs, but cannot tell the machine's stalls from resound's
/// lateness.
fn start_stall_watch(a: &SoakArgs) -> Result<StallWatch, String> {
    if a.stall_us == 0 {
        println!("   machine stalls not watched (--stall-us 0)");
        return Err("not watched (--stall-us 0)".into());
    }
    let max_run = Duration::from_secs_f64(a.minutes * 60.0 + 300.0);
    let w = StallWatch::start(a.stall_us, max_run);
    match &w {
        Ok(_) => println!(
            "   cyclictest: a SCHED_FIFO 99 probe on every CPU (idle CPUs poll while it runs); a CPU unavailable for {} us or more is a machine stall",
            a.stall_us
        ),
        Err(e) => println!("   machine stalls not watched: {e}"),
    }
    w
}

/// What cyclictest saw, and the chain's losses split by it.
fn report_stalls(
    stalls: &Result<Stalls, String>,
    split: Option<&losses::Attribution>,
    chance: Option<f64>,
    stall_us: u32,
    lost: u64,
) {
    let stalls = match stalls {
        Ok(s) => s,
        Err(e) => {
            if lost > 0 {
                println!("== lost cycles not attributed to machine stalls: {e}");
            }
            return;
        }
    };
    let Some(split) = split else { return };
    let min_ns = stall_us as u64 * 1000;
    println!(
        "== machine: {} CPU(s) probed; worst wake-up {} us; {} stall(s) of {stall_us} us or more",
        stalls.per_cpu.len(),
        stalls.worst_us(),
        losses::count_at_least(stalls, min_ns)
    );
    println!(
        "== chain: {} lost block(s) in a machine stall, {} outside any (a stall of {stall_us} us or more from three periods before the block's cycle to its end; {:.0} % of all cycles have one, so losses at random times would be in one that often)",
        split.in_stall,
        split.outside.len(),
        chance.unwrap_or(0.0) * 100.0
    );
    for b in split.outside.iter().take(10) {
        println!(
            "   outside a stall: cycle {} ({}, period {} us)",
            b.cycle,
            if b.gap {
                "reference gap"
            } else {
                "wrong block"
            },
            b.period_ns / 1000
        );
    }
}

/// The server, under a unique name in a private directory, with jackd's
/// default client timeout (500 ms): the churn's clients stopped longer are
/// evicted. (With a 200 ms timeout, runs on a stalling virtual machine
/// ended with a chain thread's reservation gone, most likely a chain client
/// evicted for running late that long, which the defaults would not do.)
fn start_server(period: u32, extra: &[String]) -> Result<(Server, ControlSession), String> {
    let mut args: Vec<String> = extra.to_vec();
    args.extend(dummy_driver_args(SAMPLE_RATE, period));
    let mut spec = ServerSpec::new(Bins::beside_current_exe()?, "soak", &[]);
    spec.args = args;
    // The server's log goes to resoundd.log in the output directory; the
    // clients' to nowhere but their last lines.
    spec.child.stderr = StderrMode::Keep {
        keep: 200_000,
        echo: None,
    };
    spec.env.push(("NO_COLOR".into(), "1".into()));
    spec.tools.stderr = StderrMode::Keep {
        keep: 20,
        echo: None,
    };
    let mut server = Server::spawn(spec)?;
    let ctl = server.wait_ready(&mut || Ok(()))?;
    println!("   server {} (pid {})", server.name, server.pid());
    Ok((server, ctl))
}

/// Starts and wires the sample-exact chain.
fn start_chain(server: &Server, ctl: &ControlSession) -> Result<Vec<Child>, String> {
    let procs = chain::start_chain(server, ctl)?;
    println!("   chain gen -> p1 -> p2 -> check (sample-exact, each its own process)");
    Ok(procs)
}

/// The churn loop until the time is up; returns the samples taken.
fn soak(
    a: &SoakArgs,
    server: &Server,
    ctl: &ControlSession,
    chain: &[Child],
    churn: &mut churn::Churn,
    first: Sample,
) -> Result<Vec<Sample>, String> {
    let total = Duration::from_secs_f64(a.minutes * 60.0);
    let t0 = Instant::now();
    let (mut next_sample, mut next_print, mut next_bufsize) = (t0, t0, t0 + BUFSIZE_EVERY);
    let mut samples = vec![first];
    let mut small = false;
    while t0.elapsed() < total {
        churn.step(server, ctl)?;
        let now = Instant::now();
        if now >= next_bufsize {
            small = !small;
            set_period(ctl, if small { a.period / 2 } else { a.period });
            next_bufsize = now + BUFSIZE_EVERY;
        }
        if now >= next_sample {
            let t = t0.elapsed().as_secs_f64();
            samples.push(sample::read(
                server.pid(),
                t,
                &status(ctl)?,
                lost_cycles(chain).0,
            )?);
            next_sample = now + SAMPLE_EVERY;
        }
        if now >= next_print {
            progress(
                samples.last().expect("sampled"),
                total,
                t0.elapsed(),
                churn.running(),
            );
            next_print = now + PRINT_EVERY;
        }
        std::thread::sleep(Duration::from_millis(20 + fastrand::u64(0..200)));
    }
    Ok(samples)
}

/// One progress line, with the time left.
fn progress(s: &Sample, total: Duration, elapsed: Duration, churners: usize) {
    let left = total.saturating_sub(elapsed).as_secs();
    println!(
        "   t={:>6.0}s  left {:>2}:{:02}  churn clients {churners:<2} fds {:<4} memfds {:<3} threads {:<3} rss {:>6.1} MiB  ledger {:.3}  chain lost {}",
        s.t,
        left / 60,
        left % 60,
        s.fds,
        s.memfds,
        s.threads,
        s.rss_kib as f64 / 1024.0,
        s.ledger,
        s.lost
    );
}

fn status(ctl: &ControlSession) -> Result<resound_protocol::wire::Status, String> {
    ctl.status().map_err(|e| format!("status: {e}"))
}

/// Asks for a new buffer size; a refusal is reported, not fatal.
fn set_period(ctl: &ControlSession, frames: u32) {
    if let Err(e) = ctl.set_buffer_size(frames) {
        println!("   buffer size {frames} refused: {e}");
    }
}

/// Waits until only the chain's clients are left and every reservation of
/// the churn is gone, then until the server has let go of the shared
/// memory of the clients that left (it keeps a leaving client's node
/// segment readable, then mapped, for `RETIRE_AFTER` each, and drops it
/// at its next once-a-second housekeeping).
fn wait_settled(ctl: &ControlSession, clients: u64) -> Result<(), String> {
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(15) {
        if status(ctl)?.clients.len() as u64 == clients {
            let retired = 2 * resound_shm::RETIRE_AFTER + Duration::from_millis(1500);
            std::thread::sleep(retired);
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Err("the churn clients did not all leave within 15 s".into())
}

/// What the plot shows of the machine's stalls, when they were watched.
struct MachineCurves<'a> {
    /// CLOCK_MONOTONIC ns at the samples' time 0.
    t0_ns: u64,
    /// The chain's losses split by stalls.
    split: Option<&'a losses::Attribution>,
    /// What cyclictest saw.
    stalls: Option<&'a Stalls>,
    /// The stall threshold (ns).
    min_ns: u64,
}

impl MachineCurves<'_> {
    /// Cumulative count at each sample's time of the events at `times_ns`.
    fn cumulative(&self, samples: &[Sample], times_ns: &[u64]) -> Vec<(f64, f64)> {
        samples
            .iter()
            .map(|s| {
                let until = self.t0_ns + (s.t * 1e9) as u64;
                let n = times_ns.iter().filter(|&&t| t <= until).count();
                (s.t / 60.0, n as f64)
            })
            .collect()
    }

    /// The lost chain cycles outside any stall, over time.
    fn outside(&self, samples: &[Sample]) -> Option<Series> {
        let times: Vec<u64> = self.split?.outside.iter().map(|b| b.start_ns).collect();
        Some(Series {
            name: "outside machine stalls".into(),
            points: self.cumulative(samples, &times),
        })
    }

    /// The machine's stalls over time.
    fn stalls(&self, samples: &[Sample]) -> Option<Series> {
        let times: Vec<u64> = (self.stalls?.spikes.iter())
            .filter(|s| s.len_ns >= self.min_ns)
            .map(|s| s.end_ns)
            .collect();
        Some(Series {
            name: "stalls".into(),
            points: self.cumulative(samples, &times),
        })
    }
}

/// soak.csv and the plot (soak.png, soak.svg).
fn write_outputs(dir: &Path, samples: &[Sample], machine: &MachineCurves) -> Result<(), String> {
    let mut csv = String::from(sample::CSV_HEADER);
    csv.push('\n');
    for s in samples {
        csv += &s.csv();
        csv.push('\n');
    }
    let path = dir.join("soak.csv");
    std::fs::write(&path, csv).map_err(|e| format!("{}: {e}", path.display()))?;
    let curve = |name: &str, f: &dyn Fn(&Sample) -> f64| Series {
        name: name.into(),
        points: samples.iter().map(|s| (s.t / 60.0, f(s))).collect(),
    };
    let chart = |title: &'static str, y: &'static str, s: Series| Chart {
        title,
        x_label: "minutes",
        y_label: y,
        series: vec![s],
        reference: None,
        marks: vec![],
    };
    let mut lost = chart(
        "lost cycles of the sample-exact chain",
        "cycles",
        curve("lost", &|s| s.lost as f64),
    );
    lost.series.extend(machine.outside(samples));
    let mut charts = vec![
        chart(
            "open file descriptors of resoundd",
            "fds",
            curve("fds", &|s| s.fds as f64),
        ),
        chart(
            "memfds (shared-memory segments)",
            "memfds",
            curve("memfds", &|s| s.memfds as f64),
        ),
        chart(
            "threads of resoundd",
            "threads",
            curve("threads", &|s| s.threads as f64),
        ),
        chart(
            "resident memory of resoundd",
            "MiB",
            curve("rss", &|s| s.rss_kib as f64 / 1024.0),
        ),
        chart(
            "bandwidth in the admission ledger",
            "CPUs",
            curve("ledger", &|s| s.ledger),
        ),
        lost,
    ];
    if let Some(stalls) = machine.stalls(samples) {
        charts.push(chart(
            "machine stalls (cyclictest, SCHED_FIFO 99 probe)",
            "stalls",
            stalls,
        ));
    }
    let files = render(&dir.join("soak"), &charts)?;
    println!(
        "== samples in {}, plot in {}",
        path.display(),
        files
            .first()
            .map_or(String::new(), |p| p.display().to_string())
    );
    Ok(())
}

/// Prints what the churn did and the resources at start and end.
fn report(
    c: &churn::Counts,
    first: &Sample,
    last: &Sample,
    lost: u64,
    unexplained: u64,
    xruns: u64,
) {
    println!(
        "== churn: {} joined, {} left, {} killed (SIGKILL), {} stopped (SIGSTOP), {} connections made, {} broken",
        c.joined, c.left, c.killed, c.stopped, c.connected, c.disconnected
    );
    println!("== server resources        start        end");
    let row = |what: &str, a: String, b: String| println!("   {what:<22} {a:>10} {b:>10}");
    row("open fds", first.fds.to_string(), last.fds.to_string());
    row("memfds", first.memfds.to_string(), last.memfds.to_string());
    row(
        "threads",
        first.threads.to_string(),
        last.threads.to_string(),
    );
    row(
        "rss (MiB)",
        format!("{:.1}", first.rss_kib as f64 / 1024.0),
        format!("{:.1}", last.rss_kib as f64 / 1024.0),
    );
    row(
        "ledger (CPUs)",
        format!("{:.3}", first.ledger),
        format!("{:.3}", last.ledger),
    );
    row(
        "reserved threads",
        first.reserved_threads.to_string(),
        last.reserved_threads.to_string(),
    );
    println!(
        "== chain: {lost} lost cycle(s), {unexplained} not explained by an xrun ({xruns} xrun notification(s) seen)"
    );
}

/// Fails with the reasons if a resource did not come back or the chain
/// lost an unexplained cycle.
fn verdict(first: &Sample, last: &Sample, unexplained: u64) -> Result<(), String> {
    let mut bad = Vec::new();
    for (what, a, b) in [
        ("open fds", first.fds, last.fds),
        ("memfds", first.memfds, last.memfds),
        ("threads", first.threads, last.threads),
        (
            "reserved threads",
            first.reserved_threads,
            last.reserved_threads,
        ),
    ] {
        if b != a {
            bad.push(format!("{what}: {a} at the start, {b} at the end"));
        }
    }
    // Memory may settle a little (allocator arenas); a leak grows with the run.
    if last.rss_kib > first.rss_kib + (first.rss_kib / 5).max(8 * 1024) {
        bad.push(format!(
            "resident memory grew from {} to {} KiB",
            first.rss_kib, last.rss_kib
        ));
    }
    if unexplained > 0 {
        bad.push(format!(
            "the chain lost {unexplained} cycle(s) that no xrun explains"
        ));
    }
    if bad.is_empty() {
        println!("== flat: every resource is back where it started; no unexplained loss");
        Ok(())
    } else {
        Err(format!("soak failed: {}", bad.join("; ")))
    }
}
