//! Faults of the device and the way back: mapping alsa-lib errors to
//! [`Fault`]s, restarting after an xrun (prepare, prefill, start), resuming
//! after a suspend, and a lost device: cycles go on on the engine's clock
//! at the same rate and period while the device is retried every second.
//!
//! Runs on the driver thread; restarting is real-time safe (no allocation
//! in this crate; alsa-lib's prepare is a system call), reopening a lost
//! device is not (it happens once a second at most, while there is no
//! device to be late for).

use super::io::Stream;
use super::params::open_pcm;
use super::{AlsaConfig, AlsaDriver, Lost};
use crate::clock::Clock;
use crate::driver::pace::Pacer;
use crate::driver::{Fault, Period, Wake};
use alsa::pcm::State;
use alsa::Direction;

/// How often a lost device is retried (ns).
pub const RETRY_NS: u64 = 1_000_000_000;

/// The fault an alsa-lib error means. Real-time safe.
pub fn classify(e: &alsa::Error) -> Fault {
    match e.errno().abs() {
        libc::EPIPE => Fault::Xrun,
        libc::ESTRPIPE => Fault::Suspended,
        libc::ENODEV | libc::EBADFD | libc::ENXIO | libc::EIO => Fault::DeviceLost,
        libc::EAGAIN => Fault::Xrun,
        n => Fault::Os(n),
    }
}

/// Opens and negotiates both directions (not real-time).
pub fn open_streams(cfg: &AlsaConfig) -> Result<(Option<Stream>, Option<Stream>), String> {
    let period = cfg.period as usize;
    let open = |name: &Option<String>, dir| -> Result<Option<Stream>, String> {
        name.as_deref()
            .map(|n| open_pcm(n, dir, cfg).map(|(pcm, neg)| Stream::new(pcm, neg, period)))
            .transpose()
    };
    let capture = open(&cfg.capture, Direction::Capture)?;
    let playback = open(&cfg.playback, Direction::Playback)?;
    Ok((capture, playback))
}

/// Links capture to playback so they start and stop together (when the
/// PCMs support it; else they are started one after the other).
pub fn link(capture: Option<&Stream>, playback: Option<&Stream>) -> bool {
    match (capture, playback) {
        (Some(c), Some(p)) => c.pcm.link(&p.pcm).is_ok(),
        _ => false,
    }
}

/// Whether `s` has a period to give or take; the device's own errors (an
/// xrun, a suspend, a vanished device) come back as faults. Real-time safe.
pub fn ready(s: &Stream, period: usize, soft: bool) -> Result<bool, Fault> {
    match s.pcm.state() {
        State::XRun if !soft => return Err(Fault::Xrun),
        State::Suspended => return Err(Fault::Suspended),
        State::Disconnected => return Err(Fault::DeviceLost),
        _ => {}
    }
    match s.avail() {
        Ok(n) => Ok(n >= period),
        Err(e) => match classify(&e) {
            Fault::Xrun if soft => Ok(false),
            f => Err(f),
        },
    }
}

/// Prepares (unless `prepared`), prefills playback with `periods` periods
/// of silence and starts the stream. Real-time safe.
pub fn restart(
    capture: Option<&mut Stream>,
    playback: Option<&mut Stream>,
    periods: u32,
    prepare: bool,
) -> alsa::Result<()> {
    if prepare {
        for s in [&capture, &playback].into_iter().flatten() {
            let _ = s.pcm.drop();
            s.pcm.prepare()?;
        }
    }
    if let Some(p) = playback {
        p.silence();
        for _ in 0..periods {
            p.write_period()?;
        }
        p.pcm.start()?;
    }
    if let Some(c) = capture {
        if c.pcm.state() != State::Running {
            c.pcm.start()?;
        }
    }
    Ok(())
}

impl AlsaDriver {
    /// Brings the device back after `fault`; a device that cannot be
    /// restarted is treated as lost.
    pub(super) fn recover_from(&mut self, fault: Fault) {
        self.flushed = true;
        let periods = self.cfg.periods;
        let ok = match fault {
            Fault::Suspended => {
                let resumed = [&self.capture, &self.playback]
                    .into_iter()
                    .flatten()
                    .all(|s| s.pcm.resume().is_ok());
                resumed
                    || restart(self.capture.as_mut(), self.playback.as_mut(), periods, true).is_ok()
            }
            Fault::DeviceLost => false,
            _ => restart(self.capture.as_mut(), self.playback.as_mut(), periods, true).is_ok(),
        };
        if !ok && self.lost.is_none() {
            self.lose();
        }
    }

    /// The device is gone: closes it and paces on the clock from now on.
    fn lose(&mut self) {
        self.capture = None;
        self.playback = None;
        self.fds.clear();
        // Timed from the first cycle on the clock (`wait_lost`).
        self.lost = Some(Lost::default());
    }

    /// A cycle without the device: paced on the engine's clock like the
    /// dummy driver's ([`Pacer`], at the device's rate and period), and the
    /// device is tried again once a second.
    pub(super) fn wait_lost(&mut self, clock: &dyn Clock, p: Period) -> Wake {
        let mut lost = self.lost.take().unwrap_or_default();
        let pacer = lost.pacer.get_or_insert_with(|| {
            let now = clock.now_ns();
            lost.retry = now + RETRY_NS;
            let mut pacer = Pacer::default();
            pacer.start(now);
            pacer
        });
        let wake = pacer.pace(
            clock,
            Period {
                frames: self.cfg.period,
                rate: self.cfg.rate,
                freewheel: false,
            },
        );
        let retry = lost.retry;
        self.lost = Some(lost);
        if wake.awake_ns >= retry && !p.freewheel {
            self.try_reopen(wake.awake_ns);
        }
        wake
    }

    /// Reopens the device; on success the next cycle runs on it again.
    fn try_reopen(&mut self, now: u64) {
        let Ok((mut capture, mut playback)) = open_streams(&self.cfg) else {
            if let Some(l) = self.lost.as_mut() {
                l.retry = now + RETRY_NS;
            }
            return;
        };
        let same = capture.as_ref().map_or(0, |s| s.neg.channels) == self.capture_channels
            && playback.as_ref().map_or(0, |s| s.neg.channels) == self.playback_channels;
        link(capture.as_ref(), playback.as_ref());
        let started =
            same && restart(capture.as_mut(), playback.as_mut(), self.cfg.periods, false).is_ok();
        if !started {
            if let Some(l) = self.lost.as_mut() {
                l.retry = now + RETRY_NS;
            }
            return;
        }
        self.capture = capture;
        self.playback = playback;
        self.refill_fds();
        self.lost = None;
        self.flushed = true;
        self.resumed = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SimClock;
    use crate::driver::Driver;

    /// alsa-lib's `null` PCM (defined by its own configuration) both ways.
    fn null_driver() -> AlsaDriver {
        AlsaDriver::open(AlsaConfig {
            capture: Some("null".into()),
            playback: Some("null".into()),
            rate: 48000,
            period: 256,
            periods: 2,
            in_channels: 2,
            out_channels: 2,
            in_latency: 0,
            out_latency: 0,
            soft: false,
            shorts: false,
            format: None,
        })
        .expect("alsa-lib's null PCM")
    }

    const PERIOD: Period = Period {
        frames: 256,
        rate: 48000,
        freewheel: false,
    };

    #[test]
    fn xrun_and_suspend_restart_the_device() {
        let mut d = null_driver();
        let clock = SimClock::default();
        d.start(clock.now_ns()).unwrap();
        d.wait(&clock, PERIOD).unwrap();
        for f in [Fault::Xrun, Fault::Suspended] {
            d.recover(f).unwrap();
            assert!(d.lost.is_none(), "{f:?} keeps the device");
            d.wait(&clock, PERIOD).unwrap();
        }
    }

    #[test]
    fn a_lost_device_runs_on_the_clock_and_is_retried_every_second() {
        let mut d = null_driver();
        let clock = SimClock::new(1_000_000_000);
        d.start(clock.now_ns()).unwrap();
        d.recover(Fault::DeviceLost).unwrap();
        assert!(d.capture.is_none() && d.lost.is_some());
        // The device cannot be found meanwhile.
        d.cfg.capture = Some("resound_no_such_pcm".into());
        let t0 = clock.now_ns();
        let period = frames_ns(256);
        let mut x = [1.0f32; 256];
        for k in 0..400u64 {
            let w = d.wait(&clock, PERIOD).unwrap();
            assert_eq!(
                w.start_ns,
                t0 + k * period,
                "paced at the period on the clock"
            );
            d.capture(0, &mut x);
            assert_eq!(x, [0.0; 256], "silence while lost");
            assert!(!d.take_resumed());
        }
        assert!(
            d.lost.is_some(),
            "still lost after {} s",
            400 * period / 1_000_000_000
        );
        // Back: resumed on the next retry (at most a second later).
        d.cfg.capture = Some("null".into());
        let mut resumed_at = None;
        for k in 0..300u64 {
            d.wait(&clock, PERIOD).unwrap();
            if d.take_resumed() {
                resumed_at = Some(k);
                break;
            }
        }
        let k = resumed_at.expect("resumed within a second");
        assert!(k * period <= RETRY_NS + period, "after {k} periods");
        assert!(d.capture.is_some() && d.lost.is_none());
        d.wait(&clock, PERIOD).unwrap();
    }

    fn frames_ns(frames: u64) -> u64 {
        resound_shm::time::frames_to_ns(frames, 48000)
    }
}
