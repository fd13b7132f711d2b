//! Terminal rendering: the machine summary, the probe results, the verdict table, the spin
//! table. Each function returns a `String` for a given width, so output is snapshot-testable
//! and the binary decides where it goes.

pub use super::text::Style;
use super::text::wrap_hanging;
use super::text::{align_right, at_least, columns, keep_whole, lines, table, wrap};
use crate::format::{group_thousands, human_value};
use crate::schema::{Fingerprint, Level, Metric, ProbeResult, Status, Verdict};
use crate::spin::SpinCost;
use crate::words::compare::summary_of;
use crate::words::disturbance::{VERDICT_MARK, probe_note, screen_banner};
use crate::words::machine::{caches_line, split_lock_words, topology_line};
use std::fmt::Write;

/// [`render_machine`] in `style` (its width), continuation lines hanging under the value
/// column (`Split locks ` is 12 wide).
pub fn render_machine_wrapped(fp: &Fingerprint, style: impl Into<Style>) -> String {
    let width = style.into().width;
    render_machine(fp)
        .lines()
        .map(|line| wrap_hanging(line, width, 0, 12))
        .collect()
}

/// The machine summary: one fact per line; the split-lock line says what the split-lock
/// probe measured beside the kernel's mode, when it ran.
pub fn render_machine(fp: &Fingerprint) -> String {
    let (m, clock) = (&fp.machine, &fp.clock);
    let mut s = String::new();
    let _ = writeln!(s, "CPU         {}", m.cpu_line());
    let topo = m.topology.as_ref();
    let _ = writeln!(
        s,
        "Topology    {} logical CPUs{}",
        m.logical_cpus,
        topo.map(|t| format!(", {}", topology_line(t)))
            .unwrap_or_default()
    );
    if let Some(t) = topo {
        let _ = writeln!(s, "Caches      {}", caches_line(t));
    }
    let _ = writeln!(
        s,
        "Kernel      {}{}",
        m.kernel_release.as_deref().unwrap_or("unknown"),
        m.hypervisor
            .as_ref()
            .map(|h| format!(", guest of {}", h.vendor))
            .unwrap_or_else(|| ", bare metal".into())
    );
    let _ = writeln!(
        s,
        "Clock       {}",
        match (clock.tsc_hz, &clock.tsc_hz_source) {
            (Some(hz), Some(src)) => format!("TSC at {:.1} MHz ({src})", hz / 1e6),
            _ => format!("clock_gettime ({})", clock.reason),
        }
    );
    let _ = writeln!(
        s,
        "PMU         {}",
        if m.pmu.usable {
            "hardware counters available".to_string()
        } else {
            format!("none: {}", m.pmu.reason.as_deref().unwrap_or("unknown"))
        }
    );
    let _ = writeln!(
        s,
        "Huge pages  THP {}",
        m.thp.as_ref().map_or("unknown", |t| t.enabled.as_str())
    );
    let _ = writeln!(
        s,
        "Split locks {}: {}",
        crate::words::machine::split_lock_mode(m.split_lock.effective),
        crate::words::machine::split_lock_summary(&m.split_lock, fp.split_lock_seen().as_ref())
    );
    if let Some(c) = &m.cgroup {
        let _ = writeln!(s, "Cgroup      {}", crate::words::machine::cgroup_facts(c));
    }
    s
}

/// A verdict's level with its borderline neighbour: `notice`, or `notice/HAZARD` when the
/// figure's interval spans the threshold between the two.
pub fn level_cell(v: &Verdict) -> String {
    match v.borderline {
        Some(other) => {
            let (lo, hi) = if other < v.level {
                (other, v.level)
            } else {
                (v.level, other)
            };
            format!("{}/{}", lo.word(), hi.word())
        }
        None => v.level.word().to_string(),
    }
}

/// A figure's confidence interval in its unit, when the fingerprint has one:
/// `95% CI 24.2-24.7 ns` (see [`Metric::interval_text`]).
pub fn interval_words(m: &Metric) -> Option<String> {
    m.interval_text()
}

/// The machine in two lines: what it is, then the facts that change the verdicts (split locks
/// as the split-lock probe measured them, when it ran).
pub fn machine_lines(fp: &Fingerprint, width: u16) -> String {
    let (m, clock) = (&fp.machine, &fp.clock);
    let place = match &m.hypervisor {
        Some(h) => format!("{} guest", h.vendor),
        None => "bare metal".into(),
    };
    let kernel = m
        .kernel_release
        .as_deref()
        .map(|k| format!(", kernel {}", k.split('-').next().unwrap_or(k)))
        .unwrap_or_default();
    let clock_words = match clock.tsc_hz {
        Some(hz) => format!("TSC {:.0} MHz", hz / 1e6),
        None => "no usable TSC".into(),
    };
    let pmu = if m.pmu.usable {
        "hardware counters"
    } else {
        "no PMU"
    };
    let thp = m
        .thp
        .as_ref()
        .map_or("THP unknown".to_string(), |t| format!("THP {}", t.enabled));
    let c = &m.cpu;
    let name = if c.model_name.is_empty() {
        &c.vendor
    } else {
        &c.model_name
    };
    let what = format!(
        "{name} ({}, family {} model {}), {} CPUs, {place}{kernel}",
        c.microarchitecture, c.family, c.model, m.logical_cpus
    );
    let facts = format!(
        "{clock_words}, {pmu}, {thp}, {}",
        split_lock_words(
            m.split_lock.effective,
            fp.split_lock_seen().map(|s| s.mechanism)
        )
    );
    let limits = m
        .cgroup
        .as_ref()
        .and_then(crate::words::machine::cgroup_line)
        .map(|l| wrap(&l, width, 0))
        .unwrap_or_default();
    format!(
        "{}{}{limits}",
        wrap(&what, width, 0),
        wrap(&facts, width, 0)
    )
}

/// Counts of verdicts by level, and of hazards not judged: `2 hazards, 1 notice, 4 ok, 1 not
/// judged, 1 borderline`.
pub fn verdict_counts(verdicts: &[Verdict], not_judged: usize) -> String {
    let n = |l: Level| verdicts.iter().filter(|v| v.level == l).count();
    let plural = crate::format::count_of;
    let mut s = format!(
        "{}, {}, {} ok",
        plural(n(Level::Hazard), "hazard", "hazards"),
        plural(n(Level::Notice), "notice", "notices"),
        n(Level::Ok)
    );
    if not_judged > 0 {
        s.push_str(&format!(", {not_judged} {NOT_JUDGED}"));
    }
    let borderline = verdicts.iter().filter(|v| v.borderline.is_some()).count();
    if borderline > 0 {
        s.push_str(&format!(
            ", {borderline} borderline (x/y: near the line between the two)"
        ));
    }
    s
}

/// The line above the verdicts when a probe was measured while disturbed (a CPU quota that
/// throttled, steal, other tasks on its CPUs), or nothing.
pub fn disturbed_banner(fp: &Fingerprint, width: u16) -> String {
    let disturbed: Vec<(&str, &crate::schema::disturbance::Disturbance)> = fp
        .probes
        .iter()
        .filter(|p| p.status == Status::Ok)
        .filter_map(|p| Some((p.name.as_str(), p.disturbed()?)))
        .collect();
    screen_banner(&disturbed).map_or(String::new(), |b| wrap(&b, width, 0))
}

/// Whether a probe whose figures set verdict `v`'s level (its rule's `reads`) was measured
/// while disturbed. A figure only quoted does not mark it: huge pages are judged on whether
/// the buffers got them, which no quota changes, though the verdict quotes the TLB penalty.
fn verdict_disturbed(fp: &Fingerprint, v: &Verdict) -> bool {
    let Some(rule) = crate::hazards::by_id(&v.hazard) else {
        return false;
    };
    rule.reads()
        .iter()
        .any(|id| fp.probe(id.probe).and_then(|p| p.disturbed()).is_some())
}

/// Narrowest level column of the summary (`HAZARD` and a space or two).
const LEVEL_W: usize = 8;
/// The level cell of a hazard with no verdict (see [`crate::schema::NotJudged`]).
const NOT_JUDGED: &str = "not judged";

/// The one-screen summary of a `check`: the machine in two lines, one entry per hazard
/// (level, title, headline figure with its interval, one line of meaning), the counts, and
/// where to read more. Seven hazards fit an 80x24 terminal.
pub fn render_summary(fp: &Fingerprint, style: Style) -> String {
    let mut s = machine_lines(fp, style.width);
    s.push('\n');
    let banner = disturbed_banner(fp, style.width);
    if !banner.is_empty() {
        s.push_str(&banner);
        s.push('\n');
    }
    if fp.verdicts.is_empty() {
        s.push_str("No verdicts: no probe that a hazard rule reads ran successfully.\n");
    }
    let title_w = fp
        .verdicts
        .iter()
        .map(|v| v.title.as_str())
        .chain(fp.not_judged.iter().map(|n| n.title.as_str()))
        .map(|t| t.chars().count())
        .max()
        .unwrap_or(0);
    // The level column is as wide as its widest cell (`notice/HAZARD` when borderline).
    let level_w = fp
        .verdicts
        .iter()
        .map(|v| level_cell(v).chars().count())
        .chain(fp.not_judged.iter().map(|_| NOT_JUDGED.chars().count()))
        .max()
        .unwrap_or(0)
        .max(LEVEL_W);
    for v in &fp.verdicts {
        let level = level_cell(v);
        let pad = (level_w + 1).saturating_sub(level.chars().count()).max(1);
        let head_indent = level_w + 1 + title_w + 2;
        s.push_str(&style.paint_level(v.level, &level));
        s.push_str(&" ".repeat(pad));
        s.push_str(&format!("{:<title_w$}  ", v.title));
        let figure = if verdict_disturbed(fp, v) {
            format!("{} {VERDICT_MARK}", v.figure)
        } else {
            v.figure.clone()
        };
        s.push_str(wrap(&figure, style.width, head_indent).trim_start());
        s.push_str(&wrap(&summary_of(v), style.width, level_w + 1));
    }
    for n in &fp.not_judged {
        let head_indent = level_w + 1 + title_w + 2;
        s.push_str(&format!("{NOT_JUDGED:<level_w$} {:<title_w$}  ", n.title));
        s.push_str(wrap(&n.why, style.width, head_indent).trim_start());
        s.push_str(&wrap(
            &format!("measure it: {}", n.measure_with),
            style.width,
            level_w + 1,
        ));
    }
    let probes_ok = fp.probes.iter().filter(|p| p.status == Status::Ok).count();
    let not_ok: Vec<&str> = fp
        .probes
        .iter()
        .filter(|p| p.status != Status::Ok)
        .map(|p| p.name.as_str())
        .collect();
    let seconds: f64 = fp.probes.iter().map(|p| p.duration_s).sum();
    let mut count = format!(
        "{}. {probes_ok} probe{} ok in {seconds:.1} s",
        verdict_counts(&fp.verdicts, fp.not_judged.len()),
        if probes_ok == 1 { "" } else { "s" }
    );
    if !not_ok.is_empty() {
        count.push_str(&format!("; not measured: {}", not_ok.join(", ")));
    }
    count.push('.');
    s.push('\n');
    s.push_str(&wrap(&count, style.width, 0));
    // A memory probe whose buffers a limit made smaller says so (the sentence it saved).
    for p in &fp.probes {
        use crate::schema::probes::{bandwidth::BandwidthEffects, mem_latency::MemLatencyEffects};
        let (limit, capped) = match p.name.as_str() {
            crate::names::probe::MEM_LATENCY => p
                .raw::<MemLatencyEffects>()
                .map_or((None, None), |e| (e.memory_limit, e.max_size_capped)),
            crate::names::probe::BANDWIDTH => p
                .raw::<BandwidthEffects>()
                .map_or((None, None), |e| (e.memory_limit, e.buffer_capped)),
            _ => (None, None),
        };
        if let (Some(_), Some(why)) = (limit, capped) {
            s.push_str(&wrap(&format!("{}: {why}.", p.name), style.width, 2));
        }
    }
    let mut worst: Vec<&Verdict> = fp.verdicts.iter().filter(|v| v.level > Level::Ok).collect();
    worst.sort_by_key(|v| std::cmp::Reverse(v.level));
    let ids: Vec<&str> = match worst.as_slice() {
        [] => fp
            .verdicts
            .iter()
            .map(|v| v.hazard.as_str())
            .take(1)
            .collect(),
        w => w.iter().map(|v| v.hazard.as_str()).collect(),
    };
    if let Some((first, rest)) = ids.split_first() {
        let others = if rest.is_empty() {
            String::new()
        } else {
            format!(" (or {})", rest.join(", "))
        };
        s.push_str(&wrap(
            &format!("Why, and what to do: cpudoctor explain {first}{others}."),
            style.width,
            0,
        ));
    }
    s.push_str("Every verdict in full, and every figure: add --verbose.\n");
    s
}

/// One verdict in full, as paragraphs: level and figure, the reference it is judged
/// against, what it means for software, and the patterns it hurts.
pub fn render_verdict_detail(v: &Verdict, style: Style) -> String {
    let mut s = String::new();
    let head = format!(
        "{} ({}): {}, {}",
        v.title,
        v.hazard,
        level_cell(v),
        v.figure
    );
    let head = wrap(&head, style.width, 0);
    // Colour the level word in place, after wrapping counted only visible characters.
    s.push_str(&head.replacen(
        &format!(": {},", level_cell(v)),
        &format!(": {},", style.paint_level(v.level, &level_cell(v))),
        1,
    ));
    s.push_str(&wrap(
        &format!("Judged against: {}.", v.reference.trim_end_matches('.')),
        style.width,
        2,
    ));
    s.push_str(&wrap(&v.explanation, style.width, 2));
    if let Some(rule) = crate::hazards::by_id(&v.hazard) {
        s.push_str(&wrap(
            &format!("Hurts: {}.", rule.hurts().join("; ")),
            style.width,
            2,
        ));
    }
    s
}

/// The probes as an aligned list (a table without borders, names and values kept whole): status
/// and time per probe, then each figure with its spread and interval, the columns lined up
/// across probes.
pub fn render_probe_list(probes: &[ProbeResult], style: Style) -> String {
    let name_w = probes
        .iter()
        .flat_map(|p| p.metrics.iter().map(|m| m.name.len()))
        .max()
        .unwrap_or(10);
    let mut s = String::new();
    for p in probes {
        let status = match p.status {
            Status::Ok => "ok",
            Status::Skipped => "skipped",
            Status::Failed => "FAILED",
        };
        let _ = writeln!(s, "{} ({status}, {:.2} s)", p.name, p.duration_s);
        if let Some(r) = &p.reason {
            s.push_str(&wrap(r, style.width, 2));
        }
        if let Some(d) = p.disturbed().filter(|_| p.status == Status::Ok) {
            s.push_str(&wrap(&probe_note(d), style.width, 2));
        }
        let mut t = columns(style.width, &[]);
        for m in &p.metrics {
            t.add_row(vec![
                m.name.clone(),
                human_value(m.value, &m.unit),
                m.spread.as_ref().map_or(String::new(), |sp| {
                    format!(
                        "±{}{}",
                        crate::format::pct(sp.relative_spread, 1),
                        if sp.wide { " WIDE" } else { "" }
                    )
                }),
                interval_words(m).unwrap_or_default(),
            ]);
        }
        if !p.metrics.is_empty() {
            at_least(&mut t, 0, name_w);
            at_least(&mut t, 1, VALUE_COLUMNS);
            keep_whole(&mut t, &[2]);
            align_right(&mut t, &[1]);
        }
        s.push_str(&lines(t, 2));
    }
    s
}

/// The width of the value column of [`render_probe_list`]: `1.53 MiB`, `71.4 cycles`.
const VALUE_COLUMNS: usize = 11;

/// The `check` report: the summary; with `verbose` also every verdict in full, the machine
/// facts one per line and every probe's figures.
pub fn render_check(fp: &Fingerprint, style: Style, verbose: bool) -> String {
    let mut s = render_summary(fp, style);
    if verbose {
        s.push_str("\nVerdicts in full\n\n");
        for v in &fp.verdicts {
            s.push_str(&render_verdict_detail(v, style));
            s.push('\n');
        }
        s.push_str("Machine\n\n");
        s.push_str(&render_machine_wrapped(fp, style));
        s.push_str("\nProbes (median, ±relative spread of repetitions, WIDE when noisy)\n\n");
        s.push_str(&render_probe_list(&fp.probes, style));
    }
    s
}

/// The spin-before-block table.
pub fn render_spin_table(
    costs: &[SpinCost],
    pause_ns: f64,
    cores: u64,
    style: impl Into<Style>,
) -> String {
    let width = style.into().width;
    let mut t = table(
        width,
        &[
            "Runtime",
            "Primitive",
            "PAUSEs",
            "Spin before blocking",
            "Worst extra delay",
            "Then",
        ],
    );
    for c in costs {
        t.add_row(vec![
            c.runtime.clone(),
            c.primitive.clone(),
            if c.scales_with_pause {
                group_thousands(c.pauses.round() as u64)
            } else {
                format!("~{} (time-bound)", group_thousands(c.pauses.round() as u64))
            },
            crate::format::human_ns(c.spin_ns),
            c.worst_extra_delay_ns
                .map_or("-".into(), crate::format::human_ns),
            c.then.clone(),
        ]);
    }
    format!("At {pause_ns:.1} ns per PAUSE, {cores} cores:\n{t}\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::test_support::sample_fingerprint;

    #[test]
    fn a_probe_throttled_by_a_quota_is_said_above_the_verdicts_and_marked() {
        use crate::schema::disturbance::{Disturbance, DisturbedBy};
        let mut fp = sample_fingerprint();
        let quiet = render_check(&fp, Style::plain(100), true);
        assert!(!quiet.contains("Measured under"), "{quiet}");
        assert!(!quiet.contains(VERDICT_MARK), "{quiet}");
        fp.probes[0].disturbance = Some(Disturbance {
            by: vec![DisturbedBy::CpuQuota],
            wall_s: 1.2,
            cpus: vec![0, 1],
            cpu_quota_cpus: Some(0.5),
            periods: Some(13),
            throttled_periods: Some(10),
            throttled_s: Some(0.16),
            steal_ratio: None,
            others_busy_cpus: None,
            run_queue_wait_ratio: None,
        });
        let out = render_check(&fp, Style::plain(100), true);
        assert!(
            out.contains("Measured under a CPU quota of 0.5 CPU (throttled in 10 of 13 periods"),
            "{out}"
        );
        assert!(out.contains("24.5 ns = 90 cycles (disturbed)"), "{out}");
        assert!(
            out.contains("disturbed, not the machine's figures: a CPU quota of 0.5 CPU"),
            "{out}"
        );
    }

    #[test]
    fn check_report_shows_machine_probes_and_verdicts() {
        let out = render_check(&sample_fingerprint(), Style::plain(120), true);
        for needle in [
            "AMD EPYC (Zen 4, family 25 model 17), 2 CPUs, KVM guest",
            "TSC 2596 MHz, no PMU, THP madvise, split locks invisible to the kernel",
            "PMU         none: no hardware PMU",
            "Split locks not detected",
            "pause_ns",
            "24.5 ns  ±0.6%",
            "needs two CPUs",
            "PAUSE latency",
            "24.5 ns = 90 cycles",
            "notice",
        ] {
            assert!(out.contains(needle), "missing {needle:?} in\n{out}");
        }
    }

    #[test]
    fn a_borderline_verdict_shows_both_levels_and_is_counted() {
        let mut fp = sample_fingerprint();
        fp.verdicts[0].borderline = Some(Level::Hazard);
        let out = render_summary(&fp, Style::plain(80));
        assert!(out.contains("notice/HAZARD"), "{out}");
        assert!(out.contains("1 borderline"), "{out}");
    }

    #[test]
    fn colour_only_when_asked() {
        let fp = sample_fingerprint();
        assert!(!render_summary(&fp, Style::plain(80)).contains('\x1b'));
        let coloured = Style {
            width: 80,
            color: true,
        };
        assert!(render_summary(&fp, coloured).contains("\x1b[33mnotice\x1b[0m"));
    }

    #[test]
    fn wide_spread_is_flagged() {
        let mut fp = sample_fingerprint();
        fp.probes[0].metrics[0].spread = crate::stats::summarize(&[10.0, 20.0, 30.0]);
        assert!(render_probe_list(&fp.probes, Style::plain(80)).contains("WIDE"));
    }

    #[test]
    fn no_verdicts_says_so() {
        let mut fp = sample_fingerprint();
        assert!(!render_summary(&fp, Style::plain(80)).contains("No verdicts"));
        fp.verdicts.clear();
        let out = render_summary(&fp, Style::plain(80));
        assert!(
            out.contains("No verdicts: no probe that a hazard rule reads ran"),
            "{out}"
        );
    }
}
