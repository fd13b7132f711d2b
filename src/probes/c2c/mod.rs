//! Core-to-core latency: how long one cache line takes to go from one core to another, over
//! every pair of CPUs (or a sample of pairs when all would not fit the time budget), grouped by
//! where the pair sits in the topology.
//!
//! Every handoff of a lock, a queue slot or a reference count between threads on two cores
//! pays this. Each pair bounces a value with `lock cmpxchg` ([`pingpong::Variant::Cas`]) and,
//! separately, with a plain load-then-store flag on two lines
//! ([`pingpong::Variant::LoadStore`]): the first is what a contended lock pays, the second
//! the bare line transfer. Each pair gets fresh lines ([`pingpong::Lines`]), kept alive
//! until the sweep ends so no two pairs share an address.
//!
//! The pure parts (pairs, sampling, grouping, the matrix) are in [`matrix`]; the threads in
//! [`pingpong`].

pub mod matrix;
pub mod pingpong;

use super::{Probe, ProbeContext, ProbeFailure, Profile};
use crate::measure::{self, estimate_core_clock, pin_to_cpu};
use crate::names::{metric, probe};
use crate::schema::{Better, Metric, ProbeResult, Series, Status};
use matrix::{PairGroup, PairLatency};
use pingpong::{Lines, Plan, Variant, ping_pong};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// The core-to-core latency probe.
pub struct C2cProbe;

/// Pairs measured before the time per pair is estimated again: enough that one slow or fast
/// pair does not decide alone, few enough that the estimate comes early in a long sweep.
const REESTIMATE_AFTER_PAIRS: usize = 4;

/// The skip every multi-CPU probe gives when it has fewer than two CPUs.
pub fn require_two_cpus(cpus: &[usize]) -> Result<(), ProbeFailure> {
    if cpus.len() >= 2 {
        Ok(())
    } else {
        Err(ProbeFailure::Skipped(format!(
            "needs two CPUs to move a cache line between, but may use only CPU {} \
             (a cpuset, taskset or --cpus restricts it)",
            measure::pin::format_cpu_list(cpus)
        )))
    }
}

/// A headline figure over pairs: the median of the pair medians, with the spread across
/// pairs; for a single pair, the pair's own samples (its spread is then the noise).
pub fn over_pairs(name: &str, pair_medians: &[f64], single_pair_samples: &[f64]) -> Option<Metric> {
    if pair_medians.len() > 1 {
        Metric::across_places(name, "ns", Better::Lower, pair_medians)
    } else {
        Metric::from_samples(name, "ns", Better::Lower, single_pair_samples)
    }
}

/// How much each pair gets, by profile.
fn plan(ctx: &ProbeContext) -> Plan {
    let (warmup, handoffs, samples) = match ctx.options.profile {
        Profile::Quick => (200, 1000, 9),
        Profile::Full => (1000, 4000, 31),
    };
    Plan {
        warmup,
        handoffs_per_sample: handoffs,
        samples: ctx.options.repetitions.unwrap_or(samples).max(1),
    }
}

/// One pair's raw samples, both protocols.
struct PairRun {
    a: usize,
    b: usize,
    cas_ns: Vec<f64>,
    load_store_ns: Vec<f64>,
}

fn measure_pair(
    ctx: &ProbeContext,
    (a, b): (usize, usize),
    plan: Plan,
    keep: &mut Vec<Lines>,
) -> Result<PairRun, ProbeFailure> {
    let fail = |e: String| ProbeFailure::Failed(format!("CPU pair {a}-{b}: {e}"));
    let cas_lines = Lines::new();
    let cas_ns = ping_pong(
        ctx.clock,
        (a, b),
        &cas_lines,
        Variant::Cas { offset: 0 },
        plan,
    )
    .map_err(fail)?;
    let ls_lines = Lines::new();
    let load_store_ns =
        ping_pong(ctx.clock, (a, b), &ls_lines, Variant::LoadStore, plan).map_err(fail)?;
    keep.push(cas_lines);
    keep.push(ls_lines);
    Ok(PairRun {
        a,
        b,
        cas_ns,
        load_store_ns,
    })
}

impl Probe for C2cProbe {
    fn name(&self) -> &'static str {
        probe::C2C
    }

    fn about(&self) -> &'static str {
        "core-to-core latency: one-way cache-line handoff per CPU pair, by topology"
    }

    fn run(&self, ctx: &ProbeContext) -> Result<ProbeResult, ProbeFailure> {
        crate::arch::require_x86_64().map_err(ProbeFailure::Skipped)?;
        let cpus = ctx.cpus()?;
        require_two_cpus(&cpus)?;
        crate::measure::threads::check_can_start(1)?;
        let plan = plan(ctx);
        let budget_s = ctx.options.budget.map_or(
            match ctx.options.profile {
                Profile::Quick => 2.0,
                Profile::Full => 60.0,
            },
            |d| d.as_secs_f64(),
        );
        let topology = ctx.machine.topology.as_ref();
        let group = |a: usize, b: usize| matrix::classify(topology, a, b);
        let pairs = matrix::all_pairs(&cpus);
        let started = Instant::now();
        let mut keep = Vec::new();

        // The first pair tells how long one takes; a few more refine that (a far pair, or a
        // busy machine, is slower), then the selection shrinks if it no longer fits. Pairs run
        // with the groups interleaved, so the hard stop at twice the budget, should it come,
        // cuts every group alike.
        let first = measure_pair(ctx, pairs[0], plan, &mut keep)?;
        let fit = |measured: usize| {
            let per_pair = (started.elapsed() / measured as u32).max(Duration::from_micros(1));
            ((budget_s / per_pair.as_secs_f64()) as usize).max(1)
        };
        let queue_for = |fit: usize, done: &[(usize, usize)]| -> Vec<(usize, usize)> {
            let rest: Vec<(usize, usize)> = matrix::select_pairs(&pairs, group, fit)
                .into_iter()
                .filter(|p| !done.contains(p))
                .collect();
            let mut q = matrix::interleave_groups(&rest, group);
            q.truncate(fit.saturating_sub(done.len()));
            q
        };
        let mut done = vec![pairs[0]];
        let mut queue = queue_for(fit(1), &done);
        ctx.progress.begin(probe::C2C, queue.len() as u64 + 1);
        ctx.progress.advance(1);
        let mut runs = vec![first];
        let mut budget_exhausted = false;
        let mut next = 0;
        while next < queue.len() {
            if started.elapsed().as_secs_f64() > 2.0 * budget_s {
                budget_exhausted = true;
                break;
            }
            let pair = queue[next];
            next += 1;
            runs.push(measure_pair(ctx, pair, plan, &mut keep)?);
            done.push(pair);
            ctx.progress.advance(1);
            if runs.len() == REESTIMATE_AFTER_PAIRS {
                let refit = fit(runs.len());
                if refit < done.len() + queue.len() - next {
                    queue = queue_for(refit, &done);
                    next = 0;
                    ctx.progress.finish();
                    ctx.progress
                        .begin(probe::C2C, (done.len() + queue.len()) as u64);
                    ctx.progress.advance(done.len() as u64);
                }
            }
        }
        ctx.progress.finish();

        let core = {
            let _pin = pin_to_cpu(cpus[0])?;
            estimate_core_clock(ctx.clock, 5)
        };
        Ok(result(
            ctx,
            &cpus,
            &runs,
            plan,
            budget_s,
            pairs.len(),
            budget_exhausted,
            core.map(|c| c.hz),
        ))
    }
}

#[allow(clippy::too_many_arguments)]
fn result(
    ctx: &ProbeContext,
    cpus: &[usize],
    runs: &[PairRun],
    plan: Plan,
    budget_s: f64,
    pairs_total: usize,
    budget_exhausted: bool,
    core_hz: Option<f64>,
) -> ProbeResult {
    let topology = ctx.machine.topology.as_ref();
    let med = |v: &[f64]| crate::stats::median(v).unwrap_or(f64::NAN);
    // A pair whose samples split between two placements (the host moved a vCPU) is figured
    // on the placement most samples saw; the other is kept and said, not averaged in.
    let splits: Vec<Option<matrix::PlacementSplit>> = runs
        .iter()
        .map(|r| matrix::placement_split(&r.cas_ns))
        .collect();
    let cas_main: Vec<&[f64]> = runs
        .iter()
        .zip(&splits)
        .map(|(r, s)| {
            s.as_ref()
                .map_or(r.cas_ns.as_slice(), |s| s.main.as_slice())
        })
        .collect();
    let cas: Vec<PairLatency> = runs
        .iter()
        .zip(&cas_main)
        .map(|(r, main)| PairLatency {
            a: r.a,
            b: r.b,
            ns: med(main),
        })
        .collect();
    let load_store: Vec<PairLatency> = runs
        .iter()
        .map(|r| PairLatency {
            a: r.a,
            b: r.b,
            ns: med(&r.load_store_ns),
        })
        .collect();
    let pair_key = |a: usize, b: usize| format!("cpu{a}-cpu{b}");
    let ls_medians: Vec<f64> = load_store.iter().map(|p| p.ns).collect();

    let mut r = ProbeResult::new(probe::C2C, Status::Ok);
    r.params.insert("cpus".into(), json!(cpus));
    r.params.insert("samples".into(), json!(plan.samples));
    r.params.insert(
        "handoffs_per_sample".into(),
        json!(plan.handoffs_per_sample),
    );
    r.params
        .insert("warmup_handoffs".into(), json!(plan.warmup));
    r.params.insert("budget_s".into(), json!(budget_s));

    let groups = record_latencies(
        &mut r,
        topology,
        &cas,
        cas_main[0],
        &ls_medians,
        runs,
        core_hz,
    );
    for run in runs {
        r.samples.insert(
            format!("c2c_cas_ns.{}", pair_key(run.a, run.b)),
            run.cas_ns.clone(),
        );
        r.samples.insert(
            format!("c2c_load_store_ns.{}", pair_key(run.a, run.b)),
            run.load_store_ns.clone(),
        );
    }

    record_pairs(
        &mut r,
        topology,
        cpus,
        runs,
        &splits,
        pairs_total,
        budget_exhausted,
    );
    if let Some(hz) = core_hz {
        r.effects.insert("core_clock_ghz".into(), json!(hz / 1e9));
    }

    record_matrices(&mut r, cpus, &cas, &load_store, &groups);
    r
}

/// The CAS and load-store matrices over the CPUs, and the CAS latency's bars by pair group.
fn record_matrices(
    r: &mut ProbeResult,
    cpus: &[usize],
    cas: &[PairLatency],
    load_store: &[PairLatency],
    groups: &BTreeMap<PairGroup, Vec<f64>>,
) {
    let med = |v: &[f64]| crate::stats::median(v).unwrap_or(f64::NAN);
    r.series
        .push(matrix::matrix(metric::C2C_LATENCY_NS, cpus, cas));
    r.series.push(matrix::matrix(
        metric::C2C_LOAD_STORE_LATENCY_NS,
        cpus,
        load_store,
    ));
    r.series.push(Series::Bars {
        name: "c2c_latency_ns_by_group".into(),
        unit: "ns".into(),
        labels: groups.keys().map(|g| g.key().to_string()).collect(),
        values: groups.values().map(|v| med(v)).collect(),
    });
}

/// The latency metrics: CAS handoff over pairs, its range and cycles, load-store handoff,
/// and one range per pair group; returns the groups, for the bars.
fn record_latencies(
    r: &mut ProbeResult,
    topology: Option<&crate::machine::Topology>,
    cas: &[PairLatency],
    first_cas: &[f64],
    ls_medians: &[f64],
    runs: &[PairRun],
    core_hz: Option<f64>,
) -> BTreeMap<PairGroup, Vec<f64>> {
    let cas_medians: Vec<f64> = cas.iter().map(|p| p.ns).collect();
    r.metrics
        .extend(over_pairs(metric::C2C_LATENCY_NS, &cas_medians, first_cas));
    let (min, max) = cas_medians
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        });
    if min.is_finite() {
        r.metrics.push(Metric::derived(
            "c2c_latency_min_ns",
            min,
            "ns",
            Better::Lower,
        ));
        r.metrics.push(Metric::derived(
            "c2c_latency_max_ns",
            max,
            "ns",
            Better::Lower,
        ));
    }
    if let (Some(hz), Some(m)) = (core_hz, crate::stats::median(&cas_medians)) {
        r.metrics.push(Metric::derived(
            metric::C2C_LATENCY_CYCLES,
            m * hz * 1e-9,
            "cycles",
            Better::Lower,
        ));
    }
    r.metrics.extend(over_pairs(
        metric::C2C_LOAD_STORE_LATENCY_NS,
        ls_medians,
        &runs[0].load_store_ns,
    ));
    let groups = matrix::by_group(topology, cas);
    for (g, v) in &groups {
        if *g != PairGroup::Unknown {
            // One value per pair of the group: a range across pairs, not an interval.
            r.metrics.extend(Metric::across_places(
                &g.metric_name(),
                "ns",
                Better::Lower,
                v,
            ));
        }
    }

    groups
}

/// The pairs as measured: which saw their vCPU placement change (and both placements'
/// figures), how many of how many were measured, and each pair's group.
fn record_pairs(
    r: &mut ProbeResult,
    topology: Option<&crate::machine::Topology>,
    cpus: &[usize],
    runs: &[PairRun],
    splits: &[Option<matrix::PlacementSplit>],
    pairs_total: usize,
    budget_exhausted: bool,
) {
    let med = |v: &[f64]| crate::stats::median(v).unwrap_or(f64::NAN);
    let pair_key = |a: usize, b: usize| format!("cpu{a}-cpu{b}");
    let moved: BTreeMap<String, serde_json::Value> = runs
        .iter()
        .zip(splits)
        .filter_map(|(r, s)| {
            let s = s.as_ref()?;
            Some((
                pair_key(r.a, r.b),
                json!({
                    "main_ns": med(&s.main),
                    "other_ns": med(&s.other),
                    "other_share": s.other.len() as f64 / r.cas_ns.len() as f64,
                }),
            ))
        })
        .collect();
    r.effects
        .insert("vcpu_placement_changed".into(), json!(!moved.is_empty()));
    if !moved.is_empty() {
        r.effects.insert("placements".into(), json!(moved));
    }
    r.effects.insert("pinned_cpus".into(), json!(cpus));
    r.effects.insert("pairs_total".into(), json!(pairs_total));
    r.effects.insert("pairs_measured".into(), json!(runs.len()));
    r.effects
        .insert("pairs_sampled".into(), json!(runs.len() < pairs_total));
    r.effects
        .insert("budget_exhausted".into(), json!(budget_exhausted));
    r.effects.insert(
        "pair_groups".into(),
        json!(
            runs.iter()
                .map(|p| (
                    pair_key(p.a, p.b),
                    matrix::classify(topology, p.a, p.b).key()
                ))
                .collect::<BTreeMap<_, _>>()
        ),
    );
}
