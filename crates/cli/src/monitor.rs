//! `resound monitor [--port N]`: a live view of a running server's timing,
//! served on localhost.
//!
//! The page polls `/api/frame` five times a second. Each frame is built from
//! the newest seconds of the profile ring (read directly from the server's
//! shared memory: the server does no work for it) and carries the charts as
//! SVG drawn by `plotters` (the same drawing code as `resound profile`):
//! driver period, end of the chain, per-client durations and reservation
//! budgets, with xruns marked; plus a table of the clients. `/api/profile`
//! returns the same window as the profile JSON of `resound profile`.

use crate::profile::{profile_from, read_profile};
use resound_client::prelude::*;
use resound_client::ControlSession;
use resound_profiler::plots::{self, Chart, Series};
use resound_profiler::Profile;
use resound_shm::profile::ProfileSegment;
use serde_json::json;

/// Options of `resound monitor`.
#[derive(Debug, clap::Args)]
pub struct MonitorArgs {
    /// TCP port on 127.0.0.1 (0: any free port).
    #[arg(short = 'p', long = "port", default_value_t = 8750)]
    pub port: u16,
    /// Seconds of history the charts show.
    #[arg(short = 'w', long = "window", default_value_t = 5.0)]
    pub window: f64,
}

const PAGE: &str = include_str!("monitor.html");

struct Conn {
    ctl: ControlSession,
    seg: ProfileSegment,
}

fn connect(server: Option<&str>) -> Result<Conn, String> {
    let (ctl, seg) = ControlSession::connect_profile(server, None).map_err(|e| e.to_string())?;
    Ok(Conn { ctl, seg })
}

fn us(ns: u64) -> f64 {
    (ns as f64 / 100.0).round() / 10.0
}

/// The charts of one frame, as SVG documents.
pub fn charts(p: &Profile) -> Result<serde_json::Value, String> {
    let size = (640, 300);
    let marks = plots::xrun_marks(p);
    let period = p.period_ns() as f64 / 1e3;
    let period_svg = plots::chart_svg(
        &Chart {
            title: "Driver period",
            x_label: "cycle",
            y_label: "us",
            series: vec![plots::driver(p, |c| c.measured_period_ns)],
            reference: Some(("nominal", period)),
            marks: marks.clone(),
        },
        size,
    )?;
    let end_svg = plots::chart_svg(
        &Chart {
            title: "End of the chain",
            x_label: "cycle",
            y_label: "us after cycle start",
            series: vec![
                Series {
                    name: "graph end".into(),
                    points: p
                        .cycles
                        .iter()
                        .map(|c| (c.cycle as f64, c.graph_end_ns() as f64 / 1e3))
                        .collect(),
                },
                plots::driver(p, |c| Some(c.driver_end_ns)).renamed("driver end"),
            ],
            reference: Some(("period", period)),
            marks: marks.clone(),
        },
        size,
    )?;
    let dur_svg = plots::chart_svg(
        &Chart {
            title: "Client durations",
            x_label: "cycle",
            y_label: "us",
            series: plots::per_client(p, |n| n.duration_ns()),
            reference: None,
            marks: marks.clone(),
        },
        size,
    )?;
    let mut budgets = Vec::new();
    if p.cycles.iter().any(|c| c.driver_budget_ns > 0) {
        budgets.push(plots::driver(p, |c| Some(c.driver_budget_ns)));
    }
    budgets.extend(
        plots::per_client(p, |n| (n.budget_ns > 0).then_some(n.budget_ns))
            .into_iter()
            .filter(|s| !s.points.is_empty()),
    );
    let budget_svg = plots::chart_svg(
        &Chart {
            title: "Reservation budgets",
            x_label: "cycle",
            y_label: "us per period",
            series: budgets,
            reference: None,
            marks,
        },
        size,
    )?;
    Ok(json!({
        "period": period_svg,
        "end": end_svg,
        "durations": dur_svg,
        "budgets": budget_svg,
    }))
}

fn frame(conn: &Conn, window: f64) -> Result<serde_json::Value, String> {
    let st = conn.ctl.status().map_err(|e| e.to_string())?;
    let p = profile_from(&st, conn.seg.ring(), Some(window));
    let clients: Vec<serde_json::Value> = st
        .clients
        .iter()
        .map(|c| {
            let last = p
                .cycles
                .iter()
                .rev()
                .find_map(|cy| cy.nodes.iter().find(|n| n.uuid == c.uuid));
            let res = st.reservations.iter().find(|r| r.slot == c.slot);
            json!({
                "name": c.name,
                "active": c.active,
                "zombie": c.zombie,
                "internal": c.internal,
                "duration_us": last.and_then(|n| n.duration_ns()).map(us),
                "end_us": last.and_then(|n| n.finish_ns).map(us),
                "cpu_us": last.and_then(|n| n.cpu_ns).map(us),
                "budget_us": res.filter(|r| r.budget_ns > 0).map(|r| us(r.budget_ns)),
                "policy": res.map(|r| r.policy.clone()),
                "xruns": c.xruns,
            })
        })
        .collect();
    Ok(json!({
        "server": st.server,
        "sample_rate": st.sample_rate,
        "buffer_frames": st.buffer_frames,
        "mode": st.mode,
        "sched": st.sched,
        "cycles_total": st.cycles,
        "xruns_total": st.xruns,
        "window_cycles": p.cycles.len(),
        "window_xruns": p.xruns(),
        "recent_xruns": st
            .recent_xruns
            .iter()
            .rev()
            .take(5)
            .map(|x| format!("cycle {}: {}", x.cycle, crate::cli::xrun_cause(x)))
            .collect::<Vec<_>>(),
        "clients": clients,
        "charts": charts(&p)?,
    }))
}

fn respond(
    req: tiny_http::Request,
    code: u16,
    ctype: &str,
    body: String,
) -> Result<(), std::io::Error> {
    let h = tiny_http::Header::from_bytes("Content-Type", ctype).expect("valid header");
    let nc = tiny_http::Header::from_bytes("Cache-Control", "no-store").expect("valid header");
    req.respond(
        tiny_http::Response::from_string(body)
            .with_status_code(code)
            .with_header(h)
            .with_header(nc),
    )
}

fn query(url: &str, key: &str) -> Option<f64> {
    let q = url.split_once('?')?.1;
    q.split('&')
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
        .filter(|v: &f64| v.is_finite() && *v > 0.0)
}

/// Runs `resound monitor` until interrupted.
pub fn run(server: Option<&str>, a: MonitorArgs) -> Result<(), String> {
    let mut conn = Some(connect(server)?);
    let http = tiny_http::Server::http(("127.0.0.1", a.port))
        .map_err(|e| format!("cannot listen on 127.0.0.1:{}: {e}", a.port))?;
    let addr = http
        .server_addr()
        .to_ip()
        .ok_or("the monitor is not listening on an IP address")?;
    println!(
        "resound monitor: http://{addr}/  (server {:?}; Ctrl-C to stop)",
        conn.as_ref()
            .map(|c| c.ctl.server_name().to_string())
            .unwrap_or_default()
    );
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    for req in http.incoming_requests() {
        let url = req.url().to_string();
        let path = url.split('?').next().unwrap_or("");
        let r = match path {
            "/" | "/index.html" => respond(req, 200, "text/html; charset=utf-8", PAGE.to_string()),
            "/api/frame" | "/api/profile" => {
                let window = query(&url, "window").unwrap_or(a.window).min(600.0);
                if conn.is_none() {
                    conn = connect(server).ok();
                }
                let out = match &conn {
                    None => Err("no resound server is running".to_string()),
                    Some(c) if path == "/api/frame" => frame(c, window),
                    Some(c) => read_profile(&c.ctl, c.seg.ring(), Some(window))
                        .and_then(|p| serde_json::to_value(p).map_err(|e| e.to_string())),
                };
                match out {
                    Ok(v) => respond(req, 200, "application/json", v.to_string()),
                    Err(e) => {
                        // The server went away (or was restarted): reconnect next time.
                        conn = None;
                        respond(
                            req,
                            503,
                            "application/json",
                            json!({ "error": e }).to_string(),
                        )
                    }
                }
            }
            _ => respond(req, 404, "text/plain", format!("no page {path}\n")),
        };
        if let Err(e) = r {
            eprintln!("resound monitor: answering {url}: {e}");
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn query_parameters() {
        assert_eq!(super::query("/api/frame?window=2.5", "window"), Some(2.5));
        assert_eq!(super::query("/api/frame?x=1&window=3", "window"), Some(3.0));
        assert_eq!(super::query("/api/frame?window=-1", "window"), None);
        assert_eq!(super::query("/api/frame", "window"), None);
    }
}
