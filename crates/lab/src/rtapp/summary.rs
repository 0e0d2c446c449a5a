//! [`RtSummary`]: jobs, deadline misses (rt-app's slack < 0), response-time
//! percentiles and the smallest slack of a set of rt-app jobs. Pure; runs on
//! the caller's thread.

use super::JobRecord;

/// What a set of rt-app jobs adds up to.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RtSummary {
    /// Jobs logged.
    pub jobs: u64,
    /// Jobs whose slack was negative: they finished after the next release,
    /// their deadline (how rt-app counts a miss).
    pub misses: u64,
    /// Response time (end - release) median, nearest rank (us; NaN without jobs).
    pub resp_p50_us: f64,
    /// Response time 99th percentile, nearest rank (us; NaN without jobs).
    pub resp_p99_us: f64,
    /// Largest response time (us; NaN without jobs).
    pub resp_max_us: f64,
    /// Smallest slack (us; 0 without jobs).
    pub slack_min_us: i64,
}

/// 1-based nearest rank of percentile `p` among `n` samples (None when n = 0).
pub fn nearest_rank(n: u64, p: f64) -> Option<u64> {
    if n == 0 {
        return None;
    }
    let r = (p.clamp(0.0, 100.0) / 100.0 * n as f64).ceil() as u64;
    Some(r.clamp(1, n))
}

/// The summary of `jobs`.
pub(super) fn summarize<'a>(jobs: impl Iterator<Item = &'a JobRecord>) -> RtSummary {
    let mut resp = Vec::new();
    let mut misses = 0;
    let mut slack_min = None::<i64>;
    for j in jobs {
        resp.push(j.response_us);
        misses += u64::from(j.missed());
        slack_min = Some(slack_min.map_or(j.slack_us, |s| s.min(j.slack_us)));
    }
    resp.sort_unstable();
    let n = resp.len() as u64;
    let pick = |p: f64| nearest_rank(n, p).map_or(f64::NAN, |r| resp[(r - 1) as usize] as f64);
    RtSummary {
        jobs: n,
        misses,
        resp_p50_us: pick(50.0),
        resp_p99_us: pick(99.0),
        resp_max_us: pick(100.0),
        slack_min_us: slack_min.unwrap_or(0),
    }
}
