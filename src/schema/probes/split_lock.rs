//! The split-lock probe's figures: a `lock add` on a value across two cache lines against an
//! aligned one, timed core to core (the split ping-pong) or, where the kernel traps split
//! locks, in a child; and single split locks timed one by one. (The probe still writes its raw
//! record by key; its typed raw record is to come.)

use crate::names::probe;
use crate::schema::figures::ProbeRaw;
use crate::schema::split_lock::{SplitLockMechanism, TrapShape};
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

/// Percentiles of single split locks timed one by one, ns (`p50`, `p90`; the others the
/// probe also writes are not read).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct OpPercentilesNs {
    /// Median op, ns.
    pub p50: f64,
    /// 90th percentile op, ns.
    pub p90: f64,
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

/// The split-lock probe's record as its readers see it: typed effects; params and samples
/// still by key until the probe is split into measure and analyse.
pub type SplitLockRecord =
    ProbeRaw<BTreeMap<String, serde_json::Value>, SplitLockEffects, BTreeMap<String, Vec<f64>>>;
