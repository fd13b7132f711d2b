//! Each followed thread's wall time cut into intervals by the kernel's context-switch records:
//! on a CPU (switch-in to switch-out), preempted (switched out while still runnable, until it
//! is switched in again: waiting for a CPU), and off the CPU to sleep (switched out blocked,
//! until switched in again). Pure: it takes records and gives closed intervals, so it is tested
//! on made-up sequences.
//!
//! Records reach diagnose in batches drained from one ring per CPU, and a thread that leaves
//! one CPU and comes back on another has its two records in two rings: a ring read early in
//! a drain can miss a record that a ring read later already holds the successor of. So
//! records are held back until the *watermark*, a time before which every ring is known to
//! have been read, and only then put in time order and applied.

use super::super::perf_records::Switch;
use std::collections::HashMap;

/// One context switch of one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchEvent {
    /// Process.
    pub pid: u32,
    /// Thread.
    pub tid: u32,
    /// `CLOCK_MONOTONIC` ns.
    pub time_ns: u64,
    /// Which way.
    pub switch: Switch,
}

/// What a thread was doing during an interval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Phase {
    /// On a CPU.
    Running,
    /// Runnable, waiting for a CPU (preempted, or new and not yet run).
    Runnable,
    /// Off the CPU to sleep, until switched in again (this includes the wait for a CPU after
    /// its wake-up, which switch records cannot tell apart).
    Blocked,
}

/// A closed interval of one thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Interval {
    /// Process.
    pub pid: u32,
    /// Thread.
    pub tid: u32,
    /// Start, ns.
    pub start_ns: u64,
    /// End, ns.
    pub end_ns: u64,
    /// What it was.
    pub phase: Phase,
}

impl Interval {
    /// Length in ns.
    pub fn ns(&self) -> u64 {
        self.end_ns - self.start_ns
    }
}

/// A thread's state as the records left it.
#[derive(Debug, Clone, Copy)]
struct Open {
    pid: u32,
    phase: Phase,
    since_ns: u64,
}

/// The state machine of every thread.
#[derive(Debug, Default)]
pub struct Timeline {
    /// When following began (`CLOCK_MONOTONIC` ns): a thread first seen switching out was on
    /// the CPU since then.
    start_ns: u64,
    open: HashMap<u32, Open>,
    /// What a thread that has not switched yet was doing at the start (from /proc: `R` or
    /// `S`/`D`), and threads created since (runnable from their creation).
    initial: HashMap<u32, (Phase, u64)>,
    held: Vec<SwitchEvent>,
    /// Records that contradict the state (two switch-ins in a row): records were lost.
    pub contradictions: u64,
}

impl Timeline {
    /// A timeline of threads followed from `start_ns`.
    pub fn new(start_ns: u64) -> Timeline {
        Timeline {
            start_ns,
            ..Timeline::default()
        }
    }

    /// What thread `tid` was doing when it was first seen at `at_ns` (the start, or its
    /// creation), for the interval before its first switch record.
    pub fn first_seen(&mut self, tid: u32, phase: Phase, at_ns: u64) {
        self.initial.entry(tid).or_insert((phase, at_ns));
    }

    /// Takes records; nothing is applied before [`Timeline::advance`].
    pub fn push(&mut self, e: SwitchEvent) {
        self.held.push(e);
    }

    /// Applies the records older than `watermark_ns`, in time order, and puts the intervals
    /// they close into `out`.
    pub fn advance(&mut self, watermark_ns: u64, out: &mut Vec<Interval>) {
        self.held.sort_by_key(|e| (e.time_ns, e.tid));
        let n = self.held.partition_point(|e| e.time_ns < watermark_ns);
        let ready: Vec<SwitchEvent> = self.held.drain(..n).collect();
        for e in ready {
            self.apply(e, out);
        }
    }

    fn apply(&mut self, e: SwitchEvent, out: &mut Vec<Interval>) {
        let before = match self.open.get(&e.tid) {
            Some(o) => *o,
            None => {
                // The first record of this thread: what it did before follows from which way
                // it switches (out: it ran; in: it waited, runnable or asleep as /proc said).
                let (phase, since_ns) = match e.switch {
                    Switch::In => self
                        .initial
                        .get(&e.tid)
                        .copied()
                        .unwrap_or((Phase::Blocked, self.start_ns)),
                    Switch::OutBlocked | Switch::OutPreempted => (
                        Phase::Running,
                        self.initial
                            .get(&e.tid)
                            .map_or(self.start_ns, |&(_, at)| at),
                    ),
                };
                Open {
                    pid: e.pid,
                    phase,
                    since_ns: since_ns.min(e.time_ns),
                }
            }
        };
        let next = match e.switch {
            Switch::In => Phase::Running,
            Switch::OutPreempted => Phase::Runnable,
            Switch::OutBlocked => Phase::Blocked,
        };
        if (before.phase == Phase::Running) == (next == Phase::Running) {
            // In after in, or out after out: a record in between was lost. The time since
            // the last record is not known; it is left out rather than guessed.
            self.contradictions += 1;
        } else if e.time_ns > before.since_ns {
            out.push(Interval {
                pid: before.pid,
                tid: e.tid,
                start_ns: before.since_ns,
                end_ns: e.time_ns,
                phase: before.phase,
            });
        }
        self.open.insert(
            e.tid,
            Open {
                pid: e.pid,
                phase: next,
                since_ns: e.time_ns,
            },
        );
    }

    /// Thread `tid` exited at `at_ns`: its last interval closes there. Records it held back
    /// are applied first.
    pub fn exit(&mut self, tid: u32, at_ns: u64, out: &mut Vec<Interval>) {
        self.advance_thread(tid, out);
        if let Some(o) = self.open.remove(&tid)
            && at_ns > o.since_ns
        {
            out.push(Interval {
                pid: o.pid,
                tid,
                start_ns: o.since_ns,
                end_ns: at_ns,
                phase: o.phase,
            });
        }
        self.initial.remove(&tid);
    }

    fn advance_thread(&mut self, tid: u32, out: &mut Vec<Interval>) {
        self.held.sort_by_key(|e| (e.time_ns, e.tid));
        let mine: Vec<SwitchEvent> = self.held.iter().filter(|e| e.tid == tid).copied().collect();
        self.held.retain(|e| e.tid != tid);
        for e in mine {
            self.apply(e, out);
        }
    }

    /// The end of the recording at `end_ns`: every record is applied and every open interval
    /// closed; a thread that never switched is in one state the whole time, which `initial`
    /// (from /proc) says, for `pid_of` its process.
    pub fn finish(
        &mut self,
        end_ns: u64,
        pid_of: impl Fn(u32) -> Option<u32>,
        out: &mut Vec<Interval>,
    ) {
        self.advance(u64::MAX, out);
        let mut open: Vec<(u32, Open)> = self.open.drain().collect();
        open.sort_by_key(|(tid, _)| *tid);
        for (tid, o) in open {
            if end_ns > o.since_ns {
                out.push(Interval {
                    pid: o.pid,
                    tid,
                    start_ns: o.since_ns,
                    end_ns,
                    phase: o.phase,
                });
            }
            self.initial.remove(&tid);
        }
        let mut quiet: Vec<(u32, (Phase, u64))> = self.initial.drain().collect();
        quiet.sort_by_key(|(tid, _)| *tid);
        for (tid, (phase, since)) in quiet {
            if let Some(pid) = pid_of(tid)
                && end_ns > since
            {
                out.push(Interval {
                    pid,
                    tid,
                    start_ns: since,
                    end_ns,
                    phase,
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(tid: u32, time_ns: u64, switch: Switch) -> SwitchEvent {
        SwitchEvent {
            pid: 1,
            tid,
            time_ns,
            switch,
        }
    }

    fn phases(out: &[Interval]) -> Vec<(u32, u64, u64, Phase)> {
        out.iter()
            .map(|i| (i.tid, i.start_ns, i.end_ns, i.phase))
            .collect()
    }

    #[test]
    fn switches_cut_a_thread_into_running_runnable_and_blocked() {
        let mut t = Timeline::new(100);
        let mut out = Vec::new();
        // Running from the start, preempted at 150, back at 170, blocks at 200, back at 260.
        for e in [
            ev(7, 150, Switch::OutPreempted),
            ev(7, 170, Switch::In),
            ev(7, 200, Switch::OutBlocked),
            ev(7, 260, Switch::In),
        ] {
            t.push(e);
        }
        t.advance(1_000, &mut out);
        t.finish(300, |_| Some(1), &mut out);
        use Phase::*;
        assert_eq!(
            phases(&out),
            vec![
                (7, 100, 150, Running),
                (7, 150, 170, Runnable),
                (7, 170, 200, Running),
                (7, 200, 260, Blocked),
                (7, 260, 300, Running),
            ]
        );
        // Every ns of the window is in exactly one interval.
        assert_eq!(out.iter().map(Interval::ns).sum::<u64>(), 200);
    }

    #[test]
    fn records_are_held_back_until_the_watermark_and_applied_in_time_order() {
        // Guards the two-ring race: the switch-in (on another CPU's ring) arrives in an
        // earlier batch than the switch-out that precedes it.
        let mut t = Timeline::new(0);
        let mut out = Vec::new();
        t.push(ev(3, 50, Switch::In));
        t.advance(40, &mut out);
        assert!(out.is_empty(), "nothing before the watermark");
        t.push(ev(3, 30, Switch::OutBlocked));
        t.advance(60, &mut out);
        assert_eq!(
            phases(&out),
            vec![(3, 0, 30, Phase::Running), (3, 30, 50, Phase::Blocked)]
        );
        assert_eq!(t.contradictions, 0);
    }

    #[test]
    fn a_thread_asleep_at_the_start_is_blocked_until_its_first_switch_in() {
        let mut t = Timeline::new(0);
        let mut out = Vec::new();
        t.first_seen(4, Phase::Blocked, 0);
        t.first_seen(5, Phase::Runnable, 10); // created at 10
        t.first_seen(6, Phase::Blocked, 0); // never switches: asleep throughout
        t.push(ev(4, 80, Switch::In));
        t.push(ev(5, 20, Switch::In));
        t.finish(100, |tid| (tid != 99).then_some(1), &mut out);
        use Phase::*;
        assert_eq!(
            phases(&out),
            vec![
                (5, 10, 20, Runnable),
                (4, 0, 80, Blocked),
                (4, 80, 100, Running),
                (5, 20, 100, Running),
                (6, 0, 100, Blocked),
            ]
        );
    }

    #[test]
    fn an_exit_closes_the_thread_and_lost_records_leave_a_gap_not_a_guess() {
        let mut t = Timeline::new(0);
        let mut out = Vec::new();
        t.push(ev(8, 10, Switch::OutBlocked));
        t.push(ev(8, 20, Switch::In));
        t.push(ev(8, 30, Switch::In)); // an out between them was lost
        t.exit(8, 45, &mut out);
        use Phase::*;
        assert_eq!(
            phases(&out),
            vec![
                (8, 0, 10, Running),
                (8, 10, 20, Blocked),
                (8, 30, 45, Running)
            ]
        );
        assert_eq!(t.contradictions, 1);
        t.finish(100, |_| Some(1), &mut out);
        assert_eq!(out.len(), 3, "an exited thread is not extended to the end");
    }
}
