//! One open PCM direction ([`Stream`]): its period-sized scratch buffer in
//! the device's format (allocated at open), moving a whole period through
//! alsa-lib's read/write calls (interleaved or one buffer per channel) or
//! its mmap calls, and the strided per-channel views the converter works on.
//!
//! With mmap access the converter works on the device's own buffer: a
//! capture period is taken with `snd_pcm_mmap_begin`/`commit` and decoded
//! from the mapped area in the same cycle (the device fills that part of
//! its buffer again only after going round the other periods of it, and
//! alsa-lib's user-space PCMs only at the next `begin`); a playback period
//! is encoded into the mapped area found by a `begin` that commits nothing,
//! and committed by [`Stream::write_period`]. Where the period is not one
//! contiguous run of the mapped buffer, the scratch is used and copied.
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

/// The period's place in the device's mapped buffer (mmap access), or null.
struct Mapped(*mut u8);

// SAFETY: the pointer points into the mmap area of the owning Stream's PCM,
// which moves together with this value; it is only used on the thread that
// owns the Stream.
unsafe impl Send for Mapped {}

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
    /// mmap: this period's place in the device's buffer (null: the scratch).
    mapped: Mapped,
}

impl Stream {
    /// Wraps an open PCM; allocates the scratch for one period of up to
    /// `max_period` frames (so that a period change allocates nothing).
    pub fn new(pcm: PCM, neg: Negotiated, period: usize, max_period: usize) -> Stream {
        let bytes = neg.encoding.format.bytes();
        let frames = period.max(max_period);
        let scratch = vec![0u8; frames * neg.device_channels as usize * bytes];
        Stream {
            pcm,
            neg,
            period,
            scratch,
            ptrs: ChannelPtrs(vec![std::ptr::null_mut(); neg.device_channels as usize]),
            mapped: Mapped(std::ptr::null_mut()),
        }
    }

    /// Runs with periods of `frames` from now on (the device was configured
    /// for them); false if the scratch is too small. Real-time safe.
    pub fn set_period(&mut self, frames: usize) -> bool {
        let bytes = self.neg.encoding.format.bytes() * self.neg.device_channels as usize;
        if frames * bytes > self.scratch.len() {
            return false;
        }
        self.period = frames;
        self.unmap();
        true
    }

    /// Bytes of one period.
    fn period_bytes(&self) -> usize {
        self.period * self.neg.encoding.format.bytes() * self.neg.device_channels as usize
    }

    /// The period's bytes: the mapped area (mmap) or the scratch.
    fn data(&self) -> &[u8] {
        if self.mapped.0.is_null() {
            return &self.scratch[..self.period_bytes()];
        }
        // SAFETY: `mapped` was set from a slice of the device's mmap area of
        // at least period_bytes() bytes that stays mapped while the PCM is
        // configured (see `map_period`).
        unsafe { std::slice::from_raw_parts(self.mapped.0, self.period_bytes()) }
    }

    /// The period's bytes, writable: the mapped area (mmap) or the scratch.
    fn data_mut(&mut self) -> &mut [u8] {
        if self.mapped.0.is_null() {
            let n = self.period_bytes();
            return &mut self.scratch[..n];
        }
        // SAFETY: as in `data`; &mut self: no other view of it exists.
        unsafe { std::slice::from_raw_parts_mut(self.mapped.0, self.period_bytes()) }
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
        convert::decode(self.encoding(), &self.data()[off..], stride, &mut dst[..n]);
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
        convert::encode(e, &src[..n], &mut self.data_mut()[off..], stride);
    }

    /// Fills the period to write with silence (all formats: zero bytes).
    /// Real-time safe.
    pub fn silence(&mut self) {
        self.data_mut().fill(0);
    }

    /// Points the per-channel pointers at frame `done` of each channel.
    fn aim(&mut self, done: usize) {
        let b = self.neg.encoding.format.bytes();
        let base = self.scratch.as_mut_ptr();
        for (c, p) in self.ptrs.0.iter_mut().enumerate() {
            // SAFETY: c < device_channels and done < period, so the offset
            // stays inside the scratch block of device_channels * period * b
            // (the scratch holds at least that: see `new` and `set_period`).
            *p = unsafe { base.add((c * self.period + done) * b) };
        }
    }

    /// Reads one period: into the scratch, or (mmap) takes it in the
    /// device's buffer. Real-time safe.
    pub fn read_period(&mut self) -> alsa::Result<()> {
        if self.neg.mmap {
            return self.mmap_read();
        }
        let frame = self.neg.encoding.format.bytes() * self.neg.device_channels as usize;
        let mut done = 0;
        while done < self.period {
            let n = if self.neg.interleaved {
                let io = self.pcm.io_bytes();
                io.readi(&mut self.scratch[done * frame..self.period * frame])?
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

    /// Writes the period (the scratch, or with mmap the period prepared
    /// in the device's buffer). Real-time safe.
    pub fn write_period(&mut self) -> alsa::Result<()> {
        if self.neg.mmap {
            return self.mmap_write();
        }
        let frame = self.neg.encoding.format.bytes() * self.neg.device_channels as usize;
        let mut done = 0;
        while done < self.period {
            let n = if self.neg.interleaved {
                let io = self.pcm.io_bytes();
                io.writei(&self.scratch[done * frame..self.period * frame])?
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

    /// mmap capture: commits the next period and decodes from the mapped
    /// area (or copies it into the scratch where it wraps). Real-time safe.
    fn mmap_read(&mut self) -> alsa::Result<()> {
        self.mapped = Mapped(std::ptr::null_mut());
        let want = self.period_bytes();
        let frame = want / self.period;
        let mut done = 0;
        while done < want {
            let io = self.pcm.io_bytes();
            let scratch = &mut self.scratch;
            let mapped = &mut self.mapped;
            let n = io.mmap((want - done) / frame, |area| {
                if done == 0 && area.len() >= want {
                    *mapped = Mapped(area.as_mut_ptr());
                    return want / frame;
                }
                let n = area.len().min(want - done);
                scratch[done..done + n].copy_from_slice(&area[..n]);
                n / frame
            })?;
            if n == 0 {
                self.mapped = Mapped(std::ptr::null_mut());
                return Err(alsa::Error::new("snd_pcm_mmap_commit", -libc::EAGAIN));
            }
            done += n * frame;
        }
        Ok(())
    }

    /// mmap playback: finds where the next period goes in the device's
    /// buffer, committing nothing yet, so the cycle encodes into it (else
    /// into the scratch). Call once the device has a period of room; a
    /// no-op without mmap. Real-time safe.
    pub fn map_period(&mut self) -> alsa::Result<()> {
        if !self.neg.mmap || !self.mapped.0.is_null() {
            return Ok(());
        }
        let want = self.period_bytes();
        {
            let io = self.pcm.io_bytes();
            let mapped = &mut self.mapped;
            io.mmap(self.period, |area| {
                if area.len() >= want {
                    *mapped = Mapped(area.as_mut_ptr());
                }
                0
            })?;
        }
        self.silence();
        Ok(())
    }

    /// mmap playback: commits the period encoded in the mapped area, or
    /// copies the scratch into the device's buffer. Real-time safe.
    fn mmap_write(&mut self) -> alsa::Result<()> {
        let want = self.period_bytes();
        let frame = want / self.period;
        if !self.mapped.0.is_null() {
            let at = std::mem::replace(&mut self.mapped, Mapped(std::ptr::null_mut()));
            let io = self.pcm.io_bytes();
            let n = io.mmap(self.period, |area| {
                if area.as_mut_ptr() == at.0 && area.len() >= want {
                    want / frame
                } else {
                    0 // the buffer moved (a restart): the period is lost
                }
            })?;
            return match n {
                0 => Err(alsa::Error::new("snd_pcm_mmap_commit", -libc::EPIPE)),
                _ => Ok(()),
            };
        }
        let mut done = 0;
        while done < want {
            let io = self.pcm.io_bytes();
            let scratch = &self.scratch;
            let n = io.mmap((want - done) / frame, |area| {
                let n = area.len().min(want - done);
                area[..n].copy_from_slice(&scratch[done..done + n]);
                n / frame
            })?;
            if n == 0 {
                return Err(alsa::Error::new("snd_pcm_mmap_commit", -libc::EAGAIN));
            }
            done += n * frame;
        }
        Ok(())
    }

    /// Forgets the mapped period (the stream restarts: its buffer is
    /// prepared again). Real-time safe.
    pub fn unmap(&mut self) {
        self.mapped = Mapped(std::ptr::null_mut());
    }

    /// Frames the device can take or give now. Real-time safe.
    pub fn avail(&self) -> alsa::Result<usize> {
        self.pcm.avail_update().map(|f| f.max(0) as usize)
    }
}
