//! How a finding quotes what moving or locking a cache line costs on this machine, and where
//! the figure came from; without a figure, where to get one (no other machine's figure stands
//! in: a line transfer costs ~22 ns inside one CCX of some parts and several times that on
//! others).

use crate::format::human_ns;

/// Where a quoted cost came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CostFrom<'a> {
    /// A fingerprint saved by `cpudoctor check`, given with `--check FILE`.
    SavedCheck(&'a str),
    /// The probes' quick profile, run after the workload.
    MeasuredNow,
}

/// How a finding says where its figure came from.
pub fn source_phrase(from: CostFrom) -> String {
    match from {
        CostFrom::SavedCheck(file) => format!("this machine's check in {file}"),
        CostFrom::MeasuredNow => "measured on this machine after the workload".into(),
    }
}

/// What a core-to-core line transfer costs here (`ns` and its source), or where to measure it.
pub fn line_transfer(measured: Option<(f64, CostFrom)>) -> String {
    match measured {
        Some((ns, from)) => format!(
            "~{} per transfer between cores ({})",
            human_ns(ns),
            source_phrase(from)
        ),
        None => "a core-to-core transfer, whose cost on this machine `cpudoctor check` \
                 measures (c2c_latency_ns; give a saved one with --check FILE)"
            .into(),
    }
}

/// A split lock's cost here against an aligned one.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SplitLockCost<'a> {
    /// ns per split lock.
    pub split_ns: f64,
    /// ns per aligned locked handoff, when measured.
    pub aligned_ns: Option<f64>,
    /// Where the figures came from.
    pub from: CostFrom<'a>,
}

/// What a split lock costs here against an aligned one, or where to measure it.
pub fn split_lock(cost: Option<SplitLockCost>) -> String {
    match cost {
        Some(c) => format!(
            "~{} per split lock{} ({})",
            human_ns(c.split_ns),
            c.aligned_ns
                .map(|a| format!(" against ~{} aligned", human_ns(a)))
                .unwrap_or_default(),
            source_phrase(c.from)
        ),
        None => "what that costs on this machine, `cpudoctor check` measures (its split-lock \
                 probe; give a saved check with --check FILE)"
            .into(),
    }
}
