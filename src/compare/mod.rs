//! Comparisons, each returning typed results: two fingerprints ([`fingerprint`], with the
//! machine facts in [`facts`]), a fleet of hosts in bands ([`fleet`]), two diagnoses by
//! function ([`profile`]), their stacks for a differential flame graph ([`flame`]), their
//! wall-clock views ([`wall`], part of [`profile`]'s diff), why one side is slower ([`why`]:
//! the loss attributed to mechanisms and the machine figures that govern them, also part of
//! [`profile`]'s diff), the watched cache lines of both ([`lines`], part of [`profile`]'s
//! diff), and several saved diagnoses against the first for one report
//! ([`diagnoses`]). The few sentences a result carries (a change rule, why a figure was not
//! compared) come from `words`. The renderers in `render` print what these return; nothing
//! here prints, and nothing in `render` compares.
//!
//! One vocabulary: the two runs of a comparison are the [`Side`]s `old` (the baseline, the
//! first file) and `new`.

pub mod diagnoses;
pub mod facts;
pub mod fingerprint;
pub mod flame;
pub mod fleet;
pub mod lines;
pub mod profile;
pub mod wall;
pub mod why;

use serde::Serialize;

/// One of the two runs a comparison holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Side {
    /// The first file (the baseline).
    Old,
    /// The second file.
    New,
}

impl Side {
    /// The word in JSON and text (`old`).
    pub fn word(self) -> &'static str {
        match self {
            Side::Old => "old",
            Side::New => "new",
        }
    }
}
