//! Sample conversion between the float port buffers and the device's raw
//! samples: pure functions over slices, no allocation (real-time safe).
//!
//! Floats are full scale at ±1.0; an integer format of `b` bits maps
//! `x` to `x / 2^(b-1)` and back with rounding and clipping to the format's
//! range, so every integer sample survives a round trip through float
//! exactly (S32 keeps the 24 most significant bits, what an `f32` holds).
//!
//! A channel is a strided view of the device buffer: sample `i` of the
//! channel starts at byte `i * stride` of the slice (interleaved: the slice
//! starts at the channel's offset and `stride` is the frame size;
//! non-interleaved: `stride` is the sample size).
//!
//! Runs on the driver thread (real-time).

/// A sample format the driver can negotiate, best first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SampleFormat {
    /// 32-bit IEEE float.
    F32,
    /// 32-bit signed integer.
    S32,
    /// 24-bit signed integer in the low 3 bytes of 4 (ALSA's S24).
    S24In32,
    /// 24-bit signed integer packed in 3 bytes (ALSA's S24_3).
    S24Packed,
    /// 16-bit signed integer.
    S16,
}

/// A format and its byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Encoding {
    /// The sample format.
    pub format: SampleFormat,
    /// Big-endian samples (else little-endian).
    pub big_endian: bool,
}

impl SampleFormat {
    /// Bytes one sample takes in the device buffer.
    pub const fn bytes(self) -> usize {
        match self {
            SampleFormat::F32 | SampleFormat::S32 | SampleFormat::S24In32 => 4,
            SampleFormat::S24Packed => 3,
            SampleFormat::S16 => 2,
        }
    }

    /// Significant bits of an integer format (float: 0).
    const fn bits(self) -> u32 {
        match self {
            SampleFormat::F32 => 0,
            SampleFormat::S32 => 32,
            SampleFormat::S24In32 | SampleFormat::S24Packed => 24,
            SampleFormat::S16 => 16,
        }
    }
}

/// Float to a `bits`-bit integer: scaled, rounded, clipped. Real-time safe.
pub fn float_to_int(x: f32, bits: u32) -> i32 {
    let scale = (1u64 << (bits - 1)) as f64;
    let v = (x as f64 * scale).round();
    let v = if v.is_nan() { 0.0 } else { v };
    v.clamp(-scale, scale - 1.0) as i32
}

/// A `bits`-bit integer to float. Real-time safe.
pub fn int_to_float(v: i32, bits: u32) -> f32 {
    (v as f64 / (1u64 << (bits - 1)) as f64) as f32
}

/// Writes the low `n` bytes of `v` into `dst` in the given byte order.
fn put(v: u32, n: usize, big_endian: bool, dst: &mut [u8]) {
    for (k, b) in dst[..n].iter_mut().enumerate() {
        let shift = if big_endian { 8 * (n - 1 - k) } else { 8 * k };
        *b = (v >> shift) as u8;
    }
}

/// Reads `n` bytes from `src` in the given byte order.
fn get(src: &[u8], n: usize, big_endian: bool) -> u32 {
    src[..n].iter().enumerate().fold(0u32, |acc, (k, &b)| {
        let shift = if big_endian { 8 * (n - 1 - k) } else { 8 * k };
        acc | (b as u32) << shift
    })
}

/// Sign-extends the low `bits` bits of `v`.
fn sign_extend(v: u32, bits: u32) -> i32 {
    ((v << (32 - bits)) as i32) >> (32 - bits)
}

/// Encodes one float sample into `dst` (at least `format.bytes()` long).
/// Real-time safe.
pub fn encode_sample(e: Encoding, x: f32, dst: &mut [u8]) {
    let n = e.format.bytes();
    let raw = match e.format {
        SampleFormat::F32 => x.to_bits(),
        f => float_to_int(x, f.bits()) as u32,
    };
    let raw = if e.format.bits() == 24 {
        raw & 0x00ff_ffff
    } else {
        raw
    };
    put(raw, n, e.big_endian, dst);
}

/// Decodes one sample from `src` (at least `format.bytes()` long).
/// Real-time safe.
pub fn decode_sample(e: Encoding, src: &[u8]) -> f32 {
    let raw = get(src, e.format.bytes(), e.big_endian);
    match e.format {
        SampleFormat::F32 => f32::from_bits(raw),
        f => int_to_float(sign_extend(raw, f.bits()), f.bits()),
    }
}

/// Encodes `src` into the strided channel view `dst` (sample `i` at byte
/// `i * stride`). Real-time safe.
pub fn encode(e: Encoding, src: &[f32], dst: &mut [u8], stride: usize) {
    for (i, &x) in src.iter().enumerate() {
        encode_sample(e, x, &mut dst[i * stride..]);
    }
}

/// Decodes the strided channel view `src` into `dst`. Real-time safe.
pub fn decode(e: Encoding, src: &[u8], stride: usize, dst: &mut [f32]) {
    for (i, y) in dst.iter_mut().enumerate() {
        *y = decode_sample(e, &src[i * stride..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const ALL: [SampleFormat; 5] = [
        SampleFormat::F32,
        SampleFormat::S32,
        SampleFormat::S24In32,
        SampleFormat::S24Packed,
        SampleFormat::S16,
    ];

    fn enc(format: SampleFormat, big_endian: bool) -> Encoding {
        Encoding { format, big_endian }
    }

    #[test]
    fn known_bit_patterns() {
        let mut b = [0u8; 4];
        encode_sample(enc(SampleFormat::S16, false), 0.5, &mut b);
        assert_eq!(&b[..2], &[0x00, 0x40]);
        encode_sample(enc(SampleFormat::S16, true), 0.5, &mut b);
        assert_eq!(&b[..2], &[0x40, 0x00]);
        encode_sample(enc(SampleFormat::S24Packed, false), -1.0, &mut b);
        assert_eq!(&b[..3], &[0x00, 0x00, 0x80], "S24_3LE -2^23");
        encode_sample(enc(SampleFormat::S24Packed, true), 1.0 / 8388608.0, &mut b);
        assert_eq!(&b[..3], &[0x00, 0x00, 0x01], "S24_3BE one LSB");
        b = [0xff; 4];
        encode_sample(enc(SampleFormat::S24In32, false), -1.0 / 8388608.0, &mut b);
        assert_eq!(b, [0xff, 0xff, 0xff, 0x00], "S24 keeps the top byte clear");
        assert_eq!(
            decode_sample(enc(SampleFormat::S24In32, false), &[0xff, 0xff, 0xff, 0x00]),
            -1.0 / 8388608.0
        );
        encode_sample(enc(SampleFormat::F32, true), 1.0, &mut b);
        assert_eq!(b, 1.0f32.to_be_bytes());
    }

    #[test]
    fn clipping() {
        for f in ALL.into_iter().filter(|f| *f != SampleFormat::F32) {
            let bits = f.bits();
            let max = ((1u64 << (bits - 1)) - 1) as i32;
            assert_eq!(float_to_int(1.0, bits), max, "{f:?}");
            assert_eq!(float_to_int(7.5, bits), max, "{f:?}");
            assert_eq!(float_to_int(-3.0, bits), -max - 1, "{f:?}");
            assert_eq!(float_to_int(f32::NAN, bits), 0, "{f:?}");
            let mut b = [0u8; 4];
            encode_sample(enc(f, false), f32::INFINITY, &mut b);
            assert_eq!(decode_sample(enc(f, false), &b), int_to_float(max, bits));
        }
    }

    #[test]
    fn interleaved_strides() {
        let e = enc(SampleFormat::S24Packed, false);
        let mut buf = [0u8; 3 * 2 * 4];
        let left = [0.25f32, -0.25, 0.5, -0.5];
        let right = [0.125f32, -0.125, 0.75, -0.75];
        encode(e, &left, &mut buf, 6);
        encode(e, &right, &mut buf[3..], 6);
        let (mut l, mut r) = ([0f32; 4], [0f32; 4]);
        decode(e, &buf, 6, &mut l);
        decode(e, &buf[3..], 6, &mut r);
        assert_eq!((l, r), (left, right));
    }

    proptest! {
        #[test]
        fn integer_round_trips(v in any::<i32>(), fi in 1usize..5, be in any::<bool>()) {
            let f = ALL[fi];
            let bits = f.bits();
            // The integers the format holds (S32: the 24 bits an f32 keeps).
            let v = if bits == 32 { v & !0xff } else { v >> (32 - bits) };
            let e = enc(f, be);
            let mut b = [0u8; 4];
            encode_sample(e, int_to_float(v, bits), &mut b);
            let x = decode_sample(e, &b);
            prop_assert_eq!(float_to_int(x, bits), v);
        }

        #[test]
        fn float_round_trips(x in -1.0f32..1.0, be in any::<bool>()) {
            let mut b = [0u8; 4];
            encode_sample(enc(SampleFormat::F32, be), x, &mut b);
            prop_assert_eq!(decode_sample(enc(SampleFormat::F32, be), &b), x);
            for f in [SampleFormat::S16, SampleFormat::S24Packed, SampleFormat::S24In32, SampleFormat::S32] {
                encode_sample(enc(f, be), x, &mut b);
                let y = decode_sample(enc(f, be), &b);
                let lsb = 1.0 / (1u64 << (f.bits() - 1)) as f32;
                prop_assert!((x - y).abs() <= lsb, "{:?}: {} -> {}", f, x, y);
            }
        }

        #[test]
        fn endianness_mirrors(x in -1.0f32..1.0, fi in 0usize..5) {
            let f = ALL[fi];
            let (mut le, mut be) = ([0u8; 4], [0u8; 4]);
            encode_sample(enc(f, false), x, &mut le);
            encode_sample(enc(f, true), x, &mut be);
            let n = f.bytes();
            be[..n].reverse();
            prop_assert_eq!(&le[..n], &be[..n]);
        }
    }
}
