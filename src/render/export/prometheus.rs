//! The fingerprint in the Prometheus text exposition format (version 0.0.4), for
//! node_exporter's textfile collector (`--prom`): every host writes `cpudoctor.prom` into the
//! collector's directory, and the monitoring a fleet already runs stores and compares the
//! figures.
//!
//! Names follow Prometheus' conventions (<https://prometheus.io/docs/practices/naming/>),
//! checked by `promtool check metrics` over every figure of the corpus (`tests/prom_export.rs`):
//! `cpudoctor_<figure>_<base unit>`, the unit last and in base units ([`exposition`]):
//! nanoseconds and milliseconds become `_seconds`, GB/s `_bytes_per_second`, GHz `_hertz`,
//! `locks/s` `_locks_per_second`; ratios end in `_ratio`, counts of cycles in `_cycles`, sizes
//! in `_bytes`. A figure with a confidence interval also gets `_ci_low_<unit>` and
//! `_ci_high_<unit>` series. Verdicts are one series each, `cpudoctor_verdict{hazard, level,
//! borderline} 1`, and the machine is an info series. Pure: fingerprint in, bytes out
//! ([`Prometheus`]); writing the file atomically is the caller's.

use super::Export;
use crate::schema::{Fingerprint, Level, Status};
use std::fmt::Write;

/// One unit cpudoctor writes, and the Prometheus base unit it becomes.
struct BaseUnit {
    /// The unit as a [`Metric`](crate::schema::Metric) carries it.
    unit: &'static str,
    /// How the unit is spelt at the end of cpudoctor's names (`read_bw_1t_gbs`,
    /// `victim_bandwidth_gb_s`), taken off before the base unit goes on.
    spellings: &'static [&'static str],
    /// The base unit's suffix.
    base: &'static str,
    /// What a figure in `unit` is multiplied by to be in `base`.
    scale: f64,
}

/// cpudoctor's units in base units. A rate of things per second (`locks/s`) is not listed:
/// [`exposition`] makes it `_<things>_per_second`.
const BASE_UNITS: [BaseUnit; 10] = [
    BaseUnit {
        unit: "ns",
        spellings: &["_ns"],
        base: "seconds",
        scale: 1e-9,
    },
    BaseUnit {
        unit: "us",
        spellings: &["_us"],
        base: "seconds",
        scale: 1e-6,
    },
    BaseUnit {
        unit: "ms",
        spellings: &["_ms"],
        base: "seconds",
        scale: 1e-3,
    },
    BaseUnit {
        unit: "s",
        spellings: &["_s", "_seconds"],
        base: "seconds",
        scale: 1.0,
    },
    BaseUnit {
        unit: "GB/s",
        spellings: &["_gbs", "_gb_s", "_gbps"],
        base: "bytes_per_second",
        scale: 1e9,
    },
    BaseUnit {
        unit: "GHz",
        spellings: &["_ghz"],
        base: "hertz",
        scale: 1e9,
    },
    BaseUnit {
        unit: "bytes",
        spellings: &["_bytes"],
        base: "bytes",
        scale: 1.0,
    },
    BaseUnit {
        unit: "cycles",
        spellings: &["_cycles"],
        base: "cycles",
        scale: 1.0,
    },
    BaseUnit {
        unit: "ticks",
        spellings: &["_ticks"],
        base: "ticks",
        scale: 1.0,
    },
    BaseUnit {
        unit: "ratio",
        spellings: &["_ratio"],
        base: "ratio",
        scale: 1.0,
    },
];

/// A figure as the exposition names it: `cpudoctor_<stem>[_<series>]_<unit>`.
#[derive(Debug, Clone, PartialEq)]
pub struct Exposition {
    /// The figure's name without its unit, only `[a-zA-Z0-9_]`: `pause` for `pause_ns`.
    pub stem: String,
    /// The base unit's suffix (`seconds`, `bytes_per_second`); empty for a figure without one.
    pub unit: String,
    /// What the figure is multiplied by to be in `unit`: 1e-9 for ns.
    pub scale: f64,
}

impl Exposition {
    /// The series' name: `cpudoctor_pause_seconds`; with `part` (`ci_low`) before the unit,
    /// which stays last: `cpudoctor_pause_ci_low_seconds`.
    pub fn name(&self, part: Option<&str>) -> String {
        let mut n = format!("cpudoctor_{}", self.stem);
        for p in part.into_iter().chain(Some(self.unit.as_str())) {
            if !p.is_empty() {
                n.push('_');
                n.push_str(p);
            }
        }
        n
    }
}

/// The exposition name and scale of a figure, from its name and unit: (`pause_ns`, `ns`) ->
/// `pause` in `seconds`, x 1e-9; (`split_lock_locks_per_s`, `locks/s`) ->
/// `split_lock_locks` in `per_second`; (`read_bw_1t_gbs`, `GB/s`) -> `read_bw_1t` in
/// `bytes_per_second`, x 1e9. A unit not known here is appended as written, with anything
/// but `[a-zA-Z0-9_]` made `_`.
pub fn exposition(name: &str, unit: &str) -> Exposition {
    let stem_of = |spellings: &[&str]| {
        let stem = spellings
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|t| !t.is_empty()))
            .unwrap_or(name);
        sanitize(stem)
    };
    if let Some(b) = BASE_UNITS.iter().find(|b| b.unit == unit) {
        return Exposition {
            stem: stem_of(b.spellings),
            unit: b.base.to_string(),
            scale: b.scale,
        };
    }
    // A rate: `locks/s` -> `_locks_per_second`, the things counted named once.
    if let Some(things) = unit.strip_suffix("/s").map(sanitize)
        && !things.is_empty()
    {
        let stem = stem_of(&["_per_s", "_per_sec", "_per_second"]);
        let stem = if stem.ends_with(&format!("_{things}")) || stem == things {
            stem
        } else {
            format!("{stem}_{things}")
        };
        return Exposition {
            stem,
            unit: "per_second".to_string(),
            scale: 1.0,
        };
    }
    Exposition {
        stem: sanitize(name),
        unit: sanitize(unit),
        scale: 1.0,
    }
}

/// A label value with `\`, `"` and newlines escaped, as the format requires.
pub fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A HELP text with `\` and newlines escaped, as the format requires.
fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

/// Only `[a-zA-Z0-9_]` in a metric name; anything else becomes `_`.
fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

fn level_label(l: Level) -> &'static str {
    match l {
        Level::Ok => "ok",
        Level::Notice => "notice",
        Level::Hazard => "hazard",
    }
}

/// A value as the format writes it (Go's float formatting accepts Rust's `{}` for finite
/// numbers; non-finite ones have their own spellings).
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        }
    } else {
        format!("{v}")
    }
}

/// The Prometheus exporter: the exposition text of a fingerprint ([module docs](self)).
#[derive(Debug, Clone, Copy, Default)]
pub struct Prometheus;

impl Export<Fingerprint> for Prometheus {
    fn export(&self, fp: &Fingerprint) -> Vec<u8> {
        text(fp).into_bytes()
    }
}

/// The exposition text for one fingerprint.
fn text(fp: &Fingerprint) -> String {
    let mut out = String::new();
    let m = &fp.machine;
    let info = [
        ("cpu_model", m.cpu.model_name.clone()),
        ("microarchitecture", m.cpu.microarchitecture.clone()),
        ("microcode", m.cpu.microcode.clone().unwrap_or_default()),
        ("kernel", m.kernel_release.clone().unwrap_or_default()),
        (
            "hypervisor",
            m.hypervisor
                .as_ref()
                .map_or("none".to_string(), |h| h.vendor.clone()),
        ),
        ("version", fp.tool.version.clone()),
    ];
    let labels: Vec<String> = info
        .iter()
        .map(|(k, v)| format!("{k}=\"{}\"", escape_label(v)))
        .collect();
    let _ = writeln!(
        out,
        "# HELP cpudoctor_info The machine cpudoctor measured, and its version.\n\
         # TYPE cpudoctor_info gauge\ncpudoctor_info{{{}}} 1",
        labels.join(",")
    );
    let _ = writeln!(
        out,
        "# HELP cpudoctor_run_timestamp_seconds When the run started, seconds since the Unix epoch.\n\
         # TYPE cpudoctor_run_timestamp_seconds gauge\ncpudoctor_run_timestamp_seconds {}",
        fp.created_unix_s
    );
    if !fp.verdicts.is_empty() {
        let _ = writeln!(
            out,
            "# HELP cpudoctor_verdict One series per hazard, labelled with its level (and the \
             other level when the figure is near a threshold).\n# TYPE cpudoctor_verdict gauge"
        );
        for v in &fp.verdicts {
            let _ = writeln!(
                out,
                "cpudoctor_verdict{{hazard=\"{}\",level=\"{}\",borderline=\"{}\"}} 1",
                escape_label(&v.hazard),
                level_label(v.level),
                v.borderline.map_or("", level_label)
            );
        }
    }
    if !fp.not_judged.is_empty() {
        let _ = writeln!(
            out,
            "# HELP cpudoctor_not_judged One series per hazard whose probes ran but which has no \
             verdict (a figure could not be measured).\n# TYPE cpudoctor_not_judged gauge"
        );
        for n in &fp.not_judged {
            let _ = writeln!(
                out,
                "cpudoctor_not_judged{{hazard=\"{}\"}} 1",
                escape_label(&n.hazard)
            );
        }
    }
    // Whether each probe's figures were measured while disturbed (a CPU quota that throttled,
    // steal, other tasks on its CPUs), so a fleet can leave such hosts' figures out; only
    // probes whose run recorded it (files from builds before it have none).
    let watched: Vec<(&str, &crate::schema::disturbance::Disturbance)> = fp
        .probes
        .iter()
        .filter(|p| p.status == Status::Ok)
        .filter_map(|p| Some((p.name.as_str(), p.disturbance.as_ref()?)))
        .collect();
    if !watched.is_empty() {
        let _ = writeln!(
            out,
            "# HELP cpudoctor_probe_disturbed 1 when the probe's figures were measured while \
             disturbed (label by: cpu_quota, steal, other_tasks, waited_for_cpu), else 0.\n\
             # TYPE cpudoctor_probe_disturbed gauge"
        );
        let mut seen_probes: Vec<&str> = Vec::new();
        for (probe, d) in watched {
            if seen_probes.contains(&probe) {
                continue;
            }
            seen_probes.push(probe);
            let by: Vec<String> =
                d.by.iter()
                    .map(|b| {
                        serde_json::to_value(b)
                            .ok()
                            .and_then(|v| v.as_str().map(str::to_string))
                            .unwrap_or_default()
                    })
                    .collect();
            let _ = writeln!(
                out,
                "cpudoctor_probe_disturbed{{probe=\"{}\",by=\"{}\"}} {}",
                escape_label(probe),
                by.join(","),
                u8::from(d.disturbed())
            );
        }
    }
    // One family per metric name; a probe listed twice keeps its first entry (as `diff`).
    let mut seen: Vec<String> = Vec::new();
    for p in fp.probes.iter().filter(|p| p.status == Status::Ok) {
        for metric in &p.metrics {
            let e = exposition(&metric.name, &metric.unit);
            let name = e.name(None);
            if seen.contains(&name) {
                continue;
            }
            seen.push(name.clone());
            let _ = writeln!(
                out,
                "# HELP {name} {} ({} in cpudoctor's own unit), probe {}.\n# TYPE {name} gauge\n\
                 {name} {}",
                escape_help(&metric.name),
                escape_help(&metric.unit),
                escape_help(&p.name),
                number(metric.value * e.scale)
            );
            if let Some(i) = &metric.interval {
                for (bound, v) in [("low", i.low), ("high", i.high)] {
                    let series = e.name(Some(&format!("ci_{bound}")));
                    let _ = writeln!(
                        out,
                        "# HELP {series} {} end of the {:.0}% confidence interval of \
                         {name}.\n# TYPE {series} gauge\n{series} {}",
                        if bound == "low" { "Lower" } else { "Upper" },
                        i.confidence * 100.0,
                        number(v * e.scale)
                    );
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Interval;

    /// The series name and scale of a figure.
    fn named(name: &str, unit: &str) -> (String, f64) {
        let e = exposition(name, unit);
        (e.name(None), e.scale)
    }

    #[test]
    fn figures_are_in_base_units() {
        assert_eq!(
            named("pause_ns", "ns"),
            ("cpudoctor_pause_seconds".into(), 1e-9)
        );
        assert_eq!(
            named("delay_1ms_ideal_ms", "ms"),
            ("cpudoctor_delay_1ms_ideal_seconds".into(), 1e-3)
        );
        assert_eq!(
            named("read_bw_1t_gbs", "GB/s"),
            ("cpudoctor_read_bw_1t_bytes_per_second".into(), 1e9)
        );
        assert_eq!(
            named("victim_bandwidth_gb_s", "GB/s").0,
            "cpudoctor_victim_bandwidth_bytes_per_second"
        );
        assert_eq!(
            named("read_bandwidth_gbps", "GB/s").0,
            "cpudoctor_read_bandwidth_bytes_per_second"
        );
        assert_eq!(
            named("core_clock_ghz", "GHz"),
            ("cpudoctor_core_clock_hertz".into(), 1e9)
        );
        assert_eq!(
            named("false_sharing_ratio", "ratio"),
            ("cpudoctor_false_sharing_ratio".into(), 1.0)
        );
        assert_eq!(
            named("tlb_reach_bytes", "bytes").0,
            "cpudoctor_tlb_reach_bytes"
        );
        assert_eq!(named("pause_cycles", "cycles").0, "cpudoctor_pause_cycles");
        assert_eq!(
            named("pause_tsc_ticks", "ticks").0,
            "cpudoctor_pause_tsc_ticks"
        );
        // A name that does not spell its unit keeps its words and gains the base unit.
        assert_eq!(named("wall", "s").0, "cpudoctor_wall_seconds");
        assert_eq!(named("ns", "ns").0, "cpudoctor_ns_seconds");
    }

    /// Issue 32: `split_lock_locks_per_s` in `locks/s` was exported as
    /// `cpudoctor_split_lock_locks_per_s_locks_s`, which promtool rejects ("metric names should
    /// not contain abbreviated units").
    #[test]
    fn case_split_locks_per_s_is_a_rate_per_second() {
        assert_eq!(
            named("split_lock_locks_per_s", "locks/s"),
            ("cpudoctor_split_lock_locks_per_second".into(), 1.0)
        );
        assert_eq!(
            named("aggressor_split_locks_per_s", "locks/s").0,
            "cpudoctor_aggressor_split_locks_per_second"
        );
        // The things counted are named once, whether or not the name says them.
        assert_eq!(
            named("split_lock_rate", "locks/s").0,
            "cpudoctor_split_lock_rate_locks_per_second"
        );
    }

    #[test]
    fn interval_series_keep_the_unit_last() {
        let e = exposition("pause_ns", "ns");
        assert_eq!(e.name(Some("ci_low")), "cpudoctor_pause_ci_low_seconds");
        let e = exposition("split_lock_locks_per_s", "locks/s");
        assert_eq!(
            e.name(Some("ci_high")),
            "cpudoctor_split_lock_locks_ci_high_per_second"
        );
    }

    #[test]
    fn an_unknown_unit_is_appended_in_name_characters() {
        assert_eq!(
            named("widgets", "w.x"),
            ("cpudoctor_widgets_w_x".into(), 1.0)
        );
        assert_eq!(named("plain", "").0, "cpudoctor_plain");
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
    }

    #[test]
    fn the_sample_fingerprint_exports_info_verdicts_figures_and_intervals() {
        let mut fp = crate::schema::test_support::sample_fingerprint();
        fp.probes[0].metrics[0].interval = Some(Interval {
            low: 24.4,
            high: 24.6,
            confidence: 0.95,
        });
        fp.verdicts.clear();
        crate::hazards::judge_into(&mut fp);
        let text = super::text(&fp);
        assert!(text.contains("cpudoctor_info{cpu_model="), "{text}");
        assert!(
            text.contains("cpudoctor_verdict{hazard=\"slow_pause\""),
            "{text}"
        );
        assert!(
            text.contains("\ncpudoctor_pause_seconds 0.0000000245"),
            "{text}"
        );
        assert!(
            text.contains("\ncpudoctor_pause_ci_low_seconds 0.0000000244"),
            "{text}"
        );
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (name, value) = line.rsplit_once(' ').unwrap();
            assert!(value.parse::<f64>().is_ok(), "{line}");
            assert!(name.starts_with("cpudoctor_"), "{line}");
        }
        assert!(
            !text.contains("cpudoctor_probe_disturbed"),
            "no record, no series"
        );
    }

    #[test]
    fn a_probe_throttled_by_a_quota_is_exported_as_disturbed() {
        use crate::schema::disturbance::{Disturbance, DisturbedBy};
        let mut fp = crate::schema::test_support::sample_fingerprint();
        let record = Disturbance {
            by: vec![DisturbedBy::CpuQuota, DisturbedBy::OtherTasks],
            others_busy_cpus: Some(0.5),
            ..crate::schema::test_support::throttled_by_quota()
        };
        fp.probes[0].disturbance = Some(record.clone());
        let text = super::text(&fp);
        assert!(
            text.contains(
                "\ncpudoctor_probe_disturbed{probe=\"pause\",by=\"cpu_quota,other_tasks\"} 1\n"
            ),
            "{text}"
        );
        fp.probes[0].disturbance = Some(Disturbance {
            by: vec![],
            ..record
        });
        let text = super::text(&fp);
        assert!(
            text.contains("\ncpudoctor_probe_disturbed{probe=\"pause\",by=\"\"} 0\n"),
            "{text}"
        );
    }
}
