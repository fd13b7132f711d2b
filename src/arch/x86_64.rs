//! x86-64 primitives. Each timed kernel is a single `asm!` block so the compiler can neither
//! hoist, fuse nor drop the instructions being measured.

use std::arch::asm;
use std::arch::x86_64::{__rdtscp, _mm_lfence, _rdtsc};

/// Number of dependent `add` instructions in one iteration of [`dependent_add_chain`].
pub const ADDS_PER_CHAIN_ITERATION: u64 = 64;

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

/// Executes `count` PAUSE instructions in a tight loop (`pause; dec; jnz`).
///
/// The loop overhead (a decrement and a taken branch) runs in parallel with PAUSE on every
/// core this tool targets; the bench script's C loop has the same shape, so the two compare
/// like with like.
#[inline(always)]
pub fn pause_loop(count: u64) {
    if count == 0 {
        return;
    }
    // SAFETY: only registers are touched.
    unsafe {
        asm!(
            "2:",
            "pause",
            "dec {n}",
            "jnz 2b",
            n = inout(reg) count => _,
            options(nomem, nostack),
        );
    }
}

/// 64 copies of one instruction line, as a string literal `asm!` accepts.
macro_rules! repeat64 {
    ($s:literal) => {
        concat!(
            $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s,
            $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s,
            $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s, $s
        )
    };
}

/// Runs `iterations` x [`ADDS_PER_CHAIN_ITERATION`] register-register `add`s, each depending on
/// the one before, so the chain takes one core cycle per `add` on every x86-64 core.
///
/// Register-register adds are used rather than `add reg, imm` because recent Intel cores can
/// fold immediate adds at rename, which would make the chain shorter than it looks.
#[inline(never)]
pub fn dependent_add_chain(iterations: u64) -> u64 {
    let mut acc: u64 = 0;
    let step: u64 = std::hint::black_box(1);
    if iterations == 0 {
        return acc;
    }
    // SAFETY: only registers are touched.
    unsafe {
        asm!(
            "2:",
            repeat64!("add {acc}, {step}\n"),
            "dec {n}",
            "jnz 2b",
            acc = inout(reg) acc,
            step = in(reg) step,
            n = inout(reg) iterations => _,
            options(nomem, nostack),
        );
    }
    acc
}

/// Dependent `add`s run between two PAUSEs by [`pause_loop_spaced`]: 5 x 64 = 320, about 320
/// core cycles, well past the gap (128 cycles by default in KVM's `ple_gap` and
/// `pause_filter_thresh`) within which a hypervisor counts PAUSEs as one spin loop.
pub const SPACING_ADDS_PER_PAUSE: u64 = 5 * 64;

/// Executes `count` PAUSEs, each followed by [`SPACING_ADDS_PER_PAUSE`] dependent adds, so the
/// PAUSEs are too far apart for a hypervisor's pause-loop detection: the control run for
/// pause-loop exiting.
#[inline(never)]
pub fn pause_loop_spaced(count: u64) {
    if count == 0 {
        return;
    }
    let step: u64 = std::hint::black_box(1);
    // SAFETY: only registers are touched.
    unsafe {
        asm!(
            "2:",
            "pause",
            "mov {i}, 5",
            "3:",
            repeat64!("add {acc}, {step}\n"),
            "dec {i}",
            "jnz 3b",
            "dec {n}",
            "jnz 2b",
            acc = inout(reg) 0u64 => _,
            step = in(reg) step,
            i = out(reg) _,
            n = inout(reg) count => _,
            options(nomem, nostack),
        );
    }
}
