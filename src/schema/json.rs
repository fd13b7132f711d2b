//! Reading saved JSON: fingerprints, with the version check `diff` and `report` rely on, and
//! any saved document read no further than it needs. Writing JSON is `render::export::json`'s.

use super::{Fingerprint, SCHEMA_VERSION};

/// Errors reading a fingerprint.
#[derive(Debug, thiserror::Error)]
pub enum FingerprintError {
    /// Not JSON, or not a fingerprint.
    #[error("not a cpudoctor fingerprint: {0}")]
    Malformed(#[from] serde_json::Error),
    /// Written by a newer cpudoctor.
    #[error(
        "fingerprint schema_version {found} is newer than this cpudoctor understands \
         ({SCHEMA_VERSION}); upgrade cpudoctor"
    )]
    NewerSchema {
        /// The version in the file.
        found: u64,
    },
    /// A figure no measurement gives: a time, count of cycles, frequency, size or bandwidth at
    /// or below 0, or not a number (issue 29: a saved `pause_ns` of -24 was printed as
    /// "-24.0 ns = 78 cycles").
    #[error(
        "probe {probe}'s {metric} is {value}, which no measurement gives (a time, size or rate \
         is above 0): the file was edited or damaged"
    )]
    Impossible {
        /// The probe.
        probe: String,
        /// The metric.
        metric: String,
        /// Its value in the file.
        value: f64,
    },
    /// A version no cpudoctor ever wrote (0: versions start at 1).
    #[error("it has schema_version {found}, which no cpudoctor writes (versions start at 1)")]
    NoSuchSchema {
        /// The version in the file.
        found: u64,
    },
}

/// Refuses a `schema_version` this build cannot read: one no cpudoctor wrote (0), or a newer
/// one. What `diff`, `report`, `explain` and `fleet` all check.
pub fn check_schema_version(found: u64) -> Result<(), FingerprintError> {
    if found == 0 {
        Err(FingerprintError::NoSuchSchema { found })
    } else if found > u64::from(SCHEMA_VERSION) {
        Err(FingerprintError::NewerSchema { found })
    } else {
        Ok(())
    }
}

/// Parses a fingerprint, refusing one from a newer schema before looking at its fields.
pub fn from_json_bytes(bytes: &[u8]) -> Result<Fingerprint, FingerprintError> {
    let value: serde_json::Value = serde_json::from_slice(bytes)?;
    if let Some(found) = value.get("schema_version").and_then(|v| v.as_u64()) {
        check_schema_version(found)?;
    }
    let fp: Fingerprint = serde_json::from_value(value)?;
    check_possible(&fp)?;
    Ok(fp)
}

/// Unit suffixes of figures that are above 0 whenever they were measured.
const POSITIVE_SUFFIXES: [&str; 6] = ["_ns", "_cycles", "_ticks", "_ghz", "_gbs", "_bytes"];

/// Refuses a figure no measurement gives (see [`FingerprintError::Impossible`]), so that
/// `diff`, `report` and `explain` never present it as measured.
fn check_possible(fp: &Fingerprint) -> Result<(), FingerprintError> {
    for p in &fp.probes {
        for m in &p.metrics {
            let positive = POSITIVE_SUFFIXES.iter().any(|s| m.name.ends_with(s));
            if !m.value.is_finite() || (positive && m.value <= 0.0) {
                return Err(FingerprintError::Impossible {
                    probe: p.name.clone(),
                    metric: m.name.clone(),
                    value: m.value,
                });
            }
        }
    }
    Ok(())
}

/// The most bytes a saved file (fingerprint, diagnosis, experiment) is read to. The largest
/// real file in `tests/fixtures` is a 165 KB fingerprint of every probe (1,600 times less); a
/// diagnosis grows with its distinct call stacks (~140 bytes of JSON a frame, at most 127
/// frames a stack), so 256 MiB holds ~1.9 million frames: 15,000 stacks of the deepest kind,
/// 60,000 of 30 frames. A file past it is refused rather than read until memory runs out;
/// reading up to the cap holds that much memory, so it stays well under a 512 MiB container
/// (1 GiB took 1.06 GB of RSS and 97 s in a debug build for an endless `[1,1,...`).
pub const SAVED_FILE_MAX_BYTES: u64 = 256 << 20;

/// Reads one saved JSON document from `r` and returns its bytes, reading no further than the
/// document needs: its syntax is checked as it arrives, so an input that is not JSON
/// (`/dev/zero`, `/dev/urandom`, `yes '['`) stops within a few KiB, and one that never ends
/// stops at `max_bytes` with an error that says so. What was read is returned even when the
/// syntax is wrong, so the caller's parser reports the fault in its own words; only a read
/// error or the size cap is an error here.
pub fn read_saved(r: impl std::io::Read, max_bytes: u64) -> std::io::Result<Vec<u8>> {
    use serde::Deserialize as _;
    let mut recorder = Recorder {
        inner: r.take(max_bytes.saturating_add(1)),
        bytes: Vec::new(),
    };
    let checked = {
        let mut de = serde_json::Deserializer::from_reader(std::io::BufReader::new(&mut recorder));
        Skip::deserialize(&mut de).and_then(|_| de.end())
    };
    if recorder.bytes.len() as u64 > max_bytes {
        return Err(std::io::Error::other(too_large(max_bytes)));
    }
    match checked {
        Err(e) if e.is_io() => Err(e.into()),
        _ => Ok(recorder.bytes),
    }
}

/// Why a saved file was not read to its end.
fn too_large(max_bytes: u64) -> String {
    format!(
        "larger than {}, the most a saved file is read to (no saved file comes close)",
        crate::format::human_bytes(max_bytes)
    )
}

/// A reader that keeps a copy of everything read through it.
struct Recorder<R> {
    inner: R,
    bytes: Vec<u8>,
}

impl<R: std::io::Read> std::io::Read for Recorder<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.bytes.extend_from_slice(&buf[..n]);
        Ok(n)
    }
}

/// Any JSON value, checked and dropped. Unlike `serde::de::IgnoredAny` it descends through
/// `deserialize_any`, where serde_json limits nesting to 128 levels, so `[[[[...` stops early.
struct Skip;

impl<'de> serde::Deserialize<'de> for Skip {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SkipVisitor)
    }
}

struct SkipVisitor;

impl<'de> serde::de::Visitor<'de> for SkipVisitor {
    type Value = Skip;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_str<E>(self, _: &str) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_unit<E>(self) -> Result<Skip, E> {
        Ok(Skip)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut seq: A) -> Result<Skip, A::Error> {
        while seq.next_element::<Skip>()?.is_some() {}
        Ok(Skip)
    }
    fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Skip, A::Error> {
        while map.next_entry::<Skip, Skip>()?.is_some() {}
        Ok(Skip)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::test_support::sample_fingerprint;

    #[test]
    fn round_trip_is_lossless() {
        let fp = sample_fingerprint();
        let back = from_json_bytes(&serde_json::to_vec_pretty(&fp).unwrap()).unwrap();
        assert_eq!(back, fp);
    }

    #[test]
    fn newer_schema_is_refused_with_its_version() {
        let mut v = serde_json::to_value(sample_fingerprint()).unwrap();
        v["schema_version"] = 99.into();
        let err = from_json_bytes(v.to_string().as_bytes()).unwrap_err();
        assert!(err.to_string().contains("schema_version 99"), "{err}");
    }

    #[test]
    fn schema_version_0_is_refused() {
        let mut v = serde_json::to_value(sample_fingerprint()).unwrap();
        v["schema_version"] = 0.into();
        let err = from_json_bytes(v.to_string().as_bytes()).unwrap_err();
        assert!(
            matches!(err, FingerprintError::NoSuchSchema { found: 0 }),
            "{err}"
        );
    }

    #[test]
    fn garbage_is_malformed() {
        assert!(matches!(
            from_json_bytes(b"{\"hello\": 1}"),
            Err(FingerprintError::Malformed(_))
        ));
        assert!(from_json_bytes(b"not json").is_err());
    }

    /// Issue 29: `diff base.json /dev/zero` read until the OOM killer came.
    #[test]
    fn endless_zeros_stop_at_the_first_bytes() {
        let bytes = read_saved(std::io::repeat(0), SAVED_FILE_MAX_BYTES).unwrap();
        assert!(bytes.len() <= 64 << 10, "{} bytes read", bytes.len());
        assert!(from_json_bytes(&bytes).is_err());
    }

    /// Issue 29: `<(yes '[')` nests without end; serde_json's depth limit stops it.
    #[test]
    fn endless_brackets_stop_at_the_nesting_limit() {
        let bytes = read_saved(std::io::repeat(b'['), SAVED_FILE_MAX_BYTES).unwrap();
        assert!(bytes.len() <= 64 << 10, "{} bytes read", bytes.len());
        let err = from_json_bytes(&bytes).unwrap_err();
        assert!(err.to_string().contains("recursion limit"), "{err}");
    }

    /// Issue 29: a stream that stays valid JSON (`[1,1,1,...`) stops at the cap, said.
    #[test]
    fn endless_valid_json_stops_at_the_cap_and_says_it() {
        let endless = std::io::Read::chain(
            &b"["[..],
            std::io::Read::take(std::io::repeat(b' '), u64::MAX),
        );
        let err = read_saved(endless, 1 << 20).unwrap_err();
        assert_eq!(
            err.to_string(),
            "larger than 1 MiB, the most a saved file is read to (no saved file comes close)"
        );
    }

    #[test]
    fn a_saved_fingerprint_is_read_whole_and_nothing_after_it() {
        let saved = serde_json::to_vec_pretty(&sample_fingerprint()).unwrap();
        let bytes = read_saved(&saved[..], SAVED_FILE_MAX_BYTES).unwrap();
        assert_eq!(bytes, saved);
        assert_eq!(from_json_bytes(&bytes).unwrap(), sample_fingerprint());
        // Text after the document is read (up to the first stray byte) and refused by the parser.
        let mut two = saved.clone();
        two.extend_from_slice(b"{}");
        assert!(from_json_bytes(&read_saved(&two[..], SAVED_FILE_MAX_BYTES).unwrap()).is_err());
    }

    /// Issue 29: a saved `pause_ns` of -24 or 0 was printed as measured.
    #[test]
    fn case_impossible_pause_ns_is_refused_on_load() {
        let fp = sample_fingerprint();
        let (pi, mi) = fp
            .probes
            .iter()
            .enumerate()
            .find_map(|(i, p)| {
                p.metrics
                    .iter()
                    .position(|m| m.name.ends_with("_ns"))
                    .map(|j| (i, j))
            })
            .expect("the sample has a time figure");
        for bad in [-24.0, 0.0] {
            let mut v = serde_json::to_value(&fp).unwrap();
            v["probes"][pi]["metrics"][mi]["value"] = bad.into();
            let err = from_json_bytes(v.to_string().as_bytes()).unwrap_err();
            assert!(
                matches!(err, FingerprintError::Impossible { value, .. } if value == bad),
                "{err}"
            );
            assert!(
                err.to_string().contains("which no measurement gives"),
                "{err}"
            );
        }
    }
}
