//! Spin-then-block policies for the model lock of `cpudoctor spin --handoff`, as pure plans.
//!
//! A policy is reduced to a [`SpinPlan`]: the PAUSE runs a waiter spins, in order, with one
//! look at the lock after each run, and a block (kernel wait) when the plan is exhausted. The
//! threads that execute a plan live in `probes::handoff::model_lock`; everything that decides
//! *how long* to spin and *when* to look at the lock is here, so it can be tested exactly.
//!
//! - [`legacy_plan`]: .NET's legacy `AwareLock` spin as the seed quotes it: 10 repetitions of
//!   rounds of 50, 150, 450, ... PAUSEs (x3) while the round is below 20000 x cores. The lock
//!   is looked at only after a whole round, so a lock freed just after a round starts costs
//!   the waiter the rest of that round.
//! - [`normalized_plan`]: .NET Core 2.1's fix (coreclr `YieldProcessorWithBackOffNormalized`,
//!   `yieldprocessornormalized.h`): PAUSE cost is measured, work is counted in normalized
//!   yields of at least 37 ns, spin iteration `i` spins `min(2^i, optimal max)` normalized
//!   yields where the optimal max keeps one iteration near 272 ns, and the lock is looked at
//!   after every iteration; 30 iterations (`Monitor_SpinCount` default 0x1e), then block.
//!
//! Counts are in *modelled* PAUSEs: PAUSEs of the CPU being modelled (`--pause-ns`). The lock
//! that executes a plan converts them to PAUSEs of this machine with [`PauseScale`], so a
//! round lasts as long as it would on the modelled CPU.

use super::dotnet::{LegacySpin, MIN_NS_PER_NORMALIZED_YIELD, REPETITIONS};
use serde::{Deserialize, Serialize};

/// coreclr `NsPerOptimalMaxSpinIterationDuration`: one normalized spin iteration aims at no
/// more than this ("approx. 900 cycles, measured 281 on pre-Skylake, 263 on post-Skylake").
pub const NS_PER_OPTIMAL_MAX_SPIN_ITERATION: f64 = 272.0;
/// coreclr `Monitor_SpinCount` default (0x1e): spin iterations before a monitor blocks.
pub const NORMALIZED_SPIN_ITERATIONS: u32 = 30;

/// Which policy a model lock follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PolicyKind {
    /// .NET legacy: rounds of PAUSE counts, lock looked at between rounds.
    DotnetLegacy,
    /// .NET normalized: bounded by time, lock looked at after every short iteration.
    DotnetNormalized,
}

/// What a waiter does before it blocks: spin `pauses_before_check[0]` PAUSEs, look at the
/// lock, spin `pauses_before_check[1]`, look again, ..., then block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpinPlan {
    /// The policy this plan follows.
    pub kind: PolicyKind,
    /// PAUSEs (of the modelled CPU) spun before each look at the lock, in order.
    pub pauses_before_check: Vec<u64>,
}

impl SpinPlan {
    /// PAUSEs spun when the lock is never free: the whole spin before blocking.
    pub fn total_pauses(&self) -> u64 {
        self.pauses_before_check.iter().sum()
    }

    /// The longest run between two looks at the lock: the worst extra delay, in PAUSEs, a
    /// waiter adds after the lock is freed.
    pub fn longest_run_pauses(&self) -> u64 {
        self.pauses_before_check.iter().copied().max().unwrap_or(0)
    }

    /// If the lock is freed `free_after_pauses` PAUSEs into the spin, the number of PAUSEs
    /// spun by the time the waiter sees it (it looks only at the end of a run); `None` when
    /// the plan ends first and the waiter blocks.
    pub fn acquired_after_pauses(&self, free_after_pauses: u64) -> Option<u64> {
        let mut spun = 0;
        for &run in &self.pauses_before_check {
            spun += run;
            if spun >= free_after_pauses {
                return Some(spun);
            }
        }
        None
    }
}

/// The legacy plan for `cores` cores: [`REPETITIONS`] x the rounds of [`LegacySpin`].
pub fn legacy_plan(cores: u64) -> SpinPlan {
    let rounds = LegacySpin::new(cores).rounds;
    SpinPlan {
        kind: PolicyKind::DotnetLegacy,
        pauses_before_check: (0..REPETITIONS).flat_map(|_| rounds.clone()).collect(),
    }
}

/// The normalization a .NET runtime computes at start-up from the PAUSE cost it measured.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Normalization {
    /// PAUSEs per normalized yield: max(1, floor(37 / pause_ns)).
    pub pauses_per_normalized_yield: u64,
    /// Normalized yields per spin iteration at most: max(1, round(272 / ns per yield)).
    pub optimal_max_normalized_yields_per_iteration: u64,
}

impl Normalization {
    /// The normalization at `pause_ns` per PAUSE (a non-positive cost counts as 1 PAUSE per
    /// yield, as coreclr does when it cannot measure).
    pub fn at(pause_ns: f64) -> Normalization {
        if pause_ns.is_nan() || pause_ns <= 0.0 {
            return Normalization {
                pauses_per_normalized_yield: 1,
                optimal_max_normalized_yields_per_iteration: 1,
            };
        }
        let per_yield = ((MIN_NS_PER_NORMALIZED_YIELD / pause_ns).floor() as u64).max(1);
        let yield_ns = per_yield as f64 * pause_ns;
        let max_yields = ((NS_PER_OPTIMAL_MAX_SPIN_ITERATION / yield_ns).round() as u64).max(1);
        Normalization {
            pauses_per_normalized_yield: per_yield,
            optimal_max_normalized_yields_per_iteration: max_yields,
        }
    }
}

/// The normalized plan at `pause_ns` per PAUSE: iteration `i` spins
/// `min(2^i, optimal max)` normalized yields, then looks at the lock.
pub fn normalized_plan(pause_ns: f64) -> SpinPlan {
    let n = Normalization::at(pause_ns);
    let max = n.optimal_max_normalized_yields_per_iteration;
    SpinPlan {
        kind: PolicyKind::DotnetNormalized,
        pauses_before_check: (0..NORMALIZED_SPIN_ITERATIONS)
            .map(|i| {
                let yields = if i <= 30 && (1u64 << i) < max {
                    1u64 << i
                } else {
                    max
                };
                yields * n.pauses_per_normalized_yield
            })
            .collect(),
    }
}

/// The plan for `kind` on a modelled CPU with `pause_ns` per PAUSE and `cores` cores.
pub fn plan(kind: PolicyKind, pause_ns: f64, cores: u64) -> SpinPlan {
    match kind {
        PolicyKind::DotnetLegacy => legacy_plan(cores),
        PolicyKind::DotnetNormalized => normalized_plan(pause_ns),
    }
}

/// Converts modelled PAUSEs to PAUSEs of this machine: a run of `n` modelled PAUSEs at
/// `modelled_ns` each lasts `n x modelled_ns`, which takes `n x modelled_ns / measured_ns`
/// PAUSEs here.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PauseScale {
    /// ns per PAUSE on the CPU being modelled.
    pub modelled_ns: f64,
    /// ns per PAUSE measured on this machine.
    pub measured_ns: f64,
}

impl PauseScale {
    /// Real PAUSEs per modelled PAUSE.
    pub fn factor(&self) -> f64 {
        if self.measured_ns > 0.0 {
            self.modelled_ns / self.measured_ns
        } else {
            1.0
        }
    }

    /// PAUSEs to execute here for `modelled` PAUSEs of the modelled CPU (at least 1, so a
    /// run never vanishes and the lock is never looked at twice in a row without a PAUSE).
    pub fn real_pauses(&self, modelled: u64) -> u64 {
        ((modelled as f64 * self.factor()).round() as u64).max(1)
    }

    /// `plan` in PAUSEs of this machine.
    pub fn apply(&self, plan: &SpinPlan) -> Vec<u64> {
        plan.pauses_before_check
            .iter()
            .map(|&p| self.real_pauses(p))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEED_ROUNDS_24: [u64; 9] = [50, 150, 450, 1_350, 4_050, 12_150, 36_450, 109_350, 328_050];

    #[test]
    fn legacy_plan_repeats_the_seed_rounds_ten_times() {
        let p = legacy_plan(24);
        assert_eq!(p.kind, PolicyKind::DotnetLegacy);
        assert_eq!(p.pauses_before_check.len(), 90);
        for rep in p.pauses_before_check.chunks(9) {
            assert_eq!(rep, SEED_ROUNDS_24);
        }
        assert_eq!(p.total_pauses(), 4_920_500);
        assert_eq!(p.longest_run_pauses(), 328_050);
    }

    #[test]
    fn legacy_plan_on_two_cores_stops_below_40000() {
        let p = legacy_plan(2);
        // 36,450 < 40,000 still runs; 109,350 would not.
        assert_eq!(
            &p.pauses_before_check[..7],
            &[50, 150, 450, 1_350, 4_050, 12_150, 36_450]
        );
        assert_eq!(p.pauses_before_check.len(), 70);
        assert_eq!(p.longest_run_pauses(), 36_450);
    }

    // The seed's pathology: the lock is looked at only at the end of a round. Freed one PAUSE
    // into the 328,050-PAUSE round, the waiter still spins the whole round.
    #[test]
    fn legacy_waiter_sees_a_freed_lock_only_at_the_end_of_the_round() {
        let p = legacy_plan(24);
        let before_last = 492_050 - 328_050; // 164,000 PAUSEs into the first repetition
        assert_eq!(p.acquired_after_pauses(before_last), Some(before_last));
        assert_eq!(p.acquired_after_pauses(before_last + 1), Some(492_050));
        // Seed case D = 1 ms: the worker frees the lock 9 ms into the spin; at 43 ns per PAUSE
        // that is 209,302 PAUSEs, inside the last round, so the waiter spins to 21.16 ms.
        let free_at = (9e6 / 43.0) as u64;
        let seen = p.acquired_after_pauses(free_at).unwrap();
        assert_eq!(seen, 492_050);
        assert_eq!(format!("{:.2}", seen as f64 * 43.0 / 1e6), "21.16");
        // D = 3 ms: freed 7 ms in (162,790 PAUSEs) is seen at the end of round 8 (164,000).
        assert_eq!(p.acquired_after_pauses((7e6 / 43.0) as u64), Some(164_000));
    }

    #[test]
    fn legacy_waiter_blocks_when_the_plan_runs_out() {
        let p = legacy_plan(2);
        assert_eq!(p.acquired_after_pauses(p.total_pauses() + 1), None);
        assert_eq!(
            p.acquired_after_pauses(p.total_pauses()),
            Some(p.total_pauses())
        );
    }

    #[test]
    fn normalization_at_the_seed_pause_costs() {
        // 43 ns (Skylake-SP): one PAUSE per yield, 272 / 43 = 6.3 -> 6 yields per iteration.
        let sky = Normalization::at(43.0);
        assert_eq!(sky.pauses_per_normalized_yield, 1);
        assert_eq!(sky.optimal_max_normalized_yields_per_iteration, 6);
        // 4 ns (Haswell): 9 PAUSEs = 36 ns per yield, 272 / 36 = 7.6 -> 8 yields.
        let has = Normalization::at(4.0);
        assert_eq!(has.pauses_per_normalized_yield, 9);
        assert_eq!(has.optimal_max_normalized_yields_per_iteration, 8);
        assert_eq!(Normalization::at(0.0).pauses_per_normalized_yield, 1);
    }

    #[test]
    fn normalized_plan_backs_off_to_a_bounded_iteration_and_checks_after_each() {
        let p = normalized_plan(43.0);
        assert_eq!(p.kind, PolicyKind::DotnetNormalized);
        assert_eq!(p.pauses_before_check.len(), 30);
        assert_eq!(&p.pauses_before_check[..4], &[1, 2, 4, 6]);
        assert!(p.pauses_before_check[3..].iter().all(|&n| n == 6));
        assert_eq!(p.total_pauses(), 1 + 2 + 4 + 27 * 6);
        // Every look at the lock is at most one iteration (6 x 43 = 258 ns) after it frees.
        assert_eq!(p.longest_run_pauses(), 6);
        assert_eq!(p.acquired_after_pauses(8), Some(13));
        let h = normalized_plan(4.0);
        assert_eq!(&h.pauses_before_check[..5], &[9, 18, 36, 72, 72]);
    }

    #[test]
    fn normalized_spin_time_barely_depends_on_pause_cost() {
        let ns = |pause_ns: f64| normalized_plan(pause_ns).total_pauses() as f64 * pause_ns;
        let (fast, slow) = (ns(4.0), ns(43.0));
        // 4 ns: 1+2+4+27*8 = 223 yields of 36 ns = 8.0 us; 43 ns: 169 x 43 = 7.3 us.
        assert_eq!(fast, 223.0 * 36.0);
        assert_eq!(slow, 169.0 * 43.0);
        let legacy = |pause_ns: f64| legacy_plan(24).total_pauses() as f64 * pause_ns;
        assert!(slow / fast < 1.2 && legacy(43.0) / legacy(4.0) > 10.0);
    }

    #[test]
    fn scale_converts_modelled_pauses_to_real_ones() {
        let s = PauseScale {
            modelled_ns: 43.0,
            measured_ns: 21.5,
        };
        assert_eq!(s.factor(), 2.0);
        assert_eq!(s.real_pauses(50), 100);
        assert_eq!(s.real_pauses(0), 1);
        let same = PauseScale {
            modelled_ns: 24.0,
            measured_ns: 24.0,
        };
        assert_eq!(same.apply(&legacy_plan(24))[..2], [50, 150]);
        let faster = PauseScale {
            modelled_ns: 4.0,
            measured_ns: 40.0,
        };
        // A run shorter than one real PAUSE still spins one.
        assert_eq!(faster.apply(&normalized_plan(43.0))[0], 1);
    }

    #[test]
    fn plan_dispatches_on_kind() {
        assert_eq!(plan(PolicyKind::DotnetLegacy, 43.0, 24), legacy_plan(24));
        assert_eq!(
            plan(PolicyKind::DotnetNormalized, 43.0, 24),
            normalized_plan(43.0)
        );
    }
}
