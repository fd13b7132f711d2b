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

/// Why a hazard has no verdict when every figure it reads is there.
pub const FIGURES_DO_NOT_SUPPORT_A_VERDICT: &str =
    "its figures were measured but do not support a verdict";
