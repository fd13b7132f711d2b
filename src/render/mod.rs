//! Everything that turns a fingerprint (typed in [`crate::schema`]) into something to read:
//! terminal tables ([`terminal`], the c2c heatmap [`heatmap`], and [`handoff`] for
//! `spin --handoff`), the comparison of two fingerprints ([`diff`]), fleets ([`fleet`]) and
//! the HTML report ([`html`]) with its SVG charts ([`charts`]).
//! Every file written for another program (JSON, Prometheus, pprof, folded stacks) comes from
//! [`export`], one contract: a typed result in, bytes out; only the binary writes them anywhere.

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
