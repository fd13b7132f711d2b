//! .NET's lock spinning, before and after the Skylake fix.
//!
//! Legacy (.NET Framework <= 4.7.2, .NET Core <= 2.0; `AwareLock::Contention` with the
//! `g_SpinConstants` of coreclr, as quoted in the seed `skylake-pause-spin.en.txt`): 10
//! repetitions; each runs rounds of 50, 150, 450, ... PAUSEs (x3 per round) while the round
//! length is below 20000 x cores. The lock is only re-checked after a whole round, so a lock
//! freed just after a round starts costs the waiter that whole round: the last round is the
//! worst extra delay.
//!
//! Normalized (.NET Core 2.1 / Framework 4.8 on; coreclr `src/vm/yieldprocessornormalized.{h,cpp}`,
//! `AwareLock::SpinWait`, `ObjHeader::EnterObjMonitorHelperSpin` and the `Monitor_SpinCount`
//! default of `clrconfignames.h`): at start-up the runtime times PAUSE and derives
//! - PAUSEs per normalized yield: `max(1, round(37 / pause_ns))` (`MinNsPerNormalizedYield`);
//! - normalized yields per spin iteration at most: `round(272 / ns per normalized yield)`,
//!   clamped to 1..=10 (`NsPerOptimalMaxSpinIterationDuration`,
//!   `MaxOptimalMaxNormalizedYieldsPerSpinIteration`);
//!
//! and a contended monitor spins 30 iterations (`Monitor_SpinCount` = 0x1e), iteration `i`
//! spinning `min(2^i, that maximum)` normalized yields and looking at the lock after each,
//! before it waits on its event. So the whole spin is a few microseconds on any PAUSE cost,
//! and a freed lock is seen within one iteration (~272 ns).
//!
//! Assumptions of the model: the PAUSE cost the runtime measures is the one given; when it
//! cannot measure (non-positive cost), coreclr's defaults apply (1 PAUSE per yield, 7 yields
//! per iteration); the thin-lock spin before a monitor is inflated and the re-spin after a
//! wake-up are left out (the handoff's waiter blocks, then is woken once).

use serde::{Deserialize, Serialize};

/// PAUSEs in the first round of a repetition.
pub const INITIAL_ROUND_PAUSES: u64 = 50;
/// Each round is this many times longer than the one before.
pub const BACKOFF_FACTOR: u64 = 3;
/// Repetitions of the whole round sequence before the thread blocks.
pub const REPETITIONS: u64 = 10;
/// The round-length limit is this many PAUSEs per core.
pub const LIMIT_PAUSES_PER_CORE: u64 = 20_000;
/// coreclr `MinNsPerNormalizedYield`: a normalized yield lasts at least this long
/// ("measured typically 37-46 on post-Skylake").
pub const MIN_NS_PER_NORMALIZED_YIELD: f64 = 37.0;
/// coreclr `NsPerOptimalMaxSpinIterationDuration`: one spin iteration aims at no more than this
/// ("approx. 900 cycles, measured 281 on pre-Skylake, 263 on post-Skylake").
pub const NS_PER_OPTIMAL_MAX_SPIN_ITERATION: f64 = 272.0;
/// coreclr `MaxOptimalMaxNormalizedYieldsPerSpinIteration`: the cap on yields per iteration.
pub const MAX_OPTIMAL_MAX_NORMALIZED_YIELDS_PER_ITERATION: u64 = 10;
/// coreclr `Monitor_SpinCount` default (0x1e): spin iterations before a monitor waits.
pub const NORMALIZED_SPIN_ITERATIONS: u32 = 30;
/// coreclr's defaults when it cannot time PAUSE (tuned for Skylake): PAUSEs per yield...
pub const DEFAULT_PAUSES_PER_NORMALIZED_YIELD: u64 = 1;
/// ...and normalized yields per iteration at most.
pub const DEFAULT_OPTIMAL_MAX_NORMALIZED_YIELDS_PER_ITERATION: u64 = 7;

/// The legacy policy's schedule for one core count.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LegacySpin {
    /// Core count the limit scales with.
    pub cores: u64,
    /// Round-length limit: 20000 x cores.
    pub limit_pauses: u64,
    /// PAUSEs in each round of one repetition.
    pub rounds: Vec<u64>,
    /// PAUSEs in one repetition (sum of `rounds`).
    pub pauses_per_repetition: u64,
    /// PAUSEs over all repetitions: the spin before blocking.
    pub total_pauses: u64,
    /// PAUSEs in the last (longest) round: the worst extra delay after a release.
    pub last_round_pauses: u64,
}

impl LegacySpin {
    /// The schedule for `cores` cores (`cores` = 0 is treated as 1).
    pub fn new(cores: u64) -> LegacySpin {
        let cores = cores.max(1);
        // Saturating throughout: at u64::MAX cores the limit saturates, the rounds reach it
        // (at most 41 of them) and the loop ends; wrapping arithmetic spun forever here.
        let limit_pauses = LIMIT_PAUSES_PER_CORE.saturating_mul(cores);
        let mut rounds = Vec::new();
        let mut duration = INITIAL_ROUND_PAUSES;
        // do { spin(duration); duration *= 3; } while (duration < limit);
        loop {
            rounds.push(duration);
            duration = duration.saturating_mul(BACKOFF_FACTOR);
            if duration >= limit_pauses {
                break;
            }
        }
        let pauses_per_repetition = rounds.iter().fold(0u64, |a, &r| a.saturating_add(r));
        LegacySpin {
            cores,
            limit_pauses,
            last_round_pauses: *rounds.last().expect("at least one round"),
            pauses_per_repetition,
            total_pauses: pauses_per_repetition.saturating_mul(REPETITIONS),
            rounds,
        }
    }

    /// Total spin before blocking, in ns, at `pause_ns` per PAUSE.
    pub fn total_ns(&self, pause_ns: f64) -> f64 {
        self.total_pauses as f64 * pause_ns
    }

    /// The last round, in ns: the longest a waiter keeps spinning after the lock is freed.
    pub fn last_round_ns(&self, pause_ns: f64) -> f64 {
        self.last_round_pauses as f64 * pause_ns
    }
}

/// The normalized policy at one PAUSE cost: the one model of it, which the `spin` table, the
/// model lock's plan and the hazard texts all read.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NormalizedSpin {
    /// The PAUSE cost the runtime measured, in ns.
    pub pause_ns: f64,
    /// PAUSEs per normalized yield: max(1, round(37 / pause_ns)).
    pub pauses_per_normalized_yield: u64,
    /// Duration of one normalized yield here, in ns.
    pub normalized_yield_ns: f64,
    /// Normalized yields in one late spin iteration: round(272 / yield ns), within 1..=10.
    pub optimal_max_normalized_yields_per_iteration: u64,
    /// PAUSEs of each spin iteration, in order; the lock is looked at after each.
    pub iteration_pauses: Vec<u64>,
    /// PAUSEs over all iterations: the spin before waiting.
    pub total_pauses: u64,
    /// PAUSEs of the longest iteration: the worst extra delay after a release.
    pub longest_iteration_pauses: u64,
}

impl NormalizedSpin {
    /// The normalized spin at `pause_ns` per PAUSE (the core count plays no part).
    pub fn new(pause_ns: f64) -> NormalizedSpin {
        let (per_yield, max_yields) = if pause_ns.is_finite() && pause_ns > 0.0 {
            // coreclr floors the measured cost at 1 ns and rounds half up (`+ 0.5`, cast).
            let ns = pause_ns.max(1.0);
            let per_yield = ((MIN_NS_PER_NORMALIZED_YIELD / ns).round() as u64).max(1);
            let max_yields = ((NS_PER_OPTIMAL_MAX_SPIN_ITERATION / (per_yield as f64 * ns)).round()
                as u64)
                .clamp(1, MAX_OPTIMAL_MAX_NORMALIZED_YIELDS_PER_ITERATION);
            (per_yield, max_yields)
        } else {
            (
                DEFAULT_PAUSES_PER_NORMALIZED_YIELD,
                DEFAULT_OPTIMAL_MAX_NORMALIZED_YIELDS_PER_ITERATION,
            )
        };
        // YieldProcessorWithBackOffNormalized: 2^i yields while that is below the maximum
        // (i < 4 there; the cap of 10 < 2^4 makes the bound the same), then the maximum.
        let iteration_pauses: Vec<u64> = (0..NORMALIZED_SPIN_ITERATIONS)
            .map(|i| {
                let yields = if i < 4 && (1u64 << i) < max_yields {
                    1u64 << i
                } else {
                    max_yields
                };
                yields * per_yield
            })
            .collect();
        NormalizedSpin {
            pause_ns,
            pauses_per_normalized_yield: per_yield,
            normalized_yield_ns: per_yield as f64 * pause_ns,
            optimal_max_normalized_yields_per_iteration: max_yields,
            total_pauses: iteration_pauses.iter().sum(),
            longest_iteration_pauses: iteration_pauses.iter().copied().max().unwrap_or(0),
            iteration_pauses,
        }
    }

    /// Total spin before waiting, in ns.
    pub fn total_ns(&self) -> f64 {
        self.total_pauses as f64 * self.pause_ns
    }

    /// The longest iteration, in ns: the longest a waiter spins on after the lock is freed.
    pub fn longest_iteration_ns(&self) -> f64 {
        self.longest_iteration_pauses as f64 * self.pause_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overflow_the_spin_model_at_the_extremes_never_wraps_or_hangs() {
        // Regression (issue 23): `spin --cores 18446744073709551615` spun forever growing
        // ~1 GB/s, and a huge count printed a wrapped limit.
        for cores in [0, 1, 65_536, u64::MAX / 20_000, u64::MAX] {
            let s = LegacySpin::new(cores);
            assert!(s.rounds.len() <= 41, "{cores}: {} rounds", s.rounds.len());
            assert!(s.limit_pauses >= LIMIT_PAUSES_PER_CORE.min(s.limit_pauses));
            assert!(s.total_pauses >= s.pauses_per_repetition);
            assert!(s.rounds.windows(2).all(|w| w[0] <= w[1]), "{cores}");
        }
        assert_eq!(LegacySpin::new(u64::MAX).limit_pauses, u64::MAX);
        for pause_ns in [0.0, -1.0, 1e30, f64::NAN, f64::INFINITY, f64::MIN_POSITIVE] {
            let n = NormalizedSpin::new(pause_ns);
            assert!(n.iteration_pauses.len() <= NORMALIZED_SPIN_ITERATIONS as usize);
            for p in crate::spin::RUNTIMES {
                let _ = crate::spin::spin_cost(p, pause_ns, u64::MAX);
            }
        }
    }

    // The seed's figures: "On 24 or 48 cores that is 4,920,000 PAUSEs: 19.7 ms at 4 ns per
    // PAUSE, 246 ms at 50 ns; the last round alone is 328,050 PAUSEs." The exact sum is
    // 10 x (50 + 150 + ... + 328,050) = 10 x 492,050 = 4,920,500, which the seed rounds.

    #[test]
    fn seed_24_cores_rounds() {
        let s = LegacySpin::new(24);
        assert_eq!(s.limit_pauses, 480_000);
        assert_eq!(
            s.rounds,
            vec![50, 150, 450, 1_350, 4_050, 12_150, 36_450, 109_350, 328_050]
        );
        assert_eq!(s.pauses_per_repetition, 492_050);
        assert_eq!(s.total_pauses, 4_920_500);
        assert_eq!(s.last_round_pauses, 328_050);
    }

    #[test]
    fn seed_24_cores_at_4_ns_is_19_68_ms() {
        let s = LegacySpin::new(24);
        assert_eq!(format!("{:.2}", s.total_ns(4.0) / 1e6), "19.68");
        assert_eq!((s.total_pauses as f64 / 1e4).round() * 1e4, 4_920_000.0);
    }

    #[test]
    fn seed_48_cores_at_50_ns_is_246_0_ms() {
        let s = LegacySpin::new(48);
        // 984,150 is not below 960,000, so 48 cores run the same nine rounds as 24.
        assert_eq!(s.total_pauses, 4_920_500);
        assert_eq!(format!("{:.1}", s.total_ns(50.0) / 1e6), "246.0");
        assert_eq!(s.last_round_pauses, 328_050);
    }

    #[test]
    fn more_cores_add_a_round() {
        // 50 cores: limit 1,000,000 > 984,150, so a tenth round runs.
        let s = LegacySpin::new(50);
        assert_eq!(s.last_round_pauses, 984_150);
        assert_eq!(s.rounds.len(), 10);
    }

    #[test]
    fn one_core_still_spins_one_repetition_of_short_rounds() {
        let s = LegacySpin::new(1);
        assert_eq!(s.rounds, vec![50, 150, 450, 1_350, 4_050, 12_150]);
        assert_eq!(LegacySpin::new(0), s);
    }

    #[test]
    fn normalization_at_the_seed_pause_costs() {
        // 43 ns (Skylake-SP): round(0.86) = 1 PAUSE per yield, round(272 / 43) = 6 yields.
        let sky = NormalizedSpin::new(43.0);
        assert_eq!(sky.pauses_per_normalized_yield, 1);
        assert_eq!(sky.optimal_max_normalized_yields_per_iteration, 6);
        // 4 ns (Haswell): round(9.25) = 9 PAUSEs = 36 ns per yield, round(7.56) = 8 yields.
        let has = NormalizedSpin::new(4.0);
        assert_eq!(has.pauses_per_normalized_yield, 9);
        assert_eq!(has.normalized_yield_ns, 36.0);
        assert_eq!(has.optimal_max_normalized_yields_per_iteration, 8);
    }

    // coreclr rounds 37 / ns half up: at 24.4 ns (this repo's EPYC guest) that is 2 PAUSEs per
    // yield, where a floor would give 1.
    #[test]
    fn pauses_per_yield_round_half_up_as_coreclr_does() {
        assert_eq!(NormalizedSpin::new(24.4).pauses_per_normalized_yield, 2);
        assert_eq!(NormalizedSpin::new(30.0).pauses_per_normalized_yield, 1);
        // A 1 ns PAUSE: 37 per yield, one yield per iteration (272 / 37 = 7.4 -> 7).
        let fast = NormalizedSpin::new(0.5);
        assert_eq!(fast.pauses_per_normalized_yield, 37);
        assert_eq!(fast.optimal_max_normalized_yields_per_iteration, 7);
    }

    #[test]
    fn yields_per_iteration_are_capped_at_ten_and_unmeasured_costs_take_the_defaults() {
        // 27 ns: 1 PAUSE per yield, 272 / 27 = 10.07 -> 10; 20 ns: 2 per yield (40 ns), 6.8 -> 7.
        assert_eq!(
            NormalizedSpin::new(27.0).optimal_max_normalized_yields_per_iteration,
            10
        );
        let twenty = NormalizedSpin::new(20.0);
        assert_eq!(twenty.pauses_per_normalized_yield, 2);
        assert_eq!(twenty.optimal_max_normalized_yields_per_iteration, 7);
        let d = NormalizedSpin::new(0.0);
        assert_eq!(d.pauses_per_normalized_yield, 1);
        assert_eq!(d.optimal_max_normalized_yields_per_iteration, 7);
        assert_eq!(
            NormalizedSpin::new(f64::NAN).iteration_pauses,
            d.iteration_pauses
        );
    }

    #[test]
    fn normalized_iterations_back_off_to_the_maximum() {
        let sky = NormalizedSpin::new(43.0);
        assert_eq!(sky.iteration_pauses.len(), 30);
        assert_eq!(&sky.iteration_pauses[..4], &[1, 2, 4, 6]);
        assert!(sky.iteration_pauses[3..].iter().all(|&n| n == 6));
        assert_eq!(sky.total_pauses, 1 + 2 + 4 + 27 * 6);
        assert_eq!(sky.longest_iteration_pauses, 6);
        assert_eq!(sky.longest_iteration_ns(), 258.0);
        let has = NormalizedSpin::new(4.0);
        assert_eq!(&has.iteration_pauses[..5], &[9, 18, 36, 72, 72]);
    }

    #[test]
    fn normalized_spin_is_microseconds_whatever_the_pause_cost() {
        // 43 ns: 169 PAUSEs = 7.27 us; 4 ns: 1+2+4+27x8 = 223 yields of 36 ns = 8.03 us.
        let (slow, fast) = (NormalizedSpin::new(43.0), NormalizedSpin::new(4.0));
        assert_eq!(slow.total_ns(), 169.0 * 43.0);
        assert_eq!(fast.total_ns(), 223.0 * 36.0);
        assert!(slow.total_ns() / fast.total_ns() < 1.2);
        // Where the legacy spin grows 10.75x with the PAUSE cost.
        let legacy = LegacySpin::new(24);
        assert!(legacy.total_ns(43.0) / legacy.total_ns(4.0) > 10.0);
        assert!(slow.total_ns() < 10_000.0);
    }
}
