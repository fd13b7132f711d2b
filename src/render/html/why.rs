//! "Why it is slower" in the diagnosis report: the headline, the figures, and a waterfall of
//! the loss by mechanism (inline SVG, no script): each mechanism's explained points stacked
//! from zero, then the unexplained rest, then the total, so the bars end where the loss does.
//! Drawn beside the differential flame graph.

use super::escape;
use crate::compare::why::{Why, figure_label, figure_words, measure_words};
use crate::words::why as words;
use std::fmt::Write;

/// Width of the waterfall's drawing, px.
const WIDTH: f64 = 460.0;
/// Width of the label column, px.
const LABEL: f64 = 200.0;
/// Height of one bar's row, px.
const ROW: f64 = 24.0;

/// One bar of the waterfall: its label, where it starts and how far it goes, and its class.
struct Step {
    label: String,
    from: f64,
    points: f64,
    class: &'static str,
}

fn steps(w: &Why) -> Vec<Step> {
    let mut v = Vec::new();
    let mut at = 0.0;
    for m in w
        .mechanisms
        .iter()
        .filter(|m| m.unpredicted < m.functions && m.explained_points.abs() >= 0.05)
    {
        // The figure is in the table below: a label of ~26 characters fits the column.
        let label = m.mechanism.label().to_string();
        v.push(Step {
            label,
            from: at,
            points: m.explained_points,
            class: if m.explained_points >= 0.0 {
                "wf-slower"
            } else {
                "wf-faster"
            },
        });
        at += m.explained_points;
    }
    v.push(Step {
        label: "unexplained".into(),
        from: at,
        points: w.unexplained_points,
        class: "wf-rest",
    });
    v.push(Step {
        label: "total".into(),
        from: 0.0,
        points: w.total_points,
        class: "wf-total",
    });
    v
}

/// The waterfall as an SVG element.
pub fn waterfall_svg(w: &Why) -> String {
    let steps = steps(w);
    let ends = steps
        .iter()
        .flat_map(|s| [s.from, s.from + s.points])
        .chain([0.0]);
    let (lo, hi) = ends.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    });
    let span = (hi - lo).max(1.0);
    let plot = WIDTH - LABEL - 60.0;
    let x = |p: f64| LABEL + (p - lo) / span * plot;
    let height = ROW * steps.len() as f64 + 8.0;
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg class=\"waterfall\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" \
         height=\"{height}\" viewBox=\"0 0 {WIDTH} {height}\" role=\"img\" \
         aria-label=\"{}\">",
        escape(&words::waterfall_caption())
    );
    let _ = write!(
        s,
        "<line x1=\"{0:.1}\" y1=\"0\" x2=\"{0:.1}\" y2=\"{height}\" class=\"wf-zero\"/>",
        x(0.0)
    );
    for (i, st) in steps.iter().enumerate() {
        let y = i as f64 * ROW + 4.0;
        let (a, b) = (x(st.from), x(st.from + st.points));
        let (left, w) = (a.min(b), (a - b).abs().max(1.0));
        let _ = write!(
            s,
            "<text x=\"{:.1}\" y=\"{:.1}\" class=\"wf-label\">{}</text>\
             <rect x=\"{left:.1}\" y=\"{y:.1}\" width=\"{w:.1}\" height=\"{:.1}\" class=\"{}\">\
             <title>{}</title></rect>\
             <text x=\"{:.1}\" y=\"{:.1}\" class=\"wf-value\">{:+.1}</text>",
            LABEL - 6.0,
            y + ROW * 0.62,
            escape(&st.label),
            ROW - 8.0,
            st.class,
            escape(&format!("{}: {:+.1} points", st.label, st.points)),
            left + w + 4.0,
            y + ROW * 0.62,
            st.points
        );
    }
    s.push_str("</svg>");
    s
}

/// Styles of the waterfall.
pub const STYLE: &str = r#"
svg.waterfall text { font-family: Verdana, sans-serif; font-size: 12px; }
svg.waterfall .wf-label { text-anchor: end; }
svg.waterfall .wf-slower { fill: #cf222e; } svg.waterfall .wf-faster { fill: #0550ae; }
svg.waterfall .wf-rest { fill: #9a9a9a; } svg.waterfall .wf-total { fill: #333; }
svg.waterfall .wf-zero { stroke: #888; stroke-width: 1; }
"#;

/// The section: headline, figures, the waterfall (for `beside`, the differential flame
/// graph goes next to it), the mechanisms' table and what to do.
pub fn section(h: &mut String, w: &Why, beside: impl FnOnce(&mut String)) {
    let _ = writeln!(
        h,
        "<h3>{}</h3>",
        escape(words::heading(w.total_points, w.beyond_noise))
    );
    let headline = match &w.loss {
        Some(l) => words::headline(
            l.ratio,
            l.low
                .zip(l.high)
                .zip(l.coverage)
                .map(|((a, b), c)| (a, b, c)),
            &measure_words(&l.measure),
            (l.old.len(), l.new.len()),
            crate::stats::CONFIDENCE,
        ),
        None => w.loss_not_measured.clone().unwrap_or_default(),
    };
    let _ = writeln!(h, "<p>{}</p>", escape(&headline));
    if !w.figures.is_empty() {
        let figs: Vec<String> = w
            .figures
            .iter()
            .map(|f| words::figure_line(figure_label(f.figure), f.figure.unit(), f.old, f.new))
            .collect();
        let _ = writeln!(
            h,
            "<p class=\"muted\">Figures: {}</p>",
            escape(&figs.join("; "))
        );
    }
    let _ = writeln!(
        h,
        "<div class=\"pair\"><figure data-kind=\"waterfall\">{}<figcaption>{}</figcaption>\
         </figure><div>",
        waterfall_svg(w),
        escape(&words::waterfall_caption())
    );
    beside(h);
    h.push_str("</div></div>\n");
    h.push_str(
        "<div class=\"wide\"><table class=\"why\"><tr><th>Mechanism</th><th>Figure</th>\
         <th>Explains</th><th>Observed</th></tr>\n",
    );
    for m in &w.mechanisms {
        let figure = match m.figure {
            Some(f) => figure_words(f, m.old_figure, &w.figures)
                .unwrap_or_else(|| words::figure_not_known(figure_label(f))),
            None => "none".into(),
        };
        let explains = if m.unpredicted == m.functions {
            "-".to_string()
        } else {
            format!("{:+.1} pt", m.explained_points)
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{:+.1} pt\
             </td></tr>",
            escape(m.mechanism.label()),
            escape(&figure),
            explains,
            m.observed_points
        );
    }
    h.push_str("</table></div>\n");
    let _ = writeln!(h, "<p>{}</p>", escape(&crate::render::why::accounting(w)));
    if !w.unexplained.is_empty() {
        h.push_str("<ul>");
        for u in &w.unexplained {
            let label = u.mechanism.map_or(words::OFF_CPU, |m| m.label());
            let _ = write!(
                h,
                "<li>{}</li>",
                escape(&words::remainder_part(label, u.points, &u.words))
            );
        }
        h.push_str("</ul>\n");
    }
    if !w.advice.is_empty() {
        h.push_str("<p><b>What to do</b></p><ul>");
        for a in &w.advice {
            for line in &a.advice {
                let _ = write!(
                    h,
                    "<li>{}: {}</li>",
                    escape(a.mechanism.label()),
                    escape(line)
                );
            }
        }
        h.push_str("</ul>\n");
    }
}
