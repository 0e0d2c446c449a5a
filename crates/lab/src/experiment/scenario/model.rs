//! The scenario file's schema (TOML). One file describes one experiment:
//! the server settings shared by every configuration, the configurations
//! compared (`[[run]]`: scheduling policy, servers, overrides), the load
//! clients (`[[clients]]`) and competing rt-app tasks (`[[rtapp]]`) with the
//! times they join and leave, other timeline events (`[[event]]`: a buffer
//! size change, a client killed), the measures, the duration, and the
//! published values the report puts beside the measured ones
//! (`[published]`).
//!
//! Times on the timeline are seconds from the moment the server is ready
//! (the start of the run); the measured window is the whole run after
//! `warmup_s`. Every struct refuses unknown fields, so a typo is an error
//! with its line number, not a silently ignored setting.

use super::metric::Metric;
use serde::{Deserialize, Serialize};

/// A whole scenario file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short identifier (`experiment run NAME`): lowercase letters, digits
    /// and dashes.
    pub name: String,
    /// One-line title for the report.
    pub title: String,
    /// What the experiment shows, a paragraph for the report.
    #[serde(default)]
    pub description: String,
    /// Length of each configuration's run, warm-up included (s).
    pub duration_s: f64,
    /// Length with `--quick` (s); default: the shorter of `duration_s` and 10.
    /// `--quick` scales every time on the timeline by
    /// `quick_duration_s / duration_s`: client joins, `join_every_s` and
    /// leaves, rt-app starts and stops, events, and `warmup_s`, so the run
    /// keeps its shape, shorter (a staircase of ten joins 10 s apart over
    /// 120 s becomes joins 1.17 s apart with `quick_duration_s = 14`).
    /// Periods, loads and rates are not scaled.
    #[serde(default)]
    pub quick_duration_s: Option<f64>,
    /// Seconds at the start of each run left out of the statistics (the
    /// figures show them). Default 1.
    #[serde(default = "default_warmup")]
    pub warmup_s: f64,
    /// Server settings every configuration starts from.
    pub server: ServerSettings,
    /// The configurations compared, in report order (at least one).
    #[serde(rename = "run")]
    pub runs: Vec<RunConfig>,
    /// Load-client groups (none: the driver runs alone).
    #[serde(default)]
    pub clients: Vec<ClientGroup>,
    /// Competing rt-app tasks (none: no competing load).
    #[serde(default)]
    pub rtapp: Vec<RtAppTask>,
    /// Other timeline events.
    #[serde(default, rename = "event")]
    pub events: Vec<TimelineEvent>,
    /// What the report shows (default: all that applies).
    #[serde(default)]
    pub measure: Measures,
    /// The published values this scenario reproduces.
    #[serde(default)]
    pub published: Option<Published>,
}

fn default_warmup() -> f64 {
    1.0
}

/// Server settings (also overridable per configuration).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerSettings {
    /// Sample rate (Hz).
    pub rate: u32,
    /// Frames per period.
    pub frames: u32,
    /// Engine mode.
    #[serde(default)]
    pub mode: Mode,
    /// Audio driver: only `dummy` (the papers' timing is the driver
    /// thread's own; a sound card is not there on a CI machine).
    #[serde(default = "default_driver")]
    pub driver: String,
    /// Run the server, clients and rt-app on the first N CPUs only (None: all).
    #[serde(default)]
    pub cpus: Option<usize>,
}

fn default_driver() -> String {
    "dummy".into()
}

/// Sync (the driver waits for the graph) or async (it does not).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// `-S`: the cycle ends when the graph has finished (the papers' mode).
    #[default]
    Sync,
    /// The driver writes the previous cycle's output and does not wait.
    Async,
}

/// Which server a configuration runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerKind {
    /// resoundd.
    Resound,
    /// Debian's jackd (jackd2), only for the `other` and `fifo` policies.
    Jackd,
}

/// The scheduling of the audio graph's real-time threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AudioPolicy {
    /// No real-time scheduling (CFS; `-r`).
    #[serde(rename = "other")]
    Other,
    /// SCHED_FIFO at `priority`.
    #[serde(rename = "fifo")]
    Fifo,
    /// SCHED_DEADLINE reservations with feedback-controlled budgets, hard (no reclaiming).
    #[serde(rename = "deadline")]
    Deadline,
    /// The same with GRUB reclaiming (the papers' SHRUB).
    #[serde(rename = "deadline+reclaim")]
    DeadlineReclaim,
}

/// One configuration compared (a row of the papers' tables).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunConfig {
    /// Identifier within the scenario (lowercase letters, digits, dashes);
    /// published values refer to it.
    pub name: String,
    /// Label in tables and legends (default: the name).
    #[serde(default)]
    pub label: Option<String>,
    /// Servers to run it on (default: resound, plus jackd when the policy
    /// is `other` or `fifo`).
    #[serde(default)]
    pub servers: Option<Vec<ServerKind>>,
    /// Scheduling of the audio threads.
    pub policy: AudioPolicy,
    /// SCHED_FIFO priority of the driver for `fifo` (clients one below, as
    /// jackd does). Default 10.
    #[serde(default)]
    pub priority: Option<i32>,
    /// Reservation period in audio periods (`deadline*`): a number, or
    /// `"auto"` for the thesis's rule for short periods. Default 1.
    #[serde(default)]
    pub period_multiplier: Option<Multiplier>,
    /// Overrides of the server settings for this configuration.
    #[serde(default)]
    pub rate: Option<u32>,
    /// See `rate`.
    #[serde(default)]
    pub frames: Option<u32>,
    /// See `rate`.
    #[serde(default)]
    pub mode: Option<Mode>,
    /// See `rate`.
    #[serde(default)]
    pub cpus: Option<usize>,
    /// Place of every client group's clients in the graph for this
    /// configuration (overrides each group's own `placement`; e.g. the same
    /// clients in sequence in one configuration and in parallel in another).
    #[serde(default)]
    pub placement: Option<Placement>,
    /// Scheduling of every rt-app task in this configuration (overrides
    /// each task's own `policy`).
    #[serde(default)]
    pub rtapp_policy: Option<RtPolicyName>,
    /// SCHED_FIFO priority of the rt-app tasks when `rtapp_policy = "fifo"`.
    #[serde(default)]
    pub rtapp_priority: Option<i32>,
    /// Extra resoundd options (not passed to jackd).
    #[serde(default)]
    pub resound_args: Vec<String>,
}

/// A reservation-period multiplier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Multiplier {
    /// This many audio periods.
    Fixed(u32),
    /// `"auto"`: raised for short audio periods (the thesis's rule).
    Auto(AutoWord),
}

/// The word `auto`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AutoWord {
    /// `"auto"`.
    Auto,
}

/// Where a group's clients sit in the graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Placement {
    /// capture -> c1 -> c2 -> ... -> cN -> playback (each joins at the end
    /// of the chain, before playback).
    #[default]
    Chain,
    /// capture -> ci -> playback for each client: they may run at once.
    Parallel,
    /// capture -> ci -> the group's last client -> playback: N-1 parallel
    /// clients mixed into one.
    FanIn,
}

/// A group of load clients (the papers' `dnl`: busy for a share of the
/// period, copying input to output), named `<name>1`, `<name>2`, ...
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientGroup {
    /// Name prefix (default `dnl`).
    #[serde(default = "default_client_name")]
    pub name: String,
    /// Clients in the group.
    pub count: u32,
    /// Share of the period each one stays busy (percent of the period's
    /// CPU time).
    pub busy_pct: f64,
    /// Place in the graph.
    #[serde(default)]
    pub placement: Placement,
    /// When the first client joins (s). Default 0.
    #[serde(default)]
    pub join_at_s: f64,
    /// Seconds between one client's join and the next's (0: all at once).
    #[serde(default)]
    pub join_every_s: f64,
    /// When the whole group leaves (s; None: stays to the end).
    #[serde(default)]
    pub leave_at_s: Option<f64>,
}

fn default_client_name() -> String {
    "dnl".into()
}

/// How an rt-app task is scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RtPolicyName {
    /// SCHED_OTHER.
    Other,
    /// SCHED_FIFO at the task's `priority`.
    Fifo,
    /// SCHED_DEADLINE: period = the task's period, runtime = 1.05 x its
    /// run time (the papers' rule).
    #[serde(rename = "deadline")]
    Deadline,
    /// The same with GRUB reclaiming (the papers' SHRUB "for both"): rt-app
    /// sets no reclaim flag itself, so the runner adds it to rt-app's
    /// threads once they run.
    #[serde(rename = "deadline+reclaim")]
    DeadlineReclaim,
}

/// A competing periodic task, run by Debian's rt-app.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RtAppTask {
    /// rt-app thread name.
    pub name: String,
    /// Job period (us).
    pub period_us: u64,
    /// CPU time per job (us).
    pub run_us: u64,
    /// Threads of this task. Default 1.
    #[serde(default = "one")]
    pub instances: u32,
    /// Scheduling (a configuration's `rtapp_policy` overrides it). Default fifo.
    #[serde(default = "default_rt_policy")]
    pub policy: RtPolicyName,
    /// SCHED_FIFO priority (a configuration's `rtapp_priority` overrides it). Default 15.
    #[serde(default)]
    pub priority: Option<i32>,
    /// When it starts (s). Default 0.
    #[serde(default)]
    pub start_s: f64,
    /// When it stops (s; None: runs to the end).
    #[serde(default)]
    pub stop_s: Option<f64>,
}

fn one() -> u32 {
    1
}

fn default_rt_policy() -> RtPolicyName {
    RtPolicyName::Fifo
}

/// A timeline event other than joins and leaves.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimelineEvent {
    /// When (s from the start of the run).
    pub at_s: f64,
    /// What happens.
    #[serde(flatten)]
    pub action: Action,
}

/// What a timeline event does (exactly one key besides `at_s`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Change the buffer size to this many frames (jack_set_buffer_size).
    BufferSize(u32),
    /// Kill this client with SIGKILL (e.g. `"dnl3"`).
    Kill(String),
}

/// Which measures the report shows. All default to true; those that do not
/// apply (rt-app figures without rt-app tasks) are left out anyway.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Measures {
    /// Driver period and driver end date per cycle (the papers' "audio
    /// driver timing" and "driver end date").
    pub driver: bool,
    /// Every client's end date per cycle ("clients end date").
    pub clients: bool,
    /// Reservation budgets, predictions and CPU used per cycle (the graph
    /// as one group reservation).
    pub budget: bool,
    /// rt-app response times and slack per job.
    pub rtapp: bool,
    /// Cumulative distributions of the period and end dates.
    pub cdf: bool,
}

impl Default for Measures {
    fn default() -> Self {
        Measures {
            driver: true,
            clients: true,
            budget: true,
            rtapp: true,
            cdf: true,
        }
    }
}

/// The published results a scenario reproduces.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Published {
    /// The published setup (hardware, kernel, scheduler, rate, frames, load).
    pub setup: String,
    /// Where the setup used here differs from the published one, and why.
    pub differences: String,
    /// Where the papers disagree with each other: the reading picked and why.
    #[serde(default)]
    pub reading: Option<String>,
    /// Published tables (or figures read as numbers where the text states them).
    #[serde(default, rename = "table")]
    pub tables: Vec<PublishedTable>,
}

/// One published table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishedTable {
    /// Paper title and table or section ("Adaptive ... JACK, Table 1").
    pub source: String,
    /// Its caption (units included).
    pub caption: String,
    /// Its values, each tied to a configuration of this scenario.
    #[serde(rename = "value")]
    pub values: Vec<PublishedValue>,
}

/// One published number.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PublishedValue {
    /// The configuration (`[[run]] name`) it corresponds to.
    pub run: String,
    /// What it measures.
    pub metric: Metric,
    /// The number as published (in the metric's unit).
    pub value: f64,
    /// The row label as published ("AQuoSA", "SHRUB", "Linux"), when it
    /// differs from the configuration's label.
    #[serde(default)]
    pub label: Option<String>,
}
