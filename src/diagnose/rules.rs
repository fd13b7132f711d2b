//! Findings: rules that turn the evidence (hot sites, kernel signals, memory, counters) into
//! what a reader should act on, each with a level, the evidence, what it costs in this
//! machine's own figures, and what to do.
//!
//! Share thresholds are cpudoctor's: at 5% of samples a site is where a profile reader looks
//! (notice); at 25% a quarter of the workload's CPU time goes there (hazard). The costs a
//! finding quotes are this machine's ([`MachineCosts`]: a saved `check` the user gave, else
//! the probe's quick measurement taken after the workload), never another CPU's: a line
//! transfer costs ~22 ns inside a Zen 4 CCX and several times that on other parts, so a
//! figure typed in here would be wrong on most machines that read it.

use super::counters::{self, CounterValue};
use super::disasm::SiteKind;
use super::events::Signal;
use super::hotspots::{self, CallerPath, HotFunction, HotSite, HotSpots, short_module};
use super::jit;
use super::memory::ProcessMemory;
use super::record::Jvm;
use super::runtimes::{self, Role, Runtime};
use crate::format::human_ns;
use crate::machine::{Machine, ThpEnabled};
use crate::reference::{NETFLIX_TRUE_SHARING_FIX_SPEEDUP, PAUSE_HASWELL_NS};
use crate::schema::Level;
use crate::spin::LegacySpin;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Share of samples from which a site is worth a notice.
pub const NOTICE_SHARE: f64 = 0.05;
/// Share of samples from which a site is a hazard.
pub const HAZARD_SHARE: f64 = 0.25;
/// A thread takes part in a contended site (or method) when it has at least this share of its
/// samples: below it, a thread merely passed through.
pub const CONTENDING_THREAD_SHARE: f64 = 0.10;
/// Anonymous memory above which page size matters: 64 MiB is 16384 4 KiB pages, beyond what
/// any second-level TLB holds (1536 entries Skylake, 3072 Zen 4 = 6-12 MiB of reach).
pub const LARGE_ANON_KB: u64 = 64 * 1024;
/// Below this share of anonymous memory on huge pages, the process is on 4 KiB pages.
pub const LOW_HUGE_SHARE: f64 = 0.10;
/// Share of samples on memory loads from which the loads are "hot".
pub const HOT_LOAD_SHARE: f64 = 0.20;

/// PAUSE as measured on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PauseCost {
    /// ns per PAUSE.
    pub ns: f64,
    /// Core cycles per PAUSE, when the core clock was estimated.
    pub cycles: Option<f64>,
}

/// Where the figures of [`MachineCosts`] came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "from")]
pub enum CostSource {
    /// A fingerprint saved by `cpudoctor check` on this machine, given with `--check`.
    SavedCheck {
        /// The file, as given.
        file: String,
    },
    /// The probes' quick profile, run after the workload.
    MeasuredNow,
}

impl CostSource {
    /// How a finding says where its figure came from.
    fn phrase(&self) -> String {
        match self {
            CostSource::SavedCheck { file } => format!("this machine's check in {file}"),
            CostSource::MeasuredNow => "measured on this machine after the workload".into(),
        }
    }
}

/// Costs of moving and locking cache lines on this machine, for the findings that quote
/// them: from the `c2c` and `split-lock` probes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineCosts {
    /// One-way core-to-core handoff of a line by `lock cmpxchg` (c2c's `c2c_latency_ns`).
    pub line_transfer_ns: Option<f64>,
    /// An aligned locked handoff (split-lock's `aligned_lock_latency_ns`).
    pub aligned_lock_ns: Option<f64>,
    /// A split lock (`split_lock_latency_ns`, or `split_lock_trapped_ns` where the kernel
    /// traps them).
    pub split_lock_ns: Option<f64>,
    /// Where they came from (`from`: `saved_check` with its `file`, or `measured_now`).
    #[serde(flatten)]
    pub source: CostSource,
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// Stable id: `pause_spin`, `spin_without_pause`, `locked_rmw`, `split_lock`,
    /// `small_pages`, `high_cpi`, `memory_ordering_clears`, `cross_core_hitm`, `bus_locks`.
    pub id: String,
    /// How much it matters.
    pub level: Level,
    /// One line.
    pub title: String,
    /// Function, when the finding is about code.
    pub symbol: Option<String>,
    /// Its file.
    pub module: Option<String>,
    /// Offset of the hot instruction in the function.
    pub offset: Option<u64>,
    /// Share of all samples.
    pub sample_share: Option<f64>,
    /// The code, `=>` on the hot instruction.
    pub disassembly: Vec<String>,
    /// The evidence, one fact per line.
    pub evidence: Vec<String>,
    /// What it costs, in this machine's figures.
    pub explanation: String,
    /// What to do.
    pub advice: String,
}

/// What the rules read.
pub struct Context<'a> {
    /// Hot code.
    pub hot: &'a HotSpots,
    /// Memory per process.
    pub processes: &'a [ProcessMemory],
    /// Host facts.
    pub machine: &'a Machine,
    /// PAUSE measured now, when a PAUSE spin was found.
    pub pause: Option<PauseCost>,
    /// Hardware counters (empty without a PMU).
    pub counters: &'a [CounterValue],
    /// Sampling frequency, to turn samples into CPU time.
    pub frequency_hz: u64,
    /// HotSpot JVMs followed (process id -> home and version).
    pub jvms: &'a BTreeMap<u32, Jvm>,
    /// Line-transfer and lock costs of this machine, when measured or given.
    pub costs: Option<&'a MachineCosts>,
}

/// What a core-to-core line transfer costs here, as a finding says it; without a figure,
/// where to get one (no other machine's figure stands in).
fn line_transfer_text(ctx: &Context) -> String {
    match ctx
        .costs
        .and_then(|c| Some((c.line_transfer_ns?, &c.source)))
    {
        Some((ns, source)) => format!(
            "~{} per transfer between cores ({})",
            human_ns(ns),
            source.phrase()
        ),
        None => "a core-to-core transfer, whose cost on this machine `cpudoctor check` \
                 measures (c2c_latency_ns; give a saved one with --check FILE)"
            .into(),
    }
}

fn level_for_share(share: f64) -> Option<Level> {
    if share >= HAZARD_SHARE {
        Some(Level::Hazard)
    } else if share >= NOTICE_SHARE {
        Some(Level::Notice)
    } else {
        None
    }
}

fn pct(x: f64) -> String {
    format!("{:.1}%", 100.0 * x)
}

fn site_evidence(site: &HotSite, ctx: &Context) -> Vec<String> {
    let cpu_s = site.samples as f64 / ctx.frequency_hz.max(1) as f64;
    let mut v = vec![format!(
        "{} of all samples ({} samples, ~{} of CPU time) at {}+{:#x} in {}, hot instruction \
         `{}`",
        pct(site.share),
        site.samples,
        human_ns(cpu_s * 1e9),
        site.symbol,
        site.offset,
        short_module(&site.module),
        site.instruction
    )];
    if let Some(line) = &site.source_line {
        v.push(format!("source: {line}"));
    }
    for t in site.threads.iter().take(4) {
        let cpu = ctx
            .hot
            .threads
            .iter()
            .find(|r| r.figures.tid == t.tid)
            .filter(|r| r.figures.wall_s > 0.0)
            .map(|r| {
                format!(
                    ", thread busy {} of its wall time",
                    pct(r.figures.cpu_per_wall)
                )
            })
            .unwrap_or_default();
        v.push(format!(
            "thread {} ({}): {} of its samples here{cpu}",
            t.tid,
            t.name,
            pct(t.share_of_thread)
        ));
    }
    v
}

/// The caller paths of a function, from the sampled stacks.
fn callers(ctx: &Context, symbol: &str, module: &str) -> Vec<CallerPath> {
    hotspots::callers_of(&ctx.hot.stacks, symbol, module)
}

/// Evidence lines for caller paths: `called from a <- b <- c (80% of its samples)`.
fn caller_evidence(paths: &[CallerPath]) -> Vec<String> {
    paths
        .iter()
        .map(|p| {
            format!(
                "called from {} ({} of its samples)",
                p.frames.join(" <- "),
                pct(p.share)
            )
        })
        .collect()
}

/// The runtime lock behind a function: from its own name, else from its callers' names.
fn runtime_lock(symbol: &str, paths: &[CallerPath]) -> Option<runtimes::LockInStack> {
    let names = |p: Option<&CallerPath>| -> Vec<String> {
        std::iter::once(symbol.to_string())
            .chain(p.into_iter().flat_map(|p| p.frames.iter().cloned()))
            .collect()
    };
    let best = names(paths.first());
    runtimes::lock_in_stack(best.iter().map(String::as_str))
}

/// What the runtime's spin costs here, in words, when PAUSE was measured.
fn runtime_spin_cost(rt: Runtime, ctx: &Context) -> String {
    let (Some(p), Some(policy)) = (ctx.pause, rt.policy()) else {
        return String::new();
    };
    let Some(c) = rt.spin_cost(p.ns, ctx.machine.logical_cpus as u64) else {
        return String::new();
    };
    format!(
        " {}'s {} spins up to {:.0} PAUSEs, then {}: {} at this CPU's {:.1} ns per PAUSE \
         ({}).",
        rt.name(),
        policy.primitive,
        c.pauses,
        c.then,
        human_ns(c.spin_ns),
        p.ns,
        c.source
    )
}

fn lock_evidence(l: &runtimes::LockInStack) -> String {
    let mut s = format!("runtime: {} {}", l.runtime.name(), l.runtime.lock());
    if let Some(e) = &l.enter {
        s.push_str(&format!(", taken in {e}"));
    }
    if let Some(w) = &l.waiter {
        s.push_str(&format!(", waited for by {w}"));
    }
    s
}

fn code_finding(id: &str, level: Level, title: String, site: &HotSite, ctx: &Context) -> Finding {
    Finding {
        id: id.into(),
        level,
        title,
        symbol: Some(site.symbol.clone()),
        module: Some(site.module.clone()),
        offset: Some(site.offset),
        sample_share: Some(site.share),
        disassembly: site.disassembly.clone(),
        evidence: site_evidence(site, ctx),
        explanation: String::new(),
        advice: String::new(),
    }
}

fn pause_spin(site: &HotSite, level: Level, ctx: &Context) -> Finding {
    let mut f = code_finding(
        "pause_spin",
        level,
        format!("{} spins on PAUSE", site.symbol),
        site,
        ctx,
    );
    let paths = callers(ctx, &site.symbol, &site.module);
    f.evidence.extend(caller_evidence(&paths));
    let lock = runtime_lock(&site.symbol, &paths);
    let cpu_ns = site.samples as f64 / ctx.frequency_hz.max(1) as f64 * 1e9;
    let symptom = "Spinning is the symptom: a waiter spins because the holder keeps the lock \
                   (or the producer the data) longer than the spin.";
    f.explanation = match ctx.pause {
        Some(p) => {
            let cycles = p
                .cycles
                .map(|c| format!(" ({c:.0} core cycles)"))
                .unwrap_or_default();
            let measured = format!(
                "This loop waits on PAUSE. PAUSE costs {:.1} ns here{cycles}, measured now \
                 ({:.1}x the ~{PAUSE_HASWELL_NS} ns spin counts were tuned for on Haswell-era CPUs); the time \
                 sampled here is about {} PAUSEs.",
                p.ns,
                p.ns / PAUSE_HASWELL_NS,
                crate::format::group_thousands((cpu_ns / p.ns) as u64),
            );
            match &lock {
                // The runtime's own spin, not other runtimes' figures.
                Some(l) => format!("{measured}{} {symptom}", runtime_spin_cost(l.runtime, ctx)),
                None => {
                    let legacy = LegacySpin::new(ctx.machine.logical_cpus as u64);
                    format!(
                        "{measured} A spin of 100 PAUSEs (glibc's adaptive mutex) lasts {}, \
                         of 1,000 PAUSEs {}; .NET's legacy lock spin on {} cores would last \
                         {}. {symptom}",
                        human_ns(100.0 * p.ns),
                        human_ns(1000.0 * p.ns),
                        ctx.machine.logical_cpus,
                        human_ns(legacy.total_ns(p.ns)),
                    )
                }
            }
        }
        None => "This loop waits on PAUSE; the PAUSE cost could not be measured here, see \
                 `cpudoctor check`."
            .into(),
    };
    f.advice = "Bound the spin by time, not by a count of PAUSEs, then block (futex, \
                condition variable, parking). Find what the waiter waits for: shorten the \
                critical section or hand work over without a lock."
        .into();
    if let Some(l) = lock {
        f.title = format!(
            "{} spins on PAUSE in {}'s {}",
            site.symbol,
            l.runtime.name(),
            l.runtime.lock()
        );
        f.evidence.push(lock_evidence(&l));
        f.advice = l.runtime.remedy().into();
    }
    f
}

/// A runtime's lock code (spin and wait functions of the table) taking a notable share: the
/// HotSpot monitor case, whose spin is mostly plain loads that no PAUSE rule sees.
fn runtime_lock_spins(ctx: &Context, covered: &[String]) -> Vec<Finding> {
    let mut by_rt: BTreeMap<Runtime, Vec<&hotspots::HotFunction>> = BTreeMap::new();
    for f in &ctx.hot.functions {
        if let Some((rt, Role::Spin | Role::Wait)) = runtimes::classify(&f.symbol)
            && !covered.contains(&f.symbol)
        {
            by_rt.entry(rt).or_default().push(f);
        }
    }
    let mut out = Vec::new();
    for (rt, funcs) in by_rt {
        let share: f64 = funcs.iter().map(|f| f.share).sum();
        let Some(level) = level_for_share(share) else {
            continue;
        };
        let top = funcs[0];
        let paths = callers(ctx, &top.symbol, &top.module);
        let lock = runtime_lock(&top.symbol, &paths);
        let mut evidence = vec![format!(
            "{} of all samples in {}'s lock code: {}",
            pct(share),
            rt.name(),
            funcs
                .iter()
                .map(|f| format!("{} {}", f.symbol, pct(f.share)))
                .collect::<Vec<_>>()
                .join(", ")
        )];
        evidence.extend(caller_evidence(&paths));
        if let Some(l) = &lock {
            evidence.push(lock_evidence(l));
        }
        let waiter = lock
            .as_ref()
            .and_then(|l| l.waiter.clone())
            .map(|w| format!(" waited for by {w}"))
            .unwrap_or_default();
        out.push(Finding {
            id: "runtime_lock_spin".into(),
            level,
            title: format!("threads spin in {}'s {}{waiter}", rt.name(), rt.lock()),
            symbol: Some(top.symbol.clone()),
            module: Some(top.module.clone()),
            offset: None,
            sample_share: Some(share),
            disassembly: ctx
                .hot
                .sites
                .iter()
                .find(|s| s.symbol == top.symbol)
                .map(|s| s.disassembly.clone())
                .unwrap_or_default(),
            evidence,
            explanation: format!(
                "Threads that find the lock taken spin in the runtime before they sleep; this \
                 much spinning means the lock is held long or often relative to the spin.{}",
                runtime_spin_cost(rt, ctx)
            ),
            advice: rt.remedy().into(),
        });
    }
    out
}

/// JDK-8180450 was fixed in JDK 23 (the one-element secondary-super cache replaced by a
/// hashed table of secondary supers, JDK-8180450 / JDK-8331658).
pub const SECONDARY_SUPERS_FIXED_IN: u32 = 23;

/// The Netflix JVM case: HotSpot's linear scan of a class's secondary supers (`repne scas`,
/// in JIT code or the subtype-check stub) hot in more than one thread, each failed lookup
/// writing the class's single-element `_secondary_super_cache`.
fn secondary_supers(ctx: &Context) -> Option<Finding> {
    let (pid, jvm) = ctx.jvms.iter().next()?;
    let feature = jvm.version.as_deref().and_then(jit::feature_release);
    if feature.is_some_and(|f| f >= SECONDARY_SUPERS_FIXED_IN) {
        return None;
    }
    // Functions (JIT methods or stubs) with a hot `repne scas`: in anonymous memory, or a
    // stub named for subtype checks.
    let scan_funcs: Vec<&str> = ctx
        .hot
        .sites
        .iter()
        .filter(|s| s.instruction.starts_with("repne scas"))
        .filter(|s| {
            !s.module.starts_with('/') || s.module.starts_with("//") || s.symbol.contains("subtype")
        })
        .map(|s| s.symbol.as_str())
        .collect();
    let first = *scan_funcs.first()?;
    let sites: Vec<&HotSite> = ctx
        .hot
        .sites
        .iter()
        .filter(|s| scan_funcs.contains(&s.symbol.as_str()))
        .collect();
    // Shares and threads over the whole functions: a thread whose samples spread over many
    // instructions of the method (none of them a hot site) contends there all the same.
    let funcs: Vec<&HotFunction> = ctx
        .hot
        .functions
        .iter()
        .filter(|f| scan_funcs.contains(&f.symbol.as_str()))
        .collect();
    let share: f64 = if funcs.is_empty() {
        sites.iter().map(|s| s.share).sum()
    } else {
        funcs.iter().map(|f| f.share).sum()
    };
    let mut per_thread: BTreeMap<u32, (String, u64)> = BTreeMap::new();
    let mut samples = 0;
    let thread_lists = if funcs.iter().any(|f| !f.threads.is_empty()) {
        funcs.iter().map(|f| &f.threads).collect::<Vec<_>>()
    } else {
        sites.iter().map(|s| &s.threads).collect()
    };
    for t in thread_lists.into_iter().flatten() {
        samples += t.samples;
        let e = per_thread.entry(t.tid).or_insert((t.name.clone(), 0));
        e.1 += t.samples;
    }
    let threads: Vec<_> = per_thread
        .iter()
        .filter(|(_, (_, n))| *n as f64 >= CONTENDING_THREAD_SHARE * samples as f64)
        .collect();
    let level = level_for_share(share)?;
    if threads.len() < 2 {
        return None;
    }
    let version = jvm.version.as_deref().unwrap_or("of unknown version");
    let scan = sites
        .iter()
        .find(|s| s.instruction.starts_with("repne scas"))
        .expect("a scan site");
    let mut evidence = vec![
        format!(
            "{} of all samples in {} ({} JIT method{}), with the secondary-supers scan `{}` \
             at +{:#x}",
            pct(share),
            first,
            scan_funcs.len(),
            if scan_funcs.len() == 1 { "" } else { "s" },
            scan.instruction,
            scan.offset
        ),
        format!("process {pid}: HotSpot {version} ({})", jvm.home.display()),
        format!(
            "{} threads in it: {}",
            threads.len(),
            threads
                .iter()
                .map(|(tid, (name, n))| format!("{tid} ({name}) {n} samples"))
                .collect::<Vec<_>>()
                .join(", ")
        ),
    ];
    evidence.extend(caller_evidence(&callers(ctx, first, &scan.module)));
    Some(Finding {
        id: "hotspot_secondary_supers".into(),
        level,
        title: format!(
            "{first}: type checks contend on a class's secondary-super cache (JDK-8180450)"
        ),
        symbol: Some(first.to_string()),
        module: Some(scan.module.clone()),
        offset: Some(scan.offset),
        sample_share: Some(share),
        disassembly: scan.disassembly.clone(),
        evidence,
        explanation: format!(
            "The Netflix JVM case. An instanceof, checkcast or interface dispatch \
                      against an interface that is not a class's primary super scans the \
                      class's secondary supers (`repne scas`) and stores the interface found \
                      in the class's one-element _secondary_super_cache. When threads check \
                      the same class against different interfaces, each overwrites what the \
                      other just stored: every check misses, scans, and writes the line the \
                      other cores read, so it bounces between cores (true sharing; the \
                      adjacent _secondary_supers field pays too). This is JDK-8180450; Netflix \
                      measured {NETFLIX_TRUE_SHARING_FIX_SPEEDUP}x throughput from removing it."
        ),
        advice: format!(
            "Run on JDK {SECONDARY_SUPERS_FIXED_IN} or later, where a hashed table of secondary \
             supers replaced the cache (a backport to 21u exists: check your vendor's 21.0.x \
             notes). In code: do not check one class against many interfaces in a hot path \
             (check the concrete class, or cache the result per class), and avoid alternating \
             type checks of the same objects across threads."
        ),
    })
}

fn plain_spin(site: &HotSite, level: Level, ctx: &Context) -> Finding {
    let mut f = code_finding(
        "spin_without_pause",
        level,
        format!("{} spins without PAUSE", site.symbol),
        site,
        ctx,
    );
    f.explanation = "This loop re-reads one location with no PAUSE. It takes issue slots from \
                     the SMT sibling, leaves with a memory-order machine clear when the value \
                     changes, and inside a VM never triggers pause-loop exiting, so the \
                     hypervisor cannot give the vCPU to the thread being waited for."
        .into();
    f.advice = "Put a PAUSE in the loop (_mm_pause(), std::hint::spin_loop(), \
                Thread.onSpinWait()), bound the spin by time and then block."
        .into();
    f
}

fn locked_rmw(site: &HotSite, level: Level, ctx: &Context) -> Finding {
    let contending: Vec<_> = site
        .threads
        .iter()
        .filter(|t| t.samples as f64 >= CONTENDING_THREAD_SHARE * site.samples as f64)
        .collect();
    let contended = contending.len() >= 2;
    let mut f = code_finding(
        "locked_rmw",
        level,
        format!(
            "{} locked read-modify-write in {}",
            if contended { "contended" } else { "hot" },
            site.symbol
        ),
        site,
        ctx,
    );
    if contended {
        f.evidence.push(format!(
            "{} threads take turns on the same instruction, so its cache line moves between \
             cores",
            contending.len()
        ));
    }
    if let Some(note) = &site.possible_split_note {
        f.evidence.push(format!(
            "possible split lock: {note}; a bus-lock counter or the kernel's split-lock \
             detection would confirm it"
        ));
    }
    f.explanation = format!(
        "A locked instruction waits until it owns the cache line. When another core wrote \
         the line last, the line must move first: {}. {}",
        line_transfer_text(ctx),
        if contended {
            "Here several threads hit the same line, so most executions pay a transfer, and \
             neighbouring fields on that line pay it too (false sharing, the Netflix case)."
        } else {
            "Here one thread takes most samples: the cost is the locked operation itself."
        }
    );
    f.advice = "Shard the counter per thread or per CPU and sum on read; batch updates; keep \
                hot atomics on their own 64-byte line (alignas(64) / padding) so unrelated \
                fields do not share it; read before CAS (test-and-test-and-set)."
        .into();
    // A runtime's own lock word (Go's lockSlow CAS, HotSpot's monitor enter): that
    // runtime's remedy, not advice for hand-written atomics.
    let paths = callers(ctx, &site.symbol, &site.module);
    f.evidence.extend(caller_evidence(&paths));
    if let Some(l) = runtime_lock(&site.symbol, &paths)
        && runtimes::classify(&site.symbol).is_some()
    {
        f.evidence.push(lock_evidence(&l));
        f.advice = l.runtime.remedy().into();
    }
    f
}

fn split_lock(site: &HotSite, note: &str, ctx: &Context) -> Finding {
    let mut f = code_finding(
        "split_lock",
        Level::Hazard,
        format!("split lock in {}", site.symbol),
        site,
        ctx,
    );
    f.evidence.push(note.to_string());
    if let Some(bus) = counters::signal_total(ctx.counters, Signal::BusLocks) {
        f.evidence.push(format!("bus-lock counter: {bus:.0}"));
    }
    f.explanation = format!(
        "A locked operation on a value that straddles two cache lines cannot lock one line: \
         the CPU takes a bus lock, which stalls memory access on every core: {}. This \
         kernel: {}",
        split_lock_text(ctx),
        ctx.machine.split_lock.summary
    );
    f.advice = "Align every atomic to its size (alignas, no #pragma pack or packed structs \
                around atomics, no pointer arithmetic that misaligns them)."
        .into();
    f
}

/// What a split lock costs here against an aligned one, or where to measure it.
fn split_lock_text(ctx: &Context) -> String {
    match ctx
        .costs
        .and_then(|c| Some((c.split_lock_ns?, c.aligned_lock_ns, &c.source)))
    {
        Some((split, aligned, source)) => format!(
            "~{} per split lock{} ({})",
            human_ns(split),
            aligned
                .map(|a| format!(" against ~{} aligned", human_ns(a)))
                .unwrap_or_default(),
            source.phrase()
        ),
        None => "what that costs on this machine, `cpudoctor check` measures (its split-lock \
                 probe; give a saved check with --check FILE)"
            .into(),
    }
}

fn small_pages(ctx: &Context) -> Option<Finding> {
    let proc_ = ctx
        .processes
        .iter()
        .max_by_key(|p| p.anonymous_kb)
        .filter(|p| p.anonymous_kb >= LARGE_ANON_KB && p.huge_share() < LOW_HUGE_SHARE)?;
    let load_share: f64 = ctx
        .hot
        .kinds
        .iter()
        .filter(|k| k.kind == SiteKind::MemoryLoad)
        .map(|k| k.share)
        .sum();
    let walks = counters::signal_total(ctx.counters, Signal::DtlbWalks);
    let instructions = ctx
        .counters
        .iter()
        .find(|v| v.name == "instructions")
        .map(|v| v.value);
    let walks_per_k = walks
        .zip(instructions)
        .map(|(w, i)| 1000.0 * w / i.max(1.0));
    if load_share < HOT_LOAD_SHARE && walks_per_k.is_none_or(|w| w < 1.0) {
        return None;
    }
    let level = match walks_per_k {
        Some(w) if w >= 5.0 => Level::Hazard,
        _ => Level::Notice,
    };
    let thp = ctx.machine.thp.as_ref().map(|t| t.enabled);
    let site = ctx
        .hot
        .sites
        .iter()
        .find(|s| s.kind == SiteKind::MemoryLoad);
    let mut evidence = vec![
        format!(
            "process {} ({}): {} MiB anonymous memory, {} MiB of it on huge pages \
             (AnonHugePages), RSS {} MiB",
            proc_.pid,
            proc_.name,
            proc_.anonymous_kb / 1024,
            proc_.anon_huge_pages_kb / 1024,
            proc_.rss_kb / 1024
        ),
        format!(
            "transparent huge pages: {}",
            thp.map_or("unknown", ThpEnabled::as_str)
        ),
        format!("{} of samples on memory loads", pct(load_share)),
    ];
    if let Some(w) = walks_per_k {
        evidence.push(format!("{w:.2} data-TLB walks per 1000 instructions"));
    } else {
        evidence.push(
            "no PMU: TLB misses cannot be counted here; the finding rests on the page size \
             and the hot loads"
                .into(),
        );
    }
    if let Some(s) = site {
        evidence.extend(site_evidence(s, ctx));
    }
    let pages = proc_.anonymous_kb / 4;
    Some(Finding {
        id: "small_pages".into(),
        level,
        title: format!(
            "{} MiB on 4 KiB pages with hot memory loads",
            proc_.anonymous_kb / 1024
        ),
        symbol: site.map(|s| s.symbol.clone()),
        module: site.map(|s| s.module.clone()),
        offset: site.map(|s| s.offset),
        sample_share: Some(load_share),
        disassembly: site.map(|s| s.disassembly.clone()).unwrap_or_default(),
        evidence,
        explanation: format!(
            "{} MiB of anonymous memory is {} 4 KiB pages. A second-level TLB of 1536 \
             (Skylake) to 3072 (Zen 4) entries reaches 6-12 MiB with 4 KiB pages, 3-6 GiB \
             with 2 MiB pages: loads that jump around this memory mostly miss the TLB and \
             walk the page tables, a chain of dependent memory reads per load.",
            proc_.anonymous_kb / 1024,
            crate::format::group_thousands(pages)
        ),
        advice: match thp {
            Some(ThpEnabled::Madvise) => {
                "THP is in madvise mode here: madvise(MADV_HUGEPAGE) the large \
                          buffers (2 MiB-aligned), or set transparent_hugepage=always; JVMs: \
                          -XX:+UseTransparentHugePages."
                    .into()
            }
            Some(ThpEnabled::Never) => {
                "THP is off here: enable it (madvise or always) and madvise the large \
                        buffers, or use hugetlbfs (MAP_HUGETLB)."
                    .into()
            }
            _ => "THP is on but the memory is not on huge pages: check fragmentation \
                  (khugepaged, defrag setting) or allocate from hugetlbfs."
                .into(),
        },
    })
}

fn counter_findings(ctx: &Context) -> Vec<Finding> {
    let mut out = Vec::new();
    let instructions = ctx
        .counters
        .iter()
        .find(|v| v.name == "instructions")
        .map(|v| v.value)
        .filter(|i| *i > 0.0);
    let plain =
        |id: &str, level, title: String, evidence: String, explanation: &str, advice: &str| {
            Finding {
                id: id.into(),
                level,
                title,
                symbol: None,
                module: None,
                offset: None,
                sample_share: None,
                disassembly: Vec::new(),
                evidence: vec![evidence],
                explanation: explanation.into(),
                advice: advice.into(),
            }
        };
    if let Some(cpi) = counters::cpi(ctx.counters)
        && cpi >= 2.0
    {
        out.push(plain(
            "high_cpi",
            Level::Notice,
            format!("CPI {cpi:.2}"),
            format!("{cpi:.2} cycles per instruction"),
            "The core waits more than it executes. The Netflix JVM case's slow nodes ran at 3x the \
             CPI of the fast ones, with 4x the machine clears: cache lines bouncing between \
             cores.",
            "Look at the memory-ordering clears and HITM counts below, and at the hot \
             instructions for shared writes.",
        ));
    }
    let per_k = |s: Signal| {
        counters::signal_total(ctx.counters, s)
            .zip(instructions)
            .map(|(v, i)| (v, 1000.0 * v / i))
    };
    if let Some((n, k)) = per_k(Signal::MemoryOrderingClears)
        && k >= 0.5
    {
        out.push(plain(
            "memory_ordering_clears",
            Level::Notice,
            format!("{k:.2} memory-ordering machine clears per 1000 instructions"),
            format!("{n:.0} clears"),
            "Another core wrote a line this core had read ahead, and the pipeline was flushed: \
             the signature of true or false sharing.",
            "Find fields written by one thread and read by others on the same 64-byte line; \
             pad them apart or stop writing shared state (the Netflix JVM case's fix).",
        ));
    }
    if let Some((n, k)) = per_k(Signal::CrossCoreHitm)
        && k >= 1.0
    {
        out.push(plain(
            "cross_core_hitm",
            Level::Notice,
            format!("{k:.2} loads per 1000 instructions served from another core's modified line"),
            format!("{n:.0} cross-core transfers"),
            &format!(
                "Each costs {} instead of an L1 hit.",
                line_transfer_text(ctx)
            ),
            "Keep data written by one thread on lines no other thread reads in a hot path.",
        ));
    }
    if let Some(n) = counters::signal_total(ctx.counters, Signal::BusLocks)
        && n >= 1.0
    {
        out.push(plain(
            "bus_locks",
            Level::Hazard,
            format!("{n:.0} bus locks"),
            format!("{n:.0} locked operations took a bus lock"),
            "Split or uncacheable locked operations lock the bus and slow every core.",
            "Find the misaligned atomic (the locked hot sites above) and align it.",
        ));
    }
    out
}

/// Every finding, most severe first, then by share.
pub fn findings(ctx: &Context) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    for site in &ctx.hot.sites {
        let Some(level) = level_for_share(site.share) else {
            continue;
        };
        match site.kind {
            SiteKind::PauseSpin => out.push(pause_spin(site, level, ctx)),
            SiteKind::SpinWithoutPause => out.push(plain_spin(site, level, ctx)),
            SiteKind::LockedRmw => {
                // A split lock is the locked hotspot with its cause named: one finding, unless
                // threads also contend for it, which is a second cost.
                let contended = site
                    .threads
                    .iter()
                    .filter(|t| t.samples as f64 >= CONTENDING_THREAD_SHARE * site.samples as f64)
                    .count()
                    >= 2;
                if let Some(note) = &site.split_note {
                    out.push(split_lock(site, note, ctx));
                }
                if site.split_note.is_none() || contended {
                    out.push(locked_rmw(site, level, ctx));
                }
            }
            SiteKind::MemoryLoad | SiteKind::Compute => {}
        }
    }
    // One loop can give two sites with the same hot instruction (two back edges): one
    // finding each.
    let mut seen = std::collections::HashSet::new();
    out.retain(|f| seen.insert((f.id.clone(), f.symbol.clone(), f.module.clone(), f.offset)));
    let covered: Vec<String> = out.iter().filter_map(|f| f.symbol.clone()).collect();
    out.extend(runtime_lock_spins(ctx, &covered));
    out.extend(secondary_supers(ctx));
    out.extend(small_pages(ctx));
    out.extend(counter_findings(ctx));
    out.sort_by(|a, b| {
        b.level.cmp(&a.level).then(
            b.sample_share
                .unwrap_or(0.0)
                .total_cmp(&a.sample_share.unwrap_or(0.0)),
        )
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::hotspots::{KindShare, SiteThread};

    fn machine() -> Machine {
        let mut m = Machine::detect();
        m.logical_cpus = 24;
        m
    }

    fn site(kind: SiteKind, share: f64, threads: &[(u32, u64)]) -> HotSite {
        let samples = threads.iter().map(|t| t.1).sum();
        HotSite {
            kind,
            symbol: "spin_wait_on_flag".into(),
            module: "/tmp/x/pause_spin".into(),
            address: 0x1189,
            offset: 0x19,
            instruction: "pause".into(),
            samples,
            share,
            threads: threads
                .iter()
                .map(|&(tid, n)| SiteThread {
                    tid,
                    name: "t".into(),
                    samples: n,
                    share_of_thread: 0.9,
                })
                .collect(),
            disassembly: vec!["=> 0x1189: f3 90 pause".into()],
            source_line: None,
            split_note: None,
            possible_split_note: None,
        }
    }

    fn ctx<'a>(hot: &'a HotSpots, m: &'a Machine, procs: &'a [ProcessMemory]) -> Context<'a> {
        Context {
            hot,
            processes: procs,
            machine: m,
            pause: Some(PauseCost {
                ns: 43.0,
                cycles: Some(140.0),
            }),
            counters: &[],
            frequency_hz: 1000,
            jvms: &NO_JVMS,
            costs: None,
        }
    }

    static NO_JVMS: BTreeMap<u32, Jvm> = BTreeMap::new();

    #[test]
    fn a_pause_spin_finding_joins_the_measured_pause_cost() {
        let hot = HotSpots {
            sites: vec![site(SiteKind::PauseSpin, 0.6, &[(10, 600)])],
            ..HotSpots::default()
        };
        let m = machine();
        let f = findings(&ctx(&hot, &m, &[]));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].id, "pause_spin");
        assert_eq!(f[0].level, Level::Hazard);
        assert_eq!(f[0].symbol.as_deref(), Some("spin_wait_on_flag"));
        // 600 samples at 1 kHz = 0.6 s = ~13.95 M PAUSEs at 43 ns; 1,000 PAUSEs = 43 us;
        // the seed's .NET legacy spin on 24 cores at 43 ns = 211.6 ms.
        assert!(f[0].explanation.contains("43.0 ns"), "{}", f[0].explanation);
        assert!(f[0].explanation.contains("13,953,488 PAUSEs"));
        assert!(f[0].explanation.contains("43.0 us"));
        assert!(f[0].explanation.contains("211.6 ms"));
    }

    /// The Netflix JVM case seen by a CI run: each hot site of the JIT method held one
    /// thread (thread 2's samples spread over instructions below the site cut), so counting
    /// threads over sites found one and the finding was lost.
    #[test]
    fn secondary_supers_counts_threads_over_the_whole_method_not_only_its_hot_sites() {
        let method = "void SecondarySupers.lambda$main$0(int, long[])";
        let mut load = site(SiteKind::MemoryLoad, 0.45, &[(1, 450)]);
        let mut scan = site(SiteKind::Compute, 0.02, &[(1, 20)]);
        for (s, insn) in [
            (&mut load, "mov r9,[rsi+20h]"),
            (&mut scan, "repne scasq [rdi]"),
        ] {
            s.symbol = method.into();
            s.module = "//anon".into();
            s.instruction = insn.into();
        }
        let thread = |tid, samples| SiteThread {
            tid,
            name: format!("checker-{tid}"),
            samples,
            share_of_thread: 0.95,
        };
        let mut hot = HotSpots {
            sites: vec![load, scan],
            functions: vec![HotFunction {
                symbol: method.into(),
                module: "//anon".into(),
                samples: 950,
                share: 0.95,
                callers: Vec::new(),
                threads: vec![thread(1, 480), thread(2, 470)],
            }],
            ..HotSpots::default()
        };
        let m = machine();
        let jvms = BTreeMap::from([(
            7,
            Jvm {
                home: "/usr/lib/jvm/java-17-openjdk-amd64".into(),
                version: Some("17.0.15".into()),
                names_from: None,
            },
        )]);
        let judge = |hot: &HotSpots| {
            let mut c = ctx(hot, &m, &[]);
            c.jvms = &jvms;
            findings(&c)
                .into_iter()
                .find(|f| f.id == "hotspot_secondary_supers")
        };
        let f = judge(&hot).expect("two threads in the method");
        assert_eq!(f.level, Level::Hazard);
        assert_eq!(f.sample_share, Some(0.95));
        assert!(f.evidence.iter().any(|e| e.contains("2 threads")), "{f:?}");
        // One thread in the method is no contention.
        hot.functions[0].threads = vec![thread(1, 950)];
        assert!(judge(&hot).is_none());
    }

    #[test]
    fn small_shares_give_no_finding() {
        let hot = HotSpots {
            sites: vec![site(SiteKind::PauseSpin, 0.02, &[(10, 20)])],
            ..HotSpots::default()
        };
        let m = machine();
        assert!(findings(&ctx(&hot, &m, &[])).is_empty());
    }

    #[test]
    fn two_threads_on_one_locked_site_is_contended_and_a_split_adds_a_hazard() {
        let mut s = site(SiteKind::LockedRmw, 0.8, &[(10, 400), (11, 380)]);
        s.split_note = Some("the 8-byte operand at 0x403c ... a split lock".into());
        let hot = HotSpots {
            sites: vec![s],
            ..HotSpots::default()
        };
        let m = machine();
        let f = findings(&ctx(&hot, &m, &[]));
        let ids: Vec<&str> = f.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["split_lock", "locked_rmw"]);
        assert!(f[1].title.starts_with("contended"));
        assert!(f[0].evidence.iter().any(|e| e.contains("0x403c")));
    }

    #[test]
    fn line_costs_are_quoted_from_the_check_given_and_never_typed_in() {
        // Guards issue 20's bug: "~22 ns within a Zen 4 CCX" printed on an Intel machine.
        let mut s = site(SiteKind::LockedRmw, 0.8, &[(10, 400), (11, 380)]);
        s.split_note = Some("the 8-byte operand at 0x403c ... a split lock".into());
        let hot = HotSpots {
            sites: vec![s],
            ..HotSpots::default()
        };
        let m = machine();
        let costs = MachineCosts {
            line_transfer_ns: Some(61.5),
            aligned_lock_ns: Some(58.0),
            split_lock_ns: Some(1234.0),
            source: CostSource::SavedCheck {
                file: "icx.json".into(),
            },
        };
        let mut c = ctx(&hot, &m, &[]);
        c.costs = Some(&costs);
        let f = findings(&c);
        assert!(
            f[0].explanation
                .contains("~1.2 us per split lock against ~58.0 ns aligned")
        );
        assert!(
            f[1].explanation
                .contains("~61.5 ns per transfer between cores")
        );
        assert!(
            f.iter()
                .all(|f| f.explanation.contains("check in icx.json"))
        );
        // Without figures: where to get them, and no other machine's.
        let f = findings(&ctx(&hot, &m, &[]));
        for f in &f {
            assert!(f.explanation.contains("--check FILE"), "{}", f.explanation);
            assert!(!f.explanation.contains(" ns"), "{}", f.explanation);
        }
    }

    #[test]
    fn a_possibly_split_register_relative_operand_is_evidence_not_a_split_lock_hazard() {
        // Guards the overclaim: an operand that crosses a line only if its base register is
        // line-aligned is noted on the locked finding, not reported as a split lock.
        let mut s = site(SiteKind::LockedRmw, 0.8, &[(10, 800)]);
        s.possible_split_note = Some("the 8-byte operand sits at displacement 0x3c".into());
        let hot = HotSpots {
            sites: vec![s],
            ..HotSpots::default()
        };
        let m = machine();
        let f = findings(&ctx(&hot, &m, &[]));
        let ids: Vec<&str> = f.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["locked_rmw"]);
        assert!(
            f[0].evidence
                .iter()
                .any(|e| e.starts_with("possible split lock: ") && e.contains("0x3c"))
        );
    }

    #[test]
    fn large_anonymous_memory_on_small_pages_with_hot_loads_is_a_page_size_finding() {
        let procs = [ProcessMemory {
            pid: 5,
            name: "rand".into(),
            rss_kb: 600 * 1024,
            anonymous_kb: 512 * 1024,
            anon_huge_pages_kb: 0,
        }];
        let hot = HotSpots {
            kinds: vec![KindShare {
                kind: SiteKind::MemoryLoad,
                samples: 700,
                share: 0.7,
            }],
            sites: vec![site(SiteKind::MemoryLoad, 0.7, &[(5, 700)])],
            ..HotSpots::default()
        };
        let m = machine();
        let f = findings(&ctx(&hot, &m, &procs));
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].id, "small_pages");
        assert!(f[0].explanation.contains("131,072 4 KiB pages"));
        // Same memory on huge pages: no finding.
        let mut huge = procs.clone();
        huge[0].anon_huge_pages_kb = 500 * 1024;
        assert!(findings(&ctx(&hot, &m, &huge)).is_empty());
    }
}
