//! The work a diagnosed program did and what it took (issue 31): the loss `diff` measures
//! before it attributes it. One value per run, so several runs give an interval.

use serde::{Deserialize, Serialize};

/// What one run's figure is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "measure")]
pub enum WorkMeasure {
    /// Wall-clock seconds of a started command, spawn to exit; lower is better.
    WallTime,
    /// CPU seconds of a started command and its children (user + system); lower is better.
    CpuTime,
    /// The first capture group (or whole match) of `regex` in the command's output, as a
    /// number.
    Metric {
        /// The regular expression given.
        regex: String,
        /// Whether a higher figure is better (a rate, a score) instead of lower (a time).
        higher_is_better: bool,
    },
    /// A rate the user read elsewhere and named (`--rate`: an attached server's TPS from its
    /// own client); higher is better.
    Rate {
        /// The unit the user gave (`TPS`), or empty.
        unit: String,
    },
}

impl WorkMeasure {
    /// Whether a higher figure is better.
    pub fn higher_is_better(&self) -> bool {
        match self {
            WorkMeasure::WallTime | WorkMeasure::CpuTime => false,
            WorkMeasure::Metric {
                higher_is_better, ..
            } => *higher_is_better,
            WorkMeasure::Rate { .. } => true,
        }
    }
}

/// The work figure of a diagnosis: one value per run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkRecord {
    /// What each value is.
    #[serde(flatten)]
    pub measure: WorkMeasure,
    /// One value per run, in run order: seconds for wall or CPU time, the metric's value, or
    /// the rate given.
    pub values: Vec<f64>,
    /// True when the values come from runs with the profiler attached (the diagnosed run);
    /// false when they come from runs timed without it (`--runs`), which its overhead does
    /// not touch.
    pub with_profiler: bool,
}
