//! Budget allocated to the graph's threads, from the server status (its
//! `reservations`): the one place that reads `Status::reservations`. Runs on
//! the main thread, once per status poll.

use resound_protocol::wire::Status;

/// The budget each of `slots` (index into it, budget ns) holds per audio
/// period of `audio_period_ns` under a SCHED_DEADLINE reservation; threads
/// without one (policies other and fifo, refused reservations) are left out.
/// This is the one place that knows `Status::reservations`.
pub fn reserved_budgets(st: &Status, slots: &[u32], audio_period_ns: f64) -> Vec<(usize, f64)> {
    st.reservations
        .iter()
        .filter(|r| r.period_ns > 0 && r.budget_ns > 0 && r.policy.starts_with("SCHED_DEADLINE"))
        .filter_map(|r| {
            let i = slots.iter().position(|&s| s == r.slot)?;
            Some((i, r.budget_ns as f64 / r.period_ns as f64 * audio_period_ns))
        })
        .collect()
}

/// Scheduling of the threads at `slots` as the status reports it, counted:
/// "SCHED_DEADLINE x3, SCHED_FIFO x7"; None when the status lists none of them.
pub(super) fn policies_of(st: &Status, slots: &[u32]) -> Option<String> {
    let mut counts: Vec<(String, usize)> = Vec::new();
    for r in st.reservations.iter().filter(|r| slots.contains(&r.slot)) {
        match counts.iter_mut().find(|(p, _)| *p == r.policy) {
            Some((_, n)) => *n += 1,
            None => counts.push((r.policy.clone(), 1)),
        }
    }
    (!counts.is_empty()).then(|| {
        counts
            .iter()
            .map(|(p, n)| format!("{p} x{n}"))
            .collect::<Vec<_>>()
            .join(", ")
    })
}
