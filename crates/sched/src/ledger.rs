//! Our own admission bookkeeping for SCHED_DEADLINE bandwidth.
//!
//! The kernel's admission state is global (shared with every other process)
//! and opaque: it only answers "yes" or `EBUSY`, and it can be wrong after a
//! sleeping deadline thread was switched away from another thread. The
//! server therefore keeps a [`Ledger`] of what *it* reserved per thread and
//! refuses (with the figures) before asking the kernel.
//!
//! The ledger and the kernel can disagree briefly: [`Ledger::release`] frees
//! the bandwidth at once, while the kernel gives a departing thread's
//! bandwidth back at its 0-lag time, up to one reservation period later (see
//! [`crate::policy`]). A reservation admitted here may therefore still be
//! refused by the kernel (`EBUSY`) for that long; callers should keep the
//! thread on its fallback policy and try again later rather than give up.
//! A thread that leaves while stopped or hung keeps its reservation in the
//! kernel until it runs again (only the thread can drop it); the server's
//! driver therefore releases such a thread's entry only once the kernel
//! shows it let go (`resound_engine::departed`).
//!
//! Threads: built on the control thread ([`Ledger::from_system`] reads
//! /proc and /sys); afterwards owned by the driver thread, where
//! [`reserve`](Ledger::reserve), [`release`](Ledger::release) and
//! [`get`](Ledger::get) never allocate: the entries live in a `Vec` created
//! with room for [`LEDGER_SLOTS`] threads and never grown (a new thread
//! beyond that is refused).

use std::fmt;

/// Threads the ledger can hold without allocating.
pub const LEDGER_SLOTS: usize = 1024;

/// Rounding slack when comparing bandwidth sums (a millionth of a CPU).
const EPS: f64 = 1e-9;

/// Where the system capacity figure came from ([`SystemBandwidth::read`]).
#[derive(Debug, Clone, PartialEq)]
pub struct SystemBandwidth {
    /// Online CPUs (`sysconf(_SC_NPROCESSORS_ONLN)`); admission is per root
    /// domain, which is all online CPUs unless cpusets split it.
    pub cpus: usize,
    /// `/proc/sys/kernel/sched_rt_runtime_us` (-1 = no limit).
    pub rt_runtime_us: i64,
    /// `/proc/sys/kernel/sched_rt_period_us`.
    pub rt_period_us: i64,
    /// Total bandwidth of the fair-class deadline servers (CPUs), summed over CPUs.
    pub fair_server: f64,
    /// Whether `fair_server` was read from
    /// `/sys/kernel/debug/sched/fair_server/cpu*/{runtime,period}` (else
    /// assumed: 50 ms / 1 s per CPU on kernels >= 6.12, none before).
    pub fair_server_read: bool,
}

impl SystemBandwidth {
    /// Reads the figures (see the field docs for the files). Allocates; not
    /// for real-time threads.
    pub fn read() -> Self {
        let num =
            |path: &str| -> Option<i64> { std::fs::read_to_string(path).ok()?.trim().parse().ok() };
        // SAFETY: sysconf has no memory arguments.
        let online = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) };
        let cpus = if online > 0 { online as usize } else { 1 };
        let rt_runtime_us = num("/proc/sys/kernel/sched_rt_runtime_us").unwrap_or(950_000);
        let rt_period_us = num("/proc/sys/kernel/sched_rt_period_us").unwrap_or(1_000_000);
        let mut fair_server = 0.0;
        let mut read = 0;
        for cpu in 0..cpus {
            let dir = format!("/sys/kernel/debug/sched/fair_server/cpu{cpu}");
            if let (Some(rt), Some(p)) = (
                num(&format!("{dir}/runtime")),
                num(&format!("{dir}/period")),
            ) {
                if p > 0 {
                    fair_server += rt as f64 / p as f64;
                    read += 1;
                }
            }
        }
        let fair_server_read = read == cpus;
        if !fair_server_read {
            fair_server = if kernel_at_least(6, 12) {
                0.05 * cpus as f64
            } else {
                0.0
            };
        }
        SystemBandwidth {
            cpus,
            rt_runtime_us,
            rt_period_us,
            fair_server,
            fair_server_read,
        }
    }

    /// Usable SCHED_DEADLINE bandwidth (CPUs): cpus x rt_runtime/rt_period
    /// minus the fair servers; cpus when the RT limit is off (-1).
    pub fn capacity(&self) -> f64 {
        if self.rt_runtime_us < 0 || self.rt_period_us <= 0 {
            return self.cpus as f64;
        }
        let cap = self.cpus as f64 * self.rt_runtime_us as f64 / self.rt_period_us as f64;
        (cap - self.fair_server).max(0.0)
    }
}

impl fmt::Display for SystemBandwidth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:.3} CPU = {} CPUs x {}/{} us - fair server {:.3} ({})",
            self.capacity(),
            self.cpus,
            self.rt_runtime_us,
            self.rt_period_us,
            self.fair_server,
            if self.fair_server_read {
                "read from debugfs"
            } else {
                "assumed 50 ms/1 s per CPU"
            }
        )
    }
}

/// `uname` release is at least `major.minor`.
fn kernel_at_least(major: u32, minor: u32) -> bool {
    let Ok(rel) = std::fs::read_to_string("/proc/sys/kernel/osrelease") else {
        return true;
    };
    let mut it = rel
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|s| s.parse::<u32>().unwrap_or(0));
    let (a, b) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
    (a, b) >= (major, minor)
}

/// A refused reservation: what was asked, and what was free.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct AdmissionError {
    /// Thread the reservation was for.
    pub tid: i32,
    /// Bandwidth asked (CPUs).
    pub asked: f64,
    /// Bandwidth free for it (CPUs; for an existing thread, including what it already holds).
    pub free: f64,
    /// Ledger capacity (CPUs).
    pub capacity: f64,
}

impl fmt::Display for AdmissionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "reservation for thread {} refused: asked {:.3}, free {:.3} of {:.3} CPU",
            self.tid, self.asked, self.free, self.capacity
        )?;
        if self.asked <= self.free || self.asked.is_nan() {
            write!(
                f,
                " (ledger full: {LEDGER_SLOTS} threads, or invalid bandwidth)"
            )?;
        }
        Ok(())
    }
}

/// See the [module docs](self).
#[derive(Debug, Clone)]
pub struct Ledger {
    capacity: f64,
    entries: Vec<(i32, f64)>,
}

impl Ledger {
    /// A ledger with the system's usable SCHED_DEADLINE bandwidth
    /// ([`SystemBandwidth::capacity`]). Reads /proc and debugfs; allocates.
    pub fn from_system() -> Ledger {
        Ledger::with_capacity(SystemBandwidth::read().capacity())
    }

    /// A ledger of `capacity` CPUs (allocates room for [`LEDGER_SLOTS`] threads).
    pub fn with_capacity(capacity: f64) -> Ledger {
        Ledger {
            capacity: capacity.max(0.0),
            entries: Vec::with_capacity(LEDGER_SLOTS),
        }
    }

    /// Capacity (CPUs).
    pub fn capacity(&self) -> f64 {
        self.capacity
    }

    /// Bandwidth reserved (CPUs).
    ///
    /// Real-time safe.
    pub fn used(&self) -> f64 {
        self.entries.iter().map(|e| e.1).sum()
    }

    /// Capacity minus used (CPUs, >= 0).
    ///
    /// Real-time safe.
    pub fn free(&self) -> f64 {
        (self.capacity - self.used()).max(0.0)
    }

    /// Reserves `bandwidth` for `tid`, or changes what `tid` holds. Refused
    /// (and nothing changed) if it does not fit, if `bandwidth` is negative or
    /// not finite, or if a new thread would exceed [`LEDGER_SLOTS`]. No allocation.
    ///
    /// Real-time safe.
    pub fn reserve(&mut self, tid: i32, bandwidth: f64) -> Result<(), AdmissionError> {
        let at = self.entries.iter().position(|e| e.0 == tid);
        let held = at.map_or(0.0, |i| self.entries[i].1);
        let free = (self.capacity - (self.used() - held)).max(0.0);
        let err = AdmissionError {
            tid,
            asked: bandwidth,
            free,
            capacity: self.capacity,
        };
        if !bandwidth.is_finite() || bandwidth < 0.0 || bandwidth > free + EPS {
            return Err(err);
        }
        match at {
            Some(i) => self.entries[i].1 = bandwidth,
            None if self.entries.len() < LEDGER_SLOTS => self.entries.push((tid, bandwidth)),
            None => return Err(err),
        }
        Ok(())
    }

    /// Forgets `tid`; returns the bandwidth it held (0 if none). No allocation.
    ///
    /// Real-time safe.
    pub fn release(&mut self, tid: i32) -> f64 {
        match self.entries.iter().position(|e| e.0 == tid) {
            Some(i) => self.entries.swap_remove(i).1,
            None => 0.0,
        }
    }

    /// What `tid` holds.
    ///
    /// Real-time safe.
    pub fn get(&self, tid: i32) -> Option<f64> {
        self.entries.iter().find(|e| e.0 == tid).map(|e| e.1)
    }

    /// Threads holding a reservation, with their bandwidth.
    ///
    /// Real-time safe.
    pub fn entries(&self) -> &[(i32, f64)] {
        &self.entries
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admission_refusal_reports_asked_and_free() {
        let mut l = Ledger::with_capacity(1.0);
        l.reserve(1, 0.6).unwrap();
        let e = l.reserve(2, 0.5).unwrap_err();
        assert_eq!(e.tid, 2);
        assert_eq!(e.asked, 0.5);
        assert!((e.free - 0.4).abs() < 1e-12);
        assert_eq!(e.capacity, 1.0);
        assert_eq!(
            e.to_string(),
            "reservation for thread 2 refused: asked 0.500, free 0.400 of 1.000 CPU"
        );
        assert_eq!(l.get(2), None, "refusal changes nothing");
        assert!((l.used() - 0.6).abs() < 1e-12);
    }

    #[test]
    fn release_returns_the_bandwidth() {
        let mut l = Ledger::with_capacity(1.8);
        l.reserve(1, 0.3).unwrap();
        l.reserve(2, 0.2).unwrap();
        assert_eq!(l.release(1), 0.3);
        assert_eq!(l.release(1), 0.0);
        assert_eq!(l.get(1), None);
        assert!((l.free() - 1.6).abs() < 1e-12);
    }

    #[test]
    fn update_of_an_existing_tid() {
        let mut l = Ledger::with_capacity(1.0);
        l.reserve(1, 0.5).unwrap();
        l.reserve(2, 0.3).unwrap();
        // Growing counts what tid 1 already holds as free for it.
        l.reserve(1, 0.7).unwrap();
        assert_eq!(l.get(1), Some(0.7));
        let e = l.reserve(1, 0.8).unwrap_err();
        assert!((e.free - 0.7).abs() < 1e-12);
        assert_eq!(
            l.get(1),
            Some(0.7),
            "refused update keeps the old bandwidth"
        );
        l.reserve(1, 0.1).unwrap();
        assert!((l.used() - 0.4).abs() < 1e-12);
        assert_eq!(l.entries().len(), 2);
    }

    #[test]
    fn exact_fit_and_bad_values() {
        let mut l = Ledger::with_capacity(0.3);
        l.reserve(1, 0.1).unwrap();
        l.reserve(2, 0.2).unwrap(); // 0.1 + 0.2 != 0.3 in f64, still fits
        assert!(l.reserve(3, f64::NAN).is_err());
        assert!(l.reserve(3, -0.1).is_err());
        assert!(l.reserve(3, 0.0).is_ok());
    }

    #[test]
    fn never_grows_past_its_slots() {
        let mut l = Ledger::with_capacity(1e9);
        let ptr = l.entries().as_ptr();
        for tid in 0..LEDGER_SLOTS as i32 {
            l.reserve(tid, 1.0).unwrap();
        }
        let e = l.reserve(-1, 1.0).unwrap_err();
        assert!(e.to_string().contains("ledger full"), "{e}");
        assert_eq!(l.entries().as_ptr(), ptr);
    }

    #[test]
    fn system_capacity_is_plausible() {
        let s = SystemBandwidth::read();
        assert!(s.cpus >= 1);
        let cap = s.capacity();
        assert!(cap > 0.0 && cap <= s.cpus as f64, "{s}");
        assert_eq!(Ledger::from_system().capacity(), cap);
    }
}
