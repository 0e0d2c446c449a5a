//! `resound demo`: the README's main command. Starts `resoundd` on the dummy
//! driver, runs a graph of real client processes (a generator, a chain of
//! processors, two parallel branches mixed at a shared input, meters) plus
//! the in-process `profiler`, and reports what happened, with the run's
//! timing profile (summary and plots).

use crate::cli::{format_lsp, format_status};
use clap::Args;
use resound_client::prelude::*;
use resound_client::ControlSession;
use resound_lab::harness::{dummy_driver_args, Bins, Child, Server, ServerSpec};
use resound_protocol::wire::Status;
use resound_shm::time::frames_to_ns;
use std::path::PathBuf;
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
    /// Sample rate (Hz).
    #[arg(short = 'r', long, default_value_t = 48000)]
    pub rate: u32,
    /// Run the server in sync mode (default: async, as jackd2).
    #[arg(short = 'S', long)]
    pub sync: bool,
    /// Name of the demo's server (while the demo runs, `resound -s NAME status`
    /// shows it from another terminal).
    #[arg(long, default_value = "resound-demo")]
    pub name: String,
    /// Where to write the run's timing profile (CSV, JSON, plots, index.html;
    /// default: resound-demo-profile in the temporary directory).
    #[arg(long, value_name = "DIR")]
    pub profile_out: Option<PathBuf>,
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

/// Starts the demo's `resoundd` on the dummy driver under the name
/// `a.name` in the user's runtime directory (so `resound -s NAME status`
/// works during the demo) and waits until it accepts control sessions.
fn start_server(a: &DemoArgs) -> Result<(Server, ControlSession), String> {
    let mut args = Vec::new();
    if a.sync {
        args.push("-S".to_string());
    }
    args.extend(dummy_driver_args(a.rate, a.period));
    let mut spec = ServerSpec::new(Bins::beside_current_exe()?, "demo", &[]);
    spec.public_name = Some(a.name.clone());
    spec.args = args;
    let mut server = Server::spawn(spec)?;
    let ctl = server.wait_ready(&mut || Ok(()))?;
    Ok((server, ctl))
}

/// Stops a client and returns the last line it printed (its final report).
fn stop_client(p: &mut Child) -> Option<serde_json::Value> {
    let _ = p.stop(Duration::from_secs(10));
    p.lines().wait_closed(Duration::from_secs(1));
    p.lines().last()
}

/// The demo's clients: name and `resound-tool` arguments.
const CLIENTS: [(&str, &[&str]); 8] = [
    ("osc", &["sine", "--freq", "440", "--amp", "0.5"]),
    ("filter", &["lowpass", "--cutoff", "2000"]),
    ("amp", &["gain", "--gain", "0.8"]),
    ("branch_a", &["gain", "--gain", "0.5"]),
    ("branch_b", &["lowpass", "--cutoff", "300"]),
    ("mixer", &["pass"]),
    ("meter_chain", &["meter"]),
    ("meter_mix", &["meter"]),
];

/// The demo's connections: a chain, and two parallel branches mixed at one input.
const WIRING: [(&str, &str); 10] = [
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

/// Starts the clients, each a separate process, and waits until each is ready.
fn start_clients(server: &Server) -> Result<Vec<Child>, String> {
    println!("== starting clients (each a separate process)");
    let mut procs = Vec::new();
    for (name, args) in CLIENTS {
        procs.push(server.tool(name, args, &mut || Ok(()))?.0);
        println!("   started {name:<12} ({})", args[0]);
    }
    Ok(procs)
}

/// Connects the graph, loads the in-process profiler and prints the ports.
fn wire(ctl: &ControlSession) -> Result<(), String> {
    for (s, d) in WIRING {
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
    Ok(())
}

/// Lets the graph run for `seconds`, printing cycles and xruns every second;
/// returns the status at the end and the time it ran.
fn watch(ctl: &ControlSession, seconds: f64) -> Result<(Status, f64), String> {
    let t0 = Instant::now();
    let mut next = 1.0;
    while t0.elapsed().as_secs_f64() < seconds {
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
    Ok((end, t0.elapsed().as_secs_f64()))
}

/// Stops every client and prints its final report; returns them by name.
fn stop_clients(procs: Vec<Child>) -> Vec<(String, Option<serde_json::Value>)> {
    println!("== stopping clients");
    let mut reports = Vec::new();
    for mut p in procs {
        let name = p.what().to_string();
        reports.push((name, stop_client(&mut p)));
    }
    for (name, r) in &reports {
        let Some(r) = r else { continue };
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
    reports
}

/// An error when a meter heard silence (the graph did not carry the signal).
fn check_meters(reports: &[(String, Option<serde_json::Value>)]) -> Result<(), String> {
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
    println!(
        "   both meters heard the signal: the chain and the mixed parallel branches carried audio"
    );
    Ok(())
}

/// Runs the graph on a started server and reports what happened.
fn run_graph(a: &DemoArgs, server: &Server, ctl: &ControlSession) -> Result<(), String> {
    let procs = start_clients(server)?;
    wire(ctl)?;
    let start = ctl.status().map_err(|e| e.to_string())?;
    let (end, wall) = watch(ctl, a.seconds)?;
    println!("== status after {wall:.1} s");
    print!("{}", format_status(&end));
    profile_report(a, wall)?;
    let reports = stop_clients(procs);
    let period_ms = frames_to_ns(a.period.into(), a.rate) as f64 / 1e6;
    let cycles = end.cycles - start.cycles;
    let expected = wall / (period_ms / 1000.0);
    println!("== summary");
    println!("   {cycles} cycles in {wall:.2} s (period {period_ms:.2} ms: {expected:.0} expected), {} xrun(s) during the run", end.xruns - start.xruns);
    check_meters(&reports)
}

/// Runs the demo.
pub fn run(a: DemoArgs) -> Result<(), String> {
    let period_ms = frames_to_ns(a.period.into(), a.rate) as f64 / 1e6;
    println!(
        "== resound demo: server {:?}, dummy driver, {} Hz, {} frames ({period_ms:.2} ms), {} mode",
        a.name,
        a.rate,
        a.period,
        if a.sync { "sync" } else { "async" }
    );
    let (mut server, ctl) = start_server(&a)?;
    let result = run_graph(&a, &server, &ctl);
    drop(ctl);
    let st = server.stop()?;
    println!("== server stopped ({st})");
    result
}
