//! Findings about a runtime's lock: what its spin costs at this CPU's PAUSE, the lock-code
//! finding's sentences, and each runtime's own remedy and knobs.

use crate::format::human_ns;
use crate::format::pct;

/// A runtime's spin at this CPU's PAUSE, from the spin model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RuntimeSpin<'a> {
    /// Runtime name (`glibc`).
    pub runtime: &'a str,
    /// The primitive that spins.
    pub primitive: &'a str,
    /// PAUSEs before it yields or sleeps.
    pub pauses: f64,
    /// What it does then.
    pub then: &'a str,
    /// The spin's length, in ns.
    pub spin_ns: f64,
    /// ns per PAUSE measured here.
    pub pause_ns: f64,
    /// Where the policy comes from.
    pub source: &'a str,
}

/// ` glibc's pthread mutex spins up to 100 PAUSEs, then ...: 4.3 us at ...` (a leading space,
/// to follow a sentence); empty without a measured PAUSE or a known policy.
pub fn spin_cost(spin: Option<&RuntimeSpin>) -> String {
    let Some(s) = spin else {
        return String::new();
    };
    format!(
        " {}'s {} spins up to {:.0} PAUSEs, then {}: {} at this CPU's {:.1} ns per PAUSE ({}).",
        s.runtime,
        s.primitive,
        s.pauses,
        s.then,
        human_ns(s.spin_ns),
        s.pause_ns,
        s.source
    )
}

/// `12.0% of all samples in HotSpot's lock code: f 8.0%, g 4.0%`.
pub fn lock_code_share(runtime: &str, share: f64, functions: &[(&str, f64)]) -> String {
    format!(
        "{} of all samples in {runtime}'s lock code: {}",
        pct(share, 1),
        functions
            .iter()
            .map(|(f, s)| format!("{f} {}", pct(*s, 1)))
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// `threads spin in HotSpot's Java monitor (synchronized) waited for by f`.
pub fn lock_spin_title(runtime: &str, lock: &str, waiter: Option<&str>) -> String {
    let waiter = waiter
        .map(|w| format!(" waited for by {w}"))
        .unwrap_or_default();
    format!("threads spin in {runtime}'s {lock}{waiter}")
}

/// What the lock code's share means; `spin_cost` from [`spin_cost`].
pub fn lock_spin_explanation(spin_cost: &str) -> String {
    format!(
        "Threads that find the lock taken spin in the runtime before they sleep; this much \
         spinning means the lock is held long or often relative to the spin.{spin_cost}"
    )
}

/// HotSpot's monitors: what to do.
pub const HOTSPOT_REMEDY: &str = "HotSpot's monitor spin is adaptive and has had no product \
    flag since JDK 10 removed -XX:PreBlockSpin: shorten the synchronized block (move work out \
    of it), split the monitor (one lock per shard of the data), or make the shared state \
    lock-free (java.util.concurrent.atomic, LongAdder for counters).";
/// glibc's pthread mutex: what to do.
pub const GLIBC_REMEDY: &str = "glibc's adaptive mutex spins up to \
    glibc.pthread.mutex_spin_count times (default 100) before it sleeps: where PAUSE is slow \
    lower it (GLIBC_TUNABLES=glibc.pthread.mutex_spin_count=N) or use a plain \
    PTHREAD_MUTEX_NORMAL mutex; shorten the critical section or shard the data.";
/// Go's sync.Mutex: what to do.
pub const GO_REMEDY: &str = "Go's sync.Mutex spins 4 rounds of procyield(30) only while other \
    Ps run: shard the structure (a lock per key or per P), use sync/atomic for counters, and \
    set GOMAXPROCS to the CPUs the process really gets (a container's quota).";
/// .NET's Monitor: what to do.
pub const DOTNET_REMEDY: &str = "Run on .NET Core 3.0+ or .NET Framework 4.8, whose spin is \
    normalized to the measured PAUSE (the Skylake case's fix); shorten the lock or use \
    lock-free state (Interlocked).";
/// Rust std's Mutex: what to do.
pub const RUST_STD_REMEDY: &str = "std's Mutex spins 100 times before its futex wait: shorten \
    the critical section, shard the data behind several Mutexes, or use std::sync::atomic.";
/// parking_lot's Mutex: what to do.
pub const PARKING_LOT_REMEDY: &str = "parking_lot spins a few exponential rounds, yields, then \
    parks: shorten the critical section or shard the data behind several locks.";
/// PostgreSQL's spinlocks: what to do.
pub const POSTGRESQL_REMEDY: &str = "PostgreSQL's spinlocks have no setting (s_lock adapts \
    spins_per_delay by itself): fewer backends should want the same buffer or shared \
    structure at once. Put a connection pooler (PgBouncer, pool_mode=transaction) in front so \
    active connections stay near the PostgreSQL wiki's ((cores * 2) + disks), and spread a \
    hot row (a counter row per client or per shard, summed when read) instead of having every \
    client update one.";
/// InnoDB's lock spin, when no value of its knobs is at hand: what to do.
pub const INNODB_REMEDY: &str = "InnoDB's spin is sized by innodb_spin_wait_delay (PAUSEs \
    between tries) and innodb_sync_spin_loops (rounds before a futex wait): lower \
    innodb_spin_wait_delay (`SET GLOBAL innodb_spin_wait_delay=0`, or 1, 2) under the same load \
    and compare the throughput; and spread the hot row's writes or cap the concurrent writers.";
