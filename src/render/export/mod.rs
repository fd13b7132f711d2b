//! Every file cpudoctor writes for another program to read, in one home behind one contract:
//! an exporter takes a typed result and returns the file's bytes ([`Export`]). Pure: nothing
//! here opens a file or prints; `cmd/` hands the bytes to `output` (atomic, with the mode a
//! reader needs) or to stdout. One trait, as hyperfine's exporters are one trait, so a new
//! format is one type and one `impl`, and every format is tested the same way: bytes in, bytes
//! compared.
//!
//! - [`Json`]: any result (fingerprint, diagnosis, diff, experiment, fleet) as pretty JSON,
//!   newline-terminated: `--json`, `--save`, read back by `diff`, `report`, `fleet`.
//! - [`Prometheus`]: a [`Fingerprint`](crate::schema::Fingerprint) in the text exposition
//!   format 0.0.4, names in base units: `--prom`, for node_exporter's textfile collector.
//! - [`Pprof`]: a [`Diagnosis`](crate::diagnose::Diagnosis) as gzipped `profile.proto`:
//!   `--pprof`, for `go tool pprof`, speedscope, Pyroscope.
//! - [`Folded`]: a [`Diagnosis`](crate::diagnose::Diagnosis) as folded stacks, one line each:
//!   `--folded`, for flamegraph.pl, inferno, speedscope.
//!
//! The same value gives the same bytes (no clock, no randomness): a run and a saved file
//! convert alike, and the tests compare bytes.

pub mod folded;
pub mod json;
pub mod pprof;
pub mod profile_proto;
pub mod prometheus;

pub use folded::Folded;
pub use json::Json;
pub use pprof::Pprof;
pub use prometheus::Prometheus;

/// An exporter: a typed result of kind `T` in, the bytes of a file out. Infallible: a
/// result that exists can be written; writing the bytes somewhere is the caller's.
pub trait Export<T: ?Sized> {
    /// The bytes of the file that holds `value`.
    fn export(&self, value: &T) -> Vec<u8>;
}
