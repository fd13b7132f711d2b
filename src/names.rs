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
    /// `c2c_latency_cycles`.
    pub const C2C_LATENCY_CYCLES: &str = "c2c_latency_cycles";
    /// `c2c_latency_ns`.
    pub const C2C_LATENCY_NS: &str = "c2c_latency_ns";
    /// `c2c_load_store_latency_ns`.
    pub const C2C_LOAD_STORE_LATENCY_NS: &str = "c2c_load_store_latency_ns";
    /// `core_clock_ghz`.
    pub const CORE_CLOCK_GHZ: &str = "core_clock_ghz";
    /// `dram_latency_4k_ns`.
    pub const DRAM_LATENCY_4K_NS: &str = "dram_latency_4k_ns";
    /// `dram_latency_huge_ns`.
    pub const DRAM_LATENCY_HUGE_NS: &str = "dram_latency_huge_ns";
    /// `dram_latency_ns`.
    pub const DRAM_LATENCY_NS: &str = "dram_latency_ns";
    /// `false_sharing_atomic_ratio`.
    pub const FALSE_SHARING_ATOMIC_RATIO: &str = "false_sharing_atomic_ratio";
    /// `false_sharing_ratio`.
    pub const FALSE_SHARING_RATIO: &str = "false_sharing_ratio";
    /// `false_sharing_reader_ratio`.
    pub const FALSE_SHARING_READER_RATIO: &str = "false_sharing_reader_ratio";
    /// `false_sharing_writer_ratio`.
    pub const FALSE_SHARING_WRITER_RATIO: &str = "false_sharing_writer_ratio";
    /// `huge_page_read_gain_ratio`.
    pub const HUGE_PAGE_READ_GAIN_RATIO: &str = "huge_page_read_gain_ratio";
    /// `packed_atomic_increment_ns`.
    pub const PACKED_ATOMIC_INCREMENT_NS: &str = "packed_atomic_increment_ns";
    /// `packed_increment_ns`.
    pub const PACKED_INCREMENT_NS: &str = "packed_increment_ns";
    /// `packed_reader_load_ns`.
    pub const PACKED_READER_LOAD_NS: &str = "packed_reader_load_ns";
    /// `packed_writer_store_ns`.
    pub const PACKED_WRITER_STORE_NS: &str = "packed_writer_store_ns";
    /// `padded_increment_ns`.
    pub const PADDED_INCREMENT_NS: &str = "padded_increment_ns";
    /// `padded_reader_load_ns`.
    pub const PADDED_READER_LOAD_NS: &str = "padded_reader_load_ns";
    /// `padded_writer_store_ns`.
    pub const PADDED_WRITER_STORE_NS: &str = "padded_writer_store_ns";
    /// `private_atomic_increment_ns`.
    pub const PRIVATE_ATOMIC_INCREMENT_NS: &str = "private_atomic_increment_ns";
    /// `read_bw_1t_gbs`.
    pub const READ_BW_1T_GBS: &str = "read_bw_1t_gbs";
    /// `shared_atomic_increment_ns`.
    pub const SHARED_ATOMIC_INCREMENT_NS: &str = "shared_atomic_increment_ns";
    /// `tlb_penalty_ratio`.
    pub const TLB_PENALTY_RATIO: &str = "tlb_penalty_ratio";
    /// `tlb_reach_bytes`.
    pub const TLB_REACH_BYTES: &str = "tlb_reach_bytes";
    /// `true_sharing_ratio`.
    pub const TRUE_SHARING_RATIO: &str = "true_sharing_ratio";
}

/// Effects read outside the probe that records them.
pub mod effect {
    /// mem-latency: why the sweep stops short of the size it wanted.
    pub const MAX_SIZE_CAPPED: &str = "max_size_capped";
    /// bandwidth: why the buffers are smaller than wanted.
    pub const BUFFER_CAPPED: &str = "buffer_capped";
    /// mem-latency and bandwidth: what a cgroup memory limit or `RLIMIT_AS` left them.
    pub const MEMORY_LIMIT: &str = "memory_limit";
}
