//! The two tracers that record a process's blocking-call and wake-up events
//! into the [`crate::events`] model: [`ptrace`] (as in "The Wizard of OS: a
//! Heartbeat for Legacy Multimedia Applications": the process stops at each
//! system-call entry and exit) and [`kernel`] (the raw_syscalls tracepoints
//! through perf events: the process never stops). [`trace`] runs on the
//! caller's thread (ptrace requires every request from the attaching thread)
//! plus a watchdog thread that ends the trace on time or on request.

pub mod kernel;
pub mod ptrace;
mod stop;

use crate::events::{Event, SyscallSet};
use serde::Serialize;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Which tracer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Tracer {
    /// ptrace: stops at every system call (the paper's tracer).
    Ptrace,
    /// perf-event tracepoints: never stops the process.
    Kernel,
}

impl std::str::FromStr for Tracer {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "ptrace" => Ok(Self::Ptrace),
            "kernel" => Ok(Self::Kernel),
            _ => Err(format!("unknown tracer '{s}' (ptrace or kernel)")),
        }
    }
}

/// What to trace and for how long.
#[derive(Debug, Clone)]
pub struct Options {
    /// The process (thread-group id).
    pub pid: i32,
    /// How long to trace.
    pub duration: Duration,
    /// The system calls of interest.
    pub syscalls: SyscallSet,
    /// Capacity of the preallocated event array.
    pub capacity: usize,
    /// Set to end the trace early (e.g. from a SIGINT handler).
    pub stop: Arc<AtomicBool>,
    /// The CPU wake-up latency held while tracing.
    pub cpu_latency: CpuLatency,
}

/// Whether idle CPUs are held to a wake-up latency while tracing (a PM QoS
/// request on `/dev/cpu_dma_latency`, as cyclictest holds while it
/// measures). The ptrace tracer stamps each event when it wakes from
/// `waitpid`; on a CPU that went idle, that wake-up can wait for the CPU
/// to leave a deep sleep state (on a virtual machine, for the hypervisor
/// to run a halted virtual CPU again): measured here, a 60 Hz thread's
/// stamps then scatter by milliseconds and its detection confidence fell
/// below 0.9 in 5 traces of 15 (to 0.38), against 0.99–1.00 in all 15 with
/// idle CPUs held at 0 µs. The kernel
/// tracer's stamps are the kernel's own, so it does not need the request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuLatency {
    /// 0 µs (idle CPUs poll) with the ptrace tracer, nothing with the kernel one.
    Auto,
    /// Hold this latency (µs) whichever the tracer.
    Hold(u32),
    /// Leave idle states alone.
    Off,
}

impl CpuLatency {
    /// The latency to hold with `tracer`, if any.
    pub fn for_tracer(self, tracer: Tracer) -> Option<u32> {
        match (self, tracer) {
            (Self::Auto, Tracer::Ptrace) => Some(0),
            (Self::Auto, Tracer::Kernel) | (Self::Off, _) => None,
            (Self::Hold(us), _) => Some(us),
        }
    }
}

impl std::str::FromStr for CpuLatency {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "off" => Ok(Self::Off),
            _ => s
                .parse::<u32>()
                .ok()
                .filter(|&us| us <= resound_sched::cpu_latency::MAX_US)
                .map(Self::Hold)
                .ok_or_else(|| {
                    format!(
                        "CPU wake-up latency '{s}': auto, off or microseconds (0 to {})",
                        resound_sched::cpu_latency::MAX_US
                    )
                }),
        }
    }
}

impl Options {
    /// Trace `pid` for `duration` with the default events.
    pub fn new(pid: i32, duration: Duration) -> Self {
        Self {
            pid,
            duration,
            syscalls: crate::events::default_set(),
            capacity: 1 << 20,
            stop: Arc::new(AtomicBool::new(false)),
            cpu_latency: CpuLatency::Auto,
        }
    }
}

/// Why the trace ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum End {
    /// The duration elapsed.
    Timeout,
    /// The stop flag was set.
    Stopped,
    /// The process exited (every traced thread is gone).
    Exited,
}

/// A finished trace.
#[derive(Debug, Clone, Serialize)]
pub struct Trace {
    /// The events, sorted by time.
    #[serde(skip)]
    pub events: Vec<Event>,
    /// Every thread seen (including threads created while tracing).
    pub threads: Vec<i32>,
    /// Child processes created while tracing (followed by ptrace; reported by kernel).
    pub children: Vec<i32>,
    /// How many times the process called exec while traced.
    pub execs: u32,
    /// Events lost (array full or kernel ring overrun).
    pub lost: u64,
    /// Why it ended.
    pub end: End,
    /// How long it ran, ns.
    pub elapsed_ns: u64,
    /// Which tracer.
    pub tracer: Tracer,
    /// The CPU wake-up latency (µs) held while tracing; None: not held.
    pub cpu_latency_us: Option<u32>,
    /// Why the latency asked for could not be held (the trace ran without).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cpu_latency_error: Option<String>,
}

/// Tracing could not start or failed.
#[derive(Debug, thiserror::Error)]
pub enum TraceError {
    /// No such process.
    #[error("no process with PID {0}")]
    NoProcess(i32),
    /// Not permitted.
    #[error("cannot trace PID {pid} (user {user}): permission denied; {}", who_may(.user))]
    Permission {
        /// The process.
        pid: i32,
        /// Its owner's name (or uid).
        user: String,
    },
    /// The kernel tracer is not available here.
    #[error("kernel tracer unavailable: {0}")]
    Unavailable(String),
    /// Another system error.
    #[error("{what}: {source}")]
    Os {
        /// What failed.
        what: String,
        /// The error.
        source: std::io::Error,
    },
}

/// Who may trace a process of `user`.
fn who_may(user: &str) -> String {
    if user == "root" {
        "only root may trace it".into()
    } else {
        format!("run as {user} or as root")
    }
}

/// Trace `opts.pid` with `tracer`.
pub fn trace(tracer: Tracer, opts: &Options) -> Result<Trace, TraceError> {
    check_process(opts.pid)?;
    let held = opts
        .cpu_latency
        .for_tracer(tracer)
        .map(resound_sched::cpu_latency::hold);
    let mut tr = match tracer {
        Tracer::Ptrace => ptrace::trace(opts),
        Tracer::Kernel => kernel::trace(opts),
    }?;
    // The request is withdrawn here, when `held` drops, after the trace.
    match held {
        Some(Ok(r)) => tr.cpu_latency_us = Some(r.us),
        Some(Err(e)) => tr.cpu_latency_error = Some(e),
        None => {}
    }
    Ok(tr)
}

/// The threads of `pid` now.
pub fn threads_of(pid: i32) -> Vec<i32> {
    let mut v: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    v.sort_unstable();
    v
}

/// Does `pid` exist (as a process, not a thread of another)?
pub fn check_process(pid: i32) -> Result<(), TraceError> {
    if pid <= 0 || !std::path::Path::new(&format!("/proc/{pid}/task/{pid}")).exists() {
        return Err(TraceError::NoProcess(pid));
    }
    Ok(())
}

/// The permission error for `pid`, naming its owner.
pub fn permission_error(pid: i32) -> TraceError {
    use std::os::unix::fs::MetadataExt;
    let uid = std::fs::metadata(format!("/proc/{pid}"))
        .map(|m| m.uid())
        .ok();
    let user = uid.map(user_name).unwrap_or_else(|| "?".into());
    TraceError::Permission { pid, user }
}

fn user_name(uid: u32) -> String {
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    passwd
        .lines()
        .map(|l| l.split(':').collect::<Vec<_>>())
        .find(|f| f.len() > 2 && f[2] == uid.to_string())
        .map(|f| f[0].to_string())
        .unwrap_or_else(|| uid.to_string())
}

/// CLOCK_MONOTONIC now, ns.
pub(crate) fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    use super::{CpuLatency, Tracer};

    #[test]
    fn cpu_latency_is_held_for_ptrace_by_default_and_parsed_with_its_range() {
        assert_eq!(CpuLatency::Auto.for_tracer(Tracer::Ptrace), Some(0));
        assert_eq!(CpuLatency::Auto.for_tracer(Tracer::Kernel), None);
        assert_eq!(CpuLatency::Off.for_tracer(Tracer::Ptrace), None);
        assert_eq!(CpuLatency::Hold(20).for_tracer(Tracer::Kernel), Some(20));
        assert_eq!("auto".parse::<CpuLatency>(), Ok(CpuLatency::Auto));
        assert_eq!("off".parse::<CpuLatency>(), Ok(CpuLatency::Off));
        assert_eq!("0".parse::<CpuLatency>(), Ok(CpuLatency::Hold(0)));
        assert_eq!(
            "1000000".parse::<CpuLatency>(),
            Ok(CpuLatency::Hold(1_000_000))
        );
        for bad in ["1000001", "-1", "", "fast"] {
            let e = bad.parse::<CpuLatency>().unwrap_err();
            assert!(e.contains("auto, off or microseconds"), "{bad}: {e}");
        }
    }
}
