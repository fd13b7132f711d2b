//! Charts as standalone SVG strings, drawn with plotters' SVG backend, for the HTML report.
//! Three shapes cover every series kind of the schema: curves ([`xy_chart`], log x axis for
//! sizes), horizontal grouped bars ([`bar_chart`], log axis when values span decades) and
//! heatmaps ([`heatmap`], null cells grey). Several runs overlay as one line or one bar per
//! run, in the same colours in every chart. Axis titles carry units.

use crate::format::human_bytes;
use plotters::coord::Shift;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::ops::Range;

/// Chart width in pixels (the page scales it down on narrow screens).
pub const WIDTH: u32 = 860;

/// Colours for runs, in order (Okabe and Ito's palette, readable with colour-blindness).
pub const RUN_COLORS: [RGBColor; 7] = [
    RGBColor(0, 114, 178),
    RGBColor(230, 159, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(213, 94, 0),
    RGBColor(120, 120, 120),
];

/// The colour of run `i`.
pub fn run_color(i: usize) -> RGBColor {
    RUN_COLORS[i % RUN_COLORS.len()]
}

/// A chart that could not be drawn (bad ranges, backend failure).
#[derive(Debug, thiserror::Error)]
#[error("cannot draw chart: {0}")]
pub struct ChartError(String);

impl<E: std::error::Error + Send + Sync> From<DrawingAreaErrorKind<E>> for ChartError {
    fn from(e: DrawingAreaErrorKind<E>) -> ChartError {
        ChartError(e.to_string())
    }
}

/// Characters of a chart title that fit the chart's width (22 px type at [`WIDTH`]).
pub const TITLE_CHARS: usize = 72;

/// A schema label split into its name, unit and note: `latency_ns` is (`latency`, `ns`),
/// `size_bytes spanned (one line per page)` is (`size`, `bytes`, `spanned (one line per
/// page)`). The identifier is the label up to its first space; its unit the part after its
/// last `_`.
fn label_parts(label: &str) -> (String, Option<&str>, Option<&str>) {
    let (ident, note) = match label.split_once(' ') {
        Some((ident, note)) => (ident, Some(note.trim()).filter(|n| !n.is_empty())),
        None => (label, None),
    };
    // A note wholly in parentheses reads as a clause once they are dropped.
    let note = note.map(|n| {
        n.strip_prefix('(')
            .and_then(|n| n.strip_suffix(')'))
            .filter(|inner| !inner.contains(['(', ')']))
            .unwrap_or(n)
    });
    match ident.rsplit_once('_') {
        Some((head, unit)) if !head.is_empty() && !unit.is_empty() => {
            (head.replace('_', " "), Some(unit), note)
        }
        _ => (ident.replace('_', " "), None, note),
    }
}

/// A schema label as an axis title, with its unit: `latency_ns` -> `latency (ns)`,
/// `extra_latency_cycles (4 KiB over huge pages)` -> `extra latency (cycles), 4 KiB over huge
/// pages`. A label without a unit suffix is shown as it is.
pub fn axis_title(label: &str) -> String {
    let (name, unit, note) = label_parts(label);
    let mut t = match unit {
        Some(u) => format!("{name} ({u})"),
        None => name,
    };
    if let Some(n) = note {
        t.push_str(", ");
        t.push_str(n);
    }
    t
}

/// A schema label without its unit, with or without its note: `size_bytes spanned (one line
/// per page)` -> `size, spanned (one line per page)` or `size`.
pub fn axis_name(label: &str, with_note: bool) -> String {
    match label_parts(label) {
        (name, _, Some(note)) if with_note => format!("{name}, {note}"),
        (name, ..) => name,
    }
}

/// Whether an x label means a size axis, drawn on a log scale (schema rule).
pub fn is_size_axis(x_label: &str) -> bool {
    x_label.starts_with("size")
}

/// A tick label: three significant digits at most, no trailing zeros, k/M/G beyond 10^4.
pub fn short_number(v: f64) -> String {
    fn trim(s: String) -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    }
    let a = v.abs();
    let (scaled, suffix) = if a >= 1e9 {
        (v / 1e9, "G")
    } else if a >= 1e6 {
        (v / 1e6, "M")
    } else if a >= 1e4 {
        (v / 1e3, "k")
    } else {
        (v, "")
    };
    let digits = match scaled.abs() {
        x if x >= 100.0 || x == 0.0 => 0,
        x if x >= 10.0 => 1,
        x if x >= 1.0 => 2,
        _ => 3,
    };
    format!("{}{suffix}", trim(format!("{scaled:.digits$}")))
}

/// A tick label for a time in ns, in the unit that suits it (`2.4 us`, `13 ms`).
pub fn time_tick(ns: f64) -> String {
    let (v, unit) = match ns.abs() {
        a if a >= 1e9 => (ns / 1e9, "s"),
        a if a >= 1e6 => (ns / 1e6, "ms"),
        a if a >= 1e3 => (ns / 1e3, "us"),
        _ => (ns, "ns"),
    };
    format!("{} {unit}", short_number(v))
}

fn size_tick(v: f64) -> String {
    if v >= 1.0 {
        human_bytes(v.round() as u64)
    } else {
        short_number(v)
    }
}

/// Whether a point can be drawn: finite, and with x > 0 on a logarithmic axis.
pub fn placeable(log_x: bool, (x, y): (f64, f64)) -> bool {
    x.is_finite() && y.is_finite() && (!log_x || x > 0.0)
}

/// The points of a series that an axis can place, in order.
pub fn placeable_points(log_x: bool, points: &[[f64; 2]]) -> Vec<(f64, f64)> {
    points
        .iter()
        .map(|p| (p[0], p[1]))
        .filter(|&p| placeable(log_x, p))
        .collect()
}

/// One curve of an xy chart.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    /// Legend text (run, and series when several share the chart).
    pub label: String,
    /// Colour index (the run's).
    pub color: usize,
    /// Dashed for the second and later series of one run.
    pub dashed: bool,
    /// Points in x order.
    pub points: Vec<(f64, f64)>,
}

fn finite_range(values: impl Iterator<Item = f64>) -> Option<(f64, f64)> {
    values
        .filter(|v| v.is_finite())
        .fold(None, |acc, v| match acc {
            None => Some((v, v)),
            Some((lo, hi)) => Some((lo.min(v), hi.max(v))),
        })
}

fn svg_root(buf: &mut String, width: u32, height: u32) -> DrawingArea<SVGBackend<'_>, Shift> {
    SVGBackend::with_string(buf, (width, height)).into_drawing_area()
}

/// Tick labels and axis titles large enough to read when the page scales the chart down.
const LABEL_FONT: (&str, u32) = ("sans-serif", 16);
const DESC_FONT: (&str, u32) = ("sans-serif", 18);

fn draw_lines<X>(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    title: &str,
    x: X,
    y: Range<f64>,
    descs: (&str, &str),
    x_fmt: &dyn Fn(&f64) -> String,
    lines: &[Line],
) -> Result<(), ChartError>
where
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(46)
        .y_label_area_size(70)
        .build_cartesian_2d(x, y)?;
    chart
        .configure_mesh()
        .label_style(LABEL_FONT)
        .axis_desc_style(DESC_FONT)
        .x_desc(descs.0)
        .y_desc(descs.1)
        .x_label_formatter(x_fmt)
        .y_label_formatter(&|v| short_number(*v))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    for line in lines {
        let color = run_color(line.color);
        let style = color.stroke_width(2);
        let points = line.points.clone();
        let anno = if line.dashed {
            chart.draw_series(DashedLineSeries::new(points, 6, 4, style))?
        } else {
            chart.draw_series(LineSeries::new(points, style))?
        };
        anno.label(line.label.clone()).legend(move |(x, y)| {
            PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
        });
        chart.draw_series(
            line.points
                .iter()
                .map(|&(x, y)| Circle::new((x, y), 3, color.filled())),
        )?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(LABEL_FONT)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(180, 180, 180))
        .draw()?;
    Ok(())
}

/// A strip plot: one row of dots per band (bands from the bottom up), each dot one host's
/// figure, the band's range shaded, so a fleet's bands read at a glance. `bands` holds each
/// band's values; `x_label` names the figure with its unit.
pub fn strip_chart(title: &str, x_label: &str, bands: &[Vec<f64>]) -> Result<String, ChartError> {
    let (lo, hi) = finite_range(bands.iter().flatten().copied())
        .ok_or_else(|| ChartError("no finite value to place".into()))?;
    let pad = ((hi - lo) * 0.05)
        .max(hi.abs() * 0.01)
        .max(f64::MIN_POSITIVE);
    let rows = bands.len().max(1) as f64;
    let mut buf = String::new();
    {
        let root = svg_root(&mut buf, 900, 120 + 60 * bands.len() as u32);
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(46)
            .y_label_area_size(70)
            .build_cartesian_2d((lo - pad)..(hi + pad), 0.0..rows)?;
        chart
            .configure_mesh()
            .label_style(LABEL_FONT)
            .axis_desc_style(DESC_FONT)
            .x_desc(x_label)
            .y_desc("band")
            .y_labels(bands.len() + 1)
            .y_label_formatter(&|v| {
                let k = v.floor() as usize;
                if (v - v.floor() - 0.5).abs() < 0.26 && k < bands.len() {
                    format!("{}", k + 1)
                } else {
                    String::new()
                }
            })
            .x_label_formatter(&|v| short_number(*v))
            .light_line_style(RGBColor(235, 235, 235))
            .draw()?;
        for (k, values) in bands.iter().enumerate() {
            let color = run_color(k);
            if let Some((a, b)) = finite_range(values.iter().copied()) {
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(a, k as f64 + 0.15), (b, k as f64 + 0.85)],
                    color.mix(0.12).filled(),
                )))?;
            }
            // Spread the dots over the row by a fixed pattern (no randomness: the same file
            // draws the same picture).
            chart.draw_series(values.iter().enumerate().map(|(i, &v)| {
                let y = k as f64 + 0.25 + 0.5 * ((i * 37 % 101) as f64 / 100.0);
                Circle::new((v, y), 3, color.mix(0.8).filled())
            }))?;
        }
        root.present()?;
    }
    Ok(buf)
}

/// One row of an [`interval_chart`]: a ratio and its interval.
#[derive(Debug, Clone, PartialEq)]
pub struct IntervalRow {
    /// The row's label, left of the axis.
    pub label: String,
    /// Where the dot sits.
    pub value: f64,
    /// The interval's low end.
    pub low: f64,
    /// The interval's high end.
    pub high: f64,
}

/// Dots with whiskers: per row (the first at the top) a dot at its ratio and its interval as a
/// whisker, on a log axis centred on 1 (no effect), so 2x below and 2x above sit equally far
/// from the line at 1; the axis spans at least 0.5x to 2x. Rows that are not positive
/// finite ratios are left out.
pub fn interval_chart(
    title: &str,
    x_desc: &str,
    rows: &[IntervalRow],
) -> Result<String, ChartError> {
    let ratio = |v: f64| v.is_finite() && v > 0.0;
    let rows: Vec<&IntervalRow> = rows
        .iter()
        .filter(|r| ratio(r.value) && ratio(r.low) && ratio(r.high))
        .collect();
    if rows.is_empty() {
        return Err(ChartError(format!("{title}: no ratio to place")));
    }
    let span = rows
        .iter()
        .flat_map(|r| [r.value, r.low, r.high])
        .map(|v| v.ln().abs())
        .fold(2f64.ln(), f64::max)
        * 1.15;
    let n = rows.len();
    let labels: Vec<String> = rows.iter().map(|r| r.label.clone()).collect();
    let height = (120 + 44 * n as u32).clamp(200, 900);
    let mut buf = String::new();
    {
        let root = svg_root(&mut buf, WIDTH, height);
        root.fill(&WHITE)?;
        let x = ((-span).exp()..span.exp()).log_scale().base(2.0);
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(46)
            .y_label_area_size(
                (labels.iter().map(|c| c.len()).max().unwrap_or(4) as u32 * 9 + 40).min(300),
            )
            .build_cartesian_2d(x, -0.5..(n as f64 - 0.5))?;
        chart
            .configure_mesh()
            .label_style(LABEL_FONT)
            .axis_desc_style(DESC_FONT)
            .disable_y_mesh()
            .y_labels(n + 1)
            .y_label_formatter(&|v| index_label(*v, &labels, true))
            .x_label_formatter(&|v| format!("{}x", short_number(*v)))
            .x_desc(x_desc)
            .light_line_style(RGBColor(235, 235, 235))
            .draw()?;
        // The line of no effect.
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(1.0, -0.5), (1.0, n as f64 - 0.5)],
            RGBColor(68, 68, 68).stroke_width(1),
        )))?;
        let colour = run_color(0);
        for (i, r) in rows.iter().enumerate() {
            let y = (n - 1 - i) as f64;
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(r.low, y), (r.high, y)],
                colour.stroke_width(2),
            )))?;
            chart.draw_series(std::iter::once(Circle::new(
                (r.value, y),
                5,
                colour.filled(),
            )))?;
        }
        root.present()?;
    }
    Ok(buf)
}

/// A chart of curves. A size x axis (label starting with `size`) is logarithmic (base 2,
/// ticks in KiB/MiB); y starts at 0 so ratios between curves read true.
pub fn xy_chart(
    title: &str,
    x_label: &str,
    y_label: &str,
    lines: &[Line],
) -> Result<String, ChartError> {
    let log_x = is_size_axis(x_label);
    // A log axis cannot place x <= 0, and no axis can place NaN: such points are left out.
    let lines: Vec<Line> = lines
        .iter()
        .map(|l| Line {
            points: l
                .points
                .iter()
                .copied()
                .filter(|&p| placeable(log_x, p))
                .collect(),
            ..l.clone()
        })
        .collect();
    let lines = lines.as_slice();
    let points = || lines.iter().flat_map(|l| l.points.iter());
    let (x0, x1) = finite_range(points().map(|p| p.0).filter(|&x| !log_x || x > 0.0))
        .ok_or_else(|| ChartError(format!("{title}: no points")))?;
    let (_, y1) = finite_range(points().map(|p| p.1)).unwrap_or((0.0, 1.0));
    let y = 0.0..if y1 > 0.0 { y1 * 1.08 } else { 1.0 };
    let descs = (axis_title(x_label), axis_title(y_label));
    let mut buf = String::new();
    {
        let root = svg_root(&mut buf, WIDTH, 440);
        root.fill(&WHITE)?;
        if log_x {
            let x = (x0 / 1.2)..(x1 * 1.2);
            draw_lines(
                &root,
                title,
                x.log_scale().base(2.0),
                y,
                (&descs.0, &descs.1),
                &|v| size_tick(*v),
                lines,
            )?;
        } else {
            let pad = ((x1 - x0) * 0.04).max(0.5);
            draw_lines(
                &root,
                title,
                (x0 - pad)..(x1 + pad),
                y,
                (&descs.0, &descs.1),
                &|v| short_number(*v),
                lines,
            )?;
        }
        root.present()?;
    }
    Ok(buf)
}

/// One run's bars: a value per category, `None` where that run did not measure it.
#[derive(Debug, Clone, PartialEq)]
pub struct BarSet {
    /// Legend text.
    pub label: String,
    /// Colour index (the run's).
    pub color: usize,
    /// One value per category, in category order.
    pub values: Vec<Option<f64>>,
}

/// Whether bars should use a log axis: positive values spanning more than two decades.
pub fn bars_need_log(sets: &[BarSet]) -> bool {
    let pos = finite_range(
        sets.iter()
            .flat_map(|s| s.values.iter().flatten().copied())
            .filter(|v| *v > 0.0),
    );
    matches!(pos, Some((lo, hi)) if hi / lo > 100.0)
}

#[allow(clippy::too_many_arguments)]
fn draw_bars<X>(
    root: &DrawingArea<SVGBackend<'_>, Shift>,
    title: &str,
    x: X,
    // Where bars start: 0 on a linear axis, the axis start on a log one (which has no 0).
    base: f64,
    value_desc: &str,
    x_fmt: &dyn Fn(&f64) -> String,
    categories: &[String],
    sets: &[BarSet],
) -> Result<(), ChartError>
where
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
{
    let n = categories.len();
    // Category i sits at y = n - 1 - i, so the first category is at the top; integer ticks
    // fall on bar centres.
    let mut chart = ChartBuilder::on(root)
        .caption(title, ("sans-serif", 22))
        .margin(12)
        .x_label_area_size(46)
        .y_label_area_size(
            (categories.iter().map(|c| c.len()).max().unwrap_or(4) as u32 * 9 + 40).min(260),
        )
        .build_cartesian_2d(x, -0.5..(n as f64 - 0.5))?;
    let label_of = |v: &f64| -> String {
        let r = v.round();
        if (v - r).abs() > 1e-6 || r < 0.0 || r as usize >= n {
            return String::new();
        }
        categories[n - 1 - r as usize].clone()
    };
    chart
        .configure_mesh()
        .label_style(LABEL_FONT)
        .axis_desc_style(DESC_FONT)
        .disable_y_mesh()
        .y_labels(n + 1)
        .y_label_formatter(&label_of)
        .x_label_formatter(x_fmt)
        .x_desc(value_desc)
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;
    let k = sets.len().max(1) as f64;
    let band = 0.8 / k;
    for (j, set) in sets.iter().enumerate() {
        let color = run_color(set.color);
        let rects: Vec<_> = set
            .values
            .iter()
            .enumerate()
            .filter_map(|(i, v)| {
                // A log axis cannot place values <= 0: those bars are left out.
                let v = (*v).filter(|v| v.is_finite() && (base == 0.0 || *v > 0.0))?;
                let center = (n - 1 - i) as f64;
                let top = center + 0.4 - band * j as f64;
                Some(Rectangle::new(
                    [(base, top), (v, top - band * 0.92)],
                    color.filled(),
                ))
            })
            .collect();
        // No legend inside the plot, where it would hide bars: the page draws one above.
        chart.draw_series(rects)?;
    }
    Ok(())
}

/// Horizontal bars, one group per category and one bar per run (colours as in
/// [`run_color`]; the caller shows the legend). The value axis is logarithmic when values span
/// more than two decades (spin times from 1 us to 10 ms); ticks of a unit `ns` axis read as
/// times.
pub fn bar_chart(
    title: &str,
    value_desc: &str,
    unit: &str,
    categories: &[String],
    sets: &[BarSet],
) -> Result<String, ChartError> {
    let all = || sets.iter().flat_map(|s| s.values.iter().flatten().copied());
    let (lo, hi) = finite_range(all()).ok_or_else(|| ChartError(format!("{title}: no values")))?;
    let height = (90 + 26 * categories.len() as u32 * sets.len().max(1) as u32).clamp(220, 900);
    let x_fmt = |v: &f64| {
        if unit == "ns" {
            time_tick(*v)
        } else {
            short_number(*v)
        }
    };
    let mut buf = String::new();
    {
        let root = svg_root(&mut buf, WIDTH, height);
        root.fill(&WHITE)?;
        if bars_need_log(sets) {
            let lo = finite_range(all().filter(|v| *v > 0.0))
                .map_or(lo, |r| r.0)
                .max(f64::MIN_POSITIVE);
            let start = lo / 2.0;
            draw_bars(
                &root,
                title,
                (start..hi * 2.0).log_scale(),
                start,
                &format!("{value_desc}, log scale"),
                &x_fmt,
                categories,
                sets,
            )?;
        } else {
            let x0 = if lo < 0.0 { lo * 1.1 } else { 0.0 };
            let x1 = if hi > 0.0 { hi * 1.1 } else { 1.0 };
            draw_bars(
                &root,
                title,
                x0..x1,
                0.0,
                value_desc,
                &x_fmt,
                categories,
                sets,
            )?;
        }
        root.present()?;
    }
    Ok(buf)
}

/// A heatmap of one matrix; `scale` fixes the colour range so several runs' heatmaps compare.
/// Cells show their value when the matrix is small enough to read; null cells are grey.
pub fn heatmap(
    title: &str,
    unit: &str,
    rows: &[String],
    cols: &[String],
    values: &[Vec<Option<f64>>],
    scale: (f64, f64),
) -> Result<String, ChartError> {
    let (nr, nc) = (rows.len().max(1), cols.len().max(1));
    let cell = (560 / nc.max(nr)).clamp(14, 60) as u32;
    let label_w = (rows.iter().map(|c| c.len()).max().unwrap_or(4) as u32 * 9 + 40).min(180);
    let key_w = 150;
    // The caption is centred over the cells' area (left of the key): that area must be wide
    // enough for it (about 11 px per character at 22 px), or it is cut at both ends.
    let cells_w = (label_w + cell * nc as u32 + 30).max(title.chars().count() as u32 * 11 + 40);
    let width = cells_w + key_w;
    let height = (cell * nr as u32 + 130).max(260);
    let (lo, hi) = colour_range(scale);
    let key_fmt = key_formatter(lo, hi);
    let mut buf = String::new();
    {
        let root = svg_root(&mut buf, width, height);
        root.fill(&WHITE)?;
        let (left, right) = root.split_horizontally(width - key_w);
        let mut chart = ChartBuilder::on(&left)
            .caption(title, ("sans-serif", 22))
            .margin(12)
            .x_label_area_size(46)
            .y_label_area_size(label_w)
            .build_cartesian_2d(-0.5..(nc as f64 - 0.5), -0.5..(nr as f64 - 0.5))?;
        let col_of = |v: &f64| index_label(*v, cols, false);
        let row_of = |v: &f64| index_label(*v, rows, true);
        chart
            .configure_mesh()
            .label_style(LABEL_FONT)
            .axis_desc_style(DESC_FONT)
            .disable_mesh()
            .x_labels(nc + 1)
            .y_labels(nr + 1)
            .x_label_formatter(&col_of)
            .y_label_formatter(&row_of)
            .x_desc("to CPU")
            .y_desc("from CPU")
            .draw()?;
        let show_values = nc <= 16 && nr <= 16;
        for (r, row) in values.iter().enumerate().take(nr) {
            let y = (nr - 1 - r) as f64;
            for (c, v) in row.iter().enumerate().take(nc) {
                let x = c as f64;
                let rect = [(x - 0.5, y + 0.5), (x + 0.5, y - 0.5)];
                let color = match v {
                    Some(v) if v.is_finite() => ViridisRGB.get_color_normalized(*v, lo, hi),
                    _ => RGBColor(215, 215, 215),
                };
                chart.draw_series(std::iter::once(Rectangle::new(rect, color.filled())))?;
                if show_values {
                    let text = v.map_or("n/a".to_string(), short_number);
                    let light = v.is_some_and(|v| (v - lo) / (hi - lo) < 0.6);
                    let style = ("sans-serif", 12)
                        .into_font()
                        .color(if light { &WHITE } else { &BLACK })
                        .pos(Pos::new(HPos::Center, VPos::Center));
                    chart.draw_series(std::iter::once(Text::new(text, (x, y), style)))?;
                }
            }
        }
        // Colour scale, labelled with the unit.
        let mut key = ChartBuilder::on(&right)
            .margin_top(40)
            .margin_bottom(58)
            .margin_right(12)
            .y_label_area_size(90)
            .build_cartesian_2d(0.0..1.0, lo..hi)?;
        key.configure_mesh()
            .label_style(LABEL_FONT)
            .axis_desc_style(DESC_FONT)
            .disable_mesh()
            .disable_x_axis()
            .y_labels(6)
            .y_desc(unit)
            .y_label_formatter(&key_fmt)
            .draw()?;
        let steps = 64;
        key.draw_series((0..steps).map(|i| {
            let a = lo + (hi - lo) * i as f64 / steps as f64;
            let b = lo + (hi - lo) * (i + 1) as f64 / steps as f64;
            Rectangle::new(
                [(0.0, a), (1.0, b)],
                ViridisRGB.get_color_normalized(a, lo, hi).filled(),
            )
        }))?;
        root.present()?;
    }
    Ok(buf)
}

/// The colour scale's range: the values' range, or 5% either side of a single value (a
/// 2-CPU matrix has one pair), so equal cells sit mid-scale and the key reads their value.
fn colour_range((lo, hi): (f64, f64)) -> (f64, f64) {
    if hi > lo {
        (lo, hi)
    } else {
        let pad = (lo.abs() * 0.05).max(0.5);
        (lo - pad, lo + pad)
    }
}

/// Tick labels for the colour key with as many decimals as its range needs, so no two ticks
/// print alike (a narrow range such as 108.2 to 109.2 ns would read 108, 108, 109...).
fn key_formatter(lo: f64, hi: f64) -> impl Fn(&f64) -> String {
    // About six ticks: one decimal more than the order of magnitude of a step.
    let step = (hi - lo) / 6.0;
    let decimals = if step > 0.0 && step < 1.0 {
        (-step.log10().floor()) as usize
    } else {
        0
    };
    move |v: &f64| {
        if decimals == 0 {
            short_number(*v)
        } else {
            format!("{v:.decimals$}")
        }
    }
}

/// The label at integer position `v`; rows count from the top.
fn index_label(v: f64, labels: &[String], from_top: bool) -> String {
    let r = v.round();
    let n = labels.len();
    if (v - r).abs() > 1e-6 || r < 0.0 || r as usize >= n {
        return String::new();
    }
    let i = if from_top {
        n - 1 - r as usize
    } else {
        r as usize
    };
    labels[i].clone()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(hay: &str, needle: &str) -> usize {
        hay.matches(needle).count()
    }

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(short_number(20.0), "20");
        assert_eq!(short_number(2.5), "2.5");
        assert_eq!(short_number(12_500.0), "12.5k");
        assert_eq!(short_number(3_000_000.0), "3M");
        assert_eq!(short_number(0.05), "0.05");
        assert_eq!(time_tick(2_400.0), "2.4 us");
        assert_eq!(time_tick(13_300_000.0), "13.3 ms");
        assert_eq!(time_tick(24.5), "24.5 ns");
    }

    #[test]
    fn axis_titles_carry_units() {
        assert_eq!(axis_title("latency_ns"), "latency (ns)");
        assert_eq!(axis_title("size_bytes"), "size (bytes)");
        assert_eq!(axis_title("read_bandwidth_gbps"), "read bandwidth (gbps)");
        assert_eq!(axis_title("ratio"), "ratio");
        // Labels with a note after the identifier (mem-latency's TLB sweep).
        assert_eq!(
            axis_title("extra_latency_cycles (4 KiB over huge pages)"),
            "extra latency (cycles), 4 KiB over huge pages"
        );
        assert_eq!(
            axis_title("size_bytes spanned (one line per 4 KiB page)"),
            "size (bytes), spanned (one line per 4 KiB page)"
        );
        let spanned = "size_bytes spanned (one line per 4 KiB page)";
        assert_eq!(axis_name(spanned, false), "size");
        assert_eq!(
            axis_name(spanned, true),
            "size, spanned (one line per 4 KiB page)"
        );
    }

    #[test]
    fn size_axis_is_logarithmic_with_byte_ticks() {
        let line = Line {
            label: "4k".into(),
            color: 0,
            dashed: false,
            points: (12..=26).map(|p| ((1u64 << p) as f64, p as f64)).collect(),
        };
        let svg = xy_chart("latency", "size_bytes", "latency_ns", &[line]).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80]);
        assert!(svg.contains("size (bytes)") && svg.contains("latency (ns)"));
        // Base-2 ticks in human units: 4 KiB .. 64 MiB appear.
        for tick in ["4 KiB", "1 MiB", "64 MiB"] {
            assert!(svg.contains(tick), "missing tick {tick}");
        }
        // 15 points drawn as circles.
        assert!(count(&svg, "<circle") >= 15);
    }

    #[test]
    fn overlaid_bars_draw_one_rect_per_run_and_value() {
        let cats = vec!["cpu0".to_string(), "cpu1".to_string()];
        let sets = vec![
            BarSet {
                label: "a".into(),
                color: 0,
                values: vec![Some(24.5), Some(25.0)],
            },
            BarSet {
                label: "b".into(),
                color: 1,
                values: vec![Some(43.0), None],
            },
        ];
        let svg = bar_chart("PAUSE", "PAUSE (ns)", "ns", &cats, &sets).unwrap();
        let fill_a = "fill=\"#0072B2\"";
        let fill_b = "fill=\"#E69F00\"";
        // Two bars of run a, one of run b (its missing value draws nothing).
        assert_eq!(count(&svg, fill_a), 2, "{svg}");
        assert_eq!(count(&svg, fill_b), 1);
        assert!(svg.contains("\ncpu0\n") && svg.contains("\ncpu1\n"));
        assert!(!bars_need_log(&sets));
    }

    #[test]
    fn negative_bars_are_drawn_from_zero() {
        let sets = vec![BarSet {
            label: "a".into(),
            color: 0,
            values: vec![Some(-5.0), Some(10.0)],
        }];
        let svg = bar_chart("gain", "gain (%)", "%", &["x".into(), "y".into()], &sets).unwrap();
        assert_eq!(count(&svg, "fill=\"#0072B2\""), 2);
    }

    #[test]
    fn bars_spanning_decades_use_a_log_axis() {
        let sets = vec![BarSet {
            label: "a".into(),
            color: 0,
            values: vec![Some(2_400.0), Some(13_300_000.0)],
        }];
        assert!(bars_need_log(&sets));
        let svg = bar_chart(
            "spin",
            "spin (ns)",
            "ns",
            &["glibc".into(), ".NET".into()],
            &sets,
        )
        .unwrap();
        assert!(svg.contains("spin (ns), log scale"));
        // Time ticks on a log ns axis.
        assert!(
            svg.contains("\n10 us\n") && svg.contains("\n1 ms\n"),
            "{svg}"
        );
    }

    #[test]
    fn heatmap_draws_every_cell_and_greys_nulls() {
        let rows: Vec<String> = (0..3).map(|i| format!("cpu{i}")).collect();
        let values = vec![
            vec![None, Some(22.0), Some(100.0)],
            vec![Some(22.0), None, Some(100.0)],
            vec![Some(100.0), Some(100.0), None],
        ];
        let svg = heatmap("c2c", "latency (ns)", &rows, &rows, &values, (22.0, 100.0)).unwrap();
        assert_eq!(count(&svg, "fill=\"#D7D7D7\""), 3, "three null cells");
        assert_eq!(count(&svg, "\nn/a\n"), 3);
        assert!(svg.contains("\ncpu2\n") && svg.contains("latency (ns)"));
    }

    #[test]
    fn a_heatmap_of_equal_cells_has_a_readable_key_and_its_whole_title() {
        // Regression guard: a 2-CPU c2c matrix (one value) gave a key reading 108, 108, 109...
        // and a caption cut at the left edge.
        let rows: Vec<String> = (0..2).map(|i| format!("cpu{i}")).collect();
        let v = 108.178;
        let values = vec![vec![None, Some(v)], vec![Some(v), None]];
        let title = "c2c: c2c_load_store_latency_ns";
        let svg = heatmap(title, "ns", &rows, &rows, &values, (v, v)).unwrap();
        // Equal cells sit mid-scale.
        let (lo, hi) = colour_range((v, v));
        assert!(lo < v && v < hi);
        // A narrow range gets the decimals that tell its ticks apart.
        let fmt = key_formatter(108.178, 109.178);
        let ticks: Vec<String> = (0..6).map(|i| fmt(&(108.2 + 0.2 * i as f64))).collect();
        assert_eq!(
            ticks,
            ["108.2", "108.4", "108.6", "108.8", "109.0", "109.2"]
        );
        assert_eq!(key_formatter(22.0, 100.0)(&40.0), "40");
        // The caption's area holds its ~11 px characters.
        let width: u32 = svg
            .split("width=\"")
            .nth(1)
            .and_then(|w| w.split('"').next())
            .unwrap()
            .parse()
            .unwrap();
        assert!(width >= 150 + 11 * title.len() as u32, "{width}");
    }

    #[test]
    fn points_a_log_axis_cannot_place_are_left_out() {
        let line = Line {
            label: "l".into(),
            color: 0,
            dashed: false,
            points: vec![(0.0, 1.0), (4096.0, 2.0), (f64::NAN, 3.0), (8192.0, 4.0)],
        };
        let svg = xy_chart("t", "size_bytes", "latency_ns", &[line]).unwrap();
        assert_eq!(count(&svg, "<circle"), 2);
        assert!(!svg.contains("NaN") && !svg.contains("inf"));
    }

    #[test]
    fn empty_series_is_an_error_not_a_blank_chart() {
        assert!(xy_chart("x", "size_bytes", "latency_ns", &[]).is_err());
        assert!(bar_chart("x", "v", "ns", &[], &[]).is_err());
        assert!(interval_chart("x", "v", &[]).is_err());
    }

    #[test]
    fn an_interval_chart_draws_a_dot_and_a_whisker_per_ratio_around_one() {
        let row = |label: &str, value, low, high| IntervalRow {
            label: label.into(),
            value,
            low,
            high,
        };
        let rows = [
            row("THP off vs huge pages asked", 0.88, 0.78, 1.19),
            row("split-locks neighbour vs alone", 0.67, 0.47, 0.76),
            // Not a ratio a log axis can place: left out.
            row("broken", f64::NAN, 0.5, 1.0),
        ];
        let svg = interval_chart("Effect", "speed against the baseline", &rows).unwrap();
        assert_eq!(count(&svg, "<circle"), 2);
        assert!(svg.contains("THP off vs huge pages asked"));
        // The line at 1 and ticks either side of it, at least 0.5x to 2x.
        let labels: Vec<&str> = svg.lines().map(str::trim).collect();
        for tick in ["0.5x", "1x", "2x"] {
            assert!(labels.contains(&tick), "{tick}");
        }
        assert!(!svg.contains("NaN"));
    }
}
