//! The fingerprint in the Prometheus text exposition format (version 0.0.4), for
//! node_exporter's textfile collector: every host writes `cpudoctor.prom` into the collector's
//! directory, and the monitoring a fleet already runs stores and compares the figures.
//!
//! Names are `cpudoctor_<metric>_<base unit>`, in Prometheus' base units
//! (<https://prometheus.io/docs/practices/naming/>): nanoseconds become seconds, GB/s
//! bytes per second, GHz hertz; ratios end in `_ratio`, counts of cycles in `_cycles`. A figure
//! with a confidence interval also gets `_ci_low` and `_ci_high` series. Verdicts are one
//! series each, `cpudoctor_verdict{hazard, level, borderline} 1`, and the machine is an info
//! series. Pure: fingerprint in, text out; writing the file atomically is the caller's.

use crate::schema::{Fingerprint, Level, Metric, Status};
use std::fmt::Write;

/// A metric's name and value in base units: `pause_ns` 24.1 -> (`pause_seconds`, 2.41e-8).
fn base_unit(m: &Metric) -> (String, f64) {
    // The unit's spellings in cpudoctor's names (`read_bw_1t_gbs`, `victim_bandwidth_gb_s`).
    let stem = |suffix: &str| {
        let alt = suffix.replace("gbs", "gb_s");
        m.name
            .strip_suffix(suffix)
            .or_else(|| m.name.strip_suffix(alt.as_str()))
            .unwrap_or(&m.name)
            .trim_end_matches('_')
            .to_string()
    };
    match m.unit.as_str() {
        "ns" => (format!("{}_seconds", stem("_ns")), 1e-9),
        "us" => (format!("{}_seconds", stem("_us")), 1e-6),
        "ms" => (format!("{}_seconds", stem("_ms")), 1e-3),
        "s" => (format!("{}_seconds", stem("_s")), 1.0),
        "GB/s" => (format!("{}_bytes_per_second", stem("_gbs")), 1e9),
        "GHz" => (format!("{}_hertz", stem("_ghz")), 1e9),
        "bytes" => (format!("{}_bytes", stem("_bytes")), 1.0),
        "cycles" => (format!("{}_cycles", stem("_cycles")), 1.0),
        "ticks" => (format!("{}_ticks", stem("_ticks")), 1.0),
        "ratio" => (format!("{}_ratio", stem("_ratio")), 1.0),
        other => (
            format!(
                "{}_{}",
                m.name,
                other
                    .chars()
                    .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                    .collect::<String>()
            ),
            1.0,
        ),
    }
}

/// A label value with `\`, `"` and newlines escaped, as the format requires.
pub fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
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

/// The exposition text for one fingerprint.
pub fn prometheus_text(fp: &Fingerprint) -> String {
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
            let (name, scale) = base_unit(metric);
            let name = format!("cpudoctor_{}", sanitize(&name));
            if seen.contains(&name) {
                continue;
            }
            seen.push(name.clone());
            let _ = writeln!(
                out,
                "# HELP {name} {} ({} in cpudoctor's own unit), probe {}.\n# TYPE {name} gauge\n\
                 {name} {}",
                metric.name,
                metric.unit,
                p.name,
                number(metric.value * scale)
            );
            if let Some(i) = &metric.interval {
                for (bound, v) in [("low", i.low), ("high", i.high)] {
                    let _ = writeln!(
                        out,
                        "# HELP {name}_ci_{bound} {} end of the {:.0}% confidence interval of \
                         {name}.\n# TYPE {name}_ci_{bound} gauge\n{name}_ci_{bound} {}",
                        if bound == "low" { "Lower" } else { "Upper" },
                        i.confidence * 100.0,
                        number(v * scale)
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
    use crate::schema::{Better, Interval};

    #[test]
    fn figures_are_in_base_units() {
        let mut m = Metric::derived("pause_ns", 24.0, "ns", Better::Lower);
        assert_eq!(base_unit(&m).0, "pause_seconds");
        m = Metric::derived("read_bw_1t_gbs", 20.0, "GB/s", Better::Higher);
        assert_eq!(base_unit(&m), ("read_bw_1t_bytes_per_second".into(), 1e9));
        m = Metric::derived("victim_bandwidth_gb_s", 20.0, "GB/s", Better::Higher);
        assert_eq!(base_unit(&m).0, "victim_bandwidth_bytes_per_second");
        m = Metric::derived("false_sharing_ratio", 3.0, "ratio", Better::Lower);
        assert_eq!(base_unit(&m).0, "false_sharing_ratio");
        m = Metric::derived("tlb_reach_bytes", 8.0, "bytes", Better::Higher);
        assert_eq!(base_unit(&m).0, "tlb_reach_bytes");
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
        let text = prometheus_text(&fp);
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
            text.contains("\ncpudoctor_pause_seconds_ci_low 0.0000000244"),
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
        let text = prometheus_text(&fp);
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
        let text = prometheus_text(&fp);
        assert!(
            text.contains("\ncpudoctor_probe_disturbed{probe=\"pause\",by=\"\"} 0\n"),
            "{text}"
        );
    }
}
