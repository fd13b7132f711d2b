//! The words of comparisons: the rule that decides whether a figure changed, the one line a
//! comparison quotes from each run's verdict, why a probe or a function's code is missing on
//! one side, and the notes of a profile diff and a fleet.

use crate::format::pct;
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
         overlap and it moved by at least {}; a figure without an interval (older \
         files) must move by more than {} x the larger scaled MAD and {}, or \
         {} and its probe's noise when it has no samples",
        pct(f.interval_practical_change, 0),
        f.spread_factor,
        pct(f.min_relative_change, 0),
        pct(f.derived_relative_change, 0),
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
        "a figure counts when its two intervals do not overlap and it moved {} or \
         more{drift}",
        pct(f.interval_practical_change, 0)
    )
}

/// Why a probe's figures are missing from one run: absent from the file, its metric not
/// reported, or its skip or failure reason.
pub fn not_measured(in_file: bool, ok: bool, skipped: bool, reason: Option<&str>) -> String {
    match (in_file, ok) {
        (false, _) => "not in this file".to_string(),
        (true, true) => "metric not reported".to_string(),
        (true, false) => format!(
            "{}: {}",
            if skipped { "skipped" } else { "failed" },
            reason.unwrap_or("no reason given")
        ),
    }
}

/// The workload of an attached diagnosis: `process 4242 (attached)`.
pub fn attached_process(pid: u32) -> String {
    format!("process {pid} (attached)")
}

/// Why a grown function has no hot code on one side.
pub enum NoSite {
    /// No sample landed in it.
    NotSampled,
    /// It had `share` of the samples, under the `min_share` code is disassembled from.
    UnderShare { share: f64, min_share: f64 },
    /// Sampled enough, but not disassembled (the diagnosis's notes say why).
    NotDisassembled,
}

/// [`NoSite`] in words.
pub fn no_site(why: NoSite) -> String {
    match why {
        NoSite::NotSampled => "not sampled".to_string(),
        NoSite::UnderShare { share, min_share } => format!(
            "{} of samples: under the {} from which code is disassembled",
            crate::format::pct(share, 1),
            crate::format::pct(min_share, 0)
        ),
        NoSite::NotDisassembled => "not disassembled (its notes say why)".to_string(),
    }
}

/// Which side of a profile diff a finding is on alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OneSide {
    /// Found in the new run only.
    New,
    /// Found in the old run only.
    Old,
}

/// How a one-sided finding is labelled: "only in new" when the other run did not sample its
/// function; "grew"/"shrank" when it did, below the bar or not (issue 30: a site at 3.7% in
/// the old run, under the 5% bar, was called "only in new").
pub fn one_sided_label(side: OneSide, in_other_run: bool) -> &'static str {
    match (side, in_other_run) {
        (OneSide::New, false) => "only in new",
        (OneSide::Old, false) => "only in old",
        (OneSide::New, true) => "grew",
        (OneSide::Old, true) => "shrank",
    }
}

/// The move of a one-sided finding whose function the other run sampled at `other` of its
/// samples: "from 3.7% (below the 5% bar) to 12.0%" (new side) or "from 12.0% to 3.7%
/// (below the 5% bar)" (old side); `this` is the finding's own share.
pub fn across_the_bar(side: OneSide, this: Option<f64>, other: f64, bar: f64) -> String {
    let other_text = if other < bar {
        format!("{} (below the {} bar)", pct(other, 1), pct(bar, 0))
    } else {
        format!("{} (no finding there)", pct(other, 1))
    };
    let this_text = this.map(|s| pct(s, 1)).unwrap_or_else(|| "?".into());
    match side {
        OneSide::New => format!("from {other_text} to {this_text}"),
        OneSide::Old => format!("from {this_text} to {other_text}"),
    }
}

/// The rule a profile diff follows, with both runs' lengths and rates.
pub struct ProfileRuleFigures {
    /// The old run's wall time, s, and sampling rate, Hz.
    pub old: (f64, u64),
    /// The new run's.
    pub new: (f64, u64),
    /// The smallest move in share that counts (0.01 = 1 point).
    pub min_change: f64,
    /// How many standard errors of the two shares a move must exceed.
    pub noise_se: f64,
}

/// [`ProfileRuleFigures`] in words.
pub fn profile_rule(f: &ProfileRuleFigures) -> String {
    format!(
        "Compared by share of samples, which does not depend on run length, and by CPU time \
         per second of wall time (samples / sampling rate / wall time; old {:.2} s at {} Hz, \
         new {:.2} s at {} Hz). A function grew or shrank when its share moved by {:.0} point \
         or more and by more than {:.0} standard errors of the two shares (sampling noise); \
         ranked by the change in share.",
        f.old.0,
        f.old.1,
        f.new.0,
        f.new.1,
        100.0 * f.min_change,
        f.noise_se
    )
}

/// A diagnosis saved without call stacks, as a profile diff notes it.
pub fn saved_without_stacks(label: &str, functions: usize) -> String {
    format!(
        "{label} was saved without call stacks: only its {functions} hottest functions are \
         counted, and no callers are known"
    )
}

/// A diagnosis without samples.
pub fn no_samples(label: &str) -> String {
    format!("{label} has no samples: nothing to compare")
}

/// Two runs that sampled different events.
pub fn different_events(old: &str, new: &str) -> String {
    format!(
        "the runs sampled different events ({old} and {new}): shares compare; CPU time is \
         estimated from each sampling rate"
    )
}

/// A fleet group too small to band: `12 host(s); bands need 20 or more`.
pub fn too_few_hosts(hosts: usize, min_hosts: usize) -> String {
    format!("{hosts} host(s); bands need {min_hosts} or more")
}

/// The figures of the wall-time comparison's rule.
pub struct WallRuleFigures {
    /// The old run's wall-clock window, s.
    pub old_window_s: f64,
    /// The new run's.
    pub new_window_s: f64,
    /// The smallest move of a share that is marked (0.05 = 5 points).
    pub min_change: f64,
}

/// How two wall-clock views compare, and how far a move can be trusted.
pub fn wall_rule(f: &WallRuleFigures) -> String {
    format!(
        "Wall time compared by share of the threads' time, which does not depend on run \
         length or thread count, and by threads in each state on average (its time / the \
         window; old {:.2} s, new {:.2} s). The kernel's own accounting times each state \
         exactly, so a run's shares carry no sampling error; but two runs of the same \
         workload differ by several points (other load, scheduling), which one run per side \
         cannot measure. A share that moved by {:.0} points or more is marked; only repeated \
         runs of each side tell whether it moved beyond run-to-run noise.",
        f.old_window_s,
        f.new_window_s,
        100.0 * f.min_change
    )
}

/// One diagnosis of two has no wall-clock view.
pub fn no_wall_view(label: &str) -> String {
    format!(
        "{label} has no wall-clock view (recorded with --no-wall, or by an older cpudoctor): \
         wall time is not compared"
    )
}
