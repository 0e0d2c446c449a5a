//! Time as the driver thread sees it: the [`Clock`] seam.
//!
//! The engine never reads the time, sleeps or waits on a futex by itself; it
//! asks its clock. [`MonotonicClock`] is the real one (CLOCK_MONOTONIC,
//! `clock_nanosleep`, CLOCK_THREAD_CPUTIME_ID, a real futex wait);
//! [`SimClock`] is a simulated one for deterministic tests: its time moves
//! only when the engine sleeps or waits, nothing really sleeps, and a hook
//! lets the test play the clients at those points.
//!
//! Runs on the driver thread (real-time); [`SimClock`] only in tests.

use resound_shm::sync::{futex, AtomicU32, Ordering};
use std::cell::{Cell, RefCell};
use std::rc::Rc;

/// The driver thread's source of time, sleep and futex waits.
pub trait Clock {
    /// Now, on the clock the cycle deadlines are on (ns). Real-time safe.
    fn now_ns(&self) -> u64;
    /// Sleeps until the absolute time `deadline_ns` (returns at once if it
    /// passed). Real-time safe.
    fn sleep_until(&self, deadline_ns: u64);
    /// CPU time the calling thread used so far (ns). Real-time safe.
    fn thread_cpu_ns(&self) -> u64;
    /// Waits until `word` differs from `seen` or the absolute time
    /// `deadline_ns` passed (None: no deadline). An early wake-up on the
    /// word ([`futex::wake_early`]: a client starting its cycle) does not
    /// end the sleep: the driver would only look and sleep again. Real-time
    /// safe (it blocks only for the graph the driver waits on, bounded by
    /// the deadline).
    fn wait_changed(&self, word: &AtomicU32, seen: u32, deadline_ns: Option<u64>) -> futex::Wait;
}

/// The real clock: CLOCK_MONOTONIC and a real futex.
#[derive(Debug, Clone, Copy, Default)]
pub struct MonotonicClock;

impl Clock for MonotonicClock {
    /// CLOCK_MONOTONIC. Real-time safe.
    fn now_ns(&self) -> u64 {
        resound_shm::time::monotonic_ns()
    }
    /// `clock_nanosleep(TIMER_ABSTIME)`. Real-time safe.
    fn sleep_until(&self, deadline_ns: u64) {
        resound_shm::time::sleep_until(deadline_ns)
    }
    /// CLOCK_THREAD_CPUTIME_ID. Real-time safe.
    fn thread_cpu_ns(&self) -> u64 {
        resound_shm::time::thread_cpu_ns()
    }
    /// FUTEX_WAIT_BITSET with an absolute CLOCK_MONOTONIC deadline, deaf
    /// to early wake-ups ([`futex::wait_released`]). Real-time safe.
    fn wait_changed(&self, word: &AtomicU32, seen: u32, deadline_ns: Option<u64>) -> futex::Wait {
        futex::wait_released(word, seen, deadline_ns)
    }
}

/// Where the engine handed control to a [`SimClock`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SimPoint {
    /// The engine sleeps until this absolute time (between cycles).
    Sleep {
        /// Absolute wake-up time (ns).
        until_ns: u64,
    },
    /// The engine waits for the graph's end, at most until this absolute time.
    Wait {
        /// Absolute deadline (ns), if any.
        deadline_ns: Option<u64>,
    },
}

/// What a test runs when the engine sleeps or waits (it plays the clients).
pub type SimHook = Box<dyn FnMut(&SimClock, SimPoint)>;

struct SimState {
    now: Cell<u64>,
    cpu: Cell<u64>,
    oversleep: Cell<u64>,
    hook: RefCell<Option<SimHook>>,
}

/// A simulated clock for tests: single-threaded, cheap to clone (clones
/// share the time). Time advances only when the engine sleeps (to the
/// deadline, plus any [`SimClock::oversleep`]) or when a wait times out (to
/// its deadline); nothing really sleeps.
#[derive(Clone)]
pub struct SimClock(Rc<SimState>);

impl Default for SimClock {
    fn default() -> Self {
        SimClock::new(1_000_000_000)
    }
}

impl SimClock {
    /// A clock that reads `start_ns`.
    pub fn new(start_ns: u64) -> SimClock {
        SimClock(Rc::new(SimState {
            now: Cell::new(start_ns),
            cpu: Cell::new(0),
            oversleep: Cell::new(0),
            hook: RefCell::new(None),
        }))
    }

    /// Installs the hook called at every sleep and wait (replaces any other).
    pub fn set_hook(&self, hook: impl FnMut(&SimClock, SimPoint) + 'static) {
        *self.0.hook.borrow_mut() = Some(Box::new(hook));
    }

    /// Moves the time forward by `ns` (a test's client "runs" for that long).
    pub fn advance(&self, ns: u64) {
        self.0.now.set(self.0.now.get() + ns);
    }

    /// The next sleep wakes `ns` after its deadline (a stalled machine).
    pub fn oversleep(&self, ns: u64) {
        self.0.oversleep.set(ns);
    }

    /// Adds `ns` to the CPU time the driver thread reads.
    pub fn burn_cpu(&self, ns: u64) {
        self.0.cpu.set(self.0.cpu.get() + ns);
    }

    fn call_hook(&self, p: SimPoint) {
        // Taken out while it runs, so the hook may use the clock freely.
        let hook = self.0.hook.borrow_mut().take();
        if let Some(mut h) = hook {
            h(self, p);
            let mut slot = self.0.hook.borrow_mut();
            if slot.is_none() {
                *slot = Some(h);
            }
        }
    }
}

impl Clock for SimClock {
    /// The simulated time.
    fn now_ns(&self) -> u64 {
        self.0.now.get()
    }
    /// Runs the hook, then jumps to the deadline (plus any oversleep).
    fn sleep_until(&self, deadline_ns: u64) {
        self.call_hook(SimPoint::Sleep {
            until_ns: deadline_ns,
        });
        let late = self.0.oversleep.replace(0);
        self.0.now.set(self.now_ns().max(deadline_ns) + late);
    }
    /// The simulated CPU time ([`SimClock::burn_cpu`]).
    fn thread_cpu_ns(&self) -> u64 {
        self.0.cpu.get()
    }
    /// Runs the hook; if the word did not change, the wait times out at its
    /// deadline (a wait without deadline also returns, to never hang a test).
    fn wait_changed(&self, word: &AtomicU32, seen: u32, deadline_ns: Option<u64>) -> futex::Wait {
        let v = word.load(Ordering::Acquire);
        if v != seen {
            return futex::Wait::Changed(v);
        }
        self.call_hook(SimPoint::Wait { deadline_ns });
        let v = word.load(Ordering::Acquire);
        if v != seen {
            return futex::Wait::Changed(v);
        }
        if let Some(d) = deadline_ns {
            self.0.now.set(self.now_ns().max(d));
        }
        futex::Wait::TimedOut
    }
}
