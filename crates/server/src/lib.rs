//! # resound-server
//!
//! `resoundd`, the server: [`config`] parses the jackd-style command line,
//! the driver thread and its audio cycle (real-time) are the
//! `resound-engine` crate, spawned by [`server`];
//! [`internal`] the built-in in-process clients (`profiler`),
//! [`server`] the socket, sessions, graph publication and notifications
//! (non-real-time threads). [`main`] wires them together for the binary.

pub mod config;
pub mod internal;
pub mod internal_object;
pub mod latency;
pub mod metadata;
pub mod server;

use std::sync::Arc;

/// Entry point of the `resoundd` binary: parses `argv`, runs until SIGINT or
/// SIGTERM (or, `-d file`, the end of the render: then 0 once the output is
/// finalised), returns the process exit code.
pub fn main(argv: Vec<String>) -> i32 {
    limit_malloc_arenas();
    let cfg = match config::parse(&argv) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    let level = match cfg.server.verbose {
        0 => "info",
        1 => "debug",
        _ => "trace",
    };
    let filter =
        tracing_subscriber::EnvFilter::try_from_env("RESOUND_LOG").unwrap_or_else(|_| level.into());
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_ansi(colour_on_stderr())
        .with_writer(std::io::stderr)
        .try_init();
    let mut signals = match signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ]) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("resoundd: cannot install signal handlers: {e}");
            return 1;
        }
    };
    // Held from before the first cycle until the server returns.
    let _cpu_latency = hold_cpu_latency(cfg.server.cpu_dma_latency_us);
    let server: Arc<server::Server> = match server::Server::start(cfg.clone()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("resoundd: {e}");
            return 1;
        }
    };
    let period_ns = resound_shm::time::frames_to_ns(cfg.period() as u64, cfg.rate());
    let period_ms = period_ns as f64 / 1e6;
    let driver_sched = server.driver_sched();
    let multiplier = if driver_sched.starts_with("SCHED_DEADLINE") {
        format!(
            ", reservation period x{} ({})",
            cfg.server.period_multiplier.at(period_ns),
            cfg.server.period_multiplier
        )
    } else {
        String::new()
    };
    tracing::info!(
        "server {:?} running: {} driver, {} Hz, {} frames ({:.2} ms), {} mode, driver thread {}{}, early wake-up {}, socket {}",
        server.name(),
        cfg.driver_name(),
        cfg.rate(),
        cfg.period(),
        period_ms,
        if cfg.server.sync { "sync" } else { "async" },
        driver_sched,
        multiplier,
        match server.early_wake_us() {
            0 => "off".to_string(),
            us => format!("{us} us"),
        },
        server.socket().display()
    );
    let reason = wait_for_stop(&mut signals, &server);
    server.stop(&reason);
    match server.render_outcome(std::time::Duration::from_secs(120)) {
        Some(Ok(frames)) => {
            tracing::info!("output finished: {frames} frames written");
            0
        }
        Some(Err(e)) => {
            eprintln!("resoundd: {e}");
            1
        }
        None => 0,
    }
}

/// `--cpu-dma-latency`: the request, held until the server stops; a
/// request that cannot be made is a warning, the server runs without it.
fn hold_cpu_latency(us: Option<u32>) -> Option<resound_sched::cpu_latency::CpuLatencyRequest> {
    use resound_sched::cpu_latency;
    match cpu_latency::hold(us?) {
        Ok(r) => {
            tracing::info!(
                "idle CPUs held to a wake-up latency of {} us ({}) while the server runs",
                r.us,
                cpu_latency::DEVICE
            );
            Some(r)
        }
        Err(e) => {
            tracing::warn!("{e}; idle CPUs may be slow to wake");
            None
        }
    }
}

/// Waits for SIGINT, SIGTERM or SIGHUP, or (`-d file`) the end of the
/// render; returns the reason to stop.
fn wait_for_stop(signals: &mut signal_hook::iterator::Signals, server: &server::Server) -> String {
    loop {
        if let Some(sig) = signals.pending().next() {
            let name = match sig {
                signal_hook::consts::SIGINT => "SIGINT",
                signal_hook::consts::SIGHUP => "SIGHUP",
                _ => "SIGTERM",
            };
            return format!("server received {name}");
        }
        if let Some(reason) = server.render_ended() {
            return reason.to_string();
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// Colour codes in the log only on a terminal, and not when `NO_COLOR` is
/// set (<https://no-color.org>).
fn colour_on_stderr() -> bool {
    use std::io::IsTerminal;
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// Session threads come and go with clients; glibc would give many of them
/// an allocation arena of their own (up to eight per CPU), each keeping its
/// memory after its thread ends. Two arenas are plenty for the control
/// side (the real-time threads do not allocate), and keep the server's
/// memory flat over a long run of clients joining and leaving.
fn limit_malloc_arenas() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets an allocator parameter; it is called at the
    // start of main, before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 2);
    }
}
