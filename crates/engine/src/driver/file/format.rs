//! Sample formats of the file driver's WAV files and their conversion to and
//! from the float port buffers, plus the start-up probe of an input file.
//!
//! Integer samples of `b` bits map to floats by `v / 2^(b-1)` and back by
//! rounding `x * 2^(b-1)` and clipping to the integer range, so 16- and
//! 24-bit values go through float ports unchanged; a 32-bit value keeps the
//! 24 significant bits a float holds.
//!
//! Runs on the reader and writer threads (not real-time) and at start-up.

use std::path::Path;

/// A WAV sample format the file driver reads or writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleFormat {
    /// 32-bit IEEE float.
    F32,
    /// 16-bit signed integer.
    S16,
    /// 24-bit signed integer (3 bytes).
    S24,
    /// 32-bit signed integer.
    S32,
}

impl SampleFormat {
    /// The format of a WAV file's header; None for one the driver cannot read
    /// (8-bit unsigned, 64-bit float).
    pub fn of_spec(spec: hound::WavSpec) -> Option<SampleFormat> {
        match (spec.sample_format, spec.bits_per_sample) {
            (hound::SampleFormat::Float, 32) => Some(SampleFormat::F32),
            (hound::SampleFormat::Int, 16) => Some(SampleFormat::S16),
            (hound::SampleFormat::Int, 24) => Some(SampleFormat::S24),
            (hound::SampleFormat::Int, 32) => Some(SampleFormat::S32),
            _ => None,
        }
    }

    /// Bits per sample.
    pub fn bits(self) -> u16 {
        match self {
            SampleFormat::S16 => 16,
            SampleFormat::S24 => 24,
            SampleFormat::F32 | SampleFormat::S32 => 32,
        }
    }

    /// The WAV header of a file in this format.
    pub fn spec(self, channels: u16, rate: u32) -> hound::WavSpec {
        hound::WavSpec {
            channels,
            sample_rate: rate,
            bits_per_sample: self.bits(),
            sample_format: if self == SampleFormat::F32 {
                hound::SampleFormat::Float
            } else {
                hound::SampleFormat::Int
            },
        }
    }

    /// Name as on the command line (`f32`, `s16`, `s24`, `s32`).
    pub fn name(self) -> &'static str {
        match self {
            SampleFormat::F32 => "f32",
            SampleFormat::S16 => "s16",
            SampleFormat::S24 => "s24",
            SampleFormat::S32 => "s32",
        }
    }

    /// Full scale of the integer formats: 2^(bits-1).
    fn scale(self) -> f64 {
        (1u64 << (self.bits() - 1)) as f64
    }

    /// An integer sample as a float. Not for [`SampleFormat::F32`].
    pub fn int_to_f32(self, v: i32) -> f32 {
        (v as f64 / self.scale()) as f32
    }

    /// A float as an integer sample, rounded and clipped to the format's range.
    pub fn f32_to_int(self, x: f32) -> i32 {
        let s = self.scale();
        (x as f64 * s).round().clamp(-s, s - 1.0) as i32
    }
}

/// What the driver needs to know of an input file, read from its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputInfo {
    /// Sample rate (Hz).
    pub rate: u32,
    /// Channels.
    pub channels: u16,
    /// Length in frames.
    pub frames: u64,
    /// Sample format.
    pub format: SampleFormat,
}

/// Reads an input file's header; a clear message if it is missing, not a
/// WAV file, or in a format the driver cannot read.
pub fn probe_input(path: &Path) -> Result<InputInfo, String> {
    let r = open_input(path)?;
    let spec = r.spec();
    let format = SampleFormat::of_spec(spec).ok_or_else(|| {
        format!(
            "input {}: {}-bit {:?} samples are not supported (16, 24 or 32-bit integer, or 32-bit float)",
            path.display(),
            spec.bits_per_sample,
            spec.sample_format
        )
    })?;
    if spec.channels == 0 {
        return Err(format!("input {}: no channels", path.display()));
    }
    Ok(InputInfo {
        rate: spec.sample_rate,
        channels: spec.channels,
        frames: r.duration() as u64,
        format,
    })
}

/// Opens an input file for reading, with a message that names it.
pub(super) fn open_input(
    path: &Path,
) -> Result<hound::WavReader<std::io::BufReader<std::fs::File>>, String> {
    hound::WavReader::open(path).map_err(|e| match e {
        hound::Error::IoError(io) => format!("cannot read input {}: {io}", path.display()),
        hound::Error::FormatError(why) => {
            format!(
                "input {} is not a WAV file we can read ({why})",
                path.display()
            )
        }
        other => format!("input {}: {other}", path.display()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_go_through_floats_unchanged() {
        for f in [SampleFormat::S16, SampleFormat::S24] {
            let max = (1i32 << (f.bits() - 1)) - 1;
            for v in [-max - 1, -12345, -1, 0, 1, 777, max] {
                assert_eq!(f.f32_to_int(f.int_to_f32(v)), v, "{f:?} {v}");
            }
        }
        // 32-bit: the 24 significant bits a float holds survive.
        let f = SampleFormat::S32;
        for v in [i32::MIN, -(5 << 8), 0, 123 << 8, (1 << 30) + (1 << 8)] {
            assert_eq!(f.f32_to_int(f.int_to_f32(v)), v);
        }
    }

    #[test]
    fn out_of_range_floats_clip() {
        assert_eq!(SampleFormat::S16.f32_to_int(1.5), 32767);
        assert_eq!(SampleFormat::S16.f32_to_int(-1.5), -32768);
        assert_eq!(SampleFormat::S24.f32_to_int(1.0), (1 << 23) - 1);
        assert_eq!(SampleFormat::S32.f32_to_int(2.0), i32::MAX);
    }

    #[test]
    fn probe_says_what_is_wrong() {
        let dir = std::env::temp_dir().join(format!("resound-probe-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let missing = probe_input(&dir.join("missing.wav")).unwrap_err();
        assert!(missing.contains("cannot read input"), "{missing}");
        let text = dir.join("text.wav");
        std::fs::write(&text, "not a wav file at all").unwrap();
        let e = probe_input(&text).unwrap_err();
        assert!(e.contains("is not a WAV file"), "{e}");
        let ok = dir.join("ok.wav");
        let mut w = hound::WavWriter::create(&ok, SampleFormat::S24.spec(3, 44100)).unwrap();
        for i in 0..30 {
            w.write_sample(i).unwrap();
        }
        w.finalize().unwrap();
        let info = probe_input(&ok).unwrap();
        assert_eq!(
            info,
            InputInfo {
                rate: 44100,
                channels: 3,
                frames: 10,
                format: SampleFormat::S24
            }
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
