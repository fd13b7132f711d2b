//! Findings about time off the CPU, from the wall-clock view: threads asleep on a lock
//! (with the spin before the sleep, and what the threads ran when they held it), and threads
//! runnable but waiting for a CPU (and what held the CPUs).

use crate::format::{human_ns, pct};

/// Threads asleep on one lock, as the finding says them.
#[derive(Debug, Clone, PartialEq)]
pub struct LockWaitFacts<'a> {
    /// Whose lock code (`glibc`, `PostgreSQL`).
    pub owner: &'a str,
    /// The lock, in its owner's words.
    pub what: &'a str,
    /// The caller that takes it, when known.
    pub waiter: Option<&'a str>,
    /// Threads that slept on it.
    pub threads: usize,
    /// Processes those threads belong to.
    pub processes: usize,
    /// Their command names.
    pub commands: &'a [String],
    /// Time asleep on it, ns, all threads together.
    pub blocked_ns: f64,
    /// Those threads' wall time, ns, together.
    pub wall_ns: f64,
}

impl LockWaitFacts<'_> {
    /// Share of the threads' wall time asleep on the lock.
    pub fn share(&self) -> f64 {
        self.blocked_ns / self.wall_ns.max(1.0)
    }

    /// Threads asleep on it at any moment, on average.
    pub fn asleep(&self) -> f64 {
        self.blocked_ns / (self.wall_ns / self.threads.max(1) as f64).max(1.0)
    }
}

/// `4 threads of mutex_wait sleep on a pthread mutex taken in take_lock_and_work`.
pub fn lock_wait_title(f: &LockWaitFacts) -> String {
    let place = f
        .waiter
        .map(|w| format!(" taken in {w}"))
        .unwrap_or_default();
    format!(
        "{} {} on {}{place}",
        threads_of(f.threads, f.processes, f.commands),
        if f.threads == 1 { "sleeps" } else { "sleep" },
        f.what,
    )
}

fn threads_of(threads: usize, processes: usize, commands: &[String]) -> String {
    let cmd = commands.join(", ");
    match (threads, processes) {
        (1, _) => format!("1 thread of {cmd}"),
        (t, 1) => format!("{t} threads of {cmd}"),
        (t, p) => format!("{t} threads in {p} processes of {cmd}"),
    }
}

/// `the 4 threads slept on it 44.1% of their wall time (6.70 s of 15.2 s): 1.8 of the 4 asleep
/// on it at any moment`.
pub fn lock_wait_share(f: &LockWaitFacts) -> String {
    format!(
        "the {} thread{} slept on it {} of {} wall time ({} of {}): {:.1} of the {} asleep on \
         it at any moment",
        f.threads,
        if f.threads == 1 { "" } else { "s" },
        pct(f.share(), 1),
        if f.threads == 1 { "its" } else { "their" },
        human_ns(f.blocked_ns),
        human_ns(f.wall_ns),
        f.asleep(),
        f.threads
    )
}

/// `taken in LockTuple 67.0%, heap_update 25.0% of the time asleep on it`.
pub fn lock_takers(takers: &[(String, f64)]) -> String {
    format!(
        "taken in {} of the time asleep on it",
        takers
            .iter()
            .take(4)
            .map(|(f, s)| format!("{f} {}", pct(*s, 1)))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// `where they wait: __lll_lock_wait <- pthread_mutex_lock <- take_lock_and_work (92.0%)`.
pub fn lock_wait_stack(frames: &[String], share: f64) -> String {
    format!(
        "asleep in {} ({} of the time asleep on it)",
        frames.join(" <- "),
        pct(share, 1)
    )
}

/// `before sleeping they spin: 3.2% of their on-CPU samples in glibc's lock spin`.
pub fn lock_spin_share(owner: &str, share: f64) -> String {
    format!(
        "before sleeping they spin on it: {} of their on-CPU samples in {owner}'s lock code",
        pct(share, 1)
    )
}

/// `thread 4551 (mutex_wait) ran 99.7% of its wall time and never slept on it: ...`; for a
/// glibc mutex, why one thread can keep it.
pub fn lock_holder(tid: u32, name: &str, running: f64, owner: &str) -> String {
    format!(
        "thread {tid} ({name}) ran {} of its wall time and never slept on it: it held the \
         lock, or ran beside it{}",
        pct(running, 1),
        if owner == "glibc" {
            " (a pthread mutex is not fair: a holder that releases it and takes it again goes \
             before the waiters it woke)"
        } else {
            ""
        }
    )
}

/// `on the CPU they (and the holder) ran: compute_under_lock 93.1%`.
pub fn lock_holders_ran(functions: &[(String, f64)]) -> String {
    format!(
        "on the CPU, these threads and the holder ran: {}",
        functions
            .iter()
            .map(|(f, s)| format!("{f} {}", pct(*s, 1)))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// `they also waited for a CPU 12.0% of their wall time`.
pub fn also_runnable(share: f64) -> String {
    format!(
        "they also waited for a CPU {} of their wall time (runnable, not running)",
        pct(share, 1)
    )
}

/// Why a lock that threads sleep on costs what it does.
pub fn lock_wait_explanation(f: &LockWaitFacts) -> String {
    format!(
        "A lock lets one thread in at a time. These {n} threads spent {share} of their wall time \
         asleep waiting for it, {asleep:.1} of them at any moment: the lock, not the CPUs, \
         sets the pace, and more threads or faster cores will not help while it does. A \
         lock's cost is the spin before the sleep plus the sleep itself, and the wake-up \
         after it (a futex wake and a context switch, microseconds each) on every handoff.",
        n = f.threads,
        share = pct(f.share(), 1),
        asleep = f.asleep()
    )
}

/// What to do about a lock of `owner`, in that code's own terms.
pub fn lock_wait_advice(owner: &str) -> &'static str {
    match owner {
        "PostgreSQL" => {
            "Find the blocker in pg_locks / pg_stat_activity (wait_event Lock:* or LWLock:*). \
             For a hot row: batch its updates, spread them over rows, or queue work with \
             SELECT ... FOR UPDATE SKIP LOCKED; keep transactions that hold row locks short. \
             For LWLocks, the wait_event names the structure (WALWrite: faster commits or \
             commit_delay; BufferContent: a hot page)."
        }
        "HotSpot" => {
            "Hold the monitor or lock for less time (compute outside it), split it by key \
             (lock striping, ConcurrentHashMap), or replace it with a lock-free structure \
             (LongAdder, AtomicReference). A thread dump (jcmd PID Thread.print) shows the \
             holder."
        }
        "CPython" => {
            "CPU-bound Python threads take turns on the GIL: run them as processes \
             (multiprocessing, concurrent.futures.ProcessPoolExecutor), use a free-threaded \
             build (3.13t and later), or move the hot loop into code that releases the GIL \
             (NumPy, a C extension)."
        }
        "Go" => {
            "Go's runtime lock is rarely the user's: look for many goroutines in channel or \
             timer operations, and profile with go tool pprof's mutex and block profiles."
        }
        _ => {
            "Shorten the critical section (compute outside the lock, take it later, release \
             it sooner), split the lock by key (one lock per shard), or replace it with a \
             lock-free structure (atomic counters, per-thread accumulators merged at the end). \
             More threads than the lock lets run only add waiting."
        }
    }
}

/// `the 3 threads spun 6.8% of their wall time and slept 40.9% in the Go scheduler, with no
/// goroutine to run`; for Go, why idle threads are the parked goroutines' doing.
pub fn spin_beside_sleep(
    threads: usize,
    spinning: f64,
    asleep: &[(String, f64)],
    go: bool,
) -> String {
    let slept = if asleep.is_empty() {
        "and did not sleep in its waits".to_string()
    } else {
        format!(
            "and slept {}",
            asleep
                .iter()
                .map(|(what, share)| format!("{} in {what}", pct(*share, 1)))
                .collect::<Vec<_>>()
                .join(", ")
        )
    };
    format!(
        "spin and sleep: the {threads} thread{} spun {} of {} wall time {slept}{}",
        if threads == 1 { "" } else { "s" },
        pct(spinning, 1),
        if threads == 1 { "its" } else { "their" },
        if go && !asleep.is_empty() {
            " (a goroutine that waits for a sync.Mutex parks, and a thread whose goroutines \
             are all parked sleeps in the scheduler: these sleeps are the lock's waits)"
        } else {
            ""
        }
    )
}

/// Threads waiting for a CPU, as the finding says them.
#[derive(Debug, Clone, PartialEq)]
pub struct StarvedFacts<'a> {
    /// Threads that waited.
    pub threads: usize,
    /// Their command names.
    pub commands: &'a [String],
    /// Their time runnable, ns.
    pub runnable_ns: f64,
    /// Their wall time, ns.
    pub wall_ns: f64,
    /// CPUs the workload's own threads kept busy on average (their running time over the
    /// window, all of its threads).
    pub running_cpus: f64,
    /// CPUs it may run on.
    pub cpus: usize,
}

/// `3 threads of spin wait for a CPU 48.0% of their wall time`.
pub fn starved_title(f: &StarvedFacts) -> String {
    let one = f.threads == 1;
    format!(
        "{} {} for a CPU {} of {} wall time",
        threads_of(f.threads, 1, f.commands),
        if one { "waits" } else { "wait" },
        pct(f.runnable_ns / f.wall_ns.max(1.0), 1),
        if one { "its" } else { "their" }
    )
}

/// `runnable but not running 1.45 s of 3.02 s`.
pub fn starved_share(f: &StarvedFacts) -> String {
    format!(
        "runnable but not running {} of {} of wall time",
        human_ns(f.runnable_ns),
        human_ns(f.wall_ns)
    )
}

/// `the workload's own threads kept 0.6 of the machine's 2 CPUs busy on average`.
pub fn starved_demand(f: &StarvedFacts) -> String {
    format!(
        "the workload's own threads kept {:.1} of the machine's {} CPUs busy on average",
        f.running_cpus, f.cpus
    )
}

/// Why waiting for a CPU costs what it does.
pub fn starved_explanation(f: &StarvedFacts) -> String {
    format!(
        "A runnable thread that gets no CPU makes no progress: {} of these threads' wall time \
         went to waiting for a turn. A latency-sensitive thread (a lock holder, a request \
         handler) that waits for a CPU delays everything behind it.",
        pct(f.runnable_ns / f.wall_ns.max(1.0), 1)
    )
}

/// `other processes ran 1.9 s of CPU meanwhile: cc1plus (pid 4123) 0.8 s, ...`.
pub fn starved_others(total_ns: f64, top: &[(String, u32, f64)]) -> String {
    format!(
        "other processes ran {} of CPU meanwhile: {}",
        human_ns(total_ns),
        top.iter()
            .map(|(c, pid, ns)| format!("{c} (pid {pid}) {}", human_ns(*ns)))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// `processes that started and ended within the window ran 6.2 s of CPU ...`.
pub fn starved_unseen(ns: f64) -> String {
    format!(
        "processes that started and ended within the window (a benchmark client, short \
         commands) or interrupts took {} of CPU more: /proc no longer names them",
        human_ns(ns)
    )
}

/// `diagnose itself used 0.4 s of CPU meanwhile`.
pub fn starved_own(ns: f64) -> String {
    format!("diagnose itself used {} of CPU meanwhile", human_ns(ns))
}

/// `the hypervisor took 4.1% of the CPUs' time (steal)`.
pub fn starved_steal(share: f64) -> String {
    format!(
        "the hypervisor took {} of the CPUs' time (steal: the host ran other guests on them)",
        pct(share, 1)
    )
}

/// `the cgroup's CPU quota of 0.50 CPUs (DIR) throttled 170 of 173 periods (1.2 s)`.
pub fn starved_quota(cpus: f64, cgroup: &str, throttled: u64, periods: u64, ns: f64) -> String {
    format!(
        "the cgroup's CPU quota of {cpus:.2} CPUs ({cgroup}) held it back in {throttled} of \
         {periods} periods ({} throttled)",
        human_ns(ns)
    )
}

/// Who held the CPUs, as the advice needs it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuHolder {
    /// A cgroup CPU quota throttled the workload.
    Quota,
    /// The workload's own threads kept the CPUs busy.
    Own,
    /// Other processes, or the hypervisor.
    Others,
}

/// What to do about threads waiting for a CPU, by who held it.
pub fn starved_advice(holder: CpuHolder) -> &'static str {
    match holder {
        CpuHolder::Quota => {
            "The cgroup's CPU quota, not the machine, holds the threads back: raise the \
             quota (a pod's cpu limit, cpu.max, cpu.cfs_quota_us), or size the workload's \
             thread pools to it (runtimes that size pools by the host's CPU count overrun a \
             small quota in bursts)."
        }
        CpuHolder::Own => {
            "The workload runs more busy threads than it has CPUs: size its thread pools to the \
             CPUs it may use (and to a container's CPU quota, not the host's count), or give it \
             more CPUs."
        }
        CpuHolder::Others => {
            "Something else holds the CPUs: move the other work to other CPUs (taskset, \
             cpusets), raise the workload's priority, or give it CPUs of its own."
        }
    }
}
