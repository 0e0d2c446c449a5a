//! One open PCM direction ([`Stream`]): its period-sized scratch buffer in
//! the device's format (allocated at open), reading and writing a whole
//! period through alsa-lib's read/write calls (interleaved or one buffer
//! per channel), and the strided per-channel views the converter works on.
//!
//! Runs on the driver thread (real-time) once opened.

use super::convert::{self, Encoding};
use super::params::Negotiated;
use alsa::pcm::PCM;

/// Per-channel pointers into the scratch buffer for `snd_pcm_readn/writen`.
struct ChannelPtrs(Vec<*mut u8>);

// SAFETY: the pointers point into the heap block of the owning Stream's
// scratch Vec, which moves (and is only used) together with this value;
// they are only dereferenced by alsa-lib on the thread that owns the Stream.
unsafe impl Send for ChannelPtrs {}

/// An open, configured PCM and its period scratch buffer.
pub struct Stream {
    /// The PCM.
    pub pcm: PCM,
    /// What was agreed with the device.
    pub neg: Negotiated,
    /// Frames per period.
    pub period: usize,
    scratch: Vec<u8>,
    ptrs: ChannelPtrs,
}

impl Stream {
    /// Wraps an open PCM; allocates the scratch for one period.
    pub fn new(pcm: PCM, neg: Negotiated, period: usize) -> Stream {
        let bytes = neg.encoding.format.bytes();
        let scratch = vec![0u8; period * neg.device_channels as usize * bytes];
        Stream {
            pcm,
            neg,
            period,
            scratch,
            ptrs: ChannelPtrs(vec![std::ptr::null_mut(); neg.device_channels as usize]),
        }
    }

    fn encoding(&self) -> Encoding {
        self.neg.encoding
    }

    /// Byte offset and stride of `channel` in the scratch buffer.
    fn layout(&self, channel: usize) -> (usize, usize) {
        let b = self.neg.encoding.format.bytes();
        if self.neg.interleaved {
            (channel * b, b * self.neg.device_channels as usize)
        } else {
            (channel * b * self.period, b)
        }
    }

    /// Decodes `channel` of the period read last into `dst`. Real-time safe.
    pub fn decode(&self, channel: usize, dst: &mut [f32]) {
        if channel >= self.neg.channels as usize {
            dst.fill(0.0);
            return;
        }
        let n = dst.len().min(self.period);
        let (off, stride) = self.layout(channel);
        convert::decode(self.encoding(), &self.scratch[off..], stride, &mut dst[..n]);
        dst[n..].fill(0.0);
    }

    /// Encodes `src` as `channel` of the period to write. Real-time safe.
    pub fn encode(&mut self, channel: usize, src: &[f32]) {
        if channel >= self.neg.channels as usize {
            return;
        }
        let n = src.len().min(self.period);
        let (off, stride) = self.layout(channel);
        let e = self.encoding();
        convert::encode(e, &src[..n], &mut self.scratch[off..], stride);
    }

    /// Fills the scratch with silence (all formats: zero bytes). Real-time safe.
    pub fn silence(&mut self) {
        self.scratch.fill(0);
    }

    /// Points the per-channel pointers at frame `done` of each channel.
    fn aim(&mut self, done: usize) {
        let b = self.neg.encoding.format.bytes();
        let base = self.scratch.as_mut_ptr();
        for (c, p) in self.ptrs.0.iter_mut().enumerate() {
            // SAFETY: c < device_channels and done < period, so the offset
            // stays inside the scratch block of device_channels * period * b.
            *p = unsafe { base.add((c * self.period + done) * b) };
        }
    }

    /// Reads one period into the scratch. Real-time safe.
    pub fn read_period(&mut self) -> alsa::Result<()> {
        let frame = self.neg.encoding.format.bytes() * self.neg.device_channels as usize;
        let mut done = 0;
        while done < self.period {
            let n = if self.neg.interleaved {
                let io = self.pcm.io_bytes();
                io.readi(&mut self.scratch[done * frame..])?
            } else {
                self.aim(done);
                let io = self.pcm.io_bytes();
                // SAFETY: one pointer per device channel, each with room for
                // period - done samples (see `aim`).
                unsafe { io.readn(&mut self.ptrs.0, self.period - done)? }
            };
            if n == 0 {
                return Err(alsa::Error::new("snd_pcm_read", -libc::EAGAIN));
            }
            done += n;
        }
        Ok(())
    }

    /// Writes the scratch as one period. Real-time safe.
    pub fn write_period(&mut self) -> alsa::Result<()> {
        let frame = self.neg.encoding.format.bytes() * self.neg.device_channels as usize;
        let mut done = 0;
        while done < self.period {
            let n = if self.neg.interleaved {
                let io = self.pcm.io_bytes();
                io.writei(&self.scratch[done * frame..])?
            } else {
                self.aim(done);
                let io = self.pcm.io_bytes();
                let ptrs: &[*const u8] = {
                    // SAFETY: *mut u8 and *const u8 have the same layout.
                    unsafe {
                        std::slice::from_raw_parts(self.ptrs.0.as_ptr().cast(), self.ptrs.0.len())
                    }
                };
                // SAFETY: one pointer per device channel, each with
                // period - done samples after it (see `aim`).
                unsafe { io.writen(ptrs, self.period - done)? }
            };
            if n == 0 {
                return Err(alsa::Error::new("snd_pcm_write", -libc::EAGAIN));
            }
            done += n;
        }
        Ok(())
    }

    /// Frames the device can take or give now. Real-time safe.
    pub fn avail(&self) -> alsa::Result<usize> {
        self.pcm.avail_update().map(|f| f.max(0) as usize)
    }
}
