//! Opening a PCM and negotiating its hardware and software parameters:
//! access (mmap interleaved where offered, else read/write interleaved or
//! not; `--access` narrows the choice), sample format (best first, or 16-bit first
//! with `-S`), channels, the asked rate and period exactly (else an error
//! naming what the device supports), and `-n` periods of buffer.
//!
//! Runs on the thread that starts the server (before any client connects)
//! and on the driver thread when a lost device is reopened (not real time).

use super::busy::busy_message;
use super::convert::{Encoding, SampleFormat};
use super::{AccessMode, AlsaConfig};
use alsa::pcm::{Access, Format, HwParams, SwParams, PCM};
use alsa::{Direction, ValueOr};

/// Rates probed to tell the user what a device supports.
const COMMON_RATES: [u32; 13] = [
    8000, 11025, 16000, 22050, 32000, 44100, 48000, 88200, 96000, 176400, 192000, 352800, 384000,
];

/// The most channels used when `-i`/`-o` ask for "all the device has".
pub const MAX_DEFAULT_CHANNELS: u32 = 64;

/// What was agreed with the device for one direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Negotiated {
    /// Sample format and byte order.
    pub encoding: Encoding,
    /// Interleaved access (else one buffer per channel).
    pub interleaved: bool,
    /// mmap access (`snd_pcm_mmap_begin`/`commit`; else read/write).
    pub mmap: bool,
    /// Channels the device runs with (at least the ports').
    pub device_channels: u32,
    /// Channels given ports.
    pub channels: u32,
}

/// "capture" or "playback".
pub fn dir_name(d: Direction) -> &'static str {
    match d {
        Direction::Capture => "capture",
        Direction::Playback => "playback",
    }
}

/// The formats to try, in order of preference, with their encodings.
fn format_order(shorts: bool, only: Option<SampleFormat>) -> Vec<(Format, Encoding)> {
    let e = |format, big_endian| Encoding { format, big_endian };
    let mut v = vec![
        (Format::FloatLE, e(SampleFormat::F32, false)),
        (Format::S32LE, e(SampleFormat::S32, false)),
        (Format::S243LE, e(SampleFormat::S24Packed, false)),
        (Format::S24LE, e(SampleFormat::S24In32, false)),
        (Format::S16LE, e(SampleFormat::S16, false)),
        (Format::FloatBE, e(SampleFormat::F32, true)),
        (Format::S32BE, e(SampleFormat::S32, true)),
        (Format::S243BE, e(SampleFormat::S24Packed, true)),
        (Format::S24BE, e(SampleFormat::S24In32, true)),
        (Format::S16BE, e(SampleFormat::S16, true)),
    ];
    if shorts {
        v.sort_by_key(|(_, e)| e.format != SampleFormat::S16);
    }
    v.retain(|(_, e)| only.is_none_or(|f| f == e.format));
    v
}

/// Opens `name` for `dir` (non-blocking) and configures it; the error says
/// what the device refused and what it supports.
pub fn open_pcm(name: &str, dir: Direction, cfg: &AlsaConfig) -> Result<(PCM, Negotiated), String> {
    let what = dir_name(dir);
    let pcm = PCM::new(name, dir, true).map_err(|e| {
        if e.errno().abs() == libc::EBUSY {
            busy_message(name, dir)
        } else {
            format!("cannot open {what} device {name}: {e}")
        }
    })?;
    let neg = configure(&pcm, name, dir, cfg)?;
    Ok((pcm, neg))
}

/// Sets the hardware and software parameters of the open PCM `pcm` (again,
/// after a period change: alsa-lib frees the old setup first). Not real-time.
pub fn configure(
    pcm: &PCM,
    name: &str,
    dir: Direction,
    cfg: &AlsaConfig,
) -> Result<Negotiated, String> {
    let neg = hw_params(pcm, name, dir, cfg)?;
    sw_params(pcm, cfg)
        .map_err(|e| format!("{name} ({}): software parameters: {e}", dir_name(dir)))?;
    Ok(neg)
}

fn hw_params(
    pcm: &PCM,
    name: &str,
    dir: Direction,
    cfg: &AlsaConfig,
) -> Result<Negotiated, String> {
    let what = dir_name(dir);
    let err = |m: String| format!("{name} ({what}): {m}");
    let hw = HwParams::any(pcm).map_err(|e| err(format!("no hardware parameters: {e}")))?;
    let (interleaved, mmap) = set_access(&hw, cfg.access).map_err(err)?;
    let encoding = format_order(cfg.shorts, cfg.format)
        .into_iter()
        .find(|(f, _)| hw.test_format(*f).is_ok())
        .map(|(f, e)| hw.set_format(f).map(|()| e))
        .ok_or_else(|| match cfg.format {
            Some(f) => err(format!("does not offer the format {f:?}")),
            None => err("offers none of the formats FLOAT, S32, S24_3, S24, S16".into()),
        })?
        .map_err(|e| err(format!("format: {e}")))?;
    let (channels, device_channels) = channels(&hw, dir, cfg).map_err(err)?;
    hw.set_channels(device_channels)
        .map_err(|e| err(format!("channels: {e}")))?;
    if hw.test_rate(cfg.rate).is_err() {
        return Err(format!(
            "{name} refuses {} Hz; it supports {}",
            cfg.rate,
            supported_rates(&hw)
        ));
    }
    hw.set_rate(cfg.rate, ValueOr::Nearest)
        .map_err(|e| err(format!("rate: {e}")))?;
    set_period(&hw, name, cfg)?;
    pcm.hw_params(&hw)
        .map_err(|e| err(format!("hardware parameters refused: {e}")))?;
    Ok(Negotiated {
        encoding,
        interleaved,
        mmap,
        device_channels,
        channels,
    })
}

/// The access types to try for `mode`, best first: (access, interleaved, mmap).
/// mmap is used interleaved only: the `alsa` crate's safe mmap transfer
/// (`IO::mmap`) hands over one interleaved area.
fn access_order(mode: AccessMode) -> &'static [(Access, bool, bool)] {
    const MMAP: (Access, bool, bool) = (Access::MMapInterleaved, true, true);
    const RW_I: (Access, bool, bool) = (Access::RWInterleaved, true, false);
    const RW_N: (Access, bool, bool) = (Access::RWNonInterleaved, false, false);
    match mode {
        AccessMode::Auto => &[MMAP, RW_I, RW_N],
        AccessMode::Mmap => &[MMAP],
        AccessMode::Rw => &[RW_I, RW_N],
    }
}

/// Sets the first access type of `mode`'s order the device offers;
/// returns (interleaved, mmap).
fn set_access(hw: &HwParams, mode: AccessMode) -> Result<(bool, bool), String> {
    let order = access_order(mode);
    order
        .iter()
        .find(|(a, _, _)| hw.test_access(*a).is_ok())
        .map(|&(a, interleaved, mmap)| {
            hw.set_access(a)
                .map(|()| (interleaved, mmap))
                .map_err(|e| format!("access {a:?}: {e}"))
        })
        .unwrap_or_else(|| {
            let tried: Vec<String> = order.iter().map(|(a, _, _)| format!("{a:?}")).collect();
            Err(format!(
                "offers none of the access types {} (--access {})",
                tried.join(", "),
                mode.word()
            ))
        })
}

/// (channels given ports, channels the device runs with).
fn channels(hw: &HwParams, dir: Direction, cfg: &AlsaConfig) -> Result<(u32, u32), String> {
    let asked = match dir {
        Direction::Capture => cfg.in_channels,
        Direction::Playback => cfg.out_channels,
    };
    let min = hw.get_channels_min().map_err(|e| e.to_string())?;
    let max = hw.get_channels_max().map_err(|e| e.to_string())?;
    if asked == 0 {
        let n = max.min(MAX_DEFAULT_CHANNELS).max(min);
        return Ok((n, n));
    }
    if asked > max {
        return Err(format!(
            "asked for {asked} channels; the device has at most {max}"
        ));
    }
    Ok((asked, asked.max(min)))
}

fn set_period(hw: &HwParams, name: &str, cfg: &AlsaConfig) -> Result<(), String> {
    let range = || {
        let lo = hw.get_period_size_min().unwrap_or(0);
        let hi = hw.get_period_size_max().unwrap_or(0);
        format!("{lo}..{hi}")
    };
    if hw
        .set_period_size(cfg.period as alsa::pcm::Frames, ValueOr::Nearest)
        .is_err()
    {
        return Err(format!(
            "{name} refuses a period of {} frames; it supports {} frames",
            cfg.period,
            range()
        ));
    }
    hw.set_periods(cfg.periods, ValueOr::Nearest)
        .map_err(|e| format!("{name} refuses {} periods per buffer: {e}", cfg.periods))
}

/// The common rates `hw` accepts ("48000, 96000"), or its range.
fn supported_rates(hw: &HwParams) -> String {
    let ok: Vec<String> = COMMON_RATES
        .iter()
        .filter(|r| hw.test_rate(**r).is_ok())
        .map(u32::to_string)
        .collect();
    if ok.is_empty() {
        let lo = hw.get_rate_min().unwrap_or(0);
        let hi = hw.get_rate_max().unwrap_or(0);
        format!("{lo}..{hi} Hz")
    } else {
        ok.join(", ")
    }
}

/// Wakes at one period available; the stream is started explicitly; in
/// soft mode the device does not stop on an xrun.
fn sw_params(pcm: &PCM, cfg: &AlsaConfig) -> alsa::Result<()> {
    let sw: SwParams = pcm.sw_params_current()?;
    let boundary = sw.get_boundary()?;
    sw.set_avail_min(cfg.period as alsa::pcm::Frames)?;
    sw.set_start_threshold(boundary)?;
    let (_, buffer) = pcm.get_params().unwrap_or((0, 0));
    let stop = if cfg.soft || buffer == 0 {
        boundary
    } else {
        buffer as alsa::pcm::Frames
    };
    sw.set_stop_threshold(stop)?;
    pcm.sw_params(&sw)
}
