//! The detection experiment (Figures 8-9 of the paper): `resound-tool
//! periodic` at 25 and 30 fps is traced for 4 s (2 s with `--quick`) several
//! times, and the detector runs on the first L seconds of each trace for L
//! from 0.2 s to 4 s, and for the L that holds exactly 5 jobs: the frequency
//! found, its error and the jobs seen, with the least-squares fit of the
//! period and without it (the spectrum's refined peak).

use super::{lab_tool, mean_sd, write_rows, ExperimentArgs};
use resound_legacy::detect::{detect, Params};
use resound_legacy::trace::{self, Options};
use resound_profiler::plots::{render, Chart, Series};
use serde::Serialize;
use std::process::{Command, Stdio};
use std::time::Duration;

const FPS: [f64; 2] = [25.0, 30.0];
const LENGTHS: [f64; 10] = [0.2, 0.3, 0.4, 0.6, 0.8, 1.0, 1.5, 2.0, 3.0, 4.0];
const QUICK_LENGTHS: [f64; 5] = [0.2, 0.3, 0.4, 1.0, 2.0];

/// One detection on one prefix of one trace.
#[derive(Debug, Serialize)]
struct Row {
    fps: f64,
    length_s: f64,
    rep: usize,
    freq_hz: Option<f64>,
    jobs: u64,
    error_pct: Option<f64>,
    /// The error without the least-squares fit (the spectrum's refined peak).
    spectrum_error_pct: Option<f64>,
}

/// Trace one run of the program at `fps` for `secs` (events in ns).
fn record(
    a: &ExperimentArgs,
    fps: f64,
    secs: f64,
) -> Result<Vec<resound_legacy::events::Event>, String> {
    let mut child = Command::new(lab_tool()?)
        .args([
            "periodic",
            "--fps",
            &fps.to_string(),
            "--seconds",
            &(secs + 1.0).to_string(),
        ])
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start resound-tool: {e}"))?;
    std::thread::sleep(Duration::from_millis(300));
    let opts = Options::new(child.id() as i32, Duration::from_secs_f64(secs));
    let r = trace::trace(a.tracer, &opts).map_err(|e| e.to_string());
    let _ = child.kill();
    let _ = child.wait();
    Ok(r?.events)
}

/// Detect on the first `len` seconds of `events`.
fn prefix_row(events: &[resound_legacy::events::Event], fps: f64, len: f64, rep: usize) -> Row {
    let t0 = events.iter().map(|e| e.t_ns).min().unwrap_or(0);
    let end = t0 + (len * 1e9) as u64;
    let part: Vec<_> = events.iter().filter(|e| e.t_ns < end).copied().collect();
    let d = detect(&part, &Params::default());
    let nofit = Params {
        fit: false,
        ..Params::default()
    };
    let spectrum_f = detect(&part, &nofit).freq_hz();
    Row {
        fps,
        length_s: len,
        rep,
        freq_hz: d.freq_hz(),
        jobs: d.overall.jobs,
        error_pct: d.freq_hz().map(|f| (f - fps).abs() / fps * 100.0),
        spectrum_error_pct: spectrum_f.map(|f| (f - fps).abs() / fps * 100.0),
    }
}

/// Run it.
pub fn run(a: &ExperimentArgs) -> Result<(), String> {
    let reps = a.reps.unwrap_or(if a.quick { 3 } else { 5 });
    let (lengths, secs): (&[f64], f64) = if a.quick {
        (&QUICK_LENGTHS, 2.0)
    } else {
        (&LENGTHS, 4.0)
    };
    println!(
        "Detection accuracy against observation length ({reps} runs per rate, {:?} tracer)",
        a.tracer
    );
    let mut rows = Vec::new();
    for fps in FPS {
        for rep in 0..reps {
            let events = record(a, fps, secs)?;
            let ls = with_five_jobs(fps, lengths);
            rows.extend(ls.iter().map(|&l| prefix_row(&events, fps, l, rep)));
        }
    }
    let series = table(&rows, lengths, reps);
    if let Some(dir) = &a.out {
        let h = [
            "fps",
            "length_s",
            "rep",
            "freq_hz",
            "jobs",
            "error_pct",
            "spectrum_error_pct",
        ];
        let opt = |v: Option<f64>| v.map_or(String::new(), |x| x.to_string());
        write_rows(dir, "detection", &h, &rows, |r| {
            vec![
                r.fps.to_string(),
                r.length_s.to_string(),
                r.rep.to_string(),
                opt(r.freq_hz),
                r.jobs.to_string(),
                opt(r.error_pct),
                opt(r.spectrum_error_pct),
            ]
        })?;
        let ch = Chart {
            title: "Period detection: mean frequency error against observation length",
            x_label: "observation length (s)",
            y_label: "mean |error| (%)",
            series,
            reference: Some(("1 % goal", 1.0)),
            marks: Vec::new(),
        };
        render(&dir.join("detection"), &[ch])?;
        println!("wrote {}/detection.{{csv,json,png,svg}}", dir.display());
    }
    Ok(())
}

/// The observation lengths for `fps`: first the one that holds 5 jobs
/// (4.5 periods: 5 releases), then `lengths`.
fn with_five_jobs(fps: f64, lengths: &[f64]) -> Vec<f64> {
    std::iter::once(4.5 / fps)
        .chain(lengths.iter().copied())
        .collect()
}

/// Print the table (one line per rate and length); return the figure's curves.
fn table(rows: &[Row], lengths: &[f64], reps: usize) -> Vec<Series> {
    println!(
        "{:>4} {:>7} {:>6} {:>9} {:>11} {:>10} {:>8} {:>14}   paper (mplayer, 25 fps, Fig. 9)",
        "fps", "L (s)", "jobs", "detected", "within 1 %", "mean err", "max err", "spectrum only"
    );
    let mut series = Vec::new();
    for fps in FPS {
        let mut pts = Vec::new();
        for l in with_five_jobs(fps, lengths) {
            let sel: Vec<&Row> = rows
                .iter()
                .filter(|r| r.fps == fps && r.length_s == l)
                .collect();
            let errs: Vec<f64> = sel.iter().filter_map(|r| r.error_pct).collect();
            let within = errs.iter().filter(|&&e| e < 1.0).count();
            let spectrum_within = sel
                .iter()
                .filter(|r| r.spectrum_error_pct.is_some_and(|e| e < 1.0))
                .count();
            let jobs = mean_sd(&sel.iter().map(|r| r.jobs as f64).collect::<Vec<_>>()).0;
            let (m, _) = mean_sd(&errs);
            let max = errs.iter().copied().fold(0.0, f64::max);
            let paper = match l {
                x if x < 0.25 => "0.2 s, ~5 jobs: slightly underestimated",
                x if x < 0.35 => "-",
                x if x < 0.5 => "0.4 s, ~10 jobs: detected",
                _ => "detected (no gain beyond 0.4 s)",
            };
            println!(
                "{fps:>4} {l:>7.2} {jobs:>6.1} {:>9} {:>11} {:>9.2}% {:>7.2}% {:>14}   {paper}",
                format!("{}/{reps}", errs.len()),
                format!("{within}/{reps}"),
                m,
                max,
                format!("{spectrum_within}/{reps} within 1 %")
            );
            if !errs.is_empty() {
                pts.push((l, m));
            }
        }
        series.push(Series {
            name: format!("{fps} fps"),
            points: pts,
        });
    }
    series
}
