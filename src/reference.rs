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

/// Cache-line handoff between SMT siblings on Zen 4 EPYC: ~9 ns one way (chipsandcheese and
/// AnandTech core-to-core latency tests).
pub const ZEN4_C2C_SMT_SIBLING_NS: f64 = 9.0;
/// The same between two cores of one CCX (sharing an L3): ~22 ns (chipsandcheese, AnandTech).
pub const ZEN4_C2C_SAME_CCX_NS: f64 = 22.0;
/// The same between two CCDs of one socket: ~100 ns (chipsandcheese, AnandTech).
pub const ZEN4_C2C_OTHER_CCD_NS: f64 = 100.0;
/// The same between two sockets: ~200 ns (chipsandcheese, AnandTech).
pub const ZEN4_C2C_OTHER_SOCKET_NS: f64 = 200.0;

/// Watchpoint hits per spurious SIGTRAP on the Intel Emerald Rapids KVM guest (2 vCPUs, kernel
/// 6.18.44, 2026-12-02): a debug trap that reached the watched program as if it had no cause,
/// so the kernel sent it SIGTRAP and it died. One in 250,000 to 1.9M hits of a write watchpoint held
/// armed on a thread writing in a loop (4 deaths in 1.03M hits over 8 runs of 3 s, 4 in 1.06M,
/// 1 in 1.85M: `bench/debug_traps.sh`, tests/fixtures/machines/emerald-rapids-kvm); one in
/// ~40,000 when armed and disarmed in turns as `diagnose --watch` does (1 of 25 runs of its
/// watch, ~1,500 hits each). The 2-vCPU Zen 4 KVM guest took 1M hits of the same kind without
/// one. Not a fault of the program: most likely the trap's cause (DR6) is lost on its way
/// through the hypervisor, and the guest kernel takes a cause-less trap for an `int1`.
pub const SPURIOUS_DEBUG_TRAP_HITS_INTEL_KVM: f64 = 40_000.0;

/// Memory references of a native 4-level page walk, at most (Bhargava et al., "Accelerating
/// two-dimensional page walks for virtualized systems", ASPLOS 2008).
pub const NATIVE_PAGE_WALK_REFERENCES: u32 = 4;
/// Memory references of a two-dimensional walk under nested paging (EPT/NPT), at most: guest
/// and host tables (Bhargava et al., ASPLOS 2008).
pub const NESTED_PAGE_WALK_REFERENCES: u32 = 24;

/// Streaming-read gain of huge pages over 4 KiB pages on a Pentium 4 Northwood, whose
/// hardware prefetches stop at a TLB miss: 3.2 to 3.8 GB/s, +19% (the P4 large-pages case).
pub const P4_NORTHWOOD_HUGE_PAGE_READ_GAIN_PCT: f64 = 19.0;
/// The same on a Prescott, whose prefetches do not stop there: 4.2 GB/s either way, 0% (the
/// P4 large-pages case).
pub const P4_PRESCOTT_HUGE_PAGE_READ_GAIN_PCT: f64 = 0.0;

/// How often the Netflix JVM case's two fields (`_secondary_super_cache`, written on subtype
/// checks from every thread, and `_secondary_supers`, read by all) shared a cache line: 7
/// times in 8 (Netflix Technology Blog, "Seeing through hardware counters", 2022).
pub const NETFLIX_SHARED_LINE_EIGHTHS: u32 = 7;
/// The CPI of the Netflix JVM case's slow nodes against the fast ones: 3x (same source).
pub const NETFLIX_SLOW_NODE_CPI_RATIO: f64 = 3.0;
/// The vCPUs of the bigger instance the Netflix JVM case moved to: 48 (same source).
pub const NETFLIX_BIG_INSTANCE_VCPUS: u32 = 48;
/// The throughput that bigger instance was expected to give: 3x (three times the vCPUs).
pub const NETFLIX_BIG_INSTANCE_EXPECTED_SPEEDUP: f64 = 3.0;
/// The throughput it gave instead, before the fix: 25% more (same source).
pub const NETFLIX_BIG_INSTANCE_GAIN_PCT: f64 = 25.0;

/// A split lock passed core to core on Zen 5: ~500 ns (chipsandcheese, "Investigating Split
/// Locks on x86-64").
pub const SPLIT_LOCK_ZEN5_NS: f64 = 500.0;
/// The same on Arrow Lake and Alder Lake P-cores: ~7 us (same source).
pub const SPLIT_LOCK_ARROW_LAKE_US: f64 = 7.0;
/// How much slower other cores' L2, L3 and DRAM accesses got while one core looped split
/// locks: up to 10x (same source, Zen 2 and Zen 5).
pub const SPLIT_LOCK_NEIGHBOUR_SLOWDOWN_MAX_RATIO: f64 = 10.0;
/// The sleep Linux's split-lock mitigation imposes per trapped split lock: 10 ms
/// (`split_lock_mitigate=1`; Documentation/admin-guide/kernel-parameters.txt).
pub const SPLIT_LOCK_MITIGATE_SLEEP_MS: f64 = 10.0;
/// A bus lock in the Emerald Rapids KVM guest, whose host traps split locks: ~2 us each
/// between traps (the C reference timings, `tests/fixtures/machines/emerald-rapids-kvm/refs.txt`).
pub const EMERALD_RAPIDS_GUEST_BUS_LOCK_US: f64 = 2.0;
/// The shortest trap that host imposes: 100 us (same reference timings).
pub const EMERALD_RAPIDS_HOST_TRAP_MIN_US: f64 = 100.0;
/// The longest usual trap there: 500 us (same reference timings).
pub const EMERALD_RAPIDS_HOST_TRAP_MAX_US: f64 = 500.0;
/// What one thread paid per split lock on the Emerald Rapids KVM guest whose own kernel
/// detects bus locks (#DB, `warn`, `kernel.split_lock_mitigate=1`): ~1 ms (C loop per op:
/// mean 0.87-1.01 ms, p50 221 us, p99 12 ms; `tests/fixtures/machines/emerald-rapids-kvm-trap/refs.txt`).
pub const EMERALD_RAPIDS_KERNEL_TRAP_MS: f64 = 1.0;
/// A game that uses split locks ran at 10 FPS on Linux, whose kernel trapped them, and at
/// 200 FPS on Windows (chipsandcheese, "Investigating Split Locks on x86-64"): what a trapped
/// split lock costs a program that issues them.
pub const SPLIT_LOCK_TRAPPED_GAME_FPS: u32 = 10;
/// The same nodes' memory-ordering machine clears against the fast ones': 4x (same source).
pub const NETFLIX_SLOW_NODE_MACHINE_CLEARS_RATIO: f64 = 4.0;
/// Second-level TLB entries on Skylake: 1536 (Intel 64 and IA-32 Architectures Optimization
/// Reference Manual, "Skylake microarchitecture", shared STLB).
pub const STLB_ENTRIES_SKYLAKE: u64 = 1536;
/// Second-level data TLB entries on Zen 4: 3072 (AMD Software Optimization Guide for AMD
/// Family 19h Processors, L2 DTLB).
pub const STLB_ENTRIES_ZEN4: u64 = 3072;

/// Context switches a second of PostgreSQL 15 under `pgbench -S -c 32` on the 2-vCPU KVM
/// development guest: ~41,000 (`bench/wall_overhead.sh postgres 5 5`, 2026-11-27).
pub const PGBENCH_SWITCHES_PER_S: f64 = 41_000.0;
/// The throughput it lost to `diagnose` sampling per task (one `cpu-clock` event per thread,
/// whose timer the kernel stops and starts at each switch: an exit to the hypervisor each
/// time), wall-clock view on: 20.5% (same run; 18.9% and 20.4% in two runs beside CPU-wide
/// ones).
pub const PGBENCH_PER_TASK_SAMPLING_LOSS: f64 = 0.205;
/// The same, sampling CPU-wide: 12.4% (8.2% to 14.2% over three runs the same morning). Most
/// of it is not the sampling: the wall-clock view's context-switch records (~0.8 us a switch
/// in this guest, CPU-wide or per task alike) and diagnose's own reading of /proc (~3% of the
/// two vCPUs). See docs/diagnose.md.
pub const PGBENCH_CPU_WIDE_SAMPLING_LOSS: f64 = 0.124;
