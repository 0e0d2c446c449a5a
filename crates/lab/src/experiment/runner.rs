//! Running one policy: a fresh `resoundd` in sync mode on the dummy driver in
//! a private directory, the chain of `resound-tool load` clients, the
//! competing task (Debian's rt-app through [`crate::rtapp`]), the warm-up,
//! the measurement (the [`Poller`] thread plus status polls every 100 ms) and its
//! [`PolicyResult`]. Runs on the main thread; every process is started
//! through the [harness](crate::harness) and stopped by its drop guards.

use super::budget::{policies_of, reserved_budgets};
use super::machine::{cpu_ticks, foreign_load, other_resound_processes, CpuTicks};
use super::poller::{ChainLog, Poller};
use super::report::{percentile, PolicyResult, RtReport};
use super::settings::{ExperimentArgs, Policy};
use crate::harness::{
    dummy_driver_args, Bins, Child, ChildOptions, Server, ServerSpec, StderrMode,
};
use crate::rtapp::{Calibration, RtApp, RtAppSpec, RtPolicy, RtTask};
use resound_client::prelude::*;
use resound_client::{Client, ControlSession};
use resound_protocol::wire::Status;
use resound_shm::time::frames_to_ns;
use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

type Res<T> = Result<T, String>;

/// Tag of the experiment's private directories (`$TMPDIR/resound-experiment-*`).
pub(super) const DIR_TAG: &str = "experiment";

/// Prints a progress line on stderr.
pub(super) fn progress(msg: &str) {
    eprintln!("[experiment] {msg}");
}

/// An error once SIGINT or SIGTERM arrived.
pub(super) fn check_interrupt(intr: &AtomicBool) -> Res<()> {
    if intr.load(Ordering::Acquire) {
        Err("interrupted".into())
    } else {
        Ok(())
    }
}

/// Sleeps `d`, returning early with an error on SIGINT/SIGTERM.
fn sleep_checked(d: Duration, intr: &AtomicBool) -> Res<()> {
    let t0 = Instant::now();
    while t0.elapsed() < d {
        check_interrupt(intr)?;
        std::thread::sleep((d - t0.elapsed().min(d)).min(Duration::from_millis(50)));
    }
    check_interrupt(intr)
}

/// The distinct strings of `v`, in order, comma-separated.
fn distinct(v: &[String]) -> String {
    let mut d: Vec<&str> = Vec::new();
    for s in v {
        if !d.contains(&s.as_str()) {
            d.push(s);
        }
    }
    d.join(", ")
}

/// How every process of a run is spawned: stderr kept for error messages,
/// killed with this process, out of the terminal's process group, and
/// pinned to `--cpu` when given.
fn child_options(a: &ExperimentArgs) -> ChildOptions {
    ChildOptions {
        stderr: StderrMode::Keep {
            keep: 40,
            echo: None,
        },
        die_with_parent: true,
        own_process_group: true,
        cpu: a.cpu,
    }
}

/// The audio graph of one policy. Fields drop in order: the probe and the
/// control session first, then the clients, then the server (and its directory).
struct Graph {
    /// Opened but never activated client whose view the poller reads.
    probe: Client,
    ctl: ControlSession,
    loads: Vec<Child>,
    server: Server,
    /// Process thread scheduling of each load client, from its `ready` line.
    client_sched: Vec<String>,
    /// Graph slots: the driver (0), then load1..loadN.
    slots: Vec<u32>,
}

/// Starts the server of `policy` and waits for it.
fn start_server(
    a: &ExperimentArgs,
    bins: &Bins,
    policy: Policy,
    intr: &AtomicBool,
) -> Res<(Server, ControlSession)> {
    let mut flags = policy.server_flags(a.priority);
    if let Some(extra) = &a.server_args {
        flags.extend(extra.split_whitespace().map(String::from));
    }
    let mut args = vec!["-S".to_string()];
    args.extend(flags.iter().cloned());
    args.extend(dummy_driver_args(a.rate, a.period));
    progress(&format!(
        "{}: starting resoundd -S {} -d dummy -r {} -p {}",
        policy.name(),
        flags.join(" "),
        a.rate,
        a.period
    ));
    let mut spec = ServerSpec::new(bins.clone(), DIR_TAG, &[]);
    spec.args = args;
    spec.child = child_options(a);
    spec.tools = child_options(a);
    let mut server = Server::spawn(spec)?;
    let ctl = server.wait_ready(&mut || check_interrupt(intr))?;
    Ok((server, ctl))
}

/// Starts the load clients, waits until each is ready, chains them from
/// `system:capture_1` to `system:playback_1` and opens the probe.
fn start_graph(a: &ExperimentArgs, bins: &Bins, policy: Policy, intr: &AtomicBool) -> Res<Graph> {
    let (server, ctl) = start_server(a, bins, policy, intr)?;
    let busy = a.busy.to_string();
    let mut loads = Vec::new();
    for i in 1..=a.clients {
        loads.push(server.spawn_tool(&format!("load{i}"), &["load", "--busy", &busy])?);
    }
    let mut client_sched = Vec::new();
    for (i, p) in loads.iter_mut().enumerate() {
        let v = p.wait_event("ready", Duration::from_secs(10), &mut || {
            check_interrupt(intr)
        })?;
        let want = format!("load{}", i + 1);
        if v["name"] != want.as_str() {
            return Err(format!("client {want} got the name {}", v["name"]));
        }
        client_sched.push(v["sched"].as_str().unwrap_or("?").to_string());
    }
    connect_chain(&ctl, a.clients)?;
    let probe = server
        .open_client("exp-probe")
        .map_err(|e| format!("the probe client: {e}"))?;
    let slots = graph_slots(&probe, a.clients)?;
    Ok(Graph {
        probe,
        ctl,
        loads,
        server,
        client_sched,
        slots,
    })
}

/// Connects `system:capture_1 -> load1 -> ... -> loadN -> system:playback_1`.
fn connect_chain(ctl: &ControlSession, clients: u32) -> Res<()> {
    let mut src = "system:capture_1".to_string();
    for i in 1..=clients {
        let dst = format!("load{i}:in");
        ctl.connect_ports(&src, &dst)
            .map_err(|e| format!("connect {src} -> {dst}: {e}"))?;
        src = format!("load{i}:out");
    }
    ctl.connect_ports(&src, "system:playback_1")
        .map_err(|e| format!("connect {src} -> system:playback_1: {e}"))
}

/// The graph slots of the driver (0) and of load1..loadN, as the probe sees them.
fn graph_slots(probe: &Client, clients: u32) -> Res<Vec<u32>> {
    let snap = probe.snapshot();
    let slot_of = |n: &str| {
        snap.clients
            .iter()
            .find(|(_, cn, _)| cn == n)
            .map(|(s, _, _)| *s)
            .ok_or_else(|| format!("client {n} not in the graph"))
    };
    let mut slots = vec![0u32];
    for i in 1..=clients {
        slots.push(slot_of(&format!("load{i}"))?);
    }
    Ok(slots)
}

/// Starts the competing task (none when `--rt-run-us 0`): Debian's rt-app,
/// one thread, running past the warm-up and the measurement; waits until the
/// kernel shows its policy.
fn start_rtapp(
    a: &ExperimentArgs,
    server: &Server,
    cal: Option<Calibration>,
) -> Res<Option<RtApp>> {
    let Some(cal) = cal else {
        return Ok(None);
    };
    let spec = RtAppSpec {
        tasks: vec![RtTask {
            name: "rtload".into(),
            period_us: a.rt_period_us,
            run_us: a.rt_run_us,
            policy: match a.rt_fifo {
                0 => RtPolicy::Other,
                priority => RtPolicy::Fifo { priority },
            },
            instances: 1,
            start_s: 0.0,
            stop_s: None,
        }],
        duration_s: a.warmup + a.seconds + 60.0,
    };
    let mut p = RtApp::start(
        &spec,
        &server.dir.join("rtapp"),
        &cal,
        &ChildOptions::default(),
    )?;
    p.wait_running(Duration::from_secs(10))?;
    Ok(Some(p))
}

/// What the status polls of the measurement add up to.
#[derive(Default)]
struct BudgetLog {
    /// Status polls.
    polls: u64,
    /// Sum over polls of the budget reserved per audio period (ns).
    budget_total: f64,
    /// Per graph thread (in slot order): the polls in which it held a reservation.
    reserved_polls: Vec<u64>,
}

/// An error when the server or the competing task exited.
fn check_alive(server: &mut Server, rtapp: &mut Option<RtApp>) -> Res<()> {
    if let Some(st) = server.exited() {
        return Err(format!(
            "resoundd exited during the measurement ({st}):\n{}",
            server.log().tail(10)
        ));
    }
    if let Some(e) = rtapp.as_mut().and_then(RtApp::exited) {
        return Err(format!(
            "the competing task ended during the measurement: {e}"
        ));
    }
    Ok(())
}

/// Prints the seconds left of the measurement when they change (on one
/// line on a terminal, every 5 s otherwise).
struct Countdown {
    tty: bool,
    last_left: u64,
}

impl Countdown {
    fn show(&mut self, policy: Policy, left: u64, xruns: u64) {
        if left == self.last_left {
            return;
        }
        self.last_left = left;
        let msg = format!("{}: {left:>3} s left, xruns {xruns}", policy.name());
        if self.tty {
            eprint!("\r[experiment] {msg}   ");
            let _ = std::io::stderr().flush();
        } else if left.is_multiple_of(5) {
            progress(&msg);
        }
    }
}

/// The measurement window: polls the status every 100 ms for `a.seconds`,
/// adding up the reserved budget, until the time is up.
fn poll_status(
    a: &ExperimentArgs,
    policy: Policy,
    g: &mut Graph,
    rtapp: &mut Option<RtApp>,
    st0: &Status,
    intr: &AtomicBool,
) -> Res<BudgetLog> {
    let audio_period_ns = frames_to_ns(a.period.into(), a.rate) as f64;
    let mut log = BudgetLog {
        reserved_polls: vec![0; g.slots.len()],
        ..Default::default()
    };
    let mut countdown = Countdown {
        tty: std::io::stderr().is_terminal(),
        last_left: u64::MAX,
    };
    let t0 = Instant::now();
    let mut next_poll = Duration::ZERO;
    while t0.elapsed().as_secs_f64() < a.seconds {
        let el = t0.elapsed();
        check_interrupt(intr)?;
        check_alive(&mut g.server, rtapp)?;
        if el >= next_poll {
            next_poll += Duration::from_millis(100);
            let st = g.ctl.status().map_err(|e| format!("status: {e}"))?;
            log.polls += 1;
            for (i, b) in reserved_budgets(&st, &g.slots, audio_period_ns) {
                log.budget_total += b;
                log.reserved_polls[i] += 1;
            }
            let left = (a.seconds - el.as_secs_f64()).ceil() as u64;
            countdown.show(policy, left, st.xruns.saturating_sub(st0.xruns));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    if countdown.tty {
        eprintln!();
    }
    Ok(log)
}

/// The competing task's jobs released after its first `warmup_s` seconds,
/// stopped now.
fn stop_rtapp(rtapp: &mut Option<RtApp>, warmup_s: f64) -> Option<RtReport> {
    let log = rtapp.take()?.stop().ok()?;
    let first = log
        .threads
        .iter()
        .filter_map(|t| t.jobs.first())
        .map(|j| j.release_ns)
        .min()?;
    let s = log.released_from(first + (warmup_s * 1e9) as u64).summary();
    Some(RtReport {
        jobs: s.jobs,
        misses: s.misses,
        p50_us: s.resp_p50_us,
        p99_us: s.resp_p99_us,
        max_us: s.resp_max_us,
        policy: log
            .threads
            .first()
            .map_or_else(String::new, |t| t.policy.clone()),
    })
}

/// End-of-chain percentiles (p50, p99, max) in us; None without samples.
fn end_percentiles(mut ends: Vec<u64>) -> Option<(f64, f64, f64)> {
    ends.sort_unstable();
    let us = |v: Option<u64>| v.map_or(f64::NAN, |v| v as f64 / 1000.0);
    (!ends.is_empty()).then(|| {
        (
            us(percentile(&ends, 50.0)),
            us(percentile(&ends, 99.0)),
            us(ends.last().copied()),
        )
    })
}

/// What one policy's measurement gathered, besides the poller's log.
struct Measured {
    st0: Status,
    st1: Status,
    budget: BudgetLog,
    rt: Option<RtReport>,
    others_running: usize,
    foreign: Option<(f64, f64)>,
}

/// The result of one policy from its measurement and the poller's log.
fn policy_result(policy: Policy, g: &Graph, m: Measured, chain: ChainLog) -> PolicyResult {
    let used: Vec<f64> = chain
        .cpu_sum
        .iter()
        .map(|&s| s as f64 / chain.cpu_n.max(1) as f64)
        .collect();
    let b = &m.budget;
    let reserved = b.reserved_polls.iter().any(|&n| n > 0) && chain.cpu_n > 0;
    let polls_f = b.polls.max(1) as f64;
    let used_reserved: f64 = b
        .reserved_polls
        .iter()
        .zip(&used)
        .map(|(&n, &u)| n as f64 * u)
        .sum();
    progress(&format!(
        "{}: done ({} cycles measured, poller {})",
        policy.name(),
        chain.ends.len(),
        chain.sched
    ));
    PolicyResult {
        policy: policy.name().to_string(),
        xruns: m.st1.xruns.saturating_sub(m.st0.xruns),
        cycles: chain.ends.len() as u64,
        lost: chain.lost,
        unobserved: chain.unobserved,
        end_us: end_percentiles(chain.ends),
        rt: m.rt,
        budget_ns: reserved.then(|| b.budget_total / polls_f),
        used_reserved_ns: reserved.then(|| used_reserved / polls_f),
        reserved_threads: b.reserved_polls.iter().sum::<u64>() as f64 / polls_f,
        graph_threads: g.slots.len(),
        used_ns: (chain.cpu_n > 0).then(|| used.iter().sum()),
        sched: m.st1.sched.clone(),
        driver_sched: m.st1.driver_sched.clone(),
        client_sched: policies_of(&m.st1, &g.slots[1..])
            .unwrap_or_else(|| distinct(&g.client_sched)),
        others_running: m.others_running,
        foreign_cpus: m.foreign.map(|f| f.0),
        steal_cpus: m.foreign.map(|f| f.1),
        error: None,
    }
}

/// Warns about other resound processes and returns how many run.
fn warn_others(policy: Policy) -> usize {
    let n = other_resound_processes();
    if n > 0 {
        progress(&format!(
            "{}: warning: {n} other resound process(es) are running on this machine; they will disturb the measurement",
            policy.name()
        ));
    }
    n
}

/// CPU accounting snapshot with this run's processes as "ours".
fn our_ticks(g: &Graph, rtapp: &Option<RtApp>) -> Option<CpuTicks> {
    let ours: Vec<u32> = [std::process::id(), g.server.pid()]
        .into_iter()
        .chain(rtapp.iter().map(RtApp::pid))
        .chain(g.loads.iter().map(Child::pid))
        .collect();
    cpu_ticks(&ours)
}

/// Runs and measures one policy.
pub(super) fn run_policy(
    a: &ExperimentArgs,
    bins: &Bins,
    policy: Policy,
    intr: &AtomicBool,
) -> Res<PolicyResult> {
    // Teardown in reverse: the poller stops first, then the competing task,
    // then the graph (probe, control session, clients, server, directory).
    // rt-app's calibration, measured (once, then cached) before any load runs.
    let cal = (a.rt_run_us > 0)
        .then(|| Calibration::load_or_measure(&Calibration::default_cache()))
        .transpose()?;
    let mut g = start_graph(a, bins, policy, intr)?;
    let mut rtapp = start_rtapp(a, &g.server, cal)?;
    progress(&format!(
        "{}: graph{} running; warm-up {} s",
        policy.name(),
        if rtapp.is_some() {
            " and competing task"
        } else {
            ""
        },
        a.warmup
    ));
    sleep_checked(Duration::from_secs_f64(a.warmup), intr)?;
    let mut others_running = warn_others(policy);
    let ticks0 = our_ticks(&g, &rtapp);
    let st0 = g.ctl.status().map_err(|e| format!("status: {e}"))?;
    let audio_period_ns = frames_to_ns(a.period.into(), a.rate).max(1) as f64;
    let cap = (a.seconds * 1e9 / audio_period_ns) as usize + 1024;
    let last = *g.slots.last().expect("at least one client");
    let poller = Poller::start(g.probe.clone(), last, g.slots.clone(), cap)?;
    let budget = poll_status(a, policy, &mut g, &mut rtapp, &st0, intr)?;
    let st1 = g.ctl.status().map_err(|e| format!("status: {e}"))?;
    others_running = others_running.max(other_resound_processes());
    let foreign = ticks0
        .zip(our_ticks(&g, &rtapp))
        .and_then(|(t0, t1)| foreign_load(t0, t1));
    let chain = poller.finish()?;
    // The competing task's window ends now too.
    let rt = stop_rtapp(&mut rtapp, a.warmup);
    let m = Measured {
        st0,
        st1,
        budget,
        rt,
        others_running,
        foreign,
    };
    Ok(policy_result(policy, &g, m, chain))
}
