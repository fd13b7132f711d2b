//! Optimal one-dimensional k-means and the BIC of the partition it gives: Wang and Song,
//! "Ckmeans.1d.dp: optimal k-means clustering in one dimension by dynamic programming", The R
//! Journal 3(2), 2011; model selection by the Bayesian information criterion (Schwarz 1978).
//! `compare::fleet` uses them to find bands of hosts.

/// Optimal partition of sorted `x` into exactly `k` contiguous clusters by the sum of squared
/// deviations, by dynamic programming with the divide-and-conquer speed-up (the optimal split
/// point is monotone in the prefix length, as Ckmeans.1d.dp uses): O(k n log n). Returns each
/// cluster's end index (exclusive).
pub fn ckmeans(x: &[f64], k: usize) -> Vec<usize> {
    let n = x.len();
    assert!(k >= 1 && k <= n, "k={k} for {n} values");
    let mut s1 = vec![0.0; n + 1];
    let mut s2 = vec![0.0; n + 1];
    for (i, v) in x.iter().enumerate() {
        s1[i + 1] = s1[i] + v;
        s2[i + 1] = s2[i] + v * v;
    }
    // Sum of squared deviations of x[a..b].
    let ssq = |a: usize, b: usize| -> f64 {
        let m = (b - a) as f64;
        let s = s1[b] - s1[a];
        (s2[b] - s2[a] - s * s / m).max(0.0)
    };
    // cost[j][i]: best cost of x[..i] in j+1 clusters; split[j][i]: where the last begins.
    let mut cost = vec![vec![f64::INFINITY; n + 1]; k];
    let mut split = vec![vec![0usize; n + 1]; k];
    for (i, c) in cost[0].iter_mut().enumerate().skip(1) {
        *c = ssq(0, i);
    }
    #[allow(clippy::too_many_arguments, clippy::needless_range_loop)]
    fn fill(
        prev: &[f64],
        cur: &mut [f64],
        arg: &mut [usize],
        j: usize,
        (lo, hi): (usize, usize),
        (opt_lo, opt_hi): (usize, usize),
        ssq: &dyn Fn(usize, usize) -> f64,
    ) {
        if lo > hi {
            return;
        }
        let mid = (lo + hi) / 2;
        let (mut best, mut best_at) = (f64::INFINITY, opt_lo.max(j));
        // The last cluster is x[t..mid], t >= j so the first t values fill j clusters.
        for t in opt_lo.max(j)..=opt_hi.min(mid - 1) {
            let c = prev[t] + ssq(t, mid);
            if c < best {
                best = c;
                best_at = t;
            }
        }
        cur[mid] = best;
        arg[mid] = best_at;
        if mid > lo {
            fill(prev, cur, arg, j, (lo, mid - 1), (opt_lo, best_at), ssq);
        }
        fill(prev, cur, arg, j, (mid + 1, hi), (best_at, opt_hi), ssq);
    }
    for j in 1..k {
        let (done, rest) = cost.split_at_mut(j);
        fill(
            &done[j - 1],
            &mut rest[0],
            &mut split[j],
            j,
            (j + 1, n),
            (j, n - 1),
            &ssq,
        );
    }
    let mut ends = vec![n];
    let mut i = n;
    for j in (1..k).rev() {
        i = split[j][i];
        ends.push(i);
    }
    ends.reverse();
    ends
}

/// BIC of the Gaussian mixture a partition implies (lower is better): each cluster a normal
/// with its own mean and variance, weighted by its size; 3k - 1 parameters. Variances are
/// floored at a millionth of the data's squared scale so a cluster of identical values does
/// not win by an infinite likelihood.
pub fn partition_bic(x: &[f64], ends: &[usize]) -> f64 {
    let n = x.len() as f64;
    let scale = x
        .iter()
        .fold(0.0_f64, |m, v| m.max(v.abs()))
        .max(f64::MIN_POSITIVE);
    let floor = (scale * 1e-3).powi(2);
    let mut log_l = 0.0;
    let mut start = 0;
    for &end in ends {
        let c = &x[start..end];
        let m = c.len() as f64;
        let mean = c.iter().sum::<f64>() / m;
        let var = (c.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / m).max(floor);
        let w = m / n;
        log_l += c
            .iter()
            .map(|v| {
                w.ln()
                    - 0.5 * (2.0 * std::f64::consts::PI * var).ln()
                    - (v - mean).powi(2) / (2.0 * var)
            })
            .sum::<f64>();
        start = end;
    }
    let p = (3 * ends.len() - 1) as f64;
    -2.0 * log_l + p * n.ln()
}
