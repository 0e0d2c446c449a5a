//! `report.html`: one self-contained page (the figures inlined as SVG, a
//! little CSS that also prints well) with the title and description, the
//! published setup beside the one used here, where they differ and why,
//! the reading picked where papers disagree, the failed runs, the tables
//! and the figures. Runs on the command's main thread.

use super::chart::Figure;
use super::files::server_name;
use super::tables::Table;
use crate::experiment::results::ExperimentResult;
use crate::experiment::scenario::Mode;
use std::fmt::Write as _;

const CSS: &str =
    "body{font-family:sans-serif;max-width:1200px;margin:1em auto;padding:0 1em;color:#222}
h1{font-size:1.5em}h2{font-size:1.2em;border-bottom:1px solid #ccc;margin-top:1.6em}
.setup{display:flex;gap:2em;flex-wrap:wrap}.setup>div{flex:1;min-width:320px}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}
th,td{border:1px solid #bbb;padding:.2em .5em}td{text-align:right}
td.label,th.label{text-align:left}caption{text-align:left;font-weight:bold;padding:.3em 0}
.source{color:#555;font-size:.85em}.failed{background:#fde8e8;border:1px solid #d33;padding:.5em}
pre{white-space:pre-wrap;font-size:.8em;background:#f6f6f6;padding:.4em}
figure{margin:1em 0;page-break-inside:avoid}figure svg{max-width:100%;height:auto}
@media print{body{max-width:none}h2{page-break-after:avoid}}
";

/// Escapes text for HTML.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            _ => out.push(ch),
        }
    }
    out
}

fn paragraph(out: &mut String, heading: &str, text: &str) {
    let _ = write!(out, "<h3>{}</h3>", esc(heading));
    for p in text.split("\n\n").filter(|p| !p.trim().is_empty()) {
        let _ = write!(out, "<p>{}</p>", esc(p.trim()));
    }
}

/// The "setup used here": machine, software, server settings, then every
/// run's scheduling and commands.
fn setup_used(result: &ExperimentResult) -> String {
    let m = &result.machine;
    let s = &result.scenario.server;
    let mut out = String::from("<ul>");
    let mut item = |k: &str, v: &str| {
        let _ = write!(out, "<li>{}: {}</li>", esc(k), esc(v));
    };
    item("CPU", &format!("{} ({} online)", m.cpu_model, m.cpus));
    item("kernel", &format!("{} {}", m.kernel, m.preemption));
    item("resound", &m.resound_version);
    if let Some(v) = &m.jackd_version {
        item("jackd", v);
    }
    if let Some(v) = &m.rtapp_version {
        item("rt-app", v);
    }
    let mode = match s.mode {
        Mode::Sync => "sync",
        Mode::Async => "async",
    };
    item(
        "server",
        &format!(
            "{} Hz, {} frames, {mode}, {} driver{}",
            s.rate,
            s.frames,
            s.driver,
            s.cpus
                .map(|c| format!(", CPUs 0-{}", c.saturating_sub(1)))
                .unwrap_or_default()
        ),
    );
    item(
        "run length",
        &format!(
            "{} s each{}, warm-up {} s left out of the statistics",
            result.duration_s,
            if result.quick { " (--quick)" } else { "" },
            result.scenario.warmup_s
        ),
    );
    out.push_str("</ul>");
    for r in &result.runs {
        let _ = write!(
            out,
            "<p><b>{}, {}</b>: {}</p><pre>{}</pre>",
            esc(&r.label),
            server_name(r.server),
            esc(&r.sched),
            esc(&r.setup.join("\n"))
        );
    }
    out
}

fn setup(out: &mut String, result: &ExperimentResult) {
    out.push_str("<h2>Setup</h2><div class=\"setup\"><div>");
    match &result.scenario.published {
        Some(p) => paragraph(out, "Published setup", &p.setup),
        None => {
            out.push_str("<h3>Published setup</h3><p>No published values for this scenario.</p>")
        }
    }
    out.push_str("</div><div><h3>Setup used here</h3>");
    out.push_str(&setup_used(result));
    out.push_str("</div></div>");
    if let Some(p) = &result.scenario.published {
        paragraph(out, "Where they differ, and why", &p.differences);
        if let Some(r) = &p.reading {
            paragraph(out, "Reading of the papers", r);
        }
    }
}

fn failures(out: &mut String, result: &ExperimentResult) {
    let failed: Vec<_> = result.runs.iter().filter(|r| r.error.is_some()).collect();
    if failed.is_empty() {
        return;
    }
    out.push_str("<h2>Failed runs</h2><div class=\"failed\"><ul>");
    for r in failed {
        let _ = write!(
            out,
            "<li><b>{}, {}</b>: {}</li>",
            esc(&r.label),
            server_name(r.server),
            esc(r.error.as_deref().unwrap_or(""))
        );
    }
    out.push_str(
        "</ul>The tables and figures show what these runs measured before they failed.</div>",
    );
}

/// One table as HTML; rows carry `data-row="KEY"`.
pub fn table(t: &Table) -> String {
    let mut out = String::from("<table>");
    let _ = write!(out, "<caption>{}", esc(&t.caption));
    if !t.source.is_empty() {
        let _ = write!(out, " <span class=\"source\">({})</span>", esc(&t.source));
    }
    out.push_str("</caption><thead>");
    let rowspan = if t.groups.is_empty() { 1 } else { 2 };
    let _ = write!(
        out,
        "<tr><th class=\"label\" rowspan=\"{rowspan}\">{}</th>",
        esc(&t.corner)
    );
    if t.groups.is_empty() {
        for c in &t.columns {
            let _ = write!(out, "<th>{}</th>", esc(c));
        }
    } else {
        for (g, span) in &t.groups {
            let _ = write!(out, "<th colspan=\"{span}\">{}</th>", esc(g));
        }
        out.push_str("</tr><tr>");
        for c in &t.columns {
            let _ = write!(out, "<th>{}</th>", esc(c));
        }
    }
    out.push_str("</tr></thead><tbody>");
    for r in &t.rows {
        let _ = write!(
            out,
            "<tr data-row=\"{}\"><td class=\"label\">{}</td>",
            esc(&r.key),
            esc(&r.label)
        );
        for c in &r.cells {
            let _ = write!(out, "<td>{}</td>", esc(c));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>\n");
    out
}

/// The whole page; `svgs` are the figures' SVG documents, in order.
pub fn page(result: &ExperimentResult, tables: &[Table], figures: &[(Figure, String)]) -> String {
    let s = &result.scenario;
    let mut out = String::from("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">");
    let _ = write!(
        out,
        "<title>{}</title><style>{CSS}</style></head><body><h1>{}</h1>",
        esc(&s.title),
        esc(&s.title)
    );
    let _ = write!(
        out,
        "<p class=\"source\">Scenario {} ({}), run {}.</p>",
        esc(&s.name),
        esc(&result.source),
        esc(&result.started)
    );
    if !s.description.is_empty() {
        paragraph(&mut out, "What it shows", &s.description);
    }
    setup(&mut out, result);
    failures(&mut out, result);
    out.push_str("<h2>Results</h2>\n");
    for t in tables {
        out.push_str(&table(t));
    }
    if !figures.is_empty() {
        out.push_str("<h2>Figures</h2>\n");
    }
    for (f, svg) in figures {
        let _ = write!(
            out,
            "<figure id=\"{}\"><h3>{}</h3>{}\n<figcaption>{} (<a href=\"{}.svg\">{}.svg</a>)</figcaption></figure>\n",
            esc(&f.stem),
            esc(&f.title),
            svg.trim_start_matches(|c| c != '<'),
            esc(&f.caption),
            esc(&f.stem),
            esc(&f.stem)
        );
    }
    out.push_str("</body></html>\n");
    out
}
