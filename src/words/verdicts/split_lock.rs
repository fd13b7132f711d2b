//! The split-lock verdict's words: the mechanism the figures show (bus lock, trapped by the
//! kernel or the host, fatal), what a program that issues split locks pays, what its
//! neighbours feel, and the published figures.

use super::with_interval;
use crate::format::{group_thousands, human_ns};
use crate::machine::SplitLockState;
use crate::reference::{
    EMERALD_RAPIDS_GUEST_BUS_LOCK_US, EMERALD_RAPIDS_HOST_TRAP_MAX_US,
    EMERALD_RAPIDS_HOST_TRAP_MIN_US, EMERALD_RAPIDS_KERNEL_TRAP_MS, SPLIT_LOCK_ARROW_LAKE_US,
    SPLIT_LOCK_MITIGATE_SLEEP_MS, SPLIT_LOCK_NEIGHBOUR_SLOWDOWN_MAX_RATIO,
    SPLIT_LOCK_TRAPPED_GAME_FPS, SPLIT_LOCK_ZEN5_NS,
};
use crate::schema::Metric;
use crate::schema::probes::split_lock::SplitLockSeen;
use crate::schema::split_lock::{SplitLockMechanism, TRAP_BOUNDARY_NS, TrapShape};
use std::sync::LazyLock;

/// What a neighbour felt while one core looped split locks, from its DRAM latency and
/// streaming bandwidth under them over alone.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Neighbour {
    /// No neighbour figures.
    Unknown,
    /// Within the harm bar, latency and bandwidth both.
    Unharmed {
        /// DRAM latency under split locks over alone.
        latency_ratio: f64,
        /// Streaming bandwidth under split locks over alone.
        bandwidth_ratio: Option<f64>,
    },
    /// Slowed measurably.
    Slowed {
        /// DRAM latency under split locks over alone.
        latency_ratio: f64,
        /// Streaming bandwidth under split locks over alone.
        bandwidth_ratio: Option<f64>,
    },
}

impl Neighbour {
    /// The neighbour's DRAM latency ratio, when measured.
    pub fn latency_ratio(self) -> Option<f64> {
        match self {
            Neighbour::Unknown => None,
            Neighbour::Unharmed { latency_ratio, .. } | Neighbour::Slowed { latency_ratio, .. } => {
                Some(latency_ratio)
            }
        }
    }
}

/// One split lock passed core to core against an aligned atomic.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CoreToCore {
    /// The split lock.
    pub split_ns: f64,
    /// The aligned atomic.
    pub aligned_ns: f64,
}

/// What the split-lock verdict rests on.
pub struct Facts<'a> {
    /// What the kernel exposes about split locks (its mode as it takes effect, the
    /// detection, the mitigation sysctl).
    pub kernel: &'a SplitLockState,
    /// Whether the mechanism was measured (the probe recorded it, or a figure shows it),
    /// rather than inferred from the kernel's mode alone.
    pub measured: bool,
    /// What the figures show split locks to be here.
    pub mechanism: SplitLockMechanism,
    /// How trapped split locks spend their time, when timed one by one.
    pub shape: Option<TrapShape>,
    /// A split lock core to core (or, in older files, one thread's trapped ones), with its
    /// interval.
    pub split_metric: Option<&'a Metric>,
    /// The split lock over an aligned one, core to core.
    pub aligned_ratio: Option<f64>,
    /// One thread's split locks timed one by one: the mean, with its interval.
    pub op_metric: Option<&'a Metric>,
    /// What one thread pays per split lock, traps included.
    pub cost_ns: Option<f64>,
    /// The core-to-core figures beside an aligned atomic, when measured core to core.
    pub core_to_core: Option<CoreToCore>,
    /// The per-op p50 and p90.
    pub percentiles_ns: Option<(f64, f64)>,
    /// What a neighbour felt.
    pub neighbour: Neighbour,
    /// Split locks a second the looping core managed while the neighbour was timed.
    pub aggressor_split_locks_per_s: Option<f64>,
    /// The neighbour was slowed past the hazard bar: every tenant pays.
    pub every_tenant_pays: bool,
}

impl Facts<'_> {
    fn split_ns(&self) -> Option<f64> {
        self.split_metric.map(|m| m.value)
    }

    /// The measurement every sentence about the kernel follows, when there was one.
    fn seen(&self) -> Option<SplitLockSeen> {
        self.measured.then_some(SplitLockSeen {
            mechanism: self.mechanism,
            shape: self.shape,
            cost_ns: self.cost_ns,
        })
    }
}

/// "N a second", rounded to two significant digits: a rate read off a mean is no more exact.
fn per_second(ns: f64) -> String {
    let rate = 1e9 / ns;
    let digits = rate.log10().floor() as i32 - 1;
    let scale = 10f64.powi(digits.max(0));
    format!(
        "{} a second",
        group_thousands(((rate / scale).round() * scale) as u64)
    )
}

/// The figure: what one split lock costs and how, and the neighbour's DRAM latency.
pub fn figure(f: &Facts<'_>) -> String {
    let mode = f.kernel.effective;
    let each = |c: f64| {
        with_interval(
            format!("{} each", human_ns(c)),
            f.op_metric.or(f.split_metric),
        )
    };
    let mut figure = match (f.mechanism, f.cost_ns) {
        (SplitLockMechanism::Fatal, _) | (_, None) => format!("kernel: {mode}"),
        (SplitLockMechanism::BusLock, Some(c)) => match (f.split_ns(), f.aligned_ratio) {
            (Some(s), Some(r)) => format!(
                "{} = {r:.1}x aligned",
                with_interval(human_ns(s), f.split_metric)
            ),
            (Some(s), None) => with_interval(human_ns(s), f.split_metric),
            (None, _) => with_interval(human_ns(c), f.op_metric),
        },
        (SplitLockMechanism::TrappedByHost, Some(c)) => {
            format!("trapped by the host, {}", each(c))
        }
        (SplitLockMechanism::TrappedByKernel, Some(c)) => {
            format!("{} (kernel {mode})", each(c))
        }
    };
    if let Some(l) = f.neighbour.latency_ratio() {
        figure.push_str(&format!("; neighbour DRAM latency {l:.1}x"));
    }
    figure
}

/// The one-line summary.
pub fn summary(f: &Facts<'_>) -> String {
    let neighbours_words = match f.neighbour {
        Neighbour::Unknown => "",
        Neighbour::Unharmed { .. } => "; neighbours unharmed",
        Neighbour::Slowed { .. } => "; it slows the other cores",
    };
    match (f.mechanism, f.cost_ns) {
        (SplitLockMechanism::Fatal, _) => {
            "a split lock kills the process (SIGBUS, split_lock_detect=fatal)".to_string()
        }
        (SplitLockMechanism::BusLock, Some(c)) => format!(
            "an atomic across two cache lines costs {}{}",
            human_ns(f.split_ns().unwrap_or(c)),
            match f.neighbour {
                Neighbour::Slowed { .. } => " and slows the other cores",
                Neighbour::Unharmed { .. } => "; other cores unharmed",
                Neighbour::Unknown => "",
            }
        ),
        (SplitLockMechanism::TrappedByHost, Some(c)) => format!(
            "the host traps split locks: {} each, {} at most{neighbours_words}",
            human_ns(c),
            per_second(c)
        ),
        (SplitLockMechanism::TrappedByKernel, Some(c)) => format!(
            "the kernel traps split locks: {} each{neighbours_words}",
            human_ns(c)
        ),
        (_, None) => format!(
            "kernel {}: what a split lock costs here was not measured",
            f.kernel.effective
        ),
    }
}

/// The published figures and the Emerald Rapids guest's.
pub fn reference() -> String {
    format!(
        "Zen 5 ~{SPLIT_LOCK_ZEN5_NS} ns, Arrow Lake/Alder Lake P ~{SPLIT_LOCK_ARROW_LAKE_US} us \
         core to core; up to {SPLIT_LOCK_NEIGHBOUR_SLOWDOWN_MAX_RATIO}x slower L2/L3/DRAM on \
         other cores (chipsandcheese); Linux: {SPLIT_LOCK_MITIGATE_SLEEP_MS} ms sleep per \
         trapped split lock (#AC, split_lock_mitigate=1), ~{EMERALD_RAPIDS_KERNEL_TRAP_MS} ms \
         per trap measured with #DB bus-lock detection (Emerald Rapids KVM); a host that \
         traps a guest's: \
         ~{EMERALD_RAPIDS_GUEST_BUS_LOCK_US} us bus locks between \
         {EMERALD_RAPIDS_HOST_TRAP_MIN_US}-{EMERALD_RAPIDS_HOST_TRAP_MAX_US} us traps \
         (Emerald Rapids KVM)"
    )
}

/// What a split lock is, what it costs here by mechanism, what the neighbours feel, the
/// kernel's mode and the fix.
pub fn explanation(f: &Facts<'_>) -> String {
    let mut explanation = String::from(
        "An atomic on a value that straddles two cache lines (a field of a packed struct, \
         an unaligned cast into a byte buffer) cannot lock one line and takes a bus lock.",
    );
    explanation.push_str(&mechanism_words(f));
    explanation.push_str(&neighbour_words(f));
    explanation.push_str(&format!(
        " Kernel: {}.",
        crate::words::machine::split_lock_summary(f.kernel, f.seen().as_ref())
    ));
    if !f.kernel.effective.kernel_acts() && f.mechanism == SplitLockMechanism::BusLock {
        explanation.push_str(&format!(
            " Where a kernel traps them, the program pays the kernel's penalty instead: \
             ~{EMERALD_RAPIDS_KERNEL_TRAP_MS} ms each on the Emerald Rapids guest whose \
             kernel detects bus locks (#DB, warn), a {SPLIT_LOCK_MITIGATE_SLEEP_MS} ms sleep \
             per trap with split_lock_mitigate=1 on #AC detection, SIGBUS with \
             split_lock_detect=fatal."
        ));
    }
    explanation.push_str(
        " Fix: align atomics to their size (alignas, #[repr(align)]) and never update \
         fields of packed structs atomically.",
    );
    explanation
}

/// `Here one costs 1.2 us core to core, 10.4x an aligned one (115.0 ns)`, its two figures.
fn core_to_core_words(c: &CoreToCore) -> (String, String) {
    (
        human_ns(c.split_ns),
        format!(
            "{:.1}x an aligned one ({})",
            c.split_ns / c.aligned_ns,
            human_ns(c.aligned_ns)
        ),
    )
}

/// What a program that issues split locks pays, by mechanism.
fn mechanism_words(f: &Facts<'_>) -> String {
    let core_to_core = f.core_to_core.as_ref().map(core_to_core_words);
    let mut text = String::new();
    match f.mechanism {
        SplitLockMechanism::BusLock => {
            if let Some((s, vs)) = &core_to_core {
                text.push_str(&format!(" Here one costs {s} core to core, {vs}."));
            }
            if let Some(c) = f.op_metric.map(|m| m.value) {
                text.push_str(&format!(
                    " One thread issuing them back to back pays {} each, {} at most.",
                    human_ns(c),
                    per_second(c)
                ));
            }
        }
        SplitLockMechanism::TrappedByHost => {
            text.push_str(&host_trap_words(f));
            if let Some((s, vs)) = &core_to_core {
                text.push_str(&format!(" Passed between two cores, one takes {s}, {vs}."));
            }
        }
        SplitLockMechanism::TrappedByKernel => {
            if let Some(c) = f.cost_ns {
                text.push_str(&format!(
                    " Here the kernel traps them: a program pays {} per split lock \
                     (measured in a child process), {} at most, the kernel's mitigation \
                     rather than the hardware's cost.",
                    human_ns(c),
                    per_second(c)
                ));
            }
            match f.shape {
                Some(TrapShape::Sleep) => text.push_str(&format!(
                    " Most of that time is the mitigation's sleeps near \
                     {SPLIT_LOCK_MITIGATE_SLEEP_MS} ms per trap."
                )),
                Some(TrapShape::Stall) => text.push_str(STALL_WORDS),
                _ => {}
            }
        }
        SplitLockMechanism::Fatal => text.push_str(
            " Here a split lock kills the process with SIGBUS (split_lock_detect=fatal).",
        ),
    }
    text
}

/// Stalls of several ms in which the locking thread never slept.
const STALL_WORDS: &str = " Most of that time is stalls of several ms in which the locking \
     thread did not sleep (no voluntary context switch): it was held on its CPU by the trap, \
     not put to sleep by a mitigation.";

/// What a program pays where the host traps its split locks, and why the guest cannot see it.
fn host_trap_words(f: &Facts<'_>) -> String {
    let mut text = String::new();
    if let Some(c) = f.cost_ns {
        text.push_str(&format!(
            " Here the host traps them: a program pays {} per split lock on \
             average, so it can issue about {}: latency comparable to a hard-drive \
             seek, the split-lock case's game at {SPLIT_LOCK_TRAPPED_GAME_FPS} FPS.",
            human_ns(c),
            per_second(c)
        ));
    }
    if let Some((p50, p90)) = f.percentiles_ns {
        text.push_str(&format!(
            " Timed one by one, half take {} or less and one in ten {} or more.",
            human_ns(p50),
            human_ns(p90)
        ));
    }
    match f.shape {
        Some(TrapShape::Sleep) => text.push_str(&format!(
            " Most of that time is sleeps near {SPLIT_LOCK_MITIGATE_SLEEP_MS} ms, as Linux's \
             split_lock_mitigate imposes."
        )),
        Some(TrapShape::Stall) => text.push_str(STALL_WORDS),
        Some(TrapShape::ShortTraps) => text.push_str(&format!(
            " The slow ones take {:.0} us to a few ms each: VM exits or a rate \
             limit, not a {SPLIT_LOCK_MITIGATE_SLEEP_MS} ms sleep.",
            TRAP_BOUNDARY_NS / 1e3
        )),
        None => {}
    }
    text.push_str(
        " A guest's kernel never sees split locks (no guest gets the \
         split_lock_detect flag); the host handles them (#AC or a bus-lock VM exit) \
         under a policy the guest cannot see, and these figures are what it does.",
    );
    text
}

/// What the neighbour's memory accesses did beside the looping core; its streaming reads
/// `get` (slowed) or `keep` (unharmed) a share of their bandwidth.
fn neighbour_felt(latency_ratio: f64, bandwidth_ratio: Option<f64>, verb: &str) -> String {
    format!(
        " While one core loops split locks, another core's DRAM accesses take \
         {latency_ratio:.1}x as long{}",
        bandwidth_ratio.map_or(String::new(), |b| format!(
            " and its streaming reads {verb} {} of their bandwidth",
            crate::format::pct(b, 0)
        ))
    )
}

/// What a neighbour felt, and who pays.
fn neighbour_words(f: &Facts<'_>) -> String {
    let mut text = String::new();
    match f.neighbour {
        Neighbour::Unknown => {}
        Neighbour::Slowed {
            latency_ratio,
            bandwidth_ratio,
        } => {
            text.push_str(&neighbour_felt(latency_ratio, bandwidth_ratio, "get"));
            text.push_str(if f.every_tenant_pays {
                ": split locks slow every tenant of the host, not only the program that \
                 issues them."
            } else {
                ": split locks slow the other tenants of the host too."
            });
        }
        Neighbour::Unharmed {
            latency_ratio,
            bandwidth_ratio,
        } => {
            text.push_str(&neighbour_felt(latency_ratio, bandwidth_ratio, "keep"));
            let rate = f
                .aggressor_split_locks_per_s
                .filter(|r| *r > 0.0)
                .map(|r| group_thousands(r.round() as u64));
            let who = match f.mechanism {
                SplitLockMechanism::TrappedByHost => Some("the host"),
                SplitLockMechanism::TrappedByKernel | SplitLockMechanism::Fatal => {
                    Some("the kernel")
                }
                SplitLockMechanism::BusLock => None,
            };
            match (who, rate) {
                // Why, as measured: each trap holds the locker for a long time, so the bus is
                // locked a few hundred times a second instead of a million.
                (Some(who), Some(rate)) => text.push_str(&format!(
                    ": neighbours unharmed, because {who}'s trap holds the looping core to \
                     {rate} split locks a second, so the bus is rarely locked; the program \
                     issuing split locks is punished."
                )),
                (Some(who), None) => text.push_str(&format!(
                    ": neighbours unharmed, {who} traps the locker; the program issuing split \
                     locks is punished."
                )),
                (None, rate) => {
                    if let Some(rate) = rate {
                        text.push_str(&format!(
                            " (the looping core managed {rate} split locks a second)"
                        ));
                    }
                    text.push_str(
                        ": neighbours unharmed, this CPU's bus lock does not reach another \
                         core's memory accesses.",
                    );
                }
            }
        }
    }
    text
}

/// The software patterns the hazard hurts, formatted once from the reference figures.
pub fn hurts() -> &'static [&'static str] {
    static TEXT: LazyLock<[String; 3]> = LazyLock::new(|| {
        [
            "atomics on misaligned or packed fields (packed structs, unaligned casts into \
             buffers)"
                .into(),
            format!(
                "programs whose split locks are trapped, by the kernel (~\
                 {EMERALD_RAPIDS_KERNEL_TRAP_MS} ms each on the Emerald Rapids guest's #DB \
                 detection, a {SPLIT_LOCK_MITIGATE_SLEEP_MS} ms sleep per trap with #AC and \
                 split_lock_mitigate=1, or SIGBUS) or by the host \
                 ({EMERALD_RAPIDS_HOST_TRAP_MIN_US} us and more each)"
            ),
            "every other tenant of the host while split locks run as bus locks (noisy \
             neighbour)"
                .into(),
        ]
    });
    static REFS: LazyLock<[&'static str; 3]> =
        LazyLock::new(|| TEXT.each_ref().map(String::as_str));
    &*REFS
}

/// The hazard's title.
pub const TITLE: &str = "Split locks";
