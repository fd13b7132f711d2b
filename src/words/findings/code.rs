//! Findings about hot code: a spin on PAUSE, a spin without it, a locked read-modify-write,
//! a split lock; and the evidence lines every code finding shares (the site, its threads,
//! its callers, the runtime lock behind it).

use crate::format::pct;
use crate::format::{group_thousands, human_ns};
use crate::machine::SplitLockTrap;
use crate::reference::PAUSE_HASWELL_NS;

/// A hot site as its first evidence line says it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SiteFacts<'a> {
    /// Share of all samples.
    pub share: f64,
    /// Samples at the site.
    pub samples: u64,
    /// CPU time those samples stand for, in ns.
    pub cpu_ns: f64,
    /// Function.
    pub symbol: &'a str,
    /// Offset of the hot instruction in the function.
    pub offset: u64,
    /// Module, short form.
    pub module: &'a str,
    /// The hot instruction.
    pub instruction: &'a str,
}

/// `12.5% of all samples (125 samples, ~125.0 ms of CPU time) at f+0x19 in m, hot ...`.
pub fn site(s: &SiteFacts) -> String {
    format!(
        "{} of all samples ({} samples, ~{} of CPU time) at {}+{:#x} in {}, hot instruction \
         `{}`",
        pct(s.share, 1),
        s.samples,
        human_ns(s.cpu_ns),
        s.symbol,
        s.offset,
        s.module,
        s.instruction
    )
}

/// The same code compiled more than once (a JIT's copy per isolate or process), counted
/// together.
pub fn code_copies(copies: usize) -> String {
    format!(
        "the same code runs at {copies} addresses (a JIT compiles it once per isolate or \
         process): their samples are counted together"
    )
}

/// The source line of the hot instruction.
pub fn source(line: &str) -> String {
    format!("source: {line}")
}

/// One thread at a site: its share of its own samples, and how busy it was when known.
pub fn thread(tid: u32, name: &str, share_of_thread: f64, busy_of_wall: Option<f64>) -> String {
    let cpu = busy_of_wall
        .map(|b| format!(", thread busy {} of its wall time", pct(b, 1)))
        .unwrap_or_default();
    format!(
        "thread {tid} ({name}): {} of its samples here{cpu}",
        pct(share_of_thread, 1)
    )
}

/// `called from a <- b <- c (80.0% of its samples)`.
pub fn caller(frames: &[String], share: f64) -> String {
    format!(
        "called from {} ({} of its samples)",
        frames.join(" <- "),
        pct(share, 1)
    )
}

/// The runtime lock behind a site: `runtime: Go sync.Mutex, taken in ..., waited for by ...`.
pub fn runtime_lock(
    runtime: &str,
    lock: &str,
    enter: Option<&str>,
    waiter: Option<&str>,
) -> String {
    let mut s = format!("runtime: {runtime} {lock}");
    if let Some(e) = enter {
        s.push_str(&format!(", taken in {e}"));
    }
    if let Some(w) = waiter {
        s.push_str(&format!(", waited for by {w}"));
    }
    s
}

/// `f spins on PAUSE`, or `f spins on PAUSE in Go's sync.Mutex` when a runtime's lock.
pub fn pause_spin_title(symbol: &str, runtime_lock: Option<(&str, &str)>) -> String {
    match runtime_lock {
        Some((runtime, lock)) => format!("{symbol} spins on PAUSE in {runtime}'s {lock}"),
        None => format!("{symbol} spins on PAUSE"),
    }
}

/// A long fixed spin, for scale beside glibc's.
pub const LONG_SPIN_PAUSES: u64 = 1_000;

/// PAUSE as measured now, and the sampled time in PAUSEs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PauseMeasured {
    /// ns per PAUSE.
    pub ns: f64,
    /// Core cycles per PAUSE, when the clock was estimated.
    pub cycles: Option<f64>,
    /// The site's sampled CPU time in PAUSEs.
    pub pauses_sampled: u64,
}

/// What the spin would cost here when no runtime's own spin is known: spins of common
/// lengths at this PAUSE cost, naming no runtime the process does not run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GenericSpins {
    /// A common fixed spin (glibc's adaptive mutex default, Rust std's): PAUSEs and their time
    /// in ns.
    pub glibc: (u64, f64),
    /// Logical CPUs.
    pub cores: usize,
    /// .NET's legacy lock spin on that many cores, in ns: only when the process runs .NET
    /// (its runtime's library was sampled).
    pub dotnet_legacy_ns: Option<f64>,
}

/// Where a PAUSE spin's waiting comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum SpinContext {
    /// A runtime's lock: its own spin cost (see [`super::runtimes::spin_cost`], may be empty).
    Runtime(String),
    /// No runtime known: common spins for scale.
    Generic(GenericSpins),
}

const SPIN_IS_THE_SYMPTOM: &str = "Spinning is the symptom: a waiter spins because the holder \
                                   keeps the lock (or the producer the data) longer than the \
                                   spin.";

/// What a PAUSE spin costs here; `None` when PAUSE could not be measured.
pub fn pause_spin_explanation(pause: Option<PauseMeasured>, spin: &SpinContext) -> String {
    let Some(p) = pause else {
        return "This loop waits on PAUSE; the PAUSE cost could not be measured here, see \
                `cpudoctor check`."
            .into();
    };
    let cycles = p
        .cycles
        .map(|c| format!(" ({c:.0} core cycles)"))
        .unwrap_or_default();
    let measured = format!(
        "This loop waits on PAUSE. PAUSE costs {:.1} ns here{cycles}, measured now \
         ({:.1}x the ~{PAUSE_HASWELL_NS} ns spin counts were tuned for on Haswell-era CPUs); the \
         time sampled here is about {} PAUSEs.",
        p.ns,
        p.ns / PAUSE_HASWELL_NS,
        group_thousands(p.pauses_sampled),
    );
    match spin {
        // The runtime's own spin, not other runtimes' figures.
        SpinContext::Runtime(cost) => format!("{measured}{cost} {SPIN_IS_THE_SYMPTOM}"),
        SpinContext::Generic(g) => {
            let dotnet = g
                .dotnet_legacy_ns
                .map(|ns| {
                    format!(
                        "; .NET's legacy lock spin on {} cores would last {}",
                        g.cores,
                        human_ns(ns)
                    )
                })
                .unwrap_or_default();
            format!(
                "{measured} Here a spin of {} PAUSEs lasts {}, of {} PAUSEs {}{dotnet}. \
                 {SPIN_IS_THE_SYMPTOM}",
                group_thousands(g.glibc.0),
                human_ns(g.glibc.1),
                group_thousands(LONG_SPIN_PAUSES),
                human_ns(LONG_SPIN_PAUSES as f64 * p.ns),
            )
        }
    }
}

/// What to do about a PAUSE spin outside a known runtime.
pub fn pause_spin_advice() -> &'static str {
    "Bound the spin by time, not by a count of PAUSEs, then block (futex, condition variable, \
     parking). Find what the waiter waits for: shorten the critical section or hand work over \
     without a lock."
}

/// `f spins without PAUSE`, or `f spins without PAUSE, re-reading through g()` when its loop
/// calls the functions `through` to load.
pub fn plain_spin_title(symbol: &str, through: &[String]) -> String {
    if through.is_empty() {
        format!("{symbol} spins without PAUSE")
    } else {
        format!(
            "{symbol} spins without PAUSE, re-reading through {}",
            calls(through)
        )
    }
}

/// `f()`, `f() or g()`.
fn calls(functions: &[String]) -> String {
    functions
        .iter()
        .map(|f| format!("{f}()"))
        .collect::<Vec<_>>()
        .join(" or ")
}

/// What a spin loop calls to re-read its flag, and its samples there.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ReadThrough<'a> {
    /// The load-only functions its calls reach.
    pub functions: &'a [String],
    /// The load the first does.
    pub load: &'a str,
    /// What the first is when a runtime's load function known by its name.
    pub known_as: Option<&'a str>,
    /// Samples in them under the loop's calls and their share of all samples, counted in the
    /// site's; `None` without call stacks.
    pub under_loop: Option<(u64, f64)>,
    /// Without call stacks: their own share of all samples, from whatever callers.
    pub own_share: f64,
}

/// The calls a spin re-reads through: what they load, and what their samples add.
pub fn read_through(r: &ReadThrough) -> String {
    let first = match r.known_as {
        Some(what) => format!(
            "each round calls {}, {what} (a runtime function known by its name to load and \
             return)",
            calls(r.functions)
        ),
        None => format!(
            "each round calls {}, which only loads (`{}`) and returns",
            calls(r.functions),
            r.load
        ),
    };
    match r.under_loop {
        Some((n, share)) => format!(
            "{first}: {} of all samples ({n} samples) were taken there under this loop, counted \
             in its share",
            pct(share, 1)
        ),
        None => format!(
            "{first}; without call stacks (--no-stacks) which of its samples ({} of all) this \
             loop took is unknown, so they are not counted in its share",
            pct(r.own_share, 1)
        ),
    }
}

/// A spin without PAUSE, for its cost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlainSpinCost {
    /// CPU time sampled in it, ns.
    pub cpu_ns: f64,
    /// PAUSE measured now: ns and, when the core clock was estimated, core cycles.
    pub pause: Option<(f64, Option<f64>)>,
    /// Memory-ordering machine clears the PMU counted over the run, when it counts them.
    pub machine_clears: Option<f64>,
}

/// What a spin without PAUSE costs: what it does to its core, its SMT sibling and a VM (the
/// machine clear on leaving: Intel SDM, PAUSE: "processors will suffer a severe performance
/// penalty when exiting the loop because it detects a possible memory order violation"), and
/// what a PAUSE per round would cost here.
pub fn plain_spin_explanation(c: &PlainSpinCost) -> String {
    let mut s = format!(
        "This loop re-reads one location with no pause hint, as fast as the core can issue \
         the loads: while it waits it burns a whole core (~{} of CPU time sampled here) and \
         takes issue slots and load bandwidth from its SMT sibling; when the value changes, \
         the loads it ran ahead with are thrown away in a memory-ordering machine clear; and \
         inside a VM it never triggers pause-loop exiting, so the hypervisor cannot hand the \
         vCPU to the thread being waited for.",
        human_ns(c.cpu_ns)
    );
    match c.machine_clears {
        Some(n) => s.push_str(&format!(
            " The PMU counted {} memory-ordering machine clears over the run (all code, not \
             this loop alone).",
            group_thousands(n.round() as u64)
        )),
        None => s.push_str(" No PMU counts machine clears here, so they are not counted."),
    }
    match c.pause {
        Some((ns, cycles)) => {
            let cycles = cycles
                .map(|c| format!(" ({c:.0} core cycles)"))
                .unwrap_or_default();
            s.push_str(&format!(
                " A PAUSE per round costs {ns:.1} ns here{cycles}, measured now: the loop \
                 would then re-read once per {ns:.1} ns at most, leaving the sibling the cycles \
                 between, and the wait would end at most that much later."
            ));
        }
        None => s.push_str(
            " What a PAUSE per round would cost on this machine, `cpudoctor check` measures \
             (pause_ns).",
        ),
    }
    s
}

/// What to do about a spin without PAUSE: the hint in each language, then a bounded spin that
/// blocks; the bound in PAUSEs at the cost measured here (`pause_ns`), when measured.
pub fn plain_spin_advice(pause_ns: Option<f64>) -> String {
    let bound = pause_ns
        .map(|ns| {
            format!(
                " (1 us is ~{} PAUSEs here)",
                group_thousands((1000.0 / ns).round() as u64)
            )
        })
        .unwrap_or_default();
    format!(
        "Put a pause hint in the loop: _mm_pause() in C and C++, std::hint::spin_loop() in \
         Rust, Thread.onSpinWait() in Java, Thread.SpinWait in .NET (Go's runtime spins with \
         runtime.procyield, which user code cannot call: use a sync.Mutex or a channel). Then \
         bound the spin by time{bound} and block: a futex, a condition variable, \
         std::thread::park or LockSupport.park, Atomics.wait in a JavaScript worker, woken by \
         the thread that changes the value."
    )
}

/// `contended locked read-modify-write in f`, or `hot ...` with one thread.
pub fn locked_rmw_title(symbol: &str, contended: bool) -> String {
    format!(
        "{} locked read-modify-write in {symbol}",
        if contended { "contended" } else { "hot" }
    )
}

/// Threads taking turns on one locked instruction.
pub fn locked_rmw_contention(threads: usize) -> String {
    format!(
        "{threads} threads take turns on the same instruction, so its cache line moves between \
         cores"
    )
}

/// The watch saw the site's cache line shared with other threads.
pub fn locked_rmw_line_shared(verdict: crate::schema::line_sharing::LineVerdict) -> String {
    use crate::schema::line_sharing::LineVerdict;
    let how = match verdict {
        LineVerdict::TrueSharing => "true sharing: the same field written by several threads",
        LineVerdict::TrueAndFalseSharing => "true and false sharing",
        _ => "false sharing: other threads write other fields of it",
    };
    format!("the watch saw its cache line shared ({how}; see \"Cache lines watched\")")
}

/// A locked operand whose fixed address crosses a 64-byte line: `operand_bytes` at `address`,
/// starting `line_offset_bytes` into its line.
pub fn operand_crosses_line(operand_bytes: u64, address: u64, line_offset_bytes: u64) -> String {
    format!(
        "the {operand_bytes}-byte operand at {address:#x} starts at byte {line_offset_bytes} of \
         its 64-byte line and ends in the next: a split lock"
    )
}

/// A register-relative locked operand whose displacement reaches past a line's end.
pub fn displacement_crosses_line(
    operand_bytes: u64,
    displacement: i64,
    line_offset_bytes: u64,
) -> String {
    format!(
        "the {operand_bytes}-byte operand sits at displacement {displacement:#x} (byte \
         {line_offset_bytes} of a line): it crosses a 64-byte line if its base register is \
         line-aligned"
    )
}

/// A register-relative locked operand misaligned for its size.
pub fn operand_misaligned(operand_bytes: u64, displacement: i64) -> String {
    format!(
        "the {operand_bytes}-byte operand is misaligned (displacement {displacement:#x}); it \
         crosses a line whenever it lands at the end of one"
    )
}

/// An operand that may straddle a line (the code alone cannot tell).
pub fn possible_split_lock(note: &str) -> String {
    format!(
        "possible split lock: {note}; a bus-lock counter or the kernel's split-lock detection \
         would confirm it"
    )
}

/// What a locked read-modify-write costs: `line_transfer` from [`super::costs`].
pub fn locked_rmw_explanation(line_transfer: &str, contended: bool) -> String {
    format!(
        "A locked instruction waits until it owns the cache line. When another core wrote the \
         line last, the line must move first: {line_transfer}. {}",
        if contended {
            "Here several threads hit the same line, so most executions pay a transfer, and \
             neighbouring fields on that line pay it too (false sharing, the Netflix case)."
        } else {
            "Here one thread takes most samples: the cost is the locked operation itself."
        }
    )
}

/// What to do about a hot hand-written atomic.
pub fn locked_rmw_advice() -> &'static str {
    "Shard the counter per thread or per CPU and sum on read; batch updates; keep hot atomics \
     on their own 64-byte line (alignas(64) / padding) so unrelated fields do not share it; \
     read before CAS (test-and-test-and-set)."
}

/// `split lock in f`.
pub fn split_lock_title(symbol: &str) -> String {
    format!("split lock in {symbol}")
}

/// The bus-lock counter's count.
pub fn bus_lock_count(n: f64) -> String {
    format!("bus-lock counter: {n:.0}")
}

/// The samples a split lock's trap took in the kernel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrapFacts {
    /// The trap.
    pub trap: SplitLockTrap,
    /// Share of all samples in it.
    pub share: f64,
    /// Those samples.
    pub samples: u64,
    /// CPU time they stand for, in ns.
    pub cpu_ns: f64,
}

/// Where a split lock's cost was seen: at its instruction, in the kernel's trap, asleep in
/// the kernel.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SplitLockShareFacts<'a> {
    /// The locking function.
    pub symbol: &'a str,
    /// Share of all samples at the instruction.
    pub instruction_share: f64,
    /// The trap's samples, when any were in the kernel's trap path.
    pub trap: Option<TrapFacts>,
    /// Seconds the locking threads slept in the kernel at the instruction, and their share
    /// of those threads' wall time, when the wall-clock view saw it.
    pub asleep: Option<(f64, f64)>,
}

impl SplitLockShareFacts<'_> {
    /// The instruction's share and the trap's together.
    pub fn total_share(&self) -> f64 {
        self.instruction_share + self.trap.map_or(0.0, |t| t.share)
    }

    /// Whether the kernel was seen to make the lock cost more: its trap sampled, or its
    /// threads asleep in it.
    pub fn penalised(&self) -> bool {
        self.trap.is_some() || self.asleep.is_some()
    }
}

/// The kernel's handler a trap runs: `#DB handler (bus-lock detection)`.
fn trap_handler(trap: SplitLockTrap) -> &'static str {
    match trap {
        SplitLockTrap::BusLockDebug => "#DB handler (bus-lock detection)",
        SplitLockTrap::SplitLockAlignmentCheck => "#AC handler (split-lock detection)",
    }
}

/// `this kernel trapped it: 61.5% of all samples (...) in its #DB handler (...), entered from
/// f; with the 38.3% at the instruction, the split lock holds 99.8% of all samples`.
pub fn split_lock_trapped(cost: &SplitLockShareFacts, trap: &TrapFacts) -> String {
    format!(
        "this kernel trapped it: {} of all samples ({} samples, ~{} of CPU time) in its {}, \
         entered from {}; with the {} at the instruction, the split lock holds {} of all samples",
        pct(trap.share, 1),
        group_thousands(trap.samples),
        human_ns(trap.cpu_ns),
        trap_handler(trap.trap),
        cost.symbol,
        pct(cost.instruction_share, 1),
        pct(cost.total_share(), 1)
    )
}

/// The locking threads asleep in the kernel at the locked instruction, outside any system
/// call: how a trap's sleep shows in the wall-clock view.
pub fn split_lock_asleep(symbol: &str, s: f64, wall_share: f64) -> String {
    format!(
        "asleep in the kernel at {symbol} outside any system call: {} ({} of the locking \
         threads' wall time), as a trap's sleep shows; off the CPU, so in no sample",
        human_ns(s * 1e9),
        pct(wall_share, 1)
    )
}

/// Kernel code was not sampled (`--user-only`, or refused at `perf_event_paranoid`): a trap's
/// time could not be seen.
pub fn split_lock_trap_unseen(paranoid: Option<i32>, user_only: bool) -> String {
    let why = if user_only {
        "--user-only".to_string()
    } else {
        match paranoid {
            Some(p) => format!("the kernel refused it at perf_event_paranoid {p}"),
            None => "the kernel refused it".to_string(),
        }
    };
    format!(
        "kernel code was not sampled ({why}): where a kernel traps split locks, the time in its \
         trap handler could not be seen, so the share above is the instruction's alone"
    )
}

/// What a split lock costs (`cost` from [`super::costs::split_lock`]) and what this kernel
/// does about them (`kernel`, from `words::machine::split_lock_summary`); where its trap was
/// sampled, how much of the samples the trap took, as the kernel's penalty, not the bus
/// lock's (the measured cost then said apart from the bus lock, which it is not alone); and
/// the sleep, where seen. `trapped`: the split-lock probe measured them trapped here (by the
/// kernel or the host), so the bus lock every core would feel is not what happens: the
/// Emerald Rapids guest whose host traps them measured its neighbours unharmed (DRAM 1.0x)
/// beside a finding that said the bus lock stalls every core.
pub fn split_lock_explanation(
    cost: &str,
    kernel: &str,
    seen: &SplitLockShareFacts,
    trapped: bool,
) -> String {
    let lead = "A locked operation on a value that straddles two cache lines cannot lock one \
                line: the CPU takes a bus lock, which stalls memory access on every core";
    let trapped_first = if trapped {
        ", unless something traps it first, as here"
    } else {
        ""
    };
    let bus_lock = format!("{lead}{trapped_first}");
    let mut text = match &seen.trap {
        None => format!("{bus_lock}: {cost}. This kernel: {kernel}"),
        Some(t) => format!(
            "{bus_lock}. A split lock here: {cost}. This kernel: {kernel}. In this profile, of \
             the {} of all samples this split lock holds, {} are the kernel's penalty, not the \
             bus lock's, in its {}; {} are at the instruction",
            pct(seen.total_share(), 1),
            pct(t.share, 1),
            trap_handler(t.trap),
            pct(seen.instruction_share, 1)
        ),
    };
    if let Some((_, share)) = seen.asleep {
        text.push_str(&format!(
            ". Its threads also slept in the kernel at the instruction for {} of their wall \
             time: the kernel's penalty too, not the bus lock's",
            pct(share, 1)
        ));
    }
    text
}

/// What to do about a split lock; where the kernel was seen to make it cost more, what the
/// kernel's settings do (Documentation/admin-guide/kernel-parameters.txt, `split_lock_detect`;
/// Documentation/admin-guide/sysctl/kernel.rst, `split_lock_mitigate`), as the kernel's
/// documentation says, not what this kernel's mode is.
pub fn split_lock_advice(penalised: bool) -> String {
    let mut text = "Align every atomic to its size (alignas, no #pragma pack or packed structs \
                    around atomics, no pointer arithmetic that misaligns them)."
        .to_string();
    if penalised {
        text.push_str(
            " Aligned, it takes no bus lock and no trap. The trap is the kernel's setting, not \
             the program's: split_lock_detect=off|warn|fatal|ratelimit:N on the kernel command \
             line (off: not detected, so not trapped, and still a bus lock; warn: trapped and \
             logged; fatal: SIGBUS; ratelimit:N: bus locks held to N a second system-wide, \
             lockers slowed) and the sysctl kernel.split_lock_mitigate (1, the default: the \
             kernel slows split lockers on purpose; 0: it only warns).",
        );
    }
    text
}
