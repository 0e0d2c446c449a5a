//! The report's data files, and reading them back for a redraw:
//! `results.json` (the whole [`ExperimentResult`] without the per-cycle and
//! per-job series), `metrics.csv` (one row per run and server, a column per
//! metric), `cycles-RUN-SERVER.csv` (every cycle) and `jobs-RUN-SERVER.csv`
//! (every rt-app job). Numbers are written in Rust's shortest round-trip
//! form, so a redraw from the files draws exactly what the run measured.
//! Runs on the command's main thread.

use crate::experiment::results::{CycleSample, ExperimentResult, JobSample, RunResult};
use crate::experiment::scenario::{Metric, ServerKind};
use std::fmt::Write as _;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// The JSON file with everything but the series.
pub const RESULTS_JSON: &str = "results.json";
/// The CSV file with every run's metrics.
pub const METRICS_CSV: &str = "metrics.csv";

/// The fixed columns of a cycles file, before one column per client.
const CYCLE_COLUMNS: [&str; 8] = [
    "t_s",
    "period_us",
    "driver_end_us",
    "end_us",
    "budget_us",
    "predicted_us",
    "used_us",
    "xrun",
];

/// The columns of a jobs file.
const JOB_COLUMNS: [&str; 4] = ["task", "t_s", "response_us", "slack_us"];

/// The server's name in file names, legends and tables.
pub fn server_name(s: ServerKind) -> &'static str {
    match s {
        ServerKind::Resound => "resound",
        ServerKind::Jackd => "jackd2",
    }
}

/// `cycles-RUN-SERVER.csv`.
pub fn cycles_file(run: &RunResult) -> String {
    format!("cycles-{}-{}.csv", run.run, server_name(run.server))
}

/// `jobs-RUN-SERVER.csv`.
pub fn jobs_file(run: &RunResult) -> String {
    format!("jobs-{}-{}.csv", run.run, server_name(run.server))
}

/// A CSV field, quoted when it holds a comma, a quote or a line break.
fn field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// An optional number as a CSV field (empty when absent).
fn opt(out: &mut String, v: Option<f64>) {
    out.push(',');
    if let Some(v) = v {
        let _ = write!(out, "{v}");
    }
}

fn create(path: &Path) -> Result<BufWriter<File>, String> {
    File::create(path)
        .map(BufWriter::new)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))
}

fn finish(path: &Path, w: BufWriter<File>) -> Result<PathBuf, String> {
    w.into_inner()
        .map_err(|e| e.into_error())
        .and_then(|f| f.sync_all())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path.to_path_buf())
}

fn put(w: &mut impl Write, path: &Path, s: &str) -> Result<(), String> {
    w.write_all(s.as_bytes())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// A non-finite number cannot be written in JSON; such metrics (none of the
/// computed ones, in practice) are left out of `results.json` and so of any
/// redrawn report.
fn json_copy(result: &ExperimentResult) -> ExperimentResult {
    let mut copy = result.clone();
    for run in &mut copy.runs {
        run.cycles = Vec::new();
        run.jobs = Vec::new();
        run.metrics.retain(|_, v| v.is_finite());
    }
    copy
}

/// Writes `results.json`.
pub fn write_json(result: &ExperimentResult, out: &Path) -> Result<PathBuf, String> {
    let path = out.join(RESULTS_JSON);
    let text = serde_json::to_string_pretty(&json_copy(result))
        .map_err(|e| format!("cannot encode {}: {e}", path.display()))?;
    std::fs::write(&path, text + "\n")
        .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

/// Writes `metrics.csv`: run, label, server, error, then every metric key.
pub fn write_metrics(result: &ExperimentResult, out: &Path) -> Result<PathBuf, String> {
    let path = out.join(METRICS_CSV);
    let mut text = String::from("run,label,server,error");
    for m in Metric::ALL {
        text.push(',');
        text.push_str(m.key());
    }
    text.push('\n');
    for run in &result.runs {
        text.push_str(&field(&run.run));
        text.push(',');
        text.push_str(&field(&run.label));
        text.push(',');
        text.push_str(server_name(run.server));
        text.push(',');
        text.push_str(&field(run.error.as_deref().unwrap_or("")));
        for m in Metric::ALL {
            opt(&mut text, run.metrics.get(&m).copied());
        }
        text.push('\n');
    }
    std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    Ok(path)
}

/// Writes one run's `cycles-RUN-SERVER.csv`.
pub fn write_cycles(run: &RunResult, out: &Path) -> Result<PathBuf, String> {
    let path = out.join(cycles_file(run));
    let mut w = create(&path)?;
    let mut line = CYCLE_COLUMNS.join(",");
    for c in &run.clients {
        line.push(',');
        line.push_str(&field(c));
    }
    line.push('\n');
    put(&mut w, &path, &line)?;
    for c in &run.cycles {
        line.clear();
        let _ = write!(line, "{}", c.t_s);
        for v in [
            c.period_us,
            c.driver_end_us,
            c.end_us,
            c.budget_us,
            c.predicted_us,
            c.used_us,
        ] {
            opt(&mut line, v);
        }
        line.push_str(if c.xrun { ",1" } else { ",0" });
        for i in 0..run.clients.len() {
            opt(&mut line, c.client_end_us.get(i).copied().flatten());
        }
        line.push('\n');
        put(&mut w, &path, &line)?;
    }
    finish(&path, w)
}

/// Writes one run's `jobs-RUN-SERVER.csv`.
pub fn write_jobs(run: &RunResult, out: &Path) -> Result<PathBuf, String> {
    let path = out.join(jobs_file(run));
    let mut w = create(&path)?;
    let mut line = JOB_COLUMNS.join(",");
    line.push('\n');
    put(&mut w, &path, &line)?;
    for j in &run.jobs {
        line.clear();
        let _ = writeln!(
            line,
            "{},{},{},{}",
            field(&j.task),
            j.t_s,
            j.response_us,
            j.slack_us
        );
        put(&mut w, &path, &line)?;
    }
    finish(&path, w)
}

/// Writes every data file; returns their paths.
pub fn write_all(result: &ExperimentResult, out: &Path) -> Result<Vec<PathBuf>, String> {
    let mut files = vec![write_json(result, out)?, write_metrics(result, out)?];
    for run in &result.runs {
        files.push(write_cycles(run, out)?);
        files.push(write_jobs(run, out)?);
    }
    Ok(files)
}

/// Reads a previous run back: `results.json`, then each run's cycles and
/// jobs from its CSV files.
pub fn read_all(dir: &Path) -> Result<ExperimentResult, String> {
    let path = dir.join(RESULTS_JSON);
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut result: ExperimentResult = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not an experiment's results: {e}", path.display()))?;
    for run in &mut result.runs {
        run.cycles = read_cycles(&dir.join(cycles_file(run)), run.clients.len())?;
        run.jobs = read_jobs(&dir.join(jobs_file(run)))?;
    }
    Ok(result)
}

fn reader(path: &Path) -> Result<csv::Reader<File>, String> {
    csv::ReaderBuilder::new()
        .has_headers(true)
        .from_path(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))
}

/// Where a CSV value is bad: file, line and column.
fn bad(path: &Path, rec: &csv::StringRecord, col: &str, what: &str) -> String {
    let line = rec.position().map_or(0, |p| p.line());
    format!(
        "{}:{line}: column {col}: {what} is not a number",
        path.display()
    )
}

fn num(path: &Path, rec: &csv::StringRecord, i: usize, col: &str) -> Result<Option<f64>, String> {
    match rec.get(i).unwrap_or("") {
        "" => Ok(None),
        s => s
            .parse()
            .map(Some)
            .map_err(|_| bad(path, rec, col, &format!("{s:?}"))),
    }
}

fn read_cycles(path: &Path, clients: usize) -> Result<Vec<CycleSample>, String> {
    let mut rd = reader(path)?;
    let width = CYCLE_COLUMNS.len() + clients;
    let mut out = Vec::new();
    for rec in rd.records() {
        let rec = rec.map_err(|e| format!("{}: {e}", path.display()))?;
        if rec.len() != width {
            let line = rec.position().map_or(0, |p| p.line());
            return Err(format!(
                "{}:{line}: {} columns, expected {width}",
                path.display(),
                rec.len()
            ));
        }
        let n = |i: usize| num(path, &rec, i, CYCLE_COLUMNS[i.min(7)]);
        let mut client_end_us = Vec::with_capacity(clients);
        for i in 0..clients {
            client_end_us.push(num(path, &rec, CYCLE_COLUMNS.len() + i, "client")?);
        }
        out.push(CycleSample {
            t_s: n(0)?.ok_or_else(|| bad(path, &rec, "t_s", "an empty value"))?,
            period_us: n(1)?,
            driver_end_us: n(2)?,
            end_us: n(3)?,
            budget_us: n(4)?,
            predicted_us: n(5)?,
            used_us: n(6)?,
            xrun: &rec[7] == "1",
            client_end_us,
        });
    }
    Ok(out)
}

fn read_jobs(path: &Path) -> Result<Vec<JobSample>, String> {
    let mut rd = reader(path)?;
    let mut out = Vec::new();
    for rec in rd.records() {
        let rec = rec.map_err(|e| format!("{}: {e}", path.display()))?;
        let n = |i: usize| {
            num(path, &rec, i, JOB_COLUMNS[i])?
                .ok_or_else(|| bad(path, &rec, JOB_COLUMNS[i], "an empty value"))
        };
        out.push(JobSample {
            task: rec.get(0).unwrap_or("").to_string(),
            t_s: n(1)?,
            response_us: n(2)?,
            slack_us: n(3)?,
        });
    }
    Ok(out)
}
