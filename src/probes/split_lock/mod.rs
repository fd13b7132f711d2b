//! Split-lock latency: the core-to-core ping-pong of [`super::c2c`] on a value that straddles
//! two cache lines (bytes 60..68 of a 128-byte-aligned block), against the same ping-pong on
//! an aligned value on the same CPU pair.
//!
//! A locked instruction on a value split across lines cannot lock one line in the cache; the
//! CPU falls back to a bus lock, which the split-lock seed measured at 500 ns (Zen 5) to 7 us
//! (Arrow Lake, Alder Lake P-cores) core to core. Rust atomics cannot be misaligned, so the
//! `lock cmpxchg` is inline assembly (`arch::lock_cmpxchg_u64`), used for both values.
//!
//! The kernel's split-lock state is read first (`machine.split_lock`). Where it cannot see
//! split locks (`not_detected`, a guest) or was told not to look (`off`), the hardware cost is
//! measured in-process. Everywhere else a split lock may sleep 10 ms, be rate-limited or
//! raise SIGBUS, so the split case runs in a child process ([`locker`]) on one CPU, and the
//! figure is the kernel's mitigation as a program meets it. That is a different experiment
//! (one thread, each lock trapped) from the two-thread handoff, so it carries its own name,
//! `split_lock_trapped_ns`, and no ratio: a `diff` of a host that traps against one that
//! does not must not compare the two as one quantity.

pub mod locker;

use super::c2c::pingpong::{Lines, Plan, SPLIT_OFFSET, Variant, ping_pong};
use super::c2c::require_two_cpus;
use super::{Probe, ProbeContext, ProbeFailure, Profile};
use crate::measure::{estimate_core_clock, pin_to_cpu};
use crate::schema::{Better, Metric, ProbeResult, Status};
use serde_json::json;
use std::time::Duration;

/// The split-lock probe.
pub struct SplitLockProbe;

/// Rounds of aligned-then-split runs; interleaving puts both under the same machine noise.
const ROUNDS: usize = 3;

fn plans(ctx: &ProbeContext) -> (Plan, Plan) {
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
        Plan {
            warmup: split / 4,
            handoffs_per_sample: split,
            samples: per_round,
        },
    )
}

impl Probe for SplitLockProbe {
    fn name(&self) -> &'static str {
        "split-lock"
    }

    fn about(&self) -> &'static str {
        "split-lock latency: lock cmpxchg across a cache-line end vs aligned, same CPU pair"
    }

    fn run(&self, ctx: &ProbeContext) -> Result<ProbeResult, ProbeFailure> {
        crate::arch::require_x86_64().map_err(ProbeFailure::Skipped)?;
        let cpus = ctx.cpus()?;
        require_two_cpus(&cpus)?;
        let pair = (cpus[0], cpus[1]);
        let state = &ctx.machine.split_lock;
        let in_child = state.effective.kernel_acts();
        let (aligned_plan, split_plan) = plans(ctx);
        let fail = |e: String| ProbeFailure::Failed(format!("CPU pair {}-{}: {e}", pair.0, pair.1));

        let aligned_lines = Lines::new();
        let split_lines = Lines::new();
        let mut aligned = Vec::new();
        let mut split = Vec::new();
        ctx.progress.begin("split-lock", ROUNDS as u64);
        for _ in 0..ROUNDS {
            aligned.extend(
                ping_pong(
                    ctx.clock,
                    pair,
                    &aligned_lines,
                    Variant::Cas { offset: 0 },
                    aligned_plan,
                )
                .map_err(fail)?,
            );
            if !in_child {
                split.extend(
                    ping_pong(
                        ctx.clock,
                        pair,
                        &split_lines,
                        Variant::Cas {
                            offset: SPLIT_OFFSET,
                        },
                        split_plan,
                    )
                    .map_err(fail)?,
                );
            }
            ctx.progress.advance(1);
        }
        ctx.progress.finish();
        let core_hz = {
            let _pin = pin_to_cpu(pair.0)?;
            estimate_core_clock(ctx.clock, 5).map(|c| c.hz)
        };
        // Cycles of the initiating CPU's core clock: TSC ticks are not core cycles.
        let cycles = |name: &str, ns: &[f64]| {
            let hz = core_hz?;
            let c: Vec<f64> = ns.iter().map(|x| x * hz * 1e-9).collect();
            Metric::from_samples(name, "cycles", Better::Lower, &c)
        };

        let mut r = ProbeResult::new("split-lock", Status::Ok);
        if let Some(hz) = core_hz {
            r.effects.insert("core_clock_ghz".into(), json!(hz / 1e9));
        }
        let pair_key = format!("cpu{}-cpu{}", pair.0, pair.1);
        r.params.insert("cpus".into(), json!([pair.0, pair.1]));
        r.params.insert("rounds".into(), json!(ROUNDS));
        r.params.insert(
            "aligned_handoffs_per_sample".into(),
            json!(aligned_plan.handoffs_per_sample),
        );
        r.params
            .insert("split_value_offset_bytes".into(), json!(SPLIT_OFFSET));
        r.effects
            .insert("pinned_cpus".into(), json!([pair.0, pair.1]));
        r.effects
            .insert("kernel_split_lock_mode".into(), json!(state.effective));
        let split_at = split_lines.at(SPLIT_OFFSET) as usize;
        r.effects.insert(
            "split_value_crosses_line".into(),
            json!(split_at / 64 != (split_at + 7) / 64),
        );
        let aligned_metric =
            Metric::from_samples("aligned_lock_latency_ns", "ns", Better::Lower, &aligned);
        let aligned_ns = aligned_metric.as_ref().map(|m| m.value);
        r.metrics.extend(aligned_metric);
        r.metrics
            .extend(cycles("aligned_lock_latency_cycles", &aligned));
        r.samples
            .insert(format!("aligned_lock_ns.{pair_key}"), aligned);

        if in_child {
            let window = match ctx.options.profile {
                Profile::Quick => Duration::from_millis(100),
                Profile::Full => Duration::from_millis(300),
            };
            r.params
                .insert("child_window_ms".into(), json!(window.as_millis() as u64));
            r.effects
                .insert("split_lock_measured".into(), json!("kernel_mitigation"));
            match measure_in_child(pair.0, window) {
                Ok(ns) => {
                    r.effects
                        .insert("split_lock_child".into(), json!("survived"));
                    r.samples
                        .insert(format!("split_lock_trapped_ns.cpu{}", pair.0), vec![ns]);
                    // One thread, every lock trapped: not the handoff the aligned figure
                    // times, so no ratio to it.
                    r.metrics.push(Metric::derived(
                        "split_lock_trapped_ns",
                        ns,
                        "ns",
                        Better::Lower,
                    ));
                }
                Err(end) => {
                    // No figure: the child did not live to produce one. What happened is the
                    // finding (SIGBUS under split_lock_detect=fatal).
                    r.effects.insert("split_lock_child".into(), json!(end));
                }
            }
        } else {
            r.effects
                .insert("split_lock_measured".into(), json!("hardware"));
            let m = Metric::from_samples("split_lock_latency_ns", "ns", Better::Lower, &split);
            let split_ns = m.as_ref().map(|m| m.value);
            r.metrics.extend(m);
            r.metrics
                .extend(cycles("split_lock_latency_cycles", &split));
            if let (Some(s), Some(a)) = (split_ns, aligned_ns)
                && a > 0.0
            {
                r.metrics.push(Metric::derived(
                    "split_lock_ratio",
                    s / a,
                    "ratio",
                    Better::Lower,
                ));
            }
            r.samples.insert(format!("split_lock_ns.{pair_key}"), split);
        }
        Ok(r)
    }
}

/// Runs split locks for `window` in a child pinned to `cpu` and returns ns per split lock, or
/// how the child ended when it did not survive. Also usable where the kernel does not act:
/// then it is the single-thread hardware cost.
pub fn measure_in_child(cpu: usize, window: Duration) -> Result<f64, String> {
    // One lock per look at the command word: a trapped lock can take 10 ms.
    let child = locker::Locker::spawn(cpu, 1)?;
    let before = child.totals();
    child.start()?;
    std::thread::sleep(window);
    let after = child.stop()?;
    after
        .ns_per_op_since(&before)
        .ok_or_else(|| format!("no split lock completed in {} ms", window.as_millis()))
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    #[test]
    fn a_trapping_kernel_gives_split_lock_trapped_ns_and_no_ratio() {
        // Regression: where the kernel traps, the child's single-thread figure was reported
        // as split_lock_latency_ns and divided by the two-thread aligned handoff, so a diff of
        // a trapping host against a guest compared different experiments under one name.
        let cpus = crate::measure::allowed_cpus();
        if cpus.len() < 2 {
            return;
        }
        let mut machine = crate::machine::Machine::detect();
        machine.split_lock.effective = crate::machine::SplitLockMode::WarnSleep;
        let clock = crate::measure::Clock::detect(machine.cpu.tsc_invariant);
        let mut options = crate::probes::ProbeOptions::new(Profile::Quick);
        options.repetitions = Some(3);
        let ctx = ProbeContext {
            machine: &machine,
            clock: &clock,
            options: &options,
            progress: &crate::measure::NoProgress,
        };
        let r = SplitLockProbe.run(&ctx).unwrap();
        assert_eq!(r.effects["split_lock_measured"], "kernel_mitigation");
        assert!(
            r.metric("split_lock_trapped_ns").is_some(),
            "{:?}",
            r.metrics
        );
        assert!(r.metric("aligned_lock_latency_ns").is_some());
        assert!(r.metric("split_lock_latency_ns").is_none());
        assert!(r.metric("split_lock_ratio").is_none());
    }

    #[test]
    fn the_child_path_measures_a_split_lock() {
        // On a machine where the kernel does not trap, the child measures the hardware; the
        // same path reports the mitigation where it does.
        let cpu = *crate::measure::allowed_cpus().last().unwrap();
        let ns = measure_in_child(cpu, Duration::from_millis(20)).unwrap();
        assert!(ns > 1.0 && ns < 20e6, "{ns}");
    }
}
