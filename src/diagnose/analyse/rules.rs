//! Findings: rules that turn the evidence (hot sites, kernel signals, memory, counters) into
//! what a reader should act on, each with a level, the evidence, what it costs in this
//! machine's own figures, and what to do. The rules decide and fill facts; every sentence is
//! written by `words::findings`.
//!
//! Share thresholds are cpudoctor's: at 5% of samples a site is where a profile reader looks
//! (notice); at 25% a quarter of the workload's CPU time goes there (hazard). The costs a
//! finding quotes are this machine's ([`MachineCosts`]: a saved `check` the user gave, else
//! the probe's quick measurement taken after the workload), never another CPU's: a line
//! transfer costs several times more on some parts than on others, so a figure typed in here
//! would be wrong on most machines that read it.

use super::disasm::{LineSplit, Listing, SiteKind};
use super::hotspots::{self, CallerPath, HotFunction, HotSite, HotSpots, short_module};
use super::runtimes::{self, Role, Runtime};
use crate::diagnose::record::counters::{self, CounterValue};
use crate::diagnose::record::events::Signal;
use crate::diagnose::record::memory::ProcessMemory;
use crate::diagnose::record::recording::Jvm;
use crate::diagnose::record::sampler::KernelSampling;
use crate::diagnose::symbolize::jit;
use crate::machine::{Machine, SplitLockTrap};
use crate::schema::Level;
use crate::spin::LegacySpin;
use crate::words::findings::code::{self as words, GenericSpins, PauseMeasured, SpinContext};
use crate::words::findings::costs::{self, CostFrom, SplitLockCost};
use crate::words::findings::counters::CounterWords;
use crate::words::findings::{counters as counter_words, jvm as jvm_words, pages as page_words};
use crate::words::findings::{
    innodb as innodb_words, jvm::ScanFacts, pages::ProcessPages, runtimes as rt_words,
};
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
/// any second-level TLB holds (`reference::STLB_ENTRIES_SKYLAKE` to `STLB_ENTRIES_ZEN4` =
/// 6-12 MiB of reach).
pub const LARGE_ANON_KB: u64 = 64 * 1024;
/// Below this share of anonymous memory on huge pages, the process is on 4 KiB pages.
pub const LOW_HUGE_SHARE: f64 = 0.10;
/// Share of samples on memory loads from which the loads are "hot".
pub const HOT_LOAD_SHARE: f64 = 0.20;
/// Share of the locking threads' wall time asleep in the kernel at a split lock, outside any
/// system call, from which that sleep is the trap's: a look at /proc every 50 ms that finds
/// one real page fault there is far less.
pub const TRAP_SLEEP_SHARE: f64 = 0.01;

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
    /// The source as the words take it.
    fn from(&self) -> CostFrom<'_> {
        match self {
            CostSource::SavedCheck { file } => CostFrom::SavedCheck(file),
            CostSource::MeasuredNow => CostFrom::MeasuredNow,
        }
    }
}

/// Costs of moving and locking cache lines on this machine, for the findings that quote
/// them: from the `c2c` and `split-lock` probes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineCosts {
    /// One-way core-to-core handoff of a line by `lock cmpxchg` (c2c's `c2c_latency_ns`).
    pub line_transfer_ns: Option<f64>,
    /// An aligned locked handoff (split-lock's `aligned_lock_latency_ns`), kept only beside a
    /// split lock's handoff (the same basis).
    pub aligned_lock_ns: Option<f64>,
    /// What one thread pays for a split lock: `split_lock_op_mean_ns`, or
    /// `split_lock_trapped_ns` where the kernel traps them; in files from before per-op
    /// timing, the handoff `split_lock_latency_ns`.
    pub split_lock_ns: Option<f64>,
    /// What the split-lock probe measured a split lock to be (bus lock, trapped by the kernel
    /// or the host), so the finding's words about the kernel follow the measurement; absent
    /// in files from before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_lock_mechanism: Option<crate::schema::split_lock::SplitLockMechanism>,
    /// Where they came from (`from`: `saved_check` with its `file`, or `measured_now`).
    #[serde(flatten)]
    pub source: CostSource,
}

impl MachineCosts {
    /// What the split-lock probe measured on `machine`: the mechanism it recorded, or for
    /// costs saved before it was kept, the one its figure shows
    /// (`schema::split_lock::classify` of the mean, as the hazard judges such files).
    pub fn split_lock_seen(
        &self,
        machine: &Machine,
    ) -> Option<crate::schema::probes::split_lock::SplitLockSeen> {
        use crate::schema::probes::split_lock::SplitLockSeen;
        let cost_ns = self.split_lock_ns;
        let mechanism = match self.split_lock_mechanism {
            Some(m) => m,
            None => SplitLockSeen::classified(Some(cost_ns?), machine, false)?.0,
        };
        Some(crate::schema::probes::split_lock::SplitLockSeen {
            mechanism,
            shape: None,
            cost_ns,
        })
    }
}

/// One finding.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// Stable id: `pause_spin`, `innodb_spin`, `runtime_lock_spin`, `spin_without_pause`,
    /// `locked_rmw`, `split_lock`,
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
    /// Share of all samples. For a `split_lock`, its whole cost: the samples at the
    /// instruction and those in the kernel's trap handler the lock entered
    /// ([`SplitLockShares`]).
    pub sample_share: Option<f64>,
    /// Share of the wall time of the threads concerned, for a finding of the wall-clock view
    /// (a lock slept on, a wait for a CPU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_share: Option<f64>,
    /// The code, `hot` on the hot instruction.
    pub disassembly: Listing,
    /// The evidence, one fact per line.
    pub evidence: Vec<String>,
    /// What it costs, in this machine's figures.
    pub explanation: String,
    /// What to do.
    pub advice: String,
    /// The runtime or server whose code the finding is about, when one is known: a diff
    /// pairs a runtime's findings by it, whichever of its functions leads.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<Runtime>,
    /// For a `split_lock` finding, where its samples are: at the instruction and in the
    /// kernel's trap handler; absent for other findings and in files written before it was
    /// recorded (their `sample_share` is the instruction's alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split_lock: Option<SplitLockShares>,
}

/// A split lock's cost in samples: at the locked instruction (the bus lock, and whatever the
/// hardware or a host does there) and in this kernel's trap handler, which the lock entered
/// where the kernel detects split locks. The trap's part is the kernel's penalty, not the bus
/// lock's. On the Emerald Rapids guest whose kernel traps bus locks: 38% at the instruction,
/// 62% in `exc_debug_user`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SplitLockShares {
    /// Share of all samples at the split-locked instruction (its hot site).
    pub instruction_share: f64,
    /// Share of all samples in the kernel's trap path
    /// ([`super::kernel::SPLIT_LOCK_TRAP_PATH`]) entered from the site's function; 0 when
    /// none was sampled (plain bus locks) or kernel code was not sampled.
    pub trap_share: f64,
    /// Those kernel samples.
    pub trap_samples: u64,
    /// The trap they were in; absent when none was sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trap: Option<SplitLockTrap>,
    /// Time the locking threads slept in the kernel at the site's function outside any
    /// system call, where the kernel traps split locks or slows their lockers: the trap's
    /// sleep, which is off the CPU and so in no sample (from the wall-clock view; absent
    /// without it or below [`TRAP_SLEEP_SHARE`] of their wall time).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub asleep: Option<super::waits::AsleepAt>,
}

impl SplitLockShares {
    /// The instruction's share and the trap's together: what the split lock costs in samples.
    pub fn total_share(&self) -> f64 {
        self.instruction_share + self.trap_share
    }
}

/// What the rules read.
pub struct Context<'a> {
    /// Hot code.
    pub hot: &'a HotSpots,
    /// Memory per process.
    pub processes: &'a [ProcessMemory],
    /// Host facts.
    pub machine: &'a Machine,
    /// PAUSE measured now, when a spin (on PAUSE or without it) was found.
    pub pause: Option<PauseCost>,
    /// Hardware counters (empty without a PMU).
    pub counters: &'a [CounterValue],
    /// Sampling frequency, to turn samples into CPU time.
    pub frequency_hz: u64,
    /// HotSpot JVMs followed (process id -> home and version).
    pub jvms: &'a BTreeMap<u32, Jvm>,
    /// Line-transfer and lock costs of this machine, when measured or given.
    pub costs: Option<&'a MachineCosts>,
    /// Where the threads' wall time went, when recorded.
    pub wall: Option<&'a super::wall::WallReport>,
    /// Whether kernel code was sampled: without it a kernel's trap is in no sample.
    pub kernel: &'a KernelSampling,
}

/// What a core-to-core line transfer costs here, as a finding says it.
fn line_transfer_text(ctx: &Context) -> String {
    costs::line_transfer(
        ctx.costs
            .and_then(|c| Some((c.line_transfer_ns?, c.source.from()))),
    )
}

/// What a split lock costs here against an aligned one, or where to measure it.
fn split_lock_text(ctx: &Context) -> String {
    costs::split_lock(ctx.costs.and_then(|c| {
        Some(SplitLockCost {
            split_ns: c.split_lock_ns?,
            aligned_ns: c.aligned_lock_ns,
            from: c.source.from(),
        })
    }))
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

/// CPU time of `samples` timer samples, in ns.
fn cpu_ns(samples: u64, ctx: &Context) -> f64 {
    samples as f64 / ctx.frequency_hz.max(1) as f64 * 1e9
}

fn site_evidence(site: &HotSite, ctx: &Context) -> Vec<String> {
    let mut v = vec![words::site(&words::SiteFacts {
        share: site.share,
        samples: site.samples,
        cpu_ns: cpu_ns(site.samples, ctx),
        symbol: &site.symbol,
        offset: site.offset,
        module: short_module(&site.module),
        instruction: &site.instruction,
    })];
    if let Some(line) = &site.source_line {
        v.push(words::source(line));
    }
    for t in site.threads.iter().take(4) {
        let busy = ctx
            .hot
            .threads
            .iter()
            .find(|r| r.figures.tid == t.tid)
            .filter(|r| r.figures.wall_s > 0.0)
            .map(|r| r.figures.cpu_per_wall);
        v.push(words::thread(t.tid, &t.name, t.share_of_thread, busy));
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
        .map(|p| words::caller(&p.frames, p.share))
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
    let spin = ctx.pause.zip(rt.policy()).and_then(|(p, policy)| {
        let c = rt.spin_cost(p.ns, ctx.machine.logical_cpus as u64)?;
        Some((p, policy, c))
    });
    rt_words::spin_cost(
        spin.as_ref()
            .map(|(p, policy, c)| rt_words::RuntimeSpin {
                runtime: rt.name(),
                primitive: policy.primitive,
                pauses: c.pauses,
                then: &c.then,
                spin_ns: c.spin_ns,
                pause_ns: p.ns,
                source: &c.source,
            })
            .as_ref(),
    )
}

fn lock_evidence(l: &runtimes::LockInStack) -> String {
    words::runtime_lock(
        l.runtime.name(),
        l.runtime.lock(),
        l.enter.as_deref(),
        l.waiter.as_deref(),
    )
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
        wall_share: None,
        split_lock: None,
        disassembly: site.disassembly.clone(),
        evidence: site_evidence(site, ctx),
        explanation: String::new(),
        advice: String::new(),
        runtime: None,
    }
}

fn pause_spin(site: &HotSite, level: Level, ctx: &Context) -> Finding {
    let paths = callers(ctx, &site.symbol, &site.module);
    let lock = runtime_lock(&site.symbol, &paths);
    let title = words::pause_spin_title(
        &site.symbol,
        lock.as_ref().map(|l| (l.runtime.name(), l.runtime.lock())),
    );
    let mut f = code_finding("pause_spin", level, title, site, ctx);
    f.evidence.extend(caller_evidence(&paths));
    let measured = ctx.pause.map(|p| PauseMeasured {
        ns: p.ns,
        cycles: p.cycles,
        pauses_sampled: (cpu_ns(site.samples, ctx) / p.ns) as u64,
    });
    let spin = match &lock {
        Some(l) => SpinContext::Runtime(runtime_spin_cost(l.runtime, ctx)),
        None => SpinContext::Generic(GenericSpins {
            glibc: ctx
                .pause
                .and_then(|p| Runtime::Glibc.spin_cost(p.ns, ctx.machine.logical_cpus as u64))
                .map_or((0, 0.0), |c| (c.pauses as u64, c.spin_ns)),
            cores: ctx.machine.logical_cpus,
            // .NET's figure only for a process that runs .NET: its runtime library sampled.
            dotnet_legacy_ns: ctx
                .pause
                .filter(|_| {
                    ctx.hot
                        .functions
                        .iter()
                        .any(|f| short_module(&f.module).starts_with("libcoreclr"))
                })
                .map(|p| LegacySpin::new(ctx.machine.logical_cpus as u64).total_ns(p.ns)),
        }),
    };
    f.explanation = words::pause_spin_explanation(measured, &spin);
    f.advice = words::pause_spin_advice().into();
    if let Some(l) = lock {
        f.evidence.push(lock_evidence(&l));
        let tids: Vec<u32> = site.threads.iter().map(|t| t.tid).collect();
        f.evidence.extend(
            ctx.wall
                .and_then(|w| super::waits::spin_beside_sleep(w, l.runtime, &tids)),
        );
        f.advice = l.runtime.remedy().into();
        f.runtime = Some(l.runtime);
    }
    f
}

/// InnoDB's spin: its PAUSE sites (recognised from the code, or by name) as one finding, for
/// they are one mechanism sized by the same knobs; with the knobs this process runs with,
/// what a round costs at this CPU's PAUSE, and the knob to try. `sites` hottest first.
fn innodb_spin(
    sites: &[&HotSite],
    shape: super::innodb::SpinShape,
    ctx: &Context,
) -> Option<Finding> {
    use super::innodb::{Knob, SpinShape};
    let spin = |s: &&HotSite| s.innodb.clone();
    let sites: Vec<&HotSite> = sites
        .iter()
        .copied()
        .filter(|s| s.innodb.as_ref().is_some_and(|i| i.shape == shape))
        .collect();
    let share: f64 = sites.iter().map(|s| s.share).sum();
    let level = level_for_share(share)?;
    let top = *sites.first()?;
    let top_spin = spin(&top)?;
    // The lock spin reads all the knobs; the back-off only the multiplier.
    let lock = sites
        .iter()
        .filter_map(spin)
        .find(|s| s.shape == SpinShape::LockSpin);
    let knobs = lock.as_ref().unwrap_or(&top_spin).knobs.clone();
    let knob = |k: Knob| knobs.iter().find(|v| v.knob == k);
    let server = top_spin.server;
    let mut functions: Vec<(&str, f64, SpinShape)> = Vec::new();
    for s in &sites {
        let shape = s.innodb.as_ref().map_or(SpinShape::LockSpin, |i| i.shape);
        match functions.iter_mut().find(|(f, _, _)| *f == s.symbol) {
            Some((_, share, _)) => *share += s.share,
            None => functions.push((&s.symbol, s.share, shape)),
        }
    }
    let by_code = match &top_spin.recognised {
        super::innodb::Recognised::Code { instruction, .. } => {
            Some((top.symbol.as_str(), instruction.as_str()))
        }
        super::innodb::Recognised::Name => None,
    };
    let mut evidence = vec![
        innodb_words::share(share, &functions),
        innodb_words::recognised(server, by_code),
        innodb_words::knobs(&knobs),
    ];
    evidence.extend(site_evidence(top, ctx));
    evidence.extend(caller_evidence(&callers(ctx, &top.symbol, &top.module)));
    let pause_ns = ctx.pause.map(|p| p.ns);
    let cost = lock.as_ref().zip(pause_ns).and_then(|(l, ns)| {
        Some(crate::spin::innodb::spin_cost(
            l.pauses_per_round()?,
            l.value(Knob::SyncSpinLoops),
            ns,
        ))
    });
    let backoff_ns = sites
        .iter()
        .filter_map(spin)
        .find(|s| s.shape == SpinShape::Backoff)
        .and_then(|s| s.pauses_per_round())
        .zip(pause_ns)
        .map(|(n, ns)| n as f64 * ns);
    let lock_spin = shape == SpinShape::LockSpin;
    Some(Finding {
        id: if lock_spin {
            "innodb_spin"
        } else {
            "innodb_backoff"
        }
        .into(),
        level,
        title: if lock_spin {
            innodb_words::title(server, knob(Knob::SpinWaitDelay))
        } else {
            innodb_words::backoff_title(server)
        },
        symbol: Some(top.symbol.clone()),
        module: Some(top.module.clone()),
        offset: Some(top.offset),
        sample_share: Some(share),
        wall_share: None,
        split_lock: None,
        disassembly: top.disassembly.clone(),
        evidence,
        explanation: innodb_words::explanation(server, &knobs, cost, backoff_ns, pause_ns),
        advice: if lock_spin {
            innodb_words::advice(server, knob(Knob::SpinWaitDelay), knob(Knob::SyncSpinLoops))
        } else {
            innodb_words::BACKOFF_ADVICE.into()
        },
        runtime: Some(Runtime::InnoDb),
    })
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
        let shares: Vec<(&str, f64)> = funcs.iter().map(|f| (f.symbol.as_str(), f.share)).collect();
        let mut evidence = vec![rt_words::lock_code_share(rt.name(), share, &shares)];
        evidence.extend(caller_evidence(&paths));
        if let Some(l) = &lock {
            evidence.push(lock_evidence(l));
        }
        let tids: Vec<u32> = funcs
            .iter()
            .flat_map(|f| f.threads.iter().map(|t| t.tid))
            .collect::<std::collections::BTreeSet<u32>>()
            .into_iter()
            .collect();
        evidence.extend(
            ctx.wall
                .and_then(|w| super::waits::spin_beside_sleep(w, rt, &tids)),
        );
        let waiter = lock.as_ref().and_then(|l| l.waiter.as_deref());
        out.push(Finding {
            id: "runtime_lock_spin".into(),
            level,
            title: rt_words::lock_spin_title(rt.name(), rt.lock(), waiter),
            symbol: Some(top.symbol.clone()),
            module: Some(top.module.clone()),
            offset: None,
            sample_share: Some(share),
            wall_share: None,
            split_lock: None,
            disassembly: ctx
                .hot
                .sites
                .iter()
                .find(|s| s.symbol == top.symbol)
                .map(|s| s.disassembly.clone())
                .unwrap_or_default(),
            evidence,
            explanation: rt_words::lock_spin_explanation(&runtime_spin_cost(rt, ctx)),
            advice: rt.remedy().into(),
            runtime: Some(rt),
        });
    }
    out
}

/// JDK-8180450 was fixed in JDK 23 (the one-element secondary-super cache replaced by a
/// hashed table of secondary supers, JDK-8180450 / JDK-8331658).
pub const SECONDARY_SUPERS_FIXED_IN: u32 = 23;

/// The methods of a JVM's secondary-supers scan, with their share of samples and the threads
/// that contend in them.
struct ScanInMethods<'a> {
    /// Methods (JIT or stubs) with a hot `repne scas`, hottest site first.
    methods: Vec<&'a str>,
    /// The scan site.
    scan: &'a HotSite,
    /// Share of all samples in those methods.
    share: f64,
    /// Threads with at least [`CONTENDING_THREAD_SHARE`] of the methods' samples:
    /// tid -> (name, samples).
    threads: Vec<(u32, String, u64)>,
}

/// Finds the secondary-supers scan: functions (JIT methods or stubs) with a hot `repne scas`,
/// in anonymous memory or a stub named for subtype checks; shares and threads over the whole
/// functions, since a thread whose samples spread over many instructions of the method (none
/// of them a hot site) contends there all the same.
fn secondary_supers_scan<'a>(ctx: &Context<'a>) -> Option<ScanInMethods<'a>> {
    let hot: &'a HotSpots = ctx.hot;
    let methods: Vec<&'a str> = hot
        .sites
        .iter()
        .filter(|s| s.instruction.starts_with("repne scas"))
        .filter(|s| {
            !s.module.starts_with('/') || s.module.starts_with("//") || s.symbol.contains("subtype")
        })
        .map(|s| s.symbol.as_str())
        .collect();
    methods.first()?;
    let sites: Vec<&'a HotSite> = hot
        .sites
        .iter()
        .filter(|s| methods.contains(&s.symbol.as_str()))
        .collect();
    let funcs: Vec<&'a HotFunction> = hot
        .functions
        .iter()
        .filter(|f| methods.contains(&f.symbol.as_str()))
        .collect();
    let share: f64 = if funcs.is_empty() {
        sites.iter().map(|s| s.share).sum()
    } else {
        funcs.iter().map(|f| f.share).sum()
    };
    let thread_lists = if funcs.iter().any(|f| !f.threads.is_empty()) {
        funcs.iter().map(|f| &f.threads).collect::<Vec<_>>()
    } else {
        sites.iter().map(|s| &s.threads).collect()
    };
    let mut per_thread: BTreeMap<u32, (String, u64)> = BTreeMap::new();
    let mut samples = 0;
    for t in thread_lists.into_iter().flatten() {
        samples += t.samples;
        let e = per_thread.entry(t.tid).or_insert((t.name.clone(), 0));
        e.1 += t.samples;
    }
    let threads = per_thread
        .into_iter()
        .filter(|(_, (_, n))| *n as f64 >= CONTENDING_THREAD_SHARE * samples as f64)
        .map(|(tid, (name, n))| (tid, name, n))
        .collect();
    let scan = sites
        .iter()
        .find(|s| s.instruction.starts_with("repne scas"))
        .expect("a scan site");
    Some(ScanInMethods {
        methods,
        scan,
        share,
        threads,
    })
}

/// The Netflix JVM case: HotSpot's linear scan of a class's secondary supers (`repne scas`,
/// in JIT code or the subtype-check stub) hot in more than one thread, each failed lookup
/// writing the class's single-element `_secondary_super_cache`.
fn secondary_supers(ctx: &Context) -> Option<Finding> {
    let (pid, jvm) = ctx.jvms.iter().next()?;
    let feature = jvm.version.as_deref().and_then(jit::feature_release);
    if feature.is_some_and(|f| f >= SECONDARY_SUPERS_FIXED_IN) {
        return None;
    }
    let found = secondary_supers_scan(ctx)?;
    let level = level_for_share(found.share)?;
    if found.threads.len() < 2 {
        return None;
    }
    let (first, scan) = (found.methods[0], found.scan);
    let threads: Vec<(u32, &str, u64)> = found
        .threads
        .iter()
        .map(|(tid, name, n)| (*tid, name.as_str(), *n))
        .collect();
    let mut evidence = vec![
        jvm_words::scan(&ScanFacts {
            share: found.share,
            method: first,
            methods: found.methods.len(),
            instruction: &scan.instruction,
            offset: scan.offset,
        }),
        jvm_words::process(
            *pid,
            jvm.version.as_deref(),
            &jvm.home.display().to_string(),
        ),
        jvm_words::threads(&threads),
    ];
    evidence.extend(caller_evidence(&callers(ctx, first, &scan.module)));
    Some(Finding {
        id: "hotspot_secondary_supers".into(),
        level,
        title: jvm_words::title(first),
        symbol: Some(first.to_string()),
        module: Some(scan.module.clone()),
        offset: Some(scan.offset),
        sample_share: Some(found.share),
        wall_share: None,
        split_lock: None,
        disassembly: scan.disassembly.clone(),
        evidence,
        explanation: jvm_words::explanation(),
        advice: jvm_words::advice(SECONDARY_SUPERS_FIXED_IN),
        runtime: None,
    })
}

/// A spin without PAUSE, inlined or re-reading through calls (then its share holds the samples
/// its calls took in their callees, and the evidence names them).
fn plain_spin(site: &HotSite, level: Level, ctx: &Context) -> Finding {
    let through = site.reads_through.as_ref();
    let title = words::plain_spin_title(
        &site.symbol,
        through.map_or(&[][..], |r| r.functions.as_slice()),
    );
    let mut f = code_finding("spin_without_pause", level, title, site, ctx);
    if let Some(r) = through {
        let all_samples = site.samples as f64 / site.share.max(f64::MIN_POSITIVE);
        let line = words::read_through(&words::ReadThrough {
            functions: &r.functions,
            load: &r.load,
            known_as: r.known_as.as_deref(),
            under_loop: r.samples.map(|n| (n, n as f64 / all_samples.max(1.0))),
            own_share: ctx
                .hot
                .functions
                .iter()
                .filter(|h| r.functions.contains(&h.symbol))
                .map(|h| h.share)
                .sum(),
        });
        f.evidence.insert(1, line);
    }
    f.evidence
        .extend(caller_evidence(&callers(ctx, &site.symbol, &site.module)));
    f.explanation = words::plain_spin_explanation(&words::PlainSpinCost {
        cpu_ns: cpu_ns(site.samples, ctx),
        pause: ctx.pause.map(|p| (p.ns, p.cycles)),
        machine_clears: counters::signal_total(ctx.counters, Signal::MemoryOrderingClears),
    });
    f.advice = words::plain_spin_advice(ctx.pause.map(|p| p.ns));
    f
}

fn locked_rmw(site: &HotSite, level: Level, ctx: &Context) -> Finding {
    let contending = site
        .threads
        .iter()
        .filter(|t| t.samples as f64 >= CONTENDING_THREAD_SHARE * site.samples as f64)
        .count();
    // The watch may prove what the samples cannot: one thread per instruction, but the
    // instructions of several threads on one line (false sharing).
    let shared_line = ctx.hot.line_watch.as_ref().and_then(|w| {
        w.lines.iter().find(|l| {
            l.verdict.is_hazard()
                && l.words
                    .iter()
                    .any(|w| w.accessors.iter().any(|a| a.function == site.symbol))
        })
    });
    let contended = contending >= 2 || shared_line.is_some();
    let title = words::locked_rmw_title(&site.symbol, contended);
    let mut f = code_finding("locked_rmw", level, title, site, ctx);
    if contending >= 2 {
        f.evidence.push(words::locked_rmw_contention(contending));
    }
    if let Some(line) = shared_line {
        f.evidence.push(words::locked_rmw_line_shared(line.verdict));
    }
    if let Some(split) = site.line_split.as_ref().filter(|s| !s.certain()) {
        f.evidence.push(words::possible_split_lock(&split.words()));
    }
    f.explanation = words::locked_rmw_explanation(&line_transfer_text(ctx), contended);
    f.advice = words::locked_rmw_advice().into();
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

fn split_lock(site: &HotSite, split: &LineSplit, ctx: &Context) -> Finding {
    let title = words::split_lock_title(&site.symbol);
    let mut f = code_finding("split_lock", Level::Hazard, title, site, ctx);
    f.evidence.push(split.words());
    if let Some(bus) = counters::signal_total(ctx.counters, Signal::BusLocks) {
        f.evidence.push(words::bus_lock_count(bus));
    }
    let shares = split_lock_shares(site, ctx);
    let cost = words::SplitLockShareFacts {
        symbol: &site.symbol,
        instruction_share: shares.instruction_share,
        trap: shares.trap.map(|trap| words::TrapFacts {
            trap,
            share: shares.trap_share,
            samples: shares.trap_samples,
            cpu_ns: cpu_ns(shares.trap_samples, ctx),
        }),
        asleep: shares.asleep.map(|a| (a.s, a.wall_share)),
    };
    if let Some(t) = &cost.trap {
        f.evidence.push(words::split_lock_trapped(&cost, t));
    }
    if let Some((s, share)) = cost.asleep {
        f.evidence
            .push(words::split_lock_asleep(&site.symbol, s, share));
    }
    match ctx.kernel {
        KernelSampling::Sampled => {}
        KernelSampling::Off => f.evidence.push(words::split_lock_trap_unseen(None, true)),
        KernelSampling::Refused { paranoid, .. } => f
            .evidence
            .push(words::split_lock_trap_unseen(*paranoid, false)),
    }
    let seen = ctx.costs.and_then(|c| c.split_lock_seen(ctx.machine));
    f.explanation = words::split_lock_explanation(
        &split_lock_text(ctx),
        &crate::words::machine::split_lock_summary(&ctx.machine.split_lock, seen.as_ref()),
        &cost,
        seen.is_some_and(|s| s.mechanism.trapped()),
    );
    f.advice = words::split_lock_advice(cost.penalised());
    f.sample_share = Some(shares.total_share());
    f.split_lock = Some(shares);
    f
}

/// Where a split lock's samples are: at its site, and in the kernel's trap that threads
/// entered from its function; with the time its threads slept in the kernel there, where
/// the kernel traps split locks (its samples show the trap) or says it slows their lockers.
fn split_lock_shares(site: &HotSite, ctx: &Context) -> SplitLockShares {
    // The site's share over its samples is one sample's share of all.
    let per_sample = site.share / site.samples.max(1) as f64;
    let trap = super::kernel::split_lock_trap(&ctx.hot.stacks, &site.symbol, &site.module);
    let trap_samples = trap.map_or(0, |t| t.samples);
    let kernel_acts = trap.is_some() || ctx.machine.split_lock.effective.penalises();
    let tids: Vec<u32> = site.threads.iter().map(|t| t.tid).collect();
    let asleep = ctx
        .wall
        .filter(|_| kernel_acts)
        .and_then(|w| super::waits::asleep_in_kernel_at(w, &site.symbol, &site.module, &tids))
        .filter(|a| a.wall_share >= TRAP_SLEEP_SHARE);
    SplitLockShares {
        instruction_share: site.share,
        trap_share: trap_samples as f64 * per_sample,
        trap_samples,
        trap: trap.map(|t| t.trap),
        asleep,
    }
}

/// Counted instructions, when the PMU counted them.
fn instructions(ctx: &Context) -> Option<f64> {
    ctx.counters
        .iter()
        .find(|v| v.name == "instructions")
        .map(|v| v.value)
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
    let walks_per_k = counters::signal_total(ctx.counters, Signal::DtlbWalks)
        .zip(instructions(ctx))
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
        page_words::process(&ProcessPages {
            pid: proc_.pid,
            name: &proc_.name,
            anonymous_kib: proc_.anonymous_kb,
            huge_kib: proc_.anon_huge_pages_kb,
            rss_kib: proc_.rss_kb,
        }),
        page_words::thp(thp),
        page_words::load_share(load_share),
        page_words::tlb_walks(walks_per_k),
    ];
    if let Some(s) = site {
        evidence.extend(site_evidence(s, ctx));
    }
    Some(Finding {
        id: "small_pages".into(),
        level,
        title: page_words::title(proc_.anonymous_kb),
        symbol: site.map(|s| s.symbol.clone()),
        module: site.map(|s| s.module.clone()),
        offset: site.map(|s| s.offset),
        sample_share: Some(load_share),
        wall_share: None,
        split_lock: None,
        disassembly: site.map(|s| s.disassembly.clone()).unwrap_or_default(),
        evidence,
        explanation: page_words::explanation(proc_.anonymous_kb, proc_.anonymous_kb / 4),
        advice: page_words::advice(thp).into(),
        runtime: None,
    })
}

/// A finding from counters alone: no code, one evidence line.
fn counter_finding(id: &str, level: Level, w: CounterWords) -> Finding {
    Finding {
        id: id.into(),
        level,
        title: w.title,
        symbol: None,
        module: None,
        offset: None,
        sample_share: None,
        wall_share: None,
        split_lock: None,
        disassembly: Listing::default(),
        evidence: vec![w.evidence],
        explanation: w.explanation,
        advice: w.advice,
        runtime: None,
    }
}

fn counter_findings(ctx: &Context) -> Vec<Finding> {
    let mut out = Vec::new();
    let instructions = instructions(ctx).filter(|i| *i > 0.0);
    if let Some(cpi) = counters::cpi(ctx.counters)
        && cpi >= 2.0
    {
        let w = counter_words::high_cpi(cpi);
        out.push(counter_finding("high_cpi", Level::Notice, w));
    }
    let per_k = |s: Signal| {
        counters::signal_total(ctx.counters, s)
            .zip(instructions)
            .map(|(v, i)| (v, 1000.0 * v / i))
    };
    if let Some((n, k)) = per_k(Signal::MemoryOrderingClears)
        && k >= 0.5
    {
        let w = counter_words::memory_ordering_clears(n, k);
        out.push(counter_finding("memory_ordering_clears", Level::Notice, w));
    }
    if let Some((n, k)) = per_k(Signal::CrossCoreHitm)
        && k >= 1.0
    {
        let w = counter_words::cross_core_hitm(n, k, &line_transfer_text(ctx));
        out.push(counter_finding("cross_core_hitm", Level::Notice, w));
    }
    if let Some(n) = counters::signal_total(ctx.counters, Signal::BusLocks)
        && n >= 1.0
    {
        out.push(counter_finding(
            "bus_locks",
            Level::Hazard,
            counter_words::bus_locks(n),
        ));
    }
    out
}

/// The sites to judge, with how many copies of the code each joins: a JIT compiles the same
/// function once per isolate or process (two Node workers, two JVMs), at different addresses
/// but with the same name and offset; their samples and threads add up, so a finding says
/// what that code costs in all. (The same address twice is one loop with two back edges:
/// left as it is, one finding.)
fn joined_copies(sites: &[HotSite]) -> Vec<(HotSite, usize)> {
    let mut out: Vec<(HotSite, usize)> = Vec::new();
    for s in sites {
        let copy_of = out.iter_mut().find(|(o, _)| {
            (&o.kind, &o.symbol, &o.module, o.offset) == (&s.kind, &s.symbol, &s.module, s.offset)
                && o.address != s.address
        });
        let Some((o, copies)) = copy_of else {
            out.push((s.clone(), 1));
            continue;
        };
        o.samples += s.samples;
        o.share += s.share;
        o.threads.extend(s.threads.iter().cloned());
        o.threads.sort_by_key(|t| std::cmp::Reverse(t.samples));
        if let (Some(a), Some(b)) = (&mut o.reads_through, &s.reads_through) {
            a.samples = a.samples.zip(b.samples).map(|(x, y)| x + y);
        }
        *copies += 1;
    }
    out
}

/// Every finding, most severe first, then by share.
pub fn findings(ctx: &Context) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    // InnoDB's spin sites make one finding together, whatever each one's share.
    let innodb: Vec<&HotSite> = ctx
        .hot
        .sites
        .iter()
        .filter(|s| s.kind == SiteKind::PauseSpin && s.innodb.is_some())
        .collect();
    // The lock waits (sized by innodb_spin_wait_delay) and the back-off (by nothing one can
    // set) are two findings: the knob's advice is for the first only.
    for shape in [
        super::innodb::SpinShape::LockSpin,
        super::innodb::SpinShape::Backoff,
    ] {
        out.extend(innodb_spin(&innodb, shape, ctx));
    }
    for (site, copies) in &joined_copies(&ctx.hot.sites) {
        let Some(level) = level_for_share(site.share) else {
            continue;
        };
        if site.kind == SiteKind::PauseSpin && site.innodb.is_some() {
            continue;
        }
        let first_new = out.len();
        match site.kind {
            SiteKind::PauseSpin => out.push(pause_spin(site, level, ctx)),
            // A runtime's own lock code (HotSpot's TrySpin re-reads the owner through
            // SafeFetchN and PAUSEs once in 256 rounds) is runtime_lock_spin's, with that
            // runtime's remedy: its users cannot put a PAUSE in it.
            SiteKind::SpinWithoutPause if runtimes::classify(&site.symbol).is_some() => {}
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
                let split = site.line_split.as_ref().filter(|s| s.certain());
                if let Some(split) = split {
                    out.push(split_lock(site, split, ctx));
                }
                if split.is_none() || contended {
                    out.push(locked_rmw(site, level, ctx));
                }
            }
            SiteKind::MemoryLoad | SiteKind::Compute => {}
        }
        if *copies > 1 {
            for f in &mut out[first_new..] {
                f.evidence.insert(1, words::code_copies(*copies));
            }
        }
    }
    // One loop can give two sites with the same hot instruction (two back edges): one
    // finding each.
    let mut seen = std::collections::HashSet::new();
    out.retain(|f| seen.insert((f.id.clone(), f.symbol.clone(), f.module.clone(), f.offset)));
    let covered: Vec<String> = out
        .iter()
        .filter_map(|f| f.symbol.clone())
        .chain(innodb.iter().map(|s| s.symbol.clone()))
        .collect();
    out.extend(runtime_lock_spins(ctx, &covered));
    out.extend(secondary_supers(ctx));
    out.extend(small_pages(ctx));
    out.extend(counter_findings(ctx));
    if let Some(w) = ctx.wall {
        out.extend(super::waits::findings(w, ctx.hot, ctx.machine.logical_cpus));
    }
    // Most severe first, then the largest share (of samples, or of wall time for a finding
    // of the wall-clock view).
    let share = |f: &Finding| f.sample_share.or(f.wall_share).unwrap_or(0.0);
    out.sort_by(|a, b| b.level.cmp(&a.level).then(share(b).total_cmp(&share(a))));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::analyse::hotspots::{KindShare, ReadsThrough, SiteThread};

    /// A fixed machine, never the live one: the split-lock and THP sentences would follow
    /// the host the tests run on (regression: the snapshot changed on a kernel that traps
    /// bus locks).
    fn machine() -> Machine {
        let mut m = crate::schema::test_support::test_machine();
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
            disassembly: Listing(vec!["=> 0x1189: f3 90 pause".parse().unwrap()]),
            source_line: None,
            line_split: None,
            reads_through: None,
            innodb: None,
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
            wall: None,
            kernel: &KernelSampling::Sampled,
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
        // 600 samples at 1 kHz = 0.6 s = ~13.95 M PAUSEs at 43 ns; 1,000 PAUSEs = 43 us.
        assert!(f[0].explanation.contains("43.0 ns"), "{}", f[0].explanation);
        assert!(f[0].explanation.contains("13,953,488 PAUSEs"));
        assert!(f[0].explanation.contains("43.0 us"));
        // Issue 30: no runtime the process does not run is quoted (a MariaDB was told of
        // .NET's legacy spin).
        assert!(!f[0].explanation.contains(".NET"), "{}", f[0].explanation);
        // A .NET process: the seed's legacy spin on 24 cores at 43 ns = 211.6 ms.
        let mut hot = hot;
        hot.functions.push(HotFunction {
            symbol: "AwareLock::Contention".into(),
            module: "/usr/share/dotnet/shared/Microsoft.NETCore.App/2.0.9/libcoreclr.so".into(),
            samples: 1,
            share: 0.001,
            callers: Vec::new(),
            threads: Vec::new(),
        });
        let f = findings(&ctx(&hot, &m, &[]));
        assert!(
            f[0].explanation.contains("211.6 ms"),
            "{}",
            f[0].explanation
        );
    }

    /// The MariaDB InnoDB spin case: the stripped server's three lock-wait sites (each under
    /// the notice bar on its own in some runs) make one InnoDB finding that names the knob
    /// with its value and costs the round at this PAUSE; the commit's back-off is a second
    /// finding, without the knob's advice.
    #[test]
    fn the_mariadb_innodb_spin_case_is_one_finding_with_its_knob_and_the_backoff_another() {
        use crate::diagnose::analyse::innodb::{InnodbSpin, Knob, KnobValue, Recognised, Server};
        use crate::diagnose::analyse::innodb::{SpinShape, ValueFrom};
        let kv = |knob, value| KnobValue {
            knob,
            value: Some(value),
            from: ValueFrom::ProcessMemory,
        };
        let lock = InnodbSpin {
            server: Server::MariaDb,
            shape: SpinShape::LockSpin,
            recognised: Recognised::Code {
                instruction: "mov r12d,[rax]".into(),
                address: 0xde2adb,
            },
            knobs: vec![
                kv(Knob::CpuRelaxMultiplier, 100),
                kv(Knob::SpinWaitDelay, 4),
                kv(Knob::SyncSpinLoops, 30),
            ],
        };
        let backoff = InnodbSpin {
            shape: SpinShape::Backoff,
            knobs: vec![kv(Knob::CpuRelaxMultiplier, 100)],
            ..lock.clone()
        };
        let at = |symbol: &str, share, spin: &InnodbSpin| HotSite {
            symbol: symbol.into(),
            module: "/usr/sbin/mariadbd".into(),
            innodb: Some(spin.clone()),
            ..site(SiteKind::PauseSpin, share, &[(10, (share * 1000.0) as u64)])
        };
        let hot = HotSpots {
            sites: vec![
                at("mariadbd@0xde2ac0", 0.16, &lock),
                at("mariadbd@0xde2920", 0.04, &lock),
                at("mariadbd@0xde29d0", 0.03, &lock),
                at("mariadbd@0x72a4e0", 0.06, &backoff),
            ],
            ..HotSpots::default()
        };
        let m = machine();
        let f = findings(&ctx(&hot, &m, &[]));
        let ids: Vec<&str> = f.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["innodb_spin", "innodb_backoff"], "{f:#?}");
        let spin = &f[0];
        assert_eq!(spin.runtime, Some(Runtime::InnoDb));
        assert!((spin.sample_share.unwrap() - 0.23).abs() < 1e-9);
        assert!(
            spin.title.contains("innodb_spin_wait_delay = 4"),
            "{}",
            spin.title
        );
        assert!(spin.advice.contains("innodb_spin_wait_delay (now 4)"));
        // 100 / 4 x 4 = 100 PAUSEs a round at 43 ns: 4.3 us; 30 rounds: 129 us.
        assert!(
            spin.explanation.contains("one round lasts 4.3 us"),
            "{}",
            spin.explanation
        );
        assert!(spin.explanation.contains("the whole spin 129.0 us"));
        for f in &f {
            assert!(!f.explanation.contains(".NET") && !f.explanation.contains("glibc"));
        }
        assert!(!f[1].advice.contains("SET GLOBAL"), "{}", f[1].advice);
        assert!(
            f[1].explanation.contains("100 PAUSEs (4.3 us)"),
            "{}",
            f[1].explanation
        );
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

    /// Two Node workers each compile the spin loop: two JIT copies, one finding with both
    /// copies' samples (the dedupe of one loop's two back edges dropped the second worker's).
    #[test]
    fn copies_of_one_jit_function_make_one_finding_with_their_samples_together() {
        let copy = |address, tid| HotSite {
            address,
            module: "//anon".into(),
            ..site(SiteKind::SpinWithoutPause, 0.35, &[(tid, 350)])
        };
        let hot = HotSpots {
            sites: vec![copy(0x7f00_0000_b8b3, 1), copy(0x7f11_0000_b8b3, 2)],
            ..HotSpots::default()
        };
        let m = machine();
        let f = findings(&ctx(&hot, &m, &[]));
        assert_eq!(f.len(), 1, "{f:#?}");
        assert_eq!(f[0].sample_share, Some(0.7));
        assert!(
            f[0].evidence[0].contains("(700 samples"),
            "{:?}",
            f[0].evidence
        );
        assert!(f[0].evidence[1].contains("runs at 2 addresses"));
        assert_eq!(
            f[0].evidence
                .iter()
                .filter(|e| e.starts_with("thread "))
                .count(),
            2
        );
        // One loop's two back edges (one address): one finding, counted once.
        let hot = HotSpots {
            sites: vec![copy(0x7f00_0000_b8b3, 1), copy(0x7f00_0000_b8b3, 1)],
            ..HotSpots::default()
        };
        let f = findings(&ctx(&hot, &m, &[]));
        assert_eq!((f.len(), f[0].sample_share), (1, Some(0.35)));
    }

    #[test]
    fn a_spin_without_pause_in_a_runtimes_lock_code_is_left_to_the_runtime_rule() {
        // HotSpot's TrySpin re-reads the owner through SafeFetchN_impl: a spin through a call,
        // but its remedy is HotSpot's, not a PAUSE its users cannot add.
        let spin = HotSite {
            symbol: "ObjectMonitor::TrySpin(JavaThread*)".into(),
            module: "/lib/libjvm.so".into(),
            ..site(SiteKind::SpinWithoutPause, 0.07, &[(10, 70)])
        };
        let hot = HotSpots {
            sites: vec![spin],
            functions: vec![HotFunction {
                symbol: "ObjectMonitor::TrySpin(JavaThread*)".into(),
                module: "/lib/libjvm.so".into(),
                samples: 70,
                share: 0.07,
                callers: Vec::new(),
                threads: Vec::new(),
            }],
            ..HotSpots::default()
        };
        let m = machine();
        let ids: Vec<String> = findings(&ctx(&hot, &m, &[]))
            .into_iter()
            .map(|f| f.id)
            .collect();
        assert_eq!(ids, ["runtime_lock_spin"]);
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

    /// A locked RMW two threads share, its operand crossing a line.
    fn split_locked_site() -> HotSpots {
        let mut s = site(SiteKind::LockedRmw, 0.8, &[(10, 400), (11, 380)]);
        s.line_split = Some(LineSplit::Crosses {
            operand_bytes: 8,
            address: 0x403c,
            line_offset_bytes: 60,
        });
        HotSpots {
            sites: vec![s],
            ..HotSpots::default()
        }
    }

    #[test]
    fn two_threads_on_one_locked_site_is_contended_and_a_split_adds_a_hazard() {
        let hot = split_locked_site();
        let m = machine();
        let f = findings(&ctx(&hot, &m, &[]));
        let ids: Vec<&str> = f.iter().map(|f| f.id.as_str()).collect();
        assert_eq!(ids, ["split_lock", "locked_rmw"]);
        assert!(f[1].title.starts_with("contended"));
        assert!(f[0].evidence.iter().any(|e| e.contains("0x403c")));
    }

    /// The false-sharing shape of tests/programs/line_sharing.c: each locked instruction has
    /// one thread, so the samples say "uncontended"; the watch saw the line shared and the
    /// finding says so.
    #[test]
    fn a_locked_site_the_watch_saw_on_a_shared_line_is_contended() {
        use crate::schema::line_sharing::{
            Accessor, LineVerdict, LineWatch, WatchOutcome, WatchedLine, WordAccesses,
        };
        let mut hot = HotSpots {
            sites: vec![site(SiteKind::LockedRmw, 0.5, &[(10, 500)])],
            ..HotSpots::default()
        };
        let m = machine();
        let alone = findings(&ctx(&hot, &m, &[]));
        assert!(alone[0].title.starts_with("hot"), "{}", alone[0].title);
        let writer = |tid: u32, function: &str, offset: u64| WordAccesses {
            offset,
            symbol: None,
            handoffs: 0,
            accessors: vec![Accessor {
                tid,
                thread: "t".into(),
                function: function.into(),
                source_line: None,
                instruction: None,
                writes: 500,
                reads: 0,
            }],
        };
        let words = vec![writer(10, "spin_wait_on_flag", 16), writer(11, "other", 24)];
        hot.line_watch = Some(LineWatch {
            outcome: WatchOutcome::Watched,
            pid: Some(1),
            threads: 2,
            spent_ms: 50.0,
            window_s: 1.0,
            hits: 1000,
            hits_per_watchpoint: 500,
            aimed: Vec::new(),
            lines: vec![WatchedLine {
                address: 0x4200,
                region: "/tmp/x/pause_spin".into(),
                verdict: LineVerdict::of(&words),
                words,
                watched_ms: 25.0,
                capped: true,
            }],
            killed_by_trap: false,
        });
        let shared = findings(&ctx(&hot, &m, &[]));
        assert!(
            shared[0].title.starts_with("contended"),
            "{}",
            shared[0].title
        );
        assert!(
            shared[0]
                .evidence
                .iter()
                .any(|e| e.contains("false sharing")),
            "{:?}",
            shared[0].evidence
        );
    }

    /// The split-lock finding of `hot` judged with kernel sampling `kernel`.
    fn split_lock_finding(hot: &HotSpots, m: &Machine, kernel: &KernelSampling) -> Finding {
        let mut c = ctx(hot, m, &[]);
        c.kernel = kernel;
        findings(&c)
            .into_iter()
            .find(|f| f.id == "split_lock")
            .expect("a split_lock finding")
    }

    /// The Emerald Rapids guest whose kernel traps bus locks (issue 38; `kernel.
    /// split_lock_mitigate = 1`, dmesg "#DB: split_lock/30603 took a bus_lock trap"): a split
    /// lock cost ~1 ms, 61.7% of the loop's samples were in the kernel, almost all in
    /// `exc_debug_user` entered from `split_locked_add`, and the finding said 38.3%, the
    /// instruction's part alone. Its saved diagnosis (`diagnose --runs 5 -- split_lock`, in
    /// `tests/fixtures/diagnose/split-lock-emerald-rapids-kvm-trap.json`) judged again: the
    /// trap counts, named as the kernel's penalty.
    #[test]
    fn the_emerald_rapids_guest_whose_kernel_traps_bus_locks_counts_the_trap_as_the_split_locks_cost()
     {
        let d = crate::diagnose::test_fixture("split-lock-emerald-rapids-kvm-trap.json");
        let hot = HotSpots {
            sites: d.hot_sites.clone(),
            functions: d.functions.clone(),
            kinds: d.kinds.clone(),
            threads: d.threads.clone(),
            stacks: d.stacks.clone(),
            ..HotSpots::default()
        };
        let sampling = d.kernel.as_ref().unwrap().sampling.clone();
        assert_eq!(sampling, KernelSampling::Sampled);
        let m = machine();
        let mut c = ctx(&hot, &m, &[]);
        c.kernel = &sampling;
        c.frequency_hz = d.sampling.frequency_hz;
        let f = findings(&c)
            .into_iter()
            .find(|f| f.id == "split_lock")
            .unwrap();
        let shares = f.split_lock.clone().unwrap();
        // 13329 samples at the instruction, 21410 in the #DB path (with what it called and the
        // interrupts taken in it), of 34796.
        assert!(
            (shares.instruction_share - 0.383).abs() < 0.001,
            "{shares:?}"
        );
        assert_eq!(shares.trap_samples, 21410);
        assert!((shares.trap_share - 0.615).abs() < 0.001, "{shares:?}");
        assert_eq!(shares.trap, Some(SplitLockTrap::BusLockDebug));
        let total = f.sample_share.unwrap();
        assert!((total - shares.total_share()).abs() < 1e-12);
        assert!(total > 0.99 && total <= 1.0, "{total}");
        assert!(
            f.evidence.iter().any(|e| e.starts_with(
                "this kernel trapped it: 61.5% of all samples (21,410 samples, ~42.9 s of CPU \
                 time) in its #DB handler (bus-lock detection), entered from split_locked_add; \
                 with the 38.3% at the instruction, the split lock holds 99.8% of all samples"
            )),
            "{:#?}",
            f.evidence
        );
        assert!(
            f.explanation.contains(
                "In this profile, of the 99.8% of all samples this split lock holds, 61.5% are the \
                 kernel's penalty, not the bus lock's, in its #DB handler (bus-lock detection); \
                 38.3% are at the instruction"
            ),
            "{}",
            f.explanation
        );
        assert!(f.advice.starts_with("Align every atomic"), "{}", f.advice);
        assert!(
            f.advice.contains(
                "split_lock_detect=off|warn|fatal|ratelimit:N on the kernel command line"
            ) && f.advice.contains("kernel.split_lock_mitigate"),
            "{}",
            f.advice
        );
        // It is the first finding: the whole cost sorts it.
        assert_eq!(findings(&c)[0].id, "split_lock");
    }

    /// A machine whose split locks are plain bus locks (the AMD Zen 2 guest: no detection):
    /// the kernel samples under the locking function are timer interrupts, no trap, and the
    /// finding is the instruction's alone and says nothing of a trap; with kernel sampling
    /// refused, it says that a trap could not have been seen.
    #[test]
    fn a_bus_locking_machines_split_lock_says_nothing_of_a_trap() {
        use crate::diagnose::symbolize::kallsyms::KERNEL_MODULE;
        use crate::diagnose::symbolize::stack::{StackCount, StackFrame};
        let mut hot = split_locked_site();
        let frame = |f: &str, module: &str| StackFrame {
            address: 1,
            function: Some(f.into()),
            module: module.into(),
            offset: 0,
            file_offset: None,
        };
        hot.stacks = vec![
            StackCount {
                frames: vec![frame("spin_wait_on_flag", "/tmp/x/pause_spin")],
                samples: 780,
            },
            StackCount {
                frames: vec![
                    frame("handle_softirqs", KERNEL_MODULE),
                    frame("asm_sysvec_apic_timer_interrupt", KERNEL_MODULE),
                    frame("spin_wait_on_flag", "/tmp/x/pause_spin"),
                ],
                samples: 9,
            },
        ];
        let m = machine();
        let f = split_lock_finding(&hot, &m, &KernelSampling::Sampled);
        let shares = f.split_lock.clone().unwrap();
        assert_eq!((shares.trap_samples, shares.trap), (0, None));
        assert_eq!(f.sample_share, Some(0.8));
        let said = format!("{:?} {} {}", f.evidence, f.explanation, f.advice);
        for word in [
            "trapped it",
            "trap handler",
            "penalty",
            "split_lock_detect=",
            "not sampled",
        ] {
            assert!(!said.contains(word), "{word}: {said}");
        }
        let refused = KernelSampling::Refused {
            paranoid: Some(2),
            error: "EACCES".into(),
        };
        let f = split_lock_finding(&hot, &m, &refused);
        assert!(
            f.evidence.iter().any(|e| e.starts_with(
                "kernel code was not sampled (the kernel refused it at perf_event_paranoid 2): \
                 where a kernel traps split locks, the time in its trap handler could not be seen"
            )),
            "{:#?}",
            f.evidence
        );
        assert!(!f.explanation.contains("penalty"), "{}", f.explanation);
    }

    /// A kernel that sleeps its split lockers (`kernel.split_lock_mitigate = 1`: the #AC
    /// handler's `msleep_interruptible` in `split_lock_warn`): the wall-clock view shows the
    /// locker asleep in the kernel at the locked instruction, outside any system call; that
    /// time is said as the trap's, though it is in no sample.
    #[test]
    fn a_locker_asleep_in_the_kernels_trap_is_said_as_the_kernels_penalty() {
        use crate::diagnose::analyse::wall::{StateTimes, ThreadNs, ThreadWall, WaitStack};
        use crate::diagnose::analyse::wall::{WallMethod, WallReport};
        use crate::diagnose::record::wall::{BlockReason, OffCpu};
        use crate::diagnose::symbolize::stack::StackFrame;
        use crate::machine::SplitLockMode;
        let mut hot = split_locked_site();
        hot.sites[0].threads.truncate(1);
        let wall = WallReport {
            method: WallMethod::clean_10s(),
            commands: Vec::new(),
            threads: vec![ThreadWall {
                pid: 10,
                tid: 10,
                name: "t".into(),
                command: "split_lock".into(),
                times: StateTimes {
                    wall_s: 10.0,
                    running_s: 2.0,
                    blocked_s: 8.0,
                    ..Default::default()
                },
            }],
            stacks: vec![WaitStack {
                state: OffCpu::Blocked {
                    reason: BlockReason::PageFault,
                },
                frames: vec![StackFrame {
                    address: 0x1189,
                    function: Some("spin_wait_on_flag".into()),
                    module: "/tmp/x/pause_spin".into(),
                    offset: 0x19,
                    file_offset: None,
                }],
                ns: 8_000_000_000,
                threads: vec![ThreadNs {
                    tid: 10,
                    ns: 8_000_000_000,
                }],
                wait: None,
            }],
            cpu: None,
        };
        let mut m = machine();
        m.split_lock.effective = SplitLockMode::WarnSleep;
        let refused = KernelSampling::Refused {
            paranoid: Some(2),
            error: "EACCES".into(),
        };
        let judge = |m: &Machine| {
            let mut c = ctx(&hot, m, &[]);
            c.kernel = &refused;
            c.wall = Some(&wall);
            findings(&c)
                .into_iter()
                .find(|f| f.id == "split_lock")
                .unwrap()
        };
        let f = judge(&m);
        let asleep = f.split_lock.as_ref().unwrap().asleep.unwrap();
        assert_eq!((asleep.s, asleep.wall_share), (8.0, 0.8));
        assert!(
            f.evidence.iter().any(|e| e.starts_with(
                "asleep in the kernel at spin_wait_on_flag outside any system call: 8.0 s (80.0% \
                 of the locking threads' wall time)"
            )),
            "{:#?}",
            f.evidence
        );
        assert!(
            f.explanation
                .contains("slept in the kernel at the instruction for 80.0% of their wall time"),
            "{}",
            f.explanation
        );
        assert!(f.advice.contains("kernel.split_lock_mitigate"));
        // A kernel that neither traps (no trap sampled) nor says it slows lockers: a sleep
        // there is not read as the trap's.
        m.split_lock.effective = SplitLockMode::NotDetected;
        assert_eq!(judge(&m).split_lock.unwrap().asleep, None);
    }

    #[test]
    fn a_split_lock_the_check_measured_trapped_is_not_said_to_stall_every_core_as_is() {
        // Regression, the Emerald Rapids guest whose host traps split locks: its check
        // measured the neighbours unharmed (DRAM 1.0x) and 182.9 us a split lock, trapped,
        // while diagnose's finding said the bus lock stalls memory access on every core.
        use crate::schema::split_lock::SplitLockMechanism;
        let hot = split_locked_site();
        let m = machine();
        let costs = |ns: f64, mechanism| MachineCosts {
            line_transfer_ns: Some(7.6),
            aligned_lock_ns: None,
            split_lock_ns: Some(ns),
            split_lock_mechanism: Some(mechanism),
            source: CostSource::SavedCheck {
                file: "check.json".into(),
            },
        };
        let explanation = |c: &MachineCosts| {
            let mut x = ctx(&hot, &m, &[]);
            x.costs = Some(c);
            findings(&x)
                .into_iter()
                .find(|f| f.id == "split_lock")
                .unwrap()
                .explanation
        };
        let trapped = explanation(&costs(182_900.0, SplitLockMechanism::TrappedByHost));
        assert!(
            trapped.contains(
                "stalls memory access on every core, unless something traps it first, as here"
            ),
            "{trapped}"
        );
        assert!(
            trapped.contains("the host traps them, 182.9 us each"),
            "{trapped}"
        );
        let bus = explanation(&costs(1_200.0, SplitLockMechanism::BusLock));
        assert!(!bus.contains("traps it first"), "{bus}");
    }

    #[test]
    fn line_costs_are_quoted_from_the_check_given_and_never_typed_in() {
        // Guards issue 20's bug: "~22 ns within a Zen 4 CCX" printed on an Intel machine.
        let hot = split_locked_site();
        let m = machine();
        let costs = MachineCosts {
            line_transfer_ns: Some(61.5),
            aligned_lock_ns: Some(58.0),
            split_lock_ns: Some(1234.0),
            split_lock_mechanism: None,
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
        s.line_split = Some(LineSplit::DisplacementCrosses {
            operand_bytes: 8,
            displacement: 0x3c,
            line_offset_bytes: 60,
        });
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

    /// A profile that sets off every code rule: a PAUSE spin (and one in glibc's mutex), a
    /// plain spin, a contended Go lock word, a hot atomic, a split lock, hot loads, HotSpot's
    /// monitor code and a JIT method scanning secondary supers.
    fn every_rule_profile() -> HotSpots {
        use crate::diagnose::symbolize::stack::{StackCount, StackFrame};
        let frame = |f: &str| StackFrame {
            address: 1,
            function: Some(f.into()),
            module: "/tmp/x/pause_spin".into(),
            offset: 0,
            file_offset: None,
        };
        let stack = |leaf: &str, callers: &[&str]| StackCount {
            frames: std::iter::once(frame(leaf))
                .chain(callers.iter().map(|c| frame(c)))
                .collect(),
            samples: 10,
        };
        let named = |kind, share, threads: &[(u32, u64)], symbol: &str| HotSite {
            symbol: symbol.into(),
            ..site(kind, share, threads)
        };
        let mut pause = named(SiteKind::PauseSpin, 0.3, &[(10, 300)], "spin_wait_on_flag");
        pause.source_line = Some("a.c:12".into());
        let glibc = HotSite {
            symbol: "pthread_mutex_lock".into(),
            share: 0.1,
            ..pause.clone()
        };
        let mut go = named(
            SiteKind::LockedRmw,
            0.5,
            &[(10, 250), (11, 250)],
            "sync.(*Mutex).lockSlow",
        );
        go.line_split = Some(LineSplit::DisplacementCrosses {
            operand_bytes: 8,
            displacement: 0x3c,
            line_offset_bytes: 60,
        });
        let mut split = named(SiteKind::LockedRmw, 0.08, &[(10, 80)], "splitter");
        split.line_split = Some(LineSplit::Crosses {
            operand_bytes: 8,
            address: 0x403c,
            line_offset_bytes: 60,
        });
        let method = "void SecondarySupers.lambda$main$0(int, long[])";
        let mut scan = named(SiteKind::Compute, 0.3, &[(1, 150), (2, 150)], method);
        scan.module = "//anon".into();
        scan.instruction = "repne scasq [rdi]".into();
        let monitor = |symbol: &str, share| HotFunction {
            symbol: symbol.into(),
            module: "/lib/libjvm.so".into(),
            samples: 100,
            share,
            callers: Vec::new(),
            threads: Vec::new(),
        };
        HotSpots {
            sites: vec![
                pause,
                glibc,
                named(SiteKind::SpinWithoutPause, 0.06, &[(10, 60)], "plain"),
                HotSite {
                    reads_through: Some(ReadsThrough {
                        functions: vec!["load_turn".into()],
                        load: "mov eax,[4038h]".into(),
                        known_as: None,
                        samples: Some(40),
                    }),
                    ..named(
                        SiteKind::SpinWithoutPause,
                        0.3,
                        &[(12, 200), (13, 100)],
                        "wait_turn",
                    )
                },
                go,
                named(SiteKind::LockedRmw, 0.07, &[(10, 70)], "hotatomic"),
                split,
                named(SiteKind::MemoryLoad, 0.4, &[(5, 400)], "loader"),
                scan,
            ],
            kinds: vec![KindShare {
                kind: SiteKind::MemoryLoad,
                samples: 400,
                share: 0.4,
            }],
            functions: vec![
                monitor("ObjectMonitor::TrySpin", 0.12),
                monitor("ObjectMonitor::EnterI", 0.2),
                HotFunction {
                    module: "/tmp/x/turn_call".into(),
                    ..monitor("load_turn", 0.04)
                },
            ],
            stacks: vec![
                stack("spin_wait_on_flag", &["worker", "start_thread"]),
                stack("pthread_mutex_lock", &["do_work", "main"]),
                stack(
                    "sync.(*Mutex).lockSlow",
                    &["sync.(*Mutex).Lock", "main.inc"],
                ),
                stack("wait_turn", &["player", "start_thread"]),
                // The split lock trapped into the kernel's #DB handler.
                StackCount {
                    frames: ["exc_debug_user", "asm_exc_debug"]
                        .into_iter()
                        .map(|f| StackFrame {
                            module: crate::diagnose::symbolize::kallsyms::KERNEL_MODULE.into(),
                            ..frame(f)
                        })
                        .chain([frame("splitter"), frame("main")])
                        .collect(),
                    samples: 120,
                },
            ],
            ..HotSpots::default()
        }
    }

    /// Counters that set off every counter rule.
    fn every_rule_counters() -> Vec<CounterValue> {
        let cv = |name: &str, signal: Option<Signal>, value: f64| CounterValue {
            name: name.into(),
            signal,
            value,
            running_fraction: 1.0,
        };
        vec![
            cv("cycles", None, 5e9),
            cv("instructions", None, 1e9),
            cv("x", Some(Signal::MemoryOrderingClears), 1e7),
            cv("y", Some(Signal::CrossCoreHitm), 2e7),
            cv("z", Some(Signal::BusLocks), 30.0),
            cv("w", Some(Signal::DtlbWalks), 9e6),
        ]
    }

    /// Every rule's sentences on one made-up profile that sets them all off, four ways (no
    /// costs and no THP figure; a saved check and THP madvise; costs measured now with
    /// counters and THP never; no PAUSE measured, THP always, no call stacks for the spin
    /// through a call, kernel sampling refused): a change to any sentence shows here. Review
    /// with `cargo insta review`.
    #[test]
    fn every_rules_sentences_match_their_snapshot() {
        use crate::machine::{ThpEnabled, ThpMode};
        let hot = every_rule_profile();
        let mut no_stacks = hot.clone();
        for s in &mut no_stacks.sites {
            if let Some(r) = &mut s.reads_through {
                r.samples = None;
            }
        }
        // Kernel sampling refused: no kernel frames.
        no_stacks
            .stacks
            .retain(|s| s.frames.iter().all(|f| !f.module.starts_with('[')));
        let refused = KernelSampling::Refused {
            paranoid: Some(2),
            error: "EACCES".into(),
        };
        let counters = every_rule_counters();
        let saved = MachineCosts {
            line_transfer_ns: Some(61.5),
            aligned_lock_ns: Some(58.0),
            split_lock_ns: Some(1234.0),
            split_lock_mechanism: None,
            source: CostSource::SavedCheck {
                file: "icx.json".into(),
            },
        };
        let measured = MachineCosts {
            aligned_lock_ns: None,
            source: CostSource::MeasuredNow,
            ..saved.clone()
        };
        let procs = [ProcessMemory {
            pid: 5,
            name: "rand".into(),
            rss_kb: 600 * 1024,
            anonymous_kb: 512 * 1024,
            anon_huge_pages_kb: 0,
        }];
        let mut text = String::new();
        for variant in 0..4 {
            let jvms = BTreeMap::from([(
                7,
                Jvm {
                    home: "/usr/lib/jvm/java-17".into(),
                    version: (variant != 1).then(|| "17.0.15".into()),
                    names_from: None,
                },
            )]);
            let mut m = machine();
            m.thp = [None, Some(ThpEnabled::Madvise), Some(ThpEnabled::Never)]
                .get(variant)
                .copied()
                .unwrap_or(Some(ThpEnabled::Always))
                .map(|enabled| ThpMode {
                    enabled,
                    defrag: None,
                });
            let mut c = ctx(if variant == 3 { &no_stacks } else { &hot }, &m, &procs);
            c.jvms = &jvms;
            match variant {
                1 => c.costs = Some(&saved),
                2 => {
                    c.costs = Some(&measured);
                    c.pause = Some(PauseCost {
                        ns: 20.0,
                        cycles: None,
                    });
                }
                3 => {
                    c.pause = None;
                    c.kernel = &refused;
                }
                _ => {}
            }
            if variant >= 2 {
                c.counters = &counters;
            }
            text.push_str(&format!("== variant {variant}\n"));
            for f in findings(&c) {
                text.push_str(&format!("[{:?}] {}: {}\n", f.level, f.id, f.title));
                for e in &f.evidence {
                    text.push_str(&format!("  - {e}\n"));
                }
                text.push_str(&format!("  Cost: {}\n  Do: {}\n", f.explanation, f.advice));
            }
        }
        insta::assert_snapshot!("rules_sentences", text);
    }
}
