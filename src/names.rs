//! Probe identifiers, each written once: `check` and `probe NAME` take them, fingerprints
//! store them, and each probe's typed figures (`schema::probes`) name the probe they belong to.
//! Metric names are no longer here: a metric's name is its field's name in its probe's
//! figures type, and readers use that type's `FigureId` constants.

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
