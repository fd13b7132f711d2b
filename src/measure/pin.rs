//! Pinning the calling thread to one CPU, and proving that it took.
//!
//! `sched_setaffinity` can succeed and still leave the thread elsewhere for a moment, and a
//! cpuset (containers, `taskset`) can forbid the CPU outright. A probe that thinks it is
//! pinned but is not measures the wrong thing, so [`pin_to_cpu`] reads the mask back and waits
//! until `sched_getcpu` reports the CPU before it returns.

use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::unistd::Pid;
use std::time::{Duration, Instant};

/// Why pinning did not take.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum PinError {
    /// The CPU is outside this process's allowed set (cpuset, taskset) or offline.
    #[error("CPU {cpu} is not available to this process (allowed: {allowed})")]
    NotAllowed {
        /// The CPU asked for.
        cpu: usize,
        /// The allowed CPUs, as a list like `0-3,6`.
        allowed: String,
    },
    /// The affinity call failed.
    #[error("sched_setaffinity to CPU {cpu} failed: {errno}")]
    SetAffinity {
        /// The CPU asked for.
        cpu: usize,
        /// The error the kernel returned.
        errno: nix::errno::Errno,
    },
    /// The call succeeded but the thread never ran on the CPU.
    #[error("pinned to CPU {cpu} but the thread still runs on CPU {running_on}")]
    DidNotMigrate {
        /// The CPU asked for.
        cpu: usize,
        /// Where the thread was last seen.
        running_on: usize,
    },
}

pub use crate::machine::allowed_cpus;

/// Formats CPU numbers as a Linux cpu list (`0-3,6`).
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < cpus.len() {
        let start = cpus[i];
        let mut end = start;
        while i + 1 < cpus.len() && cpus[i + 1] == end + 1 {
            i += 1;
            end = cpus[i];
        }
        parts.push(if start == end {
            start.to_string()
        } else {
            format!("{start}-{end}")
        });
        i += 1;
    }
    parts.join(",")
}

/// The CPU the calling thread is running on now.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu takes no arguments and only returns a number.
    let c = unsafe { libc::sched_getcpu() };
    (c >= 0).then_some(c as usize)
}

/// Restores the thread's previous affinity when dropped.
#[derive(Debug)]
pub struct Pinned {
    /// The CPU the thread is pinned to.
    pub cpu: usize,
    previous: Option<CpuSet>,
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if let Some(prev) = self.previous.take() {
            let _ = sched_setaffinity(Pid::from_raw(0), &prev);
        }
    }
}

/// Pins the calling thread to `cpu` and checks that it runs there. The previous affinity
/// comes back when the returned guard drops.
pub fn pin_to_cpu(cpu: usize) -> Result<Pinned, PinError> {
    let allowed = allowed_cpus();
    if !allowed.contains(&cpu) {
        return Err(PinError::NotAllowed {
            cpu,
            allowed: format_cpu_list(&allowed),
        });
    }
    let previous = sched_getaffinity(Pid::from_raw(0)).ok();
    let mut set = CpuSet::new();
    set.set(cpu)
        .map_err(|errno| PinError::SetAffinity { cpu, errno })?;
    sched_setaffinity(Pid::from_raw(0), &set)
        .map_err(|errno| PinError::SetAffinity { cpu, errno })?;
    let guard = Pinned { cpu, previous };
    // The kernel migrates the thread at its next scheduling point; yield until it has.
    let deadline = Instant::now() + Duration::from_millis(100);
    loop {
        let now_on = current_cpu().unwrap_or(usize::MAX);
        if now_on == cpu {
            return Ok(guard);
        }
        if Instant::now() > deadline {
            return Err(PinError::DidNotMigrate {
                cpu,
                running_on: now_on,
            });
        }
        std::thread::yield_now();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_use_ranges() {
        assert_eq!(format_cpu_list(&[0, 1, 2, 3, 6, 8, 9]), "0-3,6,8-9");
        assert_eq!(format_cpu_list(&[5]), "5");
        assert_eq!(format_cpu_list(&[]), "");
    }

    #[test]
    fn pinning_to_an_allowed_cpu_takes_and_is_undone() {
        let before = allowed_cpus();
        let cpu = *before.last().unwrap();
        std::thread::spawn(move || {
            let g = pin_to_cpu(cpu).unwrap();
            assert_eq!(current_cpu(), Some(cpu));
            assert_eq!(allowed_cpus(), vec![cpu]);
            drop(g);
            assert_eq!(allowed_cpus(), before);
        })
        .join()
        .unwrap();
    }

    #[test]
    fn pinning_to_a_cpu_outside_the_set_is_an_error() {
        let err = pin_to_cpu(CpuSet::count() + 10).unwrap_err();
        assert!(matches!(err, PinError::NotAllowed { .. }), "{err}");
    }
}
