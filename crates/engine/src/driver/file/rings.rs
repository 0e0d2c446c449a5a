//! The file driver's buffers on the driver thread: this cycle's capture and
//! playback per channel, and the driver's ends of the input and output
//! rings (interleaved floats) with the helper threads' progress words.
//!
//! Everything is allocated in [`Rings::new`]; the rest only copies.
//!
//! Runs on the driver thread (real-time).

use super::io::Progress;
use crate::clock::Clock;
use resound_shm::sync::{futex, Ordering};
use std::sync::Arc;

/// How long one wait for a helper thread lasts before its state is checked again.
const WAIT_SLICE_NS: u64 = 100_000_000;

/// The driver thread's buffers and ring ends.
pub(super) struct Rings {
    /// This cycle's capture, per capture channel.
    cap: Vec<Vec<f32>>,
    /// This cycle's playback, per output channel.
    out: Vec<Vec<f32>>,
    in_rx: rtrb::Consumer<f32>,
    /// Dropped at stop: the writer then drains and finalises.
    out_tx: Option<rtrb::Producer<f32>>,
    /// Channels of the input file (0: no input).
    in_channels: usize,
    pub(super) in_progress: Arc<Progress>,
    pub(super) out_progress: Arc<Progress>,
}

impl Rings {
    /// Buffers of `max_frames` and rings of `ring_frames` frames. Returns
    /// the helper threads' ends too: the input's producer, the output's consumer.
    pub(super) fn new(
        capture: usize,
        in_channels: usize,
        out_channels: usize,
        max_frames: usize,
        ring_frames: usize,
    ) -> (Rings, rtrb::Producer<f32>, rtrb::Consumer<f32>) {
        let (in_tx, in_rx) = rtrb::RingBuffer::new((ring_frames * in_channels).max(1));
        let (out_tx, out_rx) = rtrb::RingBuffer::new(ring_frames * out_channels);
        let rings = Rings {
            cap: vec![vec![0.0; max_frames]; capture],
            out: vec![vec![0.0; max_frames]; out_channels],
            in_rx,
            out_tx: Some(out_tx),
            in_channels,
            in_progress: Arc::default(),
            out_progress: Arc::default(),
        };
        (rings, in_tx, out_rx)
    }

    /// Silences this cycle's first `frames` capture frames. Real-time safe.
    pub(super) fn clear_capture(&mut self, frames: usize) {
        for c in &mut self.cap {
            c[..frames].fill(0.0);
        }
    }

    /// Silences this cycle's playback (channels nobody feeds stay silent).
    /// Real-time safe.
    pub(super) fn clear_playback(&mut self) {
        for o in &mut self.out {
            o.fill(0.0);
        }
    }

    /// Copies this cycle's capture of `channel` into `dst`. Real-time safe.
    pub(super) fn capture(&self, channel: usize, dst: &mut [f32]) {
        match self.cap.get(channel) {
            Some(c) => dst.copy_from_slice(&c[..dst.len()]),
            None => dst.fill(0.0),
        }
    }

    /// Keeps `src` as this cycle's playback of `channel`. Real-time safe.
    pub(super) fn playback(&mut self, channel: usize, src: &[f32]) {
        if let Some(o) = self.out.get_mut(channel) {
            o[..src.len()].copy_from_slice(src);
        }
    }

    /// Moves `frames` input frames from the ring into the capture buffers
    /// at `offset`, waiting for the reader if it is behind; frames the file
    /// does not have (it ended early) stay silent. Real-time safe.
    pub(super) fn pull_input(&mut self, clock: &dyn Clock, offset: usize, frames: usize) {
        let ch = self.in_channels;
        let need = frames * ch;
        if need == 0 {
            return;
        }
        let p = self.in_progress.clone();
        wait_until(clock, &p, || self.in_rx.slots() >= need);
        let avail = self.in_rx.slots().min(need) / ch * ch;
        let Ok(chunk) = self.in_rx.read_chunk(avail) else {
            return;
        };
        let (a, b) = chunk.as_slices();
        for (i, &x) in a.iter().chain(b).enumerate() {
            if let Some(c) = self.cap.get_mut(i % ch) {
                c[offset + i / ch] = x;
            }
        }
        chunk.commit_all();
    }

    /// Interleaves the first `frames` of this cycle's playback into the
    /// output ring, waiting for the writer if the ring is full. Real-time safe.
    pub(super) fn push_output(&mut self, clock: &dyn Clock, frames: usize) {
        let ch = self.out.len();
        let need = frames * ch;
        let Some(tx) = self.out_tx.as_mut() else {
            return;
        };
        let p = self.out_progress.clone();
        wait_until(clock, &p, || tx.slots() >= need);
        let Ok(mut chunk) = tx.write_chunk(need) else {
            // The writer is gone (it failed); its error is the outcome.
            return;
        };
        let (a, b) = chunk.as_mut_slices();
        let split = a.len();
        for i in 0..need {
            let x = self.out[i % ch][i / ch];
            if i < split {
                a[i] = x;
            } else {
                b[i - split] = x;
            }
        }
        chunk.commit_all();
    }

    /// Drops the driver's end of the output ring (not real-time).
    pub(super) fn close_output(&mut self) {
        self.out_tx = None;
    }
}

/// Waits on a helper thread's progress word until `ready` holds or the
/// thread has finished. Real-time safe (it blocks only on that thread).
fn wait_until(clock: &dyn Clock, p: &Progress, mut ready: impl FnMut() -> bool) {
    loop {
        let seen = p.word.load(Ordering::Acquire);
        if ready() || p.done.load(Ordering::Acquire) {
            return;
        }
        let deadline = clock.now_ns() + WAIT_SLICE_NS;
        // Changed or timed out: either way, look again.
        let _: futex::Wait = clock.wait_changed(&p.word, seen, Some(deadline));
    }
}
