//! Kernel signals per thread, from /proc: CPU time against wall time (a spinning thread burns
//! a whole CPU while it waits), voluntary and involuntary context switches (blocking against
//! being preempted), and page faults. Read every ~100 ms while the workload runs, because a
//! thread's /proc entry vanishes when it exits: schedstat and `stat` at every poll, from files
//! kept open (the wall-clock view's counts, CPU ticks and faults), `status` (the switch counts)
//! at a full poll.

use super::wall::counts::Reading;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::os::unix::fs::FileExt;

/// One reading of one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ThreadReading {
    /// CPU time in ns (schedstat's run time when present, else utime + stime).
    pub cpu_ns: u64,
    /// Time runnable but waiting for a CPU, ns (schedstat's run-queue delay; `None` without
    /// schedstat).
    pub run_delay_ns: Option<u64>,
    /// Minor page faults.
    pub minor_faults: u64,
    /// Major page faults.
    pub major_faults: u64,
    /// Voluntary context switches (the thread blocked).
    pub voluntary_switches: u64,
    /// Involuntary context switches (the thread was preempted).
    pub involuntary_switches: u64,
    /// Start time in clock ticks since boot.
    pub start_ticks: u64,
    /// User time in clock ticks (`utime`).
    pub user_ticks: u64,
    /// System time in clock ticks (`stime`): in the kernel on the thread's behalf.
    pub system_ticks: u64,
}

/// The `stat` fields diagnose reads: name, faults, CPU ticks, start time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatFields {
    /// Thread name (`comm`).
    pub comm: String,
    /// Minor faults.
    pub minflt: u64,
    /// Major faults.
    pub majflt: u64,
    /// User time in clock ticks.
    pub utime: u64,
    /// System time in clock ticks.
    pub stime: u64,
    /// Start time in clock ticks since boot.
    pub starttime: u64,
}

/// Parses `/proc/PID/task/TID/stat`. The name sits in parentheses and may itself hold spaces
/// and parentheses, so fields are counted from the last `)`.
pub fn parse_stat(text: &str) -> Option<StatFields> {
    let open = text.find('(')?;
    let close = text.rfind(')')?;
    let comm = text.get(open + 1..close)?.to_string();
    let f: Vec<&str> = text.get(close + 1..)?.split_whitespace().collect();
    let n = |i: usize| f.get(i)?.parse::<u64>().ok();
    Some(StatFields {
        comm,
        minflt: n(7)?,
        majflt: n(9)?,
        utime: n(11)?,
        stime: n(12)?,
        starttime: n(19)?,
    })
}

/// Parses `/proc/.../status` for the two context-switch counts.
pub fn parse_switches(status: &str) -> (u64, u64) {
    let get = |key: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    (
        get("voluntary_ctxt_switches:"),
        get("nonvoluntary_ctxt_switches:"),
    )
}

/// Parses `/proc/.../schedstat`: time on CPU in ns (first field).
pub fn parse_schedstat(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
}

/// Parses `/proc/.../schedstat`'s second field: time runnable on a run queue, waiting for a
/// CPU, in ns (preempted, or woken and not yet run).
pub fn parse_run_delay(text: &str) -> Option<u64> {
    text.split_whitespace().nth(1)?.parse().ok()
}

/// Clock ticks per second of /proc times.
pub fn clock_ticks_per_s() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as u64 } else { 100 }
}

/// Reads one thread; `None` when it has gone.
pub fn read_thread(pid: u32, tid: u32) -> Option<(String, ThreadReading)> {
    let dir = format!("/proc/{pid}/task/{tid}");
    let stat = parse_stat(&fs::read_to_string(format!("{dir}/stat")).ok()?)?;
    let (vol, invol) = parse_switches(&fs::read_to_string(format!("{dir}/status")).ok()?);
    let tick_ns = 1_000_000_000 / clock_ticks_per_s();
    let schedstat = fs::read_to_string(format!("{dir}/schedstat")).ok();
    let cpu_ns = schedstat
        .as_deref()
        .and_then(parse_schedstat)
        .unwrap_or((stat.utime + stat.stime) * tick_ns);
    let run_delay_ns = schedstat.as_deref().and_then(parse_run_delay);
    Some((
        stat.comm,
        ThreadReading {
            cpu_ns,
            run_delay_ns,
            minor_faults: stat.minflt,
            major_faults: stat.majflt,
            voluntary_switches: vol,
            involuntary_switches: invol,
            start_ticks: stat.starttime,
            user_ticks: stat.utime,
            system_ticks: stat.stime,
        },
    ))
}

/// First and last reading of a thread, and when each was taken (boot-time ns).
#[derive(Debug, Clone)]
struct Track {
    pid: u32,
    name: String,
    first: ThreadReading,
    first_ns: u64,
    last: ThreadReading,
    last_ns: u64,
}

/// The most threads whose files a tracker keeps open: two file descriptors each, well inside the
/// limit diagnose raises for its events (a server of thousands of threads reads the rest in
/// full).
pub const OPEN_KEPT_MAX: usize = 4096;

/// A thread's files kept open between polls, with its process.
#[derive(Debug)]
struct Kept {
    pid: u32,
    schedstat: fs::File,
    stat: fs::File,
}

impl Kept {
    fn open(pid: u32, tid: u32) -> Option<Kept> {
        let file = |name: &str| fs::File::open(format!("/proc/{pid}/task/{tid}/{name}")).ok();
        Some(Kept {
            pid,
            schedstat: file("schedstat")?,
            stat: file("stat")?,
        })
    }

    /// Both files read again: time on a CPU, time waiting for one, and the `stat` fields;
    /// `None` once the thread is gone (ESRCH).
    fn read(&self) -> Option<(u64, u64, StatFields)> {
        let mut buf = [0u8; 1024];
        let n = self.schedstat.read_at(&mut buf, 0).ok()?;
        let text = std::str::from_utf8(&buf[..n]).ok()?;
        let (cpu_ns, delay) = (parse_schedstat(text)?, parse_run_delay(text)?);
        let n = self.stat.read_at(&mut buf, 0).ok()?;
        let stat = parse_stat(std::str::from_utf8(&buf[..n]).ok()?)?;
        Some((cpu_ns, delay, stat))
    }
}

/// Follows threads across readings.
#[derive(Debug, Default)]
pub struct ThreadTracker {
    tracks: BTreeMap<u32, Track>,
    /// Each thread's schedstat and `stat`, open: read again from offset 0 the kernel writes
    /// them afresh, so a poll between full ones costs two `pread`s a thread, not three opens'
    /// path walks and `status`, the longest of the three (the open path was ~12% of
    /// diagnose's CPU on MariaDB at 87,000 switches/s).
    /// Keyed by thread, with its process; closed when the thread leaves its process's task
    /// list. At most [`OPEN_KEPT_MAX`] (beyond, a thread is read in full each poll).
    kept: HashMap<u32, Kept>,
    /// True when threads began with the diagnosis (a started command): their counts start at
    /// zero at their start time. False when attaching: counts are deltas from the first look,
    /// except for threads started after the attach, which count from their start too.
    from_start: bool,
    /// When the tracker was made (boot-time ns).
    created_ns: u64,
}

/// What one thread did while it was observed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadFigures {
    /// Process id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// Thread name.
    pub name: String,
    /// Wall time observed, in seconds.
    pub wall_s: f64,
    /// CPU time in that window, in seconds.
    pub cpu_s: f64,
    /// Of it, time in the kernel (system time), in seconds: `cpu_s` split as the kernel's
    /// tick accounting splits `utime` and `stime`. Absent when no tick fell in the window,
    /// and in files written before it was read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_s: Option<f64>,
    /// CPU time over wall time (1.0 = one CPU busy the whole time).
    pub cpu_per_wall: f64,
    /// Time runnable but waiting for a CPU in that window, s (schedstat's run-queue delay;
    /// absent without schedstat, and in files saved before it was read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_delay_s: Option<f64>,
    /// Voluntary context switches (blocked: lock waits, I/O, sleeps).
    pub voluntary_switches: u64,
    /// Involuntary context switches (preempted: more runnable threads than CPUs).
    pub involuntary_switches: u64,
    /// Minor page faults.
    pub minor_faults: u64,
    /// Major page faults.
    pub major_faults: u64,
}

impl ThreadTracker {
    /// A tracker; `from_start` as for a started command.
    pub fn new(from_start: bool) -> ThreadTracker {
        ThreadTracker {
            tracks: BTreeMap::new(),
            kept: HashMap::new(),
            from_start,
            created_ns: crate::measure::clock::boot_time_ns(),
        }
    }

    /// Reads every thread of `pid` now; returns the threads read. A `full` poll reads each
    /// thread's `stat`, `status` and schedstat; another reads only the schedstat and `stat` of
    /// threads already seen (their times, CPU ticks and faults), keeping the switch counts of
    /// the last full reading: a thread that exits between full polls loses the switches of
    /// its last interval, nothing else.
    pub fn poll(&mut self, pid: u32, full: bool) -> Vec<u32> {
        let mut read = Vec::new();
        let now = crate::measure::clock::boot_time_ns();
        let tick_ns = 1_000_000_000 / clock_ticks_per_s();
        let Ok(dir) = fs::read_dir(format!("/proc/{pid}/task")) else {
            return read;
        };
        let tids: Vec<u32> = dir
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
            .collect();
        self.kept
            .retain(|tid, kept| kept.pid != pid || tids.contains(tid));
        for tid in tids {
            if !full && let Some(t) = self.tracks.get_mut(&tid) {
                let Some(kept) = self.kept.get(&tid) else {
                    // No schedstat (a kernel without it): every poll is a full one.
                    if let Some((name, r)) = read_thread(pid, tid) {
                        (t.name, t.last, t.last_ns) = (name, r, now);
                        read.push(tid);
                    }
                    continue;
                };
                let Some((cpu_ns, delay, stat)) = kept.read() else {
                    // Gone (ESRCH): the last reading stands.
                    self.kept.remove(&tid);
                    continue;
                };
                t.name = stat.comm;
                t.last.cpu_ns = cpu_ns;
                t.last.run_delay_ns = Some(delay);
                t.last.minor_faults = stat.minflt;
                t.last.major_faults = stat.majflt;
                t.last.user_ticks = stat.utime;
                t.last.system_ticks = stat.stime;
                t.last_ns = now;
                read.push(tid);
                continue;
            }
            let Some((name, r)) = read_thread(pid, tid) else {
                self.kept.remove(&tid);
                continue;
            };
            if r.run_delay_ns.is_some()
                && self.kept.len() < OPEN_KEPT_MAX
                && !self.kept.contains_key(&tid)
                && let Some(kept) = Kept::open(pid, tid)
            {
                self.kept.insert(tid, kept);
            }
            // A thread that started after the attach would lose what it did before its first
            // look (up to a poll interval of a short thread's life).
            let from_start = self.from_start || r.start_ticks * tick_ns >= self.created_ns;
            let t = self.tracks.entry(tid).or_insert_with(|| {
                if from_start {
                    Track {
                        pid,
                        name: name.clone(),
                        first: ThreadReading {
                            start_ticks: r.start_ticks,
                            run_delay_ns: r.run_delay_ns.map(|_| 0),
                            ..ThreadReading::default()
                        },
                        first_ns: r.start_ticks * tick_ns,
                        last: r,
                        last_ns: now,
                    }
                } else {
                    Track {
                        pid,
                        name: name.clone(),
                        first: r,
                        first_ns: now,
                        last: r,
                        last_ns: now,
                    }
                }
            });
            t.name = name;
            t.last = r;
            t.last_ns = now;
            read.push(tid);
        }
        read
    }

    /// Thread `tid`'s process and schedstat counts at its first reading (zero at its start
    /// when counted from it) and its last, timed in `CLOCK_MONOTONIC` given the clocks'
    /// difference now (boot time minus monotonic: the time suspended); `None` without
    /// schedstat.
    pub fn counts(
        &self,
        tid: u32,
        boot_minus_monotonic_ns: u64,
    ) -> Option<(u32, Reading, Reading)> {
        let t = self.tracks.get(&tid)?;
        let reading = |at_ns: u64, r: &ThreadReading| {
            Some(Reading {
                at_ns: at_ns.saturating_sub(boot_minus_monotonic_ns),
                cpu_ns: r.cpu_ns,
                run_delay_ns: r.run_delay_ns?,
            })
        };
        Some((
            t.pid,
            reading(t.first_ns, &t.first)?,
            reading(t.last_ns, &t.last)?,
        ))
    }

    /// Figures for every thread seen, busiest first.
    pub fn figures(&self) -> Vec<ThreadFigures> {
        let mut v: Vec<ThreadFigures> = self
            .tracks
            .iter()
            .map(|(&tid, t)| {
                let wall_s = t.last_ns.saturating_sub(t.first_ns) as f64 / 1e9;
                let cpu_s = t.last.cpu_ns.saturating_sub(t.first.cpu_ns) as f64 / 1e9;
                let user = t.last.user_ticks.saturating_sub(t.first.user_ticks);
                let system = t.last.system_ticks.saturating_sub(t.first.system_ticks);
                let system_s =
                    (user + system > 0).then(|| cpu_s * system as f64 / (user + system) as f64);
                ThreadFigures {
                    pid: t.pid,
                    tid,
                    name: t.name.clone(),
                    wall_s,
                    cpu_s,
                    system_s,
                    cpu_per_wall: if wall_s > 0.0 {
                        (cpu_s / wall_s).min(1.0)
                    } else {
                        0.0
                    },
                    run_delay_s: match (t.last.run_delay_ns, t.first.run_delay_ns) {
                        (Some(last), Some(first)) => Some(last.saturating_sub(first) as f64 / 1e9),
                        _ => None,
                    },
                    voluntary_switches: t
                        .last
                        .voluntary_switches
                        .saturating_sub(t.first.voluntary_switches),
                    involuntary_switches: t
                        .last
                        .involuntary_switches
                        .saturating_sub(t.first.involuntary_switches),
                    minor_faults: t.last.minor_faults.saturating_sub(t.first.minor_faults),
                    major_faults: t.last.major_faults.saturating_sub(t.first.major_faults),
                }
            })
            .collect();
        v.sort_by(|a, b| b.cpu_s.total_cmp(&a.cpu_s).then(a.tid.cmp(&b.tid)));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_of_a_real_thread_parses() {
        let s = parse_stat(include_str!("../../../tests/fixtures/proc/task/stat.txt")).unwrap();
        assert_eq!(s.comm, "bash");
        assert_eq!(s.minflt, 102);
        assert_eq!(s.majflt, 0);
        assert_eq!(s.starttime, 156128);
    }

    #[test]
    fn names_with_spaces_and_parentheses_do_not_shift_fields() {
        let line = "42 (my (odd) name) R 1 42 42 0 -1 0 7 0 3 0 250 50 0 0 20 0 2 0 999 0 0";
        let s = parse_stat(line).unwrap();
        assert_eq!(s.comm, "my (odd) name");
        assert_eq!((s.minflt, s.majflt, s.utime, s.stime), (7, 3, 250, 50));
        assert_eq!(s.starttime, 999);
    }

    #[test]
    fn switches_and_schedstat_parse() {
        let status = include_str!("../../../tests/fixtures/proc/task/status.txt");
        let (v, i) = parse_switches(status);
        assert!(status.contains(&format!("voluntary_ctxt_switches:\t{v}")));
        assert!(status.contains(&format!("nonvoluntary_ctxt_switches:\t{i}")));
        let sched = include_str!("../../../tests/fixtures/proc/task/schedstat.txt");
        assert_eq!(parse_schedstat(sched), Some(620865));
        assert_eq!(parse_run_delay(sched), Some(1966056));
    }

    #[test]
    fn a_busy_thread_of_this_process_shows_cpu_time() {
        let mut t = ThreadTracker::new(false);
        let pid = std::process::id();
        t.poll(pid, true);
        crate::diagnose::burn_thread_cpu(std::time::Duration::from_millis(50));
        t.poll(pid, true);
        let me = nix::unistd::gettid().as_raw() as u32;
        let f = t.figures().into_iter().find(|f| f.tid == me).unwrap();
        assert!(f.cpu_s > 0.0 && f.wall_s > 0.0, "{f:?}");
    }

    /// A poll between full ones reads the times from the schedstat and `stat` kept open (the
    /// thread's CPU time and ticks grow by the burn) and keeps the switch counts of the full
    /// reading; a thread gone from the task list has its files closed. Guards the `dd bs=1`
    /// case (tests/cli_diagnose.rs): with `stat` read once a second, a program that lived
    /// under a second had no system time.
    #[test]
    fn a_light_poll_reads_the_times_and_a_gone_threads_file_is_closed() {
        let mut t = ThreadTracker::new(false);
        let pid = std::process::id();
        let me = nix::unistd::gettid().as_raw() as u32;
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || {
            let tid = nix::unistd::gettid().as_raw() as u32;
            rx.recv().ok();
            tid
        });
        std::thread::sleep(std::time::Duration::from_millis(20));
        t.poll(pid, true);
        if !t.kept.contains_key(&me) {
            // A kernel without schedstat reads in full every poll: nothing light to test. It
            // fails, or skips said on stderr, never passes silently.
            tx.send(()).ok();
            other.join().unwrap();
            assert!(
                std::env::var("CPUDOCTOR_ALLOW_SKIP").as_deref() == Ok("1"),
                "this kernel keeps no /proc/PID/task/TID/schedstat; CPUDOCTOR_ALLOW_SKIP=1 skips"
            );
            eprintln!("SKIPPED: this kernel keeps no schedstat; CPUDOCTOR_ALLOW_SKIP=1");
            return;
        }
        let before = t.tracks[&me].last;
        crate::diagnose::burn_thread_cpu(std::time::Duration::from_millis(50));
        std::thread::yield_now();
        t.poll(pid, false);
        let after = t.tracks[&me].last;
        assert!(after.cpu_ns > before.cpu_ns, "{before:?} -> {after:?}");
        assert_eq!(after.voluntary_switches, before.voluntary_switches);
        // The CPU ticks of `stat` follow too (the kernel's share reads them): 50 ms is ~5.
        assert!(
            after.user_ticks + after.system_ticks > before.user_ticks + before.system_ticks,
            "{before:?} -> {after:?}"
        );
        tx.send(()).unwrap();
        let gone = other.join().unwrap();
        assert!(t.tracks.contains_key(&gone));
        t.poll(pid, false);
        assert!(!t.kept.contains_key(&gone));
        assert!(t.kept.contains_key(&me));
        t.poll(pid, true);
        assert!(t.tracks[&me].last.voluntary_switches >= after.voluntary_switches);
    }
}
