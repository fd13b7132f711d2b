//! The wall-clock recording under way: each thread's time in each state comes from its
//! schedstat counts ([`Counts`], the default) or from the [`Timeline`] of switch records
//! (`--switches`), exact either way; the code it waited in comes from two samplers. With switch
//! records a preempted interval gets the stack of the thread's last on-CPU sample before it
//! (where it was when the CPU was taken); with counts, a reading interval's wait for a CPU is
//! shared over the thread's on-CPU samples in that interval. Blocked time is shared over the /proc looks that found the thread asleep,
//! each look standing for the time since the look before it: the looks fall at times that
//! have nothing to do with the thread's waits, so the time they find in each wait is in
//! proportion to that wait's share of the sleep, long waits and short ones alike, as a
//! wall-clock profiler's samples are. (Joining each look to the one wait it fell in would be
//! exact for the waits a look hit, but would leave the short waits, most of a lock's, to be
//! guessed from the long ones: a PostgreSQL backend's quick client reads were given to its
//! long row-lock waits that way.) Pure: fed by the recorder, tested on made-up events.

// The maps keyed by call stacks use foldhash, not std's SipHash: hashing each preemption's
// stack with SipHash was a fifth of diagnose's own CPU attached to MariaDB under sysbench
// (36,000 switches a second; `perf record` of diagnose). The keys are this process's own
// recording, so no resistance to chosen collisions is needed.
use super::WallSource;
use super::counts::{Counts, Reading};
use super::observe::BlockReason;
use super::timeline::{Interval, Phase, SwitchEvent, Timeline};
use crate::diagnose::symbolize::symbols::Location;
use foldhash::HashMap as StackMap;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

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

/// One thread's wall time by state, from its switch records or its counts.
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
    /// Waiting for a CPU: preempted or new (switch records), or also woken and not yet run
    /// (counts).
    pub runnable_ns: u64,
    /// Asleep (with switch records, including the wait for a CPU after each wake-up).
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
pub type OffCpuStacks = StackMap<OffCpuKey, u64>;

/// What the wall-clock recording gives the analysis.
#[derive(Debug, Clone, Default)]
pub struct WallRecording {
    /// Where the states' times came from.
    pub source: WallSource,
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
    /// Blocked time of threads no look ever found asleep (ns): its reason is not known.
    pub unobserved_ns: u64,
    /// Switch records that contradicted the state: records were lost.
    pub contradictions: u64,
    /// What the view lacks (a look refused, no stacks), one sentence each.
    pub lacks: Vec<String>,
    /// Who held the CPUs meanwhile (other processes, the hypervisor, a cgroup quota).
    pub cpu: Option<super::cpu::CpuHolders>,
}

/// On-CPU samples remembered per thread, for the stack a preemption interrupted: enough to
/// reach back over the records held back (~100 ms at the highest frequencies).
const RECENT_SAMPLES: usize = 512;

/// A sampled stack, shared by the samples remembered and the preemptions it stands for.
type SampleStack = Arc<[Location]>;

/// Where the recorder takes the states' times from.
#[derive(Debug)]
enum Source {
    Switches(Timeline),
    Counts(Counts),
}

/// The recording's wall-clock part.
#[derive(Debug)]
pub struct WallRecorder {
    source: Source,
    start_ns: u64,
    recent: StackMap<u32, VecDeque<(u64, SampleStack)>>,
    /// Runnable time by thread and the sample stack it was preempted in, keyed by the
    /// stack's allocation (held here, so never reused): a preemption costs a hash of two
    /// words, not of its whole stack. Folded into `stacks` at the finish.
    runnable: StackMap<(u32, usize), (SampleStack, u64)>,
    /// Per thread, the time the looks found it asleep in each wait (reason and stack).
    looks: StackMap<u32, StackMap<(BlockReason, Vec<Location>), u64>>,
    /// When the last round of looks was, and the round before it.
    last_round_ns: u64,
    closed: Vec<Interval>,
    threads: BTreeMap<u32, ThreadTimes>,
    stacks: OffCpuStacks,
    look_count: u64,
    /// Sentences on what the view lacks, added by the recorder's caller.
    pub lacks: Vec<String>,
}

impl WallRecorder {
    /// A recording whose window starts at `start_ns`, its states timed by `source`: switch
    /// records ([`WallRecorder::switch`]) or counts ([`WallRecorder::counts`]).
    pub fn new(start_ns: u64, source: WallSource) -> WallRecorder {
        WallRecorder {
            source: match source {
                WallSource::SwitchRecords => Source::Switches(Timeline::new(start_ns)),
                WallSource::Schedstat => Source::Counts(Counts::default()),
            },
            start_ns,
            recent: StackMap::default(),
            runnable: StackMap::default(),
            looks: StackMap::default(),
            last_round_ns: start_ns,
            closed: Vec::new(),
            threads: BTreeMap::new(),
            stacks: StackMap::default(),
            look_count: 0,
            lacks: Vec::new(),
        }
    }

    /// Where the states' times come from.
    pub fn source(&self) -> WallSource {
        match self.source {
            Source::Switches(_) => WallSource::SwitchRecords,
            Source::Counts(_) => WallSource::Schedstat,
        }
    }

    /// Thread `tid` was first seen at `at_ns` doing `phase` (at the start from /proc, or at its
    /// creation: runnable). Switch records only: counts start at the thread's first reading.
    pub fn first_seen(&mut self, tid: u32, phase: Phase, at_ns: u64) {
        if let Source::Switches(t) = &mut self.source {
            t.first_seen(tid, phase, at_ns.max(self.start_ns));
        }
    }

    /// An on-CPU sample of `tid` with its stack.
    pub fn sample(&mut self, tid: u32, time_ns: u64, stack: &[Location]) {
        let q = self.recent.entry(tid).or_default();
        if q.len() == RECENT_SAMPLES {
            q.pop_front();
        }
        q.push_back((time_ns, Arc::from(stack)));
    }

    /// A context switch.
    pub fn switch(&mut self, e: SwitchEvent) {
        if let Source::Switches(t) = &mut self.source {
            t.push(e);
        }
    }

    /// Thread `tid` of `pid` read: its first reading (or zero counts at its start) and the one
    /// now. Its wait for a CPU since its reading before is shared over its on-CPU samples
    /// since then (none: its last sample before; no sample at all: no stack), and those
    /// samples are forgotten but the last. Counts only.
    pub fn counts(&mut self, tid: u32, pid: u32, first: Reading, now: Reading) {
        let Source::Counts(c) = &mut self.source else {
            return;
        };
        let since = c.read(tid, pid, first, now);
        let q = self.recent.entry(tid).or_default();
        if since.run_delay_ns > 0 {
            let within: Vec<&SampleStack> = q
                .iter()
                .filter(|(t, _)| (since.from_ns..=now.at_ns).contains(t))
                .map(|(_, s)| s)
                .collect();
            let before = q
                .iter()
                .rev()
                .find(|(t, _)| *t <= now.at_ns)
                .map(|(_, s)| s);
            let stacks: Vec<&[Location]> = match (within.is_empty(), before) {
                (false, _) => within.iter().map(|s| &s[..]).collect(),
                (true, Some(s)) => vec![&s[..]],
                (true, None) => vec![&[]],
            };
            let n = stacks.len() as u64;
            for (k, stack) in stacks.into_iter().enumerate() {
                let share =
                    since.run_delay_ns / n + if k == 0 { since.run_delay_ns % n } else { 0 };
                *self
                    .stacks
                    .entry((tid, OffCpu::Runnable, stack.to_vec()))
                    .or_default() += share;
            }
        }
        let keep_from = q.iter().rposition(|(t, _)| *t <= now.at_ns).unwrap_or(0);
        q.drain(..keep_from);
    }

    /// Thread `tid` exited at `at_ns` (counts: its last reading stands for its end).
    pub fn exit(&mut self, tid: u32, at_ns: u64) {
        let Source::Switches(t) = &mut self.source else {
            return;
        };
        let mut out = std::mem::take(&mut self.closed);
        t.exit(tid, at_ns, &mut out);
        self.take(&mut out);
        self.closed = out;
    }

    /// A round of looks at the sleeping threads begins at `time_ns`: each look of this round
    /// stands for the time since the round before.
    pub fn round(&mut self, time_ns: u64) -> u64 {
        let since = time_ns.saturating_sub(self.last_round_ns);
        self.last_round_ns = time_ns;
        since
    }

    /// A look at a sleeping thread, standing for `weight_ns` of its time: why it sleeps, and
    /// its stack (empty when it could not be read).
    pub fn look(&mut self, tid: u32, weight_ns: u64, reason: BlockReason, stack: Vec<Location>) {
        self.look_count += 1;
        *self
            .looks
            .entry(tid)
            .or_default()
            .entry((reason, stack))
            .or_default() += weight_ns.max(1);
    }

    /// Applies the switch records older than `watermark_ns`.
    pub fn advance(&mut self, watermark_ns: u64) {
        let Source::Switches(t) = &mut self.source else {
            return;
        };
        let mut out = std::mem::take(&mut self.closed);
        t.advance(watermark_ns, &mut out);
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
                        .map(|(_, s)| s.clone());
                    let at = stack.as_ref().map_or(0, |s| s.as_ptr() as usize);
                    self.runnable
                        .entry((i.tid, at))
                        .or_insert_with(|| (stack.unwrap_or_else(|| Arc::from([])), 0))
                        .1 += i.ns();
                }
                Phase::Blocked => {}
            }
        }
    }

    /// Closes the window at `end_ns`: every record applied, every open interval closed, each
    /// thread's blocked time shared over its looks. `pid_of` gives the process of a thread
    /// that never switched.
    pub fn finish(mut self, end_ns: u64, pid_of: impl Fn(u32) -> Option<u32>) -> WallRecording {
        let source = self.source();
        let mut contradictions = 0;
        match std::mem::replace(&mut self.source, Source::Counts(Counts::default())) {
            Source::Switches(mut t) => {
                let mut out = std::mem::take(&mut self.closed);
                t.finish(end_ns, pid_of, &mut out);
                self.take(&mut out);
                contradictions = t.contradictions;
            }
            Source::Counts(c) => self.threads = c.times(self.start_ns),
        }
        for ((tid, _), (stack, ns)) in self.runnable.drain() {
            *self
                .stacks
                .entry((tid, OffCpu::Runnable, stack.to_vec()))
                .or_default() += ns;
        }
        let mut unobserved_ns = 0;
        for (&tid, t) in &self.threads {
            let looks = self.looks.remove(&tid).unwrap_or_default();
            unobserved_ns += share_out(&mut self.stacks, tid, t.blocked_ns, looks);
        }
        WallRecording {
            source,
            start_ns: self.start_ns,
            end_ns,
            threads: self.threads,
            stacks: self.stacks,
            looks: self.look_count,
            unobserved_ns,
            contradictions,
            lacks: self.lacks,
            cpu: None,
        }
    }
}

/// Shares thread `tid`'s `blocked_ns` over the waits its looks found, in proportion to the
/// time each look stood for; the rounding remainder goes to the largest. With no look, the
/// time stays `not observed`, without a stack; that time is returned.
fn share_out(
    stacks: &mut OffCpuStacks,
    tid: u32,
    blocked_ns: u64,
    looks: StackMap<(BlockReason, Vec<Location>), u64>,
) -> u64 {
    if blocked_ns == 0 {
        return 0;
    }
    let seen: u64 = looks.values().sum();
    if seen == 0 {
        *stacks
            .entry((
                tid,
                OffCpu::Blocked {
                    reason: BlockReason::Unobserved,
                },
                Vec::new(),
            ))
            .or_default() += blocked_ns;
        return blocked_ns;
    }
    let mut looks: Vec<((BlockReason, Vec<Location>), u64)> = looks.into_iter().collect();
    // Largest first, then a fixed order: the same recording gives the same shares.
    looks.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let mut given = 0;
    let shares: Vec<u64> = looks
        .iter()
        .map(|(_, w)| {
            let ns = (blocked_ns as u128 * *w as u128 / seen as u128) as u64;
            given += ns;
            ns
        })
        .collect();
    for (k, ((reason, stack), _)) in looks.into_iter().enumerate() {
        let ns = shares[k] + if k == 0 { blocked_ns - given } else { 0 };
        *stacks
            .entry((tid, OffCpu::Blocked { reason }, stack))
            .or_default() += ns;
    }
    0
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
    fn blocked_time_is_shared_over_the_looks_by_the_time_each_stands_for() {
        // Guards the length bias: short client reads between long lock waits. Looks every 10
        // ns find the thread in the futex 3 times and reading once, and once (after a 30 ns
        // gap in the looks) in the futex again: futex 50 ns, read 10 ns of the 60 looked at.
        let mut r = WallRecorder::new(0, WallSource::SwitchRecords);
        let futex = OffCpu::Blocked {
            reason: BlockReason::Futex,
        };
        let read = OffCpu::Blocked {
            reason: BlockReason::Socket,
        };
        for e in [
            sw(1, 10, Switch::OutBlocked),
            sw(1, 70, Switch::In),
            sw(1, 80, Switch::OutBlocked),
            sw(1, 110, Switch::In),
        ] {
            r.switch(e);
        }
        for (t, reason, addr) in [
            (20, BlockReason::Futex, 0xa),
            (30, BlockReason::Futex, 0xa),
            (40, BlockReason::Socket, 0xb),
            (50, BlockReason::Futex, 0xa),
            (90, BlockReason::Futex, 0xa),
        ] {
            let w = r.round(t);
            r.look(1, if t == 20 { 10 } else { w }, reason, at(addr));
        }
        r.advance(1_000);
        let w = r.finish(200, |_| Some(1));
        let t = w.threads[&1];
        assert_eq!((t.running_ns, t.runnable_ns, t.blocked_ns), (110, 0, 90));
        // 90 ns asleep: the looks stood for 10+10+10(read)+10+40 = 80 ns, 70 of it in the futex.
        assert_eq!(off(&w, 1, futex, &at(0xa)), 79);
        assert_eq!(off(&w, 1, read, &at(0xb)), 11);
        assert_eq!(w.unobserved_ns, 0);
        let blocked: u64 = w.stacks.values().sum();
        assert_eq!(blocked, t.blocked_ns, "every blocked ns is somewhere, once");
    }

    #[test]
    fn a_preemption_gets_the_stack_of_the_last_sample_before_it() {
        let mut r = WallRecorder::new(0, WallSource::SwitchRecords);
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
    fn counted_a_reading_s_wait_for_a_cpu_is_shared_over_the_samples_since_the_last() {
        use crate::diagnose::record::wall::counts::Reading;
        let r_at = |at_ns, cpu_ns, run_delay_ns| Reading {
            at_ns,
            cpu_ns,
            run_delay_ns,
        };
        let mut r = WallRecorder::new(0, WallSource::Schedstat);
        let first = r_at(0, 0, 0);
        r.sample(4, 10, &at(0x1));
        r.sample(4, 20, &at(0x2));
        r.sample(4, 30, &at(0x2));
        // 30 ns waited by 100: a third where it ran at 0x1, two thirds at 0x2.
        r.counts(4, 1, first, r_at(100, 60, 30));
        // 10 ns more by 200, no sample since: the last sample before, 0x2.
        r.counts(4, 1, first, r_at(200, 70, 40));
        let w = r.finish(200, |_| None);
        assert_eq!(w.source, WallSource::Schedstat);
        assert_eq!(off(&w, 4, OffCpu::Runnable, &at(0x1)), 10);
        assert_eq!(off(&w, 4, OffCpu::Runnable, &at(0x2)), 30);
        let t = w.threads[&4];
        assert_eq!((t.running_ns, t.runnable_ns, t.blocked_ns), (70, 40, 90));
        // No look found it asleep: its blocked time is there, without a reason.
        assert_eq!(w.unobserved_ns, 90);
    }

    #[test]
    fn counted_a_wait_for_a_cpu_without_any_sample_has_no_stack() {
        use crate::diagnose::record::wall::counts::Reading;
        let mut r = WallRecorder::new(0, WallSource::Schedstat);
        let first = Reading::default();
        r.counts(
            5,
            1,
            first,
            Reading {
                at_ns: 50,
                cpu_ns: 0,
                run_delay_ns: 20,
            },
        );
        let w = r.finish(50, |_| None);
        assert_eq!(off(&w, 5, OffCpu::Runnable, &[]), 20);
    }

    #[test]
    fn a_thread_never_looked_at_keeps_its_waits_unobserved_without_a_stack() {
        let mut r = WallRecorder::new(0, WallSource::SwitchRecords);
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
