//! `cpudoctor experiment`: the user's own command run under controlled variants, the way the
//! four cases each measured a behaviour by hand. The P4 case ran the same code on large and
//! small pages ([`Variant::Pages`]); the split-lock case ran victims beside a split-lock loop
//! ([`Variant::Neighbour`]); the Skylake case ran one test on two CPUs ([`Variant::Placement`]
//! asks the same of one machine's cores); the Netflix case expected 3x from a bigger instance
//! and got 25% more ([`Variant::Cpus`], a scaling curve).
//!
//! A [`Plan`] is a list of arms (one setup of the command each) and of comparisons (an arm
//! against its baseline arm). The arms run interleaved, A B A B ..., after warmup rounds that
//! are thrown away, so drift (a neighbour, the clock, the page cache) hits every arm alike;
//! each comparison is the median of the per-round ratios with a distribution-free interval
//! ([`ratios::ratio`]). What each arm actually got (huge pages in `smaps_rollup`, the CPUs it
//! ran on, whether the host trapped the neighbour's split locks) is recorded beside its
//! times, because a variant that did not take is not a result.
//!
//! Layer: above `machine`, `measure`, `process` and `probes` (whose split-lock aggressor is
//! the neighbour), below `render` (which draws [`ExperimentResult`]). Nothing here prints:
//! progress goes through [`crate::measure::Progress`].

pub mod neighbour;
pub mod placement;
pub mod plan;
pub mod ratios;
pub mod run;

use serde::{Deserialize, Serialize};

/// Version of the experiment JSON. Bump on a change a reader of an older file would misread.
pub const SCHEMA_VERSION: u32 = 1;
/// The `kind` field that tells an experiment file from a fingerprint or a diagnosis.
pub const KIND: &str = "experiment";

/// Which neighbour runs on the CPU the command does not use.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum NeighbourKind {
    /// The split-lock probes' locking child: bus locks on a line-straddling word.
    SplitLocks,
    /// A streaming reader of a buffer four times the last-level cache (the bandwidth probe's
    /// widest vector loads): memory bandwidth taken from the command.
    Memory,
    /// Locked increments of one cache line, as fast as one core can (the sharing probe's
    /// `lock xadd` loop): atomics that stay in the neighbour's own cache.
    Atomics,
}

impl NeighbourKind {
    /// The word on the command line and in the JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            NeighbourKind::SplitLocks => "split-locks",
            NeighbourKind::Memory => "memory",
            NeighbourKind::Atomics => "atomics",
        }
    }

    /// The kind a word names.
    pub fn from_word(word: &str) -> Option<NeighbourKind> {
        [
            NeighbourKind::SplitLocks,
            NeighbourKind::Memory,
            NeighbourKind::Atomics,
        ]
        .into_iter()
        .find(|k| k.as_str() == word)
    }
}

/// How the command's pages are set up.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PagesSetting {
    /// `prctl(PR_SET_THP_DISABLE)` before exec (inherited by the command and its children):
    /// 4 KiB pages only.
    ThpDisabled,
    /// Huge pages asked for: `GLIBC_TUNABLES=glibc.malloc.hugetlb=1` (glibc's malloc marks its
    /// heaps `MADV_HUGEPAGE`) where THP is `madvise`; nothing to ask where THP is `always`.
    HugeAsked,
}

/// Where the command's threads are placed, relative to each other: two CPUs each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PlacementClass {
    /// The two logical CPUs of one core.
    SmtSiblings,
    /// Two cores sharing the last-level cache.
    SameCache,
    /// Two cores on different last-level caches (another CCD or cluster), one NUMA node.
    AcrossCache,
    /// Two cores on different NUMA nodes (another socket).
    AcrossNode,
}

impl PlacementClass {
    /// Every class, closest first.
    pub const ALL: [PlacementClass; 4] = [
        PlacementClass::SmtSiblings,
        PlacementClass::SameCache,
        PlacementClass::AcrossCache,
        PlacementClass::AcrossNode,
    ];

    /// Words for a reader.
    pub fn label(self) -> &'static str {
        match self {
            PlacementClass::SmtSiblings => "one core's SMT siblings",
            PlacementClass::SameCache => "two cores sharing a cache",
            PlacementClass::AcrossCache => "two cores across a cache boundary",
            PlacementClass::AcrossNode => "two cores across a NUMA node",
        }
    }
}

/// One setup of the command: what differs from running it plainly.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "variant")]
pub enum Variant {
    /// The command as given, on the CPUs `cpus` names (all this process may use when absent).
    Plain {
        /// CPUs the command may run on.
        cpus: Vec<usize>,
    },
    /// The command with its pages set up one way.
    Pages {
        /// How.
        setting: PagesSetting,
    },
    /// The command on `cpus` while a neighbour runs on `neighbour_cpu`.
    Neighbour {
        /// Which neighbour.
        kind: NeighbourKind,
        /// CPUs the command may run on (all but the neighbour's).
        cpus: Vec<usize>,
        /// The neighbour's CPU.
        neighbour_cpu: usize,
    },
    /// The command on two CPUs placed one way.
    Placement {
        /// Which placement.
        class: PlacementClass,
        /// The two CPUs.
        cpus: Vec<usize>,
    },
    /// The command on its first `n` CPUs (spread over cores first).
    Cpus {
        /// How many CPUs.
        n: usize,
        /// Which.
        cpus: Vec<usize>,
    },
}

impl Variant {
    /// A short name for tables (`4 KiB pages`, `split-locks neighbour`, `2 CPUs`).
    pub fn name(&self) -> String {
        match self {
            Variant::Plain { .. } => "alone".into(),
            Variant::Pages {
                setting: PagesSetting::ThpDisabled,
            } => "THP off".into(),
            Variant::Pages {
                setting: PagesSetting::HugeAsked,
            } => "huge pages asked".into(),
            Variant::Neighbour { kind, .. } => format!("{} neighbour", kind.as_str()),
            Variant::Placement { class, .. } => match class {
                PlacementClass::SmtSiblings => "SMT siblings".into(),
                PlacementClass::SameCache => "same cache".into(),
                PlacementClass::AcrossCache => "across cache".into(),
                PlacementClass::AcrossNode => "across node".into(),
            },
            Variant::Cpus { n, .. } => format!("{n} CPU{}", if *n == 1 { "" } else { "s" }),
        }
    }

    /// The CPUs the command is confined to, when the variant confines it.
    pub fn cpus(&self) -> Option<&[usize]> {
        match self {
            Variant::Plain { cpus }
            | Variant::Neighbour { cpus, .. }
            | Variant::Placement { cpus, .. }
            | Variant::Cpus { cpus, .. } => Some(cpus),
            Variant::Pages { .. } => None,
        }
    }
}

/// Which family of comparisons a comparison belongs to (one per option given).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Family {
    /// `--pages`.
    Pages,
    /// `--neighbour`.
    Neighbour,
    /// `--placement`.
    Placement,
    /// `--cpus`.
    Cpus,
}

/// One arm against its baseline arm.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlannedComparison {
    /// The family.
    pub family: Family,
    /// Index of the arm compared.
    pub arm: usize,
    /// Index of its baseline arm.
    pub baseline: usize,
}

/// What to run: arms, comparisons, and what could not be planned.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Plan {
    /// The setups, each run once per round.
    pub arms: Vec<Variant>,
    /// Each compared arm with its baseline.
    pub comparisons: Vec<PlannedComparison>,
    /// Variants this machine cannot do, one line each (`--placement: no SMT siblings here`).
    pub not_run: Vec<String>,
    /// What the kernel allows, where it shapes a variant (THP `always` or `madvise`).
    pub notes: Vec<String>,
}

impl Plan {
    /// Adds `v` unless an equal arm exists; returns its index.
    pub fn arm(&mut self, v: Variant) -> usize {
        if let Some(i) = self.arms.iter().position(|a| *a == v) {
            return i;
        }
        self.arms.push(v);
        self.arms.len() - 1
    }

    /// Adds a comparison of `arm` against `baseline`.
    pub fn compare(&mut self, family: Family, arm: Variant, baseline: Variant) {
        let baseline = self.arm(baseline);
        let arm = self.arm(arm);
        self.comparisons.push(PlannedComparison {
            family,
            arm,
            baseline,
        });
    }
}

/// What is measured of each run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "measure")]
pub enum Measure {
    /// Wall-clock seconds from spawn to exit; lower is better.
    WallTime,
    /// The first capture group (or whole match) of `regex` in the command's stdout, as a
    /// number.
    Metric {
        /// The regular expression given.
        regex: String,
        /// Whether a higher figure is better (a rate, a score) instead of lower (a time).
        higher_is_better: bool,
    },
}

impl Measure {
    /// Whether a higher figure is better.
    pub fn higher_is_better(&self) -> bool {
        matches!(
            self,
            Measure::Metric {
                higher_is_better: true,
                ..
            }
        )
    }
}

/// One arm's runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArmResult {
    /// The setup.
    pub variant: Variant,
    /// The measure of each timed run, in round order (warmups left out); `null` for a round
    /// whose run failed.
    pub samples: Vec<Option<f64>>,
    /// Wall-clock seconds of each timed run (also when the measure is a metric).
    pub wall_s: Vec<Option<f64>>,
    /// The largest `AnonHugePages` seen in the command's `smaps_rollup` during each timed
    /// run, in bytes (its children are not summed); `null` where it could not be read.
    pub anon_huge_bytes: Vec<Option<u64>>,
    /// Median of the successful samples.
    pub median: Option<f64>,
    /// Why the arm stopped, when a run failed (one line: exit status and the last line of
    /// stderr, or the metric not found).
    pub failure: Option<String>,
    /// What the arm's neighbour did, for a neighbour arm.
    pub neighbour: Option<neighbour::NeighbourReport>,
}

/// One comparison's outcome.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    /// The family.
    pub family: Family,
    /// Index of the arm compared, in `arms`.
    pub arm: usize,
    /// Index of its baseline arm, in `arms`.
    pub baseline: usize,
    /// Median over rounds of (arm's measure / baseline's measure) in the same round; `null`
    /// when fewer than one round had both.
    pub ratio: Option<f64>,
    /// Lower end of the interval of that median (order statistics, see `coverage`).
    pub ratio_low: Option<f64>,
    /// Upper end.
    pub ratio_high: Option<f64>,
    /// Coverage the interval actually achieves (0.95 asked; less with fewer than 6 rounds,
    /// where the interval is the whole range of the ratios).
    pub coverage: Option<f64>,
    /// Rounds in which both arms succeeded.
    pub pairs: usize,
    /// The arm's effect as a speed factor: above 1 the arm is faster than its baseline
    /// (1 / ratio for a lower-is-better measure, the ratio itself for a higher-is-better one).
    pub speed: Option<f64>,
    /// Lower end of the speed factor's interval.
    pub speed_low: Option<f64>,
    /// Upper end of the speed factor's interval.
    pub speed_high: Option<f64>,
    /// One line saying what it means.
    pub meaning: String,
}

/// One point of a scaling curve.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScalingPoint {
    /// CPUs given to the command.
    pub cpus: usize,
    /// Throughput relative to the fewest CPUs (median of the per-round speed factors).
    pub speedup: Option<f64>,
    /// Lower end of its interval.
    pub speedup_low: Option<f64>,
    /// Upper end.
    pub speedup_high: Option<f64>,
    /// Perfect scaling: cpus / the fewest cpus.
    pub ideal: f64,
    /// speedup / ideal (1 = perfect).
    pub efficiency: Option<f64>,
}

/// The scaling curve of `--cpus`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Scaling {
    /// One point per CPU count, the fewest first (speedup 1 by definition).
    pub points: Vec<ScalingPoint>,
    /// The first CPU count whose interval lies wholly below
    /// [`ratios::SCALING_FALLS_AWAY_EFFICIENCY`] of ideal; `null` when none does.
    pub falls_away_at: Option<usize>,
}

/// Facts about the machine that decide what the variants can do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExperimentMachine {
    /// Host name.
    pub hostname: Option<String>,
    /// The CPU's brand string.
    pub cpu: String,
    /// CPUs this process may use.
    pub allowed_cpus: Vec<usize>,
    /// Transparent huge page mode (`always`, `madvise`, `never`), when readable.
    pub thp: Option<String>,
    /// What the kernel does with split locks (its word: `off`, `warn`, `not_detected` ...).
    pub split_lock: crate::machine::SplitLockMode,
    /// Hypervisor, when a guest.
    pub hypervisor: Option<String>,
}

/// The whole experiment, as `--json` writes it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExperimentResult {
    /// Always `experiment`.
    pub kind: String,
    /// [`SCHEMA_VERSION`] when written.
    pub schema_version: u32,
    /// cpudoctor's version.
    pub tool_version: String,
    /// Seconds since the epoch when the experiment started.
    pub started_unix_s: u64,
    /// The command and its arguments.
    pub command: Vec<String>,
    /// The `--prepare` command run before each run, if any.
    pub prepare: Option<String>,
    /// What was measured.
    pub measure: Measure,
    /// Timed rounds asked for.
    pub runs: usize,
    /// Warmup rounds thrown away.
    pub warmup: usize,
    /// The machine.
    pub machine: ExperimentMachine,
    /// The arms, in the order each round ran them.
    pub arms: Vec<ArmResult>,
    /// Each compared arm against its baseline.
    pub comparisons: Vec<Comparison>,
    /// The `--cpus` curve, when asked.
    pub scaling: Option<Scaling>,
    /// Variants this machine could not do, one line each.
    pub not_run: Vec<String>,
    /// What the kernel allows, where it shapes a variant.
    pub notes: Vec<String>,
}

impl ExperimentResult {
    /// Whether a JSON value is an experiment file.
    pub fn is_experiment(v: &serde_json::Value) -> bool {
        v.get("kind").and_then(|k| k.as_str()) == Some(KIND)
    }
}
