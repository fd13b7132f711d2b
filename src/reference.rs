//! Reference figures from other machines and from the real cases behind cpudoctor, each
//! written once with its unit (in the name) and its source. Hazards judge against them and
//! diagnose's findings quote them, so a verdict and a finding never disagree on what "the
//! Haswell PAUSE" was. A hazard's own thresholds live with the hazard, next to the reasoning
//! that places them; figures quoted by more than one part of the tool live here.

/// PAUSE on Haswell/Broadwell, the cost fixed spin counts of the 2010s were tuned for: ~10
/// core cycles (Agner Fog, "Instruction tables", Haswell and Broadwell).
pub const PAUSE_HASWELL_CYCLES: f64 = 10.0;
/// The same in time: 4 ns, measured on a Xeon E5-1620 v3 in the Skylake PAUSE case.
pub const PAUSE_HASWELL_NS: f64 = 4.0;
/// PAUSE on Skylake-SP: ~140 core cycles (Intel 64 and IA-32 Architectures Optimization
/// Reference Manual, "Pause Latency in Skylake Microarchitecture").
pub const PAUSE_SKYLAKE_SP_CYCLES: f64 = 140.0;
/// The same in time: 43 ns, measured on a Xeon Gold 6126 in the Skylake PAUSE case.
pub const PAUSE_SKYLAKE_SP_NS: f64 = 43.0;
/// Throughput the Netflix JVM case gained from its second fix, no longer writing the shared
/// secondary-super cache at all (true sharing): 3.5x (Netflix Technology Blog, "Seeing through
/// hardware counters: a journey to threefold performance increase", 2022).
pub const NETFLIX_TRUE_SHARING_FIX_SPEEDUP: f64 = 3.5;
/// How much slower the Netflix JVM case's slow nodes ran per instruction: 3x the CPI of the
/// fast ones (Netflix Technology Blog, "Seeing through hardware counters: a journey to
/// threefold performance increase", 2022).
pub const NETFLIX_SLOW_NODE_CPI_RATIO: f64 = 3.0;
/// The same nodes' memory-ordering machine clears against the fast ones': 4x (same source).
pub const NETFLIX_SLOW_NODE_MACHINE_CLEARS_RATIO: f64 = 4.0;
/// Second-level TLB entries on Skylake: 1536 (Intel 64 and IA-32 Architectures Optimization
/// Reference Manual, "Skylake microarchitecture", shared STLB).
pub const STLB_ENTRIES_SKYLAKE: u64 = 1536;
/// Second-level data TLB entries on Zen 4: 3072 (AMD Software Optimization Guide for AMD
/// Family 19h Processors, L2 DTLB).
pub const STLB_ENTRIES_ZEN4: u64 = 3072;
