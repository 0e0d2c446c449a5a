//! Reservations for the real-time threads JACK clients create
//! (`jack_client_create_thread`) or raise (`jack_acquire_real_time_scheduling`):
//! `Request::ReserveThread`.
//!
//! Bagnoli's thesis "Design and development of a mechanism for low-latency
//! real time audio processing on Linux" attached such threads to the JACK
//! reservation through libgettid; here each gets its own SCHED_DEADLINE
//! reservation, like a client's process thread: period = audio period x the
//! multiplier in use, budget from a feedback [`Controller`] with the graph's
//! settings, admitted in the driver thread's ledger (the same
//! `Command::External` path as `resound legacy`), so the graph and the
//! helper threads are admitted against one capacity. When admission (or
//! the kernel) refuses, the thread gets SCHED_FIFO one below the driver's
//! priority, as a refused process thread does, and the log says so.
//!
//! The driver thread does not measure these threads (they do not run in the
//! cycle). The housekeeping thread does, every [`TICK`]: it reads the
//! thread's CPU time from `/proc/PID/task/TID/schedstat` and feeds the
//! controller the CPU used per audio period averaged over the tick (the
//! percentile is taken over those averages; a helper thread's work need not
//! follow the cycle). A changed budget is admitted and applied there.
//!
//! Released: on `on: false` (libjack sends it when the thread's routine
//! returns, after the thread left its reservation itself, or on
//! `jack_drop_real_time_scheduling`), when the thread is found gone, and
//! when the client's session ends (a thread still alive then is put back to
//! SCHED_OTHER: it no longer belongs to a JACK client).
//!
//! Threads: session threads (requests) and the housekeeping thread (ticks),
//! both under the state lock; the wait for the driver's admission answer is
//! at most a few periods.

use super::dispatch::need_client;
use super::{Server, State};
use resound_protocol::wire::{Reply, ReservationStatus, WireError};
use resound_sched::{Controller, Policy, Reservation};
use resound_shm::sync::Ordering;
use std::time::{Duration, Instant};
use tracing::{info, warn};

/// How often the housekeeping thread measures the threads and updates budgets.
pub(super) const TICK: Duration = Duration::from_millis(100);

/// How many ticks the controller's percentile looks at (2 s).
const WINDOW_TICKS: usize = 20;

/// One client thread the server schedules.
pub(super) struct ClientThread {
    /// Session that registered it.
    session: u64,
    /// Client slot.
    slot: u32,
    /// Process id (the session's peer).
    pid: u32,
    /// Kernel thread id.
    tid: i32,
    /// Under SCHED_DEADLINE (admitted in the ledger); false: the SCHED_FIFO fallback.
    reserved: bool,
    /// The reservation applied last (what the ledger holds for it).
    applied: Reservation,
    /// Its budget controller.
    ctl: Controller,
    /// Last CPU-time reading (ns) and when it was taken.
    last: Option<(u64, Instant)>,
    /// CPU used per audio period over the last tick (ns).
    used_ns: u64,
    /// Budget updates applied.
    updates: u64,
}

/// CPU time (ns) thread `tid` of process `pid` has used: the first field of
/// `/proc/PID/task/TID/schedstat`. None when the thread is gone.
pub(super) fn thread_cpu_ns(pid: u32, tid: i32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat")).ok()?;
    s.split_whitespace().next()?.parse().ok()
}

impl Server {
    /// Handles `ReserveThread { tid, on }` from session `id`.
    pub(super) fn reserve_thread(
        &self,
        st: &mut State,
        id: u64,
        slot: Option<u32>,
        tid: i32,
        on: bool,
    ) -> Result<Reply, WireError> {
        let me = need_client(slot)?;
        let pid = st.sessions.get(&id).map_or(0, |s| s.pid);
        if !on {
            if let Some(i) = st
                .client_threads
                .iter()
                .position(|t| t.session == id && t.tid == tid)
            {
                let t = st.client_threads.swap_remove(i);
                self.release_thread(&t, false);
            }
            return Ok(Reply::Ok);
        }
        self.check_tid(pid, tid)?;
        let Some(cfg) = self.deadline_config() else {
            return Ok(Reply::Ok);
        };
        if st.client_threads.iter().any(|t| t.tid == tid) {
            return Ok(Reply::Ok);
        }
        let mut ctl = Controller::new(resound_sched::ControllerConfig {
            window: WINDOW_TICKS.min(cfg.window),
            ..cfg
        });
        let _ = ctl.on_activation();
        let mut t = ClientThread {
            session: id,
            slot: me,
            pid,
            tid,
            reserved: false,
            applied: ctl.reservation(),
            ctl,
            last: None,
            used_ns: 0,
            updates: 0,
        };
        let who = self.thread_owner(st, me, tid);
        let r = t.ctl.reservation();
        match self.admit_and_apply(tid, &r) {
            Ok(()) => {
                t.reserved = true;
                info!(
                    "{who}: SCHED_DEADLINE reservation {}",
                    r.policy(cfg.reclaim)
                );
            }
            Err(why) => {
                let prio = (self.cfg.server.priority - 1).max(1);
                let got = match resound_sched::apply(tid, &Policy::Fifo { priority: prio }) {
                    Ok(()) => format!("SCHED_FIFO {prio}"),
                    Err(e) => format!("its own scheduling ({e})"),
                };
                warn!("{who}: no SCHED_DEADLINE reservation ({why}); running {got}");
            }
        }
        st.client_threads.push(t);
        Ok(Reply::Ok)
    }

    /// The controller settings of the graph's threads (None unless the
    /// server runs `--sched deadline` and it was permitted).
    fn deadline_config(&self) -> Option<resound_sched::ControllerConfig> {
        if !self.deadline_mode {
            return None;
        }
        let mut cfg = super::sched_mode::controller_config(&self.cfg);
        cfg.audio_period_ns = self.view.header().period_ns.load(Ordering::Relaxed);
        // Not in the cycle, so a hold after a stall loses no block: the
        // thesis' floor whatever --min-budget says, which books the least.
        cfg.min_pct = resound_sched::controller::THESIS_MIN_BUDGET_PCT;
        Some(cfg)
    }

    /// "client NAME thread TID", for logs.
    fn thread_owner(&self, st: &State, slot: u32, tid: i32) -> String {
        let name = st.graph.client(slot).map_or("?", |c| c.name.as_str());
        format!("client {name:?} thread {tid}")
    }

    /// Admits `r` in the ledger (replacing what `tid` held) and applies it.
    /// Err says why not (the ledger entry is then released).
    fn admit_and_apply(&self, tid: i32, r: &Reservation) -> Result<(), String> {
        let v = self.thread_admission(tid, r.bandwidth())?;
        if !v.ok {
            return Err(format!(
                "needs {:.3} CPU, {:.3} free in the ledger",
                r.bandwidth(),
                v.free
            ));
        }
        let reclaim = self.cfg.server.reclaim();
        resound_sched::apply(tid, &r.policy(reclaim)).map_err(|e| {
            let _ = self.thread_admission(tid, 0.0);
            e.to_string()
        })
    }

    /// One ledger request through the driver thread (0 releases).
    fn thread_admission(
        &self,
        tid: i32,
        bandwidth: f64,
    ) -> Result<resound_engine::ExternalVerdict, String> {
        self.external_command(tid, bandwidth).map_err(|e| e.message)
    }

    /// Forgets a thread: releases its ledger entry; `reset` also puts a
    /// thread still alive back to SCHED_OTHER.
    fn release_thread(&self, t: &ClientThread, reset: bool) {
        if t.reserved {
            let _ = self.thread_admission(t.tid, 0.0);
        }
        if reset && thread_cpu_ns(t.pid, t.tid).is_some() {
            let _ = resound_sched::apply(t.tid, &Policy::Other);
        }
    }

    /// Session `id` ended: every thread it registered is released.
    pub(super) fn release_client_threads(&self, st: &mut State, id: u64) {
        let (mine, rest) = std::mem::take(&mut st.client_threads)
            .into_iter()
            .partition(|t| t.session == id);
        st.client_threads = rest;
        for t in mine {
            self.release_thread(&t, true);
        }
    }

    /// Housekeeping thread, every [`TICK`]: measures every thread, follows
    /// the audio period, updates budgets; forgets threads that are gone.
    pub(super) fn tick_client_threads(&self) {
        let mut st = self.lock();
        if st.client_threads.is_empty() {
            return;
        }
        let period = self.view.header().period_ns.load(Ordering::Relaxed);
        let mut threads = std::mem::take(&mut st.client_threads);
        threads.retain_mut(|t| {
            let Some(cpu) = thread_cpu_ns(t.pid, t.tid) else {
                self.release_thread(t, false);
                return false;
            };
            self.sample_thread(t, cpu, period);
            true
        });
        st.client_threads = threads;
    }

    /// One measurement of a thread: CPU per audio period since the last one,
    /// fed to its controller; a new budget is admitted and applied.
    fn sample_thread(&self, t: &mut ClientThread, cpu: u64, period: u64) {
        let now = Instant::now();
        let prev = t.last.replace((cpu, now));
        let mut next = t.ctl.set_audio_period(period);
        if let Some((c0, t0)) = prev {
            let wall = now.duration_since(t0).as_nanos().max(1) as u64;
            let periods = (wall as f64 / period.max(1) as f64).max(1e-9);
            t.used_ns = (cpu.saturating_sub(c0) as f64 / periods).round() as u64;
            next = t.ctl.cycle_begin(t.used_ns).or(next);
        }
        if let (Some(r), true) = (next, t.reserved) {
            match self.update_thread(t.tid, &t.applied, &r) {
                Ok(()) => {
                    t.applied = r;
                    t.updates += 1;
                }
                // It keeps the reservation it has; the next change tries again.
                Err(why) => warn!(
                    "thread {} (pid {}): budget update to {} us refused ({why})",
                    t.tid,
                    t.pid,
                    r.runtime_ns / 1000
                ),
            }
        }
    }

    /// Admits and applies a new reservation `r` in place of `old`; on a
    /// refusal the ledger keeps `old`.
    fn update_thread(&self, tid: i32, old: &Reservation, r: &Reservation) -> Result<(), String> {
        let v = self.thread_admission(tid, r.bandwidth())?;
        if !v.ok {
            return Err(format!("{:.3} CPU free in the ledger", v.free));
        }
        let reclaim = self.cfg.server.reclaim();
        resound_sched::apply(tid, &r.policy(reclaim)).map_err(|e| {
            let _ = self.thread_admission(tid, old.bandwidth());
            e.to_string()
        })
    }

    /// The client threads, as status shows them (after the graph's threads).
    pub(super) fn client_thread_statuses(&self, st: &State) -> Vec<ReservationStatus> {
        st.client_threads
            .iter()
            .map(|t| {
                let r = t.applied;
                let dl = t.reserved;
                ReservationStatus {
                    name: format!(
                        "{} thread {}",
                        st.graph.client(t.slot).map_or("?", |c| c.name.as_str()),
                        t.tid
                    ),
                    slot: t.slot,
                    tid: t.tid,
                    policy: if dl { "SCHED_DEADLINE" } else { "SCHED_FIFO" }.into(),
                    period_ns: if dl { r.period_ns } else { 0 },
                    budget_ns: if dl { r.runtime_ns } else { 0 },
                    deadline_ns: if dl { r.deadline_ns } else { 0 },
                    predicted_ns: if dl { t.ctl.predicted_ns() } else { 0 },
                    used_ns: t.used_ns,
                    throttles: 0,
                    xruns: 0,
                    updates: t.updates,
                    rescues: 0,
                }
            })
            .collect()
    }
}
