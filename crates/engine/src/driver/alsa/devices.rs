//! What ALSA knows: sound cards (`snd_card_next`) and the PCMs of the
//! name hints (`snd_device_name_hint`), with the capabilities of those
//! that can be opened: rates, formats, channels and period sizes. Used by
//! `resound devices`.
//!
//! Runs on the caller's thread (not real-time).

use alsa::pcm::{Format, HwParams, PCM};
use alsa::Direction;

/// A sound card.
#[derive(Debug, Clone)]
pub struct CardInfo {
    /// Card index (`hw:N`).
    pub index: i32,
    /// Short name.
    pub name: String,
    /// Long name.
    pub long_name: String,
}

/// A PCM named by the hints, with what it offers if it could be opened.
#[derive(Debug, Clone)]
pub struct PcmInfo {
    /// Name to give `-d`/`-C`/`-P` (e.g. `hw:CARD=PCH,DEV=0`, `null`).
    pub name: String,
    /// Description from the configuration.
    pub desc: String,
    /// Capabilities per direction it could be opened in.
    pub caps: Vec<(Direction, Result<Caps, String>)>,
}

/// What a PCM offers in one direction.
#[derive(Debug, Clone)]
pub struct Caps {
    /// Common rates it accepts.
    pub rates: Vec<u32>,
    /// Rate range.
    pub rate_range: (u32, u32),
    /// Formats among those the driver can use.
    pub formats: Vec<String>,
    /// Channel range.
    pub channels: (u32, u32),
    /// Period size range (frames).
    pub periods: (u64, u64),
}

/// The sound cards.
pub fn cards() -> Vec<CardInfo> {
    alsa::card::Iter::new()
        .filter_map(|c| c.ok())
        .map(|c| CardInfo {
            index: c.get_index(),
            name: c.get_name().unwrap_or_default(),
            long_name: c.get_longname().unwrap_or_default(),
        })
        .collect()
}

/// The PCMs the hints name, with their capabilities.
pub fn pcms() -> Result<Vec<PcmInfo>, String> {
    let hints = alsa::device_name::HintIter::new_str(None, "pcm")
        .map_err(|e| format!("ALSA name hints: {e}"))?;
    Ok(hints
        .filter_map(|h| {
            let name = h.name?;
            let dirs = match h.direction {
                Some(d) => vec![d],
                None => vec![Direction::Playback, Direction::Capture],
            };
            let caps = dirs.into_iter().map(|d| (d, probe(&name, d))).collect();
            Some(PcmInfo {
                name,
                desc: h.desc.unwrap_or_default().replace('\n', " "),
                caps,
            })
        })
        .collect())
}

/// Opens `name` for `dir` (non-blocking) and reads what it offers.
pub fn probe(name: &str, dir: Direction) -> Result<Caps, String> {
    let pcm = PCM::new(name, dir, true).map_err(|e| {
        if e.errno().abs() == libc::EBUSY {
            super::busy::busy_message(name, dir)
        } else {
            e.to_string()
        }
    })?;
    let hw = HwParams::any(&pcm).map_err(|e| e.to_string())?;
    let formats = [
        Format::FloatLE,
        Format::S32LE,
        Format::S243LE,
        Format::S24LE,
        Format::S16LE,
        Format::FloatBE,
        Format::S32BE,
        Format::S243BE,
        Format::S24BE,
        Format::S16BE,
    ]
    .into_iter()
    .filter(|f| hw.test_format(*f).is_ok())
    .map(|f| f.to_string())
    .collect();
    let rates = [
        8000, 11025, 16000, 22050, 32000, 44100, 48000, 88200, 96000, 176400, 192000,
    ]
    .into_iter()
    .filter(|r| hw.test_rate(*r).is_ok())
    .collect();
    Ok(Caps {
        rates,
        rate_range: (
            hw.get_rate_min().unwrap_or(0),
            hw.get_rate_max().unwrap_or(0),
        ),
        formats,
        channels: (
            hw.get_channels_min().unwrap_or(0),
            hw.get_channels_max().unwrap_or(0),
        ),
        periods: (
            hw.get_period_size_min().unwrap_or(0) as u64,
            hw.get_period_size_max().unwrap_or(0) as u64,
        ),
    })
}
