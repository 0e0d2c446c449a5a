//! The report's tables, as cells ready to print in HTML or text: one table
//! per published table (rows = configurations; for each metric the
//! published value, resound's, jackd2's where it ran, and resound /
//! published) and one table of every measured metric (rows = metrics,
//! columns = configuration x server). Also [`summary_text`], the same
//! tables for the terminal. Runs on the command's main thread.

use super::figures::{configurations, servers};
use super::files::server_name;
use crate::experiment::results::{ExperimentResult, RunResult};
use crate::experiment::scenario::{Metric, PublishedTable, ServerKind};

/// A table: grouped column headings, sub-headings, rows.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// Caption (the published caption, or what the table holds).
    pub caption: String,
    /// Where the published values come from (empty for measured tables).
    pub source: String,
    /// Heading of the first column.
    pub corner: String,
    /// Column groups over the value columns: (heading, columns spanned).
    pub groups: Vec<(String, usize)>,
    /// One heading per value column.
    pub columns: Vec<String>,
    /// The rows.
    pub rows: Vec<Row>,
}

/// One row of a table.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Identifier (a configuration's name or a metric's key), for the HTML.
    pub key: String,
    /// First cell.
    pub label: String,
    /// One cell per value column.
    pub cells: Vec<String>,
}

/// A measured number for a table: whole numbers without decimals, others
/// with one decimal from 100 up, two from 1, three below; "—" when not a
/// number.
pub fn number(v: f64) -> String {
    if !v.is_finite() {
        "—".into()
    } else if v == v.trunc() && v.abs() < 1e12 {
        format!("{v:.0}")
    } else if v.abs() >= 100.0 {
        format!("{v:.1}")
    } else if v.abs() >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// A published number as published (Rust's shortest exact form).
fn as_published(v: f64) -> String {
    if v.is_finite() {
        format!("{v}")
    } else {
        "—".into()
    }
}

fn find<'a>(result: &'a ExperimentResult, run: &str, server: ServerKind) -> Option<&'a RunResult> {
    result
        .runs
        .iter()
        .find(|r| r.run == run && r.server == server)
}

/// A run's value of `m` as a cell: the number, "failed" when the run failed
/// before measuring it, "not run", or "—".
fn measured(run: Option<&RunResult>, m: Metric) -> String {
    match run {
        None => "not run".into(),
        Some(r) => match (r.metrics.get(&m), &r.error) {
            (Some(v), _) => number(*v),
            (None, Some(_)) => "failed".into(),
            (None, None) => "—".into(),
        },
    }
}

/// The configurations a published table has values for, in scenario order.
fn table_runs(result: &ExperimentResult, t: &PublishedTable) -> Vec<(String, String)> {
    let mut known = configurations(result);
    for s in &result.scenario.runs {
        if !known.iter().any(|(n, _)| *n == s.name) {
            known.push((s.name.clone(), s.label.clone().unwrap_or(s.name.clone())));
        }
    }
    for v in &t.values {
        if !known.iter().any(|(n, _)| *n == v.run) {
            known.push((v.run.clone(), v.run.clone()));
        }
    }
    known.retain(|(n, _)| t.values.iter().any(|v| v.run == *n));
    known
}

/// The metrics of a published table, in the order they first appear.
fn table_metrics(t: &PublishedTable) -> Vec<Metric> {
    let mut out: Vec<Metric> = Vec::new();
    for v in &t.values {
        if !out.contains(&v.metric) {
            out.push(v.metric);
        }
    }
    out
}

/// One published table beside the measured values.
pub fn published(result: &ExperimentResult, t: &PublishedTable) -> Table {
    let runs = table_runs(result, t);
    let metrics = table_metrics(t);
    let with_jackd = runs
        .iter()
        .any(|(n, _)| find(result, n, ServerKind::Jackd).is_some());
    let mut sub = vec!["published".to_string(), "resound".into()];
    if with_jackd {
        sub.push("jackd2".into());
    }
    sub.push("resound / published".into());
    let rows = runs
        .iter()
        .map(|(name, label)| {
            let pub_label = t
                .values
                .iter()
                .find(|v| v.run == *name && v.label.is_some())
                .and_then(|v| v.label.clone());
            let mut cells = Vec::new();
            for &m in &metrics {
                let p = t.values.iter().find(|v| v.run == *name && v.metric == m);
                let ours = find(result, name, ServerKind::Resound);
                cells.push(p.map_or("—".into(), |p| as_published(p.value)));
                cells.push(measured(ours, m));
                if with_jackd {
                    cells.push(measured(find(result, name, ServerKind::Jackd), m));
                }
                let ratio = match (p, ours.and_then(|r| r.metrics.get(&m))) {
                    (Some(p), Some(v)) if p.value != 0.0 => format!("{:.2}", v / p.value),
                    _ => "—".into(),
                };
                cells.push(ratio);
            }
            Row {
                key: name.clone(),
                label: match pub_label {
                    Some(p) if p != *label => format!("{p} ({label})"),
                    _ => label.clone(),
                },
                cells,
            }
        })
        .collect();
    Table {
        caption: t.caption.clone(),
        source: t.source.clone(),
        corner: "configuration".into(),
        groups: metrics
            .iter()
            .map(|m| (m.heading().to_string(), sub.len()))
            .collect(),
        columns: metrics.iter().flat_map(|_| sub.iter().cloned()).collect(),
        rows,
    }
}

/// Every metric any run measured: rows = metrics, columns = runs.
pub fn measured_table(result: &ExperimentResult) -> Table {
    let mut runs: Vec<&RunResult> = Vec::new();
    for (name, _) in configurations(result) {
        for s in servers(result) {
            runs.extend(find(result, &name, s));
        }
    }
    let rows = Metric::ALL
        .into_iter()
        .filter(|m| runs.iter().any(|r| r.metrics.contains_key(m)))
        .map(|m| Row {
            key: m.key().into(),
            label: m.heading().into(),
            cells: runs.iter().map(|r| measured(Some(r), m)).collect(),
        })
        .collect();
    Table {
        caption: "Every metric measured, over the measured window (after the warm-up)".into(),
        source: String::new(),
        corner: "metric".into(),
        groups: Vec::new(),
        columns: runs
            .iter()
            .map(|r| format!("{}, {}", r.label, server_name(r.server)))
            .collect(),
        rows,
    }
}

/// Every table of the report: the published ones, then the measured one.
pub fn all(result: &ExperimentResult) -> Vec<Table> {
    let mut out: Vec<Table> = result
        .scenario
        .published
        .iter()
        .flat_map(|p| &p.tables)
        .map(|t| published(result, t))
        .collect();
    out.push(measured_table(result));
    out
}

/// Lays out rows of cells in aligned columns.
fn aligned(lines: &[Vec<String>]) -> String {
    let cols = lines.iter().map(Vec::len).max().unwrap_or(0);
    let width: Vec<usize> = (0..cols)
        .map(|i| {
            lines
                .iter()
                .filter_map(|l| l.get(i))
                .map(|c| c.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for l in lines {
        let cells: Vec<String> = l
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let pad = width[i] - c.chars().count();
                if i == 0 {
                    format!("{c}{}", " ".repeat(pad))
                } else {
                    format!("{}{c}", " ".repeat(pad))
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// A table as text: the column groups become one block each (a published
/// table with three metrics prints three narrow blocks).
pub fn text(t: &Table) -> String {
    let mut out = format!("{}\n", t.caption);
    if !t.source.is_empty() {
        out.push_str(&format!("({})\n", t.source));
    }
    let groups = if t.groups.is_empty() {
        vec![(String::new(), t.columns.len())]
    } else {
        t.groups.clone()
    };
    let mut first = 0;
    for (heading, span) in groups {
        let mut head = vec![t.corner.clone()];
        head.extend(t.columns[first..first + span].iter().cloned());
        let mut lines = vec![head];
        for r in &t.rows {
            let mut l = vec![r.label.clone()];
            l.extend(r.cells[first..first + span].iter().cloned());
            lines.push(l);
        }
        if !heading.is_empty() {
            out.push_str(&format!("  {heading}\n"));
        }
        for line in aligned(&lines).lines() {
            out.push_str(&format!("  {line}\n"));
        }
        first += span;
    }
    out
}

/// The report's tables and failed runs as text, for the terminal.
pub fn summary_text(result: &ExperimentResult) -> String {
    let s = &result.scenario;
    let mut out = format!("{} ({})\n\n", s.title, s.name);
    for t in all(result) {
        out.push_str(&text(&t));
        out.push('\n');
    }
    for r in result.runs.iter().filter(|r| r.error.is_some()) {
        out.push_str(&format!(
            "FAILED {}, {}: {}\n",
            r.label,
            server_name(r.server),
            r.error.as_deref().unwrap_or("")
        ));
    }
    out
}
