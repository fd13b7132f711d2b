//! Which other processes used the CPUs while a workload was recorded: every process's CPU
//! time (`utime` + `stime` of `/proc/PID/stat`) at the start and the end of the recording,
//! and the difference for each process outside the followed set, busiest first. A thread that
//! was runnable but waited for a CPU waited behind someone; with the cgroup's throttling
//! (`machine::cgroup`) and the hypervisor's steal (`machine::cpu_time`) this names the third
//! candidate, another process on the machine, and where it last ran.
//!
//! Cheap by design: one pass over /proc reading one small file per process, twice per
//! recording, no per-thread walk (a process's `stat` sums its threads, those that exited
//! included). What it cannot see:
//! - times are in USER_HZ ticks (10 ms at 100 Hz): a process that ran less than a tick may
//!   show none;
//! - a process that started and exited inside the window is gone by the end. When its
//!   parent reaped it, its whole life's CPU time went into the parent's `cutime`/`cstime`,
//!   reported as `children_cpu_ns` (a build's `make` stands for its compilers); that may
//!   include time before the window when the child was older than it;
//! - the CPU a process last ran on (field 39) is its main thread's, at the end.
//!
//! A pid seen with a different start time at the end is a new process that reused the
//! number, counted from zero.

use crate::machine::cpu_time::ticks_to_ns;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// `PF_KTHREAD` in `/proc/PID/stat`'s flags (include/linux/sched.h): a kernel thread
/// (`ksoftirqd/0`, `kworker/...`), whose CPU time is the kernel's own work.
const PF_KTHREAD: u64 = 0x0020_0000;

/// One process's CPU time at one moment, from `/proc/PID/stat`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessCpuTime {
    /// Process id.
    pub pid: u32,
    /// Command name (`comm`, at most 15 bytes).
    pub command: String,
    /// User and system time of all its threads, in USER_HZ ticks.
    pub cpu_ticks: u64,
    /// User and system time of its reaped children (`cutime` + `cstime`), in ticks.
    pub children_cpu_ticks: u64,
    /// Start time in ticks since boot; tells a reused pid apart.
    pub start_ticks: u64,
    /// The CPU its main thread last ran on (field 39).
    pub last_cpu: Option<usize>,
    /// Whether it is a kernel thread.
    pub kernel_thread: bool,
}

/// Parses `/proc/PID/stat`. The name sits in parentheses and may itself hold spaces and
/// parentheses, so fields are counted from the last `)`.
pub fn parse_process_stat(text: &str) -> Option<ProcessCpuTime> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let pid = text.get(..open)?.trim().parse().ok()?;
    let command = text.get(open + 1..close)?.to_string();
    // After the name: field 3 (state) is index 0, so field N is index N - 3.
    let f: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    let unsigned = |field: usize| f.get(field - 3)?.parse::<u64>().ok();
    // cutime and cstime are printed signed.
    let signed = |field: usize| {
        f.get(field - 3)?
            .parse::<i64>()
            .ok()
            .map(|v| v.max(0) as u64)
    };
    Some(ProcessCpuTime {
        pid,
        command,
        cpu_ticks: unsigned(14)?.saturating_add(unsigned(15)?),
        children_cpu_ticks: signed(16)?.saturating_add(signed(17)?),
        start_ticks: unsigned(22)?,
        last_cpu: f.get(39 - 3).and_then(|c| c.parse().ok()),
        kernel_thread: unsigned(9)? & PF_KTHREAD != 0,
    })
}

/// Every process's CPU time at one moment, by pid.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ProcessCpuSnapshot {
    /// Processes that could be read.
    pub processes: BTreeMap<u32, ProcessCpuTime>,
}

impl ProcessCpuSnapshot {
    /// Reads `PROC_ROOT/PID/stat` for every numeric entry (so `self` is not counted twice).
    /// A process that exits during the pass is left out.
    pub fn read(proc_root: &Path) -> ProcessCpuSnapshot {
        let Ok(dir) = fs::read_dir(proc_root) else {
            return ProcessCpuSnapshot::default();
        };
        let processes = dir
            .filter_map(|e| {
                let e = e.ok()?;
                e.file_name().to_str()?.parse::<u32>().ok()?;
                parse_process_stat(&fs::read_to_string(e.path().join("stat")).ok()?)
            })
            .map(|p| (p.pid, p))
            .collect();
        ProcessCpuSnapshot { processes }
    }

    /// Every process on this machine now (`/proc`).
    pub fn take() -> ProcessCpuSnapshot {
        ProcessCpuSnapshot::read(Path::new("/proc"))
    }

    /// From `stat` lines one after another (`cat /proc/[0-9]*/stat`); lines that do not
    /// parse are left out.
    pub fn from_stat_lines(text: &str) -> ProcessCpuSnapshot {
        ProcessCpuSnapshot {
            processes: text
                .lines()
                .filter_map(parse_process_stat)
                .map(|p| (p.pid, p))
                .collect(),
        }
    }
}

/// A process outside the followed set that used CPU in the window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OtherProcess {
    /// Process id.
    pub pid: u32,
    /// Command name (`comm`).
    pub command: String,
    /// CPU time its threads used in the window, in ns (tick resolution).
    pub cpu_ns: u64,
    /// CPU time of its children reaped in the window, in ns: their whole lives.
    pub children_cpu_ns: u64,
    /// The CPU its main thread last ran on, at the end.
    pub last_cpu: Option<usize>,
    /// A kernel thread (interrupt work, writeback, ...).
    pub kernel_thread: bool,
    /// Started after the first snapshot: all its time is in the window.
    pub started_in_window: bool,
}

impl OtherProcess {
    /// Its own and its reaped children's CPU time, in ns: the order of the list.
    pub fn total_cpu_ns(&self) -> u64 {
        self.cpu_ns.saturating_add(self.children_cpu_ns)
    }
}

/// The processes not in `followed` that used CPU between `start` and `end`, most first (pid
/// breaks ties); `hz` is USER_HZ (`machine::cpu_time::user_hz`). Put the recorder's own pid
/// in `followed` to leave it out.
pub fn other_processes(
    start: &ProcessCpuSnapshot,
    end: &ProcessCpuSnapshot,
    followed: &BTreeSet<u32>,
    hz: u64,
) -> Vec<OtherProcess> {
    let mut others: Vec<OtherProcess> = end
        .processes
        .values()
        .filter(|p| !followed.contains(&p.pid))
        .filter_map(|e| {
            let before = start
                .processes
                .get(&e.pid)
                .filter(|s| s.start_ticks == e.start_ticks);
            let (cpu, children) = match before {
                Some(s) => (
                    e.cpu_ticks.saturating_sub(s.cpu_ticks),
                    e.children_cpu_ticks.saturating_sub(s.children_cpu_ticks),
                ),
                None => (e.cpu_ticks, e.children_cpu_ticks),
            };
            (cpu > 0 || children > 0).then(|| OtherProcess {
                pid: e.pid,
                command: e.command.clone(),
                cpu_ns: ticks_to_ns(cpu, hz),
                children_cpu_ns: ticks_to_ns(children, hz),
                last_cpu: e.last_cpu,
                kernel_thread: e.kernel_thread,
                started_in_window: before.is_none(),
            })
        })
        .collect();
    others.sort_by(|a, b| {
        b.total_cpu_ns()
            .cmp(&a.total_cpu_ns())
            .then(a.pid.cmp(&b.pid))
    });
    others
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn fixture(file: &str) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/proc/contention")
            .join(file);
        fs::read_to_string(path).unwrap()
    }

    /// `cat /proc/[0-9]*/stat` on the 2-vCPU guest 1 s apart, while a shell loop named
    /// `spin (x) y` (pid 12695) ran and a neighbour's pgbench and postgres started.
    fn window() -> (ProcessCpuSnapshot, ProcessCpuSnapshot) {
        (
            ProcessCpuSnapshot::from_stat_lines(&fixture("all-stat-start.txt")),
            ProcessCpuSnapshot::from_stat_lines(&fixture("all-stat-end.txt")),
        )
    }

    #[test]
    fn a_real_stat_line_with_parentheses_in_the_name() {
        let end = fixture("all-stat-end.txt");
        let line = end.lines().find(|l| l.starts_with("12695 ")).unwrap();
        let p = parse_process_stat(line).unwrap();
        assert_eq!(p.command, "spin (x) y");
        assert_eq!((p.cpu_ticks, p.children_cpu_ticks), (130, 0));
        assert_eq!(p.start_ticks, 83678);
        assert_eq!(p.last_cpu, Some(1));
        assert!(!p.kernel_thread);
        let k = fixture("tree/14/stat");
        let k = parse_process_stat(&k).unwrap();
        assert_eq!(k.command, "ksoftirqd/0");
        assert!(k.kernel_thread);
    }

    #[test]
    fn the_spinning_neighbour_comes_first() {
        let (start, end) = window();
        assert_eq!(start.processes.len(), 80);
        let others = other_processes(&start, &end, &BTreeSet::new(), 100);
        let first = &others[0];
        assert_eq!(
            (first.pid, first.command.as_str(), first.cpu_ns),
            (12695, "spin (x) y", 1000 * MS)
        );
        assert_eq!(first.last_cpu, Some(1));
        assert!(!first.started_in_window);
        assert!(
            others
                .windows(2)
                .all(|w| w[0].total_cpu_ns() >= w[1].total_cpu_ns())
        );
    }

    #[test]
    fn followed_pids_are_left_out_and_new_processes_count_from_zero() {
        let (start, end) = window();
        let followed = BTreeSet::from([12695]);
        let others = other_processes(&start, &end, &followed, 100);
        let seen: Vec<(u32, &str, u64, bool)> = others
            .iter()
            .map(|o| (o.pid, o.command.as_str(), o.cpu_ns, o.started_in_window))
            .collect();
        assert_eq!(
            seen,
            vec![
                (12709, "postgres", 140 * MS, true),
                (12708, "pgbench", 50 * MS, true),
                (12668, "postgres", 10 * MS, false),
            ]
        );
    }

    #[test]
    fn a_reused_pid_is_a_new_process_and_reaped_children_are_counted() {
        let start = ProcessCpuSnapshot::from_stat_lines(
            "7 (old) S 1 7 7 0 -1 0 0 0 0 0 500 0 0 0 20 0 1 0 100 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n\
             9 (make) S 1 9 9 0 -1 0 0 0 0 0 3 1 40 10 20 0 1 0 200 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
        );
        let end = ProcessCpuSnapshot::from_stat_lines(
            "7 (new) R 1 7 7 0 -1 0 0 0 0 0 20 5 0 0 20 0 1 0 900 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 3\n\
             9 (make) S 1 9 9 0 -1 0 0 0 0 0 3 1 240 60 20 0 1 0 200 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
        );
        let others = other_processes(&start, &end, &BTreeSet::new(), 100);
        assert_eq!(others[0].command, "make");
        assert_eq!(
            (others[0].cpu_ns, others[0].children_cpu_ns),
            (0, 2500 * MS)
        );
        assert_eq!(others[1].command, "new");
        assert_eq!(
            others[1].cpu_ns,
            250 * MS,
            "counted from zero, not 25 - 500"
        );
        assert!(others[1].started_in_window);
        assert_eq!(others[1].last_cpu, Some(3));
    }

    #[test]
    fn malformed_stat_lines_are_left_out() {
        for bad in [
            "",
            "garbage",
            "12 (x",
            "x (y) R 1",
            "12 (short) R 1 2 3",
            "12 (bad) R 1 12 12 0 -1 0 0 0 0 0 many 0 0 0 20 0 1 0 5",
        ] {
            assert_eq!(parse_process_stat(bad), None, "{bad:?}");
        }
        let s = ProcessCpuSnapshot::from_stat_lines("garbage\n\n1 (a) S");
        assert!(s.processes.is_empty());
        assert!(
            ProcessCpuSnapshot::read(Path::new("/nonexistent/cpudoctor"))
                .processes
                .is_empty()
        );
    }

    #[test]
    fn a_proc_tree_is_read_once_per_process() {
        let root =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/proc/contention/tree");
        let s = ProcessCpuSnapshot::read(&root);
        // `self` links to 12709 and is not read again.
        assert_eq!(
            s.processes.keys().copied().collect::<Vec<_>>(),
            vec![14, 12695, 12709]
        );
    }

    #[test]
    fn this_test_process_shows_its_cpu_time() {
        let me = std::process::id();
        let hz = crate::machine::cpu_time::user_hz();
        let start = ProcessCpuSnapshot::take();
        crate::diagnose::burn_thread_cpu(std::time::Duration::from_millis(100));
        let end = ProcessCpuSnapshot::take();
        let others = other_processes(&start, &end, &BTreeSet::new(), hz);
        let mine = others.iter().find(|o| o.pid == me).unwrap();
        assert!(mine.cpu_ns > 0 && !mine.kernel_thread, "{mine:?}");
        let followed = BTreeSet::from([me]);
        assert!(
            other_processes(&start, &end, &followed, hz)
                .iter()
                .all(|o| o.pid != me)
        );
    }
}
