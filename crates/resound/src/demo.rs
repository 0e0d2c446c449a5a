//! `resound demo`: the README's main command. Starts `resoundd` on the dummy
//! driver, runs a graph of real client processes (a generator, a chain of
//! processors, two parallel branches mixed at a shared input, meters) plus
//! the in-process `profiler`, and reports what happened, with the run's
//! timing profile (summary and plots).

use crate::cli::{format_lsp, format_status};
use clap::Args;
use resound_client::prelude::*;
use resound_client::ControlSession;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Options of `resound demo`.
#[derive(Debug, Clone, Args)]
pub struct DemoArgs {
    /// How long to run the graph (seconds).
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Frames per period.
    #[arg(short = 'p', long, default_value_t = 256)]
    pub period: u32,
    /// Sample rate.
    #[arg(short = 'r', long, default_value_t = 48000)]
    pub rate: u32,
    /// Run the server in sync mode (default: async, as jackd2).
    #[arg(short = 'S', long)]
    pub sync: bool,
    /// Server name for the demo.
    #[arg(long, default_value = "resound-demo")]
    pub name: String,
    /// Where to write the run's timing profile (CSV, JSON, plots, index.html;
    /// default: resound-demo-profile in the temporary directory).
    #[arg(long, value_name = "DIR")]
    pub profile_out: Option<PathBuf>,
}

/// Finds a sibling binary of the running executable.
pub fn sibling(bin: &str) -> Result<PathBuf, String> {
    let me = std::env::current_exe().map_err(|e| e.to_string())?;
    let dir = me.parent().ok_or("executable has no directory")?;
    for d in [dir.to_path_buf(), dir.join("..")] {
        let p = d.join(bin);
        if p.exists() {
            return Ok(p);
        }
    }
    Err(format!(
        "cannot find {bin} next to {}; build the workspace first (cargo build --release)",
        me.display()
    ))
}

struct Proc {
    name: String,
    child: Child,
    last: Arc<Mutex<Option<serde_json::Value>>>,
}

impl Proc {
    fn spawn(tool: &Path, server: &str, name: &str, args: &[&str]) -> Result<Proc, String> {
        let mut child = Command::new(tool)
            .args(["-s", server, "-n", name])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .map_err(|e| format!("cannot start {name}: {e}"))?;
        let out = child.stdout.take().expect("piped");
        let last = Arc::new(Mutex::new(None));
        let (l, ready_tx) = (last.clone(), std::sync::mpsc::channel());
        let tx = ready_tx.0;
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) {
                    if v["event"] == "ready" {
                        let _ = tx.send(());
                    }
                    *l.lock().unwrap() = Some(v);
                }
            }
        });
        ready_tx
            .1
            .recv_timeout(Duration::from_secs(10))
            .map_err(|_| format!("client {name} did not become ready"))?;
        Ok(Proc {
            name: name.into(),
            child,
            last,
        })
    }

    fn stop(mut self) -> Option<serde_json::Value> {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let _ = self.child.wait();
        std::thread::sleep(Duration::from_millis(20));
        let v = self.last.lock().unwrap().clone();
        v
    }
}

/// Writes the run's timing profile and prints the main lines of its summary.
fn profile_report(a: &DemoArgs, seconds: f64) -> Result<(), String> {
    let out = a
        .profile_out
        .clone()
        .unwrap_or_else(|| std::env::temp_dir().join("resound-demo-profile"));
    println!(
        "== timing profile of the run (as `resound profile --out {} --last {seconds:.0}`)",
        out.display()
    );
    let (ctl, seg) =
        ControlSession::connect_profile(Some(&a.name), None).map_err(|e| e.to_string())?;
    let p = crate::profile::read_profile(&ctl, seg.ring(), Some(seconds))?;
    let files = resound_profiler::write_dir(&p, &out).map_err(|e| e.to_string())?;
    let mut s = p.summary();
    s.rows.retain(|r| {
        r.group == "driver"
            || r.group == "graph"
            || ["end date", "duration"].contains(&r.measure.as_str())
    });
    for line in s.to_text().lines() {
        println!("   {line}");
    }
    println!(
        "   ({} files; every measure in {}, plots in {})",
        files.len(),
        out.join("summary.txt").display(),
        out.join("index.html").display()
    );
    Ok(())
}

/// Runs the demo.
pub fn run(a: DemoArgs) -> Result<(), String> {
    let resoundd = sibling("resoundd")?;
    let tool = sibling("resound-tool")?;
    let period_ms = a.period as f64 * 1000.0 / a.rate as f64;
    println!(
        "== resound demo: server {:?}, dummy driver, {} Hz, {} frames ({period_ms:.2} ms), {} mode",
        a.name,
        a.rate,
        a.period,
        if a.sync { "sync" } else { "async" }
    );
    let mut cmd = Command::new(&resoundd);
    cmd.args(["-n", &a.name]);
    if a.sync {
        cmd.arg("-S");
    }
    cmd.args([
        "-d",
        "dummy",
        "-r",
        &a.rate.to_string(),
        "-p",
        &a.period.to_string(),
    ]);
    let mut server = cmd
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("cannot start resoundd: {e}"))?;
    let sock = resound_protocol::paths::socket_path(&a.name);
    let t0 = Instant::now();
    let ctl = loop {
        if let Ok(c) = ControlSession::connect(Some(&a.name), None) {
            break c;
        }
        if let Ok(Some(st)) = server.try_wait() {
            return Err(format!("resoundd exited early ({st})"));
        }
        if t0.elapsed() > Duration::from_secs(10) {
            let _ = server.kill();
            return Err(format!("resoundd did not open {} in 10 s", sock.display()));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let result = (|| -> Result<(), String> {
        println!("== starting clients (each a separate process)");
        let clients = [
            ("osc", vec!["sine", "--freq", "440", "--amp", "0.5"]),
            ("filter", vec!["lowpass", "--cutoff", "2000"]),
            ("amp", vec!["gain", "--gain", "0.8"]),
            ("branch_a", vec!["gain", "--gain", "0.5"]),
            ("branch_b", vec!["lowpass", "--cutoff", "300"]),
            ("mixer", vec!["pass"]),
            ("meter_chain", vec!["meter"]),
            ("meter_mix", vec!["meter"]),
        ];
        let mut procs = Vec::new();
        for (name, args) in &clients {
            procs.push(Proc::spawn(&tool, &a.name, name, args)?);
            println!("   started {name:<12} ({})", args[0]);
        }
        let wiring = [
            ("osc:out", "filter:in"),
            ("filter:out", "amp:in"),
            ("amp:out", "system:playback_1"),
            ("amp:out", "meter_chain:in"),
            ("osc:out", "branch_a:in"),
            ("osc:out", "branch_b:in"),
            ("branch_a:out", "mixer:in"),
            ("branch_b:out", "mixer:in"),
            ("mixer:out", "system:playback_2"),
            ("mixer:out", "meter_mix:in"),
        ];
        for (s, d) in wiring {
            ctl.connect_ports(s, d)
                .map_err(|e| format!("connect {s} -> {d}: {e}"))?;
        }
        let prof = ctl
            .load_internal("", "profiler", "-c -p -e")
            .map_err(|e| format!("loading the profiler: {e}"))?;
        println!(
            "   loaded {} in the server (internal client: measures as audio ports)",
            prof.name
        );
        println!("== graph: chain osc -> filter -> amp -> system:playback_1; parallel branch_a, branch_b mixed at mixer:in -> system:playback_2");
        let ports = ctl.list_ports().map_err(|e| e.to_string())?;
        print!(
            "{}",
            format_lsp(&ports, None, true, false, false, false, false)
        );
        let start = ctl.status().map_err(|e| e.to_string())?;
        let t0 = Instant::now();
        let mut next = 1.0;
        while t0.elapsed().as_secs_f64() < a.seconds {
            std::thread::sleep(Duration::from_millis(50));
            if t0.elapsed().as_secs_f64() >= next {
                let st = ctl.status().map_err(|e| e.to_string())?;
                println!(
                    "   t={:>4.1}s  cycles={:<7} xruns={}",
                    t0.elapsed().as_secs_f64(),
                    st.cycles,
                    st.xruns
                );
                next += 1.0;
            }
        }
        let end = ctl.status().map_err(|e| e.to_string())?;
        let wall = t0.elapsed().as_secs_f64();
        println!("== status after {wall:.1} s");
        print!("{}", format_status(&end));
        profile_report(&a, wall)?;
        println!("== stopping clients");
        let mut reports = Vec::new();
        for p in procs {
            let name = p.name.clone();
            reports.push((name, p.stop()));
        }
        for (name, r) in &reports {
            if let Some(r) = r {
                if name.starts_with("meter") {
                    println!(
                        "   {name:<12} cycles={:<6} peak={:.3} rms={:.3}",
                        r["cycles"],
                        r["peak"].as_f64().unwrap_or(0.0),
                        r["rms"].as_f64().unwrap_or(0.0)
                    );
                } else {
                    println!(
                        "   {name:<12} cycles={:<6} thread={}",
                        r["cycles"],
                        r["sched"].as_str().unwrap_or("?")
                    );
                }
            }
        }
        let cycles = end.cycles - start.cycles;
        let expected = wall / (period_ms / 1000.0);
        println!("== summary");
        println!("   {cycles} cycles in {wall:.2} s (period {period_ms:.2} ms: {expected:.0} expected), {} xrun(s) during the run", end.xruns - start.xruns);
        let quiet = reports
            .iter()
            .filter(|(n, r)| {
                n.starts_with("meter")
                    && r.as_ref()
                        .is_none_or(|r| r["rms"].as_f64().unwrap_or(0.0) <= 0.0)
            })
            .count();
        if quiet > 0 {
            return Err(format!(
                "{quiet} meter(s) heard silence: the graph did not carry the signal"
            ));
        }
        println!("   both meters heard the signal: the chain and the mixed parallel branches carried audio");
        Ok(())
    })();
    drop(ctl);
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(server.id() as i32, libc::SIGTERM) };
    let st = server.wait().map_err(|e| e.to_string())?;
    println!("== server stopped ({st})");
    result
}
