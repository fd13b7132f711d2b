//! Spin-before-block policies by runtime, and what each costs at a given PAUSE latency.
//!
//! Most runtimes spin a fixed count of PAUSEs, tuned when a PAUSE took ~10 cycles; their spin
//! time scales with the PAUSE cost. A few bound spinning by time, and are immune. Counts are
//! the maximum a waiter spins before it yields or sleeps; each entry cites where it is set.

use super::dotnet::{LegacySpin, NormalizedSpin};
use serde::{Deserialize, Serialize};

/// How a policy limits its spinning.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SpinBudget {
    /// A fixed number of PAUSEs (then yields or blocks).
    Pauses {
        /// PAUSEs spun before the first yield or sleep.
        pauses: u64,
    },
    /// A time limit, whatever a PAUSE costs.
    Time {
        /// The limit, in ns.
        ns: f64,
    },
    /// The .NET legacy schedule: depends on the core count.
    DotnetLegacy,
    /// The .NET normalized schedule: 30 iterations of normalized yields, bounded by time.
    DotnetNormalized,
}

/// One runtime's spin-before-block policy.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct SpinPolicy {
    /// Runtime or library.
    pub runtime: &'static str,
    /// The primitive that spins.
    pub primitive: &'static str,
    /// What limits the spin.
    pub budget: SpinBudget,
    /// What happens after the spin.
    pub then: &'static str,
    /// Where the figure comes from.
    pub source: &'static str,
}

/// Every policy the model knows, in the order design.md lists them.
pub const RUNTIMES: &[SpinPolicy] = &[
    SpinPolicy {
        runtime: "glibc",
        primitive: "pthread adaptive mutex",
        budget: SpinBudget::Pauses { pauses: 100 },
        then: "futex wait",
        source: "tunable glibc.pthread.mutex_spin_count (default 100)",
    },
    SpinPolicy {
        runtime: "Go",
        primitive: "sync.Mutex",
        budget: SpinBudget::Pauses { pauses: 4 * 30 },
        then: "semaphore sleep",
        source: "runtime: active_spin=4 rounds of procyield(active_spin_cnt=30)",
    },
    SpinPolicy {
        runtime: "Rust std",
        primitive: "Mutex (futex)",
        budget: SpinBudget::Pauses { pauses: 100 },
        then: "futex wait",
        source: "std sys::sync::mutex::futex: spin 100 times with spin_loop()",
    },
    SpinPolicy {
        runtime: "parking_lot",
        primitive: "Mutex",
        budget: SpinBudget::Pauses { pauses: 2 + 4 + 8 },
        then: "7 sched_yield, then park",
        source: "parking_lot_core SpinWait: 2^1..2^3 spins, then yields to 10",
    },
    SpinPolicy {
        runtime: "crossbeam",
        primitive: "Backoff::snooze",
        budget: SpinBudget::Pauses {
            pauses: 1 + 2 + 4 + 8 + 16 + 32 + 64,
        },
        then: "sched_yield (caller decides when to block)",
        source: "crossbeam-utils Backoff: 2^step PAUSEs up to SPIN_LIMIT=6",
    },
    SpinPolicy {
        runtime: "oneTBB",
        primitive: "atomic_backoff",
        budget: SpinBudget::Pauses {
            pauses: 1 + 2 + 4 + 8 + 16,
        },
        then: "sched_yield",
        source: "tbb::detail::atomic_backoff: doubling to LOOPS_BEFORE_YIELD=16",
    },
    SpinPolicy {
        runtime: "HotSpot",
        primitive: "synchronized (ObjectMonitor)",
        budget: SpinBudget::Pauses { pauses: 5000 / 256 },
        then: "park",
        source: "ObjectMonitor::TrySpin: ~5000 load iterations, SpinPause every 256",
    },
    SpinPolicy {
        runtime: "folly",
        primitive: "spin then futex (Baton, SharedMutex)",
        budget: SpinBudget::Time { ns: 2_000.0 },
        then: "futex wait",
        source: "folly spin_pause_until: bounded by time (2 us)",
    },
    SpinPolicy {
        runtime: ".NET legacy",
        primitive: "Monitor (AwareLock), <= .NET Core 2.0 / Framework 4.7.2",
        budget: SpinBudget::DotnetLegacy,
        then: "kernel wait",
        source: "coreclr g_SpinConstants: 10 x rounds of 50*3^k while < 20000*cores",
    },
    SpinPolicy {
        runtime: ".NET normalized",
        primitive: "Monitor (AwareLock), .NET Core 2.1+ / Framework 4.8",
        budget: SpinBudget::DotnetNormalized,
        then: "kernel wait",
        source: "coreclr YieldProcessorWithBackOffNormalized: 30 iterations of <= ~272 ns, \
                 >= 37 ns per normalized yield",
    },
];

/// PostgreSQL's spinlock (`s_lock`): a database server rather than a runtime the `spin` model
/// compares, so not in [`RUNTIMES`]; `diagnose` quotes it when a backend spins in it.
pub const POSTGRESQL_S_LOCK: SpinPolicy = SpinPolicy {
    runtime: "PostgreSQL",
    primitive: "spinlock (s_lock)",
    budget: SpinBudget::Pauses { pauses: 100 },
    then: "pg_usleep from 1 ms, growing to 1 s",
    source: "src/backend/storage/lmgr/s_lock.c: DEFAULT_SPINS_PER_DELAY 100, adapted between \
             10 and 1000 per backend; SPIN_DELAY is PAUSE on x86-64",
};

/// What a policy costs at one PAUSE latency and core count.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpinCost {
    /// Runtime or library.
    pub runtime: String,
    /// The primitive that spins.
    pub primitive: String,
    /// PAUSEs executed before the first yield or sleep.
    pub pauses: f64,
    /// Spin time before the first yield or sleep, in ns.
    pub spin_ns: f64,
    /// Worst extra delay after the lock is released, in ns: the longest run of PAUSEs between
    /// two looks at the lock, for the .NET policies (a whole round for legacy, one ~272 ns
    /// iteration for normalized); absent for the others (they look every iteration).
    pub worst_extra_delay_ns: Option<f64>,
    /// True when the spin time grows with the PAUSE cost.
    pub scales_with_pause: bool,
    /// What happens after the spin.
    pub then: String,
    /// Where the figure comes from.
    pub source: String,
}

/// The cost of `policy` at `pause_ns` per PAUSE on a machine with `cores` cores.
pub fn spin_cost(policy: &SpinPolicy, pause_ns: f64, cores: u64) -> SpinCost {
    let (pauses, spin_ns, worst, scales) = match policy.budget {
        SpinBudget::Pauses { pauses } => (pauses as f64, pauses as f64 * pause_ns, None, true),
        SpinBudget::Time { ns } => (
            if pause_ns > 0.0 { ns / pause_ns } else { 0.0 },
            ns,
            None,
            false,
        ),
        SpinBudget::DotnetLegacy => {
            let s = LegacySpin::new(cores);
            (
                s.total_pauses as f64,
                s.total_ns(pause_ns),
                Some(s.last_round_ns(pause_ns)),
                true,
            )
        }
        SpinBudget::DotnetNormalized => {
            let s = NormalizedSpin::new(pause_ns);
            (
                s.total_pauses as f64,
                s.total_ns(),
                Some(s.longest_iteration_ns()),
                false,
            )
        }
    };
    SpinCost {
        runtime: policy.runtime.to_string(),
        primitive: policy.primitive.to_string(),
        pauses,
        spin_ns,
        worst_extra_delay_ns: worst,
        scales_with_pause: scales,
        then: policy.then.to_string(),
        source: policy.source.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cost(runtime: &str, pause_ns: f64, cores: u64) -> SpinCost {
        let p = RUNTIMES.iter().find(|p| p.runtime == runtime).unwrap();
        spin_cost(p, pause_ns, cores)
    }

    #[test]
    fn fixed_counts_scale_with_pause() {
        assert_eq!(cost("glibc", 4.0, 8).spin_ns, 400.0);
        assert_eq!(cost("glibc", 43.0, 8).spin_ns, 4300.0);
        assert_eq!(cost("Go", 10.0, 8).pauses, 120.0);
        assert_eq!(cost("parking_lot", 1.0, 8).pauses, 14.0);
        assert_eq!(cost("crossbeam", 1.0, 8).pauses, 127.0);
        assert_eq!(cost("oneTBB", 1.0, 8).pauses, 31.0);
        assert_eq!(cost("HotSpot", 1.0, 8).pauses, 19.0);
    }

    #[test]
    fn time_bounded_policies_do_not_scale() {
        let c = cost("folly", 43.0, 8);
        assert_eq!(c.spin_ns, 2000.0);
        assert!(!c.scales_with_pause);
    }

    #[test]
    fn dotnet_legacy_reproduces_the_seed() {
        let c = cost(".NET legacy", 50.0, 48);
        assert_eq!(c.pauses, 4_920_500.0);
        assert_eq!(format!("{:.1}", c.spin_ns / 1e6), "246.0");
        assert_eq!(c.worst_extra_delay_ns, Some(328_050.0 * 50.0));
    }

    // Regression: the `spin` table once showed a second model of the normalized spin (the
    // legacy schedule counted in normalized yields, 26.4 ms at 43 ns and 24 cores) beside the
    // model lock's 7.3 us. The row now reads the one model in `dotnet`.
    #[test]
    fn dotnet_normalized_row_is_the_one_model_of_the_fix() {
        let c = cost(".NET normalized", 43.0, 24);
        let model = NormalizedSpin::new(43.0);
        assert_eq!(c.pauses, 169.0);
        assert_eq!(c.spin_ns, model.total_ns());
        assert_eq!(c.worst_extra_delay_ns, Some(258.0));
        assert!(!c.scales_with_pause);
        // The core count plays no part.
        assert_eq!(cost(".NET normalized", 43.0, 2), c);
    }

    #[test]
    fn every_runtime_of_the_design_table_is_present() {
        let names: Vec<_> = RUNTIMES.iter().map(|p| p.runtime).collect();
        for n in [
            "glibc",
            "Go",
            "Rust std",
            "parking_lot",
            "crossbeam",
            "oneTBB",
            "HotSpot",
            "folly",
            ".NET legacy",
            ".NET normalized",
        ] {
            assert!(names.contains(&n), "{n} missing");
        }
    }
}
