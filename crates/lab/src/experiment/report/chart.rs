//! Drawing a figure: a grid of insets (one per configuration, one row per
//! server where a figure needs it), each with its curves, dashed horizontal
//! reference lines (the period, a deadline) and thin vertical timeline
//! marks, as one SVG document drawn with `plotters`. The style is the
//! profiler's (Tableau colours, DejaVu Sans embedded, legend in a box at the
//! upper right). Long series are decimated before they get here
//! ([`decimate`]), so a 100k-cycle run stays a small, readable file.
//! Runs on the command's main thread.

use plotters::coord::Shift;
use plotters::prelude::*;
use resound_profiler::plots::{color, drawable_ranges, font};

/// Size of one inset (pixels).
pub const INSET: (u32, u32) = (560, 330);

/// Buckets per curve: at most two points (the bucket's min and max) each.
pub const BUCKETS: usize = 700;

/// A curve: legend name and points.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    /// Legend.
    pub name: String,
    /// (x, y) points, x increasing.
    pub points: Vec<(f64, f64)>,
}

/// One chart of a figure.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Inset {
    /// Title above it (the configuration, and the server where rows are servers).
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// The curves.
    pub curves: Vec<Curve>,
    /// Dashed horizontal reference lines: (legend, y).
    pub hlines: Vec<(String, f64)>,
    /// Thin vertical lines: (x, what happened).
    pub marks: Vec<(f64, String)>,
}

/// A figure: insets laid out `columns` wide, row by row.
#[derive(Debug, Clone, PartialEq)]
pub struct Figure {
    /// File stem (`driver-end` -> `driver-end.svg`).
    pub stem: String,
    /// Heading in the report.
    pub title: String,
    /// What it shows, a sentence under it.
    pub caption: String,
    /// Insets per row.
    pub columns: usize,
    /// The insets.
    pub insets: Vec<Inset>,
}

/// Keeps, for each of `buckets` equal x intervals, the point with the
/// smallest and the one with the largest y (in x order), so that spikes
/// survive while the curve shrinks to at most `2 * buckets` points.
pub fn decimate(points: &[(f64, f64)], buckets: usize) -> Vec<(f64, f64)> {
    if points.len() <= 2 * buckets || buckets == 0 {
        return points.to_vec();
    }
    let (x0, x1) = (points[0].0, points[points.len() - 1].0);
    let width = (x1 - x0).max(f64::MIN_POSITIVE);
    let bucket = |x: f64| (((x - x0) / width * buckets as f64) as usize).min(buckets - 1);
    let mut out = Vec::with_capacity(2 * buckets);
    let mut start = 0;
    while start < points.len() {
        let b = bucket(points[start].0);
        let mut end = start;
        let (mut lo, mut hi) = (start, start);
        while end < points.len() && bucket(points[end].0) == b {
            if points[end].1 < points[lo].1 {
                lo = end;
            }
            if points[end].1 > points[hi].1 {
                hi = end;
            }
            end += 1;
        }
        out.push(points[lo.min(hi)]);
        if lo != hi {
            out.push(points[lo.max(hi)]);
        }
        start = end;
    }
    out
}

/// Axis ranges covering every curve, reference line and mark (y from 0
/// unless a value is negative), with a little headroom.
fn bounds(inset: &Inset) -> ((f64, f64), (f64, f64)) {
    let mut xs = (f64::INFINITY, f64::NEG_INFINITY);
    let mut ys = (0.0f64, f64::NEG_INFINITY);
    for &(x, y) in inset.curves.iter().flat_map(|c| &c.points) {
        xs = (xs.0.min(x), xs.1.max(x));
        ys = (ys.0.min(y), ys.1.max(y));
    }
    for (_, y) in &inset.hlines {
        ys = (ys.0.min(*y), ys.1.max(*y));
    }
    let (xs, ys) = drawable_ranges(xs, ys);
    let pad = (ys.1 - ys.0) * 0.1;
    let y0 = if ys.0 < 0.0 { ys.0 - pad } else { ys.0 };
    (xs, (y0, ys.1 + pad))
}

type Plot<'a, DB> = ChartContext<
    'a,
    DB,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

fn err<E: std::error::Error + Send + Sync>(e: DrawingAreaErrorKind<E>) -> String {
    e.to_string()
}

/// The timeline marks: a thin grey line each, its text at the top.
fn draw_marks<DB: DrawingBackend>(
    c: &mut Plot<'_, DB>,
    inset: &Inset,
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
) -> Result<(), String> {
    let grey = RGBColor(110, 110, 110);
    for (x, what) in inset.marks.iter().filter(|(x, _)| *x >= x0 && *x <= x1) {
        c.draw_series(LineSeries::new(
            [(*x, y0), (*x, y1)],
            grey.mix(0.6).stroke_width(1),
        ))
        .map_err(err)?;
        c.draw_series(std::iter::once(Text::new(
            what.clone(),
            (*x, y1),
            ("sans-serif", 10).into_font().color(&grey),
        )))
        .map_err(err)?;
    }
    Ok(())
}

/// The curves and reference lines, each with its legend entry.
fn draw_curves<DB: DrawingBackend>(
    c: &mut Plot<'_, DB>,
    inset: &Inset,
    (x0, x1): (f64, f64),
) -> Result<(), String> {
    for (i, curve) in inset.curves.iter().enumerate() {
        let col = color(i);
        c.draw_series(LineSeries::new(
            curve.points.iter().copied(),
            col.stroke_width(1),
        ))
        .map_err(err)?
        .label(curve.name.clone())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], col.stroke_width(2)));
    }
    for (name, y) in &inset.hlines {
        c.draw_series(DashedLineSeries::new(
            [(x0, *y), (x1, *y)],
            8,
            5,
            BLACK.stroke_width(2),
        ))
        .map_err(err)?
        .label(name.clone())
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], BLACK.stroke_width(2)));
    }
    Ok(())
}

/// An axis tick label: whole numbers on a wide axis, else as many
/// decimals as its span needs.
fn tick(v: f64, span: f64) -> String {
    if span >= 20.0 {
        format!("{v:.0}")
    } else if span >= 2.0 {
        format!("{v:.1}")
    } else if span >= 0.2 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// Draws one inset into an area.
fn draw_inset<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    inset: &Inset,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let (xs, ys) = bounds(inset);
    let mut c = ChartBuilder::on(area)
        .caption(&inset.title, ("sans-serif", 16))
        .margin(10)
        .x_label_area_size(38)
        .y_label_area_size(62)
        .build_cartesian_2d(xs.0..xs.1, ys.0..ys.1)
        .map_err(err)?;
    c.configure_mesh()
        .x_desc(&inset.x_label)
        .y_desc(&inset.y_label)
        .label_style(("sans-serif", 12))
        .axis_desc_style(("sans-serif", 13))
        .light_line_style(WHITE.mix(0.0))
        .x_label_formatter(&|x| tick(*x, xs.1 - xs.0))
        .y_label_formatter(&|y| tick(*y, ys.1 - ys.0))
        .draw()
        .map_err(err)?;
    draw_marks(&mut c, inset, xs, ys)?;
    draw_curves(&mut c, inset, xs)?;
    if !inset.curves.is_empty() || !inset.hlines.is_empty() {
        c.configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .background_style(WHITE.mix(0.85))
            .border_style(BLACK.mix(0.4))
            .label_font(("sans-serif", 12))
            .draw()
            .map_err(err)?;
    }
    Ok(())
}

/// The figure as an SVG document.
pub fn svg(fig: &Figure) -> Result<String, String> {
    font();
    let cols = fig.columns.clamp(1, fig.insets.len().max(1));
    let rows = fig.insets.len().div_ceil(cols).max(1);
    let size = (INSET.0 * cols as u32, INSET.1 * rows as u32);
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, size).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        for (area, inset) in root.split_evenly((rows, cols)).iter().zip(&fig.insets) {
            draw_inset(area, inset).map_err(|e| format!("figure {}: {e}", fig.stem))?;
        }
        root.present().map_err(err)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimation_keeps_spikes_and_bounds_the_size() {
        let mut pts: Vec<(f64, f64)> = (0..100_000).map(|i| (i as f64, 10.0)).collect();
        pts[54_321].1 = 900.0;
        pts[7].1 = -3.0;
        let d = decimate(&pts, 500);
        assert!(d.len() <= 1000, "{} points", d.len());
        assert!(d.contains(&(54_321.0, 900.0)));
        assert!(d.contains(&(7.0, -3.0)));
        assert!(d.windows(2).all(|w| w[0].0 < w[1].0), "x stays in order");
        let short: Vec<(f64, f64)> = (0..10).map(|i| (i as f64, 1.0)).collect();
        assert_eq!(decimate(&short, 500), short);
    }
}
