//! Every instruction-level primitive cpudoctor times: PAUSE runs, dependent ALU chains, the
//! time-stamp counter. All inline assembly lives here, behind `cfg(target_arch)`, so porting
//! to another architecture touches this module only.
//!
//! On an architecture without an implementation, [`SUPPORTED`] is false and the functions are
//! absent; probes check [`SUPPORTED`] (through [`require_x86_64`]) and report `skipped`.

#[cfg(target_arch = "x86_64")]
mod x86_64;
#[cfg(target_arch = "x86_64")]
pub use x86_64::*;

/// True where this module has an implementation (x86-64 only for now).
pub const SUPPORTED: bool = cfg!(target_arch = "x86_64");

/// The name of the architecture this binary was built for, as Rust spells it.
pub const TARGET_ARCH: &str = std::env::consts::ARCH;

/// `Ok(())` on x86-64; otherwise the reason a probe that needs x86 instructions gives for
/// skipping.
pub fn require_x86_64() -> Result<(), String> {
    if SUPPORTED {
        Ok(())
    } else {
        Err(format!(
            "needs x86-64 instructions (PAUSE, RDTSC); this binary is built for {TARGET_ARCH}"
        ))
    }
}
