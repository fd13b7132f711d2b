//! One model of a change, and one rule that reads it.
//!
//! An [`Effect`] is how a figure moved from one side to the other (old run to new, baseline arm
//! to variant): an estimate on a [`Scale`] (a difference, where no change is 0, or a ratio,
//! where no change is 1) with the interval that the noise allows around it. [`Rule::read`]
//! says whether it is a change, which way ([`Way`]) and how sure ([`Reading`]):
//!
//! 1. **Beyond noise?** The interval must leave out "no change" (an interval that touches it
//!    holds it). An effect without an interval (nothing measured its noise) is read as exact:
//!    any move that is not exactly none is beyond noise. When the interval holds no change, the
//!    effect is [`Reading::Negligible`] if it lies within the rule's [`Negligible`] margin (an
//!    equivalence test: the whole interval is too close to no change to matter; Schuirmann,
//!    "A comparison of the two one-sided tests procedure...", J. Pharmacokinet. Biopharm. 15,
//!    1987), else [`Reading::WithinNoise`]: no clear effect either way.
//! 2. **Large enough?** A move beyond noise smaller than the rule's floor (the practical effect
//!    that matters) is [`Reading::BelowFloor`]: probably real, too small to count.
//! 3. **Beyond what the place moves anyway?** A move within the rule's allowance (the drift
//!    a VM host causes with nothing changed) is [`Reading::WithinAllowance`]: shown, not
//!    counted.
//! 4. Otherwise it is a [`Reading::Change`], up or down.
//!
//! Which way is *better* (a regression or an improvement) is the figure's, not the numbers':
//! `crate::schema::Better::moved` turns a [`Way`] into one. The thresholds are the callers'
//! named constants, with their reasoning beside them; each caller builds its effect's interval
//! from the noise it can measure:
//!
//! - fingerprint figures (`compare::fingerprint`): new - old, its interval from the two medians'
//!   intervals (they must not overlap; Schenker and Gentleman, The American Statistician 55,
//!   2001) or from the runs' spread; a 10% floor; on two VM guests the host's drift as the
//!   allowance;
//! - profile shares (`compare::profile`): new share - old share, within a number of binomial
//!   standard errors ([`super::share_difference_se`]); a floor of one point;
//! - wall-clock shares (`compare::wall`): no interval (one run a side cannot measure the
//!   run-to-run noise), a floor of five points;
//! - experiment ratios (`experiment::ratios`): a speed factor with its paired-ratio interval,
//!   no floor, and a margin within which the effect is none;
//! - the loss of a diagnosis diff (`compare::why`): the Hodges-Lehmann ratio with its interval,
//!   or the log ratio of CPU time within Poisson standard errors.

/// What an effect's estimate is, and so what "no change" is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// new - old: no change is 0; floors and allowances are sizes in the figure's unit.
    Difference,
    /// new / old (or a speed factor): no change is 1; floors and allowances are factors (1.1:
    /// the larger side is at least 1.1 times the smaller, either way).
    Ratio,
}

/// How a figure moved, with the interval the noise allows around the move.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Effect {
    /// What the estimate is.
    pub scale: Scale,
    /// The move: new - old, or new / old.
    pub estimate: f64,
    /// The interval around the estimate on the same scale, `(low, high)`; absent when nothing
    /// measured the noise (the estimate is then read as exact).
    pub interval: Option<(f64, f64)>,
}

impl Effect {
    /// new - old with its interval.
    pub fn difference(estimate: f64, interval: Option<(f64, f64)>) -> Effect {
        Effect {
            scale: Scale::Difference,
            estimate,
            interval,
        }
    }

    /// new - old within `noise` either way (`estimate +- noise`).
    pub fn difference_within(estimate: f64, noise: f64) -> Effect {
        Effect::difference(estimate, Some((estimate - noise, estimate + noise)))
    }

    /// new - old of two figures each with an interval: the difference's interval is the
    /// widest their intervals allow, `[new.low - old.high, new.high - old.low]`, which leaves
    /// out 0 exactly when the two intervals do not overlap (a conservative test at about the
    /// intervals' level: Schenker and Gentleman, "On judging the significance of differences
    /// by examining the overlap between confidence intervals", The American Statistician 55,
    /// 2001).
    pub fn between_intervals(old: f64, new: f64, old_iv: (f64, f64), new_iv: (f64, f64)) -> Effect {
        Effect::difference(new - old, Some((new_iv.0 - old_iv.1, new_iv.1 - old_iv.0)))
    }

    /// new / old (or a speed factor) with its interval.
    pub fn ratio(estimate: f64, interval: Option<(f64, f64)>) -> Effect {
        Effect {
            scale: Scale::Ratio,
            estimate,
            interval,
        }
    }

    /// The value that means no change on this scale.
    pub fn none(&self) -> f64 {
        match self.scale {
            Scale::Difference => 0.0,
            Scale::Ratio => 1.0,
        }
    }

    /// The size of the move, to compare with a floor or an allowance: `|new - old|`, or the
    /// factor `max(r, 1 / r)` of a ratio.
    pub fn size(&self) -> f64 {
        match self.scale {
            Scale::Difference => self.estimate.abs(),
            Scale::Ratio => self.estimate.max(1.0 / self.estimate),
        }
    }
}

/// Which way an effect went: up (new above old, a ratio above 1) or down.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Way {
    /// New above old.
    Up,
    /// New below old.
    Down,
}

/// A margin around "no change" within which an effect whose interval holds no change is shown
/// to be none: its estimate within `estimate` of no change, its whole interval within
/// `interval` (`(low, high)`), both on the effect's scale.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Negligible {
    /// How far the estimate may lie from no change, either way (`|estimate - none|`).
    pub estimate: f64,
    /// Where the whole interval must lie.
    pub interval: (f64, f64),
}

/// The thresholds of the rule for one kind of effect; each caller names its figures as
/// constants with their reasoning.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Rule {
    /// Smallest move beyond noise that counts, in [`Effect::size`]'s terms (a size in the
    /// figure's unit, or a factor); a move of exactly the floor counts. None: any move beyond
    /// noise counts.
    pub floor: Option<f64>,
    /// The margin within which an effect whose interval holds no change is none.
    pub negligible: Option<Negligible>,
    /// A move beyond noise and floor whose size is under this is what the place moves with
    /// nothing changed (a VM host's drift): shown, not counted.
    pub allowance: Option<f64>,
}

/// What the rule reads in an effect: whether it is a change, which way, and how sure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reading {
    /// Beyond noise, at least the floor, beyond the allowance: a change.
    Change(Way),
    /// Beyond noise and the floor, but within the allowance: shown, not counted.
    WithinAllowance(Way),
    /// Beyond noise, but smaller than the floor.
    BelowFloor(Way),
    /// The interval holds no change and lies within the rule's negligible margin: shown to be
    /// no effect.
    Negligible,
    /// The interval holds no change (or the estimate is not a number, or a ratio is not
    /// positive): no clear effect either way.
    WithinNoise,
}

impl Reading {
    /// The way of a change that counts ([`Reading::Change`]).
    pub fn change(self) -> Option<Way> {
        match self {
            Reading::Change(w) => Some(w),
            _ => None,
        }
    }

    /// Whether the interval leaves out no change (counted or not).
    pub fn beyond_noise(self) -> bool {
        matches!(
            self,
            Reading::Change(_) | Reading::WithinAllowance(_) | Reading::BelowFloor(_)
        )
    }
}

impl Rule {
    /// Reads `e`: see the module overview for the order of the tests.
    pub fn read(&self, e: &Effect) -> Reading {
        let none = e.none();
        let (low, high) = e.interval.unwrap_or((e.estimate, e.estimate));
        let finite = e.estimate.is_finite() && low.is_finite() && high.is_finite();
        let positive = e.scale == Scale::Difference || (e.estimate > 0.0 && low > 0.0);
        if !finite || !positive {
            return Reading::WithinNoise;
        }
        if low <= none && none <= high {
            let inside = |(lo, hi): (f64, f64)| lo <= low && high <= hi;
            return match self.negligible {
                Some(n) if (e.estimate - none).abs() <= n.estimate && inside(n.interval) => {
                    Reading::Negligible
                }
                _ => Reading::WithinNoise,
            };
        }
        // The estimate's side; the interval's when the estimate is exactly none.
        let way = if e.estimate > none || (e.estimate == none && low > none) {
            Way::Up
        } else {
            Way::Down
        };
        let size = e.size();
        if self.floor.is_some_and(|f| size < f) {
            Reading::BelowFloor(way)
        } else if self.allowance.is_some_and(|a| size < a) {
            Reading::WithinAllowance(way)
        } else {
            Reading::Change(way)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_that_holds_no_change_is_within_noise_and_one_that_leaves_it_out_is_not() {
        let rule = Rule::default();
        assert_eq!(
            rule.read(&Effect::difference(2.0, Some((-0.1, 4.0)))),
            Reading::WithinNoise
        );
        // Touching 0 holds it.
        assert_eq!(
            rule.read(&Effect::difference(2.0, Some((0.0, 4.0)))),
            Reading::WithinNoise
        );
        assert_eq!(
            rule.read(&Effect::difference(2.0, Some((0.1, 4.0)))),
            Reading::Change(Way::Up)
        );
        assert_eq!(
            rule.read(&Effect::ratio(0.5, Some((0.4, 0.6)))),
            Reading::Change(Way::Down)
        );
    }

    #[test]
    fn the_floor_counts_from_its_own_size_and_reads_a_ratio_either_way() {
        let rule = Rule {
            floor: Some(0.05),
            ..Rule::default()
        };
        assert_eq!(
            rule.read(&Effect::difference(0.049, None)),
            Reading::BelowFloor(Way::Up)
        );
        assert_eq!(
            rule.read(&Effect::difference(-0.05, None)),
            Reading::Change(Way::Down)
        );
        let rule = Rule {
            floor: Some(1.1),
            ..Rule::default()
        };
        // 1 / 0.95 = 1.053: under the factor; 1 / 0.9 = 1.11: over it.
        assert_eq!(
            rule.read(&Effect::ratio(0.95, None)),
            Reading::BelowFloor(Way::Down)
        );
        assert_eq!(
            rule.read(&Effect::ratio(0.9, None)),
            Reading::Change(Way::Down)
        );
    }

    #[test]
    fn an_exact_effect_of_nothing_is_no_change_and_a_nan_is_no_reading() {
        let rule = Rule::default();
        assert_eq!(
            rule.read(&Effect::difference(0.0, None)),
            Reading::WithinNoise
        );
        assert_eq!(
            rule.read(&Effect::difference(0.5, None)),
            Reading::Change(Way::Up)
        );
        assert_eq!(
            rule.read(&Effect::difference(f64::NAN, None)),
            Reading::WithinNoise
        );
        assert_eq!(
            rule.read(&Effect::difference_within(1.0, f64::INFINITY)),
            Reading::WithinNoise
        );
    }

    #[test]
    fn a_narrow_interval_around_no_change_is_negligible_and_a_wide_one_is_not() {
        let rule = Rule {
            negligible: Some(Negligible {
                estimate: 0.03,
                interval: (1.0 / 1.1, 1.1),
            }),
            ..Rule::default()
        };
        assert_eq!(
            rule.read(&Effect::ratio(1.01, Some((0.97, 1.05)))),
            Reading::Negligible
        );
        assert_eq!(
            rule.read(&Effect::ratio(1.0, Some((0.99, 1.01)))),
            Reading::Negligible
        );
        assert_eq!(
            rule.read(&Effect::ratio(1.01, Some((0.7, 1.5)))),
            Reading::WithinNoise
        );
        // Within 3% but the interval leaves out 1: a small effect, still a change.
        assert_eq!(
            rule.read(&Effect::ratio(1.02, Some((1.01, 1.03)))),
            Reading::Change(Way::Up)
        );
    }

    #[test]
    fn a_move_within_the_allowance_is_shown_not_counted() {
        let rule = Rule {
            floor: Some(10.0),
            allowance: Some(50.0),
            ..Rule::default()
        };
        let e = |d: f64| Effect::difference_within(d, 1.0);
        assert_eq!(rule.read(&e(5.0)), Reading::BelowFloor(Way::Up));
        assert_eq!(rule.read(&e(-40.0)), Reading::WithinAllowance(Way::Down));
        assert_eq!(rule.read(&e(60.0)), Reading::Change(Way::Up));
        assert!(Reading::WithinAllowance(Way::Up).beyond_noise());
        assert_eq!(Reading::WithinAllowance(Way::Up).change(), None);
    }

    #[test]
    fn two_intervals_that_overlap_give_a_difference_that_holds_zero() {
        let apart = Effect::between_intervals(100.0, 130.0, (95.0, 105.0), (120.0, 140.0));
        assert_eq!(apart.interval, Some((15.0, 45.0)));
        let touching = Effect::between_intervals(100.0, 130.0, (95.0, 120.0), (120.0, 140.0));
        assert_eq!(Rule::default().read(&touching), Reading::WithinNoise);
    }
}
