//! The ratio of two independent samples (runs on two machines are not paired), without
//! assuming a distribution: the Hodges-Lehmann estimate of the ratio `new / old` and its
//! Mann-Whitney order-statistic interval.
//!
//! On the log scale a ratio is a shift, `log new = log old + delta`. The Hodges-Lehmann
//! estimate of the shift is the median of all `m x n` pairwise differences
//! `log new_j - log old_i`, i.e. the ratio is the median of all pairwise ratios
//! `new_j / old_i`. Its confidence interval is a pair of order statistics of those `m n`
//! ratios, `[D_(k), D_(mn+1-k)]`, with `k` from the null distribution of the Mann-Whitney
//! statistic `U`: the coverage is `1 - 2 P(U <= k - 1)` (Hollander and Wolfe, Nonparametric
//! Statistical Methods, 2nd ed., 1999, section 4.3; Bauer, "Constructing confidence sets
//! using rank statistics", JASA 67, 1972). `P(U <= u)` is counted exactly for small samples
//! ([`EXACT_MAX_PAIRS`]) and from its normal approximation beyond (mean `mn/2`, variance
//! `mn(m+n+1)/12`); which one was used is recorded. Ties among the values (identical timings)
//! leave the estimate exact and make the stated coverage approximate.

use serde::{Deserialize, Serialize};

/// Largest `m x n` whose `U` distribution is counted exactly: the count takes
/// `(m + n) x m x mn` steps, 25 runs a side about 0.8 million.
pub const EXACT_MAX_PAIRS: usize = 2500;

/// The ratio `new / old` of two samples with its interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RatioEstimate {
    /// Median of all pairwise ratios `new_j / old_i` (Hodges-Lehmann).
    pub ratio: f64,
    /// Lower end of the interval; absent with one value on each side.
    pub low: Option<f64>,
    /// Upper end.
    pub high: Option<f64>,
    /// The interval's coverage: exact from the `U` distribution, or its normal approximation
    /// (see `exact`). Below the nominal level when the samples are too few for it (3 runs
    /// each reach 90%). Absent with one value on each side.
    pub coverage: Option<f64>,
    /// True when the coverage was counted exactly; false for the normal approximation.
    pub exact: bool,
}

/// `P(U <= u)` for every `u` in `0..=m n`, `U` the Mann-Whitney statistic of samples of `m`
/// and `n` under the null (every choice of `m` ranks among `m + n` equally likely): ranks
/// `r_1 < ... < r_m` give `U = sum (r_k - k)`, counted by dynamic programming over ranks.
fn u_cdf(m: usize, n: usize) -> Vec<f64> {
    let mn = m * n;
    // ways[j][u]: choices of j ranks among those seen so far with partial U = u.
    let mut ways = vec![vec![0f64; mn + 1]; m + 1];
    ways[0][0] = 1.0;
    for r in 1..=m + n {
        for j in (1..=m.min(r)).rev() {
            // Taking rank r as the j-th chosen adds r - j to U.
            let add = r - j;
            if add > n {
                continue;
            }
            for u in (add..=mn).rev() {
                let w = ways[j - 1][u - add];
                if w != 0.0 {
                    ways[j][u] += w;
                }
            }
        }
    }
    let total: f64 = ways[m].iter().sum();
    let mut acc = 0.0;
    ways[m]
        .iter()
        .map(|w| {
            acc += w;
            (acc / total).min(1.0)
        })
        .collect()
}

/// Standard normal CDF (Abramowitz and Stegun 7.1.26 for erf, error below 1.5e-7).
fn normal_cdf(z: f64) -> f64 {
    let x = z.abs() / std::f64::consts::SQRT_2;
    let t = 1.0 / (1.0 + 0.327_591_1 * x);
    let poly = t
        * (0.254_829_592
            + t * (-0.284_496_736
                + t * (1.421_413_741 + t * (-1.453_152_027 + t * 1.061_405_429))));
    let erf = 1.0 - poly * (-x * x).exp();
    if z >= 0.0 {
        0.5 * (1.0 + erf)
    } else {
        0.5 * (1.0 - erf)
    }
}

/// The Hodges-Lehmann ratio `new / old` of two independent samples of positive values, with
/// its Mann-Whitney interval at `confidence` (the largest `k` whose coverage reaches it; with
/// too few values for it, `k = 1`, the range of the pairwise ratios, and the coverage it
/// has). Non-finite and non-positive values are left out; `None` when a side has none left.
pub fn ratio_of_two_samples(old: &[f64], new: &[f64], confidence: f64) -> Option<RatioEstimate> {
    let keep = |v: &[f64]| -> Vec<f64> {
        v.iter()
            .copied()
            .filter(|x| x.is_finite() && *x > 0.0)
            .collect()
    };
    let (old, new) = (keep(old), keep(new));
    let (m, n) = (old.len(), new.len());
    if m == 0 || n == 0 {
        return None;
    }
    let mut logs: Vec<f64> = old
        .iter()
        .flat_map(|o| new.iter().map(move |x| (x / o).ln()))
        .collect();
    logs.sort_by(f64::total_cmp);
    let ratio = super::quantile_sorted(&logs, 0.5)?.exp();
    let mn = m * n;
    if mn == 1 {
        return Some(RatioEstimate {
            ratio,
            low: None,
            high: None,
            coverage: None,
            exact: true,
        });
    }
    let exact = mn <= EXACT_MAX_PAIRS;
    let cdf: Box<dyn Fn(usize) -> f64> = if exact {
        let c = u_cdf(m, n);
        Box::new(move |u| c[u.min(mn)])
    } else {
        let mean = mn as f64 / 2.0;
        let sd = (mn as f64 * (m + n + 1) as f64 / 12.0).sqrt();
        // Continuity correction: P(U <= u) ~ Phi((u + 1/2 - mean) / sd).
        Box::new(move |u| normal_cdf((u as f64 + 0.5 - mean) / sd))
    };
    let coverage = |k: usize| 1.0 - 2.0 * cdf(k - 1);
    let mut k = 1;
    while k < mn.div_ceil(2) && coverage(k + 1) >= confidence {
        k += 1;
    }
    Some(RatioEstimate {
        ratio,
        low: Some(logs[k - 1].exp()),
        high: Some(logs[mn - k].exp()),
        coverage: Some(coverage(k).max(0.0)),
        exact,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_u_distribution_of_two_and_two_is_one_one_two_one_one_sixths() {
        // C(4,2) = 6 arrangements: U = 0, 1, 2, 2, 3, 4.
        let c = u_cdf(2, 2);
        let want = [1.0, 2.0, 4.0, 5.0, 6.0].map(|x| x / 6.0);
        for (a, b) in c.iter().zip(want) {
            assert!((a - b).abs() < 1e-12, "{c:?}");
        }
    }

    #[test]
    fn five_runs_each_give_the_3rd_and_23rd_pairwise_ratio_at_96_8_percent() {
        // m = n = 5: P(U <= 2) = 4/252 (Hollander and Wolfe's table A.6 gives C = 3 at
        // 96.8%), P(U <= 3) = 7/252 would leave 94.4%.
        let old = [10.0, 11.0, 12.0, 13.0, 14.0];
        let new: Vec<f64> = old.iter().map(|x| x * 2.0).collect();
        let r = ratio_of_two_samples(&old, &new, 0.95).unwrap();
        assert!(r.exact);
        assert!(
            (r.coverage.unwrap() - (1.0 - 8.0 / 252.0)).abs() < 1e-12,
            "{r:?}"
        );
        // The 25 ratios 2 x new/old in order: the 3rd and the 23rd.
        let mut ratios: Vec<f64> = old
            .iter()
            .flat_map(|o| new.iter().map(move |x| x / o))
            .collect();
        ratios.sort_by(f64::total_cmp);
        assert!((r.low.unwrap() - ratios[2]).abs() < 1e-12);
        assert!((r.high.unwrap() - ratios[22]).abs() < 1e-12);
        // The median of the 25: 2 x (12 / 12) = 2.
        assert!((r.ratio - 2.0).abs() < 1e-12, "{r:?}");
    }

    #[test]
    fn three_runs_each_reach_only_90_percent_and_say_so() {
        // m = n = 3: P(U <= 0) = 1/20, so even the range covers only 90%.
        let r = ratio_of_two_samples(&[1.0, 2.0, 4.0], &[3.0, 6.0, 12.0], 0.95).unwrap();
        assert!((r.coverage.unwrap() - 0.9).abs() < 1e-12);
        assert_eq!((r.low, r.high), (Some(0.75), Some(12.0)));
        assert!((r.ratio - 3.0).abs() < 1e-12);
    }

    #[test]
    fn one_run_each_is_a_ratio_without_an_interval() {
        let r = ratio_of_two_samples(&[2.0], &[3.0], 0.95).unwrap();
        assert_eq!(
            (r.ratio, r.low, r.high, r.coverage),
            (1.5, None, None, None)
        );
        assert_eq!(ratio_of_two_samples(&[], &[3.0], 0.95), None);
        assert_eq!(ratio_of_two_samples(&[0.0, f64::NAN], &[3.0], 0.95), None);
    }

    #[test]
    fn large_samples_use_the_normal_approximation_and_cover_the_true_ratio() {
        // 60 runs each of a spread with a true ratio of 1.5.
        let old: Vec<f64> = (0..60)
            .map(|i| 10.0 + ((i * 7) % 60) as f64 / 10.0)
            .collect();
        let new: Vec<f64> = old.iter().map(|x| x * 1.5).collect();
        let r = ratio_of_two_samples(&old, &new, 0.95).unwrap();
        assert!(!r.exact);
        assert!(r.low.unwrap() < 1.5 && 1.5 < r.high.unwrap(), "{r:?}");
        assert!((r.coverage.unwrap() - 0.95).abs() < 0.01, "{r:?}");
        // The exact count agrees with the approximation where both apply (20 and 20).
        let exact = u_cdf(20, 20);
        let (mean, sd) = (200.0, (400.0f64 * 41.0 / 12.0).sqrt());
        let approx = normal_cdf((127.0 + 0.5 - mean) / sd);
        assert!(
            (exact[127] - approx).abs() < 0.005,
            "{} {approx}",
            exact[127]
        );
    }

    #[test]
    fn the_normal_cdf_matches_its_table() {
        assert!((normal_cdf(1.959_964) - 0.975).abs() < 1e-6);
        assert!((normal_cdf(0.0) - 0.5).abs() < 1e-9);
        assert!((normal_cdf(-1.0) - 0.158_655_25).abs() < 1e-6);
    }
}
