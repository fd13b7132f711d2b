//! The seed's producer/consumer handoff across runtimes (`cpudoctor spin --handoff`).
//!
//! A worker processes each item for `work_ms` of busy work while holding a lock; a sender
//! adds an item under the lock, wakes the worker, and busy-waits `delay_ms` before the next
//! one. With a good lock the run takes `items x max(work, delay)` ([`ideal_ms`]). A lock that
//! spins past a release (the seed's .NET legacy policy on a slow PAUSE) adds up to a whole
//! spin round per item: 100 items took 2.2 s instead of 1.2 s in the seed.
//!
//! Runtimes: C pthread mutex + condvar (default and adaptive), Go `sync.Mutex`/`sync.Cond`,
//! Java `synchronized` and `ReentrantLock` (programs in `runtimes/handoff/`, built by
//! [`external`]); Rust std `Mutex`/`Condvar` and the model lock with the .NET policies run in
//! process ([`inproc`], [`model_lock`]). A runtime whose toolchain is missing is `skipped`
//! with the reason in `effects.runtimes`; the probe fails only when no runtime ran.
//!
//! Not in `probes::all()`: a full run takes minutes, far beyond `check`'s budget; it runs
//! from `cpudoctor spin --handoff` only.

pub mod external;
pub mod format;
pub mod inproc;
pub mod model_lock;

use super::{Probe, ProbeContext, ProbeFailure};
use crate::report::schema::{Better, Metric, ProbeResult, Series, Status};
use crate::spin::policy::{self, PauseScale, PolicyKind};
use format::RunRecord;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The seed's parameters: 100 items of 10 ms, sender delays 1..9 ms.
pub const SEED_ITEMS: u64 = 100;
/// Work per item in the seed, ms.
pub const SEED_WORK_MS: f64 = 10.0;
/// Sender delays of the seed, ms.
pub const SEED_DELAYS_MS: [f64; 9] = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0];
/// `--quick`: fewer items and the delays that show the pathology and its absence.
pub const QUICK_ITEMS: u64 = 20;
/// `--quick` delays, ms.
pub const QUICK_DELAYS_MS: [f64; 4] = [1.0, 2.0, 5.0, 9.0];

/// One lock implementation the handoff runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
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

    fn external(self) -> Option<(external::Toolchain, &'static str)> {
        use external::Toolchain::*;
        match self {
            Runtime::CPthreadDefault => Some((C, "default")),
            Runtime::CPthreadAdaptive => Some((C, "adaptive")),
            Runtime::GoSync => Some((Go, "sync")),
            Runtime::JavaSynchronized => Some((Java, "synchronized")),
            Runtime::JavaReentrantLock => Some((Java, "reentrantlock")),
            _ => None,
        }
    }

    fn policy(self) -> Option<PolicyKind> {
        match self {
            Runtime::ModelDotnetLegacy => Some(PolicyKind::DotnetLegacy),
            Runtime::ModelDotnetNormalized => Some(PolicyKind::DotnetNormalized),
            _ => None,
        }
    }
}

/// The ideal run time: the worker is busy `work_ms` per item and the sender `delay_ms`, and
/// each waits for the other only as long as the slower one needs, so the run lasts
/// `items x max(work, delay)`.
pub fn ideal_ms(items: u64, work_ms: f64, delay_ms: f64) -> f64 {
    items as f64 * work_ms.max(delay_ms)
}

/// `1` for 1 ms, `1p5` for 1.5 ms: delays as they appear in metric names.
pub fn delay_label(delay_ms: f64) -> String {
    format!("{delay_ms}").replace('.', "p")
}

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct HandoffConfig {
    /// Items per run.
    pub items: u64,
    /// Busy work per item under the lock, ms.
    pub work_ms: f64,
    /// Sender delays, ms.
    pub delays_ms: Vec<f64>,
    /// Runs per runtime and delay (the median is reported).
    pub repetitions: u32,
    /// Runtimes to run, in table order.
    pub runtimes: Vec<Runtime>,
    /// PAUSE cost of the CPU the model lock models; `None` models this machine.
    pub model_pause_ns: Option<f64>,
    /// Core count the legacy policy's round limit scales with (20000 x cores).
    pub cores: u64,
    /// Where the C, Go and Java programs are built.
    pub cache_dir: PathBuf,
}

impl HandoffConfig {
    /// The seed's experiment on every runtime, modelling this machine's PAUSE.
    pub fn seed(cores: u64) -> HandoffConfig {
        HandoffConfig {
            items: SEED_ITEMS,
            work_ms: SEED_WORK_MS,
            delays_ms: SEED_DELAYS_MS.to_vec(),
            repetitions: 1,
            runtimes: Runtime::ALL.to_vec(),
            model_pause_ns: None,
            cores,
            cache_dir: external::default_cache_dir(),
        }
    }
}

/// The handoff probe for one configuration.
pub struct HandoffProbe {
    /// What to run.
    pub config: HandoffConfig,
}

/// PAUSEs per calibration sample: ~1 ms at 25 ns. Long on purpose: the legacy rounds are
/// runs of up to hundreds of thousands of back-to-back PAUSEs, and a hypervisor's pause-loop
/// exits (seen on this KVM guest) make long runs cost more per PAUSE than short ones.
const CALIBRATION_PAUSES: u64 = 40_000;

#[cfg(target_arch = "x86_64")]
fn measure_pause_ns(ctx: &ProbeContext) -> f64 {
    let clock = ctx.clock;
    crate::arch::pause_loop(CALIBRATION_PAUSES / 4);
    let samples: Vec<f64> = (0..9)
        .map(|_| {
            let t0 = clock.start();
            crate::arch::pause_loop(CALIBRATION_PAUSES);
            let t1 = clock.end();
            clock.ticks_to_ns(t1 - t0) / CALIBRATION_PAUSES as f64
        })
        .collect();
    crate::measure::stats::median(&samples).unwrap_or(0.0)
}

#[cfg(not(target_arch = "x86_64"))]
fn measure_pause_ns(_ctx: &ProbeContext) -> f64 {
    0.0
}

/// How one runtime fared.
enum Outcome {
    Ok {
        runs: Vec<RunRecord>,
        detail: BTreeMap<String, Value>,
    },
    Skipped(String),
    Failed(String),
}

impl Probe for HandoffProbe {
    fn name(&self) -> &'static str {
        "handoff"
    }

    fn about(&self) -> &'static str {
        "producer/consumer lock handoff per runtime (the seed's 10 ms worker, 1-9 ms sender)"
    }

    fn run(&self, ctx: &ProbeContext) -> Result<ProbeResult, ProbeFailure> {
        let cfg = &self.config;
        let wants_model = cfg.runtimes.iter().any(|r| r.policy().is_some());
        let model_ok = crate::arch::require_x86_64();
        let measured_pause_ns = if wants_model && model_ok.is_ok() {
            Some(measure_pause_ns(ctx))
        } else {
            None
        };
        let scale = measured_pause_ns.map(|measured| PauseScale {
            modelled_ns: cfg.model_pause_ns.unwrap_or(measured),
            measured_ns: measured,
        });

        let per_runtime = cfg.delays_ms.len() as u64 * cfg.repetitions as u64;
        ctx.progress
            .begin("handoff", per_runtime * cfg.runtimes.len() as u64);
        let mut outcomes = Vec::new();
        for &rt in &cfg.runtimes {
            let outcome = if let Some((tc, variant)) = rt.external() {
                run_external(cfg, tc, variant)
            } else if let Some(kind) = rt.policy() {
                match (&model_ok, &scale) {
                    (Err(reason), _) => Outcome::Skipped(reason.clone()),
                    (Ok(()), Some(scale)) => run_model(cfg, kind, scale, ctx),
                    (Ok(()), None) => Outcome::Failed("PAUSE was not measured".into()),
                }
            } else {
                let runs = each_run(cfg, ctx, |delay, rep| {
                    inproc::run_once(
                        &inproc::StdMonitor::default(),
                        cfg.items,
                        cfg.work_ms,
                        delay,
                        rep,
                    )
                });
                Outcome::Ok {
                    runs,
                    detail: BTreeMap::new(),
                }
            };
            // In-process runtimes advance per run; a program reports all its runs at once.
            if rt.external().is_some() || !matches!(outcome, Outcome::Ok { .. }) {
                ctx.progress.advance(per_runtime);
            }
            outcomes.push((rt, check_runs(cfg, outcome)));
        }
        ctx.progress.finish();

        if !outcomes
            .iter()
            .any(|(_, o)| matches!(o, Outcome::Ok { .. }))
        {
            let why = outcomes
                .iter()
                .map(|(rt, o)| match o {
                    Outcome::Skipped(r) | Outcome::Failed(r) => format!("{}: {r}", rt.name()),
                    Outcome::Ok { .. } => unreachable!(),
                })
                .collect::<Vec<_>>()
                .join("; ");
            let all_skipped = outcomes
                .iter()
                .all(|(_, o)| matches!(o, Outcome::Skipped(_)));
            let msg = format!("no runtime ran ({why})");
            return Err(if all_skipped {
                ProbeFailure::Skipped(msg)
            } else {
                ProbeFailure::Failed(msg)
            });
        }
        Ok(assemble(cfg, measured_pause_ns, scale, outcomes))
    }
}

fn each_run(
    cfg: &HandoffConfig,
    ctx: &ProbeContext,
    mut one: impl FnMut(f64, u32) -> RunRecord,
) -> Vec<RunRecord> {
    let mut runs = Vec::new();
    for &delay in &cfg.delays_ms {
        for rep in 0..cfg.repetitions {
            runs.push(one(delay, rep));
            ctx.progress.advance(1);
        }
    }
    runs
}

fn run_external(cfg: &HandoffConfig, tc: external::Toolchain, variant: &str) -> Outcome {
    let built = match external::build(tc, &cfg.cache_dir) {
        Ok(b) => b,
        Err(external::BuildError::Missing(why)) => {
            return Outcome::Skipped(format!("{} toolchain missing: {why}", tc.name()));
        }
        Err(external::BuildError::Failed(why)) => return Outcome::Failed(why),
    };
    let args = external::RunArgs {
        variant,
        items: cfg.items,
        work_ms: cfg.work_ms,
        repetitions: cfg.repetitions,
        delays_ms: &cfg.delays_ms,
    };
    match external::run(&built, &args) {
        Ok(out) => Outcome::Ok {
            runs: out.runs,
            detail: BTreeMap::from([
                ("toolchain".into(), json!(built.version)),
                (
                    "program".into(),
                    json!(format!("{} {}", out.runtime, out.variant)),
                ),
            ]),
        },
        Err(e) => Outcome::Failed(e),
    }
}

fn run_model(
    cfg: &HandoffConfig,
    kind: PolicyKind,
    scale: &PauseScale,
    ctx: &ProbeContext,
) -> Outcome {
    let plan = policy::plan(kind, scale.modelled_ns, cfg.cores);
    let mut stats_by_delay = BTreeMap::new();
    let runs = each_run(cfg, ctx, |delay, rep| {
        let monitor = model_lock::ModelMonitor::new(model_lock::ModelLock::for_plan(&plan, scale));
        let r = inproc::run_once(&monitor, cfg.items, cfg.work_ms, delay, rep);
        let s = monitor.stats();
        let entry = stats_by_delay
            .entry(format!("delay_{}ms", delay_label(delay)))
            .or_insert_with(Vec::new);
        entry.push(json!(s));
        r
    });
    let real_pauses: u64 = scale.apply(&plan).iter().sum();
    Outcome::Ok {
        runs,
        detail: BTreeMap::from([
            ("policy".into(), json!(kind)),
            (
                "modelled_pauses_before_check".into(),
                json!(plan.pauses_before_check),
            ),
            (
                "modelled_spin_before_block_ns".into(),
                json!(plan.total_pauses() as f64 * scale.modelled_ns),
            ),
            (
                "modelled_longest_run_ns".into(),
                json!(plan.longest_run_pauses() as f64 * scale.modelled_ns),
            ),
            ("real_pauses_before_block".into(), json!(real_pauses)),
            ("lock_stats".into(), json!(stats_by_delay)),
        ]),
    }
}

/// Turns an `Ok` whose runs are incomplete into a failure: a run that lost items says
/// nothing about handoff time.
fn check_runs(cfg: &HandoffConfig, outcome: Outcome) -> Outcome {
    let Outcome::Ok { runs, detail } = outcome else {
        return outcome;
    };
    let expected = cfg.delays_ms.len() * cfg.repetitions as usize;
    if runs.len() != expected {
        return Outcome::Failed(format!("{} runs reported, {expected} expected", runs.len()));
    }
    if let Some(r) = runs.iter().find(|r| r.items_done != cfg.items) {
        return Outcome::Failed(format!(
            "at delay {} ms the worker processed {} of {} items",
            r.delay_ms, r.items_done, cfg.items
        ));
    }
    Outcome::Ok { runs, detail }
}

fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

fn assemble(
    cfg: &HandoffConfig,
    measured_pause_ns: Option<f64>,
    scale: Option<PauseScale>,
    outcomes: Vec<(Runtime, Outcome)>,
) -> ProbeResult {
    let mut r = ProbeResult::new("handoff", Status::Ok);
    r.params.insert("items".into(), json!(cfg.items));
    r.params.insert("work_ms".into(), json!(cfg.work_ms));
    r.params.insert("delays_ms".into(), json!(cfg.delays_ms));
    r.params
        .insert("repetitions".into(), json!(cfg.repetitions));
    r.params.insert(
        "runtimes".into(),
        json!(cfg.runtimes.iter().map(|r| r.name()).collect::<Vec<_>>()),
    );
    r.params
        .insert("model_pause_ns".into(), json!(cfg.model_pause_ns));
    r.params.insert("model_cores".into(), json!(cfg.cores));
    r.params.insert(
        "sender_wait".into(),
        json!("busy (as the seed's SimulateWork)"),
    );

    r.effects.insert("threads_pinned".into(), json!(false));
    if let (Some(measured), Some(scale)) = (measured_pause_ns, scale) {
        r.effects
            .insert("measured_pause_ns".into(), json!(measured));
        r.effects.insert(
            "pause_calibration_run_pauses".into(),
            json!(CALIBRATION_PAUSES),
        );
        r.effects
            .insert("modelled_pause_ns".into(), json!(scale.modelled_ns));
        r.effects.insert(
            "real_pauses_per_modelled_pause".into(),
            json!(scale.factor()),
        );
    }

    let ideal: Vec<[f64; 2]> = cfg
        .delays_ms
        .iter()
        .map(|&d| [d, ideal_ms(cfg.items, cfg.work_ms, d)])
        .collect();
    for &[d, ideal] in &ideal {
        r.metrics.push(Metric::derived(
            &format!("delay_{}ms_ideal_ms", delay_label(d)),
            ideal,
            "ms",
            Better::Neither,
        ));
    }
    r.series.push(Series::Xy {
        name: "ideal_ms".into(),
        x_label: "delay_ms".into(),
        y_label: "wall_ms".into(),
        points: ideal.clone(),
    });

    let mut runtimes = serde_json::Map::new();
    let mut worst_wall_by_delay: BTreeMap<Runtime, Vec<f64>> = BTreeMap::new();
    for (rt, outcome) in outcomes {
        let name = rt.name();
        let mut entry = serde_json::Map::new();
        entry.insert("primitive".into(), json!(rt.primitive()));
        match outcome {
            Outcome::Skipped(reason) => {
                entry.insert("status".into(), json!("skipped"));
                entry.insert("reason".into(), json!(reason));
            }
            Outcome::Failed(reason) => {
                entry.insert("status".into(), json!("failed"));
                entry.insert("reason".into(), json!(reason));
            }
            Outcome::Ok { runs, detail } => {
                entry.insert("status".into(), json!("ok"));
                entry.extend(detail);
                let mut wall_points = Vec::new();
                let mut wait_points = Vec::new();
                let mut slowdown: f64 = 0.0;
                let mut walls = Vec::new();
                for &d in &cfg.delays_ms {
                    let at: Vec<&RunRecord> = runs.iter().filter(|x| x.delay_ms == d).collect();
                    let label = delay_label(d);
                    let wall: Vec<f64> = at.iter().map(|x| ms(x.wall_ns)).collect();
                    let wait_cpu: Vec<f64> = at.iter().map(|x| ms(x.wait_cpu_ns())).collect();
                    let lock_wait: Vec<f64> =
                        at.iter().map(|x| ms(x.sender_lock_wait_ns)).collect();
                    let process: Vec<f64> = at.iter().map(|x| ms(x.process_cpu_ns)).collect();
                    let wall_m = Metric::from_samples(
                        &format!("{name}_delay_{label}ms_wall_ms"),
                        "ms",
                        Better::Lower,
                        &wall,
                    );
                    let wait_m = Metric::from_samples(
                        &format!("{name}_delay_{label}ms_wait_cpu_ms"),
                        "ms",
                        Better::Lower,
                        &wait_cpu,
                    );
                    if let (Some(w), Some(c)) = (&wall_m, &wait_m) {
                        wall_points.push([d, w.value]);
                        wait_points.push([d, c.value]);
                        slowdown = slowdown.max(w.value / ideal_ms(cfg.items, cfg.work_ms, d));
                        walls.push(w.value);
                    }
                    r.metrics.extend(wall_m);
                    r.metrics.extend(wait_m);
                    for (what, v) in [
                        ("wall_ms", wall),
                        ("wait_cpu_ms", wait_cpu),
                        ("sender_lock_wait_ms", lock_wait),
                        ("process_cpu_ms", process),
                    ] {
                        r.samples
                            .insert(format!("{what}.{name}.delay_{label}ms"), v);
                    }
                }
                r.metrics.push(Metric::derived(
                    &format!("{name}_worst_slowdown_ratio"),
                    slowdown,
                    "ratio",
                    Better::Lower,
                ));
                worst_wall_by_delay.insert(rt, walls);
                r.series.push(Series::Xy {
                    name: format!("wall_ms.{name}"),
                    x_label: "delay_ms".into(),
                    y_label: "wall_ms".into(),
                    points: wall_points,
                });
                r.series.push(Series::Xy {
                    name: format!("wait_cpu_ms.{name}"),
                    x_label: "delay_ms".into(),
                    y_label: "wait_cpu_ms".into(),
                    points: wait_points,
                });
            }
        }
        runtimes.insert(name.into(), Value::Object(entry));
    }
    r.effects.insert("runtimes".into(), Value::Object(runtimes));

    if let (Some(legacy), Some(normalized)) = (
        worst_wall_by_delay.get(&Runtime::ModelDotnetLegacy),
        worst_wall_by_delay.get(&Runtime::ModelDotnetNormalized),
    ) && let Some((i, ratio)) = legacy
        .iter()
        .zip(normalized)
        .map(|(l, n)| l / n)
        .enumerate()
        .max_by(|a, b| a.1.total_cmp(&b.1))
    {
        r.metrics.push(Metric::derived(
            "model_legacy_over_normalized_ratio",
            ratio,
            "ratio",
            Better::Lower,
        ));
        r.effects.insert(
            "model_legacy_over_normalized_worst_delay_ms".into(),
            json!(cfg.delays_ms[i]),
        );
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ideal_is_the_slower_side_times_items() {
        // The seed: 100 x 10 ms whatever the delay below 10 ms.
        assert_eq!(ideal_ms(100, 10.0, 1.0), 1000.0);
        assert_eq!(ideal_ms(100, 10.0, 9.0), 1000.0);
        assert_eq!(ideal_ms(100, 10.0, 12.0), 1200.0);
    }

    #[test]
    fn delay_labels_fit_metric_names() {
        assert_eq!(delay_label(1.0), "1");
        assert_eq!(delay_label(1.5), "1p5");
    }

    #[test]
    fn runtimes_select_by_name_or_group() {
        assert_eq!(Runtime::select("rust_std"), vec![Runtime::RustStd]);
        assert_eq!(
            Runtime::select("c"),
            vec![Runtime::CPthreadDefault, Runtime::CPthreadAdaptive]
        );
        assert_eq!(Runtime::select("model").len(), 2);
        assert_eq!(Runtime::select("java").len(), 2);
        assert!(Runtime::select("dotnet").is_empty());
        for r in Runtime::ALL {
            assert_eq!(Runtime::by_name(r.name()), Some(r));
        }
    }

    fn record(delay_ms: f64, wall_ms: f64) -> RunRecord {
        RunRecord {
            delay_ms,
            rep: 0,
            items: 10,
            work_ms: 10.0,
            items_done: 10,
            wall_ns: (wall_ms * 1e6) as u64,
            sender_lock_wait_ns: 0,
            sender_wait_cpu_ns: 2_000_000,
            worker_wait_cpu_ns: 1_000_000,
            process_cpu_ns: 0,
        }
    }

    fn cfg() -> HandoffConfig {
        HandoffConfig {
            items: 10,
            work_ms: 10.0,
            delays_ms: vec![1.0, 5.0],
            repetitions: 1,
            runtimes: vec![Runtime::ModelDotnetLegacy, Runtime::ModelDotnetNormalized],
            model_pause_ns: Some(43.0),
            cores: 24,
            cache_dir: PathBuf::from("/nonexistent"),
        }
    }

    #[test]
    fn assemble_reports_metrics_series_and_the_model_ratio() {
        let ok = |walls: [f64; 2]| Outcome::Ok {
            runs: vec![record(1.0, walls[0]), record(5.0, walls[1])],
            detail: BTreeMap::new(),
        };
        let r = assemble(
            &cfg(),
            Some(25.0),
            Some(PauseScale {
                modelled_ns: 43.0,
                measured_ns: 25.0,
            }),
            vec![
                (Runtime::ModelDotnetLegacy, ok([220.0, 101.0])),
                (Runtime::ModelDotnetNormalized, ok([110.0, 101.0])),
                (
                    Runtime::GoSync,
                    Outcome::Skipped("go toolchain missing".into()),
                ),
            ],
        );
        assert_eq!(
            r.metric("model_dotnet_legacy_delay_1ms_wall_ms")
                .unwrap()
                .value,
            220.0
        );
        assert_eq!(
            r.metric("model_dotnet_legacy_delay_1ms_wait_cpu_ms")
                .unwrap()
                .value,
            3.0
        );
        assert_eq!(r.metric("delay_1ms_ideal_ms").unwrap().value, 100.0);
        assert_eq!(
            r.metric("model_dotnet_legacy_worst_slowdown_ratio")
                .unwrap()
                .value,
            2.2
        );
        assert_eq!(
            r.metric("model_legacy_over_normalized_ratio")
                .unwrap()
                .value,
            2.0
        );
        assert_eq!(
            r.effects["model_legacy_over_normalized_worst_delay_ms"],
            json!(1.0)
        );
        assert_eq!(r.effects["runtimes"]["go_sync"]["status"], "skipped");
        assert_eq!(r.effects["real_pauses_per_modelled_pause"], json!(1.72));
        assert!(r.series.iter().any(|s| matches!(s,
            Series::Xy { name, points, .. } if name == "wall_ms.model_dotnet_legacy"
                && points == &vec![[1.0, 220.0], [5.0, 101.0]])));
        assert!(r.metrics.iter().all(|m| {
            m.name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        }));
    }

    #[test]
    fn lost_items_turn_a_runtime_into_a_failure() {
        let mut bad = record(1.0, 100.0);
        bad.items_done = 9;
        let o = check_runs(
            &cfg(),
            Outcome::Ok {
                runs: vec![bad, record(5.0, 100.0)],
                detail: BTreeMap::new(),
            },
        );
        assert!(matches!(o, Outcome::Failed(ref m) if m.contains("9 of 10")));
        let short = check_runs(
            &cfg(),
            Outcome::Ok {
                runs: vec![record(1.0, 100.0)],
                detail: BTreeMap::new(),
            },
        );
        assert!(matches!(short, Outcome::Failed(ref m) if m.contains("1 runs reported")));
    }
}
