//! PAUSE latency, per logical CPU, in nanoseconds, TSC ticks and core cycles; and whether the
//! hypervisor adds pause-loop exits on top ([`ple`]).
//!
//! Each sample times a run of PAUSEs (`pause; dec; jnz`) on a pinned thread and divides. The
//! core clock is estimated on the same CPU just before, so cycles are core cycles, not TSC
//! ticks. Every CPU is measured because hybrid parts differ by core type (a Raptor Lake P-core
//! and E-core do not agree).

#[cfg(target_arch = "x86_64")]
mod measure;
pub mod ple;

use super::{Probe, ProbeContext, ProbeFailure};
use crate::names::probe;
use crate::schema::ProbeResult;

/// The PAUSE probe.
pub struct PauseProbe;

impl Probe for PauseProbe {
    fn name(&self) -> &'static str {
        probe::PAUSE
    }

    fn about(&self) -> &'static str {
        "PAUSE latency per CPU (ns, core cycles) and hypervisor pause-loop exits"
    }

    fn run(&self, ctx: &ProbeContext) -> Result<ProbeResult, ProbeFailure> {
        crate::arch::require_x86_64().map_err(ProbeFailure::Skipped)?;
        run(ctx)
    }
}

#[cfg(target_arch = "x86_64")]
fn run(ctx: &ProbeContext) -> Result<ProbeResult, ProbeFailure> {
    measure::run_pause(ctx)
}

#[cfg(not(target_arch = "x86_64"))]
fn run(_ctx: &ProbeContext) -> Result<ProbeResult, ProbeFailure> {
    unreachable!("require_x86_64 skips first")
}
