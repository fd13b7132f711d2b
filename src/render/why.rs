//! The terminal form of [`Why`], the first section of a diagnosis diff: the loss, the
//! machines' figures, the points each mechanism's figure explains against those observed,
//! the unexplained rest, the top functions' predicted against observed change, and what to
//! do. Fits `width` columns.

use crate::compare::why::{Basis, MechanismWhy, Why, figure_label, figure_words, measure_words};
use crate::diagnose::symbolize::kallsyms::KERNEL_MODULE;
use crate::render::profile_diff::state_label;
use crate::render::text::Style;
use crate::render::text::{table, wrap, wrap_labelled};
use crate::words::why as words;
use std::fmt::Write;

/// Functions listed with their prediction.
const FUNCTIONS: usize = 6;

fn basis_word(b: Basis) -> &'static str {
    words::unit_word(match b {
        Basis::Run => "run",
        Basis::Unit => "unit",
        Basis::WallSecond => "second",
    })
}

fn points_cell(p: f64) -> String {
    if p.abs() < 0.05 {
        "0.0 pt".into()
    } else {
        format!("{p:+.1} pt")
    }
}

fn ratio_cell(r: Option<f64>) -> String {
    r.map_or_else(|| "-".into(), words::ratio_words)
}

/// The figure of a mechanism on both sides, as the table shows it.
fn figure_cell(w: &Why, m: &MechanismWhy) -> String {
    let Some(f) = m.figure else {
        return "none".into();
    };
    figure_words(f, m.old_figure, &w.figures)
        .unwrap_or_else(|| words::figure_not_known(figure_label(f)))
}

/// One accounting: every mechanism a figure predicts, signed, and the remainder, adding up to
/// the points observed, in one sentence (the Zen 3 -> Emerald Rapids PAUSE diff said "core
/// clock explains 21 of the 26 points" beside "Unexplained: 17 of the 26": PAUSE's -12.7 was in
/// neither). The terminal and the HTML report say the same.
pub fn accounting(w: &Why) -> String {
    let predicted: Vec<(String, f64)> = w
        .mechanisms
        .iter()
        .filter(|m| m.unpredicted < m.functions && m.explained_points.abs() >= 0.05)
        .map(|m| (figure_cell(w, m), m.explained_points))
        .collect();
    let listed: f64 = predicted.iter().map(|(_, p)| p).sum();
    words::accounting(
        &predicted,
        w.explained_points - listed,
        w.unexplained_points,
        w.total_points,
    )
}

/// The section, newline-terminated.
pub fn render(w: &Why, style: impl Into<Style>) -> String {
    let width = style.into().width;
    let mut o = String::new();
    o.push_str(&wrap(
        words::heading(w.total_points, w.beyond_noise),
        width,
        0,
    ));
    let unit = basis_word(w.basis);
    match &w.loss {
        Some(l) => {
            let interval = l
                .low
                .zip(l.high)
                .zip(l.coverage)
                .map(|((a, b), c)| (a, b, c));
            o.push_str(&wrap_labelled(
                &words::headline(
                    l.ratio,
                    interval,
                    &measure_words(&l.measure),
                    (l.old.len(), l.new.len()),
                    crate::stats::CONFIDENCE,
                ),
                "",
                width,
            ));
            if let Some(cpu) = w.cpu.points {
                o.push_str(&wrap_labelled(
                    &words::cpu_share_of_loss(cpu, l.points, unit),
                    "",
                    width,
                ));
            }
        }
        None => {
            if let Some(why) = &w.loss_not_measured {
                o.push_str(&wrap_labelled(why, "", width));
            }
            o.push_str(&wrap_labelled(
                &words::cpu_headline(w.cpu.old_s, w.cpu.new_s, w.cpu.ratio, unit),
                "",
                width,
            ));
        }
    }
    // The figures a listed mechanism reads, and any that moved by 2% or more; the JSON has
    // them all.
    let read: Vec<_> = w
        .mechanisms
        .iter()
        .flat_map(|m| [m.figure, m.old_figure])
        .flatten()
        .collect();
    let figures: Vec<_> = w
        .figures
        .iter()
        .filter(|f| read.contains(&f.figure) || f.ratio.is_some_and(|r| (r - 1.0).abs() >= 0.02))
        .collect();
    if !figures.is_empty() {
        let lines: Vec<String> = figures
            .iter()
            .map(|f| words::figure_line(figure_label(f.figure), f.figure.unit(), f.old, f.new))
            .collect();
        o.push_str(&wrap_labelled(&lines.join("; "), "Figures: ", width));
    }
    let shown: Vec<&MechanismWhy> = w
        .mechanisms
        .iter()
        .filter(|m| m.explained_points.abs() >= 0.05 || m.observed_points.abs() >= 0.05)
        .collect();
    if shown.is_empty() {
        let _ = writeln!(o, "No function moved.");
    } else {
        let mut t = table(width, &["Mechanism", "Figure", "Explains", "Observed"]);
        for m in &shown {
            t.add_row(vec![
                m.mechanism.label().to_string(),
                figure_cell(w, m),
                if m.unpredicted == m.functions {
                    "-".into()
                } else {
                    points_cell(m.explained_points)
                },
                points_cell(m.observed_points),
            ]);
        }
        let _ = writeln!(o, "{t}");
    }
    o.push_str(&wrap_labelled(&accounting(w), "", width));
    for u in w.unexplained.iter().take(4) {
        let label = u.mechanism.map_or(words::OFF_CPU, |m| m.label());
        o.push_str(&wrap_labelled(
            &words::remainder_part(label, u.points, &u.words),
            "  - ",
            width,
        ));
    }
    if !w.wall.is_empty() {
        o.push_str(&wrap_labelled(words::WALL_MOVES, "", width));
    }
    for m in &w.wall {
        o.push_str(&wrap_labelled(
            &words::wall_move(state_label(m.state).trim(), m.old_share, m.new_share),
            "  ",
            width,
        ));
    }
    let fns: Vec<_> = w
        .functions
        .iter()
        .filter(|f| f.observed_points.abs() >= 0.5)
        .take(FUNCTIONS)
        .collect();
    if !fns.is_empty() {
        let mut t = table(
            width,
            &[
                "Function",
                "Mechanism",
                "Predicted",
                "Observed",
                &words::holds_heading(w.hold_factor),
            ],
        );
        for f in &fns {
            t.add_row(vec![
                if f.module == KERNEL_MODULE {
                    format!("{} (kernel)", f.name)
                } else {
                    format!("{} ({})", f.name, f.module)
                },
                f.mechanism.label().to_string(),
                ratio_cell(f.predicted_ratio),
                words::observed_cell(f.observed_ratio, f.observed_points),
                words::holds_cell(f.holds).to_string(),
            ]);
        }
        let _ = writeln!(o, "{t}");
        // Each reason once, with the functions it is about.
        let mut reasons: Vec<(&str, Vec<&str>)> = Vec::new();
        for f in &fns {
            let Some(r) = f.reason.as_deref() else {
                continue;
            };
            match reasons.iter_mut().find(|(x, _)| *x == r) {
                Some((_, names)) => names.push(&f.name),
                None => reasons.push((r, vec![&f.name])),
            }
        }
        for (r, names) in reasons {
            o.push_str(&wrap_labelled(
                &format!("{}: {r}", names.join(", ")),
                "  ",
                width,
            ));
        }
    }
    if !w.advice.is_empty() {
        let _ = writeln!(o, "What to do");
        for a in &w.advice {
            for line in &a.advice {
                o.push_str(&wrap_labelled(
                    &format!("{}: {line}", a.mechanism.label()),
                    "  - ",
                    width,
                ));
            }
        }
    }
    for n in &w.notes {
        o.push_str(&wrap_labelled(&format!("Note: {n}"), "", width));
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compare::why::{
        Advice, CpuChange, FigureChange, FunctionWhy, Loss, Mechanism, Unexplained,
    };
    use crate::diagnose::analyse::figures::MachineFigure;
    use crate::diagnose::record::work::WorkMeasure;

    /// The Skylake case as a constructed diff: PAUSE 24.1 -> 43.6 ns, a spin of a fixed count
    /// grown with it, a little computation, five runs each.
    pub(crate) fn skylake() -> Why {
        let f = |name: &str, mechanism, figure, p: Option<f64>, o: f64, op: f64, pp| FunctionWhy {
            name: name.into(),
            module: "app".into(),
            mechanism,
            figure,
            old_figure: None,
            old_samples: 400,
            new_samples: 700,
            old_cost_s: 1.0,
            new_cost_s: o,
            predicted_ratio: p,
            observed_ratio: Some(o),
            predicted_points: pp,
            observed_points: op,
            holds: p.map(|p| (o / p).ln().abs() <= 1.25f64.ln()),
            reason: None,
        };
        Why {
            loss: Some(Loss {
                measure: WorkMeasure::WallTime,
                old: vec![9.1, 9.0, 9.2, 9.1, 9.3],
                new: vec![12.6, 12.5, 12.7, 12.4, 12.6],
                ratio: 1.38,
                low: Some(1.31),
                high: Some(1.45),
                coverage: Some(0.968),
                exact: true,
                points: 38.0,
            }),
            loss_not_measured: None,
            basis: Basis::Run,
            cpu: CpuChange {
                old_s: 9.0,
                new_s: 12.3,
                ratio: Some(1.367),
                points: Some(36.7),
            },
            total_points: 38.0,
            beyond_noise: Some(true),
            figures: vec![
                FigureChange {
                    figure: MachineFigure::CoreClockGhz,
                    old: Some(3.1),
                    new: Some(3.1),
                    ratio: Some(1.0),
                    disturbed: false,
                },
                FigureChange {
                    figure: MachineFigure::PauseNs,
                    old: Some(24.1),
                    new: Some(43.6),
                    ratio: Some(1.81),
                    disturbed: false,
                },
            ],
            functions: vec![
                f(
                    "spin_wait",
                    Mechanism::PauseSpin,
                    Some(MachineFigure::PauseNs),
                    Some(1.81),
                    1.75,
                    33.0,
                    Some(31.0),
                ),
                f(
                    "do_work",
                    Mechanism::Computation,
                    Some(MachineFigure::CoreClockGhz),
                    Some(1.0),
                    1.07,
                    3.7,
                    Some(0.0),
                ),
            ],
            mechanisms: vec![
                MechanismWhy {
                    mechanism: Mechanism::PauseSpin,
                    figure: Some(MachineFigure::PauseNs),
                    old_figure: None,
                    old_points: 38.0,
                    explained_points: 31.0,
                    observed_points: 33.0,
                    functions: 1,
                    unpredicted: 0,
                    reason: None,
                },
                MechanismWhy {
                    mechanism: Mechanism::Computation,
                    figure: Some(MachineFigure::CoreClockGhz),
                    old_figure: None,
                    old_points: 62.0,
                    explained_points: 0.0,
                    observed_points: 3.7,
                    functions: 1,
                    unpredicted: 0,
                    reason: None,
                },
            ],
            explained_points: 31.0,
            unexplained_points: 7.0,
            unexplained: vec![
                Unexplained {
                    mechanism: Some(Mechanism::Computation),
                    points: 3.7,
                    words: "1.06x where core clock 3.10 -> 3.10 GHz (1.00x) predicts 1.00x".into(),
                },
                Unexplained {
                    mechanism: Some(Mechanism::PauseSpin),
                    points: 2.0,
                    words: "1.87x where PAUSE 24.1 -> 43.6 ns (1.81x) predicts 1.82x".into(),
                },
                Unexplained {
                    mechanism: None,
                    points: 1.3,
                    words: crate::words::why::off_cpu_rest(false),
                },
            ],
            off_cpu_points: Some(1.3),
            wall: Vec::new(),
            advice: vec![Advice {
                mechanism: Mechanism::PauseSpin,
                advice: vec![
                    "Bound the spin by time, not by a count of PAUSEs: at 43.6 ns a PAUSE, \
                     a spin of 1000 PAUSEs takes 43.6 us."
                        .into(),
                ],
            }],
            hold_factor: 1.25,
            notes: Vec::new(),
        }
    }

    #[test]
    fn the_why_section_of_the_skylake_case_matches_its_snapshot_in_80_columns() {
        let text = render(&skylake(), 80);
        for l in text.lines() {
            assert!(l.chars().count() <= 80, "{l}");
        }
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            flat.contains("1.38x slower (wall time, 95% CI 1.31-1.45x, 5 runs each)"),
            "{text}"
        );
        assert!(
            flat.contains(
                "Of the +38 points, PAUSE 24.1 -> 43.6 ns (1.81x) explains +31, and +7.0 are \
                 unexplained"
            ),
            "{text}"
        );
        insta::assert_snapshot!("why_skylake_80", text);
    }

    #[test]
    fn a_faster_run_reads_the_same_way_and_one_run_each_says_so() {
        let mut w = skylake();
        let l = w.loss.as_mut().unwrap();
        l.ratio = 0.8;
        l.points = -20.0;
        l.old = vec![10.0];
        l.new = vec![8.0];
        l.low = None;
        l.high = None;
        l.coverage = None;
        w.total_points = -20.0;
        let text = render(&w, 80);
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(flat.starts_with("Why it is faster"), "{text}");
        assert!(
            flat.contains("1.25x faster (wall time, one run each: no interval)"),
            "{text}"
        );
    }

    #[test]
    fn without_a_loss_the_section_says_so_and_how_to_measure_it() {
        let mut w = skylake();
        w.loss = None;
        w.off_cpu_points = None;
        w.loss_not_measured = Some(crate::words::why::loss_not_recorded(None));
        let flat = render(&w, 80)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert!(flat.contains("The loss was not measured"), "{flat}");
        assert!(flat.contains("--runs N"), "{flat}");
        assert!(
            flat.contains("CPU time per run: 9.0 s -> 12.3 s (1.37x more)"),
            "{flat}"
        );
    }
}
