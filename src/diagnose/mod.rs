//! `diagnose`: where a running workload spends its time, which hot instructions are
//! spin-waits or contended atomics, and what the kernel and (where there is one) the PMU say,
//! turned into findings in this machine's own figures.
//!
//! The method that needs no PMU comes first, because most cloud VMs expose none: timer
//! samples (`cpu-clock`) give hot addresses; disassembling them shows the instruction before
//! the sample, as the Skylake seed found its `pause` ([`disasm`]). Hardware counters
//! ([`counters`], encodings in [`events`]) add CPI, TLB walks, bus locks, machine clears and
//! HITM where a PMU exists.
//!
//! Flow: [`record`] (with [`sampler`], [`target`], [`threads`], [`memory`]) -> [`hotspots`]
//! (with [`symbols`], [`disasm`]) -> [`rules`] -> [`Diagnosis`], rendered by `render::diagnosis`. A
//! saved diagnosis ([`from_json_bytes`]) is exported by [`export`] (pprof, folded stacks) and
//! flame graphs (`render::flame`), and two are compared by `compare::profile`, printed by
//! `render::profile_diff`.

pub mod contention;
pub mod counters;
pub mod disasm;
pub mod events;
pub mod export;
pub mod figures;
pub mod hotspots;
pub mod innodb;
pub mod jit;
pub mod kernel;
pub mod memory;
pub mod namespace;
pub mod perf_map;
pub mod perf_records;
pub mod profile_proto;
pub mod record;
pub mod rules;
pub mod runtimes;
pub mod sampler;
pub mod symbols;
pub mod target;
pub mod threads;
pub mod tree;
pub mod unwind;
pub mod waits;
pub mod wall;
pub mod work;

use crate::machine::Machine;
use crate::schema::Tool;
use counters::CounterValue;
use hotspots::{HotFunction, HotSite, HotSpots, KindShare, ThreadReport};
use memory::ProcessMemory;
use record::{ProcessTotals, Recording};
use rules::{Finding, MachineCosts, PauseCost};
use sampler::{SamplingMode, SamplingScope};
use serde::{Deserialize, Serialize};

/// Version of the diagnosis JSON layout (`docs/diagnose.md`).
pub const DIAGNOSIS_VERSION: u32 = 1;

/// Default samples per second. A cpu-clock sample costs the sampled thread ~20 us in a KVM
/// guest (timer interrupt and reprogramming exit to the hypervisor; `perf record` pays the
/// same, see `bench/diagnose_overhead.sh`): ~1% at 499 Hz against a 3% budget, where perf's
/// 4000 Hz would cost ~9%. An odd rate avoids beating with periodic timers.
pub const DEFAULT_FREQUENCY_HZ: u64 = 499;

/// The sampling event for this machine, and why.
pub fn choose_mode(machine: &Machine) -> (SamplingMode, String) {
    if machine.pmu.usable {
        (
            SamplingMode::Cycles,
            "hardware PMU available: sampling core cycles".into(),
        )
    } else {
        (
            SamplingMode::CpuClock,
            format!(
                "{}: sampling the cpu-clock software timer; hardware counters (CPI, TLB \
                 misses, bus locks, machine clears, HITM) are not available",
                machine
                    .pmu
                    .reason
                    .as_deref()
                    .unwrap_or("perf_event_open of cycles failed")
            ),
        )
    }
}

/// The workload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TargetReport {
    /// Command line, when diagnose started it.
    pub command: Option<Vec<String>>,
    /// Its process id.
    pub pid: u32,
    /// How it ended.
    pub ended: String,
    /// Its processes that run in other namespaces (a container), and what of theirs could
    /// not be read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<namespace::NamespacedProcess>,
    /// The processes followed, by command name, most samples first: the started command or
    /// the attached process, and its descendants (running at the attach and started while
    /// recording). Empty in files written before it was recorded.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub followed: Vec<tree::FollowedCommand>,
    /// True when `--no-children` kept an attached process's children out.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub no_children: bool,
    /// The process as the user ran it (`argv[0]`'s name, `redis-server`) and its executable
    /// when that is named otherwise (`/usr/bin/redis-check-rdb`); absent when it could not be
    /// read, and in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<target::ProcessName>,
}

/// How samples were taken.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplingReport {
    /// `cpu-clock` or `cycles`.
    pub event: SamplingMode,
    /// Why this event.
    pub reason: String,
    /// `cpu-wide` (one event per CPU for every process, the followed processes' records kept)
    /// or `per-task` (one per followed thread and CPU; every file written before CPU-wide
    /// sampling was).
    #[serde(default)]
    pub scope: SamplingScope,
    /// With CPU-wide sampling, samples of processes not followed, dropped.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub other_samples: u64,
    /// Samples per second per running thread.
    pub frequency_hz: u64,
    /// Wall time recorded, s.
    pub wall_s: f64,
    /// Samples taken.
    pub samples: u64,
    /// Records the kernel dropped.
    pub lost: u64,
    /// How call stacks were unwound (CFI, frame pointers, the kernel's chain) and the share
    /// of samples with a full stack; absent when no call chains were sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stacks: Option<unwind::UnwindReport>,
}

/// Machine facts the findings use.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineReport {
    /// CPU line.
    pub cpu: String,
    /// Logical CPUs.
    pub logical_cpus: usize,
    /// Hardware PMU usable.
    pub pmu_usable: bool,
    /// Why not.
    pub pmu_reason: Option<String>,
    /// THP mode.
    pub thp: Option<crate::machine::ThpEnabled>,
    /// Split-lock handling.
    pub split_lock: String,
    /// PAUSE measured during this diagnosis (only when a spin, on PAUSE or without it, was
    /// found).
    pub pause: Option<PauseCost>,
    /// Line-transfer and lock costs the findings quote (only when a locked hot site was
    /// found): from a saved check given with `--check`, or measured after the workload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub costs: Option<MachineCosts>,
    /// Where [`MachineReport::pause`] came from, and how busy the CPUs were while it was
    /// measured (absent without a PAUSE figure, and in files written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause_source: Option<PauseSource>,
    /// The figures the findings depend on (PAUSE, line transfer, split lock, DRAM on 4 KiB
    /// and huge pages, core clock), the CPU and THP mode: what `diff` needs to say why a
    /// program is slower on one side. Absent in files written before it was recorded
    /// (`diff --machines` supplies them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub figures: Option<figures::MachineFigures>,
}

/// Where a diagnosis's PAUSE figure came from. An attached process (`--pid`) keeps running
/// after the recording: measured then, a busy server shares the CPUs with the probe, which
/// reads a PAUSE cost and a core clock too low (issue 30: 49 cycles where idle it is 78).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PauseSource {
    /// A saved check (`from`: `saved_check`, with its `file`, given with `--check`) or
    /// `measured_now`, after the recording.
    #[serde(flatten)]
    pub from: rules::CostSource,
    /// Other tasks' busy time on the CPUs the probe used, in CPUs on average over its run
    /// (its disturbance record); absent for a saved check and where /proc/stat was not read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub others_busy_cpus: Option<f64>,
    /// How many CPUs were watched.
    #[serde(default)]
    pub cpus: usize,
    /// True when the measurement was disturbed (other tasks busy for
    /// [`crate::schema::disturbance::OTHERS_BUSY_CPUS_LIMIT`] CPUs or more, steal, throttling
    /// or a wait for a CPU): the figure may read low.
    #[serde(default)]
    pub disturbed: bool,
}

impl PauseSource {
    /// The source of a figure measured now, from the pause probe's disturbance record.
    pub fn measured_now(d: Option<&crate::schema::disturbance::Disturbance>) -> PauseSource {
        PauseSource {
            from: rules::CostSource::MeasuredNow,
            others_busy_cpus: d.and_then(|d| d.others_busy_cpus),
            cpus: d.map_or(0, |d| d.cpus.len()),
            disturbed: d.is_some_and(|d| d.disturbed()),
        }
    }

    /// The CPUs' busy share while measured: others' busy CPUs over the CPUs watched.
    pub fn busy_share(&self) -> Option<f64> {
        let busy = self.others_busy_cpus?;
        (self.cpus > 0).then(|| (busy / self.cpus as f64).clamp(0.0, 1.0))
    }

    /// Where the figure came from, as the screen's PAUSE line says it.
    pub fn words(&self) -> String {
        let file = match &self.from {
            rules::CostSource::SavedCheck { file } => Some(file.as_str()),
            rules::CostSource::MeasuredNow => None,
        };
        crate::words::diagnose::pause_source(file, self.busy_share(), self.disturbed)
    }
}

/// Hardware counters.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CounterReport {
    /// True when a PMU counted.
    pub available: bool,
    /// Why not, or which vendor event table matched.
    pub note: String,
    /// Values.
    pub values: Vec<CounterValue>,
    /// Cycles per instruction.
    pub cpi: Option<f64>,
    /// Events the PMU refused, with the reason.
    pub unavailable: Vec<(String, String)>,
}

/// Everything `diagnose` found: the `--json` document.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnosis {
    /// Layout version ([`DIAGNOSIS_VERSION`]).
    pub diagnosis_version: u32,
    /// Writer.
    pub tool: Tool,
    /// The workload.
    pub target: TargetReport,
    /// Sampling.
    pub sampling: SamplingReport,
    /// Machine facts.
    pub machine: MachineReport,
    /// Findings, most severe first.
    pub findings: Vec<Finding>,
    /// Classified hot sites.
    pub hot_sites: Vec<HotSite>,
    /// Hottest functions.
    pub functions: Vec<HotFunction>,
    /// Share of samples per kind of site.
    pub kinds: Vec<KindShare>,
    /// Threads.
    pub threads: Vec<ThreadReport>,
    /// Memory per process.
    pub processes: Vec<ProcessMemory>,
    /// Exact totals of a started command.
    pub totals: Option<ProcessTotals>,
    /// Hardware counters.
    pub counters: CounterReport,
    /// What could not be done.
    pub notes: Vec<String>,
    /// How much of the samples was analysed, and what kept the rest out, with the fix for its
    /// runtime or binary (absent in files written before it was recorded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<hotspots::coverage::Coverage>,
    /// Distinct sampled call stacks with their sample counts, the input of the pprof and
    /// folded-stack exports and of flame graphs. Leaf-only stacks when call chains were not
    /// sampled; empty in files from builds without stacks.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stacks: Vec<StackCount>,
    /// Where every followed thread's wall time went: running, waiting for a CPU, blocked and
    /// why, with the stacks it waited in (absent with `--no-wall` and in older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall: Option<wall::WallReport>,
    /// Kernel time: whether kernel code was sampled (and why not), its share of the samples
    /// per process, its hottest functions, and the threads' CPU time by the kernel's own
    /// accounting (absent in older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<kernel::KernelReport>,
    /// The work the program did and what it took, one value per run (wall or CPU time of a
    /// started command, a metric from its output, a rate named for an attached process):
    /// the loss `diff` measures. Absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub work: Option<work::WorkRecord>,
}

/// One distinct call stack and the samples that ended in it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StackCount {
    /// Frames, leaf (the sampled instruction) first, outermost caller last.
    pub frames: Vec<StackFrame>,
    /// Samples with exactly this stack.
    pub samples: u64,
}

/// One frame of a sampled call stack.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct StackFrame {
    /// Instruction address in the process (the sampled address for the leaf, a return
    /// address for callers).
    pub address: u64,
    /// Function name, when a symbol, DWARF or a perf map named it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub function: Option<String>,
    /// File or mapping the address lies in (`/usr/lib/.../libc.so.6`, `[anon:jit]`, ...).
    pub module: String,
    /// Offset of `address` from the function's start (or the module's, when unnamed).
    pub offset: u64,
    /// Offset of `address` in the module's file, for file-backed code (what pprof's mappings
    /// need to find the instruction in the binary); absent for anonymous memory and in files
    /// written before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file_offset: Option<u64>,
}

/// What a saved JSON file is, told from its content: the version field each kind has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SavedKind {
    /// A diagnosis (`diagnose --save`): has `diagnosis_version`.
    Diagnosis,
    /// A fingerprint (`check --save`): has `schema_version`.
    Fingerprint,
    /// An experiment (`experiment --save`): `kind` is `experiment` (it has a `schema_version`
    /// too, of its own layout; issue 29: it was called a saved fingerprint).
    Experiment,
    /// JSON of neither kind.
    Other,
}

impl SavedKind {
    /// Tells the kind of a parsed JSON document.
    pub fn of(v: &serde_json::Value) -> SavedKind {
        if v.get("diagnosis_version").is_some() {
            SavedKind::Diagnosis
        } else if v.get("kind").and_then(|k| k.as_str()) == Some("experiment") {
            SavedKind::Experiment
        } else if v.get("schema_version").is_some() {
            SavedKind::Fingerprint
        } else {
            SavedKind::Other
        }
    }

    /// Words for a message: `a saved diagnosis (diagnose --save)`.
    pub fn describe(self) -> &'static str {
        match self {
            SavedKind::Diagnosis => "a saved diagnosis (`cpudoctor diagnose --save`)",
            SavedKind::Fingerprint => "a saved fingerprint (`cpudoctor check --save`)",
            SavedKind::Experiment => "a saved experiment (`cpudoctor experiment --save`)",
            SavedKind::Other => "JSON of another kind",
        }
    }
}

/// Why bytes are not a diagnosis this build reads.
#[derive(Debug, thiserror::Error)]
pub enum DiagnosisError {
    /// Not JSON at all (a truncated file, a binary one).
    #[error("not JSON: {0}")]
    NotJson(serde_json::Error),
    /// JSON of another kind (a fingerprint, something else).
    #[error("it is {}", .0.describe())]
    OtherKind(SavedKind),
    /// A diagnosis whose fields do not fit this build's types.
    #[error("wrong shape: {0}")]
    Shape(serde_json::Error),
    /// Written by a newer cpudoctor.
    #[error("diagnosis_version {found} is newer than this cpudoctor reads ({DIAGNOSIS_VERSION})")]
    Newer {
        /// The version in the file.
        found: u64,
    },
    /// A version no cpudoctor ever wrote (0: versions start at 1).
    #[error("it has diagnosis_version {found}, which no cpudoctor writes (versions start at 1)")]
    NoSuchVersion {
        /// The version in the file.
        found: u64,
    },
}

/// Parses a saved diagnosis, refusing a newer layout before looking at its fields.
pub fn from_json_bytes(bytes: &[u8]) -> Result<Diagnosis, DiagnosisError> {
    let v: serde_json::Value = serde_json::from_slice(bytes).map_err(DiagnosisError::NotJson)?;
    from_json_value(v)
}

/// [`from_json_bytes`] on a document already parsed.
pub fn from_json_value(v: serde_json::Value) -> Result<Diagnosis, DiagnosisError> {
    match SavedKind::of(&v) {
        SavedKind::Diagnosis => {}
        other => return Err(DiagnosisError::OtherKind(other)),
    }
    match v.get("diagnosis_version").and_then(|x| x.as_u64()) {
        Some(0) => return Err(DiagnosisError::NoSuchVersion { found: 0 }),
        Some(found) if found > u64::from(DIAGNOSIS_VERSION) => {
            return Err(DiagnosisError::Newer { found });
        }
        _ => {}
    }
    serde_json::from_value(v).map_err(DiagnosisError::Shape)
}

/// True when the hot sites include a PAUSE spin or a spin without PAUSE (whose finding says
/// what a PAUSE per round would cost), or a runtime's lock spin is hot (the caller then
/// measures PAUSE).
pub fn needs_pause_cost(hot: &HotSpots) -> bool {
    let runtime_spin: f64 = hot
        .functions
        .iter()
        .filter(|f| {
            matches!(
                runtimes::classify(&f.symbol),
                Some((_, runtimes::Role::Spin | runtimes::Role::Wait))
            )
        })
        .map(|f| f.share)
        .sum();
    runtime_spin >= rules::NOTICE_SHARE
        || hot.sites.iter().any(|s| {
            matches!(
                s.kind,
                disasm::SiteKind::PauseSpin | disasm::SiteKind::SpinWithoutPause
            ) && s.share >= rules::NOTICE_SHARE
        })
}

/// True when the program's hot loads may miss the caches: memory-load hot sites, or the
/// `small_pages` finding, hold at least [`rules::NOTICE_SHARE`] of the samples. The diagnosis
/// then carries DRAM latency on 4 KiB and on huge pages, which govern those loads' time.
pub fn needs_dram_latency(d: &Diagnosis) -> bool {
    let loads: f64 = d
        .hot_sites
        .iter()
        .filter(|s| s.kind == disasm::SiteKind::MemoryLoad)
        .map(|s| s.share)
        .sum();
    loads >= rules::NOTICE_SHARE
        || d.findings
            .iter()
            .any(|f| f.id == "small_pages" && f.sample_share.unwrap_or(0.0) >= rules::NOTICE_SHARE)
}

/// Which line costs the findings will quote: `(line transfer, split lock)`, from the locked
/// hot sites and bus-lock counters (the caller then reads a saved check or measures them).
pub fn needs_line_costs(hot: &HotSpots, counters: &[counters::CounterValue]) -> (bool, bool) {
    let locked = hot
        .sites
        .iter()
        .any(|s| s.kind == disasm::SiteKind::LockedRmw && s.share >= rules::NOTICE_SHARE);
    let split = hot.sites.iter().any(|s| s.split_note.is_some());
    let hitm = counters::signal_total(counters, events::Signal::CrossCoreHitm).is_some();
    (locked || hitm, split)
}

/// Context switches a second of the followed threads above which per-task sampling costs the
/// workload more than the 3% diagnose aims at: PostgreSQL lost ~20% at ~41,000 a second
/// (`reference::PGBENCH_PER_TASK_SAMPLING_LOSS`), about 0.5% per 1,000, so ~6,000 a second
/// would cost it 3%; 5,000 says so a little early rather than late.
const PER_TASK_COSTLY_SWITCHES_PER_S: f64 = 5_000.0;

/// What the recording's sampling scope calls for saying: CPU-wide events refused for other
/// reasons than permission; per task for want of permission while the workload switched
/// often enough to pay for it; CPU-wide with most samples other processes'.
fn scope_note(rec: &Recording) -> Option<String> {
    use record::PerTaskBecause;
    match &rec.per_task_because {
        Some(PerTaskBecause::Refused(error)) => {
            Some(crate::words::diagnose::cpu_wide_refused(error))
        }
        Some(PerTaskBecause::NotPermitted { paranoid }) => {
            let switches: u64 = rec
                .threads
                .iter()
                .map(|t| t.voluntary_switches + t.involuntary_switches)
                .sum();
            let rate = switches as f64 / rec.wall_s.max(1e-9);
            (rate >= PER_TASK_COSTLY_SWITCHES_PER_S)
                .then(|| crate::words::diagnose::per_task_at_switch_rate(rate, *paranoid))
        }
        Some(PerTaskBecause::Asked) => None,
        None => (rec.other_samples > rec.total_samples).then(|| {
            crate::words::diagnose::cpu_wide_mostly_others(rec.other_samples, rec.total_samples)
        }),
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Assembles the diagnosis: evidence, findings, facts.
pub fn build(
    rec: Recording,
    mut hot: HotSpots,
    machine: &Machine,
    mode_reason: String,
    counter_note: String,
    pause: Option<PauseCost>,
    costs: Option<MachineCosts>,
) -> Diagnosis {
    let wall = rec.wall.as_ref().map(|w| {
        let names = &rec.thread_names;
        let threads = &rec.threads;
        wall::report(w, std::mem::take(&mut hot.waits), &hot.threads, |tid| {
            names.get(&tid).cloned().or_else(|| {
                threads
                    .iter()
                    .find(|t| t.tid == tid)
                    .map(|t| t.name.clone())
            })
        })
    });
    let findings = rules::findings(&rules::Context {
        hot: &hot,
        processes: &rec.processes,
        machine,
        pause,
        counters: &rec.counter_values,
        frequency_hz: rec.frequency_hz,
        jvms: &rec.jvms,
        costs: costs.as_ref(),
        wall: wall.as_ref(),
    });
    let mut notes = rec.notes.clone();
    notes.extend(hot.notes.iter().cloned());
    if !rec.callchains && rec.total_samples > 0 {
        notes.push("call chains were not sampled: stacks hold the sampled function only".into());
    }
    if rec.total_samples == 0 {
        notes.push(if rec.kernel.sampled() {
            "no samples: the workload used no CPU while it was followed".into()
        } else {
            "no samples: the workload used no CPU in user space while it was followed".into()
        });
    }
    if rec.lost > 0 {
        notes.push(crate::words::diagnose::records_lost(
            rec.lost,
            rec.total_samples,
        ));
    }
    notes.extend(scope_note(&rec));
    let mut samples_by_pid = std::collections::BTreeMap::new();
    for t in &hot.threads {
        *samples_by_pid.entry(t.figures.pid).or_insert(0) += t.samples;
    }
    let kernel = kernel_report(&rec, &mut hot);
    Diagnosis {
        diagnosis_version: DIAGNOSIS_VERSION,
        tool: Tool::this(),
        target: TargetReport {
            command: rec.command.clone(),
            pid: rec.root_pid,
            ended: rec.ended.clone(),
            namespaces: rec.namespaces.clone(),
            followed: tree::by_command(&rec.followed, &samples_by_pid),
            no_children: rec.no_children,
            name: rec.root_name.clone(),
        },
        sampling: SamplingReport {
            event: rec.mode,
            reason: mode_reason,
            scope: rec.scope,
            other_samples: rec.other_samples,
            frequency_hz: rec.frequency_hz,
            wall_s: rec.wall_s,
            samples: rec.total_samples,
            lost: rec.lost,
            // A stack is full when the unwinder reached the end-of-stack mark or its named
            // frames reach a thread's entry: both count from below, the larger is kept.
            stacks: rec.unwinding.clone().map(|mut u| {
                u.full_stacks = u.full_stacks.max(hot.full_stacks).min(u.samples);
                u
            }),
        },
        machine: MachineReport {
            cpu: machine.cpu_line(),
            logical_cpus: machine.logical_cpus,
            pmu_usable: machine.pmu.usable,
            pmu_reason: machine.pmu.reason.clone(),
            thp: machine.thp.as_ref().map(|t| t.enabled),
            split_lock: format!(
                "{}: {}",
                machine.split_lock.effective,
                crate::words::machine::split_lock_summary(machine.split_lock.effective)
            ),
            pause,
            costs,
            pause_source: None,
            figures: None,
        },
        findings,
        hot_sites: hot.sites,
        functions: hot.functions,
        kinds: hot.kinds,
        threads: hot.threads,
        processes: rec.processes,
        totals: rec.totals,
        counters: CounterReport {
            available: machine.pmu.usable,
            note: counter_note,
            cpi: counters::cpi(&rec.counter_values),
            values: rec.counter_values,
            unavailable: rec.counters_unavailable,
        },
        notes,
        coverage: hot.coverage,
        stacks: hot.stacks,
        wall,
        kernel: Some(kernel),
        work: None,
    }
}

/// Kernel entries listed in the report.
const KERNEL_ENTRIES: usize = 10;

/// The kernel samples of `stacks` by the user function their thread entered the kernel from
/// (the first user frame under the kernel's), most samples first. A stack whose kernel chain
/// shows no entry (cut short) counts with the entry of the same user function that others
/// show (a system call's wrapper, mostly), else as another entry.
fn kernel_entries(stacks: &[StackCount], total: u64) -> Vec<kernel::KernelEntry> {
    use kernel::KernelEntryKind;
    use std::collections::HashMap;
    let mut by: HashMap<(String, KernelEntryKind), u64> = HashMap::new();
    let mut unknown: HashMap<String, u64> = HashMap::new();
    for s in stacks {
        let user = s
            .frames
            .iter()
            .position(|f| f.module != kernel::KERNEL_MODULE)
            .unwrap_or(s.frames.len());
        if user == 0 {
            continue;
        }
        let kind = KernelEntryKind::of(
            s.frames[..user]
                .iter()
                .filter_map(|f| f.function.as_deref()),
        );
        let from = s
            .frames
            .get(user)
            .map_or_else(|| "-".to_string(), hotspots::frame_name);
        match kind {
            Some(kind) => *by.entry((from, kind)).or_default() += s.samples,
            None => *unknown.entry(from).or_default() += s.samples,
        }
    }
    for (from, samples) in unknown {
        let known = [KernelEntryKind::SystemCall, KernelEntryKind::PageFault]
            .into_iter()
            .find(|k| by.contains_key(&(from.clone(), *k)))
            .unwrap_or(KernelEntryKind::Other);
        *by.entry((from, known)).or_default() += samples;
    }
    let mut v: Vec<kernel::KernelEntry> = by
        .into_iter()
        .map(|((from, kind), samples)| kernel::KernelEntry {
            from,
            kind,
            samples,
            share: samples as f64 / total.max(1) as f64,
        })
        .collect();
    v.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then_with(|| a.from.cmp(&b.from))
            .then(a.kind.cmp(&b.kind))
    });
    v.truncate(KERNEL_ENTRIES);
    v
}

/// Kernel time: the share of samples in kernel code per process (from each thread's kernel
/// samples), the hottest kernel functions, and the followed threads' CPU time by the kernel's
/// accounting against what the samples stand for.
fn kernel_report(rec: &Recording, hot: &mut HotSpots) -> kernel::KernelReport {
    use std::collections::BTreeMap;
    let mut by_pid: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    for t in &hot.threads {
        let e = by_pid.entry(t.figures.pid).or_default();
        e.0 += t.samples;
        e.1 += t.kernel_samples;
    }
    let command = |pid: u32| {
        rec.followed
            .iter()
            .find(|p| p.pid == pid)
            .map(|p| p.command.clone())
            .or_else(|| rec.thread_names.get(&pid).cloned())
            .unwrap_or_else(|| "?".into())
    };
    let mut processes: Vec<kernel::ProcessSplit> = by_pid
        .into_iter()
        .filter(|(_, (samples, _))| *samples > 0)
        .map(|(pid, (samples, kernel_samples))| kernel::ProcessSplit {
            pid,
            command: command(pid),
            samples,
            kernel_samples,
            kernel_share: kernel_samples as f64 / samples as f64,
        })
        .collect();
    processes.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.pid.cmp(&b.pid)));
    let samples: u64 = rec.kernel_samples.values().sum();
    let with_split: Vec<&threads::ThreadFigures> = rec
        .threads
        .iter()
        .filter(|t| t.system_s.is_some())
        .collect();
    let cpu = (!with_split.is_empty()).then(|| kernel::CpuCoverage {
        cpu_s: with_split.iter().map(|t| t.cpu_s).sum(),
        system_s: with_split.iter().filter_map(|t| t.system_s).sum(),
        sampled_s: rec.total_samples as f64 / rec.frequency_hz.max(1) as f64,
    });
    let unnamed_because = hot.kernel_unnamed.map(|u| {
        crate::words::diagnose::kernel_unnamed(
            u == kernel::Unnamed::Hidden,
            std::fs::read_to_string("/proc/sys/kernel/kptr_restrict")
                .ok()
                .and_then(|s| s.trim().parse().ok()),
        )
    });
    kernel::KernelReport {
        entries: if rec.callchains {
            kernel_entries(&hot.stacks, rec.total_samples)
        } else {
            Vec::new()
        },
        sampling: rec.kernel.clone(),
        samples,
        share: samples as f64 / rec.total_samples.max(1) as f64,
        functions: std::mem::take(&mut hot.kernel_functions),
        unnamed_because,
        processes,
        cpu,
    }
}

/// Keeps this thread busy until it has used `cpu` of CPU time: tests that need a thread to
/// run for a while measure its own CPU time, which a shared machine cannot steal, not wall
/// time, which it can.
#[cfg(test)]
pub(crate) fn burn_thread_cpu(cpu: std::time::Duration) {
    use crate::measure::clock::thread_cpu_ns;
    let end = thread_cpu_ns() + cpu.as_nanos() as u64;
    let mut x = 1u64;
    while thread_cpu_ns() < end {
        for _ in 0..1000 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
    }
}

/// A saved diagnosis from `tests/fixtures/diagnose`, for unit tests.
#[cfg(test)]
pub(crate) fn test_fixture(name: &str) -> Diagnosis {
    let path = format!(
        "{}/tests/fixtures/diagnose/{name}",
        env!("CARGO_MANIFEST_DIR")
    );
    from_json_bytes(&std::fs::read(path).unwrap()).unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The dd case: `read`'s kernel chains cut at a retpoline thunk count with its system
    /// call, not as another way in.
    #[test]
    fn kernel_samples_group_by_the_user_function_that_entered_the_kernel() {
        let frame = |function: &str, module: &str| StackFrame {
            address: 1,
            function: Some(function.into()),
            module: module.into(),
            offset: 0,
            file_offset: None,
        };
        let k = |f: &str| frame(f, kernel::KERNEL_MODULE);
        let libc = |f: &str| frame(f, "/usr/lib/x86_64-linux-gnu/libc.so.6");
        let stacks = vec![
            StackCount {
                frames: vec![k("read_zero"), k("do_syscall_64"), libc("read")],
                samples: 6,
            },
            StackCount {
                frames: vec![k("__x86_indirect_thunk_rax"), libc("read")],
                samples: 2,
            },
            StackCount {
                frames: vec![k("clear_page_erms"), k("exc_page_fault"), libc("memset")],
                samples: 1,
            },
            StackCount {
                frames: vec![libc("memset")],
                samples: 1,
            },
        ];
        let e = kernel_entries(&stacks, 10);
        let got: Vec<(&str, kernel::KernelEntryKind, u64)> = e
            .iter()
            .map(|e| (e.from.as_str(), e.kind, e.samples))
            .collect();
        assert_eq!(
            got,
            vec![
                ("read", kernel::KernelEntryKind::SystemCall, 8),
                ("memset", kernel::KernelEntryKind::PageFault, 1),
            ]
        );
        assert_eq!(e[0].share, 0.8);
    }

    #[test]
    fn the_sampling_event_follows_the_pmu_and_says_why() {
        let mut m = Machine::detect();
        m.pmu.usable = false;
        m.pmu.reason = Some("no hardware PMU is exposed".into());
        let (mode, why) = choose_mode(&m);
        assert_eq!(mode, SamplingMode::CpuClock);
        assert!(why.starts_with("no hardware PMU is exposed: sampling the cpu-clock"));
        m.pmu.usable = true;
        assert_eq!(choose_mode(&m).0, SamplingMode::Cycles);
    }

    #[test]
    fn a_pause_measured_beside_a_busy_attached_server_is_marked_from_its_disturbance_record() {
        // Issue 30: the attached MariaDB kept both vCPUs busy while PAUSE was measured.
        use crate::schema::disturbance::{Disturbance, DisturbedBy};
        let record = Disturbance {
            by: vec![DisturbedBy::OtherTasks],
            wall_s: 0.3,
            cpus: vec![0, 1],
            cpu_quota_cpus: None,
            periods: None,
            throttled_periods: None,
            throttled_s: None,
            steal_ratio: Some(0.0),
            others_busy_cpus: Some(1.9),
            run_queue_wait_ratio: Some(0.2),
        };
        let source = PauseSource::measured_now(Some(&record));
        assert!(source.disturbed);
        assert_eq!(source.busy_share(), Some(0.95));
        assert!(source.words().contains("95% busy: may read low"));
        let json = serde_json::to_string(&source).unwrap();
        assert!(json.contains("\"from\":\"measured_now\""), "{json}");
        assert_eq!(serde_json::from_str::<PauseSource>(&json).unwrap(), source);
        let unknown = PauseSource::measured_now(None);
        assert!(!unknown.disturbed && unknown.busy_share().is_none());
    }

    #[test]
    fn a_spin_without_pause_has_pause_measured_so_its_finding_can_cost_the_fix() {
        let site = |kind, share| HotSite {
            kind,
            symbol: "wait_turn".into(),
            module: "/tmp/turn_call".into(),
            address: 0x125a,
            offset: 0x1a,
            instruction: "call 0000000000001230h".into(),
            samples: 100,
            share,
            threads: Vec::new(),
            disassembly: disasm::Listing::default(),
            source_line: None,
            split_note: None,
            possible_split_note: None,
            reads_through: None,
            innodb: None,
        };
        let hot = |kind, share| HotSpots {
            sites: vec![site(kind, share)],
            ..HotSpots::default()
        };
        assert!(needs_pause_cost(&hot(
            disasm::SiteKind::SpinWithoutPause,
            0.9
        )));
        assert!(needs_pause_cost(&hot(disasm::SiteKind::PauseSpin, 0.9)));
        assert!(!needs_pause_cost(&hot(
            disasm::SiteKind::SpinWithoutPause,
            0.01
        )));
        assert!(!needs_pause_cost(&hot(disasm::SiteKind::Compute, 0.9)));
    }

    /// DRAM latency is measured for hot loads that miss the caches: memory-load sites or the
    /// small-pages finding at the notice share, not a PAUSE spin.
    #[test]
    fn dram_latency_is_needed_for_hot_memory_loads_only() {
        let mut d = test_fixture("pause-spin-zen4-kvm.json");
        assert!(!needs_dram_latency(&d));
        let mut load = d.hot_sites[0].clone();
        load.kind = disasm::SiteKind::MemoryLoad;
        load.share = rules::NOTICE_SHARE / 2.0;
        d.hot_sites.push(load.clone());
        assert!(!needs_dram_latency(&d));
        d.hot_sites.push(load);
        assert!(
            needs_dram_latency(&d),
            "two sites add up to the notice share"
        );
        d.hot_sites.truncate(1);
        let mut small = d.findings[0].clone();
        small.id = "small_pages".into();
        small.sample_share = Some(0.5);
        d.findings.push(small);
        assert!(needs_dram_latency(&d));
    }
}
