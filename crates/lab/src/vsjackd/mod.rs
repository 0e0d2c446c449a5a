//! `resound bench jackd`: the same workload on Debian's jackd2 and on
//! resound, side by side in one run.
//!
//! For each load, N repetitions alternate the servers (jackd2, resound with
//! SCHED_FIFO, resound with reservations, then the next repetition), each
//! repetition's order rotated one place from the last's, so that every
//! server takes every place in the round alike ([`round_order`]); each run starts a fresh
//! server under a unique name on the dummy driver, a chain of the one C load
//! client ([`chain`], `crates/lab/c/loadclient.c`, linked with `-ljack`: the
//! distribution's libjack on jackd2, resound's libjack.so.0 on resound)
//! capture → c1 → … → cN → playback, lets it settle, measures the driver
//! thread's CPU time ([`schedstat`]) over an untraced window, then a
//! measured window, and reads the clients' per-cycle records ([`records`]),
//! the driver thread's schedstat again and its wake-ups, traced by the
//! kernel alike on both servers (the experiment tool's
//! [`DriverTrace`](crate::experiment::run::jackd_cycles::DriverTrace)),
//! and the host's steal time over the window ([`steal`]), into one run's
//! numbers ([`metrics`]).
//! Prints a table per load with each server's median over runs and resound
//! ÷ jackd2 with its spread, and writes `runs.csv`, `runs.json` and
//! `table.txt` ([`report`]). Runs on the command's main thread; the clients
//! and servers are child processes.

pub mod chain;
pub mod metrics;
pub mod records;
pub mod report;
pub mod schedstat;
pub mod servers;
pub mod steal;

use crate::harness::{remove_stale_dirs, Bins, Jackd};
use chain::RunSpec;
use report::RunResult;
use serde_json::json;
use servers::Contender;
use std::path::PathBuf;
use std::time::Duration;

/// Options of `resound bench jackd`.
#[derive(Debug, Clone, clap::Args)]
pub struct VsJackdArgs {
    /// Repetitions per load, servers alternated within each (default 3; 1 with --quick).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub runs: Option<u32>,
    /// Measured seconds per run (default 15; 3 with --quick); before them, half as long (at least 1 s) untraced, for the driver's CPU time.
    #[arg(long)]
    pub seconds: Option<f64>,
    /// A short run: 3 s per run and one repetition, unless --seconds or --runs say otherwise.
    #[arg(long)]
    pub quick: bool,
    /// Seconds the chain settles before the measured window.
    #[arg(long, default_value_t = 2.0)]
    pub warmup: f64,
    /// Load clients in the chain (at least 2).
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(2..=64))]
    pub clients: u32,
    /// Busy share of the period per client, in percent (comma-separated: one table each).
    #[arg(long, value_delimiter = ',', default_value = "1,7.5")]
    pub load: Vec<f64>,
    /// Sample rate (Hz).
    #[arg(long, default_value_t = 48000)]
    pub rate: u32,
    /// Frames per period.
    #[arg(long, default_value_t = 128)]
    pub frames: u32,
    /// Servers to compare (comma-separated: jackd, fifo, deadline).
    #[arg(long, value_delimiter = ',', default_value = "jackd,fifo,deadline")]
    pub servers: Vec<String>,
    /// Also run resound with its defaults and OPTIONS added to resoundd's,
    /// labelled resound-NAME, alternated with the other servers (repeat for
    /// several): two resound settings side by side in one run, e.g.
    /// `--variant nolight='--light-deadline 100'`.
    #[arg(
        long = "variant",
        value_name = "NAME=OPTIONS",
        allow_hyphen_values = true
    )]
    pub variants: Vec<String>,
    /// Also run another build of resound: the resoundd and libjack.so.0 in
    /// DIR (e.g. another checkout's target/release), with their defaults
    /// and any --server-arg, labelled resound-NAME, alternated with the
    /// other servers (repeat for several): two versions of the code side by
    /// side in one run.
    #[arg(long = "build", value_name = "NAME=DIR")]
    pub builds: Vec<String>,
    /// Directory for runs.csv, runs.json, table.txt and the compiled load client.
    #[arg(long, default_value = "vs-jackd")]
    pub out: PathBuf,
    /// Keep every client's per-cycle records (out/raw/…/cK.csv).
    #[arg(long)]
    pub keep_raw: bool,
    /// A repetition counts as quiet when the host took at most this much
    /// steal time (ms per second, all CPUs together) over both windows of
    /// each server's run: each table ends with the ratios over those
    /// repetitions alone, beside the ratios over all of them.
    #[arg(long = "quiet-steal", value_name = "MS_PER_S", default_value_t = 20.0)]
    pub quiet_steal: f64,
    /// Order of the servers within each repetition: `rotate` shifts it one
    /// place each repetition, so that each server takes each place equally
    /// often (over N repetitions for N servers); `fixed` keeps the
    /// --servers order in every one.
    #[arg(long, value_enum, default_value_t = RoundOrder::Rotate)]
    pub order: RoundOrder,
    /// Hold idle CPUs to this wake-up latency (µs; 0: they poll) for the
    /// whole bench, every server alike (a request on /dev/cpu_dma_latency,
    /// root's; as `resoundd --cpu-dma-latency`). Default: the machine's
    /// setting.
    #[arg(long = "cpu-dma-latency", value_name = "US", value_parser = clap::value_parser!(u32).range(0..=resound_sched::cpu_latency::MAX_US as i64))]
    pub cpu_dma_latency_us: Option<u32>,
    /// Pass ARG to every resound server's resoundd, variants included
    /// (repeat for several; e.g. `--server-arg=--deadlines=critical-path`).
    /// jackd2 is started as always.
    #[arg(long = "server-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub server_args: Vec<String>,
}

/// How the servers are ordered within each repetition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum RoundOrder {
    /// One place further each repetition.
    Rotate,
    /// The --servers order every time.
    Fixed,
}

/// The indices of `n` servers in the order repetition `run` (0-based)
/// runs them: with [`RoundOrder::Rotate`], the list shifted left by
/// `run` places, so over any `n` repetitions each server runs once in each
/// place.
pub fn round_order(n: usize, run: usize, order: RoundOrder) -> Vec<usize> {
    let shift = match order {
        RoundOrder::Rotate if n > 0 => run % n,
        _ => 0,
    };
    (0..n).map(|i| (i + shift) % n).collect()
}

/// Checked settings.
struct Plan {
    contenders: Vec<Contender>,
    runs: u32,
    seconds: f64,
}

/// The untraced window for the driver's CPU time before a measured window
/// of `seconds`: half as long, at least 1 s.
fn cpu_window(seconds: f64) -> Duration {
    Duration::from_secs_f64((seconds / 2.0).max(1.0))
}

fn plan(a: &VsJackdArgs) -> Result<Plan, String> {
    let contenders = servers::parse_all(&a.servers, &a.variants, &a.builds)?;
    servers::check_server_args(&contenders, &a.server_args)?;
    if let Some(l) = a.load.iter().find(|l| !(0.0..=90.0).contains(*l)) {
        return Err(format!("--load {l}: each load must be 0 to 90 percent"));
    }
    let seconds = a.seconds.unwrap_or(if a.quick { 3.0 } else { 15.0 });
    if !(0.5..=3600.0).contains(&seconds) || !(0.0..=60.0).contains(&a.warmup) {
        return Err("--seconds must be 0.5 to 3600 and --warmup 0 to 60".into());
    }
    if !(0.0..=2000.0).contains(&a.quiet_steal) {
        return Err(format!(
            "--quiet-steal {}: must be 0 to 2000 ms per second",
            a.quiet_steal
        ));
    }
    if contenders.iter().any(Contender::is_jackd) && !Jackd::available() {
        return Err(
            "Debian's jackd (/usr/bin/jackd) is not installed: apt-get install jackd2, or leave it out with --servers fifo,deadline".into(),
        );
    }
    Ok(Plan {
        contenders,
        runs: a.runs.unwrap_or(if a.quick { 1 } else { 3 }),
        seconds,
    })
}

/// Runs the bench and prints the tables.
pub fn run(a: VsJackdArgs) -> Result<(), String> {
    let p = plan(&a)?;
    let bins = Bins::beside_current_exe()?;
    chain::libjack_dir(&bins)?;
    remove_stale_dirs("vsj");
    std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    let loadclient = chain::compile_loadclient(&a.out.join("bin"))?;
    // Held until the bench returns: every server runs under it alike.
    let _cpu_latency = a
        .cpu_dma_latency_us
        .map(resound_sched::cpu_latency::hold)
        .transpose()?;
    check_resound_servers_start(&a, &p, &bins)?;
    let mut results = Vec::new();
    for &load in &a.load {
        for run in 0..p.runs as usize {
            let order = round_order(p.contenders.len(), run, a.order);
            for (place, contender) in order.iter().map(|&i| &p.contenders[i]).enumerate() {
                let dir = a
                    .out
                    .join(format!("raw/load{load}/run{}/{}", run + 1, contender.label));
                let spec = run_spec(&a, &p, contender, load, dir.clone());
                eprint!(
                    "load {load}% run {}/{} {:<17}",
                    run + 1,
                    p.runs,
                    contender.label
                );
                let data = chain::run_once(&spec, &bins, &loadclient);
                if let Some(e) = data.as_ref().ok().and_then(|d| d.trace_error.as_ref()) {
                    eprint!(" (no driver trace: {e})");
                }
                let driver = data
                    .as_ref()
                    .map(|d| format!("{} {} ({})", d.driver.tid, d.driver.comm, d.driver.found_by))
                    .unwrap_or_default();
                let metrics = data.map(|d| metrics::compute(&d));
                match &metrics {
                    Ok(m) => eprintln!(
                        " driver wake -> end of chain p50 {:.1} us, c1 wake {:.1} us, {} cycles, {} lost, {} late, {} xruns, steal {:.1} ms/s",
                        m.drv_eoc_p50, m.drv_wake_p50, m.cycles, m.lost, m.late_chains, m.xruns, m.steal_ms_per_s
                    ),
                    Err(e) => eprintln!(" failed: {e}"),
                }
                if !a.keep_raw {
                    let _ = std::fs::remove_dir_all(&dir);
                }
                results.push(RunResult {
                    load,
                    run,
                    place,
                    server: contender.clone(),
                    driver,
                    metrics,
                });
            }
        }
    }
    if !a.keep_raw {
        let _ = std::fs::remove_dir_all(a.out.join("raw"));
    }
    finish(&a, &p, &results)
}

/// What one run of `contender` at `load` runs, its records in `dir`.
fn run_spec(a: &VsJackdArgs, p: &Plan, contender: &Contender, load: f64, dir: PathBuf) -> RunSpec {
    RunSpec {
        server: contender.clone(),
        clients: a.clients as usize,
        load,
        rate: a.rate,
        frames: a.frames,
        warmup: Duration::from_secs_f64(a.warmup),
        window: Duration::from_secs_f64(p.seconds),
        cpu_window: cpu_window(p.seconds),
        dir,
        server_args: a.server_args.clone(),
    }
}

/// Starts and stops every resound server of the bench once, with the
/// options its runs will use: one that does not start stops the bench in
/// its first seconds, saying which and why.
fn check_resound_servers_start(a: &VsJackdArgs, p: &Plan, bins: &Bins) -> Result<(), String> {
    let resound: Vec<&Contender> = p.contenders.iter().filter(|c| !c.is_jackd()).collect();
    if !resound.is_empty() {
        eprintln!("checking that each resound server starts with its options");
    }
    for contender in resound {
        let spec = run_spec(a, p, contender, 0.0, a.out.clone());
        chain::check_starts(&spec, bins).map_err(|e| {
            format!(
                "{} does not start with the options the bench gives it, so no run was made: {e}",
                contender.label
            )
        })?;
    }
    Ok(())
}

/// Prints the tables and writes the files.
fn finish(a: &VsJackdArgs, p: &Plan, results: &[RunResult]) -> Result<(), String> {
    let mut text = String::new();
    for &load in &a.load {
        // The machine and server settings the runs shared, if not the defaults.
        let mut setting = a.cpu_dma_latency_us.map_or(String::new(), |us| {
            format!(", idle CPUs held to {us} us wake-up")
        });
        if !a.server_args.is_empty() {
            setting += &format!(", resoundd {}", a.server_args.join(" "));
        }
        let alternated = match a.order {
            RoundOrder::Rotate => "servers alternated, order rotated each run",
            RoundOrder::Fixed => "servers alternated",
        };
        let head = format!(
            "== {} clients x {load}% busy, {} Hz / {} frames, {} run(s) x {} s per server, {alternated}{setting} ==",
            a.clients, a.rate, a.frames, p.runs, p.seconds
        );
        text += &report::table(results, load, &p.contenders, &head, a.quiet_steal);
        text += "\n";
    }
    if cfg!(debug_assertions) {
        text += "NOTE: this resound is a debug build (no optimisations): build with --release for numbers to compare.\n";
    }
    text += "Raw futex wake-up (the floor of a hop on this machine): cargo bench -p resound --bench activation\n";
    print!("{text}");
    let settings = json!({
        "clients": a.clients, "loads_pct": a.load, "rate": a.rate, "frames": a.frames,
        "runs": p.runs, "seconds": p.seconds, "warmup_s": a.warmup,
        "order": format!("{:?}", a.order).to_lowercase(),
        "cpu_dma_latency_us": a.cpu_dma_latency_us, "server_args": a.server_args,
        "quiet_steal_ms_per_s": a.quiet_steal,
        "servers": p.contenders.iter().map(|k| json!({"label": k.label, "resoundd_options": k.options, "build": k.build})).collect::<Vec<_>>(),
    });
    let write = |name: &str, body: String| {
        let f = a.out.join(name);
        std::fs::write(&f, body).map_err(|e| format!("{}: {e}", f.display()))
    };
    write("table.txt", text.clone())?;
    write("runs.csv", report::csv(results))?;
    let j = report::json(results, settings);
    write(
        "runs.json",
        serde_json::to_string_pretty(&j).map_err(|e| e.to_string())?,
    )?;
    eprintln!("wrote {}/{{table.txt,runs.csv,runs.json}}", a.out.display());
    let failed = results.iter().filter(|r| r.metrics.is_err()).count();
    if failed == results.len() {
        return Err("every run failed (see the table)".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rotated_order_puts_each_server_once_in_each_place() {
        let rounds: Vec<Vec<usize>> = (0..3)
            .map(|r| round_order(3, r, RoundOrder::Rotate))
            .collect();
        assert_eq!(rounds, [[0, 1, 2], [1, 2, 0], [2, 0, 1]]);
        for server in 0..3 {
            let mut places: Vec<usize> = rounds
                .iter()
                .map(|o| o.iter().position(|&s| s == server).unwrap())
                .collect();
            places.sort();
            assert_eq!(places, [0, 1, 2], "server {server}");
        }
        assert_eq!(round_order(3, 4, RoundOrder::Rotate), [1, 2, 0]);
    }

    #[test]
    fn a_fixed_order_is_the_servers_order_every_time() {
        for run in 0..4 {
            assert_eq!(round_order(3, run, RoundOrder::Fixed), [0, 1, 2]);
        }
        assert!(round_order(0, 2, RoundOrder::Rotate).is_empty());
    }
}
