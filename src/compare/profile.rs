//! Two saved diagnoses compared, the Skylake PAUSE case's method: profile the same workload on
//! the old and the new machine, diff the CPU time per function, and for each function that
//! grew look at its hot instruction on both sides (there, the one right after `pause`).
//!
//! Samples are counted per function from the leaf of every sampled stack, so every sample
//! counts, not only the 15 hottest functions a diagnosis lists. Runs of different length,
//! sampling rate or thread count compare by *share* of samples (independent of length) and by
//! *CPU time per second of wall time* (samples / rate / wall time). A change counts when the
//! share moved by [`MIN_CHANGE`] or more and by more than [`NOISE_SE`] standard errors of the
//! two shares (binomial sampling noise): the one change rule ([`crate::stats::effect`]) with
//! that interval and that floor. Functions are ranked by the change in share. When
//! both files have a wall-clock view, where the threads' time went is compared too
//! ([`super::wall`], its own rule). Why the new side is slower or faster, the loss attributed
//! to the machine figures, is [`super::why`]'s. The result is a typed, serde-serialisable
//! [`DiagnosisDiff`]; `render::profile_diff` prints it.

use crate::diagnose::Diagnosis;
use crate::diagnose::analyse::disasm::{Listing, SiteKind};
use crate::diagnose::analyse::hotspots::{self, CallerPath, MIN_DECODE_SHARE, short_module};
use crate::diagnose::analyse::rules::{Finding, PauseCost};
use crate::diagnose::record::sampler::SamplingMode;
use crate::diagnose::stacks::stacks_of;
use crate::diagnose::symbolize::stack::StackCount;
use crate::schema::Level;
use crate::stats::effect::{Effect, Reading, Rule, Way};
use crate::words::compare::{self as words, NoSite};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Smallest change in share that counts (1 percentage point).
pub const MIN_CHANGE: f64 = 0.01;
/// A change counts only beyond this many standard errors of the difference of two shares.
pub const NOISE_SE: f64 = 2.0;
/// Grown functions given in detail (hot code, callers).
pub const GROWN_DETAILED: usize = 8;

/// One side of the comparison: the run and its machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileRun {
    /// How the reader named the file (its name, or path when the names clash).
    pub label: String,
    /// The command diagnosed, or `process PID (attached)`.
    pub workload: String,
    /// CPU line.
    pub cpu: String,
    /// Logical CPUs.
    pub logical_cpus: usize,
    /// PAUSE measured during that diagnosis (only when it found a PAUSE spin).
    pub pause: Option<PauseCost>,
    /// Sampling event.
    pub event: SamplingMode,
    /// Samples per second per running thread.
    pub frequency_hz: u64,
    /// Wall time recorded, s.
    pub wall_s: f64,
    /// Samples taken.
    pub samples: u64,
    /// CPU time the samples stand for, s (samples / rate).
    pub cpu_s: f64,
    /// True when the file has no call stacks: counted from its 15 hottest functions only.
    pub from_functions: bool,
}

/// What one side spent in a function or module.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Amount {
    /// Samples.
    pub samples: u64,
    /// Share of the side's samples.
    pub share: f64,
    /// CPU time, s (samples / rate).
    pub cpu_s: f64,
    /// CPU seconds per second of wall time.
    pub cpu_per_wall: f64,
}

/// Which way a function or module moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Its share grew beyond noise.
    Grown,
    /// Its share shrank beyond noise.
    Shrunk,
    /// Moved less than noise, or less than [`MIN_CHANGE`].
    Within,
}

impl Direction {
    /// A share's move as the one change rule ([`crate::stats::effect`]) reads it: grown or
    /// shrunk when it counts, else within (a share has no better direction).
    pub fn of(reading: Reading) -> Direction {
        match reading.change() {
            Some(Way::Up) => Direction::Grown,
            Some(Way::Down) => Direction::Shrunk,
            None => Direction::Within,
        }
    }
}

/// One function (or module) on both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FunctionChange {
    /// Function name (`module (unnamed code)` for code without a name), or the module's file
    /// name in the module table.
    pub name: String,
    /// The module's file name (for a module, itself).
    pub module: String,
    /// On the old side.
    pub old: Amount,
    /// On the new side.
    pub new: Amount,
    /// New share minus old share (0.685 = +68.5 points).
    pub share_change: f64,
    /// New minus old CPU seconds per second of wall time.
    pub cpu_per_wall_change: f64,
    /// [`NOISE_SE`] standard errors of the difference of the two shares.
    pub noise: f64,
    /// Which way it moved.
    pub direction: Direction,
}

/// One line of a site's listing.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ListingLine {
    /// Address.
    pub address: u64,
    /// Intel syntax.
    pub instruction: String,
    /// Samples at this address.
    pub samples: u64,
}

/// A function's hottest classified site on one side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SiteSummary {
    /// What it is (`pause_spin`, `locked_rmw`...).
    pub kind: SiteKind,
    /// The hot instruction, skid undone (`pause`, `lock cmpxchg ...`).
    pub instruction: String,
    /// Its offset in the function.
    pub offset: u64,
    /// The instruction right after it, where timer samples land (skid): the seed's `jmp`
    /// and `sub` after `pause`.
    pub next: Option<ListingLine>,
    /// Samples in the site.
    pub samples: u64,
    /// Share of the side's samples.
    pub share: f64,
    /// The site's code, `hot` on the hot instruction.
    pub disassembly: Listing,
}

/// A grown function's code and callers on one side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CodeSide {
    /// Its hottest classified site.
    pub site: Option<SiteSummary>,
    /// Why there is none (not sampled, under 1% of samples, not disassembled).
    pub no_site: Option<String>,
    /// Its callers from the sampled stacks, most samples first.
    pub callers: Vec<CallerPath>,
}

/// A function that grew, side by side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GrownFunction {
    /// Function name.
    pub name: String,
    /// Module file name.
    pub module: String,
    /// Old side.
    pub old: CodeSide,
    /// New side.
    pub new: CodeSide,
}

/// A finding as the diff lists it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FindingBrief {
    /// Finding id (`pause_spin`...).
    pub id: String,
    /// Its level.
    pub level: Level,
    /// Its title.
    pub title: String,
    /// Function, when about code.
    pub symbol: Option<String>,
    /// Share of samples.
    pub sample_share: Option<f64>,
    /// For a finding on one side only: the same function's share in the other run, when it
    /// was sampled there below the bar a finding needs (so it is not "only" on this side: it
    /// grew from, or shrank to, that share). Absent in diffs written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub other_run: Option<OtherRun>,
}

/// The function of a one-sided finding as the other run of a diff sampled it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OtherRun {
    /// Share of that run's samples in the function's hottest classified site, or in the
    /// function when no site of it was classified.
    pub share: f64,
    /// The share from which a site becomes a finding ([`crate::diagnose::analyse::rules::NOTICE_SHARE`]).
    pub bar: f64,
}

/// A finding present on both sides (same id, same function).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FindingPair {
    /// Old side.
    pub old: FindingBrief,
    /// New side.
    pub new: FindingBrief,
}

/// Findings on one side only, and on both.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FindingChanges {
    /// Only in the old diagnosis.
    pub only_old: Vec<FindingBrief>,
    /// Only in the new diagnosis.
    pub only_new: Vec<FindingBrief>,
    /// In both.
    pub both: Vec<FindingPair>,
}

/// Two diagnoses compared: the `diff --json` document for diagnoses.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiagnosisDiff {
    /// `diagnosis_diff`: tells this document from a fingerprint diff.
    pub kind: String,
    /// The baseline.
    pub old: ProfileRun,
    /// The run compared with it.
    pub new: ProfileRun,
    /// How the runs are compared, in words.
    pub rule: String,
    /// Every function sampled on either side, most grown first, most shrunk last.
    pub functions: Vec<FunctionChange>,
    /// Modules, the same way.
    pub modules: Vec<FunctionChange>,
    /// The grown functions (at most [`GROWN_DETAILED`]), most grown first: hot code and callers
    /// on both sides.
    pub grown: Vec<GrownFunction>,
    /// Findings on one side only, and on both.
    pub findings: FindingChanges,
    /// What limits the comparison.
    pub notes: Vec<String>,
    /// The wall-clock views compared (both files need one; absent otherwise).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall: Option<super::wall::WallDiff>,
    /// Why the new side is slower or faster: the loss, attributed by mechanism to the machine
    /// figures that govern it ([`super::why`]); null when neither side has samples.
    #[serde(default)]
    pub why: Option<super::why::Why>,
    /// The watched cache lines compared: data that stopped or started being shared (absent
    /// when neither side has a watch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lines: Option<crate::schema::line_sharing::LineChanges>,
}

/// Samples per function (or module) of one side, from the leaves of its stacks.
struct Tally {
    /// (name, module file name) -> samples.
    by_function: BTreeMap<(String, String), u64>,
    /// Module file name -> samples.
    by_module: BTreeMap<String, u64>,
    /// (name, module file name) -> the module's path, for callers.
    paths: BTreeMap<(String, String), String>,
}

/// The name a function is compared under: its symbol, or `module (unnamed code)`: unnamed
/// code is told apart by address, and addresses differ between machines.
fn leaf_name(s: &StackCount) -> Option<(String, String)> {
    let f = s.frames.first()?;
    let module = short_module(&f.module).to_string();
    let name = f
        .function
        .clone()
        .unwrap_or_else(|| format!("{module} (unnamed code)"));
    Some((name, module))
}

fn tally(stacks: &[StackCount]) -> Tally {
    let mut t = Tally {
        by_function: BTreeMap::new(),
        by_module: BTreeMap::new(),
        paths: BTreeMap::new(),
    };
    for s in stacks {
        let Some(key) = leaf_name(s) else { continue };
        // Saturating: a saved file's counts are outside input (the fuzz test's u64::MAX).
        let m = t.by_module.entry(key.1.clone()).or_default();
        *m = m.saturating_add(s.samples);
        t.paths
            .entry(key.clone())
            .or_insert_with(|| s.frames[0].module.clone());
        let f = t.by_function.entry(key).or_default();
        *f = f.saturating_add(s.samples);
    }
    t
}

fn side(d: &Diagnosis, label: &str, from_functions: bool) -> ProfileRun {
    ProfileRun {
        label: label.to_string(),
        workload: match &d.target.command {
            Some(c) => c.join(" "),
            None => words::attached_process(d.target.pid),
        },
        cpu: d.machine.cpu.clone(),
        logical_cpus: d.machine.logical_cpus,
        pause: d.machine.pause,
        event: d.sampling.event,
        frequency_hz: d.sampling.frequency_hz,
        wall_s: d.sampling.wall_s,
        samples: d.sampling.samples,
        cpu_s: d.sampling.samples as f64 / d.sampling.frequency_hz.max(1) as f64,
        from_functions,
    }
}

fn amount(samples: u64, s: &ProfileRun) -> Amount {
    let cpu_s = samples as f64 / s.frequency_hz.max(1) as f64;
    Amount {
        samples,
        share: samples as f64 / s.samples.max(1) as f64,
        cpu_s,
        cpu_per_wall: if s.wall_s > 0.0 {
            cpu_s / s.wall_s
        } else {
            0.0
        },
    }
}

fn change(
    name: String,
    module: String,
    old: Amount,
    new: Amount,
    o: &ProfileRun,
    n: &ProfileRun,
) -> FunctionChange {
    let noise = NOISE_SE
        * crate::stats::share_difference_se((old.share, o.samples), (new.share, n.samples));
    let d = new.share - old.share;
    let direction = Direction::of(
        Rule {
            floor: Some(MIN_CHANGE),
            ..Rule::default()
        }
        .read(&Effect::difference_within(d, noise)),
    );
    FunctionChange {
        name,
        module,
        old,
        new,
        share_change: d,
        cpu_per_wall_change: new.cpu_per_wall - old.cpu_per_wall,
        noise,
        direction,
    }
}

/// Most grown first, most shrunk last; equal changes by name.
fn rank(v: &mut [FunctionChange]) {
    v.sort_by(|a, b| {
        b.share_change
            .total_cmp(&a.share_change)
            .then_with(|| a.name.cmp(&b.name))
            .then_with(|| a.module.cmp(&b.module))
    });
}

fn code_side(
    d: &Diagnosis,
    stacks: &[StackCount],
    t: &Tally,
    key: &(String, String),
    share: f64,
) -> CodeSide {
    let site = d
        .hot_sites
        .iter()
        .filter(|s| s.symbol == key.0 && short_module(&s.module) == key.1)
        .max_by_key(|s| s.samples)
        .map(|s| SiteSummary {
            kind: s.kind,
            instruction: s.instruction.clone(),
            offset: s.offset,
            next: s.disassembly.after_hot().map(|l| ListingLine {
                address: l.address,
                instruction: l.instruction.clone(),
                samples: l.samples,
            }),
            samples: s.samples,
            share: s.share,
            disassembly: s.disassembly.clone(),
        });
    let no_site = match (&site, t.by_function.get(key)) {
        (Some(_), _) => None,
        (None, None) => Some(words::no_site(NoSite::NotSampled)),
        (None, Some(_)) if share < MIN_DECODE_SHARE => Some(words::no_site(NoSite::UnderShare {
            share,
            min_share: MIN_DECODE_SHARE,
        })),
        (None, Some(_)) => Some(words::no_site(NoSite::NotDisassembled)),
    };
    let callers = t
        .paths
        .get(key)
        .map(|path| hotspots::callers_of(stacks, &key.0, path))
        .unwrap_or_default();
    CodeSide {
        site,
        no_site,
        callers,
    }
}

fn brief(f: &Finding) -> FindingBrief {
    FindingBrief {
        id: f.id.clone(),
        level: f.level,
        title: f.title.clone(),
        symbol: f.symbol.clone(),
        sample_share: f.sample_share,
        other_run: None,
    }
}

/// The share of the function a one-sided finding is about in the other run, when it was
/// sampled there below the finding bar: its hottest classified site's share, else the
/// function's (from the leaves of the other run's stacks, `tally`).
fn below_bar(f: &Finding, other: &Diagnosis, tally: &Tally, samples: u64) -> Option<OtherRun> {
    let symbol = f.symbol.as_deref()?;
    f.sample_share?;
    let site = other
        .hot_sites
        .iter()
        .filter(|s| s.symbol == symbol)
        .map(|s| s.share)
        .max_by(f64::total_cmp);
    let function = || {
        let n: u64 = tally
            .by_function
            .iter()
            .filter(|((name, _), _)| name == symbol)
            .map(|(_, n)| n)
            .sum();
        (samples > 0 && n > 0).then(|| n as f64 / samples as f64)
    };
    let share = site.filter(|&s| s > 0.0).or_else(function)?;
    Some(OtherRun {
        share,
        bar: crate::diagnose::analyse::rules::NOTICE_SHARE,
    })
}

fn findings(
    old: &Diagnosis,
    new: &Diagnosis,
    (ot, os): (&Tally, u64),
    (nt, ns): (&Tally, u64),
) -> FindingChanges {
    // A runtime's finding pairs by its runtime: which of its functions leads may change.
    let key = |f: &Finding| {
        (
            f.id.clone(),
            f.runtime
                .map(|r| r.name().to_string())
                .or_else(|| f.symbol.clone()),
        )
    };
    let old_keys: BTreeSet<_> = old.findings.iter().map(key).collect();
    let mut out = FindingChanges::default();
    for f in &old.findings {
        match new.findings.iter().find(|n| key(n) == key(f)) {
            Some(n) => out.both.push(FindingPair {
                old: brief(f),
                new: brief(n),
            }),
            None => out.only_old.push(FindingBrief {
                other_run: below_bar(f, new, nt, ns),
                ..brief(f)
            }),
        }
    }
    out.only_new = new
        .findings
        .iter()
        .filter(|f| !old_keys.contains(&key(f)))
        .map(|f| FindingBrief {
            other_run: below_bar(f, old, ot, os),
            ..brief(f)
        })
        .collect();
    out
}

/// The rule the comparison follows, in words, with both runs' lengths.
fn rule(o: &ProfileRun, n: &ProfileRun) -> String {
    words::profile_rule(&words::ProfileRuleFigures {
        old: (o.wall_s, o.frequency_hz),
        new: (n.wall_s, n.frequency_hz),
        min_change: MIN_CHANGE,
        noise_se: NOISE_SE,
    })
}

/// Compares two diagnoses. `old_label` and `new_label` name the files for a reader.
pub fn compare(
    old: &Diagnosis,
    new: &Diagnosis,
    old_label: &str,
    new_label: &str,
) -> DiagnosisDiff {
    let (os, ns) = (stacks_of(old), stacks_of(new));
    let o = side(old, old_label, os.from_functions);
    let n = side(new, new_label, ns.from_functions);
    let (ot, nt) = (tally(&os.stacks), tally(&ns.stacks));
    let keys: BTreeSet<&(String, String)> =
        ot.by_function.keys().chain(nt.by_function.keys()).collect();
    let mut functions: Vec<FunctionChange> = keys
        .into_iter()
        .map(|k| {
            let a = amount(ot.by_function.get(k).copied().unwrap_or(0), &o);
            let b = amount(nt.by_function.get(k).copied().unwrap_or(0), &n);
            change(k.0.clone(), k.1.clone(), a, b, &o, &n)
        })
        .collect();
    rank(&mut functions);
    let modules: BTreeSet<&String> = ot.by_module.keys().chain(nt.by_module.keys()).collect();
    let mut modules: Vec<FunctionChange> = modules
        .into_iter()
        .map(|m| {
            let a = amount(ot.by_module.get(m).copied().unwrap_or(0), &o);
            let b = amount(nt.by_module.get(m).copied().unwrap_or(0), &n);
            change(m.clone(), m.clone(), a, b, &o, &n)
        })
        .collect();
    rank(&mut modules);
    let grown = functions
        .iter()
        .filter(|c| c.direction == Direction::Grown)
        .take(GROWN_DETAILED)
        .map(|c| {
            let key = (c.name.clone(), c.module.clone());
            GrownFunction {
                name: c.name.clone(),
                module: c.module.clone(),
                old: code_side(old, &os.stacks, &ot, &key, c.old.share),
                new: code_side(new, &ns.stacks, &nt, &key, c.new.share),
            }
        })
        .collect();
    let mut notes = Vec::new();
    for (s, d) in [(&o, old), (&n, new)] {
        if s.from_functions {
            notes.push(words::saved_without_stacks(&s.label, d.functions.len()));
        }
        if s.samples == 0 {
            notes.push(words::no_samples(&s.label));
        }
    }
    if o.event != n.event {
        notes.push(words::different_events(
            o.event.event_name(),
            n.event.event_name(),
        ));
    }
    if old.wall.is_some() != new.wall.is_some() {
        let lacking = if old.wall.is_none() { &o } else { &n };
        notes.push(words::no_wall_view(&lacking.label));
    }
    let findings = findings(old, new, (&ot, o.samples), (&nt, n.samples));
    let wall = super::wall::compare(old, new);
    let why = (o.samples > 0 || n.samples > 0).then(|| {
        super::why::explain(&super::why::Sides {
            old,
            new,
            old_samples: &ot.by_function,
            new_samples: &nt.by_function,
            wall: wall.as_ref(),
        })
    });
    DiagnosisDiff {
        kind: "diagnosis_diff".into(),
        rule: rule(&o, &n),
        old: o,
        new: n,
        functions,
        modules,
        grown,
        findings,
        notes,
        wall,
        why,
        lines: super::lines::compare(old, new),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_of_different_length_compare_by_share_and_cpu_per_wall_second() {
        // 499 samples at 499 Hz is 1 s of CPU: over 2 s of wall time, 0.5 CPU s per s.
        let mut short = side_of(998);
        short.wall_s = 2.0;
        let a = amount(499, &short);
        assert_eq!((a.cpu_s, a.cpu_per_wall, a.share), (1.0, 0.5, 0.5));
        // The same mix over a run five times as long: the same share, the same rate.
        let mut long = side_of(4990);
        long.wall_s = 10.0;
        let b = amount(2495, &long);
        assert_eq!((b.cpu_per_wall, b.share), (0.5, 0.5));
        let c = change("f".into(), "m".into(), a, b, &short, &long);
        assert_eq!(c.direction, Direction::Within);
        assert!(rule(&short, &long).contains("old 2.00 s at 499 Hz, new 10.00 s at 499 Hz"));
    }

    fn amount_of(samples: u64, total: u64) -> Amount {
        Amount {
            samples,
            share: samples as f64 / total as f64,
            ..Amount::default()
        }
    }

    fn side_of(samples: u64) -> ProfileRun {
        ProfileRun {
            label: "x".into(),
            workload: "w".into(),
            cpu: "c".into(),
            logical_cpus: 2,
            pause: None,
            event: SamplingMode::CpuClock,
            frequency_hz: 499,
            wall_s: 1.0,
            samples,
            cpu_s: samples as f64 / 499.0,
            from_functions: false,
        }
    }

    #[test]
    fn a_change_counts_beyond_both_the_minimum_and_the_noise() {
        let (o, n) = (side_of(1000), side_of(1000));
        // 10.0% -> 10.5%: half a point, within.
        let c = change(
            "f".into(),
            "m".into(),
            amount_of(100, 1000),
            amount_of(105, 1000),
            &o,
            &n,
        );
        assert_eq!(c.direction, Direction::Within);
        // 10% -> 12% on 1000 samples each: 2 points, but noise (2 SE) is ~2.8 points.
        let c = change(
            "f".into(),
            "m".into(),
            amount_of(100, 1000),
            amount_of(120, 1000),
            &o,
            &n,
        );
        assert_eq!(c.direction, Direction::Within, "{c:?}");
        // 10% -> 20%: beyond both.
        let c = change(
            "f".into(),
            "m".into(),
            amount_of(100, 1000),
            amount_of(200, 1000),
            &o,
            &n,
        );
        assert_eq!(c.direction, Direction::Grown);
        let c = change(
            "f".into(),
            "m".into(),
            amount_of(200, 1000),
            amount_of(100, 1000),
            &o,
            &n,
        );
        assert_eq!(c.direction, Direction::Shrunk);
        assert!((c.share_change + 0.1).abs() < 1e-12);
    }
}
