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

use crate::report::schema::{Fingerprint, Interval, Level, Verdict};

/// The level a figure reaches against ascending `steps` of (threshold, level), starting from
/// `base` below the first.
pub fn level_at(x: f64, base: Level, steps: &[(f64, Level)]) -> Level {
    steps
        .iter()
        .rev()
        .find(|(t, _)| x >= *t)
        .map_or(base, |(_, l)| *l)
}

/// A verdict level with confidence: when the figure's interval lies between two steps the
/// level is the one both ends reach; when it spans a threshold, the level is the lower one
/// (what the figure surely reaches) and the higher is returned as borderline, so a figure
/// whose interval keeps spanning the threshold is judged the same on every run. Without an
/// interval the figure alone decides.
pub fn level_with_interval(
    value: f64,
    interval: Option<&Interval>,
    base: Level,
    steps: &[(f64, Level)],
) -> (Level, Option<Level>) {
    let Some(i) = interval else {
        return (level_at(value, base, steps), None);
    };
    let (lo, hi) = (level_at(i.low, base, steps), level_at(i.high, base, steps));
    if lo == hi { (lo, None) } else { (lo, Some(hi)) }
}

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

#[cfg(test)]
mod tests {
    use super::*;

    const STEPS: [(f64, Level); 2] = [(1.5, Level::Notice), (3.0, Level::Hazard)];

    fn iv(low: f64, high: f64) -> Interval {
        Interval {
            low,
            high,
            confidence: 0.95,
        }
    }

    #[test]
    fn an_interval_on_one_side_of_every_threshold_is_a_plain_level() {
        assert_eq!(
            level_with_interval(2.2, Some(&iv(2.0, 2.5)), Level::Ok, &STEPS),
            (Level::Notice, None)
        );
        assert_eq!(
            level_with_interval(4.0, Some(&iv(3.5, 4.5)), Level::Ok, &STEPS),
            (Level::Hazard, None)
        );
    }

    #[test]
    fn an_interval_across_a_threshold_is_borderline_whichever_side_the_median_falls() {
        // Two runs of one machine, medians either side of 3.0 (the flip the trust issue
        // measured on false_sharing): the same verdict both times.
        let a = level_with_interval(2.9, Some(&iv(2.6, 3.3)), Level::Ok, &STEPS);
        let b = level_with_interval(3.1, Some(&iv(2.7, 3.4)), Level::Ok, &STEPS);
        assert_eq!(a, (Level::Notice, Some(Level::Hazard)));
        assert_eq!(a, b);
    }

    #[test]
    fn without_an_interval_the_figure_decides() {
        assert_eq!(
            level_with_interval(3.1, None, Level::Ok, &STEPS),
            (Level::Hazard, None)
        );
    }
}
