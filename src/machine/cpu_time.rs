//! Where the machine's CPU time went, from `/proc/stat`: per CPU and in total, time busy,
//! idle and stolen. Steal is time a vCPU had work but the hypervisor ran something else on
//! the physical CPU; `diagnose` reads it to tell a thread that waited for a CPU because the
//! hypervisor held it from one that waited behind other processes or its cgroup's quota.
//!
//! The file counts in USER_HZ ticks (`sysconf(_SC_CLK_TCK)`, 100 on Linux) since boot, so one
//! snapshot says nothing about a window; [`CpuTimeWindow::between`] turns two into
//! nanoseconds. Guest time is already inside user and nice (the kernel adds it to both), so
//! it is not added to busy again. iowait is idle time (a CPU with nothing to run while a task
//! waits for I/O) and the kernel documents it as able to go backwards, so differences
//! saturate at zero rather than wrapping (Documentation/filesystems/proc.rst, 1.8).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

/// One CPU's (or the total's) counters from a `cpu` line, in USER_HZ ticks since boot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CpuTicks {
    /// Normal processes in user mode (guest time included).
    pub user: u64,
    /// Niced processes in user mode (niced guest time included).
    pub nice: u64,
    /// Kernel mode.
    pub system: u64,
    /// Nothing to run.
    pub idle: u64,
    /// Nothing to run while a task waited for I/O.
    pub iowait: u64,
    /// Hard interrupts.
    pub irq: u64,
    /// Soft interrupts.
    pub softirq: u64,
    /// Taken by the hypervisor while this vCPU had work.
    pub steal: u64,
    /// Running a guest's vCPU (also counted in `user`).
    pub guest: u64,
    /// Running a niced guest's vCPU (also counted in `nice`).
    pub guest_nice: u64,
}

impl CpuTicks {
    /// Ticks spent running something: user, nice, system and interrupts.
    pub fn busy(&self) -> u64 {
        self.user
            .saturating_add(self.nice)
            .saturating_add(self.system)
            .saturating_add(self.irq)
            .saturating_add(self.softirq)
    }

    /// Ticks with nothing to run (iowait included).
    pub fn idle_all(&self) -> u64 {
        self.idle.saturating_add(self.iowait)
    }
}

/// `/proc/stat`'s CPU lines at one moment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTimeSnapshot {
    /// The `cpu` line: every CPU together.
    pub total: CpuTicks,
    /// The `cpuN` lines by CPU number; an offline CPU has none.
    pub per_cpu: BTreeMap<usize, CpuTicks>,
}

/// The counters of one `cpu` line after its name; older kernels print fewer (steal since
/// 2.6.11, guest since 2.6.24, guest_nice since 2.6.33), which read as zero.
fn parse_ticks(fields: &str) -> Option<CpuTicks> {
    let v: Vec<u64> = fields
        .split_whitespace()
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    if v.len() < 4 {
        return None;
    }
    let at = |i: usize| v.get(i).copied().unwrap_or(0);
    Some(CpuTicks {
        user: at(0),
        nice: at(1),
        system: at(2),
        idle: at(3),
        iowait: at(4),
        irq: at(5),
        softirq: at(6),
        steal: at(7),
        guest: at(8),
        guest_nice: at(9),
    })
}

/// Parses `/proc/stat`; `None` without a readable `cpu` line. A `cpuN` line that does not
/// parse is left out.
pub fn parse_proc_stat(text: &str) -> Option<CpuTimeSnapshot> {
    let mut total = None;
    let mut per_cpu = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("cpu") else {
            continue;
        };
        if let Some(fields) = rest.strip_prefix(' ') {
            total = parse_ticks(fields);
        } else if let Some((n, fields)) = rest.split_once(' ')
            && let (Ok(cpu), Some(ticks)) = (n.parse::<usize>(), parse_ticks(fields))
        {
            per_cpu.insert(cpu, ticks);
        }
    }
    Some(CpuTimeSnapshot {
        total: total?,
        per_cpu,
    })
}

/// Reads `ROOT/proc/stat`.
pub fn read_proc_stat(root: &Path) -> Option<CpuTimeSnapshot> {
    parse_proc_stat(&fs::read_to_string(root.join("proc/stat")).ok()?)
}

/// This machine's `/proc/stat` now.
pub fn cpu_time_snapshot() -> Option<CpuTimeSnapshot> {
    read_proc_stat(Path::new("/"))
}

/// USER_HZ: the ticks per second of `/proc/stat` and `/proc/PID/stat` times.
pub fn user_hz() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if hz > 0 { hz as u64 } else { 100 }
}

/// Ticks at `hz` per second, in ns.
pub fn ticks_to_ns(ticks: u64, hz: u64) -> u64 {
    let ns = u128::from(ticks) * 1_000_000_000 / u128::from(hz.max(1));
    u64::try_from(ns).unwrap_or(u64::MAX)
}

/// What one CPU (or all together) did in a window, in ns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CpuTimeDelta {
    /// Running something (user, nice, system, interrupts).
    pub busy_ns: u64,
    /// Nothing to run (iowait included).
    pub idle_ns: u64,
    /// Taken by the hypervisor while the vCPU had work.
    pub steal_ns: u64,
}

impl CpuTimeDelta {
    fn between(start: &CpuTicks, end: &CpuTicks, hz: u64) -> CpuTimeDelta {
        CpuTimeDelta {
            busy_ns: ticks_to_ns(end.busy().saturating_sub(start.busy()), hz),
            idle_ns: ticks_to_ns(end.idle_all().saturating_sub(start.idle_all()), hz),
            steal_ns: ticks_to_ns(end.steal.saturating_sub(start.steal), hz),
        }
    }

    /// Steal over all the time accounted (busy, idle and steal); `None` for an empty window.
    pub fn steal_ratio(&self) -> Option<f64> {
        let all = self.busy_ns + self.idle_ns + self.steal_ns;
        (all > 0).then(|| self.steal_ns as f64 / all as f64)
    }
}

/// What the CPUs did between two snapshots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuTimeWindow {
    /// Every CPU together.
    pub total: CpuTimeDelta,
    /// Each CPU present in both snapshots.
    pub per_cpu: BTreeMap<usize, CpuTimeDelta>,
}

impl CpuTimeWindow {
    /// The window from `start` to `end`, with `hz` ticks per second ([`user_hz`]).
    pub fn between(start: &CpuTimeSnapshot, end: &CpuTimeSnapshot, hz: u64) -> CpuTimeWindow {
        CpuTimeWindow {
            total: CpuTimeDelta::between(&start.total, &end.total, hz),
            per_cpu: end
                .per_cpu
                .iter()
                .filter_map(|(cpu, e)| {
                    Some((*cpu, CpuTimeDelta::between(start.per_cpu.get(cpu)?, e, hz)))
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn snapshot(file: &str) -> CpuTimeSnapshot {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/proc")
            .join(file);
        parse_proc_stat(&fs::read_to_string(path).unwrap()).unwrap()
    }

    #[test]
    fn a_busy_loop_on_the_2cpu_guest_shows_on_one_cpu() {
        // This 2-vCPU guest, 1 s apart, a shell loop spinning (mostly on CPU 0).
        let start = snapshot("stat-2cpu-busy-start.txt");
        let end = snapshot("stat-2cpu-busy-end.txt");
        assert_eq!(start.per_cpu.len(), 2);
        assert_eq!(
            start.total,
            CpuTicks {
                user: 50454,
                system: 14748,
                idle: 100136,
                iowait: 1050,
                softirq: 65,
                steal: 99,
                ..CpuTicks::default()
            }
        );
        let w = CpuTimeWindow::between(&start, &end, 100);
        assert_eq!(
            w.per_cpu[&0],
            CpuTimeDelta {
                busy_ns: 1030 * MS,
                idle_ns: 0,
                steal_ns: 0
            }
        );
        assert_eq!(w.per_cpu[&1].idle_ns, 790 * MS);
        assert_eq!(w.total.busy_ns, 1270 * MS);
        assert_eq!(w.total.steal_ratio(), Some(0.0));
    }

    #[test]
    fn a_busy_loop_on_the_16cpu_guest_fills_one_cpu_of_sixteen() {
        // The pure-v2 GPU guest, 2 s apart, one shell loop spinning on CPU 2.
        let w = CpuTimeWindow::between(
            &snapshot("stat-16cpu-busy-start.txt"),
            &snapshot("stat-16cpu-busy-end.txt"),
            100,
        );
        assert_eq!(w.per_cpu.len(), 16);
        let (busiest, d) = w.per_cpu.iter().max_by_key(|(_, d)| d.busy_ns).unwrap();
        assert_eq!((*busiest, d.busy_ns, d.idle_ns), (2, 2010 * MS, 0));
        assert_eq!(w.total.busy_ns, 2010 * MS);
        assert_eq!(w.total.idle_ns, 30060 * MS);
    }

    #[test]
    fn steal_is_counted_apart_from_busy_and_idle() {
        // Hand-made: a vCPU that ran 50 ticks, idled 30 and had 20 taken.
        let start =
            parse_proc_stat("cpu  100 0 0 100 0 0 0 10 0 0\ncpu0 100 0 0 100 0 0 0 10 0 0\n");
        let end =
            parse_proc_stat("cpu  140 0 10 130 0 0 0 30 40 0\ncpu0 140 0 10 130 0 0 0 30 40 0\n");
        let w = CpuTimeWindow::between(&start.unwrap(), &end.unwrap(), 100);
        let d = w.per_cpu[&0];
        assert_eq!(
            d.busy_ns,
            500 * MS,
            "guest time is inside user, not added again"
        );
        assert_eq!(d.idle_ns, 300 * MS);
        assert_eq!(d.steal_ns, 200 * MS);
        assert_eq!(d.steal_ratio(), Some(0.2));
    }

    #[test]
    fn counters_that_go_backwards_or_cpus_that_vanish_do_not_wrap() {
        // iowait can go backwards; a CPU taken offline has no line.
        let start =
            parse_proc_stat("cpu  10 0 0 10 9 0 0 0\ncpu0 5 0 0 5 5 0 0 0\ncpu1 5 0 0 5 4 0 0 0\n");
        let end = parse_proc_stat("cpu  10 0 0 10 1 0 0 0\ncpu0 5 0 0 5 1 0 0 0\n");
        let w = CpuTimeWindow::between(&start.unwrap(), &end.unwrap(), 100);
        assert_eq!(w.total.idle_ns, 0);
        assert_eq!(w.per_cpu.keys().copied().collect::<Vec<_>>(), vec![0]);
    }

    #[test]
    fn old_short_and_malformed_lines() {
        // A 2.6.9 kernel printed seven fields: no steal, read as zero.
        let old = parse_proc_stat("cpu  1 2 3 4 5 6 7\n").unwrap();
        assert_eq!((old.total.softirq, old.total.steal), (7, 0));
        assert_eq!(parse_proc_stat(""), None);
        assert_eq!(parse_proc_stat("intr 1 2 3\nctxt 5\n"), None);
        assert_eq!(parse_proc_stat("cpu  1 2 x 4\n"), None);
        assert_eq!(parse_proc_stat("cpu  1 2\n"), None);
        let bad_cpu = parse_proc_stat("cpu  1 2 3 4\ncpuX 1 2 3 4\ncpu1 1 2\n").unwrap();
        assert!(bad_cpu.per_cpu.is_empty());
        assert_eq!(read_proc_stat(Path::new("/nonexistent/cpudoctor")), None);
        assert_eq!(ticks_to_ns(u64::MAX, 1), u64::MAX);
    }

    #[test]
    fn this_machine_has_a_cpu_line_and_a_line_per_online_cpu() {
        let s = cpu_time_snapshot().unwrap();
        assert!(!s.per_cpu.is_empty());
        assert!(s.total.busy() + s.total.idle_all() > 0);
        assert!(user_hz() > 0);
    }
}
