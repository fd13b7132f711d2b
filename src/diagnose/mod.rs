//! `diagnose`: where a running workload spends its time, which hot instructions are
//! spin-waits or contended atomics, and what the kernel and (where there is one) the PMU say,
//! turned into findings in this machine's own figures.
//!
//! The method that needs no PMU comes first, because most cloud VMs expose none: timer
//! samples (`cpu-clock`) give hot addresses; disassembling them shows the instruction before
//! the sample, as the Skylake seed found its `pause` ([`analyse::disasm`]). Hardware counters
//! ([`record::counters`], encodings in [`record::events`]) add CPI, TLB walks, bus locks,
//! machine clears and HITM where a PMU exists.
//!
//! Three rooms, one job each, each importing only the ones below it:
//! - [`analyse`]: hot sites, disassembly, runtimes' and InnoDB's spins, the wall-clock report,
//!   kernel time, and the rules that turn them into findings;
//! - [`record`]: the workload (started or attached), its samples, switch records, /proc
//!   signals, counters and memory, into one [`record::recording::Recording`];
//! - [`symbolize`]: addresses to names (ELF, DWARF, kallsyms, JIT perf maps, through a
//!   container's namespaces) and call stacks unwound with CFI.
//!
//! This module is the pipeline that ties them: [`record::recording::record`] ->
//! [`analyse::hotspots`] -> the machine costs the findings quote ([`needs_pause_cost`],
//! [`needs_line_costs`], [`needs_dram_latency`]) -> [`build`] (rules, wall and kernel
//! reports) -> [`Diagnosis`], the saved JSON ([`from_json_bytes`]), rendered by
//! `render::diagnosis`. A saved diagnosis's call stacks ([`stacks`]) are exported by
//! `render::export` (pprof, folded stacks) and drawn as flame graphs (`render::flame`), and two are compared by `compare::profile`, printed by
//! `render::profile_diff`.

pub mod analyse;
pub mod record;
pub mod stacks;
pub mod symbolize;

use crate::machine::Machine;
use crate::schema::Tool;
use analyse::hotspots::{HotFunction, HotSite, HotSpots, KindShare, ThreadReport};
use analyse::rules::{Finding, MachineCosts, PauseCost};
use analyse::{disasm, kernel, rules, runtimes, wall};
use record::counters::{self, CounterValue};
use record::memory::ProcessMemory;
use record::recording::{ProcessTotals, Recording};
use record::sampler::{SamplingMode, SamplingScope};
use record::{events, tree, work};
use serde::{Deserialize, Serialize};
use symbolize::namespace;
use symbolize::stack::StackCount;

/// Version of the diagnosis JSON layout (`docs/diagnose.md`).
pub const DIAGNOSIS_VERSION: u32 = 1;

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
    pub name: Option<record::target::ProcessName>,
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
    pub stacks: Option<symbolize::unwind::UnwindReport>,
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
    pub figures: Option<analyse::figures::MachineFigures>,
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
    pub coverage: Option<analyse::hotspots::coverage::Coverage>,
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
    /// Who shares the hot code's cache lines, word by word, from hardware watchpoints set
    /// once the window was over (absent without `--watch` and in older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line_watch: Option<crate::schema::line_sharing::LineWatch>,
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
    let split = hot
        .sites
        .iter()
        .any(|s| s.line_split.as_ref().is_some_and(|l| l.certain()));
    let hitm = counters::signal_total(counters, events::Signal::CrossCoreHitm).is_some();
    (locked || hitm, split)
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
        kernel: &rec.kernel,
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
    notes.extend(record::recording::scope_note(&rec));
    let mut samples_by_pid = std::collections::BTreeMap::new();
    for t in &hot.threads {
        *samples_by_pid.entry(t.figures.pid).or_insert(0) += t.samples;
    }
    let kernel = kernel::report(&rec, &mut hot);
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
                crate::words::machine::split_lock_summary(
                    &machine.split_lock,
                    costs
                        .as_ref()
                        .and_then(|c| c.split_lock_seen(machine))
                        .as_ref()
                )
            ),
            pause,
            costs,
            pause_source: None,
            figures: None,
        },
        findings,
        line_watch: hot.line_watch.take(),
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

    #[test]
    fn a_pause_measured_beside_a_busy_attached_server_is_marked_from_its_disturbance_record() {
        // Issue 30: the attached MariaDB kept both vCPUs busy while PAUSE was measured.
        use crate::schema::disturbance::{Disturbance, DisturbedBy};
        let record = Disturbance {
            by: vec![DisturbedBy::OtherTasks],
            unresolved: Vec::new(),
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
            line_split: None,
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
