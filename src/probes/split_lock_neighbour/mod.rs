//! The split-lock noisy neighbour: a victim on one CPU measures DRAM-sized pointer-chase
//! latency and streaming read bandwidth, alone and then while another CPU loops split locks.
//!
//! The seed measured what a bus lock does to everyone else: on Zen 2 and Zen 5 every access
//! beyond L1D slowed down by up to 10x, on Arrow Lake L2 misses roughly halved in speed, on
//! Alder Lake the damage was modest. This probe gives this machine's figure as two ratios.
//!
//! Bus locks slow every tenant of a shared host, not only this process, so the locking is
//! short by default (0.3 s in total, 0.15 s in `check`; `--duration` sets it) and split into
//! rounds that alternate with the quiet measurements, so drift hits both sides alike. The
//! aggressor is the child process of [`super::split_lock::locker`]: where the kernel traps
//! split locks it is the one that sleeps or dies, and the figures are the kernel's
//! mitigation as a neighbour feels it.
//!
//! Where split locks are trapped (by this kernel, or by the host: the Emerald Rapids guest's
//! aggressor managed ~5,400 a second, against ~200,000 on the Zen 5 guest), the aggressor
//! barely locks the bus, and what a neighbour feels is decided before the victim starts: the
//! aggressor's split locks are first timed one by one for 10 ms alone (the split-lock probe's
//! rule says whether they are trapped), and a trapped aggressor faces the smallest victim
//! buffer (64 MiB) instead of four LLCs: the Emerald Rapids guest reports a
//! 260 MiB L3, and building a 1 GiB chase there took 5 s of a 15 s `check`. Its achieved
//! rate is kept (`aggressor_split_locks_per_s`), so the verdict can say what the neighbour
//! was up against.
//!
//! The victim's workloads are the memory probes' own: the random cycle of
//! [`crate::measure::chase`] followed by `arch::pointer_chase`, and `arch::sequential_read`
//! with the widest vector loads (as `read_bw_1t_gbs`), over a [`Buffer`] that asks for
//! transparent huge pages (so page walks do not dominate) and reports what it got.

// Elsewhere than x86-64 the probe skips before measuring (`arch::require_x86_64`) and the
// kernels it times do not exist, so its measuring half is compiled but never called there.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code, unused_imports))]

use super::{Measurement, ProbeContext, ProbeFailure};
use crate::machine::Machine;
use crate::measure::Clock;
use crate::names::probe;
use crate::schema::figures::Analysis;
use crate::schema::probes::split_lock::SplitLockMeasured;
use crate::schema::probes::split_lock_neighbour::{
    LoadedSamplesKept, SplitLockNeighbourEffects, SplitLockNeighbourFigures,
    SplitLockNeighbourParams, SplitLockNeighbourRaw, SplitLockNeighbourSamples, VictimSamples,
};
use crate::schema::{Better, Metric};
use std::time::Instant;

/// The noisy-neighbour probe.
pub struct SplitLockNeighbourProbe;

/// Alone/loaded rounds.
const ROUNDS: usize = 3;
/// Links followed per latency sample: ~1 ms at DRAM latency, a few ms under split locks;
/// short, so the aggressor filter can tell the samples apart.
const CHASE_STEPS: u64 = 5_000;
/// Bytes read per bandwidth sample: ~0.5 ms at 30 GB/s.
const READ_BYTES: usize = 16 << 20;

/// Seed of the victim's chase cycle, fixed so every run chases the same pattern.
const SEED: u64 = 0x5eed_cafe;

/// How long the aggressor locks alone before the victim's buffer exists, its locks timed one
/// by one: 10 ms or 2000 locks (~2.4 ms of bus locks at ~1.2 us; ~100 traps at ~100 us).
const AGGRESSOR_PROBE: std::time::Duration = std::time::Duration::from_millis(10);
/// See [`AGGRESSOR_PROBE`].
const AGGRESSOR_PROBE_OPS: usize = 2000;

/// Victim buffer where the aggressor is trapped: the smallest [`buffer_bytes`] gives.
pub const TRAPPED_BUFFER_BYTES: usize = 64 << 20;

/// Buffer size: four times the last-level cache, so a random line is in DRAM three times in
/// four; between 64 MiB and 1 GiB; 256 MiB when the cache size is unknown; a whole number of
/// bandwidth samples.
pub fn buffer_bytes(llc_bytes: Option<u64>) -> usize {
    let bytes = match llc_bytes {
        Some(b) => (4 * b as usize).clamp(64 << 20, 1 << 30),
        None => 256 << 20,
    };
    bytes.next_multiple_of(READ_BYTES)
}

/// One timed piece of victim work.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Units of work done (links followed, bytes read).
    pub units: u64,
    /// Time it took, in ns.
    pub ns: f64,
    /// How far a side counter (the aggressor's split locks) moved meanwhile.
    pub side: u64,
}

/// Samples taken until `deadline`, each one `work()` timed; `work` returns the units done.
/// `side` is read around each sample, so the caller can tell what ran next to it.
pub fn sample_until(
    deadline: Instant,
    clock: &Clock,
    mut work: impl FnMut() -> u64,
    side: impl Fn() -> u64,
) -> Vec<Sample> {
    let mut out = Vec::new();
    loop {
        let s0 = side();
        let t0 = clock.start();
        let units = work();
        let t1 = clock.end();
        out.push(Sample {
            units,
            ns: clock.ticks_to_ns(t1 - t0),
            side: side().saturating_sub(s0),
        });
        if Instant::now() >= deadline {
            return out;
        }
    }
}

/// What the victim saw in one condition.
#[derive(Default)]
struct Victim {
    latency: Vec<Sample>,
    bandwidth: Vec<Sample>,
}

/// A loaded sample counts only if the aggressor ran through it: at least half the split-lock
/// rate of the busiest tenth of samples. On a shared machine the aggressor's CPU is also
/// time-sliced with other programs, and a sample taken while it was descheduled says nothing
/// about split locks.
pub const MIN_AGGRESSOR_DUTY: f64 = 0.5;

/// The samples, of those given, during which the aggressor ran at close to its full rate.
pub fn while_locking(samples: &[Sample]) -> Vec<Sample> {
    let rate = |s: &Sample| s.side as f64 / s.ns.max(1.0);
    let mut rates: Vec<f64> = samples.iter().map(rate).collect();
    rates.sort_by(f64::total_cmp);
    let Some(&busy) = rates.get(rates.len() * 9 / 10) else {
        return Vec::new();
    };
    if busy <= 0.0 {
        return Vec::new();
    }
    samples
        .iter()
        .filter(|s| rate(s) >= MIN_AGGRESSOR_DUTY * busy)
        .copied()
        .collect()
}

fn latency_ns(samples: &[Sample]) -> Vec<f64> {
    samples
        .iter()
        .map(|s| s.ns / s.units.max(1) as f64)
        .collect()
}

/// Bytes per ns is GB/s.
fn bandwidth_gb_s(samples: &[Sample]) -> Vec<f64> {
    samples
        .iter()
        .map(|s| s.units as f64 / s.ns.max(1.0))
        .collect()
}

impl Measurement for SplitLockNeighbourProbe {
    type Raw = SplitLockNeighbourRaw;
    type Figures = SplitLockNeighbourFigures;
    const NAME: &'static str = probe::SPLIT_LOCK_NEIGHBOUR;
    const ABOUT: &'static str = "DRAM latency/bandwidth of a victim CPU while another loops split locks \
         (bus locks: slows other tenants of a shared host; short by default)";

    fn measure(&self, ctx: &ProbeContext) -> Result<SplitLockNeighbourRaw, ProbeFailure> {
        crate::arch::require_x86_64().map_err(ProbeFailure::Skipped)?;
        run(ctx)
    }

    fn analyse(
        raw: &SplitLockNeighbourRaw,
        _machine: &Machine,
    ) -> Analysis<SplitLockNeighbourFigures> {
        analyse(raw)
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn run(_ctx: &ProbeContext) -> Result<SplitLockNeighbourRaw, ProbeFailure> {
    unreachable!("require_x86_64 skips first")
}

#[cfg(target_arch = "x86_64")]
fn run(ctx: &ProbeContext) -> Result<SplitLockNeighbourRaw, ProbeFailure> {
    use super::Profile;
    use super::c2c::require_two_cpus;
    use super::split_lock::locker::Locker;
    use crate::arch::VectorWidth;
    use crate::measure::{self, pin_to_cpu};
    use std::time::Duration;
    let cpus = ctx.cpus()?;
    require_two_cpus(&cpus)?;
    // The aggressor is a child process: a task as a thread is, under a pids limit or
    // RLIMIT_NPROC.
    crate::measure::threads::check_can_start(1)?;
    let (victim_cpu, aggressor_cpu) = (cpus[0], cpus[1]);
    let duration_s = ctx.options.duration.map_or(
        match ctx.options.profile {
            Profile::Quick => 0.15,
            Profile::Full => 0.3,
        },
        |d| d.as_secs_f64(),
    );
    // Each round locks for one latency phase and one bandwidth phase.
    let phase = Duration::from_secs_f64(duration_s / (2 * ROUNDS) as f64);
    let mode = ctx.machine.split_lock.effective;
    let trapped = mode.kernel_acts();
    let llc = ctx.machine.topology.as_ref().and_then(|t| t.llc_bytes());
    let bytes = buffer_bytes(llc);
    let width = VectorWidth::widest();

    // Pinned before the buffer exists, so its pages are faulted in on the victim's CPU (its
    // NUMA node's memory, not whichever node the unpinned thread happened to be on).
    let _pin = pin_to_cpu(victim_cpu)?;
    let core_hz = measure::estimate_core_clock(ctx.clock, 5).map(|c| c.hz);
    // Forked before the big buffer exists, so the fork copies little.
    // Small batches: the ops counter the victim reads around each sample advances per
    // batch, and a bandwidth sample lasts well under a millisecond.
    let batch = if trapped { 1 } else { 8 };
    let locker = Locker::spawn(aggressor_cpu, batch, ctx.clock).map_err(ProbeFailure::Failed)?;
    let (alone_ns, aggressor_trapped) = aggressor_alone(ctx, &locker, mode)?;
    if aggressor_trapped {
        locker.set_batch(1);
    }
    let bytes = if aggressor_trapped {
        TRAPPED_BUFFER_BYTES
    } else {
        bytes
    };
    let (buf, backing, start) = victim_buffer(bytes)?;
    let rounds = victim_rounds(ctx, &locker, &buf, start, width, phase).map_err(|e| {
        if trapped {
            kernel_stops_split_locks(e, mode)
        } else {
            ProbeFailure::Failed(e)
        }
    })?;
    drop(locker);
    let (before, after) = (rounds.before, rounds.after);
    let len = buf.len();
    let findings = Findings {
        victim_cpu,
        aggressor_cpu,
        duration_s,
        buffer_bytes: len,
        backing,
        vector_isa: width.name(),
        core_hz,
        mode,
        trapped,
        aggressor_trapped,
        alone_ns,
        split_locks: after.ops - before.ops,
        locking_s: (after.locking_ns - before.locking_ns) * 1e-9,
    };
    drop(buf);
    Ok(record(&findings, &rounds.alone, &rounds.loaded))
}

/// The skip where the kernel stops split locks (`e`: how the aggressor ended): they cannot
/// slow a neighbour there.
fn kernel_stops_split_locks(e: String, mode: crate::machine::SplitLockMode) -> ProbeFailure {
    ProbeFailure::Skipped(format!(
        "{e} (split_lock_detect mode {mode}): the kernel stops split locks here, so they \
         cannot slow a neighbour"
    ))
}

/// The victim's buffer of `bytes` on transparent huge pages where it gets them, what backs
/// it, and the start of the random chase cycle built through its lines.
#[cfg(target_arch = "x86_64")]
fn victim_buffer(
    bytes: usize,
) -> Result<
    (
        crate::measure::buffer::Buffer,
        crate::measure::buffer::PageBacking,
        *const u64,
    ),
    ProbeFailure,
> {
    use crate::measure::buffer::{Buffer, BufferError, PageKind};
    use crate::measure::chase::{Layout, SplitMix64, build, sattolo_cycle};
    let mut buf = Buffer::allocate(bytes as u64, PageKind::Thp).map_err(|e| match e {
        BufferError::NotEnoughMemory { .. } => ProbeFailure::Skipped(e.to_string()),
        _ => ProbeFailure::Failed(e.to_string()),
    })?;
    let backing = buf
        .backing()
        .map_err(|e| ProbeFailure::Failed(e.to_string()))?;
    let lines = buf.len() / 64;
    let next = sattolo_cycle(lines, &mut SplitMix64::new(SEED));
    // SAFETY: `lines` slots of 64 bytes fill the buffer, which is page aligned.
    let start = unsafe { build(buf.as_mut_ptr(), &next, Layout::Lines) };
    drop(next);
    Ok((buf, backing, start))
}

/// The aggressor alone, its locks timed one by one: trapped or not, by the split-lock
/// probe's own rule (`schema::split_lock::classify`), preemptions discounted, so a busy CPU
/// is not taken for a trap. Returns its mean time per lock and whether it is trapped.
#[cfg(target_arch = "x86_64")]
fn aggressor_alone(
    ctx: &ProbeContext,
    locker: &super::split_lock::locker::Locker,
    mode: crate::machine::SplitLockMode,
) -> Result<(Option<f64>, bool), ProbeFailure> {
    use crate::schema::split_lock::{MechanismEvidence, OpCensus, classify};
    let trapped = mode.kernel_acts();
    let alone = match locker.time_ops(ctx.clock, AGGRESSOR_PROBE_OPS, AGGRESSOR_PROBE) {
        Ok(block) => block,
        Err(e) if trapped => {
            return Err(kernel_stops_split_locks(e, mode));
        }
        Err(e) => return Err(ProbeFailure::Failed(e)),
    };
    let evidence = MechanismEvidence {
        kernel: mode,
        guest: ctx.machine.hypervisor.is_some(),
        killed_by_sigbus: false,
        census: Some(OpCensus::of(
            &alone.per_op_ns,
            alone.voluntary_switches,
            alone.involuntary_switches,
        )),
        mean_ns: None,
    };
    let aggressor_trapped = trapped || classify(&evidence).is_some_and(|(m, _)| m.trapped());
    Ok((alone.mean_ns(), aggressor_trapped))
}

/// What the victim saw alone and loaded, and the aggressor's totals around the rounds.
#[cfg(target_arch = "x86_64")]
struct VictimRounds {
    alone: Victim,
    loaded: Victim,
    before: super::split_lock::locker::LockTotals,
    after: super::split_lock::locker::LockTotals,
}

/// The victim's work on `buf` (its chase starting at `start`): after an untimed warm-up, in
/// [`alternate`]'s rounds, each phase (`phase` long) a latency then a bandwidth measurement,
/// the aggressor's split-lock count read around every sample. An error is how the
/// aggressor ended.
#[cfg(target_arch = "x86_64")]
fn victim_rounds(
    ctx: &ProbeContext,
    locker: &super::split_lock::locker::Locker,
    buf: &crate::measure::buffer::Buffer,
    start: *const u64,
    width: crate::arch::VectorWidth,
    phase: std::time::Duration,
) -> Result<VictimRounds, String> {
    use crate::arch::{pointer_chase, sequential_read};
    use std::sync::atomic::Ordering;
    let clock = ctx.clock;
    let base = buf.as_ptr();
    let len = buf.len();
    // SAFETY (chases and reads below): the chase follows the cycle just built in the live
    // buffer; every read lies inside it, at a multiple of READ_BYTES (a 512-byte multiple).
    let read =
        |offset: usize| unsafe { sequential_read(base.add(offset), READ_BYTES, width, None) };
    // Warm-up: settle the victim's clock and the page tables.
    (0..len).step_by(READ_BYTES).for_each(read);
    let mut at = unsafe { pointer_chase(start, CHASE_STEPS) };
    let mut offset = 0usize;
    let ops = locker.ops_counter();
    let observe = |victim: &mut Victim| {
        let end = Instant::now() + phase;
        victim.latency.extend(sample_until(
            end,
            clock,
            || {
                at = unsafe { pointer_chase(at, CHASE_STEPS) };
                CHASE_STEPS
            },
            || ops.load(Ordering::Relaxed),
        ));
        let end = Instant::now() + phase;
        victim.bandwidth.extend(sample_until(
            end,
            clock,
            || {
                read(offset);
                offset = (offset + READ_BYTES) % len;
                READ_BYTES as u64
            },
            || ops.load(Ordering::Relaxed),
        ));
    };

    let before = locker.totals();
    let (alone, loaded) = alternate(ctx, locker, observe)?;
    let after = locker.totals();
    std::hint::black_box(at);
    Ok(VictimRounds {
        alone,
        loaded,
        before,
        after,
    })
}

/// The victim's rounds: quiet, then while the aggressor locks, [`ROUNDS`] times, so drift
/// hits both sides alike. Returns what the victim saw alone and loaded, or how the aggressor
/// ended when it did not survive.
#[cfg(target_arch = "x86_64")]
fn alternate(
    ctx: &ProbeContext,
    locker: &super::split_lock::locker::Locker,
    mut observe: impl FnMut(&mut Victim),
) -> Result<(Victim, Victim), String> {
    let mut alone = Victim::default();
    let mut loaded = Victim::default();
    ctx.progress
        .begin(probe::SPLIT_LOCK_NEIGHBOUR, ROUNDS as u64);
    let mut child_end = None;
    for _ in 0..ROUNDS {
        observe(&mut alone);
        if let Err(e) = locker.start() {
            child_end = Some(e);
            break;
        }
        observe(&mut loaded);
        if let Err(e) = locker.stop() {
            child_end = Some(e);
            break;
        }
        ctx.progress.advance(1);
    }
    ctx.progress.finish();
    match child_end {
        Some(e) => Err(e),
        None => Ok((alone, loaded)),
    }
}

/// The set-up a run measured under and what the aggressor achieved, for the result.
struct Findings {
    victim_cpu: usize,
    aggressor_cpu: usize,
    duration_s: f64,
    buffer_bytes: usize,
    backing: crate::measure::buffer::PageBacking,
    vector_isa: &'static str,
    core_hz: Option<f64>,
    mode: crate::machine::SplitLockMode,
    /// The kernel acts on split locks (from its mode).
    trapped: bool,
    /// Trapped by the kernel's mode or by the aggressor's timed locks.
    aggressor_trapped: bool,
    /// The aggressor's mean time per lock, alone.
    alone_ns: Option<f64>,
    /// Split locks the aggressor executed during the loaded rounds.
    split_locks: u64,
    /// Seconds the aggressor spent locking during the loaded rounds.
    locking_s: f64,
}

/// The raw record: the set-up in params and effects, what the aggressor achieved, and the
/// victim's samples alone and loaded (the loaded ones only those taken while the aggressor
/// ran, [`while_locking`]), with the aggressor's rate during every loaded sample.
fn record(f: &Findings, alone: &Victim, loaded: &Victim) -> SplitLockNeighbourRaw {
    let (victim_cpu, aggressor_cpu) = (f.victim_cpu, f.aggressor_cpu);
    let kept_lat = while_locking(&loaded.latency);
    let kept_bw = while_locking(&loaded.bandwidth);
    // What the filter saw: the aggressor's split locks per microsecond in every loaded
    // sample, kept or not.
    let per_us = |v: &[Sample]| -> Vec<f64> {
        v.iter()
            .map(|s| s.side as f64 * 1e3 / s.ns.max(1.0))
            .collect()
    };
    let mut samples = SplitLockNeighbourSamples {
        aggressor_split_locks_per_us_latency: per_us(&loaded.latency),
        aggressor_split_locks_per_us_bandwidth: per_us(&loaded.bandwidth),
        ..SplitLockNeighbourSamples::default()
    };
    samples.set_victim(
        victim_cpu,
        VictimSamples {
            latency_ns: latency_ns(&alone.latency),
            latency_under_split_locks_ns: latency_ns(&kept_lat),
            bandwidth_gb_s: bandwidth_gb_s(&alone.bandwidth),
            bandwidth_under_split_locks_gb_s: bandwidth_gb_s(&kept_bw),
        },
    );
    SplitLockNeighbourRaw {
        params: SplitLockNeighbourParams {
            cpus: vec![victim_cpu, aggressor_cpu],
            duration_s: f.duration_s,
            rounds: ROUNDS,
            buffer_bytes: f.buffer_bytes as u64,
            chase_steps_per_sample: CHASE_STEPS,
            read_bytes_per_sample: READ_BYTES as u64,
            min_aggressor_duty: MIN_AGGRESSOR_DUTY,
        },
        effects: SplitLockNeighbourEffects {
            victim_cpu,
            aggressor_cpu,
            pinned_cpus: vec![victim_cpu, aggressor_cpu],
            page_backing: Some(f.backing.clone()),
            vector_isa: Some(f.vector_isa.to_string()),
            core_clock_ghz: f.core_hz.map(|hz| hz / 1e9),
            kernel_split_lock_mode: f.mode,
            split_lock_measured: if f.trapped {
                SplitLockMeasured::KernelMitigation
            } else {
                SplitLockMeasured::Hardware
            },
            aggressor_split_locks: f.split_locks,
            bus_locking_s: f.locking_s,
            aggressor_alone_ns_per_lock: f.alone_ns,
            aggressor_trapped: f.aggressor_trapped,
            loaded_samples_kept: LoadedSamplesKept {
                latency: [kept_lat.len(), loaded.latency.len()],
                bandwidth: [kept_bw.len(), loaded.bandwidth.len()],
            },
        },
        samples,
        series: Vec::new(),
    }
}

/// The figures of a raw record: the aggressor's rate, the victim's latency and bandwidth
/// alone and under split locks (medians with their intervals), the latencies in cycles of
/// the victim's core clock where it was estimated, and the ratios of the medians.
pub fn analyse(raw: &SplitLockNeighbourRaw) -> Analysis<SplitLockNeighbourFigures> {
    type F = SplitLockNeighbourFigures;
    let e = &raw.effects;
    let v = raw.samples.victim(e.victim_cpu);
    let ns = |id: crate::schema::figures::FigureId, unit: &str, better, x: &[f64]| {
        Metric::from_samples(id.metric, unit, better, x)
    };
    // Cycles of the victim's core clock, measured on the victim's CPU.
    let cycles = |id: crate::schema::figures::FigureId, x: &[f64]| {
        let ghz = e.core_clock_ghz?;
        let c: Vec<f64> = x.iter().map(|x| x * ghz).collect();
        Metric::from_samples(id.metric, "cycles", Better::Lower, &c)
    };
    let med = |x: &[f64]| crate::stats::median(x).filter(|m| *m > 0.0);
    let ratio = |id: crate::schema::figures::FigureId, alone: &[f64], loaded: &[f64], better| {
        let (a, l) = (med(alone)?, med(loaded)?);
        Some(Metric::derived(id.metric, l / a, "ratio", better))
    };
    Analysis::of(SplitLockNeighbourFigures {
        aggressor_split_locks_per_s: (e.bus_locking_s > 0.0).then(|| {
            Metric::derived(
                F::AGGRESSOR_SPLIT_LOCKS_PER_S.metric,
                e.aggressor_split_locks as f64 / e.bus_locking_s,
                "locks/s",
                Better::Neither,
            )
        }),
        victim_latency_ns: ns(F::VICTIM_LATENCY_NS, "ns", Better::Lower, &v.latency_ns),
        victim_latency_under_split_locks_ns: ns(
            F::VICTIM_LATENCY_UNDER_SPLIT_LOCKS_NS,
            "ns",
            Better::Lower,
            &v.latency_under_split_locks_ns,
        ),
        victim_bandwidth_gb_s: ns(
            F::VICTIM_BANDWIDTH_GB_S,
            "GB/s",
            Better::Higher,
            &v.bandwidth_gb_s,
        ),
        victim_bandwidth_under_split_locks_gb_s: ns(
            F::VICTIM_BANDWIDTH_UNDER_SPLIT_LOCKS_GB_S,
            "GB/s",
            Better::Higher,
            &v.bandwidth_under_split_locks_gb_s,
        ),
        victim_latency_cycles: cycles(F::VICTIM_LATENCY_CYCLES, &v.latency_ns),
        victim_latency_under_split_locks_cycles: cycles(
            F::VICTIM_LATENCY_UNDER_SPLIT_LOCKS_CYCLES,
            &v.latency_under_split_locks_ns,
        ),
        split_lock_neighbour_latency_ratio: ratio(
            F::SPLIT_LOCK_NEIGHBOUR_LATENCY_RATIO,
            &v.latency_ns,
            &v.latency_under_split_locks_ns,
            Better::Lower,
        ),
        split_lock_neighbour_bandwidth_ratio: ratio(
            F::SPLIT_LOCK_NEIGHBOUR_BANDWIDTH_RATIO,
            &v.bandwidth_gb_s,
            &v.bandwidth_under_split_locks_gb_s,
            Better::Higher,
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(ns: f64, side: u64) -> Sample {
        Sample {
            units: 1000,
            ns,
            side,
        }
    }

    #[test]
    fn samples_without_the_aggressor_running_are_dropped() {
        // Nine samples at ~1 split lock per 10 ns, one where the aggressor was descheduled.
        let mut v: Vec<Sample> = (0..9).map(|i| s(1000.0, 100 + i)).collect();
        v.push(s(1000.0, 3));
        let kept = while_locking(&v);
        assert_eq!(kept.len(), 9);
        assert!(kept.iter().all(|x| x.side >= 100));
        // A slower sample at the same rate is kept: rate, not count, decides.
        v.push(s(3000.0, 330));
        assert_eq!(while_locking(&v).len(), 10);
        // No aggressor at all: nothing counts as loaded.
        assert!(while_locking(&[s(1000.0, 0), s(1000.0, 0)]).is_empty());
        assert!(while_locking(&[]).is_empty());
    }

    #[test]
    fn victim_figures_per_sample() {
        assert_eq!(latency_ns(&[s(150_000.0, 0)]), vec![150.0]);
        assert_eq!(bandwidth_gb_s(&[s(100.0, 0)]), vec![10.0]);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn a_trapped_aggressor_faces_the_smallest_buffer_and_reports_its_rate() {
        // Where the kernel traps split locks (forced here; on the Emerald Rapids guest the
        // host did, and a 1 GiB victim buffer took 5 s to build for a 1.0x ratio), the victim
        // buffer is the smallest, and the aggressor's achieved rate is kept.
        use crate::probes::{ProbeOptions, Profile};
        if !crate::probes::two_cpus_or_skip() {
            return;
        }
        let mut machine = crate::machine::Machine::detect();
        machine.split_lock.effective = crate::machine::SplitLockMode::WarnSleep;
        let mut options = ProbeOptions::new(Profile::Quick);
        options.duration = Some(std::time::Duration::from_millis(30));
        let r = crate::probes::run_here(&SplitLockNeighbourProbe, &machine, &options).unwrap();
        let raw: SplitLockNeighbourRaw = r.raw().unwrap();
        assert_eq!(raw.params.buffer_bytes, TRAPPED_BUFFER_BYTES as u64);
        assert!(raw.effects.aggressor_trapped);
        assert!(raw.effects.aggressor_alone_ns_per_lock.unwrap() > 0.0);
        let f = r.figures::<SplitLockNeighbourFigures>().unwrap();
        assert!(f.aggressor_split_locks_per_s.unwrap().value > 0.0);
    }

    fn raw() -> SplitLockNeighbourRaw {
        let mut samples = SplitLockNeighbourSamples::default();
        samples.set_victim(
            2,
            VictimSamples {
                latency_ns: vec![100.0, 110.0, 105.0],
                latency_under_split_locks_ns: vec![500.0, 520.0, 480.0],
                bandwidth_gb_s: vec![20.0, 22.0, 21.0],
                bandwidth_under_split_locks_gb_s: vec![4.0, 4.2, 4.4],
            },
        );
        SplitLockNeighbourRaw {
            params: SplitLockNeighbourParams {
                cpus: vec![2, 3],
                ..SplitLockNeighbourParams::default()
            },
            effects: SplitLockNeighbourEffects {
                victim_cpu: 2,
                aggressor_cpu: 3,
                pinned_cpus: vec![2, 3],
                page_backing: None,
                vector_isa: None,
                core_clock_ghz: Some(3.0),
                kernel_split_lock_mode: crate::machine::SplitLockMode::NotDetected,
                split_lock_measured: SplitLockMeasured::Hardware,
                aggressor_split_locks: 50_000,
                bus_locking_s: 0.1,
                aggressor_alone_ns_per_lock: Some(1200.0),
                aggressor_trapped: false,
                loaded_samples_kept: LoadedSamplesKept {
                    latency: [3, 3],
                    bandwidth: [3, 4],
                },
            },
            samples,
            series: Vec::new(),
        }
    }

    /// The Zen 3 guest's case: bus locks slow the victim ~5x; the figures are the medians,
    /// the cycles at the victim's clock, the ratios of the medians, in report order.
    #[test]
    fn analyse_gives_the_victims_figures_and_the_aggressors_rate() {
        use crate::schema::figures::Figures;
        let a = analyse(&raw());
        assert!(a.not_measured.is_empty());
        let f = a.figures;
        let v = |m: &Option<Metric>| m.as_ref().unwrap().value;
        assert_eq!(v(&f.aggressor_split_locks_per_s), 500_000.0);
        assert_eq!(v(&f.victim_latency_ns), 105.0);
        assert_eq!(v(&f.victim_latency_under_split_locks_ns), 500.0);
        assert_eq!(v(&f.victim_bandwidth_gb_s), 21.0);
        assert_eq!(v(&f.victim_bandwidth_under_split_locks_gb_s), 4.2);
        assert!((v(&f.victim_latency_cycles) - 315.0).abs() < 1e-9);
        assert!((v(&f.victim_latency_under_split_locks_cycles) - 1500.0).abs() < 1e-9);
        assert!((v(&f.split_lock_neighbour_latency_ratio) - 500.0 / 105.0).abs() < 1e-12);
        assert!((v(&f.split_lock_neighbour_bandwidth_ratio) - 0.2).abs() < 1e-12);
        let names: Vec<String> = f.into_metrics().into_iter().map(|m| m.name).collect();
        assert_eq!(names[0], "aggressor_split_locks_per_s");
        assert_eq!(names.len(), 9);
    }

    #[test]
    fn without_locking_time_or_a_clock_those_figures_are_left_out() {
        let mut raw = raw();
        raw.effects.bus_locking_s = 0.0;
        raw.effects.core_clock_ghz = None;
        raw.samples.set_victim(2, VictimSamples::default());
        let f = analyse(&raw).figures;
        assert_eq!(f, SplitLockNeighbourFigures::default());
    }

    #[test]
    fn a_record_saved_and_read_back_gives_the_same_figures() {
        let raw = raw();
        let mut r =
            crate::schema::ProbeResult::new(probe::SPLIT_LOCK_NEIGHBOUR, crate::schema::Status::Ok);
        crate::schema::figures::RawRecord::write_into(&raw, &mut r);
        assert_eq!(
            r.samples["victim_latency_ns.cpu2"],
            vec![100.0, 110.0, 105.0]
        );
        assert_eq!(r.effects["loaded_samples_kept"]["bandwidth"][1], 4);
        let back: SplitLockNeighbourRaw = r.raw().unwrap();
        assert_eq!(back, raw);
        assert_eq!(analyse(&back), analyse(&raw));
    }

    #[test]
    fn buffer_is_four_llcs_within_bounds() {
        assert_eq!(buffer_bytes(Some(32 << 20)), 128 << 20);
        assert_eq!(buffer_bytes(Some(4 << 20)), 64 << 20);
        assert_eq!(buffer_bytes(Some(1 << 30)), 1 << 30);
        assert_eq!(buffer_bytes(None), 256 << 20);
    }
}
