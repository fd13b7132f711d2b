//! The measurement core every probe builds on: the clock ([`clock`]), the core-clock estimate
//! that turns nanoseconds into core cycles ([`freq`]), pinning that proves it took ([`pin`]),
//! threads that the kernel may refuse, refused with a reason instead of a panic ([`threads`]),
//! buffers with a checked page size ([`buffer`]), the random pointer-chase cycle every latency
//! probe follows ([`chase`]), where a split lock sits in a line ([`SPLIT_OFFSET`]), and the
//! progress hook probes report through ([`Progress`]). The statistics over what is measured
//! are [`crate::stats`]'s. Nothing here prints.

/// Offset, from a 64-byte line boundary, of an 8-byte value that straddles that line and the
/// next (bytes 60..68): the split lock the split-lock probe, its locker child and the c2c
/// ping-pong's split variant all take.
pub const SPLIT_OFFSET: usize = 60;

pub mod buffer;
pub mod chase;
pub mod clock;
pub mod freq;
pub mod pin;
pub mod threads;

pub use buffer::{Buffer, PageBacking, PageKind};
pub use clock::{Clock, ClockInfo, ClockSource};
pub use freq::{CoreClock, estimate_core_clock};
pub use pin::{PinError, Pinned, allowed_cpus, pin_to_cpu};
pub use threads::ThreadError;

/// How a long measurement reports progress. The library calls it only between timed
/// sections; the binary decides how (or whether) to draw it.
pub trait Progress: Sync {
    /// A new phase with `total` steps begins.
    fn begin(&self, label: &str, total: u64);
    /// `steps` more steps are done.
    fn advance(&self, steps: u64);
    /// The phase is over.
    fn finish(&self);
}

/// Progress that goes nowhere (tests, `--json` runs piped elsewhere).
#[derive(Debug, Default, Clone, Copy)]
pub struct NoProgress;

impl Progress for NoProgress {
    fn begin(&self, _label: &str, _total: u64) {}
    fn advance(&self, _steps: u64) {}
    fn finish(&self) {}
}
