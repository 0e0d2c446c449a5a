//! The bench's outputs: a table per load (each server's median over runs,
//! and resound ÷ jackd2 with its spread over the runs, run i of resound over
//! run i of jackd2; counts are totals, with the runs that counted fewer and
//! more than jackd2's), `runs.csv` and `runs.json` with every run's numbers.
//! Runs on the bench's main thread.

use super::metrics::{RunMetrics, METRICS};
use super::servers::{Contender, JACKD_LABEL};
use serde_json::{json, Value};

/// One finished run.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// Busy percent per client.
    pub load: f64,
    /// Repetition (0-based).
    pub run: usize,
    /// Its place within the repetition (0: the first server to run).
    pub place: usize,
    /// The server.
    pub server: Contender,
    /// How its driver thread was found (and which it was).
    pub driver: String,
    /// Its numbers, or why it failed.
    pub metrics: Result<RunMetrics, String>,
}

/// Median of the finite values (NaN when none).
pub(crate) fn median(v: &[f64]) -> f64 {
    let mut v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// The successful runs at `load` of the server labelled `label`, with
/// their repetition.
fn runs_of<'a>(
    rs: &'a [RunResult],
    load: f64,
    label: &'a str,
) -> impl Iterator<Item = (usize, &'a RunMetrics)> {
    rs.iter()
        .filter(move |r| r.load == load && r.server.label == label)
        .filter_map(|r| r.metrics.as_ref().ok().map(|m| (r.run, m)))
}

/// Values of metric `get` of the successful runs at `load` of the server
/// labelled `label`, by run.
fn values(
    rs: &[RunResult],
    load: f64,
    label: &str,
    get: fn(&RunMetrics) -> f64,
) -> Vec<(usize, f64)> {
    runs_of(rs, load, label)
        .map(|(run, m)| (run, get(m)))
        .collect()
}

/// Each successful run of the server labelled `label` at `load` beside
/// jackd2's run with the same index, as (its metrics, jackd2's): the runs
/// alternate, so each pair saw the same machine.
fn paired_runs<'a>(
    rs: &'a [RunResult],
    load: f64,
    label: &'a str,
) -> Vec<(&'a RunMetrics, &'a RunMetrics)> {
    let theirs: Vec<(usize, &RunMetrics)> = runs_of(rs, load, JACKD_LABEL).collect();
    runs_of(rs, load, label)
        .filter_map(|(run, m)| Some((m, theirs.iter().find(|t| t.0 == run)?.1)))
        .collect()
}

/// [`paired_runs`], as (its value of metric `get`, jackd2's).
fn paired(
    rs: &[RunResult],
    load: f64,
    label: &str,
    get: fn(&RunMetrics) -> f64,
) -> Vec<(f64, f64)> {
    paired_runs(rs, load, label)
        .into_iter()
        .map(|(m, j)| (get(m), get(j)))
        .collect()
}

/// The median and the min–max of the per-run ratios of the server labelled
/// `label` to jackd2 (run i over run i, [`paired`]).
fn ratio(rs: &[RunResult], load: f64, label: &str, get: fn(&RunMetrics) -> f64) -> String {
    ratio_cell(&paired(rs, load, label, get))
}

/// "median [min-max]" of the ratios x / y of `pairs` (one run: the ratio
/// alone; "-" without a pair whose y is above 0 and both finite).
pub(crate) fn ratio_cell(pairs: &[(f64, f64)]) -> String {
    let per_run: Vec<f64> = pairs
        .iter()
        .filter_map(|&(x, y)| {
            (y > 0.0 && x >= 0.0 && x.is_finite() && y.is_finite()).then_some(x / y)
        })
        .collect();
    if per_run.is_empty() {
        return "-".into();
    }
    let lo = per_run.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = per_run.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mid = median(&per_run);
    if per_run.len() > 1 {
        format!("{mid:.2} [{lo:.2}-{hi:.2}]")
    } else {
        format!("{mid:.2}")
    }
}

/// For a count: in how many runs the server labelled `label` counted fewer
/// and more than jackd2's run of the same repetition (runs with equal counts make
/// up the rest). Counts come in episodes (a slow phase of the machine gives
/// tens of late cycles at once), so a total can hang on one run; this says
/// whether a difference holds run by run.
fn count_pairs(rs: &[RunResult], load: f64, label: &str, get: fn(&RunMetrics) -> f64) -> String {
    let pairs = paired(rs, load, label, get);
    if pairs.is_empty() {
        return "-".into();
    }
    let fewer = pairs.iter().filter(|(x, y)| x < y).count();
    let more = pairs.iter().filter(|(x, y)| x > y).count();
    format!("{fewer} fewer, {more} more")
}

/// A count's cell: the total over the runs, and in brackets the median
/// run's count, which one run's episode does not move.
fn count_cell(per_run: &[f64]) -> String {
    let known: Vec<f64> = per_run.iter().copied().filter(|x| x.is_finite()).collect();
    if known.is_empty() {
        return "-".into();
    }
    let mid = median(&known);
    let mid = if mid.fract() == 0.0 {
        format!("{mid:.0}")
    } else {
        format!("{mid:.1}")
    };
    format!("{:.0} ({mid})", known.iter().sum::<f64>())
}

/// One decimal, or "-" for a value no run measured.
pub(crate) fn cell(v: f64) -> String {
    if v.is_finite() {
        format!("{v:.1}")
    } else {
        "-".into()
    }
}

/// The table for one load: a column per server, and after each resound one
/// its ratio to jackd2 (for a count, the runs with fewer and more: `count_pairs`)
/// when jackd2 ran, then the same comparison over the repetitions the host
/// left quiet (steal at most `quiet_ms_per_s`: `quiet_repetitions`), and
/// every run banded by its steal (`by_steal`).
pub fn table(
    rs: &[RunResult],
    load: f64,
    contenders: &[Contender],
    head: &str,
    quiet_ms_per_s: f64,
) -> String {
    let with_jackd = contenders.iter().any(Contender::is_jackd);
    let width = |k: &Contender| k.label.len().max(16);
    let mut o = format!("{head}\n");
    let mut hdr = format!("{:<34}", "metric (median over runs)");
    for k in contenders {
        hdr += &format!(" {:>w$}", k.label, w = width(k));
        if !k.is_jackd() && with_jackd {
            hdr += &format!(" {:>17}", "/jackd2 [min-max]");
        }
    }
    o += &hdr;
    o += "\n";
    for m in METRICS {
        let mut line = format!("{:<34}", m.label);
        for k in contenders {
            let v: Vec<f64> = values(rs, load, &k.label, m.get)
                .iter()
                .map(|x| x.1)
                .collect();
            let shown = if v.is_empty() {
                "-".into()
            } else if m.count {
                count_cell(&v)
            } else {
                cell(median(&v))
            };
            line += &format!(" {shown:>w$}", w = width(k));
            if !k.is_jackd() && with_jackd {
                let r = if m.count {
                    count_pairs(rs, load, &k.label, m.get)
                } else {
                    ratio(rs, load, &k.label, m.get)
                };
                line += &format!(" {r:>17}");
            }
        }
        o += &line;
        o += "\n";
    }
    if with_jackd {
        o += "  counts: totals over the runs (the median run's count in brackets); beside them, in how many runs the server counted fewer and more than jackd2's run of the same repetition\n";
        o += &quiet_repetitions(rs, load, contenders, quiet_ms_per_s);
    }
    o += &by_steal(rs, load, contenders, quiet_ms_per_s);
    o += &by_place(rs, load, contenders.len());
    for k in contenders.iter().filter(|k| !k.options.is_empty()) {
        o += &format!("  {}: resoundd {}\n", k.label, k.options.join(" "));
    }
    for k in contenders.iter() {
        let Some(dir) = &k.build else { continue };
        o += &format!("  {}: the build in {}\n", k.label, dir.display());
    }
    for r in rs.iter().filter(|r| r.load == load) {
        if let Err(e) = &r.metrics {
            o += &format!("  run {} {} failed: {e}\n", r.run + 1, r.server.label);
        }
    }
    o
}

/// The ratios the goals are read from, over the repetitions where the host
/// took at most `limit` ms/s of steal from both this server's run and
/// jackd2's ([`RunMetrics::steal_ms_per_s`]): on a virtual machine whose
/// host stalls its CPUs for milliseconds, a run it leaned on loses blocks
/// and counts xruns whatever server it ran, and an uneven share of such
/// runs decides the totals above. A line per resound server: how many
/// repetitions qualified, end of chain p50 and p99 and driver CPU ÷
/// jackd2's (median [min–max]), and its xruns, lost blocks and blocks lost
/// or never made against jackd2's over those repetitions.
fn quiet_repetitions(rs: &[RunResult], load: f64, contenders: &[Contender], limit: f64) -> String {
    let quiet = |m: &RunMetrics| m.steal_ms_per_s <= limit;
    let mut o = format!(
        "  repetitions the host left quiet (steal at most {limit} ms/s over both windows of this server's run and of jackd2's), resound / jackd2:\n"
    );
    let mut any_quiet = false;
    for k in contenders.iter().filter(|k| !k.is_jackd()) {
        let pairs = paired_runs(rs, load, &k.label);
        let both = pairs.len();
        let pairs: Vec<_> = pairs
            .into_iter()
            .filter(|(m, j)| quiet(m) && quiet(j))
            .collect();
        o += &format!("    {:<17} {} of {both}", k.label, pairs.len());
        if pairs.is_empty() {
            o += "\n";
            continue;
        }
        any_quiet = true;
        let r = |get: fn(&RunMetrics) -> f64| {
            ratio_cell(
                &pairs
                    .iter()
                    .map(|(m, j)| (get(m), get(j)))
                    .collect::<Vec<_>>(),
            )
        };
        // Over the quiet pairs: resound's (`ours`) or jackd2's.
        let sum = |get: fn(&RunMetrics) -> u64, ours: bool| {
            pairs
                .iter()
                .map(|(m, j)| get(if ours { m } else { j }))
                .sum::<u64>()
        };
        o += &format!(
            ": end of chain p50 {}, p99 {}, driver CPU {}; xruns {} against {}, lost blocks {} against {}, lost or never made {} against {}\n",
            r(|m| m.drv_eoc_p50),
            r(|m| m.drv_eoc_p99),
            r(|m| m.driver_cpu),
            sum(|m| m.xruns, true),
            sum(|m| m.xruns, false),
            sum(|m| m.lost, true),
            sum(|m| m.lost, false),
            sum(RunMetrics::dropped, true),
            sum(RunMetrics::dropped, false),
        );
    }
    if !any_quiet {
        o += "    (the host was never that quiet in this bench: its ratios above weigh the host's share of each run as much as the servers; run again in a quieter hour, or raise --quiet-steal)\n";
    }
    o
}

/// The bands of [`by_steal`], in ms/s of host steal: up to the quiet
/// limit `q`, up to 5 q, up to 15 q, above (20, 100 and 300 by default).
fn steal_bands(q: f64) -> [(f64, f64); 4] {
    [
        (0.0, q),
        (q, 5.0 * q),
        (5.0 * q, 15.0 * q),
        (15.0 * q, f64::INFINITY),
    ]
}

/// Every run sorted by how hard the host leaned on it (its steal per
/// second, [`steal_bands`]), a line per band and a cell per server: its
/// runs in the band, their periods without a fresh block at the last
/// client (lost blocks and blocks never made: the row "lost or never
/// made", which compares jackd2, that skips cycles while its graph is
/// late, with resound, that does not) and xruns per 1000 periods, and the
/// median of their end of chain p99 (from the driver's traced wake-up).
/// Runs of different servers in one band saw a like share of stalls,
/// whichever repetition they were in, so this compares the servers at
/// matched steal even in an hour when no repetition was quiet; a server
/// that loses more than another in every band does so whatever the host
/// did.
fn by_steal(rs: &[RunResult], load: f64, contenders: &[Contender], q: f64) -> String {
    let width = |k: &Contender| k.label.len().max(38);
    let mut o = "  by the host's steal per second in each run (runs: blocks lost or never made and xruns per 1000 periods, median end of chain p99 us):\n".to_string();
    o += &format!("    {:<14}", "steal ms/s");
    for k in contenders {
        o += &format!(" {:<w$}", k.label, w = width(k));
    }
    o += "\n";
    for (lo, hi) in steal_bands(q) {
        let band = if hi.is_finite() {
            format!("{lo:.0}-{hi:.0}")
        } else {
            format!(">{lo:.0}")
        };
        o += &format!("    {band:<14}");
        for k in contenders {
            let runs: Vec<&RunMetrics> = runs_of(rs, load, &k.label)
                .map(|(_, m)| m)
                .filter(|m| m.steal_ms_per_s > lo || (lo == 0.0 && m.steal_ms_per_s >= 0.0))
                .filter(|m| m.steal_ms_per_s <= hi)
                .collect();
            o += &format!(" {:<w$}", band_cell(&runs), w = width(k));
        }
        o += "\n";
    }
    o
}

/// A cell of [`by_steal`]: "N: dropped D, xruns X, p99 P" over `runs`, or
/// "0" without any. Periods: the first client's cycles and the periods
/// without a block.
fn band_cell(runs: &[&RunMetrics]) -> String {
    let periods: u64 = runs.iter().map(|m| m.cycles + m.blockless).sum();
    if runs.is_empty() || periods == 0 {
        return runs.len().to_string();
    }
    let per_k = |n: u64| 1000.0 * n as f64 / periods as f64;
    let dropped = per_k(runs.iter().map(|m| m.dropped()).sum());
    let xruns = per_k(runs.iter().map(|m| m.xruns).sum());
    let p99: Vec<f64> = runs.iter().map(|m| m.drv_eoc_p99).collect();
    format!(
        "{}: dropped {dropped:.1}, xruns {xruns:.0}, p99 {:.0}",
        runs.len(),
        median(&p99)
    )
}

/// When the servers took turns in each place of the repetitions (the
/// order rotated), a line of what each place counted over every server:
/// lost blocks, xruns and the median end-of-chain p99. A place that does
/// worse than the others whatever server ran in it says that the order
/// weighs on the counts (the machine after a server stops, or as a run
/// ages), and that a server's total is fair only because the places were
/// shared out evenly.
fn by_place(rs: &[RunResult], load: f64, servers: usize) -> String {
    let ok: Vec<(usize, &RunMetrics)> = rs
        .iter()
        .filter(|r| r.load == load)
        .filter_map(|r| r.metrics.as_ref().ok().map(|m| (r.place, m)))
        .collect();
    let at_load = || rs.iter().filter(|r| r.load == load);
    // With a fixed order each server keeps one place, and a place's count
    // is that server's.
    let rotated = at_load()
        .any(|r| at_load().any(|q| q.server.label == r.server.label && q.place != r.place));
    if servers < 2 || !rotated {
        return String::new();
    }
    let cells: Vec<String> = (0..servers)
        .map(|place| {
            let here: Vec<&RunMetrics> = ok
                .iter()
                .filter(|(p, _)| *p == place)
                .map(|(_, m)| *m)
                .collect();
            let lost: u64 = here.iter().map(|m| m.lost).sum();
            let xruns: u64 = here.iter().map(|m| m.xruns).sum();
            let p99: Vec<f64> = here.iter().map(|m| m.eoc_p99).collect();
            format!(
                "{} {} runs: {lost} lost, {xruns} xruns, p99 {}",
                ordinal(place + 1),
                here.len(),
                cell(median(&p99))
            )
        })
        .collect();
    format!(
        "  by place in the repetition, every server: {}\n",
        cells.join("; ")
    )
}

/// 1st, 2nd, 3rd, 4th, …
fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// Every run as CSV (one row per run).
pub fn csv(rs: &[RunResult]) -> String {
    let mut o = "load_pct,run,place,server,driver_thread,cycles".to_string();
    for m in METRICS {
        o += ",";
        o += m.key;
    }
    o += ",error\n";
    for r in rs {
        o += &format!(
            "{},{},{},{},{},",
            r.load,
            r.run + 1,
            r.place + 1,
            r.server.label,
            r.driver
        );
        match &r.metrics {
            Ok(m) => {
                o += &m.cycles.to_string();
                for k in METRICS {
                    let v = (k.get)(m);
                    o += &if v.is_finite() {
                        format!(",{v:.3}")
                    } else {
                        ",".into()
                    };
                }
                o += ",\n";
            }
            Err(e) => {
                o += &",".repeat(METRICS.len());
                o += &format!(",\"{}\"\n", e.replace('"', "'").replace('\n', " "));
            }
        }
    }
    o
}

/// Every run as JSON, with the settings.
pub fn json(rs: &[RunResult], settings: Value) -> Value {
    let runs: Vec<Value> = rs
        .iter()
        .map(|r| {
            json!({
                "load_pct": r.load,
                "run": r.run + 1,
                "place": r.place + 1,
                "server": r.server.label,
                "driver_thread": r.driver,
                "metrics": r.metrics.as_ref().map(|m| m.to_json()).unwrap_or(Value::Null),
                "error": r.metrics.as_ref().err(),
            })
        })
        .collect();
    json!({ "settings": settings, "runs": runs })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vsjackd::servers::Base;

    fn run(load: f64, run: usize, server: &Contender, eoc: f64) -> RunResult {
        RunResult {
            load,
            run,
            place: 0,
            server: server.clone(),
            driver: "t".into(),
            metrics: Ok(RunMetrics {
                eoc_p50: eoc,
                ..Default::default()
            }),
        }
    }

    /// A run at 1 % of `server` in repetition `run_i`, its metrics as
    /// `set` leaves them.
    fn run_with(run_i: usize, server: &Contender, set: impl FnOnce(&mut RunMetrics)) -> RunResult {
        let mut r = run(1.0, run_i, server, 1.0);
        if let Ok(m) = &mut r.metrics {
            set(m);
        }
        r
    }

    #[test]
    fn ratio_is_the_median_of_per_run_ratios_with_their_spread() {
        let (jackd, fifo) = (Contender::of(Base::Jackd), Contender::of(Base::Fifo));
        let rs = vec![
            run(1.0, 0, &jackd, 100.0),
            run(1.0, 0, &fifo, 120.0),
            run(1.0, 1, &jackd, 200.0),
            run(1.0, 1, &fifo, 180.0),
        ];
        assert_eq!(
            ratio(&rs, 1.0, "resound-fifo", |m| m.eoc_p50),
            "1.05 [0.90-1.20]"
        );
        let t = table(&rs, 1.0, &[jackd, fifo], "head", 20.0);
        assert!(t.contains("reported start -> end p50 (us)"));
        assert!(t.contains("150.0"), "{t}");
        assert_eq!(csv(&rs).lines().count(), 5);
    }

    #[test]
    fn a_variant_gets_its_own_column_ratio_and_options_line() {
        let jackd = Contender::of(Base::Jackd);
        let nolight = Contender::variant("nolight=--light-deadline 100").unwrap();
        let rs = vec![
            run(1.0, 0, &jackd, 100.0),
            run(1.0, 0, &Contender::of(Base::Deadline), 110.0),
            run(1.0, 0, &nolight, 130.0),
        ];
        let contenders = [jackd, Contender::of(Base::Deadline), nolight];
        let t = table(&rs, 1.0, &contenders, "head", 20.0);
        let eoc = t
            .lines()
            .find(|l| l.contains("reported start -> end p50"))
            .unwrap();
        assert!(eoc.contains("110.0") && eoc.contains("1.10"), "{t}");
        assert!(eoc.contains("130.0") && eoc.contains("1.30"), "{t}");
        assert!(
            t.contains("resound-nolight: resoundd --light-deadline 100"),
            "{t}"
        );
    }

    #[test]
    fn a_count_is_compared_run_by_run() {
        let (jackd, fifo) = (Contender::of(Base::Jackd), Contender::of(Base::Fifo));
        let lost = |load, run_i, server: &Contender, n| {
            let mut r = run(load, run_i, server, 1.0);
            if let Ok(m) = &mut r.metrics {
                m.lost = n;
            }
            r
        };
        let rs = vec![
            lost(1.0, 0, &jackd, 3),
            lost(1.0, 0, &fifo, 9),
            lost(1.0, 1, &jackd, 2),
            lost(1.0, 1, &fifo, 0),
            lost(1.0, 2, &jackd, 4),
            lost(1.0, 2, &fifo, 1),
            lost(1.0, 3, &jackd, 0),
            lost(1.0, 3, &fifo, 0),
        ];
        assert_eq!(
            count_pairs(&rs, 1.0, "resound-fifo", |m| m.lost as f64),
            "2 fewer, 1 more"
        );
        let t = table(&rs, 1.0, &[jackd, fifo], "head", 20.0);
        let row = t.lines().find(|l| l.starts_with("lost blocks")).unwrap();
        // Totals 9 and 10; medians of 0, 2, 3, 4 and 0, 0, 1, 9.
        assert!(
            row.contains(" 9 (2.5) ")
                && row.contains(" 10 (0.5) ")
                && row.contains("2 fewer, 1 more"),
            "{t}"
        );
    }

    #[test]
    fn a_server_whose_runs_all_failed_shows_dashes_not_zeros() {
        let jackd = Contender::of(Base::Jackd);
        let broken = Contender::variant("broken=--overprovision 200").unwrap();
        let rs = vec![
            run(1.0, 0, &jackd, 100.0),
            RunResult {
                load: 1.0,
                run: 0,
                place: 1,
                server: broken.clone(),
                driver: String::new(),
                metrics: Err("resoundd exited".into()),
            },
        ];
        let t = table(&rs, 1.0, &[jackd, broken], "head", 20.0);
        let row = t.lines().find(|l| l.starts_with("lost blocks")).unwrap();
        let cells: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cells[cells.len() - 2..], ["-", "-"], "{t}");
        assert!(!t.contains("-0"), "{t}");
    }

    #[test]
    fn rotated_places_get_a_line_of_their_own_counts() {
        let (jackd, fifo) = (Contender::of(Base::Jackd), Contender::of(Base::Fifo));
        let at = |run_i, place, server: &Contender, lost| {
            let mut r = run(1.0, run_i, server, 1.0);
            r.place = place;
            if let Ok(m) = &mut r.metrics {
                m.lost = lost;
                m.eoc_p99 = 100.0 * (place + 1) as f64;
            }
            r
        };
        // The second place loses more, whichever server runs there.
        let rs = vec![
            at(0, 0, &jackd, 1),
            at(0, 1, &fifo, 7),
            at(1, 0, &fifo, 2),
            at(1, 1, &jackd, 5),
        ];
        let t = table(&rs, 1.0, &[jackd.clone(), fifo.clone()], "head", 20.0);
        let line = t.lines().find(|l| l.contains("by place")).unwrap();
        assert!(
            line.contains("1st 2 runs: 3 lost, 0 xruns, p99 100.0")
                && line.contains("2nd 2 runs: 12 lost, 0 xruns, p99 200.0"),
            "{t}"
        );
        // In a fixed order a place is one server: no line.
        let fixed = vec![at(0, 0, &jackd, 1), at(0, 1, &fifo, 7), at(1, 0, &jackd, 2)];
        let t = table(&fixed, 1.0, &[jackd, fifo], "head", 20.0);
        assert!(!t.contains("by place"), "{t}");
    }

    #[test]
    fn quiet_repetitions_compare_only_runs_the_host_left_alone_on_both_sides() {
        let (jackd, fifo) = (Contender::of(Base::Jackd), Contender::of(Base::Fifo));
        let at = |run_i, server: &Contender, eoc, steal, lost| {
            run_with(run_i, server, |m| {
                m.drv_eoc_p50 = eoc;
                m.steal_ms_per_s = steal;
                m.lost = lost;
            })
        };
        let rs = vec![
            // Quiet on both sides: compared.
            at(0, &jackd, 100.0, 5.0, 2),
            at(0, &fifo, 50.0, 20.0, 1),
            // The host leaned on resound's run: left out.
            at(1, &jackd, 100.0, 1.0, 0),
            at(1, &fifo, 400.0, 80.0, 90),
            // On jackd2's: left out.
            at(2, &jackd, 900.0, 60.0, 70),
            at(2, &fifo, 100.0, 1.0, 0),
            // Steal unread: not known quiet.
            at(3, &jackd, 100.0, f64::NAN, 0),
            at(3, &fifo, 60.0, 1.0, 0),
            // Quiet again.
            at(4, &jackd, 100.0, 0.0, 3),
            at(4, &fifo, 70.0, 0.0, 0),
        ];
        let t = table(&rs, 1.0, &[jackd, fifo], "head", 20.0);
        let line = t
            .lines()
            .find(|l| l.trim_start().starts_with("resound-fifo "))
            .unwrap_or_else(|| panic!("{t}"));
        assert!(t.contains("steal at most 20 ms/s"), "{t}");
        assert!(line.contains("2 of 5"), "{line}");
        assert!(line.contains("end of chain p50 0.60 [0.50-0.70]"), "{line}");
        assert!(line.contains("lost blocks 1 against 5"), "{line}");
        assert!(line.contains("lost or never made 1 against 5"), "{line}");
        assert!(!t.contains("never that quiet"), "{t}");
    }

    #[test]
    fn with_no_quiet_repetition_the_line_says_so_and_nothing_more() {
        let (jackd, fifo) = (Contender::of(Base::Jackd), Contender::of(Base::Fifo));
        let noisy = |m: &mut RunMetrics| m.steal_ms_per_s = 50.0;
        let rs = vec![run_with(0, &jackd, noisy), run_with(0, &fifo, noisy)];
        let t = table(&rs, 1.0, &[jackd, fifo], "head", 20.0);
        let line = t
            .lines()
            .find(|l| l.trim_start().starts_with("resound-fifo "))
            .unwrap_or_else(|| panic!("{t}"));
        assert_eq!(line.trim_end(), "    resound-fifo      0 of 1", "{t}");
        assert!(t.contains("the host was never that quiet"), "{t}");
    }

    #[test]
    fn runs_are_banded_by_their_steal_per_second_whatever_their_repetition() {
        let (jackd, fifo) = (Contender::of(Base::Jackd), Contender::of(Base::Fifo));
        // 1000 periods a run: `lost` blocks lost and as many never made.
        let at = |run_i, server: &Contender, steal, lost, p99| {
            run_with(run_i, server, |m| {
                m.cycles = 1000 - lost;
                m.blockless = lost;
                m.steal_ms_per_s = steal;
                m.lost = lost;
                m.xruns = 10 * lost;
                m.drv_eoc_p99 = p99;
            })
        };
        let rs = vec![
            at(0, &jackd, 0.0, 1, 100.0),
            at(0, &fifo, 20.0, 3, 300.0),
            at(1, &jackd, 50.0, 5, 500.0),
            at(1, &fifo, 400.0, 40, 4000.0),
            at(2, &jackd, 10.0, 2, 200.0),
            at(2, &fifo, f64::NAN, 99, 9900.0),
        ];
        let t = table(&rs, 1.0, &[jackd, fifo], "head", 20.0);
        let line = |band: &str| {
            t.lines()
                .find(|l| l.trim_start().starts_with(band))
                .unwrap_or_else(|| panic!("no {band} in {t}"))
                .split_whitespace()
                .skip(1)
                .collect::<Vec<_>>()
                .join(" ")
        };
        // 20 ms/s is still quiet; the run whose steal was unread is in no band.
        assert_eq!(
            line("0-20 "),
            "2: dropped 3.0, xruns 15, p99 150 1: dropped 6.0, xruns 30, p99 300"
        );
        assert_eq!(line("20-100 "), "1: dropped 10.0, xruns 50, p99 500 0");
        assert_eq!(line("100-300 "), "0 0");
        assert_eq!(line(">300 "), "0 1: dropped 80.0, xruns 400, p99 4000");
    }

    #[test]
    fn ordinals_read_as_words_do() {
        let got: Vec<String> = [1, 2, 3, 4, 11, 12, 13, 21, 22].map(ordinal).into();
        assert_eq!(
            got,
            ["1st", "2nd", "3rd", "4th", "11th", "12th", "13th", "21st", "22nd"]
        );
    }

    #[test]
    fn median_skips_missing_values() {
        assert_eq!(median(&[3.0, f64::NAN, 1.0]), 2.0);
        assert!(median(&[]).is_nan());
    }

    #[test]
    fn a_count_unknown_in_some_runs_totals_the_runs_that_know_it() {
        assert_eq!(count_cell(&[30.0, f64::NAN, 10.0]), "40 (20)");
        assert_eq!(count_cell(&[f64::NAN, f64::NAN]), "-");
        assert_eq!(count_cell(&[1.0, 2.0]), "3 (1.5)");
    }
}
