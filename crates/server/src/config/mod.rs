//! `resoundd [server options] -d DRIVER [driver options]`, as jackd.
//!
//! The command line is cut at `-d`/`--driver`: what comes before is parsed as
//! server options, the driver name follows, and the rest are that driver's
//! options (so `-r` before `-d` means "no real-time" and after `-d dummy`
//! "sample rate", exactly as with jackd).

use clap::Parser;
use resound_shm::limits::{self, MAX_BUFFER_FRAMES, MIN_BUFFER_FRAMES};

mod drivers;
mod multiplier;
pub use drivers::{
    AlsaAccess, AlsaArgs, AlsaFormat, DriverArgs, DummyArgs, FileArgs, OutputFormat,
};
use drivers::{AlsaCli, DummyCli, FileCli};
pub use multiplier::PeriodMultiplier;

/// The early wake-up bound (µs) without reservations, unless `--early-wake` says otherwise.
pub const DEFAULT_EARLY_WAKE_US: u32 = 100;

/// Server options.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "resoundd",
    version,
    about = "resound: a JACK-compatible low-latency audio server",
    override_usage = "resoundd [server options] -d DRIVER [driver options]\n       resoundd -d dummy --help   (driver options; also -d alsa --help, -d file --help)",
    after_help = "Drivers: dummy (no sound card; cycles on absolute CLOCK_MONOTONIC deadlines),\n         alsa (a sound card, or any ALSA PCM; resoundd -d alsa --help),\n         file (offline rendering from and to WAV files; resoundd -d file --help).\nExample: resoundd -d dummy -r 48000 -p 128"
)]
pub struct ServerArgs {
    /// Server name (clients choose it with $JACK_DEFAULT_SERVER or their server-name option).
    #[arg(short = 'n', long = "name")]
    pub name: Option<String>,
    /// Sync mode: each cycle ends when the whole graph has finished (no added latency).
    /// Default is async mode as in jackd2: the driver writes last cycle's output (one period more latency, more robust).
    #[arg(short = 'S', long = "sync")]
    pub sync: bool,
    /// Use real-time scheduling (default).
    #[arg(short = 'R', long = "realtime", overrides_with = "no_realtime")]
    pub realtime: bool,
    /// Do not use real-time scheduling.
    #[arg(short = 'r', long = "no-realtime")]
    pub no_realtime: bool,
    /// SCHED_FIFO priority of the driver thread; clients get one less.
    #[arg(short = 'P', long = "realtime-priority", default_value_t = 10, value_parser = clap::value_parser!(i32).range(2..=99))]
    pub priority: i32,
    /// Scheduling of the graph's real-time threads (driver and client process threads):
    /// deadline (SCHED_DEADLINE reservations with feedback-controlled budgets), fifo (SCHED_FIFO at -P), other.
    /// Where deadline is not permitted the server says so and falls back to fifo, then other.
    #[arg(long = "sched", value_enum, default_value_t = SchedChoice::Deadline)]
    pub sched: SchedChoice,
    /// GRUB reclaiming (SCHED_FLAG_RECLAIM), the default: reservations may use
    /// reserved bandwidth others leave unused, so a client woken earlier in the
    /// cycle than last time is not throttled on its leftover budget.
    #[arg(long, overrides_with = "no_reclaim")]
    pub reclaim: bool,
    /// No GRUB reclaiming: every reservation gets exactly its budget per period.
    #[arg(long = "no-reclaim", overrides_with = "reclaim")]
    pub no_reclaim: bool,
    /// Disable the feedback: every reservation gets PCT % of its period (changes only with the buffer size).
    #[arg(long = "fixed-budget", value_name = "PCT", value_parser = pct_parser)]
    pub fixed_budget: Option<f64>,
    /// Overprovisioning of the feedback budgets: each reservation's budget is
    /// the predicted CPU time per period plus PCT % of it.
    #[arg(long = "overprovision", value_name = "PCT", default_value_t = 10.0, value_parser = pct_parser)]
    pub overprovision: f64,
    /// Least budget of a graph thread's feedback reservation, % of its
    /// period (0.1 to 50; default 5, the minimum budget of the thesis the
    /// controller comes from). A stall of a virtual CPU charged to the
    /// thread that was running leaves it owing that time, and the kernel
    /// then holds it for about the debt times the period over the budget:
    /// a higher floor shortens that hold for light threads. When the ledger
    /// refuses a reservation, every floor above 5 % goes down to 5 % for as
    /// long as the server runs, so a higher floor never costs a client its
    /// reservation.
    #[arg(long = "min-budget", value_name = "PCT", default_value_t = resound_sched::controller::DEFAULT_MIN_BUDGET_PCT, value_parser = min_budget_parser)]
    pub min_budget_pct: f64,
    /// Make each reservation period N audio periods long (the budget is scaled
    /// alike), so that a thread may use its budget over several cycles.
    /// `auto`: N = 1 unless the audio period is shorter than 1333 us, then the
    /// smallest N that makes the reservation period at least 1333 us (32 frames
    /// at 48 kHz: 2); `auto:US` with another minimum (auto:2000 gives 3 at
    /// 32 frames). Recomputed when the buffer size changes.
    #[arg(long = "period-multiplier", value_name = "N|auto[:US]", default_value = "1", value_parser = clap::value_parser!(PeriodMultiplier))]
    pub period_multiplier: PeriodMultiplier,
    /// The prediction of a thread's CPU time per period: this percentile of
    /// its CPU times over the last --window cycles.
    #[arg(long = "percentile", value_name = "P", default_value_t = 99.0, value_parser = pct_parser)]
    pub percentile: f64,
    /// How many recent cycles the CPU-time prediction looks at.
    #[arg(long = "window", value_name = "CYCLES", default_value_t = 100, value_parser = clap::value_parser!(u64).range(1..=10000))]
    pub window: u64,
    /// Total bandwidth (in CPUs, e.g. 0.8) the server may reserve for the graph
    /// (default: the kernel's admission limit, e.g. 1.8 on 2 CPUs; budgets follow
    /// the measured load, so the graph only holds what it uses plus overprovisioning).
    #[arg(long = "max-bandwidth", value_name = "F")]
    pub max_bandwidth: Option<f64>,
    /// Relative deadlines: `period` (deadline = reservation period) or `critical-path`
    /// (each client's deadline leaves room for the work before and after it in the cycle).
    #[arg(long = "deadlines", value_enum, default_value_t = DeadlineChoice::Period)]
    pub deadlines: DeadlineChoice,
    /// Relative deadline of a light thread's reservation, % of its period
    /// (10 to 100; default 50; 100: no light threads, every thread on the
    /// audio period with deadline = period). A light thread typically uses at most
    /// (100 - PCT) % of its budget (the median of its recent cycles), as a
    /// client busy 1 % of the period does under the minimum budget. It then
    /// blocks after its zero-lag time, so the kernel arms no inactive timer
    /// for it: one timer interrupt less per light thread per cycle, and the
    /// next wake-up in the chain finds its CPU free more often. Its deadline
    /// also comes earlier in EDF order than implicit ones. It enters that
    /// shape through one cycle with deadline = period, and after a wake-up
    /// far later in its cycle than usual (a machine stall) it goes back to
    /// the audio period for 100 cycles: the kernel holds a thread woken
    /// after a deadline shorter than its period until that period ends, and
    /// neither step leaves it a chance to. Only with one audio period per
    /// reservation period (--period-multiplier 1).
    #[arg(long = "light-deadline", value_name = "PCT", default_value_t = resound_sched::controller::DEFAULT_LIGHT_DEADLINE_PCT, value_parser = share_parser(10.0))]
    pub light_deadline_pct: f64,
    /// Reservation period of a light thread, % of the audio period (50 to
    /// 100). With a deadline shorter than the
    /// period the kernel holds a thread that wakes after its deadline until
    /// its period ends; a period shorter than the audio period has ended
    /// by the next cycle's wake-up unless the last one came more than
    /// (100 - PCT) % of a period later in its cycle. The budget per cycle
    /// is unchanged, so the ledger books 100/PCT times its bandwidth.
    #[arg(long = "light-period", value_name = "PCT", default_value_t = resound_sched::controller::DEFAULT_LIGHT_PERIOD_PCT, value_parser = share_parser(50.0))]
    pub light_period_pct: f64,
    /// A client thread that its reservation's throttle holds for a whole
    /// cycle (woken, late, runnable, not running) runs SCHED_FIFO until the
    /// kernel would give it fresh parameters (its deadline, later by what
    /// it owes at its bandwidth, read from /proc/TID/sched), at most CYCLES
    /// cycles, then under its reservation again; one the kernel lets go
    /// within the cycle anyway is left alone. On a virtual machine a stall
    /// of the virtual CPU can be charged to the thread that was running,
    /// and the kernel then throttles it for about ten times the stall while
    /// the clients before it go on without it. Never a thread short of
    /// budget (a raise of it refused lately), at most once per 11 holds per
    /// client. Default 0 (never): the benches disagree on whether it pays
    /// (see docs/architecture.md); 100 covers debts of tens of
    /// milliseconds.
    #[arg(long = "throttle-rescue", value_name = "CYCLES", default_value_t = resound_engine::reserve::DEFAULT_RESCUE_CYCLES, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub throttle_rescue: u32,
    /// Early wake-up (µs; 0 turns it off): a client whose last cycle took
    /// less than US wakes the clients after it as it starts a cycle, so that
    /// their wake-up overlaps its work, and they spin (at most US, and only
    /// on another CPU than that client's) for its output. Each hop then
    /// costs a few µs instead of a wake-up latency, for some CPU time spent
    /// spinning. Under a reservation the spinning
    /// is charged to the client's budget, so a client spins at most half
    /// of what its budget leaves over its own work (see
    /// docs/architecture.md). Default: 100.
    #[arg(long = "early-wake", value_name = "US", value_parser = clap::value_parser!(u32).range(0..=10_000))]
    pub early_wake_us: Option<u32>,
    /// How the first client of the graph (the first in the activation
    /// order) is woken each cycle. timer (the default): it sleeps with a
    /// timer set to its early wake-up bound before the driver is expected
    /// to release the cycle (under SCHED_FIFO earlier by how late its timer
    /// wake-ups run), and spins for the
    /// release (never on the CPU the driver woke on), so its wake-up overlaps the driver's work and
    /// the driver's wake finds it awake: less driver CPU and an earlier
    /// chain (see docs/architecture.md); driver: it sleeps until the
    /// driver releases the cycle, as jackd's clients do. The timer needs
    /// early wake-up on (`--early-wake` > 0).
    #[arg(long = "first-wake", value_name = "HOW", value_enum, default_value_t = FirstWake::Timer)]
    pub first_wake: FirstWake,
    /// Hold idle CPUs to a wake-up latency of at most US µs while the server
    /// runs (a request on /dev/cpu_dma_latency; 0: idle CPUs poll instead of
    /// sleeping). Threads of the graph then never wait for a CPU to leave a
    /// deep sleep state (or, in a virtual machine, for a halted virtual CPU
    /// to be run again), at the cost of power. Needs write access to the
    /// device (root). Default: leave the machine's setting alone, as jackd.
    #[arg(long = "cpu-dma-latency", value_name = "US", value_parser = clap::value_parser!(u32).range(0..=resound_sched::cpu_latency::MAX_US as i64))]
    pub cpu_dma_latency_us: Option<u32>,
    /// Client slots (the driver's included).
    #[arg(long, default_value_t = limits::DEFAULT_MAX_CLIENTS)]
    pub max_clients: u32,
    /// Port slots.
    #[arg(long, default_value_t = limits::DEFAULT_MAX_PORTS)]
    pub max_ports: u32,
    /// Connection capacity.
    #[arg(long, default_value_t = limits::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: u32,
    /// Seconds of per-cycle timing history the profiler ring keeps (at the
    /// period the server starts with; `resound profile` reads it at any time).
    /// 0 turns profiling off.
    #[arg(long = "profile-seconds", value_name = "S", default_value_t = 30.0, value_parser = seconds_parser)]
    pub profile_seconds: f64,
    /// Print more (repeat for debug output).
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count)]
    pub verbose: u8,
    /// Client timeout (ms): a client still late after this long, cycle
    /// after cycle, is evicted from the cycle (JACK's zombie state: it is
    /// deactivated, its downstream runs on silence, it is told through its
    /// shutdown callback and may activate again). Never less than two
    /// periods.
    #[arg(short = 't', long = "timeout", value_name = "MSEC", default_value_t = 500, value_parser = clap::value_parser!(u32).range(1..=600_000))]
    pub timeout_ms: u32,
    /// Also evict a client after this many late cycles in a row, if that
    /// comes before the timeout.
    #[arg(long = "evict-after", value_name = "CYCLES", value_parser = clap::value_parser!(u32).range(1..))]
    pub evict_after: Option<u32>,
    /// Never evict late clients (their late cycles are only counted and logged).
    #[arg(long = "no-evict")]
    pub no_evict: bool,
    /// Also let members of GROUP (name or number) connect, as jackd's
    /// promiscuous mode (default: only the server's user and root); socket
    /// directory and socket become 0770/0660 of that group, never world.
    /// Unset: `JACK_PROMISCUOUS_SERVER=GROUP` (empty: the primary group).
    #[arg(long = "allow-group", value_name = "GROUP")]
    pub allow_group: Option<String>,
}

/// `--sched` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SchedChoice {
    /// SCHED_DEADLINE reservations with feedback-controlled budgets.
    Deadline,
    /// SCHED_FIFO at the -P priority.
    Fifo,
    /// SCHED_OTHER.
    Other,
}

/// `--first-wake` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum FirstWake {
    /// By its own timer, just before the driver's expected release.
    Timer,
    /// By the driver's release.
    Driver,
}

/// `--deadlines` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DeadlineChoice {
    /// Relative deadline = reservation period.
    Period,
    /// Deadlines from each client's place on the critical path.
    CriticalPath,
}

fn pct_parser(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    if (0.0..=100.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{v} is outside 0..=100"))
    }
}

/// `--min-budget`: a share in % from 0.1 to 50 (a floor above half the
/// period would leave the controller little room).
fn min_budget_parser(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    if (0.1..=50.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{v} is outside 0.1..=50"))
    }
}

/// A parser of a share in % from `min` to 100.
fn share_parser(min: f64) -> impl Fn(&str) -> Result<f64, String> + Clone {
    move |s: &str| {
        let v: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
        if (min..=100.0).contains(&v) {
            Ok(v)
        } else {
            Err(format!("{v} is outside {min}..=100"))
        }
    }
}

fn seconds_parser(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    if (0.0..=3600.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{v} is outside 0..=3600 seconds"))
    }
}

/// A complete configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// Server options.
    pub server: ServerArgs,
    /// Driver.
    pub driver: DriverArgs,
}

impl Config {
    /// Sample rate.
    pub fn rate(&self) -> u32 {
        match &self.driver {
            DriverArgs::Dummy(d) => d.rate,
            DriverArgs::Alsa(a) => a.rate,
            DriverArgs::File(f) => f.rate(),
        }
    }

    /// Period in frames.
    pub fn period(&self) -> u32 {
        match &self.driver {
            DriverArgs::Dummy(d) => d.period,
            DriverArgs::Alsa(a) => a.period,
            DriverArgs::File(f) => f.period,
        }
    }

    /// Driver name.
    pub fn driver_name(&self) -> &'static str {
        match &self.driver {
            DriverArgs::Dummy(_) => "dummy",
            DriverArgs::Alsa(_) => "alsa",
            DriverArgs::File(_) => "file",
        }
    }

    /// Capture channels (system:capture_N ports).
    pub fn capture_channels(&self) -> u32 {
        match &self.driver {
            DriverArgs::Dummy(d) => d.capture,
            DriverArgs::Alsa(a) => a.inchannels,
            DriverArgs::File(f) => f.capture_channels(),
        }
    }

    /// Playback channels (system:playback_N ports).
    pub fn playback_channels(&self) -> u32 {
        match &self.driver {
            DriverArgs::Dummy(d) => d.playback,
            DriverArgs::Alsa(a) => a.outchannels,
            DriverArgs::File(f) => f.playback_channels(),
        }
    }
}

/// Parses a full argv (`argv[0]` included). Help and errors come back as
/// clap errors, which print themselves (`e.exit()`).
pub fn parse(argv: &[String]) -> Result<Config, clap::Error> {
    let mut cut = None;
    for (i, a) in argv.iter().enumerate().skip(1) {
        if a == "-d" || a == "--driver" {
            cut = Some((i, argv.get(i + 1).cloned(), i + 2));
            break;
        }
        if let Some(d) = a.strip_prefix("--driver=") {
            cut = Some((i, Some(d.to_string()), i + 1));
            break;
        }
        if let Some(d) = a
            .strip_prefix("-d")
            .filter(|d| !d.is_empty() && !a.starts_with("--"))
        {
            cut = Some((i, Some(d.to_string()), i + 1));
            break;
        }
    }
    let (server_argv, driver, rest) = match cut {
        Some((i, d, j)) => (&argv[..i], d, argv.get(j..).unwrap_or(&[]).to_vec()),
        None => (argv, None, Vec::new()),
    };
    let server = ServerArgs::try_parse_from(server_argv)?;
    if let Some(b) = server.max_bandwidth.filter(|b| !(*b > 0.0 && *b <= 1024.0)) {
        return Err(ServerArgs::command_error(
            clap::error::ErrorKind::ValueValidation,
            format!("--max-bandwidth {b} must be a positive number of CPUs"),
        ));
    }
    let Some(driver) = driver else {
        return Err(ServerArgs::command_error(
            clap::error::ErrorKind::MissingRequiredArgument,
            "no driver given: use -d DRIVER (available: dummy, alsa, file), e.g. resoundd -d dummy -r 48000 -p 128",
        ));
    };
    let driver = match driver.as_str() {
        "dummy" => {
            let mut v = vec!["resoundd -d dummy".to_string()];
            v.extend(rest);
            let d = DummyCli::try_parse_from(v)?.args;
            check_period(d.period)?;
            DriverArgs::Dummy(d)
        }
        "alsa" => {
            let mut v = vec!["resoundd -d alsa".to_string()];
            v.extend(rest);
            let a = AlsaCli::try_parse_from(v)?.args;
            check_period(a.period)?;
            DriverArgs::Alsa(a)
        }
        "file" => {
            let mut v = vec!["resoundd -d file".to_string()];
            v.extend(rest);
            DriverArgs::File(parse_file(FileCli::try_parse_from(v)?.args)?)
        }
        other => {
            return Err(ServerArgs::command_error(
                clap::error::ErrorKind::InvalidValue,
                format!("unknown driver {other:?} (available: dummy, alsa, file)"),
            ))
        }
    };
    let mut server = server;
    if let DriverArgs::File(f) = &driver {
        // A freewheeling render waits for the whole graph every cycle: it
        // is sync mode whatever -S says (and the latencies reported say so).
        server.sync |= !f.realtime;
    }
    Ok(Config { server, driver })
}

fn value_error(msg: impl std::fmt::Display) -> clap::Error {
    ServerArgs::command_error(clap::error::ErrorKind::ValueValidation, msg)
}

fn check_period(period: u32) -> Result<(), clap::Error> {
    if !(MIN_BUFFER_FRAMES..=MAX_BUFFER_FRAMES).contains(&period) {
        return Err(value_error(format!(
            "period of {period} frames is outside {MIN_BUFFER_FRAMES}..={MAX_BUFFER_FRAMES}"
        )));
    }
    Ok(())
}

/// Checks the file driver's options and reads the input's header: a
/// missing or unreadable input, a rate that disagrees with it, or no length
/// at all are errors here, before anything starts.
fn parse_file(mut f: FileArgs) -> Result<FileArgs, clap::Error> {
    check_period(f.period)?;
    match &f.input {
        Some(path) => {
            let info = resound_engine::driver::file::probe_input(path).map_err(value_error)?;
            if let Some(r) = f.rate.filter(|&r| r != info.rate) {
                return Err(value_error(format!(
                    "-r {r} disagrees with the input {}, which is at {} Hz (leave -r out to use the input's rate)",
                    path.display(),
                    info.rate
                )));
            }
            f.input_info = Some(info);
        }
        None => match f.seconds {
            Some(s) if s > 0.0 && s <= 86400.0 => {}
            Some(s) => return Err(value_error(format!("--seconds {s} must be in 0..=86400"))),
            None => {
                return Err(value_error(
                    "the file driver needs --input IN.wav, or --seconds S to render S seconds without input",
                ))
            }
        },
    }
    if f.input.is_some() && f.input.as_deref() == Some(f.output.as_path()) {
        return Err(value_error("--input and --output are the same file"));
    }
    Ok(f)
}

impl ServerArgs {
    /// The early wake-up bound (µs) in effect: the option, else 100.
    pub fn early_wake_us(&self) -> u32 {
        self.early_wake_us.unwrap_or(DEFAULT_EARLY_WAKE_US)
    }

    /// Whether the first client sleeps with a timer: `--first-wake timer`,
    /// with early wake-up on.
    pub fn first_wake_timer(&self) -> bool {
        self.first_wake == FirstWake::Timer && self.early_wake_us() > 0
    }

    fn command_error(kind: clap::error::ErrorKind, msg: impl std::fmt::Display) -> clap::Error {
        use clap::CommandFactory;
        ServerArgs::command().error(kind, msg)
    }

    /// Whether reservations reclaim unused bandwidth (GRUB; default on).
    pub fn reclaim(&self) -> bool {
        !self.no_reclaim
    }

    /// Whether real-time scheduling is wanted.
    pub fn wants_realtime(&self) -> bool {
        !self.no_realtime && self.sched != SchedChoice::Other
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<Config, clap::Error> {
        parse(&s.split_whitespace().map(String::from).collect::<Vec<_>>())
    }

    #[test]
    fn jackd_style_command_lines() {
        let c = p("resoundd -d dummy -r 44100 -p 128").unwrap();
        assert_eq!((c.rate(), c.period(), c.server.sync), (44100, 128, false));
        assert!(c.server.wants_realtime());
        let c = p("resoundd -S -r -n studio -d dummy -r 96000 -p 64 -C 4 -P 6").unwrap();
        assert!(c.server.sync && !c.server.wants_realtime());
        assert_eq!(c.server.name.as_deref(), Some("studio"));
        let DriverArgs::Dummy(d) = &c.driver else {
            panic!("dummy")
        };
        assert_eq!((d.rate, d.period, d.capture, d.playback), (96000, 64, 4, 6));
        let c = p("resoundd -P 70 -ddummy --loopback").unwrap();
        assert_eq!(c.server.priority, 70);
        let DriverArgs::Dummy(d) = &c.driver else {
            panic!("dummy")
        };
        assert!(d.loopback);
        assert!(p("resoundd").unwrap_err().to_string().contains("no driver"));
        let c = p("resoundd --sched deadline --reclaim --overprovision 20 --period-multiplier 2 --percentile 95 --window 50 --max-bandwidth 0.8 -d dummy").unwrap();
        assert_eq!(c.server.sched, SchedChoice::Deadline);
        assert!(c.server.reclaim() && c.server.fixed_budget.is_none());
        assert!(
            p("resoundd -d dummy").unwrap().server.reclaim(),
            "reclaiming is the default"
        );
        assert!(!p("resoundd --no-reclaim -d dummy")
            .unwrap()
            .server
            .reclaim());
        assert!(p("resoundd --no-reclaim --reclaim -d dummy")
            .unwrap()
            .server
            .reclaim());
        assert_eq!(
            (
                c.server.overprovision,
                c.server.period_multiplier,
                c.server.percentile,
                c.server.window
            ),
            (20.0, PeriodMultiplier::Fixed(2), 95.0, 50)
        );
        assert_eq!(p("resoundd -d dummy").unwrap().server.min_budget_pct, 5.0);
        let c = p("resoundd --min-budget 15 -d dummy").unwrap();
        assert_eq!(c.server.min_budget_pct, 15.0);
        for bad in ["0", "51", "x"] {
            let e = p(&format!("resoundd --min-budget {bad} -d dummy")).unwrap_err();
            assert!(e.to_string().contains("--min-budget"), "{e}");
        }
        let c = p("resoundd -d dummy").unwrap();
        assert_eq!(
            (c.server.light_deadline_pct, c.server.light_period_pct),
            (50.0, 75.0),
            "light threads: half of 75 % of the audio period by default"
        );
        let c = p("resoundd --light-deadline 100 --light-period 100 -d dummy").unwrap();
        assert_eq!(
            (c.server.light_deadline_pct, c.server.light_period_pct),
            (100.0, 100.0)
        );
        for bad in [
            "--light-deadline 5",
            "--light-period 40",
            "--light-deadline x",
        ] {
            let e = p(&format!("resoundd {bad} -d dummy"))
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("outside") || e.contains("not a number"),
                "{bad}: {e}"
            );
        }
        let c = p("resoundd --sched fifo --fixed-budget 30 -d dummy").unwrap();
        assert_eq!(
            (c.server.sched, c.server.fixed_budget),
            (SchedChoice::Fifo, Some(30.0))
        );
        assert!(!p("resoundd --sched other -d dummy")
            .unwrap()
            .server
            .wants_realtime());
        assert!(p("resoundd --fixed-budget 130 -d dummy")
            .unwrap_err()
            .to_string()
            .contains("outside"));
        assert!(p("resoundd --max-bandwidth 0 -d dummy")
            .unwrap_err()
            .to_string()
            .contains("positive"));
        assert_eq!(p("resoundd -d dummy").unwrap().server.profile_seconds, 30.0);
        assert_eq!(
            p("resoundd --profile-seconds 0 -d dummy")
                .unwrap()
                .server
                .profile_seconds,
            0.0
        );
        assert!(p("resoundd --profile-seconds -1 -d dummy").is_err());
        assert!(p("resoundd -d nosuch")
            .unwrap_err()
            .to_string()
            .contains("unknown driver"));
        assert!(p("resoundd -d dummy -p 3")
            .unwrap_err()
            .to_string()
            .contains("outside"));
    }

    fn alsa(s: &str) -> AlsaArgs {
        match p(s).unwrap().driver {
            DriverArgs::Alsa(a) => a,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn early_wake_is_on_by_default_and_follows_the_option() {
        let d = p("resoundd -d dummy").unwrap();
        assert_eq!(d.server.early_wake_us(), DEFAULT_EARLY_WAKE_US);
        let on = p("resoundd --early-wake 250 -d dummy").unwrap();
        assert_eq!(on.server.early_wake_us(), 250, "asked for");
        let off = p("resoundd --early-wake 0 -d dummy").unwrap();
        assert_eq!(off.server.early_wake_us(), 0);
        assert!(
            p("resoundd --early-wake 20000 -d dummy").is_err(),
            "at most 10 ms"
        );
    }

    #[test]
    fn the_first_clients_timer_is_on_unless_early_wake_is_off_or_the_driver_asked_for() {
        let timer = |args: &str| {
            p(&format!("resoundd {args} -d dummy"))
                .unwrap()
                .server
                .first_wake_timer()
        };
        assert!(timer(""), "on by default");
        assert!(timer("--sched fifo"), "on by default");
        assert!(timer("-r"), "on by default");
        assert!(!timer("--early-wake 0"), "only with early wake-up");
        assert!(timer("--first-wake timer"), "asked for");
        assert!(timer("--first-wake timer --sched fifo"), "asked for");
        assert!(timer("--first-wake timer -r"), "asked for");
        assert!(!timer("--first-wake driver"));
        assert!(
            !timer("--first-wake timer --early-wake 0"),
            "only with early wake-up"
        );
        assert!(p("resoundd --first-wake soon -d dummy").is_err());
    }

    #[test]
    fn cpu_dma_latency_is_left_alone_unless_asked() {
        assert_eq!(
            p("resoundd -d dummy").unwrap().server.cpu_dma_latency_us,
            None
        );
        let on = p("resoundd --cpu-dma-latency 0 -d dummy").unwrap();
        assert_eq!(on.server.cpu_dma_latency_us, Some(0));
        assert!(p("resoundd --cpu-dma-latency -1 -d dummy").is_err());
        assert!(p("resoundd --cpu-dma-latency 2000000 -d dummy").is_err());
    }

    #[test]
    fn alsa_options_as_jackd() {
        let a = alsa("resoundd -d alsa");
        assert_eq!(
            (a.device.as_str(), a.rate, a.period, a.nperiods),
            ("hw:0", 48000, 1024, 2)
        );
        assert_eq!(a.devices(), (Some("hw:0".into()), Some("hw:0".into())));
        let a =
            alsa("resoundd -R -d alsa -d hw:1 -r 44100 -p 256 -n 3 -i 2 -o 4 -I 10 -O 20 -s -S");
        assert_eq!(
            (a.rate, a.period, a.nperiods, a.inchannels, a.outchannels),
            (44100, 256, 3, 2, 4)
        );
        assert_eq!(
            (a.input_latency, a.output_latency, a.softmode, a.shorts),
            (10, 20, true, true)
        );
        assert_eq!(a.devices(), (Some("hw:1".into()), Some("hw:1".into())));
        assert_eq!(
            alsa("resoundd -d alsa -d hw:1 -C").devices(),
            (Some("hw:1".into()), None)
        );
        assert_eq!(
            alsa("resoundd -d alsa -P").devices(),
            (None, Some("hw:0".into()))
        );
        assert_eq!(
            alsa("resoundd -d alsa -C cap -P play").devices(),
            (Some("cap".into()), Some("play".into()))
        );
        assert_eq!(
            alsa("resoundd -d alsa --capture=cap -D").devices(),
            (Some("cap".into()), Some("hw:0".into()))
        );
        assert!(p("resoundd -d alsa -n 1").is_err());
        assert_eq!(
            alsa("resoundd -d alsa --format s24_3").format,
            Some(AlsaFormat::S24_3)
        );
        assert!(p("resoundd -d alsa --format u8").is_err());
        assert_eq!(alsa("resoundd -d alsa").access, AlsaAccess::Auto);
        assert_eq!(alsa("resoundd -d alsa --access rw").access, AlsaAccess::Rw);
        assert!(p("resoundd -d alsa --access dma").is_err());
        assert!(p("resoundd -d alsa -p 3")
            .unwrap_err()
            .to_string()
            .contains("outside"));
        let c = p("resoundd -d alsa -r 96000 -p 64").unwrap();
        assert_eq!((c.rate(), c.period(), c.driver_name()), (96000, 64, "alsa"));
    }

    #[test]
    fn file_driver_command_lines() {
        let dir = std::env::temp_dir().join(format!("resound-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let wav = dir.join("in.wav");
        let spec = hound::WavSpec {
            channels: 3,
            sample_rate: 44100,
            bits_per_sample: 16,
            sample_format: hound::SampleFormat::Int,
        };
        let mut w = hound::WavWriter::create(&wav, spec).unwrap();
        for _ in 0..30 {
            w.write_sample(0i16).unwrap();
        }
        w.finalize().unwrap();
        let input = wav.to_str().unwrap();
        let c = p(&format!(
            "resoundd -d file --input {input} --output /tmp/o.wav -p 128"
        ))
        .unwrap();
        assert_eq!(
            (c.rate(), c.period(), c.driver_name()),
            (44100, 128, "file")
        );
        assert_eq!((c.capture_channels(), c.playback_channels()), (3, 3));
        assert!(c.server.sync, "a freewheeling render is sync mode");
        let c = p(&format!(
            "resoundd -d file -i {input} -o /tmp/o.wav --realtime -P 1"
        ))
        .unwrap();
        assert!(!c.server.sync && c.playback_channels() == 1);
        let e = p(&format!(
            "resoundd -d file -i {input} -o /tmp/o.wav -r 48000"
        ))
        .unwrap_err();
        assert!(e.to_string().contains("disagrees"), "{e}");
        let c = p("resoundd -d file --seconds 2 -r 96000 -o /tmp/o.wav").unwrap();
        let DriverArgs::File(f) = &c.driver else {
            panic!("file")
        };
        assert_eq!((f.frames(), c.capture_channels()), (192000, 2));
        assert!(p("resoundd -d file -o /tmp/o.wav").is_err());
        assert!(p(&format!(
            "resoundd -d file -i {input} --seconds 1 -o /tmp/o.wav"
        ))
        .is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
