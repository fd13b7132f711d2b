//! Probe and metric identifiers, each written once. A probe writes its figures under these
//! names and every reader (hazards, diff's drift rules, the report) looks them up by the same
//! constant, so renaming one is one edit and a reader cannot silently miss a renamed figure.
//! Names built from parts (handoff's per-runtime figures) are built by `schema::handoff`.
//! The metrics listed are those more than one module names; the others stay in their probe.

/// Probe identifiers, as `check` and `probe NAME` take them and fingerprints store them.
pub mod probe {
    /// `bandwidth`.
    pub const BANDWIDTH: &str = "bandwidth";
    /// `c2c`.
    pub const C2C: &str = "c2c";
    /// `handoff`.
    pub const HANDOFF: &str = "handoff";
    /// `mem-latency`.
    pub const MEM_LATENCY: &str = "mem-latency";
    /// `pause`.
    pub const PAUSE: &str = "pause";
    /// `sharing`.
    pub const SHARING: &str = "sharing";
    /// `split-lock`.
    pub const SPLIT_LOCK: &str = "split-lock";
    /// `split-lock-neighbour`.
    pub const SPLIT_LOCK_NEIGHBOUR: &str = "split-lock-neighbour";
    /// Every probe, in name order.
    pub const ALL: &[&str] = &[
        BANDWIDTH,
        C2C,
        HANDOFF,
        MEM_LATENCY,
        PAUSE,
        SHARING,
        SPLIT_LOCK,
        SPLIT_LOCK_NEIGHBOUR,
    ];
}

/// Metric names shared between the probe that writes them and the modules that read them
/// (units in the name: `_ns`, `_cycles`, `_ratio`, `_bytes`, `_gbs`).
pub mod metric {
    /// `aggressor_split_locks_per_s`.
    pub const AGGRESSOR_SPLIT_LOCKS_PER_S: &str = "aggressor_split_locks_per_s";
    /// `aligned_lock_latency_ns`.
    pub const ALIGNED_LOCK_LATENCY_NS: &str = "aligned_lock_latency_ns";
    /// `core_clock_ghz`.
    pub const CORE_CLOCK_GHZ: &str = "core_clock_ghz";
    /// `pause_cycles`.
    pub const PAUSE_CYCLES: &str = "pause_cycles";
    /// `pause_ns`.
    pub const PAUSE_NS: &str = "pause_ns";
    /// `pause_sustained_ns`.
    pub const PAUSE_SUSTAINED_NS: &str = "pause_sustained_ns";
    /// `split_lock_latency_ns`.
    pub const SPLIT_LOCK_LATENCY_NS: &str = "split_lock_latency_ns";
    /// `split_lock_neighbour_bandwidth_ratio`.
    pub const SPLIT_LOCK_NEIGHBOUR_BANDWIDTH_RATIO: &str = "split_lock_neighbour_bandwidth_ratio";
    /// `split_lock_neighbour_latency_ratio`.
    pub const SPLIT_LOCK_NEIGHBOUR_LATENCY_RATIO: &str = "split_lock_neighbour_latency_ratio";
    /// `split_lock_op_mean_ns`.
    pub const SPLIT_LOCK_OP_MEAN_NS: &str = "split_lock_op_mean_ns";
    /// `split_lock_ratio`.
    pub const SPLIT_LOCK_RATIO: &str = "split_lock_ratio";
}
