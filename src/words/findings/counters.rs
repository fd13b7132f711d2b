//! Findings from hardware counters alone: CPI, memory-ordering machine clears, loads served
//! from another core's modified line, bus locks.

use crate::reference::{NETFLIX_SLOW_NODE_CPI_RATIO, NETFLIX_SLOW_NODE_MACHINE_CLEARS_RATIO};

/// A counter finding's sentences.
#[derive(Debug, Clone, PartialEq)]
pub struct CounterWords {
    /// One line.
    pub title: String,
    /// The count behind it.
    pub evidence: String,
    /// What it costs.
    pub explanation: String,
    /// What to do.
    pub advice: String,
}

/// Cycles per instruction high.
pub fn high_cpi(cpi: f64) -> CounterWords {
    CounterWords {
        title: format!("CPI {cpi:.2}"),
        evidence: format!("{cpi:.2} cycles per instruction"),
        explanation: format!(
            "The core waits more than it executes. The Netflix JVM case's slow nodes ran at \
             {NETFLIX_SLOW_NODE_CPI_RATIO}x the CPI of the fast ones, with \
             {NETFLIX_SLOW_NODE_MACHINE_CLEARS_RATIO}x the machine clears: cache lines bouncing \
             between cores."
        ),
        advice: "Look at the memory-ordering clears and HITM counts below, and at the hot \
                 instructions for shared writes."
            .into(),
    }
}

/// Memory-ordering machine clears: `clears` in all, `per_thousand` per 1000 instructions.
pub fn memory_ordering_clears(clears: f64, per_thousand: f64) -> CounterWords {
    CounterWords {
        title: format!("{per_thousand:.2} memory-ordering machine clears per 1000 instructions"),
        evidence: format!("{clears:.0} clears"),
        explanation: "Another core wrote a line this core had read ahead, and the pipeline was \
                      flushed: the signature of true or false sharing."
            .into(),
        advice: "Find fields written by one thread and read by others on the same 64-byte line; \
                 pad them apart or stop writing shared state (the Netflix JVM case's fix)."
            .into(),
    }
}

/// Loads served from another core's modified line; `line_transfer` from
/// [`super::costs::line_transfer`].
pub fn cross_core_hitm(transfers: f64, per_thousand: f64, line_transfer: &str) -> CounterWords {
    CounterWords {
        title: format!(
            "{per_thousand:.2} loads per 1000 instructions served from another core's modified \
             line"
        ),
        evidence: format!("{transfers:.0} cross-core transfers"),
        explanation: format!("Each costs {line_transfer} instead of an L1 hit."),
        advice: "Keep data written by one thread on lines no other thread reads in a hot path."
            .into(),
    }
}

/// Bus locks counted.
pub fn bus_locks(n: f64) -> CounterWords {
    CounterWords {
        title: format!("{n:.0} bus locks"),
        evidence: format!("{n:.0} locked operations took a bus lock"),
        explanation: "Split or uncacheable locked operations lock the bus and slow every core."
            .into(),
        advice: "Find the misaligned atomic (the locked hot sites above) and align it.".into(),
    }
}
