//! From a scenario to what one run does: the effective server settings of a
//! configuration, the servers it runs on, and the timeline (client joins and
//! leaves, buffer-size changes, kills, rt-app tasks) with `--quick` applied
//! (every time scaled by `quick_duration_s / duration_s`). Pure; built on
//! the command's main thread.

use crate::experiment::scenario::{
    Action, AudioPolicy, Mode, Multiplier, Placement, RtPolicyName, RunConfig, Scenario, ServerKind,
};

/// What one configuration on one server runs.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// The configuration's name and label.
    pub run: String,
    /// See `run`.
    pub label: String,
    /// The server.
    pub server: ServerKind,
    /// Sample rate (Hz).
    pub rate: u32,
    /// Frames per period at the start.
    pub frames: u32,
    /// Engine mode.
    pub mode: Mode,
    /// Audio policy.
    pub policy: AudioPolicy,
    /// SCHED_FIFO priority of the driver (fifo).
    pub priority: i32,
    /// Reservation period multiplier (deadline policies).
    pub multiplier: Option<Multiplier>,
    /// Restrict everything to the first N CPUs.
    pub cpus: Option<usize>,
    /// Extra resoundd options.
    pub resound_args: Vec<String>,
    /// Length of the run (s).
    pub duration_s: f64,
    /// Start of the measured window (s).
    pub warmup_s: f64,
    /// Timeline steps, by time.
    pub steps: Vec<Step>,
    /// The rt-app tasks, their times scaled and policies resolved.
    pub rtapp: Vec<RtTaskPlan>,
}

/// One step of the timeline.
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    /// When (s from the start of the run).
    pub at_s: f64,
    /// What.
    pub what: StepKind,
}

/// What a step does.
#[derive(Debug, Clone, PartialEq)]
pub enum StepKind {
    /// A load client joins.
    Join(ClientPlan),
    /// A load client leaves (SIGTERM: it closes as a JACK client).
    Leave(String),
    /// The buffer size changes.
    BufferSize(u32),
    /// A client is killed (SIGKILL).
    Kill(String),
}

/// A load client to start.
#[derive(Debug, Clone, PartialEq)]
pub struct ClientPlan {
    /// Its JACK name (`dnl3`).
    pub name: String,
    /// Busy share of the period (percent).
    pub busy_pct: f64,
    /// Where its input comes from: None = the first capture port.
    pub from: Option<String>,
    /// Its output goes to the first playback port.
    pub to_playback: bool,
    /// Ports (`client:out`) to connect into its input once it is ready (fan-in).
    pub extra_inputs: Vec<String>,
}

/// An rt-app task with its times scaled and its policy resolved.
#[derive(Debug, Clone, PartialEq)]
pub struct RtTaskPlan {
    /// rt-app thread name.
    pub name: String,
    /// Period (us).
    pub period_us: u64,
    /// Run time per job (us).
    pub run_us: u64,
    /// Threads.
    pub instances: u32,
    /// Scheduling.
    pub policy: RtPolicyName,
    /// SCHED_FIFO priority (fifo).
    pub priority: i32,
    /// Start (s from the start of the run).
    pub start_s: f64,
    /// Stop (s), None = the end of the run.
    pub stop_s: Option<f64>,
}

/// The default SCHED_FIFO priority of the audio driver (jackd's `-P 10`
/// in the papers' Table 2).
pub const DEFAULT_PRIORITY: i32 = 10;
/// The default SCHED_FIFO priority of rt-app tasks.
pub const DEFAULT_RT_PRIORITY: i32 = 15;

/// The servers a configuration runs on.
pub fn servers_of(run: &RunConfig) -> Vec<ServerKind> {
    run.servers.clone().unwrap_or_else(|| {
        if matches!(run.policy, AudioPolicy::Other | AudioPolicy::Fifo) {
            vec![ServerKind::Resound, ServerKind::Jackd]
        } else {
            vec![ServerKind::Resound]
        }
    })
}

/// The run length and the factor timeline times are scaled by.
pub fn duration_and_scale(sc: &Scenario, quick: bool) -> (f64, f64) {
    if !quick {
        return (sc.duration_s, 1.0);
    }
    let q = sc
        .quick_duration_s
        .unwrap_or_else(|| sc.duration_s.min(10.0));
    (q, q / sc.duration_s)
}

/// Every plan of a scenario, in report order.
pub fn plans(sc: &Scenario, quick: bool) -> Vec<Plan> {
    sc.runs
        .iter()
        .flat_map(|r| {
            servers_of(r)
                .into_iter()
                .map(move |s| plan(sc, r, s, quick))
        })
        .collect()
}

/// The plan of configuration `run` on `server`.
pub fn plan(sc: &Scenario, run: &RunConfig, server: ServerKind, quick: bool) -> Plan {
    let (duration_s, k) = duration_and_scale(sc, quick);
    let mut steps = client_steps(sc, run, k);
    for e in &sc.events {
        let what = match &e.action {
            Action::BufferSize(n) => StepKind::BufferSize(*n),
            Action::Kill(c) => StepKind::Kill(c.clone()),
        };
        steps.push(Step {
            at_s: e.at_s * k,
            what,
        });
    }
    steps.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    Plan {
        run: run.name.clone(),
        label: run.label.clone().unwrap_or_else(|| run.name.clone()),
        server,
        rate: run.rate.unwrap_or(sc.server.rate),
        frames: run.frames.unwrap_or(sc.server.frames),
        mode: run.mode.unwrap_or(sc.server.mode),
        policy: run.policy,
        priority: run.priority.unwrap_or(DEFAULT_PRIORITY),
        multiplier: run.period_multiplier,
        cpus: run.cpus.or(sc.server.cpus),
        resound_args: run.resound_args.clone(),
        duration_s,
        warmup_s: sc.warmup_s * k,
        steps,
        rtapp: rt_tasks(sc, run, k),
    }
}

/// The joins and leaves of every client group, times scaled by `k`; the
/// configuration's `placement` overrides the groups'.
fn client_steps(sc: &Scenario, run: &RunConfig, k: f64) -> Vec<Step> {
    let mut steps = Vec::new();
    for g in &sc.clients {
        let name = |i: u32| format!("{}{i}", g.name);
        let placement = run.placement.unwrap_or(g.placement);
        for i in 1..=g.count {
            let (from, to_playback, extra_inputs) = match placement {
                Placement::Chain => (
                    (i > 1).then(|| format!("{}:out", name(i - 1))),
                    true,
                    vec![],
                ),
                Placement::Parallel => (None, true, vec![]),
                Placement::FanIn if i < g.count || g.count == 1 => (None, g.count == 1, vec![]),
                Placement::FanIn => (
                    Some(format!("{}:out", name(1))),
                    true,
                    (2..g.count).map(|j| format!("{}:out", name(j))).collect(),
                ),
            };
            let at_s = (g.join_at_s + (i - 1) as f64 * g.join_every_s) * k;
            steps.push(Step {
                at_s,
                what: StepKind::Join(ClientPlan {
                    name: name(i),
                    busy_pct: g.busy_pct,
                    from,
                    to_playback,
                    extra_inputs,
                }),
            });
        }
        if let Some(t) = g.leave_at_s {
            for i in (1..=g.count).rev() {
                steps.push(Step {
                    at_s: t * k,
                    what: StepKind::Leave(name(i)),
                });
            }
        }
    }
    steps
}

/// The rt-app tasks of `run`, times scaled by `k`.
fn rt_tasks(sc: &Scenario, run: &RunConfig, k: f64) -> Vec<RtTaskPlan> {
    sc.rtapp
        .iter()
        .map(|t| RtTaskPlan {
            name: t.name.clone(),
            period_us: t.period_us,
            run_us: t.run_us,
            instances: t.instances,
            policy: run.rtapp_policy.unwrap_or(t.policy),
            priority: run
                .rtapp_priority
                .or(t.priority)
                .unwrap_or(DEFAULT_RT_PRIORITY),
            start_s: t.start_s * k,
            stop_s: t.stop_s.map(|s| s * k),
        })
        .collect()
}

impl Plan {
    /// The server's name in tables ("resound", "jackd2").
    pub fn server_label(&self) -> &'static str {
        match self.server {
            ServerKind::Resound => "resound",
            ServerKind::Jackd => "jackd2",
        }
    }

    /// Audio period (ns) at the start.
    pub fn period_ns(&self) -> u64 {
        resound_shm::time::frames_to_ns(self.frames.into(), self.rate)
    }

    /// The reservation period multiplier as a resoundd option value.
    pub fn multiplier_arg(&self) -> Option<String> {
        match self.multiplier? {
            Multiplier::Fixed(n) => Some(n.to_string()),
            Multiplier::Auto(_) => Some("auto".into()),
        }
    }

    /// The resoundd server options (before `-d`).
    pub fn resound_server_args(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        if self.mode == Mode::Sync {
            v.push("-S".into());
        }
        match self.policy {
            AudioPolicy::Other => v.push("-r".into()),
            AudioPolicy::Fifo => {
                v.extend(["--sched".into(), "fifo".into(), "-P".into()]);
                v.push(self.priority.to_string());
            }
            AudioPolicy::Deadline | AudioPolicy::DeadlineReclaim => {
                let reclaim = if self.policy == AudioPolicy::Deadline {
                    "--no-reclaim"
                } else {
                    "--reclaim"
                };
                v.extend(["--sched".into(), "deadline".into(), reclaim.into()]);
                if let Some(m) = self.multiplier_arg() {
                    v.extend(["--period-multiplier".into(), m]);
                }
                let asks = |o: &str| self.resound_args.iter().any(|a| a.starts_with(o));
                // The papers' controller: every thread on the audio period
                // with deadline = period, fed CPU times without spinning,
                // always under its reservation (no throttle rescue), with
                // the thesis' minimum budget.
                if !asks("--light-") {
                    v.extend(["--light-deadline".into(), "100".into()]);
                }
                if !asks("--early-wake") {
                    v.extend(["--early-wake".into(), "0".into()]);
                }
                if !asks("--throttle-rescue") {
                    v.extend(["--throttle-rescue".into(), "0".into()]);
                }
                if !asks("--min-budget") {
                    v.extend([
                        "--min-budget".into(),
                        resound_sched::controller::THESIS_MIN_BUDGET_PCT.to_string(),
                    ]);
                }
            }
        }
        v.extend(self.resound_args.iter().cloned());
        v
    }

    /// The jackd server options (before `-d`); jackd has no reservations.
    pub fn jackd_server_args(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        if self.mode == Mode::Sync {
            v.push("-S".into());
        }
        match self.policy {
            AudioPolicy::Fifo => {
                v.extend(["-R".into(), "-P".into(), self.priority.to_string()]);
            }
            _ => v.push("-r".into()),
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiment::scenario::catalog::load;

    /// `--light-deadline VALUE` in a resoundd argument list, if any.
    fn light_deadline(args: &[String]) -> Option<&str> {
        let at = args.iter().position(|a| a == "--light-deadline")?;
        args.get(at + 1).map(String::as_str)
    }

    #[test]
    fn reservations_run_the_papers_controller_unless_a_scenario_asks_otherwise() {
        let (sc, _) = load("staircase").expect("shipped");
        let deadline = plans(&sc, true)
            .into_iter()
            .find(|p| p.policy == AudioPolicy::Deadline && p.server == ServerKind::Resound)
            .expect("a reservation run");
        let args = deadline.resound_server_args();
        assert_eq!(
            light_deadline(&args),
            Some("100"),
            "deadline = period for every thread, as in the papers"
        );
        let early = args.iter().position(|a| a == "--early-wake");
        assert_eq!(
            early.map(|i| args[i + 1].as_str()),
            Some("0"),
            "no spinning"
        );
        let rescue = args.iter().position(|a| a == "--throttle-rescue");
        assert_eq!(
            rescue.map(|i| args[i + 1].as_str()),
            Some("0"),
            "every thread under its reservation throughout"
        );
        let floor = args.iter().position(|a| a == "--min-budget");
        assert_eq!(
            floor.map(|i| args[i + 1].as_str()),
            Some("5"),
            "the thesis' minimum budget"
        );
        let asked = Plan {
            resound_args: vec!["--light-deadline".into(), "50".into()],
            ..deadline.clone()
        };
        let args = asked.resound_server_args();
        assert_eq!(light_deadline(&args), Some("50"));
        assert_eq!(args.iter().filter(|a| *a == "--light-deadline").count(), 1);
        let fifo = Plan {
            policy: AudioPolicy::Fifo,
            ..deadline
        };
        assert_eq!(light_deadline(&fifo.resound_server_args()), None);
    }
}
