//! PAUSE runs and dependent ALU chains: the PAUSE probe's kernels and the core-clock estimate.

use crate::repeat64;
use std::arch::asm;

/// Number of dependent `add` instructions in one iteration of [`dependent_add_chain`].
pub const ADDS_PER_CHAIN_ITERATION: u64 = 64;

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
