//! Changing the period while running (`jack_set_buffer_size`): the control
//! side asks through [`PeriodControl::request`] and waits for the driver's
//! verdict; the driver thread, between two cycles, stops the device and
//! sets its hardware parameters again at the new period with the same `-n`
//! periods. A device that refuses goes back to the old period and the
//! request fails with the device's message (the server keeps running at the
//! old period, nothing told to clients). A device that accepts is left
//! prepared while the cycles run on the clock (silence, like a lost device)
//! until the engine runs at the new period (the server stores it once the
//! request succeeded); then it is prefilled and started.
//!
//! Threads: [`PeriodControl::request`] runs on a control thread (it sleeps
//! while waiting); the rest on the driver thread, outside the cycle. The
//! reconfiguration is not real-time (alsa-lib may allocate while setting
//! hardware parameters; the stream is stopped meanwhile); the scratch
//! buffers were sized for the longest period at open, so nothing here
//! allocates in this crate but the refusal's message.

use super::params::{configure, dir_name};
use super::recovery::{link, restart};
use super::{AlsaDriver, Lost};
use crate::driver::pace::Pacer;
use crate::driver::Latencies;
use alsa::Direction;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// No request.
const IDLE: u32 = 0;
/// A request waits for the driver thread.
const ASKED: u32 = 1;
/// The driver thread took the request.
const WORKING: u32 = 2;
/// The device runs (or will run) at the asked period.
const DONE: u32 = 3;
/// The device refused; the message is in `refusal`.
const REFUSED: u32 = 4;

/// The hand-over of a period change between the control side and the driver.
#[derive(Debug)]
pub struct PeriodControl {
    /// IDLE, ASKED, WORKING, DONE or REFUSED.
    state: AtomicU32,
    /// The period asked for (frames), valid from ASKED on.
    asked: AtomicU32,
    /// Why the device refused (written by the driver thread before REFUSED).
    refusal: Mutex<String>,
    /// `-n`: periods of playback buffer.
    periods: u32,
    /// `-I` (frames).
    in_latency: u32,
    /// `-O` (frames).
    out_latency: u32,
}

impl PeriodControl {
    /// A control for a driver with `-n periods`, `-I` and `-O`.
    pub fn new(periods: u32, in_latency: u32, out_latency: u32) -> PeriodControl {
        PeriodControl {
            state: AtomicU32::new(IDLE),
            asked: AtomicU32::new(0),
            refusal: Mutex::new(String::new()),
            periods,
            in_latency,
            out_latency,
        }
    }

    /// The device's latencies on top of the period at `period` frames (as
    /// [`crate::Driver::latencies`] at that period).
    pub fn latencies(&self, period: u32) -> Latencies {
        Latencies {
            capture_frames: self.in_latency,
            playback_frames: (self.periods - 2) * period + self.out_latency,
        }
    }

    /// Asks the driver thread to run the device at `frames` per period and
    /// waits (up to `timeout`) for its verdict: Ok once the device is set
    /// up for it (the caller then stores the new period for the engine),
    /// else the device's refusal. Runs on a control thread; one request at a
    /// time (the server's state lock serialises them).
    pub fn request(&self, frames: u32, timeout: Duration) -> Result<(), String> {
        self.asked.store(frames, Ordering::Relaxed);
        self.state.store(ASKED, Ordering::Release);
        let t0 = Instant::now();
        loop {
            match self.state.load(Ordering::Acquire) {
                DONE => {
                    self.state.store(IDLE, Ordering::Release);
                    return Ok(());
                }
                REFUSED => {
                    let why = std::mem::take(&mut *self.lock_refusal());
                    self.state.store(IDLE, Ordering::Release);
                    return Err(why);
                }
                // Not taken in time: withdrawn (unless the driver takes it now).
                ASKED
                    if t0.elapsed() > timeout
                        && self
                            .state
                            .compare_exchange(ASKED, IDLE, Ordering::AcqRel, Ordering::Acquire)
                            .is_ok() =>
                {
                    return Err("the audio driver did not answer (is it running?)".into());
                }
                _ => {}
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn lock_refusal(&self) -> std::sync::MutexGuard<'_, String> {
        self.refusal.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The period asked for, taken by the driver thread. Real-time safe.
    fn take(&self) -> Option<u32> {
        self.state
            .compare_exchange(ASKED, WORKING, Ordering::AcqRel, Ordering::Relaxed)
            .ok()
            .map(|_| self.asked.load(Ordering::Relaxed))
    }

    /// The driver thread's verdict on the request it took.
    fn answer(&self, verdict: Result<(), String>) {
        match verdict {
            Ok(()) => self.state.store(DONE, Ordering::Release),
            Err(why) => {
                // The requester only locks after REFUSED: never contended
                // (and never waited for here).
                if let Ok(mut r) = self.refusal.try_lock() {
                    *r = why;
                }
                self.state.store(REFUSED, Ordering::Release);
            }
        }
    }
}

impl AlsaDriver {
    /// Handles a pending period change (between cycles, on the driver
    /// thread). Not real-time while a change is handled (see module docs).
    pub(super) fn check_period_request(&mut self) {
        if let Some(frames) = self.period_ctl.take() {
            let verdict = self.change_period(frames);
            self.period_ctl.answer(verdict);
        }
    }

    /// Stops the device and sets it up at `frames` per period; on a
    /// refusal, back at the old period and running again.
    fn change_period(&mut self, frames: u32) -> Result<(), String> {
        if self.lost.is_some() {
            return Err("the audio device is gone; its period cannot change now".into());
        }
        if frames == self.cfg.period && self.switching.is_none() {
            return Ok(());
        }
        if frames > self.cfg.max_period.max(self.cfg.period) {
            return Err(format!(
                "{frames} frames is more than the server's buffers hold ({})",
                self.cfg.max_period
            ));
        }
        for s in [&self.capture, &self.playback].into_iter().flatten() {
            let _ = s.pcm.drop();
        }
        let old = self.cfg.period;
        match self.reconfigure(frames) {
            Ok(()) => {
                // Started once the engine runs at the new period (`wait`).
                self.switching = Some(Lost::default());
                self.flushed = true;
                self.dll.reset();
                Ok(())
            }
            Err(why) => {
                let back = self.reconfigure(old);
                let periods = self.cfg.periods;
                let restarted = back.is_ok()
                    && restart(
                        self.capture.as_mut(),
                        self.playback.as_mut(),
                        periods,
                        false,
                    )
                    .is_ok();
                if !restarted {
                    self.recover_from(crate::driver::Fault::DeviceLost);
                }
                self.flushed = true;
                self.dll.reset();
                Err(why)
            }
        }
    }

    /// Sets both PCMs' parameters at `frames` per period (the rest as
    /// negotiated at open) and the streams' period.
    fn reconfigure(&mut self, frames: u32) -> Result<(), String> {
        self.cfg.period = frames;
        let cfg = &self.cfg;
        for (s, name, dir) in [
            (&mut self.capture, &cfg.capture, Direction::Capture),
            (&mut self.playback, &cfg.playback, Direction::Playback),
        ] {
            let (Some(s), Some(name)) = (s.as_mut(), name.as_deref()) else {
                continue;
            };
            let neg = configure(&s.pcm, name, dir, cfg)?;
            if neg != s.neg {
                return Err(format!(
                    "{name} ({}) changed its format or channels at {frames} frames",
                    dir_name(dir)
                ));
            }
            if !s.set_period(frames as usize) {
                return Err(format!("{frames} frames do not fit the driver's buffers"));
            }
        }
        link(self.capture.as_ref(), self.playback.as_ref());
        Ok(())
    }

    /// A cycle while switching periods: paced on the clock at the engine's
    /// period until the engine runs at the device's new one, then the device
    /// is prefilled and started. Returns None once on the device again.
    pub(super) fn wait_switching(
        &mut self,
        clock: &dyn crate::clock::Clock,
        p: crate::driver::Period,
    ) -> Option<crate::driver::Wake> {
        let mut sw = self.switching.take()?;
        if p.frames != self.cfg.period {
            let pacer = sw.pacer.get_or_insert_with(|| {
                let mut pacer = Pacer::default();
                pacer.start(clock.now_ns());
                pacer
            });
            let wake = pacer.pace(clock, p);
            self.switching = Some(sw);
            return Some(wake);
        }
        let periods = self.cfg.periods;
        if restart(
            self.capture.as_mut(),
            self.playback.as_mut(),
            periods,
            false,
        )
        .is_err()
        {
            self.recover_from(crate::driver::Fault::DeviceLost);
            return Some(self.wait_lost(clock, p));
        }
        self.flushed = true;
        self.dll.reset();
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::{Clock, SimClock};
    use crate::driver::{Driver, Period};
    use std::sync::Arc;

    fn null_driver(max_period: u32) -> AlsaDriver {
        crate::driver::alsa::null_test_driver(max_period)
    }

    fn period(frames: u32) -> Period {
        Period {
            frames,
            rate: 48000,
            freewheel: false,
        }
    }

    /// Asks for `frames` on a control thread while the driver runs cycles
    /// at `engine_frames`; returns the verdict.
    fn ask(d: &mut AlsaDriver, clock: &SimClock, frames: u32, engine: u32) -> Result<(), String> {
        let ctl: Arc<PeriodControl> = d.period_control();
        let asker = std::thread::spawn(move || ctl.request(frames, Duration::from_secs(5)));
        while !asker.is_finished() {
            d.wait(clock, period(engine)).unwrap();
        }
        asker.join().unwrap()
    }

    #[test]
    fn the_device_runs_at_the_new_period_once_the_engine_does() {
        let mut d = null_driver(1024);
        let clock = SimClock::new(1_000_000_000);
        d.start(clock.now_ns()).unwrap();
        ask(&mut d, &clock, 128, 256).expect("null takes 128 frames");
        assert_eq!(d.cfg.period, 128);
        assert_eq!(d.latencies().playback_frames, 0);
        // Until the engine runs at 128, cycles run on the clock in silence.
        let w0 = d.wait(&clock, period(256)).unwrap();
        let w1 = d.wait(&clock, period(256)).unwrap();
        assert!(d.switching.is_some());
        assert_eq!(
            w1.start_ns - w0.start_ns,
            resound_shm::time::frames_to_ns(256, 48000)
        );
        let mut x = [1.0f32; 256];
        d.capture(0, &mut x);
        assert_eq!(x, [0.0; 256]);
        // The engine at 128: the device is started and used again.
        d.wait(&clock, period(128)).unwrap();
        assert!(d.switching.is_none());
        assert_eq!(d.capture.as_ref().unwrap().period, 128);
        d.wait(&clock, period(128)).unwrap();
    }

    #[test]
    fn a_period_beyond_the_buffers_is_refused_and_the_old_one_kept() {
        let mut d = null_driver(512);
        let clock = SimClock::new(1_000_000_000);
        d.start(clock.now_ns()).unwrap();
        let err = ask(&mut d, &clock, 2048, 256).expect_err("2048 > 512");
        assert!(err.contains("2048"), "{err}");
        assert_eq!(d.cfg.period, 256);
        assert!(d.switching.is_none() && d.lost.is_none());
        d.wait(&clock, period(256)).unwrap();
    }
}
