//! `resoundd [server options] -d DRIVER [driver options]`, as jackd.
//!
//! The command line is cut at `-d`/`--driver`: what comes before is parsed as
//! server options, the driver name follows, and the rest are that driver's
//! options (so `-r` before `-d` means "no real-time" and after `-d dummy`
//! "sample rate", exactly as with jackd).

use clap::{Args, Parser};
use resound_shm::limits::{self, MAX_BUFFER_FRAMES, MIN_BUFFER_FRAMES};

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
    /// Make each reservation period N audio periods long (the budget is scaled
    /// alike), so that a thread may use its budget over several cycles.
    #[arg(long = "period-multiplier", value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub period_multiplier: u32,
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

fn seconds_parser(s: &str) -> Result<f64, String> {
    let v: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    if (0.0..=3600.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!("{v} is outside 0..=3600 seconds"))
    }
}

/// Options of the dummy driver.
#[derive(Debug, Clone, Args)]
pub struct DummyArgs {
    /// Sample rate in Hz.
    #[arg(short = 'r', long = "rate", default_value_t = 48000, value_parser = clap::value_parser!(u32).range(1000..=768000))]
    pub rate: u32,
    /// Frames per period.
    #[arg(short = 'p', long = "period", default_value_t = 1024)]
    pub period: u32,
    /// Number of capture channels (system:capture_N ports).
    #[arg(short = 'C', long = "capture", default_value_t = 2, value_parser = clap::value_parser!(u32).range(0..=256))]
    pub capture: u32,
    /// Number of playback channels (system:playback_N ports).
    #[arg(short = 'P', long = "playback", default_value_t = 2, value_parser = clap::value_parser!(u32).range(0..=256))]
    pub playback: u32,
    /// Feed what is played back into capture (like a cable from output to input):
    /// playback written in cycle k comes back as capture in cycle k+2 (sync) or k+3 (async).
    #[arg(long)]
    pub loopback: bool,
}

#[derive(Debug, Clone, Parser)]
#[command(
    name = "resoundd -d dummy",
    about = "Dummy driver: no sound card, cycles timed on CLOCK_MONOTONIC"
)]
struct DummyCli {
    #[command(flatten)]
    args: DummyArgs,
}

/// Options of the ALSA driver (jackd's `-d alsa` options and defaults).
#[derive(Debug, Clone, Args)]
pub struct AlsaArgs {
    /// ALSA device for capture and playback.
    #[arg(short = 'd', long = "device", default_value = "hw:0")]
    pub device: String,
    /// Provide capture ports; optionally from DEVICE instead of -d's (-C alone without -P: capture only).
    #[arg(short = 'C', long = "capture", value_name = "DEVICE", num_args = 0..=1, default_missing_value = "")]
    pub capture: Option<String>,
    /// Provide playback ports; optionally to DEVICE instead of -d's (-P alone without -C: playback only).
    #[arg(short = 'P', long = "playback", value_name = "DEVICE", num_args = 0..=1, default_missing_value = "")]
    pub playback: Option<String>,
    /// Provide both capture and playback ports (the default without -C/-P).
    #[arg(short = 'D', long = "duplex")]
    pub duplex: bool,
    /// Sample rate in Hz (the device must accept it exactly).
    #[arg(short = 'r', long = "rate", default_value_t = 48000, value_parser = clap::value_parser!(u32).range(1000..=768000))]
    pub rate: u32,
    /// Frames per period (the device must accept it exactly).
    #[arg(short = 'p', long = "period", default_value_t = 1024)]
    pub period: u32,
    /// Number of periods of playback buffer (latency).
    #[arg(short = 'n', long = "nperiods", default_value_t = 2, value_parser = clap::value_parser!(u32).range(2..=64))]
    pub nperiods: u32,
    /// Number of capture channels (0: all the device has, up to 64).
    #[arg(short = 'i', long = "inchannels", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=256))]
    pub inchannels: u32,
    /// Number of playback channels (0: all the device has, up to 64).
    #[arg(short = 'o', long = "outchannels", default_value_t = 0, value_parser = clap::value_parser!(u32).range(0..=256))]
    pub outchannels: u32,
    /// Extra input latency to report (frames).
    #[arg(short = 'I', long = "input-latency", default_value_t = 0)]
    pub input_latency: u32,
    /// Extra output latency to report (frames).
    #[arg(short = 'O', long = "output-latency", default_value_t = 0)]
    pub output_latency: u32,
    /// Soft mode: ignore xruns reported by the device.
    #[arg(short = 's', long = "softmode")]
    pub softmode: bool,
    /// Try 16-bit samples before 32-bit and float.
    #[arg(short = 'S', long = "shorts")]
    pub shorts: bool,
    /// Use only this sample format (not a jackd option; default: the best the device offers, float first).
    #[arg(long = "format", value_enum, value_name = "FORMAT")]
    pub format: Option<AlsaFormat>,
    /// How periods move to and from the device (not a jackd option): auto uses mmap where the device offers it, else read/write.
    #[arg(
        long = "access",
        value_enum,
        value_name = "ACCESS",
        default_value = "auto"
    )]
    pub access: AlsaAccess,
    /// Accepted for jackd compatibility; no effect (hardware monitoring).
    #[arg(short = 'H', long = "hwmon")]
    pub hwmon: bool,
    /// Accepted for jackd compatibility; no effect (hardware metering).
    #[arg(short = 'M', long = "hwmeter")]
    pub hwmeter: bool,
    /// Accepted for jackd compatibility; no effect (monitor ports).
    #[arg(short = 'm', long = "monitor")]
    pub monitor: bool,
    /// Accepted for jackd compatibility; no effect (dithering mode).
    #[arg(short = 'z', long = "dither", value_name = "MODE")]
    pub dither: Option<String>,
    /// Accepted for jackd compatibility; no effect (ALSA MIDI driver).
    #[arg(short = 'X', long = "midi-driver", value_name = "DRIVER")]
    pub midi_driver: Option<String>,
}

/// `--format` values of the ALSA driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AlsaFormat {
    /// 32-bit float.
    Float,
    /// 32-bit integer.
    S32,
    /// 24-bit integer packed in 3 bytes.
    #[value(name = "s24_3")]
    S24_3,
    /// 24-bit integer in 4 bytes.
    S24,
    /// 16-bit integer.
    S16,
}

/// `--access` values of the ALSA driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum AlsaAccess {
    /// mmap (interleaved) where the device offers it, else read/write.
    Auto,
    /// mmap only (refused at start-up if the device has none).
    Mmap,
    /// read/write only.
    Rw,
}

impl AlsaAccess {
    /// The driver's access mode.
    pub fn mode(self) -> resound_engine::driver::alsa::AccessMode {
        use resound_engine::driver::alsa::AccessMode as A;
        match self {
            AlsaAccess::Auto => A::Auto,
            AlsaAccess::Mmap => A::Mmap,
            AlsaAccess::Rw => A::Rw,
        }
    }
}

impl AlsaFormat {
    /// The driver's sample format.
    pub fn sample_format(self) -> resound_engine::driver::alsa::convert::SampleFormat {
        use resound_engine::driver::alsa::convert::SampleFormat as F;
        match self {
            AlsaFormat::Float => F::F32,
            AlsaFormat::S32 => F::S32,
            AlsaFormat::S24_3 => F::S24Packed,
            AlsaFormat::S24 => F::S24In32,
            AlsaFormat::S16 => F::S16,
        }
    }
}

impl AlsaArgs {
    /// The capture and playback devices, as jackd decides them: neither -C
    /// nor -P (or -D): both on -d's device; else only those given, each on
    /// its own device or -d's.
    pub fn devices(&self) -> (Option<String>, Option<String>) {
        let pick = |o: &Option<String>| {
            o.as_ref().map(|d| {
                if d.is_empty() {
                    self.device.clone()
                } else {
                    d.clone()
                }
            })
        };
        if self.duplex || (self.capture.is_none() && self.playback.is_none()) {
            let both = (pick(&self.capture), pick(&self.playback));
            return (
                both.0.or_else(|| Some(self.device.clone())),
                both.1.or_else(|| Some(self.device.clone())),
            );
        }
        (pick(&self.capture), pick(&self.playback))
    }
}

/// `--output-format` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OutputFormat {
    /// 32-bit float.
    F32,
    /// 16-bit integer.
    S16,
    /// 24-bit integer.
    S24,
    /// 32-bit integer.
    S32,
}

/// Options of the file driver (offline rendering).
#[derive(Debug, Clone, Args)]
pub struct FileArgs {
    /// WAV file the capture ports (system:capture_N) read, one channel each
    /// (16, 24 or 32-bit integer or 32-bit float). The server stops when it ends.
    #[arg(short = 'i', long = "input", value_name = "IN.wav")]
    pub input: Option<std::path::PathBuf>,
    /// WAV file the playback ports (system:playback_N) are written to (created or replaced).
    #[arg(short = 'o', long = "output", value_name = "OUT.wav", required = true)]
    pub output: std::path::PathBuf,
    /// Sample rate in Hz (default: the input's; must agree with it).
    #[arg(short = 'r', long = "rate", value_parser = clap::value_parser!(u32).range(1000..=768000))]
    pub rate: Option<u32>,
    /// Frames per period.
    #[arg(short = 'p', long = "period", default_value_t = 1024)]
    pub period: u32,
    /// Capture channels (default: the input's channel count, else 2).
    #[arg(short = 'C', long = "capture", value_parser = clap::value_parser!(u32).range(0..=256))]
    pub capture: Option<u32>,
    /// Playback channels, the output's channels (default: the input's channel count, else 2).
    #[arg(short = 'P', long = "playback", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub playback: Option<u32>,
    /// Run at the real rate instead of as fast as the graph allows (freewheeling).
    #[arg(long)]
    pub realtime: bool,
    /// Without --input: render this many seconds (capture ports are silent).
    #[arg(long, value_name = "S", conflicts_with = "input")]
    pub seconds: Option<f64>,
    /// Sample format of the output (default: the input's, else f32).
    #[arg(long = "output-format", value_enum)]
    pub output_format: Option<OutputFormat>,
    /// Hold the render until every system:playback_N port is connected
    /// (cycles run on the clock with silent capture and nothing is recorded
    /// until then), so clients can connect and wire the graph first.
    #[arg(long = "start-when-connected")]
    pub start_when_connected: bool,
    /// The input's header, read at start-up (not an option).
    #[arg(skip)]
    pub input_info: Option<resound_engine::driver::file::InputInfo>,
}

impl FileArgs {
    /// Sample rate: `-r`, else the input's.
    pub fn rate(&self) -> u32 {
        self.rate
            .or(self.input_info.map(|i| i.rate))
            .unwrap_or(48000)
    }

    /// Capture channels: `-C`, else the input's, else 2.
    pub fn capture_channels(&self) -> u32 {
        self.capture
            .unwrap_or_else(|| self.input_info.map_or(2, |i| i.channels as u32))
    }

    /// Playback channels: `-P`, else the input's, else 2.
    pub fn playback_channels(&self) -> u32 {
        self.playback
            .unwrap_or_else(|| self.input_info.map_or(2, |i| i.channels as u32))
    }

    /// Frames to render without input (`--seconds`).
    pub fn frames(&self) -> u64 {
        (self.seconds.unwrap_or(0.0) * self.rate() as f64).round() as u64
    }
}

#[derive(Debug, Clone, Parser)]
#[command(
    name = "resoundd -d alsa",
    about = "ALSA driver: a sound card (or any ALSA PCM) paces the cycles"
)]
struct AlsaCli {
    #[command(flatten)]
    args: AlsaArgs,
}

#[derive(Debug, Clone, Parser)]
#[command(
    name = "resoundd -d file",
    about = "File driver: offline rendering from a WAV file (capture) to a WAV file (playback), as fast as the graph allows or at the real rate",
    after_help = "Example: resoundd -d file --input in.wav --output out.wav -p 256 --start-when-connected"
)]
struct FileCli {
    #[command(flatten)]
    args: FileArgs,
}

/// The driver and its options.
#[derive(Debug, Clone)]
pub enum DriverArgs {
    /// The dummy driver.
    Dummy(DummyArgs),
    /// The ALSA driver.
    Alsa(AlsaArgs),
    /// The file driver (offline rendering).
    File(FileArgs),
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
            (20.0, 2, 95.0, 50)
        );
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
