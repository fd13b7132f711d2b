//! Each followed thread's wall time from the kernel's own per-thread counts, the default source
//! of the wall-clock view: `/proc/PID/task/TID/schedstat` holds a thread's time on a CPU and
//! its time on a run queue waiting for one (preempted, new, or woken and not yet run), exact
//! whatever the switch rate; blocked is the rest of its wall time. Read with the thread
//! figures every ~100 ms, so nothing is done at a context switch: switch records
//! ([`super::timeline`], `--switches`) cost the kernel ~0.8 us and diagnose its own work at
//! each of a busy server's 40,000 switches a second.
//!
//! What counts cannot give is when each wait began: a wait for a CPU gets the stacks of the
//! thread's own on-CPU samples between the two readings it fell between (a preemption falls
//! where the thread runs, in proportion to the time it runs there), and a wait after a
//! wake-up is not told apart from a preemption. Pure: fed readings, tested on made-up ones.

use super::recorder::ThreadTimes;
use std::collections::BTreeMap;

/// One reading of one thread's counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reading {
    /// When it was read (or the thread's start, for counts from zero), `CLOCK_MONOTONIC` ns.
    pub at_ns: u64,
    /// Time on a CPU so far, ns (schedstat's first field).
    pub cpu_ns: u64,
    /// Time on a run queue waiting for a CPU so far, ns (schedstat's second field).
    pub run_delay_ns: u64,
}

/// A thread's first and latest readings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ThreadCounts {
    pid: u32,
    first: Reading,
    last: Reading,
}

/// The readings of every thread met.
#[derive(Debug, Default)]
pub struct Counts {
    threads: BTreeMap<u32, ThreadCounts>,
}

/// What a new reading adds to the one before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Since {
    /// When the reading before was taken, ns.
    pub from_ns: u64,
    /// Time waiting for a CPU between the two, ns.
    pub run_delay_ns: u64,
}

impl Counts {
    /// Thread `tid` of `pid` read: `first` is its first reading (or zero counts at its start),
    /// `last` the reading now. Returns what it waited for a CPU since its reading before.
    pub fn read(&mut self, tid: u32, pid: u32, first: Reading, last: Reading) -> Since {
        let before = self
            .threads
            .insert(tid, ThreadCounts { pid, first, last })
            .map_or(first, |t| t.last);
        Since {
            from_ns: before.at_ns,
            run_delay_ns: last.run_delay_ns.saturating_sub(before.run_delay_ns),
        }
    }

    /// Each thread's times within the window from `start_ns`: running and runnable from its
    /// counts, blocked the rest of the time between its first and last readings. A thread that
    /// began before the window (a started command's, counted from zero) starts at the window.
    pub fn times(&self, start_ns: u64) -> BTreeMap<u32, ThreadTimes> {
        self.threads
            .iter()
            .map(|(&tid, t)| {
                let first_ns = t.first.at_ns.max(start_ns);
                let last_ns = t.last.at_ns.max(first_ns);
                let running_ns = t.last.cpu_ns.saturating_sub(t.first.cpu_ns);
                let runnable_ns = t.last.run_delay_ns.saturating_sub(t.first.run_delay_ns);
                // The files are read one after another, so the counts can run a little past the
                // times taken beside them: blocked is never below zero.
                let blocked_ns = (last_ns - first_ns).saturating_sub(running_ns + runnable_ns);
                (
                    tid,
                    ThreadTimes {
                        pid: t.pid,
                        first_ns,
                        last_ns,
                        running_ns,
                        runnable_ns,
                        blocked_ns,
                    },
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(at_ns: u64, cpu_ns: u64, run_delay_ns: u64) -> Reading {
        Reading {
            at_ns,
            cpu_ns,
            run_delay_ns,
        }
    }

    #[test]
    fn a_thread_s_times_are_its_counts_and_the_rest_of_its_wall_is_blocked() {
        let mut c = Counts::default();
        let first = r(1_000, 500, 100);
        assert_eq!(
            c.read(7, 3, first, r(1_100, 530, 140)),
            Since {
                from_ns: 1_000,
                run_delay_ns: 40
            }
        );
        assert_eq!(
            c.read(7, 3, first, r(1_200, 560, 150)),
            Since {
                from_ns: 1_100,
                run_delay_ns: 10
            }
        );
        let t = c.times(0)[&7];
        assert_eq!((t.pid, t.first_ns, t.last_ns), (3, 1_000, 1_200));
        assert_eq!((t.running_ns, t.runnable_ns, t.blocked_ns), (60, 50, 90));
    }

    #[test]
    fn counts_that_run_past_their_readings_leave_no_negative_blocked_time() {
        let mut c = Counts::default();
        c.read(1, 1, r(0, 0, 0), r(100, 90, 20));
        let t = c.times(0)[&1];
        assert_eq!((t.running_ns, t.runnable_ns, t.blocked_ns), (90, 20, 0));
    }

    #[test]
    fn a_thread_counted_from_its_start_before_the_window_starts_at_the_window() {
        let mut c = Counts::default();
        c.read(1, 1, r(50, 0, 0), r(300, 100, 0));
        let t = c.times(100)[&1];
        assert_eq!((t.first_ns, t.last_ns, t.blocked_ns), (100, 300, 100));
    }
}
