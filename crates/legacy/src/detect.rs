//! The period detector of "The Wizard of OS: a Heartbeat for Legacy
//! Multimedia Applications": the event instants t_i are read as a Dirac comb
//! f(t) = Σ δ(t − t_i), whose spectrum |Σ e^{−j2πf t_i}| is sampled over
//! [f_min, f_max] at steps δf; local peaks above K × the mean are candidate
//! frequencies; none → not periodic; at most M → the strongest; otherwise a
//! weighted linear regression f_i = F1·i + F0 over the candidates and, if its
//! squared error is below E, the candidate nearest F1 (the fundamental), else
//! the strongest. Two additions to the paper, both only refining the period
//! it chose: the chosen grid peak is refined (a search at δf/100 around it,
//! then parabolic interpolation), since δf = 1 Hz is 4 % at 25 Hz; then the
//! period is fitted by least squares over the release times assigned to
//! integer job indices, outliers rejected (`detect/fit.rs`), so that it is found
//! within 1 % from 5 jobs (the paper needs about 10). And on a trace of
//! fewer than 16 events where no peak passes K × the mean (a single late
//! wake-up among 5 does that), the spectrum's maximum is the candidate and
//! the confidence test decides ([`Rule::WeakPeak`]).
//!
//! [`detect`] is a pure function of the events; it runs on any thread
//! (it allocates, it is not for the real-time path).

mod fit;
mod spectrum;
#[cfg(test)]
mod tests;

pub use spectrum::{amplitude, spectrum};

use crate::events::Event;
use serde::Serialize;
use std::collections::BTreeMap;

/// Which events of a trace make the comb.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Select {
    /// Returns from blocking calls and wake-ups: the job activations (default).
    Activations,
    /// Entries into blocking calls: the job ends.
    Entries,
    /// Every event (the paper's choice; entries and exits of a job can
    /// cancel each other at the fundamental when a job is half a period).
    All,
}

/// The detector's tunable parameters (defaults are the paper's).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Params {
    /// E: largest squared error (Hz², weighted mean) of the harmonic regression.
    pub e: f64,
    /// f_min, Hz.
    pub f_min: f64,
    /// f_max, Hz.
    pub f_max: f64,
    /// δf, Hz.
    pub df: f64,
    /// K: a candidate peak is above K × the mean of the spectrum.
    pub k: f64,
    /// M ≥ 1: with at most M candidates the strongest is taken.
    pub m: usize,
    /// Refine the chosen peak below the δf grid.
    pub refine: bool,
    /// Then fit the period by least squares over the job release times
    /// (with `refine`; see `detect/fit.rs`); on a short trace (under 16 events) with
    /// no peak above K × mean, also take the spectrum's maximum as the
    /// candidate, leaving the decision to the confidence test.
    pub fit: bool,
    /// Which events are used.
    pub select: Select,
    /// Fewer events than this (per series) → not periodic.
    pub min_events: usize,
    /// Below this confidence → not periodic (an addition to the paper: with
    /// its K = 2.5 alone, random instants often show a peak).
    pub min_confidence: f64,
    /// Fewer than this share of the jobs the period implies with an event
    /// within 15 % of a period of the comb → not periodic (an addition to
    /// the paper): a heartbeat wakes at its release in nearly every job,
    /// while random instants that line up with some comb leave most of its
    /// teeth bare.
    pub min_locked: f64,
}

impl Default for Params {
    fn default() -> Self {
        Self {
            e: 0.1,
            f_min: 10.0,
            f_max: 200.0,
            df: 1.0,
            k: 2.5,
            m: 2,
            refine: true,
            fit: true,
            select: Select::Activations,
            min_events: 3,
            min_confidence: 0.3,
            min_locked: 0.5,
        }
    }
}

impl Params {
    /// Check the parameters; the message says which one is wrong.
    pub fn validate(&self) -> Result<(), String> {
        let ok = |c: bool, m: &str| if c { Ok(()) } else { Err(m.to_string()) };
        ok(self.f_min > 0.0, "f_min must be > 0 Hz")?;
        ok(self.f_max > self.f_min, "f_max must be above f_min")?;
        ok(
            self.df > 0.0 && self.df < self.f_max - self.f_min,
            "df must be > 0 and below f_max - f_min",
        )?;
        ok(
            (self.f_max - self.f_min) / self.df <= 1e6,
            "too many frequency steps (raise df)",
        )?;
        ok(self.k > 0.0, "K must be > 0")?;
        ok(self.m >= 1, "M must be at least 1")?;
        ok(self.e >= 0.0, "E must be >= 0")?;
        ok(
            (0.0..=1.0).contains(&self.min_locked),
            "the minimum locked share must be between 0 and 1",
        )
    }
}

/// Which rule of the algorithm chose the frequency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// Too few events to say anything.
    TooFewEvents,
    /// No peak above K × mean: not periodic.
    NoPeak,
    /// A short trace with no peak above K × mean: the spectrum's maximum
    /// (an addition to the paper, see [`Params::fit`]).
    WeakPeak,
    /// At most M candidates: the strongest.
    Strongest,
    /// The harmonic regression fitted: the candidate nearest F1.
    Regression,
    /// The regression did not fit (error ≥ E): the strongest.
    StrongestAfterRegression,
    /// A peak was chosen but its confidence is below `min_confidence`.
    LowConfidence,
    /// A peak was chosen but fewer than `min_locked` of its jobs have an
    /// event near their tooth.
    Unlocked,
}

/// A candidate peak of the sampled spectrum.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Peak {
    /// Frequency on the δf grid, Hz.
    pub freq_hz: f64,
    /// |Σ e^{−j2πf t_i}| there.
    pub amplitude: f64,
}

/// The detector's answer for one series of events.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Estimate {
    /// The period in ns, or `None`: not periodic.
    pub period_ns: Option<u64>,
    /// The frequency in Hz (refined), or `None`.
    pub freq_hz: Option<f64>,
    /// Jobs seen: the observed span times the frequency, plus one.
    pub jobs: u64,
    /// Events used.
    pub events: usize,
    /// In [0, 1], the smaller of two numbers: the coherence F(f)/N at the
    /// chosen frequency (1 when every event sits exactly on the comb) and
    /// 1 − the chance that N random instants would show a peak this high
    /// somewhere in [f_min, f_max] (about (f_max − f_min)·span independent
    /// frequencies, each exceeded with probability e^{−F²/N}).
    pub confidence: f64,
    /// The rule that decided.
    pub rule: Rule,
    /// The candidate peaks (above K × mean), ascending in frequency.
    pub peaks: Vec<Peak>,
    /// K × the mean of the spectrum (the candidate threshold).
    pub threshold: f64,
}

impl Estimate {
    /// Is a period found?
    pub fn is_periodic(&self) -> bool {
        self.period_ns.is_some()
    }
}

/// One thread's own estimate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ThreadEstimate {
    /// Kernel thread id.
    pub tid: i32,
    /// Its estimate, on its events alone.
    #[serde(flatten)]
    pub estimate: Estimate,
}

/// The detector's answer for a whole trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Detection {
    /// On all threads' events together.
    #[serde(flatten)]
    pub overall: Estimate,
    /// Per thread (threads with at least `min_events` events), by tid.
    pub threads: Vec<ThreadEstimate>,
    /// Do periodic threads have different periods (more than 2 % apart), or
    /// are some periodic and others not?
    pub threads_differ: bool,
}

impl Detection {
    /// The period in ns, if periodic.
    pub fn period_ns(&self) -> Option<u64> {
        self.overall.period_ns
    }

    /// The frequency in Hz, if periodic.
    pub fn freq_hz(&self) -> Option<f64> {
        self.overall.freq_hz
    }

    /// Confidence in [0, 1].
    pub fn confidence(&self) -> f64 {
        self.overall.confidence
    }
}

/// Find the period of `events` (any order, any threads) with `params`.
/// Invalid `params` give "not periodic" ([`Params::validate`] says why).
pub fn detect(events: &[Event], params: &Params) -> Detection {
    let chosen: Vec<&Event> = events
        .iter()
        .filter(|e| selected(e, params.select))
        .collect();
    let overall = estimate_ns(chosen.iter().map(|e| e.t_ns), params);
    let mut by_tid: BTreeMap<i32, Vec<u64>> = BTreeMap::new();
    for e in &chosen {
        by_tid.entry(e.tid).or_default().push(e.t_ns);
    }
    let threads: Vec<ThreadEstimate> = by_tid
        .into_iter()
        .filter(|(_, v)| v.len() >= params.min_events)
        .map(|(tid, v)| ThreadEstimate {
            tid,
            estimate: estimate_ns(v.into_iter(), params),
        })
        .collect();
    let threads_differ = differ(&threads);
    Detection {
        overall,
        threads,
        threads_differ,
    }
}

fn selected(e: &Event, s: Select) -> bool {
    match s {
        Select::Activations => e.is_activation(),
        Select::Entries => !e.is_activation(),
        Select::All => true,
    }
}

fn differ(threads: &[ThreadEstimate]) -> bool {
    if threads.len() < 2 {
        return false;
    }
    let freqs: Vec<Option<f64>> = threads.iter().map(|t| t.estimate.freq_hz).collect();
    let periodic: Vec<f64> = freqs.iter().flatten().copied().collect();
    if periodic.is_empty() {
        return false;
    }
    if periodic.len() < freqs.len() {
        return true;
    }
    let (lo, hi) = periodic
        .iter()
        .fold((f64::MAX, f64::MIN), |(lo, hi), &f| (lo.min(f), hi.max(f)));
    hi > lo * 1.02
}

/// The estimate for one series of instants (ns, any order).
pub fn estimate_ns(t_ns: impl Iterator<Item = u64>, params: &Params) -> Estimate {
    let mut t: Vec<u64> = t_ns.collect();
    t.sort_unstable();
    let t0 = t.first().copied().unwrap_or(0);
    let secs: Vec<f64> = t.iter().map(|&x| (x - t0) as f64 * 1e-9).collect();
    spectrum::estimate(&secs, params)
}
