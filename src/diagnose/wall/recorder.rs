//! The wall-clock recording under way: the [`Timeline`] of switch records gives each thread's
//! intervals; each interval is given the code it waited in. A preempted interval gets the
//! stack of the thread's last on-CPU sample before it (where it was when the CPU was taken);
//! a blocked one the stack and reason of the /proc looks that fell inside it, split equally
//! when several did. A blocked interval no look fell in (shorter than the time between looks)
//! is shared out at the end over that thread's observed waits in proportion to their time:
//! the looks are a uniform sample of the thread's sleeping time, so the shares are unbiased.
//! Pure, apart from nothing: it is fed by the recorder and tested on made-up events.

use super::observe::BlockReason;
use super::timeline::{Interval, Phase, SwitchEvent, Timeline};
use crate::diagnose::symbols::Location;
use std::collections::{BTreeMap, HashMap, VecDeque};

/// What a thread off the CPU was waiting for.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum OffCpu {
    /// Runnable, waiting for a CPU.
    Runnable,
    /// Asleep.
    Blocked {
        /// Why, from the system call it slept in.
        reason: BlockReason,
    },
}

/// One thread's wall time by state, from its switch records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ThreadTimes {
    /// Process.
    pub pid: u32,
    /// First ns accounted (the start, or the thread's creation).
    pub first_ns: u64,
    /// Last ns accounted (its exit, or the end).
    pub last_ns: u64,
    /// On a CPU.
    pub running_ns: u64,
    /// Preempted or new, waiting for a CPU.
    pub runnable_ns: u64,
    /// Asleep (including the wait for a CPU after each wake-up).
    pub blocked_ns: u64,
}

impl ThreadTimes {
    fn add(&mut self, i: &Interval) {
        if self.running_ns + self.runnable_ns + self.blocked_ns == 0 {
            self.first_ns = i.start_ns;
        }
        self.pid = i.pid;
        self.first_ns = self.first_ns.min(i.start_ns);
        self.last_ns = self.last_ns.max(i.end_ns);
        match i.phase {
            Phase::Running => self.running_ns += i.ns(),
            Phase::Runnable => self.runnable_ns += i.ns(),
            Phase::Blocked => self.blocked_ns += i.ns(),
        }
    }
}

/// A thread, its state off the CPU, and the stack it was in (leaf first; empty when not
/// known).
pub type OffCpuKey = (u32, OffCpu, Vec<Location>);

/// Time off the CPU by thread, state and stack.
pub type OffCpuStacks = HashMap<OffCpuKey, u64>;

/// What the wall-clock recording gives the analysis.
#[derive(Debug, Clone, Default)]
pub struct WallRecording {
    /// Start of the window, `CLOCK_MONOTONIC` ns.
    pub start_ns: u64,
    /// End of the window.
    pub end_ns: u64,
    /// Each thread's times.
    pub threads: BTreeMap<u32, ThreadTimes>,
    /// Time off the CPU by thread, state and stack.
    pub stacks: OffCpuStacks,
    /// Looks at sleeping threads.
    pub looks: u64,
    /// Blocked time no look fell in, before it was shared out (ns).
    pub unobserved_ns: u64,
    /// Switch records that contradicted the state: records were lost.
    pub contradictions: u64,
    /// What the view lacks (a look refused, no stacks), one sentence each.
    pub lacks: Vec<String>,
    /// Who held the CPUs meanwhile (other processes, the hypervisor, a cgroup quota).
    pub cpu: Option<super::cpu::CpuHolders>,
}

#[derive(Debug, Clone)]
struct Look {
    time_ns: u64,
    reason: BlockReason,
    stack: Vec<Location>,
}

/// On-CPU samples remembered per thread, for the stack a preemption interrupted: enough to
/// reach back over the records held back (~100 ms at the highest frequencies).
const RECENT_SAMPLES: usize = 512;

/// The recording's wall-clock part.
#[derive(Debug)]
pub struct WallRecorder {
    timeline: Timeline,
    start_ns: u64,
    recent: HashMap<u32, VecDeque<(u64, Vec<Location>)>>,
    looks: HashMap<u32, VecDeque<Look>>,
    closed: Vec<Interval>,
    threads: BTreeMap<u32, ThreadTimes>,
    stacks: OffCpuStacks,
    unobserved: BTreeMap<u32, u64>,
    look_count: u64,
    /// Sentences on what the view lacks, added by the recorder's caller.
    pub lacks: Vec<String>,
}

impl WallRecorder {
    /// A recording whose window starts at `start_ns`.
    pub fn new(start_ns: u64) -> WallRecorder {
        WallRecorder {
            timeline: Timeline::new(start_ns),
            start_ns,
            recent: HashMap::new(),
            looks: HashMap::new(),
            closed: Vec::new(),
            threads: BTreeMap::new(),
            stacks: HashMap::new(),
            unobserved: BTreeMap::new(),
            look_count: 0,
            lacks: Vec::new(),
        }
    }

    /// Thread `tid` was first seen at `at_ns` doing `phase` (at the start from /proc, or at its
    /// creation: runnable).
    pub fn first_seen(&mut self, tid: u32, phase: Phase, at_ns: u64) {
        self.timeline
            .first_seen(tid, phase, at_ns.max(self.start_ns));
    }

    /// An on-CPU sample of `tid` with its stack.
    pub fn sample(&mut self, tid: u32, time_ns: u64, stack: &[Location]) {
        let q = self.recent.entry(tid).or_default();
        if q.len() == RECENT_SAMPLES {
            q.pop_front();
        }
        q.push_back((time_ns, stack.to_vec()));
    }

    /// A context switch.
    pub fn switch(&mut self, e: SwitchEvent) {
        self.timeline.push(e);
    }

    /// Thread `tid` exited at `at_ns`.
    pub fn exit(&mut self, tid: u32, at_ns: u64) {
        let mut out = std::mem::take(&mut self.closed);
        self.timeline.exit(tid, at_ns, &mut out);
        self.take(&mut out);
        self.closed = out;
    }

    /// A look at a sleeping thread: why, and its stack (empty when it could not be read).
    pub fn look(&mut self, tid: u32, time_ns: u64, reason: BlockReason, stack: Vec<Location>) {
        self.look_count += 1;
        self.looks.entry(tid).or_default().push_back(Look {
            time_ns,
            reason,
            stack,
        });
    }

    /// Applies the switch records older than `watermark_ns`.
    pub fn advance(&mut self, watermark_ns: u64) {
        let mut out = std::mem::take(&mut self.closed);
        self.timeline.advance(watermark_ns, &mut out);
        self.take(&mut out);
        self.closed = out;
    }

    fn take(&mut self, out: &mut Vec<Interval>) {
        for i in out.drain(..) {
            self.threads.entry(i.tid).or_default().add(&i);
            match i.phase {
                Phase::Running => {}
                Phase::Runnable => {
                    let stack = self
                        .recent
                        .get(&i.tid)
                        .and_then(|q| q.iter().rev().find(|(t, _)| *t <= i.start_ns))
                        .map(|(_, s)| s.clone())
                        .unwrap_or_default();
                    *self
                        .stacks
                        .entry((i.tid, OffCpu::Runnable, stack))
                        .or_default() += i.ns();
                }
                Phase::Blocked => self.blocked(&i),
            }
        }
    }

    fn blocked(&mut self, i: &Interval) {
        let mut inside = Vec::new();
        if let Some(q) = self.looks.get_mut(&i.tid) {
            while q.front().is_some_and(|l| l.time_ns < i.end_ns) {
                let l = q.pop_front().expect("front");
                // A look before this interval fell in a wait whose records were lost.
                if l.time_ns >= i.start_ns {
                    inside.push(l);
                }
            }
        }
        if inside.is_empty() {
            *self.unobserved.entry(i.tid).or_default() += i.ns();
            return;
        }
        let n = inside.len() as u64;
        for (k, l) in inside.into_iter().enumerate() {
            // The remainder of the division goes to the first, so the thread's total is exact.
            let share = i.ns() / n + if k == 0 { i.ns() % n } else { 0 };
            *self
                .stacks
                .entry((i.tid, OffCpu::Blocked { reason: l.reason }, l.stack))
                .or_default() += share;
        }
    }

    /// Closes the window at `end_ns`: every record applied, every open interval closed, the
    /// unobserved waits shared out. `pid_of` gives the process of a thread that never
    /// switched.
    pub fn finish(mut self, end_ns: u64, pid_of: impl Fn(u32) -> Option<u32>) -> WallRecording {
        let mut out = std::mem::take(&mut self.closed);
        self.timeline.finish(end_ns, pid_of, &mut out);
        self.take(&mut out);
        let unobserved_ns = self.unobserved.values().sum();
        for (tid, ns) in std::mem::take(&mut self.unobserved) {
            share_out(&mut self.stacks, tid, ns);
        }
        WallRecording {
            start_ns: self.start_ns,
            end_ns,
            threads: self.threads,
            stacks: self.stacks,
            looks: self.look_count,
            unobserved_ns,
            contradictions: self.timeline.contradictions,
            lacks: self.lacks,
            cpu: None,
        }
    }
}

/// Shares `ns` of thread `tid`'s unobserved blocked time over its observed blocked stacks in
/// proportion to their time; with none, it stays unobserved, without a stack.
fn share_out(stacks: &mut OffCpuStacks, tid: u32, ns: u64) {
    let mut mine: Vec<(OffCpuKey, u64)> = stacks
        .iter()
        .filter(|((t, s, _), _)| {
            *t == tid
                && matches!(s, OffCpu::Blocked { reason } if *reason != BlockReason::Unobserved)
        })
        .map(|(k, &v)| (k.clone(), v))
        .collect();
    let observed: u64 = mine.iter().map(|(_, v)| v).sum();
    if observed == 0 {
        *stacks
            .entry((
                tid,
                OffCpu::Blocked {
                    reason: BlockReason::Unobserved,
                },
                Vec::new(),
            ))
            .or_default() += ns;
        return;
    }
    mine.sort();
    let mut given = 0;
    let last = mine.len() - 1;
    for (k, (key, v)) in mine.into_iter().enumerate() {
        let add = if k == last {
            ns - given
        } else {
            (ns as u128 * v as u128 / observed as u128) as u64
        };
        given += add;
        *stacks.get_mut(&key).expect("present") += add;
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::perf_records::Switch;
    use super::*;

    fn at(addr: u64) -> Vec<Location> {
        vec![Location::Unknown { pid: 1, addr }]
    }

    fn sw(tid: u32, time_ns: u64, switch: Switch) -> SwitchEvent {
        SwitchEvent {
            pid: 1,
            tid,
            time_ns,
            switch,
        }
    }

    fn off(w: &WallRecording, tid: u32, state: OffCpu, stack: &[Location]) -> u64 {
        w.stacks
            .get(&(tid, state, stack.to_vec()))
            .copied()
            .unwrap_or(0)
    }

    #[test]
    fn a_blocked_wait_gets_the_stack_of_the_look_inside_it_and_short_ones_are_shared_out() {
        let mut r = WallRecorder::new(0);
        let futex = OffCpu::Blocked {
            reason: BlockReason::Futex,
        };
        let sleep = OffCpu::Blocked {
            reason: BlockReason::Sleep,
        };
        // Waits: [10, 50) seen in a futex at 0xa, [60, 70) unseen, [80, 110) seen sleeping
        // at 0xb twice, [120, 125) unseen.
        for e in [
            sw(1, 10, Switch::OutBlocked),
            sw(1, 50, Switch::In),
            sw(1, 60, Switch::OutBlocked),
            sw(1, 70, Switch::In),
            sw(1, 80, Switch::OutBlocked),
            sw(1, 110, Switch::In),
            sw(1, 120, Switch::OutBlocked),
            sw(1, 125, Switch::In),
        ] {
            r.switch(e);
        }
        r.look(1, 30, BlockReason::Futex, at(0xa));
        r.look(1, 90, BlockReason::Sleep, at(0xb));
        r.look(1, 100, BlockReason::Sleep, at(0xb));
        r.advance(1_000);
        let w = r.finish(200, |_| Some(1));
        let t = w.threads[&1];
        assert_eq!((t.running_ns, t.runnable_ns, t.blocked_ns), (115, 0, 85));
        assert_eq!(w.unobserved_ns, 15);
        // 40 ns seen in the futex, 30 sleeping; the 15 unseen shared 40:30.
        assert_eq!(off(&w, 1, futex, &at(0xa)), 40 + 8);
        assert_eq!(off(&w, 1, sleep, &at(0xb)), 30 + 7);
        let blocked: u64 = w.stacks.values().sum();
        assert_eq!(blocked, t.blocked_ns, "every blocked ns is somewhere, once");
    }

    #[test]
    fn a_preemption_gets_the_stack_of_the_last_sample_before_it() {
        let mut r = WallRecorder::new(0);
        r.sample(2, 5, &at(0x1));
        r.sample(2, 15, &at(0x2));
        r.sample(2, 40, &at(0x3)); // after the preemption: not where it was preempted
        r.switch(sw(2, 20, Switch::OutPreempted));
        r.switch(sw(2, 35, Switch::In));
        r.advance(100);
        let w = r.finish(50, |_| Some(1));
        assert_eq!(off(&w, 2, OffCpu::Runnable, &at(0x2)), 15);
        assert_eq!(w.threads[&2].runnable_ns, 15);
    }

    #[test]
    fn a_thread_never_looked_at_keeps_its_waits_unobserved_without_a_stack() {
        let mut r = WallRecorder::new(0);
        r.first_seen(3, Phase::Blocked, 0);
        let w = r.finish(100, |_| Some(9));
        assert_eq!(w.threads[&3].blocked_ns, 100);
        assert_eq!(w.threads[&3].pid, 9);
        assert_eq!(
            off(
                &w,
                3,
                OffCpu::Blocked {
                    reason: BlockReason::Unobserved,
                },
                &[]
            ),
            100
        );
    }
}
