//! Numbers only: robust summary statistics over repeated timings, and ([`ckmeans`]) the
//! clustering fleets are banded with. Robust summaries: median, extremes, median absolute
//! deviation, interquartile range, outliers. Small pure functions so each can be tested on
//! exact inputs.
//!
//! Timings on a shared machine have a long right tail (interrupts, preemption, a neighbour's
//! burst), so the centre is the median and the spread is the MAD, not mean and standard
//! deviation (Leys et al., "Detecting outliers: Do not use standard deviation around the
//! mean, use absolute deviation around the median", J. Exp. Soc. Psychol. 49, 2013).
//!
//! Runs on two machines are not paired: [`two_sample`] gives the ratio of two independent
//! samples (Hodges-Lehmann, with its Mann-Whitney interval).
//!
//! Whether a figure changed is one rule over one model, [`effect`]: an effect with its
//! interval, read as a change, which way, and how sure.

pub mod ckmeans;
pub mod effect;
pub mod two_sample;

pub use two_sample::{RatioEstimate, ratio_of_two_samples};

use serde::{Deserialize, Serialize};

/// Relative spread (scaled MAD / median) above which a figure is flagged as noisy.
///
/// 5% is wide for a microbenchmark that repeats the same instruction sequence: on a quiet
/// machine the PAUSE and core-clock loops repeat within 1%.
pub const WIDE_RELATIVE_SPREAD: f64 = 0.05;

/// Modified z-score above which a sample is an outlier (Iglewicz and Hoaglin, "How to Detect
/// and Handle Outliers", ASQC 1993, section 3.5: |M| > 3.5).
pub const OUTLIER_MODIFIED_Z: f64 = 3.5;

/// MAD scale factor that makes the MAD a consistent estimator of the standard deviation for
/// normal data: 1 / Phi^-1(3/4).
pub const MAD_NORMAL_SCALE: f64 = 1.4826;

/// Summary of one set of samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Number of samples.
    pub n: usize,
    /// Median of the samples.
    pub median: f64,
    /// Smallest sample.
    pub min: f64,
    /// Largest sample.
    pub max: f64,
    /// Median absolute deviation from the median, scaled by 1.4826 (same unit as the samples).
    pub mad: f64,
    /// Interquartile range, Q3 - Q1 (same unit as the samples).
    pub iqr: f64,
    /// Scaled MAD divided by the median (0.01 = 1%); 0 when the median is 0.
    pub relative_spread: f64,
    /// Samples whose modified z-score exceeds 3.5.
    pub outliers: usize,
    /// True when `relative_spread` exceeds [`WIDE_RELATIVE_SPREAD`]: treat the figure with care.
    pub wide: bool,
}

/// Sorted copy of the finite samples.
fn sorted_finite(samples: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = samples.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v
}

/// Quantile `q` in [0, 1] of already sorted data, linear interpolation between order
/// statistics (Hyndman and Fan 1996, definition 7; the default of R and NumPy).
pub fn quantile_sorted(sorted: &[f64], q: f64) -> Option<f64> {
    if sorted.is_empty() {
        return None;
    }
    let q = q.clamp(0.0, 1.0);
    let h = (sorted.len() - 1) as f64 * q;
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    Some(sorted[lo] + (h - lo as f64) * (sorted[hi] - sorted[lo]))
}

/// Median of the finite samples; `None` when there are none.
pub fn median(samples: &[f64]) -> Option<f64> {
    quantile_sorted(&sorted_finite(samples), 0.5)
}

/// Median of the finite samples, sorting the vector given instead of a copy: for millions of
/// samples under a memory limit (the PAUSE probe's chunk times, 32 MiB on the Intel KVM guest,
/// where a copy more failed under a 100 MiB RLIMIT_AS).
pub fn median_owned(mut samples: Vec<f64>) -> Option<f64> {
    samples.retain(|x| x.is_finite());
    samples.sort_unstable_by(f64::total_cmp);
    quantile_sorted(&samples, 0.5)
}

/// Median absolute deviation from the median, unscaled.
pub fn mad_raw(samples: &[f64]) -> Option<f64> {
    let m = median(samples)?;
    let deviations: Vec<f64> = samples
        .iter()
        .filter(|x| x.is_finite())
        .map(|x| (x - m).abs())
        .collect();
    median(&deviations)
}

/// Modified z-score of `x` (Iglewicz and Hoaglin 1993): 0.6745 (x - median) / MAD.
fn modified_z(x: f64, median: f64, mad_raw: f64) -> f64 {
    if mad_raw == 0.0 {
        if x == median { 0.0 } else { f64::INFINITY }
    } else {
        0.6745 * (x - median) / mad_raw
    }
}

/// Summarises the finite samples; `None` when there are none.
pub fn summarize(samples: &[f64]) -> Option<Summary> {
    let sorted = sorted_finite(samples);
    let median = quantile_sorted(&sorted, 0.5)?;
    let mad_raw = mad_raw(&sorted)?;
    let mad = mad_raw * MAD_NORMAL_SCALE;
    let iqr = quantile_sorted(&sorted, 0.75)? - quantile_sorted(&sorted, 0.25)?;
    let relative_spread = if median == 0.0 {
        0.0
    } else {
        mad / median.abs()
    };
    let outliers = if sorted.len() < 3 {
        0
    } else {
        sorted
            .iter()
            .filter(|&&x| modified_z(x, median, mad_raw).abs() > OUTLIER_MODIFIED_Z)
            .count()
    };
    Some(Summary {
        n: sorted.len(),
        median,
        min: sorted[0],
        max: sorted[sorted.len() - 1],
        mad,
        iqr,
        relative_spread,
        outliers,
        wide: relative_spread > WIDE_RELATIVE_SPREAD,
    })
}

/// Nominal coverage of the intervals cpudoctor reports.
pub const CONFIDENCE: f64 = 0.95;

/// P(X <= k) for X ~ Binomial(n, 1/2), exactly (n is at most a few thousand samples).
fn binomial_half_cdf(n: usize, k: usize) -> f64 {
    // Sum of C(n, i) / 2^n in log space, so large n does not overflow.
    let ln_choose =
        |i: usize| -> f64 { (1..=i).map(|j| ((n - i + j) as f64 / j as f64).ln()).sum() };
    let ln_half_n = n as f64 * 0.5f64.ln();
    (0..=k.min(n))
        .map(|i| (ln_choose(i) + ln_half_n).exp())
        .sum::<f64>()
        .min(1.0)
}

/// A distribution-free confidence interval for the median of the finite samples, from order
/// statistics: `[x_(k), x_(n+1-k)]` with the largest `k` whose coverage
/// `1 - 2 P(B <= k - 1)`, B ~ Binomial(n, 1/2), is at least `confidence` (Conover, Practical
/// Nonparametric Statistics, 3rd ed., 1999, section 3.2; Hollander and Wolfe, Nonparametric
/// Statistical Methods, 1999, section 3.6). Returns `(low, high, coverage)` with the coverage
/// actually achieved; with too few samples for `confidence` (fewer than 6 for 95%) the
/// interval is the full range and its coverage says how sure that is.
pub fn median_interval(samples: &[f64], confidence: f64) -> Option<(f64, f64, f64)> {
    let sorted = sorted_finite(samples);
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let coverage = |k: usize| 1.0 - 2.0 * binomial_half_cdf(n, k - 1);
    // k = 1 gives the range [min, max]; widen no further than that.
    let mut k = 1;
    while k < n.div_ceil(2) && coverage(k + 1) >= confidence {
        k += 1;
    }
    let achieved = if n == 1 { 0.0 } else { coverage(k) };
    Some((sorted[k - 1], sorted[n - k], achieved))
}

/// Median of the ratios `num[i] / den[i]` of samples taken in pairs (the same block of
/// time), with its [`median_interval`]: a ratio whose two sides drift together (a neighbour,
/// a clock change) keeps its value instead of inheriting both sides' noise.
pub fn paired_ratios(num: &[f64], den: &[f64]) -> Vec<f64> {
    num.iter()
        .zip(den)
        .filter(|(a, b)| a.is_finite() && b.is_finite() && **b != 0.0)
        .map(|(a, b)| a / b)
        .collect()
}

/// Standard error of the difference of two shares, each `share` of `n` samples drawn
/// independently (the normal approximation to two binomial proportions: the variance of one is
/// p (1 - p) / n; e.g. Agresti, "Categorical Data Analysis", 3rd ed., 2013, section 1.3).
pub fn share_difference_se((p1, n1): (f64, u64), (p2, n2): (f64, u64)) -> f64 {
    let var = |p: f64, n: u64| p * (1.0 - p) / n.max(1) as f64;
    (var(p1, n1) + var(p2, n2)).sqrt()
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_difference_of_two_halves_of_a_hundred_has_a_standard_error_of_0_07() {
        let se = share_difference_se((0.5, 100), (0.5, 100));
        assert!((se - 0.070_710_678).abs() < 1e-6, "{se}");
        assert_eq!(share_difference_se((0.0, 10), (1.0, 10)), 0.0);
    }

    use super::*;

    #[test]
    fn median_interval_of_nine_uniform_samples_is_the_2nd_to_8th() {
        // n = 9: P(B <= 1) = 10/512, so k = 2 covers 1 - 20/512 = 96.1%; k = 3 would cover
        // only 82.0% (Conover's table A3 gives the same ranks).
        let xs: Vec<f64> = (1..=9).map(f64::from).collect();
        let (lo, hi, cov) = median_interval(&xs, 0.95).unwrap();
        assert_eq!((lo, hi), (2.0, 8.0));
        assert!((cov - (1.0 - 20.0 / 512.0)).abs() < 1e-12, "{cov}");
    }

    #[test]
    fn median_interval_narrows_with_more_samples_and_covers_the_median() {
        // 101 samples of a known distribution (0..=100 shuffled): the 95% interval holds
        // ranks 41 to 61 (normal approximation: 50.5 -+ 1.96 x 5.02 = 40.7 .. 60.3).
        let xs: Vec<f64> = (0..=100).map(|i| ((i * 37) % 101) as f64).collect();
        let (lo, hi, cov) = median_interval(&xs, 0.95).unwrap();
        assert!(lo <= 50.0 && 50.0 <= hi);
        assert_eq!((lo, hi), (40.0, 60.0));
        assert!((0.95..0.97).contains(&cov), "{cov}");
    }

    #[test]
    fn too_few_samples_give_the_range_with_its_true_coverage() {
        let (lo, hi, cov) = median_interval(&[3.0, 1.0, 2.0], 0.95).unwrap();
        assert_eq!((lo, hi), (1.0, 3.0));
        assert!((cov - 0.75).abs() < 1e-12, "{cov}");
        assert_eq!(median_interval(&[], 0.95), None);
    }

    #[test]
    fn paired_ratios_cancel_a_shared_drift() {
        // Both sides slow down together by 2x half way: the ratio stays 3.
        let num = [3.0, 3.0, 6.0, 6.0];
        let den = [1.0, 1.0, 2.0, 2.0];
        assert_eq!(paired_ratios(&num, &den), vec![3.0; 4]);
    }

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(median_owned(vec![4.0, f64::NAN, 1.0, 3.0, 2.0]), Some(2.5));
        assert_eq!(median_owned(vec![f64::INFINITY]), None);
    }

    #[test]
    fn median_ignores_non_finite_samples() {
        assert_eq!(median(&[f64::NAN, 5.0, f64::INFINITY, 7.0]), Some(6.0));
    }

    #[test]
    fn quantiles_follow_hyndman_fan_type_7() {
        let v = [1.0, 2.0, 3.0, 4.0, 5.0];
        assert_eq!(quantile_sorted(&v, 0.25), Some(2.0));
        assert_eq!(quantile_sorted(&v, 0.75), Some(4.0));
        // R: quantile(c(1,2,3,4), 0.25) == 1.75
        assert_eq!(quantile_sorted(&[1.0, 2.0, 3.0, 4.0], 0.25), Some(1.75));
    }

    #[test]
    fn mad_is_scaled_and_relative_spread_divides_by_median() {
        // deviations from 10: 1,1,0,1,1 -> raw MAD 1
        let s = summarize(&[9.0, 11.0, 10.0, 9.0, 11.0]).unwrap();
        assert_eq!(s.median, 10.0);
        assert!((s.mad - 1.4826).abs() < 1e-12);
        assert!((s.relative_spread - 0.14826).abs() < 1e-12);
        assert!(s.wide);
        assert_eq!((s.min, s.max, s.n), (9.0, 11.0, 5));
        assert_eq!(s.iqr, 2.0);
    }

    #[test]
    fn tight_samples_are_not_wide() {
        let s = summarize(&[100.0, 100.5, 99.5, 100.2, 99.9]).unwrap();
        assert!(!s.wide, "{s:?}");
        assert_eq!(s.outliers, 0);
    }

    #[test]
    fn a_preempted_sample_is_an_outlier_and_does_not_move_the_median() {
        let s = summarize(&[24.5, 24.6, 24.4, 24.5, 24.5, 24.6, 900.0]).unwrap();
        assert_eq!(s.median, 24.5);
        assert_eq!(s.outliers, 1);
        assert_eq!(s.max, 900.0);
    }

    #[test]
    fn identical_samples_have_zero_spread() {
        let s = summarize(&[5.0; 4]).unwrap();
        assert_eq!((s.mad, s.relative_spread, s.outliers), (0.0, 0.0, 0));
        assert!(!s.wide);
    }
}
