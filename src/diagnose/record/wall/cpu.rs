//! Who held the CPUs while the workload's threads waited for one: the other processes that
//! ran in the window (their CPU time from /proc), the machine's CPUs as a whole (busy, idle,
//! and the hypervisor's steal from /proc/stat), and the workload's cgroup CPU quota with its
//! throttling (`cpu.stat`). Read once when recording starts and once when it stops.

use crate::diagnose::record::contention::{self, OtherProcess, ProcessCpuSnapshot};
use crate::machine::cgroup::{self, ControllerDir, CpuQuota, CpuStat, CpuStatDelta, ProcessCgroup};
use crate::machine::cpu_time::{self, CpuTimeDelta, CpuTimeSnapshot, CpuTimeWindow};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Other processes kept in the report, most CPU first: the screen names three, the JSON keeps
/// more, so that a neighbour pinned beside the workload is still listed on a machine where a
/// build's compilers each used more CPU than it.
const OTHERS_KEPT: usize = 20;

/// What held the CPUs during the recording.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuHolders {
    /// Processes outside the workload that used CPU, most first (at most 20).
    pub others: Vec<OtherProcess>,
    /// CPU time of all the other processes together in the window, ns (not their children
    /// reaped meanwhile, whose time is counted over their whole lives).
    pub others_ns: u64,
    /// diagnose's own CPU time in the window, ns: it holds CPUs too.
    #[serde(default)]
    pub own_ns: u64,
    /// Every CPU of the machine together: busy, idle, and stolen by the hypervisor.
    pub machine: Option<CpuTimeDelta>,
    /// The workload's cgroup CPU quota and its throttling, when one binds it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quota: Option<QuotaWindow>,
}

/// A cgroup CPU quota over the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QuotaWindow {
    /// The quota.
    pub quota: CpuQuota,
    /// The cgroup that sets it (its directory).
    pub cgroup: String,
    /// Its counters' change: periods, throttled periods and time.
    pub throttled: CpuStatDelta,
}

/// The readings at the start.
pub struct CpuWindow {
    processes: ProcessCpuSnapshot,
    machine: Option<CpuTimeSnapshot>,
    quota: Option<(ProcessCgroup, ControllerDir, CpuQuota, CpuStat)>,
}

impl CpuWindow {
    /// Reads everything now, for the workload's root process `pid`.
    pub fn start(pid: u32) -> CpuWindow {
        let quota = cgroup::process_cgroup(pid).and_then(|cg| {
            let limit = cg.limits().cpu_quota?;
            let stat = cg.cpu_stat_at(&limit.at)?;
            Some((cg, limit.at, limit.value, stat))
        });
        CpuWindow {
            processes: ProcessCpuSnapshot::take(),
            machine: cpu_time::cpu_time_snapshot(),
            quota,
        }
    }

    /// Reads everything again: what the processes not in `followed` (nor diagnose itself)
    /// used, what the CPUs did, and how the quota throttled.
    pub fn finish(self, followed: &BTreeSet<u32>) -> CpuHolders {
        let hz = cpu_time::user_hz();
        let mut followed = followed.clone();
        followed.insert(std::process::id());
        let end = ProcessCpuSnapshot::take();
        let me = std::process::id();
        let own_ns = match (self.processes.processes.get(&me), end.processes.get(&me)) {
            (Some(a), Some(b)) => {
                cpu_time::ticks_to_ns(b.cpu_ticks.saturating_sub(a.cpu_ticks), hz)
            }
            _ => 0,
        };
        // Their own CPU time in the window only: the time of children reaped meanwhile is
        // counted over their whole lives, which can be far longer than the window.
        let mut others = contention::other_processes(&self.processes, &end, &followed, hz);
        others.retain(|o| o.cpu_ns > 0);
        others.sort_by(|a, b| b.cpu_ns.cmp(&a.cpu_ns).then(a.pid.cmp(&b.pid)));
        let others_ns = others.iter().map(|o| o.cpu_ns).sum();
        others.truncate(OTHERS_KEPT);
        let machine = match (self.machine, cpu_time::cpu_time_snapshot()) {
            (Some(a), Some(b)) => Some(CpuTimeWindow::between(&a, &b, hz).total),
            _ => None,
        };
        let quota = self.quota.and_then(|(cg, at, quota, start)| {
            let end = cg.cpu_stat_at(&at)?;
            Some(QuotaWindow {
                quota,
                cgroup: at.dir().display().to_string(),
                throttled: CpuStatDelta::between(&start, &end),
            })
        });
        CpuHolders {
            others,
            others_ns,
            own_ns,
            machine,
            quota,
        }
    }
}

impl CpuHolders {
    /// CPU time the machine was busy in the window that no process seen at its start or end
    /// accounts for, given the workload's own running time: processes that started and ended
    /// inside the window (a benchmark client, short commands), whose time /proc no longer
    /// shows, and interrupt time not charged to a task. `None` without /proc/stat.
    pub fn unseen_ns(&self, workload_running_ns: f64) -> Option<f64> {
        let m = self.machine?;
        Some(
            (m.busy_ns as f64 - workload_running_ns - self.others_ns as f64 - self.own_ns as f64)
                .max(0.0),
        )
    }
}
