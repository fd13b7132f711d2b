//! The words of a disturbed measurement: what disturbed a probe (its CPU quota, steal, other
//! tasks, its wait for a CPU) in one clause, the line `check` and `probe` print above figures
//! measured while disturbed, and why `diff` does not compare them.

use crate::format::pct;
use crate::schema::disturbance::{Disturbance, DisturbedBy};

/// `0.5 CPU`, `1.5 CPUs`.
fn cpus(n: f64) -> String {
    let shown = format!("{n:.2}");
    let shown = shown.trim_end_matches('0').trim_end_matches('.');
    format!("{shown} CPU{}", if n <= 1.0 { "" } else { "s" })
}

/// One cause with its figures: `a CPU quota of 0.5 CPU (throttled in 64 of 158 periods,
/// 0.83 s)`, `steal of 12%`, `other tasks busy 1.0 CPU on its CPUs`, `its threads waiting
/// for a CPU 31% of the time`.
pub fn cause(by: DisturbedBy, d: &Disturbance) -> String {
    match by {
        DisturbedBy::CpuQuota => {
            let quota = d.cpu_quota_cpus.map_or("a CPU quota".to_string(), |q| {
                format!("a CPU quota of {}", cpus(q))
            });
            let periods = match (d.throttled_periods, d.periods) {
                (Some(t), Some(p)) if p > 0 => format!("throttled in {t} of {p} periods"),
                (Some(t), _) => format!("throttled in {t} periods"),
                _ => "throttled".to_string(),
            };
            let time = d
                .throttled_s
                .map_or(String::new(), |s| format!(", {s:.2} s"));
            format!("{quota} ({periods}{time})")
        }
        DisturbedBy::Steal => format!(
            "steal of {} of its CPUs' time",
            pct(d.steal_ratio.unwrap_or(0.0), 0)
        ),
        DisturbedBy::OtherTasks => format!(
            "other tasks busy {:.1} CPU on its CPUs",
            d.others_busy_cpus.unwrap_or(0.0)
        ),
        DisturbedBy::WaitedForCpu => format!(
            "its threads waiting for a CPU {} of the time",
            pct(d.run_queue_wait_ratio.unwrap_or(0.0), 0)
        ),
    }
}

/// Every cause, joined: `a CPU quota of 0.5 CPU (...); its threads waiting ...`.
pub fn causes(d: &Disturbance) -> String {
    d.by.iter()
        .map(|b| cause(*b, d))
        .collect::<Vec<_>>()
        .join("; ")
}

/// A probe's note where its figures are listed: `disturbed: measured under ...`.
pub fn probe_note(d: &Disturbance) -> String {
    format!("disturbed, not the machine's figures: {}", causes(d))
}

/// What a probe's window was too short to tell, where its counters could not resolve a
/// figure past its line: `window too short to tell (0.01 s; /proc/stat counts 10 ms ticks):
/// other tasks busy 0.9 CPU on its CPUs, within 2 CPUs of the counters' error; not called a
/// disturbance`. `None` when nothing was unresolved.
pub fn unresolved_note(d: &Disturbance) -> Option<String> {
    if d.unresolved.is_empty() {
        return None;
    }
    let r = crate::schema::disturbance::Resolution::of(d.wall_s, d.cpus.len(), None);
    let each: Vec<String> = d
        .unresolved
        .iter()
        .map(|&b| {
            let within = match b {
                DisturbedBy::OtherTasks => format!(
                    ", within {} of the counters' error",
                    cpus(r.others_busy_cpus)
                ),
                DisturbedBy::Steal => {
                    format!(", within {} of the counters' error", pct(r.steal_ratio, 0))
                }
                DisturbedBy::WaitedForCpu => format!(
                    ", within one scheduler slice ({}) of waiting",
                    pct(r.run_queue_wait_ratio, 0)
                ),
                DisturbedBy::CpuQuota => String::new(),
            };
            format!("{}{within}", cause(b, d))
        })
        .collect();
    Some(format!(
        "window too short to tell ({:.2} s; /proc/stat counts {:.0} ms ticks): {}; not called a \
         disturbance",
        d.wall_s,
        1e3 / crate::schema::disturbance::USER_HZ,
        each.join("; ")
    ))
}

/// The mark a verdict's figure carries when a probe it reads was disturbed.
pub const VERDICT_MARK: &str = "(disturbed)";

/// The line above a `check` or `probe` screen some of whose probes were disturbed, or `None`
/// when none was. `disturbed` lists each disturbed probe with its record, in run order.
///
/// Under a quota that throttled: `Measured under a CPU quota of 0.5 CPU (throttled in 64 of
/// 158 periods): figures below are not the machine's. ...`. Otherwise the causes, and which
/// probes, with the way to a clean figure.
pub fn screen_banner(disturbed: &[(&str, &Disturbance)]) -> Option<String> {
    let (_, first) = disturbed.first()?;
    let names: Vec<&str> = disturbed.iter().map(|(n, _)| *n).collect();
    let (throttled_names, throttled): (Vec<&str>, Vec<&Disturbance>) = disturbed
        .iter()
        .filter(|(_, d)| d.by.contains(&DisturbedBy::CpuQuota))
        .map(|(n, d)| (*n, *d))
        .unzip();
    let marked = format!(
        "Verdicts that read them are marked {VERDICT_MARK}; `diff` does not compare their \
         figures."
    );
    if let Some(q) = throttled.first() {
        // Saturating: the counts come from a saved file (outside input).
        let (t, p) = throttled.iter().fold((0u64, 0u64), |(t, p), d| {
            (
                t.saturating_add(d.throttled_periods.unwrap_or(0)),
                p.saturating_add(d.periods.unwrap_or(0)),
            )
        });
        let quota = q.cpu_quota_cpus.map_or("a CPU quota".to_string(), |c| {
            format!("a CPU quota of {}", cpus(c))
        });
        let all = if throttled.len() == disturbed.len() {
            String::new()
        } else {
            let others: Vec<&str> = disturbed
                .iter()
                .filter(|(_, d)| !d.by.contains(&DisturbedBy::CpuQuota))
                .map(|(n, _)| *n)
                .collect();
            format!("; {} disturbed otherwise", others.join(", "))
        };
        return Some(format!(
            "Measured under {quota} (throttled in {t} of {p} periods while {} measured{all}): \
             figures below are not the machine's. {marked} For the machine's figures run it \
             where no quota applies (outside the container, or with the cgroup's cpu limit \
             lifted).",
            throttled_names.join(", ")
        ));
    }
    let why = if disturbed.len() == 1 {
        causes(first)
    } else {
        let mut by: Vec<DisturbedBy> = disturbed
            .iter()
            .flat_map(|(_, d)| d.by.iter().copied())
            .collect();
        by.sort_unstable();
        by.dedup();
        by.iter()
            .map(|b| match b {
                DisturbedBy::CpuQuota => "a CPU quota",
                DisturbedBy::Steal => "steal by the hypervisor",
                DisturbedBy::OtherTasks => "other tasks busy on its CPUs",
                DisturbedBy::WaitedForCpu => "its threads waiting for a CPU",
            })
            .collect::<Vec<_>>()
            .join(", ")
    };
    Some(format!(
        "Measured while disturbed ({why}): figures of {} below are not the machine's. \
         {marked} Run it again when the machine is quiet; `--verbose` shows each probe's \
         figures.",
        names.join(", ")
    ))
}

/// Which run(s) a diff could not compare a probe in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunsDisturbed {
    /// The old run only.
    Old,
    /// The new run only.
    New,
    /// Both.
    Both,
}

/// Why `diff` leaves a probe's figures uncompared: `not compared: the old run was measured
/// under a CPU quota of 0.5 CPU (throttled in 64 of 158 periods, 0.83 s)`. `d` is a record of
/// the disturbed run (the old one's when both were).
pub fn not_compared(runs: RunsDisturbed, d: &Disturbance) -> String {
    let who = match runs {
        RunsDisturbed::Old => "the old run was",
        RunsDisturbed::New => "the new run was",
        RunsDisturbed::Both => "both runs were",
    };
    let how = if d.by.contains(&DisturbedBy::CpuQuota) {
        format!("measured under {}", cause(DisturbedBy::CpuQuota, d))
    } else {
        format!("measured while disturbed ({})", causes(d))
    };
    format!("not compared: {who} {how}")
}

/// A diff's line when no figure it compared moved but some were left out as disturbed.
pub const NONE_MOVED_SOME_DISTURBED: &str = "No figure compared moved beyond noise; those measured while disturbed are not compared (below).";

/// The title of a diff's section of figures left out as disturbed, with their count.
pub fn not_compared_title(figures: usize) -> String {
    format!(
        "Not compared, measured while disturbed ({})",
        crate::format::count_of(figures, "figure", "figures")
    )
}

/// Why a verdict whose level differs between the runs is not a change: a figure it reads was
/// measured while disturbed.
pub const VERDICT_NOT_COMPARED: &str =
    "not compared: a figure it reads was measured while disturbed (see above)";

#[cfg(test)]
mod tests {
    use super::*;

    fn throttled() -> Disturbance {
        Disturbance {
            by: vec![DisturbedBy::CpuQuota, DisturbedBy::WaitedForCpu],
            unresolved: Vec::new(),
            wall_s: 1.5,
            cpus: vec![0, 1],
            cpu_quota_cpus: Some(0.5),
            periods: Some(16),
            throttled_periods: Some(15),
            throttled_s: Some(0.75),
            steal_ratio: Some(0.0),
            others_busy_cpus: Some(0.01),
            run_queue_wait_ratio: Some(0.48),
        }
    }

    fn hogged() -> Disturbance {
        Disturbance {
            by: vec![DisturbedBy::OtherTasks],
            cpu_quota_cpus: None,
            periods: None,
            throttled_periods: None,
            throttled_s: None,
            others_busy_cpus: Some(1.02),
            ..throttled()
        }
    }

    #[test]
    fn the_quota_banner_says_the_figures_are_not_the_machines() {
        let t = throttled();
        let b = screen_banner(&[("pause", &t), ("c2c", &t)]).unwrap();
        assert!(
            b.starts_with(
                "Measured under a CPU quota of 0.5 CPU (throttled in 30 of 32 periods while \
                 pause, c2c measured): figures below are not the machine's."
            ),
            "{b}"
        );
        assert!(b.contains(VERDICT_MARK), "{b}");
        let h = hogged();
        let b = screen_banner(&[("pause", &t), ("tlb", &h)]).unwrap();
        assert!(
            b.contains("pause measured; tlb disturbed otherwise):"),
            "{b}"
        );
        assert_eq!(screen_banner(&[]), None);
    }

    #[test]
    fn a_busy_cpu_is_named_with_its_load() {
        let h = hogged();
        let b = screen_banner(&[("mem-latency", &h)]).unwrap();
        assert!(
            b.starts_with(
                "Measured while disturbed (other tasks busy 1.0 CPU on its CPUs): figures of \
                 mem-latency below are not the machine's."
            ),
            "{b}"
        );
        assert_eq!(
            probe_note(&throttled()),
            "disturbed, not the machine's figures: a CPU quota of 0.5 CPU (throttled in 15 of \
             16 periods, 0.75 s); its threads waiting for a CPU 48% of the time"
        );
    }

    #[test]
    fn a_window_too_short_says_so_and_claims_nothing() {
        // The idle Emerald Rapids guest's c2c probe: 10 ms, one tick of anything on a CPU.
        let d = Disturbance {
            by: Vec::new(),
            unresolved: vec![DisturbedBy::OtherTasks],
            wall_s: 0.01,
            others_busy_cpus: Some(0.86),
            ..hogged()
        };
        assert_eq!(
            unresolved_note(&d).unwrap(),
            "window too short to tell (0.01 s; /proc/stat counts 10 ms ticks): other tasks \
             busy 0.9 CPU on its CPUs, within 4 CPUs of the counters' error; not called a \
             disturbance"
        );
        assert_eq!(unresolved_note(&hogged()), None);
    }

    #[test]
    fn diff_says_which_run_and_why() {
        assert_eq!(
            not_compared(RunsDisturbed::Old, &throttled()),
            "not compared: the old run was measured under a CPU quota of 0.5 CPU (throttled \
             in 15 of 16 periods, 0.75 s)"
        );
        assert_eq!(
            not_compared(RunsDisturbed::New, &hogged()),
            "not compared: the new run was measured while disturbed (other tasks busy 1.0 CPU \
             on its CPUs)"
        );
        assert!(not_compared(RunsDisturbed::Both, &hogged()).contains("both runs were"));
        assert_eq!(cpus(1.5), "1.5 CPUs");
        assert_eq!(cpus(2.0), "2 CPUs");
    }
}
