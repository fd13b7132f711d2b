//! .NET's lock spinning, before and after the Skylake fix.
//!
//! Legacy (.NET Framework <= 4.7.2, .NET Core <= 2.0; `AwareLock::Contention` with the
//! `g_SpinConstants` of coreclr, as quoted in the seed `skylake-pause-spin.en.txt`): 10
//! repetitions; each runs rounds of 50, 150, 450, ... PAUSEs (x3 per round) while the round
//! length is below 20000 x cores. The lock is only re-checked after a whole round, so a lock
//! freed just after a round starts costs the waiter that whole round: the last round is the
//! worst extra delay.
//!
//! Normalized (.NET Core 2.1 / Framework 4.8 on): PAUSE cost is measured at start-up and spin
//! counts are in "normalized yields" of at least 37 ns (`MinNsPerNormalizedYield` in coreclr's
//! `yieldprocessornormalized.h`), each made of `max(1, 37 / pause_ns)` PAUSEs.

use serde::{Deserialize, Serialize};

/// PAUSEs in the first round of a repetition.
pub const INITIAL_ROUND_PAUSES: u64 = 50;
/// Each round is this many times longer than the one before.
pub const BACKOFF_FACTOR: u64 = 3;
/// Repetitions of the whole round sequence before the thread blocks.
pub const REPETITIONS: u64 = 10;
/// The round-length limit is this many PAUSEs per core.
pub const LIMIT_PAUSES_PER_CORE: u64 = 20_000;
/// coreclr `MinNsPerNormalizedYield`: a normalized yield lasts at least this long.
pub const MIN_NS_PER_NORMALIZED_YIELD: f64 = 37.0;
/// coreclr's comment on `g_yieldsPerNormalizedYield`: about 8 PAUSEs per normalized yield on
/// the pre-Skylake CPUs the legacy counts were tuned on. The model keeps the legacy schedule
/// and counts it in normalized yields at this ratio (an assumption of this model, stated in
/// the output).
pub const PRE_SKYLAKE_PAUSES_PER_NORMALIZED_YIELD: u64 = 8;

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
        let limit_pauses = LIMIT_PAUSES_PER_CORE * cores;
        let mut rounds = Vec::new();
        let mut duration = INITIAL_ROUND_PAUSES;
        // do { spin(duration); duration *= 3; } while (duration < limit);
        loop {
            rounds.push(duration);
            duration *= BACKOFF_FACTOR;
            if duration >= limit_pauses {
                break;
            }
        }
        let pauses_per_repetition: u64 = rounds.iter().sum();
        LegacySpin {
            cores,
            limit_pauses,
            last_round_pauses: *rounds.last().expect("at least one round"),
            pauses_per_repetition,
            total_pauses: pauses_per_repetition * REPETITIONS,
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

/// The normalized policy at one PAUSE cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NormalizedSpin {
    /// PAUSEs per normalized yield here: max(1, floor(37 / pause_ns)).
    pub pauses_per_normalized_yield: u64,
    /// Duration of one normalized yield here, in ns.
    pub normalized_yield_ns: f64,
    /// Normalized yields in the whole spin (legacy PAUSE count / 8).
    pub total_normalized_yields: u64,
    /// Total spin before blocking, in ns.
    pub total_ns: f64,
    /// The last round, in ns.
    pub last_round_ns: f64,
}

impl NormalizedSpin {
    /// The normalized spin for `cores` cores at `pause_ns` per PAUSE.
    pub fn new(cores: u64, pause_ns: f64) -> NormalizedSpin {
        let legacy = LegacySpin::new(cores);
        let per_yield = if pause_ns > 0.0 {
            ((MIN_NS_PER_NORMALIZED_YIELD / pause_ns).floor() as u64).max(1)
        } else {
            1
        };
        let yield_ns = per_yield as f64 * pause_ns;
        let total = legacy.total_pauses / PRE_SKYLAKE_PAUSES_PER_NORMALIZED_YIELD;
        let last = legacy.last_round_pauses / PRE_SKYLAKE_PAUSES_PER_NORMALIZED_YIELD;
        NormalizedSpin {
            pauses_per_normalized_yield: per_yield,
            normalized_yield_ns: yield_ns,
            total_normalized_yields: total,
            total_ns: total as f64 * yield_ns,
            last_round_ns: last as f64 * yield_ns,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn normalized_spin_is_nearly_independent_of_pause_cost() {
        let fast = NormalizedSpin::new(24, 4.0);
        let slow = NormalizedSpin::new(24, 43.0);
        assert_eq!(fast.pauses_per_normalized_yield, 9);
        assert_eq!(slow.pauses_per_normalized_yield, 1);
        assert_eq!(fast.total_normalized_yields, 615_062);
        // 36 ns vs 43 ns per normalized yield: within 20%, where legacy differs 10.75x.
        let ratio = slow.total_ns / fast.total_ns;
        assert!((1.0..1.2).contains(&ratio), "{ratio}");
        let legacy = LegacySpin::new(24);
        assert!(slow.total_ns < legacy.total_ns(43.0) / 5.0);
    }
}
