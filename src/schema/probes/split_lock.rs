//! The split-lock probe's figures: a `lock add` on a value across two cache lines against an
//! aligned one, timed core to core (the split ping-pong) or, where the kernel traps split
//! locks, in a child; and single split locks timed one by one. (The probe still writes its raw
//! record by key; its typed raw record is to come.)

use crate::names::probe;

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
