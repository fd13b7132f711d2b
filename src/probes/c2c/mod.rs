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

use super::{Measurement, ProbeContext, ProbeFailure, Profile};
use crate::machine::Machine;
use crate::measure::{self, estimate_core_clock, pin_to_cpu};
use crate::names::probe;
use crate::schema::figures::Analysis;
use crate::schema::probes::c2c::{
    BY_GROUP_SERIES, C2cEffects, C2cFigures, C2cParams, C2cRaw, C2cSamples, CAS_MATRIX_SERIES,
    CpuPair, LOAD_STORE_MATRIX_SERIES, PairSamples, Placement,
};
use crate::schema::{Better, Metric, Series};
use matrix::{PairGroup, PairLatency};
use pingpong::{Lines, Plan, Variant, ping_pong};
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
pub fn over_pairs(pair_medians: &[f64], single_pair_samples: &[f64]) -> Option<Metric> {
    if pair_medians.len() > 1 {
        Metric::across_places("", "ns", Better::Lower, pair_medians)
    } else {
        Metric::from_samples("", "ns", Better::Lower, single_pair_samples)
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

impl Measurement for C2cProbe {
    type Raw = C2cRaw;
    type Figures = C2cFigures;
    const NAME: &'static str = probe::C2C;
    const ABOUT: &'static str =
        "core-to-core latency: one-way cache-line handoff per CPU pair, by topology";

    fn measure(&self, ctx: &ProbeContext) -> Result<C2cRaw, ProbeFailure> {
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
        Ok(raw_record(
            ctx.machine,
            &cpus,
            runs,
            plan,
            budget_s,
            (pairs.len(), budget_exhausted),
            core.map(|c| c.hz),
        ))
    }

    fn analyse(raw: &C2cRaw, machine: &Machine) -> Analysis<C2cFigures> {
        Analysis::of(analyse(raw, machine))
    }
}

fn median(v: &[f64]) -> f64 {
    crate::stats::median(v).unwrap_or(f64::NAN)
}

/// One pair's figures: its `lock cmpxchg` samples on the placement most samples saw (a pair
/// whose samples split between two placements, the host having moved a vCPU, is figured on
/// that one; the other is kept and said in `effects`, not averaged in), and its medians.
struct PairFigures<'a> {
    pair: CpuPair,
    cas_main: Vec<f64>,
    cas_ns: f64,
    load_store: &'a [f64],
    load_store_ns: f64,
}

fn pair_figures(raw: &C2cRaw) -> Vec<PairFigures<'_>> {
    raw.samples
        .pairs
        .iter()
        .map(|(&pair, s)| {
            let cas_main =
                matrix::placement_split(&s.cas_ns).map_or_else(|| s.cas_ns.clone(), |s| s.main);
            PairFigures {
                pair,
                cas_ns: median(&cas_main),
                cas_main,
                load_store: &s.load_store_ns,
                load_store_ns: median(&s.load_store_ns),
            }
        })
        .collect()
}

fn latencies(pairs: &[PairFigures<'_>], cas: bool) -> Vec<PairLatency> {
    pairs
        .iter()
        .map(|p| PairLatency {
            a: p.pair.a,
            b: p.pair.b,
            ns: if cas { p.cas_ns } else { p.load_store_ns },
        })
        .collect()
}

/// The figures of a c2c record: the `lock cmpxchg` handoff over pairs, its range and cycles,
/// the load-store handoff, and one range per pair group of `machine`'s topology.
pub fn analyse(raw: &C2cRaw, machine: &Machine) -> C2cFigures {
    let pairs = pair_figures(raw);
    let Some(first) = pairs.first() else {
        return C2cFigures::default();
    };
    let cas_medians: Vec<f64> = pairs.iter().map(|p| p.cas_ns).collect();
    let ls_medians: Vec<f64> = pairs.iter().map(|p| p.load_store_ns).collect();
    let (min, max) = cas_medians
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
            (lo.min(x), hi.max(x))
        });
    let range = |x: f64| {
        x.is_finite()
            .then(|| Metric::derived("", x, "ns", Better::Lower))
    };
    let cycles = raw
        .effects
        .core_clock_ghz
        .zip(crate::stats::median(&cas_medians))
        .map(|(ghz, m)| Metric::derived("", m * ghz, "cycles", Better::Lower));
    let groups = matrix::by_group(machine.topology.as_ref(), &latencies(&pairs, true));
    C2cFigures {
        c2c_latency_ns: over_pairs(&cas_medians, &first.cas_main),
        c2c_latency_min_ns: range(min).filter(|_| max.is_finite()),
        c2c_latency_max_ns: range(max).filter(|_| min.is_finite()),
        c2c_latency_cycles: cycles,
        c2c_load_store_latency_ns: over_pairs(&ls_medians, first.load_store),
        // One value per pair of the group: a range across pairs, not an interval.
        by_group: groups
            .iter()
            .filter(|(g, _)| **g != PairGroup::Unknown)
            .filter_map(|(g, v)| Some((*g, Metric::across_places("", "ns", Better::Lower, v)?)))
            .collect(),
    }
}

/// What the sweep saves: its plan, the pairs as measured (which saw their vCPU placement
/// change, how many of how many, each pair's group), every pair's samples, and the charts.
fn raw_record(
    machine: &Machine,
    cpus: &[usize],
    runs: Vec<PairRun>,
    plan: Plan,
    budget_s: f64,
    (pairs_total, budget_exhausted): (usize, bool),
    core_hz: Option<f64>,
) -> C2cRaw {
    let topology = machine.topology.as_ref();
    let pairs_measured = runs.len();
    let placements: BTreeMap<CpuPair, Placement> = runs
        .iter()
        .filter_map(|r| {
            let s = matrix::placement_split(&r.cas_ns)?;
            Some((
                CpuPair { a: r.a, b: r.b },
                Placement {
                    main_ns: median(&s.main),
                    other_ns: median(&s.other),
                    other_share: s.other.len() as f64 / r.cas_ns.len() as f64,
                },
            ))
        })
        .collect();
    let pair_groups = runs
        .iter()
        .map(|p| {
            (
                CpuPair { a: p.a, b: p.b },
                matrix::classify(topology, p.a, p.b),
            )
        })
        .collect();
    let samples = C2cSamples {
        pairs: runs
            .into_iter()
            .map(|r| {
                (
                    CpuPair { a: r.a, b: r.b },
                    PairSamples {
                        cas_ns: r.cas_ns,
                        load_store_ns: r.load_store_ns,
                    },
                )
            })
            .collect(),
    };
    let mut raw = C2cRaw {
        params: C2cParams {
            cpus: cpus.to_vec(),
            samples: plan.samples,
            handoffs_per_sample: plan.handoffs_per_sample,
            warmup_handoffs: plan.warmup,
            budget_s,
        },
        effects: C2cEffects {
            vcpu_placement_changed: !placements.is_empty(),
            placements,
            pinned_cpus: cpus.to_vec(),
            pairs_total,
            pairs_measured,
            pairs_sampled: pairs_measured < pairs_total,
            budget_exhausted,
            pair_groups,
            core_clock_ghz: core_hz.map(|hz| hz / 1e9),
        },
        samples,
        series: Vec::new(),
    };
    raw.series = series(&raw, machine);
    raw
}

/// The CAS and load-store matrices over the CPUs, and the CAS latency's bars by pair group.
fn series(raw: &C2cRaw, machine: &Machine) -> Vec<Series> {
    let cpus = &raw.params.cpus;
    let pairs = pair_figures(raw);
    let cas = latencies(&pairs, true);
    let groups = matrix::by_group(machine.topology.as_ref(), &cas);
    vec![
        matrix::matrix(CAS_MATRIX_SERIES, cpus, &cas),
        matrix::matrix(LOAD_STORE_MATRIX_SERIES, cpus, &latencies(&pairs, false)),
        Series::Bars {
            name: BY_GROUP_SERIES.into(),
            unit: "ns".into(),
            labels: groups.keys().map(|g| g.key().to_string()).collect(),
            values: groups.values().map(|v| median(v)).collect(),
        },
    ]
}
