//! Input errors: what the user asked for is wrong, and the message says how to fix it.
//! Everything else travels as `anyhow` errors with context.

use thiserror::Error;

/// A request cpudoctor cannot act on.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum InputError {
    /// `probe NAME` with a name no probe has.
    #[error("unknown probe '{name}'; known probes: {known} (see `cpudoctor probe --list`)")]
    UnknownProbe {
        /// The name given.
        name: String,
        /// Comma-separated names of all probes.
        known: String,
    },
    /// `--cpus` that does not parse.
    #[error("invalid CPU list '{0}': expected numbers and ranges like 0,2-3")]
    BadCpuList(String),
    /// `--cpus` naming CPUs this process may not use.
    #[error(
        "CPU {cpus} not available to this process (allowed: {allowed}); pick from the allowed set"
    )]
    CpusNotAllowed {
        /// The offending CPUs.
        cpus: String,
        /// The allowed set.
        allowed: String,
    },
    /// A non-positive or non-finite number where a positive one is needed.
    #[error("{what} must be a positive number, got {value}")]
    NotPositive {
        /// Which option.
        what: &'static str,
        /// The value given.
        value: String,
    },
    /// A size option that does not parse.
    #[error(
        "invalid size '{value}' for {what}: expected a number of bytes or one like 16K, 512M, 1G"
    )]
    BadSize {
        /// Which option.
        what: &'static str,
        /// The value given.
        value: String,
    },
    /// A buffer size larger than the memory the kernel can hand out.
    #[error(
        "{what} {requested} is more than the {available} of memory available (MemAvailable in /proc/meminfo); pick a smaller {what}"
    )]
    MoreThanAvailableMemory {
        /// Which option.
        what: &'static str,
        /// The size asked for, formatted.
        requested: String,
        /// `MemAvailable`, formatted.
        available: String,
    },
    /// A page kind that does not exist.
    #[error("unknown page kind '{0}': expected 4k, thp, hugetlb-2m or hugetlb-1g")]
    BadPageKind(String),
}
