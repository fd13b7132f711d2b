//! The machine in a few words: its topology, caches and split-lock state, as every view that
//! names a machine (the check screen, diff's machine facts, the HTML report) says them.

use crate::format::human_bytes;
use crate::machine::SplitLockMode;
use crate::machine::topology::Topology;

/// Cores, sockets, NUMA nodes and SMT in one line: `2 cores, 1 socket(s), 1 NUMA node(s), SMT off`.
pub fn topology_line(t: &Topology) -> String {
    format!(
        "{} cores, {} socket(s), {} NUMA node(s), SMT {}",
        t.cores,
        t.packages,
        t.numa_nodes,
        if t.smt { "on" } else { "off" }
    )
}

/// The data and unified caches in one line: `L1 32 KiB x2, L2 1 MiB x2, L3 32 MiB`.
pub fn caches_line(t: &Topology) -> String {
    t.caches
        .iter()
        .filter(|c| c.kind != "Instruction")
        .map(|c| {
            format!(
                "L{} {}{}",
                c.level,
                human_bytes(c.size_bytes),
                if c.instances > 1 {
                    format!(" x{}", c.instances)
                } else {
                    String::new()
                }
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The split-lock state in a few words: `split locks invisible to the kernel`.
pub fn split_lock_words(effective: SplitLockMode) -> String {
    match effective {
        SplitLockMode::NotDetected => "split locks invisible to the kernel".into(),
        SplitLockMode::Off => "split-lock detection off".into(),
        other => format!("split locks trapped ({other})"),
    }
}

/// The PAUSE a diagnosis measured: `PAUSE 24.4 ns = 90 cycles`, or that it was not measured.
pub fn pause_figure(pause: Option<(f64, Option<f64>)>) -> String {
    match pause {
        Some((ns, cycles)) => format!(
            "PAUSE {ns:.1} ns{}",
            cycles
                .map(|c| format!(" = {c:.0} cycles"))
                .unwrap_or_default()
        ),
        None => "PAUSE not measured".into(),
    }
}
