//! The knowledge base: for each hazard, the metrics it reads, thresholds with their sources,
//! and the explanation a user reads. Pure functions from a fingerprint to verdicts; nothing
//! here measures or prints.
//!
//! Adding a hazard: write a module with a type implementing [`Hazard`] and list it in [`all`].

pub mod huge_pages;
pub mod pause;
pub mod prefetch;
pub mod tlb;

use crate::report::schema::{Fingerprint, Verdict};

/// One hazard rule.
pub trait Hazard: Sync {
    /// Stable identifier, as in the fingerprint (`slow_pause`).
    fn id(&self) -> &'static str;
    /// The software patterns this hazard hurts, in plain words (`diff` names them when the
    /// verdict changes between machines).
    fn hurts(&self) -> &'static [&'static str];
    /// Judges the fingerprint; `None` when the metrics it needs are absent (probe skipped or
    /// not run), so no verdict is invented.
    fn judge(&self, fp: &Fingerprint) -> Option<Verdict>;
}

/// Every hazard rule.
pub fn all() -> &'static [&'static dyn Hazard] {
    &[
        &pause::SlowPause,
        &huge_pages::HugePages,
        &tlb::SmallPagePenalty,
        &prefetch::SoftwarePrefetch,
    ]
}

/// The rule with identifier `id`.
pub fn by_id(id: &str) -> Option<&'static dyn Hazard> {
    all().iter().copied().find(|h| h.id() == id)
}

/// Every verdict the fingerprint supports, in rule order.
pub fn judge_all(fp: &Fingerprint) -> Vec<Verdict> {
    all().iter().filter_map(|h| h.judge(fp)).collect()
}
