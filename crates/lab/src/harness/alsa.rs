//! A test sound card for runs of the ALSA driver on a machine without one:
//! [`AlsaCard::install`] builds `resoundtest` (an alsa-lib external I/O
//! plugin, `crates/lab/alsa/pcm_resoundtest.c`) with the system C compiler
//! and writes an ALSA configuration of the test's own, naming PCMs on it and
//! on alsa-lib's own `file` + `null` plugins. Nothing of the machine's ALSA
//! configuration is changed: a child process sees the test's PCMs through
//! `ALSA_CONFIG_PATH` ([`AlsaCard::env`]), which lists alsa-lib's top-level
//! `alsa.conf` and the test's file. Faults are injected from the test
//! through the card's control file ([`AlsaCard::inject`]).
//!
//! Runs on the caller's thread; nothing here is on the real-time path.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The plugin's C source, compiled into each test directory.
const PLUGIN_SRC: &str = include_str!("../../alsa/pcm_resoundtest.c");
/// The probe program's C source (see [`AlsaCard::probe`]).
const PROBE_SRC: &str = include_str!("../../alsa/resoundtest_probe.c");
/// The file name alsa-lib expects for the `resoundtest` PCM type.
pub const PLUGIN_LIB: &str = "libasound_module_pcm_resoundtest.so";
/// alsa-lib's top-level configuration (it loads the PCM types and defaults).
const ALSA_CONF: &str = "/usr/share/alsa/alsa.conf";

/// The paced card, both directions (capture: silence; playback: discarded).
pub const PCM_CARD: &str = "resoundtest";
/// The paced card: capture plays [`AlsaSpec::capture_input`].
pub const PCM_CAPTURE_FILE: &str = "resoundtest_capture_file";
/// The paced card: playback is recorded to [`AlsaCard::playback_recording`].
pub const PCM_PLAYBACK_FILE: &str = "resoundtest_playback_file";
/// The paced card, both directions: capture plays the input file and
/// playback is recorded (for end-to-end sample-exact runs).
pub const PCM_DUPLEX_FILE: &str = "resoundtest_duplex_file";
/// The paced card offering only 48000 Hz (refusals).
pub const PCM_48K_ONLY: &str = "resoundtest_48k";
/// The paced card offering periods of at most 2048 bytes (256 frames of
/// stereo float): longer periods are refused.
pub const PCM_SHORT_PERIODS: &str = "resoundtest_short_periods";
/// alsa-lib's `file` plugin on `null`, capture from the input file (unpaced).
pub const PCM_FILE_CAPTURE: &str = "file_capture";
/// alsa-lib's `file` plugin on `null`, playback to
/// [`AlsaCard::file_recording`] (unpaced).
pub const PCM_FILE_PLAYBACK: &str = "file_playback";

/// A sample format the card can be limited to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleFormat {
    /// 32-bit float, little-endian.
    Float,
    /// 32-bit signed integer.
    S32,
    /// 24-bit signed integer in 3 bytes.
    S24_3,
    /// 24-bit signed integer in the low bytes of 4.
    S24,
    /// 16-bit signed integer.
    S16,
}

impl SampleFormat {
    /// Every format the card supports.
    pub const ALL: [SampleFormat; 5] = [
        SampleFormat::Float,
        SampleFormat::S32,
        SampleFormat::S24_3,
        SampleFormat::S24,
        SampleFormat::S16,
    ];

    /// alsa-lib's name (as `aplay -f` and the configuration spell it).
    pub fn alsa_name(self) -> &'static str {
        match self {
            SampleFormat::Float => "FLOAT_LE",
            SampleFormat::S32 => "S32_LE",
            SampleFormat::S24_3 => "S24_3LE",
            SampleFormat::S24 => "S24_LE",
            SampleFormat::S16 => "S16_LE",
        }
    }

    /// Bytes per sample in memory and in raw files.
    pub fn bytes(self) -> usize {
        match self {
            SampleFormat::S16 => 2,
            SampleFormat::S24_3 => 3,
            _ => 4,
        }
    }
}

impl fmt::Display for SampleFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.alsa_name())
    }
}

/// A fault the card shows on request (see [`AlsaCard::inject`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    /// The next position read of every open stream reports an xrun (`-EPIPE`).
    Xrun,
    /// Every running stream is suspended (`-ESTRPIPE`); `snd_pcm_resume` works.
    Suspend,
    /// The device is gone: opens and every stream call fail with `-ENODEV`.
    Vanish,
    /// The device is back: opens work again.
    Return,
}

impl Fault {
    /// The word written into the control file.
    pub fn word(self) -> &'static str {
        match self {
            Fault::Xrun => "xrun",
            Fault::Suspend => "suspend",
            Fault::Vanish => "vanish",
            Fault::Return => "return",
        }
    }
}

/// What card to install.
#[derive(Debug, Clone)]
pub struct AlsaSpec {
    /// The one sample format the `resoundtest*` PCMs offer (`None`: all of them).
    pub format: Option<SampleFormat>,
    /// The channel count every PCM offers (also the raw files' frame width).
    pub channels: u32,
    /// Raw interleaved frames in `format` that capture plays (`None`: an
    /// empty file, so capture is silence).
    pub capture_input: Option<PathBuf>,
    /// Whether capture starts again at the input's end (else silence follows).
    pub capture_loop: bool,
    /// The access types the `resoundtest*` PCMs offer.
    pub access: CardAccess,
}

/// The access types the test card offers (its `access` field).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CardAccess {
    /// Read/write and mmap, interleaved or not (a driver picks).
    #[default]
    Both,
    /// Read/write only (`snd_pcm_readi`/`writei`, `readn`/`writen`).
    Rw,
    /// mmap only (`snd_pcm_mmap_begin`/`commit`).
    Mmap,
}

impl CardAccess {
    /// The word in the card's configuration.
    pub fn word(self) -> &'static str {
        match self {
            CardAccess::Both => "both",
            CardAccess::Rw => "rw",
            CardAccess::Mmap => "mmap",
        }
    }
}

impl Default for AlsaSpec {
    fn default() -> Self {
        AlsaSpec {
            format: None,
            channels: 2,
            capture_input: None,
            capture_loop: false,
            access: CardAccess::Both,
        }
    }
}

/// The test's sound card: its configuration, plugin and control file in
/// the test directory.
#[derive(Debug, Clone)]
pub struct AlsaCard {
    dir: PathBuf,
    conf: PathBuf,
    control: PathBuf,
}

impl AlsaCard {
    /// Builds the plugin into `dir` (if not there yet) and writes the ALSA
    /// configuration `dir/asound.conf` for `spec`. Fails with the compiler's
    /// message, or `NotFound` when there is no C compiler or no alsa-lib
    /// headers (`libasound2-dev`).
    pub fn install(dir: &Path, spec: &AlsaSpec) -> io::Result<AlsaCard> {
        std::fs::create_dir_all(dir)?;
        let plugin = build_plugin(dir)?;
        let card = AlsaCard {
            dir: dir.to_path_buf(),
            conf: dir.join("asound.conf"),
            control: dir.join("control"),
        };
        std::fs::write(&card.control, "")?;
        let input = match &spec.capture_input {
            Some(p) => p.clone(),
            None => {
                let p = dir.join("capture_input.raw");
                std::fs::write(&p, [])?;
                p
            }
        };
        std::fs::write(&card.conf, card.config_text(&plugin, spec, &input))?;
        Ok(card)
    }

    /// The environment a child process (resoundd, aplay) needs to see the
    /// test's PCMs.
    pub fn env(&self) -> Vec<(String, String)> {
        vec![("ALSA_CONFIG_PATH".into(), config_path_env(&self.conf))]
    }

    /// Asks the card for `fault`: writes its word into the control file
    /// (a new file renamed over the old one, so every write is seen once by
    /// each open stream, within a period).
    pub fn inject(&self, fault: Fault) -> io::Result<()> {
        let tmp = self.dir.join("control.new");
        std::fs::write(&tmp, format!("{}\n", fault.word()))?;
        std::fs::rename(&tmp, &self.control)
    }

    /// The control file (a user may also `echo xrun > FILE`).
    pub fn control_path(&self) -> &Path {
        &self.control
    }

    /// The ALSA configuration file of the test.
    pub fn config_path(&self) -> &Path {
        &self.conf
    }

    /// Where [`PCM_PLAYBACK_FILE`] and [`PCM_DUPLEX_FILE`] record playback
    /// (raw interleaved frames in the negotiated format).
    pub fn playback_recording(&self) -> PathBuf {
        self.dir.join("resoundtest_playback.raw")
    }

    /// Where [`PCM_FILE_PLAYBACK`] (alsa-lib's file plugin) records playback.
    pub fn file_recording(&self) -> PathBuf {
        self.dir.join("file_playback.raw")
    }

    /// Builds the probe program (`crates/lab/alsa/resoundtest_probe.c`: opens
    /// a PCM with exact parameters, plays or reads, reports alsa-lib's errors
    /// and its recoveries as JSON lines) into the test directory.
    pub fn probe(&self) -> io::Result<PathBuf> {
        let exe = self.dir.join("resoundtest_probe");
        if !exe.exists() {
            compile(&self.dir, "resoundtest_probe.c", PROBE_SRC, &exe, &[])?;
        }
        Ok(exe)
    }

    /// The configuration text: the plugin type and the named PCMs.
    fn config_text(&self, plugin: &Path, spec: &AlsaSpec, input: &Path) -> String {
        let card = |name: &str, extra: &str| {
            let formats = match spec.format {
                Some(f) => format!("\"{f}\""),
                None => SampleFormat::ALL.map(|f| format!("\"{f}\"")).join(" "),
            };
            format!(
                "pcm.{name} {{\n    type resoundtest\n    control {}\n    \
                 formats [ {formats} ]\n    channels_min {ch}\n    channels_max {ch}\n    \
                 access \"{access}\"\n{extra}}}\n",
                quote(&self.control),
                ch = spec.channels,
                access = spec.access.word(),
            )
        };
        let capture = format!(
            "    capture_file {}\n    capture_loop {}\n",
            quote(input),
            spec.capture_loop
        );
        let playback = format!("    playback_file {}\n", quote(&self.playback_recording()));
        let mut text = format!(
            "# resound test sound card (written by resound_lab::harness::alsa)\n\
             pcm_type.resoundtest {{ lib {} }}\n",
            quote(plugin)
        );
        text += &card(PCM_CARD, "");
        text += &card(PCM_CAPTURE_FILE, &capture);
        text += &card(PCM_PLAYBACK_FILE, &playback);
        text += &card(PCM_DUPLEX_FILE, &format!("{capture}{playback}"));
        text += &card(PCM_48K_ONLY, "    rates [ 48000 ]\n");
        text += &card(PCM_SHORT_PERIODS, "    period_bytes_max 2048\n");
        text += &format!(
            "pcm.{PCM_FILE_CAPTURE} {{\n    type file\n    slave.pcm \"null\"\n    \
             file \"/dev/null\"\n    infile {}\n    format \"raw\"\n}}\n",
            quote(input)
        );
        text += &format!(
            "pcm.{PCM_FILE_PLAYBACK} {{\n    type file\n    slave.pcm \"null\"\n    \
             file {}\n    format \"raw\"\n}}\n",
            quote(&self.file_recording())
        );
        text
    }
}

/// The value of `ALSA_CONFIG_PATH` that adds the configuration file `conf`
/// to alsa-lib's own (`/usr/share/alsa/alsa.conf`), for a child process;
/// the machine's configuration is left alone.
pub fn config_path_env(conf: &Path) -> String {
    format!("{ALSA_CONF}:{}", conf.display())
}

/// Builds `libasound_module_pcm_resoundtest.so` into `dir` unless it is
/// there already; returns its path.
pub fn build_plugin(dir: &Path) -> io::Result<PathBuf> {
    let lib = dir.join(PLUGIN_LIB);
    if !lib.exists() {
        let so = ["-fPIC", "-DPIC", "-shared"];
        compile(dir, "pcm_resoundtest.c", PLUGIN_SRC, &lib, &so)?;
    }
    Ok(lib)
}

/// Compiles the C source `text` (written to `dir/name`) into `out` with
/// alsa-lib; the object is written under a temporary name and renamed, so a
/// concurrent user never sees half a file.
fn compile(dir: &Path, name: &str, text: &str, out: &Path, extra: &[&str]) -> io::Result<()> {
    if !Path::new("/usr/include/alsa/pcm_external.h").exists() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "alsa-lib headers missing (apt-get install libasound2-dev)",
        ));
    }
    let src = dir.join(name);
    std::fs::write(&src, text)?;
    let tmp = out.with_extension(format!("tmp{}", std::process::id()));
    let result = Command::new("cc")
        .args(["-std=gnu11", "-O2", "-g", "-Wall", "-Wextra", "-Werror"])
        .args(extra)
        .arg("-o")
        .arg(&tmp)
        .arg(&src)
        .arg("-lasound")
        .output();
    let output = match result {
        Ok(o) => o,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                "no C compiler (cc): apt-get install build-essential",
            ))
        }
        Err(e) => return Err(e),
    };
    if !output.status.success() {
        return Err(io::Error::other(format!(
            "compiling {name} failed:\n{}",
            String::from_utf8_lossy(&output.stderr)
        )));
    }
    std::fs::rename(&tmp, out)
}

/// A path as an ALSA configuration string.
fn quote(p: &Path) -> String {
    let s = p.display().to_string();
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_names_every_pcm_and_the_plugin() {
        let card = AlsaCard {
            dir: "/t".into(),
            conf: "/t/asound.conf".into(),
            control: "/t/control".into(),
        };
        let spec = AlsaSpec {
            format: Some(SampleFormat::S24_3),
            ..AlsaSpec::default()
        };
        let text = card.config_text(Path::new("/t/lib.so"), &spec, Path::new("/t/in.raw"));
        for pcm in [
            PCM_CARD,
            PCM_CAPTURE_FILE,
            PCM_PLAYBACK_FILE,
            PCM_DUPLEX_FILE,
            PCM_48K_ONLY,
            PCM_SHORT_PERIODS,
            PCM_FILE_CAPTURE,
            PCM_FILE_PLAYBACK,
        ] {
            assert!(text.contains(&format!("pcm.{pcm} {{")), "{pcm} in\n{text}");
        }
        assert!(text.contains("lib \"/t/lib.so\""));
        assert!(text.contains("formats [ \"S24_3LE\" ]"));
        assert!(text.contains("rates [ 48000 ]"));
        assert!(text.contains("infile \"/t/in.raw\""));
    }

    #[test]
    fn quote_escapes_quotes() {
        assert_eq!(quote(Path::new("/a\"b")), "\"/a\\\"b\"");
    }
}
