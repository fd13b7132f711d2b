//! The PAUSE probe's result: per-CPU PAUSE samples, the core clock of each CPU, the long
//! spins of the sustained cost and the pause-loop-exit evidence (raw), and the headline
//! figures of the CPU with the fastest PAUSE (figures).

use crate::names::probe;
use crate::schema::figures::ProbeRaw;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

crate::figures! {
    /// What the PAUSE probe reports, from the CPU with the fastest PAUSE (a VM's vCPUs differ
    /// when a host core's other thread is busy; the others keep their samples and bar).
    pub struct PauseFigures for probe::PAUSE {
        /// ns per PAUSE on the fastest CPU (median of its samples, with their interval).
        pause_ns / PAUSE_NS,
        /// Core cycles per PAUSE on the fastest CPU (its ns times its core clock).
        pause_cycles / PAUSE_CYCLES,
        /// Clock ticks per PAUSE on the fastest CPU (TSC ticks where the clock is the TSC).
        pause_tsc_ticks / PAUSE_TSC_TICKS,
        /// Core clock, GHz: one estimate per CPU, so a range across CPUs, not an interval.
        core_clock_ghz / CORE_CLOCK_GHZ,
        /// ns per PAUSE over a long spin (2^19 PAUSEs), pause-loop exits and host noise
        /// included: what a lock that spins millions of PAUSEs pays.
        pause_sustained_ns / PAUSE_SUSTAINED_NS,
    }
}

/// How the PAUSE probe ran (`params`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PauseParams {
    /// CPUs measured, in the order measured.
    pub cpus: Vec<usize>,
    /// Timed samples per CPU.
    pub repetitions: usize,
    /// PAUSEs per timed sample.
    pub pauses_per_sample: u64,
    /// Runs of PAUSEs of the pause-loop-exit test, per mode (back to back, spaced).
    pub ple_runs: usize,
    /// PAUSEs in one long spin of the sustained cost (absent in files older than that figure).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sustained_pauses_per_run: Option<u64>,
    /// Length of each pause-loop-exit run, ms.
    pub ple_run_ms: f64,
    /// The CPU the pause-loop-exit runs and long spins ran on.
    pub ple_cpu: usize,
    /// The CPU whose PAUSE gives the headline figures: the fastest (absent in older files).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub headline_cpu: Option<usize>,
}

/// What took effect in the PAUSE probe (`effects`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PauseEffects {
    /// CPUs the threads were pinned to.
    pub pinned_cpus: Vec<usize>,
    /// Core clock of each CPU measured, GHz, estimated on it just before its PAUSEs.
    pub core_clock_ghz_by_cpu: BTreeMap<usize, f64>,
    /// Whether pause-loop exits were seen: `seen`, `not seen` or `inconclusive`.
    pub pause_loop_exits: String,
    /// The evidence behind `pause_loop_exits` (the stalls of each mode's runs).
    pub pause_loop_exit_evidence: PleEvidence,
    /// ns per tick of the clock the samples were timed with (files older than this field
    /// keep their saved figures: the tick figure needs it).
    pub clock_ns_per_tick: f64,
}

/// A mode of the pause-loop-exit runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PleMode {
    /// PAUSEs back to back (a spin loop, which pause-loop exiting watches).
    BackToBack,
    /// PAUSEs spaced by ALU work (the control).
    Spaced,
}

impl PleMode {
    fn key(self) -> &'static str {
        match self {
            PleMode::BackToBack => "back_to_back",
            PleMode::Spaced => "spaced",
        }
    }
}

/// The PAUSE probe's samples (`samples`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PauseSamples {
    /// ns per PAUSE of each long spin on the pause-loop-exit CPU (files older than this
    /// field keep their saved figures).
    pub pause_sustained_ns: Vec<f64>,
    /// The samples keyed by place, read and written through the accessors: ns per PAUSE of
    /// each sample per CPU (`pause_ns.cpuN`), and where each pause-loop-exit run stalled, in
    /// PAUSEs from its start (`ple_{back_to_back,spaced}_runI_stall_at_pauses`).
    #[serde(flatten)]
    pub by_key: BTreeMap<String, Vec<f64>>,
}

const PAUSE_NS_CPU: &str = "pause_ns.cpu";

impl PauseSamples {
    /// ns per PAUSE of each sample on `cpu`.
    pub fn pause_ns(&self, cpu: usize) -> Option<&[f64]> {
        self.by_key
            .get(&format!("{PAUSE_NS_CPU}{cpu}"))
            .map(Vec::as_slice)
    }

    /// Sets the samples of `cpu`.
    pub fn set_pause_ns(&mut self, cpu: usize, ns: Vec<f64>) {
        self.by_key.insert(format!("{PAUSE_NS_CPU}{cpu}"), ns);
    }

    /// Sets where run `run` of `mode` stalled, in PAUSEs from its start.
    pub fn set_stalls(&mut self, mode: PleMode, run: usize, at_pauses: Vec<f64>) {
        self.by_key.insert(
            format!("ple_{}_run{run}_stall_at_pauses", mode.key()),
            at_pauses,
        );
    }
}

/// The PAUSE probe's raw record.
pub type PauseRaw = ProbeRaw<PauseParams, PauseEffects, PauseSamples>;

/// The CPU among `cpus` whose PAUSE samples have the lowest median (the first of equals).
pub fn fastest_cpu(cpus: &[usize], samples: &PauseSamples) -> Option<usize> {
    let median = |cpu: usize| {
        samples
            .pause_ns(cpu)
            .and_then(crate::stats::median)
            .unwrap_or(f64::INFINITY)
    };
    cpus.iter()
        .copied()
        .filter(|&c| samples.pause_ns(c).is_some())
        .min_by(|&a, &b| median(a).total_cmp(&median(b)))
}

/// A gap between stalls that repeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RecurringGap {
    /// The gap, in PAUSEs (the median of the matching gaps).
    pub gap_pauses: u64,
    /// The gap in time, in us, at the mode's median chunk time.
    pub gap_us: f64,
    /// How many gaps matched it.
    pub repeats: usize,
    /// How many matches chance predicts from the density of gaps around it.
    pub expected_by_chance: f64,
}

/// Stalls over one mode's runs (back to back or spaced).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StallSummary {
    /// Runs.
    pub runs: usize,
    /// Chunks timed per run.
    pub chunks_per_run: usize,
    /// PAUSEs per chunk.
    pub chunk_pauses: u64,
    /// Median chunk time, in ns.
    pub median_chunk_ns: f64,
    /// Stalls over all runs (the first chunk of each run, which includes waking up, excluded).
    pub stalls: usize,
    /// Stalls per second of run time.
    pub stalls_per_s: f64,
    /// Median time a stall added over a normal chunk, in ns.
    pub median_stall_extra_ns: f64,
    /// Mean ns per PAUSE over the whole runs, stalls included: what a long spin pays.
    pub sustained_ns_per_pause: f64,
    /// Gaps between stalls that recur beyond chance.
    pub recurring_gaps: Vec<RecurringGap>,
}

/// Whether pause-loop exits were seen, and the evidence.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PleEvidence {
    /// `seen`, `not seen` or `inconclusive`.
    pub verdict: String,
    /// The sentence a reader sees.
    pub explanation: String,
    /// PAUSEs back to back.
    pub back_to_back: StallSummary,
    /// PAUSEs spaced by ALU work (the control).
    pub spaced: StallSummary,
}
