//! An experiment ([`ExperimentResult`]) as text: one screen for the terminal (each variant's
//! effect with its interval and a line of meaning, the scaling curve against ideal, what was
//! not run and why), Markdown for `--export-markdown`, and the HTML page of `report` with a
//! chart of the effects (a dot and its interval per variant, on a log axis so 2x slower and
//! 2x faster sit equally far from 1) and the scaling curve against the ideal line.

use crate::experiment::{Comparison, ExperimentResult, Measure, Scaling, ratios};
use crate::format::{human_bytes, pct};
use crate::render::charts::{IntervalRow, Line, interval_chart, xy_chart};
use crate::render::text::Style;
use crate::render::text::{align_right, columns, keep_whole, lines, wrap, wrap_labelled};
use crate::schema::split_lock::SplitLockMechanism;
use std::fmt::Write;

/// `1.42x slower [1.38, 1.47]`: the effect and its interval in the same direction.
pub fn effect_text(c: &Comparison) -> String {
    let Some((s, slo, shi)) = speed_interval(c) else {
        return "not measured".into();
    };
    let words = ratios::effect_words(s, slo, shi);
    if words.starts_with("no measurable") {
        return format!("no effect [{slo:.2}, {shi:.2}]");
    }
    // An interval that holds 1 gets a question mark: the direction is not established.
    let mark = if slo <= 1.0 && 1.0 <= shi { "?" } else { "" };
    if s >= 1.0 {
        format!("{s:.2}x faster{mark} [{slo:.2}, {shi:.2}]")
    } else {
        format!(
            "{:.2}x slower{mark} [{:.2}, {:.2}]",
            1.0 / s,
            1.0 / shi,
            1.0 / slo
        )
    }
}

/// The comparison's speed factor and interval (above 1 faster).
fn speed_interval(c: &Comparison) -> Option<(f64, f64, f64)> {
    Some((c.speed?, c.speed_low?, c.speed_high?))
}

fn measure_words(m: &Measure) -> String {
    match m {
        Measure::WallTime => "wall time, lower is better".into(),
        Measure::Metric {
            regex,
            higher_is_better,
        } => format!(
            "/{regex}/ from its output, {} is better",
            if *higher_is_better { "higher" } else { "lower" }
        ),
    }
}

fn median_text(m: &Measure, v: Option<f64>) -> String {
    match (m, v) {
        (_, None) => "-".into(),
        (Measure::WallTime, Some(s)) => crate::format::human_ns(s * 1e9),
        (Measure::Metric { .. }, Some(x)) => crate::render::charts::short_number(x),
    }
}

/// The machine in one line.
fn machine_line(r: &ExperimentResult) -> String {
    let m = &r.machine;
    format!(
        "{} · {} CPU{} allowed · THP {} · {}{}",
        m.cpu,
        m.allowed_cpus.len(),
        if m.allowed_cpus.len() == 1 { "" } else { "s" },
        m.thp.as_deref().unwrap_or("unknown"),
        match m.split_lock {
            crate::machine::SplitLockMode::NotDetected => "split locks unseen by the kernel".into(),
            mode => format!("split_lock_detect={mode}"),
        },
        m.hypervisor
            .as_ref()
            .map_or(String::new(), |h| format!(" · {h} guest"))
    )
}

/// The one screen, fitted to `style`'s width like every other view: the effects as a table
/// (variant, what it is against, its median, its effect and interval), then what each means,
/// the scaling curve, what failed and what was not run.
pub fn render_text(r: &ExperimentResult, style: impl Into<Style>) -> String {
    let width = style.into().width;
    let mut out = String::new();
    out.push_str(&wrap(
        &format!(
            "cpudoctor experiment: {} ({} runs each after {} warmup, interleaved; {})",
            r.command.join(" "),
            r.runs,
            r.warmup,
            measure_words(&r.measure)
        ),
        width,
        0,
    ));
    out.push_str(&wrap(&machine_line(r), width, 0));
    if !r.comparisons.is_empty() {
        out.push('\n');
        let mut t = columns(
            width,
            &["variant", "against", "median", "effect [95% interval]"],
        );
        for c in &r.comparisons {
            t.add_row(vec![
                r.arms[c.arm].variant.name(),
                r.arms[c.baseline].variant.name(),
                median_text(&r.measure, r.arms[c.arm].median),
                effect_text(c),
            ]);
        }
        align_right(&mut t, &[2]);
        keep_whole(&mut t, &[2]);
        out.push_str(&lines(t, 0));
        for c in &r.comparisons {
            out.push_str(&wrap_labelled(&meaning_text(r, c), "- ", width));
        }
    }
    if let Some(s) = &r.scaling {
        out.push('\n');
        scaling_text(&mut out, s, width);
    }
    let failed: Vec<_> = r.arms.iter().filter(|a| a.failure.is_some()).collect();
    if !failed.is_empty() {
        out.push('\n');
        let _ = writeln!(out, "Failed:");
        for a in failed {
            out.push_str(&wrap(
                &format!(
                    "{}: {}",
                    a.variant.name(),
                    a.failure.as_deref().unwrap_or_default()
                ),
                width,
                2,
            ));
        }
    }
    if !r.notes.is_empty() {
        out.push('\n');
        for l in &r.notes {
            out.push_str(&wrap(l, width, 0));
        }
    }
    if !r.not_run.is_empty() {
        out.push('\n');
        let _ = writeln!(out, "Not run on this machine:");
        for l in &r.not_run {
            out.push_str(&wrap(l, width, 2));
        }
    }
    out
}

/// What a comparison means, with what its neighbour did and, when its interval is a range
/// of few rounds, how sure it is.
fn meaning_text(r: &ExperimentResult, c: &Comparison) -> String {
    let mut s = c.meaning.clone();
    if let Some(n) = &r.arms[c.arm].neighbour {
        let _ = write!(s, "; {}", neighbour_line(n));
    }
    if let Some(cov) = c.coverage
        && cov < crate::stats::CONFIDENCE
    {
        let _ = write!(
            s,
            " ({} rounds: the interval is their range, {} sure; --runs 6 or more for 95%)",
            c.pairs,
            pct(cov, 0)
        );
    }
    s
}

/// What a neighbour did, in one line.
pub fn neighbour_line(n: &crate::experiment::neighbour::NeighbourReport) -> String {
    use crate::experiment::NeighbourKind::*;
    let rate = n.rate_per_s.map_or("-".to_string(), |r| match n.kind {
        SplitLocks => format!("{} split locks/s", crate::render::charts::short_number(r)),
        Memory => format!("{}/s read", human_bytes(r as u64)),
        Atomics => format!("{} locked adds/s", crate::render::charts::short_number(r)),
    });
    let mut s = format!("neighbour on CPU {}: {rate}", n.cpu);
    if let Some(ns) = n.alone_split_lock_ns {
        let _ = write!(
            s,
            "; {} per split lock alone ({})",
            crate::format::human_ns(ns),
            n.mechanism.map_or("unclassified", |m| m.as_str())
        );
    }
    if n.trapped {
        s.push_str(
            if n.mechanism == Some(SplitLockMechanism::TrappedByKernel) {
                "; trapped by this kernel, so it barely locks the bus"
            } else {
                "; trapped by the host, so it barely locks the bus"
            },
        );
    }
    if let Some(f) = &n.failure {
        let _ = write!(s, "; it stopped: {f}");
    }
    s
}

fn scaling_text(out: &mut String, s: &Scaling, width: u16) {
    let _ = writeln!(
        out,
        "Scaling (throughput against {} CPU{}):",
        s.points[0].cpus,
        if s.points[0].cpus == 1 { "" } else { "s" }
    );
    // Headers of short words, so the table fits 40 columns without breaking one.
    let mut t = columns(
        width,
        &["CPUs", "speedup", "95% interval", "ideal", "% of ideal"],
    );
    for p in &s.points {
        let interval = match (p.speedup_low, p.speedup_high) {
            (Some(l), Some(h)) if l != h => format!("[{l:.2}, {h:.2}]"),
            _ => String::new(),
        };
        t.add_row(vec![
            p.cpus.to_string(),
            p.speedup.map_or("-".into(), |v| format!("{v:.2}")),
            interval,
            format!("{:.2}", p.ideal),
            format!(
                "{}{}",
                p.efficiency.map_or("-".into(), |e| pct(e, 0)),
                if s.falls_away_at == Some(p.cpus) {
                    " <- falls away"
                } else {
                    ""
                }
            ),
        ]);
    }
    align_right(&mut t, &[0, 1, 3]);
    out.push_str(&lines(t, 2));
    let line = match s.falls_away_at {
        Some(n) => format!(
            "It falls away from ideal at {n} CPUs: the whole interval is below {} of \
             ideal, so more CPUs buy little (contention: a shared line, a lock, memory \
             bandwidth), the Netflix JVM case's question answered before buying the bigger \
             machine.",
            pct(ratios::SCALING_FALLS_AWAY_EFFICIENCY, 0)
        ),
        None => format!(
            "It stays above {} of ideal over the counts measured.",
            pct(ratios::SCALING_FALLS_AWAY_EFFICIENCY, 0)
        ),
    };
    out.push_str(&wrap(&line, width, 0));
}

fn md_escape(s: &str) -> String {
    s.replace('|', "\\|")
}

/// The experiment as Markdown (a table per section).
pub fn render_markdown(r: &ExperimentResult) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# cpudoctor experiment: `{}`\n", r.command.join(" "));
    let _ = writeln!(
        out,
        "{} runs each after {} warmup, interleaved; {}.  \n{}\n",
        r.runs,
        r.warmup,
        measure_words(&r.measure),
        machine_line(r)
    );
    if !r.comparisons.is_empty() {
        let _ = writeln!(
            out,
            "| Variant | Against | Median | Effect [95% interval] | Meaning |\n|---|---|---:|---|---|"
        );
        for c in &r.comparisons {
            let arm = &r.arms[c.arm];
            let mut meaning = c.meaning.clone();
            if let Some(n) = &arm.neighbour {
                let _ = write!(meaning, " ({})", neighbour_line(n));
            }
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} |",
                md_escape(&arm.variant.name()),
                md_escape(&r.arms[c.baseline].variant.name()),
                median_text(&r.measure, arm.median),
                effect_text(c),
                md_escape(&meaning)
            );
        }
        out.push('\n');
    }
    if let Some(s) = &r.scaling {
        let _ = writeln!(
            out,
            "## Scaling\n\n| CPUs | Speedup | Interval | Ideal | Efficiency |\n|---:|---:|---|---:|---:|"
        );
        for p in &s.points {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {:.2} | {} |",
                p.cpus,
                p.speedup.map_or("-".into(), |v| format!("{v:.2}")),
                match (p.speedup_low, p.speedup_high) {
                    (Some(l), Some(h)) => format!("[{l:.2}, {h:.2}]"),
                    _ => "-".into(),
                },
                p.ideal,
                p.efficiency.map_or("-".into(), |e| pct(e, 0))
            );
        }
        if let Some(n) = s.falls_away_at {
            let _ = writeln!(out, "\nFalls away from ideal at {n} CPUs.");
        }
        out.push('\n');
    }
    let failed: Vec<_> = r.arms.iter().filter(|a| a.failure.is_some()).collect();
    if !failed.is_empty() {
        let _ = writeln!(out, "## Failed\n");
        for a in failed {
            let _ = writeln!(
                out,
                "- {}: {}",
                md_escape(&a.variant.name()),
                md_escape(a.failure.as_deref().unwrap_or_default())
            );
        }
        out.push('\n');
    }
    if !r.not_run.is_empty() {
        let _ = writeln!(out, "## Not run on this machine\n");
        for l in &r.not_run {
            let _ = writeln!(out, "- {}", md_escape(l));
        }
    }
    out
}

/// Chart of the effects ([`interval_chart`]): per comparison a dot at its speed factor with
/// its interval as a whisker, on a log axis centred on 1 (no effect).
pub fn effects_svg(r: &ExperimentResult) -> Option<String> {
    let rows: Vec<IntervalRow> = r
        .comparisons
        .iter()
        .filter_map(|c| {
            let (value, low, high) = speed_interval(c)?;
            Some(IntervalRow {
                label: format!(
                    "{} vs {}",
                    r.arms[c.arm].variant.name(),
                    r.arms[c.baseline].variant.name()
                ),
                value,
                low,
                high,
            })
        })
        .collect();
    interval_chart(
        "Effect on the command (right is faster)",
        "speed against its baseline, log scale",
        &rows,
    )
    .ok()
}

/// Chart of the scaling curve against the ideal line.
pub fn scaling_svg(s: &Scaling) -> Option<String> {
    let measured: Vec<(f64, f64)> = s
        .points
        .iter()
        .filter_map(|p| Some((p.cpus as f64, p.speedup?)))
        .collect();
    let line = |label: &str, color, dashed, points| Line {
        label: label.into(),
        color,
        dashed,
        points,
    };
    let lines = vec![
        line("measured", 0, false, measured),
        line(
            "ideal",
            1,
            true,
            s.points.iter().map(|p| (p.cpus as f64, p.ideal)).collect(),
        ),
        line(
            "interval low",
            0,
            true,
            s.points
                .iter()
                .filter_map(|p| Some((p.cpus as f64, p.speedup_low?)))
                .collect(),
        ),
        line(
            "interval high",
            0,
            true,
            s.points
                .iter()
                .filter_map(|p| Some((p.cpus as f64, p.speedup_high?)))
                .collect(),
        ),
    ];
    xy_chart(
        "Throughput against CPUs (relative to the fewest)",
        "CPUs",
        "speedup",
        &lines,
    )
    .ok()
}

/// The HTML page of `report` for experiments: per experiment its screen as a table, the
/// effects chart and the scaling chart.
pub fn render_html(results: &[(String, ExperimentResult)]) -> String {
    let mut h = String::new();
    let title = format!(
        "cpudoctor experiment: {}",
        results
            .iter()
            .map(|(l, _)| l.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    h.push_str(&super::html::page_head(&title, ""));
    for (i, (label, r)) in results.iter().enumerate() {
        let esc = super::html::escape;
        let _ = writeln!(
            h,
            "<h2>{}: <code>{}</code></h2>\n<p class=\"machine\">{}</p>",
            esc(label),
            esc(&r.command.join(" ")),
            esc(&machine_line(r))
        );
        let _ = writeln!(
            h,
            "<table><tr><th>Variant</th><th>Against</th><th>Median</th>\
             <th>Effect [95% interval]</th><th>Meaning</th></tr>"
        );
        for c in &r.comparisons {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                esc(&r.arms[c.arm].variant.name()),
                esc(&r.arms[c.baseline].variant.name()),
                esc(&median_text(&r.measure, r.arms[c.arm].median)),
                esc(&effect_text(c)),
                esc(&c.meaning)
            );
        }
        h.push_str("</table>\n");
        if let Some(svg) = effects_svg(r) {
            let _ = writeln!(
                h,
                "<figure class=\"chart\" id=\"effects-{i}\" data-kind=\"effects\">{svg}</figure>"
            );
        }
        if let Some(svg) = r.scaling.as_ref().and_then(scaling_svg) {
            let _ = writeln!(
                h,
                "<figure class=\"chart\" id=\"scaling-{i}\" data-kind=\"scaling\">{svg}</figure>"
            );
        }
        for l in r
            .not_run
            .iter()
            .cloned()
            .chain(r.arms.iter().filter_map(|a| {
                a.failure
                    .as_ref()
                    .map(|f| format!("{} failed: {f}", a.variant.name()))
            }))
        {
            let _ = writeln!(h, "<p>{}</p>", esc(&l));
        }
    }
    h.push_str(&super::html::page_foot());
    h
}
