//! The HTML report: one self-contained page (inline CSS and SVG, no script, and a Content
//! Security Policy that forbids every fetch) with the machine facts, the verdict table, the
//! metrics, and a chart for every series the fingerprints carry, plus the spin-before-block
//! chart computed from the measured PAUSE. With several fingerprints, each chart overlays the
//! runs (one colour per run throughout) and the page adds the diff of the first run against
//! each other one.
//!
//! This module lays out the page and its tables; [`figures`] draws the charts, which come from
//! the schema alone, so charts for probes added later appear without changes here.

pub mod diagnoses;
pub mod figures;
pub mod fleet;
pub mod why;

use super::charts::run_color;
use super::diff;
use crate::compare::fingerprint::{Change, Compared, Diff, FactRow, MetricDiff, Run, VerdictMove};
use crate::schema::{Fingerprint, Level, ProbeResult, Status, Verdict};
use std::fmt::Write;

/// A written report page.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// The page.
    pub html: String,
    /// How many charts it draws.
    pub charts: usize,
    /// Charts left out, one line each (which and why); the page says the same.
    pub charts_skipped: Vec<String>,
}

/// The probes of a fingerprint, each name once: the first entry, as every reader of the file
/// uses (a file listing a probe twice is malformed; the page says so).
pub(crate) fn first_probes(fp: &Fingerprint) -> impl Iterator<Item = &ProbeResult> {
    fp.probes
        .iter()
        .enumerate()
        .filter(|(i, p)| !fp.probes[..*i].iter().any(|q| q.name == p.name))
        .map(|(_, p)| p)
}

/// Escapes text for HTML element content and attribute values.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// A string safe to use as an element id: lower-case letters, digits and dashes.
pub fn slug(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    out.trim_matches('-').to_string()
}

/// Seconds since the Unix epoch as `YYYY-MM-DD HH:MM UTC` (days-to-civil conversion of
/// H. Hinnant, "chrono-Compatible Low-Level Date Algorithms").
pub fn utc_time(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02} UTC",
        rem / 3600,
        (rem % 3600) / 60
    )
}

pub(crate) const STYLE: &str = r#"
body { font-family: system-ui, sans-serif; margin: 1.5em auto; max-width: 1180px; padding: 0 1em; color: #1b1b1b; line-height: 1.4; }
h1 { font-size: 1.5em; margin-bottom: 0.2em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ddd; } h3 { margin: 0 0 0.4em; }
.machine { color: #333; margin: 0.2em 0 1em; }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(250px, 1fr)); gap: 0.7em; }
.card { display: block; border: 1px solid #d6d6d6; border-left: 6px solid #1a7f37; border-radius: 6px; padding: 0.55em 0.7em; color: inherit; text-decoration: none; }
.card.level-hazard { border-left-color: #cf222e; } .card.level-notice { border-left-color: #bf8700; }
.card .lvl { font-weight: 700; font-size: 0.85em; letter-spacing: 0.03em; }
.card .ttl { font-weight: 600; } .card .fig { font-variant-numeric: tabular-nums; } .card .sum { font-size: 0.9em; color: #444; }
.counts { font-weight: 600; margin: 0.8em 0; }
section.hazard { border-top: 1px solid #e4e4e4; padding: 1em 0; }
.pair { display: grid; grid-template-columns: minmax(0, 2fr) minmax(0, 3fr); gap: 1.2em; align-items: start; }
.verdict p { margin: 0.3em 0; }
details { margin: 0.5em 0; } summary { cursor: pointer; color: #0550ae; }
table { border-collapse: collapse; margin: 0.6em 0; font-size: 0.92em; }
th, td { border: 1px solid #d6d6d6; padding: 0.3em 0.55em; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tr.differs td { background: #fff6dc; }
.level-ok { color: #1a7f37; font-weight: 600; } .level-notice { color: #9a6700; font-weight: 600; }
.level-hazard { color: #cf222e; font-weight: 700; }
.card.level-ok, .card.level-notice, .card.level-hazard { font-weight: normal; color: inherit; }
.worse { color: #cf222e; font-weight: 700; } .better { color: #1a7f37; font-weight: 600; }
.muted { color: #6e6e6e; }
.swatch { display: inline-block; width: 0.9em; height: 0.9em; border-radius: 2px; margin-right: 0.4em; vertical-align: -0.1em; }
figure.chart { margin: 0 0 1em; padding: 0.5em; border: 1px solid #e2e2e2; border-radius: 6px; }
figure.chart svg { max-width: 100%; height: auto; display: block; }
figcaption { font-size: 0.88em; color: #444; margin-top: 0.4em; }
.explanation { font-size: 0.92em; max-width: 46em; }
.legend { font-size: 0.9em; margin-bottom: 0.3em; } .legend span { margin-right: 1.2em; }
.wide { overflow-x: auto; }
@media (max-width: 760px) {
  body { margin: 0.8em auto; padding: 0 0.6em; }
  .pair { grid-template-columns: 1fr; }
  .cards { grid-template-columns: 1fr; }
  table { font-size: 0.82em; }
}
@media print {
  details { display: block; } details > summary { display: none; }
  section.hazard, figure.chart, .card { break-inside: avoid; }
  a { color: inherit; text-decoration: none; }
}
"#;

pub(crate) fn level_class(l: Level) -> &'static str {
    match l {
        Level::Ok => "level-ok",
        Level::Notice => "level-notice",
        Level::Hazard => "level-hazard",
    }
}

pub(crate) fn swatch(i: usize) -> String {
    let c = run_color(i);
    format!(
        "<span class=\"swatch\" style=\"background:#{:02x}{:02x}{:02x}\"></span>",
        c.0, c.1, c.2
    )
}

/// The start of every page cpudoctor writes: self-contained (its Content Security Policy
/// allows no script and no fetch), the shared style and the page's own `extra_style`, the
/// title as the first heading.
pub fn page_head(title: &str, extra_style: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; \
         style-src 'unsafe-inline'\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{t}</title>\n<style>{STYLE}{extra_style}</style>\n</head>\n<body>\n<h1>{t}</h1>\n",
        t = escape(title)
    )
}

/// The end of every page: which cpudoctor wrote it.
pub fn page_foot() -> String {
    format!(
        "<p class=\"muted\">Written by cpudoctor {}. Self-contained: no script, no \
         fetches.</p>\n</body>\n</html>\n",
        env!("CARGO_PKG_VERSION")
    )
}

/// The whole report page. A chart that cannot be drawn is left out with a note; the page
/// itself always renders.
pub fn render_report(compared: &Compared) -> Report {
    let runs = compared.runs();
    let mut h = String::new();
    let title = match runs {
        [one] => format!("cpudoctor report: {}", one.label),
        _ => format!("cpudoctor report: {} fingerprints", runs.len()),
    };
    h.push_str(&page_head(&title, ""));
    let verdicts = compared.verdicts();
    header_section(&mut h, runs, verdicts, compared.not_judged());
    let figures = figures::figures(runs, compared.spin());
    let placed = hazard_sections(&mut h, runs, verdicts, &figures);
    let others: Vec<&figures::FigurePart> = figures
        .parts
        .iter()
        .enumerate()
        .filter(|(i, _)| !placed.contains(i))
        .map(|(_, f)| f)
        .collect();
    h.push_str("<h2 id=\"charts\">Other charts</h2>\n");
    if others.is_empty() && figures.parts.is_empty() {
        h.push_str("<p>No charts: no probe with chart data ran successfully.</p>\n");
    } else if others.is_empty() {
        h.push_str("<p class=\"muted\">Every chart is shown with its hazard above.</p>\n");
    }
    for f in others {
        h.push_str(&f.html);
    }
    machine_section(&mut h, runs, compared.machine());
    runs_section(&mut h, runs);
    if let [one] = runs {
        metrics_section(&mut h, one);
    } else {
        for d in compared.diffs() {
            diff_section(&mut h, d);
        }
    }
    h.push_str(&page_foot());
    Report {
        html: h,
        charts: figures.drawn,
        charts_skipped: figures.skipped,
    }
}

fn runs_section(h: &mut String, runs: &[Run]) {
    h.push_str(
        "<h2 id=\"fingerprints\">Fingerprints</h2>\n<div class=\"wide\"><table id=\"runs\"><tr><th>Fingerprint</th><th>Command</th><th>Taken</th>\
         <th>cpudoctor</th><th>CPU</th></tr>\n",
    );
    for (i, r) in runs.iter().enumerate() {
        let _ = writeln!(
            h,
            "<tr><td>{}{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            swatch(i),
            escape(&r.label),
            escape(&r.fp.command),
            utc_time(r.fp.created_unix_s),
            escape(&r.fp.tool.version),
            escape(&r.fp.machine.cpu_line())
        );
    }
    h.push_str("</table></div>\n");
}

fn machine_section(h: &mut String, runs: &[Run], facts: &[FactRow]) {
    h.push_str("<h2 id=\"machine\">Machine</h2>\n<div class=\"wide\"><table><tr><th>Fact</th>");
    for r in runs {
        let _ = write!(h, "<th>{}</th>", escape(&r.label));
    }
    h.push_str("</tr>\n");
    for row in facts {
        let _ = write!(
            h,
            "<tr{}><th>{}</th>",
            if row.differs {
                " class=\"differs\""
            } else {
                ""
            },
            escape(row.fact)
        );
        for shown in &row.shown {
            let _ = write!(h, "<td>{}</td>", escape(shown));
        }
        h.push_str("</tr>\n");
    }
    h.push_str("</table></div>\n");
    if runs.len() > 1 {
        h.push_str("<p class=\"muted\">Highlighted rows differ between fingerprints.</p>\n");
    }
}

/// The hazards in the order the page shows them: every one any run judges, worst first (by the
/// worst level any run gives it), then in rule order.
fn hazard_order(verdicts: &[Vec<Verdict>]) -> Vec<String> {
    let mut ids: Vec<(Level, usize, String)> = Vec::new();
    for vs in verdicts {
        for (i, v) in vs.iter().enumerate() {
            match ids.iter_mut().find(|(_, _, id)| *id == v.hazard) {
                Some(e) => e.0 = e.0.max(v.level),
                None => ids.push((v.level, i, v.hazard.clone())),
            }
        }
    }
    ids.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    ids.into_iter().map(|(_, _, id)| id).collect()
}

/// The hazard whose section shows the charts of `probe`: the first (in page order) whose
/// figures come from it, else the first that needs it otherwise.
fn chart_owner(order: &[String], probe: &str) -> Option<String> {
    let rules = || order.iter().filter_map(|id| crate::hazards::by_id(id));
    rules()
        .find(|r| r.reads().iter().any(|id| id.probe == probe))
        .or_else(|| rules().find(|r| r.probes().contains(&probe)))
        .map(|r| r.id().to_string())
}

/// The top of the page: what was measured, then one card per hazard (level, title, headline
/// figure, one line of meaning) linking to its section, and the counts.
fn header_section(
    h: &mut String,
    runs: &[Run],
    verdicts: &[Vec<Verdict>],
    not_judged: &[Vec<crate::schema::NotJudged>],
) {
    for (i, r) in runs.iter().enumerate() {
        let lines = crate::render::terminal::machine_lines(&r.fp, u16::MAX);
        let _ = writeln!(
            h,
            "<p class=\"machine\">{}<strong>{}</strong>, {}: {}</p>",
            if runs.len() > 1 {
                swatch(i)
            } else {
                String::new()
            },
            escape(&r.label),
            utc_time(r.fp.created_unix_s),
            lines.lines().map(escape).collect::<Vec<_>>().join("<br>")
        );
    }
    let order = hazard_order(verdicts);
    if order.is_empty() {
        h.push_str("<p>No verdicts: no probe that a hazard rule reads ran successfully.</p>\n");
        return;
    }
    h.push_str("<div class=\"cards\" id=\"verdicts\">\n");
    for id in &order {
        for (i, vs) in verdicts.iter().enumerate() {
            let Some(v) = vs.iter().find(|v| &v.hazard == id) else {
                continue;
            };
            let _ = writeln!(
                h,
                "<a class=\"card {}\" href=\"#hazard-{}\" data-hazard=\"{}\"><div class=\"lvl {}\">{}{}</div>\
                 <div class=\"ttl\">{}</div><div class=\"fig\">{}</div><div class=\"sum\">{}</div></a>",
                level_class(v.level),
                slug(id),
                escape(id),
                level_class(v.level),
                if runs.len() > 1 {
                    swatch(i)
                } else {
                    String::new()
                },
                escape(&crate::render::terminal::level_cell(v)),
                escape(&v.title),
                escape(&v.figure),
                escape(&crate::words::compare::summary_of(v))
            );
        }
    }
    h.push_str("</div>\n");
    for (i, vs) in verdicts.iter().enumerate() {
        let _ = writeln!(
            h,
            "<p class=\"counts\">{}{}{}</p>",
            if runs.len() > 1 {
                swatch(i)
            } else {
                String::new()
            },
            if runs.len() > 1 {
                format!("{}: ", escape(&runs[i].label))
            } else {
                String::new()
            },
            escape(&crate::render::terminal::verdict_counts(
                vs,
                not_judged[i].len()
            ))
        );
        for n in &not_judged[i] {
            let _ = writeln!(
                h,
                "<p class=\"muted\">Not judged: <strong>{}</strong>: {} (measure it: \
                 <code>{}</code>)</p>",
                escape(&n.title),
                escape(&n.why),
                escape(&n.measure_with)
            );
        }
    }
}

/// One section per hazard, worst first: each run's verdict with the explanation folded, and
/// beside it the charts of the probes the hazard reads. Returns the indices of the charts
/// placed, so the rest go under "Other charts".
fn hazard_sections(
    h: &mut String,
    runs: &[Run],
    verdicts: &[Vec<Verdict>],
    figures: &figures::Figures,
) -> Vec<usize> {
    let mut placed = Vec::new();
    let order = hazard_order(verdicts);
    if order.is_empty() {
        return placed;
    }
    h.push_str("<h2 id=\"hazards\">Hazards</h2>\n");
    for id in &order {
        let rule = crate::hazards::by_id(id);
        let any = verdicts
            .iter()
            .flatten()
            .find(|v| &v.hazard == id)
            .expect("id from the verdicts");
        let _ = writeln!(
            h,
            "<section class=\"hazard\" id=\"hazard-{}\">\n<h3>{}</h3>\n<div class=\"pair\">\
             <div class=\"verdict\">",
            slug(id),
            escape(&any.title)
        );
        for (i, vs) in verdicts.iter().enumerate() {
            match vs.iter().find(|v| &v.hazard == id) {
                Some(v) => {
                    let _ = writeln!(
                        h,
                        "<p>{}<span class=\"{}\">{}</span> {}</p><p>{}</p>",
                        if runs.len() > 1 {
                            swatch(i)
                        } else {
                            String::new()
                        },
                        level_class(v.level),
                        escape(&crate::render::terminal::level_cell(v)),
                        escape(&v.figure),
                        escape(&crate::words::compare::summary_of(v))
                    );
                    let _ = writeln!(
                        h,
                        "<details><summary>Why, and what to do{}</summary>\
                         <div class=\"explanation\"><p>{}</p><p class=\"muted\">Judged against: {}</p>{}</div></details>",
                        if runs.len() > 1 {
                            format!(" ({})", escape(&runs[i].label))
                        } else {
                            String::new()
                        },
                        escape(&v.explanation),
                        escape(&v.reference),
                        rule.map_or(String::new(), |r| format!(
                            "<p class=\"muted\">Hurts: {}.</p>",
                            escape(&r.hurts().join("; "))
                        ))
                    );
                }
                None => {
                    let _ = writeln!(
                        h,
                        "<p class=\"muted\">{}{}: not judged (probe not measured)</p>",
                        swatch(i),
                        escape(&runs[i].label)
                    );
                }
            }
        }
        h.push_str("</div>\n<div class=\"charts\">\n");
        for (i, f) in figures.parts.iter().enumerate() {
            if chart_owner(&order, &f.probe).as_deref() == Some(id.as_str()) {
                h.push_str(&f.html);
                placed.push(i);
            }
        }
        h.push_str("</div></div>\n</section>\n");
    }
    placed
}

fn metrics_section(h: &mut String, run: &Run) {
    h.push_str(
        "<h2 id=\"metrics\">All figures</h2>\n<div class=\"wide\"><table id=\"metric-table\"><tr><th>Probe</th>\
         <th>Metric</th><th>Median</th><th>Spread (MAD/median)</th><th>Samples</th>\
         <th>Better</th></tr>\n",
    );
    for p in first_probes(&run.fp) {
        if p.status != Status::Ok {
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td colspan=\"5\" class=\"muted\">not measured: {}</td></tr>",
                escape(&p.name),
                escape(p.reason.as_deref().unwrap_or("no reason given"))
            );
            continue;
        }
        for m in &p.metrics {
            let (spread, n) =
                m.spread
                    .as_ref()
                    .map_or(("derived".to_string(), "-".to_string()), |s| {
                        (
                            format!(
                                "±{}{}",
                                crate::format::pct(s.relative_spread, 1),
                                if s.wide { " WIDE" } else { "" }
                            ),
                            s.n.to_string(),
                        )
                    });
            let _ = writeln!(
                h,
                "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
                 <td class=\"num\">{}</td><td>{:?}</td></tr>",
                escape(&p.name),
                escape(&m.name),
                escape(&crate::format::human_value(m.value, &m.unit)),
                spread,
                n,
                m.better
            );
        }
    }
    h.push_str("</table></div>\n");
    for p in first_probes(&run.fp) {
        let times = run.fp.probes.iter().filter(|q| q.name == p.name).count();
        if times > 1 {
            let _ = writeln!(
                h,
                "<p class=\"muted\">Probe {} is listed {times} times in this file: only the \
                 first entry is shown.</p>",
                escape(&p.name)
            );
        }
    }
}

/// One row of the metric table of a diff.
fn diff_metric_row(h: &mut String, m: &MetricDiff) {
    let class = match m.change {
        Change::Worse => "worse",
        Change::Better => "better",
        Change::Same => "",
        _ => "muted",
    };
    let _ = writeln!(
        h,
        "<tr><td>{}</td><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
         <td class=\"num\">{}</td><td class=\"{class}\">{}</td></tr>",
        escape(&m.probe),
        escape(&m.metric),
        escape(&diff::side_cell(m.old.as_ref(), &m.unit)),
        escape(&diff::side_cell(m.new.as_ref(), &m.unit)),
        diff::ratio_cell(m),
        diff::change_words(m)
    );
}

fn diff_metric_table(h: &mut String, metrics: &[&MetricDiff]) {
    h.push_str(
        "<div class=\"wide\"><table class=\"diff-table\"><tr><th>Probe</th><th>Metric</th>\
         <th>Old</th><th>New</th><th>New/Old</th><th>Change</th></tr>\n",
    );
    for m in metrics {
        diff_metric_row(h, m);
    }
    h.push_str("</table></div>\n");
}

/// A diff the way the check section reads: the counts first, then what moved with what it
/// costs software, the verdicts that changed, and the figures that did not move folded away.
fn diff_section(h: &mut String, d: &Diff) {
    let _ = writeln!(
        h,
        "<h2 id=\"diff-{}\">Diff: {} → {}</h2>\n<p>In all: {}.</p>",
        slug(&d.new.label),
        escape(&d.old.label),
        escape(&d.new.label),
        escape(&diff::summary_line(d))
    );
    diff_machine_facts(h, d);
    let moved: Vec<&MetricDiff> = d
        .metrics
        .iter()
        .filter(|m| matches!(m.change, Change::Worse | Change::Better | Change::Changed))
        .collect();
    h.push_str("<h3>Figures that moved</h3>\n");
    if moved.is_empty() {
        let _ = writeln!(
            h,
            "<p>No figure moved beyond noise{}.</p>",
            if d.counts.host_drift > 0 {
                " and the VM host's drift"
            } else {
                ""
            }
        );
    } else {
        diff_metric_table(h, &moved);
    }
    diff_costs(h, d);
    diff_verdicts(h, d);
    let rest: Vec<&MetricDiff> = d
        .metrics
        .iter()
        .filter(|m| !matches!(m.change, Change::Worse | Change::Better | Change::Changed))
        .collect();
    if !rest.is_empty() {
        let _ = writeln!(
            h,
            "<details><summary>The other {} figures (within noise, within the VM host's \
             drift, or not compared)</summary>",
            rest.len()
        );
        diff_metric_table(h, &rest);
        h.push_str("</details>\n");
    }
    for line in diff::not_measured_lines(d) {
        let _ = writeln!(h, "<p class=\"muted\">{}</p>", escape(&line));
    }
    for dup in &d.duplicate_probes {
        let _ = writeln!(
            h,
            "<p class=\"muted\">{}.</p>",
            escape(&diff::duplicate_words(d, dup))
        );
    }
    let _ = writeln!(
        h,
        "<details><summary class=\"muted\">Rule: {}.</summary><p class=\"muted\">{}.</p>\
         </details>",
        escape(&d.rule.short_words()),
        escape(&d.rule.words())
    );
}

fn diff_machine_facts(h: &mut String, d: &Diff) {
    let differing: Vec<_> = d.machine.iter().filter(|f| f.differs).collect();
    if differing.is_empty() {
        h.push_str("<p>Machine facts: identical.</p>\n");
        return;
    }
    h.push_str(
        "<h3>Machine facts that differ</h3>\n<table><tr><th>Fact</th><th>Old</th><th>New</th></tr>\n",
    );
    for f in differing {
        let _ = writeln!(
            h,
            "<tr><th>{}</th><td>{}</td><td>{}</td></tr>",
            escape(&f.fact),
            escape(&f.old),
            escape(&f.new)
        );
    }
    h.push_str("</table>\n");
}

/// What the hazards that read a moved figure cost software on each machine.
fn diff_costs(h: &mut String, d: &Diff) {
    if d.costs.is_empty() {
        return;
    }
    h.push_str("<h3>What they cost software</h3>\n<ul>\n");
    for c in &d.costs {
        let _ = write!(
            h,
            "<li><b>{}</b> ({}): {} → {}",
            escape(&c.title),
            escape(&c.moved.join(", ")),
            c.old.as_ref().map_or("not judged", |j| j.level.word()),
            c.new.as_ref().map_or("not judged", |j| j.level.word()),
        );
        for (side, cost) in [("old", &c.old_cost), ("new", &c.new_cost)] {
            if let Some(cost) = cost {
                let _ = write!(
                    h,
                    "<br><span class=\"muted\">{side}:</span> {}",
                    escape(cost)
                );
            }
        }
        h.push_str("</li>\n");
    }
    h.push_str("</ul>\n");
}

fn diff_verdicts(h: &mut String, d: &Diff) {
    if d.hazards.is_empty() {
        h.push_str("<p>Hazards: no verdict changed.</p>\n");
        return;
    }
    h.push_str(
        "<h3>Hazards whose verdict changed</h3>\n<table><tr><th>Hazard</th><th>Old</th>\
         <th>New</th><th>Software that pays for it</th></tr>\n",
    );
    for c in &d.hazards {
        let hurts = match c.direction {
            VerdictMove::Worse | VerdictMove::Better if !c.hurts.is_empty() => format!(
                "{}<ul>{}</ul>",
                if c.direction == VerdictMove::Worse {
                    "now hurts more:"
                } else {
                    "now hurts less:"
                },
                c.hurts
                    .iter()
                    .map(|s| format!("<li>{}</li>", escape(s)))
                    .collect::<String>()
            ),
            _ => format!(
                "<span class=\"muted\">{}</span>",
                escape(&diff::verdict_move_words(c))
            ),
        };
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&c.title),
            escape(&diff::judged_cell(c.old.as_ref())),
            escape(&diff::judged_cell(c.new.as_ref())),
            hurts
        );
    }
    h.push_str("</table>\n");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::test_support::sample_fingerprint;

    fn run(label: &str, fp: Fingerprint) -> Run {
        Run {
            label: label.into(),
            fp,
        }
    }

    fn page(runs: Vec<Run>) -> String {
        render_report(&Compared::new(runs).unwrap()).html
    }

    #[test]
    fn escaping_and_slugs() {
        assert_eq!(
            escape("<a href=\"x\">&'"),
            "&lt;a href=&quot;x&quot;&gt;&amp;&#39;"
        );
        assert_eq!(slug("pause-pause_ns_per_cpu"), "pause-pause-ns-per-cpu");
        assert_eq!(slug("c2c: Latency (ns)"), "c2c-latency-ns");
    }

    #[test]
    fn utc_time_is_civil() {
        assert_eq!(utc_time(0), "1970-01-01 00:00 UTC");
        assert_eq!(utc_time(1_800_000_000), "2027-01-15 08:00 UTC");
        assert_eq!(utc_time(951_782_400), "2000-02-29 00:00 UTC");
    }

    #[test]
    fn single_run_page_is_self_contained_with_pause_and_spin_charts() {
        let page = page(vec![run("a.json", sample_fingerprint())]);
        assert!(page.starts_with("<!DOCTYPE html>"));
        // One CPU's PAUSE bar would repeat the figure: left out.
        assert!(!page.contains("id=\"chart-pause-pause-ns-per-cpu\""));
        assert!(page.contains("id=\"chart-spin-before-block\""));
        assert!(page.contains("not measured: needs two CPUs"));
        assert!(!page.contains("<script"));
        // Nothing to fetch: the only URL is the SVG namespace.
        assert!(!page.contains("https:"));
        let urls = page.matches("http:").count();
        let ns = page.matches("xmlns=\"http://www.w3.org/2000/svg\"").count();
        assert_eq!(urls, ns);
        // Links only within the page (the verdict cards to their sections).
        assert!(!page.contains("src="));
        assert_eq!(
            page.matches("href=").count(),
            page.matches("href=\"#").count()
        );
    }

    #[test]
    fn several_runs_overlay_and_add_the_diff() {
        let mut slow = sample_fingerprint();
        slow.machine.cpu.microarchitecture = "Skylake-SP".into();
        let m = &mut slow.probes[0].metrics[0];
        let shift = 43.0 - m.value;
        m.value = 43.0;
        m.spread.as_mut().unwrap().median = 43.0;
        let i = m.interval.as_mut().unwrap();
        (i.low, i.high) = (i.low + shift, i.high + shift);
        let page = page(vec![
            run("zen4.json", sample_fingerprint()),
            run("skx.json", slow),
        ]);
        assert!(page.contains("Diff: zen4.json → skx.json"));
        assert!(page.contains("class=\"worse\">WORSE (higher)"));
        assert!(page.contains("spin-waits that count PAUSEs"));
        // The spin chart overlays both runs: their legend entries are present.
        let spin = &page[page.find("chart-spin-before-block").unwrap()..];
        assert!(spin.contains("zen4.json") && spin.contains("skx.json"));
        assert!(page.contains("<tr class=\"differs\"><th>Microarchitecture</th>"));
        // Issue 21: the diff reads like the check section: what moved, and what it costs,
        // before the figures that did not move, which are folded away.
        let diff = &page[page.find("Diff: zen4.json").unwrap()..];
        let moved = diff.find("Figures that moved").unwrap();
        let costs = diff.find("What they cost software").expect(diff);
        assert!(moved < costs, "{diff}");
        let folded = diff
            .find("<details><summary>The other")
            .unwrap_or(diff.len());
        assert!(costs < folded, "{diff}");
        assert!(!diff[..folded].contains("within noise</td>"), "{diff}");
    }

    #[test]
    fn xy_series_sharing_axes_share_a_chart_and_matrices_get_one_heatmap_per_run() {
        let mut fp = sample_fingerprint();
        let mut p = crate::schema::ProbeResult::new("mem_latency", Status::Ok);
        for (name, scale) in [("latency_4k", 1.0), ("latency_2m", 0.8)] {
            p.series.push(crate::schema::Series::Xy {
                name: name.into(),
                x_label: "size_bytes".into(),
                y_label: "latency_ns".into(),
                points: (12..24)
                    .map(|e| [(1u64 << e) as f64, e as f64 * scale])
                    .collect(),
            });
        }
        p.series.push(crate::schema::Series::Matrix {
            name: "c2c_latency_ns".into(),
            unit: "ns".into(),
            rows: vec!["cpu0".into(), "cpu1".into(), "cpu2".into()],
            cols: vec!["cpu0".into(), "cpu1".into(), "cpu2".into()],
            values: vec![
                vec![None, Some(50.0), Some(90.0)],
                vec![Some(52.0), None, Some(91.0)],
                vec![Some(88.0), Some(89.0), None],
            ],
        });
        fp.probes.push(p);
        let page = page(vec![run("a", fp.clone()), run("b", fp)]);
        assert_eq!(page.matches("data-kind=\"xy\"").count(), 1);
        assert!(page.contains("4 curve(s) of probe mem_latency"));
        let m = &page[page.find("data-kind=\"matrix\"").unwrap()..];
        let m = &m[..m.find("</figure>").unwrap()];
        assert_eq!(m.matches("<svg").count(), 2);
    }

    #[test]
    fn a_report_needs_a_fingerprint() {
        // Regression guard: an empty list indexed facts[0] and panicked; now it cannot be built.
        assert!(Compared::new(Vec::new()).is_none());
    }

    #[test]
    fn a_probe_listed_twice_is_shown_once_and_named() {
        let mut fp = sample_fingerprint();
        let mut twice = fp.probes[0].clone();
        twice.metrics[0].value = 999.0;
        fp.probes.push(twice);
        let page = page(vec![run("a", fp)]);
        assert_eq!(page.matches("<td>pause_ns</td>").count(), 1);
        assert!(!page.contains("999"));
        assert!(page.contains("Probe pause is listed 2 times in this file"));
    }
}
