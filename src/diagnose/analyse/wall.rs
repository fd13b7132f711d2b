//! The wall-clock report: every followed thread's whole wall time, in one of three states:
//! running (on a CPU: the on-CPU samples say where, and how much of it spins), runnable but
//! waiting for a CPU, or blocked, with the reason and the user stack where it blocked. Made
//! ([`report`]) from what [`crate::diagnose::record::wall`] recorded: each thread's schedstat
//! counts (or the switch records' intervals, with `--switches`), and the /proc looks at
//! sleeping threads. With switch records, schedstat's run-queue delay gives the wait for a CPU
//! after each wake-up (switch records cannot tell it from the sleep before it).
//!
//! The report ([`WallReport`]) is typed for the JSON, the screen and the exports: per thread
//! and per command the time in each state, and the off-CPU stacks weighted in ns.

use crate::diagnose::analyse::disasm::SiteKind;
use crate::diagnose::analyse::hotspots::{NamedWait, ThreadReport};
use crate::diagnose::analyse::runtimes::{self, WaitInStack};
use crate::diagnose::record::wall::cpu;
use crate::diagnose::record::wall::{
    BlockReason, LOOK_EVERY_MS, OffCpu, WallRecording, WallSource,
};
use crate::diagnose::symbolize::stack::StackFrame;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// Off-CPU stacks kept in a report, most time first; the rest is summed into the threads'
/// and commands' figures only.
const MAX_STACKS: usize = 2000;

/// Where the followed threads' wall time went: the `wall` object of a diagnosis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WallReport {
    /// How it was measured, and what the view lacks.
    pub method: WallMethod,
    /// Per process command (all processes of one name together), most wall time first.
    pub commands: Vec<CommandWall>,
    /// Per thread, most time working or held up first ([`StateTimes::held_up_s`]).
    pub threads: Vec<ThreadWall>,
    /// Off-CPU stacks with their time, most first (at most 2000).
    pub stacks: Vec<WaitStack>,
    /// Who held the CPUs meanwhile: other processes, the hypervisor, a cgroup quota.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<cpu::CpuHolders>,
}

/// How the wall-clock view was measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WallMethod {
    /// Where the states' times came from: schedstat counts, or switch records (every file
    /// saved before the counts were the default).
    #[serde(default)]
    pub source: WallSource,
    /// The window the view covers, s.
    pub window_s: f64,
    /// Looks at sleeping threads through /proc.
    pub looks: u64,
    /// Time between looks, ms.
    pub look_every_ms: u64,
    /// Share of the blocked time of threads that no look found asleep: its reason and stack
    /// are not known (`not observed`). Every other thread's blocked time is shared over the
    /// waits its looks found, each look standing for the time since the look before.
    pub unobserved_share: f64,
    /// True when the wait for a CPU after each wake-up was moved from blocked to runnable with
    /// schedstat's run-queue delay (false: blocked includes it).
    pub wake_up_wait_from_schedstat: bool,
    /// Switch records that contradicted the state before them: records were lost, and the
    /// time between is left out.
    pub contradictions: u64,
    /// What the view lacks, one sentence each.
    pub lacks: Vec<String>,
}

#[cfg(test)]
impl WallMethod {
    /// A clean 10 s window of 200 looks, 50 ms apart, for tests of the view's readers.
    pub(crate) fn clean_10s() -> WallMethod {
        WallMethod {
            source: WallSource::SwitchRecords,
            window_s: 10.0,
            looks: 200,
            look_every_ms: 50,
            unobserved_share: 0.0,
            wake_up_wait_from_schedstat: true,
            contradictions: 0,
            lacks: Vec::new(),
        }
    }
}

/// Time in each state.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct StateTimes {
    /// Wall time accounted, s.
    pub wall_s: f64,
    /// On a CPU, s.
    pub running_s: f64,
    /// Of the running time, spinning: the share of its on-CPU samples in spin-waits (PAUSE
    /// loops and loops without PAUSE), s.
    pub spinning_s: f64,
    /// Runnable, waiting for a CPU (preempted, new, or woken and not yet run), s.
    pub runnable_s: f64,
    /// Of the runnable time, the waits for a CPU after a wake-up, s: switch records count
    /// them in the sleep before, so this part comes from schedstat's run-queue delay (the rest
    /// of `runnable_s`, preemptions and new threads, from the switch records alone). Absent
    /// when the times came from schedstat's counts, which do not tell the two apart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runnable_after_wake_up_s: Option<f64>,
    /// Asleep, s.
    pub blocked_s: f64,
    /// Asleep, by reason, most first.
    pub blocked: Vec<ReasonTime>,
    /// Asleep in a known wait, by kind (a lock, a condition, idle...), most first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waits: Vec<KindTime>,
}

impl StateTimes {
    fn add(&mut self, o: &StateTimes) {
        self.wall_s += o.wall_s;
        self.running_s += o.running_s;
        self.spinning_s += o.spinning_s;
        self.runnable_s += o.runnable_s;
        self.runnable_after_wake_up_s =
            match (self.runnable_after_wake_up_s, o.runnable_after_wake_up_s) {
                (Some(a), Some(b)) => Some(a + b),
                (a, b) => a.or(b),
            };
        self.blocked_s += o.blocked_s;
        for r in &o.blocked {
            match self.blocked.iter_mut().find(|x| x.reason == r.reason) {
                Some(x) => x.s += r.s,
                None => self.blocked.push(r.clone()),
            }
        }
        for k in &o.waits {
            match self.waits.iter_mut().find(|x| x.kind == k.kind) {
                Some(x) => x.s += k.s,
                None => self.waits.push(k.clone()),
            }
        }
        self.blocked
            .sort_by(|a, b| b.s.total_cmp(&a.s).then(a.reason.cmp(&b.reason)));
        self.waits
            .sort_by(|a, b| b.s.total_cmp(&a.s).then(a.kind.cmp(&b.kind)));
    }

    /// Time the thread worked or was held up: running, waiting for a CPU, asleep on a lock,
    /// a park or a condition, or in file I/O or a page fault. The rest is time with nothing
    /// to do (an idle pool, an event loop, a client's next request, a timed sleep, a parent
    /// waiting for its child), which says nothing about the workload's speed: the table puts
    /// the threads held up most first, so a server's busy workers come before its idle
    /// background processes.
    pub fn held_up_s(&self) -> f64 {
        let waited: f64 = self
            .waits
            .iter()
            .filter(|k| {
                matches!(
                    k.kind,
                    runtimes::WaitKind::Lock
                        | runtimes::WaitKind::Park
                        | runtimes::WaitKind::Condition
                )
            })
            .map(|k| k.s)
            .sum();
        let io: f64 = self
            .blocked
            .iter()
            .filter(|r| matches!(r.reason, BlockReason::FileIo | BlockReason::PageFault))
            .map(|r| r.s)
            .sum();
        self.running_s + self.runnable_s + waited + io
    }

    /// Share of the wall time in a state's seconds.
    pub fn share(&self, s: f64) -> f64 {
        if self.wall_s > 0.0 {
            s / self.wall_s
        } else {
            0.0
        }
    }
}

/// Time asleep for one reason.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReasonTime {
    /// The reason.
    pub reason: BlockReason,
    /// Seconds.
    pub s: f64,
}

/// Time asleep in one kind of known wait.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KindTime {
    /// The kind.
    pub kind: runtimes::WaitKind,
    /// Seconds.
    pub s: f64,
}

/// One thread's wall time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadWall {
    /// Process.
    pub pid: u32,
    /// Thread.
    pub tid: u32,
    /// Thread name.
    pub name: String,
    /// Its process's command name.
    pub command: String,
    /// Time in each state.
    #[serde(flatten)]
    pub times: StateTimes,
}

/// The threads of every process of one command name.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CommandWall {
    /// Command name (`postgres`, `java`).
    pub command: String,
    /// Processes of that name.
    pub processes: u32,
    /// Their threads.
    pub threads: u32,
    /// Time in each state, over all of them.
    #[serde(flatten)]
    pub times: StateTimes,
}

/// One off-CPU stack and the time threads spent off the CPU in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WaitStack {
    /// Runnable, or blocked and why.
    #[serde(flatten)]
    pub state: OffCpu,
    /// Frames, leaf first (the instruction after the system call for a blocked thread, the
    /// last on-CPU sample's for a preempted one); empty when not known.
    pub frames: Vec<StackFrame>,
    /// Time, ns.
    pub ns: u64,
    /// The threads, with their time, most first.
    pub threads: Vec<ThreadNs>,
    /// The runtime or server wait its frames show, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait: Option<WaitInStack>,
}

/// A thread's part of a stack.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadNs {
    /// Thread.
    pub tid: u32,
    /// Time, ns.
    pub ns: u64,
}

/// The report: each thread's times from `rec`, the wait for a CPU after wake-ups moved out of
/// blocked with schedstat's run-queue delay (from the thread reports' figures), spinning from
/// the on-CPU samples' site kinds, and the named stacks grouped. `name_of` names a thread by
/// its id (a process by its main thread's, the pid), from the comm records and /proc.
pub fn report(
    rec: &WallRecording,
    named: Vec<NamedWait>,
    on_cpu: &[ThreadReport],
    name_of: impl Fn(u32) -> Option<String>,
) -> WallReport {
    let by_tid: HashMap<u32, &ThreadReport> = on_cpu.iter().map(|t| (t.figures.tid, t)).collect();
    let mut wake_moved: HashMap<u32, f64> = HashMap::new();
    let mut from_schedstat = false;
    let mut threads: Vec<ThreadWall> = Vec::new();
    // Counts hold the whole wait for a CPU already: nothing to move.
    let counted = rec.source == WallSource::Schedstat;
    for (&tid, t) in &rec.threads {
        let wall_ns = t.running_ns + t.runnable_ns + t.blocked_ns;
        let report = by_tid.get(&tid);
        // The run-queue delay in the window: schedstat's rate over the tracker's window.
        let moved_ns = report
            .filter(|r| !counted && r.figures.wall_s > 0.0 && r.figures.run_delay_s.is_some())
            .map(|r| {
                from_schedstat = true;
                let rate = r.figures.run_delay_s.unwrap_or(0.0) / r.figures.wall_s;
                let expected = rate * wall_ns as f64;
                (expected - t.runnable_ns as f64).clamp(0.0, t.blocked_ns as f64)
            })
            .unwrap_or(0.0);
        if t.blocked_ns > 0 {
            wake_moved.insert(tid, moved_ns / t.blocked_ns as f64);
        }
        // A fold from 0.0: an empty f64 sum is -0.0, which a reader would see.
        let spin_share: f64 = report
            .map(|r| {
                r.kinds
                    .iter()
                    .filter(|k| matches!(k.kind, SiteKind::PauseSpin | SiteKind::SpinWithoutPause))
                    .fold(0.0, |acc, k| acc + k.share)
            })
            .unwrap_or(0.0);
        let s = |ns: f64| ns / 1e9;
        threads.push(ThreadWall {
            pid: t.pid,
            tid,
            name: report
                .map(|r| r.figures.name.clone())
                .filter(|n| !n.is_empty())
                .or_else(|| name_of(tid))
                .unwrap_or_default(),
            command: name_of(t.pid).unwrap_or_else(|| format!("pid {}", t.pid)),
            times: StateTimes {
                wall_s: s(wall_ns as f64),
                running_s: s(t.running_ns as f64),
                spinning_s: s(t.running_ns as f64 * spin_share.min(1.0)),
                runnable_s: s(t.runnable_ns as f64 + moved_ns),
                runnable_after_wake_up_s: (!counted).then(|| s(moved_ns)),
                blocked_s: s(t.blocked_ns as f64 - moved_ns),
                blocked: Vec::new(),
                waits: Vec::new(),
            },
        });
    }
    // Stacks: the blocked ones lose the share that was a wait for a CPU after the wake-up,
    // which becomes a runnable stack on the same frames.
    let mut grouped: HashMap<(OffCpu, Vec<StackFrame>), BTreeMap<u32, u64>> = HashMap::new();
    for n in named {
        let moved = match n.state {
            OffCpu::Blocked { .. } => wake_moved.get(&n.tid).copied().unwrap_or(0.0),
            OffCpu::Runnable => 0.0,
        };
        let to_runnable = (n.ns as f64 * moved).round() as u64;
        let mut put = |state: OffCpu, ns: u64| {
            if ns > 0 {
                *grouped
                    .entry((state, n.frames.clone()))
                    .or_default()
                    .entry(n.tid)
                    .or_default() += ns;
            }
        };
        put(n.state, n.ns - to_runnable);
        put(OffCpu::Runnable, to_runnable);
    }
    let mut stacks: Vec<WaitStack> = grouped
        .into_iter()
        .map(|((state, frames), tids)| {
            let mut threads: Vec<ThreadNs> = tids
                .into_iter()
                .map(|(tid, ns)| ThreadNs { tid, ns })
                .collect();
            threads.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.tid.cmp(&b.tid)));
            let wait = match state {
                OffCpu::Blocked { .. } => runtimes::wait_in_stack(
                    frames.iter().map(|f| f.function.as_deref().unwrap_or("")),
                ),
                OffCpu::Runnable => None,
            };
            WaitStack {
                state,
                ns: threads.iter().map(|t| t.ns).sum(),
                frames,
                threads,
                wait,
            }
        })
        .collect();
    // Most time first; equal times in a fixed order, so the same recording gives the same
    // document.
    stacks.sort_by(|a, b| {
        b.ns.cmp(&a.ns)
            .then_with(|| a.state.cmp(&b.state))
            .then_with(|| {
                let key = |s: &WaitStack| s.frames.iter().map(|f| f.address).collect::<Vec<_>>();
                key(a).cmp(&key(b))
            })
    });
    // Each thread's blocked time by reason and by known wait, from its stacks.
    let mut reasons: HashMap<u32, BTreeMap<BlockReason, u64>> = HashMap::new();
    let mut kinds: HashMap<u32, BTreeMap<runtimes::WaitKind, u64>> = HashMap::new();
    for st in &stacks {
        if let OffCpu::Blocked { reason } = st.state {
            for t in &st.threads {
                *reasons.entry(t.tid).or_default().entry(reason).or_default() += t.ns;
                if let Some(w) = &st.wait {
                    *kinds.entry(t.tid).or_default().entry(w.kind).or_default() += t.ns;
                }
            }
        }
    }
    for t in &mut threads {
        let mut b: Vec<ReasonTime> = reasons
            .remove(&t.tid)
            .unwrap_or_default()
            .into_iter()
            .map(|(reason, ns)| ReasonTime {
                reason,
                s: ns as f64 / 1e9,
            })
            .collect();
        b.sort_by(|a, b| b.s.total_cmp(&a.s).then(a.reason.cmp(&b.reason)));
        t.times.blocked = b;
        let mut k: Vec<KindTime> = kinds
            .remove(&t.tid)
            .unwrap_or_default()
            .into_iter()
            .map(|(kind, ns)| KindTime {
                kind,
                s: ns as f64 / 1e9,
            })
            .collect();
        k.sort_by(|a, b| b.s.total_cmp(&a.s).then(a.kind.cmp(&b.kind)));
        t.times.waits = k;
    }
    threads.sort_by(|a, b| {
        let (ka, kb) = (a.times.held_up_s(), b.times.held_up_s());
        kb.total_cmp(&ka).then(a.tid.cmp(&b.tid))
    });
    let mut commands: BTreeMap<String, (CommandWall, std::collections::BTreeSet<u32>)> =
        BTreeMap::new();
    for t in &threads {
        let (c, pids) = commands.entry(t.command.clone()).or_insert_with(|| {
            (
                CommandWall {
                    command: t.command.clone(),
                    processes: 0,
                    threads: 0,
                    times: StateTimes::default(),
                },
                Default::default(),
            )
        });
        c.threads += 1;
        pids.insert(t.pid);
        c.times.add(&t.times);
    }
    let mut commands: Vec<CommandWall> = commands
        .into_values()
        .map(|(mut c, pids)| {
            c.processes = pids.len() as u32;
            c
        })
        .collect();
    commands.sort_by(|a, b| b.times.wall_s.total_cmp(&a.times.wall_s));
    let blocked_ns: u64 = rec.threads.values().map(|t| t.blocked_ns).sum();
    stacks.truncate(MAX_STACKS);
    WallReport {
        method: WallMethod {
            window_s: rec.end_ns.saturating_sub(rec.start_ns) as f64 / 1e9,
            looks: rec.looks,
            look_every_ms: LOOK_EVERY_MS,
            unobserved_share: rec.unobserved_ns as f64 / blocked_ns.max(1) as f64,
            source: rec.source,
            wake_up_wait_from_schedstat: from_schedstat,
            contradictions: rec.contradictions,
            lacks: rec.lacks.clone(),
        },
        commands,
        threads,
        stacks,
        cpu: rec.cpu.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use runtimes::WaitKind;

    fn times(running: f64, runnable: f64, waits: &[(WaitKind, f64)]) -> StateTimes {
        let blocked: f64 = waits.iter().map(|w| w.1).sum();
        StateTimes {
            wall_s: running + runnable + blocked,
            running_s: running,
            runnable_s: runnable,
            blocked_s: blocked,
            waits: waits
                .iter()
                .map(|&(kind, s)| KindTime { kind, s })
                .collect(),
            ..Default::default()
        }
    }

    /// PostgreSQL under pgbench: the table listed the postmaster's idle background processes
    /// (100% blocked, waiting for work) before the backends held up on the hot row, since it
    /// ranked threads by all their time off the CPU.
    #[test]
    fn threads_held_up_come_before_idle_ones() {
        let idle_background = times(0.0, 0.0, &[(WaitKind::Idle, 18.0)]);
        let backend = times(0.5, 4.0, &[(WaitKind::Lock, 6.0), (WaitKind::Client, 5.0)]);
        assert!(backend.held_up_s() > idle_background.held_up_s());
        assert_eq!(backend.held_up_s(), 10.5);
        assert_eq!(idle_background.held_up_s(), 0.0);
    }
}
