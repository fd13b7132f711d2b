//! The victim's two workloads: a DRAM-sized pointer chase (latency) and a sequential read
//! (bandwidth), over one buffer well beyond the last-level cache.
//!
//! The chase follows one random cycle over every cache line of the buffer (Sattolo's
//! algorithm), so each load depends on the one before and no prefetcher can guess the next
//! line. The buffer asks for transparent huge pages so page walks do not dominate, and
//! reports how much it got. Kept small and private to this probe on purpose.

use std::time::Instant;

/// Bytes per cache line the chase steps by.
pub const LINE_BYTES: usize = 64;
/// Alignment asked for, so THP can back the whole buffer.
const HUGE_BYTES: usize = 2 << 20;

/// splitmix64 (Steele, Lea, Flood, "Fast splittable pseudorandom number generators", OOPSLA
/// 2014): enough randomness to defeat prefetchers, reproducible from a seed.
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0), by multiply-shift (Lemire); the bias is below 2^-32 for the
    /// sizes used here.
    pub fn below(&mut self, n: usize) -> usize {
        (((self.next_u64() >> 32) * n as u64) >> 32) as usize
    }
}

/// A uniformly random cyclic permutation of `0..n` (Sattolo, "An algorithm to generate a
/// random cyclic permutation", IPL 22, 1986): `next[i]` is the element after `i`, and
/// following `next` from any start visits all `n` before returning.
pub fn sattolo(n: usize, rng: &mut SplitMix64) -> Vec<u32> {
    assert!(n <= u32::MAX as usize, "too many lines for u32 indices");
    let mut next: Vec<u32> = (0..n as u32).collect();
    for i in (1..n).rev() {
        let j = rng.below(i);
        next.swap(i, j);
    }
    next
}

/// A place on the chase cycle. Only a [`ChaseBuffer`] makes one, so following it is safe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChasePos(*const u8);

/// The victim's buffer, with the chase cycle written into it.
pub struct ChaseBuffer {
    map: *mut u8,
    map_len: usize,
    base: *mut u8,
    len: usize,
}

impl ChaseBuffer {
    /// Maps `len` bytes (rounded up to 2 MiB), asks for huge pages, and writes one random
    /// cycle over its lines: each line's first word holds the address of the next line.
    pub fn new(len: usize, seed: u64) -> Result<ChaseBuffer, String> {
        let len = len.max(HUGE_BYTES).next_multiple_of(HUGE_BYTES);
        let map_len = len + HUGE_BYTES;
        // SAFETY: a fresh private anonymous mapping; checked below.
        let map = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if map == libc::MAP_FAILED {
            return Err(format!(
                "cannot map {} MiB: {}",
                len >> 20,
                std::io::Error::last_os_error()
            ));
        }
        let map = map.cast::<u8>();
        let base = (map as usize).next_multiple_of(HUGE_BYTES) as *mut u8;
        // SAFETY: the range lies inside the mapping. Failure only means 4 KiB pages, which
        // `huge_page_bytes` reports.
        unsafe { libc::madvise(base.cast(), len, libc::MADV_HUGEPAGE) };
        let buf = ChaseBuffer {
            map,
            map_len,
            base,
            len,
        };
        let lines = len / LINE_BYTES;
        let next = sattolo(lines, &mut SplitMix64::new(seed));
        // Written in line order, so building is a sequential pass, not a random one.
        for (i, &n) in next.iter().enumerate() {
            // SAFETY: both addresses are line starts inside the buffer.
            unsafe {
                buf.base
                    .add(i * LINE_BYTES)
                    .cast::<usize>()
                    .write(buf.base.add(n as usize * LINE_BYTES) as usize);
            }
        }
        Ok(buf)
    }

    /// Buffer size in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a buffer has at least one huge page.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Where the chase starts.
    pub fn start(&self) -> ChasePos {
        ChasePos(self.base)
    }

    /// Follows `steps` links from `from`; returns where it stopped (pass it to the next call,
    /// so consecutive chunks keep walking the cycle instead of re-reading warm lines).
    pub fn chase(&self, from: ChasePos, steps: u64) -> ChasePos {
        let at = from.0 as usize;
        let base = self.base as usize;
        assert!(
            (base..base + self.len).contains(&at),
            "chase position from another buffer"
        );
        // SAFETY: `from` lies in this buffer (checked) and came from it (`start` or an earlier chase), and every link
        // written in `new` points at a line start in the buffer.
        ChasePos(unsafe { crate::arch::chase_loop(from.0, steps) })
    }

    /// Reads `bytes` bytes from `offset` (both rounded down to whole lines; stops at the end
    /// of the buffer) and returns a sum of what it read, which keeps the loads alive.
    pub fn read(&self, offset: usize, bytes: usize) -> u64 {
        let offset = (offset % self.len) & !(LINE_BYTES - 1);
        let bytes = bytes.min(self.len - offset) & !(LINE_BYTES - 1);
        // SAFETY: the range lies in the buffer, line-aligned, and is initialised.
        unsafe { crate::arch::read_loop(self.base.add(offset), bytes) }
    }

    /// Bytes of the buffer backed by transparent huge pages, from /proc/self/smaps.
    pub fn huge_page_bytes(&self) -> Option<u64> {
        let text = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let maps = crate::machine::smaps::parse_smaps(&text);
        crate::machine::smaps::mapping_containing(&maps, self.base as u64)
            .map(|m| m.kb("AnonHugePages") * 1024)
    }
}

impl Drop for ChaseBuffer {
    fn drop(&mut self) {
        // SAFETY: mapped in `new` with this length.
        unsafe { libc::munmap(self.map.cast(), self.map_len) };
    }
}

/// One timed piece of victim work.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Units of work done (links followed, bytes read).
    pub units: u64,
    /// Time it took, in ns.
    pub ns: f64,
    /// How far a side counter (the aggressor's split locks) moved meanwhile.
    pub side: u64,
}

/// Samples taken until `deadline`, each one `work()` timed; `work` returns the units done.
/// `side` is read around each sample, so the caller can tell what ran next to it.
pub fn sample_until(
    deadline: Instant,
    clock: &crate::measure::Clock,
    mut work: impl FnMut() -> u64,
    side: impl Fn() -> u64,
) -> Vec<Sample> {
    let mut out = Vec::new();
    loop {
        let s0 = side();
        let t0 = clock.start();
        let units = work();
        let t1 = clock.end();
        out.push(Sample {
            units,
            ns: clock.ticks_to_ns(t1 - t0),
            side: side().saturating_sub(s0),
        });
        if Instant::now() >= deadline {
            return out;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sattolo_is_one_cycle_through_every_element() {
        for n in [1usize, 2, 3, 10, 1000] {
            let next = sattolo(n, &mut SplitMix64::new(42));
            let mut seen = vec![false; n];
            let mut i = 0usize;
            for _ in 0..n {
                assert!(!seen[i], "n={n}: revisited {i} early");
                seen[i] = true;
                i = next[i] as usize;
            }
            assert_eq!(i, 0, "n={n}: cycle does not close after n steps");
            assert!(seen.iter().all(|&s| s));
        }
    }

    #[test]
    fn sattolo_has_no_fixed_points_and_depends_on_the_seed() {
        let a = sattolo(1000, &mut SplitMix64::new(1));
        assert!(a.iter().enumerate().all(|(i, &n)| i as u32 != n));
        assert_ne!(a, sattolo(1000, &mut SplitMix64::new(2)));
    }

    #[test]
    fn below_stays_in_range() {
        let mut r = SplitMix64::new(7);
        assert!((0..10_000).all(|_| r.below(13) < 13));
    }

    #[test]
    fn chase_walks_the_whole_buffer_and_returns_home() {
        let b = ChaseBuffer::new(2 << 20, 3).unwrap();
        let lines = (b.len() / LINE_BYTES) as u64;
        assert_eq!(b.chase(b.start(), lines), b.start());
        assert_ne!(b.chase(b.start(), lines - 1), b.start());
        assert!(b.read(0, b.len()) != 0, "links are non-zero addresses");
    }
}
