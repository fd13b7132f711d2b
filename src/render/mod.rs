//! Everything that turns a typed result into something to read: a fingerprint (typed in
//! [`crate::schema`]) on the terminal ([`terminal`], the c2c heatmap [`heatmap`], and
//! [`handoff`] for `spin --handoff`), a diagnosis ([`diagnosis`]) and its flame graphs
//! ([`flame`]), the comparisons `compare` made (two fingerprints [`diff`], two diagnoses
//! [`profile_diff`] led by [`why`], a fleet [`fleet_text`]), an experiment ([`experiment`]),
//! and the HTML report ([`html`]) with its SVG charts ([`charts`]). [`text`] holds the table
//! and the paragraph wrapper the terminal views share. Every file written for another program
//! (JSON, Prometheus, pprof, folded stacks) comes from [`export`], one contract: a typed result
//! in, bytes out. Nothing here compares or judges (that is `compare`'s and `hazards'`); only
//! the binary writes anything anywhere.

pub mod charts;
pub mod diagnosis;
pub mod diff;
pub mod experiment;
pub mod export;
pub mod flame;
pub mod fleet_text;
pub mod handoff;
pub mod heatmap;
pub mod html;
pub mod profile_diff;
pub mod terminal;
pub mod text;
pub mod why;
