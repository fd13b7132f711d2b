//! Locked read-modify-write instructions at any address, aligned or not: the kernels of the
//! core-to-core, split-lock and noisy-neighbour probes; and the sharing probe's kernels (plain
//! and locked counter updates, a writer's stores and a reader's loads), in assembly so a debug
//! build times the same instructions.
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

/// Executes `count` back-to-back `lock xadd qword ptr [ptr], 1`: what `AtomicU64::fetch_add`
/// compiles to when the old value is used (Java's `getAndIncrement`, a `LongAdder` cell's
/// update is a `lock cmpxchg` of the same cost). The old value goes to a register and is
/// dropped, so iterations depend on each other only through the memory operand.
///
/// # Safety
/// `ptr` must be valid for reads and writes of 8 bytes and 8-byte aligned for the duration of
/// the call; other threads may access those bytes only with locked instructions.
#[inline(never)]
pub unsafe fn lock_xadd_loop(ptr: *mut u64, count: u64) {
    if count == 0 {
        return;
    }
    // SAFETY: as documented; only `ptr`'s 8 bytes and registers are touched.
    unsafe {
        asm!(
            "2:",
            "mov {v}, 1",
            "lock xadd qword ptr [{ptr}], {v}",
            "dec {n}",
            "jnz 2b",
            ptr = in(reg) ptr,
            v = out(reg) _,
            n = inout(reg) count => _,
            options(nostack),
        );
    }
}

/// Executes `count` plain stores to the 8 bytes at `ptr` (the loop counter as the value): a
/// field written on every pass, as the JVM wrote `_secondary_super_cache` on each subtype check
/// (JDK-8180450). Stores do not wait for each other, so alone the loop runs at the store
/// buffer's drain rate.
///
/// # Safety
/// `ptr` must be valid for writes of 8 bytes, and no other thread may access those bytes during
/// the call (other bytes of the same line may be read: that is the point).
#[inline(never)]
pub unsafe fn store_loop(ptr: *mut u64, count: u64) {
    if count == 0 {
        return;
    }
    // SAFETY: as documented; only `ptr`'s 8 bytes and registers are touched.
    unsafe {
        asm!(
            "2:",
            "mov qword ptr [{ptr}], {n}",
            "dec {n}",
            "jnz 2b",
            ptr = in(reg) ptr,
            n = inout(reg) count => _,
            options(nostack),
        );
    }
}

/// Executes `8 * rounds` plain loads of the 8 bytes at `ptr`, eight independent loads per
/// round: a field read on every pass, as every subtype check read `_secondary_supers`. Alone
/// they hit L1 several per cycle; while another core writes the line, each write invalidates it
/// and loads already executed are replayed (Intel counts `MACHINE_CLEARS.MEMORY_ORDERING`, the
/// counter that quadrupled in the Netflix JVM case).
///
/// # Safety
/// `ptr` must be valid for reads of 8 bytes for the duration of the call; other threads may
/// write them (a torn read cannot happen for an aligned qword, and the value is discarded).
#[inline(never)]
pub unsafe fn load_loop(ptr: *const u64, rounds: u64) {
    if rounds == 0 {
        return;
    }
    // SAFETY: as documented; only reads `ptr`'s 8 bytes.
    unsafe {
        asm!(
            "2:",
            "mov {v}, qword ptr [{ptr}]",
            "mov {v}, qword ptr [{ptr}]",
            "mov {v}, qword ptr [{ptr}]",
            "mov {v}, qword ptr [{ptr}]",
            "mov {v}, qword ptr [{ptr}]",
            "mov {v}, qword ptr [{ptr}]",
            "mov {v}, qword ptr [{ptr}]",
            "mov {v}, qword ptr [{ptr}]",
            "dec {n}",
            "jnz 2b",
            ptr = in(reg) ptr,
            v = out(reg) _,
            n = inout(reg) rounds => _,
            options(nostack, readonly),
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
        unsafe { lock_xadd_loop(&mut x, 5) };
        assert_eq!(x, 1010);
        unsafe { store_loop(&mut x, 3) };
        assert_eq!(x, 1, "the last store writes the counter's last value");
        unsafe { load_loop(&x, 4) };
        assert_eq!(x, 1);
        // Neighbouring bytes untouched.
        assert!(b.0[..60].iter().chain(&b.0[68..]).all(|&x| x == 0));
    }
}
