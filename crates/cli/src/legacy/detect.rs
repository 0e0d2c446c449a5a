//! `resound legacy detect`: trace a process (or read a recorded trace) and
//! print the period the detector finds, per thread when threads differ.

use super::trace::{record, summary, Target};
use clap::Args;
use resound_legacy::detect::{detect, spectrum, Detection, Estimate, Params, Select};
use resound_legacy::events::{read_trace, Event};
use std::path::PathBuf;

/// Options of `resound legacy detect`.
#[derive(Debug, Args)]
pub struct DetectArgs {
    #[command(flatten)]
    target: Target,
    /// Analyse this recorded trace (from `trace --out`) instead of tracing.
    #[arg(long, conflicts_with_all = ["pid", "cmd"])]
    trace: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// E: largest squared error (Hz²) of the harmonic regression.
    #[arg(long, default_value_t = 0.1)]
    e: f64,
    /// f_min, Hz.
    #[arg(long, default_value_t = 10.0)]
    f_min: f64,
    /// f_max, Hz.
    #[arg(long, default_value_t = 200.0)]
    f_max: f64,
    /// δf, Hz.
    #[arg(long, default_value_t = 1.0)]
    df: f64,
    /// K: candidate peaks are above K × the spectrum's mean.
    #[arg(long, default_value_t = 2.5)]
    k: f64,
    /// M: with at most M candidates the strongest is taken.
    #[arg(long, default_value_t = 2)]
    m: usize,
    /// Below this confidence: not periodic.
    #[arg(long, default_value_t = 0.3)]
    min_confidence: f64,
    /// Below this share of jobs with an event within 15 % of a period of
    /// their release: not periodic (a heartbeat wakes at its release in
    /// nearly every job).
    #[arg(long, default_value_t = 0.5)]
    min_locked: f64,
    /// Keep the frequency on the δf grid (no sub-grid refinement, as the paper).
    #[arg(long)]
    no_refine: bool,
    /// Skip the least-squares fit of the period over the job release times
    /// (keep the spectrum's refined peak).
    #[arg(long)]
    no_fit: bool,
    /// Use every event (entries and exits, as the paper) instead of the activations.
    #[arg(long)]
    all_events: bool,
    /// Draw the spectrum with its peaks and the chosen frequency here (.png or .svg).
    #[arg(long)]
    plot: Option<PathBuf>,
}

/// The spectrum the detector saw (the events it selects) and its figure.
fn plot(
    path: &std::path::Path,
    events: &[Event],
    params: &Params,
    d: &Detection,
) -> Result<(), String> {
    let mut t: Vec<u64> = events
        .iter()
        .filter(|e| match params.select {
            Select::Activations => e.is_activation(),
            Select::Entries => !e.is_activation(),
            Select::All => true,
        })
        .map(|e| e.t_ns)
        .collect();
    t.sort_unstable();
    let t0 = t.first().copied().unwrap_or(0);
    let secs: Vec<f64> = t.iter().map(|&x| (x - t0) as f64 * 1e-9).collect();
    let points = spectrum(&secs, params);
    super::plot::save(
        path,
        &super::plot::Figure::Spectrum {
            points: &points,
            estimate: &d.overall,
        },
    )
}

fn line(e: &Estimate) -> String {
    match (e.period_ns, e.freq_hz) {
        (Some(p), Some(f)) => format!(
            "period {:.3} ms ({f:.3} Hz), {} jobs, {} events, confidence {:.2} ({:?})",
            p as f64 / 1e6,
            e.jobs,
            e.events,
            e.confidence,
            e.rule
        ),
        _ => format!(
            "not periodic ({} events, {:?}, confidence {:.2})",
            e.events, e.rule, e.confidence
        ),
    }
}

fn print(d: &Detection) {
    println!("{}", line(&d.overall));
    if d.threads_differ {
        for t in &d.threads {
            println!("  thread {}: {}", t.tid, line(&t.estimate));
        }
    }
}

/// Run `resound legacy detect`.
pub fn run(a: DetectArgs) -> Result<(), String> {
    let params = Params {
        e: a.e,
        f_min: a.f_min,
        f_max: a.f_max,
        df: a.df,
        k: a.k,
        m: a.m,
        refine: !a.no_refine,
        fit: !a.no_fit,
        select: if a.all_events {
            Select::All
        } else {
            Select::Activations
        },
        min_confidence: a.min_confidence,
        min_locked: a.min_locked,
        ..Params::default()
    };
    params.validate()?;
    let (events, info) = match &a.trace {
        Some(p) => (read_trace(p).map_err(|e| e.to_string())?, None),
        None => {
            let tr = record(&a.target)?;
            eprintln!("{}", summary(&tr));
            (tr.events.clone(), Some(tr))
        }
    };
    let d = detect(&events, &params);
    if let Some(p) = &a.plot {
        plot(p, &events, &params, &d)?;
    }
    if a.json {
        let v = serde_json::json!({"detection": d, "trace": info, "params": params});
        println!("{v}");
    } else {
        print(&d);
    }
    Ok(())
}
