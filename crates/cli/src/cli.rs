//! `resound`: the control command (status, lsp, connect, disconnect, bufsize,
//! load/unload, profile, monitor, reserve, experiment, demo, bench).

use clap::{Parser, Subcommand};
use resound_client::prelude::*;
use resound_client::ControlSession;
use resound_protocol::wire::{PortInfo, Status};
use resound_shm::port_flags;
use resound_shm::time::frames_to_ns;

#[derive(Debug, Parser)]
#[command(name = "resound", version, about = "Control a running resound server")]
struct Cli {
    /// Server name (default: $RESOUND_SERVER, $JACK_DEFAULT_SERVER, "default").
    #[arg(short = 's', long = "server", global = true)]
    server: Option<String>,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Server state: rate, period, mode, cycles, xruns, and every client's last cycle.
    Status {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// List ports, as jack_lsp.
    Lsp {
        /// Show connections.
        #[arg(short = 'c', long = "connections")]
        connections: bool,
        /// Show port flags.
        #[arg(short = 'p', long = "properties")]
        properties: bool,
        /// Show port types.
        #[arg(short = 't', long = "type")]
        types: bool,
        /// Show latency ranges.
        #[arg(short = 'l', long = "latency")]
        latency: bool,
        /// Show aliases.
        #[arg(short = 'A', long = "aliases")]
        aliases: bool,
        /// Only ports whose name contains this.
        filter: Option<String>,
    },
    /// Connect two ports, as jack_connect.
    Connect {
        /// Source (output) port.
        src: String,
        /// Destination (input) port.
        dst: String,
    },
    /// Disconnect two ports, as jack_disconnect.
    Disconnect {
        /// Source (output) port.
        src: String,
        /// Destination (input) port.
        dst: String,
    },
    /// Put threads under a SCHED_DEADLINE reservation (chrt has no reclaim flag), or take them off it.
    Reserve(ReserveArgs),
    /// Show or change the buffer size (frames per period), as jack_bufsize.
    Bufsize {
        /// New size in frames.
        frames: Option<u32>,
    },
    /// Load a built-in in-process client into the server, as jack_load (built in: profiler [-c] [-p] [-e]).
    Load {
        /// Client name (default: the built-in's name).
        #[arg(short = 'n', long = "name")]
        name: Option<String>,
        /// Which built-in.
        builtin: String,
        /// Its options (profiler: -c cpu load, -p driver period, -e driver end time).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
    /// Unload an internal client, as jack_unload.
    Unload {
        /// Its name.
        name: String,
    },
    /// Write the per-cycle timing records as CSV and JSON, render plots (PNG, SVG) and an index.html.
    Profile(crate::profile::ProfileArgs),
    /// Serve a live view of the running graph's timing on localhost.
    Monitor(crate::monitor::MonitorArgs),
    /// List the sound cards and PCMs ALSA knows, with the rates, formats, channels and period sizes of those that open.
    Devices,
    /// Run the papers' experiments (or any scenario file) on resound and, beside it, Debian's
    /// jackd2 with competing rt-app tasks, and write report.html with the published values
    /// beside the measured ones, figures, CSV and JSON.
    #[command(subcommand)]
    Experiment(resound_lab::experiment::ExperimentCmd),
    /// Start a server on the dummy driver with a demo graph of client processes and report what happened.
    Demo(crate::demo::DemoArgs),
    /// A long run under churn: clients join, leave, are killed and stopped, connections and the
    /// buffer size change, while a sample-exact chain runs; prints the server's descriptors,
    /// memfds, memory, threads and ledger at start and end, with a plot, and fails on a leak or
    /// a lost cycle.
    Soak(crate::soak::SoakArgs),
    /// A live hostile client: sends a running server (-s NAME) millions of random, truncated,
    /// oversized and out-of-order messages over many sessions, and writes random bytes into
    /// every page of every shared segment the server passes it that it can map writable; then
    /// checks that the server still answers status (fails only if it does not). Run it while
    /// other clients play, to see that they are unharmed.
    Hostile(crate::hostile::HostileArgs),
    /// Run a JACK program on resound: CMD starts with resound's libjack.so.0
    /// first in the library path (like pw-jack); -s/--server picks the server.
    Run {
        /// The program and its arguments (after `--`).
        #[arg(trailing_var_arg = true, allow_hyphen_values = true, required = true)]
        cmd: Vec<String>,
    },
    /// Legacy applications: trace a process, find its period, analyse reservations.
    #[command(subcommand)]
    Legacy(crate::legacy::LegacyCmd),
    /// Benchmarks against other servers.
    #[command(subcommand)]
    Bench(BenchCmd),
}

/// `resound bench` subcommands.
#[derive(Debug, Subcommand)]
enum BenchCmd {
    /// Run the same chain of C JACK clients on Debian's jackd2 and on resound (SCHED_FIFO and
    /// reservations), alternated, and print each server's medians and resound/jackd2 ratios:
    /// end of chain, hops, libjack overhead, data-stamp latency, lost blocks (and those the
    /// client holding them rewrote at once), xruns, driver CPU.
    Jackd(resound_lab::vsjackd::VsJackdArgs),
    /// What this machine costs a SCHED_DEADLINE reservation, apart from any audio server: the
    /// same periodic rt-app tasks (by default the jackd bench's load: 10 x 200 us every 2667
    /// us) under SCHED_FIFO and under reservations sized from their measured run time,
    /// alternated; prints deadline misses, strings of consecutive misses, worst lateness and
    /// the host's steal, each reservation beside SCHED_FIFO.
    Reservations(resound_lab::vsfifo::VsFifoArgs),
}

/// Entry point of the binary.
pub fn main(argv: Vec<String>) -> i32 {
    let cli = Cli::parse_from(argv);
    let r = match cli.cmd {
        Cmd::Demo(a) => crate::demo::run(a),
        Cmd::Soak(a) => crate::soak::run(a),
        Cmd::Hostile(a) => crate::hostile::run(cli.server.as_deref(), a),
        Cmd::Experiment(c) => resound_lab::experiment::main(c),
        Cmd::Reserve(a) => reserve(a),
        Cmd::Profile(a) => crate::profile::run(cli.server.as_deref(), a),
        Cmd::Monitor(a) => crate::monitor::run(cli.server.as_deref(), a),
        Cmd::Run { cmd } => run(cli.server.as_deref(), &cmd),
        Cmd::Legacy(c) => crate::legacy::run(cli.server.as_deref(), c),
        Cmd::Devices => crate::devices::run(),
        Cmd::Bench(BenchCmd::Jackd(a)) => resound_lab::vsjackd::run(a),
        Cmd::Bench(BenchCmd::Reservations(a)) => resound_lab::vsfifo::run(a),
        cmd => control(cli.server.as_deref(), cmd),
    };
    match r {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("resound: {e}");
            1
        }
    }
}

/// Where resound's `libjack.so.0` is: `$RESOUND_LIBJACK_DIR`, else next to
/// this executable (where `cargo build` puts it), else `../lib/resound`
/// relative to it (an installation under a prefix).
pub fn libjack_dir() -> Result<std::path::PathBuf, String> {
    let mut tried = Vec::new();
    let mut candidates = Vec::new();
    if let Some(d) = std::env::var_os("RESOUND_LIBJACK_DIR") {
        candidates.push(std::path::PathBuf::from(d));
    }
    if let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(|p| p.to_path_buf()))
    {
        candidates.push(dir.join("../lib/resound"));
        candidates.insert(candidates.len() - 1, dir);
    }
    for d in candidates {
        if d.join("libjack.so.0").exists() {
            return Ok(d);
        }
        tried.push(d.display().to_string());
    }
    Err(format!(
        "resound's libjack.so.0 not found (looked in {}); build it with `cargo build` or set RESOUND_LIBJACK_DIR",
        tried.join(", ")
    ))
}

/// `resound run -- CMD`: executes CMD with resound's libjack first in the loader path.
fn run(server: Option<&str>, cmd: &[String]) -> Result<(), String> {
    use std::os::unix::process::CommandExt;
    let dir = libjack_dir()?;
    let mut path = dir.into_os_string();
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH").filter(|p| !p.is_empty()) {
        path.push(":");
        path.push(old);
    }
    let (prog, args) = cmd.split_first().ok_or("nothing to run")?;
    let mut c = std::process::Command::new(prog);
    c.args(args).env("LD_LIBRARY_PATH", path);
    if let Some(s) = server {
        c.env("JACK_DEFAULT_SERVER", s).env("RESOUND_SERVER", s);
    }
    // Only returns on failure.
    let e = c.exec();
    Err(format!("cannot run {prog}: {e}"))
}

/// Options of `resound reserve`.
#[derive(Debug, clap::Args)]
pub struct ReserveArgs {
    /// Budget per period (microseconds).
    #[arg(long, required_unless_present = "off")]
    runtime: Option<u64>,
    /// Reservation period (microseconds).
    #[arg(long, required_unless_present = "off")]
    period: Option<u64>,
    /// Relative deadline (microseconds, default: the period).
    #[arg(long)]
    deadline: Option<u64>,
    /// GRUB reclaiming (SCHED_FLAG_RECLAIM).
    #[arg(long)]
    reclaim: bool,
    /// Remove the reservation (back to SCHED_OTHER).
    #[arg(long, conflicts_with_all = ["runtime", "period", "deadline", "reclaim"])]
    off: bool,
    /// Thread ids, or process ids (all their threads).
    #[arg(required = true)]
    ids: Vec<i32>,
}

/// The threads an id names: all threads of a process, or the one thread.
fn threads_of(id: i32) -> Result<Vec<i32>, String> {
    let status = std::fs::read_to_string(format!("/proc/{id}/status"))
        .map_err(|_| format!("no process or thread with id {id}"))?;
    check_owner(id, &status)?;
    let tgid: i32 = status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("cannot read /proc/{id}/status"))?;
    if tgid != id {
        return Ok(vec![id]);
    }
    let mut v: Vec<i32> = std::fs::read_dir(format!("/proc/{id}/task"))
        .map_err(|e| format!("/proc/{id}/task: {e}"))?
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect();
    v.sort();
    Ok(v)
}

/// A user other than root may change only its own processes' threads (the
/// ones it could ptrace: real, effective and saved uid all its own), even
/// with CAP_SYS_NICE.
fn check_owner(id: i32, status: &str) -> Result<(), String> {
    // SAFETY: getuid has no preconditions and cannot fail.
    let me = unsafe { libc::getuid() };
    if resound_sched::owner::may_change(me, status) {
        return Ok(());
    }
    let uids = resound_sched::owner::uids(status);
    Err(format!(
        "process or thread {id} belongs to another user (uids {uids:?}, you are uid {me}): you may reserve only your own processes' threads"
    ))
}

fn reserve(a: ReserveArgs) -> Result<(), String> {
    use resound_sched::{Policy, SchedErrorKind};
    let policy = if a.off {
        Policy::Other
    } else {
        let (r, p) = (a.runtime.unwrap_or(0), a.period.unwrap_or(0));
        let d = a.deadline.unwrap_or(p);
        if r == 0 || r > d || d > p {
            return Err(format!(
                "need 0 < runtime ({r} us) <= deadline ({d} us) <= period ({p} us)"
            ));
        }
        Policy::Deadline {
            runtime_ns: r * 1000,
            deadline_ns: d * 1000,
            period_ns: p * 1000,
            reclaim: a.reclaim,
        }
    };
    let mut failed = 0;
    for id in &a.ids {
        for tid in threads_of(*id)? {
            let r = if a.off {
                // Shrink first, then leave: resetting a sleeping deadline thread from
                // another thread can leak admission bandwidth, a minimal one leaks little.
                if let Ok(Policy::Deadline {
                    period_ns,
                    deadline_ns,
                    reclaim,
                    ..
                }) = resound_sched::current(tid)
                {
                    let min = Policy::Deadline {
                        runtime_ns: 1024.max(period_ns / 1000),
                        deadline_ns,
                        period_ns,
                        reclaim,
                    };
                    let _ = resound_sched::apply(tid, &min);
                }
                resound_sched::apply(tid, &Policy::Other)
            } else {
                resound_sched::apply(tid, &policy)
            };
            match r {
                Ok(()) => println!(
                    "thread {tid}: {}",
                    resound_sched::current(tid)
                        .map(|p| p.describe())
                        .unwrap_or_else(|e| e.to_string())
                ),
                Err(e) => {
                    failed += 1;
                    let hint = match e.kind {
                        SchedErrorKind::Busy => format!(
                            " (the kernel refused {:.3} CPU: not enough free admission bandwidth)",
                            policy.bandwidth()
                        ),
                        SchedErrorKind::Permission => " (needs root or CAP_SYS_NICE)".to_string(),
                        _ => String::new(),
                    };
                    eprintln!("resound: thread {tid}: {e}{hint}");
                }
            }
        }
    }
    if failed > 0 {
        Err(format!("{failed} thread(s) could not be changed"))
    } else {
        Ok(())
    }
}

fn control(server: Option<&str>, cmd: Cmd) -> Result<(), String> {
    let s = ControlSession::connect(server, None).map_err(|e| e.to_string())?;
    match cmd {
        Cmd::Status { json } => {
            let st = s.status().map_err(|e| e.to_string())?;
            if json {
                println!(
                    "{}",
                    serde_json::to_string_pretty(&st).map_err(|e| e.to_string())?
                );
            } else {
                print!("{}", format_status(&st));
            }
        }
        Cmd::Lsp {
            connections,
            properties,
            types,
            latency,
            aliases,
            filter,
        } => {
            let ports = s.list_ports().map_err(|e| e.to_string())?;
            print!(
                "{}",
                format_lsp(
                    &ports,
                    filter.as_deref(),
                    connections,
                    properties,
                    types,
                    latency,
                    aliases
                )
            );
        }
        Cmd::Connect { src, dst } => s
            .connect_ports(&src, &dst)
            .map_err(|e| format!("cannot connect {src} to {dst}: {e}"))?,
        Cmd::Disconnect { src, dst } => s
            .disconnect_ports(&src, &dst)
            .map_err(|e| format!("cannot disconnect {src} from {dst}: {e}"))?,
        Cmd::Bufsize { frames } => {
            if let Some(f) = frames {
                s.set_buffer_size(f)
                    .map_err(|e| format!("cannot set buffer size: {e}"))?;
            }
            let st = s.status().map_err(|e| e.to_string())?;
            println!(
                "buffer size = {} frames ({:.1} ms)",
                st.buffer_frames,
                frames_to_ns(st.buffer_frames.into(), st.sample_rate) as f64 / 1e6
            );
        }
        Cmd::Load {
            name,
            builtin,
            args,
        } => {
            let init = args.join(" ");
            let c = s
                .load_internal(name.as_deref().unwrap_or(""), &builtin, &init)
                .map_err(|e| format!("cannot load {builtin:?}: {e}"))?;
            println!("{} is running in the server (uuid {})", c.name, c.uuid);
        }
        Cmd::Unload { name } => {
            let st = s.status().map_err(|e| e.to_string())?;
            let c = st
                .clients
                .iter()
                .find(|c| c.name == name)
                .ok_or_else(|| format!("no client called {name:?}"))?;
            if !c.internal {
                return Err(format!(
                    "{name:?} is not an internal client (it runs in its own process, pid {})",
                    c.pid
                ));
            }
            s.unload_internal(c.uuid)
                .map_err(|e| format!("cannot unload {name:?}: {e}"))?;
            println!("{name} unloaded");
        }
        Cmd::Demo(_)
        | Cmd::Soak(_)
        | Cmd::Hostile(_)
        | Cmd::Experiment(_)
        | Cmd::Reserve(_)
        | Cmd::Profile(_)
        | Cmd::Monitor(_)
        | Cmd::Run { .. }
        | Cmd::Devices
        | Cmd::Legacy(_)
        | Cmd::Bench(_) => unreachable!(),
    }
    Ok(())
}

fn us(ns: u64) -> String {
    format!("{:.1}", ns as f64 / 1000.0)
}

/// Human-readable status.
pub fn format_status(st: &Status) -> String {
    let period_us = frames_to_ns(st.buffer_frames.into(), st.sample_rate) as f64 / 1e3;
    let mut o = String::new();
    o += &format!("server        {}\n", st.server);
    o += &format!("driver        {} ({})\n", st.driver, st.driver_sched);
    o += &format!("sample rate   {} Hz\n", st.sample_rate);
    o += &format!(
        "buffer size   {} frames ({:.0} us)\n",
        st.buffer_frames, period_us
    );
    o += &format!("mode          {}\n", st.mode);
    o += &format!("cycles        {}\n", st.cycles);
    o += &format!("xruns         {}\n", st.xruns);
    o += &format!("driver cpu    {} us/cycle\n", us(st.driver_cpu_ns));
    o += &format!("clients       {}\n", st.clients.len());
    if !st.clients.is_empty() {
        o += &format!(
            "\n{:<24} {:>7} {:>6} {:>5} {:>6} {:>10} {:>10} {:>10} {:>9}\n",
            "client",
            "pid",
            "active",
            "ports",
            "xruns",
            "signal us",
            "awake us",
            "finish us",
            "cpu us"
        );
        for c in &st.clients {
            o += &format!(
                "{:<24} {:>7} {:>6} {:>5} {:>6} {:>10} {:>10} {:>10} {:>9}\n",
                c.name,
                c.pid,
                match (c.active, c.zombie) {
                    (true, _) => "yes",
                    (false, true) => "zombie",
                    (false, false) => "no",
                },
                c.ports,
                c.xruns,
                us(c.signal_ns),
                us(c.awake_ns),
                us(c.finish_ns),
                us(c.cpu_ns)
            );
        }
        o += "(times of each client's last completed cycle, relative to that cycle's start)\n";
    }
    if !st.reservations.is_empty() {
        o += &format!("\nscheduling    {}\n", st.sched);
        if st.ledger_capacity > 0.0 {
            o += &format!(
                "ledger        {:.3} of {:.3} CPU reserved\n",
                st.ledger_used, st.ledger_capacity
            );
            if st.ledger_departed > 0.0 {
                o += &format!(
                    "              {:.3} of it by threads that left the graph, stopped or hung, until they drop it\n",
                    st.ledger_departed
                );
            }
        }
        if let Some(g) = &st.graph {
            o += &format!(
                "multiplier    x{} (reservation period = {} audio period(s))\n",
                st.period_multiplier, st.period_multiplier
            );
            o += &format!(
                "graph: budget {} us, predicted {} us, used {} us per cycle ({:.1} % of the period)\n",
                us(g.budget_ns),
                us(g.predicted_ns),
                us(g.used_ns),
                g.budget_pct()
            );
        }
        o += &format!(
            "\n{:<24} {:>7} {:<15} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9} {:>6} {:>7}\n",
            "thread",
            "tid",
            "policy",
            "period us",
            "budget us",
            "predict",
            "used us",
            "deadline",
            "throttles",
            "xruns",
            "rescues"
        );
        for r in &st.reservations {
            let dl = r.policy == "SCHED_DEADLINE";
            let f = |ns: u64| if dl { us(ns) } else { "-".into() };
            o += &format!(
                "{:<24} {:>7} {:<15} {:>9} {:>9} {:>9} {:>9} {:>8} {:>9} {:>6} {:>7}\n",
                r.name,
                r.tid,
                r.policy,
                f(r.period_ns),
                f(r.budget_ns),
                f(r.predicted_ns),
                us(r.used_ns),
                f(r.deadline_ns),
                r.throttles,
                r.xruns,
                r.rescues
            );
        }
    }
    if !st.recent_xruns.is_empty() {
        o += "\nrecent xruns (oldest first)\n";
        for x in &st.recent_xruns {
            o += &format!("  cycle {:<10} {}\n", x.cycle, xrun_cause(x));
        }
    }
    o
}

/// One xrun's cause, in words: which clients were late and how.
pub(crate) fn xrun_cause(x: &resound_protocol::wire::XrunRecord) -> String {
    match x.cause.as_str() {
        "driver" => format!(
            "the driver woke {:.2} ms late (the machine stalled it)",
            x.driver_late_ns as f64 / 1e6
        ),
        "device" => "the audio device reported an xrun (or was suspended or lost)".into(),
        _ => x
            .late
            .iter()
            .map(|l| {
                let how = match (l.ran_short, l.signal_us, l.wake_delay_us) {
                    (true, Some(s), Some(w)) => {
                        format!("ran short (signalled at +{s} us, woke {w} us later)")
                    }
                    (true, Some(s), None) => {
                        format!("signalled at +{s} us, its thread never woke")
                    }
                    (true, None, _) => "ran short".into(),
                    (false, _, _) => "waited for a late upstream client".into(),
                };
                format!("{:?} {how}", l.name)
            })
            .collect::<Vec<_>>()
            .join("; "),
    }
}

fn flag_names(f: u32) -> String {
    let mut v = vec![];
    if f & port_flags::IS_INPUT != 0 {
        v.push("input");
    }
    if f & port_flags::IS_OUTPUT != 0 {
        v.push("output");
    }
    if f & port_flags::CAN_MONITOR != 0 {
        v.push("can-monitor");
    }
    if f & port_flags::IS_PHYSICAL != 0 {
        v.push("physical");
    }
    if f & port_flags::IS_TERMINAL != 0 {
        v.push("terminal");
    }
    v.join(",")
}

/// jack_lsp-style listing.
pub fn format_lsp(
    ports: &[PortInfo],
    filter: Option<&str>,
    conns: bool,
    props: bool,
    types: bool,
    latency: bool,
    aliases: bool,
) -> String {
    let mut o = String::new();
    for p in ports
        .iter()
        .filter(|p| filter.is_none_or(|f| p.name.contains(f)))
    {
        o += &p.name;
        o += "\n";
        if aliases {
            for a in &p.aliases {
                o += &format!("   {a}\n");
            }
        }
        if conns {
            for c in &p.connections {
                o += &format!("   {c}\n");
            }
        }
        if latency {
            o += &format!("\tport latency = {} frames\n", p.latency.1);
            o += &format!(
                "\t{} latency = [ {} {} ] frames\n",
                if p.flags & port_flags::IS_INPUT != 0 {
                    "playback"
                } else {
                    "capture"
                },
                p.latency.0,
                p.latency.1
            );
        }
        if props {
            o += &format!("\tproperties: {},\n", flag_names(p.flags));
        }
        if types {
            o += &format!("\t{}\n", p.port_type);
        }
    }
    o
}
