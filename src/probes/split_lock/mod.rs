//! Split-lock latency: the core-to-core ping-pong of [`super::c2c`] on a value that straddles
//! two cache lines (bytes 60..68 of a 128-byte-aligned block), against the same ping-pong on
//! an aligned value on the same CPU pair; and the same split value locked by one thread and
//! timed op by op ([`per_op`]), which names the mechanism.
//!
//! A locked instruction on a value split across lines cannot lock one line in the cache; the
//! CPU falls back to a bus lock, which the split-lock case measured at 500 ns (Zen 5) to 7 us
//! (Arrow Lake, Alder Lake P-cores) core to core. Rust atomics cannot be misaligned, so the
//! `lock cmpxchg` is inline assembly (`arch::lock_cmpxchg_u64`), used for both values.
//!
//! Something may stand between a program and that bus lock: this kernel's trap, or, in a
//! guest, the host's (the Emerald Rapids KVM guest: ~2 us bus locks between 100-500 us traps).
//! A mean cannot tell those apart, so one thread's split locks are also timed one by one, in
//! blocks that stop at a count or a time budget (10 ms in `check`: a trapping host costs tens
//! of ms, not seconds), and `schema::split_lock::classify` names the mechanism from the per-op
//! times and the machine facts. It is recorded as what took effect
//! (`split_lock_mechanism`), like the page size a buffer got; the hazard judges it. The first
//! blocks' mean also sizes the split ping-pong, so a trapping host spends ~5 ms a sample.
//!
//! The kernel's split-lock state is read first (`machine.split_lock`). Where it cannot see
//! split locks (`not_detected`, a guest) or was told not to look (`off`), split locks run
//! in-process. Everywhere else a split lock may sleep 10 ms, be rate-limited or raise SIGBUS,
//! so the split case runs in a child process ([`locker`]) on one CPU, and the figure is the
//! kernel's mitigation as a program meets it. That is a different experiment (one thread,
//! each lock trapped) from the two-thread handoff, so it carries its own name,
//! `split_lock_trapped_ns`, and no ratio: a `diff` of a host that traps against one that does
//! not must not compare the two as one quantity.

// Elsewhere than x86-64 the probe skips before measuring (`arch::require_x86_64`) and the
// kernels it times do not exist, so its measuring half is compiled but never called there.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code, unused_imports))]

pub mod locker;
pub mod per_op;

use super::c2c::pingpong::{Lines, Plan, SPLIT_OFFSET, Variant, ping_pong};
use super::c2c::require_two_cpus;
use super::{Measurement, ProbeContext, ProbeFailure, Profile};
use crate::machine::Machine;
use crate::measure::{estimate_core_clock, pin_to_cpu};
use crate::names::probe;
use crate::schema::figures::{Analysis, FigureId};
use crate::schema::probes::split_lock::{
    OpBlock, OpPercentilesNs, SplitLockAnalysis, SplitLockDerived, SplitLockEffects,
    SplitLockFigures, SplitLockMeasured, SplitLockParams, SplitLockRaw, SplitLockRawEffects,
    SplitLockSamples, SplitLockSeries,
};
use crate::schema::split_lock::{MechanismEvidence, OpHistogram, TRAP_BOUNDARY_NS, classify};
use crate::schema::{Better, Metric, Series};
use std::time::Duration;

/// The split-lock probe.
pub struct SplitLockProbe;

/// Rounds of per-op, aligned and split runs; interleaving puts all under the same machine
/// noise.
const ROUNDS: usize = 3;

/// A timed block of split locks in-process: at most this many ops or this long, by profile.
/// Quick: 1000 ops or 10 ms, so a bus-locking machine (~1-2 us per op) bus-locks 1-2 ms a
/// block and a trapping host (100 us and up) stops at 10 ms, ~100 ops; full: 2000 or 30 ms
/// (30 blocks: ~70 ms of bus locking at ~1.2 us).
fn op_block(profile: Profile) -> (usize, Duration) {
    match profile {
        Profile::Quick => (1000, Duration::from_millis(10)),
        Profile::Full => (2000, Duration::from_millis(30)),
    }
}

/// A timed block in the child, where the kernel traps: the kernel sleeps 10 ms per trap and
/// then lets two ticks (2-20 ms) of split locks through, so a block lasts several such cycles
/// and its time budget, not its count, ends it. One block a round.
fn child_block_budget(profile: Profile) -> Duration {
    match profile {
        Profile::Quick => Duration::from_millis(40),
        Profile::Full => Duration::from_millis(100),
    }
}

/// Time one split ping-pong sample may take, by profile. At a bus lock's ~1 us the default
/// handoff count stays far below it; at the Emerald Rapids host's ~130 us per trapped
/// handoff the default 200 took 26 ms a sample and `check` 0.25 s for this probe alone.
fn split_sample_budget(profile: Profile) -> Duration {
    match profile {
        Profile::Quick => Duration::from_millis(5),
        Profile::Full => Duration::from_millis(20),
    }
}

/// Fewest split handoffs per sample however slow the split lock: enough that one slow
/// handoff does not make a sample.
const MIN_SPLIT_HANDOFFS: u64 = 16;

/// Split handoffs per sample: the profile's count, fewer when the measured per-op cost would
/// make a sample outlast `budget`.
pub fn split_handoffs(default: u64, per_op_ns: Option<f64>, budget: Duration) -> u64 {
    match per_op_ns.filter(|ns| *ns > 0.0) {
        Some(ns) => ((budget.as_nanos() as f64 / ns) as u64).clamp(MIN_SPLIT_HANDOFFS, default),
        None => default,
    }
}

fn plans(ctx: &ProbeContext) -> (Plan, u64, usize) {
    let samples = match ctx.options.profile {
        Profile::Quick => 9,
        Profile::Full => 30,
    };
    let per_round = ctx
        .options
        .repetitions
        .unwrap_or(samples)
        .div_ceil(ROUNDS)
        .max(1);
    // Handoffs per sample: ~0.2 ms (quick) to ~1 ms (full) each at ~100 ns aligned and
    // ~1 us split, so the bus locking of a full run stays well under 0.1 s.
    let (aligned, split) = match ctx.options.profile {
        Profile::Quick => (2000, 200),
        Profile::Full => (8000, 1000),
    };
    (
        Plan {
            warmup: aligned / 4,
            handoffs_per_sample: aligned,
            samples: per_round,
        },
        split,
        per_round,
    )
}

impl Measurement for SplitLockProbe {
    type Raw = SplitLockRaw;
    type Figures = SplitLockAnalysis;
    const NAME: &'static str = probe::SPLIT_LOCK;
    const ABOUT: &'static str = "split-lock latency: lock cmpxchg across a cache-line end vs aligned, same CPU pair; \
         split locks timed one by one name the mechanism (bus lock, or trapped by the kernel \
         or the host)";

    fn measure(&self, ctx: &ProbeContext) -> Result<SplitLockRaw, ProbeFailure> {
        crate::arch::require_x86_64().map_err(ProbeFailure::Skipped)?;
        run(ctx)
    }

    fn analyse(raw: &SplitLockRaw, machine: &Machine) -> Analysis<SplitLockAnalysis> {
        analyse(raw, machine)
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn run(_ctx: &ProbeContext) -> Result<SplitLockRaw, ProbeFailure> {
    unreachable!("require_x86_64 skips first")
}

#[cfg(target_arch = "x86_64")]
fn run(ctx: &ProbeContext) -> Result<SplitLockRaw, ProbeFailure> {
    let cpus = ctx.cpus()?;
    require_two_cpus(&cpus)?;
    // A second thread (or, where the kernel traps, a child process) takes part in each pair.
    crate::measure::threads::check_can_start(1)?;
    let pair = (cpus[0], cpus[1]);
    let in_child = ctx.machine.split_lock.effective.kernel_acts();
    let profile = ctx.options.profile;
    let (aligned_plan, split_default, per_round) = plans(ctx);

    // Where the kernel traps, the per-op blocks run in a child; a SIGBUS ends it and is the
    // finding.
    let child = if in_child {
        Some(locker::Locker::spawn(pair.0, 1, ctx.clock).map_err(|e| pair_failure(pair, e))?)
    } else {
        None
    };
    let (op_max, op_budget) = if in_child {
        (locker::MAX_TIMED_OPS, child_block_budget(profile))
    } else {
        op_block(profile)
    };
    let setup = Setup {
        pair,
        in_child,
        op_max,
        op_budget,
        op_blocks_per_round: if in_child { 1 } else { per_round },
        aligned_plan,
        split_default,
        per_round,
    };
    let op_lines = Lines::new();
    let aligned_lines = Lines::new();
    let split_lines = Lines::new();
    let rounds = measure_rounds(
        ctx,
        &setup,
        child.as_ref(),
        [&op_lines, &aligned_lines, &split_lines],
    )?;
    drop(child);
    let core_hz = {
        let _pin = pin_to_cpu(pair.0)?;
        estimate_core_clock(ctx.clock, 5).map(|c| c.hz)
    };
    let split_at = split_lines.at(SPLIT_OFFSET) as usize;
    Ok(record(ctx, &setup, rounds, split_at, core_hz))
}

/// A probe failure on the CPU pair.
fn pair_failure(pair: (usize, usize), e: String) -> ProbeFailure {
    ProbeFailure::Failed(format!("CPU pair {}-{}: {e}", pair.0, pair.1))
}

/// How a run measures: the CPU pair, where the split locks run, and the sizes of its blocks
/// and samples.
struct Setup {
    pair: (usize, usize),
    /// The kernel acts on split locks, so they run in a child process.
    in_child: bool,
    op_max: usize,
    op_budget: Duration,
    op_blocks_per_round: usize,
    aligned_plan: Plan,
    split_default: u64,
    per_round: usize,
}

/// What the rounds measured.
struct Rounds {
    /// One thread's split locks timed op by op.
    blocks: Vec<per_op::Block>,
    /// Aligned ping-pong samples, ns per handoff.
    aligned: Vec<f64>,
    /// Split ping-pong samples, ns per handoff (in-process only).
    split: Vec<f64>,
    /// The split ping-pong's plan, sized from the first round's per-op cost.
    split_plan: Option<Plan>,
    /// How the child ended, where it did not survive.
    child_end: Option<String>,
}

/// [`ROUNDS`] rounds of: split locks timed op by op, the aligned ping-pong, and (in-process)
/// the split ping-pong, interleaved so all meet the same machine noise. `lines` are the
/// per-op, aligned and split blocks.
#[cfg(target_arch = "x86_64")]
fn measure_rounds(
    ctx: &ProbeContext,
    setup: &Setup,
    child: Option<&locker::Locker>,
    [op_lines, aligned_lines, split_lines]: [&Lines; 3],
) -> Result<Rounds, ProbeFailure> {
    let pair = setup.pair;
    let fail = |e: String| pair_failure(pair, e);
    let mut child_end: Option<String> = None;
    let mut time_blocks = |blocks: &mut Vec<per_op::Block>| -> Result<(), ProbeFailure> {
        for _ in 0..setup.op_blocks_per_round {
            match child {
                Some(c) if child_end.is_none() => {
                    // The child locks on the pair's first CPU; this thread polls it from the
                    // second, or its polls wait for the child's CPU (5% of the probe's wall
                    // time on the Zen 2 guest, read as "waited for a CPU").
                    let _pin = pin_to_cpu(pair.1)?;
                    match c.time_ops(ctx.clock, setup.op_max, setup.op_budget) {
                        Ok(b) => blocks.push(b),
                        Err(e) => child_end = Some(c.poll_end().map_or(e, |end| end.to_string())),
                    }
                }
                Some(_) => {}
                None => {
                    let _pin = pin_to_cpu(pair.0)?;
                    // SAFETY: the block is live and only locked instructions touch it.
                    blocks.push(unsafe {
                        per_op::time_block_here(
                            ctx.clock,
                            op_lines.at(SPLIT_OFFSET),
                            setup.op_max,
                            setup.op_budget,
                        )
                    });
                }
            }
        }
        Ok(())
    };

    let mut blocks = Vec::new();
    let mut aligned = Vec::new();
    let mut split = Vec::new();
    let mut split_plan = None;
    ctx.progress.begin(probe::SPLIT_LOCK, ROUNDS as u64);
    for _ in 0..ROUNDS {
        time_blocks(&mut blocks)?;
        aligned.extend(
            ping_pong(
                ctx.clock,
                pair,
                aligned_lines,
                Variant::Cas { offset: 0 },
                setup.aligned_plan,
            )
            .map_err(fail)?,
        );
        if !setup.in_child {
            // Sized once, from the first round's per-op cost.
            let plan = *split_plan.get_or_insert_with(|| {
                let mean = per_op::summarize(&blocks).map(|s| s.mean_ns);
                let n = split_handoffs(
                    setup.split_default,
                    mean,
                    split_sample_budget(ctx.options.profile),
                );
                Plan {
                    warmup: n / 4,
                    handoffs_per_sample: n,
                    samples: setup.per_round,
                }
            });
            split.extend(
                ping_pong(
                    ctx.clock,
                    pair,
                    split_lines,
                    Variant::Cas {
                        offset: SPLIT_OFFSET,
                    },
                    plan,
                )
                .map_err(fail)?,
            );
        }
        ctx.progress.advance(1);
    }
    ctx.progress.finish();
    Ok(Rounds {
        blocks,
        aligned,
        split,
        split_plan,
        child_end,
    })
}

/// The raw record: the set-up in params and effects, the ping-pong samples, and one thread's
/// split locks timed one by one (each block's mean, census, histogram, percentiles).
fn record(
    ctx: &ProbeContext,
    setup: &Setup,
    rounds: Rounds,
    split_at: usize,
    core_hz: Option<f64>,
) -> SplitLockRaw {
    let Rounds {
        blocks,
        aligned,
        split,
        split_plan,
        child_end,
    } = rounds;
    let cpus = [setup.pair.0, setup.pair.1];
    let summary = per_op::summarize(&blocks);
    let mut samples = SplitLockSamples::default();
    samples.set(SplitLockSeries::AlignedLockNs, &cpus, aligned);
    let mut facts = SplitLockEffects::default();
    if setup.in_child {
        facts.split_lock_measured = Some(SplitLockMeasured::KernelMitigation);
        facts.split_lock_child = Some(child_end.unwrap_or_else(|| "survived".into()));
        if let Some(s) = &summary {
            samples.set(SplitLockSeries::TrappedNs, &cpus, s.block_means_ns.clone());
        }
    } else {
        facts.split_lock_measured = Some(SplitLockMeasured::Hardware);
        samples.set(SplitLockSeries::SplitLockNs, &cpus, split);
    }
    let mut raw = SplitLockRaw {
        params: SplitLockParams {
            cpus: cpus.to_vec(),
            rounds: ROUNDS,
            aligned_handoffs_per_sample: setup.aligned_plan.handoffs_per_sample,
            split_handoffs_per_sample: split_plan.map(|p| p.handoffs_per_sample),
            split_value_offset_bytes: SPLIT_OFFSET,
            op_block: OpBlock {
                max_ops: setup.op_max,
                budget_ms: setup.op_budget.as_secs_f64() * 1e3,
                blocks: setup.op_blocks_per_round * ROUNDS,
                trap_boundary_ns: TRAP_BOUNDARY_NS,
            },
        },
        effects: SplitLockRawEffects {
            pinned_cpus: cpus.to_vec(),
            kernel_split_lock_mode: ctx.machine.split_lock.effective,
            split_value_crosses_line: split_at / 64 != (split_at + 7) / 64,
            core_clock_ghz: core_hz.map(|hz| hz / 1e9),
            split_lock_op_census: None,
            split_lock_op_histogram: None,
            split_lock_trapped_mean_ns: summary
                .as_ref()
                .filter(|_| setup.in_child)
                .map(|s| s.mean_ns),
            facts,
        },
        samples,
        series: Vec::new(),
    };
    if let Some(s) = &summary {
        record_per_op(&mut raw, s);
    }
    raw
}

/// One thread's split locks timed one by one into `raw`: each block's mean, the census, the
/// histogram (as an effect and as bars) and the percentiles.
pub fn record_per_op(raw: &mut SplitLockRaw, s: &per_op::Summary) {
    let p = |name: &str| {
        s.percentiles_ns
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(f64::NAN, |(_, ns)| *ns)
    };
    raw.samples.set(
        SplitLockSeries::OpMeanNs,
        &raw.params.cpus,
        s.block_means_ns.clone(),
    );
    raw.effects.split_lock_op_census = Some(s.census);
    raw.effects.split_lock_op_histogram = Some(s.histogram.clone());
    raw.effects.facts.split_lock_op_percentiles_ns = Some(OpPercentilesNs {
        p0: p("p0"),
        p10: p("p10"),
        p50: p("p50"),
        p90: p("p90"),
        p99: p("p99"),
        p100: p("p100"),
    });
    raw.series.push(histogram_bars(&s.histogram));
}

/// The figures of a raw record: the aligned handoff (ns, cycles); in-process the split one
/// and its ratio to the aligned, where trapped the child's mean per lock; the per-op figures
/// (each block's mean, in cycles, as a rate); and the mechanism, named by
/// `schema::split_lock::classify` from the census and the machine facts.
pub fn analyse(raw: &SplitLockRaw, machine: &Machine) -> Analysis<SplitLockAnalysis> {
    type F = SplitLockFigures;
    let cpus = &raw.params.cpus;
    let e = &raw.effects;
    let ghz = e.core_clock_ghz;
    let ns = |id: FigureId, x: &[f64]| Metric::from_samples(id.metric, "ns", Better::Lower, x);
    // Cycles of the initiating CPU's core clock: TSC ticks are not core cycles.
    let cycles = |id: FigureId, x: &[f64]| {
        let ghz = ghz?;
        let c: Vec<f64> = x.iter().map(|x| x * ghz).collect();
        Metric::from_samples(id.metric, "cycles", Better::Lower, &c)
    };
    let aligned = raw.samples.get(SplitLockSeries::AlignedLockNs, cpus);
    let mut f = SplitLockFigures {
        aligned_lock_latency_ns: ns(F::ALIGNED_LOCK_LATENCY_NS, aligned),
        aligned_lock_latency_cycles: cycles(F::ALIGNED_LOCK_LATENCY_CYCLES, aligned),
        ..SplitLockFigures::default()
    };
    let in_child = e.facts.split_lock_measured == Some(SplitLockMeasured::KernelMitigation);
    if in_child {
        // One thread, every lock trapped: not the handoff the aligned figure times, so no
        // ratio to it. Time over ops in every block, the rate a program gets.
        f.split_lock_trapped_ns = e.split_lock_trapped_mean_ns.map(|mean| {
            Metric::derived(F::SPLIT_LOCK_TRAPPED_NS.metric, mean, "ns", Better::Lower)
        });
    } else {
        let split = raw.samples.get(SplitLockSeries::SplitLockNs, cpus);
        f.split_lock_latency_ns = ns(F::SPLIT_LOCK_LATENCY_NS, split);
        f.split_lock_latency_cycles = cycles(F::SPLIT_LOCK_LATENCY_CYCLES, split);
        let aligned_ns = f.aligned_lock_latency_ns.as_ref().map(|m| m.value);
        if let (Some(s), Some(a)) = (
            f.split_lock_latency_ns.as_ref().map(|m| m.value),
            aligned_ns,
        ) && a > 0.0
        {
            f.split_lock_ratio = Some(Metric::derived(
                F::SPLIT_LOCK_RATIO.metric,
                s / a,
                "ratio",
                Better::Lower,
            ));
        }
    }
    if e.split_lock_op_census.is_some() {
        // Each block's mean: a program pays the mean, traps included (preemptions not);
        // blocks spread over the probe give the figure its interval.
        let means = raw.samples.get(SplitLockSeries::OpMeanNs, cpus);
        f.split_lock_op_mean_ns = ns(F::SPLIT_LOCK_OP_MEAN_NS, means);
        f.split_lock_op_mean_cycles = cycles(F::SPLIT_LOCK_OP_MEAN_CYCLES, means);
        // Each block's rate, so the figure has the same blocks, and interval, as the mean.
        // The share of trapped ops is no metric: a bus-locking machine reads 0.01-0.1% from
        // timer ticks, and `diff` would call every such wobble a change; the mechanism it
        // decides is an effect, and the census keeps the counts.
        let rates: Vec<f64> = means
            .iter()
            .filter(|m| **m > 0.0)
            .map(|m| 1e9 / m)
            .collect();
        f.split_lock_locks_per_s = Metric::from_samples(
            F::SPLIT_LOCK_LOCKS_PER_S.metric,
            "locks/s",
            Better::Higher,
            &rates,
        );
    }
    let evidence = MechanismEvidence {
        kernel: e.kernel_split_lock_mode,
        guest: machine.hypervisor.is_some(),
        killed_by_sigbus: e
            .facts
            .split_lock_child
            .as_deref()
            .is_some_and(|c| c.contains("SIGBUS")),
        census: e.split_lock_op_census,
        mean_ns: None,
    };
    let mut derived = SplitLockDerived::default();
    if let Some((mechanism, shape)) = classify(&evidence) {
        derived.split_lock_mechanism = Some(mechanism);
        derived.split_lock_trap_shape = shape;
    }
    Analysis::of(SplitLockAnalysis {
        figures: f,
        derived,
    })
}

/// The per-op histogram as bars for charts, each labelled with its bucket's lower edge.
pub fn histogram_bars(h: &OpHistogram) -> Series {
    Series::Bars {
        name: "split_lock_op_ns_histogram".into(),
        unit: "ops".into(),
        labels: h
            .low_ns
            .iter()
            .map(|&ns| format!(">= {}", crate::format::human_ns(ns)))
            .collect(),
        values: h.ops.iter().map(|&n| n as f64).collect(),
    }
}

/// A raw record of an in-process run on CPUs 0 and 1 under `kernel`, with no samples: for
/// tests that add what they need.
#[cfg(test)]
pub(crate) fn test_raw(kernel: crate::machine::SplitLockMode) -> SplitLockRaw {
    SplitLockRaw {
        params: SplitLockParams {
            cpus: vec![0, 1],
            rounds: ROUNDS,
            aligned_handoffs_per_sample: 2000,
            split_handoffs_per_sample: Some(200),
            split_value_offset_bytes: SPLIT_OFFSET,
            op_block: OpBlock {
                max_ops: 1000,
                budget_ms: 10.0,
                blocks: 9,
                trap_boundary_ns: TRAP_BOUNDARY_NS,
            },
        },
        effects: SplitLockRawEffects {
            pinned_cpus: vec![0, 1],
            kernel_split_lock_mode: kernel,
            split_value_crosses_line: true,
            core_clock_ghz: Some(3.0),
            split_lock_op_census: None,
            split_lock_op_histogram: None,
            split_lock_trapped_mean_ns: None,
            facts: SplitLockEffects {
                split_lock_measured: Some(SplitLockMeasured::Hardware),
                ..SplitLockEffects::default()
            },
        },
        samples: SplitLockSamples::default(),
        series: Vec::new(),
    }
}

#[cfg(test)]
mod analyse_tests {
    use super::*;
    use crate::machine::SplitLockMode;
    use crate::schema::figures::Figures;
    use crate::schema::split_lock::{SplitLockMechanism, TrapShape};

    fn v(m: &Option<Metric>) -> f64 {
        m.as_ref().unwrap().value
    }

    /// The Zen 4 guest's case: ~1.1 us split handoffs against ~100 ns aligned, ~1.2 us bus
    /// locks one by one: a bus lock, its ratio, cycles at the initiator's clock.
    #[test]
    fn in_process_gives_the_split_handoff_its_ratio_and_a_bus_lock() {
        let mut raw = test_raw(SplitLockMode::NotDetected);
        let cpus = [0, 1];
        raw.samples.set(
            SplitLockSeries::AlignedLockNs,
            &cpus,
            vec![100.0, 110.0, 90.0],
        );
        raw.samples.set(
            SplitLockSeries::SplitLockNs,
            &cpus,
            vec![1100.0, 1000.0, 1200.0],
        );
        let blocks: Vec<per_op::Block> = (0..3)
            .map(|i| per_op::Block {
                per_op_ns: vec![1200.0 + i as f64 * 100.0; 50],
                ..per_op::Block::default()
            })
            .collect();
        record_per_op(&mut raw, &per_op::summarize(&blocks).unwrap());
        // A guest (the test fingerprint's machine is one).
        let machine = crate::schema::test_support::empty_fingerprint().machine;
        assert!(machine.hypervisor.is_some());
        let a = analyse(&raw, &machine);
        assert!(a.not_measured.is_empty());
        let f = &a.figures.figures;
        assert_eq!(v(&f.aligned_lock_latency_ns), 100.0);
        assert!((v(&f.aligned_lock_latency_cycles) - 300.0).abs() < 1e-9);
        assert_eq!(v(&f.split_lock_latency_ns), 1100.0);
        assert_eq!(v(&f.split_lock_ratio), 11.0);
        assert!(f.split_lock_trapped_ns.is_none());
        assert_eq!(v(&f.split_lock_op_mean_ns), 1300.0);
        assert!((v(&f.split_lock_locks_per_s) - 1e9 / 1300.0).abs() < 1e-6);
        assert_eq!(
            a.figures.derived.split_lock_mechanism,
            Some(SplitLockMechanism::BusLock)
        );
        assert_eq!(a.figures.derived.split_lock_trap_shape, None);
        let names: Vec<String> = a
            .figures
            .figures
            .clone()
            .into_metrics()
            .into_iter()
            .map(|m| m.name)
            .collect();
        assert_eq!(
            names,
            [
                "aligned_lock_latency_ns",
                "aligned_lock_latency_cycles",
                "split_lock_latency_ns",
                "split_lock_latency_cycles",
                "split_lock_ratio",
                "split_lock_op_mean_ns",
                "split_lock_op_mean_cycles",
                "split_lock_locks_per_s"
            ]
        );
    }

    /// Where this kernel traps (warn+sleep), the child's mean per lock is the figure, with no
    /// ratio, and ~12 ms sleeps name the kernel's trap and its sleep.
    #[test]
    fn a_trapping_kernel_gives_the_trapped_mean_and_no_ratio() {
        let mut raw = test_raw(SplitLockMode::WarnSleep);
        raw.effects.facts.split_lock_measured = Some(SplitLockMeasured::KernelMitigation);
        raw.effects.facts.split_lock_child = Some("survived".into());
        raw.params.split_handoffs_per_sample = None;
        raw.samples
            .set(SplitLockSeries::AlignedLockNs, &[0, 1], vec![100.0]);
        let blocks: Vec<per_op::Block> = (0..3)
            .map(|_| per_op::Block {
                per_op_ns: [vec![1200.0; 20], vec![12e6; 3]].concat(),
                voluntary_switches: 3,
                ..per_op::Block::default()
            })
            .collect();
        let s = per_op::summarize(&blocks).unwrap();
        raw.effects.split_lock_trapped_mean_ns = Some(s.mean_ns);
        record_per_op(&mut raw, &s);
        let a = analyse(
            &raw,
            &crate::schema::test_support::empty_fingerprint().machine,
        );
        let f = &a.figures.figures;
        assert_eq!(v(&f.split_lock_trapped_ns), s.mean_ns);
        assert!(f.split_lock_latency_ns.is_none() && f.split_lock_ratio.is_none());
        assert_eq!(
            a.figures.derived.split_lock_mechanism,
            Some(SplitLockMechanism::TrappedByKernel)
        );
        assert_eq!(
            a.figures.derived.split_lock_trap_shape,
            Some(TrapShape::Sleep)
        );
        let killed = {
            let mut r = raw.clone();
            r.effects.facts.split_lock_child = Some("killed by SIGBUS".into());
            analyse(
                &r,
                &crate::schema::test_support::empty_fingerprint().machine,
            )
        };
        assert_eq!(
            killed.figures.derived.split_lock_mechanism,
            Some(SplitLockMechanism::Fatal)
        );
    }

    #[test]
    fn a_record_saved_and_read_back_gives_the_same_analysis() {
        use crate::schema::figures::RawRecord;
        let mut raw = test_raw(SplitLockMode::NotDetected);
        raw.samples
            .set(SplitLockSeries::AlignedLockNs, &[0, 1], vec![100.0, 90.0]);
        let blocks = [per_op::Block {
            per_op_ns: vec![1200.0, 1300.0],
            ..per_op::Block::default()
        }];
        record_per_op(&mut raw, &per_op::summarize(&blocks).unwrap());
        let mut r = crate::schema::ProbeResult::new(probe::SPLIT_LOCK, crate::schema::Status::Ok);
        raw.write_into(&mut r);
        assert_eq!(r.samples["aligned_lock_ns.cpu0-cpu1"], vec![100.0, 90.0]);
        assert_eq!(r.effects["split_lock_op_percentiles_ns"]["p100"], 1300.0);
        let back: SplitLockRaw = r.raw().unwrap();
        assert_eq!(back, raw);
        let machine = crate::schema::test_support::empty_fingerprint().machine;
        assert_eq!(analyse(&back, &machine), analyse(&raw, &machine));
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    #[test]
    fn split_handoffs_shrink_to_the_sample_budget_on_a_trapping_host() {
        let budget = Duration::from_millis(5);
        // A bus lock (~1.2 us, the Zen 5 guest): the profile's count.
        assert_eq!(split_handoffs(200, Some(1200.0), budget), 200);
        // The Emerald Rapids host (~130 us a trapped lock): ~38 a sample, 5 ms.
        assert_eq!(split_handoffs(200, Some(130e3), budget), 38);
        // A 10 ms sleep per lock: the floor, not zero.
        assert_eq!(split_handoffs(200, Some(10e6), budget), MIN_SPLIT_HANDOFFS);
        assert_eq!(split_handoffs(200, None, budget), 200);
    }

    #[test]
    fn a_trapping_kernel_gives_split_lock_trapped_ns_and_no_ratio() {
        // Regression: where the kernel traps, the child's single-thread figure was reported
        // as split_lock_latency_ns and divided by the two-thread aligned handoff, so a diff of
        // a trapping host against a guest compared different experiments under one name.
        if !crate::probes::two_cpus_or_skip() {
            return;
        }
        let mut machine = crate::machine::Machine::detect();
        machine.split_lock.effective = crate::machine::SplitLockMode::WarnSleep;
        let mut options = crate::probes::ProbeOptions::new(Profile::Quick);
        options.repetitions = Some(3);
        let r = crate::probes::run_here(&SplitLockProbe, &machine, &options).unwrap();
        let raw: SplitLockRaw = r.raw().unwrap();
        assert_eq!(
            raw.effects.facts.split_lock_measured,
            Some(SplitLockMeasured::KernelMitigation)
        );
        assert!(raw.effects.split_lock_trapped_mean_ns.is_some());
        assert!(
            r.metric(SplitLockFigures::SPLIT_LOCK_TRAPPED_NS.metric)
                .is_some(),
            "{:?}",
            r.metrics
        );
        assert!(
            r.metric(SplitLockFigures::ALIGNED_LOCK_LATENCY_NS.metric)
                .is_some()
        );
        assert!(
            r.metric(SplitLockFigures::SPLIT_LOCK_LATENCY_NS.metric)
                .is_none()
        );
        assert!(
            r.metric(SplitLockFigures::SPLIT_LOCK_RATIO.metric)
                .is_none()
        );
        // The child timed its locks one by one.
        assert!(
            r.metric(SplitLockFigures::SPLIT_LOCK_OP_MEAN_NS.metric)
                .is_some()
        );
        assert_eq!(
            raw.effects.facts.split_lock_child.as_deref(),
            Some("survived")
        );
    }

    #[test]
    fn this_machine_gets_a_mechanism_and_a_per_op_histogram() {
        if !crate::probes::two_cpus_or_skip() {
            return;
        }
        let machine = crate::machine::Machine::detect();
        let mut options = crate::probes::ProbeOptions::new(Profile::Quick);
        options.repetitions = Some(3);
        let r = crate::probes::run_here(&SplitLockProbe, &machine, &options).unwrap();
        let raw: SplitLockRaw = r.raw().unwrap();
        assert!(raw.effects.facts.split_lock_mechanism.is_some());
        let h = raw.effects.split_lock_op_histogram.unwrap();
        let census = raw.effects.split_lock_op_census.unwrap();
        assert_eq!(h.ops.iter().sum::<u64>(), census.ops);
        assert_eq!(h.low_ns.len(), h.ops.len());
        let mean = r
            .metric(SplitLockFigures::SPLIT_LOCK_OP_MEAN_NS.metric)
            .unwrap()
            .value;
        let per_s = r
            .metric(SplitLockFigures::SPLIT_LOCK_LOCKS_PER_S.metric)
            .unwrap()
            .value;
        // The median of each block's rate: one over the median mean for an odd count.
        assert!((mean * per_s / 1e9 - 1.0).abs() < 1e-6, "{mean} {per_s}");
    }
}
