//! Each probe's typed result, one module per probe: its headline figures (a [`Figures`] type,
//! declared with [`crate::figures!`]: one `Option<Metric>` field per figure, named as the
//! metric is named in the file, in report order) and its raw record (a
//! [`ProbeRaw`](super::figures::ProbeRaw) of typed params, effects and samples: what the probe
//! measured and a saved file keeps, so this build analyses it again).
//!
//! The doc comments on these types are the reference for a probe's part of the fingerprint
//! (`docs/schema.md` points here). A field an older file lacks is `#[serde(default)]`, or,
//! where the analysis needs it, required: a file that lacks it keeps its saved figures.
//! Samples keyed by a place (`pause_ns.cpu3`) are read and written by typed accessors here,
//! so the key strings live in this module alone.
//!
//! [`Figures`]: super::figures::Figures

pub mod bandwidth;
pub mod c2c;
pub mod handoff;
pub mod mem_latency;
pub mod pause;
pub mod sharing;
pub mod split_lock;
pub mod split_lock_neighbour;
