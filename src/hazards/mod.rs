//! The knowledge base: for each hazard, the metrics it reads, thresholds with their sources,
//! and the explanation a user reads. Pure functions from a fingerprint to verdicts; nothing
//! here measures or prints.
//!
//! Adding a hazard: write a module with a type implementing [`Hazard`] and list it in [`all`].

pub mod cross_core;
pub mod false_sharing;
pub mod huge_pages;
pub mod pause;
pub mod prefetch;
pub mod split_lock;
pub mod tlb;

use crate::report::schema::{Fingerprint, Verdict};

/// One hazard rule.
pub trait Hazard: Sync {
    /// Stable identifier, as in the fingerprint (`slow_pause`).
    fn id(&self) -> &'static str;
    /// The software patterns this hazard hurts, in plain words (`diff` names them when the
    /// verdict changes between machines).
    fn hurts(&self) -> &'static [&'static str];
    /// The metrics the verdict's level depends on, as (probe, metric). `diff` counts a change
    /// of verdict between two runs as real only when one of them moved beyond both runs'
    /// spread; otherwise the figure merely crossed a threshold within noise.
    fn reads(&self) -> &'static [(&'static str, &'static str)];
    /// The probes whose results the verdict needs (`cpudoctor explain` runs these): by
    /// default those of [`Hazard::reads`].
    fn probes(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = self.reads().iter().map(|(p, _)| *p).collect();
        names.dedup();
        names
    }
    /// Judges the fingerprint; `None` when the metrics it needs are absent (probe skipped or
    /// not run), so no verdict is invented.
    fn judge(&self, fp: &Fingerprint) -> Option<Verdict>;
}

/// Every hazard rule.
pub fn all() -> &'static [&'static dyn Hazard] {
    &[
        &pause::SlowPause,
        &cross_core::CrossCoreLatency,
        &split_lock::SplitLock,
        &false_sharing::FalseSharing,
        &huge_pages::HugePages,
        &tlb::SmallPagePenalty,
        &prefetch::SoftwarePrefetch,
    ]
}

/// The rule with identifier `id`.
pub fn by_id(id: &str) -> Option<&'static dyn Hazard> {
    all().iter().copied().find(|h| h.id() == id)
}

/// The identifiers of every rule, comma-separated, for error messages.
pub fn known_ids() -> String {
    all().iter().map(|h| h.id()).collect::<Vec<_>>().join(", ")
}

/// Every verdict the fingerprint supports, in rule order.
pub fn judge_all(fp: &Fingerprint) -> Vec<Verdict> {
    all().iter().filter_map(|h| h.judge(fp)).collect()
}
