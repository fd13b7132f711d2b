//! False and true sharing: what it costs when threads on different cores write to the same
//! cache line.
//!
//! - False sharing: each thread increments its own counter (a plain load and store, as a
//!   field update is), once with the counters packed eight to a 64-byte line and once padded
//!   to 128 bytes apart (two lines, because the adjacent-line prefetcher pulls lines in
//!   pairs). `false_sharing_ratio` = packed time / padded time. This is the Netflix case of
//!   the seed: two JVM fields written by many threads sat on one line 7 times in 8, and the
//!   CPI tripled.
//! - True sharing: every thread increments one shared atomic counter, against each thread
//!   incrementing its own padded atomic counter. `true_sharing_ratio` = shared / private.
//!   The seed's second fix: once the padding was in, the shared cache field itself was the
//!   bottleneck, and only not writing it gave the 3.5x.
//!
//! One thread per CPU (all CPUs by default, `--cpus` to choose), pinned; the four layouts
//! alternate sample by sample so machine noise hits them alike.

use super::c2c::require_two_cpus;
use super::{Probe, ProbeContext, ProbeFailure, Profile};
use crate::measure::{self, Clock, pin_to_cpu};
use crate::schema::{Better, Metric, ProbeResult, Status};
use serde_json::json;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// The sharing probe.
pub struct SharingProbe;

/// Counters that share one 64-byte line, eight of them (the rest of the 128 bytes is empty so
/// the next group does not sit on the adjacent line).
#[repr(C, align(128))]
#[derive(Default)]
struct PackedLine([AtomicU64; 8]);

/// A counter alone on its own 128 bytes.
#[repr(C, align(128))]
#[derive(Default)]
struct Padded(AtomicU64);

/// What each thread does to its counter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kernel {
    /// `x = x + 1` as a plain load, add and store (no lock), like a field update.
    LoadStore,
    /// `lock xadd`: an atomic increment.
    Atomic,
}

/// Runs `n` increments of `counter` with `kernel`. Assembly (`arch`), so a debug build times
/// the same instructions as a release one. The plain kernel's caller guarantees no other
/// thread touches this counter (its neighbours on the line are the point).
fn increment(counter: &AtomicU64, kernel: Kernel, n: u64) {
    // SAFETY: the counter is live for the call; plain increments are only ever run with one
    // thread per counter (see `run`), locked ones may share it.
    #[cfg(target_arch = "x86_64")]
    unsafe {
        match kernel {
            Kernel::LoadStore => crate::arch::store_increment_loop(counter.as_ptr(), n),
            Kernel::Atomic => crate::arch::lock_add_loop(counter.as_ptr().cast(), n),
        }
    }
    // The probe skips before it gets here (`require_x86_64`).
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (counter, kernel, n);
        unreachable!("{}", crate::arch::require_x86_64().unwrap_err())
    }
}

/// Runs one thread per CPU, thread `i` on `counters[i]`, and returns the wall time from the
/// first thread's start to the last thread's end, in ns.
fn run_threads(
    clock: &Clock,
    cpus: &[usize],
    counters: &[&AtomicU64],
    kernel: Kernel,
    iterations: u64,
) -> Result<f64, String> {
    let ready = AtomicUsize::new(0);
    let failed = AtomicUsize::new(0);
    let n = cpus.len();
    let spans: Vec<Result<(u64, u64), String>> = std::thread::scope(|s| {
        let handles: Vec<_> = cpus
            .iter()
            .zip(counters)
            .map(|(&cpu, &counter)| {
                let (ready, failed) = (&ready, &failed);
                s.spawn(move || {
                    let _pin = pin_to_cpu(cpu).map_err(|e| {
                        failed.fetch_add(1, Ordering::SeqCst);
                        e.to_string()
                    })?;
                    // The last thread to arrive releases everyone: no coordinator thread
                    // competing for the CPUs.
                    ready.fetch_add(1, Ordering::SeqCst);
                    while ready.load(Ordering::SeqCst) < n {
                        if failed.load(Ordering::SeqCst) > 0 {
                            return Err("another thread could not be pinned".to_string());
                        }
                        std::hint::spin_loop();
                    }
                    let t0 = clock.start();
                    increment(counter, kernel, iterations);
                    Ok((t0, clock.end()))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into())))
            .collect()
    });
    let spans: Vec<(u64, u64)> = spans.into_iter().collect::<Result<_, _>>()?;
    let start = spans.iter().map(|s| s.0).min().unwrap_or(0);
    let end = spans.iter().map(|s| s.1).max().unwrap_or(0);
    Ok(clock.ticks_to_ns(end.saturating_sub(start)))
}

/// ns per increment per thread for each layout.
#[derive(Default)]
struct Timings {
    packed: Vec<f64>,
    padded: Vec<f64>,
    shared_atomic: Vec<f64>,
    private_atomic: Vec<f64>,
}

impl Probe for SharingProbe {
    fn name(&self) -> &'static str {
        "sharing"
    }

    fn about(&self) -> &'static str {
        "false sharing (counters packed in a line vs padded) and true sharing (one atomic)"
    }

    fn run(&self, ctx: &ProbeContext) -> Result<ProbeResult, ProbeFailure> {
        crate::arch::require_x86_64().map_err(ProbeFailure::Skipped)?;
        let cpus = ctx.cpus()?;
        require_two_cpus(&cpus)?;
        // Many short samples: a sample ends when its slowest thread does, so one thread
        // preempted by another program stretches the whole sample, and on a shared machine
        // the shorter the sample the fewer are hit. Per thread per sample on the Zen 4 guest:
        // padded ~0.2 ms, packed ~0.6 ms, shared atomic ~2 ms (quick).
        let samples = ctx.repetitions(9, 31);
        let iterations: u64 = match ctx.options.profile {
            Profile::Quick => 200_000,
            Profile::Full => 500_000,
        };
        let n = cpus.len();
        let packed_lines: Vec<PackedLine> =
            (0..n.div_ceil(8)).map(|_| PackedLine::default()).collect();
        let padded: Vec<Padded> = (0..n).map(|_| Padded::default()).collect();
        let shared = Padded::default();
        let packed_refs: Vec<&AtomicU64> = (0..n).map(|i| &packed_lines[i / 8].0[i % 8]).collect();
        let padded_refs: Vec<&AtomicU64> = padded.iter().map(|p| &p.0).collect();
        let shared_refs: Vec<&AtomicU64> = vec![&shared.0; n];

        let fail = ProbeFailure::Failed;
        let per_increment = |ns: f64| ns / iterations as f64;
        let mut t = Timings::default();
        ctx.progress.begin("sharing", samples as u64);
        for _ in 0..samples {
            let run = |refs: &[&AtomicU64], k| {
                run_threads(ctx.clock, &cpus, refs, k, iterations).map(per_increment)
            };
            t.packed
                .push(run(&packed_refs, Kernel::LoadStore).map_err(fail)?);
            t.padded
                .push(run(&padded_refs, Kernel::LoadStore).map_err(fail)?);
            t.shared_atomic
                .push(run(&shared_refs, Kernel::Atomic).map_err(fail)?);
            t.private_atomic
                .push(run(&padded_refs, Kernel::Atomic).map_err(fail)?);
            ctx.progress.advance(1);
        }
        ctx.progress.finish();
        let core_hz = {
            let _pin = pin_to_cpu(cpus[0])?;
            measure::estimate_core_clock(ctx.clock, 5).map(|c| c.hz)
        };

        // Every increment landed: plain stores by one thread each never lose any, and the
        // shared atomic counts them all.
        let total = samples as u64 * iterations;
        let counts_ok = packed_refs
            .iter()
            .all(|c| c.load(Ordering::Relaxed) == total)
            && shared.0.load(Ordering::Relaxed) == total * n as u64;
        if !counts_ok {
            return Err(ProbeFailure::Failed(
                "counters do not add up: the increment loop was not executed as written".into(),
            ));
        }

        let mut r = ProbeResult::new("sharing", Status::Ok);
        r.params.insert("cpus".into(), json!(cpus));
        r.params.insert("threads".into(), json!(n));
        r.params.insert("samples".into(), json!(samples));
        r.params
            .insert("increments_per_thread".into(), json!(iterations));
        r.params.insert("packed_stride_bytes".into(), json!(8));
        r.params.insert("padded_stride_bytes".into(), json!(128));
        r.effects.insert("pinned_cpus".into(), json!(cpus));
        r.effects
            .insert("packed_lines".into(), json!(packed_lines.len()));

        r.metrics.extend(
            [
                Metric::from_samples("packed_increment_ns", "ns", Better::Lower, &t.packed),
                Metric::from_samples("padded_increment_ns", "ns", Better::Lower, &t.padded),
                Metric::from_samples(
                    "shared_atomic_increment_ns",
                    "ns",
                    Better::Lower,
                    &t.shared_atomic,
                ),
                Metric::from_samples(
                    "private_atomic_increment_ns",
                    "ns",
                    Better::Lower,
                    &t.private_atomic,
                ),
            ]
            .into_iter()
            .flatten(),
        );
        if let Some(hz) = core_hz {
            r.effects.insert("core_clock_ghz".into(), json!(hz / 1e9));
            // Cycles of the first CPU's core clock (TSC ticks are not core cycles).
            let cycles = |ns: &[f64]| ns.iter().map(|x| x * hz * 1e-9).collect::<Vec<_>>();
            r.metrics.extend(
                [
                    ("packed_increment_cycles", &t.packed),
                    ("padded_increment_cycles", &t.padded),
                    ("shared_atomic_increment_cycles", &t.shared_atomic),
                    ("private_atomic_increment_cycles", &t.private_atomic),
                ]
                .into_iter()
                .filter_map(|(name, ns)| {
                    Metric::from_samples(name, "cycles", Better::Lower, &cycles(ns))
                }),
            );
        }
        // The four variants run back to back in every sample, so sample i of each is from
        // the same moment: paired ratios cancel what the host did during that sample.
        r.metrics.extend(
            [
                Metric::paired_ratio("false_sharing_ratio", Better::Lower, &t.packed, &t.padded),
                Metric::paired_ratio(
                    "true_sharing_ratio",
                    Better::Lower,
                    &t.shared_atomic,
                    &t.private_atomic,
                ),
            ]
            .into_iter()
            .flatten(),
        );
        r.samples.insert("packed_increment_ns".into(), t.packed);
        r.samples.insert("padded_increment_ns".into(), t.padded);
        r.samples
            .insert("shared_atomic_increment_ns".into(), t.shared_atomic);
        r.samples
            .insert("private_atomic_increment_ns".into(), t.private_atomic);
        Ok(r)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_put_packed_counters_on_one_line_and_padded_ones_apart() {
        let lines = [PackedLine::default(), PackedLine::default()];
        let a = &lines[0].0[0] as *const _ as usize;
        let h = &lines[0].0[7] as *const _ as usize;
        let next = &lines[1].0[0] as *const _ as usize;
        assert_eq!(a / 64, h / 64, "eight counters share one line");
        assert_eq!(next - a, 128, "the next group skips the adjacent line");
        let p = [Padded::default(), Padded::default()];
        assert_eq!(
            &p[1].0 as *const _ as usize - &p[0].0 as *const _ as usize,
            128
        );
    }

    #[test]
    fn both_kernels_count_exactly() {
        let c = AtomicU64::new(0);
        increment(&c, Kernel::LoadStore, 1000);
        increment(&c, Kernel::Atomic, 500);
        assert_eq!(c.load(Ordering::Relaxed), 1500);
    }
}
