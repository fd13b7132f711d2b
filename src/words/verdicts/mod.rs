//! The sentences of the hazards' verdicts: summary, figure, reference and explanation, each
//! from the figures the hazard judged.
