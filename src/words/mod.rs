//! Every sentence a verdict, a finding or a comparison prints, in one place.
//!
//! The judges (`hazards` for a fingerprint, `diagnose`'s rules for a profile) decide levels and
//! figures and call here for the words; nothing above this layer writes a sentence of its own.
//! Words sit below the judges, not above them, because a saved fingerprint carries its
//! verdicts' sentences (`Verdict::summary`, `explanation`): they are written when the verdict
//! is, and a file read back years later says what the build that judged it said.
//!
//! Each function here takes typed facts (numbers with units in their names, levels, names) and
//! returns text; none measures, judges or reads a file.

pub mod compare;
pub mod diagnose;
pub mod disturbance;
pub mod experiment;
pub mod findings;
pub mod lines;
pub mod machine;
pub mod verdicts;
pub mod why;
pub mod work;
