//! The supply-bound experiment (Figures 1-2 of the paper): the minimum
//! budget of a (C = 20 ms, P = 100 ms) task for each server period T, the
//! cheapest periods (T = P and its integer sub-multiples) and the cost of a
//! wrong one, with the figure drawn by `analyze --plot`.

use super::{write_rows, ExperimentArgs};
use crate::legacy::plot::{save, Figure};
use resound_legacy::analyze::{budget_table, min_budget};

const C: f64 = 20.0;
const P: f64 = 100.0;

/// Run it.
pub fn run(a: &ExperimentArgs) -> Result<(), String> {
    println!("Supply bound: task C = {C} ms, P = {P} ms (U = 0.20), as Figure 2 of the paper");
    println!("{:>8} {:>10} {:>8}   paper", "T (ms)", "min Q (ms)", "Q/T");
    let notes = [
        (100.0, "cheapest: Q/T = U (T = P)"),
        (50.0, "cheapest: integer sub-multiple"),
        (25.0, "cheapest: integer sub-multiple"),
        (40.0, "more than U"),
        (75.0, "up to half as much again as U"),
        (120.0, "T > P: waste grows without bound"),
        (200.0, "T > P: waste grows without bound"),
    ];
    for (t, note) in notes {
        let q = min_budget(C, P, t).unwrap_or(f64::NAN);
        println!("{t:>8.1} {q:>10.3} {:>8.3}   {note}", q / t);
    }
    let rows = budget_table(C, P, (1..=200).map(|i| i as f64));
    let worst_below = rows
        .iter()
        .filter(|r| r.period >= 10.0 && r.period <= P)
        .map(|r| r.bandwidth)
        .fold(0.0, f64::max);
    println!(
        "for 10 ms <= T <= P the worst bandwidth is {worst_below:.3} ({:.0} % above U)",
        (worst_below / 0.2 - 1.0) * 100.0
    );
    if let Some(dir) = &a.out {
        let h = ["period_ms", "budget_ms", "bandwidth"];
        write_rows(dir, "supply-bound", &h, &rows, |r| {
            vec![
                r.period.to_string(),
                r.budget.to_string(),
                r.bandwidth.to_string(),
            ]
        })?;
        let fig = Figure::Supply {
            wcet: C,
            period: P,
            rows: &rows,
        };
        for ext in ["png", "svg"] {
            save(&dir.join(format!("supply-bound.{ext}")), &fig)?;
        }
        println!("wrote {}/supply-bound.{{csv,json,png,svg}}", dir.display());
    }
    Ok(())
}
