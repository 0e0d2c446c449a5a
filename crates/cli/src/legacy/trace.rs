//! `resound legacy trace`: record a process's events, and the target and
//! tracer options `detect` shares.

use clap::Args;
use resound_legacy::events::{parse_set, write_trace};
use resound_legacy::trace::{self, CpuLatency, Options, Trace, Tracer};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

/// Which process, which tracer, how long.
#[derive(Debug, Clone, Args)]
pub struct Target {
    /// The process to trace.
    pub pid: Option<i32>,
    /// Start this command and trace it (it is stopped with SIGTERM at the end).
    #[arg(long, num_args = 1.., allow_hyphen_values = true, conflicts_with = "pid")]
    pub cmd: Vec<String>,
    /// How long to trace, in seconds.
    #[arg(long, default_value_t = 2.0)]
    pub seconds: f64,
    /// ptrace (stops the process at each system call, as the paper) or
    /// kernel (perf-event tracepoints, never stops it).
    #[arg(long, default_value = "ptrace")]
    pub tracer: Tracer,
    /// Events of interest: system-call names, comma-separated ("default": read,
    /// readv, recvfrom, recvmsg, nanosleep, clock_nanosleep, poll, ppoll,
    /// select, pselect6, epoll_wait, epoll_pwait, futex).
    #[arg(long, default_value = "default")]
    pub events: String,
    /// Hold idle CPUs to this wake-up latency while tracing, in
    /// microseconds, as cyclictest does while it measures: "auto" holds 0
    /// (idle CPUs poll) with the ptrace tracer, whose event times are its
    /// own wake-ups, and nothing with the kernel tracer; "off" never holds
    /// it. Needs write access to /dev/cpu_dma_latency (root); without it
    /// the trace runs anyway and says so.
    #[arg(long, default_value = "auto", value_name = "US|auto|off")]
    pub cpu_dma_latency: CpuLatency,
}

/// Options of `resound legacy trace`.
#[derive(Debug, Args)]
pub struct TraceArgs {
    #[command(flatten)]
    target: Target,
    /// Write the events here (JSON lines), for `detect --trace`.
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Trace the target; Ctrl-C ends the trace early (the process is detached).
pub fn record(t: &Target) -> Result<Trace, String> {
    if !(t.seconds > 0.0 && t.seconds <= 3600.0) {
        return Err("--seconds must be in (0, 3600]".into());
    }
    let syscalls = parse_set(&t.events)?;
    if t.pid.is_none() && t.cmd.is_empty() {
        return Err("give a PID or --cmd CMD...".into());
    }
    let stop = Arc::new(AtomicBool::new(false));
    signal_flag(&stop);
    let mut child = match &t.cmd[..] {
        [] => None,
        [prog, args @ ..] => Some(
            std::process::Command::new(prog)
                .args(args)
                .spawn()
                .map_err(|e| format!("cannot start {prog}: {e}"))?,
        ),
    };
    let Some(pid) = child.as_ref().map(|c| c.id() as i32).or(t.pid) else {
        return Err("give a PID or --cmd CMD...".into());
    };
    let opts = Options {
        syscalls,
        stop,
        cpu_latency: t.cpu_dma_latency,
        ..Options::new(pid, Duration::from_secs_f64(t.seconds))
    };
    let r = trace::trace(t.tracer, &opts).map_err(|e| e.to_string());
    if let Some(c) = child.as_mut() {
        // SAFETY: signalling the child we started.
        unsafe { libc::kill(c.id() as i32, libc::SIGTERM) };
        let _ = c.wait();
    }
    r
}

fn signal_flag(stop: &Arc<AtomicBool>) {
    extern "C" fn on_int(_: libc::c_int) {
        STOP.store(true, std::sync::atomic::Ordering::Relaxed);
    }
    static STOP: AtomicBool = AtomicBool::new(false);
    // SAFETY: `on_int` only stores to an atomic (async-signal-safe).
    unsafe {
        libc::signal(
            libc::SIGINT,
            on_int as extern "C" fn(libc::c_int) as libc::sighandler_t,
        )
    };
    let s = stop.clone();
    std::thread::spawn(move || loop {
        if STOP.load(std::sync::atomic::Ordering::Relaxed) {
            s.store(true, std::sync::atomic::Ordering::Relaxed);
            return;
        }
        std::thread::sleep(Duration::from_millis(20));
    });
}

/// One-line summary of a trace.
pub fn summary(tr: &Trace) -> String {
    format!(
        "{} events from {} thread(s) in {:.2} s ({:?} tracer, ended: {:?}{}{}{}{})",
        tr.events.len(),
        tr.threads.len(),
        tr.elapsed_ns as f64 / 1e9,
        tr.tracer,
        tr.end,
        match (tr.cpu_latency_us, &tr.cpu_latency_error) {
            (Some(us), _) => format!(", idle CPUs held to a {us} us wake-up"),
            (None, Some(e)) => format!(", {e}"),
            (None, None) => String::new(),
        },
        if tr.lost > 0 {
            format!(", {} lost", tr.lost)
        } else {
            String::new()
        },
        if tr.execs > 0 {
            format!(", {} exec", tr.execs)
        } else {
            String::new()
        },
        if tr.children.is_empty() {
            String::new()
        } else {
            format!(", children {:?}", tr.children)
        },
    )
}

/// Run `resound legacy trace`.
pub fn run(a: TraceArgs) -> Result<(), String> {
    let tr = record(&a.target)?;
    eprintln!("{}", summary(&tr));
    match &a.out {
        Some(p) => write_trace(p, &tr.events).map_err(|e| e.to_string()),
        None => {
            for e in &tr.events {
                println!("{}", serde_json::to_string(e).expect("an event serialises"));
            }
            Ok(())
        }
    }
}
