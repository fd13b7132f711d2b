//! x86-64 primitives, by concern: the time-stamp counter here, PAUSE and ALU chains in
//! [`pause`], locked operations at any address in [`atomics`], pointer chases and vector read
//! loops (the memory probes' and the noisy-neighbour victim's) in [`memory`].
//! Each timed kernel is a single `asm!` block so the compiler can neither hoist, fuse nor drop
//! the instructions being measured.

mod atomics;
mod memory;
mod pause;

pub use atomics::*;
pub use memory::*;
pub use pause::*;

use std::arch::x86_64::{__rdtscp, _mm_lfence, _rdtsc};

/// 64 copies of one instruction line, as a string literal `asm!` accepts.
#[macro_export]
#[doc(hidden)]
macro_rules! repeat64 {
    ($s:literal) => {
        concat!(
            $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s,
            $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s,
            $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s
        )
    };
}

/// Reads the time-stamp counter at the start of a timed region.
///
/// `lfence` before `rdtsc` keeps earlier instructions from leaking into the region
/// (Intel SDM vol. 2B, RDTSC; AMD APM vol. 3 gives LFENCE the same dispatch-serialising
/// role when `lfence` is configured serialising, which Linux does on AMD).
#[inline(always)]
pub fn tsc_start() -> u64 {
    // SAFETY: lfence and rdtsc have no memory effects and exist on every x86-64 CPU.
    unsafe {
        _mm_lfence();
        let t = _rdtsc();
        _mm_lfence();
        t
    }
}

/// Reads the time-stamp counter at the end of a timed region.
///
/// `rdtscp` waits for all earlier instructions to complete; the trailing `lfence` keeps later
/// instructions from starting before the read.
#[inline(always)]
pub fn tsc_end() -> u64 {
    let mut aux = 0u32;
    // SAFETY: rdtscp writes only `aux`; lfence has no memory effect.
    unsafe {
        let t = __rdtscp(&mut aux);
        _mm_lfence();
        t
    }
}
