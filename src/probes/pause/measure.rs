//! The PAUSE probe's measurements (x86-64 only): per-CPU PAUSE runs with the core clock, the
//! back-to-back and spaced runs for pause-loop exits, and long spins for the sustained cost.

use super::ple;
use crate::measure::{estimate_core_clock, pin_to_cpu};
use crate::names::{metric, probe};
use crate::probes::{ProbeContext, ProbeFailure, Profile};
use crate::schema::{Better, Metric, ProbeResult, Series, Status};
use serde_json::json;

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
    ticks: Vec<f64>,
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
    let ns = ticks.iter().map(|t| t * clock.ns_per_tick()).collect();
    Ok(CpuPause {
        cpu,
        core_hz: core.hz,
        ns,
        ticks,
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

pub(super) fn run_pause(ctx: &ProbeContext) -> Result<ProbeResult, ProbeFailure> {
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

    let mut r = ProbeResult::new(probe::PAUSE, Status::Ok);
    r.params.insert("cpus".into(), json!(cpus));
    r.params.insert("repetitions".into(), json!(reps));
    r.params
        .insert("pauses_per_sample".into(), json!(PAUSES_PER_SAMPLE));
    r.params.insert("ple_runs".into(), json!(ple_runs));
    r.params
        .insert("sustained_pauses_per_run".into(), json!(SUSTAINED_PAUSES));
    r.params.insert("ple_run_ms".into(), json!(ple_run_ms));
    r.params.insert("ple_cpu".into(), json!(ple_cpu));

    record_headline(&mut r, &per_cpu, &sustained_ns);

    r.effects.insert("pinned_cpus".into(), json!(cpus));
    r.effects.insert(
        "core_clock_ghz_by_cpu".into(),
        json!(
            per_cpu
                .iter()
                .map(|c| (c.cpu.to_string(), c.core_hz / 1e9))
                .collect::<std::collections::BTreeMap<_, _>>()
        ),
    );
    r.effects
        .insert("pause_loop_exits".into(), json!(evidence.verdict));
    r.effects.insert(
        "pause_loop_exit_evidence".into(),
        serde_json::to_value(&evidence).expect("evidence serialises"),
    );

    for c in &per_cpu {
        r.samples
            .insert(format!("pause_ns.cpu{}", c.cpu), c.ns.clone());
    }
    record_stalls(&mut r, &tight, &spaced, &evidence);
    r.series.push(Series::Bars {
        name: "pause_ns_per_cpu".into(),
        unit: "ns".into(),
        labels: per_cpu.iter().map(|c| format!("cpu{}", c.cpu)).collect(),
        values: per_cpu
            .iter()
            // Every CPU in per_cpu has `reps` >= 1 samples, so a median exists.
            .map(|c| crate::stats::median(&c.ns).unwrap_or_default())
            .collect(),
    });
    Ok(r)
}

/// The headline figures, from the CPU with the fastest PAUSE, the core clock across CPUs and
/// the sustained cost.
fn record_headline(r: &mut ProbeResult, per_cpu: &[CpuPause], sustained_ns: &[f64]) {
    // The headline is the CPU with the fastest PAUSE, not all CPUs pooled. Interference only
    // adds time (Chen and Revels, "Robust benchmarking in noisy environments", 2016), and on a
    // VM it differs by vCPU: on the Zen 3 guest one vCPU read 24.1 ns and the other 27.4 ns
    // when its host core's other hardware thread was busy, and the two swapped between runs,
    // so a pooled median jumped between the two. The other CPUs keep their own samples and bar.
    let fastest = per_cpu
        .iter()
        .min_by(|a, b| {
            let m = |c: &CpuPause| crate::stats::median(&c.ns).unwrap_or(f64::INFINITY);
            m(a).total_cmp(&m(b))
        })
        .expect("at least one CPU was measured");
    let cycles: Vec<f64> = fastest
        .ns
        .iter()
        .map(|ns| ns * fastest.core_hz * 1e-9)
        .collect();
    let core_ghz: Vec<f64> = per_cpu.iter().map(|c| c.core_hz / 1e9).collect();
    r.params.insert("headline_cpu".into(), json!(fastest.cpu));
    r.metrics.extend(
        [
            Metric::from_samples(metric::PAUSE_NS, "ns", Better::Lower, &fastest.ns),
            Metric::from_samples(metric::PAUSE_CYCLES, "cycles", Better::Lower, &cycles),
            Metric::from_samples("pause_tsc_ticks", "ticks", Better::Lower, &fastest.ticks),
            // One value per CPU: a range across CPUs, not an interval.
            Metric::across_places(metric::CORE_CLOCK_GHZ, "GHz", Better::Neither, &core_ghz),
            // What a long spin pays per PAUSE, pause-loop exits and host noise included.
            Metric::from_samples(
                metric::PAUSE_SUSTAINED_NS,
                "ns",
                Better::Lower,
                sustained_ns,
            ),
        ]
        .into_iter()
        .flatten(),
    );
}

/// Raw evidence: where each pause-loop-exit run stalled, in PAUSEs from its start.
fn record_stalls(
    r: &mut ProbeResult,
    tight: &[Vec<f64>],
    spaced: &[Vec<f64>],
    evidence: &ple::PleEvidence,
) {
    for (mode, runs, median) in [
        ("back_to_back", tight, evidence.back_to_back.median_chunk_ns),
        ("spaced", spaced, evidence.spaced.median_chunk_ns),
    ] {
        for (i, run) in runs.iter().enumerate() {
            r.samples.insert(
                format!("ple_{mode}_run{i}_stall_at_pauses"),
                ple::find_stalls(run, median)
                    .iter()
                    .map(|(c, _)| ((c + 1) as u64 * PLE_CHUNK_PAUSES) as f64)
                    .collect(),
            );
        }
    }
}
