//! The dummy driver: no hardware, cycles paced on the engine's [`Clock`]
//! at absolute deadlines, with an optional loopback (playback comes back as
//! capture).
//!
//! Model of a card with one period of output and one of input buffering:
//! what the driver writes during cycle k is played during period k+1, and
//! what is played during a period comes back (with `--loopback`) as capture
//! at the start of the next. So a signal written to playback in sync mode is
//! captured two cycles later, in async mode three.
//!
//! Runs on the driver thread (real-time); buffers are allocated in `new`.

use super::pace::Pacer;
use super::{Driver, Fault, Latencies, Period, Wake};
use crate::clock::Clock;

/// The dummy device and its pacing.
pub struct DummyDriver {
    loopback: bool,
    /// Written by the driver during the current cycle.
    out: Vec<Vec<f32>>,
    /// Being played this period.
    playing: Vec<Vec<f32>>,
    /// Recorded last period, delivered as capture now.
    captured: Vec<Vec<f32>>,
    /// Cycle starts on the clock.
    pacer: Pacer,
    /// The most frames ever written to a channel: beyond them every buffer
    /// is still silent, so the boundary clears only this many (not the
    /// whole `max_frames`, tens of kilobytes per cycle before the graph is
    /// woken).
    dirty: usize,
}

impl DummyDriver {
    /// A device with `playback` output channels of `max_frames`.
    pub fn new(playback: usize, max_frames: usize, loopback: bool) -> Self {
        let ch = || vec![vec![0.0f32; max_frames]; playback];
        DummyDriver {
            loopback,
            out: ch(),
            playing: ch(),
            captured: ch(),
            pacer: Pacer::default(),
            dirty: 0,
        }
    }

    /// Period boundary: what was played is recorded, what was written starts
    /// playing. Real-time safe.
    fn boundary(&mut self) {
        if self.loopback {
            std::mem::swap(&mut self.captured, &mut self.playing);
            std::mem::swap(&mut self.playing, &mut self.out);
        }
        let dirty = self.dirty;
        for b in &mut self.out {
            b[..dirty].fill(0.0);
        }
    }
}

impl Driver for DummyDriver {
    fn open(&mut self, _max_frames: usize) -> Result<Latencies, Fault> {
        Ok(self.latencies())
    }

    fn start(&mut self, now_ns: u64) -> Result<(), Fault> {
        self.pacer.start(now_ns);
        Ok(())
    }

    fn stop(&mut self) {}

    /// Paces the cycle, then crosses the device's period boundary. Real-time safe.
    fn wait(&mut self, clock: &dyn Clock, period: Period) -> Result<Wake, Fault> {
        let w = self.pacer.pace(clock, period);
        self.boundary();
        Ok(w)
    }

    /// Loopback: last period's playback; else silence. Real-time safe.
    fn capture(&mut self, channel: usize, dst: &mut [f32]) {
        match self.captured.get(channel) {
            Some(c) if self.loopback => dst.copy_from_slice(&c[..dst.len()]),
            _ => dst.fill(0.0),
        }
    }

    /// Keeps the channel's output to be played next period. Real-time safe.
    fn playback(&mut self, channel: usize, src: &[f32]) {
        if let Some(o) = self.out.get_mut(channel) {
            o[..src.len()].copy_from_slice(src);
            self.dirty = self.dirty.max(src.len());
        }
    }

    /// None beyond the period. Real-time safe.
    fn latencies(&self) -> Latencies {
        Latencies::default()
    }

    /// Nothing to recover (the dummy never faults). Real-time safe.
    fn recover(&mut self, _fault: Fault) -> Result<(), Fault> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_returns_playback_and_then_silence() {
        let mut d = DummyDriver::new(1, 64, true);
        d.playback(0, &[1.0; 8]);
        d.boundary();
        d.boundary();
        let mut got = [0.5f32; 16];
        d.capture(0, &mut got);
        assert_eq!(&got[..8], &[1.0; 8]);
        assert_eq!(&got[8..], &[0.0; 8]);
        // Nothing written since: every buffer comes round cleared.
        for _ in 0..3 {
            d.boundary();
            d.capture(0, &mut got);
            assert_eq!(got, [0.0; 16]);
        }
    }
}
