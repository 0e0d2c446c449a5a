//! Figures of `resound legacy detect --plot` (the spectrum with its peaks and
//! the chosen frequency) and `resound legacy analyze --plot` (the CBS
//! supply-bound function against the task's demand, and the minimum
//! bandwidth per server period, as Figures 1-2 of "The Wizard of OS: a
//! Heartbeat for Legacy Multimedia Applications"). PNG or SVG by the file's
//! extension, drawn with `plotters` and the embedded DejaVu Sans font (no
//! system fonts). Runs on the command's main thread.

use plotters::coord::Shift;
use plotters::prelude::*;
use resound_legacy::analyze::{min_budget, supply_bound, BudgetRow};
use resound_legacy::detect::Estimate;
use std::path::Path;

type Area<DB> = DrawingArea<DB, Shift>;

/// What to draw.
pub enum Figure<'a> {
    /// A sampled spectrum `(Hz, amplitude)` and the estimate made from it.
    Spectrum {
        /// The spectrum.
        points: &'a [(f64, f64)],
        /// Its peaks, threshold and chosen frequency.
        estimate: &'a Estimate,
    },
    /// A (C, P) task (ms) and the budget table over server periods.
    Supply {
        /// Worst-case execution time, ms.
        wcet: f64,
        /// Period, ms.
        period: f64,
        /// Minimum budget per server period.
        rows: &'a [BudgetRow],
    },
}

fn font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // DejaVu Sans is a valid TrueType font: registering it cannot fail.
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            dejavu::sans::regular(),
        );
    });
}

/// Write `fig` to `path`: `.png` or `.svg`.
pub fn save(path: &Path, fig: &Figure<'_>) -> Result<(), String> {
    font();
    let size = match fig {
        Figure::Spectrum { .. } => (1100, 550),
        Figure::Supply { .. } => (1100, 900),
    };
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let r = match ext.to_ascii_lowercase().as_str() {
        "png" => paint(BitMapBackend::new(path, size).into_drawing_area(), fig),
        "svg" => paint(SVGBackend::new(path, size).into_drawing_area(), fig),
        _ => {
            return Err(format!(
                "{}: the plot file must end in .png or .svg",
                path.display()
            ))
        }
    };
    r.map_err(|e| format!("{}: {e}", path.display()))
}

fn paint<DB: DrawingBackend>(root: Area<DB>, fig: &Figure<'_>) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(|e| e.to_string())?;
    match fig {
        Figure::Spectrum { points, estimate } => spectrum(&root, points, estimate),
        Figure::Supply { wcet, period, rows } => {
            let (top, bottom) = root.split_vertically(450);
            supply(&top, *wcet, *period).map_err(|e| e.to_string())?;
            bandwidth(&bottom, *wcet, *period, rows)
        }
    }
    .map_err(|e| e.to_string())?;
    root.present().map_err(|e| e.to_string())
}

type Res<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

fn spectrum<DB: DrawingBackend>(area: &Area<DB>, pts: &[(f64, f64)], est: &Estimate) -> Res<DB> {
    let x0 = pts.first().map_or(0.0, |p| p.0);
    let x1 = pts.last().map_or(1.0, |p| p.0).max(x0 + 1.0);
    let y1 = pts
        .iter()
        .map(|p| p.1)
        .fold(est.threshold, f64::max)
        .max(1.0)
        * 1.1;
    let title = match est.freq_hz {
        Some(f) => format!("Spectrum of the activations: {f:.3} Hz ({:.3} ms)", 1e3 / f),
        None => "Spectrum of the activations: not periodic".to_string(),
    };
    let mut c = ChartBuilder::on(area)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..x1, 0.0..y1)?;
    c.configure_mesh()
        .x_desc("frequency (Hz)")
        .y_desc("|Σ exp(-j2πf t_i)|")
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .draw()?;
    let blue = RGBColor(31, 119, 180);
    c.draw_series(LineSeries::new(pts.iter().copied(), blue.stroke_width(1)))?
        .label("spectrum")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], blue.stroke_width(2)));
    let thr = est.threshold;
    c.draw_series(DashedLineSeries::new(
        [(x0, thr), (x1, thr)],
        8,
        5,
        BLACK.stroke_width(1),
    ))?
    .label("K × mean")
    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK));
    let orange = RGBColor(255, 127, 14);
    c.draw_series(
        est.peaks
            .iter()
            .map(|p| Circle::new((p.freq_hz, p.amplitude), 5, orange.filled())),
    )?
    .label("peaks")
    .legend(move |(x, y)| Circle::new((x + 9, y), 5, orange.filled()));
    if let Some(f) = est.freq_hz {
        let red = RGBColor(214, 39, 40);
        c.draw_series(LineSeries::new([(f, 0.0), (f, y1)], red.stroke_width(2)))?
            .label(format!("chosen: {f:.3} Hz"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], red.stroke_width(2)));
    }
    legend(&mut c)
}

fn legend<'a, DB: DrawingBackend + 'a, X: Ranged, Y: Ranged>(
    c: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
) -> Res<DB> {
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .label_font(("sans-serif", 14))
        .draw()
}

/// Figure 1: Z_{Q,T}(t) for T = P, P/2 and 3P/2 (each with its minimum
/// budget) against the demand C⌊t/P⌋, over three periods.
fn supply<DB: DrawingBackend>(area: &Area<DB>, c_ms: f64, p: f64) -> Res<DB> {
    let t_end = 3.0 * p;
    let mut c = ChartBuilder::on(area)
        .caption(
            format!("Supply bound Z(t) vs demand (C = {c_ms} ms, P = {p} ms)"),
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..t_end, 0.0..(3.0 * c_ms * 1.3))?;
    c.configure_mesh()
        .x_desc("window length t (ms)")
        .y_desc("CPU time (ms)")
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .draw()?;
    let steps = 600;
    let ts = (0..=steps).map(move |i| t_end * i as f64 / steps as f64);
    c.draw_series(LineSeries::new(
        ts.clone().map(|t| (t, c_ms * (t / p).floor())),
        BLACK.stroke_width(2),
    ))?
    .label("demand C⌊t/P⌋")
    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK.stroke_width(2)));
    let colours = [
        RGBColor(31, 119, 180),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
    ];
    for (ts_srv, col) in [p, p / 2.0, 1.5 * p].into_iter().zip(colours) {
        let Some(q) = min_budget(c_ms, p, ts_srv) else {
            continue;
        };
        c.draw_series(LineSeries::new(
            ts.clone().map(|t| (t, supply_bound(q, ts_srv, t))),
            col.stroke_width(2),
        ))?
        .label(format!(
            "Z(t), T = {ts_srv:.1} ms, Q = {q:.2} ms (Q/T = {:.3})",
            q / ts_srv
        ))
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], col.stroke_width(2)));
    }
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .label_font(("sans-serif", 14))
        .draw()
}

/// Figure 2: the minimum bandwidth Q/T for each server period T, with U = C/P.
fn bandwidth<DB: DrawingBackend>(
    area: &Area<DB>,
    c_ms: f64,
    p: f64,
    rows: &[BudgetRow],
) -> Res<DB> {
    let x0 = rows.first().map_or(0.0, |r| r.period);
    let x1 = rows.last().map_or(1.0, |r| r.period).max(x0 + 1e-3);
    let y1 = rows
        .iter()
        .map(|r| r.bandwidth)
        .fold(c_ms / p, f64::max)
        .min(1.0)
        * 1.1;
    let mut c = ChartBuilder::on(area)
        .caption(
            "Minimum bandwidth Q/T per server period T",
            ("sans-serif", 20),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x0..x1, 0.0..y1)?;
    c.configure_mesh()
        .x_desc("server period T (ms)")
        .y_desc("Q/T")
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .draw()?;
    let blue = RGBColor(31, 119, 180);
    c.draw_series(LineSeries::new(
        rows.iter().map(|r| (r.period, r.bandwidth)),
        blue.stroke_width(2),
    ))?
    .label("minimum Q/T")
    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], blue.stroke_width(2)));
    let u = c_ms / p;
    c.draw_series(DashedLineSeries::new(
        [(x0, u), (x1, u)],
        8,
        5,
        BLACK.stroke_width(1),
    ))?
    .label(format!("U = C/P = {u:.3}"))
    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK));
    legend(&mut c)
}
