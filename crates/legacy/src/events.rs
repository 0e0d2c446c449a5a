//! The event model the tracers fill and the detector reads: per thread,
//! time-stamped entries into and exits from blocking system calls, and
//! scheduler wake-ups. Plain data; used on any thread (the tracers fill a
//! preallocated [`EventBuf`] on their own thread).

mod io;
mod syscalls;

pub use io::{read_trace, write_trace, TraceFileError};
pub use syscalls::{default_set, parse_set, syscall_name, syscall_nr, SyscallSet, DEFAULT};

use serde::{Deserialize, Serialize};

/// What happened.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "nr", rename_all = "snake_case")]
pub enum Kind {
    /// The thread entered system call `nr` (x86-64 numbering on x86-64).
    SysEnter(i64),
    /// The thread returned from system call `nr`.
    SysExit(i64),
    /// The scheduler made the thread runnable (kernel tracer, `sched_wakeup`).
    Wakeup,
}

/// One event of one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// Kernel thread id.
    pub tid: i32,
    /// CLOCK_MONOTONIC time of the event, in nanoseconds.
    pub t_ns: u64,
    /// What happened.
    #[serde(flatten)]
    pub kind: Kind,
}

impl Event {
    /// Is this the moment the thread came back to run (a blocking call
    /// returned, or a wake-up)? These instants mark job activations.
    pub fn is_activation(&self) -> bool {
        matches!(self.kind, Kind::SysExit(_) | Kind::Wakeup)
    }
}

/// A fixed-capacity event array filled while tracing: [`EventBuf::push`]
/// never allocates; events past the capacity are counted, not stored.
#[derive(Debug)]
pub struct EventBuf {
    events: Vec<Event>,
    dropped: u64,
}

impl EventBuf {
    /// An empty buffer with room for `capacity` events (allocated now).
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            events: Vec::with_capacity(capacity),
            dropped: 0,
        }
    }

    /// Store `e`, or count it as dropped when full. Never allocates.
    pub fn push(&mut self, e: Event) {
        if self.events.len() < self.events.capacity() {
            self.events.push(e);
        } else {
            self.dropped += 1;
        }
    }

    /// Events that did not fit.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }

    /// The events stored, in the order they were pushed.
    pub fn events(&self) -> &[Event] {
        &self.events
    }

    /// The events, sorted by time.
    pub fn into_sorted(mut self) -> Vec<Event> {
        self.events.sort_by_key(|e| (e.t_ns, e.tid));
        self.events
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffer_counts_what_does_not_fit() {
        let mut b = EventBuf::with_capacity(2);
        for i in 0..5 {
            b.push(Event {
                tid: 1,
                t_ns: 10 - i,
                kind: Kind::Wakeup,
            });
        }
        assert_eq!(b.events().len(), 2);
        assert_eq!(b.dropped(), 3);
        let v = b.into_sorted();
        assert!(v[0].t_ns < v[1].t_ns);
    }

    #[test]
    fn activation_is_exit_or_wakeup() {
        let e = |kind| Event {
            tid: 1,
            t_ns: 0,
            kind,
        };
        assert!(e(Kind::SysExit(0)).is_activation());
        assert!(e(Kind::Wakeup).is_activation());
        assert!(!e(Kind::SysEnter(0)).is_activation());
    }
}
