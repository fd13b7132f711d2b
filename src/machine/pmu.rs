//! Whether a hardware PMU is usable: the only reliable test is to open a cycles counter, as
//! `perf stat` would, and keep the errno when it fails. Cloud VMs mostly expose none ("PMU not
//! available due to virtualization"), and diagnose must know before it picks its method.

use serde::{Deserialize, Serialize};

/// Result of trying to open a hardware cycles counter on this process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PmuStatus {
    /// True when a hardware cycles counter opened.
    pub usable: bool,
    /// errno of the failed `perf_event_open`, when it failed.
    pub errno: Option<i32>,
    /// What the failure means, in words.
    pub reason: Option<String>,
}

/// What a failed `perf_event_open` means, by errno: one table for the PMU probe and for
/// diagnose's sampling and counting events, so both read an errno the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PerfErrno {
    /// EACCES / EPERM: `perf_event_paranoid`, a missing capability, or a seccomp/LSM policy.
    NotPermitted,
    /// ESRCH: the task is gone.
    NoSuchTask,
    /// ENOENT / EOPNOTSUPP / ENODEV: the event does not exist here (no PMU).
    NoSuchEvent,
    /// ENOSYS: the kernel has no `perf_event_open`.
    NoSyscall,
    /// EMFILE / ENFILE: out of file descriptors (one event is one descriptor).
    TooManyFiles,
    /// EINVAL: an attribute the kernel rejects, most often a sample frequency above
    /// `kernel.perf_event_max_sample_rate`.
    Invalid,
    /// Anything else.
    Other,
}

impl PerfErrno {
    /// Classifies an errno of `perf_event_open`.
    pub fn of(errno: i32) -> PerfErrno {
        match errno {
            libc::EACCES | libc::EPERM => PerfErrno::NotPermitted,
            libc::ESRCH => PerfErrno::NoSuchTask,
            libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV => PerfErrno::NoSuchEvent,
            libc::ENOSYS => PerfErrno::NoSyscall,
            libc::EMFILE | libc::ENFILE => PerfErrno::TooManyFiles,
            libc::EINVAL => PerfErrno::Invalid,
            _ => PerfErrno::Other,
        }
    }
}

/// Explains a `perf_event_open` errno for a hardware event.
pub fn explain_errno(errno: i32, paranoid: Option<i32>) -> String {
    match PerfErrno::of(errno) {
        PerfErrno::NoSuchEvent => {
            "no hardware PMU is exposed (common in VMs); only software events work".into()
        }
        // User-space-only counting of one's own threads is allowed up to paranoid 2: above
        // that the sysctl refused; at or below, a seccomp or LSM policy did.
        PerfErrno::NotPermitted => match paranoid {
            Some(p) if p <= 2 => format!(
                "refused by a seccomp or LSM policy (kernel.perf_event_paranoid={p} allows it; \
                 grant CAP_PERFMON or allow perf_event_open in the policy)"
            ),
            _ => format!(
                "not permitted by kernel.perf_event_paranoid={} (lower it to 2 for user-space \
                 counting of your own processes, or grant CAP_PERFMON)",
                paranoid.map_or("?".into(), |p| p.to_string())
            ),
        },
        PerfErrno::NoSyscall => "the kernel has no perf_event_open".into(),
        _ => format!(
            "perf_event_open failed: {}",
            std::io::Error::from_raw_os_error(errno)
        ),
    }
}

/// Tries to open a user-space-only hardware cycles counter on the calling thread.
pub fn probe_pmu(paranoid: Option<i32>) -> PmuStatus {
    use perf_event_open_sys::bindings::{
        PERF_COUNT_HW_CPU_CYCLES, PERF_TYPE_HARDWARE, perf_event_attr,
    };
    let mut attr = perf_event_attr {
        type_: PERF_TYPE_HARDWARE,
        size: std::mem::size_of::<perf_event_attr>() as u32,
        config: PERF_COUNT_HW_CPU_CYCLES as u64,
        ..Default::default()
    };
    attr.set_disabled(1);
    // User space only: allowed up to perf_event_paranoid=2 without privileges.
    attr.set_exclude_kernel(1);
    attr.set_exclude_hv(1);
    // SAFETY: attr is a valid, fully initialised perf_event_attr; pid 0 / cpu -1 means this
    // thread on any CPU; the fd is closed at once.
    let fd = unsafe { perf_event_open_sys::perf_event_open(&mut attr, 0, -1, -1, 0) };
    if fd >= 0 {
        // SAFETY: fd was just returned by the kernel and is owned here.
        unsafe { libc::close(fd) };
        return PmuStatus {
            usable: true,
            errno: None,
            reason: None,
        };
    }
    let errno = std::io::Error::last_os_error().raw_os_error().unwrap_or(0);
    PmuStatus {
        usable: false,
        errno: Some(errno),
        reason: Some(explain_errno(errno, paranoid)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errno_explanations_name_the_fix() {
        assert!(explain_errno(libc::ENOENT, Some(2)).contains("no hardware PMU"));
        assert!(explain_errno(libc::EACCES, Some(3)).contains("perf_event_paranoid=3"));
        assert!(explain_errno(libc::EACCES, Some(2)).contains("seccomp or LSM policy"));
        assert_eq!(PerfErrno::of(libc::EMFILE), PerfErrno::TooManyFiles);
        assert_eq!(PerfErrno::of(libc::EINVAL), PerfErrno::Invalid);
        assert_eq!(PerfErrno::of(libc::EPERM), PerfErrno::NotPermitted);
    }

    #[test]
    fn probing_never_panics_and_is_consistent() {
        let s = probe_pmu(Some(2));
        assert_eq!(s.usable, s.errno.is_none());
        assert_eq!(s.usable, s.reason.is_none());
    }
}
