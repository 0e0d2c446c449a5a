//! `resound legacy experiment table2|goal|two-tasks`: the adaptive-reservation
//! experiments of "The Wizard of OS: a Heartbeat for Legacy Multimedia
//! Applications", on `resound-tool periodic` (a 25 fps player) under
//! `resound legacy run`, printed as tables beside the paper's values:
//!
//! * `table2`: LFS with server period T from 20 to 100 ms (Table II):
//!   90th/95th percentile inter-frame time and average/maximum bandwidth
//!   over the first 250 jobs;
//! * `goal`: no reservation, LFS and the percentile controller at T = P
//!   under an interfering real-time load: 95th percentile inter-frame time
//!   (goal: within 10 % of the period) and average bandwidth against what
//!   the player uses (goal: at most 1.25 times);
//! * `two-tasks`: two periodic players (C = 20 ms, P = 40 ms and C = 10 ms,
//!   P = 60 ms) each under LFS with the same T varied (Fig. 3-4).
//!
//! The interfering load (unless `--no-load`) is Debian's rt-app
//! (`resound_lab::rtapp`): one SCHED_FIFO 50 thread per CPU, 30 ms every
//! 50 ms: a SCHED_OTHER player misses frames under it. Each run is its own process tree; nothing
//! is shared with a running server (`--no-server`).
//!
//! Threads: the command's main thread (plus the harness's pipe readers).

use resound_lab::harness::{self, Child, ChildOptions, StderrMode};
use resound_lab::rtapp::{Calibration, RtApp, RtAppSpec, RtPolicy, RtTask};
use serde_json::Value;
use std::process::Command;
use std::time::Duration;

/// What the reservation experiments take from the command line.
#[derive(Debug)]
pub struct ReserveOptions {
    /// table2, goal or two-tasks.
    pub name: &'static str,
    /// CPU work per frame of the 25 fps player (microseconds).
    pub work_us: u64,
    /// Jobs (frames) per run.
    pub jobs: u64,
    /// Without the interfering real-time load.
    pub no_load: bool,
    /// Controller for table2 and two-tasks (lfs as in the paper, or percentile).
    pub controller: String,
}

/// What one run measured.
#[derive(Debug, Default, Clone)]
struct Outcome {
    p90: f64,
    p95: f64,
    late: u64,
    bw_mean: f64,
    bw_max: f64,
    used: f64,
}

/// The interfering load: Debian's rt-app, one SCHED_FIFO 50 thread per CPU,
/// each running 30 ms every 50 ms (the kernel's real-time balancing puts
/// one on each CPU); its calibration is cached in
/// [`Calibration::default_cache`].
struct Load {
    /// Stopped (SIGTERM) when dropped.
    rtapp: Option<RtApp>,
    /// Its JSON and logs; removed when dropped.
    dir: std::path::PathBuf,
}

impl Load {
    fn start(on: bool) -> Result<Load, String> {
        let dir = std::env::temp_dir().join(format!("resound-legacy-load-{}", std::process::id()));
        if !on {
            return Ok(Load { rtapp: None, dir });
        }
        let cal = Calibration::load_or_measure(&Calibration::default_cache())?;
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let spec = RtAppSpec {
            tasks: vec![RtTask {
                name: "load".into(),
                period_us: 50_000,
                run_us: 30_000,
                policy: RtPolicy::Fifo { priority: 50 },
                instances: cpus as u32,
                start_s: 0.0,
                stop_s: None,
            }],
            // Longer than any run; the load is stopped when dropped.
            duration_s: 24.0 * 3600.0,
        };
        let mut rt = RtApp::start(&spec, &dir, &cal, &ChildOptions::default())?;
        rt.wait_running(Duration::from_secs(10))?;
        Ok(Load {
            rtapp: Some(rt),
            dir,
        })
    }
}

impl Drop for Load {
    fn drop(&mut self) {
        if let Some(rt) = self.rtapp.take() {
            let _ = rt.stop();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// One player (`fps`, `work_us`) for `jobs` frames, reserved at `period_ms`
/// with `controller` (None: no reservation).
fn spawn_player(
    fps: f64,
    work_us: u64,
    jobs: u64,
    reserve: Option<(f64, &str)>,
) -> Result<Child, String> {
    let tool = harness::sibling("resound-tool")?;
    let player = [
        tool.display().to_string(),
        "periodic".into(),
        "--drop-late".into(),
        "--fps".into(),
        fps.to_string(),
        "--work-us".into(),
        work_us.to_string(),
        "--frames".into(),
        (jobs + 1).to_string(),
    ];
    let mut c = match reserve {
        None => {
            let mut c = Command::new(&player[0]);
            c.args(&player[1..]);
            c
        }
        Some((t, ctl)) => {
            let mut c = Command::new(std::env::current_exe().map_err(|e| e.to_string())?);
            c.args([
                "legacy",
                "run",
                "--no-server",
                "--json",
                "--controller",
                ctl,
            ])
            .args(["--period", &t.to_string(), "--"])
            .args(player);
            c
        }
    };
    c.env_remove("RESOUND_SERVER");
    let o = ChildOptions {
        stderr: StderrMode::Keep {
            keep: 100,
            echo: None,
        },
        ..ChildOptions::default()
    };
    Child::spawn(c, "player", &o)
}

/// Waits for a player run and reads what it measured.
fn outcome(mut c: Child) -> Result<Outcome, String> {
    let st = c.wait()?;
    c.lines().wait_closed(Duration::from_secs(5));
    c.log().wait_closed(Duration::from_secs(5));
    if !st.success() {
        return Err(format!("player run failed: {}", c.log().tail(5)));
    }
    let lines = c.lines().all();
    let rep = lines
        .iter()
        .find(|v| v.get("frames").is_some())
        .ok_or("the player printed no report")?;
    let f = |v: &Value, k: &str| v[k].as_f64().unwrap_or(0.0);
    let bws: Vec<f64> = lines
        .iter()
        .filter(|v| v.get("bandwidth").is_some() && f(v, "t") > 0.0)
        .map(|v| f(v, "bandwidth"))
        .collect();
    Ok(Outcome {
        p90: f(rep, "p90_ms"),
        p95: f(rep, "p95_ms"),
        late: rep["late"].as_u64().unwrap_or(0),
        bw_mean: if bws.is_empty() {
            0.0
        } else {
            bws.iter().sum::<f64>() / bws.len() as f64
        },
        bw_max: bws.iter().copied().fold(0.0, f64::max),
        used: f(rep, "cpu_ms") / f(rep, "wall_ms").max(1.0),
    })
}

/// [`outcome`], or `None` after printing why the run failed (the machine's
/// SCHED_DEADLINE bandwidth may be taken by someone else for a moment).
fn try_row(c: Child) -> Option<Outcome> {
    outcome(c)
        .map_err(|e| println!("  run failed: {}", e.lines().last().unwrap_or("")))
        .ok()
}

/// Table II of the paper: T (ms), 90/95 percentile inter-frame (ms), average/maximum bandwidth.
const TABLE2: [(u32, f64, f64, f64, f64); 9] = [
    (20, 41.803, 44.383, 0.385653, 0.536840),
    (30, 40.1, 55.639, 0.358286, 0.516393),
    (40, 43.189, 46.109, 0.325452, 0.452615),
    (50, 56.074, 60.148, 0.336614, 0.500588),
    (60, 59.066, 62.393, 0.344995, 0.492892),
    (70, 53.076, 61.370, 0.348372, 0.486546),
    (80, 58.853, 62.339, 0.342492, 0.449763),
    (90, 60.319, 68.516, 0.324594, 0.404568),
    (100, 53.959, 74.186, 0.318421, 0.421542),
];

fn table2(a: &ReserveOptions) -> Result<(), String> {
    let _load = Load::start(!a.no_load)?;
    println!(
        "Table II: 25 fps player, {} us of work per frame, {} under {}, first {} jobs",
        a.work_us,
        a.controller,
        if a.no_load {
            "no load"
        } else {
            "an interfering SCHED_FIFO load"
        },
        a.jobs
    );
    println!("  T ms | p90/p95 inter-frame ms (paper)      | bandwidth avg/max (paper)           | late frames");
    for (t, pp90, pp95, pavg, pmax) in TABLE2 {
        let Some(o) = try_row(spawn_player(
            25.0,
            a.work_us,
            a.jobs,
            Some((t as f64, &a.controller)),
        )?) else {
            continue;
        };
        println!(
            "  {t:4} | {:6.1}/{:6.1} ({pp90:6.1}/{pp95:6.1})   | {:.3}/{:.3} ({pavg:.3}/{pmax:.3})     | {}",
            o.p90, o.p95, o.bw_mean, o.bw_max, o.late
        );
    }
    Ok(())
}

fn goal(a: &ReserveOptions) -> Result<(), String> {
    let _load = Load::start(!a.no_load)?;
    println!(
        "Goal: 25 fps player, {} us of work per frame, {} jobs, under {}; p95 within 10 % of 40 ms, bandwidth <= 1.25 x used",
        a.work_us,
        a.jobs,
        if a.no_load { "no load" } else { "an interfering SCHED_FIFO load" }
    );
    println!(
        "  reservation        | p90 ms | p95 ms | late | used  | bw avg | bw max | avg/used | goal"
    );
    for (name, r) in [
        ("none (SCHED_OTHER)", None),
        ("lfs, T = 40 ms", Some((40.0, "lfs"))),
        ("percentile, T = 40", Some((40.0, "percentile"))),
    ] {
        let Some(o) = try_row(spawn_player(25.0, a.work_us, a.jobs, r)?) else {
            continue;
        };
        let ratio = o.bw_mean / o.used.max(1e-9);
        let met = o.p95 <= 44.0 && (r.is_none() || ratio <= 1.25);
        println!(
            "  {name:18} | {:6.1} | {:6.1} | {:4} | {:.3} | {:6.3} | {:6.3} | {:8.2} | {}",
            o.p90,
            o.p95,
            o.late,
            o.used,
            o.bw_mean,
            o.bw_max,
            if r.is_some() { ratio } else { 0.0 },
            if met { "met" } else { "missed" }
        );
    }
    Ok(())
}

fn two_tasks(a: &ReserveOptions) -> Result<(), String> {
    let _load = Load::start(!a.no_load)?;
    println!(
        "Fig. 3-4: task A (C = 20 ms, P = 40 ms) and task B (C = 10 ms, P = 60 ms), each under {} with server period T",
        a.controller
    );
    println!("  T ms | A p95 ms | A bw avg/max | B p95 ms | B bw avg/max   (paper: T = P is cheapest; T > P late)");
    for t in [20.0, 30.0, 40.0, 50.0, 60.0, 80.0] {
        let ca = spawn_player(25.0, 20_000, a.jobs, Some((t, &a.controller)))?;
        let cb = spawn_player(
            1000.0 / 60.0,
            10_000,
            a.jobs * 2 / 3,
            Some((t, &a.controller)),
        )?;
        let (Some(oa), Some(ob)) = (try_row(ca), try_row(cb)) else {
            continue;
        };
        println!(
            "  {t:4} | {:8.1} | {:.3}/{:.3}  | {:8.1} | {:.3}/{:.3}",
            oa.p95, oa.bw_mean, oa.bw_max, ob.p95, ob.bw_mean, ob.bw_max
        );
    }
    Ok(())
}

/// Runs one experiment.
pub fn run(a: ReserveOptions) -> Result<(), String> {
    if !resound_sched::deadline_permitted() {
        return Err("SCHED_DEADLINE is not permitted here (needs root or CAP_SYS_NICE)".into());
    }
    match a.name {
        "table2" => table2(&a),
        "goal" => goal(&a),
        "two-tasks" => two_tasks(&a),
        other => Err(format!(
            "unknown experiment '{other}' (table2, goal or two-tasks)"
        )),
    }
}
