//! Findings from the wall-clock view ([`super::wall`]): time off the CPU that a reader should
//! act on. Threads asleep on a lock (the lock and who takes it, how much of their wall time,
//! the spin before the sleep, what they ran when they had it), and threads runnable but
//! waiting for a CPU (whether the workload's own threads outnumber its CPUs). Time asleep
//! waiting for work (an idle pool, an event loop, a client) is shown where the time went,
//! never as a finding. The rules decide and fill facts; the sentences are
//! `words::findings::waits`.

use super::hotspots::HotSpots;
use super::rules::{Finding, HAZARD_SHARE, NOTICE_SHARE};
use super::runtimes::{self, Role, Runtime, WaitKind};
use super::wall::{ThreadWall, WallReport};
use crate::diagnose::record::wall::{BlockReason, OffCpu};
use crate::schema::Level;
use crate::words::findings::waits::{self as words, CpuHolder, LockWaitFacts, StarvedFacts};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Share of their wall time threads must wait for a CPU before it is a finding: a fifth is
/// more than a busy machine's ordinary scheduling delay (a few percent), and a loss a reader
/// can act on.
pub const STARVED_SHARE: f64 = 0.20;
/// Share from which waiting for a CPU is a hazard: half the threads' time.
pub const STARVED_HAZARD_SHARE: f64 = 0.50;
/// Share of the machine's CPUs the workload's own threads keep busy from which they are what
/// its threads wait behind (else something else holds the CPUs).
const OWN_CPUS_SHARE: f64 = 0.8;
/// Share of a quota's periods throttled from which the quota is what holds threads back.
const QUOTA_THROTTLED_SHARE: f64 = 0.20;
/// Other processes' CPU time, as a share of one CPU over the window, from which they are named.
const OTHERS_MIN_SHARE: f64 = 0.10;
/// Steal from which the hypervisor is named: a few percent is a busy host's ordinary share.
const STEAL_SHARE: f64 = 0.02;
/// Shortest wait for a CPU worth a finding, ns: below it a short run's noise.
const STARVED_MIN_NS: f64 = 100e6;
/// Threads that must sleep on one lock for a finding.
const MIN_LOCK_WAITERS: usize = 2;
/// Share of its wall time a thread of the waiters' process runs, never sleeping on the lock,
/// from which it is named as the holder.
const HOLDER_RUNNING_SHARE: f64 = 0.5;
/// On-CPU functions named for the threads of a lock.
const HOLDER_FUNCTIONS: usize = 3;
/// Frames of the stack a lock's waiters sleep in, quoted: the wait, the lock, and the callers
/// that say which lock.
const STACK_FRAMES: usize = 5;

/// Every finding of the wall-clock view, for the machine's `cpus` CPUs.
pub fn findings(wall: &WallReport, hot: &HotSpots, cpus: usize) -> Vec<Finding> {
    let mut out = lock_waits(wall, hot);
    out.extend(starved(wall, cpus));
    out
}

/// For a runtime's lock spin, the other half of the lock's cost: how much of the spinning
/// threads' wall time went to spinning, and how much to sleeping in that runtime's own waits
/// (a Java monitor's park, Go's scheduler with every goroutine parked, a futex); `None` when
/// the threads have no wall-clock figures.
pub fn spin_beside_sleep(wall: &WallReport, runtime: Runtime, tids: &[u32]) -> Option<String> {
    let threads: Vec<&ThreadWall> = wall
        .threads
        .iter()
        .filter(|t| tids.contains(&t.tid))
        .collect();
    let wall_s: f64 = threads.iter().map(|t| t.times.wall_s).sum();
    if wall_s <= 0.0 {
        return None;
    }
    let spinning_s: f64 = threads.iter().map(|t| t.times.spinning_s).sum();
    let mut asleep: BTreeMap<String, u64> = BTreeMap::new();
    for s in &wall.stacks {
        let (OffCpu::Blocked { .. }, Some(w)) = (&s.state, &s.wait) else {
            continue;
        };
        if w.owner != runtime.name() && w.owner != "glibc" {
            continue;
        }
        let ns: u64 = s
            .threads
            .iter()
            .filter(|t| tids.contains(&t.tid))
            .map(|t| t.ns)
            .sum();
        if ns > 0 {
            *asleep.entry(w.what.clone()).or_default() += ns;
        }
    }
    let mut asleep: Vec<(String, f64)> = asleep
        .into_iter()
        .map(|(what, ns)| (what, ns as f64 / 1e9 / wall_s))
        .collect();
    asleep.sort_by(|a, b| b.1.total_cmp(&a.1));
    asleep.truncate(2);
    Some(words::spin_beside_sleep(
        threads.len(),
        spinning_s / wall_s,
        &asleep,
        runtime == Runtime::Go,
    ))
}

/// Time threads slept in the kernel outside any system call at one function.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AsleepAt {
    /// Seconds asleep there, all the threads together.
    pub s: f64,
    /// Their share of those threads' wall time.
    pub wall_share: f64,
}

/// The time the threads `tids` slept in the kernel outside any system call (the wall view's
/// `page fault`: /proc shows no system call) with `symbol` in `module` at the top of their
/// user stack. A split lock's trap sleeps so, at the locked instruction: `split_lock_warn`'s
/// `msleep_interruptible` under `kernel.split_lock_mitigate`, `handle_bus_lock`'s `msleep`
/// under `ratelimit:N` (arch/x86/kernel/cpu/bus_lock.c). `None` when they did not, or have
/// no wall-clock figures.
pub fn asleep_in_kernel_at(
    wall: &WallReport,
    symbol: &str,
    module: &str,
    tids: &[u32],
) -> Option<AsleepAt> {
    let wall_s: f64 = wall
        .threads
        .iter()
        .filter(|t| tids.contains(&t.tid))
        .map(|t| t.times.wall_s)
        .sum();
    let ns: u64 = wall
        .stacks
        .iter()
        .filter(|s| {
            s.state
                == OffCpu::Blocked {
                    reason: BlockReason::PageFault,
                }
        })
        .filter(|s| {
            s.frames
                .first()
                .is_some_and(|f| f.module == module && f.function.as_deref() == Some(symbol))
        })
        .flat_map(|s| s.threads.iter())
        .filter(|t| tids.contains(&t.tid))
        .map(|t| t.ns)
        .sum();
    (ns > 0 && wall_s > 0.0).then(|| AsleepAt {
        s: ns as f64 / 1e9,
        wall_share: ns as f64 / 1e9 / wall_s,
    })
}

/// One lock's waiters: time asleep per thread, the callers that took it, and the stacks they
/// slept in.
#[derive(Default)]
struct LockGroup {
    owner: String,
    what: String,
    /// Time asleep by the caller that takes the lock (and its module).
    waiters: BTreeMap<Option<String>, (u64, Option<String>)>,
    by_thread: BTreeMap<u32, u64>,
    stacks: Vec<(Vec<String>, u64)>,
}

impl LockGroup {
    /// The caller that takes the lock in most of the time asleep on it, when it takes it in
    /// at least half: the one a title can name.
    fn main_waiter(&self) -> Option<(&str, Option<&str>)> {
        let total: u64 = self.waiters.values().map(|w| w.0).sum();
        let (name, (ns, module)) = self.waiters.iter().max_by_key(|(_, w)| w.0)?;
        (2 * ns >= total).then_some(())?;
        Some((name.as_deref()?, module.as_deref()))
    }

    /// The callers that take it, most time first, with their share of it (when more than one).
    fn waiter_shares(&self) -> Vec<(String, f64)> {
        let total = self.waiters.values().map(|w| w.0).sum::<u64>().max(1) as f64;
        let mut v: Vec<(String, f64)> = self
            .waiters
            .iter()
            .filter_map(|(n, w)| Some((n.clone()?, w.0 as f64 / total)))
            .collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        if v.len() < 2 { Vec::new() } else { v }
    }
}

fn lock_waits(wall: &WallReport, hot: &HotSpots) -> Vec<Finding> {
    // One finding per lock (its owner and what it is), whoever takes it: PostgreSQL's row
    // lock is taken through LockTuple in one stack and heap_update in the next.
    let mut groups: BTreeMap<(String, String), LockGroup> = BTreeMap::new();
    for s in &wall.stacks {
        let (OffCpu::Blocked { .. }, Some(w)) = (&s.state, &s.wait) else {
            continue;
        };
        if w.kind != WaitKind::Lock {
            continue;
        }
        let g = groups
            .entry((w.owner.clone(), w.what.clone()))
            .or_insert_with(|| LockGroup {
                owner: w.owner.clone(),
                what: w.what.clone(),
                ..LockGroup::default()
            });
        let waiter = g.waiters.entry(w.waiter.clone()).or_insert_with(|| {
            let module = w.waiter.as_ref().and_then(|name| {
                s.frames
                    .iter()
                    .find(|f| f.function.as_deref() == Some(name))
                    .map(|f| f.module.clone())
            });
            (0, module)
        });
        waiter.0 += s.ns;
        for t in &s.threads {
            *g.by_thread.entry(t.tid).or_default() += t.ns;
        }
        let names: Vec<String> = s
            .frames
            .iter()
            .take(STACK_FRAMES)
            .map(super::hotspots::frame_name)
            .collect();
        g.stacks.push((names, s.ns));
    }
    let threads: BTreeMap<u32, &ThreadWall> = wall.threads.iter().map(|t| (t.tid, t)).collect();
    let mut out = Vec::new();
    for g in groups.into_values() {
        let waiting: Vec<&ThreadWall> = g
            .by_thread
            .keys()
            .filter_map(|tid| threads.get(tid).copied())
            .collect();
        let wall_ns: f64 = waiting.iter().map(|t| t.times.wall_s * 1e9).sum();
        let blocked_ns = g.by_thread.values().sum::<u64>() as f64;
        let commands = commands_of(&waiting);
        let main = g.main_waiter();
        let facts = LockWaitFacts {
            owner: &g.owner,
            what: &g.what,
            waiter: main.map(|m| m.0),
            threads: waiting.len(),
            processes: waiting.iter().map(|t| t.pid).collect::<BTreeSet<_>>().len(),
            commands: &commands,
            blocked_ns,
            wall_ns,
        };
        let share = facts.share();
        // One thread waiting on a lock is no contention between threads: it is more often a
        // main thread joining its workers through a lock (CPython's Thread.join) or a consumer
        // waiting for one producer.
        if waiting.len() < MIN_LOCK_WAITERS {
            continue;
        }
        let level = if share >= HAZARD_SHARE {
            Level::Hazard
        } else if share >= NOTICE_SHARE {
            Level::Notice
        } else {
            continue;
        };
        let mut evidence = vec![words::lock_wait_share(&facts)];
        let takers = g.waiter_shares();
        if !takers.is_empty() {
            evidence.push(words::lock_takers(&takers));
        }
        let mut stacks = g.stacks.clone();
        stacks.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        if let Some((frames, ns)) = stacks.first() {
            evidence.push(words::lock_wait_stack(
                frames,
                *ns as f64 / blocked_ns.max(1.0),
            ));
        }
        let tids: BTreeSet<u32> = g.by_thread.keys().copied().collect();
        let on_cpu = OnCpu::of(hot, &tids);
        if let Some(spin) = on_cpu.spin_share(&g.owner).filter(|s| *s >= 0.005) {
            evidence.push(words::lock_spin_share(&g.owner, spin));
        }
        // Who held it: the waiters' own processes' threads that ran most of their time and
        // never slept on it (a holder that releases and takes the lock again before a woken
        // waiter runs keeps it: a pthread mutex is not fair), then what all of them ran.
        let pids: BTreeSet<u32> = waiting.iter().map(|t| t.pid).collect();
        let holders: Vec<&ThreadWall> = wall
            .threads
            .iter()
            .filter(|t| pids.contains(&t.pid) && !tids.contains(&t.tid))
            .filter(|t| t.times.share(t.times.running_s) >= HOLDER_RUNNING_SHARE)
            .collect();
        for h in &holders {
            evidence.push(words::lock_holder(
                h.tid,
                &h.name,
                h.times.share(h.times.running_s),
                &g.owner,
            ));
        }
        let mut all = tids.clone();
        all.extend(holders.iter().map(|h| h.tid));
        let ran = OnCpu::of(hot, &all).top();
        if !ran.is_empty() {
            evidence.push(words::lock_holders_ran(&ran));
        }
        let runnable: f64 = waiting.iter().map(|t| t.times.runnable_s * 1e9).sum();
        if runnable / wall_ns.max(1.0) >= NOTICE_SHARE {
            evidence.push(words::also_runnable(runnable / wall_ns.max(1.0)));
        }
        out.push(Finding {
            id: "lock_wait".into(),
            level,
            title: words::lock_wait_title(&facts),
            symbol: main.map(|m| m.0.to_string()),
            module: main.and_then(|m| m.1).map(str::to_string),
            offset: None,
            sample_share: None,
            wall_share: Some(share),
            split_lock: None,
            disassembly: Default::default(),
            evidence,
            explanation: words::lock_wait_explanation(&facts),
            advice: words::lock_wait_advice(&g.owner).into(),
            runtime: None,
        });
    }
    out
}

/// The command names of some threads, each once, in order.
fn commands_of(threads: &[&ThreadWall]) -> Vec<String> {
    threads
        .iter()
        .map(|t| t.command.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// The on-CPU samples of a set of threads, by function.
struct OnCpu<'a> {
    hot: &'a HotSpots,
    tids: &'a BTreeSet<u32>,
    total: u64,
}

impl<'a> OnCpu<'a> {
    fn of(hot: &'a HotSpots, tids: &'a BTreeSet<u32>) -> OnCpu<'a> {
        let total = hot
            .threads
            .iter()
            .filter(|t| tids.contains(&t.figures.tid))
            .map(|t| t.samples)
            .sum();
        OnCpu { hot, tids, total }
    }

    fn samples_in(&self, f: &super::hotspots::HotFunction) -> u64 {
        f.threads
            .iter()
            .filter(|t| self.tids.contains(&t.tid))
            .map(|t| t.samples)
            .sum()
    }

    /// Share of their samples in `owner`'s lock code (its spin and wait functions).
    fn spin_share(&self, owner: &str) -> Option<f64> {
        if self.total == 0 {
            return None;
        }
        let n: u64 = self
            .hot
            .functions
            .iter()
            .filter(|f| {
                matches!(runtimes::classify(&f.symbol),
                    Some((rt, Role::Spin | Role::Wait | Role::Enter)) if rt.name() == owner)
            })
            .map(|f| self.samples_in(f))
            .sum();
        Some(n as f64 / self.total as f64)
    }

    /// Their hottest functions with their share of their samples.
    fn top(&self) -> Vec<(String, f64)> {
        if self.total == 0 {
            return Vec::new();
        }
        // By name: one function may come from two modules (the vDSO's clock_gettime and
        // libc's wrapper), and a list of "clock_gettime 0.1%, clock_gettime 0.1%" reads as a
        // mistake.
        let mut by_name: BTreeMap<String, u64> = BTreeMap::new();
        for f in &self.hot.functions {
            let n = self.samples_in(f);
            if n > 0 {
                *by_name.entry(f.symbol.clone()).or_default() += n;
            }
        }
        let mut v: Vec<(String, u64)> = by_name.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v.into_iter()
            .take(HOLDER_FUNCTIONS)
            .map(|(f, n)| (f, n as f64 / self.total as f64))
            .collect()
    }
}

fn starved(wall: &WallReport, cpus: usize) -> Vec<Finding> {
    let waiting: Vec<&ThreadWall> = wall
        .threads
        .iter()
        .filter(|t| {
            t.times.runnable_s * 1e9 >= STARVED_MIN_NS
                && t.times.share(t.times.runnable_s) >= STARVED_SHARE
        })
        .collect();
    if waiting.is_empty() {
        return Vec::new();
    }
    let runnable_ns: f64 = waiting.iter().map(|t| t.times.runnable_s * 1e9).sum();
    let wall_ns: f64 = waiting.iter().map(|t| t.times.wall_s * 1e9).sum();
    let window = wall.method.window_s.max(1e-9);
    let running_cpus: f64 = wall
        .threads
        .iter()
        .map(|t| t.times.running_s / window)
        .sum();
    let commands = commands_of(&waiting);
    let facts = StarvedFacts {
        threads: waiting.len(),
        commands: &commands,
        runnable_ns,
        wall_ns,
        running_cpus,
        cpus,
    };
    let share = runnable_ns / wall_ns.max(1.0);
    let mut evidence = vec![words::starved_share(&facts), words::starved_demand(&facts)];
    let mut holder = if running_cpus >= OWN_CPUS_SHARE * cpus as f64 {
        CpuHolder::Own
    } else {
        CpuHolder::Others
    };
    if let Some(c) = &wall.cpu {
        if let Some(q) = &c.quota
            && let (Some(t), Some(p)) = (q.throttled.throttled_periods, q.throttled.periods)
            && t > 0
        {
            evidence.push(words::starved_quota(
                q.quota.cpus(),
                &q.cgroup,
                t,
                p,
                q.throttled.throttled_ns.unwrap_or(0) as f64,
            ));
            if t as f64 >= QUOTA_THROTTLED_SHARE * p as f64 {
                holder = CpuHolder::Quota;
            }
        }
        if c.others_ns as f64 >= OTHERS_MIN_SHARE * wall.method.window_s * 1e9 {
            let top: Vec<(String, u32, f64)> = c
                .others
                .iter()
                .take(3)
                .map(|o| (o.command.clone(), o.pid, o.cpu_ns as f64))
                .collect();
            evidence.push(words::starved_others(c.others_ns as f64, &top));
        }
        let running_ns: f64 = wall.threads.iter().map(|t| t.times.running_s * 1e9).sum();
        if let Some(unseen) = c.unseen_ns(running_ns)
            && unseen >= OTHERS_MIN_SHARE * wall.method.window_s * 1e9
        {
            evidence.push(words::starved_unseen(unseen));
        }
        if c.own_ns as f64 >= OTHERS_MIN_SHARE * wall.method.window_s * 1e9 {
            evidence.push(words::starved_own(c.own_ns as f64));
        }
        if let Some(steal) = c.machine.and_then(|m| m.steal_ratio())
            && steal >= STEAL_SHARE
        {
            evidence.push(words::starved_steal(steal));
        }
    }
    vec![Finding {
        id: "waiting_for_cpu".into(),
        level: if share >= STARVED_HAZARD_SHARE {
            Level::Hazard
        } else {
            Level::Notice
        },
        title: words::starved_title(&facts),
        symbol: None,
        module: None,
        offset: None,
        sample_share: None,
        wall_share: Some(share),
        split_lock: None,
        disassembly: Default::default(),
        evidence,
        explanation: words::starved_explanation(&facts),
        advice: words::starved_advice(holder).into(),
        runtime: None,
    }]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::analyse::wall::{StateTimes, WallMethod};
    use crate::diagnose::record::wall::cpu::CpuHolders;
    use crate::machine::cpu_time::CpuTimeDelta;

    fn wall(threads: usize, running_s: f64, runnable_s: f64, cpu: CpuHolders) -> WallReport {
        let t = |tid| ThreadWall {
            pid: 100,
            tid,
            name: "postgres".into(),
            command: "postgres".into(),
            times: StateTimes {
                wall_s: 10.0,
                running_s,
                runnable_s,
                blocked_s: 10.0 - running_s - runnable_s,
                ..Default::default()
            },
        };
        WallReport {
            method: WallMethod::clean_10s(),
            commands: Vec::new(),
            threads: (0..threads as u32).map(t).collect(),
            stacks: Vec::new(),
            cpu: Some(cpu),
        }
    }

    /// PostgreSQL under pgbench with the client started after diagnose and gone before it
    /// stopped: the finding said "something else holds the CPUs" and named nobody, since
    /// /proc shows neither end of a process that came and went inside the window.
    #[test]
    fn cpu_taken_by_processes_gone_before_the_end_is_said() {
        // 8 backends ran 0.5 s each (4 s) on 2 CPUs busy 18 s of 20: 14 s unaccounted.
        let cpu = CpuHolders {
            others: Vec::new(),
            others_ns: 0,
            own_ns: 0,
            machine: Some(CpuTimeDelta {
                busy_ns: 18_000_000_000,
                idle_ns: 2_000_000_000,
                steal_ns: 0,
            }),
            quota: None,
        };
        let f = starved(&wall(8, 0.5, 3.0, cpu.clone()), 2);
        assert_eq!(f.len(), 1);
        let said = f[0].evidence.join("\n");
        assert!(
            said.contains("started and ended within the window"),
            "{said}"
        );
        assert!(said.contains("14.0 s"), "{said}");
        // Every busy second accounted to processes seen: nothing unaccounted to say.
        let seen = CpuHolders {
            others_ns: 14_000_000_000,
            ..cpu
        };
        let said = starved(&wall(8, 0.5, 3.0, seen), 2)[0].evidence.join("\n");
        assert!(!said.contains("started and ended"), "{said}");
    }

    /// mutex_wait with 16 threads on the 16-vCPU Emerald Rapids guest: the holder's functions
    /// read "compute_under_lock 99.8%, clock_gettime 0.1%, clock_gettime 0.1%", the vDSO's
    /// function and libc's wrapper of it listed apart.
    #[test]
    fn a_function_in_two_modules_is_named_once() {
        use crate::diagnose::analyse::hotspots::{HotFunction, SiteThread};
        let function = |symbol: &str, module: &str, samples| HotFunction {
            symbol: symbol.into(),
            module: module.into(),
            samples,
            share: 0.0,
            callers: Vec::new(),
            threads: vec![SiteThread {
                tid: 7,
                name: "mutex_wait".into(),
                samples,
                share_of_thread: 0.0,
            }],
        };
        let hot = HotSpots {
            functions: vec![
                function("compute_under_lock", "mutex_wait", 8),
                function("clock_gettime", "[vdso]", 1),
                function("clock_gettime", "libc.so.6", 1),
            ],
            ..Default::default()
        };
        let tids = BTreeSet::from([7]);
        let on_cpu = OnCpu {
            hot: &hot,
            tids: &tids,
            total: 10,
        };
        assert_eq!(
            on_cpu.top(),
            vec![
                ("compute_under_lock".to_string(), 0.8),
                ("clock_gettime".to_string(), 0.2)
            ]
        );
    }
}
