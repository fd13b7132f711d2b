//! The sentences of `cpudoctor diagnose`'s findings: what was seen, what it costs on this
//! machine, what to do.
//!
//! `diagnose::analyse::rules` decides which findings there are, their levels and figures,
//! and fills the small fact structs here; each function returns one title, evidence line,
//! explanation or piece of advice. The costs quoted are the diagnosed machine's own
//! (measured now or from a saved check), passed in; no figure of another machine is typed
//! into a sentence.

pub mod code;
pub mod costs;
pub mod counters;
pub mod innodb;
pub mod jvm;
pub mod pages;
pub mod runtimes;
pub mod waits;
