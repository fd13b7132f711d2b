//! Estimates the clock the core runs at right now, so timings can be given in core cycles as
//! well as nanoseconds. The method needs no PMU: a chain of dependent one-cycle `add`s takes
//! exactly one core cycle per `add`, so adds / elapsed time = core frequency. Boost, power
//! limits and a hypervisor's time slicing all show up in the figure, which is the point.

use super::clock::Clock;
use crate::stats::Summary;
use serde::{Deserialize, Serialize};

/// The estimated core clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoreClock {
    /// Median estimate, in Hz.
    pub hz: f64,
    /// Every estimate, in Hz, one per timed chain.
    pub samples_hz: Vec<f64>,
    /// Summary of `samples_hz`.
    pub summary: Summary,
}

impl CoreClock {
    /// Converts nanoseconds to core cycles at this clock.
    pub fn ns_to_cycles(&self, ns: f64) -> f64 {
        ns * self.hz * 1e-9
    }
}

/// Chain iterations per timed sample: 4096 x 64 adds, about 70 us at 4 GHz, short enough to
/// fit between timer interrupts and long enough to dwarf the clock reads.
#[cfg(target_arch = "x86_64")]
const CHAIN_ITERATIONS: u64 = 4096;

/// Estimates the core clock of the CPU the calling thread runs on (pin it first) from
/// `samples` timed chains after a short warm-up that lets the clock ramp.
#[cfg(target_arch = "x86_64")]
pub fn estimate_core_clock(clock: &Clock, samples: usize) -> Option<CoreClock> {
    use crate::arch::{ADDS_PER_CHAIN_ITERATION, dependent_add_chain};
    // Warm-up: about 2 ms of work so a core leaving idle reaches its running clock.
    for _ in 0..30 {
        std::hint::black_box(dependent_add_chain(CHAIN_ITERATIONS));
    }
    let adds = (CHAIN_ITERATIONS * ADDS_PER_CHAIN_ITERATION) as f64;
    let samples_hz: Vec<f64> = (0..samples.max(1))
        .map(|_| {
            let t0 = clock.start();
            std::hint::black_box(dependent_add_chain(CHAIN_ITERATIONS));
            let t1 = clock.end();
            adds / (clock.ticks_to_ns(t1 - t0) * 1e-9)
        })
        .collect();
    let summary = crate::stats::summarize(&samples_hz)?;
    Some(CoreClock {
        hz: summary.median,
        samples_hz,
        summary,
    })
}

/// Off x86-64 there is no calibrated chain yet: no estimate.
#[cfg(not(target_arch = "x86_64"))]
pub fn estimate_core_clock(_clock: &Clock, _samples: usize) -> Option<CoreClock> {
    None
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    #[test]
    fn core_clock_is_in_the_range_of_real_cpus() {
        let clock = Clock::detect(true);
        let cc = estimate_core_clock(&clock, 5).unwrap();
        // Any x86-64 core of the last 20 years runs between 0.5 and 7 GHz.
        assert!((0.5e9..7e9).contains(&cc.hz), "core clock {} Hz", cc.hz);
        assert_eq!(cc.samples_hz.len(), 5);
        assert!((cc.ns_to_cycles(1.0) - cc.hz * 1e-9).abs() < 1e-12);
    }
}
