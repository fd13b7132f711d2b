//! Split locks by mechanism: what a split lock turned out to be on a machine, from the machine
//! facts and the per-operation times the split-lock probe records.
//!
//! The same `lock add` across a line end meets one of four things, and they mean opposite
//! things for software:
//! - a **bus lock** at hardware cost (~0.5-7 us; Zen 2/3/4/5 guests read 1-1.5 us): the
//!   program pays little, but every other core's memory accesses slow down (the split-lock
//!   case: up to 10x on Zen 2/5);
//! - **trapped by this kernel** (`split_lock_detect=warn|ratelimit:N`, with
//!   `kernel.split_lock_mitigate=1` a 10 ms sleep per trap): the program is punished, its
//!   neighbours protected;
//! - **trapped by the host**: a guest's kernel never gets #AC detection, but the host can
//!   still trap its split locks (#AC or a bus-lock VM exit, handled by the host kernel or the
//!   VMM under a policy the guest cannot see). On the Emerald Rapids KVM guest, timed op by
//!   op: ~2 us bus locks between 100-500 us traps, 67-186 us on average, the neighbour's DRAM
//!   latency 1.0x: the split-lock case's "latency comparable to a hard-drive seek";
//! - **fatal**: `split_lock_detect=fatal` sends SIGBUS.
//!
//! The probe times single split locks one by one ([`OpCensus`] from the per-op times) and
//! [`classify`] names the mechanism; the same function judges fingerprints from builds without
//! per-op times from the mean alone ([`MechanismEvidence::mean_ns`]).
//!
//! In the JSON: the probe's effects `split_lock_mechanism` ([`SplitLockMechanism`]),
//! `split_lock_trap_shape` ([`TrapShape`]), `split_lock_op_census` ([`OpCensus`]) and
//! `split_lock_op_histogram` ([`OpHistogram`]), documented in `docs/schema.md`.

use crate::machine::SplitLockMode;
use serde::{Deserialize, Serialize};

/// Per-op time from which a split lock counts as trapped rather than bus-locked: 10 us.
/// The slowest bus lock on record is ~7 us core to core (Arrow Lake, Alder Lake P-cores, the
/// split-lock case), and a single thread's is less (Zen 5 here: 1.2-1.3 us, Emerald Rapids
/// ~2 us); the fastest trap on record is the Emerald Rapids host's, 100 us and up, and
/// Linux's mitigation sleeps 10 ms. 10 us sits a factor of ten from both.
pub const TRAP_BOUNDARY_NS: f64 = 10_000.0;

/// Share of ops at or above [`TRAP_BOUNDARY_NS`] (after discounting the ops a preemption
/// explains) from which split locks count as trapped by the host: 1%. A bus-locking guest
/// sees a timer interrupt or a descheduled vCPU in about one op in a thousand (the Zen 5
/// guest here: 1-2 ops of 3000 above 10 us under load 4 on 2 vCPUs); the Emerald Rapids host
/// traps 25-98% of them.
pub const MIN_TRAPPED_OP_SHARE: f64 = 0.01;

/// Per-op times in this band look like a sleep: Linux's `split_lock_mitigate` sleeps 10 ms
/// (`msleep(10)`: 12-30 ms at HZ 1000-100) and `ratelimit:N` 20 ms per excess bus lock
/// (Documentation/admin-guide/kernel-parameters.txt; arch/x86/kernel/cpu/bus_lock.c). The
/// band is two histogram buckets wider on each side, 3.2-56 ms, and well above a VM exit.
pub const SLEEP_BAND_NS: (f64, f64) = (3.162e6, 5.623e7);

/// A trap is called a sleep when ops in [`SLEEP_BAND_NS`] hold at least this share of the
/// time spent in trapped ops: the mitigation's 10 ms dwarfs everything else in a block.
pub const SLEEP_TIME_SHARE: f64 = 0.5;

/// Sleep-band ops (after discounting preemptions) that make a guest's split locks count as
/// trapped by the host even when they are under [`MIN_TRAPPED_OP_SHARE`] of the ops: a host
/// that sleeps 10 ms per trap lets thousands of bus locks through between two sleeps, so the
/// share stays small; three unexplained 3-56 ms stalls, about one per timed block, are not a
/// timer tick.
pub const MIN_HOST_SLEEPS: u64 = 3;

/// What a split lock is on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SplitLockMechanism {
    /// A bus lock at hardware cost: cheap for the program, felt by every other core.
    BusLock,
    /// This kernel traps split locks (`split_lock_detect` warn, ratelimit, the mitigation
    /// sleep): the program pays the kernel's penalty.
    TrappedByKernel,
    /// A guest whose host traps its split locks: per-op times of 10 us and more on a
    /// meaningful share of ops, or a mean that high (fingerprints without per-op times).
    TrappedByHost,
    /// The locking process was killed (SIGBUS, `split_lock_detect=fatal`).
    Fatal,
}

impl SplitLockMechanism {
    /// The JSON word.
    pub fn as_str(self) -> &'static str {
        match self {
            SplitLockMechanism::BusLock => "bus_lock",
            SplitLockMechanism::TrappedByKernel => "trapped_by_kernel",
            SplitLockMechanism::TrappedByHost => "trapped_by_host",
            SplitLockMechanism::Fatal => "fatal",
        }
    }

    /// The mechanism a JSON word names.
    pub fn from_word(word: &str) -> Option<SplitLockMechanism> {
        [
            SplitLockMechanism::BusLock,
            SplitLockMechanism::TrappedByKernel,
            SplitLockMechanism::TrappedByHost,
            SplitLockMechanism::Fatal,
        ]
        .into_iter()
        .find(|m| m.as_str() == word)
    }

    /// Whether something other than the hardware stands between the program and the bus lock.
    pub fn trapped(self) -> bool {
        matches!(
            self,
            SplitLockMechanism::TrappedByKernel | SplitLockMechanism::TrappedByHost
        )
    }
}

impl std::fmt::Display for SplitLockMechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SplitLockMechanism::BusLock => "a bus lock at hardware cost",
            SplitLockMechanism::TrappedByKernel => "trapped by this kernel",
            SplitLockMechanism::TrappedByHost => "trapped by the host",
            SplitLockMechanism::Fatal => "fatal (SIGBUS)",
        })
    }
}

/// What the trapped ops' times look like.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrapShape {
    /// A mode near 10 ms, and the locking thread switched out voluntarily as often: the
    /// kernel's mitigation sleep (or the ratelimit's 20 ms).
    Sleep,
    /// A mode near 10 ms in which the locking thread did not sleep (fewer voluntary switches
    /// than such ops): held on its CPU by the kernel's trap handler or by the host. The Emerald
    /// Rapids guest with #DB bus-lock detection: 9 ops of ~12 ms, 84% of the time, and no
    /// voluntary switch.
    Stall,
    /// 10 us to a few ms each: VM exits or rate-limited traps, no sleep.
    ShortTraps,
}

impl TrapShape {
    /// The JSON word.
    pub fn as_str(self) -> &'static str {
        match self {
            TrapShape::Sleep => "sleep",
            TrapShape::Stall => "stall",
            TrapShape::ShortTraps => "short_traps",
        }
    }

    /// The shape a JSON word names.
    pub fn from_word(word: &str) -> Option<TrapShape> {
        [TrapShape::Sleep, TrapShape::Stall, TrapShape::ShortTraps]
            .into_iter()
            .find(|s| s.as_str() == word)
    }
}

/// Counts over a run of split locks timed one by one, and how often the locking thread was
/// switched out meanwhile (`getrusage`): a kernel's mitigation sleep is a voluntary switch, a
/// busy machine's preemption an involuntary one, and a host's trap neither.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct OpCensus {
    /// Split locks timed.
    pub ops: u64,
    /// Their total time, in ns.
    pub total_ns: f64,
    /// Ops at or above [`TRAP_BOUNDARY_NS`].
    pub trapped_ops: u64,
    /// Time in those ops, in ns.
    pub trapped_ns: f64,
    /// Ops in [`SLEEP_BAND_NS`].
    pub sleep_ops: u64,
    /// Time in those ops, in ns.
    pub sleep_ns: f64,
    /// Voluntary context switches of the locking thread while it timed.
    pub voluntary_switches: u64,
    /// Involuntary context switches (preemptions) of the locking thread while it timed.
    pub involuntary_switches: u64,
}

impl OpCensus {
    /// The census of `per_op_ns`, with the context switches seen meanwhile.
    pub fn of(per_op_ns: &[f64], voluntary_switches: u64, involuntary_switches: u64) -> OpCensus {
        let mut c = OpCensus {
            voluntary_switches,
            involuntary_switches,
            ..OpCensus::default()
        };
        for &ns in per_op_ns {
            c.ops += 1;
            c.total_ns += ns;
            if ns >= TRAP_BOUNDARY_NS {
                c.trapped_ops += 1;
                c.trapped_ns += ns;
            }
            if (SLEEP_BAND_NS.0..SLEEP_BAND_NS.1).contains(&ns) {
                c.sleep_ops += 1;
                c.sleep_ns += ns;
            }
        }
        c
    }

    /// Two censuses as one.
    pub fn merge(&self, o: &OpCensus) -> OpCensus {
        OpCensus {
            ops: self.ops + o.ops,
            total_ns: self.total_ns + o.total_ns,
            trapped_ops: self.trapped_ops + o.trapped_ops,
            trapped_ns: self.trapped_ns + o.trapped_ns,
            sleep_ops: self.sleep_ops + o.sleep_ops,
            sleep_ns: self.sleep_ns + o.sleep_ns,
            voluntary_switches: self.voluntary_switches + o.voluntary_switches,
            involuntary_switches: self.involuntary_switches + o.involuntary_switches,
        }
    }

    /// Mean ns per op; `None` without ops.
    pub fn mean_ns(&self) -> Option<f64> {
        (self.ops > 0).then(|| self.total_ns / self.ops as f64)
    }

    /// Trapped ops that a preemption does not explain: each involuntary switch can account
    /// for one slow op.
    pub fn unexplained_trapped_ops(&self) -> u64 {
        self.trapped_ops.saturating_sub(self.involuntary_switches)
    }

    /// Sleep-band ops that a preemption does not explain.
    pub fn unexplained_sleep_ops(&self) -> u64 {
        self.sleep_ops.saturating_sub(self.involuntary_switches)
    }

    /// Share of ops trapped, preemptions discounted.
    pub fn trapped_share(&self) -> f64 {
        if self.ops == 0 {
            return 0.0;
        }
        self.unexplained_trapped_ops() as f64 / self.ops as f64
    }

    /// Whether the ops show traps: a meaningful share of ops at 10 us or more, or repeated
    /// sleeps holding most of the time.
    pub fn shows_traps(&self) -> bool {
        self.trapped_share() >= MIN_TRAPPED_OP_SHARE
            || (self.unexplained_sleep_ops() >= MIN_HOST_SLEEPS
                && self.sleep_ns >= SLEEP_TIME_SHARE * self.total_ns)
    }

    /// The shape of the traps: sleep-band ops holding most of the trapped time are sleeps
    /// when the thread switched out voluntarily for each (a sleep is a voluntary switch), else
    /// stalls; `None` when no op was trapped.
    pub fn shape(&self) -> Option<TrapShape> {
        if self.trapped_ops == 0 {
            return None;
        }
        let long = self.unexplained_sleep_ops();
        Some(
            if long > 0 && self.sleep_ns >= SLEEP_TIME_SHARE * self.trapped_ns {
                if self.voluntary_switches >= long {
                    TrapShape::Sleep
                } else {
                    TrapShape::Stall
                }
            } else {
                TrapShape::ShortTraps
            },
        )
    }
}

/// Everything [`classify`] looks at.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MechanismEvidence {
    /// What this kernel does with split locks (`machine.split_lock.effective`).
    pub kernel: SplitLockMode,
    /// Whether the machine is a guest (`machine.hypervisor` is set).
    pub guest: bool,
    /// The locking child process died of SIGBUS.
    pub killed_by_sigbus: bool,
    /// Per-op counts, when split locks were timed one by one.
    pub census: Option<OpCensus>,
    /// Mean ns per split lock, for fingerprints without per-op times (the ping-pong latency
    /// or the child's trapped figure).
    pub mean_ns: Option<f64>,
}

/// The mechanism, and the traps' shape when the per-op times show traps. `None` when there is
/// nothing to go on (no measurement, and a kernel that leaves split locks alone).
pub fn classify(e: &MechanismEvidence) -> Option<(SplitLockMechanism, Option<TrapShape>)> {
    use SplitLockMechanism::*;
    if e.killed_by_sigbus {
        return Some((Fatal, None));
    }
    let kernel_acts = e.kernel.kernel_acts();
    if let Some(c) = e.census.filter(|c| c.ops > 0) {
        let traps = c.shows_traps();
        let shape = traps.then(|| c.shape()).flatten();
        return Some(if kernel_acts && traps {
            (TrappedByKernel, shape)
        } else if !kernel_acts && e.guest && traps {
            (TrappedByHost, shape)
        } else {
            // A kernel that only warns (bus_lock_detect's #DB, or warn after the first trap)
            // leaves the bus lock's cost; bare metal has no host to trap.
            (BusLock, None)
        });
    }
    match (e.mean_ns, e.kernel) {
        (None, SplitLockMode::Fatal) => Some((Fatal, None)),
        (None, mode) if mode.penalises() => Some((TrappedByKernel, None)),
        (None, _) => None,
        (Some(_), mode) if mode.kernel_acts() => Some((TrappedByKernel, None)),
        (Some(ns), _) if e.guest && ns >= TRAP_BOUNDARY_NS => Some((TrappedByHost, None)),
        (Some(_), _) => Some((BusLock, None)),
    }
}

/// Buckets per decade of [`OpHistogram`]: a quarter decade (x1.78) tells a 1.2 us bus lock
/// from a 2 us one and puts 10 us on a bucket edge.
pub const HISTOGRAM_BUCKETS_PER_DECADE: i32 = 4;
/// Lowest bucket edge above zero, in ns (below it: an op faster than the clock's reach).
pub const HISTOGRAM_FIRST_EDGE_NS: f64 = 10.0;
/// Decades the histogram spans from [`HISTOGRAM_FIRST_EDGE_NS`]: 10 ns to 1 s.
pub const HISTOGRAM_DECADES: i32 = 8;

/// Per-op times in log-spaced buckets: `ops[i]` ops took from `low_ns[i]` up to
/// `low_ns[i + 1]` (the last bucket has no upper end). Only the span from the first to the
/// last non-empty bucket is kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpHistogram {
    /// Each bucket's lower edge, in ns: 0, then 10 ns x 10^(k/4).
    pub low_ns: Vec<f64>,
    /// Ops per bucket.
    pub ops: Vec<u64>,
}

impl OpHistogram {
    /// Every bucket's lower edge: 0, 10 ns, 17.8 ns, ... 1 s.
    pub fn edges() -> Vec<f64> {
        std::iter::once(0.0)
            .chain(
                (0..=HISTOGRAM_BUCKETS_PER_DECADE * HISTOGRAM_DECADES).map(|k| {
                    HISTOGRAM_FIRST_EDGE_NS
                        * 10f64.powf(f64::from(k) / f64::from(HISTOGRAM_BUCKETS_PER_DECADE))
                }),
            )
            .collect()
    }

    /// The histogram of `per_op_ns`.
    pub fn of(per_op_ns: &[f64]) -> OpHistogram {
        let edges = Self::edges();
        let mut ops = vec![0u64; edges.len()];
        for &ns in per_op_ns {
            // Edges are 10^(k/4) apart; compare with the edge itself so that an op of exactly
            // 10 us lands in the bucket that starts there, as the census counts it.
            let i = edges.partition_point(|&e| e <= ns).saturating_sub(1);
            ops[i] += 1;
        }
        let first = ops.iter().position(|&n| n > 0).unwrap_or(0);
        let last = ops.iter().rposition(|&n| n > 0).unwrap_or(0);
        OpHistogram {
            low_ns: edges[first..=last].to_vec(),
            ops: ops[first..=last].to_vec(),
        }
    }

    /// The bucket holding the most ops, as its lower edge in ns (the tests' check of a
    /// histogram's shape).
    #[cfg(test)]
    pub fn mode_ns(&self) -> Option<f64> {
        let (i, _) = self
            .ops
            .iter()
            .enumerate()
            .max_by_key(|&(i, &n)| (n, std::cmp::Reverse(i)))?;
        self.low_ns.get(i).copied()
    }
}

/// The per-op percentiles a fingerprint keeps (the form of the corpus' C references: p0 p10
/// p50 p90 p99 p100).
pub const PERCENTILES: [(&str, f64); 6] = [
    ("p0", 0.0),
    ("p10", 0.10),
    ("p50", 0.50),
    ("p90", 0.90),
    ("p99", 0.99),
    ("p100", 1.0),
];

#[cfg(test)]
mod tests {
    use super::*;
    use SplitLockMechanism::*;

    /// `n` ops spread evenly between `low` and `high` ns (log-spaced).
    fn ops(n: usize, low: f64, high: f64) -> Vec<f64> {
        (0..n)
            .map(|i| low * (high / low).powf(i as f64 / n.max(2) as f64))
            .collect()
    }

    fn guest(census: OpCensus) -> MechanismEvidence {
        MechanismEvidence {
            kernel: SplitLockMode::NotDetected,
            guest: true,
            killed_by_sigbus: false,
            census: Some(census),
            mean_ns: None,
        }
    }

    #[test]
    fn bus_locks_of_one_to_two_us_are_bus_locks_even_with_a_preemption() {
        // The Zen 5 guest (bench/split_lock_ref.c): 3000 ops at 0.9-1.7 us, one 8 ms op while
        // a build ran beside it. That op holds 69% of the time but is one op in 3000.
        let mut v = ops(2999, 900.0, 1700.0);
        v.push(8.0e6);
        let c = OpCensus::of(&v, 0, 0);
        assert_eq!(c.trapped_ops, 1);
        assert!(c.sleep_ns > 0.5 * c.total_ns);
        assert!(!c.shows_traps());
        assert_eq!(classify(&guest(c)), Some((BusLock, None)));
        let h = OpHistogram::of(&v);
        assert!((1000.0..1800.0).contains(&h.mode_ns().unwrap()), "{h:?}");
    }

    #[test]
    fn a_bimodal_guest_is_trapped_by_the_host_in_short_traps() {
        // The Emerald Rapids guest (refs.txt): ~2 us bus locks, and 100-500 us traps on a
        // quarter to most of the ops.
        let mut v = ops(1500, 2000.0, 3000.0);
        v.extend(ops(500, 100e3, 500e3));
        let c = OpCensus::of(&v, 0, 0);
        assert!((c.trapped_share() - 0.25).abs() < 1e-9);
        assert_eq!(
            classify(&guest(c)),
            Some((TrappedByHost, Some(TrapShape::ShortTraps)))
        );
        // The same times on bare metal with no detection: no host to blame.
        let mut bare = guest(c);
        bare.guest = false;
        assert_eq!(classify(&bare), Some((BusLock, None)));
    }

    #[test]
    fn a_kernel_that_sleeps_shows_a_mode_near_ten_ms() {
        // split_lock_mitigate=1: a 10 ms sleep (12-16 ms at HZ 250), then bus locks until the
        // detection is re-armed two ticks later; one voluntary switch per sleep.
        let mut v = Vec::new();
        for _ in 0..3 {
            v.push(14e6);
            v.extend(ops(4000, 1000.0, 1500.0));
        }
        let c = OpCensus::of(&v, 3, 0);
        let kernel = MechanismEvidence {
            kernel: SplitLockMode::WarnSleep,
            guest: false,
            killed_by_sigbus: false,
            census: Some(c),
            mean_ns: None,
        };
        assert_eq!(
            classify(&kernel),
            Some((TrappedByKernel, Some(TrapShape::Sleep)))
        );
        // A guest whose host sleeps the same way: three sleeps no preemption explains.
        assert_eq!(
            classify(&guest(c)),
            Some((TrappedByHost, Some(TrapShape::Sleep)))
        );
        // The same times without a voluntary switch: the thread never slept, it was held.
        let held = OpCensus::of(&v, 0, 0);
        assert_eq!(held.shape(), Some(TrapShape::Stall));
        // ... but three preemptions on a busy guest explain three slow ops.
        let busy = OpCensus::of(&v, 0, 3);
        assert_eq!(classify(&guest(busy)), Some((BusLock, None)));
        // Every op asleep: the mode is the sleep itself.
        let all = ops(5, 10e6, 12e6);
        let h = OpHistogram::of(&all);
        assert!((5.6e6..17.8e6).contains(&h.mode_ns().unwrap()), "{h:?}");
    }

    #[test]
    fn sigbus_is_fatal_and_a_kernel_that_only_warns_leaves_bus_locks() {
        let mut e = guest(OpCensus::of(&ops(100, 1000.0, 1500.0), 0, 0));
        e.kernel = SplitLockMode::Warn;
        e.guest = false;
        assert_eq!(classify(&e), Some((BusLock, None)));
        e.killed_by_sigbus = true;
        assert_eq!(classify(&e), Some((Fatal, None)));
    }

    #[test]
    fn without_per_op_times_the_mean_decides() {
        // Fingerprints from builds before per-op timing: the Emerald Rapids guest's 126 us
        // ping-pong latency is a trap; the Zen 3 guest's 1.5 us a bus lock.
        let old = |ns: Option<f64>, kernel: SplitLockMode, guest: bool| MechanismEvidence {
            kernel,
            guest,
            killed_by_sigbus: false,
            census: None,
            mean_ns: ns,
        };
        let nd = SplitLockMode::NotDetected;
        assert_eq!(
            classify(&old(Some(126e3), nd, true)),
            Some((TrappedByHost, None))
        );
        assert_eq!(
            classify(&old(Some(1541.0), nd, true)),
            Some((BusLock, None))
        );
        assert_eq!(
            classify(&old(Some(126e3), nd, false)),
            Some((BusLock, None))
        );
        let ws = SplitLockMode::WarnSleep;
        assert_eq!(
            classify(&old(Some(10e6), ws, false)),
            Some((TrappedByKernel, None))
        );
        assert_eq!(
            classify(&old(None, ws, false)),
            Some((TrappedByKernel, None))
        );
        assert_eq!(
            classify(&old(None, SplitLockMode::Fatal, false)),
            Some((Fatal, None))
        );
        assert_eq!(classify(&old(None, nd, true)), None);
    }

    #[test]
    fn histogram_buckets_are_quarter_decades_with_ten_us_on_an_edge() {
        let e = OpHistogram::edges();
        assert_eq!(e[0], 0.0);
        assert_eq!(e[1], 10.0);
        assert!(e.iter().any(|&x| (x - TRAP_BOUNDARY_NS).abs() < 1e-6));
        assert!((e.last().unwrap() - 1e9).abs() < 1e-3);
        let h = OpHistogram::of(&[5.0, 1200.0, 1300.0, 10_000.0, 2e9]);
        assert_eq!(h.low_ns.len(), h.ops.len());
        assert_eq!(h.low_ns[0], 0.0);
        assert_eq!(h.ops.iter().sum::<u64>(), 5);
        assert_eq!(*h.ops.last().unwrap(), 1);
        let at = |ns: f64| {
            h.low_ns
                .iter()
                .position(|&l| (l - ns).abs() < 1e-6)
                .unwrap()
        };
        assert_eq!(h.ops[at(10_000.0)], 1, "10 us starts its bucket");
        assert_eq!(h.ops[at(1000.0)], 2);
        assert_eq!(OpHistogram::of(&[]).ops, vec![0]);
    }

    #[test]
    fn mechanism_words_are_snake_case() {
        for m in [BusLock, TrappedByKernel, TrappedByHost, Fatal] {
            let json = serde_json::to_string(&m).unwrap();
            assert_eq!(json, format!("\"{}\"", m.as_str()));
            assert_eq!(SplitLockMechanism::from_word(m.as_str()), Some(m));
        }
        for s in [TrapShape::Sleep, TrapShape::Stall, TrapShape::ShortTraps] {
            assert_eq!(
                serde_json::to_string(&s).unwrap(),
                format!("\"{}\"", s.as_str())
            );
            assert_eq!(TrapShape::from_word(s.as_str()), Some(s));
        }
    }
}
