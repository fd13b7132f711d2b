//! cpudoctor measures the CPU behaviours software trips on (slow PAUSE, cache-line transfers,
//! split locks, page size and TLB reach), says what they mean for software, and compares
//! machines.
//!
//! Layers, lowest first; each imports only those below it (`tests/layers.rs` checks):
//! [`error`], [`format`] (numbers and units as text), [`names`] (probe and metric ids),
//! [`stats`] (medians, intervals, ckmeans), [`output`] (the one writer of the files a user
//! names), [`process`] (stops and reaps child processes), [`arch`] (every line of inline
//! assembly), [`machine`] (host facts), [`measure`] (clocks, pinning, buffers), [`spin`]
//! (runtimes' spin-before-block policies), [`reference`](mod@reference) (figures with their
//! sources), [`schema`] (the fingerprint's typed vocabulary), [`words`] (every sentence),
//! [`probes`], [`hazards`], [`diagnose`], [`experiment`], [`compare`] (every comparison,
//! typed), [`render`] (text and bytes from typed results), [`session`]. The library never
//! prints and never exits; the `cpudoctor` binary parses arguments and wires these parts.

pub mod arch;
pub mod compare;
pub mod diagnose;
pub mod error;
pub mod experiment;
pub mod format;
pub mod hazards;
pub mod machine;
pub mod measure;
pub mod names;
pub mod output;
pub mod probes;
pub mod process;
pub mod reference;
pub mod render;
pub mod schema;
pub mod session;
pub mod spin;
pub mod stats;
pub mod words;
