//! Two fingerprints side by side: the machine facts that differ, every metric with its ratio
//! and whether it moved beyond the noise of both runs, and the hazards whose verdict changed
//! with the software patterns each hurts. Built from the schema alone (metric directions,
//! spreads, hazard ids), so probes added later are compared without changes here.
//!
//! [`diff`] computes a [`Diff`] (the machine facts in [`super::facts`]); `crate::render::diff` turns
//! it into a table or JSON.

pub use super::Side;
use super::facts::{MachineFact, machine_facts};
use crate::hazards;
use crate::names::probe;
use crate::schema::disturbance::Disturbance;
use crate::schema::probes::pause::PauseFigures;
use crate::schema::{Better, Fingerprint, Level, Metric, Moved, NotJudged, Status, Verdict};
use crate::spin::{RUNTIMES, SpinCost, spin_cost};
use crate::stats::effect::{Effect, Reading, Rule};
use crate::words;
use serde::{Serialize, Serializer};

/// How many scaled MADs a median must move before it counts as changed. The scaled MAD
/// estimates the standard deviation of the samples (see `crate::stats`), so 2 is about two
/// standard deviations of either run: a move smaller than that is within what one run shows
/// from repetition to repetition.
pub const SPREAD_FACTOR: f64 = 2.0;

/// Smallest relative move that counts, even when both runs' spread is tiny. Timings quantised
/// to whole cycles can have a MAD of 0, yet two runs on one machine still differ by a few
/// percent (core clock, neighbours); 5% is the bar `measure` uses to call a spread wide.
pub const MIN_RELATIVE_CHANGE: f64 = crate::stats::WIDE_RELATIVE_SPREAD;

/// The practical-effect floor of the interval rule: a move smaller than this is not reported
/// even when the intervals separate. 10% is the smallest effect any hazard threshold here
/// distinguishes (software prefetch's +-10%; the other thresholds are 20% apart or more), and
/// the guard band the verdicts keep around their thresholds, so the two agree.
pub const INTERVAL_PRACTICAL_CHANGE: f64 = crate::hazards::THRESHOLD_GUARD;

/// On two VM guests, the factor by which a figure measured on one core or in memory moves
/// between runs minutes apart with nothing changed but what the host's other tenants do:
/// on the 2-vCPU Zen 3 guest (`bench/stability.sh 5 3`, 2026-11-24) DRAM latency read 153 to
/// 227 ns (1.41x between runs), a locked add on a private line 2.15 to 3.05 ns (1.42x, its
/// host core's other hardware thread busy), PAUSE 24.1 to 27.4 ns. A move within this
/// factor is shown, but not counted as worse or better.
pub const GUEST_HOST_DRIFT: f64 = 1.5;

/// On two VM guests, the factor for figures that move a cache line between two vCPUs (core to
/// core, sharing, split locks): the host decides whether the two vCPUs share a core (~10 ns
/// per handoff on that guest), a CCX (~25 ns) or neither (~110 ns), and moves them at will.
/// 25 to 110 ns is 4.4x; beyond 5x a move is counted.
pub const GUEST_PLACEMENT_DRIFT: f64 = 5.0;

/// Probes whose figures move a line between two vCPUs, so on a VM they depend on where the
/// host placed the vCPUs ([`GUEST_PLACEMENT_DRIFT`]).
const PLACEMENT_PROBES: &[&str] = &[
    probe::C2C,
    probe::SHARING,
    probe::SPLIT_LOCK,
    probe::SPLIT_LOCK_NEIGHBOUR,
    probe::HANDOFF,
];

/// The factor within which a figure of `probe` moves on two VM guests with nothing changed.
pub fn guest_drift_factor(probe: &str) -> f64 {
    if PLACEMENT_PROBES.contains(&probe) {
        GUEST_PLACEMENT_DRIFT
    } else {
        GUEST_HOST_DRIFT
    }
}

/// Relative move that counts when one side has no spread (a derived figure, such as a ratio
/// of two medians): with no samples to judge the noise by, only a 10% move is reported.
pub const DERIVED_RELATIVE_CHANGE: f64 = 0.10;

/// A derived figure (a ratio or product of medians) inherits the noise of the sampled figures
/// it is computed from: a ratio of two medians each with relative spread r has a relative
/// spread of about r x sqrt(2). Which siblings a figure comes from is not in the schema, so
/// the widest relative spread among its probe's sampled metrics, in either run, stands for r.
pub const DERIVED_SPREAD_GROWTH: f64 = std::f64::consts::SQRT_2;

/// What one run was.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunInfo {
    /// How the caller named it (usually the file name).
    pub label: String,
    /// Command that produced it.
    pub command: String,
    /// When it started, seconds since the Unix epoch.
    pub created_unix_s: u64,
    /// cpudoctor version that wrote it.
    pub tool_version: String,
    /// How many runs of the battery it holds (`check --runs N`); 1 for a single run.
    pub runs: u64,
}

/// One machine fact in both runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FactDiff {
    /// What the fact is (`CPU`, `Kernel`, ...).
    pub fact: String,
    /// Value in the old run.
    pub old: String,
    /// Value in the new run.
    pub new: String,
    /// True when they differ.
    pub differs: bool,
}

/// One side of a metric comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricSide {
    /// The figure.
    pub value: f64,
    /// Scaled MAD of its samples (same unit), absent for a derived figure.
    pub mad: Option<f64>,
    /// Scaled MAD / median, absent for a derived figure.
    pub relative_spread: Option<f64>,
}

/// How a metric moved from the old run to the new one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Moved beyond the noise in the worse direction: a regression.
    Worse,
    /// Moved beyond the noise in the better direction.
    Better,
    /// Moved beyond the noise; the metric is a fact with no better direction.
    Changed,
    /// Within the noise of both runs.
    Same,
    /// Moved beyond both runs' intervals, but both runs are VM guests and the move is within
    /// what the host moves this figure with nothing changed ([`guest_drift_factor`]): shown,
    /// not counted as worse or better.
    HostDrift,
    /// Absent (or its probe skipped/failed) in the old run.
    NotMeasuredOld,
    /// Absent (or its probe skipped/failed) in the new run.
    NotMeasuredNew,
    /// Present in both, but in different units: not compared.
    UnitsDiffer,
    /// Present in both, but measured while disturbed in one run or both (a CPU quota that
    /// throttled, steal, other tasks on its CPUs: see [`crate::schema::disturbance`]): a move
    /// would say what disturbed it, not what the machine does, so it is not compared.
    Disturbed,
}

/// One metric in both runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MetricDiff {
    /// Probe that measured it.
    pub probe: String,
    /// Metric name.
    pub metric: String,
    /// Unit (the new run's when both have it).
    pub unit: String,
    /// Which way is better.
    pub better: Better,
    /// Old figure, absent when not measured.
    pub old: Option<MetricSide>,
    /// New figure, absent when not measured.
    pub new: Option<MetricSide>,
    /// new / old, when both exist and old is not 0.
    pub ratio: Option<f64>,
    /// Smallest absolute move that counts as a change, when both exist.
    pub threshold: Option<f64>,
    /// Which rule set the threshold.
    pub rule: Option<ChangeRule>,
    /// The verdict on the move.
    pub change: Change,
}

/// Which noise of the two files gave a metric's move its interval, and so the smallest move
/// that counts as a change (the rule that reads it is the one of [`crate::stats::effect`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeRule {
    /// Both runs carry a confidence interval of the median: they must not overlap, and the
    /// move must reach [`INTERVAL_PRACTICAL_CHANGE`] (the rule's floor).
    Interval,
    /// Both runs carry samples: [`SPREAD_FACTOR`] times the wider MAD, or
    /// [`MIN_RELATIVE_CHANGE`].
    Spread,
    /// A derived figure whose probe's sampled figures are noisy: their spread, grown.
    ProbeSpread,
    /// No spread on either side: [`DERIVED_RELATIVE_CHANGE`].
    Relative,
}

/// A probe measured in one run only.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct NotMeasured {
    /// Probe name.
    pub probe: String,
    /// The run that lacks it.
    pub missing_in: Side,
    /// Why: absent from the file, or the probe's skip/failure reason.
    pub reason: String,
}

/// A verdict level and figure, as one run judged it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Judged {
    /// Severity.
    pub level: Level,
    /// The measured figure as shown.
    pub figure: String,
}

/// Which way a verdict moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum VerdictMove {
    /// The level rose (ok -> notice -> hazard).
    Worse,
    /// The level fell.
    Better,
    /// Judged in one run only (its probe was not measured in the other).
    NotJudged,
    /// The level changed, but no metric the hazard reads moved beyond both runs' spread: the
    /// figures crossed a threshold within noise. Not a regression.
    WithinNoise,
    /// The level changed, but a figure the hazard reads was measured while disturbed in one
    /// run or both ([`Change::Disturbed`]): not compared.
    Disturbed,
}

/// A hazard whose verdict differs between the runs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HazardChange {
    /// Stable hazard id.
    pub hazard: String,
    /// Title.
    pub title: String,
    /// Old verdict, absent when not judged.
    pub old: Option<Judged>,
    /// New verdict, absent when not judged.
    pub new: Option<Judged>,
    /// Which way it moved.
    pub direction: VerdictMove,
    /// Software patterns this hazard hurts (empty when this build does not know the hazard).
    pub hurts: Vec<String>,
    /// The explanation of the run that judged it worse (what it means for software there).
    pub explanation: String,
}

/// A probe listed more than once in one file: only its first entry is compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DuplicateProbe {
    /// Probe name.
    pub probe: String,
    /// The run whose file lists it more than once.
    pub run: Side,
    /// How many times the file lists it.
    pub times: usize,
}

/// A probe measured while disturbed in one run or both: its figures are not compared.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DisturbedProbe {
    /// Probe name.
    pub probe: String,
    /// What disturbed it in the old run, when something did.
    pub old: Option<Disturbance>,
    /// What disturbed it in the new run, when something did.
    pub new: Option<Disturbance>,
}

/// Counts for the summary line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
pub struct DiffCounts {
    /// Metrics that got worse.
    pub worse: usize,
    /// Metrics that got better.
    pub better: usize,
    /// Facts (no direction) that changed.
    pub changed: usize,
    /// Metrics within noise.
    pub same: usize,
    /// Metrics that moved within a VM host's drift (both runs on guests).
    pub host_drift: usize,
    /// Metrics measured in one run only (or not comparable, or measured while disturbed).
    pub not_compared: usize,
    /// Of `not_compared`: metrics measured while disturbed in one run or both.
    pub disturbed: usize,
}

/// Everything `cpudoctor diff` shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Diff {
    /// The old run.
    pub old: RunInfo,
    /// The new run.
    pub new: RunInfo,
    /// Every machine fact, differing ones first.
    pub machine: Vec<FactDiff>,
    /// Every metric of either run, in probe order.
    pub metrics: Vec<MetricDiff>,
    /// Probes measured in one run only.
    pub not_measured: Vec<NotMeasured>,
    /// Probes measured while disturbed in one run or both, whose figures are not compared.
    pub disturbed: Vec<DisturbedProbe>,
    /// Hazards whose verdict changed.
    pub hazards: Vec<HazardChange>,
    /// Ids of hazards judged the same in both runs.
    pub hazards_unchanged: Vec<String>,
    /// Summary counts over `metrics`.
    pub counts: DiffCounts,
    /// The change rule; the JSON says it in words, for its readers.
    pub rule: ChangeRules,
    /// Probes a file lists more than once (the first entry is the one compared).
    pub duplicate_probes: Vec<DuplicateProbe>,
    /// For each hazard that reads a figure which moved beyond noise: what it costs software
    /// on each machine, in that machine's figures.
    pub costs: Vec<HazardCost>,
}

/// What one hazard costs software on each side, for the figures of it that moved.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HazardCost {
    /// Hazard id (`slow_pause`).
    pub hazard: String,
    /// Its title (`PAUSE latency`).
    pub title: String,
    /// The figures it reads that moved beyond noise (`pause_ns`).
    pub moved: Vec<String>,
    /// The old run's verdict in one line (`notice: spin counts last 6.1x Haswell's; ...`).
    pub old: Option<Judged>,
    /// The new run's.
    pub new: Option<Judged>,
    /// The old run's one line of meaning, with its costs.
    pub old_cost: Option<String>,
    /// The new run's.
    pub new_cost: Option<String>,
}

/// The rules that decide whether a figure changed, for one diff: the same figures for every
/// diff, plus whether both runs were VM guests (and so the host-drift rule applied).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ChangeRules {
    /// Both runs were VM guests: moves within [`GUEST_HOST_DRIFT`] (or
    /// [`GUEST_PLACEMENT_DRIFT`]) do not count.
    pub guests: bool,
}

impl ChangeRules {
    fn figures(&self) -> words::compare::ChangeRuleFigures {
        words::compare::ChangeRuleFigures {
            interval_practical_change: INTERVAL_PRACTICAL_CHANGE,
            spread_factor: SPREAD_FACTOR,
            min_relative_change: MIN_RELATIVE_CHANGE,
            derived_relative_change: DERIVED_RELATIVE_CHANGE,
            guest_drift: self
                .guests
                .then_some((GUEST_HOST_DRIFT, GUEST_PLACEMENT_DRIFT)),
        }
    }

    /// The rules in words, in full, from the figures above.
    pub fn words(&self) -> String {
        words::compare::change_rule(&self.figures())
    }

    /// The rules in one sentence, for the default view.
    pub fn short_words(&self) -> String {
        words::compare::change_rule_short(&self.figures())
    }
}

impl Serialize for ChangeRules {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.words())
    }
}

/// One fingerprint and the name it goes by (usually its file name).
#[derive(Debug, Clone, PartialEq)]
pub struct Run {
    /// Name shown in legends and tables.
    pub label: String,
    /// The fingerprint.
    pub fp: Fingerprint,
}

/// Fingerprints compared for one report, each as `session::judge` judged it (so every view
/// of it reads the same verdicts), and each later one diffed against the first. At least one
/// run, by construction.
#[derive(Debug, Clone, PartialEq)]
pub struct Compared {
    runs: Vec<Run>,
    verdicts: Vec<Vec<Verdict>>,
    not_judged: Vec<Vec<NotJudged>>,
    machine: Vec<FactRow>,
    spin: Vec<Option<SpinRun>>,
    diffs: Vec<Diff>,
}

/// The spin model of `cpudoctor spin` at one run's PAUSE: how long each runtime spins before
/// it blocks.
#[derive(Debug, Clone, PartialEq)]
pub struct SpinRun {
    /// The run's measured PAUSE, ns.
    pub pause_ns: f64,
    /// Its logical CPUs (the .NET legacy lock's round grows with them).
    pub cores: u64,
    /// Each runtime's spin, in the order of `spin::RUNTIMES`.
    pub costs: Vec<SpinCost>,
}

impl SpinRun {
    /// The model at `fp`'s PAUSE; `None` when it has no usable PAUSE figure.
    pub fn of(fp: &Fingerprint) -> Option<SpinRun> {
        let pause_ns = fp
            .figures::<PauseFigures>()?
            .pause_ns
            .map(|m| m.value)
            .filter(|ns| ns.is_finite() && *ns > 0.0)?;
        let cores = fp.machine.logical_cpus as u64;
        Some(SpinRun {
            pause_ns,
            cores,
            costs: RUNTIMES
                .iter()
                .map(|p| spin_cost(p, pause_ns, cores))
                .collect(),
        })
    }
}

/// One machine fact across every run of a [`Compared`].
#[derive(Debug, Clone, PartialEq)]
pub struct FactRow {
    /// What the fact is (`CPU`, `Kernel`, ...).
    pub fact: &'static str,
    /// As each run shows it, in run order.
    pub shown: Vec<String>,
    /// True when some run's value differs from the first's (compared on raw values).
    pub differs: bool,
}

fn fact_rows(runs: &[Run]) -> Vec<FactRow> {
    let facts: Vec<Vec<MachineFact>> = runs.iter().map(|r| machine_facts(&r.fp)).collect();
    let Some(first) = facts.first() else {
        return Vec::new();
    };
    first
        .iter()
        .enumerate()
        .map(|(i, f)| FactRow {
            fact: f.name,
            shown: facts.iter().map(|run| run[i].shown.clone()).collect(),
            differs: facts.iter().any(|run| !run[i].same_as(f)),
        })
        .collect()
}

impl Compared {
    /// The comparison of `runs`, the first the baseline; `None` when there are none.
    pub fn new(runs: Vec<Run>) -> Option<Compared> {
        let first = runs.first()?;
        let diffs = runs[1..]
            .iter()
            .map(|other| diff(&first.fp, &other.fp, &first.label, &other.label))
            .collect();
        let verdicts: Vec<Vec<Verdict>> = runs.iter().map(|r| r.fp.verdicts.clone()).collect();
        let not_judged = runs.iter().map(|r| r.fp.not_judged.clone()).collect();
        Some(Compared {
            machine: fact_rows(&runs),
            spin: runs.iter().map(|r| SpinRun::of(&r.fp)).collect(),
            runs,
            verdicts,
            not_judged,
            diffs,
        })
    }

    /// The runs, the first being the one the others are compared with.
    pub fn runs(&self) -> &[Run] {
        &self.runs
    }

    /// Each run's verdicts (as `session::judge` judged the run), in run order.
    pub fn verdicts(&self) -> &[Vec<Verdict>] {
        &self.verdicts
    }

    /// Each run's hazards not judged (as `session::judge` found them), in run order.
    pub fn not_judged(&self) -> &[Vec<NotJudged>] {
        &self.not_judged
    }

    /// Every machine fact across the runs, in the order [`machine_facts`] lists them.
    pub fn machine(&self) -> &[FactRow] {
        &self.machine
    }

    /// Each run's spin model at its PAUSE (absent without a PAUSE figure), in run order.
    pub fn spin(&self) -> &[Option<SpinRun>] {
        &self.spin
    }

    /// Each later run against the first, in run order.
    pub fn diffs(&self) -> &[Diff] {
        &self.diffs
    }
}

fn run_info(fp: &Fingerprint, label: &str) -> RunInfo {
    RunInfo {
        label: label.to_string(),
        command: fp.command.clone(),
        created_unix_s: fp.created_unix_s,
        tool_version: fp.tool.version.clone(),
        runs: fp
            .probes
            .iter()
            .filter_map(|p| p.params.get("runs").and_then(|r| r.as_u64()))
            .max()
            .unwrap_or(1),
    }
}

fn side(m: &Metric) -> MetricSide {
    MetricSide {
        value: m.value,
        mad: m.spread.as_ref().map(|s| s.mad),
        relative_spread: m.spread.as_ref().map(|s| s.relative_spread),
    }
}

/// The widest relative spread among the sampled metrics of a probe in either run: the noise a
/// derived figure of that probe inherits.
fn probe_relative_spread(old: &[Metric], new: &[Metric]) -> f64 {
    old.iter()
        .chain(new)
        .filter_map(|m| m.spread.as_ref().map(|s| s.relative_spread))
        .filter(|r| r.is_finite())
        .fold(0.0, f64::max)
}

/// Compares one metric measured in both runs, as on bare metal (no host drift allowed for): see
/// [`compare_metric_on`].
pub fn compare_metric_in_probe(
    probe: &str,
    old: &Metric,
    new: &Metric,
    probe_relative_spread: f64,
) -> MetricDiff {
    compare_metric_on(probe, old, new, probe_relative_spread, None)
}

/// Compares one metric measured in both runs through the one change rule
/// ([`crate::stats::effect`]). The effect is new - old; its interval comes from the noise the
/// files give ([`ChangeRule`]): the two medians' intervals (a change needs them apart and a
/// move of [`INTERVAL_PRACTICAL_CHANGE`], the rule's floor), else the runs' spread
/// ([`SPREAD_FACTOR`] scaled MADs, and at least [`MIN_RELATIVE_CHANGE`] of run-to-run noise),
/// else for a derived figure [`DERIVED_RELATIVE_CHANGE`] or the noise it inherits from its
/// probe's sampled figures (`probe_relative_spread`, see [`DERIVED_SPREAD_GROWTH`]). Sizes are
/// relative to the smaller figure, so the rule reads the same old-to-new and new-to-old.
/// `drift`: on two VM guests, the factor the host moves this figure by with nothing changed
/// ([`guest_drift_factor`]), the rule's allowance: a move within it is
/// [`Change::HostDrift`].
fn compare_metric_on(
    probe: &str,
    old: &Metric,
    new: &Metric,
    probe_relative_spread: f64,
    drift: Option<f64>,
) -> MetricDiff {
    let (o, n) = (side(old), side(new));
    let mut d = MetricDiff {
        probe: probe.to_string(),
        metric: new.name.clone(),
        unit: new.unit.clone(),
        better: new.better,
        ratio: (old.value != 0.0).then(|| new.value / old.value),
        threshold: None,
        rule: None,
        change: Change::Same,
        old: Some(o.clone()),
        new: Some(n.clone()),
    };
    if old.unit != new.unit {
        d.change = Change::UnitsDiffer;
        return d;
    }
    let delta = new.value - old.value;
    let base = old.value.abs().min(new.value.abs());
    let (effect, floor, which, threshold) = if let (Some(oi), Some(ni)) =
        (&old.interval, &new.interval)
    {
        let floor = INTERVAL_PRACTICAL_CHANGE * base;
        let e = Effect::between_intervals(old.value, new.value, oi.bounds(), ni.bounds());
        (e, Some(floor), ChangeRule::Interval, floor)
    } else {
        let spread = o.mad.into_iter().chain(n.mad).fold(0.0_f64, f64::max).abs() * SPREAD_FACTOR;
        let both_have_spread = o.mad.is_some() && n.mad.is_some();
        let inherited = SPREAD_FACTOR * DERIVED_SPREAD_GROWTH * probe_relative_spread;
        let relative = if both_have_spread {
            MIN_RELATIVE_CHANGE
        } else {
            DERIVED_RELATIVE_CHANGE.max(inherited)
        };
        // The noise either way: with no spread on either side and a 0 on one, nothing gives a
        // scale for noise, and any move from 0 counts.
        let noise = spread.max(relative * base);
        let which = if both_have_spread {
            ChangeRule::Spread
        } else if inherited > DERIVED_RELATIVE_CHANGE {
            ChangeRule::ProbeSpread
        } else {
            ChangeRule::Relative
        };
        (Effect::difference_within(delta, noise), None, which, noise)
    };
    // Within the drift factor: the larger figure under `factor` times the smaller.
    let allowance = drift
        .filter(|_| base > 0.0)
        .map(|factor| (factor - 1.0) * base);
    let rule = Rule {
        floor,
        negligible: None,
        allowance,
    };
    d.threshold = Some(threshold);
    d.rule = Some(which);
    d.change = match rule.read(&effect) {
        Reading::Change(way) => match new.better.moved(way) {
            Moved::Worse => Change::Worse,
            Moved::Better => Change::Better,
            Moved::Changed => Change::Changed,
        },
        Reading::WithinAllowance(_) => Change::HostDrift,
        Reading::BelowFloor(_) | Reading::Negligible | Reading::WithinNoise => Change::Same,
    };
    d
}

fn not_measured_reason(fp: &Fingerprint, probe: &str) -> String {
    let p = fp.probe(probe);
    words::compare::not_measured(
        p.is_some(),
        p.is_some_and(|p| p.status == Status::Ok),
        p.is_some_and(|p| p.status == Status::Skipped),
        p.and_then(|p| p.reason.as_deref()),
    )
}

fn ok_metrics<'a>(fp: &'a Fingerprint, probe: &str) -> &'a [Metric] {
    fp.probe(probe)
        .filter(|p| p.status == Status::Ok)
        .map_or(&[], |p| p.metrics.as_slice())
}

/// Compares two fingerprints, each as `session::judge` judged it (its verdicts are compared).
/// `old_label` and `new_label` name them in the output.
pub fn diff(old: &Fingerprint, new: &Fingerprint, old_label: &str, new_label: &str) -> Diff {
    let mut machine: Vec<FactDiff> = machine_facts(old)
        .into_iter()
        .zip(machine_facts(new))
        .map(|(o, n)| FactDiff {
            fact: o.name.to_string(),
            differs: !o.same_as(&n),
            old: o.shown,
            new: n.shown,
        })
        .collect();
    machine.sort_by_key(|f| !f.differs);
    let (probes, duplicate_probes) = probe_order(old, new);
    let guests = old.machine.hypervisor.is_some() && new.machine.hypervisor.is_some();
    let (metrics, not_measured, disturbed) = metric_diffs(old, new, &probes, guests);
    let (ov, nv) = (&old.verdicts, &new.verdicts);
    let (hazard_changes, hazards_unchanged) = hazard_changes(old, new, ov, nv, &metrics);
    let costs = hazard_costs(ov, nv, &metrics);
    Diff {
        old: run_info(old, old_label),
        new: run_info(new, new_label),
        machine,
        counts: counts(&metrics),
        metrics,
        not_measured,
        disturbed,
        hazards: hazard_changes,
        hazards_unchanged,
        rule: ChangeRules { guests },
        duplicate_probes,
        costs,
    }
}

/// The probes to compare, in the old run's order then those only the new run has, each name
/// once; and the probes a file lists more than once.
fn probe_order<'a>(
    old: &'a Fingerprint,
    new: &'a Fingerprint,
) -> (Vec<&'a str>, Vec<DuplicateProbe>) {
    // Probe order: the old run's, then probes only the new run has; each name once. A file
    // that lists a probe twice is compared on its first entry (what every reader of the file,
    // hazards included, uses) and the diff says so.
    let mut probes: Vec<&str> = Vec::new();
    let mut duplicate_probes: Vec<DuplicateProbe> = Vec::new();
    for (run, fp) in [(Side::Old, old), (Side::New, new)] {
        let mut seen: Vec<&str> = Vec::new();
        for p in &fp.probes {
            if seen.contains(&p.name.as_str()) {
                match duplicate_probes
                    .iter_mut()
                    .find(|d| d.run == run && d.probe == p.name)
                {
                    Some(d) => d.times += 1,
                    None => duplicate_probes.push(DuplicateProbe {
                        probe: p.name.clone(),
                        run,
                        times: 2,
                    }),
                }
                continue;
            }
            seen.push(&p.name);
            if !probes.contains(&p.name.as_str()) {
                probes.push(&p.name);
            }
        }
    }
    (probes, duplicate_probes)
}

/// What disturbed `probe` in `fp`, when it ran ok and something did.
fn disturbed_in<'a>(fp: &'a Fingerprint, probe: &str) -> Option<&'a Disturbance> {
    fp.probe(probe)
        .filter(|p| p.status == Status::Ok)
        .and_then(|p| p.disturbed())
}

/// Every metric of `probes` in both runs, the probes measured in one run only, and those
/// measured while disturbed in one run or both.
fn metric_diffs(
    old: &Fingerprint,
    new: &Fingerprint,
    probes: &[&str],
    guests: bool,
) -> (Vec<MetricDiff>, Vec<NotMeasured>, Vec<DisturbedProbe>) {
    let mut metrics = Vec::new();
    let mut not_measured = Vec::new();
    let mut disturbed = Vec::new();
    for &probe in probes {
        let (om, nm) = (ok_metrics(old, probe), ok_metrics(new, probe));
        let (od, nd) = (disturbed_in(old, probe), disturbed_in(new, probe));
        let either_disturbed = (od.is_some() || nd.is_some()) && !om.is_empty() && !nm.is_empty();
        if either_disturbed {
            disturbed.push(DisturbedProbe {
                probe: probe.to_string(),
                old: od.cloned(),
                new: nd.cloned(),
            });
        }
        if om.is_empty() && !nm.is_empty() {
            not_measured.push(NotMeasured {
                probe: probe.to_string(),
                missing_in: Side::Old,
                reason: not_measured_reason(old, probe),
            });
        }
        if nm.is_empty() && !om.is_empty() {
            not_measured.push(NotMeasured {
                probe: probe.to_string(),
                missing_in: Side::New,
                reason: not_measured_reason(new, probe),
            });
        }
        let inherited = probe_relative_spread(om, nm);
        for o in om {
            metrics.push(match nm.iter().find(|n| n.name == o.name) {
                Some(n) => {
                    let drift = guests.then(|| guest_drift_factor(probe));
                    let d = compare_metric_on(probe, o, n, inherited, drift);
                    if either_disturbed && d.change != Change::UnitsDiffer {
                        MetricDiff {
                            change: Change::Disturbed,
                            ..d
                        }
                    } else {
                        d
                    }
                }
                None => one_sided(probe, o, Change::NotMeasuredNew),
            });
        }
        for n in nm.iter().filter(|n| !om.iter().any(|o| o.name == n.name)) {
            metrics.push(one_sided(probe, n, Change::NotMeasuredOld));
        }
    }
    (metrics, not_measured, disturbed)
}

/// The hazards whose verdict differs between the runs, and the ids of those judged alike.
fn hazard_changes(
    old: &Fingerprint,
    new: &Fingerprint,
    ov: &[Verdict],
    nv: &[Verdict],
    metrics: &[MetricDiff],
) -> (Vec<HazardChange>, Vec<String>) {
    let mut ids: Vec<&str> = ov.iter().map(|v| v.hazard.as_str()).collect();
    for v in nv {
        if !ids.contains(&v.hazard.as_str()) {
            ids.push(&v.hazard);
        }
    }
    let mut hazard_changes = Vec::new();
    let mut hazards_unchanged = Vec::new();
    for id in ids {
        let o = ov.iter().find(|v| v.hazard == id);
        let n = nv.iter().find(|v| v.hazard == id);
        let direction = match (o, n) {
            (Some(o), Some(n)) if o.level == n.level => {
                hazards_unchanged.push(id.to_string());
                continue;
            }
            (Some(ov), Some(nv)) => verdict_move(id, (old, ov), (new, nv), metrics),
            _ => VerdictMove::NotJudged,
        };
        // The run that judged it worse (by level, whatever the cause).
        let worse_side = match (o, n) {
            (Some(o), Some(n)) if o.level > n.level => Some(o),
            _ => n.or(o),
        };
        let any = n.or(o).expect("the id came from one of the two lists");
        hazard_changes.push(HazardChange {
            hazard: id.to_string(),
            title: any.title.clone(),
            old: o.map(judged),
            new: n.map(judged),
            direction,
            hurts: hazards::by_id(id)
                .map(|h| h.hurts().iter().map(|s| s.to_string()).collect())
                .unwrap_or_default(),
            explanation: worse_side
                .map(|v| v.explanation.clone())
                .unwrap_or_default(),
        });
    }
    (hazard_changes, hazards_unchanged)
}

/// The summary counts over `metrics`.
fn counts(metrics: &[MetricDiff]) -> DiffCounts {
    let mut counts = DiffCounts::default();
    for m in metrics {
        match m.change {
            Change::Worse => counts.worse += 1,
            Change::Better => counts.better += 1,
            Change::Changed => counts.changed += 1,
            Change::Same => counts.same += 1,
            Change::HostDrift => counts.host_drift += 1,
            Change::Disturbed => {
                counts.disturbed += 1;
                counts.not_compared += 1;
            }
            _ => counts.not_compared += 1,
        }
    }
    counts
}

/// For every hazard whose figures moved beyond noise, its verdict and cost on both sides.
fn hazard_costs(ov: &[Verdict], nv: &[Verdict], metrics: &[MetricDiff]) -> Vec<HazardCost> {
    let mut out = Vec::new();
    for rule in hazards::all() {
        let reads = rule.reads();
        let moved: Vec<String> = metrics
            .iter()
            .filter(|m| matches!(m.change, Change::Worse | Change::Better | Change::Changed))
            .filter(|m| {
                reads
                    .iter()
                    .any(|id| id.probe == m.probe && id.metric == m.metric)
            })
            .map(|m| m.metric.clone())
            .collect();
        if moved.is_empty() {
            continue;
        }
        let o = ov.iter().find(|v| v.hazard == rule.id());
        let n = nv.iter().find(|v| v.hazard == rule.id());
        let Some(any) = n.or(o) else { continue };
        out.push(HazardCost {
            hazard: rule.id().to_string(),
            title: any.title.clone(),
            moved,
            old: o.map(judged),
            new: n.map(judged),
            old_cost: o.map(words::compare::summary_of),
            new_cost: n.map(words::compare::summary_of),
        });
    }
    out
}

/// Which way a verdict judged in both runs moved. Worse or better only when a metric the
/// hazard reads moved beyond both runs' spread (the rule of [`compare_metric_in_probe`]); when none
/// did, the change counts only if the figures' noise does not explain it: the new run is
/// judged again with the old run's figures in place of those within noise, and if that gives
/// the old verdict, the figures merely crossed a threshold within noise. A rule that reads no
/// metric (a verdict from machine facts), an unknown hazard, or a change that persists with
/// the old figures (a machine fact changed, say) keeps the level's direction.
fn verdict_move(
    id: &str,
    (old_fp, old_v): (&Fingerprint, &Verdict),
    (new_fp, new_v): (&Fingerprint, &Verdict),
    metrics: &[MetricDiff],
) -> VerdictMove {
    let by_level = if new_v.level > old_v.level {
        VerdictMove::Worse
    } else {
        VerdictMove::Better
    };
    let Some(rule) = hazards::by_id(id) else {
        return by_level;
    };
    let reads = rule.reads();
    let read: Vec<&MetricDiff> = metrics
        .iter()
        .filter(|m| {
            reads
                .iter()
                .any(|id| id.probe == m.probe && id.metric == m.metric)
        })
        .collect();
    if read.iter().any(|m| m.change == Change::Disturbed) {
        return VerdictMove::Disturbed;
    }
    if read
        .iter()
        .any(|m| matches!(m.change, Change::Worse | Change::Better | Change::Changed))
    {
        return by_level;
    }
    let mut with_old_figures = new_fp.clone();
    let mut replaced = false;
    for m in read
        .iter()
        .filter(|m| matches!(m.change, Change::Same | Change::HostDrift))
    {
        let target = with_old_figures
            .probes
            .iter_mut()
            .find(|p| p.name == m.probe)
            .filter(|p| p.status == Status::Ok)
            .and_then(|p| p.metrics.iter_mut().find(|x| x.name == m.metric));
        if let (Some(target), Some(src)) = (target, old_fp.metric(&m.probe, &m.metric)) {
            *target = src.clone();
            replaced = true;
        }
    }
    let explained_by_noise = replaced
        && rule
            .judge(&with_old_figures)
            .is_some_and(|v| v.level == old_v.level);
    if explained_by_noise {
        VerdictMove::WithinNoise
    } else {
        by_level
    }
}

fn judged(v: &Verdict) -> Judged {
    Judged {
        level: v.level,
        figure: v.figure.clone(),
    }
}

fn one_sided(probe: &str, m: &Metric, change: Change) -> MetricDiff {
    let s = Some(side(m));
    MetricDiff {
        probe: probe.to_string(),
        metric: m.name.clone(),
        unit: m.unit.clone(),
        better: m.better,
        old: if change == Change::NotMeasuredOld {
            None
        } else {
            s.clone()
        },
        new: if change == Change::NotMeasuredNew {
            None
        } else {
            s
        },
        ratio: None,
        threshold: None,
        rule: None,
        change,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::schema::test_support::sample_fingerprint;
    use crate::schema::{ProbeResult, Series};

    fn compare_metric(probe: &str, old: &Metric, new: &Metric) -> MetricDiff {
        compare_metric_in_probe(probe, old, new, 0.0)
    }

    fn metric(name: &str, better: Better, samples: &[f64]) -> Metric {
        Metric::from_samples(name, "ns", better, samples).unwrap()
    }

    #[test]
    fn a_move_within_either_runs_spread_is_not_a_change() {
        // Old median 25, MAD-scaled ~1.5; new median 27: inside 2 x spread.
        let old = metric("x_ns", Better::Lower, &[23.0, 24.0, 25.0, 26.0, 27.0]);
        let new = metric("x_ns", Better::Lower, &[26.5, 27.0, 27.0, 27.0, 27.5]);
        assert_eq!(compare_metric("p", &old, &new).change, Change::Same);
        // The same move with the noisy run on the other side is still not a change.
        assert_eq!(compare_metric("p", &new, &old).change, Change::Same);
    }

    #[test]
    fn direction_decides_worse_or_better() {
        let lo = metric("x", Better::Lower, &[10.0, 10.1, 9.9]);
        let hi = metric("x", Better::Lower, &[20.0, 20.1, 19.9]);
        assert_eq!(compare_metric("p", &lo, &hi).change, Change::Worse);
        assert_eq!(compare_metric("p", &hi, &lo).change, Change::Better);
        let (mut lo_h, mut hi_h) = (lo.clone(), hi.clone());
        lo_h.better = Better::Higher;
        hi_h.better = Better::Higher;
        assert_eq!(compare_metric("p", &lo_h, &hi_h).change, Change::Better);
        let (mut lo_n, mut hi_n) = (lo, hi);
        lo_n.better = Better::Neither;
        hi_n.better = Better::Neither;
        assert_eq!(compare_metric("p", &lo_n, &hi_n).change, Change::Changed);
    }

    #[test]
    fn with_intervals_a_change_needs_separate_intervals_and_ten_percent() {
        // Known distributions: 11 samples each. Shifted by 30% with no overlap: worse.
        let base: Vec<f64> = (0..11).map(|i| 100.0 + i as f64).collect();
        let far: Vec<f64> = base.iter().map(|x| x * 1.3).collect();
        let d = compare_metric(
            "p",
            &metric("c", Better::Lower, &base),
            &metric("c", Better::Lower, &far),
        );
        assert_eq!(
            (d.change, d.rule),
            (Change::Worse, Some(ChangeRule::Interval))
        );
        // Medians 15% apart but one run spread so wide its interval reaches the other: the
        // same, however far the medians.
        let wide: Vec<f64> = (0..11).map(|i| 60.0 + 12.0 * i as f64).collect();
        let d = compare_metric(
            "p",
            &metric("c", Better::Lower, &base),
            &metric("c", Better::Lower, &wide),
        );
        assert_eq!(d.change, Change::Same, "{d:?}");
        // Separate but closer than 10%: not a change a hazard would notice.
        let near: Vec<f64> = base.iter().map(|x| x + 9.0).collect();
        assert_eq!(
            compare_metric(
                "p",
                &metric("c", Better::Lower, &base),
                &metric("c", Better::Lower, &near)
            )
            .change,
            Change::Same
        );
    }

    #[test]
    fn zero_spread_still_needs_five_percent() {
        // Files from builds without intervals. Quantised timings: MAD 0 in both runs, a 3%
        // move is noise, a 7% move is not.
        let old_file = |samples: &[f64]| Metric {
            interval: None,
            ..metric("c", Better::Lower, samples)
        };
        let a = old_file(&[90.0, 90.0, 90.0]);
        let b = old_file(&[92.7, 92.7, 92.7]);
        let c = old_file(&[96.3, 96.3, 96.3]);
        assert_eq!(compare_metric("p", &a, &b).change, Change::Same);
        assert_eq!(compare_metric("p", &a, &c).change, Change::Worse);
    }

    #[test]
    fn derived_metrics_need_ten_percent() {
        let a = Metric::derived("r", 1.0, "ratio", Better::Lower);
        let b = Metric::derived("r", 1.08, "ratio", Better::Lower);
        let c = Metric::derived("r", 1.12, "ratio", Better::Lower);
        let d = compare_metric("p", &a, &b);
        assert_eq!(
            (d.change, d.rule),
            (Change::Same, Some(ChangeRule::Relative))
        );
        assert_eq!(compare_metric("p", &a, &c).change, Change::Worse);
    }

    #[test]
    fn different_units_are_not_compared() {
        let a = Metric::derived("r", 1.0, "ns", Better::Lower);
        let b = Metric::derived("r", 100.0, "cycles", Better::Lower);
        assert_eq!(compare_metric("p", &a, &b).change, Change::UnitsDiffer);
    }

    #[test]
    fn a_probe_missing_on_one_side_is_not_measured_never_a_regression() {
        // Regression guard: a probe the old file lacks must not read as worse or better.
        let old = sample_fingerprint();
        let mut new = sample_fingerprint();
        let mut extra = ProbeResult::new("bandwidth", Status::Ok);
        extra.metrics.push(Metric::derived(
            "read_bandwidth_gbps",
            20.0,
            "GB/s",
            Better::Higher,
        ));
        extra.series.push(Series::Bars {
            name: "b".into(),
            unit: "GB/s".into(),
            labels: vec![],
            values: vec![],
        });
        new.probes.push(extra);
        let d = diff(&old, &new, "a", "b");
        let m = d
            .metrics
            .iter()
            .find(|m| m.metric == "read_bandwidth_gbps")
            .unwrap();
        assert_eq!(m.change, Change::NotMeasuredOld);
        assert_eq!(d.counts.worse + d.counts.better, 0);
        assert_eq!(d.not_measured.len(), 1);
        assert_eq!(d.not_measured[0].reason, "not in this file");
        // c2c is skipped in both: nothing to say about it.
        assert!(d.not_measured.iter().all(|n| n.probe != "c2c"));
    }

    #[test]
    fn skipped_probe_reason_is_given() {
        let old = sample_fingerprint();
        let mut new = sample_fingerprint();
        new.probes[0].status = Status::Skipped;
        new.probes[0].reason = Some("no invariant TSC".into());
        new.probes[0].metrics.clear();
        new.verdicts.clear();
        let d = diff(&old, &new, "a", "b");
        assert_eq!(d.not_measured[0].reason, "skipped: no invariant TSC");
        assert!(d.metrics.iter().all(|m| m.change == Change::NotMeasuredNew));
        // The PAUSE verdict is judged in the old run only: listed, not as a regression.
        let h = &d.hazards[0];
        assert_eq!(h.direction, VerdictMove::NotJudged);
    }

    #[test]
    fn machine_facts_that_differ_come_first() {
        let old = sample_fingerprint();
        let mut new = sample_fingerprint();
        new.machine.kernel_release = Some("6.1.0".into());
        new.machine.hypervisor = None;
        let d = diff(&old, &new, "a", "b");
        let firsts: Vec<&str> = d.machine[..2].iter().map(|f| f.fact.as_str()).collect();
        assert_eq!(firsts, ["Kernel", "Hypervisor"]);
        assert!(d.machine[2..].iter().all(|f| !f.differs));
        assert_eq!(d.machine[1].new, "none (bare metal)");
    }

    #[test]
    fn identical_runs_change_nothing() {
        let fp = sample_fingerprint();
        let d = diff(&fp, &fp, "a", "a");
        assert!(d.hazards.is_empty());
        assert_eq!(d.counts.worse + d.counts.better + d.counts.changed, 0);
    }

    #[test]
    fn the_change_rule_reads_the_same_old_to_new_and_new_to_old() {
        // Regression guard: the floor was taken of the old figure, so 100 -> 105.2 counted and
        // 105.2 -> 100 did not. With intervals the floor is 10% of the smaller figure.
        let a = metric("c", Better::Lower, &[100.0, 100.0, 100.0]);
        let b = metric("c", Better::Lower, &[110.2, 110.2, 110.2]);
        assert_eq!(compare_metric("p", &a, &b).change, Change::Worse);
        assert_eq!(compare_metric("p", &b, &a).change, Change::Better);
        let c = metric("c", Better::Lower, &[109.8, 109.8, 109.8]);
        assert_eq!(compare_metric("p", &a, &c).change, Change::Same);
        assert_eq!(compare_metric("p", &c, &a).change, Change::Same);
    }

    #[test]
    fn a_derived_figure_at_zero_in_one_run_has_changed_and_two_zeros_have_not() {
        let zero = Metric::derived("r", 0.0, "ratio", Better::Neither);
        let some = Metric::derived("r", 0.5, "ratio", Better::Neither);
        let d = compare_metric("p", &zero, &some);
        assert_eq!((d.change, d.ratio), (Change::Changed, None));
        assert_eq!(compare_metric("p", &some, &zero).change, Change::Changed);
        assert_eq!(compare_metric("p", &zero, &zero).change, Change::Same);
    }

    /// The sample fingerprint with PAUSE at `cycles` (and the ns figure scaled with it).
    pub(crate) fn pause_at(cycles: f64) -> Fingerprint {
        let mut fp = sample_fingerprint();
        // 24.5 ns at 90 cycles: a 3.67 GHz core.
        let ns = cycles * 24.5 / 90.0;
        fp.probes[0].metrics = vec![
            Metric::from_samples("pause_ns", "ns", Better::Lower, &[ns, ns, ns]).unwrap(),
            Metric::from_samples("pause_cycles", "cycles", Better::Lower, &[cycles; 3]).unwrap(),
        ];
        judged(fp)
    }

    /// `fp` judged by this build's hazards, as `session::judge` gives `diff` its inputs.
    fn judged(mut fp: Fingerprint) -> Fingerprint {
        fp.verdicts.clear();
        crate::hazards::judge_into(&mut fp);
        fp
    }

    #[test]
    fn a_figure_near_its_threshold_reads_the_same_verdict_on_both_runs() {
        // Regression guard: 118 -> 121 cycles (2.5%, within noise) crosses the 120-cycle
        // hazard line; diff said "notice -> HAZARD, now hurts more". Both are now borderline.
        let d = diff(&pause_at(118.0), &pause_at(121.0), "a", "b");
        assert_eq!(d.counts.worse, 0);
        assert!(d.hazards.is_empty(), "{:?}", d.hazards);
        // A real move across the same line is still a regression.
        let d = diff(&pause_at(90.0), &pause_at(140.0), "a", "b");
        assert_eq!(d.hazards[0].direction, VerdictMove::Worse);
    }

    #[test]
    fn a_run_measured_under_a_throttling_quota_is_not_compared() {
        // Issue 29: 90 -> 140 cycles is a regression between quiet runs (above); with the new
        // run's pause probe throttled by its CPU quota, nothing is worse and the verdict's move
        // is not a regression either.
        use crate::schema::disturbance::Disturbance;
        let mut throttled = pause_at(140.0);
        throttled.probes[0].disturbance = Some(crate::schema::test_support::throttled_by_quota());
        for (old, new) in [
            (pause_at(90.0), throttled.clone()),
            (throttled, pause_at(90.0)),
        ] {
            let d = diff(&old, &new, "a", "b");
            assert_eq!((d.counts.worse, d.counts.better), (0, 0), "{:?}", d.counts);
            assert_eq!(d.counts.disturbed, 2);
            assert!(d.metrics.iter().all(|m| m.change == Change::Disturbed));
            assert_eq!(d.hazards[0].direction, VerdictMove::Disturbed);
            assert_eq!(d.disturbed.len(), 1);
            assert!(
                d.costs.is_empty(),
                "no cost quoted for a figure not compared"
            );
        }
        // A record that crossed no line (quiet) changes nothing.
        let mut quiet = pause_at(140.0);
        quiet.probes[0].disturbance = Some(Disturbance {
            by: vec![],
            cpu_quota_cpus: Some(0.5),
            throttled_periods: Some(0),
            ..Disturbance {
                by: vec![],
                unresolved: Vec::new(),
                wall_s: 1.0,
                cpus: vec![0],
                cpu_quota_cpus: None,
                periods: Some(10),
                throttled_periods: None,
                throttled_s: None,
                steal_ratio: Some(0.0),
                others_busy_cpus: Some(0.01),
                run_queue_wait_ratio: Some(0.0),
            }
        });
        let d = diff(&pause_at(90.0), &quiet, "a", "b");
        assert_eq!(d.hazards[0].direction, VerdictMove::Worse);
        assert!(d.disturbed.is_empty());
    }

    #[test]
    fn on_two_guests_a_move_within_the_hosts_drift_is_shown_not_counted() {
        // The Zen 3 guest's PAUSE moved 24.1 -> 27.4 ns when a host sibling got busy; here a
        // wider move, 100 -> 140 cycles (1.4x), that also crosses the hazard line.
        let d = diff(&pause_at(100.0), &pause_at(140.0), "a", "b");
        let cycles = d
            .metrics
            .iter()
            .find(|m| m.metric == "pause_cycles")
            .unwrap();
        assert_eq!(cycles.change, Change::HostDrift);
        assert_eq!((d.counts.worse, d.counts.host_drift), (0, 2));
        assert_eq!(d.hazards[0].direction, VerdictMove::WithinNoise);
        // The same move on bare metal is a regression.
        let (mut old, mut new) = (pause_at(100.0), pause_at(140.0));
        old.machine.hypervisor = None;
        new.machine.hypervisor = None;
        let d = diff(&old, &new, "a", "b");
        assert_eq!(d.counts.host_drift, 0);
        assert_eq!(d.hazards[0].direction, VerdictMove::Worse);
        // Beyond the host's drift, a guest's move counts.
        let d = diff(&pause_at(60.0), &pause_at(140.0), "a", "b");
        assert_eq!(d.hazards[0].direction, VerdictMove::Worse);
    }

    #[test]
    fn a_verdict_changed_by_a_machine_fact_counts_even_with_figures_within_noise() {
        // split_lock reads the kernel's handling as well as its figures: the same figures
        // under a kernel that kills split-locking programs are a real change.
        let with_split_lock = || {
            let mut fp = sample_fingerprint();
            let mut p = ProbeResult::new("split-lock", Status::Ok);
            p.metrics.push(metric(
                "split_lock_latency_ns",
                Better::Lower,
                &[500.0, 500.0, 500.0],
            ));
            p.metrics.push(metric(
                "aligned_lock_latency_ns",
                Better::Lower,
                &[100.0, 100.0, 100.0],
            ));
            fp.probes.push(p);
            fp.verdicts.clear();
            fp
        };
        let old = with_split_lock();
        let mut new = with_split_lock();
        new.machine.split_lock.effective = crate::machine::SplitLockMode::Fatal;
        let d = diff(&judged(old), &judged(new), "a", "b");
        let h = d.hazards.iter().find(|h| h.hazard == "split_lock").unwrap();
        assert_eq!(h.direction, VerdictMove::Worse);
    }

    #[test]
    fn a_probe_listed_twice_is_compared_once_and_named() {
        // Regression guard: a file listing a probe twice showed its metrics twice.
        let old = sample_fingerprint();
        let mut new = sample_fingerprint();
        let mut again = new.probes[0].clone();
        again.metrics[0].value = 999.0;
        new.probes.push(again.clone());
        new.probes.push(again);
        let d = diff(&old, &new, "a", "b");
        let pause_ns: Vec<_> = d
            .metrics
            .iter()
            .filter(|m| m.metric == "pause_ns")
            .collect();
        assert_eq!(pause_ns.len(), 1);
        assert_eq!(pause_ns[0].change, Change::Same);
        assert_eq!(
            d.duplicate_probes,
            [DuplicateProbe {
                probe: "pause".into(),
                run: Side::New,
                times: 3
            }]
        );
    }

    #[test]
    fn a_derived_ratio_of_noisy_figures_needs_to_move_beyond_their_noise() {
        // Regression guard: check vs full probe of one machine, taken minutes apart, called
        // false_sharing_ratio 3.03 -> 2.73 "better" (and the verdict "hurts less") while the
        // counters it divides had spreads of 40%: a flat 10% bar for derived figures.
        let noisy = |v: f64| metric("packed_increment_ns", Better::Lower, &[v * 0.6, v, v * 1.4]);
        let ratio = |v: f64| Metric::derived("false_sharing_ratio", v, "ratio", Better::Lower);
        let (om, nm) = (vec![noisy(1.2), ratio(3.03)], vec![noisy(1.0), ratio(2.73)]);
        let r = probe_relative_spread(&om, &nm);
        assert!(r > 0.3, "{r}");
        let d = compare_metric_in_probe("sharing", &om[1], &nm[1], r);
        assert_eq!(d.change, Change::Same);
        assert_eq!(d.rule, Some(ChangeRule::ProbeSpread));
        // Quiet siblings leave the 10% bar as it was.
        let quiet = |v: f64| metric("padded_increment_ns", Better::Lower, &[v, v, v * 1.001]);
        let r = probe_relative_spread(&[quiet(1.0)], &[quiet(1.0)]);
        let d = compare_metric_in_probe("sharing", &ratio(3.03), &ratio(2.73), r);
        assert_eq!(
            (d.change, d.rule),
            (Change::Better, Some(ChangeRule::Relative))
        );
    }
}
