//! The words of comparisons: the rule that decides whether a figure changed, and the one line
//! a comparison quotes from each run's verdict.

use crate::schema::Verdict;

/// The verdict's one line of meaning; for files written before verdicts carried one, the
/// explanation's first sentence.
pub fn summary_of(v: &Verdict) -> String {
    if !v.summary.is_empty() {
        return v.summary.clone();
    }
    let first = v
        .explanation
        .split_inclusive(". ")
        .next()
        .unwrap_or(&v.explanation);
    first.trim_end().trim_end_matches('.').to_string()
}

/// The figures of the change rule, as `compare::fingerprint` sets them.
pub struct ChangeRuleFigures {
    /// The practical floor of the interval rule (0.10 = 10%).
    pub interval_practical_change: f64,
    /// How many scaled MADs a median must move.
    pub spread_factor: f64,
    /// The smallest relative move with samples on both sides.
    pub min_relative_change: f64,
    /// The smallest relative move of a figure without samples.
    pub derived_relative_change: f64,
    /// Both runs VM guests: the host's drift factors (one core or memory; a line between
    /// vCPUs).
    pub guest_drift: Option<(f64, f64)>,
}

/// The rule that decides whether a metric changed, in words.
pub fn change_rule(f: &ChangeRuleFigures) -> String {
    let mut rule = format!(
        "a figure counts as changed when the confidence intervals of its median in the two \
         runs (95%, or the level their values reach: 3 runs of --runs reach 75%) do not \
         overlap and it moved by at least {:.0}%; a figure without an interval (older \
         files) must move by more than {} x the larger scaled MAD and {:.0}%, or \
         {:.0}% and its probe's noise when it has no samples",
        f.interval_practical_change * 100.0,
        f.spread_factor,
        f.min_relative_change * 100.0,
        f.derived_relative_change * 100.0,
    );
    if let Some((host, placement)) = f.guest_drift {
        rule.push_str(&format!(
            "; both runs are VM guests, so a move within {host}x \
             ({placement}x for figures that move a line between vCPUs) is what the \
             host moves with nothing changed, and is not counted"
        ));
    }
    rule
}

/// The rule in one sentence, for a view with no room for [`change_rule`].
pub fn change_rule_short(f: &ChangeRuleFigures) -> String {
    let drift = f.guest_drift.map_or(String::new(), |(host, placement)| {
        format!(", and beyond {host}x ({placement}x between vCPUs) on two VM guests")
    });
    format!(
        "a figure counts when its two intervals do not overlap and it moved {:.0}% or \
         more{drift}",
        f.interval_practical_change * 100.0
    )
}
