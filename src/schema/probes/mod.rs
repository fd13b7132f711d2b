//! Each probe's typed result: its figures, its raw record (params, effects, samples) and what
//! its analysis derives beside the figures, one module per probe (see [`super::figures`]).

pub mod bandwidth;
pub mod mem_latency;
