//! The machine in a few words: its topology, caches and split-lock state, as every view that
//! names a machine (the check screen, diff's machine facts, the HTML report) says them.

use crate::format::human_bytes;
use crate::format::human_ns;
use crate::machine::SplitLockMode;
use crate::machine::cgroup::CgroupFacts;
use crate::machine::kernel::SplitLockState;
use crate::machine::meminfo::{MemoryBound, MemoryRoom};
use crate::machine::topology::Topology;
use crate::measure::ThreadError;
use crate::reference::SPLIT_LOCK_MITIGATE_SLEEP_MS;
use crate::schema::probes::split_lock::SplitLockSeen;
use crate::schema::split_lock::SplitLockMechanism;

/// Cores, sockets, NUMA nodes and SMT in one line: `2 cores, 1 socket(s), 1 NUMA node(s), SMT off`.
pub fn topology_line(t: &Topology) -> String {
    format!(
        "{} cores, {} socket(s), {} NUMA node(s), SMT {}",
        t.cores,
        t.packages,
        t.numa_nodes,
        if t.smt { "on" } else { "off" }
    )
}

/// The data and unified caches in one line: `L1 32 KiB x2, L2 1 MiB x2, L3 32 MiB`.
pub fn caches_line(t: &Topology) -> String {
    t.caches
        .iter()
        .filter(|c| c.kind != "Instruction")
        .map(|c| {
            format!(
                "L{} {}{}",
                c.level,
                human_bytes(c.size_bytes),
                if c.instances > 1 {
                    format!(" x{}", c.instances)
                } else {
                    String::new()
                }
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// What the kernel exposes about split locks, as facts: which detection the CPU offers, the
/// mode it runs in and the mitigation sysctl. `the kernel detects bus locks after the fact
/// (#DB, warn mode, kernel.split_lock_mitigate=1)`.
fn split_lock_detection(state: &SplitLockState) -> String {
    let mitigate = state
        .mitigate
        .map(|m| format!(", kernel.split_lock_mitigate={m}"))
        .unwrap_or_default();
    // #AC (split_lock_detect) traps before the locked instruction; #DB (bus_lock_detect)
    // after it has run.
    let how = if state.cpu_split_lock_detect {
        "#AC"
    } else {
        "#DB"
    };
    match state.effective {
        SplitLockMode::NotDetected => "the kernel cannot see split locks here (no \
             split_lock_detect or bus_lock_detect flag, as in every guest)"
            .into(),
        SplitLockMode::Off => "detection is off (split_lock_detect=off)".into(),
        SplitLockMode::Fatal => {
            format!("the kernel traps split locks ({how}, split_lock_detect=fatal)")
        }
        SplitLockMode::Ratelimit(n) => format!(
            "the kernel rate-limits bus locks to {n} a second ({how}, split_lock_detect=ratelimit:{n})"
        ),
        SplitLockMode::WarnSleep | SplitLockMode::Warn if state.cpu_split_lock_detect => {
            format!("the kernel traps split locks (#AC, warn mode{mitigate})")
        }
        SplitLockMode::WarnSleep | SplitLockMode::Warn => {
            format!("the kernel detects bus locks after the fact (#DB, warn mode{mitigate})")
        }
    }
}

/// What the kernel's documentation says a mode does, for where nothing was measured
/// (Documentation/admin-guide/kernel-parameters.txt, `split_lock_detect`).
fn split_lock_documented(state: &SplitLockState) -> String {
    match state.effective {
        SplitLockMode::NotDetected => {
            "a split lock costs a bus lock, or in a guest whatever the host does with it".into()
        }
        SplitLockMode::Off => "split locks run as bus locks at hardware cost".into(),
        SplitLockMode::Fatal => "the kernel kills a process that splits a lock (SIGBUS)".into(),
        SplitLockMode::Ratelimit(_) => {
            "lockers beyond the rate are made to sleep 20 ms per excess bus lock".into()
        }
        SplitLockMode::WarnSleep => format!(
            "each trapped split lock logs a warning and its task sleeps \
             {SPLIT_LOCK_MITIGATE_SLEEP_MS} ms"
        ),
        SplitLockMode::Warn if state.cpu_split_lock_detect => {
            "a warning per task, then split locks run at hardware cost".into()
        }
        SplitLockMode::Warn => "a warning per trapped bus lock (rate-limited)".into(),
    }
}

/// What a split lock was measured to be: `measured: this kernel traps each one, 1.1 ms to
/// the locking thread`.
fn split_lock_measured(seen: &SplitLockSeen) -> String {
    let each = |what: &str| match seen.cost_ns {
        Some(ns) => format!("{what}, {} each", human_ns(ns)),
        None => what.to_string(),
    };
    match seen.mechanism {
        SplitLockMechanism::BusLock => each("measured: a bus lock at hardware cost"),
        SplitLockMechanism::TrappedByKernel => {
            each("measured: this kernel traps them and the locking thread pays its penalty")
        }
        SplitLockMechanism::TrappedByHost => each("measured: the host traps them"),
        SplitLockMechanism::Fatal => "measured: the locking process died of SIGBUS".into(),
    }
}

/// One sentence on what the kernel does with a split lock: the facts the kernel exposes,
/// then what the split-lock probe measured beside them (`seen`), or, where nothing was
/// measured, what the mode is documented to do, said as unmeasured, and how to measure it.
/// Never a model of the mode in place of a measurement: a kernel in `warn` mode with
/// bus-lock detection alone measured ~1 ms a split lock on the Emerald Rapids guest.
pub fn split_lock_summary(state: &SplitLockState, seen: Option<&SplitLockSeen>) -> String {
    let detection = split_lock_detection(state);
    match seen {
        Some(seen) => format!("{detection}; {}", split_lock_measured(seen)),
        None => format!(
            "{detection}; documented: {}; not measured here (cpudoctor probe {} measures it)",
            split_lock_documented(state),
            crate::names::probe::SPLIT_LOCK
        ),
    }
}

/// The split-lock mode as the machine screen names it: `not detected`, else the kernel's word
/// (`warn+sleep`, `ratelimit:N`...).
pub fn split_lock_mode(mode: SplitLockMode) -> String {
    match mode {
        SplitLockMode::NotDetected => "not detected".to_string(),
        other => other.to_string(),
    }
}

/// The split-lock state in a few words, for the machine line and the facts `diff` compares:
/// what was measured where it was (`split locks trapped by this kernel (warn)`, `split
/// locks are bus locks`), else the mode alone (`split locks invisible to
/// the kernel`, `split-lock detection warn, cost not measured`).
pub fn split_lock_words(mode: SplitLockMode, mechanism: Option<SplitLockMechanism>) -> String {
    // The kernel's mode where it acts or was told not to; a kernel that cannot see split
    // locks adds nothing to what was measured.
    let kernel = match mode {
        SplitLockMode::NotDetected => String::new(),
        SplitLockMode::Off => " (detection off)".to_string(),
        other => format!(" (kernel {other})"),
    };
    match mechanism {
        Some(SplitLockMechanism::BusLock) => format!("split locks are bus locks{kernel}"),
        Some(SplitLockMechanism::TrappedByKernel) => {
            format!("split locks trapped by this kernel ({mode})")
        }
        Some(SplitLockMechanism::TrappedByHost) => {
            format!("split locks trapped by the host{kernel}")
        }
        Some(SplitLockMechanism::Fatal) => format!("split locks fatal, SIGBUS{kernel}"),
        None => match mode {
            SplitLockMode::NotDetected => "split locks invisible to the kernel".into(),
            SplitLockMode::Off => "split-lock detection off".into(),
            other => format!("split-lock detection {other}, cost not measured"),
        },
    }
}

/// The PAUSE a diagnosis measured: `PAUSE 24.4 ns = 90 cycles`, or that it was not measured.
pub fn pause_figure(pause: Option<(f64, Option<f64>)>) -> String {
    match pause {
        Some((ns, cycles)) => format!(
            "PAUSE {ns:.1} ns{}",
            cycles
                .map(|c| format!(" = {c:.0} cycles"))
                .unwrap_or_default()
        ),
        None => "PAUSE not measured".into(),
    }
}

/// Why a probe was skipped when the kernel refused one of its threads: `cannot start a
/// thread: Resource temporarily unavailable (os error 11); a pids limit (cgroup pids.max) or
/// RLIMIT_NPROC allows no more tasks`.
pub fn thread_refused(e: &ThreadError) -> String {
    if e.is_task_limit() {
        format!("{e}; a pids limit (cgroup pids.max) or RLIMIT_NPROC allows no more tasks")
    } else {
        format!("{e}; the address-space limit (RLIMIT_AS) or memory leaves no room for its stack")
    }
}

/// A limit in a few words: `the 512 MiB cgroup memory limit`, `the 100 MiB address-space limit
/// (RLIMIT_AS)`, `the 22 GiB of memory available`.
pub fn room_bound(room: &MemoryRoom) -> String {
    let limit = human_bytes(room.limit_bytes);
    match room.bound {
        MemoryBound::Available => format!("the {limit} of memory available"),
        MemoryBound::CgroupLimit => format!("the {limit} cgroup memory limit"),
        MemoryBound::AddressSpace => format!("the {limit} address-space limit (RLIMIT_AS)"),
    }
}

/// The room for a buffer size given on the command line, in words: `the 22 GiB of memory
/// available (MemAvailable in /proc/meminfo)`, `the 500 MiB that the cgroup memory limit
/// (512 MiB) leaves`.
pub fn room_words(room: &MemoryRoom) -> String {
    let left = human_bytes(room.room_bytes);
    let limit = human_bytes(room.limit_bytes);
    match room.bound {
        MemoryBound::Available => {
            format!("the {left} of memory available (MemAvailable in /proc/meminfo)")
        }
        MemoryBound::CgroupLimit => {
            format!("the {left} that the cgroup memory limit ({limit}) leaves")
        }
        MemoryBound::AddressSpace => {
            format!("the {left} that the address-space limit (RLIMIT_AS, {limit}) leaves")
        }
    }
}

/// What a limit leaves a memory probe, recorded whenever a limit (not `MemAvailable`) bounds
/// its buffers: `the 512 MiB cgroup memory limit leaves 500 MiB`.
pub fn room_left(room: &MemoryRoom) -> String {
    format!(
        "{} leaves {}",
        room_bound(room),
        human_bytes(room.room_bytes)
    )
}

/// Why a memory probe's buffers are smaller than it wanted, after "X instead of Y: ":
/// `sized to the 512 MiB cgroup memory limit, which leaves 470 MiB`, or for `MemAvailable`
/// `2 buffers of 1 GiB would take more than a quarter of the 3 GiB of memory available`.
pub fn buffers_capped(buffers: usize, wanted: u64, room: &MemoryRoom) -> String {
    if room.is_limit() {
        format!(
            "sized to {}, which leaves {}",
            room_bound(room),
            human_bytes(room.room_bytes)
        )
    } else {
        format!(
            "{buffers} buffers of {} would take more than a quarter of the {} of memory available",
            human_bytes(wanted),
            human_bytes(room.limit_bytes)
        )
    }
}

/// Why a memory probe did not measure under a limit: `the 512 MiB cgroup memory limit leaves
/// 90 MiB, too little for 2 buffers of 128 MiB (past the caches); measure it where the limit
/// allows: cpudoctor probe mem-latency`. The hazards that read the probe are then "not
/// judged" with this reason.
pub fn limit_leaves(room: &MemoryRoom, buffers: usize, needed: u64, probe: &str) -> String {
    format!(
        "{} leaves {}, too little for {buffers} buffer(s) of {} (past the caches); measure it \
         where the limit allows: cpudoctor probe {probe}",
        room_bound(room),
        human_bytes(room.room_bytes),
        human_bytes(needed)
    )
}

/// The limits a cgroup sets, in one line for the machine's description; `None` when none
/// binds: `cgroup v1: memory limit 512 MiB (12 MiB used), CPU quota 0.5 CPU (throttled in
/// 170 of 173 periods while measuring), pids limit 64`.
pub fn cgroup_line(c: &CgroupFacts) -> Option<String> {
    if !c.limited() {
        return None;
    }
    let mut parts = Vec::new();
    if let Some(limit) = c.memory_limit_bytes {
        parts.push(match c.memory_usage_bytes {
            Some(used) => format!(
                "memory limit {} ({} used)",
                human_bytes(limit),
                human_bytes(used)
            ),
            None => format!("memory limit {}", human_bytes(limit)),
        });
    }
    if let Some(q) = c.cpu_quota {
        let throttled = c
            .cpu_stat_while_measuring
            .and_then(|s| Some((s.throttled_periods?, s.periods?)))
            .map(|(t, p)| format!(" (throttled in {t} of {p} periods while measuring)"))
            .unwrap_or_default();
        parts.push(format!("CPU quota {} CPU{throttled}", trim_float(q.cpus())));
    }
    if let Some(n) = c.pids_max {
        parts.push(format!("pids limit {n}"));
    }
    let version = match c.version {
        Some(crate::machine::cgroup::CgroupVersion::V2) => "cgroup v2",
        Some(_) => "cgroup v1",
        None => "cgroup",
    };
    Some(format!("{version}: {}", parts.join(", ")))
}

/// `0.5`, `2`, `1.25`: a CPU count without trailing zeros.
fn trim_float(v: f64) -> String {
    let s = format!("{v:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Every cgroup fact in one line, for the machine facts of `--verbose`: `cgroup v1: memory
/// limit 512 MiB (12 MiB used), CPU quota 0.5 CPU (throttled in 3 of 5 periods while
/// measuring), pids limit 64 (3 in use); cpuset 0-1`, or `cgroup v2: no memory, CPU or pids limit; cpuset 0-15`.
pub fn cgroup_facts(c: &CgroupFacts) -> String {
    let mut s = cgroup_line(c).unwrap_or_else(|| {
        let version = match c.version {
            Some(crate::machine::cgroup::CgroupVersion::V2) => "cgroup v2",
            Some(_) => "cgroup v1",
            None => "cgroup",
        };
        format!("{version}: no memory, CPU or pids limit")
    });
    if let (Some(_), Some(n)) = (c.pids_max, c.pids_current) {
        s.push_str(&format!(" ({n} in use)"));
    }
    if let Some(cpus) = &c.cpuset_cpus {
        s.push_str(&format!("; cpuset {cpus}"));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::cgroup::{CgroupVersion, CpuQuota, CpuStat};

    #[test]
    fn a_cgroup_with_limits_says_each_and_what_was_used() {
        let c = CgroupFacts {
            version: Some(CgroupVersion::V1),
            memory_limit_bytes: Some(512 << 20),
            memory_usage_bytes: Some(12 << 20),
            cpu_quota: Some(CpuQuota {
                quota_us: 50_000,
                period_us: 100_000,
            }),
            cpu_stat: Some(CpuStat {
                periods: Some(1000),
                throttled_periods: Some(900),
                ..CpuStat::default()
            }),
            cpu_stat_while_measuring: Some(crate::machine::cgroup::CpuStatDelta {
                periods: Some(173),
                throttled_periods: Some(170),
                ..Default::default()
            }),
            cpuset_cpus: Some("0-1".into()),
            pids_max: Some(64),
            pids_current: Some(3),
        };
        assert_eq!(
            cgroup_line(&c).unwrap(),
            "cgroup v1: memory limit 512 MiB (12 MiB used), CPU quota 0.5 CPU (throttled in \
             170 of 173 periods while measuring), pids limit 64"
        );
        assert!(cgroup_facts(&c).ends_with("pids limit 64 (3 in use); cpuset 0-1"));
    }

    #[test]
    fn a_cgroup_without_limits_has_no_line_on_the_screen() {
        let c = CgroupFacts {
            version: Some(CgroupVersion::V2),
            cpuset_cpus: Some("0-15".into()),
            ..CgroupFacts::default()
        };
        assert_eq!(cgroup_line(&c), None);
        assert_eq!(
            cgroup_facts(&c),
            "cgroup v2: no memory, CPU or pids limit; cpuset 0-15"
        );
    }

    #[test]
    fn a_refused_thread_names_the_limit_that_refused_it() {
        let e = ThreadError(std::io::Error::from_raw_os_error(libc::EAGAIN));
        assert!(
            thread_refused(&e).contains("pids limit"),
            "{}",
            thread_refused(&e)
        );
        let e = ThreadError(std::io::Error::from_raw_os_error(libc::ENOMEM));
        assert!(
            thread_refused(&e).contains("RLIMIT_AS"),
            "{}",
            thread_refused(&e)
        );
    }
}
