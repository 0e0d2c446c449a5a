//! `resound profile --out DIR [--last SECONDS]`: copies the per-cycle timing
//! records out of a running server's profile ring and writes them as CSV,
//! JSON, summary tables, plots (PNG, SVG) and an index.html.

use resound_client::prelude::*;
use resound_client::ControlSession;
use resound_profiler::{Profile, ServerInfo};
use resound_protocol::wire::Status;
use resound_shm::profile::ProfileRing;
use resound_shm::time::frames_to_ns;
use std::path::PathBuf;

/// Options of `resound profile`.
#[derive(Debug, clap::Args)]
pub struct ProfileArgs {
    /// Directory to write into (created if needed).
    #[arg(short = 'o', long = "out", value_name = "DIR")]
    pub out: PathBuf,
    /// Only the newest SECONDS of history (default: all the server's ring holds).
    #[arg(long = "last", value_name = "SECONDS", value_parser = positive)]
    pub last: Option<f64>,
    /// Do not print the summary table.
    #[arg(short = 'q', long)]
    pub quiet: bool,
}

fn positive(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(v),
        _ => Err(format!("{s:?} is not a positive number of seconds")),
    }
}

/// Reads the newest `last` seconds (all when None) of a ring into a [`Profile`].
/// `ctl` answers the status questions (rate, period, mode, current names).
pub fn read_profile(
    ctl: &ControlSession,
    ring: &ProfileRing,
    last: Option<f64>,
) -> Result<Profile, String> {
    let st = ctl.status().map_err(|e| e.to_string())?;
    Ok(profile_from(&st, ring, last))
}

/// As [`read_profile`], with a status the caller already has (rate, period,
/// mode, current client names).
pub fn profile_from(st: &Status, ring: &ProfileRing, last: Option<f64>) -> Profile {
    let period_ns = frames_to_ns(st.buffer_frames.into(), st.sample_rate);
    let names: Vec<(u64, String)> = st
        .clients
        .iter()
        .map(|c| (c.uuid, c.name.clone()))
        .collect();
    Profile::from_ring(
        ring,
        ServerInfo {
            server: st.server.clone(),
            sample_rate: st.sample_rate,
            buffer_frames: st.buffer_frames,
            mode: st.mode.clone(),
            sched: st.sched.clone(),
            ring_seconds: ring.layout().seconds(st.sample_rate, st.buffer_frames),
            multiplier_floor: st.multiplier_floor,
            multiplier_min_period_ns: st.multiplier_min_period_ns,
        },
        period_ns,
        last,
        &names,
    )
}

/// Runs `resound profile`.
pub fn run(server: Option<&str>, a: ProfileArgs) -> Result<(), String> {
    let (ctl, seg) = ControlSession::connect_profile(server, None).map_err(|e| e.to_string())?;
    let p = read_profile(&ctl, seg.ring(), a.last)?;
    drop(ctl);
    if p.cycles.is_empty() {
        return Err("the server has not recorded a cycle yet".into());
    }
    eprintln!(
        "read {} cycles ({:.1} s) of server {:?} with {} client(s); writing {} ...",
        p.cycles.len(),
        p.cycles.len() as f64 * p.period_ns() as f64 / 1e9,
        p.info.server,
        p.clients.len(),
        a.out.display()
    );
    if p.overwritten > 0 {
        eprintln!(
            "note: {} older cycle(s) had already been overwritten (the ring keeps the newest {:.1} s; resoundd --profile-seconds sets it)",
            p.overwritten, p.info.ring_seconds
        );
    }
    let t0 = std::time::Instant::now();
    let files = resound_profiler::write_dir(&p, &a.out).map_err(|e| e.to_string())?;
    if !a.quiet {
        print!("{}", p.summary().to_text());
    }
    eprintln!(
        "wrote {} files in {:.1} s; open {}",
        files.len(),
        t0.elapsed().as_secs_f64(),
        a.out.join("index.html").display()
    );
    Ok(())
}
