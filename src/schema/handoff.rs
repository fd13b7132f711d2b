//! The handoff probe's names (`cpudoctor spin --handoff`): its metrics, samples and series are
//! keyed by runtime and sender delay, and each key is built here once, for the probe that
//! writes it and the report that reads it back, so a rename cannot drop a table column.

use crate::names::probe;
use serde::{Deserialize, Serialize};

/// The probe's name in the fingerprint.
pub const PROBE: &str = probe::HANDOFF;

/// The series of the ideal wall time per delay (`items x max(work, D)`).
pub const IDEAL_SERIES: &str = "ideal_ms";

/// The model lock's headline: legacy over normalized wall time at its worst delay.
pub const MODEL_RATIO_METRIC: &str = "model_legacy_over_normalized_ratio";

/// `1` for 1 ms, `1p5` for 1.5 ms: delays as they appear in metric names.
pub fn delay_label(delay_ms: f64) -> String {
    format!("{delay_ms}").replace('.', "p")
}

/// `delay_1p5ms`: a delay as a key of samples and lock statistics.
pub fn delay_key(delay_ms: f64) -> String {
    format!("delay_{}ms", delay_label(delay_ms))
}

/// What a handoff figure measures, per runtime and delay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Quantity {
    /// Wall time of all items.
    WallMs,
    /// CPU the waiting threads burned (sender acquiring, worker waiting for work).
    WaitCpuMs,
    /// Time the sender waited for the lock.
    SenderLockWaitMs,
    /// CPU of the whole process.
    ProcessCpuMs,
}

impl Quantity {
    /// The quantity's name in keys (`wall_ms`).
    pub fn key(self) -> &'static str {
        match self {
            Quantity::WallMs => "wall_ms",
            Quantity::WaitCpuMs => "wait_cpu_ms",
            Quantity::SenderLockWaitMs => "sender_lock_wait_ms",
            Quantity::ProcessCpuMs => "process_cpu_ms",
        }
    }

    /// The metric of a runtime's median at a delay (`rust_std_delay_1ms_wall_ms`).
    pub fn metric(self, runtime: &str, delay_ms: f64) -> String {
        format!("{runtime}_{}_{}", delay_key(delay_ms), self.key())
    }

    /// The raw samples of a runtime at a delay (`wall_ms.rust_std.delay_1ms`).
    pub fn samples(self, runtime: &str, delay_ms: f64) -> String {
        format!("{}.{runtime}.{}", self.key(), delay_key(delay_ms))
    }

    /// The series of a runtime's medians over the delays (`wall_ms.rust_std`).
    pub fn series(self, runtime: &str) -> String {
        format!("{}.{runtime}", self.key())
    }
}

/// The ideal wall time at a delay (`delay_1ms_ideal_ms`).
pub fn ideal_metric(delay_ms: f64) -> String {
    format!("{}_ideal_ms", delay_key(delay_ms))
}

/// A runtime's largest wall time over ideal across the delays.
pub fn worst_slowdown_metric(runtime: &str) -> String {
    format!("{runtime}_worst_slowdown_ratio")
}

/// The model lock's legacy/normalized ratio at one delay.
pub fn model_ratio_metric(delay_ms: f64) -> String {
    format!("model_legacy_over_normalized_{}_ratio", delay_key(delay_ms))
}

/// The raw legacy/normalized pair ratios at one delay.
pub fn model_ratio_samples(delay_ms: f64) -> String {
    format!("model_legacy_over_normalized.{}", delay_key(delay_ms))
}

/// What became of one runtime (`effects.runtimes[name].status`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuntimeStatus {
    /// Ran at every delay.
    Ok,
    /// Could not run here (a toolchain missing); `reason` says why.
    Skipped,
    /// Ran and failed; `reason` says how.
    Failed,
}

impl RuntimeStatus {
    /// The word in the JSON and in table cells.
    pub fn word(self) -> &'static str {
        match self {
            RuntimeStatus::Ok => "ok",
            RuntimeStatus::Skipped => "skipped",
            RuntimeStatus::Failed => "failed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The names fingerprints already carry: a change here breaks every saved file.
    #[test]
    fn names_are_those_saved_fingerprints_carry() {
        assert_eq!(delay_label(1.0), "1");
        assert_eq!(delay_label(1.5), "1p5");
        assert_eq!(
            Quantity::WallMs.metric("rust_std", 2.5),
            "rust_std_delay_2p5ms_wall_ms"
        );
        assert_eq!(
            Quantity::WaitCpuMs.samples("go_sync", 1.0),
            "wait_cpu_ms.go_sync.delay_1ms"
        );
        assert_eq!(Quantity::WallMs.series("c_pthread"), "wall_ms.c_pthread");
        assert_eq!(ideal_metric(3.0), "delay_3ms_ideal_ms");
        assert_eq!(
            model_ratio_metric(2.5),
            "model_legacy_over_normalized_delay_2p5ms_ratio"
        );
        assert_eq!(
            model_ratio_samples(1.0),
            "model_legacy_over_normalized.delay_1ms"
        );
        assert_eq!(
            serde_json::to_string(&RuntimeStatus::Skipped).unwrap(),
            "\"skipped\""
        );
    }
}
