//! The sharing probe's result (`probes::sharing`): false sharing in four access patterns
//! (fields packed on one line against padded apart) and true sharing (one atomic written by
//! every thread against private ones).

use crate::names::probe;
use crate::schema::figures::ProbeRaw;
use serde::{Deserialize, Serialize};

crate::figures! {
    /// What the sharing probe reports, in report order: per-operation times (ns, then core
    /// cycles when the core clock was estimated), then the paired ratios.
    pub struct SharingFigures for probe::SHARING {
        /// Plain increments, every thread's counter on one line, ns per increment (median).
        packed_increment_ns / PACKED_INCREMENT_NS,
        /// Plain increments, counters 128 bytes apart, ns per increment (median).
        padded_increment_ns / PADDED_INCREMENT_NS,
        /// `lock xadd` increments, counters on one line, ns per increment (median).
        packed_atomic_increment_ns / PACKED_ATOMIC_INCREMENT_NS,
        /// `lock xadd` increments, counters 128 bytes apart, ns per increment (median).
        private_atomic_increment_ns / PRIVATE_ATOMIC_INCREMENT_NS,
        /// `lock xadd` increments of one counter every thread shares, ns (median).
        shared_atomic_increment_ns / SHARED_ATOMIC_INCREMENT_NS,
        /// `lock xadd` increments by one thread alone, ns (median).
        single_thread_atomic_increment_ns / SINGLE_THREAD_ATOMIC_INCREMENT_NS,
        /// The readers' loads of a field beside the written one on the same line, ns (median).
        packed_reader_load_ns / PACKED_READER_LOAD_NS,
        /// The readers' loads of a field 128 bytes from the written one, ns (median).
        padded_reader_load_ns / PADDED_READER_LOAD_NS,
        /// The writer's stores beside the readers' field on one line, ns (median).
        packed_writer_store_ns / PACKED_WRITER_STORE_NS,
        /// The writer's stores 128 bytes from the readers' field, ns (median).
        padded_writer_store_ns / PADDED_WRITER_STORE_NS,
        /// `packed_increment_ns` in core cycles.
        packed_increment_cycles / PACKED_INCREMENT_CYCLES,
        /// `padded_increment_ns` in core cycles.
        padded_increment_cycles / PADDED_INCREMENT_CYCLES,
        /// `packed_atomic_increment_ns` in core cycles.
        packed_atomic_increment_cycles / PACKED_ATOMIC_INCREMENT_CYCLES,
        /// `private_atomic_increment_ns` in core cycles.
        private_atomic_increment_cycles / PRIVATE_ATOMIC_INCREMENT_CYCLES,
        /// `shared_atomic_increment_ns` in core cycles.
        shared_atomic_increment_cycles / SHARED_ATOMIC_INCREMENT_CYCLES,
        /// `single_thread_atomic_increment_ns` in core cycles.
        single_thread_atomic_increment_cycles / SINGLE_THREAD_ATOMIC_INCREMENT_CYCLES,
        /// `packed_reader_load_ns` in core cycles.
        packed_reader_load_cycles / PACKED_READER_LOAD_CYCLES,
        /// `padded_reader_load_ns` in core cycles.
        padded_reader_load_cycles / PADDED_READER_LOAD_CYCLES,
        /// `packed_writer_store_ns` in core cycles.
        packed_writer_store_cycles / PACKED_WRITER_STORE_CYCLES,
        /// `padded_writer_store_ns` in core cycles.
        padded_writer_store_cycles / PADDED_WRITER_STORE_CYCLES,
        /// Plain increments packed over padded, ratio (median of the paired ratios).
        false_sharing_ratio / FALSE_SHARING_RATIO,
        /// `lock xadd` increments packed over private, ratio (paired).
        false_sharing_atomic_ratio / FALSE_SHARING_ATOMIC_RATIO,
        /// The readers' loads packed over padded, ratio (paired).
        false_sharing_reader_ratio / FALSE_SHARING_READER_RATIO,
        /// The writer's stores packed over padded, ratio (paired).
        false_sharing_writer_ratio / FALSE_SHARING_WRITER_RATIO,
        /// One shared atomic over private ones, ratio (paired).
        true_sharing_ratio / TRUE_SHARING_RATIO,
    }
}

impl SharingFigures {
    /// The paired ratios, which a run whose threads did not run as separate cores cannot give.
    pub const RATIOS: [crate::schema::figures::FigureId; 5] = [
        SharingFigures::FALSE_SHARING_RATIO,
        SharingFigures::FALSE_SHARING_ATOMIC_RATIO,
        SharingFigures::FALSE_SHARING_READER_RATIO,
        SharingFigures::FALSE_SHARING_WRITER_RATIO,
        SharingFigures::TRUE_SHARING_RATIO,
    ];
}

/// How the sharing probe ran (`params`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SharingParams {
    /// The CPUs, one thread each, in thread order.
    pub cpus: Vec<usize>,
    /// Threads (one per CPU).
    pub threads: usize,
    /// Samples per pattern (every pattern runs once in each, in ABBA order).
    pub samples: usize,
    /// Plain increments per thread per sample.
    pub increments_per_thread: u64,
    /// `lock xadd` increments per thread per sample. Files from builds before the atomic
    /// pattern lack it, and are not analysed again: those builds took each ratio as a ratio of
    /// medians, without an interval, and their saved figures stand (a verdict judged again on
    /// paired ratios would move on a corpus machine).
    pub atomic_increments_per_thread: u64,
    /// The writer's stores per sample; absent in files from builds before the reader pattern.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer_stores: Option<u64>,
    /// Bytes between two threads' fields when packed (on one line).
    pub packed_stride_bytes: u64,
    /// Bytes between two threads' fields when padded (two lines apart).
    pub padded_stride_bytes: u64,
}

/// One attempt's check of whether the threads ran as separate cores.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SeparateCoresCheck {
    /// Median shared over private atomic time, ratio (`null` when not measured).
    pub true_sharing_ratio: Option<f64>,
    /// Median private atomic time with every thread over one thread alone, ratio.
    pub private_vs_alone_ratio: Option<f64>,
    /// Median overlap of the threads' spans in the atomic runs (time all ran at once over the
    /// time any ran), 0-1.
    pub span_overlap: Option<f64>,
    /// Whether the attempt ran as separate cores, as the probe judged it while measuring.
    pub separate_cores: bool,
    /// Why not, when not (a sentence, as the probe said it while measuring).
    #[serde(default)]
    pub why_not: Option<String>,
}

/// What took effect in the sharing probe (`effects`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SharingEffects {
    /// The CPUs the threads were pinned to.
    pub pinned_cpus: Vec<usize>,
    /// Lines the packed counters took (eight counters a line).
    pub packed_lines: usize,
    /// Whether the topology placed every CPU on a different core; absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topology_distinct_cores: Option<bool>,
    /// Attempts made (the probe measures again when the threads did not run as separate
    /// cores); absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<usize>,
    /// Each attempt's check, in order; the last is the attempt whose samples are saved.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub separate_cores_checks: Vec<SeparateCoresCheck>,
    /// Whether the last attempt ran as separate cores; absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub separate_cores: Option<bool>,
    /// The first CPU's core clock, GHz, when it could be estimated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_clock_ghz: Option<f64>,
}

/// The sharing probe's samples: per pattern, ns per operation of each sample (every thread's,
/// or the readers' mean), sample `i` of every pattern from the same moment. Patterns a build
/// did not measure are empty (the first four every build measured).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SharingSamples {
    /// Plain increments, packed, ns.
    pub packed_increment_ns: Vec<f64>,
    /// Plain increments, padded, ns.
    pub padded_increment_ns: Vec<f64>,
    /// `lock xadd` increments, packed, ns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packed_atomic_increment_ns: Vec<f64>,
    /// `lock xadd` increments, padded (private), ns.
    pub private_atomic_increment_ns: Vec<f64>,
    /// `lock xadd` increments of one shared counter, ns.
    pub shared_atomic_increment_ns: Vec<f64>,
    /// `lock xadd` increments by one thread alone, ns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub single_thread_atomic_increment_ns: Vec<f64>,
    /// The readers' loads, packed, ns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packed_reader_load_ns: Vec<f64>,
    /// The readers' loads, padded, ns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub padded_reader_load_ns: Vec<f64>,
    /// The writer's stores, packed, ns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packed_writer_store_ns: Vec<f64>,
    /// The writer's stores, padded, ns.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub padded_writer_store_ns: Vec<f64>,
}

/// The sharing probe's raw record.
pub type SharingRaw = ProbeRaw<SharingParams, SharingEffects, SharingSamples>;
