//! The wall-clock recording: where every followed thread's wall time went while it was
//! recorded, from the kernel's own views (the report is made from it by
//! [`crate::diagnose::analyse::wall`]):
//! - each thread's schedstat counts, read every ~100 ms, give its time on a CPU and waiting for
//!   one, whatever the switch rate ([`counts`], the default); or, with `--switches`,
//!   context-switch records (`PERF_RECORD_SWITCH` on the sampling events, unprivileged) time
//!   every interval on and off the CPU and say whether a thread left it preempted (still
//!   runnable) or to sleep ([`timeline`]), at a cost at every switch;
//! - `/proc/PID/task/TID/syscall` and the sleeping thread's stack, looked at every round of the
//!   recorder, say why a thread sleeps and where ([`observe`]); the records say how long
//!   ([`recorder`] joins the two);
//! - who held the CPUs meanwhile: other processes, the hypervisor's steal, a cgroup quota
//!   ([`cpu`]).

pub mod counts;
pub mod cpu;
pub mod observe;
pub mod recorder;
pub mod timeline;

pub use observe::BlockReason;
pub use recorder::{OffCpu, ThreadTimes, WallRecorder, WallRecording};

/// How often the recorder looks at sleeping threads: its poll round.
pub const LOOK_EVERY_MS: u64 = 50;

/// How often each thread's counts are read (with its other figures).
pub const COUNTS_EVERY_MS: u64 = 100;

/// Where the wall-clock view's state times came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WallSource {
    /// The kernel's context-switch records: every interval timed, a preemption told from a
    /// sleep (`--switches`; every file saved before the counts were the default).
    #[default]
    SwitchRecords,
    /// Each thread's `/proc/PID/task/TID/schedstat` counts, read every ~100 ms: time on a CPU
    /// and waiting for one exact, blocked the rest; nothing done at a switch.
    Schedstat,
}

impl WallSource {
    /// True where this kernel keeps the counts: this thread's schedstat has its three fields
    /// and has been run at least once (a kernel without `CONFIG_SCHED_INFO` has no file, one with it
    /// switched off writes zeros).
    pub fn counts_available() -> bool {
        let Ok(text) = std::fs::read_to_string("/proc/thread-self/schedstat") else {
            return false;
        };
        let f: Vec<u64> = text
            .split_whitespace()
            .filter_map(|f| f.parse().ok())
            .collect();
        f.len() == 3 && f[2] > 0
    }
}
