//! Spin-then-block policies for the model lock of `cpudoctor spin --handoff`, as pure plans.
//!
//! A policy is reduced to a [`SpinPlan`]: the PAUSE runs a waiter spins, in order, with one
//! look at the lock after each run, and a block (kernel wait) when the plan is exhausted.
//! [`SpinPlan::follow`] is the one walk through a plan: the model lock
//! (`probes::handoff::model_lock`) acquires through it, and the arithmetic below
//! ([`SpinPlan::acquired_after_pauses`]) answers "when is a freed lock seen" through it too, so
//! what the tests pin down is what the lock does.
//!
//! The plans are built from the one model of each policy in [`super::dotnet`]:
//! - [`legacy_plan`]: [`LegacySpin`]'s rounds, repeated [`REPETITIONS`] times; the lock is
//!   looked at only after a whole round, so a lock freed just after a round starts costs the
//!   waiter the rest of that round.
//! - [`normalized_plan`]: [`NormalizedSpin`]'s 30 short iterations, a look after each.
//!
//! Counts are in *modelled* PAUSEs: PAUSEs of the CPU being modelled (`--pause-ns`). The lock
//! turns them into deadlines (`modelled PAUSEs x modelled ns per PAUSE` after the spin
//! started), so a round lasts as long as it would on the modelled CPU whatever a PAUSE costs
//! here.

use super::dotnet::{LegacySpin, NormalizedSpin, REPETITIONS};
use serde::{Deserialize, Serialize};

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

    /// Walks the plan: for each run, `spin_to(p)` spins until `p` modelled PAUSEs into the
    /// spin (the end of that run, counted from the start), then `look()` looks at the lock.
    /// Returns the point of the first look that found the lock, or `None` when the plan ran
    /// out and the waiter must block.
    pub fn follow(
        &self,
        mut spin_to: impl FnMut(u64),
        mut look: impl FnMut() -> bool,
    ) -> Option<u64> {
        let mut end = 0;
        for &run in &self.pauses_before_check {
            end += run;
            spin_to(end);
            if look() {
                return Some(end);
            }
        }
        None
    }

    /// If the lock is freed `free_after_pauses` PAUSEs into the spin, the number of PAUSEs
    /// spun by the time the waiter sees it (it looks only at the end of a run); `None` when
    /// the plan ends first and the waiter blocks.
    pub fn acquired_after_pauses(&self, free_after_pauses: u64) -> Option<u64> {
        let now = std::cell::Cell::new(0);
        self.follow(|end| now.set(end), || now.get() >= free_after_pauses)
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

/// The normalized plan at `pause_ns` per PAUSE: [`NormalizedSpin`]'s iterations.
pub fn normalized_plan(pause_ns: f64) -> SpinPlan {
    SpinPlan {
        kind: PolicyKind::DotnetNormalized,
        pauses_before_check: NormalizedSpin::new(pause_ns).iteration_pauses,
    }
}

/// The plan for `kind` on a modelled CPU with `pause_ns` per PAUSE and `cores` cores.
pub fn plan(kind: PolicyKind, pause_ns: f64, cores: u64) -> SpinPlan {
    match kind {
        PolicyKind::DotnetLegacy => legacy_plan(cores),
        PolicyKind::DotnetNormalized => normalized_plan(pause_ns),
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
    fn normalized_plan_looks_after_every_short_iteration() {
        let p = normalized_plan(43.0);
        assert_eq!(p.kind, PolicyKind::DotnetNormalized);
        assert_eq!(
            p.pauses_before_check,
            NormalizedSpin::new(43.0).iteration_pauses
        );
        // Every look at the lock is at most one iteration (6 x 43 = 258 ns) after it frees.
        assert_eq!(p.longest_run_pauses(), 6);
        assert_eq!(p.acquired_after_pauses(8), Some(13));
        assert_eq!(p.acquired_after_pauses(p.total_pauses() + 1), None);
    }

    #[test]
    fn follow_spins_to_each_run_end_before_each_look() {
        let p = SpinPlan {
            kind: PolicyKind::DotnetLegacy,
            pauses_before_check: vec![50, 150, 450],
        };
        let mut events = Vec::new();
        let mut looks = 0;
        let got = p.follow(
            |end| events.push(end),
            || {
                looks += 1;
                looks == 2
            },
        );
        assert_eq!(got, Some(200));
        assert_eq!(events, [50, 200]);
        assert_eq!(p.follow(|_| {}, || false), None);
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
