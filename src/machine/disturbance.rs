//! What else the CPUs did while something was measured: the cgroup's CPU quota throttling
//! (`cpu.stat`, v1 and v2, at every level from the process's cgroup up to the top of what the
//! mount shows, since a parent's quota stops its children too), steal time on the CPUs
//! watched (`/proc/stat`), their busy time less this process's own CPU time (other processes
//! running there), and how long this process's threads waited on a run queue
//! (`/proc/self/task/TID/schedstat`, second field: `run_delay`, ns spent runnable but not
//! running; Documentation/scheduler/sched-stats.rst).
//!
//! [`Watch::start`] reads every counter, [`Watch::finish`] reads them again and returns the
//! differences as a [`CpuWindow`]. It reuses [`super::cgroup`] and [`super::cpu_time`] (written
//! for `diagnose`'s CPU-wait analysis); what counts as disturbed is decided above, on the
//! window's figures (`crate::schema::disturbance`).
//!
//! Limits of each reading, said where the figures are documented (docs/schema.md):
//! - run-queue delay covers the threads alive at both ends of the window (the thread that
//!   calls [`Watch::start`], which is the one that times a single-threaded probe); threads
//!   that start and end inside it take their schedstat with them. Other tasks running on the
//!   CPUs those threads used still show in the busy time.
//! - `/proc/stat` counts in ticks (10 ms at USER_HZ 100) while getrusage counts in ns, so the
//!   others' busy time of a window carries an error of about two ticks per CPU, which
//!   `crate::schema::disturbance::Resolution` allows for.
//! - this process's CPU time includes its children's once they have been waited for (a
//!   child still running when the window ends counts as another task).

use super::cgroup::{ProcessCgroup, read_self_cgroup};
use super::cpu_time::{CpuTimeSnapshot, CpuTimeWindow, cpu_time_snapshot, user_hz};
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::time::Instant;

/// What the counters said over one window.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CpuWindow {
    /// The window's wall time.
    pub wall_ns: u64,
    /// The CPUs whose time was read (those the measurement may use).
    pub cpus: Vec<usize>,
    /// The tightest CPU quota on the process's cgroup path, in CPUs (0.5 for 50000/100000);
    /// `None` with no quota or no cpu controller.
    pub cpu_quota_cpus: Option<f64>,
    /// Quota periods that elapsed, at the level that was throttled most.
    pub periods: Option<u64>,
    /// Periods in which that level ran out of quota and its tasks were stopped.
    pub throttled_periods: Option<u64>,
    /// Time its tasks were stopped, ns.
    pub throttled_ns: Option<u64>,
    /// Steal on the watched CPUs, ns (all of them together).
    pub steal_ns: Option<u64>,
    /// Busy, idle and steal on the watched CPUs together, ns: the time accounted.
    pub accounted_ns: Option<u64>,
    /// Busy time on the watched CPUs less this process's CPU time, ns: other processes (and
    /// the kernel's interrupts) running there.
    pub others_busy_ns: Option<u64>,
    /// Run-queue delay of this process's threads alive at both ends, ns.
    pub run_delay_ns: Option<u64>,
}

/// Counters read at the start of a window.
pub struct Watch {
    started: Instant,
    cgroup: Option<ProcessCgroup>,
    quota_cpus: Option<f64>,
    cpu_stats: Vec<(std::path::PathBuf, super::cgroup::CpuStat)>,
    cpu_time: Option<CpuTimeSnapshot>,
    own_cpu_ns: Option<u64>,
    run_delay: BTreeMap<u32, u64>,
}

/// This process's user and system time, all threads (those ended included), and its
/// children's that have ended and been waited for, ns. The children count as this process:
/// where the kernel traps split locks the split-lock probes lock in a child, and its CPU time
/// (the trap handler's included) read as "other tasks busy" on the idle Emerald Rapids guest
/// (0.2-0.5 CPU over the split-lock probes' windows).
fn own_cpu_ns() -> Option<u64> {
    let of = |who: libc::c_int| -> Option<u64> {
        // SAFETY: getrusage writes into the zeroed struct we own.
        let mut u: libc::rusage = unsafe { std::mem::zeroed() };
        if unsafe { libc::getrusage(who, &mut u) } != 0 {
            return None;
        }
        let ns = |t: libc::timeval| -> Option<u64> {
            Some(
                u64::try_from(t.tv_sec).ok()? * 1_000_000_000
                    + u64::try_from(t.tv_usec).ok()? * 1000,
            )
        };
        Some(ns(u.ru_utime)? + ns(u.ru_stime)?)
    };
    Some(of(libc::RUSAGE_SELF)? + of(libc::RUSAGE_CHILDREN).unwrap_or(0))
}

/// `/proc/PID/task/TID/schedstat`: `sum_exec_runtime run_delay timeslices`, ns; the delay.
pub fn parse_schedstat_run_delay(text: &str) -> Option<u64> {
    text.split_whitespace().nth(1)?.parse().ok()
}

/// The run-queue delay of each of this process's threads, by thread id.
fn own_run_delays(root: &Path) -> BTreeMap<u32, u64> {
    let Ok(dir) = fs::read_dir(root.join("proc/self/task")) else {
        return BTreeMap::new();
    };
    dir.filter_map(|e| {
        let e = e.ok()?;
        let tid = e.file_name().to_str()?.parse().ok()?;
        let text = fs::read_to_string(e.path().join("schedstat")).ok()?;
        Some((tid, parse_schedstat_run_delay(&text)?))
    })
    .collect()
}

/// `cpu.stat` at every level of the cgroup's cpu path, by directory.
fn cpu_stats(cg: &ProcessCgroup) -> Vec<(std::path::PathBuf, super::cgroup::CpuStat)> {
    let Some(cpu) = &cg.cpu else {
        return Vec::new();
    };
    cpu.up_to_mount()
        .filter_map(|at| Some((at.dir(), cg.cpu_stat_at(&at)?)))
        .collect()
}

impl Watch {
    /// Reads every counter now.
    pub fn start() -> Watch {
        let root = Path::new("/");
        let cgroup = read_self_cgroup(root);
        let quota_cpus = cgroup
            .as_ref()
            .and_then(|c| c.limits().cpu_quota)
            .map(|l| l.value.cpus());
        let cpu_stats = cgroup.as_ref().map(cpu_stats).unwrap_or_default();
        Watch {
            cgroup,
            quota_cpus,
            cpu_stats,
            cpu_time: cpu_time_snapshot(),
            own_cpu_ns: own_cpu_ns(),
            run_delay: own_run_delays(root),
            started: Instant::now(),
        }
    }

    /// Reads them again: what happened since [`Watch::start`] on `cpus`.
    pub fn finish(self, cpus: &[usize]) -> CpuWindow {
        let wall_ns = u64::try_from(self.started.elapsed().as_nanos()).unwrap_or(u64::MAX);
        let own_end = own_cpu_ns();
        let delays = own_run_delays(Path::new("/"));
        let cpu_time = cpu_time_snapshot();
        let stats_end = self.cgroup.as_ref().map(cpu_stats).unwrap_or_default();
        let mut w = CpuWindow {
            wall_ns,
            cpus: cpus.to_vec(),
            cpu_quota_cpus: self.quota_cpus,
            ..CpuWindow::default()
        };
        // The level stopped most often speaks for the path: a parent's throttling stops
        // every cgroup below it.
        let throttle = self
            .cpu_stats
            .iter()
            .filter_map(|(dir, start)| {
                let end = stats_end.iter().find(|(d, _)| d == dir)?;
                Some(super::cgroup::CpuStatDelta::between(start, &end.1))
            })
            .max_by_key(|d| (d.throttled_periods.unwrap_or(0), d.periods.unwrap_or(0)));
        if let Some(t) = throttle {
            w.periods = t.periods;
            w.throttled_periods = t.throttled_periods;
            w.throttled_ns = t.throttled_ns;
        }
        if let (Some(a), Some(b)) = (&self.cpu_time, &cpu_time) {
            let window = CpuTimeWindow::between(a, b, user_hz());
            let watched: Vec<_> = cpus.iter().filter_map(|c| window.per_cpu.get(c)).collect();
            if !watched.is_empty() {
                let sum = |f: fn(&super::cpu_time::CpuTimeDelta) -> u64| -> u64 {
                    watched.iter().map(|d| f(d)).sum()
                };
                let busy = sum(|d| d.busy_ns);
                w.steal_ns = Some(sum(|d| d.steal_ns));
                w.accounted_ns = Some(busy + sum(|d| d.idle_ns) + sum(|d| d.steal_ns));
                if let (Some(s), Some(e)) = (self.own_cpu_ns, own_end) {
                    w.others_busy_ns = Some(busy.saturating_sub(e.saturating_sub(s)));
                }
            }
        }
        let both: Vec<u64> = self
            .run_delay
            .iter()
            .filter_map(|(tid, start)| delays.get(tid).map(|end| end.saturating_sub(*start)))
            .collect();
        if !both.is_empty() {
            w.run_delay_ns = Some(both.iter().sum());
        }
        w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_gives_the_run_delay() {
        // This guest's /proc/self/schedstat: ran 529 us, waited 2.3 ms, one timeslice.
        assert_eq!(
            parse_schedstat_run_delay("529024 2324634 1\n"),
            Some(2_324_634)
        );
        assert_eq!(parse_schedstat_run_delay("529024\n"), None);
        assert_eq!(parse_schedstat_run_delay("a b c"), None);
    }

    #[test]
    fn a_window_here_reads_wall_time_and_this_thread_at_both_ends() {
        let cpus = crate::machine::allowed_cpus();
        let watch = Watch::start();
        let t = Instant::now();
        while t.elapsed().as_millis() < 30 {
            std::hint::spin_loop();
        }
        let w = watch.finish(&cpus);
        assert!(w.wall_ns >= 30_000_000, "{w:?}");
        assert_eq!(w.cpus, cpus);
        assert!(w.run_delay_ns.is_some(), "this thread lives at both ends");
        assert!(
            w.accounted_ns.is_some_and(|a| a > 0) || cpus.is_empty(),
            "{w:?}"
        );
    }
}
