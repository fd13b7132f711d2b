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
//! with the reason in `effects.runtimes`; the probe fails only when no runtime ran. Every
//! runtime's runs are checked against the request, by position ([`check_runs`]), and turned
//! into the raw record, and the raw record into figures, by [`result`].
//!
//! The model lock models a PAUSE cost it is given ([`ModelPause`]): `--pause-ns`, or this
//! machine's from the `pause` probe of the same run. It does not time PAUSE itself.
//!
//! Not in `probes::all()`: a full run takes minutes, far beyond `check`'s budget; it runs
//! from `cpudoctor spin --handoff` only.

pub mod external;
pub mod format;
pub mod inproc;
pub mod model_lock;
pub mod result;

use super::{Measurement, ProbeContext, ProbeFailure};
use crate::machine::Machine;
use crate::names::probe;
use crate::schema::figures::Analysis;
use crate::schema::probes::handoff::{
    HandoffAnalysis, HandoffRaw, LockStats, RuntimeEffects, RuntimeStatus, WaitCpuFrom,
};
use crate::schema::{ProbeResult, Status};
use crate::spin::policy::{self, PolicyKind};
use format::RunRecord;
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
/// Runs per runtime and delay unless told otherwise: the fewest whose median one slow run
/// cannot move, which the model lock's legacy/normalized ratio needs.
pub const DEFAULT_REPETITIONS: u32 = 3;

pub use crate::schema::probes::handoff::Runtime;

/// The program of an external runtime: its toolchain and variant.
fn external_of(rt: Runtime) -> Option<(external::Toolchain, &'static str)> {
    use external::Toolchain::*;
    match rt {
        Runtime::CPthreadDefault => Some((C, "default")),
        Runtime::CPthreadAdaptive => Some((C, "adaptive")),
        Runtime::GoSync => Some((Go, "sync")),
        Runtime::JavaSynchronized => Some((Java, "synchronized")),
        Runtime::JavaReentrantLock => Some((Java, "reentrantlock")),
        _ => None,
    }
}

/// The ideal run time: the worker is busy `work_ms` per item and the sender `delay_ms`, and
/// each waits for the other only as long as the slower one needs, so the run lasts
/// `items x max(work, delay)`.
pub fn ideal_ms(items: u64, work_ms: f64, delay_ms: f64) -> f64 {
    items as f64 * work_ms.max(delay_ms)
}

pub use crate::schema::probes::handoff::delay_label;

/// The PAUSE cost the model lock models.
#[derive(Debug, Clone, PartialEq)]
pub enum ModelPause {
    /// Given on the command line (`--pause-ns`): another CPU modelled here.
    Given(f64),
    /// This machine's, from the `pause` probe of the same run (`pause_ns`).
    Measured(f64),
    /// Not known: the model lock is skipped with this reason.
    Unknown(String),
}

impl ModelPause {
    /// The cost in ns, when known.
    pub fn ns(&self) -> Option<f64> {
        match *self {
            ModelPause::Given(ns) | ModelPause::Measured(ns) => Some(ns),
            ModelPause::Unknown(_) => None,
        }
    }

    /// Where the cost comes from, in words, for the fingerprint.
    pub fn source(&self) -> &'static str {
        match self {
            ModelPause::Given(_) => "given",
            ModelPause::Measured(_) => "this machine's pause_ns, from the pause probe",
            ModelPause::Unknown(_) => "unknown",
        }
    }
}

/// What to run.
#[derive(Debug, Clone, PartialEq)]
pub struct HandoffConfig {
    /// Items per run.
    pub items: u64,
    /// Busy work per item under the lock, ms.
    pub work_ms: f64,
    /// Sender delays, ms, each once.
    pub delays_ms: Vec<f64>,
    /// Runs per runtime and delay (the median is reported).
    pub repetitions: u32,
    /// Runtimes to run, in table order.
    pub runtimes: Vec<Runtime>,
    /// PAUSE cost of the CPU the model lock models.
    pub model_pause: ModelPause,
    /// Core count the legacy policy's round limit scales with (20000 x cores).
    pub cores: u64,
    /// Where the C, Go and Java programs are built.
    pub cache_dir: PathBuf,
}

impl HandoffConfig {
    /// The seed's experiment on every runtime, the model lock modelling `model_pause`.
    pub fn seed(cores: u64, model_pause: ModelPause) -> HandoffConfig {
        HandoffConfig {
            items: SEED_ITEMS,
            work_ms: SEED_WORK_MS,
            delays_ms: SEED_DELAYS_MS.to_vec(),
            repetitions: DEFAULT_REPETITIONS,
            runtimes: Runtime::ALL.to_vec(),
            model_pause,
            cores,
            cache_dir: external::default_cache_dir(),
        }
    }

    /// Where run `i` of a runtime belongs: (delay index, repetition). Runs come delay by
    /// delay, each delay's repetitions together.
    pub fn position(&self, i: usize) -> (usize, u32) {
        let reps = self.repetitions.max(1) as usize;
        (i / reps, (i % reps) as u32)
    }
}

/// The handoff probe for one configuration.
pub struct HandoffProbe {
    /// What to run.
    pub config: HandoffConfig,
}

/// How one runtime fared.
pub(crate) enum Outcome {
    Ok {
        runs: Vec<RunRecord>,
        /// What the runtime's entry in `effects.runtimes` says beside its status.
        effects: RuntimeEffects,
    },
    Skipped(String),
    Failed(String),
}

impl Measurement for HandoffProbe {
    type Raw = HandoffRaw;
    type Figures = HandoffAnalysis;
    const NAME: &'static str = probe::HANDOFF;
    const ABOUT: &'static str = "producer/consumer lock handoff per runtime (the Skylake PAUSE case's 10 ms worker, 1-9 ms sender)";

    fn analyse(raw: &HandoffRaw, _machine: &Machine) -> Analysis<HandoffAnalysis> {
        result::analyse(raw)
    }

    fn measure(&self, ctx: &ProbeContext) -> Result<HandoffRaw, ProbeFailure> {
        let cfg = &self.config;
        // The in-process runs take two threads at once, an external program's two readers.
        crate::measure::threads::check_can_start(2)?;
        let per_runtime = cfg.delays_ms.len() as u64 * cfg.repetitions as u64;
        ctx.progress
            .begin(probe::HANDOFF, per_runtime * cfg.runtimes.len() as u64);
        let mut outcomes: BTreeMap<Runtime, Outcome> = BTreeMap::new();
        let models: Vec<Runtime> = cfg
            .runtimes
            .iter()
            .copied()
            .filter(|r| r.policy().is_some())
            .collect();
        for &rt in cfg.runtimes.iter().filter(|r| r.policy().is_none()) {
            let outcome = if let Some((tc, variant)) = external_of(rt) {
                let o = run_external(cfg, rt, tc, variant);
                // A program reports all its runs at once.
                ctx.progress.advance(per_runtime);
                o
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
                    effects: RuntimeEffects {
                        wait_cpu_from: Some(WaitCpuFrom::ThreadClocks),
                        ..RuntimeEffects::new(rt, RuntimeStatus::Ok)
                    },
                }
            };
            outcomes.insert(rt, check_runs(cfg, outcome));
        }
        for (rt, outcome) in run_models(cfg, &models, ctx) {
            if !matches!(outcome, Outcome::Ok { .. }) {
                ctx.progress.advance(per_runtime);
            }
            outcomes.insert(rt, check_runs(cfg, outcome));
        }
        ctx.progress.finish();
        let outcomes: Vec<(Runtime, Outcome)> = cfg
            .runtimes
            .iter()
            .filter_map(|rt| outcomes.remove(rt).map(|o| (*rt, o)))
            .collect();

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
        Ok(result::record(cfg, outcomes))
    }
}

/// A saved handoff result analysed again by this build ([`Probe::reanalyze`] of a probe not in
/// [`super::all`]: the handoff runs from `spin --handoff` only, but its saved files are judged
/// like every other); `None` for another probe's result, one that did not run, or one whose
/// raw record this build cannot read (its saved figures stand).
///
/// [`Probe::reanalyze`]: super::Probe::reanalyze
pub fn reanalyze(saved: &ProbeResult, machine: &Machine) -> Option<ProbeResult> {
    if saved.name != probe::HANDOFF || saved.status != Status::Ok {
        return None;
    }
    let raw: HandoffRaw = saved.raw().ok()?;
    let mut fresh = saved.clone();
    HandoffProbe::analyse(&raw, machine).write_into(&mut fresh);
    Some(fresh)
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

fn run_external(
    cfg: &HandoffConfig,
    rt: Runtime,
    tc: external::Toolchain,
    variant: &str,
) -> Outcome {
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
        Ok(out) => {
            let from = out
                .runs
                .first()
                .map_or(WaitCpuFrom::ThreadClocks, |r| r.wait_cpu.source());
            Outcome::Ok {
                effects: RuntimeEffects {
                    toolchain: Some(built.version),
                    program: Some(format!("{} {}", out.runtime, out.variant)),
                    wait_cpu_from: Some(from),
                    ..RuntimeEffects::new(rt, RuntimeStatus::Ok)
                },
                runs: out.runs,
            }
        }
        Err(e) => Outcome::Failed(e),
    }
}

/// Runs the model runtimes `models` (one per policy), alternating them run by run so the
/// legacy and normalized runs at one delay meet the same machine load; their ratio is taken
/// pair by pair.
fn run_models(
    cfg: &HandoffConfig,
    models: &[Runtime],
    ctx: &ProbeContext,
) -> Vec<(Runtime, Outcome)> {
    if models.is_empty() {
        return Vec::new();
    }
    let skip = |why: String| {
        models
            .iter()
            .map(|&rt| (rt, Outcome::Skipped(why.clone())))
            .collect()
    };
    if let Err(why) = crate::arch::require_x86_64() {
        return skip(why);
    }
    let pause_ns = match &cfg.model_pause {
        ModelPause::Unknown(why) => return skip(why.clone()),
        known => known.ns().expect("known"),
    };
    let plans: Vec<(PolicyKind, policy::SpinPlan)> = models
        .iter()
        .map(|rt| {
            let kind = rt.policy().expect("model runtime");
            (kind, policy::plan(kind, pause_ns, cfg.cores))
        })
        .collect();
    let mut runs = vec![Vec::new(); models.len()];
    let mut stats: Vec<BTreeMap<String, Vec<LockStats>>> = vec![BTreeMap::new(); models.len()];
    for &delay in &cfg.delays_ms {
        for rep in 0..cfg.repetitions {
            for (i, (_, plan)) in plans.iter().enumerate() {
                let monitor = model_lock::ModelMonitor::new(model_lock::ModelLock::new(
                    plan.clone(),
                    pause_ns,
                ));
                runs[i].push(inproc::run_once(
                    &monitor,
                    cfg.items,
                    cfg.work_ms,
                    delay,
                    rep,
                ));
                stats[i]
                    .entry(crate::schema::probes::handoff::delay_key(delay))
                    .or_default()
                    .push(monitor.stats());
                ctx.progress.advance(1);
            }
        }
    }
    models
        .iter()
        .zip(plans)
        .zip(runs.into_iter().zip(stats))
        .map(|((&rt, (kind, plan)), (runs, stats))| {
            let effects = RuntimeEffects {
                policy: Some(kind),
                modelled_pauses_before_check: Some(plan.pauses_before_check.clone()),
                modelled_spin_before_block_ns: Some(plan.total_pauses() as f64 * pause_ns),
                modelled_longest_run_ns: Some(plan.longest_run_pauses() as f64 * pause_ns),
                lock_stats: Some(stats),
                wait_cpu_from: Some(WaitCpuFrom::ThreadClocks),
                ..RuntimeEffects::new(rt, RuntimeStatus::Ok)
            };
            (rt, Outcome::Ok { runs, effects })
        })
        .collect()
}

/// True when `got`, a figure a program echoed back, is `want` to the precision a program
/// prints (15 significant digits or better).
fn same_figure(got: f64, want: f64) -> bool {
    (got - want).abs() <= 1e-9 * want.abs().max(1.0)
}

/// Turns an `Ok` whose runs are not the ones asked for into a failure. Runs are matched to
/// the request by position (delay by delay, repetitions together), and each must say it ran
/// that delay, repetition, item count and work, and processed every item: a run that lost
/// items, or ran something else, says nothing about this handoff.
pub(crate) fn check_runs(cfg: &HandoffConfig, outcome: Outcome) -> Outcome {
    let Outcome::Ok { runs, effects } = outcome else {
        return outcome;
    };
    let expected = cfg.delays_ms.len() * cfg.repetitions as usize;
    if runs.len() != expected {
        return Outcome::Failed(format!("{} runs reported, {expected} expected", runs.len()));
    }
    for (i, r) in runs.iter().enumerate() {
        let (d, rep) = cfg.position(i);
        let want_delay = cfg.delays_ms[d];
        let wrong = if !same_figure(r.delay_ms, want_delay) || r.rep != rep {
            Some(format!(
                "run {} is delay {} ms repetition {}, expected delay {want_delay} ms repetition {rep}",
                i + 1,
                r.delay_ms,
                r.rep
            ))
        } else if r.items != cfg.items || !same_figure(r.work_ms, cfg.work_ms) {
            Some(format!(
                "run {} used {} items of {} ms, expected {} of {} ms",
                i + 1,
                r.items,
                r.work_ms,
                cfg.items,
                cfg.work_ms
            ))
        } else if r.items_done != cfg.items {
            Some(format!(
                "at delay {want_delay} ms the worker processed {} of {} items",
                r.items_done, cfg.items
            ))
        } else {
            None
        };
        if let Some(why) = wrong {
            return Outcome::Failed(why);
        }
    }
    Outcome::Ok { runs, effects }
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

    pub(crate) fn record(delay_ms: f64, rep: u32, wall_ms: f64) -> RunRecord {
        RunRecord {
            delay_ms,
            rep,
            items: 10,
            work_ms: 10.0,
            items_done: 10,
            wall_ns: (wall_ms * 1e6) as u64,
            sender_lock_wait_ns: 0,
            wait_cpu: format::WaitCpu::PerThread {
                sender_ns: 2_000_000,
                worker_ns: 1_000_000,
            },
            process_cpu_ns: 0,
        }
    }

    pub(crate) fn cfg(repetitions: u32) -> HandoffConfig {
        HandoffConfig {
            items: 10,
            work_ms: 10.0,
            delays_ms: vec![1.0, 5.0],
            repetitions,
            runtimes: vec![Runtime::ModelDotnetLegacy, Runtime::ModelDotnetNormalized],
            model_pause: ModelPause::Given(43.0),
            cores: 24,
            cache_dir: PathBuf::from("/nonexistent"),
        }
    }

    fn ok(runs: Vec<RunRecord>) -> Outcome {
        Outcome::Ok {
            runs,
            effects: RuntimeEffects::new(Runtime::RustStd, RuntimeStatus::Ok),
        }
    }

    fn failure(o: Outcome) -> String {
        match o {
            Outcome::Failed(m) => m,
            _ => panic!("expected a failure"),
        }
    }

    #[test]
    fn lost_items_turn_a_runtime_into_a_failure() {
        let mut bad = record(1.0, 0, 100.0);
        bad.items_done = 9;
        let m = failure(check_runs(&cfg(1), ok(vec![bad, record(5.0, 0, 100.0)])));
        assert!(m.contains("9 of 10"), "{m}");
        let m = failure(check_runs(&cfg(1), ok(vec![record(1.0, 0, 100.0)])));
        assert!(m.contains("1 runs reported"), "{m}");
    }

    // Regression: runs were matched to delays by float equality and never checked against the
    // request, so a program that ran other delays, or its delays out of order, went unnoticed.
    #[test]
    fn runs_are_checked_by_position_against_the_request() {
        let swapped = vec![record(5.0, 0, 100.0), record(1.0, 0, 100.0)];
        let m = failure(check_runs(&cfg(1), ok(swapped)));
        assert!(m.contains("run 1 is delay 5 ms"), "{m}");
        let reps = vec![
            record(1.0, 0, 100.0),
            record(1.0, 0, 100.0),
            record(5.0, 0, 100.0),
            record(5.0, 1, 100.0),
        ];
        let m = failure(check_runs(&cfg(2), ok(reps)));
        assert!(m.contains("run 2 is delay 1 ms repetition 0"), "{m}");
        let mut other_work = record(5.0, 0, 100.0);
        other_work.work_ms = 2.0;
        let m = failure(check_runs(
            &cfg(1),
            ok(vec![record(1.0, 0, 100.0), other_work]),
        ));
        assert!(m.contains("10 items of 2 ms, expected 10 of 10 ms"), "{m}");
        // A delay echoed to 15 significant digits is the same delay.
        let mut c = cfg(1);
        c.delays_ms = vec![0.1 + 0.2, 5.0];
        let echoed = vec![record(0.3, 0, 100.0), record(5.0, 0, 100.0)];
        assert!(matches!(check_runs(&c, ok(echoed)), Outcome::Ok { .. }));
    }
}
