//! Terminal rendering: the machine summary, the probe results, the verdict table, the spin
//! table. Each function returns a `String` for a given width, so output is snapshot-testable
//! and the binary decides where it goes.

use super::schema::{Fingerprint, Level, ProbeResult, Status, Verdict};
use crate::format::{group_thousands, human_bytes};
use crate::machine::Machine;
use crate::machine::topology::Topology;
use crate::measure::ClockInfo;
use crate::spin::SpinCost;
use comfy_table::{ContentArrangement, Table, presets::UTF8_FULL_CONDENSED};
use std::fmt::Write;

/// A table in the style every terminal view of cpudoctor uses, fitted to `width` columns.
pub(crate) fn table(width: u16, header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_style(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_width(width)
        .set_header(header.to_vec());
    t
}

/// Cores, sockets, NUMA nodes and SMT in one line: `2 cores, 1 socket(s), 1 NUMA node(s), SMT off`.
pub fn topology_line(t: &Topology) -> String {
    format!(
        "{} cores, {} socket(s), {} NUMA node(s), SMT {}",
        t.cores,
        t.packages,
        t.numa_nodes,
        if t.smt { "on" } else { "off" }
    )
}

/// The data and unified caches in one line: `L1 32 KiB x2, L2 1 MiB x2, L3 32 MiB`.
pub fn caches_line(t: &Topology) -> String {
    t.caches
        .iter()
        .filter(|c| c.kind != "Instruction")
        .map(|c| {
            format!(
                "L{} {}{}",
                c.level,
                human_bytes(c.size_bytes),
                if c.instances > 1 {
                    format!(" x{}", c.instances)
                } else {
                    String::new()
                }
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The machine summary: one fact per line.
pub fn render_machine(m: &Machine, clock: &ClockInfo) -> String {
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
        m.split_lock.effective, m.split_lock.summary
    );
    s
}

fn metric_line(p: &ProbeResult) -> String {
    p.metrics
        .iter()
        .map(|m| {
            let spread = m.spread.as_ref().map_or(String::new(), |s| {
                format!(
                    " ±{:.1}%{}",
                    s.relative_spread * 100.0,
                    if s.wide { " WIDE" } else { "" }
                )
            });
            format!(
                "{} {}{}",
                m.name,
                crate::format::human_value(m.value, &m.unit),
                spread
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The probe table: status, headline metrics with spread (WIDE when noisy), time taken.
pub fn render_probes(probes: &[ProbeResult], width: u16) -> String {
    let mut t = table(
        width,
        &["Probe", "Status", "Metrics (median ±spread)", "Time"],
    );
    for p in probes {
        let status = match p.status {
            Status::Ok => "ok".to_string(),
            Status::Skipped => "skipped".to_string(),
            Status::Failed => "FAILED".to_string(),
        };
        let body = match &p.reason {
            Some(r) => r.clone(),
            None => metric_line(p),
        };
        t.add_row(vec![
            p.name.clone(),
            status,
            body,
            format!("{:.2} s", p.duration_s),
        ]);
    }
    t.to_string()
}

/// A verdict's level as the table shows it.
pub fn level_word(l: Level) -> &'static str {
    match l {
        Level::Ok => "ok",
        Level::Notice => "notice",
        Level::Hazard => "HAZARD",
    }
}

/// The verdict table: hazard, measured figure, reference, verdict, what it means.
pub fn render_verdicts(verdicts: &[Verdict], width: u16) -> String {
    if verdicts.is_empty() {
        return "No verdicts: no probe that a hazard rule reads ran successfully.\n".into();
    }
    let mut t = table(
        width,
        &[
            "Hazard",
            "Measured",
            "Reference",
            "Verdict",
            "What it means for software",
        ],
    );
    for v in verdicts {
        t.add_row(vec![
            v.title.clone(),
            v.figure.clone(),
            v.reference.clone(),
            level_word(v.level).to_string(),
            v.explanation.clone(),
        ]);
    }
    t.to_string()
}

/// The full `check` report.
pub fn render_check(fp: &Fingerprint, width: u16) -> String {
    format!(
        "{}\n{}\n\n{}\n",
        render_machine(&fp.machine, &fp.clock),
        render_probes(&fp.probes, width),
        render_verdicts(&fp.verdicts, width)
    )
}

/// The spin-before-block table.
pub fn render_spin_table(costs: &[SpinCost], pause_ns: f64, cores: u64, width: u16) -> String {
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
    use crate::report::test_support::sample_fingerprint;

    #[test]
    fn check_report_shows_machine_probes_and_verdicts() {
        let out = render_check(&sample_fingerprint(), 120);
        for needle in [
            "AMD EPYC (Zen 4, family 25 model 17 stepping 1)",
            "guest of KVM",
            "TSC at 2596.0 MHz (calibrated)",
            "PMU         none: no hardware PMU",
            "THP madvise",
            "Split locks not_detected",
            "pause_ns 24.5 ns ±0.6%",
            "needs two CPUs",
            "PAUSE latency",
            "24.5 ns = 90 cycles",
            "notice",
        ] {
            assert!(out.contains(needle), "missing {needle:?} in\n{out}");
        }
    }

    #[test]
    fn wide_spread_is_flagged() {
        let mut fp = sample_fingerprint();
        fp.probes[0].metrics[0].spread = crate::measure::summarize(&[10.0, 20.0, 30.0]);
        assert!(render_probes(&fp.probes, 120).contains("WIDE"));
    }

    #[test]
    fn no_verdicts_says_so() {
        assert!(render_verdicts(&[], 80).starts_with("No verdicts"));
    }
}
