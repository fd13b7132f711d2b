//! Symbolizing: from addresses to names and call stacks. Owns:
//! - [`symbols`]: which file backs an address (`/proc/PID/maps`, the sampler's mmap records),
//!   its ELF symbol, its DWARF source line, separate debug files by build-id;
//! - [`kallsyms`]: kernel code named from `/proc/kallsyms`, or why it cannot be;
//! - [`unwind`]: call stacks walked with the binaries' CFI (framehop), frame pointers where
//!   there is none;
//! - JIT code: [`jit`] (runtimes asked for their perf maps, code copied while it lives) and
//!   [`perf_map`] (a growing `/tmp/perf-PID.map` followed);
//! - [`namespace`]: a target in a container, its files read through `/proc/PID/root`;
//! - [`stack`]: the named call stack the analysis, the exports and flame graphs read.
//!
//! It knows nothing of recording or findings: the recorder and the analysis call it.

pub mod jit;
pub mod kallsyms;
pub mod namespace;
pub mod perf_map;
pub mod stack;
pub mod symbols;
pub mod unwind;
