//! The wall-clock recording: where every followed thread's wall time went while it was
//! recorded, from the kernel's own views (the report is made from it by
//! [`crate::diagnose::analyse::wall`]):
//! - context-switch records (`PERF_RECORD_SWITCH` on the sampling events, unprivileged) time
//!   every interval on and off the CPU and say whether a thread left it preempted (still
//!   runnable) or to sleep ([`timeline`]);
//! - `/proc/PID/task/TID/syscall` and the sleeping thread's stack, looked at every round of the
//!   recorder, say why a thread sleeps and where ([`observe`]); the records say how long
//!   ([`recorder`] joins the two);
//! - who held the CPUs meanwhile: other processes, the hypervisor's steal, a cgroup quota
//!   ([`cpu`]).

pub mod cpu;
pub mod observe;
pub mod recorder;
pub mod timeline;

pub use observe::BlockReason;
pub use recorder::{OffCpu, ThreadTimes, WallRecorder, WallRecording};

/// How often the recorder looks at sleeping threads: its poll round.
pub const LOOK_EVERY_MS: u64 = 50;
