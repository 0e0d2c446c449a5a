//! What `resound status` (a [`crate::wire::Reply::Status`]) tells of a
//! running server: the driver, every client, every real-time thread's
//! scheduling and the last xruns with their causes.

use serde::{Deserialize, Serialize};

/// Server status.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Status {
    /// Server name.
    pub server: String,
    /// Driver name ("dummy").
    pub driver: String,
    /// Sample rate (Hz).
    pub sample_rate: u32,
    /// Period (frames).
    pub buffer_frames: u32,
    /// "sync" or "async".
    pub mode: String,
    /// Cycles run.
    pub cycles: u64,
    /// Xruns counted.
    pub xruns: u64,
    /// Graph switches applied.
    pub graph_version: u64,
    /// Driver thread scheduling ("SCHED_FIFO 10", "SCHED_OTHER").
    pub driver_sched: String,
    /// Driver thread CPU time last cycle (ns).
    pub driver_cpu_ns: u64,
    /// Every client.
    pub clients: Vec<ClientStatus>,
    /// Scheduling mode of the graph's real-time threads ("deadline (feedback)", "fifo 10", ...).
    pub sched: String,
    /// Bandwidth admitted by the server's ledger (CPUs).
    pub ledger_used: f64,
    /// Of `ledger_used`, what threads that left the graph still hold: the
    /// kernel keeps a stopped or hung thread's reservation until it runs
    /// again and drops it, or dies (CPUs).
    #[serde(default)]
    pub ledger_departed: f64,
    /// Bandwidth the ledger may admit (CPUs).
    pub ledger_capacity: f64,
    /// One entry per real-time thread of the graph (driver first).
    pub reservations: Vec<ReservationStatus>,
    /// Audio periods per reservation period in use now (`--period-multiplier`;
    /// with `auto` it follows the buffer size). 1 without reservations.
    pub period_multiplier: u32,
    /// The `--period-multiplier` rule: the multiplier's floor (N, or 1 for `auto`).
    pub multiplier_floor: u32,
    /// The `--period-multiplier auto` minimum reservation period (ns; 0: a fixed N).
    pub multiplier_min_period_ns: u64,
    /// The graph's threads seen as one group reservation (None when no
    /// thread is reserved).
    pub graph: Option<GraphReservation>,
    /// The last xruns (at most 16, oldest first), each with its cause.
    pub recent_xruns: Vec<XrunRecord>,
}

/// The graph's real-time threads (driver and clients) seen as the single
/// group reservation of the papers ("Design and development of a mechanism
/// for low-latency real time audio processing on Linux" reserves one CPU
/// share for the whole JACK graph): sums over the threads, per audio cycle.
/// A thread whose reservation period spans N audio periods
/// (`--period-multiplier`) counts for its budget and prediction / N; a
/// light thread, whose period is shorter than the audio period, gets its
/// whole budget once per cycle and counts for all of it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
pub struct GraphReservation {
    /// Audio period (ns).
    pub period_ns: u64,
    /// Sum of the SCHED_DEADLINE threads' budgets, per audio period (ns).
    pub budget_ns: u64,
    /// Sum of their controllers' predictions (before overprovisioning), per audio period (ns).
    pub predicted_ns: u64,
    /// Sum of the CPU time every graph thread used in its last cycle (ns),
    /// reserved or not.
    pub used_ns: u64,
    /// Threads with a SCHED_DEADLINE reservation.
    pub reserved: u32,
    /// Threads summed in `used_ns`.
    pub threads: u32,
}

impl GraphReservation {
    /// Sums `reservations` at audio period `period_ns`; None when no thread
    /// has a SCHED_DEADLINE reservation.
    pub fn of(reservations: &[ReservationStatus], period_ns: u64) -> Option<GraphReservation> {
        let mut g = GraphReservation {
            period_ns,
            ..Default::default()
        };
        for r in reservations {
            g.threads += 1;
            g.used_ns = g.used_ns.saturating_add(r.used_ns);
            if r.policy == "SCHED_DEADLINE" && r.period_ns > 0 {
                g.reserved += 1;
                let per = |v| per_audio_period(v, period_ns, r.period_ns);
                g.budget_ns = g.budget_ns.saturating_add(per(r.budget_ns));
                g.predicted_ns = g.predicted_ns.saturating_add(per(r.predicted_ns));
            }
        }
        (g.reserved > 0).then_some(g)
    }

    /// The summed budget as a share of the audio period (%).
    pub fn budget_pct(&self) -> f64 {
        100.0 * self.budget_ns as f64 / self.period_ns.max(1) as f64
    }
}

/// `v` (ns per reservation period `res_period_ns`) per audio period
/// `audio_period_ns`: / N, where the reservation period spans N audio
/// periods (at least 1: a light thread's shorter period spans one cycle's
/// activation), rounded to the nearest ns.
pub fn per_audio_period(v: u64, audio_period_ns: u64, res_period_ns: u64) -> u64 {
    if res_period_ns == 0 || audio_period_ns == 0 {
        return v;
    }
    let spans = res_period_ns.div_ceil(audio_period_ns).max(1);
    v.saturating_add(spans / 2) / spans
}

/// One xrun and what caused it.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct XrunRecord {
    /// The cycle it happened in.
    pub cycle: u64,
    /// "clients" (late clients, listed in `late`), "driver" (the driver
    /// thread woke late: the machine stalled it) or "device" (the audio
    /// device reported an xrun, was suspended or was lost).
    pub cause: String,
    /// For "driver": how late the driver woke (ns).
    pub driver_late_ns: u64,
    /// For "clients": every client that had not finished.
    pub late: Vec<LateClient>,
}

/// A client that had not finished its cycle when the next one began.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct LateClient {
    /// Its name.
    pub name: String,
    /// It had been woken with its inputs ready and ran short itself; false:
    /// it was still waiting for a late upstream client.
    pub ran_short: bool,
    /// When it was signalled, after the cycle's start (us); None: never
    /// signalled in that cycle.
    pub signal_us: Option<u32>,
    /// How long after its signal its thread woke (us); None: it never woke
    /// in that cycle (its thread was busy, stopped or starved).
    pub wake_delay_us: Option<u32>,
}

/// One real-time thread of the graph and its scheduling.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ReservationStatus {
    /// "driver" or the client's name.
    pub name: String,
    /// Slot (0 = driver).
    pub slot: u32,
    /// Kernel thread id.
    pub tid: i32,
    /// Policy as set ("SCHED_DEADLINE", "SCHED_FIFO", "SCHED_OTHER").
    pub policy: String,
    /// Reservation period (ns; 0 without a reservation).
    pub period_ns: u64,
    /// Budget set: runtime per period (ns).
    pub budget_ns: u64,
    /// Relative deadline set (ns).
    pub deadline_ns: u64,
    /// The predictor's last prediction scaled to the period, before overprovisioning (ns).
    pub predicted_ns: u64,
    /// CPU time the thread used in its last cycle (ns).
    pub used_ns: u64,
    /// Cycles in which it used its whole per-cycle budget (was, or would have been, throttled).
    pub throttles: u64,
    /// Xruns attributed to it.
    pub xruns: u64,
    /// sched_setattr calls made for it.
    pub updates: u64,
    /// Times it ran SCHED_FIFO for a while because its reservation's
    /// throttle held it for a whole cycle (`resoundd --throttle-rescue`).
    #[serde(default)]
    pub rescues: u64,
}

/// One client in a [`Status`].
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ClientStatus {
    /// Name.
    pub name: String,
    /// Process id.
    pub pid: u32,
    /// Slot.
    pub slot: u32,
    /// Whether it is in the activation graph.
    pub active: bool,
    /// Number of ports.
    pub ports: u32,
    /// Xruns attributed to it.
    pub xruns: u64,
    /// Last completed cycle.
    pub last_cycle: u64,
    /// Its last completed cycle's times, relative to that cycle's start (ns):
    /// signal (triggered), awake (thread running), finish (callback returned).
    pub signal_ns: u64,
    /// See `signal_ns`.
    pub awake_ns: u64,
    /// See `signal_ns`.
    pub finish_ns: u64,
    /// CPU time its thread used in that cycle (ns).
    pub cpu_ns: u64,
    /// Its uuid.
    pub uuid: u64,
    /// It is one of the server's internal clients (`resound load`).
    pub internal: bool,
    /// It was evicted from the cycle for running late past the client
    /// timeout (JACK's zombie state) and has not activated again.
    pub zombie: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(
        policy: &str,
        period_ns: u64,
        budget_ns: u64,
        predicted_ns: u64,
        used_ns: u64,
    ) -> ReservationStatus {
        ReservationStatus {
            name: "t".into(),
            slot: 0,
            tid: 1,
            policy: policy.into(),
            period_ns,
            budget_ns,
            deadline_ns: period_ns,
            predicted_ns,
            used_ns,
            throttles: 0,
            xruns: 0,
            updates: 0,
            rescues: 0,
        }
    }

    #[test]
    fn sums_per_audio_period() {
        let p = 1_000_000;
        let v = [
            res("SCHED_DEADLINE", p, 100_000, 80_000, 70_000),
            // Two audio periods per reservation period: counts half.
            res("SCHED_DEADLINE", 2 * p, 400_000, 300_000, 120_000),
            res("SCHED_FIFO", 0, 0, 0, 50_000),
        ];
        // A light thread's period, 75 % of the audio period: all of it.
        assert_eq!(per_audio_period(133_333, p, 750_000), 133_333);
        assert_eq!(
            per_audio_period(300_000, p, 1_500_000),
            150_000,
            "x2 at 75 %"
        );
        let g = GraphReservation::of(&v, p).unwrap();
        assert_eq!(
            (
                g.budget_ns,
                g.predicted_ns,
                g.used_ns,
                g.reserved,
                g.threads
            ),
            (300_000, 230_000, 240_000, 2, 3)
        );
        assert!((g.budget_pct() - 30.0).abs() < 1e-9);
        assert_eq!(GraphReservation::of(&v[2..], p), None);
    }
}
