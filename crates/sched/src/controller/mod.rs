//! The feedback budget controller (Bagnoli's thesis "Design and development of a mechanism
//! for low-latency real time audio processing on Linux", §3.4.4-3.4.5), one per reserved thread.
//!
//! At every cycle begin the driver feeds the CPU time the thread used in the
//! last audio cycle ([`Controller::cycle_begin`]). The controller pushes it
//! into a moving-window percentile [`Predictor`] and computes the budget
//!
//! ```text
//! runtime = clamp(prediction x D x (1 + I/100), min% x P, max% x P)   (and <= deadline)
//! ```
//!
//! where P = D x audio period is the reservation period (`-D`), I the
//! overprovision (`-I`). A new reservation is returned only when the budget
//! rose by more than `change_threshold_pct` of the current one, or fell by
//! more than [`DECREASE_THRESHOLD_FACTOR`] times that, so `sched_setattr` is
//! called rarely. With `fixed_pct` (`-F`) there is no
//! feedback: the budget is that share of the period and changes only with
//! the period.
//!
//! **New client / xrun** ([`on_activation`](Controller::on_activation),
//! [`on_xrun`](Controller::on_xrun)): the window is flushed and the budget
//! bumped by `bump_min_pct` (10%) when it sits at the minimum, else by
//! `bump_pct` (20%).
//!
//! **Warm-up** (a choice of ours, following the thesis's "the budget is kept
//! fixed while the queue is being reconstructed"): after a flush, and after
//! [`new`](Controller::new), until the window is full again the budget may
//! only go *up* (a partial window that already predicts more than the held
//! budget is followed at once; one that predicts less is not trusted yet).
//! Without this the bump would be undone by the very next cycle, predicted
//! from a single sample.
//!
//! **Initial budget**: `fixed_pct` when fixed, else `initial_pct` (default [`INITIAL_PCT`], 10%) of
//! the period clamped to [min, max].
//!
//! **Period and deadline**: the reservation period is D x audio period and
//! the relative deadline equals it, except for *light* threads, whose
//! typical (median) CPU time is at most half their budget, as that of a
//! client busy 1 % of the period under the minimum budget: they get
//! `light_period_pct` of that period and a deadline of `light_deadline_pct`
//! of their own period (defaults 75 % and 50 %), same budget, so that
//! blocking well inside the budget does not arm the kernel's inactive timer
//! (see [`ControllerConfig::light_deadline_pct`]). The shape is chosen once
//! the window is full; a flush (a bump) returns the thread to the full
//! period until it is full again. [`set_deadline`](Controller::set_deadline)
//! (critical-path mode) and fixed mode keep every thread on the full period.
//!
//! **Entering and leaving the light shape.** The kernel holds a thread with
//! a deadline short of its period that wakes after its deadline but before
//! its next period starts, until that period starts; "next period" is its
//! current absolute deadline − relative deadline + period, the last two
//! taken from the parameters set *now*. A thread last replenished on the
//! full period (absolute deadline = its wake-up + P) and then given the
//! light shape would be held at its next wake-up whenever that came even a
//! little later than P after the last one: for about 3/8 of a period, one
//! time in two (measured). So a thread enters the light shape through one
//! cycle on a *bridge*: deadline = period = light deadline + half the
//! audio period's slack over the light period ([`ControllerConfig::light_bridge_ns`],
//! half the audio period at the measured 75 %/50 %). Deadline = period is
//! never held, and a wake-up one period after a bridge replenishment is
//! held only if it comes more than that half slack early. Leaving is
//! always safe (deadline = period). [`leave_light`](Controller::leave_light)
//! takes a thread off the light shape for a window after a wake-up so late
//! in its cycle that the next one could be held (a stalled machine, a late
//! upstream client).
//!
//! **Kernel behaviour to keep in mind**: a budget raised while the thread is
//! throttled takes effect only at its old replenishment time (the kernel
//! keeps the old deadline), and an overrun is caught at the next scheduler
//! tick (4 ms at HZ=250) and repaid by throttling over the following periods.
//! Overprovisioning (`-I`) and the xrun bump are what absorb this.
//!
//! Threads: lives on the driver thread. [`Controller::new`] allocates (the
//! predictor's window); every other method is O(window) at most and never
//! allocates or makes a syscall.

use crate::policy::{Policy, MIN_RUNTIME_NS};
use crate::predictor::Predictor;
use geometry::Geometry;

mod geometry;

/// Initial budget in feedback mode, % of the reservation period, before
/// anything is known about the thread.
pub const INITIAL_PCT: f64 = 10.0;

/// Default light-thread reservation period, % of the audio period
/// (see [`ControllerConfig::light_period_pct`]).
pub const DEFAULT_LIGHT_PERIOD_PCT: f64 = 75.0;

/// Default light-thread relative deadline, % of its reservation period
/// (see [`ControllerConfig::light_deadline_pct`]): 50. A thread enters the
/// light shape through a bridge and leaves it after a late wake-up, so the
/// kernel's hold of a constrained-deadline thread that wakes after its
/// deadline does not cost it a cycle (see docs/architecture.md, "Light
/// threads"); 100 turns light threads off.
pub const DEFAULT_LIGHT_DEADLINE_PCT: f64 = 50.0;

/// The least budget of a feedback reservation, % of its period (the
/// thesis' minimum budget).
pub const THESIS_MIN_BUDGET_PCT: f64 = 5.0;

/// The default floor of `resoundd --min-budget` (%): the thesis' minimum.
/// A floor above it gives way to this one when the ledger runs short
/// ([`Controller::lower_floor`]).
pub const DEFAULT_MIN_BUDGET_PCT: f64 = THESIS_MIN_BUDGET_PCT;

/// Controller settings (the server's `--sched deadline` options).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ControllerConfig {
    /// Audio period (ns): frames per period / sample rate.
    pub audio_period_ns: u64,
    /// `-D`: reservation period = multiplier x audio period; the budget is
    /// scaled alike. 0 is treated as 1. With `auto_min_period_ns` this is the
    /// floor of the multiplier in use ([`effective_multiplier`](Self::effective_multiplier)).
    pub multiplier: u32,
    /// `--light-period PCT`: the reservation period of a *light* thread
    /// (see `light_deadline_pct`), as a share of multiplier x audio period,
    /// in % (100: equal). The kernel holds a thread with a deadline shorter
    /// than its period that wakes after its deadline until its period ends;
    /// a period shorter than the audio period has ended by the next cycle's
    /// wake-up unless the last one came more than (100 − PCT) % of a period
    /// later in its cycle. The budget is not scaled (one activation per
    /// audio period gets the whole budget), so the bandwidth booked is
    /// 100/PCT times that of the full period.
    pub light_period_pct: f64,
    /// `--light-deadline PCT`: a light thread's relative deadline, % of its
    /// reservation period (100: no light threads). A thread that blocks
    /// before its zero-lag time (deadline − remaining budget x period /
    /// budget) makes the kernel arm its inactive timer, one timer
    /// interrupt per blocking; with deadline = period every thread that
    /// used less than its budget does. A thread whose typical CPU time (the
    /// window's median) is at most (100 − PCT) % of its budget blocks after
    /// that time under this deadline: that is a light thread (it becomes
    /// light at [`LIGHT_ENTRY_FACTOR`] of that share and stays light up to
    /// [`LIGHT_EXIT_FACTOR`] of it, once its window is full, and its budget
    /// within the deadline). Others keep the full period and deadline = period, as do
    /// all threads in fixed mode and after [`Controller::set_deadline`].
    pub light_deadline_pct: f64,
    /// `--period-multiplier auto`: the minimum reservation period (ns); an
    /// audio period shorter than this gets a larger multiplier
    /// ([`crate::multiplier::multiplier_for`]), recomputed when the audio
    /// period changes. 0: off (the multiplier is `multiplier`).
    pub auto_min_period_ns: u64,
    /// `-I`: budget = prediction x (1 + pct/100).
    pub overprovision_pct: f64,
    /// Minimum budget, % of the reservation period (the thesis: 5).
    pub min_pct: f64,
    /// Maximum budget, % of the reservation period (e.g. 90).
    pub max_pct: f64,
    /// Bump on a new client / xrun when the budget is at the minimum, % (the thesis: 10).
    pub bump_min_pct: f64,
    /// Bump on a new client / xrun otherwise, % (the thesis: 20).
    pub bump_pct: f64,
    /// Report a new reservation from feedback only when the budget moved by
    /// more than this % of the current budget.
    pub change_threshold_pct: f64,
    /// `--fixed-budget PCT` (`-F`): budget = PCT % of the reservation period
    /// (capped at `max_pct`), no feedback.
    pub fixed_pct: Option<f64>,
    /// Predictor window (audio cycles).
    pub window: usize,
    /// Predictor percentile, 0..=100.
    pub percentile: f64,
    /// Ask for `SCHED_FLAG_RECLAIM` (informational here; see [`Reservation::policy`]).
    pub reclaim: bool,
    /// Budget of a fresh controller, % of the reservation period (feedback mode).
    /// Every thread has its own reservation, so a generous start multiplies:
    /// the default stays small and the warm-up lets a heavier thread's budget
    /// rise at once.
    pub initial_pct: f64,
}

impl Default for ControllerConfig {
    /// 128 frames at 48 kHz, D = 1, I = 10%, budget 5..90%, bumps 10/20%,
    /// threshold 5%, feedback, 99th percentile of 100 cycles, no reclaim.
    fn default() -> Self {
        ControllerConfig {
            audio_period_ns: 2_666_667,
            multiplier: 1,
            auto_min_period_ns: 0,
            light_period_pct: DEFAULT_LIGHT_PERIOD_PCT,
            light_deadline_pct: DEFAULT_LIGHT_DEADLINE_PCT,
            overprovision_pct: 10.0,
            min_pct: DEFAULT_MIN_BUDGET_PCT,
            max_pct: 90.0,
            bump_min_pct: 10.0,
            bump_pct: 20.0,
            change_threshold_pct: 5.0,
            fixed_pct: None,
            window: 100,
            percentile: 99.0,
            reclaim: false,
            initial_pct: INITIAL_PCT,
        }
    }
}

impl ControllerConfig {
    /// The multiplier in use at the current audio period: `multiplier`, or
    /// with `auto_min_period_ns` the rule of [`crate::multiplier`].
    ///
    /// Real-time safe.
    pub fn effective_multiplier(&self) -> u32 {
        crate::multiplier::multiplier_for(
            self.audio_period_ns,
            self.multiplier,
            self.auto_min_period_ns,
        )
    }

    /// Reservation period (ns): multiplier in use x audio period.
    ///
    /// Real-time safe.
    pub fn reservation_period_ns(&self) -> u64 {
        self.audio_period_ns
            .saturating_mul(self.effective_multiplier() as u64)
    }

    /// Whether light threads get their own period and deadline (a light
    /// deadline below 100 %).
    ///
    /// Real-time safe.
    pub fn light_shape(&self) -> bool {
        self.light_deadline_pct < 100.0
    }

    /// A light thread's reservation period (ns): `light_period_pct` of the
    /// reservation period.
    ///
    /// Real-time safe.
    pub fn light_period_ns(&self) -> u64 {
        pct_of(
            self.reservation_period_ns(),
            self.light_period_pct.min(100.0),
        )
    }

    /// A light thread's relative deadline (ns): `light_deadline_pct` of its period.
    ///
    /// Real-time safe.
    pub fn light_deadline_ns(&self) -> u64 {
        pct_of(self.light_period_ns(), self.light_deadline_pct.min(100.0))
    }

    /// How much earlier in its cycle than in the one before a light thread
    /// may wake without the kernel holding it (ns): the reservation period
    /// minus the light period. Real-time safe.
    pub fn light_slack_ns(&self) -> u64 {
        self.reservation_period_ns()
            .saturating_sub(self.light_period_ns())
    }

    /// The period and deadline (ns) of the one-cycle bridge into the light
    /// shape (see the module docs): the light deadline plus half the light
    /// slack. Real-time safe.
    pub fn light_bridge_ns(&self) -> u64 {
        self.light_deadline_ns() + self.light_slack_ns() / 2
    }
}

/// SCHED_DEADLINE parameters (ns): `runtime <= deadline <= period`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reservation {
    /// Budget per period (ns).
    pub runtime_ns: u64,
    /// Relative deadline (ns).
    pub deadline_ns: u64,
    /// Period (ns).
    pub period_ns: u64,
}

impl Reservation {
    /// The policy to [`apply`](crate::apply).
    ///
    /// Real-time safe.
    pub fn policy(&self, reclaim: bool) -> Policy {
        Policy::Deadline {
            runtime_ns: self.runtime_ns,
            deadline_ns: self.deadline_ns,
            period_ns: self.period_ns,
            reclaim,
        }
    }

    /// Fraction of one CPU: runtime / period (0 for a zero period).
    ///
    /// Real-time safe.
    pub fn bandwidth(&self) -> f64 {
        if self.period_ns == 0 {
            0.0
        } else {
            self.runtime_ns as f64 / self.period_ns as f64
        }
    }
}

/// See the [module docs](self).
#[derive(Debug, Clone)]
pub struct Controller {
    cfg: ControllerConfig,
    predictor: Predictor,
    /// What is (believed to be) set in the kernel.
    res: Reservation,
    /// The budget the controller wants before the `<= deadline` clamp, so
    /// that raising the deadline again restores it.
    wanted_ns: u64,
    /// Last prediction scaled to the reservation period (ns).
    predicted_ns: u64,
    /// Whether the deadline was set by [`Controller::set_deadline`]
    /// (critical-path mode) rather than by the configured rule.
    deadline_set: bool,
    /// Cycles left in which the thread may not take the light shape, after
    /// [`Controller::leave_light`].
    light_pause: u32,
    /// Figures derived from `cfg` (recomputed when the audio period changes).
    geo: Geometry,
}

/// A thread becomes light when its median CPU time is at most this share of
/// the bound (100 − light deadline) % of its budget (see
/// [`ControllerConfig::light_deadline_pct`]).
pub const LIGHT_ENTRY_FACTOR: f64 = 0.9;

/// A light thread stays light until its median CPU time passes this many
/// times the bound (75 % of its budget at the default 50 % light deadline).
/// Past the bound it arms the kernel's inactive timer in the cycles in which
/// it uses more than that share, where on the full period it would arm it
/// in every cycle, so staying light costs nothing; leaving and entering
/// again costs three `sched_setattr` calls (the exit, the bridge, the light
/// shape). With the exit at the bound itself, medians around half the
/// budget (10 × 1 % at 128 frames, where the clients spin for their
/// inputs) flipped the shape about once a second per thread: replaying a
/// recorded 10-s window of that load (`controller_replay`), the controllers
/// returned 507 changes, 130 of them shape changes only; with this factor,
/// 323 and 12.
pub const LIGHT_EXIT_FACTOR: f64 = 1.5;

/// A feedback cut of the budget is applied only past this many times the
/// change threshold (a raise past the threshold itself): hysteresis, so a
/// prediction hovering around one level does not call `sched_setattr` on
/// every small swing (measured: 234 calls in 5 s for 11 threads at 10 x 1 %
/// before, see docs/bench-vs-jackd2.md).
pub const DECREASE_THRESHOLD_FACTOR: f64 = 4.0;

fn pct_of(period_ns: u64, pct: f64) -> u64 {
    // `as` saturates (negative and NaN give 0).
    (period_ns as f64 * pct / 100.0).round() as u64
}

fn scale(v: u64, by: f64) -> u64 {
    (v as f64 * by).round() as u64
}

impl Controller {
    /// A controller in its initial state (see the module docs). Allocates the
    /// predictor's window.
    pub fn new(cfg: ControllerConfig) -> Self {
        let mut c = Controller {
            cfg,
            predictor: Predictor::new(cfg.window, cfg.percentile),
            res: Reservation {
                runtime_ns: 0,
                deadline_ns: 0,
                period_ns: 0,
            },
            wanted_ns: 0,
            predicted_ns: 0,
            deadline_set: false,
            light_pause: 0,
            geo: Geometry::of(&cfg),
        };
        c.reset();
        c
    }

    /// Returns to the initial state (empty window, initial budget, full
    /// period, deadline = period), e.g. when a new thread takes over this
    /// controller's slot. No allocation.
    ///
    /// Real-time safe.
    pub fn reset(&mut self) {
        self.predictor.flush();
        self.predicted_ns = 0;
        self.deadline_set = false;
        self.light_pause = 0;
        let period = self.geo.full_ns;
        self.res = Reservation {
            runtime_ns: 0,
            deadline_ns: period,
            period_ns: period,
        };
        let raw = match self.cfg.fixed_pct {
            Some(_) => self.fixed_ns(),
            None => pct_of(period, self.cfg.initial_pct),
        };
        let shaped = self.shape(raw);
        self.take(shaped);
    }

    /// The reservation for budget `raw` (ns per reservation period, before
    /// the min/max clamp) and the clamped budget: when the thread is light
    /// (see [`ControllerConfig::light_deadline_pct`]), the light period and
    /// deadline, reached through one cycle on the bridge (see the module
    /// docs); else the full period and deadline = period (or the one
    /// [`Self::set_deadline`] set). The runtime is at most the deadline.
    fn shape(&self, raw: u64) -> (Reservation, u64) {
        let full = self.geo.full_ns;
        let wanted = raw.clamp(self.geo.lo_ns, self.geo.hi_ns);
        if self.is_light(wanted) {
            let (period, deadline) = if self.has_light_shape() || self.on_bridge() {
                (self.geo.light_period_ns, self.geo.light_deadline_ns)
            } else {
                let bridge = self.geo.light_bridge_ns;
                (bridge, bridge)
            };
            let res = Reservation {
                runtime_ns: wanted.min(deadline),
                deadline_ns: deadline,
                period_ns: period,
            };
            return (res, wanted);
        }
        let deadline = if self.deadline_set {
            self.res.deadline_ns.clamp(MIN_RUNTIME_NS.min(full), full)
        } else {
            full
        };
        let res = Reservation {
            runtime_ns: wanted.min(deadline),
            deadline_ns: deadline,
            period_ns: full,
        };
        (res, wanted)
    }

    /// Whether the reservation as set has the light shape: only a light
    /// shape has a deadline short of the period without an explicit one.
    fn has_light_shape(&self) -> bool {
        !self.deadline_set && self.res.deadline_ns < self.res.period_ns
    }

    /// Whether the reservation as set is the bridge into the light shape:
    /// deadline = period = the bridge's, short of the full period.
    fn on_bridge(&self) -> bool {
        let bridge = self.geo.light_bridge_ns;
        self.cfg.light_shape()
            && !self.deadline_set
            && self.res.period_ns == bridge
            && self.res.deadline_ns == bridge
            && bridge < self.geo.full_ns
    }

    /// Whether a thread with budget `wanted` is light: light shapes on, no
    /// explicit deadline, feedback mode, one audio period per reservation
    /// period, a full window whose median is at most (100 − light deadline)
    /// % of the budget ([`LIGHT_ENTRY_FACTOR`] of that to become light,
    /// [`LIGHT_EXIT_FACTOR`] of it to stay light), and the budget within
    /// the light deadline. With a multiplier above 1 a thread wakes several
    /// times per reservation period, every wake-up after the first one past
    /// a short deadline, and the kernel would hold each until the period's
    /// end.
    fn is_light(&self, wanted: u64) -> bool {
        if !self.cfg.light_shape()
            || self.light_pause > 0
            || self.deadline_set
            || self.cfg.fixed_pct.is_some()
            || self.geo.multiplier != 1
            || !self.predictor.is_full()
            || wanted > self.geo.light_deadline_ns
        {
            return false;
        }
        let Some(typical) = self.predictor.median() else {
            return false;
        };
        let spare = 1.0 - self.cfg.light_deadline_pct / 100.0;
        let hysteresis = if self.has_light_shape() {
            LIGHT_EXIT_FACTOR
        } else {
            LIGHT_ENTRY_FACTOR
        };
        let bound = wanted as f64 * spare * hysteresis;
        (typical as f64) <= bound
    }

    /// Takes `res` and `wanted` from [`Self::shape`].
    fn take(&mut self, (res, wanted): (Reservation, u64)) {
        self.res = res;
        self.wanted_ns = wanted;
    }

    /// What is currently set (or to be set).
    ///
    /// Real-time safe.
    pub fn reservation(&self) -> Reservation {
        self.res
    }

    /// Last prediction per reservation period, i.e. predicted CPU per audio
    /// cycle x D, before overprovisioning (0 if none yet or in fixed mode).
    ///
    /// Real-time safe.
    pub fn predicted_ns(&self) -> u64 {
        self.predicted_ns
    }

    /// The settings.
    ///
    /// Real-time safe.
    pub fn config(&self) -> &ControllerConfig {
        &self.cfg
    }

    /// The reservation period now ([`ControllerConfig::reservation_period_ns`],
    /// kept from the last change of the audio period).
    ///
    /// Real-time safe.
    pub fn reservation_period_ns(&self) -> u64 {
        self.geo.full_ns
    }

    /// The light slack now ([`ControllerConfig::light_slack_ns`], kept from
    /// the last change of the audio period).
    ///
    /// Real-time safe.
    pub fn light_slack_ns(&self) -> u64 {
        self.geo.light_slack_ns
    }

    /// Whether the window is still being refilled (after `new`, a flush or a
    /// period change); the budget then only goes up.
    ///
    /// Real-time safe.
    pub fn warming_up(&self) -> bool {
        self.cfg.fixed_pct.is_none() && !self.predictor.is_full()
    }

    /// Fixed budget: fixed_pct of the full period, capped at max_pct (not raised to min_pct).
    fn fixed_ns(&self) -> u64 {
        let (period, hi) = (self.geo.full_ns, self.geo.hi_ns);
        let pct = self.cfg.fixed_pct.unwrap_or(self.cfg.initial_pct);
        pct_of(period, pct).clamp(MIN_RUNTIME_NS, hi)
    }

    /// Sets the wanted budget; returns the new reservation if it changed and
    /// (unless `force`) moved past the change threshold: a raise past
    /// `change_threshold_pct`, a cut only past [`DECREASE_THRESHOLD_FACTOR`]
    /// times that (a budget that hovers near the prediction would otherwise
    /// cost a `sched_setattr` every few cycles; keeping a little more budget
    /// for a while costs nothing on the hop). The first proposal from a
    /// window just refilled after a flush cuts at the plain threshold, so a
    /// bump is undone once the window is full again.
    /// `raw` is the budget before the clamp and the choice of shape
    /// ([`Self::shape`]).
    fn propose(&mut self, raw: u64, force: bool) -> Option<Reservation> {
        self.propose_with(raw, force, DECREASE_THRESHOLD_FACTOR)
    }

    /// [`Self::propose`] with the cut threshold `cut_factor` x the change
    /// threshold.
    fn propose_with(&mut self, raw: u64, force: bool, cut_factor: f64) -> Option<Reservation> {
        let shaped = self.shape(raw);
        let (next, wanted) = shaped;
        let runtime = next.runtime_ns;
        let cur = self.res.runtime_ns;
        let threshold = if runtime < cur {
            self.cfg.change_threshold_pct * cut_factor
        } else {
            self.cfg.change_threshold_pct
        };
        // A change of shape moves the period or the deadline.
        let reshaped =
            next.period_ns != self.res.period_ns || next.deadline_ns != self.res.deadline_ns;
        let moved = runtime.abs_diff(cur) as f64 > threshold / 100.0 * cur as f64 || reshaped;
        if next == self.res || !(force || moved) {
            if force {
                self.wanted_ns = wanted;
            }
            return None;
        }
        self.take(shaped);
        Some(self.res)
    }

    /// Starts loading what the next [`Self::cycle_begin`] reads into the
    /// CPU's caches: the controller's own fields and its predictor's window
    /// (see [`Predictor::prefetch`]); in fixed mode, which reads neither,
    /// nothing. Measured on the live driver (10 × 1 %, per-stage clock
    /// reads, median per cycle over eleven controllers, three alternated
    /// runs each): the window alone 4.5 µs for prefetch and controllers
    /// together, with the fields too 4.1 µs, with no prefetch 5.1 µs.
    ///
    /// Real-time safe.
    pub fn prefetch(&self) {
        if self.cfg.fixed_pct.is_some() {
            return;
        }
        crate::prefetch_bytes(std::ptr::from_ref(self).cast(), std::mem::size_of::<Self>());
        self.predictor.prefetch();
    }

    /// Cycle begin: feeds the CPU time (ns) the thread used in the last audio
    /// cycle. Returns `Some(new)` when `sched_setattr` is due (the budget
    /// moved past the threshold), else `None`. In fixed mode the sample is
    /// ignored and this always returns `None`. No allocation.
    ///
    /// Real-time safe.
    pub fn cycle_begin(&mut self, used_ns: u64) -> Option<Reservation> {
        if self.cfg.fixed_pct.is_some() {
            return None;
        }
        let was_warming = !self.predictor.is_full();
        self.light_pause = self.light_pause.saturating_sub(1);
        self.predictor.push(used_ns);
        let per_cycle = self.predictor.predict().unwrap_or(used_ns);
        self.predicted_ns = per_cycle.saturating_mul(self.geo.multiplier as u64);
        let mut wanted = scale(self.predicted_ns, 1.0 + self.cfg.overprovision_pct / 100.0);
        if !self.predictor.is_full() {
            wanted = wanted.max(self.wanted_ns);
        }
        let refilled = was_warming && self.predictor.is_full();
        let cut_factor = if refilled {
            1.0
        } else {
            DECREASE_THRESHOLD_FACTOR
        };
        self.propose_with(wanted, false, cut_factor)
    }

    /// Flush + bump (the thesis, §3.4.5): 10% when at the minimum, 20% otherwise
    /// (the configured percentages), clamped to the maximum. `None` in fixed
    /// mode or when already at the maximum.
    fn bump(&mut self) -> Option<Reservation> {
        if self.cfg.fixed_pct.is_some() {
            return None;
        }
        self.predictor.flush();
        let pct = if self.wanted_ns <= self.geo.lo_ns {
            self.cfg.bump_min_pct
        } else {
            self.cfg.bump_pct
        };
        let wanted = scale(self.wanted_ns, 1.0 + pct / 100.0);
        self.propose(wanted, true)
    }

    /// A new client joined the graph: the window no longer describes the
    /// load, so it is flushed and the budget bumped (see the module docs).
    ///
    /// Real-time safe.
    pub fn on_activation(&mut self) -> Option<Reservation> {
        self.bump()
    }

    /// An xrun happened: same flush and bump as [`on_activation`](Self::on_activation).
    ///
    /// Real-time safe.
    pub fn on_xrun(&mut self) -> Option<Reservation> {
        self.bump()
    }

    /// The thread woke so late in its cycle that, on the light shape, the
    /// kernel could hold its next wake-up (see the module docs): it goes
    /// to the full period (returned when that changes the reservation; on
    /// the bridge too, whose replenishment would now be as late) and may
    /// not become light again for a window of cycles (each late wake-up
    /// meanwhile starts the count again). One cycle would do for the
    /// kernel (the wake-up after the late one is checked against the full
    /// period, the next one against the bridge); the window makes a burst
    /// of late wake-ups one exit and one return, and measured better than
    /// 16 cycles (see docs/architecture.md, "Light threads"). `None`
    /// without light shapes.
    ///
    /// Real-time safe.
    pub fn leave_light(&mut self) -> Option<Reservation> {
        if !self.cfg.light_shape() {
            return None;
        }
        self.light_pause = self.cfg.window.max(1) as u32;
        if !self.has_light_shape() && !self.on_bridge() {
            return None;
        }
        let shaped = self.shape(self.wanted_ns);
        self.take(shaped);
        Some(self.res)
    }

    /// The ledger or the kernel refused the reservation last returned: it
    /// is `kept`, what was set before, again, so that the next decision
    /// starts from what the kernel really has (a refused bridge must not be
    /// followed by the light shape).
    ///
    /// Real-time safe.
    pub fn refused(&mut self, kept: Reservation) {
        self.res = kept;
    }

    /// The audio period changed (buffer-size change), also in fixed mode.
    /// The reservation period follows (x D; with `auto_min_period_ns` the
    /// multiplier is recomputed for the new audio period first). In fixed mode the budget is
    /// recomputed; in feedback mode the budget and an explicitly set
    /// deadline are scaled by new/old period (the bandwidth stays the same),
    /// the window, whose samples were per *old* cycle, is flushed and refilled
    /// (warm-up). A deadline not set explicitly follows the configured rule. Returns
    /// the new reservation (`None` if nothing changed or `period_ns` is 0).
    ///
    /// Real-time safe.
    pub fn set_audio_period(&mut self, period_ns: u64) -> Option<Reservation> {
        if period_ns == 0 || period_ns == self.cfg.audio_period_ns {
            return None;
        }
        let old = self.res;
        let old_full = self.geo.full_ns;
        self.cfg.audio_period_ns = period_ns;
        self.geo = Geometry::of(&self.cfg);
        let full = self.geo.full_ns;
        let ratio = full as f64 / old_full.max(1) as f64;
        if self.deadline_set {
            self.res.deadline_ns = scale(old.deadline_ns, ratio);
        }
        let raw = if self.cfg.fixed_pct.is_some() {
            self.fixed_ns()
        } else {
            self.predictor.flush();
            self.predicted_ns = scale(self.predicted_ns, ratio);
            scale(self.wanted_ns, ratio)
        };
        let shaped = self.shape(raw);
        self.take(shaped);
        (self.res != old).then_some(self.res)
    }

    /// Lowers the budget floor to `min_pct` % of the reservation period
    /// (no-op unless lower than the floor now). The reservation is left as
    /// it is: the next feedback cut brings a budget held up by the old
    /// floor down, paced like any other change. True if the floor moved.
    ///
    /// Real-time safe.
    pub fn lower_floor(&mut self, min_pct: f64) -> bool {
        if min_pct.is_nan() || min_pct >= self.cfg.min_pct {
            return false;
        }
        self.cfg.min_pct = min_pct;
        self.geo = Geometry::of(&self.cfg);
        true
    }

    /// Sets the relative deadline (critical-path mode), clamped to [1024 ns,
    /// full period]; the thread leaves the light shape; the runtime is
    /// clamped to <= deadline (and restored when the deadline is raised
    /// again). Returns the new reservation if it changed.
    ///
    /// Real-time safe.
    pub fn set_deadline(&mut self, deadline_ns: u64) -> Option<Reservation> {
        let old = self.res;
        self.deadline_set = true;
        self.res.deadline_ns = deadline_ns;
        let shaped = self.shape(self.wanted_ns);
        self.take(shaped);
        (self.res != old).then_some(self.res)
    }
}

/// Budget bounds (ns) of a reservation of period `period_ns` from
/// min_pct/max_pct, within [1024 ns, period]; max wins over min.
fn limits_of(period_ns: u64, cfg: &ControllerConfig) -> (u64, u64) {
    let p = period_ns.max(MIN_RUNTIME_NS);
    let hi = pct_of(p, cfg.max_pct).clamp(MIN_RUNTIME_NS, p);
    let lo = pct_of(p, cfg.min_pct).clamp(MIN_RUNTIME_NS, hi);
    (lo, hi)
}

#[cfg(test)]
mod tests;
