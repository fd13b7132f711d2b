//! The report's figures, one per chart the series call for: every `xy` series of a probe that
//! shares axes is one chart, every `bars` and `matrix` series another, plus the
//! spin-before-block chart computed from the measured PAUSE. With several runs each chart
//! overlays them (one colour per run).
//!
//! One chart that cannot be drawn (no point a log axis can place, a backend failure) never
//! costs the page: it is left out with a note saying why, and the rest is drawn.

use super::{Run, escape, first_probes, slug, swatch};
use crate::compare::fingerprint::SpinRun;
use crate::names::probe;
use crate::render::charts::{self, BarSet, ChartError, Line, axis_name, axis_title};
use crate::schema::probes::c2c::{BY_GROUP_SERIES, CAS_MATRIX_SERIES, LOAD_STORE_MATRIX_SERIES};
use crate::schema::{Series, Status};
use crate::spin::RUNTIMES;
use std::fmt::Write;

/// The charts part of the page.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Figures {
    /// The markup: drawn figures and notes for the ones left out, in page order.
    pub html: String,
    /// The same markup one chart at a time, with the probe whose data it draws, so the page
    /// can set each chart beside the verdict that reads that probe.
    pub parts: Vec<FigurePart>,
    /// How many charts were drawn.
    pub drawn: usize,
    /// One line per chart left out: which, and why.
    pub skipped: Vec<String>,
}

/// One chart (or the note for one left out) and the probe it draws.
#[derive(Debug, Clone, PartialEq)]
pub struct FigurePart {
    /// The probe whose data the chart draws (`pause` for spin-before-block).
    pub probe: String,
    /// Its markup.
    pub html: String,
}

/// A chart that is left out, and why.
struct Skip {
    id: String,
    kind: &'static str,
    title: String,
    why: String,
}

impl Skip {
    fn new(id: String, kind: &'static str, title: &str, why: impl ToString) -> Skip {
        Skip {
            id,
            kind,
            title: title.to_string(),
            why: why.to_string(),
        }
    }
}

/// What drawing one chart gave: its figure, nothing (no run has its data) or a reason it was
/// left out.
type Drawn = Result<Option<String>, Skip>;

/// One chart to draw: where its data comes from, in page order.
#[derive(Debug, Clone, Copy, PartialEq)]
enum ChartKey<'a> {
    Xy {
        probe: &'a str,
        x_label: &'a str,
        y_label: &'a str,
    },
    Bars {
        probe: &'a str,
        name: &'a str,
    },
    Matrix {
        probe: &'a str,
        name: &'a str,
    },
}

/// A chart's title in words: the known series by what they show, any other by its name.
fn series_words(probe: &str, name: &str) -> String {
    match (probe, name) {
        (probe::PAUSE, "pause_ns_per_cpu") => "PAUSE latency on each CPU".into(),
        (probe::C2C, CAS_MATRIX_SERIES) => {
            "Core-to-core latency (lock cmpxchg ping-pong), one way".into()
        }
        (probe::C2C, LOAD_STORE_MATRIX_SERIES) => {
            "Core-to-core latency of a plain flag, one way".into()
        }
        (probe::C2C, BY_GROUP_SERIES) => "Core-to-core latency by topology".into(),
        (probe::BANDWIDTH, crate::schema::probes::bandwidth::BandwidthDerived::BARS) => {
            "Streaming read bandwidth".into()
        }
        _ => {
            let words = name.replace('_', " ");
            let mut c = words.chars();
            c.next()
                .map_or(String::new(), |f| f.to_uppercase().chain(c).collect())
        }
    }
}

/// A probe in words, for chart titles.
fn probe_words(probe: &str) -> &str {
    match probe {
        probe::MEM_LATENCY => "Memory latency",
        probe::HANDOFF => "Handoff",
        other => other,
    }
}

fn series_of<'a>(run: &'a Run, probe: &str) -> &'a [Series] {
    run.fp
        .probe(probe)
        .filter(|p| p.status == Status::Ok)
        .map_or(&[], |p| p.series.as_slice())
}

fn open_figure(h: &mut String, id: &str, kind: &str) {
    let _ = writeln!(
        h,
        "<figure class=\"chart\" id=\"chart-{}\" data-kind=\"{kind}\">",
        slug(id)
    );
}

fn close_figure(h: &mut String, caption: &str, missing: &[&str]) {
    let mut cap = escape(caption);
    if !missing.is_empty() {
        let _ = write!(
            cap,
            " <span class=\"muted\">Not measured in {}.</span>",
            escape(&missing.join(", "))
        );
    }
    let _ = writeln!(h, "<figcaption>{cap}</figcaption>\n</figure>");
}

/// Every chart the runs' series call for, spin-before-block first.
pub fn figures(runs: &[Run], spin: &[Option<SpinRun>]) -> Figures {
    let mut out = Figures::default();
    let mut add = |probe: &str, drawn: Drawn| {
        let html = match drawn {
            Ok(Some(html)) => {
                out.drawn += 1;
                html
            }
            Ok(None) => return,
            Err(skip) => {
                out.skipped.push(format!("{}: {}", skip.title, skip.why));
                format!(
                    "<figure class=\"chart-skipped\" id=\"chart-{}\" data-kind=\"{}\">\
                     <figcaption>Chart {} not drawn: {}.</figcaption></figure>\n",
                    slug(&skip.id),
                    skip.kind,
                    escape(&skip.title),
                    escape(&skip.why)
                )
            }
        };
        out.html.push_str(&html);
        out.parts.push(FigurePart {
            probe: probe.to_string(),
            html,
        });
    };
    add(probe::PAUSE, spin_chart(runs, spin));
    let mut keys: Vec<ChartKey> = Vec::new();
    for run in runs {
        for p in first_probes(&run.fp).filter(|p| p.status == Status::Ok) {
            for s in &p.series {
                let key = match s {
                    Series::Xy {
                        x_label, y_label, ..
                    } => ChartKey::Xy {
                        probe: &p.name,
                        x_label,
                        y_label,
                    },
                    Series::Bars { name, .. } => ChartKey::Bars {
                        probe: &p.name,
                        name,
                    },
                    Series::Matrix { name, .. } => ChartKey::Matrix {
                        probe: &p.name,
                        name,
                    },
                };
                if !keys.contains(&key) {
                    keys.push(key);
                }
            }
        }
    }
    // A curve in cycles beside the same curve in ns shows the same shape twice.
    let twin_in_ns = |probe: &str, x: &str| {
        keys.iter().any(|k| {
            matches!(k, ChartKey::Xy { probe: p, x_label, y_label }
                if *p == probe && *x_label == x && y_label.ends_with("_ns"))
        })
    };
    let keys: Vec<ChartKey> = keys
        .iter()
        .copied()
        .filter(|k| match k {
            ChartKey::Xy {
                probe,
                x_label,
                y_label,
            } => !(y_label.ends_with("_cycles") && twin_in_ns(probe, x_label)),
            _ => true,
        })
        .collect();
    for key in keys {
        match key {
            ChartKey::Xy {
                probe,
                x_label,
                y_label,
            } => add(probe, xy_figure(runs, probe, x_label, y_label)),
            ChartKey::Bars { probe, name } => add(probe, bars_figure(runs, probe, name)),
            ChartKey::Matrix { probe, name } => add(probe, matrix_figure(runs, probe, name)),
        }
    }
    if out.drawn == 0 && out.skipped.is_empty() {
        out.html
            .push_str("<p>No charts: no probe with chart data ran successfully.</p>\n");
    }
    out
}

/// The title of an xy chart, short enough for its width: the axes with units and notes, or
/// without units, or by name alone (the axis titles always carry the rest).
fn xy_title(probe: &str, x_label: &str, y_label: &str) -> String {
    let probe = probe_words(probe);
    let full = format!(
        "{probe}: {} by {}",
        axis_title(y_label),
        axis_title(x_label)
    );
    let shorter = [true, false].map(|note| {
        format!(
            "{probe}: {} by {}",
            axis_name(y_label, note),
            axis_name(x_label, note)
        )
    });
    std::iter::once(full)
        .chain(shorter)
        .find(|t| t.chars().count() <= charts::TITLE_CHARS)
        .unwrap_or_else(|| format!("{probe}: {}", axis_name(y_label, false)))
}

fn xy_figure(runs: &[Run], probe: &str, x_label: &str, y_label: &str) -> Drawn {
    let id = format!("{probe}-{y_label}-{x_label}");
    let title = xy_title(probe, x_label, y_label);
    let log_x = charts::is_size_axis(x_label);
    let mut lines = Vec::new();
    let mut missing = Vec::new();
    let mut left_out = 0;
    let mut any_series = false;
    for (i, run) in runs.iter().enumerate() {
        let mut k = 0;
        for s in series_of(run, probe) {
            if let Series::Xy {
                name,
                x_label: xl,
                y_label: yl,
                points,
            } = s
                && xl == x_label
                && yl == y_label
            {
                any_series = true;
                // Filtered before anything is decided, so a series the axis cannot place is
                // left out here rather than failing the chart.
                let placed = charts::placeable_points(log_x, points);
                left_out += points.len() - placed.len();
                if placed.is_empty() {
                    continue;
                }
                let single = runs.len() == 1;
                lines.push(Line {
                    label: if single {
                        name.clone()
                    } else {
                        format!("{}: {name}", run.label)
                    },
                    color: if single { k } else { i },
                    dashed: !single && k > 0,
                    points: placed,
                });
                k += 1;
            }
        }
        if k == 0 {
            missing.push(run.label.as_str());
        }
    }
    if lines.is_empty() {
        if !any_series {
            return Ok(None);
        }
        return Err(Skip::new(
            id,
            "xy",
            &title,
            if log_x {
                "no point can be placed on its logarithmic size axis (sizes must be positive \
                 and finite)"
            } else {
                "no point has finite coordinates"
            },
        ));
    }
    let svg = charts::xy_chart(&title, x_label, y_label, &lines)
        .map_err(|e| Skip::new(id.clone(), "xy", &title, e))?;
    let mut h = String::new();
    open_figure(&mut h, &id, "xy");
    h.push_str(&svg);
    let scale = if log_x {
        " Size axis is logarithmic."
    } else {
        ""
    };
    let dropped = match left_out {
        0 => String::new(),
        n => format!(
            " {n} point(s) left out: {}.",
            if log_x {
                "a logarithmic axis cannot place a size of 0 or less, or one not finite"
            } else {
                "coordinates not finite"
            }
        ),
    };
    close_figure(
        &mut h,
        &format!(
            "{} curve(s) of probe {probe}: {} against {}.{scale}{dropped}",
            lines.len(),
            axis_title(y_label),
            axis_title(x_label)
        ),
        &missing,
    );
    Ok(Some(h))
}

fn bars_figure(runs: &[Run], probe: &str, name: &str) -> Drawn {
    let mut categories: Vec<String> = Vec::new();
    let mut found: Vec<(usize, &str, &[String], &[f64])> = Vec::new();
    let mut missing = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        let hit = series_of(run, probe).iter().find_map(|s| match s {
            Series::Bars {
                name: n,
                unit,
                labels,
                values,
            } if n == name => Some((unit.as_str(), labels.as_slice(), values.as_slice())),
            _ => None,
        });
        match hit {
            Some((unit, labels, values)) => {
                for l in labels {
                    if !categories.contains(l) {
                        categories.push(l.clone());
                    }
                }
                found.push((i, unit, labels, values));
            }
            None => missing.push(runs[i].label.as_str()),
        }
    }
    let sets: Vec<BarSet> = found
        .iter()
        .map(|&(i, _, labels, values)| BarSet {
            label: runs[i].label.clone(),
            color: i,
            values: categories
                .iter()
                .map(|c| {
                    labels
                        .iter()
                        .position(|l| l == c)
                        .and_then(|j| values.get(j).copied())
                        .filter(|v| v.is_finite())
                })
                .collect(),
        })
        .collect();
    if sets.iter().all(|s| s.values.iter().all(Option::is_none)) {
        return Ok(None);
    }
    // One bar of one run says no more than the figure beside it.
    if categories.len() < 2 && sets.len() < 2 {
        return Ok(None);
    }
    let id = format!("{probe}-{name}");
    let title = series_words(probe, name);
    let unit = found.first().map_or("", |f| f.1);
    // Time ticks carry their own unit (ns, us, ms); other axes say it once.
    let desc = if unit == "ns" {
        "time".to_string()
    } else {
        unit.to_string()
    };
    let svg = charts::bar_chart(&title, &desc, unit, &categories, &sets)
        .map_err(|e| Skip::new(id.clone(), "bars", &title, e))?;
    let mut h = String::new();
    open_figure(&mut h, &id, "bars");
    legend(&mut h, runs, &sets);
    h.push_str(&svg);
    close_figure(
        &mut h,
        &format!(
            "{title}, in {unit} (`{name}` of probe {probe}){}.",
            if runs.len() > 1 {
                "; one colour per fingerprint"
            } else {
                ""
            }
        ),
        &missing,
    );
    Ok(Some(h))
}

fn matrix_figure(runs: &[Run], probe: &str, name: &str) -> Drawn {
    /// One run's matrix: run index, unit, rows, columns, cells.
    struct Found<'a> {
        run: usize,
        unit: &'a str,
        rows: &'a [String],
        cols: &'a [String],
        values: &'a [Vec<Option<f64>>],
    }
    let mut found: Vec<Found> = Vec::new();
    let mut missing = Vec::new();
    for (i, run) in runs.iter().enumerate() {
        let hit = series_of(run, probe).iter().find_map(|s| match s {
            Series::Matrix {
                name: n,
                unit,
                rows,
                cols,
                values,
            } if n == name => Some(Found {
                run: i,
                unit,
                rows,
                cols,
                values,
            }),
            _ => None,
        });
        match hit {
            Some(f) => found.push(f),
            None => missing.push(run.label.as_str()),
        }
    }
    let all = found
        .iter()
        .flat_map(|f| f.values.iter().flatten().flatten().copied())
        .filter(|v| v.is_finite());
    let Some(scale) = all.fold(None, |acc: Option<(f64, f64)>, v| {
        Some(acc.map_or((v, v), |(lo, hi)| (lo.min(v), hi.max(v))))
    }) else {
        return Ok(None);
    };
    // A matrix of one pair (two CPUs) holds one figure twice: the figure says it all.
    let cells = found
        .iter()
        .map(|f| f.values.iter().flatten().flatten().count())
        .max()
        .unwrap_or(0);
    if cells <= 2 {
        return Ok(None);
    }
    let id = format!("{probe}-{name}");
    let words = series_words(probe, name);
    let mut svgs = String::new();
    for f in &found {
        let title = if runs.len() == 1 {
            words.clone()
        } else {
            format!("{}: {words}", runs[f.run].label)
        };
        let svg = charts::heatmap(&title, f.unit, f.rows, f.cols, f.values, scale)
            .map_err(|e| Skip::new(id.clone(), "matrix", &title, e))?;
        svgs.push_str(&svg);
    }
    let mut h = String::new();
    open_figure(&mut h, &id, "matrix");
    h.push_str(&svgs);
    close_figure(
        &mut h,
        &format!(
            "{words}, in {} (`{name}` of probe {probe}): from the CPU of the row to the CPU \
             of the column; one heatmap per fingerprint on a shared colour scale; grey cells \
             were not measured.",
            found.first().map_or("", |f| f.unit)
        ),
        &missing,
    );
    Ok(Some(h))
}

/// The colour key of a bar chart that overlays several runs.
fn legend(h: &mut String, runs: &[Run], sets: &[BarSet]) {
    if runs.len() < 2 {
        return;
    }
    h.push_str("<div class=\"legend\">");
    for s in sets {
        let _ = write!(h, "<span>{}{}</span> ", swatch(s.color), escape(&s.label));
    }
    h.push_str("</div>\n");
}

/// The spin-before-block chart: each runtime's spin at each run's measured PAUSE and CPU
/// count (the spin model of `cpudoctor spin`).
fn spin_chart(runs: &[Run], spin: &[Option<SpinRun>]) -> Drawn {
    let mut sets = Vec::new();
    let mut notes = Vec::new();
    let mut missing = Vec::new();
    for (i, (run, model)) in runs.iter().zip(spin).enumerate() {
        let Some(model) = model else {
            missing.push(run.label.as_str());
            continue;
        };
        notes.push(format!(
            "{}: {:.1} ns per PAUSE, {} CPUs",
            run.label, model.pause_ns, model.cores
        ));
        sets.push(BarSet {
            label: run.label.clone(),
            color: i,
            values: model.costs.iter().map(|c| Some(c.spin_ns)).collect(),
        });
    }
    if sets.is_empty() {
        return Ok(None);
    }
    let title = "Spin before blocking, by runtime";
    let categories: Vec<String> = RUNTIMES.iter().map(|p| p.runtime.to_string()).collect();
    let svg = charts::bar_chart(
        title,
        "time spinning before blocking",
        "ns",
        &categories,
        &sets,
    )
    .map_err(|e: ChartError| Skip::new("spin-before-block".into(), "spin", title, e))?;
    let mut h = String::new();
    open_figure(&mut h, "spin-before-block", "spin");
    legend(&mut h, runs, &sets);
    h.push_str(&svg);
    close_figure(
        &mut h,
        &format!(
            "How long each runtime's lock spins on PAUSE before it yields or sleeps, at the \
             measured PAUSE ({}). folly and .NET normalized bound spinning by time.",
            notes.join("; ")
        ),
        &missing,
    );
    Ok(Some(h))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::ProbeResult;
    use crate::schema::test_support::sample_fingerprint;

    fn run(label: &str, fp: crate::schema::Fingerprint) -> Run {
        Run {
            label: label.into(),
            fp,
        }
    }

    fn with_series(series: Vec<Series>) -> crate::schema::Fingerprint {
        let mut fp = sample_fingerprint();
        let mut p = ProbeResult::new("mem-latency", Status::Ok);
        p.series = series;
        fp.probes.push(p);
        fp
    }

    fn xy(name: &str, y_label: &str, points: Vec<[f64; 2]>) -> Series {
        Series::Xy {
            name: name.into(),
            x_label: "size_bytes".into(),
            y_label: y_label.into(),
            points,
        }
    }

    #[test]
    fn a_size_series_with_x_zero_is_left_out_not_fatal() {
        // Regression guard: a size-axis series whose every x is 0 (or NaN) failed the whole
        // report with "no points"; the points were checked before a log axis dropped them.
        let fp = with_series(vec![
            xy("broken", "latency_ns", vec![[0.0, 1.0], [f64::NAN, 2.0]]),
            xy(
                "ok",
                "bandwidth_gbs",
                vec![[0.0, 1.0], [4096.0, 4.0], [8192.0, 5.0]],
            ),
        ]);
        let spin = [SpinRun::of(&fp)];
        let f = figures(&[run("a", fp)], &spin);
        // Spin and the placeable curve are drawn (one CPU's PAUSE bar adds nothing to the
        // figure); the other curve is a note.
        assert_eq!(f.drawn, 2, "{}", f.html);
        assert_eq!(f.skipped.len(), 1, "{:?}", f.skipped);
        assert!(
            f.skipped[0].contains("logarithmic size axis"),
            "{:?}",
            f.skipped
        );
        assert!(f.html.contains("class=\"chart-skipped\""));
        // The drawn curve says what it left out.
        assert!(f.html.contains("1 point(s) left out"), "{}", f.html);
    }

    #[test]
    fn series_sharing_axes_share_a_chart_keyed_once() {
        let fp = with_series(vec![
            xy("latency_4k", "latency_ns", vec![[4096.0, 1.0]]),
            xy("latency_thp", "latency_ns", vec![[4096.0, 1.0]]),
        ]);
        let spin = [SpinRun::of(&fp), SpinRun::of(&fp)];
        let f = figures(&[run("a", fp.clone()), run("b", fp)], &spin);
        assert_eq!(f.html.matches("data-kind=\"xy\"").count(), 1);
        assert!(f.html.contains("4 curve(s) of probe mem-latency"));
    }

    #[test]
    fn long_axis_labels_give_a_title_that_fits() {
        let t = xy_title(
            "mem-latency",
            "size_bytes spanned (one line per 4 KiB page)",
            "extra_latency_cycles (4 KiB over huge pages)",
        );
        assert_eq!(t, "Memory latency: extra latency by size");
        assert_eq!(
            xy_title(
                "mem-latency",
                "size_bytes spanned (one line per 4 KiB page)",
                "latency_ns"
            ),
            "Memory latency: latency by size, spanned (one line per 4 KiB page)"
        );
        assert_eq!(
            xy_title("mem-latency", "size_bytes", "latency_ns"),
            "Memory latency: latency (ns) by size (bytes)"
        );
    }
}
