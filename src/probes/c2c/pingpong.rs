//! The ping-pong engine: two threads pinned to two CPUs hand one value back and forth, and the
//! time per handoff is the one-way core-to-core latency (round trip / 2).
//!
//! Two protocols, so a reader can tell the cost of moving a line from the cost of a contended
//! lock on it:
//! - [`Variant::Cas`]: both threads spin on `lock cmpxchg` on one 8-byte value, each
//!   incrementing it when it holds its parity (the classic core-to-core test, and the one the
//!   split-lock seed moved across a line end). `offset` places the value in the block: 0 is
//!   aligned, 60 straddles two lines.
//! - [`Variant::LoadStore`]: one thread stores a flag on one line and waits with plain loads
//!   for the answer on another line; no locked instruction at all.
//!
//! Each measurement gets a fresh block ([`Lines`]) from the caller, so a line that a third
//! core's cache still holds from an earlier pair never takes part.

use crate::measure::{Clock, pin_to_cpu};
use std::alloc::{Layout, alloc_zeroed, dealloc};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Bytes in one [`Lines`] block: two 128-byte halves (a line pair each, so the adjacent-line
/// prefetcher does not couple them).
pub const BLOCK_BYTES: usize = 256;
/// Alignment of a block: 128, a pair of 64-byte lines.
pub const BLOCK_ALIGN: usize = 128;
pub use crate::measure::SPLIT_OFFSET;

/// A fresh, zeroed, 128-byte-aligned block of cache lines for one measurement.
pub struct Lines {
    ptr: *mut u8,
}

// SAFETY: the block is plain memory; the threads that share it touch it only through locked
// instructions or atomics.
unsafe impl Send for Lines {}
// SAFETY: as above.
unsafe impl Sync for Lines {}

impl Lines {
    fn layout() -> Layout {
        Layout::from_size_align(BLOCK_BYTES, BLOCK_ALIGN).expect("constant layout")
    }

    /// Allocates a new block.
    pub fn new() -> Lines {
        // SAFETY: the layout has non-zero size.
        let ptr = unsafe { alloc_zeroed(Self::layout()) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(Self::layout());
        }
        Lines { ptr }
    }

    /// Address of byte `offset` of the block (`offset + 8 <= BLOCK_BYTES`).
    pub fn at(&self, offset: usize) -> *mut u8 {
        assert!(
            offset + 8 <= BLOCK_BYTES,
            "offset {offset} outside the block"
        );
        // SAFETY: in bounds, checked above.
        unsafe { self.ptr.add(offset) }
    }

    /// Zeroes the block. Only while no thread uses it (before a ping-pong starts).
    fn reset(&self) {
        // SAFETY: in bounds; `ping_pong` calls this before it starts the threads that share
        // the block, so nothing else accesses it.
        unsafe { std::ptr::write_bytes(self.ptr, 0, BLOCK_BYTES) }
    }

    /// The block's address (for the record: which lines were used).
    pub fn address(&self) -> usize {
        self.ptr as usize
    }
}

impl Default for Lines {
    fn default() -> Self {
        Lines::new()
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with the same layout.
        unsafe { dealloc(self.ptr, Self::layout()) }
    }
}

/// Which protocol to bounce with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Variant {
    /// `lock cmpxchg` on the value at `offset` in the block.
    Cas {
        /// Byte offset of the 8-byte value (0: aligned; [`SPLIT_OFFSET`]: split).
        offset: usize,
    },
    /// Store a flag on the first line, wait for the answer on the line at offset 128.
    LoadStore,
}

/// How much to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    /// Handoffs before the first timed sample (the line settles between the two cores).
    pub warmup: u64,
    /// Handoffs per timed sample.
    pub handoffs_per_sample: u64,
    /// Timed samples.
    pub samples: usize,
}

/// Longest a ping-pong may go without finishing before it gives up: far beyond any real
/// measurement (a full split-lock run is well under a second), short of a hang.
const STALL_LIMIT: Duration = Duration::from_secs(60);
/// Failed spins between looks at the stop flag and the clock.
const SPINS_PER_CHECK: u32 = 1 << 16;

/// Lets a spinning thread notice that its partner gave up or that the run has stalled.
struct Watchdog<'a> {
    stop: &'a AtomicBool,
    deadline: Instant,
    spins: u32,
}

impl Watchdog<'_> {
    /// Called on every failed spin; true when the thread should give up.
    #[inline(always)]
    fn tripped(&mut self) -> bool {
        self.spins = self.spins.wrapping_add(1);
        if !self.spins.is_multiple_of(SPINS_PER_CHECK) {
            return false;
        }
        if self.stop.load(Ordering::Relaxed) {
            return true;
        }
        if Instant::now() > self.deadline {
            self.stop.store(true, Ordering::Relaxed);
            return true;
        }
        false
    }
}

/// Bounces a value between `cpus.0` and `cpus.1` in `lines` and returns one one-way latency
/// per sample, in ns. The block is zeroed first, so one block may serve several runs on the
/// same pair. Fails when either thread cannot be pinned or the run stalls.
pub fn ping_pong(
    clock: &Clock,
    cpus: (usize, usize),
    lines: &Lines,
    variant: Variant,
    plan: Plan,
) -> Result<Vec<f64>, String> {
    // Even counts keep the CAS protocol's parity bookkeeping simple.
    let n = plan.handoffs_per_sample.max(2).next_multiple_of(2);
    let warmup = plan.warmup.next_multiple_of(2);
    let samples = plan.samples.max(1);
    lines.reset();
    let ready = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let deadline = Instant::now() + STALL_LIMIT;
    let meet = |cpu: usize| -> Result<(crate::measure::Pinned, Watchdog), String> {
        let pinned = pin_to_cpu(cpu).map_err(|e| {
            stop.store(true, Ordering::SeqCst);
            e.to_string()
        })?;
        ready.fetch_add(1, Ordering::SeqCst);
        while ready.load(Ordering::SeqCst) < 2 {
            if stop.load(Ordering::SeqCst) {
                return Err("the other thread could not be pinned".into());
            }
            std::hint::spin_loop();
        }
        let dog = Watchdog {
            stop: &stop,
            deadline,
            spins: 0,
        };
        Ok((pinned, dog))
    };

    let (stamps, other) = std::thread::scope(|s| {
        let responder = crate::measure::threads::spawn_scoped(s, || -> Result<(), String> {
            let (_pin, mut dog) = meet(cpus.1)?;
            match variant {
                Variant::Cas { offset } => {
                    cas_responder(lines.at(offset), warmup + samples as u64 * n + 2, &mut dog)
                }
                Variant::LoadStore => {
                    load_store_responder(lines, warmup / 2 + samples as u64 * n / 2 + 1, &mut dog)
                }
            }
            Ok(())
        })
        .map_err(|e| e.to_string());
        let responder = match responder {
            Ok(h) => h,
            Err(e) => return (Err(e.clone()), Err(e)),
        };
        // The calling thread is the initiator; `pin_to_cpu` restores its affinity after.
        let stamps = (|| -> Result<Vec<u64>, String> {
            let (_pin, mut dog) = meet(cpus.0)?;
            Ok(match variant {
                Variant::Cas { offset } => {
                    cas_initiator(clock, lines.at(offset), warmup, n, samples, &mut dog)
                }
                Variant::LoadStore => {
                    load_store_initiator(clock, lines, warmup / 2, n / 2, samples, &mut dog)
                }
            })
        })();
        let other = responder
            .join()
            .unwrap_or_else(|_| Err("responder thread panicked".into()));
        (stamps, other)
    });
    other?;
    let stamps = stamps?;
    if stop.load(Ordering::SeqCst) || stamps.len() != samples + 1 {
        return Err(format!(
            "the ping-pong made no progress for {} s (is another program spinning on these \
             CPUs?)",
            STALL_LIMIT.as_secs()
        ));
    }
    Ok(stamps
        .windows(2)
        .map(|w| clock.ticks_to_ns(w[1] - w[0]) / n as f64)
        .collect())
}

/// `lock cmpxchg` on the 8 bytes at `p`, at any alignment: the instruction the CAS protocol
/// times. Only x86-64 has it here; elsewhere the probes skip before a ping-pong starts.
///
/// # Safety
/// As for `arch::lock_cmpxchg_u64`.
#[inline(always)]
unsafe fn cas(p: *mut u8, expected: u64, new: u64) -> u64 {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: forwarded from the caller.
    return unsafe { crate::arch::lock_cmpxchg_u64(p, expected, new) };
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (p, expected, new);
        unreachable!("{}", crate::arch::require_x86_64().unwrap_err())
    }
}

/// Thread 0 of the CAS protocol: moves the value from each even number to the next odd one,
/// stamping the clock when it completes handoff `warmup + k * n`, k = 0..=samples. Between two
/// stamps lie exactly `n` handoffs.
fn cas_initiator(
    clock: &Clock,
    p: *mut u8,
    warmup: u64,
    n: u64,
    samples: usize,
    dog: &mut Watchdog,
) -> Vec<u64> {
    let total = warmup + samples as u64 * n + 2;
    let mut stamps = Vec::with_capacity(samples + 1);
    let mut next_stamp = warmup;
    let mut cur = 0u64;
    while cur < total {
        // SAFETY: `p` points into a live block shared only through locked instructions.
        if unsafe { cas(p, cur, cur + 1) } == cur {
            if cur == next_stamp && stamps.len() <= samples {
                stamps.push(clock.end());
                next_stamp += n;
            }
            cur += 2;
        } else if dog.tripped() {
            break;
        }
    }
    stamps
}

/// Thread 1 of the CAS protocol: odd to even, until the value reaches `total`.
fn cas_responder(p: *mut u8, total: u64, dog: &mut Watchdog) {
    let mut cur = 1u64;
    while cur < total {
        // SAFETY: as in `cas_initiator`.
        if unsafe { cas(p, cur, cur + 1) } == cur {
            cur += 2;
        } else if dog.tripped() {
            return;
        }
    }
}

fn flags(lines: &Lines) -> (&AtomicU64, &AtomicU64) {
    // SAFETY: both offsets are 8-byte aligned inside the live block, which is only accessed
    // through these atomics while the threads run.
    unsafe {
        (
            AtomicU64::from_ptr(lines.at(0).cast()),
            AtomicU64::from_ptr(lines.at(BLOCK_ALIGN).cast()),
        )
    }
}

/// Thread 0 of the load/store protocol: round `i` stores `i` to the ping line and waits for
/// `i` on the pong line; two one-way transfers per round. Stamps after round
/// `warmup_rounds + k * rounds_per_sample`.
fn load_store_initiator(
    clock: &Clock,
    lines: &Lines,
    warmup_rounds: u64,
    rounds_per_sample: u64,
    samples: usize,
    dog: &mut Watchdog,
) -> Vec<u64> {
    let (ping, pong) = flags(lines);
    let total = warmup_rounds + samples as u64 * rounds_per_sample + 1;
    let mut stamps = Vec::with_capacity(samples + 1);
    let mut next_stamp = warmup_rounds.max(1);
    for i in 1..=total {
        ping.store(i, Ordering::Release);
        // No PAUSE in the wait: it would add its own latency (tens of ns on recent cores) to
        // every handoff.
        while pong.load(Ordering::Acquire) != i {
            if dog.tripped() {
                return stamps;
            }
        }
        if i == next_stamp && stamps.len() <= samples {
            stamps.push(clock.end());
            next_stamp += rounds_per_sample;
        }
    }
    stamps
}

/// Thread 1 of the load/store protocol: answers each round.
fn load_store_responder(lines: &Lines, total: u64, dog: &mut Watchdog) {
    let (ping, pong) = flags(lines);
    for i in 1..=total {
        while ping.load(Ordering::Acquire) != i {
            if dog.tripped() {
                return;
            }
        }
        pong.store(i, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_aligned_and_the_split_value_straddles_a_line_end() {
        let l = Lines::new();
        assert_eq!(l.address() % BLOCK_ALIGN, 0);
        let split = l.at(SPLIT_OFFSET) as usize;
        assert_ne!(
            split / 64,
            (split + 7) / 64,
            "value must straddle two lines"
        );
    }

    #[test]
    fn one_block_serves_several_runs_on_a_pair() {
        // Regression: the split-lock probe reuses its block for each round; a value left at
        // the previous run's end made the next run spin forever.
        if !crate::probes::two_cpus_or_skip() {
            return;
        }
        let cpus = crate::measure::allowed_cpus();
        let clock = Clock::detect(crate::arch::SUPPORTED);
        let plan = Plan {
            warmup: 10,
            handoffs_per_sample: 100,
            samples: 2,
        };
        let lines = Lines::new();
        for variant in [Variant::Cas { offset: 0 }, Variant::LoadStore] {
            for _ in 0..2 {
                let v = ping_pong(&clock, (cpus[0], cpus[1]), &lines, variant, plan).unwrap();
                assert_eq!(v.len(), 2);
                assert!(v.iter().all(|&ns| ns > 0.0), "{v:?}");
            }
        }
    }

    #[test]
    fn pinning_failure_is_an_error_not_a_hang() {
        let clock = Clock::clock_gettime("test".into());
        let plan = Plan {
            warmup: 2,
            handoffs_per_sample: 2,
            samples: 1,
        };
        let err = ping_pong(
            &clock,
            (0, 1 << 20),
            &Lines::new(),
            Variant::LoadStore,
            plan,
        )
        .unwrap_err();
        assert!(
            err.contains("not available") || err.contains("pinned"),
            "{err}"
        );
    }
}
