//! The split-lock probe's figures: a `lock add` on a value across two cache lines against an
//! aligned one, timed core to core (the split ping-pong) or, where the kernel traps split
//! locks, in a child; and single split locks timed one by one. The raw record
//! ([`SplitLockRaw`]) keeps the ping-pong samples, each block's mean and the census,
//! histogram and percentiles of the ops timed one by one; the analysis gives the figures and
//! names the mechanism ([`SplitLockDerived`]).

use crate::machine::SplitLockMode;
use crate::names::probe;
use crate::schema::ProbeResult;
use crate::schema::figures::{ProbeRaw, RawError, RawRecord, WithDerived, from_map, to_map};
use crate::schema::split_lock::{OpCensus, OpHistogram, SplitLockMechanism, TrapShape};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

crate::figures! {
    /// What the split-lock probe reports, in report order.
    pub struct SplitLockFigures for probe::SPLIT_LOCK {
        /// An aligned `lock add` handed between two cores, ns per handoff (median).
        aligned_lock_latency_ns / ALIGNED_LOCK_LATENCY_NS,
        /// The same in core cycles.
        aligned_lock_latency_cycles / ALIGNED_LOCK_LATENCY_CYCLES,
        /// Where this kernel traps split locks: mean ns per split lock over every timed
        /// block in one thread, the kernel's penalty included (no ratio to the aligned one).
        split_lock_trapped_ns / SPLIT_LOCK_TRAPPED_NS,
        /// A split `lock add` handed between two cores, ns per handoff (median).
        split_lock_latency_ns / SPLIT_LOCK_LATENCY_NS,
        /// The same in core cycles.
        split_lock_latency_cycles / SPLIT_LOCK_LATENCY_CYCLES,
        /// Split over aligned, paired by block (ratio).
        split_lock_ratio / SPLIT_LOCK_RATIO,
        /// Mean ns of single split locks timed one by one in one thread.
        split_lock_op_mean_ns / SPLIT_LOCK_OP_MEAN_NS,
        /// The same in core cycles.
        split_lock_op_mean_cycles / SPLIT_LOCK_OP_MEAN_CYCLES,
        /// Split locks one thread gets through per second (1 / the op mean), locks/s.
        split_lock_locks_per_s / SPLIT_LOCK_LOCKS_PER_S,
    }
}

/// How the split-lock probe measured split locks (`effects.split_lock_measured`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SplitLockMeasured {
    /// In-process, core to core: the hardware's cost.
    Hardware,
    /// In a child, one thread, where this kernel traps split locks: the kernel's penalty.
    KernelMitigation,
}

/// Percentiles of single split locks timed one by one, ns (nearest rank, as the corpus' C
/// references take them: `schema::split_lock::PERCENTILES`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OpPercentilesNs {
    /// Fastest op, ns.
    pub p0: f64,
    /// 10th percentile op, ns.
    pub p10: f64,
    /// Median op, ns.
    pub p50: f64,
    /// 90th percentile op, ns.
    pub p90: f64,
    /// 99th percentile op, ns.
    pub p99: f64,
    /// Slowest op, ns.
    pub p100: f64,
}

/// What took effect in the split-lock probe that its readers use (`effects`; every field
/// absent in some files).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SplitLockEffects {
    /// How split locks were measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_lock_measured: Option<SplitLockMeasured>,
    /// How the child that took trapped split locks ended (`survived`, or the signal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_lock_child: Option<String>,
    /// What a split lock turned out to be here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_lock_mechanism: Option<SplitLockMechanism>,
    /// What the trapped ops' times look like, where trapped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_lock_trap_shape: Option<TrapShape>,
    /// Percentiles of single split locks, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_lock_op_percentiles_ns: Option<OpPercentilesNs>,
}

/// The split-lock probe's record as its readers see it, in every file: typed effects, params
/// and samples by key (files from before the ops were timed one by one lack the probe's
/// [`SplitLockRaw`]).
pub type SplitLockRecord =
    ProbeRaw<BTreeMap<String, serde_json::Value>, SplitLockEffects, BTreeMap<String, Vec<f64>>>;

/// How single split locks were timed: blocks that stop at a count or a time budget.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OpBlock {
    /// Most ops a block times.
    pub max_ops: usize,
    /// A block's time budget, ms.
    pub budget_ms: f64,
    /// Blocks timed over the run.
    pub blocks: usize,
    /// Per-op time from which an op counts as trapped, ns.
    pub trap_boundary_ns: f64,
}

/// How the split-lock probe ran (`params`). Files from before split locks were timed one by
/// one lack `op_block`, and keep their saved figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SplitLockParams {
    /// The CPU pair: the initiator, then the other.
    pub cpus: Vec<usize>,
    /// Rounds of per-op blocks, aligned and split ping-pongs, interleaved.
    pub rounds: usize,
    /// Aligned handoffs per ping-pong sample.
    pub aligned_handoffs_per_sample: u64,
    /// Split handoffs per ping-pong sample, sized from the first round's per-op cost
    /// (in-process only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_handoffs_per_sample: Option<u64>,
    /// Offset of the split value in its 128-byte-aligned block, bytes.
    pub split_value_offset_bytes: usize,
    /// How single split locks were timed.
    pub op_block: OpBlock,
}

/// What took effect when the split-lock probe ran (`effects`): the measurement's facts, and
/// [`SplitLockEffects`] (how it measured and how the child ended; the mechanism and trap
/// shape there are the analysis', [`SplitLockDerived`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SplitLockRawEffects {
    /// CPUs the pair was pinned to.
    pub pinned_cpus: Vec<usize>,
    /// What this kernel does with split locks.
    pub kernel_split_lock_mode: SplitLockMode,
    /// Whether the split value does cross a line end.
    pub split_value_crosses_line: bool,
    /// The initiator's core clock, GHz, estimated on it after the rounds (absent when it
    /// could not be).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_clock_ghz: Option<f64>,
    /// Counts over every op timed one by one (absent when none was).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_lock_op_census: Option<OpCensus>,
    /// The per-op histogram.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_lock_op_histogram: Option<OpHistogram>,
    /// Where the kernel traps: mean ns per split lock over every op of every block in the
    /// child, preemptions discounted (files from before this field lack the trapped figure on
    /// analysis).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_lock_trapped_mean_ns: Option<f64>,
    /// How it measured, how the child ended, the op percentiles.
    #[serde(flatten)]
    pub facts: SplitLockEffects,
}

/// The split-lock probe's samples (`samples`), keyed by CPU pair or CPU, read and written
/// through the accessors: aligned and split ping-pong ns per handoff (`aligned_lock_ns.cpuA-
/// cpuB`, `split_lock_ns.cpuA-cpuB`), each block's mean ns per op
/// (`split_lock_op_mean_ns.cpuN`) and, where trapped, the same as `split_lock_trapped_ns.cpuN`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SplitLockSamples {
    /// The samples by key.
    #[serde(flatten)]
    pub by_key: BTreeMap<String, Vec<f64>>,
}

/// A series of the split-lock probe's samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SplitLockSeries {
    /// Aligned ping-pong, ns per handoff, per pair.
    AlignedLockNs,
    /// Split ping-pong, ns per handoff, per pair.
    SplitLockNs,
    /// Each block's mean ns per op, per CPU.
    OpMeanNs,
    /// Each trapped block's mean ns per op, per CPU.
    TrappedNs,
}

impl SplitLockSeries {
    fn key(self, cpus: &[usize]) -> String {
        let pair = || match cpus {
            [a, b, ..] => format!("cpu{a}-cpu{b}"),
            _ => String::new(),
        };
        let cpu = || cpus.first().map_or(String::new(), |c| format!("cpu{c}"));
        match self {
            SplitLockSeries::AlignedLockNs => format!("aligned_lock_ns.{}", pair()),
            SplitLockSeries::SplitLockNs => format!("split_lock_ns.{}", pair()),
            SplitLockSeries::OpMeanNs => format!("split_lock_op_mean_ns.{}", cpu()),
            SplitLockSeries::TrappedNs => format!("split_lock_trapped_ns.{}", cpu()),
        }
    }
}

impl SplitLockSamples {
    /// The samples of `series` on `cpus` (the pair, or the initiator first); empty when
    /// absent.
    pub fn get(&self, series: SplitLockSeries, cpus: &[usize]) -> &[f64] {
        self.by_key
            .get(&series.key(cpus))
            .map_or(&[], Vec::as_slice)
    }

    /// Sets the samples of `series` on `cpus`.
    pub fn set(&mut self, series: SplitLockSeries, cpus: &[usize], values: Vec<f64>) {
        self.by_key.insert(series.key(cpus), values);
    }
}

/// The split-lock probe's raw record.
pub type SplitLockRaw = ProbeRaw<SplitLockParams, SplitLockRawEffects, SplitLockSamples>;

/// What the analysis names beside the figures, saved in `effects`: the mechanism and the
/// traps' shape.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SplitLockDerived {
    /// What a split lock turned out to be here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_lock_mechanism: Option<SplitLockMechanism>,
    /// What the trapped ops' times look like, where trapped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_lock_trap_shape: Option<TrapShape>,
}

impl SplitLockDerived {
    /// The effects it replaces.
    const EFFECTS: [&str; 2] = ["split_lock_mechanism", "split_lock_trap_shape"];
}

impl RawRecord for SplitLockDerived {
    fn write_into(&self, result: &mut ProbeResult) {
        for k in Self::EFFECTS {
            result.effects.remove(k);
        }
        result.effects.extend(to_map(self));
    }

    fn read_from(result: &ProbeResult) -> Result<Self, RawError> {
        from_map(&result.effects).map_err(|source| RawError {
            probe: result.name.clone(),
            part: "effects",
            source,
        })
    }
}

/// The split-lock probe's analysis: its figures and the mechanism.
pub type SplitLockAnalysis = WithDerived<SplitLockFigures, SplitLockDerived>;

impl SplitLockFigures {
    /// What one thread pays per split lock, traps included: the per-op mean where the probe
    /// timed ops one by one, else the child's trapped mean, else the core-to-core figure
    /// (files from before per-op timing).
    pub fn cost_per_lock_ns(&self) -> Option<f64> {
        self.split_lock_op_mean_ns
            .as_ref()
            .or(self.split_lock_trapped_ns.as_ref())
            .or(self.split_lock_latency_ns.as_ref())
            .map(|m| m.value)
    }
}

/// What the split-lock probe measured a split lock to be on a machine: the one fact that
/// every sentence about the kernel's or the host's handling of split locks follows (the
/// machine line, the verdict, diagnose's finding), so none of them says what the kernel's
/// mode should do when the machine showed otherwise.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SplitLockSeen {
    /// What a split lock turned out to be.
    pub mechanism: SplitLockMechanism,
    /// What the trapped ops' times looked like, where trapped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shape: Option<TrapShape>,
    /// What one thread paid per split lock, ns ([`SplitLockFigures::cost_per_lock_ns`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_ns: Option<f64>,
}

impl SplitLockSeen {
    /// What a split-lock result shows on `machine`, from its figures and effects: the
    /// mechanism the probe recorded, or for files from before it did, the one its figures
    /// show (`schema::split_lock::classify` of the cost per lock and the machine facts); where
    /// nothing was measured, what the kernel's mode alone implies (fatal, or a mode that
    /// penalises split locks). `None` when none of them names one.
    pub fn of(
        figures: &SplitLockFigures,
        effects: &SplitLockEffects,
        machine: &crate::machine::Machine,
    ) -> Option<SplitLockSeen> {
        let cost_ns = figures.cost_per_lock_ns();
        let killed_by_sigbus = effects
            .split_lock_child
            .as_deref()
            .is_some_and(|c| c.contains("SIGBUS"));
        let (mechanism, shape) = match effects.split_lock_mechanism {
            Some(m) => (m, effects.split_lock_trap_shape),
            None => Self::classified(cost_ns, machine, killed_by_sigbus)?,
        };
        Some(SplitLockSeen {
            mechanism,
            shape,
            cost_ns,
        })
    }

    /// The mechanism a cost per lock shows on `machine` where none was recorded (files from
    /// before per-op timing, costs a diagnosis carries): `schema::split_lock::classify` of the
    /// mean and the machine facts.
    pub fn classified(
        cost_ns: Option<f64>,
        machine: &crate::machine::Machine,
        killed_by_sigbus: bool,
    ) -> Option<(SplitLockMechanism, Option<TrapShape>)> {
        crate::schema::split_lock::classify(&crate::schema::split_lock::MechanismEvidence {
            kernel: machine.split_lock.effective,
            guest: machine.hypervisor.is_some(),
            killed_by_sigbus,
            census: None,
            mean_ns: cost_ns,
        })
    }

    /// Whether a measurement shows it, rather than the kernel's mode alone.
    pub fn measured(&self, effects: &SplitLockEffects) -> bool {
        effects.split_lock_mechanism.is_some() || self.cost_ns.is_some()
    }
}

impl crate::schema::Fingerprint {
    /// What this fingerprint's split-lock probe measured ([`SplitLockSeen::of`]), when it ran
    /// ok and a measurement shows a mechanism.
    pub fn split_lock_seen(&self) -> Option<SplitLockSeen> {
        let figures = self.figures::<SplitLockFigures>()?;
        let effects = self
            .raw::<SplitLockRecord>(probe::SPLIT_LOCK)
            .map(|r| r.effects)
            .unwrap_or_default();
        SplitLockSeen::of(&figures, &effects, &self.machine).filter(|s| s.measured(&effects))
    }
}
