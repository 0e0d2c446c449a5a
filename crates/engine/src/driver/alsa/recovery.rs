//! Faults of the device and the way back: mapping alsa-lib errors to
//! [`Fault`]s, restarting after an xrun (prepare, prefill, start), resuming
//! after a suspend, and a lost device: cycles go on on the engine's clock
//! at the same rate and period while a helper thread ([`super::reopen`])
//! retries the device every second; a device it found is started here.
//!
//! Runs on the driver thread; restarting is real-time safe (no allocation
//! in this crate; alsa-lib's prepare is a system call). Opening the device
//! again never happens here: [`open_streams`] runs at start-up and on the
//! reopen helper.

use super::io::Stream;
use super::params::open_pcm;
use super::reopen::Reopened;
use super::{AlsaConfig, AlsaDriver, Lost};
use crate::clock::Clock;
use crate::driver::pace::Pacer;
use crate::driver::{Fault, Period, Wake};
use alsa::pcm::State;
use alsa::Direction;

/// How often a lost device is retried.
pub const RETRY: std::time::Duration = std::time::Duration::from_secs(1);

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
    let (period, max) = (cfg.period as usize, cfg.max_period as usize);
    let open = |name: &Option<String>, dir| -> Result<Option<Stream>, String> {
        name.as_deref()
            .map(|n| open_pcm(n, dir, cfg).map(|(pcm, neg)| Stream::new(pcm, neg, period, max)))
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

/// The frames `s` has to give or take now (0 after an xrun in soft mode);
/// the device's own errors (an xrun, a suspend, a vanished device) come
/// back as faults. Real-time safe.
pub fn available(s: &Stream, soft: bool) -> Result<usize, Fault> {
    match s.pcm.state() {
        State::XRun if !soft => return Err(Fault::Xrun),
        State::Suspended => return Err(Fault::Suspended),
        State::Disconnected => return Err(Fault::DeviceLost),
        _ => {}
    }
    match s.avail() {
        Ok(n) => Ok(n),
        Err(e) => match classify(&e) {
            Fault::Xrun if soft => Ok(0),
            f => Err(f),
        },
    }
}

/// Prepares (unless `prepared`), prefills playback with `periods` periods
/// of silence and starts the stream. Real-time safe.
pub fn restart(
    mut capture: Option<&mut Stream>,
    mut playback: Option<&mut Stream>,
    periods: u32,
    prepare: bool,
) -> alsa::Result<()> {
    // Prepared again: a period mapped before is no longer the next one.
    for s in [capture.as_deref_mut(), playback.as_deref_mut()]
        .into_iter()
        .flatten()
    {
        s.unmap();
    }
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
        self.dll.reset();
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

    /// The device is gone: its streams go to the reopen helper (which
    /// closes them and looks for the device again) and cycles are paced on
    /// the clock from now on. Not real-time (spawns the helper, once per loss).
    fn lose(&mut self) {
        let dead = Reopened {
            capture: self.capture.take(),
            playback: self.playback.take(),
        };
        self.fds.clear();
        let channels = (self.capture_channels, self.playback_channels);
        self.reopener.start(self.cfg.clone(), channels, dead);
        // Timed from the first cycle on the clock (`wait_lost`).
        self.lost = Some(Lost::default());
    }

    /// A cycle without the device: paced on the engine's clock like the
    /// dummy driver's ([`Pacer`], at the device's rate and period); a device
    /// the helper has reopened meanwhile is taken and started.
    pub(super) fn wait_lost(&mut self, clock: &dyn Clock, p: Period) -> Wake {
        let mut lost = self.lost.take().unwrap_or_default();
        let pacer = lost.pacer.get_or_insert_with(|| {
            let mut pacer = Pacer::default();
            pacer.start(clock.now_ns());
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
        self.lost = Some(lost);
        if !p.freewheel {
            if let Some(device) = self.reopener.take() {
                self.resume_on(device);
            }
        }
        wake
    }

    /// Prefills and starts a device the helper reopened; the next cycle runs
    /// on it. If it fails to start, it is lost again (and looked for again).
    /// Real-time safe (no allocation: the poll array keeps its capacity).
    fn resume_on(&mut self, device: Reopened) {
        self.capture = device.capture;
        self.playback = device.playback;
        let periods = self.cfg.periods;
        if restart(
            self.capture.as_mut(),
            self.playback.as_mut(),
            periods,
            false,
        )
        .is_err()
        {
            self.lose();
            return;
        }
        self.refill_fds();
        self.lost = None;
        self.flushed = true;
        self.dll.reset();
        self.resumed = true;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::SimClock;
    use crate::driver::alsa::reopen;
    use crate::driver::Driver;

    /// alsa-lib's `null` PCM (defined by its own configuration) both ways.
    fn null_driver() -> AlsaDriver {
        crate::driver::alsa::null_test_driver(1024)
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

    /// Names of this process's threads.
    fn thread_names() -> Vec<String> {
        std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
            .map(|c| c.trim().to_string())
            .collect()
    }

    #[test]
    fn a_lost_device_runs_on_the_clock_and_is_reopened_by_the_helper() {
        let mut d = null_driver();
        d.reopener.retry = std::time::Duration::from_millis(100);
        let clock = SimClock::new(1_000_000_000);
        d.start(clock.now_ns()).unwrap();
        // The device cannot be found when the helper starts looking.
        d.cfg.capture = Some("resound_no_such_pcm".into());
        d.recover(Fault::DeviceLost).unwrap();
        assert!(d.capture.is_none() && d.lost.is_some());
        assert!(d.reopener.running(), "a helper looks for the device");
        // The thread names itself when it starts, which may be just after
        // `recover` returned.
        let named = || thread_names().iter().any(|n| n == reopen::THREAD_NAME);
        let t = std::time::Instant::now();
        while !named() && t.elapsed() < std::time::Duration::from_secs(2) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(named(), "the helper is named {}", reopen::THREAD_NAME);
        let t0 = clock.now_ns();
        let period = frames_ns(256);
        let mut x = [1.0f32; 256];
        for k in 0..100u64 {
            let w = d.wait(&clock, PERIOD).unwrap();
            assert_eq!(
                w.start_ns,
                t0 + k * period,
                "paced at the period on the clock"
            );
            d.capture(0, &mut x);
            assert_eq!(x, [0.0; 256], "silence while lost");
            assert!(!d.take_resumed());
            std::thread::sleep(std::time::Duration::from_millis(3));
        }
        assert!(d.lost.is_some() && d.reopener.running(), "still lost");
        // Stopping the driver stops the helper.
        d.stop();
        assert!(!d.reopener.running());
    }

    #[test]
    fn a_device_back_is_resumed_on_from_the_helpers_hand_over() {
        let mut d = null_driver();
        d.reopener.retry = std::time::Duration::from_millis(50);
        let clock = SimClock::new(1_000_000_000);
        d.start(clock.now_ns()).unwrap();
        d.recover(Fault::DeviceLost).unwrap();
        let t = std::time::Instant::now();
        let mut resumed = false;
        while !resumed && t.elapsed() < std::time::Duration::from_secs(10) {
            d.wait(&clock, PERIOD).unwrap();
            resumed = d.take_resumed();
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(resumed, "resumed once the helper reopened the device");
        assert!(d.capture.is_some() && d.lost.is_none());
        assert!(!d.reopener.running(), "the helper ended with the hand-over");
        d.wait(&clock, PERIOD).unwrap();
        // A second loss starts a second helper.
        d.recover(Fault::DeviceLost).unwrap();
        assert!(d.reopener.running());
        d.stop();
    }

    fn frames_ns(frames: u64) -> u64 {
        resound_shm::time::frames_to_ns(frames, 48000)
    }
}
