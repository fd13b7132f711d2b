//! Locked read-modify-write instructions at any address, aligned or not: the kernels of the
//! core-to-core, split-lock and noisy-neighbour probes; and the counter updates of the sharing
//! probe, plain and locked, in assembly so a debug build times the same instructions.
//!
//! Rust's atomics require natural alignment, so they cannot express the case the split-lock
//! probes exist for: a `lock cmpxchg` on 8 bytes that straddle two cache lines, which the CPU
//! can only make atomic with a bus lock. The same instructions serve the aligned case, so an
//! aligned and a split run differ in the address only.

use std::arch::asm;

/// `lock cmpxchg qword ptr [ptr], new` with `expected` in RAX: stores `new` if the 8 bytes at
/// `ptr` equal `expected`. Returns the value found (equal to `expected` when the swap happened).
///
/// # Safety
/// `ptr` must be valid for reads and writes of 8 bytes, at any alignment, for the duration of
/// the call, and those bytes must not be accessed concurrently other than by locked
/// instructions from this module.
#[inline(always)]
pub unsafe fn lock_cmpxchg_u64(ptr: *mut u8, expected: u64, new: u64) -> u64 {
    let found: u64;
    // SAFETY: the caller guarantees `ptr` is valid for 8 bytes; cmpxchg touches only those
    // bytes, RAX and the flags (which `asm!` assumes clobbered unless told otherwise).
    unsafe {
        asm!(
            "lock cmpxchg qword ptr [{ptr}], {new}",
            ptr = in(reg) ptr,
            new = in(reg) new,
            inout("rax") expected => found,
            options(nostack),
        );
    }
    found
}

/// Executes `count` back-to-back `lock add qword ptr [ptr], 1`: the noisy neighbour's loop.
/// At a line-straddling `ptr`, each one is a bus lock.
///
/// # Safety
/// As for [`lock_cmpxchg_u64`].
#[inline(never)]
pub unsafe fn lock_add_loop(ptr: *mut u8, count: u64) {
    if count == 0 {
        return;
    }
    // SAFETY: as above; the loop counter lives in a register.
    unsafe {
        asm!(
            "2:",
            "lock add qword ptr [{ptr}], 1",
            "dec {n}",
            "jnz 2b",
            ptr = in(reg) ptr,
            n = inout(reg) count => _,
            options(nostack),
        );
    }
}

/// Executes `count` plain increments of the 8 bytes at `ptr` (`mov`, `inc`, `mov`): what a
/// non-atomic `field += 1` compiles to. Each iteration's load depends on the previous store,
/// so the loop runs at store-to-load forwarding speed while the line stays in this core.
///
/// # Safety
/// `ptr` must be valid for reads and writes of 8 bytes, and no other thread may access those
/// bytes during the call (other bytes of the same line may be in use: that is the point).
#[inline(never)]
pub unsafe fn store_increment_loop(ptr: *mut u64, count: u64) {
    if count == 0 {
        return;
    }
    // SAFETY: as documented; only `ptr`'s 8 bytes and registers are touched.
    unsafe {
        asm!(
            "2:",
            "mov {v}, qword ptr [{ptr}]",
            "inc {v}",
            "mov qword ptr [{ptr}], {v}",
            "dec {n}",
            "jnz 2b",
            ptr = in(reg) ptr,
            v = out(reg) _,
            n = inout(reg) count => _,
            options(nostack),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cmpxchg_swaps_only_on_match_at_a_line_straddling_address() {
        // 128-byte aligned block; offset 60 puts bytes 60..68 across the 64-byte boundary.
        #[repr(C, align(128))]
        struct Block([u8; 128]);
        let mut b = Block([0; 128]);
        let p = unsafe { b.0.as_mut_ptr().add(60) };
        assert_eq!(unsafe { lock_cmpxchg_u64(p, 0, 7) }, 0);
        assert_eq!(
            unsafe { lock_cmpxchg_u64(p, 0, 9) },
            7,
            "no swap on mismatch"
        );
        assert_eq!(unsafe { lock_cmpxchg_u64(p, 7, 8) }, 7);
        unsafe { lock_add_loop(p, 5) };
        assert_eq!(u64::from_le_bytes(b.0[60..68].try_into().unwrap()), 13);
        let mut x = 5u64;
        unsafe { store_increment_loop(&mut x, 1000) };
        assert_eq!(x, 1005);
        // Neighbouring bytes untouched.
        assert!(b.0[..60].iter().chain(&b.0[68..]).all(|&x| x == 0));
    }
}
