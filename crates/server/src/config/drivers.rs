//! The drivers' command-line options (after `-d DRIVER`), as jackd's:
//! `dummy`, `alsa` and `file`.

use clap::{Args, Parser};

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
pub(super) struct DummyCli {
    #[command(flatten)]
    pub(super) args: DummyArgs,
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
pub(super) struct AlsaCli {
    #[command(flatten)]
    pub(super) args: AlsaArgs,
}

#[derive(Debug, Clone, Parser)]
#[command(
    name = "resoundd -d file",
    about = "File driver: offline rendering from a WAV file (capture) to a WAV file (playback), as fast as the graph allows or at the real rate",
    after_help = "Example: resoundd -d file --input in.wav --output out.wav -p 256 --start-when-connected"
)]
pub(super) struct FileCli {
    #[command(flatten)]
    pub(super) args: FileArgs,
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
