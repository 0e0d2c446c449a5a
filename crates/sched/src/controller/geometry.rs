//! The figures a [`Controller`](super::Controller) derives from its
//! configuration at the current audio period: the reservation period, the
//! budget bounds and the light shape's period, deadline and bridge. They
//! change only with the audio period, and the controller reads them several
//! times per cycle, so they are computed once per change instead of each
//! time (floating-point percentages, rounded: measured with `cargo run -p
//! resound-sched --release --example controller_cost`).

use super::{limits_of, ControllerConfig};

/// See the [module docs](self). Every figure in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Geometry {
    /// Audio periods per reservation period ([`ControllerConfig::effective_multiplier`]).
    pub multiplier: u32,
    /// The full reservation period ([`ControllerConfig::reservation_period_ns`]).
    pub full_ns: u64,
    /// Least budget per full period (`min_pct`, clamped).
    pub lo_ns: u64,
    /// Greatest budget per full period (`max_pct`, clamped).
    pub hi_ns: u64,
    /// [`ControllerConfig::light_period_ns`].
    pub light_period_ns: u64,
    /// [`ControllerConfig::light_deadline_ns`].
    pub light_deadline_ns: u64,
    /// [`ControllerConfig::light_slack_ns`].
    pub light_slack_ns: u64,
    /// [`ControllerConfig::light_bridge_ns`].
    pub light_bridge_ns: u64,
}

impl Geometry {
    /// The figures of `cfg` at its audio period. Real-time safe.
    pub fn of(cfg: &ControllerConfig) -> Self {
        let full_ns = cfg.reservation_period_ns();
        let (lo_ns, hi_ns) = limits_of(full_ns, cfg);
        Geometry {
            multiplier: cfg.effective_multiplier(),
            full_ns,
            lo_ns,
            hi_ns,
            light_period_ns: cfg.light_period_ns(),
            light_deadline_ns: cfg.light_deadline_ns(),
            light_slack_ns: cfg.light_slack_ns(),
            light_bridge_ns: cfg.light_bridge_ns(),
        }
    }
}
