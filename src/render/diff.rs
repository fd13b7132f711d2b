//! A fingerprint diff ([`crate::compare::fingerprint::Diff`]) as text: sections for the terminal (what changed first), pretty JSON for scripts,
//! and the cell wording (figures, changes, verdicts) that the HTML report shares.

use crate::compare::fingerprint::{
    Change, Diff, DisturbedProbe, DuplicateProbe, FactDiff, HazardChange, Judged, MetricDiff,
    MetricSide, RunInfo, Side, VerdictMove,
};
use crate::format::{human_value, pct};
use crate::render::text::Style;
use crate::render::text::{self, wrap};
use crate::schema::Better;
use crate::words::disturbance::{RunsDisturbed, not_compared};
use std::fmt::Write;

/// One side of a metric as every view shows it (`24.4 ns ±0.6%`, `64 MiB`, `2.29x`), or
/// `not measured`.
pub fn side_cell(s: Option<&MetricSide>, unit: &str) -> String {
    match s {
        None => "not measured".to_string(),
        Some(s) => format!(
            "{}{}",
            human_value(s.value, unit),
            s.relative_spread
                .filter(|r| *r > 0.0)
                .map_or(String::new(), |r| format!(" ±{}", pct(r, 1)))
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
        Change::HostDrift => "moved within the VM host's drift",
        Change::NotMeasuredOld => "not measured in old",
        Change::NotMeasuredNew => "not measured in new",
        Change::UnitsDiffer => "units differ",
        Change::Disturbed => "not compared: measured while disturbed",
    }
}

/// The ratio column: `1.69x`, or `-`.
pub fn ratio_cell(d: &MetricDiff) -> String {
    d.ratio.map_or("-".to_string(), |r| format!("{r:.2}x"))
}

/// A verdict side as a table cell: `notice: 25.5 ns = 90 cycles`, or `not judged`.
pub fn judged_cell(j: Option<&Judged>) -> String {
    j.map_or("not judged".to_string(), |j| {
        format!("{}: {}", j.level.word(), j.figure)
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
        VerdictMove::Disturbed => crate::words::disturbance::VERDICT_NOT_COMPARED.to_string(),
        _ if h.hurts.is_empty() => "(hazard unknown to this cpudoctor)".to_string(),
        VerdictMove::Worse => format!("now hurts more: {}", h.hurts.join("; ")),
        VerdictMove::Better => format!("now hurts less: {}", h.hurts.join("; ")),
    }
}

/// Why a disturbed probe's figures are not compared, in words: `not compared: the old run was
/// measured under a CPU quota of 0.5 CPU (throttled in 64 of 158 periods, 0.83 s)`.
pub fn disturbed_words(p: &DisturbedProbe) -> String {
    match (&p.old, &p.new) {
        (Some(o), Some(_)) => not_compared(RunsDisturbed::Both, o),
        (Some(o), None) => not_compared(RunsDisturbed::Old, o),
        (None, Some(n)) => not_compared(RunsDisturbed::New, n),
        (None, None) => "not compared".to_string(),
    }
}

/// The probes measured while disturbed, one line each with its figures.
fn disturbed_text(s: &mut String, d: &Diff, width: u16, name_w: usize) {
    if d.disturbed.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "\n{}",
        crate::words::disturbance::not_compared_title(d.counts.disturbed)
    );
    for p in &d.disturbed {
        s.push_str(&wrap(
            &format!("{}: {}", p.probe, disturbed_words(p)),
            width,
            2,
        ));
        for m in d
            .metrics
            .iter()
            .filter(|m| m.probe == p.probe && m.change == Change::Disturbed)
        {
            s.push_str(&metric_line(m, name_w, width));
        }
    }
}

/// A probe listed more than once in one file, in words.
pub fn duplicate_words(d: &Diff, dup: &DuplicateProbe) -> String {
    format!(
        "Probe {} is listed {} times in {} ({}): only the first entry is compared",
        dup.probe,
        dup.times,
        dup.run.word(),
        if dup.run == Side::Old {
            &d.old.label
        } else {
            &d.new.label
        }
    )
}

/// The probes measured in one run only, one sentence per run and reason:
/// `Not measured in old (a.json): probes c2c, sharing (not in this file); their metrics are
/// not compared.`
pub fn not_measured_lines(d: &Diff) -> Vec<String> {
    let mut groups: Vec<(Side, &str, Vec<&str>)> = Vec::new();
    for n in &d.not_measured {
        match groups
            .iter_mut()
            .find(|(side, reason, _)| *side == n.missing_in && *reason == n.reason)
        {
            Some((_, _, probes)) => probes.push(&n.probe),
            None => groups.push((n.missing_in, &n.reason, vec![&n.probe])),
        }
    }
    groups
        .into_iter()
        .map(|(side, reason, probes)| {
            let (noun, theirs) = if probes.len() == 1 {
                ("probe", "its metrics are")
            } else {
                ("probes", "their metrics are")
            };
            format!(
                "Not measured in {} ({}): {noun} {} ({reason}); {theirs} not compared.",
                side.word(),
                if side == Side::Old {
                    &d.old.label
                } else {
                    &d.new.label
                },
                probes.join(", "),
            )
        })
        .collect()
}

/// The summary sentence: counts of regressions, improvements, noise and unmeasured.
pub fn summary_line(d: &Diff) -> String {
    let c = &d.counts;
    format!(
        "{} worse, {} better, {} changed (no direction), {} within noise, {}{} not compared",
        c.worse,
        c.better,
        c.changed,
        c.same,
        if c.host_drift > 0 {
            format!("{} within the VM host's drift, ", c.host_drift)
        } else {
            String::new()
        },
        c.not_compared
    )
}

/// The diff for a terminal of `style` (its width): what changed first, the rest counted in
/// one line. Same as [`render_diff_with`] without `--all`.
pub fn render_diff(d: &Diff, style: impl Into<Style>) -> String {
    render_diff_with(d, style, false)
}

/// One figure on one line (`  pause_ns   24.4 ns ±0.6% -> 43.0 ns   1.76x`), or on two when
/// the width does not hold it.
fn metric_line(m: &MetricDiff, name_w: usize, width: u16) -> String {
    let values = format!(
        "{} -> {}   {}",
        side_cell(m.old.as_ref(), &m.unit),
        side_cell(m.new.as_ref(), &m.unit),
        ratio_cell(m)
    );
    let one = format!("  {:<name_w$}  {values}", m.metric);
    if one.chars().count() <= width as usize {
        format!("{one}\n")
    } else {
        format!("  {}\n      {values}\n", m.metric)
    }
}

/// `old: a.json (check, cpudoctor 0.1.0)`.
fn run_line(which: &str, r: &RunInfo) -> String {
    let runs = if r.runs > 1 {
        format!(", {} runs", r.runs)
    } else {
        String::new()
    };
    format!(
        "{which}: {} ({}{runs}, cpudoctor {})",
        r.label, r.command, r.tool_version
    )
}

/// The diff for a terminal of `style` (its width), in the order a reader needs it: the machine
/// facts that differ, the figures that got worse (each with the hazard that reads it and what
/// it costs software on both machines), those that got better or changed, the verdicts that
/// changed, then one line counting what did not change (`all` lists those figures too).
pub fn render_diff_with(d: &Diff, style: impl Into<Style>, all: bool) -> String {
    let width = style.into().width;
    let mut s = wrap(&run_line("old", &d.old), width, 0);
    s.push_str(&wrap(&run_line("new", &d.new), width, 0));
    s.push('\n');
    machine_facts_text(&mut s, d, width);
    let name_w = d.metrics.iter().map(|m| m.metric.len()).max().unwrap_or(0);
    moved_figures_text(&mut s, d, width, all, name_w);
    disturbed_text(&mut s, d, width, name_w);
    costs_text(&mut s, d, width);
    verdicts_text(&mut s, d, width);
    not_measured_text(&mut s, d, width);
    if all {
        unmoved_figures_text(&mut s, d, width, name_w);
    }
    footer_text(&mut s, d, width, all);
    s
}

/// A section of the figures whose change is `change`, titled with their count.
fn figures_section(
    s: &mut String,
    d: &Diff,
    title: &str,
    change: Change,
    name_w: usize,
    width: u16,
) {
    let ms: Vec<&MetricDiff> = d.metrics.iter().filter(|m| m.change == change).collect();
    if ms.is_empty() {
        return;
    }
    let _ = writeln!(s, "\n{title} ({})", ms.len());
    for m in ms {
        s.push_str(&metric_line(m, name_w, width));
    }
}

fn machine_facts_text(s: &mut String, d: &Diff, width: u16) {
    let differing: Vec<&FactDiff> = d.machine.iter().filter(|f| f.differs).collect();
    if differing.is_empty() {
        s.push_str("Machine facts: identical.\n");
    } else {
        s.push_str("Machine facts that differ\n");
        let w = differing.iter().map(|f| f.fact.len()).max().unwrap_or(0);
        for f in differing {
            let line = format!("  {:<w$}  {} -> {}", f.fact, f.old, f.new);
            if line.chars().count() <= width as usize {
                let _ = writeln!(s, "{line}");
            } else {
                // Each side on its lines, wrapped at word boundaries under its label; on a
                // screen too narrow for the label beside 20 columns of text, under the fact.
                let (old_label, new_label) = if (width as usize) < w + 7 + 20 {
                    let _ = writeln!(s, "  {}", f.fact);
                    ("    ".to_string(), "    -> ".to_string())
                } else {
                    (format!("  {:<w$}  ", f.fact), format!("  {:<w$}  -> ", ""))
                };
                s.push_str(&text::wrap_labelled(&f.old, &old_label, width));
                s.push_str(&text::wrap_labelled(&f.new, &new_label, width));
            }
        }
    }
}

/// Worse, better and changed figures, each section with its count; the host's drift counted
/// in one line (listed with `all`).
fn moved_figures_text(s: &mut String, d: &Diff, width: u16, all: bool, name_w: usize) {
    let c = &d.counts;
    if d.metrics.is_empty() {
        s.push_str("\nMetrics: neither file has a probe that ran ok.\n");
    } else if c.worse + c.better + c.changed == 0 && c.disturbed > 0 {
        s.push('\n');
        s.push_str(&wrap(
            crate::words::disturbance::NONE_MOVED_SOME_DISTURBED,
            width,
            0,
        ));
    } else if c.worse + c.better + c.changed == 0 {
        s.push_str(if c.host_drift > 0 {
            "\nNo figure moved beyond noise and the VM host's drift.\n"
        } else {
            "\nNo figure moved beyond noise.\n"
        });
    }
    figures_section(s, d, "Worse in new", Change::Worse, name_w, width);
    figures_section(s, d, "Better in new", Change::Better, name_w, width);
    figures_section(
        s,
        d,
        "Changed (no better direction)",
        Change::Changed,
        name_w,
        width,
    );
    if all {
        figures_section(
            s,
            d,
            "Within what a VM's host moves them with nothing changed, not counted",
            Change::HostDrift,
            name_w,
            width,
        );
    } else if c.host_drift > 0 {
        s.push('\n');
        s.push_str(&wrap(
            &format!(
                "Within what a VM's host moves them with nothing changed, not counted: {}; \
                 `--all` lists them.",
                crate::format::count_of(c.host_drift, "figure", "figures")
            ),
            width,
            0,
        ));
    }
}

/// What the hazards that read a moved figure cost software on each machine.
fn costs_text(s: &mut String, d: &Diff, width: u16) {
    if !d.costs.is_empty() {
        s.push_str("\nHazards that read them, and what they cost software\n");
        for c in &d.costs {
            let _ = writeln!(
                s,
                "  {} ({}): {} -> {}",
                c.title,
                c.moved.join(", "),
                c.old.as_ref().map_or("not judged", |j| j.level.word()),
                c.new.as_ref().map_or("not judged", |j| j.level.word()),
            );
            for (side, cost) in [("old", &c.old_cost), ("new", &c.new_cost)] {
                if let Some(cost) = cost {
                    s.push_str(&wrap(&format!("{side}: {cost}"), width, 4));
                }
            }
        }
    }
}

/// The verdicts that changed; those that crossed a threshold within noise in one line.
fn verdicts_text(s: &mut String, d: &Diff, width: u16) {
    let c = &d.counts;
    let (noise, moved_verdicts): (Vec<&HazardChange>, Vec<&HazardChange>) = d
        .hazards
        .iter()
        .partition(|h| h.direction == VerdictMove::WithinNoise);
    if !moved_verdicts.is_empty() {
        s.push_str("\nVerdicts that changed\n");
        let (one_run, both): (Vec<&HazardChange>, Vec<&HazardChange>) = moved_verdicts
            .into_iter()
            .partition(|h| h.direction == VerdictMove::NotJudged);
        for h in &both {
            s.push_str(&wrap(
                &format!(
                    "{} ({}): {} -> {}; {}",
                    h.title,
                    h.hazard,
                    judged_cell(h.old.as_ref()),
                    judged_cell(h.new.as_ref()),
                    verdict_move_words(h)
                ),
                width,
                2,
            ));
        }
        // Judged in one run only: the same reason for each, said once.
        for h in &one_run {
            s.push_str(&wrap(
                &format!(
                    "{} ({}): {} -> {}",
                    h.title,
                    h.hazard,
                    judged_cell(h.old.as_ref()),
                    judged_cell(h.new.as_ref()),
                ),
                width,
                2,
            ));
        }
        if let Some(h) = one_run.first() {
            let why = verdict_move_words(h);
            let mut why_chars = why.chars();
            let why: String = why_chars
                .next()
                .map(|c| c.to_uppercase().chain(why_chars).collect())
                .unwrap_or_default();
            s.push_str(&wrap(&format!("{why}."), width, 2));
        }
    }

    if !noise.is_empty() {
        let moves: Vec<String> = noise
            .iter()
            .map(|h| {
                format!(
                    "{} {} -> {}",
                    h.hazard,
                    h.old.as_ref().map_or("not judged", |j| j.level.word()),
                    h.new.as_ref().map_or("not judged", |j| j.level.word()),
                )
            })
            .collect();
        s.push('\n');
        s.push_str(&wrap(
            &format!(
                "Crossed a threshold within noise, not a change: {} (no figure they read \
                 moved beyond both runs' noise{}).",
                moves.join(", "),
                if c.host_drift > 0 {
                    " and the VM host's drift"
                } else {
                    ""
                }
            ),
            width,
            0,
        ));
    }
}

/// Probes measured in one run only, and probes a file lists twice.
fn not_measured_text(s: &mut String, d: &Diff, width: u16) {
    if !d.not_measured.is_empty() || !d.duplicate_probes.is_empty() {
        s.push('\n');
    }
    for line in not_measured_lines(d) {
        s.push_str(&wrap(&line, width, 0));
    }
    for dup in &d.duplicate_probes {
        s.push_str(&wrap(&format!("{}.", duplicate_words(d, dup)), width, 0));
    }
}

/// With `--all`: the figures within noise and those not compared.
fn unmoved_figures_text(s: &mut String, d: &Diff, width: u16, name_w: usize) {
    figures_section(s, d, "Within noise", Change::Same, name_w, width);
    let others: Vec<&MetricDiff> = d
        .metrics
        .iter()
        .filter(|m| {
            matches!(
                m.change,
                Change::NotMeasuredOld | Change::NotMeasuredNew | Change::UnitsDiffer
            )
        })
        .collect();
    if !others.is_empty() {
        let _ = writeln!(s, "\nNot compared ({})", others.len());
        for m in others {
            s.push_str(&metric_line(m, name_w, width));
        }
    }
}

/// The counts, the rule and how sure the comparison can be.
fn footer_text(s: &mut String, d: &Diff, width: u16, all: bool) {
    let c = &d.counts;
    s.push('\n');
    let mut unchanged = format!("In all: {}", summary_line(d));
    if !d.hazards_unchanged.is_empty() {
        unchanged.push_str(&format!(
            "; verdicts unchanged: {}",
            d.hazards_unchanged.join(", ")
        ));
    }
    unchanged.push('.');
    if !all && c.same + c.not_compared > 0 {
        unchanged.push_str(" `--all` lists every figure.");
    }
    s.push_str(&wrap(&unchanged, width, 0));
    let rule = if all {
        d.rule.words()
    } else {
        format!("{}; `--all` gives the rule in full", d.rule.short_words())
    };
    s.push_str(&wrap(&format!("Rule: {rule}."), width, 0));
    if d.old.runs == 1 && d.new.runs == 1 {
        s.push_str(&wrap(
            "How sure: both files are single runs, whose intervals cover the repetitions \
             inside a run, not how a shared machine moves between runs (vCPU placement, a \
             neighbour's load); a baseline saved with `check --runs 5` carries that noise.",
            width,
            0,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::fingerprint::diff;
    use crate::compare::fingerprint::tests::pause_at;
    use crate::schema::test_support::sample_fingerprint;

    #[test]
    fn identical_runs_say_the_machine_facts_are_identical() {
        let fp = sample_fingerprint();
        assert!(render_diff(&diff(&fp, &fp, "a", "a"), 100).contains("Machine facts: identical."));
    }

    #[test]
    fn a_probe_only_one_run_has_is_named_as_not_measured() {
        let old = sample_fingerprint();
        let mut new = sample_fingerprint();
        new.probes.retain(|p| p.name != "pause");
        let text = render_diff(&diff(&old, &new, "a", "b"), 100);
        assert!(
            text.contains("Not measured in new (b): probe pause"),
            "{text}"
        );
    }

    #[test]
    fn on_two_guests_a_move_within_the_hosts_drift_is_said_not_counted() {
        let text = render_diff(&diff(&pause_at(100.0), &pause_at(140.0), "a", "b"), 400);
        assert!(text.contains("what a VM's host moves them"), "{text}");
        assert!(text.contains("2 within the VM host's drift"), "{text}");
        assert!(!text.contains("now hurts more"), "{text}");
    }

    #[test]
    fn a_probe_listed_twice_is_named_once() {
        let old = sample_fingerprint();
        let mut new = sample_fingerprint();
        let again = new.probes[0].clone();
        new.probes.push(again.clone());
        new.probes.push(again);
        assert!(render_diff(&diff(&old, &new, "a", "b"), 200).contains(
            "Probe pause is listed 3 times in new (b): only the first entry is compared"
        ));
    }
}
