//! The split-lock neighbour probe's result: what one core's split locks do to another core's
//! DRAM latency and bandwidth. The raw record is the set-up, what the aggressor achieved and
//! the victim's samples per condition (the loaded ones only those taken while the aggressor
//! ran, [`LoadedSamplesKept`]); the figures are analysed from them.

use crate::machine::SplitLockMode;
use crate::measure::buffer::PageBacking;
use crate::names::probe;
use crate::schema::figures::ProbeRaw;
use crate::schema::probes::split_lock::SplitLockMeasured;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

crate::figures! {
    /// What the split-lock neighbour probe reports, in report order.
    pub struct SplitLockNeighbourFigures for probe::SPLIT_LOCK_NEIGHBOUR {
        /// Split locks the aggressor took per second of bus locking, locks/s.
        aggressor_split_locks_per_s / AGGRESSOR_SPLIT_LOCKS_PER_S,
        /// The victim's DRAM latency alone, ns (median).
        victim_latency_ns / VICTIM_LATENCY_NS,
        /// The victim's DRAM latency while the aggressor split-locks, ns (median).
        victim_latency_under_split_locks_ns / VICTIM_LATENCY_UNDER_SPLIT_LOCKS_NS,
        /// The victim's read bandwidth alone, GB/s (median).
        victim_bandwidth_gb_s / VICTIM_BANDWIDTH_GB_S,
        /// The victim's read bandwidth while the aggressor split-locks, GB/s (median).
        victim_bandwidth_under_split_locks_gb_s / VICTIM_BANDWIDTH_UNDER_SPLIT_LOCKS_GB_S,
        /// The victim's DRAM latency alone, core cycles.
        victim_latency_cycles / VICTIM_LATENCY_CYCLES,
        /// The victim's DRAM latency under split locks, core cycles.
        victim_latency_under_split_locks_cycles / VICTIM_LATENCY_UNDER_SPLIT_LOCKS_CYCLES,
        /// Latency under split locks over alone, paired by block (ratio; higher is worse).
        split_lock_neighbour_latency_ratio / SPLIT_LOCK_NEIGHBOUR_LATENCY_RATIO,
        /// Bandwidth under split locks over alone, paired by block (ratio; lower is worse).
        split_lock_neighbour_bandwidth_ratio / SPLIT_LOCK_NEIGHBOUR_BANDWIDTH_RATIO,
    }
}

/// How the split-lock neighbour probe ran (`params`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SplitLockNeighbourParams {
    /// The victim's CPU, then the aggressor's.
    pub cpus: Vec<usize>,
    /// Bus locking in total over the loaded rounds, s (the profile's, or `--duration`).
    pub duration_s: f64,
    /// Alone/loaded rounds, alternated so drift hits both sides alike.
    pub rounds: usize,
    /// Size of the victim's buffer, bytes.
    pub buffer_bytes: u64,
    /// Links of the pointer chase followed per latency sample.
    pub chase_steps_per_sample: u64,
    /// Bytes read per bandwidth sample.
    pub read_bytes_per_sample: u64,
    /// Share of the busiest tenth's split-lock rate a loaded sample needs to count as loaded.
    pub min_aggressor_duty: f64,
}

/// Loaded samples kept (taken while the aggressor ran) and taken, per workload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadedSamplesKept {
    /// Latency samples: `[kept, taken]`.
    pub latency: [usize; 2],
    /// Bandwidth samples: `[kept, taken]`.
    pub bandwidth: [usize; 2],
}

/// What took effect when the split-lock neighbour probe ran (`effects`). Files from before
/// the aggressor was timed alone first lack `aggressor_trapped`, and keep their saved figures:
/// their aggressor was never checked for traps, nor their buffer sized by it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SplitLockNeighbourEffects {
    /// The victim's CPU (its samples are keyed by it).
    pub victim_cpu: usize,
    /// The aggressor's CPU.
    pub aggressor_cpu: usize,
    /// CPUs the victim and the aggressor were pinned to.
    pub pinned_cpus: Vec<usize>,
    /// What backs the victim's buffer (transparent huge pages asked for); older files say
    /// `huge_page_bytes` instead.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page_backing: Option<PageBacking>,
    /// The victim's vector loads (`avx512`, `avx2`, `sse2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vector_isa: Option<String>,
    /// The victim's core clock, GHz, estimated on its CPU (absent when it could not be).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_clock_ghz: Option<f64>,
    /// What this kernel does with split locks.
    pub kernel_split_lock_mode: SplitLockMode,
    /// Hardware (in-process) or the kernel's mitigation (where the kernel acts).
    pub split_lock_measured: SplitLockMeasured,
    /// Split locks the aggressor executed during the loaded rounds.
    pub aggressor_split_locks: u64,
    /// Seconds the aggressor spent locking during the loaded rounds.
    pub bus_locking_s: f64,
    /// The aggressor's mean ns per split lock, timed one by one alone before the victim
    /// started, preemptions discounted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub aggressor_alone_ns_per_lock: Option<f64>,
    /// The aggressor's split locks are trapped (by the kernel's mode, or by the split-lock
    /// probe's rule on its timed locks): it then locks one at a time and the victim's buffer
    /// is the smallest.
    pub aggressor_trapped: bool,
    /// Loaded samples kept and taken.
    pub loaded_samples_kept: LoadedSamplesKept,
}

/// The victim's samples on one CPU (loaded ones only those kept).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct VictimSamples {
    /// DRAM latency alone, ns per link.
    pub latency_ns: Vec<f64>,
    /// DRAM latency under split locks, ns per link.
    pub latency_under_split_locks_ns: Vec<f64>,
    /// Read bandwidth alone, GB/s.
    pub bandwidth_gb_s: Vec<f64>,
    /// Read bandwidth under split locks, GB/s.
    pub bandwidth_under_split_locks_gb_s: Vec<f64>,
}

/// The split-lock neighbour probe's samples (`samples`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SplitLockNeighbourSamples {
    /// The aggressor's split locks per microsecond during every loaded latency sample, kept
    /// or not.
    #[serde(rename = "aggressor_split_locks_per_us.latency", default)]
    pub aggressor_split_locks_per_us_latency: Vec<f64>,
    /// The same during every loaded bandwidth sample.
    #[serde(rename = "aggressor_split_locks_per_us.bandwidth", default)]
    pub aggressor_split_locks_per_us_bandwidth: Vec<f64>,
    /// The samples keyed by place, read and written through [`Self::victim`] and
    /// [`Self::set_victim`]: the victim's per condition on its CPU
    /// (`victim_latency_ns.cpuN`...).
    #[serde(flatten)]
    pub by_key: BTreeMap<String, Vec<f64>>,
}

/// The keys of the victim's samples, in [`VictimSamples`]' order, before `.cpuN`.
const VICTIM_KEYS: [&str; 4] = [
    "victim_latency_ns",
    "victim_latency_under_split_locks_ns",
    "victim_bandwidth_gb_s",
    "victim_bandwidth_under_split_locks_gb_s",
];

impl SplitLockNeighbourSamples {
    /// The victim's samples on `cpu` (a condition without samples is empty).
    pub fn victim(&self, cpu: usize) -> VictimSamples {
        let get = |key: &str| {
            self.by_key
                .get(&format!("{key}.cpu{cpu}"))
                .cloned()
                .unwrap_or_default()
        };
        VictimSamples {
            latency_ns: get(VICTIM_KEYS[0]),
            latency_under_split_locks_ns: get(VICTIM_KEYS[1]),
            bandwidth_gb_s: get(VICTIM_KEYS[2]),
            bandwidth_under_split_locks_gb_s: get(VICTIM_KEYS[3]),
        }
    }

    /// Sets the victim's samples on `cpu`.
    pub fn set_victim(&mut self, cpu: usize, v: VictimSamples) {
        let values = [
            v.latency_ns,
            v.latency_under_split_locks_ns,
            v.bandwidth_gb_s,
            v.bandwidth_under_split_locks_gb_s,
        ];
        for (key, values) in VICTIM_KEYS.iter().zip(values) {
            self.by_key.insert(format!("{key}.cpu{cpu}"), values);
        }
    }
}

/// The split-lock neighbour probe's raw record.
pub type SplitLockNeighbourRaw =
    ProbeRaw<SplitLockNeighbourParams, SplitLockNeighbourEffects, SplitLockNeighbourSamples>;
