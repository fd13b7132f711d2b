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
use super::{Probe, ProbeContext, ProbeFailure, Profile};
use crate::measure::{estimate_core_clock, pin_to_cpu};
use crate::names::probe;
use crate::schema::probes::split_lock::SplitLockFigures;
use crate::schema::split_lock::{MechanismEvidence, OpHistogram, TRAP_BOUNDARY_NS, classify};
use crate::schema::{Better, Metric, ProbeResult, Series, Status};
use serde_json::json;
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

impl Probe for SplitLockProbe {
    fn name(&self) -> &'static str {
        probe::SPLIT_LOCK
    }

    fn about(&self) -> &'static str {
        "split-lock latency: lock cmpxchg across a cache-line end vs aligned, same CPU pair; \
         split locks timed one by one name the mechanism (bus lock, or trapped by the kernel \
         or the host)"
    }

    fn run(&self, ctx: &ProbeContext) -> Result<ProbeResult, ProbeFailure> {
        crate::arch::require_x86_64().map_err(ProbeFailure::Skipped)?;
        run(ctx)
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn run(_ctx: &ProbeContext) -> Result<ProbeResult, ProbeFailure> {
    unreachable!("require_x86_64 skips first")
}

#[cfg(target_arch = "x86_64")]
fn run(ctx: &ProbeContext) -> Result<ProbeResult, ProbeFailure> {
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
    Ok(summarise(ctx, &setup, rounds, split_at, core_hz))
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

/// The result: the set-up in params and effects, the aligned figures, the split (in-process)
/// or trapped (in the child) figures, and the mechanism the per-op times name.
fn summarise(
    ctx: &ProbeContext,
    setup: &Setup,
    rounds: Rounds,
    split_at: usize,
    core_hz: Option<f64>,
) -> ProbeResult {
    let Rounds {
        blocks,
        aligned,
        split,
        split_plan,
        child_end,
    } = rounds;
    let pair = setup.pair;
    let state = &ctx.machine.split_lock;

    let mut r = ProbeResult::new(probe::SPLIT_LOCK, Status::Ok);
    if let Some(hz) = core_hz {
        r.effects.insert("core_clock_ghz".into(), json!(hz / 1e9));
    }
    let pair_key = format!("cpu{}-cpu{}", pair.0, pair.1);
    r.params.insert("cpus".into(), json!([pair.0, pair.1]));
    r.params.insert("rounds".into(), json!(ROUNDS));
    r.params.insert(
        "aligned_handoffs_per_sample".into(),
        json!(setup.aligned_plan.handoffs_per_sample),
    );
    if let Some(plan) = split_plan {
        r.params.insert(
            "split_handoffs_per_sample".into(),
            json!(plan.handoffs_per_sample),
        );
    }
    r.params
        .insert("split_value_offset_bytes".into(), json!(SPLIT_OFFSET));
    r.params.insert(
        "op_block".into(),
        json!({
            "max_ops": setup.op_max,
            "budget_ms": setup.op_budget.as_secs_f64() * 1e3,
            "blocks": setup.op_blocks_per_round * ROUNDS,
            "trap_boundary_ns": TRAP_BOUNDARY_NS,
        }),
    );
    r.effects
        .insert("pinned_cpus".into(), json!([pair.0, pair.1]));
    r.effects
        .insert("kernel_split_lock_mode".into(), json!(state.effective));
    r.effects.insert(
        "split_value_crosses_line".into(),
        json!(split_at / 64 != (split_at + 7) / 64),
    );
    let aligned_metric = Metric::from_samples(
        SplitLockFigures::ALIGNED_LOCK_LATENCY_NS.metric,
        "ns",
        Better::Lower,
        &aligned,
    );
    let aligned_ns = aligned_metric.as_ref().map(|m| m.value);
    r.metrics.extend(aligned_metric);
    r.metrics.extend(cycles(
        SplitLockFigures::ALIGNED_LOCK_LATENCY_CYCLES.metric,
        &aligned,
        core_hz,
    ));
    r.samples
        .insert(format!("aligned_lock_ns.{pair_key}"), aligned);

    let summary = per_op::summarize(&blocks);
    if setup.in_child {
        record_trapped(&mut r, summary.as_ref(), child_end.as_deref(), pair.0);
    } else {
        record_split(&mut r, split, aligned_ns, &pair_key, core_hz);
    }

    let evidence = MechanismEvidence {
        kernel: state.effective,
        guest: ctx.machine.hypervisor.is_some(),
        killed_by_sigbus: child_end.as_deref().is_some_and(|e| e.contains("SIGBUS")),
        census: summary.as_ref().map(|s| s.census),
        mean_ns: None,
    };
    record_split_locks(&mut r, &evidence, summary.as_ref(), pair.0, core_hz);
    r
}

/// Cycles of the initiating CPU's core clock: TSC ticks are not core cycles.
fn cycles(name: &str, ns: &[f64], core_hz: Option<f64>) -> Option<Metric> {
    let hz = core_hz?;
    let c: Vec<f64> = ns.iter().map(|x| x * hz * 1e-9).collect();
    Metric::from_samples(name, "cycles", Better::Lower, &c)
}

/// Split locks in the child, where the kernel acts on them: how the child ended, and the
/// trapped time per lock.
fn record_trapped(
    r: &mut ProbeResult,
    summary: Option<&per_op::Summary>,
    child_end: Option<&str>,
    cpu: usize,
) {
    r.effects
        .insert("split_lock_measured".into(), json!("kernel_mitigation"));
    r.effects.insert(
        "split_lock_child".into(),
        json!(child_end.unwrap_or("survived")),
    );
    // One thread, every lock trapped: not the handoff the aligned figure times, so no
    // ratio to it. Time over ops in every block, the rate a program gets.
    if let Some(s) = summary {
        r.samples.insert(
            format!("split_lock_trapped_ns.cpu{cpu}"),
            s.block_means_ns.clone(),
        );
        r.metrics.push(Metric::derived(
            SplitLockFigures::SPLIT_LOCK_TRAPPED_NS.metric,
            s.mean_ns,
            "ns",
            Better::Lower,
        ));
    }
}

/// Split locks in-process: the split ping-pong's latency, in cycles, and its ratio to the
/// aligned one.
fn record_split(
    r: &mut ProbeResult,
    split: Vec<f64>,
    aligned_ns: Option<f64>,
    pair_key: &str,
    core_hz: Option<f64>,
) {
    r.effects
        .insert("split_lock_measured".into(), json!("hardware"));
    let m = Metric::from_samples(
        SplitLockFigures::SPLIT_LOCK_LATENCY_NS.metric,
        "ns",
        Better::Lower,
        &split,
    );
    let split_ns = m.as_ref().map(|m| m.value);
    r.metrics.extend(m);
    r.metrics.extend(cycles(
        SplitLockFigures::SPLIT_LOCK_LATENCY_CYCLES.metric,
        &split,
        core_hz,
    ));
    if let (Some(s), Some(a)) = (split_ns, aligned_ns)
        && a > 0.0
    {
        r.metrics.push(Metric::derived(
            SplitLockFigures::SPLIT_LOCK_RATIO.metric,
            s / a,
            "ratio",
            Better::Lower,
        ));
    }
    r.samples.insert(format!("split_lock_ns.{pair_key}"), split);
}

/// The mechanism (`split_lock_mechanism`, `split_lock_trap_shape`) and the per-op figures
/// (metrics, census, histogram as an effect and as bars, percentiles) of one thread's split
/// locks timed on `cpu`, into `r`.
pub fn record_split_locks(
    r: &mut ProbeResult,
    evidence: &MechanismEvidence,
    summary: Option<&per_op::Summary>,
    cpu: usize,
    core_hz: Option<f64>,
) {
    if let Some((mechanism, shape)) = classify(evidence) {
        r.effects
            .insert("split_lock_mechanism".into(), json!(mechanism));
        if let Some(shape) = shape {
            r.effects
                .insert("split_lock_trap_shape".into(), json!(shape));
        }
    }
    if let Some(s) = summary {
        record_per_op(r, s, cpu, core_hz);
    }
}

fn record_per_op(r: &mut ProbeResult, s: &per_op::Summary, cpu: usize, core_hz: Option<f64>) {
    // Each block's mean: a program pays the mean, traps included (preemptions not); blocks
    // spread over the probe give the figure its interval.
    r.metrics.extend(Metric::from_samples(
        SplitLockFigures::SPLIT_LOCK_OP_MEAN_NS.metric,
        "ns",
        Better::Lower,
        &s.block_means_ns,
    ));
    if let Some(hz) = core_hz {
        let c: Vec<f64> = s.block_means_ns.iter().map(|x| x * hz * 1e-9).collect();
        r.metrics.extend(Metric::from_samples(
            SplitLockFigures::SPLIT_LOCK_OP_MEAN_CYCLES.metric,
            "cycles",
            Better::Lower,
            &c,
        ));
    }
    // Each block's rate, so the figure has the same blocks, and interval, as the mean. The
    // share of trapped ops is no metric: a bus-locking machine reads 0.01-0.1% from timer
    // ticks, and `diff` would call every such wobble a change; the mechanism it decides is an
    // effect, and the census keeps the counts.
    let rates: Vec<f64> = s
        .block_means_ns
        .iter()
        .filter(|m| **m > 0.0)
        .map(|m| 1e9 / m)
        .collect();
    r.metrics.extend(Metric::from_samples(
        SplitLockFigures::SPLIT_LOCK_LOCKS_PER_S.metric,
        "locks/s",
        Better::Higher,
        &rates,
    ));
    r.samples.insert(
        format!("split_lock_op_mean_ns.cpu{cpu}"),
        s.block_means_ns.clone(),
    );
    r.effects.insert(
        "split_lock_op_census".into(),
        serde_json::to_value(s.census).expect("census serialises"),
    );
    r.effects.insert(
        "split_lock_op_histogram".into(),
        serde_json::to_value(&s.histogram).expect("histogram serialises"),
    );
    r.effects.insert(
        "split_lock_op_percentiles_ns".into(),
        serde_json::Value::Object(
            s.percentiles_ns
                .iter()
                .map(|&(name, ns)| (name.to_string(), json!(ns)))
                .collect(),
        ),
    );
    r.series.push(histogram_bars(&s.histogram));
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

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use crate::schema::split_lock::SplitLockMechanism;

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
        assert_eq!(r.effects["split_lock_measured"], "kernel_mitigation");
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
        assert_eq!(r.effects["split_lock_child"], "survived");
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
        let word = r.effects["split_lock_mechanism"].as_str().unwrap();
        assert!(SplitLockMechanism::from_word(word).is_some(), "{word}");
        let h: OpHistogram =
            serde_json::from_value(r.effects["split_lock_op_histogram"].clone()).unwrap();
        let census = &r.effects["split_lock_op_census"];
        assert_eq!(h.ops.iter().sum::<u64>(), census["ops"].as_u64().unwrap());
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
