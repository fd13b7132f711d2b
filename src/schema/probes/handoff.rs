//! The handoff probe's result (`cpudoctor spin --handoff`, `probes::handoff`): its figures,
//! samples and series are keyed by runtime and sender delay, and every key is built here once
//! ([`HandoffFigure::name`], [`Quantity::samples`], [`Quantity::series`], [`delay_key`]), for
//! the probe that writes it and the report that reads it back, so a rename cannot drop a
//! table column.

use crate::names::probe;
use crate::schema::figures::{FigureId, Figures, ProbeRaw, RawError, RawRecord, WithDerived};
use crate::schema::{Metric, ProbeResult, Series};
use crate::spin::policy::PolicyKind;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;

/// The probe's name in the fingerprint.
pub const PROBE: &str = probe::HANDOFF;

/// The series of the ideal wall time per delay (`items x max(work, D)`).
pub const IDEAL_SERIES: &str = "ideal_ms";

/// One lock implementation the handoff runs on; in files by its [`Runtime::name`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Runtime {
    /// C, pthread mutex (default type) and condition variable.
    CPthreadDefault,
    /// C, `PTHREAD_MUTEX_ADAPTIVE_NP` (spins up to glibc's `mutex_spin_count`).
    CPthreadAdaptive,
    /// Rust std `Mutex` and `Condvar`, in process.
    RustStd,
    /// Go `sync.Mutex` and `sync.Cond`.
    GoSync,
    /// Java `synchronized` with `wait`/`notifyAll`.
    JavaSynchronized,
    /// Java `ReentrantLock` with `Condition.await`/`signalAll`.
    JavaReentrantLock,
    /// The model lock with .NET's legacy spin policy.
    ModelDotnetLegacy,
    /// The model lock with .NET's normalized spin policy.
    ModelDotnetNormalized,
}

impl Runtime {
    /// Every runtime, in table order.
    pub const ALL: [Runtime; 8] = [
        Runtime::CPthreadDefault,
        Runtime::CPthreadAdaptive,
        Runtime::RustStd,
        Runtime::GoSync,
        Runtime::JavaSynchronized,
        Runtime::JavaReentrantLock,
        Runtime::ModelDotnetLegacy,
        Runtime::ModelDotnetNormalized,
    ];

    /// Name in the fingerprint and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Runtime::CPthreadDefault => "c_pthread_default",
            Runtime::CPthreadAdaptive => "c_pthread_adaptive",
            Runtime::RustStd => "rust_std",
            Runtime::GoSync => "go_sync",
            Runtime::JavaSynchronized => "java_synchronized",
            Runtime::JavaReentrantLock => "java_reentrantlock",
            Runtime::ModelDotnetLegacy => "model_dotnet_legacy",
            Runtime::ModelDotnetNormalized => "model_dotnet_normalized",
        }
    }

    /// The primitive, in words.
    pub fn primitive(self) -> &'static str {
        match self {
            Runtime::CPthreadDefault => "pthread mutex (default) + condvar",
            Runtime::CPthreadAdaptive => "pthread mutex (adaptive) + condvar",
            Runtime::RustStd => "std Mutex + Condvar",
            Runtime::GoSync => "sync.Mutex + sync.Cond",
            Runtime::JavaSynchronized => "synchronized + wait/notifyAll",
            Runtime::JavaReentrantLock => "ReentrantLock + Condition",
            Runtime::ModelDotnetLegacy => "model lock, .NET legacy spin",
            Runtime::ModelDotnetNormalized => "model lock, .NET normalized spin",
        }
    }

    /// The runtime called `name`.
    pub fn by_name(name: &str) -> Option<Runtime> {
        Runtime::ALL.into_iter().find(|r| r.name() == name)
    }

    /// Runtimes selected by `word`: an exact name, or a group (`c`, `rust`, `go`, `java`,
    /// `model`) selecting every runtime whose name starts with `word_`.
    pub fn select(word: &str) -> Vec<Runtime> {
        if let Some(r) = Runtime::by_name(word) {
            return vec![r];
        }
        let prefix = format!("{word}_");
        Runtime::ALL
            .into_iter()
            .filter(|r| r.name().starts_with(&prefix))
            .collect()
    }

    /// The model lock's policy, for the two model runtimes.
    pub fn policy(self) -> Option<PolicyKind> {
        match self {
            Runtime::ModelDotnetLegacy => Some(PolicyKind::DotnetLegacy),
            Runtime::ModelDotnetNormalized => Some(PolicyKind::DotnetNormalized),
            _ => None,
        }
    }
}

impl Serialize for Runtime {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for Runtime {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Runtime, D::Error> {
        let name = String::deserialize(d)?;
        Runtime::by_name(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown handoff runtime `{name}`")))
    }
}

/// `1` for 1 ms, `1p5` for 1.5 ms: delays as they appear in metric names.
pub fn delay_label(delay_ms: f64) -> String {
    format!("{delay_ms}").replace('.', "p")
}

/// `delay_1p5ms`: a delay as a key of samples and lock statistics.
pub fn delay_key(delay_ms: f64) -> String {
    format!("delay_{}ms", delay_label(delay_ms))
}

/// The delay of a [`delay_key`] (`delay_1p5ms`), when `key` is one.
fn delay_of_key(key: &str) -> Option<f64> {
    let label = key.strip_prefix("delay_")?.strip_suffix("ms")?;
    let d: f64 = label.replace('p', ".").parse().ok()?;
    (delay_key(d) == key).then_some(d)
}

/// What a handoff figure, sample or series measures, per runtime and delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantity {
    /// Wall time of all items.
    WallMs,
    /// CPU the waiting threads burned (sender acquiring, worker waiting for work).
    WaitCpuMs,
    /// Time the sender waited for the lock.
    SenderLockWaitMs,
    /// CPU of the whole process.
    ProcessCpuMs,
}

impl Quantity {
    /// Every quantity a run records.
    pub const ALL: [Quantity; 4] = [
        Quantity::WallMs,
        Quantity::WaitCpuMs,
        Quantity::SenderLockWaitMs,
        Quantity::ProcessCpuMs,
    ];

    /// The quantity's name in keys (`wall_ms`).
    pub fn key(self) -> &'static str {
        match self {
            Quantity::WallMs => "wall_ms",
            Quantity::WaitCpuMs => "wait_cpu_ms",
            Quantity::SenderLockWaitMs => "sender_lock_wait_ms",
            Quantity::ProcessCpuMs => "process_cpu_ms",
        }
    }

    /// The raw samples of a runtime at a delay (`wall_ms.rust_std.delay_1ms`).
    pub fn samples(self, runtime: Runtime, delay_ms: f64) -> String {
        format!("{}.{}.{}", self.key(), runtime.name(), delay_key(delay_ms))
    }

    /// The series of a runtime's medians over the delays (`wall_ms.rust_std`).
    pub fn series(self, runtime: Runtime) -> String {
        format!("{}.{}", self.key(), runtime.name())
    }
}

/// The prefix of the model lock's legacy/normalized ratios.
const MODEL_RATIO: &str = "model_legacy_over_normalized";

/// One handoff figure, by its parts: the one builder of the figures' names.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum HandoffFigure {
    /// The ideal wall time at a delay (`delay_1ms_ideal_ms`).
    Ideal {
        /// The sender delay, ms.
        delay_ms: f64,
    },
    /// A runtime's median wall time at a delay (`rust_std_delay_1ms_wall_ms`).
    WallMs {
        /// The runtime.
        runtime: Runtime,
        /// The sender delay, ms.
        delay_ms: f64,
    },
    /// A runtime's median waiting CPU at a delay (`rust_std_delay_1ms_wait_cpu_ms`).
    WaitCpuMs {
        /// The runtime.
        runtime: Runtime,
        /// The sender delay, ms.
        delay_ms: f64,
    },
    /// A runtime's largest wall time over ideal across the delays
    /// (`rust_std_worst_slowdown_ratio`).
    WorstSlowdown {
        /// The runtime.
        runtime: Runtime,
    },
    /// The model lock's legacy/normalized ratio at one delay
    /// (`model_legacy_over_normalized_delay_1ms_ratio`).
    ModelRatioAt {
        /// The sender delay, ms.
        delay_ms: f64,
    },
    /// The model lock's headline: legacy over normalized at its worst delay
    /// (`model_legacy_over_normalized_ratio`).
    ModelRatio,
}

impl HandoffFigure {
    /// The figure's metric name in the file.
    pub fn name(self) -> String {
        match self {
            HandoffFigure::Ideal { delay_ms } => format!("{}_ideal_ms", delay_key(delay_ms)),
            HandoffFigure::WallMs { runtime, delay_ms } => {
                format!("{}_{}_wall_ms", runtime.name(), delay_key(delay_ms))
            }
            HandoffFigure::WaitCpuMs { runtime, delay_ms } => {
                format!("{}_{}_wait_cpu_ms", runtime.name(), delay_key(delay_ms))
            }
            HandoffFigure::WorstSlowdown { runtime } => {
                format!("{}_worst_slowdown_ratio", runtime.name())
            }
            HandoffFigure::ModelRatioAt { delay_ms } => {
                format!("{MODEL_RATIO}_{}_ratio", delay_key(delay_ms))
            }
            HandoffFigure::ModelRatio => HandoffFigures::MODEL_RATIO.metric.to_string(),
        }
    }

    /// The figure a metric name names, when it names one ([`HandoffFigure::name`]'s inverse).
    pub fn parse(name: &str) -> Option<HandoffFigure> {
        if name == HandoffFigures::MODEL_RATIO.metric {
            return Some(HandoffFigure::ModelRatio);
        }
        if let Some(rest) = name.strip_prefix(&format!("{MODEL_RATIO}_")) {
            let delay_ms = delay_of_key(rest.strip_suffix("_ratio")?)?;
            return Some(HandoffFigure::ModelRatioAt { delay_ms });
        }
        if let Some(key) = name.strip_suffix("_ideal_ms")
            && let Some(delay_ms) = delay_of_key(key)
        {
            return Some(HandoffFigure::Ideal { delay_ms });
        }
        let (runtime, rest) = Runtime::ALL.into_iter().find_map(|r| {
            let rest = name.strip_prefix(r.name())?.strip_prefix('_')?;
            Some((r, rest))
        })?;
        if rest == "worst_slowdown_ratio" {
            return Some(HandoffFigure::WorstSlowdown { runtime });
        }
        if let Some(key) = rest.strip_suffix("_wall_ms") {
            let delay_ms = delay_of_key(key)?;
            return Some(HandoffFigure::WallMs { runtime, delay_ms });
        }
        let delay_ms = delay_of_key(rest.strip_suffix("_wait_cpu_ms")?)?;
        Some(HandoffFigure::WaitCpuMs { runtime, delay_ms })
    }
}

/// A runtime's figures at one delay.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DelayFigures {
    /// The sender delay, ms.
    pub delay_ms: f64,
    /// Median wall time of all items, ms (a range across runs).
    pub wall_ms: Option<Metric>,
    /// Median CPU the waiting threads burned, ms (a range across runs).
    pub wait_cpu_ms: Option<Metric>,
}

/// One runtime's figures.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RuntimeFigures {
    /// Per delay, in the order of `params.delays_ms`.
    pub delays: Vec<DelayFigures>,
    /// The largest median wall time over ideal across the delays, ratio.
    pub worst_slowdown_ratio: Option<Metric>,
}

/// What the handoff probe reports, in report order: the ideal per delay, each runtime's
/// figures (runtimes in `params.runtimes` order), the model lock's ratio per delay and its
/// headline. Metric names are built by [`HandoffFigure::name`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct HandoffFigures {
    /// The ideal wall time `items x max(work, D)` per delay, ms, in delay order.
    pub ideal_ms: Vec<(f64, Metric)>,
    /// Each runtime that ran, its figures.
    pub runtimes: Vec<(Runtime, RuntimeFigures)>,
    /// The model lock's legacy/normalized wall-time ratio per delay (median of run pairs,
    /// with their spread), in delay order.
    pub model_ratio_at: Vec<(f64, Metric)>,
    /// The model lock's headline ratio: the median at the delay whose smallest pair ratio
    /// is the largest; given over enough runs per delay only.
    pub model_legacy_over_normalized_ratio: Option<Metric>,
}

impl HandoffFigures {
    /// The id of the model lock's headline ratio.
    pub const MODEL_RATIO: FigureId =
        FigureId::new(probe::HANDOFF, "model_legacy_over_normalized_ratio");

    /// The figures of `runtime`, when it has any.
    pub fn runtime(&self, runtime: Runtime) -> Option<&RuntimeFigures> {
        self.runtimes
            .iter()
            .find(|(r, _)| *r == runtime)
            .map(|(_, f)| f)
    }

    /// The figures of `runtime`, added (last) when it has none yet.
    fn runtime_mut(&mut self, runtime: Runtime) -> &mut RuntimeFigures {
        let i = match self.runtimes.iter().position(|(r, _)| *r == runtime) {
            Some(i) => i,
            None => {
                self.runtimes.push((runtime, RuntimeFigures::default()));
                self.runtimes.len() - 1
            }
        };
        &mut self.runtimes[i].1
    }

    /// `runtime`'s median wall time at `delay_ms`, when measured.
    pub fn wall_ms(&self, runtime: Runtime, delay_ms: f64) -> Option<&Metric> {
        self.runtime(runtime)?
            .delays
            .iter()
            .find(|d| d.delay_ms == delay_ms)?
            .wall_ms
            .as_ref()
    }

    /// Every figure with its key, in report order.
    fn keyed(self) -> Vec<(HandoffFigure, Metric)> {
        let mut out = Vec::new();
        for (delay_ms, m) in self.ideal_ms {
            out.push((HandoffFigure::Ideal { delay_ms }, m));
        }
        for (runtime, f) in self.runtimes {
            for d in f.delays {
                let delay_ms = d.delay_ms;
                out.extend(
                    d.wall_ms
                        .map(|m| (HandoffFigure::WallMs { runtime, delay_ms }, m)),
                );
                out.extend(
                    d.wait_cpu_ms
                        .map(|m| (HandoffFigure::WaitCpuMs { runtime, delay_ms }, m)),
                );
            }
            out.extend(
                f.worst_slowdown_ratio
                    .map(|m| (HandoffFigure::WorstSlowdown { runtime }, m)),
            );
        }
        for (delay_ms, m) in self.model_ratio_at {
            out.push((HandoffFigure::ModelRatioAt { delay_ms }, m));
        }
        out.extend(
            self.model_legacy_over_normalized_ratio
                .map(|m| (HandoffFigure::ModelRatio, m)),
        );
        out
    }

    /// Sets the figure `key` (runtime and delay entries added in the order first set).
    pub fn set(&mut self, key: HandoffFigure, m: Metric) {
        let at = |delays: &mut Vec<DelayFigures>, delay_ms: f64| -> usize {
            match delays.iter().position(|d| d.delay_ms == delay_ms) {
                Some(i) => i,
                None => {
                    delays.push(DelayFigures {
                        delay_ms,
                        ..DelayFigures::default()
                    });
                    delays.len() - 1
                }
            }
        };
        match key {
            HandoffFigure::Ideal { delay_ms } => self.ideal_ms.push((delay_ms, m)),
            HandoffFigure::WallMs { runtime, delay_ms } => {
                let delays = &mut self.runtime_mut(runtime).delays;
                let i = at(delays, delay_ms);
                delays[i].wall_ms = Some(m);
            }
            HandoffFigure::WaitCpuMs { runtime, delay_ms } => {
                let delays = &mut self.runtime_mut(runtime).delays;
                let i = at(delays, delay_ms);
                delays[i].wait_cpu_ms = Some(m);
            }
            HandoffFigure::WorstSlowdown { runtime } => {
                self.runtime_mut(runtime).worst_slowdown_ratio = Some(m)
            }
            HandoffFigure::ModelRatioAt { delay_ms } => self.model_ratio_at.push((delay_ms, m)),
            HandoffFigure::ModelRatio => self.model_legacy_over_normalized_ratio = Some(m),
        }
    }
}

impl Figures for HandoffFigures {
    const PROBE: &'static str = probe::HANDOFF;
    /// Only the headline has a fixed name; the others are named by runtime and delay.
    const IDS: &'static [FigureId] = &[HandoffFigures::MODEL_RATIO];

    fn into_metrics(self) -> Vec<Metric> {
        self.keyed()
            .into_iter()
            .map(|(k, m)| Metric {
                name: k.name(),
                ..m
            })
            .collect()
    }

    fn from_metrics(metrics: &[Metric]) -> Self {
        let mut f = HandoffFigures::default();
        for m in metrics {
            if let Some(k) = HandoffFigure::parse(&m.name) {
                f.set(k, m.clone());
            }
        }
        f
    }

    /// The headline's id when given: the figures named by parts have no static name.
    fn ids(&self) -> Vec<FigureId> {
        self.model_legacy_over_normalized_ratio
            .as_ref()
            .map(|_| HandoffFigures::MODEL_RATIO)
            .into_iter()
            .collect()
    }
}

/// How the handoff ran (`params`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HandoffParams {
    /// Items per run.
    #[serde(default)]
    pub items: u64,
    /// Busy work per item under the lock, ms.
    #[serde(default)]
    pub work_ms: f64,
    /// Sender delays, ms, each once, in table order.
    #[serde(default)]
    pub delays_ms: Vec<f64>,
    /// Runs per runtime and delay (the median is reported).
    #[serde(default = "one")]
    pub repetitions: u32,
    /// Runtimes asked for, in table order.
    #[serde(default)]
    pub runtimes: Vec<Runtime>,
    /// PAUSE cost the model lock models, ns; null when not known.
    #[serde(default)]
    pub model_pause_ns: Option<f64>,
    /// Where that cost comes from, in words (`given`, this machine's...).
    #[serde(default)]
    pub model_pause_source: Option<String>,
    /// Core count the legacy policy's round limit scales with.
    #[serde(default)]
    pub model_cores: u64,
    /// How the sender waits between items, in words.
    #[serde(default)]
    pub sender_wait: String,
}

fn one() -> u32 {
    1
}

/// How a runtime's waiting CPU was measured (`effects.runtimes[name].wait_cpu_from`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitCpuFrom {
    /// Per-thread CPU clocks of the sender and the worker.
    ThreadClocks,
    /// The process's CPU less the busy work asked for (threads not timed one by one).
    ProcessMinusBusy,
}

/// What happened to acquisitions of one model lock in one run (a count a file lacks is 0).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct LockStats {
    /// Acquisitions in total.
    pub acquisitions: u64,
    /// Acquisitions that found the lock free at once.
    pub uncontended: u64,
    /// Acquisitions that got the lock at a look between PAUSE runs.
    pub acquired_spinning: u64,
    /// Acquisitions that ran out of plan and blocked.
    pub acquired_after_blocking: u64,
    /// Looks at the lock at the end of a PAUSE run (the first try of an acquisition is not
    /// one).
    pub looks: u64,
    /// Sum over looks of how long after its deadline the look came, in ns: the clock read and
    /// last PAUSE, plus any preemption.
    pub look_late_ns_total: u64,
    /// The latest look after its deadline, in ns.
    pub look_late_ns_max: u64,
    /// PAUSEs executed on this machine while spinning.
    pub pauses_spun: u64,
    /// Wall time spent spinning, in ns.
    pub spin_ns: u64,
}

/// What became of one runtime (`effects.runtimes[name]`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RuntimeEffects {
    /// The primitive, in words.
    #[serde(default)]
    pub primitive: String,
    /// Ran, skipped or failed.
    pub status: RuntimeStatus,
    /// Why it was skipped or failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The toolchain's version (C, Go and Java programs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub toolchain: Option<String>,
    /// The program and variant run (`go sync`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    /// How its waiting CPU was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_cpu_from: Option<WaitCpuFrom>,
    /// The model lock's spin policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<PolicyKind>,
    /// The model lock's PAUSEs per run before each look at the lock.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modelled_pauses_before_check: Option<Vec<u64>>,
    /// The model lock's modelled spin before it blocks, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modelled_spin_before_block_ns: Option<f64>,
    /// The model lock's longest modelled PAUSE run, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modelled_longest_run_ns: Option<f64>,
    /// The model lock's statistics per run, by delay (keys by [`delay_key`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock_stats: Option<BTreeMap<String, Vec<LockStats>>>,
}

impl RuntimeEffects {
    /// A runtime's entry with its primitive and status only.
    pub fn new(runtime: Runtime, status: RuntimeStatus) -> RuntimeEffects {
        RuntimeEffects {
            primitive: runtime.primitive().to_string(),
            status,
            reason: None,
            toolchain: None,
            program: None,
            wait_cpu_from: None,
            policy: None,
            modelled_pauses_before_check: None,
            modelled_spin_before_block_ns: None,
            modelled_longest_run_ns: None,
            lock_stats: None,
        }
    }
}

/// What took effect (`effects`), as measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HandoffEffects {
    /// Whether the threads were pinned (never: the seed's threads float).
    #[serde(default)]
    pub threads_pinned: bool,
    /// What became of each runtime asked for.
    #[serde(default)]
    pub runtimes: BTreeMap<Runtime, RuntimeEffects>,
}

/// Raw samples (`samples`), one list per quantity, runtime and delay, in ms, one value per
/// run (`wall_ms.rust_std.delay_1ms`), read and written by [`HandoffSamples::get`] and
/// [`HandoffSamples::insert`] only.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HandoffSamples {
    /// Every sample list by its key (the analysis's own ratio lists among them in a saved
    /// file: see [`HandoffDerived`]).
    #[serde(flatten)]
    by_key: BTreeMap<String, Vec<f64>>,
}

impl HandoffSamples {
    /// `quantity` of `runtime`'s runs at `delay_ms`, when recorded.
    pub fn get(&self, quantity: Quantity, runtime: Runtime, delay_ms: f64) -> Option<&[f64]> {
        self.by_key
            .get(&quantity.samples(runtime, delay_ms))
            .map(Vec::as_slice)
    }

    /// Records `quantity` of `runtime`'s runs at `delay_ms`.
    pub fn insert(&mut self, quantity: Quantity, runtime: Runtime, delay_ms: f64, v: Vec<f64>) {
        self.by_key.insert(quantity.samples(runtime, delay_ms), v);
    }
}

/// What the handoff probe saves of its measurement.
pub type HandoffRaw = ProbeRaw<HandoffParams, HandoffEffects, HandoffSamples>;

/// What the analysis derives beside the figures and saves: the model lock's pair ratios and
/// where its headline was taken (or why it was not), and the charts' series.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HandoffDerived {
    /// The delay of the headline ratio, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_legacy_over_normalized_worst_delay_ms: Option<f64>,
    /// Why the headline ratio was not given (too few runs per delay).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_legacy_over_normalized_ratio_omitted: Option<String>,
    /// The legacy/normalized wall-time ratios of the run pairs per delay, in delay order
    /// (`samples["model_legacy_over_normalized.delay_1ms"]`).
    #[serde(skip)]
    pub model_ratios: Vec<(f64, Vec<f64>)>,
    /// The ideal series and each runtime's wall-time and waiting-CPU series.
    #[serde(skip)]
    pub series: Vec<Series>,
}

impl HandoffDerived {
    /// The effects this type writes (each replaced on a new analysis).
    const EFFECTS: [&'static str; 2] = [
        "model_legacy_over_normalized_worst_delay_ms",
        "model_legacy_over_normalized_ratio_omitted",
    ];

    /// The sample key of the model lock's pair ratios at a delay.
    fn ratio_samples(delay_ms: f64) -> String {
        format!("{MODEL_RATIO}.{}", delay_key(delay_ms))
    }

    /// The series called `name`, its points, when it is an x-y series.
    pub fn xy(&self, name: &str) -> Option<&[[f64; 2]]> {
        self.series.iter().find_map(|s| match s {
            Series::Xy {
                name: n, points, ..
            } if n == name => Some(points.as_slice()),
            _ => None,
        })
    }
}

impl RawRecord for HandoffDerived {
    fn write_into(&self, result: &mut ProbeResult) {
        for k in Self::EFFECTS {
            result.effects.remove(k);
        }
        result.effects.extend(crate::schema::figures::to_map(self));
        let prefix = format!("{MODEL_RATIO}.");
        result.samples.retain(|k, _| !k.starts_with(&prefix));
        for (d, v) in &self.model_ratios {
            result
                .samples
                .insert(HandoffDerived::ratio_samples(*d), v.clone());
        }
        result.series = self.series.clone();
    }

    fn read_from(result: &ProbeResult) -> Result<Self, RawError> {
        let mut d: HandoffDerived =
            crate::schema::figures::from_map(&result.effects).map_err(|source| RawError {
                probe: result.name.clone(),
                part: "effects",
                source,
            })?;
        d.model_ratios = result
            .samples
            .iter()
            .filter_map(|(k, v)| {
                let key = k.strip_prefix(MODEL_RATIO)?.strip_prefix('.')?;
                Some((delay_of_key(key)?, v.clone()))
            })
            .collect();
        d.series = result.series.clone();
        Ok(d)
    }
}

/// The handoff probe's analysis: its figures and what it derives beside them.
pub type HandoffAnalysis = WithDerived<HandoffFigures, HandoffDerived>;

/// What became of one runtime (`effects.runtimes[name].status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeStatus {
    /// Ran at every delay.
    Ok,
    /// Could not run here (a toolchain missing); `reason` says why.
    Skipped,
    /// Ran and failed; `reason` says how.
    Failed,
}

impl RuntimeStatus {
    /// The word in the JSON and in table cells.
    pub fn word(self) -> &'static str {
        match self {
            RuntimeStatus::Ok => "ok",
            RuntimeStatus::Skipped => "skipped",
            RuntimeStatus::Failed => "failed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Better;

    /// The names fingerprints already carry: a change here breaks every saved file.
    #[test]
    fn names_are_those_saved_fingerprints_carry() {
        assert_eq!(delay_label(1.0), "1");
        assert_eq!(delay_label(1.5), "1p5");
        let wall = HandoffFigure::WallMs {
            runtime: Runtime::RustStd,
            delay_ms: 2.5,
        };
        assert_eq!(wall.name(), "rust_std_delay_2p5ms_wall_ms");
        assert_eq!(
            Quantity::WaitCpuMs.samples(Runtime::GoSync, 1.0),
            "wait_cpu_ms.go_sync.delay_1ms"
        );
        assert_eq!(
            Quantity::WallMs.series(Runtime::CPthreadDefault),
            "wall_ms.c_pthread_default"
        );
        assert_eq!(
            HandoffFigure::Ideal { delay_ms: 3.0 }.name(),
            "delay_3ms_ideal_ms"
        );
        assert_eq!(
            HandoffFigure::ModelRatioAt { delay_ms: 2.5 }.name(),
            "model_legacy_over_normalized_delay_2p5ms_ratio"
        );
        assert_eq!(
            HandoffDerived::ratio_samples(1.0),
            "model_legacy_over_normalized.delay_1ms"
        );
        assert_eq!(
            serde_json::to_string(&RuntimeStatus::Skipped).unwrap(),
            "\"skipped\""
        );
    }

    #[test]
    fn every_figure_name_parses_back_to_its_parts() {
        let mut keys = vec![
            HandoffFigure::Ideal { delay_ms: 1.5 },
            HandoffFigure::ModelRatioAt { delay_ms: 9.0 },
            HandoffFigure::ModelRatio,
        ];
        for runtime in Runtime::ALL {
            keys.push(HandoffFigure::WallMs {
                runtime,
                delay_ms: 0.25,
            });
            keys.push(HandoffFigure::WaitCpuMs {
                runtime,
                delay_ms: 10.0,
            });
            keys.push(HandoffFigure::WorstSlowdown { runtime });
        }
        for k in keys {
            assert_eq!(HandoffFigure::parse(&k.name()), Some(k), "{}", k.name());
        }
        assert_eq!(HandoffFigure::parse("pause_ns"), None);
        assert_eq!(HandoffFigure::parse("rust_std_delay_xms_wall_ms"), None);
    }

    #[test]
    fn figures_keep_their_order_through_the_metrics_list() {
        let m = |v: f64| Metric::derived("x", v, "ms", Better::Lower);
        let mut f = HandoffFigures::default();
        f.set(HandoffFigure::Ideal { delay_ms: 1.0 }, m(1.0));
        for runtime in [Runtime::ModelDotnetNormalized, Runtime::RustStd] {
            f.set(
                HandoffFigure::WallMs {
                    runtime,
                    delay_ms: 1.0,
                },
                m(2.0),
            );
            f.set(HandoffFigure::WorstSlowdown { runtime }, m(3.0));
        }
        f.set(HandoffFigure::ModelRatio, m(4.0));
        let metrics = f.clone().into_metrics();
        let names: Vec<&str> = metrics.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "delay_1ms_ideal_ms",
                "model_dotnet_normalized_delay_1ms_wall_ms",
                "model_dotnet_normalized_worst_slowdown_ratio",
                "rust_std_delay_1ms_wall_ms",
                "rust_std_worst_slowdown_ratio",
                "model_legacy_over_normalized_ratio",
            ]
        );
        let back = HandoffFigures::from_metrics(&metrics);
        assert_eq!(back.into_metrics(), metrics);
        assert_eq!(f.wall_ms(Runtime::RustStd, 1.0).map(|m| m.value), Some(2.0));
    }
}
