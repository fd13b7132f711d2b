//! The slow-PAUSE verdict's words: how long the spin loops of common runtimes last here, and
//! the Haswell and Skylake-SP PAUSE they were tuned on.

use super::with_interval;
use crate::format::human_ns;
use crate::reference::{
    PAUSE_HASWELL_CYCLES, PAUSE_HASWELL_NS, PAUSE_SKYLAKE_SP_CYCLES, PAUSE_SKYLAKE_SP_NS,
};
use crate::schema::{Level, Metric};

/// What the slow-PAUSE verdict rests on.
pub struct Facts<'a> {
    /// The level judged.
    pub level: Level,
    /// One PAUSE, short run.
    pub pause_ns: f64,
    /// Its metric, for the interval when cycles are unknown.
    pub pause_ns_metric: &'a Metric,
    /// One PAUSE in core cycles, with its metric, when the clock is known.
    pub pause_cycles: Option<(f64, &'a Metric)>,
    /// Logical CPUs, which .NET's legacy spin scales with.
    pub cores: u64,
    /// How long a glibc adaptive mutex, Go's sync.Mutex and Rust's std Mutex spin before
    /// blocking here (`None` where the spin model lacks the runtime).
    pub glibc_spin_ns: Option<f64>,
    /// Go's sync.Mutex.
    pub go_spin_ns: Option<f64>,
    /// Rust's std Mutex.
    pub rust_spin_ns: Option<f64>,
    /// .NET's legacy lock: its whole spin, and its last round.
    pub dotnet_total_ns: f64,
    /// The last round, which can keep spinning after the lock is freed.
    pub dotnet_last_round_ns: f64,
    /// A long run's PAUSE when clearly costlier than a short run's (pause-loop exits).
    pub sustained_ns: Option<f64>,
    /// The slowest and fastest CPU's core clock, GHz, when they differ enough that PAUSE in
    /// ns moves with the vCPU the host gives.
    pub vcpu_clocks_ghz: Option<(f64, f64)>,
}

impl Facts<'_> {
    /// PAUSE here against the Haswell-era one.
    fn times_haswell(&self) -> f64 {
        self.pause_ns / PAUSE_HASWELL_NS
    }
}

/// The figure: time and cycles, with the interval of the one judged.
pub fn figure(f: &Facts<'_>) -> String {
    let ns = f.pause_ns;
    let figure = match f.pause_cycles {
        Some((c, metric)) => with_interval(format!("{ns:.1} ns = {c:.0} cycles"), Some(metric)),
        None => with_interval(format!("{ns:.1} ns"), Some(f.pause_ns_metric)),
    };
    match f.vcpu_clocks_ghz {
        Some((lo, hi)) => format!("{figure}; vCPU clocks {lo:.2}-{hi:.2} GHz"),
        None => figure,
    }
}

/// The one-line summary.
pub fn summary(f: &Facts<'_>) -> String {
    match f.level {
        Level::Ok => "spin loops that count PAUSEs spin as long as they were tuned to".into(),
        _ => format!(
            "spin counts last {:.1}x Haswell's; .NET's legacy lock spins {}",
            f.times_haswell(),
            human_ns(f.dotnet_total_ns)
        ),
    }
}

/// The Haswell and Skylake-SP PAUSE.
pub fn reference() -> String {
    format!(
        "~{PAUSE_HASWELL_CYCLES} cycles Haswell/Broadwell ({PAUSE_HASWELL_NS} ns); \
         ~{PAUSE_SKYLAKE_SP_CYCLES} cycles Skylake-SP ({PAUSE_SKYLAKE_SP_NS} ns)"
    )
}

/// What the runtimes' spins last here.
pub fn explanation(f: &Facts<'_>) -> String {
    let lead = match f.level {
        Level::Hazard => "PAUSE is in Skylake-SP territory: spin loops that count PAUSEs spin \
                          an order of magnitude longer than they were tuned for."
            .to_string(),
        Level::Notice => format!(
            "PAUSE is several times the ~{PAUSE_HASWELL_CYCLES} cycles spin counts were tuned for."
        ),
        Level::Ok => "PAUSE is short, as spin counts assume.".to_string(),
    };
    let sustained_note = f.sustained_ns.map_or(String::new(), |s| {
        format!(
            " Long spins pay more: {s:.1} ns per PAUSE over a long run here (the \
             hypervisor's pause-loop exits), which the .NET figures use."
        )
    });
    let vcpu_note = f.vcpu_clocks_ghz.map_or(String::new(), |(lo, hi)| {
        format!(
            " The vCPUs ran at {lo:.2} to {hi:.2} GHz in this run (each one's core clock, \
             estimated beside its PAUSE): the host runs them at different speeds or shares \
             their cores, so PAUSE in ns moves with the vCPU and the run here; the figure is \
             the fastest CPU's, and its cycles are the steadier reading."
        )
    });
    let spin = |ns: Option<f64>| ns.map(human_ns).unwrap_or_default();
    format!(
        "{lead} Here, before blocking, a glibc adaptive mutex spins {}, Go's sync.Mutex {}, \
         Rust's std Mutex {}; .NET's legacy lock spins {} on {} cores and can keep \
         spinning {} after the lock is freed ({:.1}x the {PAUSE_HASWELL_NS} ns Haswell-era PAUSE).{sustained_note}{vcpu_note} \
         Lock handoffs and producer/consumer queues pay this; see `cpudoctor spin`.",
        spin(f.glibc_spin_ns),
        spin(f.go_spin_ns),
        spin(f.rust_spin_ns),
        human_ns(f.dotnet_total_ns),
        f.cores,
        human_ns(f.dotnet_last_round_ns),
        f.times_haswell(),
    )
}

/// The software patterns the hazard hurts.
pub const HURTS: &[&str] = &[
    "spin-waits that count PAUSEs (spin locks, adaptive mutexes, runtime monitors)",
    "lock handoffs between threads (producer/consumer queues)",
];

/// The hazard's title.
pub const TITLE: &str = "PAUSE latency";
