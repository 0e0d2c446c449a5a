//! The supply-bound function Z_{Q,T}(t) of a CBS (the least CPU time a
//! server with budget Q every T guarantees in any window of length t) and
//! the minimum budget a (C, P) task needs for each server period T (Eq. 1-2
//! and Figure 2 of "The Wizard of OS: a Heartbeat for Legacy Multimedia
//! Applications"). Pure functions; any thread.

use serde::Serialize;

/// Z_{Q,T}(t) (Eq. 1): h·Q on [hT, (h+1)T − Q], else t − (h+1)(T − Q),
/// with h = ⌊t/T⌋. All in the same time unit.
pub fn supply_bound(q: f64, t_server: f64, t: f64) -> f64 {
    if t <= 0.0 || q <= 0.0 {
        return 0.0;
    }
    let h = (t / t_server).floor();
    if t <= (h + 1.0) * t_server - q {
        h * q
    } else {
        t - (h + 1.0) * (t_server - q)
    }
}

/// The smallest budget Q ≤ T with Z_{Q,T}(P) ≥ C (Eq. 2: Z is
/// non-decreasing, so some t ≤ P with Z(t) ≥ C exists iff Z(P) ≥ C), or
/// `None` when even Q = T is not enough (C > P).
pub fn min_budget(c: f64, p: f64, t_server: f64) -> Option<f64> {
    if supply_bound(t_server, t_server, p) < c {
        return None;
    }
    let (mut lo, mut hi) = (0.0, t_server);
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if supply_bound(mid, t_server, p) >= c {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    Some(hi)
}

/// One row of the budget table.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct BudgetRow {
    /// Server period T.
    pub period: f64,
    /// Minimum budget Q.
    pub budget: f64,
    /// Q / T.
    pub bandwidth: f64,
}

/// Minimum budgets for server periods `periods` (rows where C cannot be met are left out).
pub fn budget_table(c: f64, p: f64, periods: impl Iterator<Item = f64>) -> Vec<BudgetRow> {
    periods
        .filter_map(|t| {
            min_budget(c, p, t).map(|q| BudgetRow {
                period: t,
                budget: q,
                bandwidth: q / t,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supply_bound_shape() {
        // Q = 20, T = 100: nothing until 80, slope 1 to 100, flat at 20 to 180.
        assert_eq!(supply_bound(20.0, 100.0, 50.0), 0.0);
        assert_eq!(supply_bound(20.0, 100.0, 90.0), 10.0);
        assert_eq!(supply_bound(20.0, 100.0, 100.0), 20.0);
        assert_eq!(supply_bound(20.0, 100.0, 150.0), 20.0);
        assert_eq!(supply_bound(20.0, 100.0, 200.0), 40.0);
    }

    #[test]
    fn period_equal_to_task_period_or_submultiple_is_cheapest() {
        let rows = budget_table(20.0, 100.0, (5..=200).map(f64::from));
        let bw = |t: f64| rows.iter().find(|r| r.period == t).unwrap().bandwidth;
        assert!((bw(100.0) - 0.2).abs() < 1e-6);
        assert!((bw(50.0) - 0.2).abs() < 1e-6);
        assert!(bw(80.0) > 0.2 + 1e-3 && bw(120.0) > 0.25);
        let best = rows.iter().map(|r| r.bandwidth).fold(f64::MAX, f64::min);
        assert!((best - 0.2).abs() < 1e-6);
        assert!(min_budget(120.0, 100.0, 50.0).is_none());
    }
}
