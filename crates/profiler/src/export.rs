//! Writing a profile into a directory: for programs (CSV, JSON) and for
//! people (summary tables, plots, `index.html`).

use crate::{Profile, Summary, Unit};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Errors while writing a profile.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// A file could not be written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// CSV encoding failed.
    #[error("{path}: {source}")]
    Csv {
        /// The file.
        path: PathBuf,
        /// Why.
        source: csv::Error,
    },
    /// A plot could not be drawn.
    #[error("plot: {0}")]
    Plot(String),
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ExportError + '_ {
    move |source| ExportError::Io {
        path: path.to_path_buf(),
        source,
    }
}

fn csv_err(path: &Path) -> impl Fn(csv::Error) -> ExportError + '_ {
    move |source| ExportError::Csv {
        path: path.to_path_buf(),
        source,
    }
}

fn opt(v: Option<u64>) -> String {
    v.map_or_else(String::new, |x| x.to_string())
}

/// Writes a CSV file: a header line, then one line per row.
fn write_csv<const N: usize>(
    path: &Path,
    header: [&str; N],
    rows: impl IntoIterator<Item = [String; N]>,
) -> Result<(), ExportError> {
    let mut w = csv::Writer::from_path(path).map_err(csv_err(path))?;
    w.write_record(header).map_err(csv_err(path))?;
    for r in rows {
        w.write_record(r).map_err(csv_err(path))?;
    }
    w.flush().map_err(io(path))
}

/// `cycles.csv`: one line per cycle (driver figures, graph end, flags).
pub fn write_cycles_csv(p: &Profile, path: &Path) -> Result<(), ExportError> {
    write_csv(
        path,
        [
            "cycle",
            "start_ns",
            "period_ns",
            "frames",
            "measured_period_ns",
            "driver_awake_ns",
            "driver_end_ns",
            "driver_cpu_ns",
            "driver_budget_ns",
            "driver_predicted_ns",
            "graph_end_ns",
            "clients",
            "xrun",
            "driver_late",
            "multiplier",
            "graph_budget_ns",
            "graph_predicted_ns",
            "graph_used_ns",
        ],
        p.cycles.iter().map(|c| {
            [
                c.cycle.to_string(),
                c.start_ns.to_string(),
                c.period_ns.to_string(),
                c.frames.to_string(),
                opt(c.measured_period_ns),
                c.driver_awake_ns.to_string(),
                c.driver_end_ns.to_string(),
                c.driver_cpu_ns.to_string(),
                c.driver_budget_ns.to_string(),
                c.driver_predicted_ns.to_string(),
                c.graph_end_ns().to_string(),
                c.nodes.len().to_string(),
                (c.xrun as u8).to_string(),
                (c.driver_late as u8).to_string(),
                c.multiplier.to_string(),
                c.graph.budget_ns.to_string(),
                c.graph.predicted_ns.to_string(),
                c.graph.used_ns.to_string(),
            ]
        }),
    )
}

/// `clients.csv`: one line per client per cycle; empty fields where a time
/// is unknown (a late client has no end date).
pub fn write_clients_csv(p: &Profile, path: &Path) -> Result<(), ExportError> {
    write_csv(
        path,
        [
            "cycle",
            "client",
            "uuid",
            "signal_ns",
            "awake_ns",
            "finish_ns",
            "scheduling_ns",
            "duration_ns",
            "cpu_ns",
            "budget_ns",
            "predicted_ns",
            "late",
        ],
        p.cycles.iter().flat_map(|c| {
            c.nodes.iter().map(move |n| {
                [
                    c.cycle.to_string(),
                    p.name(n.uuid).to_string(),
                    n.uuid.to_string(),
                    opt(n.signal_ns),
                    opt(n.awake_ns),
                    opt(n.finish_ns),
                    opt(n.scheduling_ns()),
                    opt(n.duration_ns()),
                    opt(n.cpu_ns),
                    n.budget_ns.to_string(),
                    n.predicted_ns.to_string(),
                    (n.late as u8).to_string(),
                ]
            })
        }),
    )
}

/// `summary.csv`: the summary table, values in microseconds.
pub fn write_summary_csv(s: &Summary, path: &Path) -> Result<(), ExportError> {
    write_csv(
        path,
        [
            "group", "measure", "unit", "n", "min", "max", "average", "std_dev",
        ],
        s.rows.iter().map(|r| {
            let (unit, k) = match r.unit {
                Unit::Us => ("us", 1e3),
                Unit::Count => ("count", 1.0),
            };
            let f = |x: f64| format!("{:.3}", x / k);
            [
                r.group.clone(),
                r.measure.clone(),
                unit.to_string(),
                r.stats.n.to_string(),
                f(r.stats.min),
                f(r.stats.max),
                f(r.stats.avg),
                f(r.stats.std),
            ]
        }),
    )
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// `index.html`: the figures, the summary table and links to the data.
pub fn index_html(p: &Profile, s: &Summary, figures: &[&str]) -> String {
    let mut h = String::new();
    let span_s = p.cycles.len() as f64 * p.period_ns() as f64 / 1e9;
    let _ = write!(
        h,
        r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>resound profile: {server}</title>
<style>
body {{ font-family: sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; }}
td, th {{ border: 1px solid #ccc; padding: 3px 8px; text-align: right; }}
td:first-child, td:nth-child(2), th {{ text-align: left; }}
figure {{ margin: 2em 0; }}
img {{ max-width: 100%; border: 1px solid #ddd; }}
.warn {{ color: #a00; }}
</style></head><body>
<h1>resound profile: server “{server}”</h1>
<p>{rate} Hz, {frames} frames per period ({period:.1} µs), {mode} mode; scheduling: {sched}.<br>
{n} cycles ({span:.1} s, cycles {first}–{last}), {xr} with an xrun. The server's ring holds {ring:.1} s.</p>
"#,
        server = esc(&p.info.server),
        rate = p.info.sample_rate,
        frames = p.info.buffer_frames,
        period = p.period_ns() as f64 / 1e3,
        mode = esc(&p.info.mode),
        sched = esc(&p.info.sched),
        n = p.cycles.len(),
        span = span_s,
        first = p.cycles.first().map_or(0, |c| c.cycle),
        last = p.cycles.last().map_or(0, |c| c.cycle),
        xr = s.xruns,
        ring = p.info.ring_seconds,
    );
    if p.overwritten > 0 {
        let _ = writeln!(
            h,
            "<p class=\"warn\">{} older cycle(s) asked for had already been overwritten in the ring (it keeps the newest {:.1} s).</p>",
            p.overwritten, p.info.ring_seconds
        );
    }
    h += "<p>Data: <a href=\"profile.json\">profile.json</a>, <a href=\"cycles.csv\">cycles.csv</a>, <a href=\"clients.csv\">clients.csv</a>, <a href=\"summary.csv\">summary.csv</a>, <a href=\"summary.txt\">summary.txt</a>.</p>\n";
    h += "<h2>Summary</h2>\n<table id=\"summary\"><tr><th>thread</th><th>measure</th><th>min</th><th>max</th><th>average</th><th>std dev</th></tr>\n";
    for r in &s.rows {
        let st = &r.stats;
        match r.unit {
            Unit::Us => {
                let _ = writeln!(
                    h,
                    "<tr><td>{}</td><td>{} (µs)</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td><td>{:.1}</td></tr>",
                    esc(&r.group),
                    esc(&r.measure),
                    st.min / 1e3,
                    st.max / 1e3,
                    st.avg / 1e3,
                    st.std / 1e3
                );
            }
            Unit::Count => {
                let _ = writeln!(
                    h,
                    "<tr><td>{}</td><td>{}</td><td colspan=\"4\">{}</td></tr>",
                    esc(&r.group),
                    esc(&r.measure),
                    st.max as u64
                );
            }
        }
    }
    h += "</table>\n<h2>Figures</h2>\n";
    for f in figures {
        let _ = writeln!(
            h,
            "<figure id=\"{f}\"><a href=\"{f}.svg\"><img src=\"{f}.png\" alt=\"{f}\"></a><figcaption>{f} (<a href=\"{f}.svg\">SVG</a>)</figcaption></figure>"
        );
    }
    h += "</body></html>\n";
    h
}

/// Writes everything into `dir` (created if needed): `profile.json`,
/// `cycles.csv`, `clients.csv`, `summary.txt`, `summary.csv`, the figures
/// of [`crate::plots`] as PNG and SVG, and `index.html`. Returns the files.
pub fn write_dir(p: &Profile, dir: &Path) -> Result<Vec<PathBuf>, ExportError> {
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mut files = Vec::new();
    let json = dir.join("profile.json");
    let f = std::fs::File::create(&json).map_err(io(&json))?;
    serde_json::to_writer(std::io::BufWriter::new(f), p).map_err(|e| ExportError::Io {
        path: json.clone(),
        source: e.into(),
    })?;
    files.push(json);
    let cy = dir.join("cycles.csv");
    write_cycles_csv(p, &cy)?;
    files.push(cy);
    let cl = dir.join("clients.csv");
    write_clients_csv(p, &cl)?;
    files.push(cl);
    let s = p.summary();
    let st = dir.join("summary.txt");
    std::fs::write(&st, s.to_text()).map_err(io(&st))?;
    files.push(st);
    let sc = dir.join("summary.csv");
    write_summary_csv(&s, &sc)?;
    files.push(sc);
    let figs = crate::plots::render_all(p, dir).map_err(ExportError::Plot)?;
    let mut names: Vec<String> = figs
        .iter()
        .filter(|f| f.extension().is_some_and(|e| e == "png"))
        .filter_map(|f| f.file_stem().map(|s| s.to_string_lossy().into_owned()))
        .collect();
    names.dedup();
    files.extend(figs);
    let idx = dir.join("index.html");
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    std::fs::write(&idx, index_html(p, &s, &refs)).map_err(io(&idx))?;
    files.push(idx);
    Ok(files)
}
