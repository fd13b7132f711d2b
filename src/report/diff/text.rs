//! The diff as text: a table for the terminal, pretty JSON for scripts, and the cell wording
//! (figures, changes, verdicts) that the HTML report shares.

use super::{
    Change, Diff, DuplicateProbe, FactDiff, HazardChange, Judged, MetricDiff, MetricSide,
    VerdictMove,
};
use crate::report::schema::Better;
use crate::report::terminal::{level_word, table};
use std::fmt::Write;

/// A figure with about four significant digits, for tables.
pub fn format_value(v: f64) -> String {
    let a = v.abs();
    if a >= 1000.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// One side of a metric as a table cell: `25.49 ns ±6.6%`, or `not measured`.
pub fn side_cell(s: Option<&MetricSide>, unit: &str) -> String {
    match s {
        None => "not measured".to_string(),
        Some(s) => format!(
            "{} {unit}{}",
            format_value(s.value),
            s.relative_spread
                .map_or(String::new(), |r| format!(" ±{:.1}%", r * 100.0))
        ),
    }
}

/// The change column in words.
pub fn change_words(d: &MetricDiff) -> &'static str {
    match d.change {
        Change::Worse => match d.better {
            Better::Lower => "WORSE (higher)",
            _ => "WORSE (lower)",
        },
        Change::Better => match d.better {
            Better::Lower => "better (lower)",
            _ => "better (higher)",
        },
        Change::Changed => "changed",
        Change::Same => "same (within noise)",
        Change::NotMeasuredOld => "not measured in old",
        Change::NotMeasuredNew => "not measured in new",
        Change::UnitsDiffer => "units differ",
    }
}

/// The ratio column: `1.69x`, or `-`.
pub fn ratio_cell(d: &MetricDiff) -> String {
    d.ratio.map_or("-".to_string(), |r| format!("{r:.2}x"))
}

/// A verdict side as a table cell: `notice: 25.5 ns = 90 cycles`, or `not judged`.
pub fn judged_cell(j: Option<&Judged>) -> String {
    j.map_or("not judged".to_string(), |j| {
        format!("{}: {}", level_word(j.level), j.figure)
    })
}

/// What a changed verdict means for software, in words: the patterns it now hurts more or
/// less, or why it is not compared.
pub fn verdict_move_words(h: &HazardChange) -> String {
    match h.direction {
        VerdictMove::NotJudged => {
            "not compared: judged in one run only (its probe was not measured in the other)"
                .to_string()
        }
        VerdictMove::WithinNoise => "not a regression: crossed a threshold within noise (no \
             figure it reads moved beyond both runs' spread)"
            .to_string(),
        _ if h.hurts.is_empty() => "(hazard unknown to this cpudoctor)".to_string(),
        VerdictMove::Worse => format!("now hurts more: {}", h.hurts.join("; ")),
        VerdictMove::Better => format!("now hurts less: {}", h.hurts.join("; ")),
    }
}

/// A probe listed more than once in one file, in words.
pub fn duplicate_words(d: &Diff, dup: &DuplicateProbe) -> String {
    format!(
        "Probe {} is listed {} times in {} ({}): only the first entry is compared",
        dup.probe,
        dup.times,
        dup.run,
        if dup.run == "old" {
            &d.old.label
        } else {
            &d.new.label
        }
    )
}

/// The summary sentence: counts of regressions, improvements, noise and unmeasured.
pub fn summary_line(d: &Diff) -> String {
    let c = &d.counts;
    format!(
        "{} worse, {} better, {} changed (no direction), {} within noise, {} not compared",
        c.worse, c.better, c.changed, c.same, c.not_compared
    )
}

/// The diff for a terminal of `width` columns.
pub fn render_diff(d: &Diff, width: u16) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "old: {} ({}, cpudoctor {})",
        d.old.label, d.old.command, d.old.tool_version
    );
    let _ = writeln!(
        s,
        "new: {} ({}, cpudoctor {})\n",
        d.new.label, d.new.command, d.new.tool_version
    );

    let differing: Vec<&FactDiff> = d.machine.iter().filter(|f| f.differs).collect();
    if differing.is_empty() {
        let _ = writeln!(s, "Machine facts: identical.\n");
    } else {
        let _ = writeln!(s, "Machine facts that differ:");
        let mut t = table(width, &["Fact", "Old", "New"]);
        for f in differing {
            t.add_row(vec![f.fact.clone(), f.old.clone(), f.new.clone()]);
        }
        let _ = writeln!(s, "{t}\n");
    }

    if d.metrics.is_empty() {
        let _ = writeln!(s, "Metrics: neither file has a probe that ran ok.\n");
    } else {
        let _ = writeln!(s, "Metrics (new/old):");
        let mut t = table(
            width,
            &["Probe", "Metric", "Old", "New", "New/Old", "Change"],
        );
        for m in &d.metrics {
            t.add_row(vec![
                m.probe.clone(),
                m.metric.clone(),
                side_cell(m.old.as_ref(), &m.unit),
                side_cell(m.new.as_ref(), &m.unit),
                ratio_cell(m),
                change_words(m).to_string(),
            ]);
        }
        let _ = writeln!(s, "{t}");
        let _ = writeln!(s, "{}.", summary_line(d));
        let _ = writeln!(s, "Rule: {}.\n", d.rule);
    }

    for n in &d.not_measured {
        let _ = writeln!(
            s,
            "Not measured in {} ({}): probe {} ({}); its metrics are not compared.",
            n.missing_in,
            if n.missing_in == "old" {
                &d.old.label
            } else {
                &d.new.label
            },
            n.probe,
            n.reason
        );
    }
    for dup in &d.duplicate_probes {
        let _ = writeln!(s, "{}.", duplicate_words(d, dup));
    }
    if !d.not_measured.is_empty() || !d.duplicate_probes.is_empty() {
        s.push('\n');
    }

    if d.hazards.is_empty() {
        let _ = writeln!(
            s,
            "Hazards: no verdict changed ({} judged the same).",
            d.hazards_unchanged.len()
        );
    } else {
        let _ = writeln!(s, "Hazards whose verdict changed:");
        let mut t = table(
            width,
            &["Hazard", "Old", "New", "Software that pays for it"],
        );
        for h in &d.hazards {
            let hurts = verdict_move_words(h);
            t.add_row(vec![
                format!("{} ({})", h.title, h.hazard),
                judged_cell(h.old.as_ref()),
                judged_cell(h.new.as_ref()),
                hurts,
            ]);
        }
        let _ = writeln!(s, "{t}");
        // What the change means, from the run that judged it worse; nothing for a threshold
        // crossed within noise, which means nothing new.
        for h in d
            .hazards
            .iter()
            .filter(|h| !h.explanation.is_empty() && h.direction != VerdictMove::WithinNoise)
        {
            let run = match (&h.old, &h.new) {
                (Some(o), Some(n)) if o.level > n.level => "old",
                (_, Some(_)) => "new",
                _ => "old",
            };
            let _ = writeln!(s, "{} in the {run} run: {}", h.title, h.explanation);
        }
        if !d.hazards_unchanged.is_empty() {
            let _ = writeln!(s, "Unchanged: {}.", d.hazards_unchanged.join(", "));
        }
    }
    s
}

/// The diff as pretty JSON, newline-terminated.
pub fn diff_to_json(d: &Diff) -> String {
    let mut s = serde_json::to_string_pretty(d).expect("a diff always serialises");
    s.push('\n');
    s
}
