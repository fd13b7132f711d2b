//! The split-lock neighbour probe's figures: what one core's split locks do to another core's
//! DRAM latency and bandwidth. (The probe still writes its raw record by key; its typed raw
//! record is to come.)

use crate::names::probe;

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
