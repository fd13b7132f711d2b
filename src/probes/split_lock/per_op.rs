//! Split locks timed one by one: the clock read around each `lock add` on the split value,
//! so a run shows whether every op costs the same bus lock or some are trapped (a host's VM
//! exit, the kernel's 10 ms sleep). A mean alone cannot tell ~2 us bus locks between
//! 100-500 us traps (the Emerald Rapids guest) from a uniformly slow bus lock.
//!
//! A block stops at its op count or its time budget, whichever comes first, so a trapping
//! machine costs a few ms per block instead of thousands of traps. [`time_split_locks`] is
//! async-signal-safe: the locker child runs it where the kernel traps.

// Elsewhere than x86-64 the probe skips before measuring (`arch::require_x86_64`) and the
// kernels it times do not exist, so its measuring half is compiled but never called there.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code, unused_imports))]

use crate::measure::Clock;
use crate::schema::split_lock::{OpCensus, OpHistogram, PERCENTILES};

/// Times split locks on `target` one by one into `ticks` (clock ticks per op) until `ticks`
/// is full or `budget_ticks` have passed since the first; returns how many were timed (at
/// least one) and the ticks from the first op's start to the last one's end. No allocation,
/// no lock, no panic: a forked child may call it.
///
/// # Safety
/// As for `arch::lock_add_loop`: `target` valid for 8 bytes, touched only by locked
/// instructions meanwhile.
#[cfg(target_arch = "x86_64")]
pub unsafe fn time_split_locks(
    clock: &Clock,
    target: *mut u8,
    ticks: &mut [u64],
    budget_ticks: u64,
) -> (usize, u64) {
    let first = clock.start();
    let mut last = first;
    for (i, slot) in ticks.iter_mut().enumerate() {
        let t0 = clock.start();
        // SAFETY: forwarded from the caller.
        unsafe { crate::arch::lock_add_loop(target, 1) };
        last = clock.end();
        *slot = last.wrapping_sub(t0);
        if last.wrapping_sub(first) >= budget_ticks {
            return (i + 1, last.wrapping_sub(first));
        }
    }
    (ticks.len(), last.wrapping_sub(first))
}

/// Voluntary and involuntary context switches so far of the calling thread (`who` =
/// `RUSAGE_THREAD`) or process (`RUSAGE_SELF`, in the single-threaded child). A plain system
/// call: async-signal-safe in practice (glibc's wrapper takes no lock).
pub fn context_switches(who: libc::c_int) -> (u64, u64) {
    // SAFETY: writes only `u`.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        if libc::getrusage(who, &mut u) != 0 {
            return (0, 0);
        }
        (u.ru_nvcsw as u64, u.ru_nivcsw as u64)
    }
}

/// One timed block.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Block {
    /// ns per op, in order.
    pub per_op_ns: Vec<f64>,
    /// Voluntary context switches meanwhile.
    pub voluntary_switches: u64,
    /// Involuntary context switches meanwhile.
    pub involuntary_switches: u64,
    /// ns from the first op's start to the last one's end (0 where not recorded). More than
    /// the ops' sum where a trap's cost lands between the clock reads: on the Emerald Rapids
    /// guest whose host traps split locks, ops timed one by one summed to 45-52 us an op
    /// while the block's wall (and a plain loop of the same `lock add`) took 130-180 us.
    pub elapsed_ns: f64,
}

impl Block {
    /// The block's ops without those its preemptions explain: each involuntary context
    /// switch took the thread off its CPU for one op, and the slowest ops go first. A busy
    /// machine's scheduler is no part of what a split lock costs (the Zen 5 guest under a
    /// build: 28 ops of 3-8 ms among 120,000 of ~1.2 us doubled the mean), while a trap is:
    /// the host's is no context switch at all, and the kernel's sleep a voluntary one.
    pub fn kept_ns(&self) -> Vec<f64> {
        let mut v = self.per_op_ns.clone();
        let drop = (self.involuntary_switches as usize).min(v.len().saturating_sub(1));
        if drop > 0 {
            v.sort_by(|a, b| b.total_cmp(a));
            v.drain(..drop);
        }
        v
    }

    /// The block's wall time less the ops its preemptions explain, and the ops kept
    /// ([`Block::kept_ns`]): what a thread locking in a loop pays, traps included wherever
    /// their cost lands. The wall is the ops' sum where no elapsed time was recorded.
    fn kept_wall_ns(&self) -> (f64, usize) {
        let kept = self.kept_ns();
        let all: f64 = self.per_op_ns.iter().sum();
        let dropped = all - kept.iter().sum::<f64>();
        (self.elapsed_ns.max(all) - dropped, kept.len())
    }

    /// Mean ns per op of the block, over its wall time, preemptions discounted
    /// ([`Block::kept_wall_ns`]).
    pub fn mean_ns(&self) -> Option<f64> {
        let (wall, kept) = self.kept_wall_ns();
        (kept > 0).then(|| wall / kept as f64)
    }
}

/// A block timed on the calling thread (pinned by the caller) at `target`.
///
/// # Safety
/// As for [`time_split_locks`].
#[cfg(target_arch = "x86_64")]
pub unsafe fn time_block_here(
    clock: &Clock,
    target: *mut u8,
    max_ops: usize,
    budget: std::time::Duration,
) -> Block {
    let mut ticks = vec![0u64; max_ops.max(1)];
    let budget_ticks = (budget.as_nanos() as f64 / clock.ns_per_tick()) as u64;
    let (v0, i0) = context_switches(libc::RUSAGE_THREAD);
    // SAFETY: forwarded from the caller.
    let (n, elapsed) = unsafe { time_split_locks(clock, target, &mut ticks, budget_ticks) };
    let (v1, i1) = context_switches(libc::RUSAGE_THREAD);
    Block {
        per_op_ns: ticks[..n].iter().map(|&t| clock.ticks_to_ns(t)).collect(),
        voluntary_switches: v1.saturating_sub(v0),
        involuntary_switches: i1.saturating_sub(i0),
        elapsed_ns: clock.ticks_to_ns(elapsed),
    }
}

/// What the blocks add up to: census, histogram and percentiles over every op.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Counts over all ops.
    pub census: OpCensus,
    /// The per-op histogram.
    pub histogram: OpHistogram,
    /// (name, ns) for each of [`PERCENTILES`].
    pub percentiles_ns: Vec<(&'static str, f64)>,
    /// Each block's mean ns per op, preemptions discounted.
    pub block_means_ns: Vec<f64>,
    /// Mean ns per op over every block's wall time, preemptions discounted: the rate a
    /// program gets.
    pub mean_ns: f64,
}

/// The summary of `blocks`; `None` when no op was timed.
pub fn summarize(blocks: &[Block]) -> Option<Summary> {
    let census = blocks
        .iter()
        .map(|b| OpCensus::of(&b.per_op_ns, b.voluntary_switches, b.involuntary_switches))
        .fold(OpCensus::default(), |a, c| a.merge(&c));
    if census.ops == 0 {
        return None;
    }
    let mut all: Vec<f64> = blocks.iter().flat_map(|b| b.per_op_ns.clone()).collect();
    let histogram = OpHistogram::of(&all);
    all.sort_by(f64::total_cmp);
    // Nearest rank, as the corpus' C references (bench/split_lock_ref.c) take them.
    let percentiles_ns = PERCENTILES
        .iter()
        .map(|&(name, q)| {
            let i = (q * (all.len() - 1) as f64).round() as usize;
            (name, all[i])
        })
        .collect();
    let (wall, kept) = blocks
        .iter()
        .map(Block::kept_wall_ns)
        .fold((0.0, 0), |(w, n), (bw, bn)| (w + bw, n + bn));
    Some(Summary {
        census,
        histogram,
        percentiles_ns,
        block_means_ns: blocks.iter().filter_map(Block::mean_ns).collect(),
        mean_ns: wall / kept.max(1) as f64,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_add_up_to_one_census_with_percentiles() {
        let a = Block {
            per_op_ns: vec![1000.0, 2000.0, 150_000.0],
            involuntary_switches: 1,
            ..Block::default()
        };
        let b = Block {
            per_op_ns: vec![1500.0],
            ..Block::default()
        };
        let s = summarize(&[a, b, Block::default()]).unwrap();
        assert_eq!(s.census.ops, 4);
        assert_eq!(s.census.trapped_ops, 1);
        assert_eq!(s.census.involuntary_switches, 1);
        // The preemption explains the 150 us op: dropped from the means, kept in the counts.
        assert_eq!(s.block_means_ns, vec![1500.0, 1500.0]);
        assert_eq!(s.mean_ns, 1500.0);
        assert_eq!(s.percentiles_ns[0], ("p0", 1000.0));
        assert_eq!(s.percentiles_ns[2], ("p50", 2000.0));
        assert_eq!(s.percentiles_ns[5], ("p100", 150_000.0));
        assert_eq!(s.histogram.ops.iter().sum::<u64>(), 4);
        assert!(summarize(&[Block::default()]).is_none());
    }

    /// The Emerald Rapids guest whose host traps split locks: ops timed one by one summed to
    /// 45-52 us an op where the block's wall, and the plain loop a program runs, took
    /// 130-180 us; the figure is the wall's.
    #[test]
    fn a_trap_whose_cost_lands_between_the_clock_reads_counts_in_the_mean() {
        let host_trap = Block {
            per_op_ns: vec![2_000.0, 300_000.0, 2_000.0, 2_000.0],
            elapsed_ns: 720_000.0,
            ..Block::default()
        };
        assert_eq!(host_trap.mean_ns(), Some(180_000.0));
        // A preemption is still discounted: its op goes, and its time with it.
        let preempted = Block {
            involuntary_switches: 1,
            ..host_trap.clone()
        };
        assert_eq!(preempted.mean_ns(), Some(140_000.0));
        // No elapsed time recorded (blocks of older files): the ops' sum.
        let unrecorded = Block {
            elapsed_ns: 0.0,
            ..host_trap.clone()
        };
        assert_eq!(unrecorded.mean_ns(), Some(76_500.0));
        let s = summarize(&[host_trap, unrecorded]).unwrap();
        assert_eq!(s.mean_ns, (720_000.0 + 306_000.0) / 8.0);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn a_block_stops_at_its_budget_or_its_count() {
        let clock = Clock::clock_gettime("test".into());
        #[repr(C, align(128))]
        struct Line([u8; 128]);
        let mut line = Line([0; 128]);
        let target = unsafe { line.0.as_mut_ptr().add(crate::measure::SPLIT_OFFSET) };
        let b = unsafe { time_block_here(&clock, target, 50, std::time::Duration::from_secs(5)) };
        assert_eq!(
            b.per_op_ns.len(),
            50,
            "the count ends a block under its budget"
        );
        assert!(b.per_op_ns.iter().all(|&ns| ns >= 0.0));
        let b = unsafe { time_block_here(&clock, target, 1 << 20, std::time::Duration::ZERO) };
        assert_eq!(
            b.per_op_ns.len(),
            1,
            "a spent budget ends a block after one op"
        );
    }
}
