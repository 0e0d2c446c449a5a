//! `resound legacy analyze`: the minimum CBS budget per server period for a
//! (C, P) task, as a table.

use clap::Args;
use resound_legacy::analyze::budget_table;

/// Options of `resound legacy analyze`.
#[derive(Debug, Args)]
pub struct AnalyzeArgs {
    /// The task's worst-case execution time per job, ms.
    #[arg(long)]
    wcet: f64,
    /// The task's period, ms.
    #[arg(long)]
    period: f64,
    /// Server periods from this (ms; default P/10)...
    #[arg(long)]
    from: Option<f64>,
    /// ...to this (ms; default 2P)...
    #[arg(long)]
    to: Option<f64>,
    /// ...at this step (ms; default P/20).
    #[arg(long)]
    step: Option<f64>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
    /// Draw Z(t) against the demand and the minimum Q/T per T here (.png or .svg).
    #[arg(long)]
    plot: Option<std::path::PathBuf>,
}

/// Run `resound legacy analyze`.
pub fn run(a: AnalyzeArgs) -> Result<(), String> {
    if !(a.wcet > 0.0 && a.period > 0.0 && a.wcet <= a.period) {
        return Err("need 0 < --wcet <= --period (ms)".into());
    }
    let (from, to, step) = (
        a.from.unwrap_or(a.period / 10.0),
        a.to.unwrap_or(2.0 * a.period),
        a.step.unwrap_or(a.period / 20.0),
    );
    if !(from > 0.0 && to >= from && step > 0.0 && (to - from) / step <= 10_000.0) {
        return Err("need 0 < --from <= --to and a --step giving at most 10000 rows".into());
    }
    let n = ((to - from) / step + 1e-9).floor() as usize;
    let rows = budget_table(a.wcet, a.period, (0..=n).map(|i| from + i as f64 * step));
    if let Some(p) = &a.plot {
        let fig = super::plot::Figure::Supply {
            wcet: a.wcet,
            period: a.period,
            rows: &rows,
        };
        super::plot::save(p, &fig)?;
    }
    if a.json {
        println!("{}", serde_json::to_string(&rows).expect("rows serialise"));
        return Ok(());
    }
    println!(
        "task C = {} ms, P = {} ms (U = {:.3})",
        a.wcet,
        a.period,
        a.wcet / a.period
    );
    println!("{:>10} {:>12} {:>10}", "T (ms)", "min Q (ms)", "Q/T");
    for r in &rows {
        let mark = if (r.bandwidth - a.wcet / a.period).abs() < 1e-6 {
            "  <- Q/T = U"
        } else {
            ""
        };
        println!(
            "{:>10.3} {:>12.3} {:>10.4}{mark}",
            r.period, r.budget, r.bandwidth
        );
    }
    Ok(())
}
