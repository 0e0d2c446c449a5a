//! The ALSA driver: a sound card (or any alsa-lib PCM) paces the cycle.
//!
//! [`AlsaDriver::open`] opens and negotiates the capture and playback PCMs
//! on the thread starting the server, before any client can connect (a
//! refused rate or period fails there, saying what the device supports).
//! [`Driver::start`] links capture to playback, prefills playback with `-n`
//! periods of silence and starts the stream. Each [`Driver::wait`] polls the
//! PCMs' descriptors until a period can be read and written (a timeout of a
//! few periods is a fault), then reads the capture period into the scratch
//! buffer; the cycle decodes it into the capture ports, encodes the mixed
//! playback and [`Driver::flush`]es it to the device.
//!
//! Files: [`params`] (open, negotiation), [`convert`] (sample formats),
//! [`io`] (a PCM direction and its scratch), [`recovery`] (xruns, suspend,
//! a lost device and the dummy clock meanwhile), [`reopen`] (the helper
//! thread looking for a lost device), [`busy`] (who holds a busy device),
//! [`devices`] (`resound devices`).
//!
//! Runs on the driver thread (real-time) once opened; opening happens on
//! the thread starting the server, reopening a lost device on the helper.

pub mod busy;
pub mod convert;
pub mod devices;
pub mod io;
pub mod params;
pub mod period;
pub mod recovery;
pub mod reopen;

use super::{Driver, Fault, Latencies, Period, Wake};
use crate::clock::Clock;
use crate::driver::dll::Dll;
use crate::driver::pace::Pacer;
use alsa::poll::Descriptors;
use io::Stream;
use resound_shm::time::frames_to_ns;
use std::sync::Arc;

/// The ALSA driver's options (jackd's `-d alsa` options).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AlsaConfig {
    /// Capture device (None: no capture).
    pub capture: Option<String>,
    /// Playback device (None: no playback).
    pub playback: Option<String>,
    /// Sample rate (Hz), exactly.
    pub rate: u32,
    /// Frames per period, exactly.
    pub period: u32,
    /// Periods in the playback buffer (≥ 2).
    pub periods: u32,
    /// Capture channels (0: as many as the device has, up to 64).
    pub in_channels: u32,
    /// Playback channels (0: as many as the device has, up to 64).
    pub out_channels: u32,
    /// Extra capture latency to report (frames).
    pub in_latency: u32,
    /// Extra playback latency to report (frames).
    pub out_latency: u32,
    /// Soft mode: xruns the device reports are ignored.
    pub soft: bool,
    /// Try 16-bit samples first.
    pub shorts: bool,
    /// Use only this sample format (None: the best the device offers).
    pub format: Option<convert::SampleFormat>,
    /// How periods are transferred (mmap where offered, by default).
    pub access: AccessMode,
    /// The longest period the server allows (its buffers' size): a period
    /// change up to it allocates nothing.
    pub max_period: u32,
}

/// How the driver moves periods to and from the device (`--access`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AccessMode {
    /// mmap (interleaved) where the device offers it, else read/write.
    #[default]
    Auto,
    /// mmap only: a device without it is refused at start-up.
    Mmap,
    /// read/write only (interleaved, else non-interleaved).
    Rw,
}

impl AccessMode {
    /// The option's word (`auto`, `mmap`, `rw`).
    pub fn word(self) -> &'static str {
        match self {
            AccessMode::Auto => "auto",
            AccessMode::Mmap => "mmap",
            AccessMode::Rw => "rw",
        }
    }
}

/// State while the device is gone: cycles run on the clock.
#[derive(Debug, Default)]
struct Lost {
    /// Paces the cycles on the engine's clock (as the dummy driver does);
    /// started at the first cycle without the device.
    pacer: Option<Pacer>,
}

/// The ALSA driver.
pub struct AlsaDriver {
    cfg: AlsaConfig,
    capture: Option<Stream>,
    playback: Option<Stream>,
    capture_channels: u32,
    playback_channels: u32,
    /// Poll descriptors of both PCMs (capacity allocated at open).
    fds: Vec<libc::pollfd>,
    /// A fault found outside `wait` (in `flush`), reported by the next `wait`.
    pending: Option<Fault>,
    /// This cycle's playback was written.
    flushed: bool,
    /// Set while the device is gone.
    lost: Option<Lost>,
    /// The device came back since the engine last asked.
    resumed: bool,
    /// Looks for a lost device on a helper thread.
    reopener: reopen::Reopener,
    /// Period changes asked by the control side.
    period_ctl: Arc<period::PeriodControl>,
    /// Set while the device waits for the engine to run at its new period.
    switching: Option<Lost>,
    /// Filters the device's wake-ups into cycle starts (reset whenever the
    /// device (re)starts).
    dll: Dll,
}

impl AlsaDriver {
    /// Opens and negotiates the devices (not real-time). The error says what
    /// the device refused and what it supports, or who holds a busy device.
    pub fn open(cfg: AlsaConfig) -> Result<AlsaDriver, String> {
        if cfg.capture.is_none() && cfg.playback.is_none() {
            return Err("neither capture nor playback asked for".into());
        }
        if cfg.periods < 2 {
            return Err(format!("-n {}: at least 2 periods are needed", cfg.periods));
        }
        let (capture, playback) = recovery::open_streams(&cfg)?;
        let mut d = AlsaDriver {
            capture_channels: capture.as_ref().map_or(0, |s| s.neg.channels),
            playback_channels: playback.as_ref().map_or(0, |s| s.neg.channels),
            capture,
            playback,
            fds: Vec::new(),
            pending: None,
            flushed: false,
            lost: None,
            resumed: false,
            reopener: reopen::Reopener::new(recovery::RETRY),
            period_ctl: Arc::new(period::PeriodControl::new(
                cfg.periods,
                cfg.in_latency,
                cfg.out_latency,
            )),
            switching: None,
            dll: Dll::default(),
            cfg,
        };
        d.refill_fds();
        d.fds.reserve(2 * d.fds.len().max(4));
        Ok(d)
    }

    /// The control side's handle to change the period while running.
    pub fn period_control(&self) -> Arc<period::PeriodControl> {
        self.period_ctl.clone()
    }

    /// Whether cycles run without the device (lost, or changing period).
    fn off_device(&self) -> bool {
        self.lost.is_some() || self.switching.is_some()
    }

    /// Channels given capture ports.
    pub fn capture_channels(&self) -> u32 {
        self.capture_channels
    }

    /// Channels given playback ports.
    pub fn playback_channels(&self) -> u32 {
        self.playback_channels
    }

    /// What was negotiated: (capture, playback).
    pub fn negotiated(&self) -> (Option<params::Negotiated>, Option<params::Negotiated>) {
        (
            self.capture.as_ref().map(|s| s.neg),
            self.playback.as_ref().map(|s| s.neg),
        )
    }

    /// One line saying what the devices run with (for the server's log).
    pub fn describe(&self) -> String {
        let one = |s: &Option<Stream>, name: &Option<String>, what: &str| match (s, name) {
            (Some(s), Some(n)) => format!(
                "{what} {n}: {} ch ({} used), {:?}{}, {} {}",
                s.neg.device_channels,
                s.neg.channels,
                s.neg.encoding.format,
                if s.neg.encoding.big_endian { " BE" } else { "" },
                if s.neg.mmap { "mmap" } else { "read/write" },
                if s.neg.interleaved {
                    "interleaved"
                } else {
                    "non-interleaved"
                }
            ),
            _ => format!("no {what}"),
        };
        format!(
            "{}; {}; {} Hz, {} frames x {} periods",
            one(&self.capture, &self.cfg.capture, "capture"),
            one(&self.playback, &self.cfg.playback, "playback"),
            self.cfg.rate,
            self.cfg.period,
            self.cfg.periods
        )
    }

    /// Collects both PCMs' poll descriptors. Real-time safe once `fds` has
    /// the capacity (reserved at open for the same device: a reopened one
    /// has as many descriptors).
    fn refill_fds(&mut self) {
        self.fds.clear();
        for s in [&self.capture, &self.playback].into_iter().flatten() {
            let n = s.pcm.count();
            let at = self.fds.len();
            self.fds.resize(
                at + n,
                libc::pollfd {
                    fd: -1,
                    events: 0,
                    revents: 0,
                },
            );
            let got = s.pcm.fill(&mut self.fds[at..]).unwrap_or(0);
            self.fds.truncate(at + got);
        }
    }

    fn period_ns(&self) -> u64 {
        frames_to_ns(self.cfg.period as u64, self.cfg.rate.max(1)).max(1)
    }

    /// Polls until a period can be read and written; returns when the
    /// device passed the end of that period ([`boundary_ns`]). Real-time safe.
    fn wait_device(&mut self, clock: &dyn Clock) -> Result<u64, Fault> {
        let timeout_ms = (4 * self.period_ns() / 1_000_000).max(100) as i32;
        let period = self.cfg.period as usize;
        loop {
            let soft = self.cfg.soft;
            let cap = self.capture.as_ref().map(|s| recovery::available(s, soft));
            let play = self.playback.as_ref().map(|s| recovery::available(s, soft));
            let now = clock.now_ns();
            let avail = [cap.transpose()?, play.transpose()?]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(period);
            if avail >= period {
                return Ok(boundary_ns(now, avail - period, self.cfg.rate));
            }
            // SAFETY: fds is a valid array of fds.len() pollfd structs.
            let r = unsafe {
                libc::poll(
                    self.fds.as_mut_ptr(),
                    self.fds.len() as libc::nfds_t,
                    timeout_ms,
                )
            };
            if r == 0 {
                return Err(Fault::Xrun);
            }
            if r < 0 && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                return Err(Fault::DeviceLost);
            }
            if clock.now_ns().saturating_sub(now) > 4 * self.period_ns() + 100_000_000 {
                return Err(Fault::Xrun);
            }
        }
    }
}

/// When the device passed the end of the period the driver is about to
/// process, seen at `now_ns` with `beyond` frames available past that
/// period: the driver's own wake-up delay taken out. The device's position
/// is as fine as its driver reports it (frame-exact from a position
/// buffer, whole periods from an interrupt count; then `beyond` is 0 and
/// this is the wake-up time). Real-time safe.
fn boundary_ns(now_ns: u64, beyond: usize, rate: u32) -> u64 {
    now_ns.saturating_sub(frames_to_ns(beyond as u64, rate.max(1)))
}

impl Driver for AlsaDriver {
    /// Nothing left to open (done before the server started). Not real-time.
    fn open(&mut self, _max_frames: usize) -> Result<Latencies, Fault> {
        Ok(self.latencies())
    }

    /// Links the PCMs, prefills playback with silence and starts. Not real-time.
    fn start(&mut self, _now_ns: u64) -> Result<(), Fault> {
        recovery::link(self.capture.as_ref(), self.playback.as_ref());
        self.flushed = true;
        self.dll.reset();
        recovery::restart(
            self.capture.as_mut(),
            self.playback.as_mut(),
            self.cfg.periods,
            false,
        )
        .map_err(|e| recovery::classify(&e))
    }

    /// Stops both PCMs (and the reopen helper, if the device is lost).
    /// Not real-time.
    fn stop(&mut self) {
        self.reopener.stop();
        for s in [&self.capture, &self.playback].into_iter().flatten() {
            let _ = s.pcm.drop();
        }
    }

    /// Writes silence if this cycle had no playback, then polls the device
    /// for the next period and reads the capture; while the device is lost,
    /// paces on the clock and takes the device once the helper reopened it.
    /// Real-time safe.
    fn wait(&mut self, clock: &dyn Clock, period: Period) -> Result<Wake, Fault> {
        if let Some(f) = self.pending.take() {
            return Err(f);
        }
        if self.lost.is_some() {
            return Ok(self.wait_lost(clock, period));
        }
        self.check_period_request();
        if self.switching.is_some() {
            if let Some(w) = self.wait_switching(clock, period) {
                return Ok(w);
            }
        }
        if self.lost.is_some() {
            return Ok(self.wait_lost(clock, period));
        }
        if !self.flushed {
            if let Some(p) = self.playback.as_mut() {
                p.silence();
            }
            self.flush();
            if let Some(f) = self.pending.take() {
                return Err(f);
            }
        }
        self.flushed = false;
        let boundary = self.wait_device(clock)?;
        if let Some(c) = self.capture.as_mut() {
            c.read_period().map_err(|e| recovery::classify(&e))?;
        }
        if let Some(p) = self.playback.as_mut() {
            p.map_period().map_err(|e| recovery::classify(&e))?;
        }
        // The cycle starts on the device's period boundaries as the loop
        // filters them out of the times the device passed them (the
        // wake-ups, less the frames the device ran on since).
        let now = clock.now_ns();
        let (start_ns, next_ns) = self.dll.wake(boundary, self.period_ns());
        Ok(Wake {
            start_ns,
            awake_ns: now,
            next_ns,
            skipped: 0,
            delay_ns: now.saturating_sub(start_ns),
        })
    }

    /// Decodes one capture channel of this period. Real-time safe.
    fn capture(&mut self, channel: usize, dst: &mut [f32]) {
        match self.capture.as_ref() {
            Some(c) if !self.off_device() => c.decode(channel, dst),
            _ => dst.fill(0.0),
        }
    }

    /// Encodes one playback channel into the period to write. Real-time safe.
    fn playback(&mut self, channel: usize, src: &[f32]) {
        if let Some(p) = self.playback.as_mut() {
            p.encode(channel, src);
        }
    }

    /// Writes this cycle's playback period to the device. Real-time safe.
    fn flush(&mut self) {
        self.flushed = true;
        if self.off_device() {
            return;
        }
        if let Some(p) = self.playback.as_mut() {
            if let Err(e) = p.write_period() {
                let f = recovery::classify(&e);
                if !(self.cfg.soft && f == Fault::Xrun) {
                    self.pending = Some(f);
                }
            }
            p.silence();
        }
    }

    /// Capture: `-I` on top of the period. Playback: `-n` − 1 periods and
    /// `-O` (the server adds the period of async mode), as jackd. Real-time safe.
    fn latencies(&self) -> Latencies {
        Latencies {
            capture_frames: self.cfg.in_latency,
            playback_frames: (self.cfg.periods - 2) * self.cfg.period + self.cfg.out_latency,
        }
    }

    /// Xrun: prepare, prefill, restart; suspend: resume (or prepare); a lost
    /// device: cycles go on on the clock and a helper thread retries the
    /// device every second (spawned here, once per loss). Never fails: the
    /// graph keeps running.
    fn recover(&mut self, fault: Fault) -> Result<(), Fault> {
        self.recover_from(fault);
        Ok(())
    }

    fn take_resumed(&mut self) -> bool {
        std::mem::take(&mut self.resumed)
    }
}

/// For the driver's unit tests: alsa-lib's `null` PCM (defined by its own
/// configuration) both ways, 48 kHz, 256 frames, 2 periods, 2+2 channels,
/// buffers for periods up to `max_period`.
#[cfg(test)]
pub(crate) fn null_test_driver(max_period: u32) -> AlsaDriver {
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
        access: AccessMode::Auto,
        max_period,
    })
    .expect("alsa-lib's null PCM")
}

#[cfg(test)]
mod boundary_tests {
    use super::boundary_ns;

    #[test]
    fn frames_past_the_boundary_move_it_back_by_their_duration() {
        assert_eq!(boundary_ns(10_000_000, 0, 48_000), 10_000_000);
        assert_eq!(boundary_ns(10_000_000, 48, 48_000), 9_000_000);
        assert_eq!(boundary_ns(10_000_000, 441, 44_100), 0);
        assert_eq!(boundary_ns(1_000, 48_000, 48_000), 0);
    }
}
