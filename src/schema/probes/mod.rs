//! Each probe's typed result, one module per probe (see [`super::figures`] for the contract):
//! its raw record (what it measured, as saved: params, effects, samples), its figures (what its
//! analysis made of it) and what the analysis derives beside the figures. The doc comment of
//! every field is the reference for what a saved file holds.

pub mod bandwidth;
pub mod c2c;
pub mod mem_latency;
pub mod sharing;
