//! The sentences of `cpudoctor experiment`: a variant's effect, and the line of meaning beside
//! each comparison, in the variant's own terms. `experiment::ratios` decides the effect (by
//! the one change rule, `crate::stats::effect`) and the case; these functions say it.

use crate::format::human_bytes;
use crate::stats::effect::Reading;

/// A speed factor (above 1: faster) as the change rule read it with its interval
/// (`experiment::ratios::effect`): `1.42x slower` / `1.10x faster` (beyond noise) /
/// `no measurable effect` (negligible) / `no clear effect (...)` (the interval holds 1).
pub fn effect(speed: f64, reading: Reading) -> String {
    let (by, way) = if speed >= 1.0 {
        (speed, "faster")
    } else {
        (1.0 / speed, "slower")
    };
    match reading {
        Reading::Negligible => "no measurable effect".into(),
        Reading::WithinNoise => {
            format!("no clear effect ({by:.2}x {way}, but the interval holds 1)")
        }
        Reading::Change(_) | Reading::WithinAllowance(_) | Reading::BelowFloor(_) => {
            format!("{by:.2}x {way}")
        }
    }
}

/// Why a comparison has no figure: a variant that failed (`name`, `why`), or no round gave
/// both figures.
pub fn not_measured(failed: Option<(&str, &str)>) -> String {
    match failed {
        Some((name, why)) => format!("not measured: {name} failed ({why})"),
        None => "not measured: no round gave both figures".into(),
    }
}

/// What the huge-pages arm got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HugeGot {
    /// Its huge pages could not be read.
    Unreadable,
    /// None, though asked.
    Nothing,
    /// This many bytes of huge pages (median over rounds).
    Bytes(u64),
}

/// What the huge-pages arm got, in words.
pub fn huge_got(got: HugeGot) -> String {
    match got {
        HugeGot::Unreadable => "its huge pages could not be read".into(),
        HugeGot::Nothing => "it got no huge pages when asked".into(),
        HugeGot::Bytes(b) => format!("it got {} of huge pages when asked", human_bytes(b)),
    }
}

/// 4 KiB pages against huge pages: `effect` from [`effect`], `got` from [`huge_got`].
pub fn pages(effect: &str, unclear: bool, speed: f64, got: &str) -> String {
    if unclear {
        format!("4 KiB pages against huge pages asked: {effect} ({got})")
    } else if speed < 1.0 {
        format!(
            "on 4 KiB pages it runs {:.2}x slower: page walks (TLB misses) cost it; {got}",
            1.0 / speed
        )
    } else {
        format!("on 4 KiB pages it runs {speed:.2}x faster: huge pages do not help it ({got})")
    }
}

/// Who trapped a split-lock neighbour's locks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TrappedBy {
    /// This kernel's split-lock detection.
    Kernel,
    /// The hypervisor.
    Host,
}

/// A noisy neighbour on another CPU (`kind`: `split-locks`, ...).
pub fn neighbour(kind: &str, effect: &str, unclear: bool, trapped: Option<TrappedBy>) -> String {
    if let Some(t) = trapped {
        let by = match t {
            TrappedBy::Kernel => "this kernel",
            TrappedBy::Host => "the host",
        };
        format!("{by} traps split locks: the neighbour barely locked the bus, so trapped, {effect}")
    } else if unclear {
        format!("the {kind} neighbour on another CPU: {effect}")
    } else {
        format!("the {kind} neighbour on another CPU makes it {effect}")
    }
}

/// One CPU placement against another (`class`: the placement's label).
pub fn placement(class: &str, baseline: &str, effect: &str, unclear: bool) -> String {
    if unclear {
        format!("on {class} against {baseline}: {effect}")
    } else {
        format!("on {class} it runs {effect} than on {baseline}")
    }
}

/// `n` CPUs against `n0`: the throughput factor against ideal.
pub fn cpus(n: usize, n0: usize, speed: f64, ideal: f64) -> String {
    format!(
        "{n} CPUs give {speed:.2}x the throughput of {n0} (ideal {ideal:.2}x, {} of it)",
        crate::format::pct(speed / ideal, 0)
    )
}

/// The note of an experiment stopped by a signal: which rounds its figures are of.
pub fn stopped(done: usize, asked: usize) -> String {
    format!(
        "stopped by a signal after {done} of {asked} timed round(s): the figures are of those \
         rounds; the run in flight was killed with every process it started and not counted"
    )
}
