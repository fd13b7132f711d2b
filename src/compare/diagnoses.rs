//! Saved diagnoses compared for one report: each later diagnosis against the first, as a
//! function-level diff ([`crate::compare::profile`]) and as the differential folding a
//! differential flame graph draws ([`super::flame`]). `render::html::diagnoses` renders it.

use super::flame::{FlameError, differential_folded};
use crate::compare::profile::{DiagnosisDiff, compare};
use crate::diagnose::Diagnosis;

/// One diagnosis and the name it goes by on the page (usually its file name).
#[derive(Debug, Clone, PartialEq)]
pub struct DiagnosisRun {
    /// Name shown in headings and tables.
    pub label: String,
    /// The diagnosis.
    pub diagnosis: Diagnosis,
}

/// Diagnoses compared for one page: at least one, the first the baseline.
#[derive(Debug, Clone, PartialEq)]
pub struct ComparedDiagnoses {
    runs: Vec<DiagnosisRun>,
    diffs: Vec<(DiagnosisDiff, Result<String, FlameError>)>,
}

impl ComparedDiagnoses {
    /// Each later run against the first; `None` when there are none.
    pub fn new(runs: Vec<DiagnosisRun>) -> Option<ComparedDiagnoses> {
        let first = runs.first()?;
        let diffs = runs[1..]
            .iter()
            .map(|other| {
                (
                    compare(
                        &first.diagnosis,
                        &other.diagnosis,
                        &first.label,
                        &other.label,
                    ),
                    differential_folded(&first.diagnosis, &other.diagnosis),
                )
            })
            .collect();
        Some(ComparedDiagnoses { runs, diffs })
    }

    /// The runs, the first being the one the others are compared with.
    pub fn runs(&self) -> &[DiagnosisRun] {
        &self.runs
    }

    /// For each later run: its diff from the first, and the differential folding of their
    /// stacks (or why there is none).
    pub fn diffs(&self) -> &[(DiagnosisDiff, Result<String, FlameError>)] {
        &self.diffs
    }
}
