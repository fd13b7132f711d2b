//! The followed processes' records among a CPU-wide sampler's, which are every process's: a
//! set of followed PIDs that grows by the fork records of followed parents, applied to the
//! records in time order before [`super::State::apply`]. Pure: tested on made-up records.
//!
//! Each CPU's ring is read in turn, so a child forked on one CPU just before a drain can have
//! its first records in a ring read before the one holding its fork record, or its fork
//! record can come only with the next drain. A record of a process not (yet) followed is
//! therefore dropped only when it is older than the *watermark*, a time before which every
//! ring is known to have been read (the drain's start, less a slack); a newer one is held
//! back and decided with the next drain's records, by then in order with its fork record.
//!
//! A thread's last context switches come after its exit record (the exit is recorded early
//! in `do_exit`; the dead task may still be preempted, and leaves the CPU for good after it),
//! which a per-task event, closed at the exit, never writes. Those switches are dropped: the
//! wall-clock view would read them as a thread never seen before, running or asleep since the
//! start. Their TID is the thread's, or -1 once the kernel has released the thread's PID
//! (`perf_event_tid` of a task no longer alive), their PID still the process's while other
//! threads of it live.

use super::Record;
use std::collections::HashSet;

/// The PID or TID the kernel writes for a task whose PID it has released: -1.
const DEAD_TASK: u32 = u32::MAX;

/// The followed set and the records held back.
#[derive(Debug, Default)]
pub(super) struct FollowedFilter {
    pids: HashSet<u32>,
    /// Follow the processes that followed processes fork (false with `--no-children`).
    children: bool,
    /// A launched command held before its exec: its records until the exec are the forked
    /// copy of diagnose waiting to be released, dropped as a per-task event with
    /// `enable_on_exec` never writes them.
    before_exec: Option<u32>,
    held: Vec<Record>,
    /// Followed threads whose exit record was kept: their switches since are the dead task's.
    exited: HashSet<u32>,
    /// Samples of processes not followed, read and dropped.
    dropped_samples: u64,
}

impl FollowedFilter {
    /// A filter following `pids` (the root and, with `children`, its descendants at the
    /// attach), and with `children` every process they fork from now on. `before_exec`: a
    /// launched command whose records count from its exec.
    pub(super) fn new(
        pids: impl IntoIterator<Item = u32>,
        children: bool,
        before_exec: Option<u32>,
    ) -> FollowedFilter {
        FollowedFilter {
            pids: pids.into_iter().collect(),
            children,
            before_exec,
            ..FollowedFilter::default()
        }
    }

    /// True when `pid` is followed now.
    pub(super) fn follows(&self, pid: u32) -> bool {
        self.pids.contains(&pid)
    }

    /// Process `pid` has gone: a later process given its PID is not followed unless a
    /// followed process forked it.
    pub(super) fn forget(&mut self, pid: u32) {
        self.pids.remove(&pid);
    }

    /// Samples of other processes that were read and dropped.
    pub(super) fn dropped_samples(&self) -> u64 {
        self.dropped_samples
    }

    /// Keeps in `records` those of followed processes, in time order, with the records held
    /// back last time: a fork record by a followed process of a new process makes that one
    /// followed (with `children`); a record of another process older than `watermark_ns` is
    /// dropped, a newer one held back for the next call. Lost counts are kept.
    pub(super) fn keep_followed(&mut self, records: &mut Vec<Record>, watermark_ns: u64) {
        records.append(&mut self.held);
        records.sort_by_key(Record::time_ns);
        let mut kept = Vec::with_capacity(records.len());
        for r in records.drain(..) {
            let pid = match &r {
                Record::Lost { .. } => {
                    kept.push(r);
                    continue;
                }
                Record::Fork { pid, ppid, .. } => {
                    if self.children
                        && !self.pids.contains(pid)
                        && self.pids.contains(ppid)
                        && self.before_exec != Some(*ppid)
                    {
                        self.pids.insert(*pid);
                    }
                    *pid
                }
                Record::Switch { tid, .. } if *tid == DEAD_TASK || self.exited.contains(tid) => {
                    continue;
                }
                Record::Sample { pid, .. }
                | Record::Mmap { pid, .. }
                | Record::Comm { pid, .. }
                | Record::Exit { pid, .. }
                | Record::Switch { pid, .. } => *pid,
            };
            if self.before_exec == Some(pid) {
                if matches!(r, Record::Comm { exec: true, .. }) {
                    self.before_exec = None;
                    kept.push(r);
                }
            } else if self.pids.contains(&pid) {
                match r {
                    Record::Exit { tid, .. } => {
                        self.exited.insert(tid);
                    }
                    // A TID given again, to a new thread.
                    Record::Fork { tid, .. } => {
                        self.exited.remove(&tid);
                    }
                    _ => {}
                }
                kept.push(r);
            } else if r.time_ns() >= watermark_ns {
                self.held.push(r);
            } else if matches!(r, Record::Sample { .. }) {
                self.dropped_samples += 1;
            }
        }
        *records = kept;
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::perf_records::Switch;
    use super::*;

    fn sample(pid: u32, time_ns: u64) -> Record {
        Record::Sample {
            pid,
            tid: pid,
            time_ns,
            ip: 0x1000,
            in_kernel: false,
            kernel_callers: Vec::new(),
            callers: Vec::new(),
            user: None,
        }
    }

    fn fork(pid: u32, ppid: u32, time_ns: u64) -> Record {
        Record::Fork {
            pid,
            ppid,
            tid: pid,
            time_ns,
        }
    }

    fn switch(pid: u32, time_ns: u64) -> Record {
        Record::Switch {
            pid,
            tid: pid,
            time_ns,
            switch: Switch::In,
        }
    }

    fn pids(records: &[Record]) -> Vec<(u32, u64)> {
        records
            .iter()
            .filter_map(|r| match r {
                Record::Sample { pid, time_ns, .. }
                | Record::Fork { pid, time_ns, .. }
                | Record::Switch { pid, time_ns, .. }
                | Record::Comm { pid, time_ns, .. }
                | Record::Mmap { pid, time_ns, .. }
                | Record::Exit { pid, time_ns, .. } => Some((*pid, *time_ns)),
                Record::Lost { .. } => None,
            })
            .collect()
    }

    #[test]
    fn the_followed_set_grows_by_the_forks_of_followed_parents_and_drops_the_rest() {
        // Root 10 forks 20 (whose records sit in a ring read first: out of time order), 20
        // forks 30; 99, a process beside them, forks 98. Only 10's line is kept.
        let mut f = FollowedFilter::new([10], true, None);
        let mut records = vec![
            sample(20, 6),
            switch(20, 5),
            fork(30, 20, 7),
            sample(30, 8),
            sample(99, 2),
            switch(99, 3),
            fork(98, 99, 4),
            sample(98, 5),
            fork(20, 10, 4),
            sample(10, 1),
            Record::Lost { count: 2 },
        ];
        f.keep_followed(&mut records, 100);
        assert_eq!(
            pids(&records),
            vec![(10, 1), (20, 4), (20, 5), (20, 6), (30, 7), (30, 8)]
        );
        assert!(matches!(records[0], Record::Lost { count: 2 }));
        assert!(f.follows(30) && !f.follows(98) && !f.follows(99));
        assert_eq!(f.dropped_samples(), 2);
    }

    #[test]
    fn a_record_newer_than_the_watermark_waits_for_its_fork_record_in_the_next_drain() {
        // Guards the ring race: the child's sample at 55 was read before the ring holding
        // its fork at 52, which only the next drain brings. Held, not dropped; an unrelated
        // process's record newer than the watermark is held too, then dropped.
        let mut f = FollowedFilter::new([10], true, None);
        let mut first = vec![sample(10, 40), sample(20, 55), sample(99, 56)];
        f.keep_followed(&mut first, 50);
        assert_eq!(pids(&first), vec![(10, 40)]);
        let mut second = vec![fork(20, 10, 52), sample(20, 80)];
        f.keep_followed(&mut second, 100);
        assert_eq!(pids(&second), vec![(20, 52), (20, 55), (20, 80)]);
        assert_eq!(f.dropped_samples(), 1, "the unrelated one, once old enough");
        // At the stop the watermark is the end of time: nothing is held.
        let mut last = vec![sample(77, 200)];
        f.keep_followed(&mut last, u64::MAX);
        assert!(last.is_empty());
        assert!(f.held.is_empty());
    }

    #[test]
    fn without_children_the_forks_of_the_root_are_not_followed_but_its_threads_are() {
        // --no-children: 10's new thread (a fork record with its own pid) stays, its child
        // process 20 does not.
        let mut f = FollowedFilter::new([10], false, None);
        let thread = Record::Fork {
            pid: 10,
            ppid: 10,
            tid: 11,
            time_ns: 1,
        };
        let mut records = vec![
            thread.clone(),
            fork(20, 10, 2),
            sample(20, 3),
            sample(10, 4),
        ];
        f.keep_followed(&mut records, 100);
        assert_eq!(records, vec![thread, sample(10, 4)]);
    }

    #[test]
    fn a_launched_command_counts_from_its_exec() {
        // The held child (pid 10) runs diagnose's own code until it execs: those samples and
        // switches are dropped, the exec's comm record and what follows are kept, and the
        // process it forks is followed.
        let mut f = FollowedFilter::new([10], true, Some(10));
        let exec = Record::Comm {
            pid: 10,
            tid: 10,
            comm: "prog".into(),
            exec: true,
            time_ns: 3,
        };
        let mut records = vec![
            sample(10, 1),
            switch(10, 2),
            exec.clone(),
            sample(10, 4),
            fork(20, 10, 5),
            sample(20, 6),
        ];
        f.keep_followed(&mut records, 100);
        assert_eq!(pids(&records), vec![(10, 3), (10, 4), (20, 5), (20, 6)]);
        assert_eq!(records[0], exec);
    }

    #[test]
    fn the_switches_of_a_thread_after_its_exit_are_dropped() {
        // Guards the wall-clock view: a CPU-wide event records the dead thread's last
        // switch-out after its exit record, which made the thread running from the start of
        // the window to its death, twice its wall time; under load a preemption in the exit
        // path adds an out and an in. Its switches before the exit stay.
        let mut f = FollowedFilter::new([10], true, None);
        let exit = Record::Exit {
            pid: 10,
            tid: 11,
            time_ns: 5,
        };
        let out = |time_ns| Record::Switch {
            pid: 10,
            tid: 11,
            time_ns,
            switch: Switch::OutBlocked,
        };
        // Thread 12's PID was released before its last switch: TID -1, in process 10.
        let dead = Record::Switch {
            pid: 10,
            tid: u32::MAX,
            time_ns: 7,
            switch: Switch::OutBlocked,
        };
        let preempted = Record::Switch {
            pid: 10,
            tid: 11,
            time_ns: 6,
            switch: Switch::OutPreempted,
        };
        let back_in = Record::Switch {
            pid: 10,
            tid: 11,
            time_ns: 6,
            switch: Switch::In,
        };
        let mut records = vec![
            switch(10, 1),
            out(2),
            preempted,
            back_in,
            out(6),
            exit.clone(),
            dead,
            switch(10, 7),
        ];
        f.keep_followed(&mut records, 100);
        assert_eq!(records, vec![switch(10, 1), out(2), exit, switch(10, 7)]);
        // Until a later thread is given TID 11: it is followed as any other.
        let mut again = vec![
            Record::Fork {
                pid: 10,
                ppid: 10,
                tid: 11,
                time_ns: 8,
            },
            out(9),
        ];
        f.keep_followed(&mut again, 100);
        assert_eq!(again.len(), 2);
    }

    #[test]
    fn a_forgotten_pid_given_to_another_process_is_not_followed() {
        let mut f = FollowedFilter::new([10, 20], true, None);
        f.forget(20);
        let mut records = vec![sample(20, 5)];
        f.keep_followed(&mut records, 100);
        assert!(records.is_empty());
    }
}
