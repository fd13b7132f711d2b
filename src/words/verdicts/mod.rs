//! The sentences of the hazards' verdicts: summary, figure, reference and explanation, each
//! from the figures the hazard judged.
//!
//! One module per hazard, each with a small struct of the facts its verdict rests on (the
//! numbers, units in the field names, and the level); the hazard fills it and calls here. The
//! words shared by every hazard (an interval beside its figure, why a hazard has no verdict)
//! live in this file.

pub mod cross_core;
pub mod false_sharing;
pub mod huge_pages;
pub mod pause;
pub mod prefetch;
pub mod split_lock;
pub mod tlb;

use crate::schema::Metric;

/// `figure` followed by `metric`'s confidence interval in parentheses when it has one
/// (`27.1 ns (95% CI 26.9-27.4 ns)`): each interval printed beside the figure it belongs to,
/// never after a line that ends with another figure.
pub fn with_interval(figure: String, metric: Option<&Metric>) -> String {
    match metric.and_then(Metric::interval_text) {
        Some(ci) => format!("{figure} ({ci})"),
        None => figure,
    }
}

/// How a probe a hazard needs ended, when it did not end ok.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeGap {
    /// It was not run at all.
    NotRun,
    /// It was skipped.
    Skipped,
    /// It failed.
    Failed,
}

/// Why a hazard has no verdict: its probe `probe` ended as `gap`, with the probe's `reason`
/// when it gave one.
pub fn probe_gap(probe: &str, gap: ProbeGap, reason: Option<&str>) -> String {
    let how = match gap {
        ProbeGap::NotRun => return format!("the {probe} probe did not run"),
        ProbeGap::Skipped => "was skipped",
        ProbeGap::Failed => "failed",
    };
    match reason {
        Some(r) => format!("the {probe} probe {how}: {r}"),
        None => format!("the {probe} probe {how}"),
    }
}

/// Why a hazard has no verdict: the figures it reads, named in `missing`, are absent.
pub fn figures_missing(missing: &[&str]) -> String {
    format!("no {} in this run", missing.join(" or "))
}

/// The command that measures what hazard `id` needs.
pub fn measure_with(id: &str) -> String {
    format!("cpudoctor explain {id}")
}

/// Why a hazard has no verdict when every figure it reads is there.
pub const FIGURES_DO_NOT_SUPPORT_A_VERDICT: &str =
    "its figures were measured but do not support a verdict";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_gap_names_the_probe_how_it_ended_and_its_reason() {
        assert_eq!(
            probe_gap("c2c", ProbeGap::NotRun, Some("ignored")),
            "the c2c probe did not run"
        );
        assert_eq!(
            probe_gap("sharing", ProbeGap::Skipped, Some("needs two CPUs")),
            "the sharing probe was skipped: needs two CPUs"
        );
        assert_eq!(
            probe_gap("pause", ProbeGap::Failed, None),
            "the pause probe failed"
        );
        assert_eq!(
            figures_missing(&["pause_ns", "pause_cycles"]),
            "no pause_ns or pause_cycles in this run"
        );
    }

    #[test]
    fn reference_figures_print_as_the_sources_give_them() {
        // Formatted from f64 constants: whole figures must not grow a `.0`.
        assert_eq!(
            cross_core::reference(),
            "Zen 4 EPYC: SMT sibling ~9 ns, same CCX ~22 ns, other CCD ~100 ns, other socket \
             ~200 ns (chipsandcheese, AnandTech core-to-core tests)"
        );
        assert_eq!(
            pause::reference(),
            "~10 cycles Haswell/Broadwell (4 ns); ~140 cycles Skylake-SP (43 ns)"
        );
        assert_eq!(
            split_lock::reference(),
            "Zen 5 ~500 ns, Arrow Lake/Alder Lake P ~7 us core to core; up to 10x slower \
             L2/L3/DRAM on other cores (chipsandcheese); Linux: 10 ms sleep per trapped split \
             lock (#AC, split_lock_mitigate=1), ~1 ms per trap measured with #DB bus-lock \
             detection (Emerald Rapids KVM); a host that traps a guest's: ~2 us bus locks \
             between 100-500 us traps (Emerald Rapids KVM)"
        );
        assert_eq!(
            false_sharing::reference(),
            "the Netflix JVM case: false sharing tripled CPI; padding, then not writing the \
             shared field, gave 3.5x throughput"
        );
    }
}
