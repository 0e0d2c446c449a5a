//! Running a scenario: for each configuration and server ([`plan`]), a
//! fresh server under a unique name ([`server`]), the timeline played in
//! real time (load clients joining and leaving ([`clients`]), rt-app tasks
//! ([`competing`]), buffer-size changes, kills), every cycle recorded
//! (resound's profile ring, [`resound_cycles`]; jackd's driver thread
//! traced by the kernel and the clients' own records, [`jackd_cycles`]),
//! then the metrics of the measured window. A configuration that fails
//! gives a result with its error and the next one runs. SIGINT/SIGTERM
//! stop the run after the current configuration's clean-up.
//!
//! Runs on the command's main thread; the kernel tracer of a jackd run has
//! a thread of its own.

pub mod clients;
pub mod competing;
pub mod jackd_cycles;
pub mod plan;
pub mod progress;
pub mod resound_cycles;
pub mod server;

use super::results::{cycle_metrics, job_metrics, CycleSample, JobSample, Mark, RunResult};
use super::scenario::{Metric, ServerKind};
use crate::harness::Bins;
use crate::rtapp::Calibration;
use crate::vsjackd::records::ClientRecords;
use clients::LoadClients;
use competing::Competing;
use plan::{Plan, StepKind};
use progress::Progress;
use resound_client::prelude::*;
use resound_profiler::ServerInfo;
use resound_shm::time::monotonic_ns;
use server::AudioServer;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What every run of an experiment shares.
pub struct Ctx {
    /// resoundd and resound-tool.
    pub bins: Bins,
    /// The compiled load client.
    pub loadclient: PathBuf,
    /// rt-app's calibration (None when no scenario uses rt-app).
    pub calibration: Option<Calibration>,
    /// Where each run keeps its raw files (client records, rt-app logs).
    pub raw_dir: PathBuf,
    /// Set by SIGINT/SIGTERM.
    pub interrupted: std::sync::Arc<AtomicBool>,
}

/// What a run gathered while it ran.
#[derive(Default)]
struct Gathered {
    marks: Vec<Mark>,
    setup: Vec<String>,
    /// Server xruns when the measured window began, and at the end (resound).
    xruns: Option<(u64, u64)>,
    clients: Vec<String>,
    cycles: Vec<CycleSample>,
    jobs: Vec<JobSample>,
    sched: String,
}

/// Runs one plan; never fails (a failure is the result's `error`).
pub fn run_plan(plan: &Plan, ctx: &Ctx, progress: &mut Progress) -> RunResult {
    progress.begin(&format!(
        "{} on {} ({:.0} s)",
        plan.label,
        plan.server_label(),
        plan.duration_s
    ));
    let mut g = Gathered::default();
    let error = play(plan, ctx, progress, &mut g).err();
    let warm = plan.warmup_s;
    let mut metrics = cycle_metrics(&g.cycles, warm);
    metrics.extend(job_metrics(&g.jobs, warm));
    if let Some((a, b)) = g.xruns {
        metrics.insert(Metric::Xruns, b.saturating_sub(a) as f64);
    }
    let summary = match &error {
        Some(e) => format!("failed: {}", e.lines().next().unwrap_or("")),
        None => format!(
            "done: {} cycles, xruns {}, end p99 {} us",
            g.cycles.len(),
            metrics
                .get(&Metric::Xruns)
                .map_or("?".into(), |x| x.to_string()),
            metrics
                .get(&Metric::EndP99Us)
                .map_or("-".into(), |x| format!("{x:.0}"))
        ),
    };
    progress.end(plan.duration_s + progress::OVERHEAD_S, &summary);
    RunResult {
        run: plan.run.clone(),
        label: plan.label.clone(),
        server: plan.server,
        setup: g.setup,
        error,
        metrics,
        clients: g.clients,
        cycles: g.cycles,
        jobs: g.jobs,
        marks: g.marks,
        sched: g.sched,
    }
}

/// The live parts of a run, dropped in order on every path: rt-app, the
/// clients, then the server.
struct Live {
    competing: Option<Competing>,
    clients: Option<LoadClients>,
    trace: Option<jackd_cycles::DriverTrace>,
    ring: Option<resound_cycles::RingLog>,
    server: AudioServer,
    t0_ns: u64,
}

/// Starts the server, plays the timeline, and collects everything into `g`.
fn play(plan: &Plan, ctx: &Ctx, progress: &mut Progress, g: &mut Gathered) -> Result<(), String> {
    let dir = ctx
        .raw_dir
        .join(format!("{}-{}", plan.run, plan.server_label()));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    g.setup.push(AudioServer::describe(plan));
    g.setup.extend(competing::describe(plan));
    let server = AudioServer::start(plan, &ctx.bins)?;
    let t0_ns = monotonic_ns();
    let mut live = Live {
        trace: match &server {
            AudioServer::Jackd(j) => Some(jackd_cycles::DriverTrace::start(
                j.pid(),
                Duration::from_secs_f64(plan.duration_s + 30.0),
            )?),
            AudioServer::Resound { .. } => None,
        },
        ring: match &server {
            AudioServer::Resound { profile, .. } => {
                Some(resound_cycles::RingLog::start(profile.ring()))
            }
            AudioServer::Jackd(_) => None,
        },
        clients: Some(LoadClients::new(
            &ctx.loadclient,
            &dir,
            plan.duration_s + 30.0,
        )),
        competing: None,
        server,
        t0_ns,
    };
    g.sched = describe_sched(&live.server);
    let res = timeline(plan, ctx, progress, &mut live, g, &dir);
    collect(plan, live, g, &dir);
    res
}

/// Plays the timeline in real time until the run's end.
fn timeline(
    plan: &Plan,
    ctx: &Ctx,
    progress: &mut Progress,
    live: &mut Live,
    g: &mut Gathered,
    dir: &std::path::Path,
) -> Result<(), String> {
    let started = Instant::now();
    if let Some(cal) = &ctx.calibration {
        live.competing = Competing::start(plan, dir, cal, &server::child_options(plan))?;
    }
    for t in &plan.rtapp {
        g.marks.push(Mark {
            t_s: t.start_s,
            what: format!("rt-app {} starts", t.name),
        });
        if let Some(s) = t.stop_s {
            g.marks.push(Mark {
                t_s: s,
                what: format!("rt-app {} stops", t.name),
            });
        }
    }
    let mut steps = plan.steps.iter().peekable();
    let mut xruns_at_warmup = None;
    loop {
        let el = started.elapsed().as_secs_f64();
        if el >= plan.duration_s {
            break;
        }
        if ctx.interrupted.load(Ordering::Acquire) {
            return Err("interrupted".into());
        }
        while let Some(s) = steps.next_if(|s| s.at_s <= el) {
            do_step(&s.what, plan, live, g)?;
            g.marks.push(Mark {
                t_s: s.at_s,
                what: describe_step(&s.what),
            });
        }
        if xruns_at_warmup.is_none() && el >= plan.warmup_s {
            xruns_at_warmup = Some(live.server.xruns());
        }
        if let Some(r) = live.ring.as_mut() {
            if let AudioServer::Resound { profile, .. } = &live.server {
                r.poll(profile.ring());
            }
        }
        live.server.check_alive()?;
        if let Some(c) = live.clients.as_mut() {
            c.check_alive()?;
        }
        if let Some(c) = live.competing.as_mut() {
            c.check_alive()?;
        }
        let joined = live.clients.as_ref().map_or(0, |c| c.names().len());
        progress.tick(el, plan.duration_s, &format!("{joined} clients"));
        std::thread::sleep(Duration::from_millis(50));
    }
    if let (Some(Some(a)), Some(b)) = (xruns_at_warmup, live.server.xruns()) {
        g.xruns = Some((a, b));
    }
    Ok(())
}

/// Carries out one timeline step.
fn do_step(what: &StepKind, plan: &Plan, live: &mut Live, g: &mut Gathered) -> Result<(), String> {
    let clients = live.clients.as_mut().expect("clients live until collect");
    match what {
        StepKind::Join(c) => {
            clients.join(c, &live.server, plan)?;
            if g.setup.len() < 40 {
                g.setup.push(format!(
                    "loadclient -n {} -b {} {}",
                    c.name,
                    c.busy_pct,
                    c.from
                        .as_deref()
                        .map_or("(from capture)".into(), |f| format!("-f {f}"))
                ));
            }
            Ok(())
        }
        StepKind::Leave(n) => clients.leave(n),
        StepKind::Kill(n) => clients.kill(n),
        StepKind::BufferSize(f) => live.server.jack_program("jack_bufsize", &[&f.to_string()]),
    }
}

/// A step as a figure's mark.
fn describe_step(what: &StepKind) -> String {
    match what {
        StepKind::Join(c) => format!("{} joins", c.name),
        StepKind::Leave(n) => format!("{n} leaves"),
        StepKind::Kill(n) => format!("{n} killed"),
        StepKind::BufferSize(f) => format!("buffer size {f}"),
    }
}

/// Stops everything in order and turns what was recorded into samples.
fn collect(plan: &Plan, mut live: Live, g: &mut Gathered, dir: &std::path::Path) {
    if let (Some(r), AudioServer::Resound { profile, .. }) = (live.ring.as_mut(), &live.server) {
        r.poll(profile.ring());
    }
    if let Some(c) = live.competing.take() {
        match c.finish(live.t0_ns) {
            Ok(jobs) => g.jobs = jobs,
            Err(e) => g.setup.push(format!("rt-app's log could not be read: {e}")),
        }
    }
    let data = live
        .clients
        .take()
        .map(LoadClients::finish)
        .map(|d| d.clients)
        .unwrap_or_default();
    g.clients = data.iter().map(|(n, _)| n.clone()).collect();
    for (n, d) in &data {
        if let Err(e) = d {
            g.setup.push(format!("records of {n}: {e}"));
        }
    }
    if let (Some(r), AudioServer::Resound { ctl, .. }) = (&live.ring, &live.server) {
        let info = ctl.status().map_or_else(
            |_| ServerInfo::default(),
            |st| ServerInfo {
                multiplier_floor: st.multiplier_floor,
                multiplier_min_period_ns: st.multiplier_min_period_ns,
                ..ServerInfo::default()
            },
        );
        let profile = r.profile(info);
        g.cycles = r.samples(&profile, live.t0_ns, &g.clients);
        // The ring's own records, as `resound profile` writes them: every
        // node's signal, awake and end dates, CPU, budget, per cycle.
        let (cycles, nodes) = (
            dir.join("profile-cycles.csv"),
            dir.join("profile-clients.csv"),
        );
        if let Err(e) = resound_profiler::export::write_cycles_csv(&profile, &cycles)
            .and_then(|_| resound_profiler::export::write_clients_csv(&profile, &nodes))
        {
            g.setup
                .push(format!("the profile records could not be written: {e}"));
        }
    }
    if let Some(t) = live.trace.take() {
        let driver = match t.finish() {
            Ok(trace) => jackd_cycles::driver_cycles(&trace, plan.period_ns()),
            Err(e) => {
                g.setup.push(format!(
                    "jackd's driver thread could not be traced ({e}); periods come from the clients' cycle times"
                ));
                Vec::new()
            }
        };
        let recs: Vec<(String, Option<&ClientRecords>)> = data
            .iter()
            .map(|(n, d)| (n.clone(), d.as_ref().ok()))
            .collect();
        g.cycles = jackd_cycles::samples(&driver, &recs, live.t0_ns, plan.period_ns());
        g.xruns = jackd_xruns(&recs, live.t0_ns, plan.warmup_s);
    }
}

/// jackd's xruns over the measured window, as its clients' xrun callbacks
/// counted them (the most any client saw; None without clients).
fn jackd_xruns(
    recs: &[(String, Option<&ClientRecords>)],
    t0_ns: u64,
    warmup_s: f64,
) -> Option<(u64, u64)> {
    let from = t0_ns + (warmup_s * 1e9) as u64;
    recs.iter()
        .filter_map(|(_, r)| *r)
        .filter_map(|r| {
            let at_warmup = r
                .recs
                .iter()
                .find(|x| x.start >= from)
                .map_or(0, |x| x.xruns);
            Some((at_warmup, r.xruns.max(r.recs.last()?.xruns)))
        })
        .max_by_key(|(a, b)| b.saturating_sub(*a))
}

/// The audio threads' scheduling, as the server reports it (resound) or
/// as configured (jackd).
fn describe_sched(s: &AudioServer) -> String {
    match s {
        AudioServer::Resound { ctl, .. } => ctl
            .status()
            .map(|st| format!("driver {}; graph {}", st.driver_sched, st.sched))
            .unwrap_or_default(),
        AudioServer::Jackd(_) => String::new(),
    }
}

/// Runs that a scenario's servers need: whether jackd appears.
pub fn uses_jackd(plans: &[Plan]) -> bool {
    plans.iter().any(|p| p.server == ServerKind::Jackd)
}
