//! Analysing: from a [`super::record::recording::Recording`] to what a reader should act on.
//! Owns:
//! - [`hotspots`]: samples to hot functions and classified hot sites, per thread, with the
//!   stacks, the spins that re-read through a call, and what could not be looked into;
//! - [`disasm`]: the hot code decoded (iced-x86) and told apart: a PAUSE spin, a spin without
//!   PAUSE, a locked read-modify-write (split across a line or not), a load, computation;
//! - what runtimes' and servers' lock code looks like: [`runtimes`] (HotSpot, glibc, Go, .NET,
//!   Rust, PostgreSQL), [`innodb`] (MariaDB's spin, recognised from its code);
//! - [`wall`]: the wall-clock report (running, waiting for a CPU, blocked and why);
//! - [`kernel`]: kernel time (its share per process, its hottest functions, how user space
//!   entered it);
//! - the judges: [`rules`] (findings of the profile) and [`waits`] (findings of the wall-clock
//!   view), whose sentences come from `words::findings`;
//! - [`figures`]: the machine's figures the findings depend on, carried for `diff`.
//!
//! It reads what [`super::record`] recorded and names code through [`super::symbolize`]; it
//! records nothing.

pub mod disasm;
pub mod figures;
pub mod hotspots;
pub mod innodb;
pub mod kernel;
pub mod lines;
pub mod rules;
pub mod runtimes;
pub mod waits;
pub mod wall;
