//! Housekeeping: drains the driver's event ring (xruns, late wake-ups,
//! reservations granted, refused or fallen back, corrupt activation
//! records), logs them without flooding, notifies clients of xruns, and in
//! `--deadlines critical-path` mode keeps each client's relative deadline at
//! its place on the graph's critical path.
//!
//! Everything here that consumes `crate::engine::RtEvent` or names
//! `crate::reserve` is kept together so it can follow those modules when
//! they move.
//!
//! Threads: the housekeeping thread (not real-time), every 5 ms.

use super::zombie::{EvictRule, LateStreaks};
use super::Server;
use crate::config::DeadlineChoice;
use resound_engine::RtEvent;
use resound_engine::{kind, Command};
use resound_graph::CriticalPath;
use resound_protocol::wire::{LateClient, Notification, XrunRecord};
use resound_shm::sync::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::{error, info, warn};

/// At most this many xrun lines per second; the rest are summarised once a
/// second. A line is logged only for an xrun that names a client not yet
/// named in the current second, so a client late cycle after cycle costs
/// one line and one summary a second, never one line per cycle.
const XRUN_WARNINGS_PER_SECOND: u64 = 5;

/// How many xruns `resound status` shows.
const RECENT_XRUNS: usize = 16;

/// One late node of the cycle being checked, as the driver reported it.
#[derive(Debug, Clone, Copy)]
struct Late {
    slot: u32,
    woken: bool,
    signal_us: u32,
    wake_delay_us: u32,
}

/// Counts one event of `slot` (an xrun, a refusal) in the current
/// one-second log window's per-slot `counts`: whether it is the slot's first
/// there (the first is logged, the rest summarised when the window ends);
/// None for a slot out of range.
fn first_in_window(counts: &mut [u64], slot: u32) -> Option<bool> {
    let n = counts.get_mut(slot as usize)?;
    *n += 1;
    Some(*n == 1)
}

/// How often critical-path deadlines are recomputed.
const DEADLINE_REFRESH: Duration = Duration::from_millis(250);

/// The housekeeping thread's own bookkeeping.
struct Housekeeping {
    /// Nodes reported late in the cycle being checked.
    late: Vec<Late>,
    /// Slots that ran short themselves in the cycle being checked, with
    /// their run of late cycles when it reached the eviction rule.
    to_evict: Vec<(u32, u64)>,
    /// Runs of late cycles per slot (the eviction rule).
    streaks: LateStreaks,
    /// Xrun warnings logged in the current one-second window.
    logged: u64,
    /// Xruns not logged in the current window.
    suppressed: u64,
    /// Per slot: late cycles in the current window.
    window_late: Vec<u64>,
    /// Per slot: reservations refused in the current window (the first is
    /// logged, the rest summarised when the window ends).
    window_refused: Vec<u64>,
    /// Start of the current one-second window.
    window: Instant,
    /// Whether critical-path deadlines are maintained.
    critical_path: bool,
    /// When deadlines were last recomputed.
    deadline_tick: Instant,
    /// Last measurement of the clients' own real-time threads.
    threads_tick: Instant,
    /// Per slot: the relative deadline last sent (ns; 0 = none yet).
    sent_deadlines: Vec<u64>,
    /// A graph table the driver has not taken yet: the switch generation it
    /// waits behind, and since when it has been seen waiting.
    pending: Option<(u32, Instant)>,
}

impl Server {
    /// The housekeeping thread's loop, until the server stops.
    pub(super) fn housekeeping(self: Arc<Self>, mut rx: rtrb::Consumer<RtEvent>) {
        let slots = self.engine.res.len();
        let mut hk = Housekeeping {
            late: Vec::new(),
            to_evict: Vec::new(),
            streaks: LateStreaks::new(EvictRule::from_args(&self.cfg.server), slots),
            logged: 0,
            suppressed: 0,
            window_late: vec![0; slots],
            window_refused: vec![0; slots],
            window: Instant::now(),
            critical_path: self.deadline_mode
                && self.cfg.server.deadlines == DeadlineChoice::CriticalPath
                && self.cfg.server.period_multiplier == crate::config::PeriodMultiplier::Fixed(1),
            deadline_tick: Instant::now(),
            threads_tick: Instant::now(),
            sent_deadlines: vec![0u64; self.engine.res.len()],
            pending: None,
        };
        while !self.stopping.load(Ordering::Acquire) {
            while let Ok(ev) = rx.pop() {
                self.on_event(&mut hk, ev);
            }
            if hk.critical_path && hk.deadline_tick.elapsed() >= DEADLINE_REFRESH {
                hk.deadline_tick = Instant::now();
                self.update_deadlines(&mut hk.sent_deadlines);
            }
            if hk.window.elapsed() >= Duration::from_secs(1) {
                self.end_log_window(&mut hk);
                // Node segments of clients that left: addresses cleared,
                // then unmapped (`resound_shm::RETIRE_AFTER`).
                self.view.purge_retired();
            }
            if hk.threads_tick.elapsed() >= super::client_threads::TICK {
                hk.threads_tick = Instant::now();
                self.tick_client_threads();
            }
            self.watch_pending_table(&mut hk.pending);
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Says so (once) when a graph change has waited longer than
    /// `PUBLISH_WAIT` for the driver to take it (its thread is starved or
    /// stopped; connection changes are answered without waiting, so no
    /// request notices), and when the driver takes changes again.
    fn watch_pending_table(&self, pending: &mut Option<(u32, Instant)>) {
        use resound_shm::sync::switch;
        let v = self.view.header().switch.load(Ordering::Acquire);
        let waiting = v & switch::PENDING != 0 && self.engine.running.load(Ordering::Acquire);
        if !waiting {
            *pending = None;
            if self.driver_stalled.swap(false, Ordering::Relaxed) {
                tracing::info!("the audio driver takes graph changes again");
            }
            return;
        }
        let gen = switch::generation(v);
        let since = match *pending {
            Some((g, t)) if g == gen => t,
            _ => {
                *pending = Some((gen, Instant::now()));
                return;
            }
        };
        if since.elapsed() >= super::publish::PUBLISH_WAIT
            && !self.driver_stalled.swap(true, Ordering::Relaxed)
        {
            warn!(
                "the audio driver did not take a graph change within {:?}: its thread is starved or stopped; changes are applied when it runs again",
                super::publish::PUBLISH_WAIT
            );
        }
    }

    /// Handles one event from the driver.
    fn on_event(&self, hk: &mut Housekeeping, ev: RtEvent) {
        match ev {
            RtEvent::Late {
                slot,
                cycle,
                woken,
                signal_us,
                wake_delay_us,
            } => {
                hk.late.push(Late {
                    slot,
                    woken,
                    signal_us,
                    wake_delay_us,
                });
                let period = self.view.header().period_ns.load(Ordering::Relaxed);
                if let Some(run) = woken
                    .then(|| hk.streaks.on_late(slot, cycle, period))
                    .flatten()
                {
                    hk.to_evict.push((slot, run));
                }
            }
            RtEvent::CycleChecked { cycle } => {
                self.on_xrun(hk, cycle);
                let period = self.view.header().period_ns.load(Ordering::Relaxed);
                for (slot, run) in std::mem::take(&mut hk.to_evict) {
                    self.evict(slot, run, period);
                }
            }
            RtEvent::DriverLate { cycle, late_ns } => {
                warn!(
                    "driver woke {:.3} ms late before cycle {cycle}; skipped ahead",
                    late_ns as f64 / 1e6
                );
                let mut st = self.lock();
                Self::record_xrun(&mut st, cycle, "driver", late_ns, vec![]);
                Self::notify(
                    &mut st,
                    Notification::Xrun {
                        cycle,
                        late: vec![],
                    },
                );
            }
            RtEvent::DriverFault {
                cycle,
                fault: resound_engine::Fault::EndOfStream,
            } => info!("end of the stream after cycle {}", cycle.saturating_sub(1)),
            RtEvent::DriverFault { cycle, fault } => self.on_driver_fault(cycle, fault),
            RtEvent::DriverResumed { cycle } => {
                info!("audio device is back; cycles run on it again from cycle {cycle}");
                Self::notify(
                    &mut self.lock(),
                    Notification::Xrun {
                        cycle,
                        late: vec![],
                    },
                );
            }
            RtEvent::Reserved {
                slot,
                runtime_ns,
                period_ns,
            } => {
                info!(
                    "{}: SCHED_DEADLINE reservation {:.0}/{:.0} us",
                    self.slot_name(slot),
                    runtime_ns as f64 / 1e3,
                    period_ns as f64 / 1e3
                );
            }
            RtEvent::Refused {
                slot,
                asked_ppm,
                free_ppm,
                errno,
            } => {
                if first_in_window(&mut hk.window_refused, slot).unwrap_or(true) {
                    self.on_refused(slot, asked_ppm, free_ppm, errno);
                }
            }
            RtEvent::FloorsLowered => {
                self.floors_lowered.store(true, Ordering::Relaxed);
                warn!(
                    "the reservation ledger is full: every budget floor goes from {}% down to {}% of its period (--min-budget), for as long as this server runs",
                    self.cfg.server.min_budget_pct,
                    resound_sched::controller::THESIS_MIN_BUDGET_PCT
                )
            }
            RtEvent::Fallback { slot, fifo } => {
                warn!(
                    "{} runs {} instead of a reservation",
                    self.slot_name(slot),
                    if fifo { "SCHED_FIFO" } else { "SCHED_OTHER" }
                );
            }
            RtEvent::Rescued {
                slot,
                tid,
                hold_cycles,
            } => warn!(
                "{} (thread {tid}) was held by its reservation's throttle for a whole cycle without running (it owed its budget: a machine stall charged to it, or an overrun caught late); it runs SCHED_FIFO for {hold_cycles} cycles, then under its reservation again",
                self.slot_name(slot)
            ),
            RtEvent::RescueEnded { slot } => {
                info!("{}: under its reservation again", self.slot_name(slot))
            }
            RtEvent::Corrupt { slot, status } => self.on_corrupt(slot, status),
            RtEvent::StillReserved { slot, tid, ppm } => info!(
                "{} (thread {tid}) left the graph still under its reservation (stopped or hung: only the thread itself can drop it); its {:.3} CPU stays booked until it does or exits",
                self.slot_name(slot),
                ppm as f64 / 1e6
            ),
            RtEvent::LetGo { tid, ppm, held_ms } => info!(
                "thread {tid} dropped its reservation or exited {:.1} s after it left the graph: {:.3} CPU free again",
                held_ms as f64 / 1e3,
                ppm as f64 / 1e6
            ),
        }
    }

    /// A driver fault: logged; an xrun, a suspend or a lost device is told
    /// to the clients as an xrun.
    fn on_driver_fault(&self, cycle: u64, fault: resound_engine::Fault) {
        use resound_engine::Fault;
        match fault {
            Fault::Xrun => warn!("audio device xrun before cycle {cycle}; restarted it"),
            Fault::Suspended => warn!("audio device suspended before cycle {cycle}; resumed it"),
            Fault::DeviceLost => error!(
                "audio device lost before cycle {cycle}; cycles go on on the system clock, retrying the device every second"
            ),
            f => error!("audio driver fault before cycle {cycle}: {f:?}"),
        }
        if matches!(fault, Fault::Xrun | Fault::Suspended | Fault::DeviceLost) {
            Self::record_xrun(&mut self.lock(), cycle, "device", 0, vec![]);
            Self::notify(
                &mut self.lock(),
                Notification::Xrun {
                    cycle,
                    late: vec![],
                },
            );
        }
    }

    /// A checked cycle had late clients: counts, logs and notifies the xrun.
    fn on_xrun(&self, hk: &mut Housekeeping, cycle: u64) {
        let mut st = self.lock();
        let late: Vec<LateClient> = hk
            .late
            .iter()
            .filter_map(|l| {
                let known = |us: u32| (us != u32::MAX).then_some(us);
                Some(LateClient {
                    name: st.graph.client(l.slot)?.name.clone(),
                    ran_short: l.woken,
                    signal_us: known(l.signal_us),
                    wake_delay_us: known(l.wake_delay_us),
                })
            })
            .collect();
        let names: Vec<String> = late.iter().map(|l| l.name.clone()).collect();
        Self::record_xrun(&mut st, cycle, "clients", 0, late);
        let mut news = false;
        for &s in hk.late.iter().map(|l| &l.slot) {
            if let Some(x) = st.xruns.get_mut(s as usize) {
                *x += 1;
            }
            news |= first_in_window(&mut hk.window_late, s).unwrap_or(false);
        }
        hk.late.clear();
        if news && hk.logged < XRUN_WARNINGS_PER_SECOND {
            let who = if names.is_empty() {
                "a client that has left since".to_string()
            } else {
                names.join(", ")
            };
            warn!("xrun in cycle {cycle}: not finished in time: {who}");
            hk.logged += 1;
        } else {
            hk.suppressed += 1;
        }
        Self::notify(&mut st, Notification::Xrun { cycle, late: names });
    }

    /// Keeps an xrun's record for `resound status` (the last [`RECENT_XRUNS`]).
    fn record_xrun(
        st: &mut super::State,
        cycle: u64,
        cause: &str,
        driver_late_ns: u64,
        late: Vec<LateClient>,
    ) {
        if st.recent_xruns.len() == RECENT_XRUNS {
            st.recent_xruns.pop_front();
        }
        st.recent_xruns.push_back(XrunRecord {
            cycle,
            cause: cause.into(),
            driver_late_ns,
            late,
        });
    }

    /// A reservation was refused, by our ledger (`errno` 0) or the kernel.
    fn on_refused(&self, slot: u32, asked_ppm: u32, free_ppm: u32, errno: i32) {
        let by = if errno == 0 {
            format!(
                "resound's ledger (capacity {:.3} CPU)",
                self.ledger_capacity
            )
        } else {
            format!("the kernel ({})", std::io::Error::from_raw_os_error(errno))
        };
        warn!(
            "{}: reservation of {:.3} CPU refused by {by}; {:.3} CPU free",
            self.slot_name(slot),
            asked_ppm as f64 / 1e6,
            free_ppm as f64 / 1e6
        );
    }

    /// Ends a one-second window of refused reservations: one line per
    /// thread refused more than once, the first having been logged in full.
    fn summarise_refusals(&self, refused: &[u64]) {
        for (slot, &n) in refused.iter().enumerate().filter(|(_, &n)| n > 1) {
            warn!(
                "{}: {} more reservation refusal(s) in the last second",
                self.slot_name(slot as u32),
                n - 1
            );
        }
    }

    /// A client corrupted its activation record: drop it (once).
    fn on_corrupt(&self, slot: u32, status: u32) {
        let mut st = self.lock();
        if st.condemned.contains(&slot) {
            return;
        }
        st.condemned.push(slot);
        let name = st
            .graph
            .client(slot)
            .map(|c| c.name.clone())
            .unwrap_or_default();
        error!(
            "client {name:?} wrote an invalid status {status:#x} into its activation record; removing it"
        );
        if let Some(s) = st.sessions.values().find(|s| s.slot == Some(slot)) {
            let _ = s.stream.shutdown(std::net::Shutdown::Both);
        }
    }

    /// Ends a one-second log window: reports lost events and unlogged xruns.
    fn end_log_window(&self, hk: &mut Housekeeping) {
        let lost = self.engine.dropped_events.swap(0, Ordering::Relaxed);
        if lost > 0 {
            warn!("{lost} driver event(s) lost: the event ring was full");
        }
        if hk.suppressed > 0 {
            let st = self.lock();
            let per_client: Vec<String> = hk
                .window_late
                .iter()
                .enumerate()
                .filter(|(_, &n)| n > 0)
                .map(|(s, n)| match st.graph.client(s as u32) {
                    Some(c) => format!("{:?} late in {n}", c.name),
                    None => format!("slot {s} late in {n}"),
                })
                .collect();
            warn!(
                "{} more xrun(s) in the last second; cycles per client: {}",
                hk.suppressed,
                per_client.join(", ")
            );
        }
        self.summarise_refusals(&hk.window_refused);
        hk.window_late.fill(0);
        hk.window_refused.fill(0);
        hk.suppressed = 0;
        hk.logged = 0;
        hk.window = Instant::now();
    }

    /// Critical-path deadlines (see [`CriticalPath`]): each reserved client
    /// gets `period - head - tail` from the predicted work before and after
    /// it. Off the real-time path; sends only deadlines that moved by more
    /// than 5%.
    fn update_deadlines(&self, sent: &mut [u64]) {
        let compiled = self.lock().graph.compile();
        let period = self.view.header().period_ns.load(Ordering::Relaxed);
        let work: Vec<u64> = (0..compiled.clients.len())
            .map(|slot| self.expected_work(slot))
            .collect();
        let path = CriticalPath::of(&compiled, &work);
        for &slot in compiled.order.iter().skip(1) {
            let i = slot as usize;
            if self.engine.res[i].kind.load(Ordering::Relaxed) != kind::DEADLINE || i >= sent.len()
            {
                continue;
            }
            let d = path.deadline(slot, period, work[i]);
            if sent[i] == 0 || d.abs_diff(sent[i]) * 20 > sent[i] {
                sent[i] = d;
                self.command(Command::SetDeadline {
                    slot,
                    deadline_ns: d,
                });
            }
        }
    }

    /// A slot's expected CPU time per cycle (ns): the larger of its
    /// predicted and its last measured time.
    fn expected_work(&self, slot: usize) -> u64 {
        self.engine.res.get(slot).map_or(0, |r| {
            r.predicted_ns
                .load(Ordering::Relaxed)
                .max(r.used_ns.load(Ordering::Relaxed))
        })
    }

    /// A slot for logs: "driver", `client "name"`, or "slot N".
    fn slot_name(&self, slot: u32) -> String {
        if slot == 0 {
            return "driver".into();
        }
        self.lock().graph.client(slot).map_or_else(
            || format!("slot {slot}"),
            |c| format!("client {:?}", c.name),
        )
    }
}
