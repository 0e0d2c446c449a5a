//! The report of `resound experiment run`: what [`write()`] puts in the
//! output directory, and [`redraw`], which rebuilds the figures and the
//! page from a previous run's files without running it again.
//!
//! | file | what | module |
//! |---|---|---|
//! | `results.json` | the whole result but the per-cycle and per-job series | [`files`] |
//! | `metrics.csv` | one row per configuration and server, a column per metric | [`files`] |
//! | `cycles-RUN-SERVER.csv` | every cycle: period, end dates, budget, CPU used, xrun, each client's end date | [`files`] |
//! | `jobs-RUN-SERVER.csv` | every rt-app job: task, release, response time, slack | [`files`] |
//! | `*.svg` | the figures, laid out like the papers' | [`figures`], drawn by [`chart`] |
//! | `report.html` | the page: setups, published-vs-measured tables, figures inlined | [`html`], [`tables`] |
//!
//! [`summary_text`] prints the same tables for the terminal. Everything
//! runs on the command's main thread.

pub mod chart;
pub mod figures;
pub mod files;
pub mod html;
pub mod tables;
#[cfg(test)]
mod tests;

use crate::experiment::results::ExperimentResult;
use std::path::{Path, PathBuf};

pub use tables::summary_text;

/// The page's file name.
pub const REPORT_HTML: &str = "report.html";

/// Draws the figures into `out` and writes `report.html`; returns the
/// files written.
fn draw(result: &ExperimentResult, out: &Path) -> Result<Vec<PathBuf>, String> {
    let mut written = Vec::new();
    let mut drawn = Vec::new();
    for fig in figures::all(result) {
        let svg = chart::svg(&fig)?;
        let path = out.join(format!("{}.svg", fig.stem));
        std::fs::write(&path, &svg).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        written.push(path);
        drawn.push((fig, svg));
    }
    let page = html::page(result, &tables::all(result), &drawn);
    let path = out.join(REPORT_HTML);
    std::fs::write(&path, page).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    written.push(path);
    Ok(written)
}

/// Writes the whole report of `result` into `out` (created if missing):
/// the data files, the figures and `report.html`. Returns every file
/// written.
pub fn write(result: &ExperimentResult, out: &Path) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(out).map_err(|e| format!("cannot create {}: {e}", out.display()))?;
    let mut written = files::write_all(result, out)?;
    written.extend(draw(result, out)?);
    Ok(written)
}

/// Rebuilds the figures and `report.html` in `dir` from the
/// `results.json` and CSV files a previous [`write()`] left there; returns
/// the files rewritten. The data files are read, never changed.
pub fn redraw(dir: &Path) -> Result<Vec<PathBuf>, String> {
    let result = files::read_all(dir)?;
    draw(&result, dir)
}
