//! The PAUSE probe's measurements (x86-64 only): per-CPU PAUSE runs with the core clock, the
//! back-to-back and spaced runs for pause-loop exits, and long spins for the sustained cost.

use super::ple;
use crate::measure::{estimate_core_clock, pin_to_cpu};
use crate::names::probe;
use crate::probes::{ProbeContext, ProbeFailure, Profile};
use crate::schema::Series;
use crate::schema::probes::pause::{
    PauseEffects, PauseParams, PauseRaw, PauseSamples, PleMode, fastest_cpu,
};

/// PAUSEs per timed sample: 4096 take ~0.1 ms at 25 ns, ~16 us at 4 ns; long enough to dwarf
/// the clock reads, short enough to fit between interrupts.
const PAUSES_PER_SAMPLE: u64 = 4096;
/// PAUSEs in one timed long spin (about 13 ms at 25 ns): long enough to reach a hypervisor's
/// steady pause-loop-exit window, as a lock that spins millions of PAUSEs does.
const SUSTAINED_PAUSES: u64 = 1 << 19;
/// Long spins timed for `pause_sustained_ns`.
const SUSTAINED_RUNS: usize = 3;
/// PAUSEs per chunk in the pause-loop-exit runs: fine enough to place a spike to 8 PAUSEs.
const PLE_CHUNK_PAUSES: u64 = 8;

/// Per-CPU measurements.
struct CpuPause {
    cpu: usize,
    core_hz: f64,
    ns: Vec<f64>,
}

fn measure_on_cpu(ctx: &ProbeContext, cpu: usize, reps: usize) -> Result<CpuPause, ProbeFailure> {
    let _pin = pin_to_cpu(cpu)?;
    let clock = ctx.clock;
    let core = estimate_core_clock(clock, 7)
        .ok_or_else(|| ProbeFailure::Failed("core clock estimate failed".into()))?;
    crate::arch::pause_loop(PAUSES_PER_SAMPLE); // warm-up
    let mut ticks = Vec::with_capacity(reps);
    for _ in 0..reps {
        let t0 = clock.start();
        crate::arch::pause_loop(PAUSES_PER_SAMPLE);
        let t1 = clock.end();
        ticks.push((t1 - t0) as f64 / PAUSES_PER_SAMPLE as f64);
    }
    // Saved in ns with the clock's ns per tick, from which the analysis gives ticks back.
    let ns = ticks.iter().map(|t| t * clock.ns_per_tick()).collect();
    Ok(CpuPause {
        cpu,
        core_hz: core.hz,
        ns,
    })
}

/// Times `runs` fresh runs of `chunks` chunks of PAUSEs, back to back or spaced, in ns per
/// chunk. Each run starts after a 2 ms sleep, which lets the hypervisor reset its view of
/// the vCPU, so pause-loop exits start counting from the run's first PAUSE.
fn time_runs(ctx: &ProbeContext, runs: usize, chunks: usize, spaced: bool) -> Vec<Vec<f64>> {
    let clock = ctx.clock;
    // Filled with a non-zero value so every page is touched before timing: a first write to
    // a fresh page would fault inside the timed loop and look like a spike every 512 chunks.
    let mut stamps = vec![1u64; chunks + 1];
    (0..runs)
        .map(|_| {
            std::thread::sleep(std::time::Duration::from_millis(2));
            stamps[0] = clock.start();
            for stamp in stamps.iter_mut().skip(1) {
                if spaced {
                    crate::arch::pause_loop_spaced(PLE_CHUNK_PAUSES);
                } else {
                    crate::arch::pause_loop(PLE_CHUNK_PAUSES);
                }
                *stamp = clock.start();
            }
            stamps
                .windows(2)
                .map(|w| clock.ticks_to_ns(w[1] - w[0]))
                .collect()
        })
        .collect()
}

/// What the pause-loop-exit runs timed on one CPU.
struct PleRuns {
    /// Chunk times of the runs of PAUSEs back to back, ns per chunk.
    tight: Vec<Vec<f64>>,
    /// Chunk times of the spaced runs (the control), ns per chunk.
    spaced: Vec<Vec<f64>>,
    /// ns per PAUSE of each long spin.
    sustained_ns: Vec<f64>,
}

/// Pause-loop exits, timed on `cpu` (whose PAUSE `first` measured): `runs` runs of PAUSEs
/// back to back and as many spaced, for the same time each (host noise arrives per unit of
/// time, so equal time gives the control equal odds), then the long spins of the sustained
/// cost.
fn pause_loop_exit_runs(
    ctx: &ProbeContext,
    cpu: usize,
    first: &CpuPause,
    runs: usize,
    run_ms: f64,
) -> Result<PleRuns, ProbeFailure> {
    let pause_ns_first = crate::stats::median(&first.ns).unwrap_or(25.0);
    let spacing_ns = crate::arch::SPACING_ADDS_PER_PAUSE as f64 / first.core_hz * 1e9;
    let chunks_for = |ns_per_pause: f64| {
        ((run_ms * 1e6 / (ns_per_pause * PLE_CHUNK_PAUSES as f64)) as usize).clamp(1_000, 4_000_000)
    };
    let _pin = pin_to_cpu(cpu)?;
    let tight = time_runs(ctx, runs, chunks_for(pause_ns_first), false);
    let spaced = time_runs(ctx, runs, chunks_for(pause_ns_first + spacing_ns), true);
    // Straight after the back-to-back runs, so the window is as a long spinner finds it.
    let sustained_ns: Vec<f64> = (0..SUSTAINED_RUNS)
        .map(|_| {
            let t0 = ctx.clock.start();
            crate::arch::pause_loop(SUSTAINED_PAUSES);
            let t1 = ctx.clock.end();
            ctx.clock.ticks_to_ns(t1 - t0) / SUSTAINED_PAUSES as f64
        })
        .collect();
    Ok(PleRuns {
        tight,
        spaced,
        sustained_ns,
    })
}

pub(super) fn run_pause(ctx: &ProbeContext) -> Result<PauseRaw, ProbeFailure> {
    let cpus = ctx.cpus()?;
    if cpus.is_empty() {
        return Err(ProbeFailure::Skipped("no CPU available to run on".into()));
    }
    let reps = ctx.repetitions(15, 61);
    // Runs of PAUSEs for the pause-loop-exit test, and the length of each: long enough to
    // hold several of KVM's capped windows (65,536 PAUSEs, 1.6 ms at 25 ns) between host
    // noise.
    let (ple_runs, ple_run_ms) = match ctx.options.profile {
        Profile::Quick => (8, 30.0),
        Profile::Full => (16, 25.0),
    };

    ctx.progress.begin(probe::PAUSE, cpus.len() as u64 + 1);
    let mut per_cpu = Vec::new();
    for &cpu in &cpus {
        per_cpu.push(measure_on_cpu(ctx, cpu, reps)?);
        ctx.progress.advance(1);
    }

    // Pause-loop exits: on the first CPU, PAUSEs back to back and spaced, for the same time
    // each (host noise arrives per unit of time, so equal time gives the control equal odds).
    let ple_cpu = cpus[0];
    let PleRuns {
        tight,
        spaced,
        sustained_ns,
    } = pause_loop_exit_runs(ctx, ple_cpu, &per_cpu[0], ple_runs, ple_run_ms)?;
    ctx.progress.advance(1);
    ctx.progress.finish();
    let evidence = ple::judge(&tight, &spaced, PLE_CHUNK_PAUSES);

    let mut samples = PauseSamples {
        pause_sustained_ns: sustained_ns,
        ..PauseSamples::default()
    };
    for c in &per_cpu {
        samples.set_pause_ns(c.cpu, c.ns.clone());
    }
    record_stalls(&mut samples, &tight, &spaced, &evidence);
    let series = vec![Series::Bars {
        name: "pause_ns_per_cpu".into(),
        unit: "ns".into(),
        labels: per_cpu.iter().map(|c| format!("cpu{}", c.cpu)).collect(),
        values: per_cpu
            .iter()
            // Every CPU in per_cpu has `reps` >= 1 samples, so a median exists.
            .map(|c| crate::stats::median(&c.ns).unwrap_or_default())
            .collect(),
    }];
    Ok(PauseRaw {
        params: PauseParams {
            headline_cpu: fastest_cpu(&cpus, &samples),
            cpus: cpus.clone(),
            repetitions: reps,
            pauses_per_sample: PAUSES_PER_SAMPLE,
            ple_runs,
            sustained_pauses_per_run: Some(SUSTAINED_PAUSES),
            ple_run_ms,
            ple_cpu,
        },
        effects: PauseEffects {
            pinned_cpus: cpus,
            core_clock_ghz_by_cpu: per_cpu.iter().map(|c| (c.cpu, c.core_hz / 1e9)).collect(),
            pause_loop_exits: evidence.verdict.clone(),
            pause_loop_exit_evidence: evidence,
            clock_ns_per_tick: ctx.clock.ns_per_tick(),
        },
        samples,
        series,
    })
}

/// Raw evidence: where each pause-loop-exit run stalled, in PAUSEs from its start.
fn record_stalls(
    samples: &mut PauseSamples,
    tight: &[Vec<f64>],
    spaced: &[Vec<f64>],
    evidence: &ple::PleEvidence,
) {
    for (mode, runs, median) in [
        (
            PleMode::BackToBack,
            tight,
            evidence.back_to_back.median_chunk_ns,
        ),
        (PleMode::Spaced, spaced, evidence.spaced.median_chunk_ns),
    ] {
        for (i, run) in runs.iter().enumerate() {
            samples.set_stalls(
                mode,
                i,
                ple::find_stalls(run, median)
                    .iter()
                    .map(|(c, _)| ((c + 1) as u64 * PLE_CHUNK_PAUSES) as f64)
                    .collect(),
            );
        }
    }
}
