//! The noisy-neighbour victim's loads: a dependent pointer chase and a streaming read, in
//! assembly so the loop overhead is the same in every build (a debug build's bounds checks
//! would otherwise turn a memory-bound read into a CPU-bound one).

use std::arch::asm;

/// Follows `steps` links from `p` (each 8-byte word holds the address of the next) and
/// returns where it stopped. Every load depends on the one before.
///
/// # Safety
/// Every address reached in `steps` links must be valid for an 8-byte read and hold the next
/// link.
#[inline(never)]
pub unsafe fn chase_loop(p: *const u8, steps: u64) -> *const u8 {
    if steps == 0 {
        return p;
    }
    let mut p = p;
    // SAFETY: as documented.
    unsafe {
        asm!(
            "2:",
            "mov {p}, qword ptr [{p}]",
            "dec {n}",
            "jnz 2b",
            p = inout(reg) p,
            n = inout(reg) steps => _,
            options(nostack, readonly),
        );
    }
    p
}

/// Reads `bytes` bytes from `p` with 16-byte SSE2 loads, four per 64-byte line, summing them
/// as 64-bit lanes so the loads cannot be dropped; returns the low lane of the sum.
///
/// # Safety
/// `p` must be 16-byte aligned and valid for reads of `bytes` bytes; `bytes` a multiple of 64.
#[inline(never)]
pub unsafe fn read_loop(p: *const u8, bytes: usize) -> u64 {
    let lines = bytes / 64;
    if lines == 0 {
        return 0;
    }
    let sum: u64;
    // SAFETY: as documented; SSE2 is part of x86-64.
    unsafe {
        asm!(
            "pxor xmm0, xmm0",
            "pxor xmm1, xmm1",
            "2:",
            "paddq xmm0, xmmword ptr [{p}]",
            "paddq xmm1, xmmword ptr [{p} + 16]",
            "paddq xmm0, xmmword ptr [{p} + 32]",
            "paddq xmm1, xmmword ptr [{p} + 48]",
            "add {p}, 64",
            "dec {n}",
            "jnz 2b",
            "paddq xmm0, xmm1",
            "movq {sum}, xmm0",
            p = inout(reg) p => _,
            n = inout(reg) lines => _,
            sum = out(reg) sum,
            out("xmm0") _,
            out("xmm1") _,
            options(nostack, readonly),
        );
    }
    sum
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chase_follows_links() {
        // Three words linked 0 -> 2 -> 1 -> 0.
        let mut w = [0usize; 3];
        let base = w.as_mut_ptr();
        unsafe {
            *base = base.add(2) as usize;
            *base.add(2) = base.add(1) as usize;
            *base.add(1) = base as usize;
        }
        let p = base as *const u8;
        assert_eq!(
            unsafe { chase_loop(p, 1) },
            base.wrapping_add(2) as *const u8
        );
        assert_eq!(unsafe { chase_loop(p, 3) }, p);
        assert_eq!(unsafe { chase_loop(p, 0) }, p);
    }

    #[test]
    fn read_sums_every_word() {
        #[repr(align(64))]
        struct Lines([u64; 32]);
        let l = Lines(std::array::from_fn(|i| i as u64 + 1));
        // Lanes: even words in the low lane, odd words in the high one.
        let low: u64 = (0..32).step_by(2).map(|i| i as u64 + 1).sum();
        assert_eq!(unsafe { read_loop(l.0.as_ptr().cast(), 256) }, low);
        assert_eq!(unsafe { read_loop(l.0.as_ptr().cast(), 0) }, 0);
    }
}
