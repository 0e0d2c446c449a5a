//! Which figures a report has and what each draws, laid out like the
//! papers': one inset per configuration side by side, resound and jackd2
//! as two curves (or two rows where each inset already has several curves).
//!
//! | file | what | like |
//! |---|---|---|
//! | `driver-end.svg` | driver end date per cycle, period as reference | "Low-latency audio on Linux by means of real-time scheduling", Figure 1 (a) |
//! | `rtapp-response.svg` | rt-app response time per job, deadline as reference | Figure 1 (b) |
//! | `budget.svg` | graph budget set, predicted, CPU used per cycle | Figure 1 (c); the thesis's budget trend |
//! | `driver-period.svg` | driver period per cycle, nominal period as reference | "Timing measurements in JACK2" |
//! | `period-cdf.svg` | cumulative distribution of the driver period | the thesis's CDFs |
//! | `clients-end.svg` | every client's end date per cycle, period as reference | the thesis's clients end date |
//!
//! X is the time from the start of the run (s; the CDF's x is the period in
//! us), Y in us; timeline marks are thin vertical lines. A figure whose
//! measure is turned off in the scenario, or that has no data, is left out.
//! Runs on the command's main thread.

use super::chart::{decimate, Curve, Figure, Inset, BUCKETS};
use super::files::server_name;
use crate::experiment::results::{CycleSample, ExperimentResult, RunResult};
use crate::experiment::scenario::ServerKind;

/// Points of a CDF curve.
const CDF_POINTS: usize = 1000;

/// The configurations in report order: (name, label).
pub fn configurations(result: &ExperimentResult) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for r in &result.runs {
        if !out.iter().any(|(n, _)| *n == r.run) {
            out.push((r.run.clone(), r.label.clone()));
        }
    }
    out
}

/// The servers that ran at least one configuration, resound first.
pub fn servers(result: &ExperimentResult) -> Vec<ServerKind> {
    let mut out: Vec<ServerKind> = result.runs.iter().map(|r| r.server).collect();
    out.sort();
    out.dedup();
    out
}

fn find<'a>(result: &'a ExperimentResult, run: &str, server: ServerKind) -> Option<&'a RunResult> {
    result
        .runs
        .iter()
        .find(|r| r.run == run && r.server == server)
}

/// The configuration's nominal audio period (us), from its overrides or
/// the server settings.
pub fn nominal_period_us(result: &ExperimentResult, run: &str) -> Option<f64> {
    let s = &result.scenario;
    let cfg = s.runs.iter().find(|r| r.name == run);
    let frames = cfg.and_then(|c| c.frames).unwrap_or(s.server.frames);
    let rate = cfg.and_then(|c| c.rate).unwrap_or(s.server.rate);
    (rate > 0).then(|| frames as f64 * 1e6 / rate as f64)
}

/// A time curve of one cycle field, decimated.
fn time_curve(name: &str, run: &RunResult, f: impl Fn(&CycleSample) -> Option<f64>) -> Curve {
    let pts: Vec<(f64, f64)> = run
        .cycles
        .iter()
        .filter_map(|c| f(c).map(|v| (c.t_s, v)))
        .collect();
    Curve {
        name: name.to_string(),
        points: decimate(&pts, BUCKETS),
    }
}

/// The empirical CDF of `v`, sampled at most [`CDF_POINTS`] times (the
/// smallest and largest values always kept).
fn cdf_curve(name: &str, mut v: Vec<f64>) -> Curve {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let step = n.div_ceil(CDF_POINTS).max(1);
    let mut points: Vec<(f64, f64)> = (0..n)
        .step_by(step)
        .map(|i| (v[i], (i + 1) as f64 / n as f64))
        .collect();
    if n > 0 && !(n - 1).is_multiple_of(step) {
        points.push((v[n - 1], 1.0));
    }
    Curve {
        name: name.to_string(),
        points,
    }
}

/// The timeline marks of the runs drawn in one inset, each once.
fn marks<'a>(runs: impl Iterator<Item = &'a RunResult>) -> Vec<(f64, String)> {
    let mut out: Vec<(f64, String)> = Vec::new();
    for m in runs.flat_map(|r| &r.marks) {
        if !out.iter().any(|(_, w)| *w == m.what) {
            out.push((m.t_s, m.what.clone()));
        }
    }
    out
}

/// " (jackd2 failed)" when a run drawn in the inset failed.
fn failed_note(runs: &[&RunResult]) -> String {
    let failed: Vec<&str> = runs
        .iter()
        .filter(|r| r.error.is_some())
        .map(|r| server_name(r.server))
        .collect();
    if failed.is_empty() {
        String::new()
    } else {
        format!(" ({} failed)", failed.join(", "))
    }
}

/// One inset per configuration, one curve per server (from `curve`).
fn per_config(
    result: &ExperimentResult,
    axes: (&str, &str),
    curve: &dyn Fn(&RunResult) -> Option<Curve>,
    hline: &dyn Fn(&str) -> Vec<(String, f64)>,
    with_marks: bool,
) -> Vec<Inset> {
    configurations(result)
        .into_iter()
        .map(|(name, label)| {
            let runs: Vec<&RunResult> = servers(result)
                .into_iter()
                .filter_map(|s| find(result, &name, s))
                .collect();
            Inset {
                title: format!("{label}{}", failed_note(&runs)),
                x_label: axes.0.into(),
                y_label: axes.1.into(),
                curves: runs.iter().filter_map(|r| curve(r)).collect(),
                hlines: hline(&name),
                marks: if with_marks {
                    marks(runs.iter().copied())
                } else {
                    Vec::new()
                },
            }
        })
        .collect()
}

/// One row per server in `rows`, one inset per configuration; `curves`
/// gives an inset's curves.
fn per_server_row(
    result: &ExperimentResult,
    rows: &[ServerKind],
    axes: (&str, &str),
    curves: &dyn Fn(&RunResult) -> Vec<Curve>,
    hline: &dyn Fn(&str) -> Vec<(String, f64)>,
) -> Vec<Inset> {
    let mut out = Vec::new();
    for &server in rows {
        for (name, label) in configurations(result) {
            let run = find(result, &name, server);
            let title = match run {
                Some(r) if r.error.is_some() => {
                    format!("{label}, {} (failed)", server_name(server))
                }
                Some(_) => format!("{label}, {}", server_name(server)),
                None => format!("{label}, {}: not run", server_name(server)),
            };
            out.push(Inset {
                title,
                x_label: axes.0.into(),
                y_label: axes.1.into(),
                curves: run.map(curves).unwrap_or_default(),
                hlines: if run.is_some() {
                    hline(&name)
                } else {
                    Vec::new()
                },
                marks: marks(run.into_iter()),
            });
        }
    }
    out
}

fn has_points(insets: &[Inset]) -> bool {
    insets
        .iter()
        .flat_map(|i| &i.curves)
        .any(|c| !c.points.is_empty())
}

fn figure(
    result: &ExperimentResult,
    stem: &str,
    title: &str,
    caption: &str,
    insets: Vec<Inset>,
) -> Option<Figure> {
    has_points(&insets).then(|| Figure {
        stem: stem.into(),
        title: title.into(),
        caption: caption.into(),
        columns: configurations(result).len(),
        insets,
    })
}

/// A server's time curve of a cycle field, when it has any value.
fn server_curve(run: &RunResult, f: fn(&CycleSample) -> Option<f64>) -> Option<Curve> {
    let c = time_curve(server_name(run.server), run, f);
    (!c.points.is_empty()).then_some(c)
}

fn period_line<'a>(
    result: &'a ExperimentResult,
    name: &'a str,
) -> impl Fn(&str) -> Vec<(String, f64)> + 'a {
    move |run: &str| {
        nominal_period_us(result, run)
            .map(|p| vec![(name.to_string(), p)])
            .unwrap_or_default()
    }
}

fn driver_end(result: &ExperimentResult) -> Option<Figure> {
    let insets = per_config(
        result,
        ("time (s)", "driver end date (us)"),
        &|r| server_curve(r, |c| c.driver_end_us),
        &period_line(result, "period"),
        true,
    );
    figure(
        result,
        "driver-end",
        "Driver end date",
        "When the driver finished its cycle, from the cycle's start, per configuration; the dashed line is the audio period.",
        insets,
    )
}

fn driver_period(result: &ExperimentResult) -> Option<Figure> {
    let insets = per_config(
        result,
        ("time (s)", "driver period (us)"),
        &|r| server_curve(r, |c| c.period_us),
        &period_line(result, "nominal period"),
        true,
    );
    figure(
        result,
        "driver-period",
        "Audio driver timing",
        "Time between consecutive driver wake-ups, per configuration; the dashed line is the nominal period.",
        insets,
    )
}

fn period_cdf(result: &ExperimentResult) -> Option<Figure> {
    let curve = |r: &RunResult| {
        let v: Vec<f64> = r.cycles.iter().filter_map(|c| c.period_us).collect();
        (!v.is_empty()).then(|| cdf_curve(server_name(r.server), v))
    };
    let insets = per_config(
        result,
        ("driver period (us)", "fraction of cycles"),
        &curve,
        &|_| Vec::new(),
        false,
    );
    figure(
        result,
        "period-cdf",
        "Distribution of the driver period",
        "Cumulative distribution of the driver period over the whole run, per configuration.",
        insets,
    )
}

/// The servers (in [`servers`] order) with at least one run for which
/// `curves` draws something.
fn servers_with_curves(
    result: &ExperimentResult,
    curves: &dyn Fn(&RunResult) -> Vec<Curve>,
) -> Vec<ServerKind> {
    servers(result)
        .into_iter()
        .filter(|&s| {
            result
                .runs
                .iter()
                .any(|r| r.server == s && !curves(r).is_empty())
        })
        .collect()
}

fn client_curves(r: &RunResult) -> Vec<Curve> {
    (0..r.clients.len())
        .map(|i| {
            time_curve(&r.clients[i], r, |c| {
                c.client_end_us.get(i).copied().flatten()
            })
        })
        .filter(|c| !c.points.is_empty())
        .collect()
}

fn clients_end(result: &ExperimentResult) -> Option<Figure> {
    let rows = servers_with_curves(result, &client_curves);
    let insets = per_server_row(
        result,
        &rows,
        ("time (s)", "client end date (us)"),
        &client_curves,
        &period_line(result, "period"),
    );
    figure(
        result,
        "clients-end",
        "Clients end date",
        "When each client finished, from the cycle's start, one curve per client; the dashed line is the audio period.",
        insets,
    )
}

fn budget_curves(r: &RunResult) -> Vec<Curve> {
    [
        time_curve("set budget", r, |c| c.budget_us),
        time_curve("predicted", r, |c| c.predicted_us),
        time_curve("CPU used", r, |c| c.used_us),
    ]
    .into_iter()
    .filter(|c| !c.points.is_empty())
    .collect()
}

fn budget(result: &ExperimentResult) -> Option<Figure> {
    let rows = servers_with_curves(result, &budget_curves);
    let insets = per_server_row(
        result,
        &rows,
        ("time (s)", "per audio period (us)"),
        &budget_curves,
        &|_| Vec::new(),
    );
    figure(
        result,
        "budget",
        "Graph budget and CPU time",
        "The graph's reserved budget per audio period as set, the predictor's value, and the CPU time its threads used, per cycle.",
        insets,
    )
}

/// One curve per server and rt-app thread.
fn job_curves(r: &RunResult, several_servers: bool) -> Vec<Curve> {
    let mut tasks: Vec<&str> = r.jobs.iter().map(|j| j.task.as_str()).collect();
    tasks.sort_unstable();
    tasks.dedup();
    tasks
        .into_iter()
        .map(|t| {
            let pts: Vec<(f64, f64)> = r
                .jobs
                .iter()
                .filter(|j| j.task == t)
                .map(|j| (j.t_s, j.response_us))
                .collect();
            let name = if several_servers {
                format!("{} {t}", server_name(r.server))
            } else {
                t.to_string()
            };
            Curve {
                name,
                points: decimate(&pts, BUCKETS),
            }
        })
        .collect()
}

fn rtapp_response(result: &ExperimentResult) -> Option<Figure> {
    let several = servers(result).len() > 1;
    let deadlines: Vec<(String, f64)> = result
        .scenario
        .rtapp
        .iter()
        .map(|t| (format!("deadline {}", t.name), t.period_us as f64))
        .collect();
    let configs = configurations(result);
    let insets: Vec<Inset> = configs
        .iter()
        .map(|(name, label)| {
            let runs: Vec<&RunResult> = result.runs.iter().filter(|r| r.run == *name).collect();
            Inset {
                title: format!("{label}{}", failed_note(&runs)),
                x_label: "release (s)".into(),
                y_label: "rt-app response time (us)".into(),
                curves: runs.iter().flat_map(|r| job_curves(r, several)).collect(),
                hlines: deadlines.clone(),
                marks: marks(runs.iter().copied()),
            }
        })
        .collect();
    figure(
        result,
        "rtapp-response",
        "rt-app response times",
        "Response time (end - release) of every rt-app job, per configuration; the dashed lines are the deadlines.",
        insets,
    )
}

/// Builds one figure, or None when it has nothing to draw.
type Maker = fn(&ExperimentResult) -> Option<Figure>;

/// Every figure the scenario asks for and has data for, in report order.
pub fn all(result: &ExperimentResult) -> Vec<Figure> {
    let m = &result.scenario.measure;
    let mut out = Vec::new();
    let wanted: [(bool, Maker); 6] = [
        (m.driver, driver_end),
        (m.rtapp, rtapp_response),
        (m.budget, budget),
        (m.driver, driver_period),
        (m.cdf, period_cdf),
        (m.clients, clients_end),
    ];
    for (on, make) in wanted {
        if let Some(f) = on.then(|| make(result)).flatten() {
            out.push(f);
        }
    }
    out
}
