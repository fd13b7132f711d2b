//! cpudoctor measures the CPU behaviours software trips on (slow PAUSE, cache-line transfers,
//! split locks, page size and TLB reach), says what they mean for software, and compares
//! machines.
//!
//! Data flows one way: [`measure`] -> [`probes`] -> fingerprint ([`report::schema`]) ->
//! [`hazards`] -> [`report`]. [`machine`] gathers host facts, [`arch`] holds every line of
//! inline assembly, [`spin`] models runtimes' spin-before-block policies, [`process`] stops and
//! reaps the child processes probes and diagnose start. The library never
//! prints and never exits; the `cpudoctor` binary parses arguments and wires these parts.

pub mod arch;
pub mod diagnose;
pub mod error;
pub mod format;
pub mod hazards;
pub mod machine;
pub mod measure;
pub mod probes;
pub mod process;
pub mod report;
pub mod schema;
pub mod session;
pub mod spin;
