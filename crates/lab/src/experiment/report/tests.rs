//! The report written from a synthetic result: two configurations on two
//! servers, three clients, rt-app jobs, a published table, one failed run.

use super::*;
use crate::experiment::results::{
    cycle_metrics, job_metrics, CycleSample, JobSample, MachineInfo, Mark, RunResult,
};
use crate::experiment::scenario::*;
use std::collections::BTreeMap;

const PERIOD_US: f64 = 1333.333;

fn config(name: &str, label: &str, policy: AudioPolicy) -> RunConfig {
    RunConfig {
        name: name.into(),
        label: Some(label.into()),
        servers: None,
        policy,
        priority: None,
        period_multiplier: None,
        rate: None,
        frames: None,
        mode: None,
        cpus: None,
        rtapp_policy: None,
        rtapp_priority: None,
        resound_args: Vec::new(),
        placement: None,
    }
}

fn value(run: &str, metric: Metric, value: f64, label: &str) -> PublishedValue {
    PublishedValue {
        run: run.into(),
        metric,
        value,
        label: Some(label.into()),
    }
}

fn scenario() -> Scenario {
    Scenario {
        name: "synthetic".into(),
        title: "A synthetic <experiment>".into(),
        description: "Two configurations, three clients.".into(),
        duration_s: 4.0,
        quick_duration_s: None,
        warmup_s: 1.0,
        server: ServerSettings {
            rate: 48000,
            frames: 64,
            mode: Mode::Sync,
            driver: "dummy".into(),
            cpus: None,
        },
        runs: vec![
            config("fifo", "FIFO", AudioPolicy::Fifo),
            config("shrub", "SHRUB", AudioPolicy::DeadlineReclaim),
        ],
        clients: vec![ClientGroup {
            name: "dnl".into(),
            count: 3,
            busy_pct: 10.0,
            placement: Placement::Chain,
            join_at_s: 0.0,
            join_every_s: 1.0,
            leave_at_s: None,
        }],
        rtapp: vec![RtAppTask {
            name: "video".into(),
            period_us: 40_000,
            run_us: 5_000,
            instances: 1,
            policy: RtPolicyName::Fifo,
            priority: None,
            start_s: 0.0,
            stop_s: None,
        }],
        events: Vec::new(),
        measure: Measures::default(),
        published: Some(Published {
            setup: "Pentium 4, 2.6.29 kernel, 44.1 kHz".into(),
            differences: "Here a 2-core VM.".into(),
            reading: Some("Table 1 over Figure 3.".into()),
            tables: vec![PublishedTable {
                source: "Low-latency audio on Linux by means of real-time scheduling, Table 1"
                    .into(),
                caption: "Driver end date (us)".into(),
                values: vec![
                    value("fifo", Metric::DriverEndMaxUs, 1234.5, "Linux"),
                    value("shrub", Metric::DriverEndMaxUs, 987.25, "SHRUB"),
                    value("fifo", Metric::RtappMissPct, 12.5, "Linux"),
                    value("shrub", Metric::RtappMissPct, 0.5, "SHRUB"),
                ],
            }],
        }),
    }
}

/// A run of `cycles` cycles; `k` makes each run's numbers differ.
fn run(name: &str, label: &str, server: ServerKind, cycles: usize, k: f64) -> RunResult {
    let resound = server == ServerKind::Resound;
    let cycles: Vec<CycleSample> = (0..cycles)
        .map(|i| {
            let t_s = i as f64 * PERIOD_US / 1e6;
            let wobble = (i % 17) as f64;
            CycleSample {
                t_s,
                period_us: Some(PERIOD_US + wobble - 8.0 + if i == 1500 { 900.0 } else { 0.0 }),
                driver_end_us: Some(300.0 * k + wobble),
                end_us: Some(280.0 * k + wobble),
                client_end_us: (1..=3)
                    .map(|c| (t_s >= (c - 1) as f64).then_some(90.0 * c as f64 * k + wobble))
                    .collect(),
                budget_us: resound.then_some(200.0 * k),
                predicted_us: resound.then_some(180.0 * k + wobble),
                used_us: Some(150.0 * k + wobble),
                xrun: i == 1500,
            }
        })
        .collect();
    let horizon = cycles.last().map_or(0.0, |c| c.t_s);
    let jobs: Vec<JobSample> = (0..)
        .map(|j| j as f64 * 0.04)
        .take_while(|t| *t <= horizon)
        .map(|t_s| {
            let response_us = 5000.0 * k + (t_s * 1000.0) % 37_000.0;
            JobSample {
                task: "video-0".into(),
                t_s,
                response_us,
                slack_us: 40_000.0 - response_us,
            }
        })
        .collect();
    let mut metrics: BTreeMap<Metric, f64> = cycle_metrics(&cycles, 1.0);
    metrics.extend(job_metrics(&jobs, 1.0));
    metrics.insert(Metric::Xruns, 1.0);
    RunResult {
        run: name.into(),
        label: label.into(),
        server,
        setup: vec![format!("{} -d dummy -p 64", server_name_of(server))],
        error: None,
        metrics,
        clients: vec!["dnl1".into(), "dnl2".into(), "dnl3".into()],
        cycles,
        jobs,
        marks: vec![
            Mark {
                t_s: 1.0,
                what: "dnl2 joins".into(),
            },
            Mark {
                t_s: 2.0,
                what: "dnl3 joins".into(),
            },
        ],
        sched: "SCHED_FIFO 10".into(),
    }
}

fn server_name_of(s: ServerKind) -> &'static str {
    files::server_name(s)
}

/// Two configurations x two servers; jackd's SHRUB run failed after 10 cycles.
fn result(cycles: usize) -> ExperimentResult {
    let mut failed = run("shrub", "SHRUB", ServerKind::Jackd, 10, 1.3);
    failed.error = Some("jackd exited with status 1 <during start>".into());
    failed.metrics.clear();
    ExperimentResult {
        scenario: scenario(),
        source: "built-in synthetic".into(),
        quick: false,
        duration_s: 4.0,
        machine: MachineInfo {
            kernel: "6.12.0".into(),
            preemption: "PREEMPT_DYNAMIC".into(),
            cpu_model: "Test CPU".into(),
            cpus: 2,
            resound_version: "0.1.0".into(),
            jackd_version: Some("1.9.22".into()),
            rtapp_version: Some("1.0".into()),
        },
        started: "2026-11-23 02:00:00".into(),
        runs: vec![
            run("fifo", "FIFO", ServerKind::Resound, cycles, 1.0),
            run("fifo", "FIFO", ServerKind::Jackd, cycles, 1.1),
            run("shrub", "SHRUB", ServerKind::Resound, cycles, 0.8),
            failed,
        ],
    }
}

/// A fresh directory under the system's temporary directory.
fn temp_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("resound-report-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn read(dir: &Path, name: &str) -> String {
    std::fs::read_to_string(dir.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The `<tr data-row="KEY">` row of the `n`-th table of the page.
fn table_row(html: &str, n: usize, key: &str) -> String {
    let table = html.split("<table>").nth(n + 1).expect("table");
    let table = &table[..table.find("</table>").unwrap()];
    let start = table
        .find(&format!("<tr data-row=\"{key}\">"))
        .unwrap_or_else(|| panic!("no row {key}"));
    let row = &table[start..];
    row[..row.find("</tr>").unwrap()].to_string()
}

/// The value cells of a table row (the label cell left out).
fn cells(row: &str) -> Vec<String> {
    row.split("<td")
        .skip(2)
        .map(|c| {
            let c = &c[c.find('>').unwrap() + 1..];
            c[..c.find("</td>").unwrap()].to_string()
        })
        .collect()
}

/// How many text elements reading exactly `name` the SVG has (legend
/// entries, inset titles, mark labels).
fn texts(svg: &str, name: &str) -> usize {
    svg.matches(&format!(">\n{name}\n</text>")).count()
}

#[test]
fn write_produces_every_file_and_the_cycle_series() {
    let r = result(2000);
    let dir = temp_dir("files");
    let written = write(&r, &dir).unwrap();
    let mut names = vec![
        "results.json".to_string(),
        "metrics.csv".into(),
        "report.html".into(),
    ];
    for run in ["fifo", "shrub"] {
        for server in ["resound", "jackd2"] {
            names.push(format!("cycles-{run}-{server}.csv"));
            names.push(format!("jobs-{run}-{server}.csv"));
        }
    }
    for fig in [
        "driver-end",
        "rtapp-response",
        "budget",
        "driver-period",
        "period-cdf",
        "clients-end",
    ] {
        names.push(format!("{fig}.svg"));
    }
    for n in &names {
        assert!(dir.join(n).is_file(), "{n} missing");
        assert!(written.contains(&dir.join(n)), "{n} not reported");
    }
    assert_eq!(written.len(), names.len());
    assert_eq!(read(&dir, "cycles-fifo-resound.csv").lines().count(), 2001);
    assert_eq!(read(&dir, "cycles-shrub-jackd2.csv").lines().count(), 11);
    let jobs = read(&dir, "jobs-fifo-jackd2.csv");
    assert_eq!(jobs.lines().count(), r.runs[1].jobs.len() + 1);
    assert!(jobs.starts_with("task,t_s,response_us,slack_us\n"));
    let cyc = read(&dir, "cycles-fifo-resound.csv");
    assert!(cyc.starts_with(
        "t_s,period_us,driver_end_us,end_us,budget_us,predicted_us,used_us,xrun,dnl1,dnl2,dnl3\n"
    ));
    // The first cycle: dnl2 and dnl3 have not joined yet.
    assert!(cyc.lines().nth(1).unwrap().ends_with(",0,90,,"));
    let metrics = read(&dir, "metrics.csv");
    assert_eq!(metrics.lines().count(), 5);
    assert!(metrics
        .lines()
        .nth(4)
        .unwrap()
        .contains(",jackd exited with status 1"));
    let json = read(&dir, "results.json");
    assert!(
        !json.contains("\"t_s\": 0.0013"),
        "no cycle series in the JSON"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_page_puts_published_and_measured_numbers_in_their_rows() {
    let r = result(2000);
    let dir = temp_dir("html");
    write(&r, &dir).unwrap();
    let html = read(&dir, "report.html");
    let measured = |i: usize, m: Metric| tables::number(r.runs[i].metrics[&m]);
    // Table 0, the published one: per metric published, resound, jackd2, ratio.
    let fifo = cells(&table_row(&html, 0, "fifo"));
    assert!(table_row(&html, 0, "fifo").contains("Linux (FIFO)"));
    assert_eq!(fifo[0], "1234.5");
    assert_eq!(fifo[1], measured(0, Metric::DriverEndMaxUs));
    assert_eq!(fifo[2], measured(1, Metric::DriverEndMaxUs));
    let ratio = r.runs[0].metrics[&Metric::DriverEndMaxUs] / 1234.5;
    assert_eq!(fifo[3], format!("{ratio:.2}"));
    assert_eq!(fifo[4], "12.5");
    assert_eq!(fifo[5], measured(0, Metric::RtappMissPct));
    let shrub = cells(&table_row(&html, 0, "shrub"));
    assert_eq!(shrub[0], "987.25");
    assert_eq!(shrub[1], measured(2, Metric::DriverEndMaxUs));
    assert_eq!(shrub[2], "failed");
    // Table 1, every measured metric: columns are the four runs.
    let ends = cells(&table_row(&html, 1, "driver_end_max_us"));
    assert_eq!(ends.len(), 4);
    assert_eq!(ends[1], measured(1, Metric::DriverEndMaxUs));
    assert_eq!(ends[3], "failed");
    assert!(html.contains("jackd exited with status 1 &lt;during start&gt;"));
    assert!(html.contains("Pentium 4, 2.6.29 kernel"));
    assert!(html.contains("Here a 2-core VM."));
    assert!(html.contains("Table 1 over Figure 3."));
    assert!(html.contains("resound -d dummy -p 64"));
    assert!(html.contains("A synthetic &lt;experiment&gt;"));
    assert_eq!(html.matches("<svg").count(), 6, "every figure inlined");
    let text = summary_text(&r);
    assert!(text.contains("1234.5") && text.contains("FAILED SHRUB, jackd2: jackd exited"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn figures_have_one_curve_per_server_client_or_quantity() {
    let r = result(2000);
    let dir = temp_dir("svg");
    write(&r, &dir).unwrap();
    // Per configuration inset: resound and jackd2 as two curves (the failed
    // jackd run still drew its 10 cycles).
    let end = read(&dir, "driver-end.svg");
    assert_eq!(texts(&end, "resound"), 2);
    assert_eq!(texts(&end, "jackd2"), 2);
    assert_eq!(texts(&end, "period"), 2);
    assert_eq!(texts(&end, "dnl3 joins"), 2, "timeline marks");
    assert_eq!(texts(&end, "SHRUB (jackd2 failed)"), 1, "inset title");
    let cdf = read(&dir, "period-cdf.svg");
    assert_eq!(texts(&cdf, "resound"), 2);
    // One row per server, one inset per configuration, a curve per client.
    let clients = read(&dir, "clients-end.svg");
    assert_eq!(texts(&clients, "dnl1"), 4);
    // The failed run stopped before dnl2 and dnl3 joined.
    assert_eq!(texts(&clients, "dnl2"), 3);
    assert_eq!(texts(&clients, "dnl3"), 3);
    assert_eq!(texts(&clients, "period"), 4);
    // Budget: only resound has one; set, predicted, used per configuration.
    let budget = read(&dir, "budget.svg");
    assert_eq!(texts(&budget, "set budget"), 2);
    assert_eq!(texts(&budget, "predicted"), 2);
    let rt = read(&dir, "rtapp-response.svg");
    assert_eq!(texts(&rt, "resound video-0"), 2);
    assert_eq!(texts(&rt, "deadline video"), 2);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn redraw_from_the_files_gives_the_same_report() {
    let r = result(2000);
    let dir = temp_dir("redraw");
    write(&r, &dir).unwrap();
    let before = read(&dir, "report.html");
    let svg_before = read(&dir, "clients-end.svg");
    std::fs::remove_file(dir.join("report.html")).unwrap();
    let again = redraw(&dir).unwrap();
    assert!(again.contains(&dir.join("report.html")));
    assert_eq!(read(&dir, "report.html"), before);
    assert_eq!(read(&dir, "clients-end.svg"), svg_before);
    // A damaged file is an error naming it, not a silently wrong figure.
    std::fs::write(dir.join("cycles-fifo-resound.csv"), "t_s,period_us\nx,1\n").unwrap();
    let e = redraw(&dir).unwrap_err();
    assert!(e.contains("cycles-fifo-resound.csv"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_long_run_gives_small_figures() {
    // 100k cycles per run, as a 2-minute run at 64 frames gives.
    let r = result(100_000);
    let dir = temp_dir("long");
    let start = std::time::Instant::now();
    write(&r, &dir).unwrap();
    eprintln!("report of 3 x 100k cycles written in {:?}", start.elapsed());
    assert_eq!(
        read(&dir, "cycles-shrub-resound.csv").lines().count(),
        100_001
    );
    for f in ["driver-end", "clients-end", "budget", "period-cdf"] {
        let size = std::fs::metadata(dir.join(format!("{f}.svg")))
            .unwrap()
            .len();
        assert!(size < 1_500_000, "{f}.svg is {size} bytes");
    }
    // The one 900 us period spike of each long run survives the decimation.
    let figs = figures::all(&r);
    let period = figs.iter().find(|f| f.stem == "driver-period").unwrap();
    let spike = PERIOD_US + (1500 % 17) as f64 - 8.0 + 900.0;
    let long: Vec<&chart::Curve> = period
        .insets
        .iter()
        .flat_map(|i| &i.curves)
        .filter(|c| c.points.len() > 20)
        .collect();
    assert_eq!(long.len(), 3, "three runs of 100k cycles");
    for c in long {
        assert!(
            c.points.len() <= 2 * chart::BUCKETS,
            "{} points",
            c.points.len()
        );
        let max = c.points.iter().map(|p| p.1).fold(f64::MIN, f64::max);
        assert_eq!(max, spike);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
