//! Memory kernels: the dependent pointer chase of the latency probe, and sequential reads with
//! the widest vector loads the CPU has (AVX-512, AVX2 or SSE2), with or without a software
//! prefetch a fixed distance ahead, for the bandwidth probe.
//!
//! Each kernel is one `asm!` block so the compiler can neither drop loads whose results are
//! unused nor reorder them. The read kernels take 512 bytes per iteration (eight 64-byte
//! lines), the chase eight loads per iteration.

use std::arch::asm;

/// Bytes one iteration of a read kernel consumes; buffers passed to them are a multiple.
pub const READ_BYTES_PER_ITERATION: usize = 512;
/// Loads one iteration of [`pointer_chase`] performs; step counts are rounded up to it.
pub const CHASE_LOADS_PER_ITERATION: u64 = 8;

/// Follows a chain of pointers from `start` for `steps` loads (rounded up to a multiple of
/// [`CHASE_LOADS_PER_ITERATION`]), each load's address being the value the previous one read,
/// and returns where it stopped.
///
/// # Safety
/// Every pointer reachable from `start` within `steps` loads must point to a readable,
/// 8-byte-aligned `u64` that itself holds such a pointer.
#[inline(never)]
pub unsafe fn pointer_chase(start: *const u64, steps: u64) -> *const u64 {
    let iterations = steps.div_ceil(CHASE_LOADS_PER_ITERATION).max(1);
    let mut p = start;
    // SAFETY: the caller guarantees every address on the chain is readable.
    unsafe {
        asm!(
            "2:",
            "mov {p}, [{p}]",
            "mov {p}, [{p}]",
            "mov {p}, [{p}]",
            "mov {p}, [{p}]",
            "mov {p}, [{p}]",
            "mov {p}, [{p}]",
            "mov {p}, [{p}]",
            "mov {p}, [{p}]",
            "dec {n}",
            "jnz 2b",
            p = inout(reg) p,
            n = inout(reg) iterations => _,
            options(nostack, readonly),
        );
    }
    p
}

/// The vector width a read kernel uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VectorWidth {
    /// 128-bit SSE2 loads (every x86-64 CPU).
    Sse2,
    /// 256-bit AVX2 loads.
    Avx2,
    /// 512-bit AVX-512 loads.
    Avx512,
}

impl VectorWidth {
    /// The widest width this CPU supports, detected at run time.
    pub fn widest() -> VectorWidth {
        if std::arch::is_x86_feature_detected!("avx512f") {
            VectorWidth::Avx512
        } else if std::arch::is_x86_feature_detected!("avx2") {
            VectorWidth::Avx2
        } else {
            VectorWidth::Sse2
        }
    }

    /// True when this CPU can run loads of this width.
    pub fn supported(self) -> bool {
        match self {
            VectorWidth::Sse2 => true,
            VectorWidth::Avx2 => std::arch::is_x86_feature_detected!("avx2"),
            VectorWidth::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
        }
    }

    /// Register width in bits.
    pub fn bits(self) -> u32 {
        match self {
            VectorWidth::Sse2 => 128,
            VectorWidth::Avx2 => 256,
            VectorWidth::Avx512 => 512,
        }
    }

    /// Instruction set name as the fingerprint records it.
    pub fn name(self) -> &'static str {
        match self {
            VectorWidth::Sse2 => "sse2",
            VectorWidth::Avx2 => "avx2",
            VectorWidth::Avx512 => "avx512",
        }
    }
}

/// Reads `len` bytes from `ptr` sequentially with `width` loads; with `prefetch_distance`
/// (bytes), issues one `prefetcht0` per 64-byte line that far ahead.
///
/// Panics when `width` is not supported by this CPU, `len` is not a multiple of
/// [`READ_BYTES_PER_ITERATION`], or `ptr` is not 64-byte aligned.
///
/// # Safety
/// `ptr..ptr + len` must be readable. Prefetches beyond the end are harmless (a prefetch
/// never faults), so the range need not extend by the distance.
pub unsafe fn sequential_read(
    ptr: *const u8,
    len: usize,
    width: VectorWidth,
    prefetch_distance: Option<usize>,
) {
    assert!(
        width.supported(),
        "{} loads not supported here",
        width.name()
    );
    assert!(len.is_multiple_of(READ_BYTES_PER_ITERATION) && len > 0);
    assert!((ptr as usize).is_multiple_of(64));
    // SAFETY: the width is supported (checked above); the caller vouches for the range.
    unsafe {
        match (width, prefetch_distance) {
            (VectorWidth::Avx512, None) => read_avx512(ptr, len),
            (VectorWidth::Avx512, Some(d)) => read_avx512_prefetch(ptr, len, d),
            (VectorWidth::Avx2, None) => read_avx2(ptr, len),
            (VectorWidth::Avx2, Some(d)) => read_avx2_prefetch(ptr, len, d),
            (VectorWidth::Sse2, None) => read_sse2(ptr, len),
            (VectorWidth::Sse2, Some(d)) => read_sse2_prefetch(ptr, len, d),
        }
    }
}

/// Eight aligned 512-bit loads per iteration, as likwid-bench's `load_avx512` does.
#[target_feature(enable = "avx512f")]
unsafe fn read_avx512(ptr: *const u8, len: usize) {
    // SAFETY: the caller checked AVX-512F and the range.
    unsafe {
        asm!(
            "2:",
            "vmovdqa64 zmm0, [{p}]",
            "vmovdqa64 zmm1, [{p} + 64]",
            "vmovdqa64 zmm2, [{p} + 128]",
            "vmovdqa64 zmm3, [{p} + 192]",
            "vmovdqa64 zmm4, [{p} + 256]",
            "vmovdqa64 zmm5, [{p} + 320]",
            "vmovdqa64 zmm6, [{p} + 384]",
            "vmovdqa64 zmm7, [{p} + 448]",
            "add {p}, 512",
            "cmp {p}, {end}",
            "jb 2b",
            p = inout(reg) ptr => _,
            end = in(reg) ptr.add(len),
            out("zmm0") _, out("zmm1") _, out("zmm2") _, out("zmm3") _,
            out("zmm4") _, out("zmm5") _, out("zmm6") _, out("zmm7") _,
            options(nostack, readonly),
        );
    }
}

#[target_feature(enable = "avx512f")]
unsafe fn read_avx512_prefetch(ptr: *const u8, len: usize, distance: usize) {
    // SAFETY: as read_avx512; prefetches never fault.
    unsafe {
        asm!(
            "2:",
            "prefetcht0 [{p} + {d}]",
            "prefetcht0 [{p} + {d} + 64]",
            "prefetcht0 [{p} + {d} + 128]",
            "prefetcht0 [{p} + {d} + 192]",
            "prefetcht0 [{p} + {d} + 256]",
            "prefetcht0 [{p} + {d} + 320]",
            "prefetcht0 [{p} + {d} + 384]",
            "prefetcht0 [{p} + {d} + 448]",
            "vmovdqa64 zmm0, [{p}]",
            "vmovdqa64 zmm1, [{p} + 64]",
            "vmovdqa64 zmm2, [{p} + 128]",
            "vmovdqa64 zmm3, [{p} + 192]",
            "vmovdqa64 zmm4, [{p} + 256]",
            "vmovdqa64 zmm5, [{p} + 320]",
            "vmovdqa64 zmm6, [{p} + 384]",
            "vmovdqa64 zmm7, [{p} + 448]",
            "add {p}, 512",
            "cmp {p}, {end}",
            "jb 2b",
            p = inout(reg) ptr => _,
            end = in(reg) ptr.add(len),
            d = in(reg) distance,
            out("zmm0") _, out("zmm1") _, out("zmm2") _, out("zmm3") _,
            out("zmm4") _, out("zmm5") _, out("zmm6") _, out("zmm7") _,
            options(nostack, readonly),
        );
    }
}

/// Sixteen aligned 256-bit loads per iteration.
#[target_feature(enable = "avx2")]
unsafe fn read_avx2(ptr: *const u8, len: usize) {
    // SAFETY: the caller checked AVX2 and the range.
    unsafe {
        asm!(
            "2:",
            "vmovdqa ymm0, [{p}]",
            "vmovdqa ymm1, [{p} + 32]",
            "vmovdqa ymm2, [{p} + 64]",
            "vmovdqa ymm3, [{p} + 96]",
            "vmovdqa ymm4, [{p} + 128]",
            "vmovdqa ymm5, [{p} + 160]",
            "vmovdqa ymm6, [{p} + 192]",
            "vmovdqa ymm7, [{p} + 224]",
            "vmovdqa ymm8, [{p} + 256]",
            "vmovdqa ymm9, [{p} + 288]",
            "vmovdqa ymm10, [{p} + 320]",
            "vmovdqa ymm11, [{p} + 352]",
            "vmovdqa ymm12, [{p} + 384]",
            "vmovdqa ymm13, [{p} + 416]",
            "vmovdqa ymm14, [{p} + 448]",
            "vmovdqa ymm15, [{p} + 480]",
            "add {p}, 512",
            "cmp {p}, {end}",
            "jb 2b",
            p = inout(reg) ptr => _,
            end = in(reg) ptr.add(len),
            out("ymm0") _, out("ymm1") _, out("ymm2") _, out("ymm3") _,
            out("ymm4") _, out("ymm5") _, out("ymm6") _, out("ymm7") _,
            out("ymm8") _, out("ymm9") _, out("ymm10") _, out("ymm11") _,
            out("ymm12") _, out("ymm13") _, out("ymm14") _, out("ymm15") _,
            options(nostack, readonly),
        );
    }
}

#[target_feature(enable = "avx2")]
unsafe fn read_avx2_prefetch(ptr: *const u8, len: usize, distance: usize) {
    // SAFETY: as read_avx2; prefetches never fault.
    unsafe {
        asm!(
            "2:",
            "prefetcht0 [{p} + {d}]",
            "prefetcht0 [{p} + {d} + 64]",
            "prefetcht0 [{p} + {d} + 128]",
            "prefetcht0 [{p} + {d} + 192]",
            "prefetcht0 [{p} + {d} + 256]",
            "prefetcht0 [{p} + {d} + 320]",
            "prefetcht0 [{p} + {d} + 384]",
            "prefetcht0 [{p} + {d} + 448]",
            "vmovdqa ymm0, [{p}]",
            "vmovdqa ymm1, [{p} + 32]",
            "vmovdqa ymm2, [{p} + 64]",
            "vmovdqa ymm3, [{p} + 96]",
            "vmovdqa ymm4, [{p} + 128]",
            "vmovdqa ymm5, [{p} + 160]",
            "vmovdqa ymm6, [{p} + 192]",
            "vmovdqa ymm7, [{p} + 224]",
            "vmovdqa ymm8, [{p} + 256]",
            "vmovdqa ymm9, [{p} + 288]",
            "vmovdqa ymm10, [{p} + 320]",
            "vmovdqa ymm11, [{p} + 352]",
            "vmovdqa ymm12, [{p} + 384]",
            "vmovdqa ymm13, [{p} + 416]",
            "vmovdqa ymm14, [{p} + 448]",
            "vmovdqa ymm15, [{p} + 480]",
            "add {p}, 512",
            "cmp {p}, {end}",
            "jb 2b",
            p = inout(reg) ptr => _,
            end = in(reg) ptr.add(len),
            d = in(reg) distance,
            out("ymm0") _, out("ymm1") _, out("ymm2") _, out("ymm3") _,
            out("ymm4") _, out("ymm5") _, out("ymm6") _, out("ymm7") _,
            out("ymm8") _, out("ymm9") _, out("ymm10") _, out("ymm11") _,
            out("ymm12") _, out("ymm13") _, out("ymm14") _, out("ymm15") _,
            options(nostack, readonly),
        );
    }
}

/// Sixteen aligned 128-bit loads (256 bytes, one per SSE2 register) per turn of the loop, so
/// two turns per [`READ_BYTES_PER_ITERATION`].
unsafe fn read_sse2(ptr: *const u8, len: usize) {
    // SAFETY: SSE2 is part of x86-64; the caller vouches for the range.
    unsafe {
        asm!(
            "2:",
            "movdqa xmm0, [{p}]",
            "movdqa xmm1, [{p} + 16]",
            "movdqa xmm2, [{p} + 32]",
            "movdqa xmm3, [{p} + 48]",
            "movdqa xmm4, [{p} + 64]",
            "movdqa xmm5, [{p} + 80]",
            "movdqa xmm6, [{p} + 96]",
            "movdqa xmm7, [{p} + 112]",
            "movdqa xmm8, [{p} + 128]",
            "movdqa xmm9, [{p} + 144]",
            "movdqa xmm10, [{p} + 160]",
            "movdqa xmm11, [{p} + 176]",
            "movdqa xmm12, [{p} + 192]",
            "movdqa xmm13, [{p} + 208]",
            "movdqa xmm14, [{p} + 224]",
            "movdqa xmm15, [{p} + 240]",
            "add {p}, 256",
            "cmp {p}, {end}",
            "jb 2b",
            p = inout(reg) ptr => _,
            end = in(reg) ptr.add(len),
            out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _,
            out("xmm4") _, out("xmm5") _, out("xmm6") _, out("xmm7") _,
            out("xmm8") _, out("xmm9") _, out("xmm10") _, out("xmm11") _,
            out("xmm12") _, out("xmm13") _, out("xmm14") _, out("xmm15") _,
            options(nostack, readonly),
        );
    }
}

unsafe fn read_sse2_prefetch(ptr: *const u8, len: usize, distance: usize) {
    // SAFETY: as read_sse2; prefetches never fault.
    unsafe {
        asm!(
            "2:",
            "prefetcht0 [{p} + {d}]",
            "prefetcht0 [{p} + {d} + 64]",
            "prefetcht0 [{p} + {d} + 128]",
            "prefetcht0 [{p} + {d} + 192]",
            "movdqa xmm0, [{p}]",
            "movdqa xmm1, [{p} + 16]",
            "movdqa xmm2, [{p} + 32]",
            "movdqa xmm3, [{p} + 48]",
            "movdqa xmm4, [{p} + 64]",
            "movdqa xmm5, [{p} + 80]",
            "movdqa xmm6, [{p} + 96]",
            "movdqa xmm7, [{p} + 112]",
            "movdqa xmm8, [{p} + 128]",
            "movdqa xmm9, [{p} + 144]",
            "movdqa xmm10, [{p} + 160]",
            "movdqa xmm11, [{p} + 176]",
            "movdqa xmm12, [{p} + 192]",
            "movdqa xmm13, [{p} + 208]",
            "movdqa xmm14, [{p} + 224]",
            "movdqa xmm15, [{p} + 240]",
            "add {p}, 256",
            "cmp {p}, {end}",
            "jb 2b",
            p = inout(reg) ptr => _,
            end = in(reg) ptr.add(len),
            d = in(reg) distance,
            out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _,
            out("xmm4") _, out("xmm5") _, out("xmm6") _, out("xmm7") _,
            out("xmm8") _, out("xmm9") _, out("xmm10") _, out("xmm11") _,
            out("xmm12") _, out("xmm13") _, out("xmm14") _, out("xmm15") _,
            options(nostack, readonly),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chase_follows_the_chain_and_stops_where_the_count_says() {
        // A 4-cycle 0 -> 2 -> 1 -> 3 -> 0, one pointer per 64-byte line.
        #[repr(C, align(64))]
        struct Line([u64; 8]);
        let mut lines: Vec<Line> = (0..4).map(|_| Line([0; 8])).collect();
        let base = lines.as_mut_ptr() as *mut u64;
        let addr = |i: usize| unsafe { base.add(i * 8) };
        for (from, to) in [(0, 2), (2, 1), (1, 3), (3, 0)] {
            unsafe { *addr(from) = addr(to) as u64 };
        }
        // 8 loads = two laps: back at the start; 16 loads likewise.
        let end = unsafe { pointer_chase(addr(0), 8) };
        assert_eq!(end, addr(0) as *const u64);
        let end = unsafe { pointer_chase(addr(2), 16) };
        assert_eq!(end, addr(2) as *const u64);
    }

    #[test]
    fn every_supported_width_reads_with_and_without_prefetch() {
        let buf = vec![7u8; 64 * 1024 + 64];
        let off = buf.as_ptr().align_offset(64);
        let p = unsafe { buf.as_ptr().add(off) };
        for w in [VectorWidth::Sse2, VectorWidth::Avx2, VectorWidth::Avx512] {
            if w.supported() {
                unsafe {
                    sequential_read(p, 64 * 1024, w, None);
                    sequential_read(p, 64 * 1024, w, Some(4096));
                }
            }
        }
        assert!(VectorWidth::widest().supported());
        assert!(VectorWidth::widest().bits() >= 128);
    }
}
