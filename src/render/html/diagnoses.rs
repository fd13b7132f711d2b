//! The HTML report of saved diagnoses: the findings first, then, for each diagnosis after the
//! first, what changed from the first: why it is slower (a waterfall of the loss by mechanism,
//! `super::why`) beside the differential flame graph, then the functions ranked by growth and
//! each grown function's hot code side by side, then a flame graph per diagnosis
//! and the runs. Same page rules as the fingerprint report: one self-contained file, inline
//! SVG and CSS, no script, a Content Security Policy that forbids every fetch.

use super::{escape, level_class, page_foot, page_head, slug, swatch};
use crate::compare::diagnoses::{ComparedDiagnoses, DiagnosisRun};
use crate::compare::profile::{CodeSide, DiagnosisDiff, Direction, FindingBrief, ProfileRun};
use crate::compare::wall::WallDiff;
use crate::diagnose::Diagnosis;
use crate::diagnose::analyse::hotspots::coverage::Coverage;
use crate::diagnose::analyse::hotspots::short_module;
use crate::format::pct;
use crate::render::flame;
use crate::render::profile_diff::{place_label, state_label};
use crate::words::compare::{OneSide, across_the_bar, one_sided_label};
use std::fmt::Write;

/// A written page.
#[derive(Debug, Clone, PartialEq)]
pub struct DiagnosisReport {
    /// The page.
    pub html: String,
    /// Flame graphs drawn (one per diagnosis, one differential per comparison).
    pub charts: usize,
    /// Graphs left out, one line each (which and why); the page says the same.
    pub charts_skipped: Vec<String>,
}

/// Styles of the flame graphs, which carry no stylesheet of their own.
const FLAME_STYLE: &str = r#"
svg.flame text { font-family: Verdana, sans-serif; font-size: 12px; fill: rgb(0,0,0); }
svg.flame text[id$="-title"] { text-anchor: middle; font-size: 17px; }
svg.flame text[id$="-subtitle"] { text-anchor: middle; fill: rgb(90,90,90); }
svg.flame g:hover rect { stroke: black; stroke-width: 0.5; }
.grown { color: #cf222e; font-weight: 700; } .shrunk { color: #0550ae; font-weight: 600; }
pre.code { font-size: 0.82em; overflow-x: auto; background: #f6f8fa; padding: 0.5em; }
section.finding { border-top: 1px solid #e4e4e4; padding: 0.6em 0; }
section.finding ul { margin: 0.3em 0; padding-left: 1.3em; }
"#;

fn pause(d: &Diagnosis) -> String {
    crate::words::machine::pause_figure(d.machine.pause.map(|p| (p.ns, p.cycles)))
}

fn workload(d: &Diagnosis) -> String {
    match &d.target.command {
        Some(c) => c.join(" "),
        None => format!("process {} (attached)", d.target.pid),
    }
}

/// A flame graph in its figure, or the note that it could not be drawn.
fn figure(
    h: &mut String,
    id: &str,
    kind: &str,
    drawn: Result<String, flame::FlameError>,
    caption: &str,
    out: &mut DiagnosisReport,
) {
    match drawn {
        Ok(svg) => {
            out.charts += 1;
            let _ = writeln!(
                h,
                "<figure class=\"chart\" id=\"{id}\" data-kind=\"{kind}\">\n{svg}\n\
                 <figcaption>{}</figcaption>\n</figure>",
                escape(caption)
            );
        }
        Err(e) => {
            out.charts_skipped.push(format!("{caption}: {e}"));
            let _ = writeln!(
                h,
                "<figure class=\"chart-skipped\" id=\"{id}\" data-kind=\"{kind}\">\
                 <figcaption>{} not drawn: {}.</figcaption></figure>",
                escape(caption),
                escape(&e.to_string())
            );
        }
    }
}

fn findings_section(h: &mut String, runs: &[DiagnosisRun]) {
    h.push_str("<h2 id=\"findings\">Findings</h2>\n");
    for (i, r) in runs.iter().enumerate() {
        let d = &r.diagnosis;
        if runs.len() > 1 {
            let _ = writeln!(h, "<h3>{}{}</h3>", swatch(i), escape(&r.label));
        }
        if d.findings.is_empty() {
            let _ = writeln!(
                h,
                "<p>{}</p>",
                escape(&Coverage::no_findings(d.coverage.as_ref()))
            );
        }
        if let Some(c) = d.coverage.as_ref().filter(|c| !c.gaps.is_empty()) {
            let _ = writeln!(
                h,
                "<p class=\"coverage\"><b>{}</b></p><ul>",
                escape(&c.heading())
            );
            for g in &c.gaps {
                let _ = writeln!(h, "<li>{}: {}</li>", pct(g.share, 1), escape(&g.sentence()));
            }
            h.push_str("</ul>\n");
        }
        for f in &d.findings {
            let _ = writeln!(
                h,
                "<section class=\"finding\"><p><span class=\"{}\">{}</span> <b>{}</b></p><ul>",
                level_class(f.level),
                f.level.word(),
                escape(&f.title)
            );
            for e in &f.evidence {
                let _ = writeln!(h, "<li>{}</li>", escape(e));
            }
            h.push_str("</ul>\n");
            if !f.disassembly.is_empty() {
                let _ = writeln!(
                    h,
                    "<details><summary>code</summary><pre class=\"code\">{}</pre></details>",
                    escape(&f.disassembly.join("\n"))
                );
            }
            let _ = writeln!(
                h,
                "<p class=\"explanation\"><b>Cost:</b> {}</p>\
                 <p class=\"explanation\"><b>Do:</b> {}</p></section>",
                escape(&f.explanation),
                escape(&f.advice)
            );
        }
    }
}

fn code_cell(c: &CodeSide) -> String {
    let mut s = String::new();
    match &c.site {
        Some(site) => {
            let _ = write!(
                s,
                "{}: <code>{}</code> at +{:#x}, {} of samples",
                escape(site.kind.describe()),
                escape(&site.instruction),
                site.offset,
                pct(site.share, 1)
            );
            if let Some(n) = &site.next {
                let _ = write!(
                    s,
                    "<br>next: <code>{}</code> ({} samples)",
                    escape(&n.instruction),
                    n.samples
                );
            }
            let _ = write!(
                s,
                "<details><summary>code</summary><pre class=\"code\">{}</pre></details>",
                escape(&site.disassembly.join("\n"))
            );
        }
        None => s.push_str(&escape(c.no_site.as_deref().unwrap_or("-"))),
    }
    s
}

fn callers_cell(c: &CodeSide) -> String {
    if c.callers.is_empty() {
        return "-".into();
    }
    c.callers
        .iter()
        .map(|p| {
            format!(
                "{} &lt;- {}",
                pct(p.share, 1),
                escape(&p.frames.join(" <- "))
            )
        })
        .collect::<Vec<_>>()
        .join("<br>")
}

fn finding_item(f: &FindingBrief) -> String {
    format!(
        "<span class=\"{}\">{}</span> {}{}",
        level_class(f.level),
        f.level.word(),
        escape(&f.title),
        f.sample_share
            .map(|s| format!(" ({})", pct(s, 1)))
            .unwrap_or_default()
    )
}

/// The function diff, then (`beside`) the differential flame graph, then each grown
/// function's code side by side and the findings on one side only.
fn diff_tables(h: &mut String, d: &DiagnosisDiff, beside: impl FnOnce(&mut String)) {
    let _ = writeln!(h, "<p class=\"muted\">{}</p>", escape(&d.rule));
    h.push_str(
        "<div class=\"wide\"><table class=\"functions\"><tr><th>Function</th><th>Module</th>\
         <th>Old</th><th>New</th><th>Change</th><th>CPU s per s</th></tr>\n",
    );
    let rows: Vec<_> = d
        .functions
        .iter()
        .filter(|c| c.direction != Direction::Within)
        .take(15)
        .collect();
    for c in &rows {
        let (class, word) = match c.direction {
            Direction::Grown => ("grown", " grown"),
            Direction::Shrunk => ("shrunk", " shrunk"),
            Direction::Within => ("", ""),
        };
        let _ = writeln!(
            h,
            "<tr class=\"{class}-row\"><td>{}</td><td>{}</td><td class=\"num\">{} ({})</td>\
             <td class=\"num\">{} ({})</td><td class=\"num {class}\">{:+.1} pt{word}</td>\
             <td class=\"num\">{:.2} &rarr; {:.2}</td></tr>",
            escape(&c.name),
            escape(&c.module),
            pct(c.old.share, 1),
            c.old.samples,
            pct(c.new.share, 1),
            c.new.samples,
            100.0 * c.share_change,
            c.old.cpu_per_wall,
            c.new.cpu_per_wall
        );
    }
    h.push_str("</table></div>\n");
    let still = d.functions.len() - rows.len();
    if rows.is_empty() {
        h.push_str("<p>No function moved beyond noise.</p>\n");
    }
    if still > 0 {
        let _ = writeln!(
            h,
            "<p class=\"muted\">{still} more function(s) did not move beyond noise.</p>"
        );
    }
    beside(h);
    for g in &d.grown {
        let _ = writeln!(
            h,
            "<h3>Grown: {} ({})</h3>\n<div class=\"wide\"><table class=\"grown-code\">\
             <tr><th></th><th>old: {}</th><th>new: {}</th></tr>",
            escape(&g.name),
            escape(&g.module),
            escape(&d.old.label),
            escape(&d.new.label)
        );
        let machine = |s: &ProfileRun| {
            escape(&format!(
                "{}; {}",
                s.cpu,
                s.pause
                    .map(|p| format!("PAUSE {:.1} ns", p.ns))
                    .unwrap_or_else(|| "PAUSE not measured".into())
            ))
        };
        let _ = writeln!(
            h,
            "<tr><th>hot code</th><td>{}</td><td>{}</td></tr>\n\
             <tr><th>machine</th><td>{}</td><td>{}</td></tr>\n\
             <tr><th>callers</th><td>{}</td><td>{}</td></tr>\n</table></div>",
            code_cell(&g.old),
            code_cell(&g.new),
            machine(&d.old),
            machine(&d.new),
            callers_cell(&g.old),
            callers_cell(&g.new)
        );
    }
    let f = &d.findings;
    if !(f.only_old.is_empty() && f.only_new.is_empty()) {
        h.push_str("<p><b>Findings on one side only</b></p><ul>\n");
        for (side, list) in [(OneSide::New, &f.only_new), (OneSide::Old, &f.only_old)] {
            for x in list {
                let label = one_sided_label(side, x.other_run.is_some());
                let moved = x
                    .other_run
                    .map(|o| {
                        format!(
                            ": {}",
                            escape(&across_the_bar(side, x.sample_share, o.share, o.bar))
                        )
                    })
                    .unwrap_or_default();
                let _ = writeln!(h, "<li>{label}: {}{moved}</li>", finding_item(x));
            }
        }
        h.push_str("</ul>\n");
    }
    if let Some(w) = &d.wall {
        wall_tables(h, w);
    }
    for n in &d.notes {
        let _ = writeln!(h, "<p class=\"muted\">Note: {}</p>", escape(n));
    }
}

fn change_td(share_change: f64, direction: Direction) -> String {
    let (class, word) = match direction {
        Direction::Grown => ("grown", " grown"),
        Direction::Shrunk => ("shrunk", " shrunk"),
        Direction::Within => ("", ""),
    };
    format!(
        "<td class=\"num {class}\">{:+.1} pt{word}</td>",
        100.0 * share_change
    )
}

/// Where the threads' wall time went on each side, and the off-CPU places that moved.
fn wall_tables(h: &mut String, w: &WallDiff) {
    h.push_str("<h3>Wall time: where the threads' time went</h3>\n");
    let _ = writeln!(h, "<p class=\"muted\">{}</p>", escape(&w.rule));
    for g in &w.groups {
        let threads = |x: Option<crate::compare::wall::GroupSide>| {
            x.map(|x| x.threads.to_string())
                .unwrap_or_else(|| "no".into())
        };
        let _ = writeln!(
            h,
            "<div class=\"wide\"><table class=\"wall-states\"><caption>{}: {} &rarr; {} \
             threads</caption><tr><th>State</th><th>Old</th><th>New</th><th>Change</th>\
             <th>Threads</th></tr>",
            escape(g.command.as_deref().unwrap_or("All threads")),
            threads(g.old),
            threads(g.new)
        );
        for c in &g.states {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>{}\
                 <td class=\"num\">{:.2} &rarr; {:.2}</td></tr>",
                escape(state_label(c.state).trim_start()),
                pct(c.old.share, 1),
                pct(c.new.share, 1),
                change_td(c.share_change, c.direction),
                c.old.threads,
                c.new.threads
            );
        }
        h.push_str("</table></div>\n");
    }
    let moved: Vec<_> = w
        .off_cpu
        .iter()
        .filter(|c| c.direction != Direction::Within)
        .take(15)
        .collect();
    if moved.is_empty() {
        h.push_str("<p>No off-CPU stack moved by 5 points or more.</p>\n");
        return;
    }
    h.push_str(
        "<div class=\"wide\"><table class=\"wall-places\"><caption>Off the CPU, most grown \
         first (share of all threads' time)</caption><tr><th>Where</th><th>Old</th>\
         <th>New</th><th>Change</th><th>Threads</th></tr>\n",
    );
    for c in moved {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>{}\
             <td class=\"num\">{:.2} &rarr; {:.2}</td></tr>",
            escape(&place_label(&c.place)),
            pct(c.old.share, 1),
            pct(c.new.share, 1),
            change_td(c.share_change, c.direction),
            c.old.threads,
            c.new.threads
        );
    }
    h.push_str("</table></div>\n");
}

fn runs_section(h: &mut String, runs: &[DiagnosisRun]) {
    h.push_str(
        "<h2 id=\"diagnoses\">Diagnoses</h2>\n<div class=\"wide\"><table id=\"runs\"><tr>\
         <th>Diagnosis</th><th>Workload</th><th>Recorded</th><th>CPU</th><th>PAUSE</th>\
         <th>cpudoctor</th></tr>\n",
    );
    for (i, r) in runs.iter().enumerate() {
        let d = &r.diagnosis;
        let _ = writeln!(
            h,
            "<tr><td>{}{}</td><td>{}</td><td>{:.2} s, {} samples ({} at {} Hz)</td>\
             <td>{}, {} logical CPUs</td><td>{}</td><td>{}</td></tr>",
            swatch(i),
            escape(&r.label),
            escape(&workload(d)),
            d.sampling.wall_s,
            d.sampling.samples,
            d.sampling.event.event_name(),
            d.sampling.frequency_hz,
            escape(&d.machine.cpu),
            d.machine.logical_cpus,
            escape(&pause(d)),
            escape(&d.tool.version)
        );
    }
    h.push_str("</table></div>\n");
    for r in runs {
        for n in &r.diagnosis.notes {
            let _ = writeln!(
                h,
                "<p class=\"muted\">{}: {}</p>",
                escape(&r.label),
                escape(n)
            );
        }
    }
}

/// The page for one or more diagnoses; the first is the one the others are compared with.
pub fn render_diagnoses(compared: &ComparedDiagnoses) -> DiagnosisReport {
    let runs = compared.runs();
    let mut out = DiagnosisReport {
        html: String::new(),
        charts: 0,
        charts_skipped: Vec::new(),
    };
    let mut h = String::new();
    let title = format!(
        "cpudoctor report: {}",
        runs.iter()
            .map(|r| r.label.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    );
    h.push_str(&page_head(
        &title,
        &format!("{FLAME_STYLE}{}", super::why::STYLE),
    ));
    for (i, r) in runs.iter().enumerate() {
        let d = &r.diagnosis;
        let _ = writeln!(
            h,
            "<p class=\"machine\">{}<b>{}</b>: {}; {}, {}</p>",
            swatch(i),
            escape(&r.label),
            escape(&workload(d)),
            escape(&d.machine.cpu),
            escape(&pause(d))
        );
    }
    findings_section(&mut h, runs);
    if let Some((first, others)) = runs.split_first() {
        for (i, (other, (d, folded))) in others.iter().zip(compared.diffs()).enumerate() {
            let _ = writeln!(
                h,
                "<h2 id=\"diff-{}\">What changed: {} &rarr; {}</h2>",
                i + 1,
                escape(&first.label),
                escape(&other.label)
            );
            let caption = format!(
                "Differential flame graph, {} to {}: the frames of {}, red where their share \
                 grew, blue where it shrank",
                first.label, other.label, other.label
            );
            let id = format!("flame-diff-{}", slug(&other.label));
            let drawn = folded.clone().and_then(|lines| {
                flame::differential(
                    &lines,
                    &format!("{} \u{2192} {}", first.label, other.label),
                    &id,
                )
            });
            let flame_figure =
                |h: &mut String| figure(h, &id, "flame-diff", drawn, &caption, &mut out);
            match &d.why {
                // The waterfall of the loss beside the differential flame graph, first.
                Some(w) => {
                    super::why::section(&mut h, w, flame_figure);
                    diff_tables(&mut h, d, |_: &mut String| {});
                }
                None => diff_tables(&mut h, d, flame_figure),
            }
        }
    }
    h.push_str("<h2 id=\"flame-graphs\">Flame graphs</h2>\n");
    for r in runs {
        let id = format!("flame-{}", slug(&r.label));
        let d = &r.diagnosis;
        let caption = format!(
            "Flame graph of {}: callers below, the sampled function on top, width = share of \
             samples{}",
            r.label,
            if crate::diagnose::stacks::stacks_of(d).from_functions {
                " (saved without call stacks: its hottest functions only)"
            } else {
                ""
            }
        );
        let drawn = flame::flame_graph(
            d,
            &format!("{}: {}", r.label, short_module(&workload(d))),
            &id,
        );
        figure(&mut h, &id, "flame", drawn, &caption, &mut out);
        if d.wall.is_some() {
            let id = format!("flame-wall-{}", slug(&r.label));
            let caption = format!(
                "Wall-time flame graph of {}: every thread's time, on and off the CPU, width = \
                 share of thread time; warm stacks ran on a CPU, aqua ones waited for a CPU, \
                 blue ones were blocked, the top frame saying why",
                r.label
            );
            let drawn = flame::wall_flame_graph(
                d,
                &format!("{}: wall time, {}", r.label, short_module(&workload(d))),
                &id,
            );
            figure(&mut h, &id, "flame-wall", drawn, &caption, &mut out);
        }
    }
    runs_section(&mut h, runs);
    h.push_str(&page_foot());
    out.html = h;
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::from_json_bytes;

    fn run(name: &str, label: &str) -> DiagnosisRun {
        let path = format!(
            "{}/tests/fixtures/diagnose/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        DiagnosisRun {
            label: label.into(),
            diagnosis: from_json_bytes(&std::fs::read(path).unwrap()).unwrap(),
        }
    }

    #[test]
    fn two_diagnoses_give_findings_first_the_diff_beside_its_flame_graph_and_both_graphs() {
        let r = render_diagnoses(
            &ComparedDiagnoses::new(vec![
                run("spin-phases-140-zen3-kvm.json", "old.json"),
                run("spin-phases-4000-zen3-kvm.json", "new.json"),
            ])
            .unwrap(),
        );
        assert_eq!(r.charts, 3, "{:?}", r.charts_skipped);
        let h = &r.html;
        let at = |s: &str| h.find(s).unwrap_or_else(|| panic!("no {s}"));
        assert!(at("id=\"findings\"") < at("id=\"diff-1\""));
        assert!(at("id=\"diff-1\"") < at("data-kind=\"flame-diff\""));
        assert!(at("data-kind=\"flame-diff\"") < at("id=\"flame-graphs\""));
        assert_eq!(h.matches("data-kind=\"flame\"").count(), 2);
        // Issue 31: the waterfall of the loss by mechanism, in one pair with the differential
        // flame graph, before the function table.
        assert!(at("id=\"diff-1\"") < at("data-kind=\"waterfall\""));
        let pair = &h[at("data-kind=\"waterfall\"")..];
        let pair = &pair[..pair.find("</div></div>").unwrap()];
        assert!(pair.contains("data-kind=\"flame-diff\""), "{pair}");
        assert!(at("data-kind=\"flame-diff\"") < at("class=\"functions\""));
        assert!(h.contains("class=\"wf-total\""));
        assert!(h.contains("The loss was not measured"));
        assert!(h.contains("<td class=\"num grown\">+68.1 pt grown</td>"));
        assert_eq!(
            h.matches("<code>pause</code>").count(),
            2,
            "pause on both sides"
        );
        assert!(!h.contains("<script"));
        assert!(
            !h.contains("http://www.w3.org/Graphics"),
            "no DOCTYPE of the svg"
        );
    }

    #[test]
    fn one_diagnosis_has_no_diff_and_one_flame_graph() {
        let r = render_diagnoses(
            &ComparedDiagnoses::new(vec![run("pause-spin-zen4-kvm.json", "zen4.json")]).unwrap(),
        );
        assert_eq!(r.charts, 1);
        assert!(!r.html.contains("What changed"));
        assert!(r.html.contains("saved without call stacks"));
    }

    #[test]
    fn diagnoses_with_a_wall_view_get_a_wall_time_flame_graph_each_and_the_wall_diff() {
        let r = render_diagnoses(
            &ComparedDiagnoses::new(vec![
                run("mutex-wait-2-zen4-kvm.json", "two.json"),
                run("mutex-wait-4-zen4-kvm.json", "four.json"),
            ])
            .unwrap(),
        );
        // A CPU and a wall-time graph per diagnosis, and the differential one.
        assert_eq!(r.charts, 5, "{:?}", r.charts_skipped);
        let h = &r.html;
        assert_eq!(h.matches("data-kind=\"flame-wall\"").count(), 2);
        let at = |s: &str| h.find(s).unwrap_or_else(|| panic!("no {s}"));
        assert!(at("id=\"flame-two-json\"") < at("id=\"flame-wall-two-json\""));
        // The wall diff sits in the comparison, before the flame graphs.
        assert!(at("Wall time: where the threads") < at("id=\"flame-graphs\""));
        assert!(h.contains(
            "<td>wait: lock</td><td class=\"num\">33.0%</td>\
             <td class=\"num\">59.0%</td><td class=\"num grown\">+26.0 pt grown</td>"
        ));
        assert!(h.contains(
            "blocked: futex in __lll_lock_wait (libc.so.6), lock wait of take_lock_and_work"
        ));
        assert!(!h.contains("FunctionChange"), "the column reads Change");
    }

    #[test]
    fn a_diagnosis_with_most_samples_not_analysed_lists_the_gaps_and_their_fix() {
        let mut r = run("pause-spin-zen4-kvm.json", "node.json");
        r.diagnosis.findings.clear();
        r.diagnosis.coverage = Some(crate::render::diagnosis::tests::node_without_perf_map());
        let h = render_diagnoses(&ComparedDiagnoses::new(vec![r]).unwrap()).html;
        assert!(!h.contains("No findings: no spin-wait"));
        assert!(h.contains("Not analysed: 98.4% of 1,334 samples"));
        assert!(h.contains("--perf-basic-prof"));
    }
}
