//! The knowledge base: for each hazard, the metrics it reads, thresholds with their sources,
//! and the level they reach. Pure functions from a fingerprint to verdicts; nothing here
//! measures or prints. A hazard judges the level and gathers the figures into its facts; every
//! sentence of the verdict (summary, figure, reference, explanation, what it hurts, why it has
//! none) comes from [`crate::words::verdicts`].
//!
//! Adding a hazard: write a module with a type implementing [`Hazard`] and list it in [`all`];
//! its words go in `src/words/verdicts/NAME.rs`.

pub mod cross_core;
pub mod false_sharing;
pub mod huge_pages;
pub mod pause;
pub mod prefetch;
pub mod split_lock;
pub mod tlb;

use crate::machine::Machine;
use crate::schema::figures::{FigureId, Figures, RawRecord};
use crate::schema::{Fingerprint, Interval, Level, NotJudged, Status, Verdict};
use crate::words::verdicts::{self as words, ProbeGap};

/// The level a figure reaches against ascending `steps` of (threshold, level), starting from
/// `base` below the first.
pub fn level_at(x: f64, base: Level, steps: &[(f64, Level)]) -> Level {
    steps
        .iter()
        .rev()
        .find(|(t, _)| x >= *t)
        .map_or(base, |(_, l)| *l)
}

/// How close to a threshold a figure may come before its verdict is called borderline, on
/// bare metal: its interval (or the figure alone) is widened by this fraction at both ends. A
/// guard band in the sense of JCGM 106:2012 ("The role of measurement uncertainty in
/// conformity assessment", s8): the interval of one short run understates the drift between
/// runs minutes apart, so without the band a figure just past a threshold would be judged on
/// one side in one run and borderline in the next. 10% is also the smallest change `diff`
/// counts, so a verdict and a diff agree on what "near the line" is.
pub const THRESHOLD_GUARD: f64 = 0.10;

/// The guard band on a VM guest, where the host moves figures between runs by more than a
/// run's interval shows: on the 2-vCPU Zen 3 guest (`bench/stability.sh 5 3`, 2026-11-24)
/// five checks read the 4 KiB page penalty 1.66-1.94x (1.17x apart), the prefetch gain
/// 0.90-1.00x and the PAUSE 24.1-27.4 ns (1.14x, host sibling busy); 25% covers those with a
/// margin. `diff`'s wider host drift (1.5x) is for absolute memory figures, which no verdict
/// reads alone.
pub const GUEST_THRESHOLD_GUARD: f64 = 0.25;

/// The guard band for a fingerprint: [`GUEST_THRESHOLD_GUARD`] under a hypervisor, else
/// [`THRESHOLD_GUARD`].
pub fn threshold_guard(machine: &Machine) -> f64 {
    if machine.hypervisor.is_some() {
        GUEST_THRESHOLD_GUARD
    } else {
        THRESHOLD_GUARD
    }
}

/// [`level_with_interval`] with the guard band of the machine that measured the figure.
pub fn level_near_thresholds(
    fp: &Inputs<'_>,
    value: f64,
    interval: Option<&Interval>,
    base: Level,
    steps: &[(f64, Level)],
) -> (Level, Option<Level>) {
    level_with_interval(value, interval, base, steps, threshold_guard(fp.machine))
}

/// A verdict level with confidence: when the figure's interval, widened by `guard` (a
/// fraction, see [`THRESHOLD_GUARD`]), lies between two steps the level is the one both ends
/// reach; when it spans a threshold, the level is the lower one (what the figure surely
/// reaches) and the higher is returned as borderline, so a figure near a threshold is judged
/// the same on every run; when it spans two thresholds, the verdict is borderline across the
/// one nearest the figure. Without an interval the figure alone, widened the same way, decides.
pub fn level_with_interval(
    value: f64,
    interval: Option<&Interval>,
    base: Level,
    steps: &[(f64, Level)],
    guard: f64,
) -> (Level, Option<Level>) {
    let (low, high) = interval.map_or((value, value), |i| (i.low, i.high));
    let widen = |x: f64, up: bool| {
        let factor = 1.0 + guard;
        if (x >= 0.0) == up {
            x * factor
        } else {
            x / factor
        }
    };
    let (wlow, whigh) = (widen(low, false), widen(high, true));
    let (lo, hi) = (level_at(wlow, base, steps), level_at(whigh, base, steps));
    if lo == hi {
        return (lo, None);
    }
    // A band that spans two thresholds would read `ok/HAZARD`, and its lower end moves with
    // every run's widest sample: name the line the figure itself is nearest instead (the 4 KiB
    // penalty on the Zen 3 guest, 1.4-1.9x against lines at 1.2x and 1.5x, read `ok/hazard`
    // in four checks and `notice/hazard` in the fifth).
    let nearest = steps
        .iter()
        .enumerate()
        .filter(|(_, (t, _))| *t >= wlow && *t <= whigh)
        .min_by(|(_, (a, _)), (_, (b, _))| {
            let d = |t: f64| ((value - t) / t).abs();
            d(*a).total_cmp(&d(*b))
        });
    match nearest {
        Some((k, (_, upper))) => {
            let lower = if k == 0 { base } else { steps[k - 1].1 };
            (lower, Some(*upper))
        }
        None => (lo, Some(hi)),
    }
}

/// A fingerprint as a hazard sees it: the machine's facts, what took effect in each probe, and
/// only the metrics the hazard declares in [`Hazard::reads`] and [`Hazard::quotes`]. `diff` decides from `reads()`
/// whether a verdict's change is real, so a figure a verdict depends on but `reads()` omits
/// would make it call a real change noise: reading an undeclared metric fails every debug
/// build and test that reaches it.
pub struct Inputs<'a> {
    /// The machine the fingerprint describes.
    pub machine: &'a Machine,
    fp: &'a Fingerprint,
    reads: &'static [FigureId],
    quotes: &'static [FigureId],
}

impl<'a> Inputs<'a> {
    /// What `hazard` may see of `fp`.
    pub fn new(fp: &'a Fingerprint, hazard: &(impl Hazard + ?Sized)) -> Inputs<'a> {
        Inputs {
            machine: &fp.machine,
            fp,
            reads: hazard.reads(),
            quotes: hazard.quotes(),
        }
    }

    /// The figures of `F`'s probe that ran ok, holding only those the hazard declares in
    /// [`Hazard::reads`] and [`Hazard::quotes`]: an undeclared figure reads as absent, so a
    /// verdict that depends on one never appears and its tests fail.
    pub fn figures<F: Figures>(&self) -> Option<F> {
        let p = self.fp.probe(F::PROBE).filter(|p| p.status == Status::Ok)?;
        let declared: Vec<crate::schema::Metric> = p
            .metrics
            .iter()
            .filter(|m| {
                self.reads
                    .iter()
                    .chain(self.quotes)
                    .any(|id| id.probe == F::PROBE && id.metric == m.name)
            })
            .cloned()
            .collect();
        Some(F::from_metrics(&declared))
    }

    /// The raw record of `probe` (how it ran, what took effect, its samples), when it ran
    /// ok and its record reads as `R`.
    pub fn raw<R: RawRecord>(&self, probe: &str) -> Option<R> {
        self.fp.raw(probe)
    }
}

/// One hazard rule.
pub trait Hazard: Sync {
    /// Stable identifier, as in the fingerprint (`slow_pause`).
    fn id(&self) -> &'static str;
    /// Short human title, as verdicts and "not judged" lines show it (`PAUSE latency`).
    fn title(&self) -> &'static str;
    /// The software patterns this hazard hurts, in plain words (`diff` names them when the
    /// verdict changes between machines).
    fn hurts(&self) -> &'static [&'static str];
    /// The metrics the verdict's level depends on, as (probe, metric). `diff` counts a change
    /// of verdict between two runs as real only when one of them moved beyond both runs'
    /// spread; otherwise the figure merely crossed a threshold within noise.
    fn reads(&self) -> &'static [FigureId];
    /// Metrics the verdict only quotes (in its figure or explanation) and whose change never
    /// moves its level. With [`Hazard::reads`], the only metrics [`Inputs`] serves it.
    fn quotes(&self) -> &'static [FigureId] {
        &[]
    }
    /// The probes whose results the verdict needs (`cpudoctor explain` runs these): by
    /// default those of [`Hazard::reads`].
    fn probes(&self) -> Vec<&'static str> {
        let mut names: Vec<&'static str> = self.reads().iter().map(|id| id.probe).collect();
        names.dedup();
        names
    }
    /// The verdict from what the hazard may read; `None` when the metrics it needs are absent
    /// (probe skipped or not run), so no verdict is invented. Callers use [`Hazard::judge`].
    fn verdict(&self, fp: &Inputs<'_>) -> Option<Verdict>;

    /// Judges the fingerprint through the inputs [`Hazard::reads`] declares.
    fn judge(&self, fp: &Fingerprint) -> Option<Verdict> {
        self.verdict(&Inputs::new(fp, self))
    }

    /// Why there is no verdict when every probe ran ok and every figure it reads is there
    /// (a fact it needs was not tried in this run).
    fn unjudged_reason(&self, _fp: &Inputs<'_>) -> String {
        words::FIGURES_DO_NOT_SUPPORT_A_VERDICT.into()
    }

    /// Why this hazard has no verdict on `fp`, for a fingerprint where [`Hazard::judge`]
    /// gave none; `None` when none of its probes was run at all (a `probe pause` file says
    /// nothing about split locks, and that is no gap).
    fn not_judged(&self, fp: &Fingerprint) -> Option<NotJudged> {
        let probes = self.probes();
        if !probes.iter().any(|p| fp.probe(p).is_some()) {
            return None;
        }
        Some(NotJudged {
            hazard: self.id().into(),
            title: self.title().into(),
            why: why_not_judged(fp, &probes, self.reads())
                .unwrap_or_else(|| self.unjudged_reason(&Inputs::new(fp, self))),
            measure_with: words::measure_with(self.id()),
        })
    }
}

/// The first reason, in the order a reader would look, that `probes` give no verdict: a
/// probe that did not run or did not run ok, then a figure the probe says it could not
/// measure (`not_measured`), then a figure simply absent; `None` when none of those holds.
fn why_not_judged(fp: &Fingerprint, probes: &[&str], reads: &[FigureId]) -> Option<String> {
    for name in probes {
        let gap = match fp.probe(name) {
            None => Some((ProbeGap::NotRun, None)),
            Some(p) if p.status == Status::Skipped => {
                Some((ProbeGap::Skipped, p.reason.as_deref()))
            }
            Some(p) if p.status != Status::Ok => Some((ProbeGap::Failed, p.reason.as_deref())),
            Some(_) => None,
        };
        if let Some((gap, reason)) = gap {
            return Some(words::probe_gap(name, gap, reason));
        }
    }
    for id in reads {
        if let Some(why) = fp
            .probe(id.probe)
            .and_then(|p| p.not_measured.get(id.metric))
        {
            return Some(why.clone());
        }
    }
    let missing: Vec<&str> = reads
        .iter()
        .filter(|id| fp.figure(**id).is_none())
        .map(|id| id.metric)
        .collect();
    (!missing.is_empty()).then(|| words::figures_missing(&missing))
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

/// The hazards' step of the one judge (`session::judge`, which first analyses every probe's
/// saved record again): each hazard this build knows judged once on `fp`, in rule order. A
/// hazard today's rule cannot judge keeps the verdict `fp` saved for it, as does one this
/// build does not know (both after the others), so files written by different versions
/// compare on today's rules where today's rules can judge them; the hazards whose probes ran
/// but which have no verdict go to `not_judged`, with why.
pub(crate) fn judge_into(fp: &mut Fingerprint) {
    let mut verdicts = Vec::new();
    let mut not_judged = Vec::new();
    for h in all() {
        match h
            .judge(fp)
            .or_else(|| fp.verdicts.iter().find(|v| v.hazard == h.id()).cloned())
        {
            Some(v) => verdicts.push(v),
            None => not_judged.extend(h.not_judged(fp)),
        }
    }
    for v in &fp.verdicts {
        if !verdicts.iter().any(|o| o.hazard == v.hazard) {
            verdicts.push(v.clone());
        }
    }
    fp.verdicts = verdicts;
    fp.not_judged = not_judged;
}

#[cfg(test)]
mod tests {
    use crate::schema::{Better, Metric, ProbeResult, Status};

    use crate::schema::probes::pause::PauseFigures;

    /// A rule that reads a figure it never declared: the drift `reads()` had by hand.
    struct Undeclared;
    impl Hazard for Undeclared {
        fn id(&self) -> &'static str {
            "undeclared"
        }
        fn title(&self) -> &'static str {
            "Undeclared"
        }
        fn hurts(&self) -> &'static [&'static str] {
            &[]
        }
        fn reads(&self) -> &'static [FigureId] {
            &[PauseFigures::PAUSE_NS]
        }
        fn verdict(&self, fp: &Inputs<'_>) -> Option<Verdict> {
            let f = fp.figures::<PauseFigures>()?;
            f.pause_ns?;
            f.pause_cycles?;
            Some(Verdict {
                hazard: self.id().into(),
                title: self.title().into(),
                level: Level::Ok,
                summary: String::new(),
                figure: String::new(),
                reference: String::new(),
                explanation: String::new(),
                borderline: None,
            })
        }
    }

    #[test]
    fn a_hazard_that_reads_an_undeclared_figure_finds_it_absent_and_gives_no_verdict() {
        let mut fp = crate::schema::test_support::empty_fingerprint();
        let mut p = ProbeResult::new("pause", Status::Ok);
        for name in ["pause_ns", "pause_cycles"] {
            p.metrics
                .push(Metric::derived(name, 1.0, "ns", Better::Lower));
        }
        fp.probes.push(p);
        // Both figures are in the file; only the declared one reaches the rule.
        assert!(fp.figures::<PauseFigures>().unwrap().pause_cycles.is_some());
        assert!(Undeclared.judge(&fp).is_none());
    }

    use super::*;

    #[test]
    fn a_hazard_whose_figure_was_not_measured_is_not_judged_with_the_probes_reason() {
        // The Emerald Rapids guest: no size of the sweep reached DRAM, and the 4 KiB page
        // penalty vanished from the screen without a word.
        let mut fp = crate::schema::test_support::empty_fingerprint();
        let mut p = ProbeResult::new("mem-latency", Status::Ok);
        p.not_measured.insert(
            "tlb_penalty_ratio".into(),
            "no size of the latency sweep reached DRAM".into(),
        );
        fp.probes.push(p);
        judge_into(&mut fp);
        let n = fp
            .not_judged
            .iter()
            .find(|n| n.hazard == "small_page_penalty")
            .expect("listed as not judged");
        assert_eq!(n.why, "no size of the latency sweep reached DRAM");
        assert_eq!(n.measure_with, "cpudoctor explain small_page_penalty");
        assert!(!fp.verdicts.iter().any(|v| v.hazard == n.hazard));
    }

    #[test]
    fn verdicts_are_judged_again_with_todays_rules() {
        // A stale stored verdict (written by an older rule) is replaced; a hazard this build
        // does not know is kept as stored.
        let mut fp = crate::schema::test_support::sample_fingerprint();
        fp.verdicts[0].level = Level::Ok;
        fp.verdicts.push(Verdict {
            hazard: "from_the_future".into(),
            title: "t".into(),
            level: Level::Hazard,
            summary: String::new(),
            figure: "f".into(),
            reference: "r".into(),
            explanation: "e".into(),
            borderline: None,
        });
        let level_of = |v: &[Verdict], id: &str| v.iter().find(|x| x.hazard == id).map(|x| x.level);
        let mut judged = fp.clone();
        judge_into(&mut judged);
        let v = judged.verdicts;
        assert_eq!(level_of(&v, "slow_pause"), Some(Level::Notice));
        assert_eq!(level_of(&v, "from_the_future"), Some(Level::Hazard));
        // Without its probe, the rule cannot judge: the stored verdict stands.
        fp.probes.clear();
        judge_into(&mut fp);
        assert_eq!(level_of(&fp.verdicts, "slow_pause"), Some(Level::Ok));
    }

    #[test]
    fn a_skipped_probe_names_its_reason_and_an_absent_one_says_nothing() {
        let mut fp = crate::schema::test_support::empty_fingerprint();
        fp.probes.push(ProbeResult {
            reason: Some("needs two CPUs".into()),
            ..ProbeResult::new("sharing", Status::Skipped)
        });
        judge_into(&mut fp);
        let ids: Vec<&str> = fp.not_judged.iter().map(|n| n.hazard.as_str()).collect();
        assert_eq!(
            ids,
            ["false_sharing"],
            "only the hazard whose probe was asked for"
        );
        assert_eq!(
            fp.not_judged[0].why,
            "the sharing probe was skipped: needs two CPUs"
        );
    }

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
            level_with_interval(2.2, Some(&iv(2.0, 2.5)), Level::Ok, &STEPS, THRESHOLD_GUARD),
            (Level::Notice, None)
        );
        assert_eq!(
            level_with_interval(4.0, Some(&iv(3.5, 4.5)), Level::Ok, &STEPS, THRESHOLD_GUARD),
            (Level::Hazard, None)
        );
    }

    #[test]
    fn an_interval_across_a_threshold_is_borderline_whichever_side_the_median_falls() {
        // Two runs of one machine, medians either side of 3.0 (the flip the trust issue
        // measured on false_sharing): the same verdict both times.
        let a = level_with_interval(2.9, Some(&iv(2.6, 3.3)), Level::Ok, &STEPS, THRESHOLD_GUARD);
        let b = level_with_interval(3.1, Some(&iv(2.7, 3.4)), Level::Ok, &STEPS, THRESHOLD_GUARD);
        assert_eq!(a, (Level::Notice, Some(Level::Hazard)));
        assert_eq!(a, b);
    }

    #[test]
    fn without_an_interval_the_figure_decides() {
        assert_eq!(
            level_with_interval(3.5, None, Level::Ok, &STEPS, THRESHOLD_GUARD),
            (Level::Hazard, None)
        );
        assert_eq!(
            level_with_interval(2.5, None, Level::Ok, &STEPS, THRESHOLD_GUARD),
            (Level::Notice, None)
        );
    }

    #[test]
    fn a_figure_within_the_guard_band_of_a_threshold_is_borderline() {
        // The 4 KiB page penalty on the Zen 3 guest: five runs read 1.6-1.7x with interval
        // lows of 1.4-1.6 against the 1.5x line; each run must give the same verdict.
        let tlb = [(1.2, Level::Notice), (1.5, Level::Hazard)];
        let runs = [
            (1.6, 1.5, 1.8),
            (1.7, 1.6, 1.7),
            (1.6, 1.4, 1.7),
            (1.65, 1.6, 1.7),
        ];
        for (v, lo, hi) in runs {
            assert_eq!(
                level_with_interval(v, Some(&iv(lo, hi)), Level::Ok, &tlb, THRESHOLD_GUARD),
                (Level::Notice, Some(Level::Hazard)),
                "{v} [{lo}, {hi}]"
            );
        }
        // Well past the line (more than the band): a plain level.
        assert_eq!(
            level_with_interval(1.9, Some(&iv(1.8, 2.0)), Level::Ok, &tlb, THRESHOLD_GUARD),
            (Level::Hazard, None)
        );
        // No interval, but within 10% of the line: borderline too.
        assert_eq!(
            level_with_interval(3.1, None, Level::Ok, &STEPS, THRESHOLD_GUARD),
            (Level::Notice, Some(Level::Hazard))
        );
    }

    #[test]
    fn on_a_guest_the_wider_band_gives_one_verdict_for_five_drifting_runs() {
        // The five checks of the Zen 3 guest (bench/stability.sh 5 3): the 4 KiB page
        // penalty drifted 1.66-1.94x; the 10% band judged two runs hazard, three borderline.
        let tlb = [(1.2, Level::Notice), (1.5, Level::Hazard)];
        let runs = [
            (1.87, 1.62, 1.87),
            (1.70, 1.59, 1.78),
            (1.66, 1.62, 1.71),
            (1.94, 1.75, 2.03),
            (1.82, 1.73, 1.84),
        ];
        let judged = |guard| -> Vec<_> {
            runs.iter()
                .map(|&(v, lo, hi)| {
                    level_with_interval(v, Some(&iv(lo, hi)), Level::Ok, &tlb, guard)
                })
                .collect()
        };
        assert!(judged(THRESHOLD_GUARD).windows(2).any(|w| w[0] != w[1]));
        assert!(
            judged(GUEST_THRESHOLD_GUARD)
                .iter()
                .all(|j| *j == (Level::Notice, Some(Level::Hazard)))
        );
    }

    #[test]
    fn the_guard_band_widens_negative_figures_outwards() {
        // Software prefetch judges the negation of its worst ratio against -0.9.
        let steps = [(-0.9, Level::Notice)];
        assert_eq!(
            level_with_interval(
                -0.95,
                Some(&iv(-0.97, -0.93)),
                Level::Ok,
                &steps,
                THRESHOLD_GUARD
            ),
            (Level::Ok, Some(Level::Notice))
        );
        assert_eq!(
            level_with_interval(
                -0.5,
                Some(&iv(-0.55, -0.45)),
                Level::Ok,
                &steps,
                THRESHOLD_GUARD
            ),
            (Level::Notice, None)
        );
    }

    #[test]
    fn a_band_across_two_thresholds_names_the_line_nearest_the_figure() {
        let tlb = [(1.2, Level::Notice), (1.5, Level::Hazard)];
        // Four checks of the Zen 3 guest: the across-runs interval reached down to ~1.4x.
        for (v, lo, hi) in [(1.55, 1.40, 1.92), (1.66, 1.45, 1.80), (1.40, 1.35, 1.70)] {
            assert_eq!(
                level_with_interval(v, Some(&iv(lo, hi)), Level::Ok, &tlb, GUEST_THRESHOLD_GUARD),
                (Level::Notice, Some(Level::Hazard)),
                "{v}"
            );
        }
        // Nearer the lower line: ok/notice.
        assert_eq!(
            level_with_interval(
                1.22,
                Some(&iv(1.1, 1.6)),
                Level::Ok,
                &tlb,
                GUEST_THRESHOLD_GUARD
            ),
            (Level::Ok, Some(Level::Notice))
        );
    }
}
