//! Two diagnoses' stacks compared for a differential flame graph: inferno's differential
//! folding of their folded stacks, the old counts normalised to the new total so that runs of
//! different length compare by share. `render::flame` draws it. On-CPU samples only, with or
//! without a wall-clock view: a file without one has no off-CPU time to compare with, and the
//! wall shares compare in [`super::profile`].

use crate::diagnose::Diagnosis;
use crate::diagnose::stacks::{LeafOffsets, folded_samples};

/// Why no flame graph was drawn.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FlameError {
    /// The diagnosis has no samples (or no stacks and no functions).
    #[error("no samples to draw")]
    NoSamples,
    /// inferno refused the input.
    #[error("inferno could not draw it: {0}")]
    Inferno(String),
}

/// The differential folding from `old` to `new`: one line per stack of `new`, with the old and
/// new counts (old scaled to the new total).
pub fn differential_folded(old: &Diagnosis, new: &Diagnosis) -> Result<String, FlameError> {
    let (a, b) = (
        folded_samples(old, LeafOffsets::Drop),
        folded_samples(new, LeafOffsets::Drop),
    );
    if b.trim().is_empty() {
        return Err(FlameError::NoSamples);
    }
    let mut lines = Vec::new();
    inferno::differential::from_readers(
        inferno::differential::Options {
            normalize: true,
            strip_hex: false,
        },
        a.as_bytes(),
        b.as_bytes(),
        &mut lines,
    )
    .map_err(|e| FlameError::Inferno(e.to_string()))?;
    Ok(String::from_utf8_lossy(&lines).into_owned())
}
