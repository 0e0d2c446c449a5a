//! The choice of scheduling mode: from the options and what the system
//! permits, with the fallbacks (deadline to fifo to other) said once.
//!
//! Threads: the thread calling `Server::start`, once.

use crate::config::{Config, PeriodMultiplier};
use resound_engine::Mode;
use resound_shm::time::frames_to_ns;
use tracing::warn;

/// Decides the scheduling mode from the options and what the system permits.
/// Falls back (and says so once) from deadline to fifo to other.
pub(super) fn sched_mode(cfg: &Config) -> (Mode, String, resound_sched::Ledger) {
    use crate::config::SchedChoice;
    let a = &cfg.server;
    let system = resound_sched::Ledger::from_system();
    let ledger = resound_sched::Ledger::with_capacity(
        a.max_bandwidth
            .map_or(system.capacity(), |m| m.min(system.capacity())),
    );
    let prio = a.priority;
    let fifo = || {
        if resound_sched::fifo_permitted() {
            (Mode::Fifo(prio), format!("fifo {prio}"))
        } else {
            warn!("SCHED_FIFO is not permitted here either (no CAP_SYS_NICE / RLIMIT_RTPRIO); running SCHED_OTHER");
            (Mode::Other, "other (real-time not permitted)".to_string())
        }
    };
    let (mode, desc) = match (a.wants_realtime(), a.sched) {
        (false, _) => (Mode::Other, "other".to_string()),
        (true, SchedChoice::Other) => (Mode::Other, "other".to_string()),
        (true, SchedChoice::Fifo) => fifo(),
        (true, SchedChoice::Deadline) if !resound_sched::deadline_permitted() => {
            warn!("SCHED_DEADLINE is not permitted here (needs CAP_SYS_NICE); falling back to SCHED_FIFO");
            fifo()
        }
        (true, SchedChoice::Deadline) => deadline_mode(cfg, ledger.capacity()),
    };
    (mode, desc, ledger)
}

/// Deadline mode: the controller's settings from the options.
fn deadline_mode(cfg: &Config, ledger_capacity: f64) -> (Mode, String) {
    let a = &cfg.server;
    let c = controller_config(cfg);
    let desc = deadline_description(a, ledger_capacity, None);
    (
        Mode::Deadline {
            cfg: c,
            fallback_priority: a.priority,
        },
        desc,
    )
}

/// The controllers' settings from the options, at the start-up period.
pub(super) fn controller_config(cfg: &Config) -> resound_sched::ControllerConfig {
    let a = &cfg.server;
    let period_ns = frames_to_ns(cfg.period() as u64, cfg.rate());
    let (multiplier, auto_min_period_ns) = a.period_multiplier.rule();
    resound_sched::ControllerConfig {
        audio_period_ns: period_ns,
        multiplier,
        auto_min_period_ns,
        light_period_pct: light_shares(a).0,
        light_deadline_pct: light_shares(a).1,
        overprovision_pct: a.overprovision,
        min_pct: a.min_budget_pct,
        fixed_pct: a.fixed_budget,
        window: a.window as usize,
        percentile: a.percentile,
        reclaim: a.reclaim(),
        ..Default::default()
    }
}

/// Light threads' (period, deadline) shares in %: as asked, or (100, 100)
/// under critical-path deadlines, which set every deadline themselves.
fn light_shares(a: &crate::config::ServerArgs) -> (f64, f64) {
    match a.deadlines {
        crate::config::DeadlineChoice::CriticalPath => (100.0, 100.0),
        crate::config::DeadlineChoice::Period => (a.light_period_pct, a.light_deadline_pct),
    }
}

/// The budget floor as status shows it: the configured one (% of the
/// period), or, once a full ledger lowered every floor, the one in force
/// and why.
fn floor_text(configured: f64, lowered: Option<f64>) -> String {
    match lowered {
        Some(l) => format!("at least {l}% (lowered from {configured}%: the ledger was full)"),
        None => format!("at least {configured}%"),
    }
}

/// How deadline mode shows in status and logs: budget rule (with the floor
/// in force: `lowered_floor` once a full ledger lowered it), reclaiming,
/// period multiplier (N, or the `auto` rule), deadline rule, ledger capacity.
pub(super) fn deadline_description(
    a: &crate::config::ServerArgs,
    ledger_capacity: f64,
    lowered_floor: Option<f64>,
) -> String {
    let multiplier = match a.period_multiplier {
        PeriodMultiplier::Fixed(n) => format!("x{n}"),
        // The multiplier in use changes with the buffer size: status shows it apart.
        PeriodMultiplier::Auto { min_period_us } => format!("auto (>= {min_period_us} us)"),
    };
    format!(
        "deadline ({}{}, period {}, {}, ledger {:.2} CPU)",
        match a.fixed_budget {
            Some(p) => format!("fixed budget {p}%"),
            None => format!(
                "feedback: p{} of {} cycles +{}%, {}",
                a.percentile,
                a.window,
                a.overprovision,
                floor_text(a.min_budget_pct, lowered_floor)
            ),
        },
        if a.reclaim() {
            ", reclaim"
        } else {
            ", no reclaim"
        },
        multiplier,
        match (a.deadlines, light_shares(a)) {
            (crate::config::DeadlineChoice::CriticalPath, _) => {
                "critical-path deadlines".to_string()
            }
            (_, (period, deadline)) if deadline < 100.0 =>
                format!("period deadlines, light threads {deadline}% of a {period}% period"),
            _ => "period deadlines".to_string(),
        },
        ledger_capacity
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ServerArgs;
    use clap::Parser;

    fn description(args: &[&str], lowered_floor: Option<f64>) -> String {
        let argv = std::iter::once("resoundd").chain(args.iter().copied());
        let a = ServerArgs::try_parse_from(argv).unwrap();
        deadline_description(&a, 1.8, lowered_floor)
    }

    #[test]
    fn status_names_a_lowered_floor_and_why() {
        let desc = description(&["--min-budget", "12.5"], None);
        assert!(desc.contains("+10%, at least 12.5%,"), "{desc}");
        let lowered = description(&["--min-budget", "12.5"], Some(5.0));
        let why = " (lowered from 12.5%: the ledger was full)";
        assert!(lowered.contains(&format!("at least 5%{why},")), "{lowered}");
        assert_eq!(
            lowered
                .replace(why, "")
                .replace("at least 5%", "at least 12.5%"),
            desc
        );
    }
}
