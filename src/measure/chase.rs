//! Building a pointer chase: one random cycle (Sattolo's algorithm) through `n` slots of a
//! buffer, each slot holding the address of the next, so every load depends on the one before
//! and no prefetcher can guess the next address (design notes, measurement rules). The memory
//! latency curve and the split-lock neighbour's victim both follow one; the loop that follows
//! it is `arch::pointer_chase`.
//!
//! A slot is one 64-byte line. For the latency curve the slots are consecutive lines; for the
//! TLB sweep they are one line per 4 KiB page, at a pseudo-random line of the page so the
//! lines spread over the cache sets instead of piling into the few sets one page offset maps
//! to.

/// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number generators",
/// OOPSLA 2014): a fixed seed gives the same cycle on every run, so two runs chase the same
/// pattern.
#[derive(Debug, Clone)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> SplitMix64 {
        SplitMix64(seed)
    }

    /// The next 64 random bits. (Always inlined: building a 1 GiB chase draws 16 million of
    /// them, and the test suite runs an unoptimised build.)
    #[inline(always)]
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..bound` (Lemire's multiply-shift on 64 bits: a bias of at most
    /// bound / 2^64, far below anything a chase could show).
    #[inline(always)]
    pub fn below(&mut self, bound: u64) -> u64 {
        ((self.next_u64() as u128 * bound as u128) >> 64) as u64
    }
}

/// A single cycle through `0..n` (Sattolo 1986): `next[i]` is the slot after `i`, and following
/// `next` from any slot visits every slot once before returning.
pub fn sattolo_cycle(n: usize, rng: &mut SplitMix64) -> Vec<u32> {
    assert!(n <= u32::MAX as usize, "too many slots for a u32 cycle");
    let mut a: Vec<u32> = (0..n as u32).collect();
    for i in (1..n).rev() {
        let j = rng.below(i as u64) as usize;
        a.swap(i, j);
    }
    a
}

/// Slot layout of a chase in a buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Consecutive 64-byte lines.
    Lines,
    /// One line per 4 KiB page, at a line chosen per page.
    OneLinePerPage,
}

impl Layout {
    /// Bytes of buffer one slot spans.
    pub fn stride(self) -> usize {
        match self {
            Layout::Lines => 64,
            Layout::OneLinePerPage => 4096,
        }
    }

    /// Byte offset of slot `i` from the buffer start.
    #[inline(always)]
    pub fn offset(self, i: usize) -> usize {
        match self {
            Layout::Lines => i * self.stride(),
            Layout::OneLinePerPage => {
                let line = SplitMix64::new(i as u64 ^ 0x5EED).next_u64() % 64;
                i * self.stride() + line as usize * Layout::Lines.stride()
            }
        }
    }
}

/// Writes the cycle `next` (from [`sattolo_cycle`]) through its slots of `layout` at `base`
/// and returns the address of slot 0, where a chase starts (not `base` itself: in the
/// one-line-per-page layout slot 0 sits at a random line, and `base` may still hold a stale
/// chain).
///
/// # Safety
/// `base..base + next.len() * layout.stride()` must be writable and 64-byte aligned.
pub unsafe fn build(base: *mut u8, next: &[u32], layout: Layout) -> *const u64 {
    for (i, &j) in next.iter().enumerate() {
        // SAFETY: both offsets are inside the range the caller vouched for, 8-byte aligned.
        unsafe {
            let slot = base.add(layout.offset(i)) as *mut u64;
            slot.write(base.add(layout.offset(j as usize)) as u64);
        }
    }
    // SAFETY: slot 0 lies inside the range.
    unsafe { base.add(layout.offset(0)) as *const u64 }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sattolo_gives_one_cycle_through_every_slot() {
        for n in [2, 3, 17, 1000] {
            let next = sattolo_cycle(n, &mut SplitMix64::new(n as u64));
            let mut seen = vec![false; n];
            let mut i = 0usize;
            for _ in 0..n {
                assert!(!seen[i], "slot {i} visited twice for n={n}");
                seen[i] = true;
                i = next[i] as usize;
            }
            assert_eq!(i, 0, "the cycle closes after n steps");
            assert!(seen.iter().all(|&s| s));
        }
    }

    #[test]
    fn the_cycle_is_not_sequential() {
        // A prefetcher could follow a +1 stride; a random cycle almost never has one.
        let next = sattolo_cycle(4096, &mut SplitMix64::new(1));
        let sequential = next
            .iter()
            .enumerate()
            .filter(|&(i, &j)| j as usize == i + 1)
            .count();
        assert!(sequential < 10, "{sequential} sequential steps");
    }

    #[test]
    fn one_line_per_page_stays_in_its_page_and_spreads_over_lines() {
        let mut lines = std::collections::BTreeSet::new();
        for i in 0..512 {
            let off = Layout::OneLinePerPage.offset(i);
            assert_eq!(off / 4096, i);
            assert_eq!(off % 64, 0);
            lines.insert((off % 4096) / 64);
        }
        assert!(lines.len() > 48, "only {} distinct lines", lines.len());
    }

    #[test]
    fn a_built_chase_visits_every_slot() {
        #[repr(C, align(4096))]
        struct Page([u8; 4096]);
        for layout in [Layout::Lines, Layout::OneLinePerPage] {
            let n = 16;
            // Filled with a stale chain pointing at page 0, as a previous build would leave it.
            let mut pages: Vec<Page> = (0..n).map(|_| Page([0; 4096])).collect();
            let stale = pages.as_ptr() as u64;
            for page in pages.iter_mut() {
                for word in page.0.chunks_exact_mut(8) {
                    word.copy_from_slice(&stale.to_ne_bytes());
                }
            }
            let base = pages.as_mut_ptr() as *mut u8;
            let next = sattolo_cycle(n, &mut SplitMix64::new(7));
            let start = unsafe { build(base, &next, layout) };
            let mut p = start;
            let mut visited = std::collections::BTreeSet::new();
            for _ in 0..n {
                visited.insert(p as usize - base as usize);
                p = unsafe { *p } as *const u64;
            }
            assert_eq!(p, start);
            assert_eq!(visited.len(), n);
            assert_eq!(start as usize - base as usize, layout.offset(0));
        }
    }
}
