//! The figures of "Timing measurements in JACK2" (Letz, Fober, Orlarey), drawn with `plotters`, each as PNG and SVG.
//!
//! | file | what |
//! |---|---|
//! | `driver_period` | measured driver period per cycle, nominal period as reference (as its fig. 1-2) |
//! | `driver_end` | driver end date per cycle, period as reference (fig. 3-4) |
//! | `clients_end` | every client's end date per cycle, period as reference (fig. 5) |
//! | `scheduling_latency` | awake - signal per client (fig. 6) |
//! | `duration` | finish - awake per client (fig. 7) |
//! | `cpu` | CPU time per cycle of every real-time thread |
//! | `reservations` | per reservation: budget set, predicted budget, CPU used |
//! | `cdf_period` | CDF of the measured period |
//! | `cdf_end` | CDF of the end dates (driver, every client) |
//!
//! Axes are in microseconds (x: cycle number), labelled; legends name the
//! clients. Text is rendered with the DejaVu Sans font embedded in the
//! program, so PNGs look the same on any machine.

use crate::{CycleRow, NodeRow, Profile};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::Once;

/// Pixel size of every figure.
pub const SIZE: (u32, u32) = (1200, 600);

/// Any error while drawing, as text.
pub type PlotError = String;

/// Registers the embedded DejaVu Sans as plotters' `sans-serif` (regular
/// and bold), once per process: figures look the same on every machine,
/// with no system fonts. Every figure of resound draws after calling it.
pub fn font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // DejaVu Sans is a valid TrueType font: registering it cannot fail.
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            dejavu::sans::regular(),
        );
        let _ = plotters::style::register_font("sans-serif", FontStyle::Bold, dejavu::sans::bold());
    });
}

/// A curve: legend name and (x, y) points.
pub struct Series {
    /// Legend.
    pub name: String,
    /// Points.
    pub points: Vec<(f64, f64)>,
}

/// What to draw in one chart.
pub struct Chart<'a> {
    /// Title above the chart.
    pub title: &'a str,
    /// X axis label.
    pub x_label: &'a str,
    /// Y axis label.
    pub y_label: &'a str,
    /// The curves.
    pub series: Vec<Series>,
    /// A dashed horizontal reference line (label, y).
    pub reference: Option<(&'a str, f64)>,
    /// x positions to mark with a thin red vertical line (xruns).
    pub marks: Vec<f64>,
}

/// The i-th curve colour: distinct, readable colours (Tableau 10), then
/// plotters' 99-colour palette. Shared by every figure of resound.
pub fn color(i: usize) -> RGBColor {
    const T10: [(u8, u8, u8); 10] = [
        (31, 119, 180),
        (255, 127, 14),
        (44, 160, 44),
        (214, 39, 40),
        (148, 103, 189),
        (140, 86, 75),
        (227, 119, 194),
        (127, 127, 127),
        (188, 189, 34),
        (23, 190, 207),
    ];
    if i < T10.len() {
        let (r, g, b) = T10[i];
        RGBColor(r, g, b)
    } else {
        let c = Palette99::pick(i).to_rgba();
        RGBColor(c.0, c.1, c.2)
    }
}

fn bounds(ch: &Chart<'_>) -> ((f64, f64), (f64, f64)) {
    let mut xs = (f64::INFINITY, f64::NEG_INFINITY);
    let mut ys = (0.0f64, f64::NEG_INFINITY);
    for s in &ch.series {
        for &(x, y) in &s.points {
            xs = (xs.0.min(x), xs.1.max(x));
            ys = (ys.0.min(y), ys.1.max(y));
        }
    }
    if let Some((_, r)) = ch.reference {
        ys.1 = ys.1.max(r);
    }
    let (xs, ys) = drawable_ranges(xs, ys);
    (xs, (ys.0, ys.1 * 1.08))
}

/// Axis ranges plotters can draw from the min/max a figure collected
/// (infinite when it had no points; equal when all points were): an empty
/// x range becomes 0..1, an empty y range ends at 1, a zero-width range is
/// widened by one. Shared by every figure of resound.
pub fn drawable_ranges(mut xs: (f64, f64), mut ys: (f64, f64)) -> ((f64, f64), (f64, f64)) {
    if !xs.0.is_finite() {
        xs = (0.0, 1.0);
    }
    if !ys.1.is_finite() {
        ys.1 = 1.0;
    }
    if xs.1 <= xs.0 {
        xs.1 = xs.0 + 1.0;
    }
    if ys.1 <= ys.0 {
        ys.1 = ys.0 + 1.0;
    }
    (xs, ys)
}

/// Draws one chart into an area.
pub fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    ch: &Chart<'_>,
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    font();
    let e = |x: DrawingAreaErrorKind<DB::ErrorType>| x.to_string();
    let ((x0, x1), (y0, y1)) = bounds(ch);
    let mut c = ChartBuilder::on(area)
        .caption(ch.title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1, y0..y1)
        .map_err(e)?;
    c.configure_mesh()
        .x_desc(ch.x_label)
        .y_desc(ch.y_label)
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .x_label_formatter(&|x| {
            if (x1 - x0) > 20.0 {
                format!("{:.0}", x)
            } else {
                format!("{:.1}", x)
            }
        })
        .draw()
        .map_err(e)?;
    for &m in &ch.marks {
        c.draw_series(LineSeries::new(
            [(m, y0), (m, y1)],
            RGBColor(230, 60, 60).mix(0.35).stroke_width(1),
        ))
        .map_err(e)?;
    }
    if !ch.marks.is_empty() {
        // One legend entry for the marks.
        c.draw_series(std::iter::once(PathElement::new(
            Vec::<(f64, f64)>::new(),
            RGBColor(230, 60, 60),
        )))
        .map_err(e)?
        .label(format!("xrun ({})", ch.marks.len()))
        .legend(|(x, y)| PathElement::new(vec![(x, y - 6), (x, y + 6)], RGBColor(230, 60, 60)));
    }
    for (i, s) in ch.series.iter().enumerate() {
        let col = color(i);
        c.draw_series(LineSeries::new(
            s.points.iter().copied(),
            col.stroke_width(1),
        ))
        .map_err(e)?
        .label(s.name.clone())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], col.stroke_width(2)));
    }
    if let Some((label, y)) = ch.reference {
        c.draw_series(DashedLineSeries::new(
            [(x0, y), (x1, y)],
            8,
            5,
            BLACK.stroke_width(2),
        ))
        .map_err(e)?
        .label(label.to_string())
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK.stroke_width(2)));
    }
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .label_font(("sans-serif", 14))
        .draw()
        .map_err(e)?;
    Ok(())
}

/// Fills `root` with `charts` stacked in one column and writes it out.
fn paint<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    charts: &[Chart<'_>],
    path: &Path,
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(|x| x.to_string())?;
    for (a, ch) in root
        .split_evenly((charts.len().max(1), 1))
        .iter()
        .zip(charts)
    {
        draw(a, ch)?;
    }
    root.present()
        .map_err(|x| format!("{}: {x}", path.display()))
}

/// Renders a figure made of charts (stacked in one column) as `base.png`
/// and `base.svg`; returns both paths.
pub fn render(base: &Path, charts: &[Chart<'_>]) -> Result<Vec<PathBuf>, PlotError> {
    // One chart: the standard size; several: a column of shorter charts.
    let size = if charts.len() > 1 {
        (SIZE.0, (SIZE.1 / 2 + 40) * charts.len() as u32)
    } else {
        SIZE
    };
    let png = base.with_extension("png");
    let svg = base.with_extension("svg");
    paint(
        BitMapBackend::new(&png, size).into_drawing_area(),
        charts,
        &png,
    )?;
    paint(
        SVGBackend::new(&svg, size).into_drawing_area(),
        charts,
        &svg,
    )?;
    Ok(vec![png, svg])
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1e3
}

/// Renders one chart as an SVG document in memory (for the live monitor).
pub fn chart_svg(ch: &Chart<'_>, size: (u32, u32)) -> Result<String, PlotError> {
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        root.fill(&WHITE).map_err(|x| x.to_string())?;
        draw(&root, ch)?;
        root.present().map_err(|x| x.to_string())?;
    }
    Ok(out)
}

/// The cycles with an xrun (or a late driver wake-up), as x positions.
pub fn xrun_marks(p: &Profile) -> Vec<f64> {
    p.cycles
        .iter()
        .filter(|c| c.xrun || c.driver_late)
        .map(|c| c.cycle as f64)
        .collect()
}

/// One curve per client of `f` (microseconds) over the cycle number.
pub fn per_client(p: &Profile, f: impl Fn(&NodeRow) -> Option<u64>) -> Vec<Series> {
    p.series(f)
        .into_iter()
        .filter(|(_, pts)| !pts.is_empty())
        .map(|(ci, pts)| Series {
            name: ci.name.clone(),
            points: pts.into_iter().map(|(c, v)| (c as f64, us(v))).collect(),
        })
        .collect()
}

/// The driver's curve of `f` (microseconds) over the cycle number.
pub fn driver(p: &Profile, f: impl Fn(&CycleRow) -> Option<u64>) -> Series {
    Series {
        name: "driver".into(),
        points: p
            .cycles
            .iter()
            .filter_map(|c| f(c).map(|v| (c.cycle as f64, us(v))))
            .collect(),
    }
}

/// Empirical CDF of values (microseconds on x, fraction on y).
pub fn cdf(name: &str, mut v: Vec<f64>) -> Series {
    v.sort_by(f64::total_cmp);
    let n = v.len().max(1) as f64;
    Series {
        name: name.into(),
        points: v
            .into_iter()
            .enumerate()
            .map(|(i, x)| (x, (i + 1) as f64 / n))
            .collect(),
    }
}

/// Every figure of the profile into `dir`; returns the files written.
pub fn render_all(p: &Profile, dir: &Path) -> Result<Vec<PathBuf>, PlotError> {
    let period = us(p.period_ns());
    let marks = xrun_marks(p);
    let title = |what: &str| {
        format!(
            "{what} — {} Hz, {} frames, {}",
            p.info.sample_rate, p.info.buffer_frames, p.info.mode
        )
    };
    let mut out = Vec::new();
    let t = title("Audio driver timing");
    out.extend(render(
        &dir.join("driver_period"),
        &[Chart {
            title: &t,
            x_label: "cycle",
            y_label: "period (us)",
            series: vec![driver(p, |c| c.measured_period_ns)],
            reference: Some(("nominal period", period)),
            marks: marks.clone(),
        }],
    )?);
    let t = title("Driver end date");
    out.extend(render(
        &dir.join("driver_end"),
        &[Chart {
            title: &t,
            x_label: "cycle",
            y_label: "end date after cycle start (us)",
            series: vec![driver(p, |c| Some(c.driver_end_ns))],
            reference: Some(("period", period)),
            marks: marks.clone(),
        }],
    )?);
    let t = title("Clients end date");
    let mut s = per_client(p, |n| n.finish_ns);
    s.insert(0, driver(p, |c| Some(c.driver_end_ns)));
    out.extend(render(
        &dir.join("clients_end"),
        &[Chart {
            title: &t,
            x_label: "cycle",
            y_label: "end date after cycle start (us)",
            series: s,
            reference: Some(("period", period)),
            marks: marks.clone(),
        }],
    )?);
    let t = title("Clients scheduling latency (awake - signal)");
    out.extend(render(
        &dir.join("scheduling_latency"),
        &[Chart {
            title: &t,
            x_label: "cycle",
            y_label: "scheduling latency (us)",
            series: per_client(p, |n| n.scheduling_ns()),
            reference: None,
            marks: marks.clone(),
        }],
    )?);
    let t = title("Clients duration (finish - awake)");
    out.extend(render(
        &dir.join("duration"),
        &[Chart {
            title: &t,
            x_label: "cycle",
            y_label: "duration (us)",
            series: per_client(p, |n| n.duration_ns()),
            reference: None,
            marks: marks.clone(),
        }],
    )?);
    let t = title("CPU time per cycle");
    let mut s = per_client(p, |n| n.cpu_ns);
    s.insert(0, driver(p, |c| Some(c.driver_cpu_ns)));
    out.extend(render(
        &dir.join("cpu"),
        &[Chart {
            title: &t,
            x_label: "cycle",
            y_label: "CPU time (us)",
            series: s,
            reference: None,
            marks: marks.clone(),
        }],
    )?);
    // Reservations: one chart per thread that had a budget.
    let mut titles = Vec::new();
    let mut data = Vec::new();
    if p.cycles.iter().any(|c| c.driver_budget_ns > 0) {
        titles.push("driver: SCHED_DEADLINE reservation".to_string());
        data.push(vec![
            driver(p, |c| Some(c.driver_budget_ns)).renamed("budget set"),
            driver(p, |c| Some(c.driver_predicted_ns)).renamed("predicted"),
            driver(p, |c| Some(c.driver_cpu_ns)).renamed("CPU used"),
        ]);
    }
    for ci in &p.clients {
        let rows = || {
            p.cycles.iter().filter_map(move |c| {
                c.nodes
                    .iter()
                    .find(|n| n.uuid == ci.uuid)
                    .map(|n| (c.cycle as f64, n))
            })
        };
        if !rows().any(|(_, n)| n.budget_ns > 0) {
            continue;
        }
        titles.push(format!("{}: SCHED_DEADLINE reservation", ci.name));
        data.push(vec![
            Series {
                name: "budget set".into(),
                points: rows().map(|(x, n)| (x, us(n.budget_ns))).collect(),
            },
            Series {
                name: "predicted".into(),
                points: rows().map(|(x, n)| (x, us(n.predicted_ns))).collect(),
            },
            Series {
                name: "CPU used".into(),
                points: rows()
                    .filter_map(|(x, n)| n.cpu_ns.map(|v| (x, us(v))))
                    .collect(),
            },
        ]);
    }
    if !data.is_empty() {
        let charts: Vec<Chart<'_>> = titles
            .iter()
            .zip(data)
            .map(|(t, series)| Chart {
                title: t,
                x_label: "cycle",
                y_label: "us per period",
                series,
                reference: None,
                marks: marks.clone(),
            })
            .collect();
        out.extend(render(&dir.join("reservations"), &charts)?);
    }
    // The graph as one group reservation (the thesis's Figure 4.13, "AQuoSA
    // budget trend"): budgets set, predictions and CPU used, summed over the
    // graph's threads per audio period.
    if p.cycles.iter().any(|c| c.graph.budget_ns > 0) {
        let t = title("Graph budget (sum over the graph's threads, per audio period)");
        let sum = |name: &str, f: fn(&CycleRow) -> u64| driver(p, |c| Some(f(c))).renamed(name);
        out.extend(render(
            &dir.join("graph_budget"),
            &[Chart {
                title: &t,
                x_label: "cycle",
                y_label: "us per audio period",
                series: vec![
                    sum("budget set", |c| c.graph.budget_ns),
                    sum("predicted", |c| c.graph.predicted_ns),
                    sum("CPU used", |c| c.graph.used_ns),
                ],
                reference: Some(("period", period)),
                marks: marks.clone(),
            }],
        )?);
    }
    let t = title("CDF of the driver period");
    out.extend(render(
        &dir.join("cdf_period"),
        &[Chart {
            title: &t,
            x_label: "period (us)",
            y_label: "fraction of cycles",
            series: vec![cdf(
                "driver period",
                p.cycles
                    .iter()
                    .filter_map(|c| c.measured_period_ns.map(us))
                    .collect(),
            )],
            reference: None,
            marks: vec![],
        }],
    )?);
    let t = title("CDF of the end dates");
    let mut s = vec![cdf(
        "driver",
        p.cycles.iter().map(|c| us(c.driver_end_ns)).collect(),
    )];
    for (ci, pts) in p.series(|n| n.finish_ns) {
        if !pts.is_empty() {
            s.push(cdf(&ci.name, pts.into_iter().map(|(_, v)| us(v)).collect()));
        }
    }
    out.extend(render(
        &dir.join("cdf_end"),
        &[Chart {
            title: &t,
            x_label: "end date after cycle start (us)",
            y_label: "fraction of cycles",
            series: s,
            reference: None,
            marks: vec![],
        }],
    )?);
    Ok(out)
}

impl Series {
    /// The same curve under another legend.
    pub fn renamed(mut self, n: &str) -> Series {
        self.name = n.into();
        self
    }
}
