//! Period detection for an attached process: once before attaching
//! ([`detect_once`]) and then again every few seconds on a background thread
//! ([`Redetector`]) so that a changed frame rate re-tunes the reservation.
//!
//! Detection traces the process with the kernel tracer, which never stops it;
//! only where perf events are refused does it fall back to ptrace (which
//! stops the process at each system call), and the first result says so.
//!
//! Threads: [`Redetector`] owns one background thread ("legacy-redetect")
//! that traces and runs the detector; the attach loop polls its results with
//! [`Redetector::poll`] once per period, so the controller keeps its pace
//! while a trace runs.

use crate::trace::{self, TraceError, Tracer};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One detection's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct Detected {
    /// The period (ns); `None`: not periodic.
    pub period_ns: Option<u64>,
    /// The tracer that recorded the events.
    pub tracer: Tracer,
    /// Why the kernel tracer was not used (set when ptrace was the fallback).
    pub fallback: Option<String>,
}

/// Traces `pid` for `dur` (stopping early when `stop` is set) and detects its
/// period with the detector's default parameters.
pub fn detect_once(pid: i32, dur: Duration, stop: &Arc<AtomicBool>) -> Result<Detected, String> {
    let mut opts = trace::Options::new(pid, dur.max(Duration::from_millis(100)));
    opts.stop = stop.clone();
    let (t, tracer, fallback) = match trace::trace(Tracer::Kernel, &opts) {
        Ok(t) => (t, Tracer::Kernel, None),
        Err(TraceError::Unavailable(why)) => {
            let t = trace::trace(Tracer::Ptrace, &opts)
                .map_err(|e| format!("cannot trace PID {pid}: {why}; with ptrace: {e}"))?;
            (t, Tracer::Ptrace, Some(why))
        }
        Err(e) => return Err(format!("cannot trace PID {pid}: {e}")),
    };
    let d = crate::detect::detect(&t.events, &crate::detect::Params::default());
    Ok(Detected {
        period_ns: d.period_ns(),
        tracer,
        fallback,
    })
}

/// What the background thread reports.
#[derive(Debug, Clone, PartialEq)]
pub enum Report {
    /// A detection finished.
    Detected(Detected),
    /// A detection failed (the process may have exited).
    Failed(String),
}

/// The background re-detection thread; stopped and joined on drop.
pub struct Redetector {
    rx: Receiver<Report>,
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Redetector {
    /// Starts re-detecting `pid` every `every` (a trace of `dur` each time,
    /// the first one `every` from now).
    pub fn start(pid: i32, every: Duration, dur: Duration) -> std::io::Result<Redetector> {
        let (tx, rx) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let handle = std::thread::Builder::new()
            .name("legacy-redetect".into())
            .spawn(move || {
                while sleep_unless(&flag, every) {
                    let r = match detect_once(pid, dur, &flag) {
                        Ok(d) => Report::Detected(d),
                        Err(e) => Report::Failed(e),
                    };
                    if flag.load(Ordering::Relaxed) || tx.send(r).is_err() {
                        return;
                    }
                }
            })?;
        Ok(Redetector {
            rx,
            stop,
            handle: Some(handle),
        })
    }

    /// The latest report since the last poll, if any (never blocks).
    pub fn poll(&self) -> Option<Report> {
        self.rx.try_iter().last()
    }
}

impl Drop for Redetector {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// Sleeps `d` in short steps; `false` as soon as `stop` is set.
fn sleep_unless(stop: &AtomicBool, d: Duration) -> bool {
    let end = Instant::now() + d;
    while !stop.load(Ordering::Relaxed) {
        let now = Instant::now();
        if now >= end {
            return true;
        }
        std::thread::sleep((end - now).min(Duration::from_millis(50)));
    }
    false
}

/// Whether a detected period `p` differs from the reservation period `t` by
/// more than the fraction `tolerance`.
pub fn differs(t: u64, p: u64, tolerance: f64) -> bool {
    t.abs_diff(p) as f64 > tolerance * t as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn differs_uses_a_relative_tolerance() {
        assert!(!differs(40_000_000, 40_800_000, 0.03));
        assert!(differs(40_000_000, 41_300_000, 0.03));
        assert!(differs(40_000_000, 20_000_000, 0.03));
    }

    #[test]
    fn a_stopped_redetector_joins_at_once() {
        let t0 = Instant::now();
        let r = Redetector::start(
            std::process::id() as i32,
            Duration::from_secs(60),
            Duration::from_secs(1),
        )
        .unwrap();
        assert_eq!(r.poll(), None);
        drop(r);
        assert!(t0.elapsed() < Duration::from_secs(5));
    }
}
