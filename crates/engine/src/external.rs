//! Admission of threads outside the graph (a legacy program the `resound
//! legacy` command reserves): the server's ledger, owned by the driver
//! thread, also holds their bandwidth, so the audio graph and those programs
//! are admitted against one capacity.
//!
//! The control side sends [`crate::Command::External`] through the command
//! ring and waits for the answer in [`ExternalReply`]: the driver thread, at
//! its next cycle begin, updates the ledger and writes the verdict, then
//! publishes the request's sequence number (release order). One request at a
//! time: the control side holds [`ExternalReply::lock`] across send and wait.
//!
//! Threads: [`ExternalReply::answer`] on the driver thread (real-time safe);
//! the rest on control threads.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The driver's answer to the last external admission request.
#[derive(Debug, Default)]
pub struct ExternalReply {
    /// Control side only: serialises requests; holds the last sequence number used.
    pub lock: Mutex<u64>,
    /// Sequence number of the request answered (written last, Release).
    pub seq: AtomicU64,
    /// Whether it was admitted.
    pub ok: AtomicBool,
    /// Free bandwidth before the request (millionths of a CPU).
    pub free_ppm: AtomicU64,
    /// Bandwidth held by everything in the ledger after the request (ppm).
    pub used_ppm: AtomicU64,
}

/// The driver's verdict on one request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ExternalVerdict {
    /// Admitted (or released).
    pub ok: bool,
    /// Free bandwidth before the request (CPUs).
    pub free: f64,
    /// Bandwidth the ledger holds after it (CPUs).
    pub used: f64,
}

impl ExternalReply {
    /// Driver thread: publishes the verdict on request `seq`. Real-time safe.
    pub fn answer(&self, seq: u64, ok: bool, free: f64, used: f64) {
        self.ok.store(ok, Ordering::Relaxed);
        self.free_ppm.store((free * 1e6) as u64, Ordering::Relaxed);
        self.used_ppm.store((used * 1e6) as u64, Ordering::Relaxed);
        self.seq.store(seq, Ordering::Release);
    }

    /// Control side: sends the request built by `send` (given its sequence
    /// number; false if the ring was full) and waits up to `timeout` for the
    /// driver's verdict. `None`: not sent, or no answer in time.
    pub fn request(
        &self,
        timeout: Duration,
        send: impl FnOnce(u64) -> bool,
    ) -> Option<ExternalVerdict> {
        let mut last = self.lock.lock().unwrap_or_else(|e| e.into_inner());
        *last += 1;
        let seq = *last;
        if !send(seq) {
            return None;
        }
        let t0 = Instant::now();
        while self.seq.load(Ordering::Acquire) != seq {
            if t0.elapsed() > timeout {
                return None;
            }
            std::thread::sleep(Duration::from_micros(500));
        }
        Some(ExternalVerdict {
            ok: self.ok.load(Ordering::Relaxed),
            free: self.free_ppm.load(Ordering::Relaxed) as f64 / 1e6,
            used: self.used_ppm.load(Ordering::Relaxed) as f64 / 1e6,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn request_waits_for_the_matching_answer() {
        let r = Arc::new(ExternalReply::default());
        let r2 = r.clone();
        let v = r.request(Duration::from_secs(5), move |seq| {
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                r2.answer(seq, false, 0.05, 1.7);
            });
            true
        });
        let v = v.expect("answered");
        assert!(!v.ok);
        assert!((v.free - 0.05).abs() < 1e-6 && (v.used - 1.7).abs() < 1e-6);
        assert!(r.request(Duration::from_millis(10), |_| true).is_none());
        assert!(r.request(Duration::from_secs(1), |_| false).is_none());
    }
}
