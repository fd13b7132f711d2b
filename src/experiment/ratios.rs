//! An experiment's figures from its runs: paired ratios and their intervals, the scaling
//! curve, and the line of meaning beside each. Small pure functions over numbers.
//!
//! The interval of a ratio is the one `crate::stats` gives every figure: the arms ran in
//! the same rounds (A B A B ...), so each round gives one ratio (arm / baseline) in which
//! drift that hit both runs cancels ([`crate::stats::paired_ratios`]), and the
//! reported figure is the median of those ratios with its distribution-free order-statistic
//! interval ([`crate::stats::median_interval`]: Conover, *Practical Nonparametric
//! Statistics*, 3rd ed., 1999, section 3.2). It needs no assumption about the shape of the
//! timing distribution (which has a long right tail on a shared machine) and, unlike a
//! Fieller interval for a ratio of two means, no normality; unlike a bootstrap, it is exact
//! and repeatable. With fewer than 6 rounds the interval is the range of the ratios, and the
//! coverage recorded beside it says how sure that is.

use super::{
    ArmResult, Comparison, Family, Measure, PlannedComparison, Scaling, ScalingPoint, Variant,
};
use crate::schema::split_lock::SplitLockMechanism;
use crate::stats::effect::{Effect, Negligible, Reading, Rule};
use crate::stats::{CONFIDENCE, median_interval, paired_ratios};
use crate::words::experiment::{self as words, HugeGot, TrappedBy};

/// Efficiency (speedup / ideal) below which a scaling curve has fallen away from ideal: at
/// 0.8, a quarter more CPUs buy what a fifth fewer would have. The Netflix JVM case expected
/// 3x from a 48-vCPU instance against a 16-vCPU one and got 1.25x (efficiency 0.42); a
/// curve far below 0.8 says contention, not noise.
pub const SCALING_FALLS_AWAY_EFFICIENCY: f64 = 0.8;

/// A ratio within this factor of 1 whose interval holds 1 is "no measurable effect" when...
/// 3%: less than the round-to-round spread of most programs on a shared machine.
pub const NO_EFFECT_WITHIN: f64 = 0.03;

/// ... and its interval lies within this factor of 1 on both sides: a wider interval that
/// holds 1 is "no clear effect", not "none".
pub const NO_EFFECT_INTERVAL: f64 = 1.10;

/// Median of the per-round ratios `arm / baseline` and its interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PairedRatio {
    /// The median ratio.
    pub ratio: f64,
    /// Lower end of its interval.
    pub low: f64,
    /// Upper end.
    pub high: f64,
    /// Coverage the interval achieves.
    pub coverage: f64,
    /// Rounds in which both arms gave a figure.
    pub pairs: usize,
}

/// The paired ratio of `arm` over `baseline`, rounds aligned; `None` when no round had both.
pub fn ratio(arm: &[Option<f64>], baseline: &[Option<f64>]) -> Option<PairedRatio> {
    let (num, den): (Vec<f64>, Vec<f64>) = arm
        .iter()
        .zip(baseline)
        .filter_map(|(a, b)| Some(((*a)?, (*b)?)))
        .unzip();
    let ratios = paired_ratios(&num, &den);
    let ratio = crate::stats::median(&ratios)?;
    let (low, high, coverage) = median_interval(&ratios, CONFIDENCE)?;
    Some(PairedRatio {
        ratio,
        low,
        high,
        coverage,
        pairs: ratios.len(),
    })
}

/// A ratio of measures as a speed factor (above 1: faster): the inverse for a lower-is-better
/// measure (time), the ratio itself for a higher-is-better one. The interval's ends swap
/// under the inverse.
pub fn as_speed(r: &PairedRatio, higher_is_better: bool) -> (f64, f64, f64) {
    if higher_is_better {
        (r.ratio, r.low, r.high)
    } else {
        (1.0 / r.ratio, 1.0 / r.high, 1.0 / r.low)
    }
}

/// How a speed factor and its interval read, by the one change rule
/// ([`crate::stats::effect`]): a ratio with its interval, no floor (an interval that leaves
/// out 1 is an effect, however small), and [`NO_EFFECT_WITHIN`] / [`NO_EFFECT_INTERVAL`] as
/// the margin within which it is none. [`Reading::Negligible`] is no measurable effect,
/// [`Reading::WithinNoise`] unclear (the interval holds 1), a change clear.
pub fn effect(speed: f64, low: f64, high: f64) -> Reading {
    let rule = Rule {
        negligible: Some(Negligible {
            estimate: NO_EFFECT_WITHIN,
            interval: (1.0 / NO_EFFECT_INTERVAL, NO_EFFECT_INTERVAL),
        }),
        ..Rule::default()
    };
    rule.read(&Effect::ratio(speed, Some((low, high))))
}

/// `1.42x slower` / `1.10x faster` / `no measurable effect`, from a speed factor and its
/// interval.
pub fn effect_words(speed: f64, low: f64, high: f64) -> String {
    words::effect(speed, effect(speed, low, high))
}

/// The line of meaning for one comparison, in the variant's own terms.
pub fn meaning(
    family: Family,
    arm: &ArmResult,
    baseline: &ArmResult,
    speed: Option<(f64, f64, f64)>,
) -> String {
    let Some((s, lo, hi)) = speed else {
        let failed = match (&arm.failure, &baseline.failure) {
            (Some(f), _) => Some((arm.variant.name(), f.as_str())),
            (_, Some(f)) => Some((baseline.variant.name(), f.as_str())),
            _ => None,
        };
        return words::not_measured(failed.as_ref().map(|(n, f)| (n.as_str(), *f)));
    };
    let reading = effect(s, lo, hi);
    let effect = words::effect(s, reading);
    let unclear = !reading.beyond_noise();
    match (family, &arm.variant) {
        (Family::Pages, _) => words::pages(&effect, unclear, s, &huge_words(baseline)),
        (Family::Neighbour, Variant::Neighbour { kind, .. }) => {
            let trapped = arm.neighbour.as_ref().filter(|n| n.trapped).map(|n| {
                if n.mechanism == Some(SplitLockMechanism::TrappedByKernel) {
                    TrappedBy::Kernel
                } else {
                    TrappedBy::Host
                }
            });
            words::neighbour(kind.as_str(), &effect, unclear, trapped)
        }
        (Family::Placement, Variant::Placement { class, .. }) => {
            words::placement(class.label(), &baseline.variant.name(), &effect, unclear)
        }
        (Family::Cpus, Variant::Cpus { n, .. }) => {
            let n0 = baseline.variant.cpus().map_or(1, <[usize]>::len);
            words::cpus(*n, n0, s, *n as f64 / n0 as f64)
        }
        _ => effect,
    }
}

/// What the huge-pages arm got, in words.
fn huge_words(arm: &ArmResult) -> String {
    let got: Vec<u64> = arm.anon_huge_bytes.iter().flatten().copied().collect();
    words::huge_got(
        match crate::stats::median(&got.iter().map(|&b| b as f64).collect::<Vec<_>>()) {
            None => HugeGot::Unreadable,
            Some(0.0) => HugeGot::Nothing,
            Some(b) => HugeGot::Bytes(b as u64),
        },
    )
}

/// The comparisons of `planned` over the arms' results.
pub fn compare(
    planned: &[PlannedComparison],
    arms: &[ArmResult],
    measure: &Measure,
) -> Vec<Comparison> {
    let hib = measure.higher_is_better();
    planned
        .iter()
        .map(|p| {
            let (arm, base) = (&arms[p.arm], &arms[p.baseline]);
            let r = ratio(&arm.samples, &base.samples);
            let speed = r.as_ref().map(|r| as_speed(r, hib));
            Comparison {
                family: p.family,
                arm: p.arm,
                baseline: p.baseline,
                ratio: r.map(|r| r.ratio),
                ratio_low: r.map(|r| r.low),
                ratio_high: r.map(|r| r.high),
                coverage: r.map(|r| r.coverage),
                pairs: r.map_or(0, |r| r.pairs),
                speed: speed.map(|s| s.0),
                speed_low: speed.map(|s| s.1),
                speed_high: speed.map(|s| s.2),
                meaning: meaning(p.family, arm, base, speed),
            }
        })
        .collect()
}

/// The scaling curve from the `--cpus` comparisons (each against the fewest CPUs), the
/// fewest first; `None` without them.
pub fn scaling(
    comparisons: &[Comparison],
    arms: &[ArmResult],
    measure: &Measure,
) -> Option<Scaling> {
    let hib = measure.higher_is_better();
    let cpus_of = |i: usize| match &arms[i].variant {
        Variant::Cpus { n, .. } => Some(*n),
        _ => None,
    };
    let first = comparisons.iter().find(|c| c.family == Family::Cpus)?;
    let n0 = cpus_of(first.baseline)?;
    let mut points = vec![ScalingPoint {
        cpus: n0,
        speedup: arms[first.baseline].median.map(|_| 1.0),
        speedup_low: arms[first.baseline].median.map(|_| 1.0),
        speedup_high: arms[first.baseline].median.map(|_| 1.0),
        ideal: 1.0,
        efficiency: arms[first.baseline].median.map(|_| 1.0),
    }];
    for c in comparisons.iter().filter(|c| c.family == Family::Cpus) {
        let n = cpus_of(c.arm)?;
        let r = ratio(&arms[c.arm].samples, &arms[c.baseline].samples);
        let s = r.as_ref().map(|r| as_speed(r, hib));
        let ideal = n as f64 / n0 as f64;
        points.push(ScalingPoint {
            cpus: n,
            speedup: s.map(|s| s.0),
            speedup_low: s.map(|s| s.1),
            speedup_high: s.map(|s| s.2),
            ideal,
            efficiency: s.map(|s| s.0 / ideal),
        });
    }
    points.sort_by_key(|p| p.cpus);
    let falls_away_at = falls_away(&points);
    Some(Scaling {
        points,
        falls_away_at,
    })
}

/// The first CPU count whose whole interval lies below [`SCALING_FALLS_AWAY_EFFICIENCY`] of
/// ideal.
pub fn falls_away(points: &[ScalingPoint]) -> Option<usize> {
    points
        .iter()
        .find(|p| {
            p.speedup_high
                .is_some_and(|h| h < SCALING_FALLS_AWAY_EFFICIENCY * p.ideal)
        })
        .map(|p| p.cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_pairs_rounds_and_skips_failed_ones() {
        let arm = [Some(2.0), None, Some(4.0), Some(6.0)];
        let base = [Some(1.0), Some(1.0), Some(2.0), Some(2.0)];
        let r = ratio(&arm, &base).unwrap();
        assert_eq!(r.pairs, 3);
        assert_eq!(r.ratio, 2.0);
        // Three ratios: the interval is their range, at 75% coverage.
        assert_eq!((r.low, r.high), (2.0, 3.0));
        assert!((r.coverage - 0.75).abs() < 1e-12);
        assert_eq!(ratio(&[None], &[Some(1.0)]), None);
    }

    #[test]
    fn a_time_ratio_inverts_into_a_speed_with_its_ends_swapped() {
        let r = PairedRatio {
            ratio: 2.0,
            low: 1.6,
            high: 2.5,
            coverage: 0.95,
            pairs: 9,
        };
        assert_eq!(as_speed(&r, false), (0.5, 0.4, 0.625));
        assert_eq!(as_speed(&r, true), (2.0, 1.6, 2.5));
    }

    #[test]
    fn effect_words_name_the_direction_or_its_absence() {
        assert_eq!(effect_words(0.5, 0.4, 0.6), "2.00x slower");
        assert_eq!(effect_words(1.42, 1.4, 1.45), "1.42x faster");
        assert_eq!(effect_words(1.01, 0.97, 1.05), "no measurable effect");
        assert_eq!(
            effect_words(1.01, 0.7, 1.5),
            "no clear effect (1.01x faster, but the interval holds 1)"
        );
        assert_eq!(
            effect_words(0.8, 0.6, 1.01),
            "no clear effect (1.25x slower, but the interval holds 1)"
        );
        // Within 3% but the interval excludes 1: a small effect, still named.
        assert_eq!(effect_words(1.02, 1.01, 1.03), "1.02x faster");
    }

    fn arm(variant: Variant, samples: &[f64]) -> ArmResult {
        ArmResult {
            variant,
            samples: samples.iter().map(|&x| Some(x)).collect(),
            wall_s: Vec::new(),
            anon_huge_bytes: Vec::new(),
            median: None,
            failure: None,
            neighbour: None,
        }
    }

    #[test]
    fn a_trapped_neighbour_is_named_beside_the_figure() {
        use crate::experiment::NeighbourKind;
        use crate::experiment::neighbour::NeighbourReport;
        let mut loaded = arm(
            Variant::Neighbour {
                kind: NeighbourKind::SplitLocks,
                cpus: vec![0],
                neighbour_cpu: 1,
            },
            &[1.0; 6],
        );
        loaded.neighbour = Some(NeighbourReport {
            kind: NeighbourKind::SplitLocks,
            cpu: 1,
            trapped: true,
            mechanism: Some(SplitLockMechanism::TrappedByHost),
            alone_split_lock_ns: Some(180_000.0),
            rate_per_s: Some(5400.0),
            failure: None,
        });
        let alone = arm(Variant::Plain { cpus: vec![0] }, &[1.0; 6]);
        let m = meaning(Family::Neighbour, &loaded, &alone, Some((1.0, 0.99, 1.01)));
        assert_eq!(
            m,
            "the host traps split locks: the neighbour barely locked the bus, so trapped, \
             no measurable effect"
        );
    }

    fn point(cpus: usize, s: f64, lo: f64, hi: f64) -> ScalingPoint {
        ScalingPoint {
            cpus,
            speedup: Some(s),
            speedup_low: Some(lo),
            speedup_high: Some(hi),
            ideal: cpus as f64,
            efficiency: Some(s / cpus as f64),
        }
    }

    #[test]
    fn the_curve_falls_away_where_the_whole_interval_is_below_80_percent_of_ideal() {
        // The Netflix case's shape: 3x the CPUs, 1.25x the throughput.
        let pts = [
            point(1, 1.0, 1.0, 1.0),
            point(2, 1.9, 1.7, 2.0),
            point(3, 2.3, 2.2, 2.45),
            point(4, 1.25, 1.2, 1.3),
        ];
        // 3 CPUs: 2.3 of 3 is 77%, but the interval reaches 2.45 (82%): not yet.
        assert_eq!(falls_away(&pts), Some(4));
        assert_eq!(falls_away(&pts[..3]), None);
    }
}
