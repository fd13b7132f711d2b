//! JSON export and import of fingerprints, with the version check `diff` and `report` rely on.

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

/// The fingerprint as pretty-printed JSON, newline-terminated.
pub fn to_json_bytes(fp: &Fingerprint) -> Vec<u8> {
    let mut v = serde_json::to_vec_pretty(fp).expect("fingerprints always serialise");
    v.push(b'\n');
    v
}

/// Parses a fingerprint, refusing one from a newer schema before looking at its fields.
pub fn from_json_bytes(bytes: &[u8]) -> Result<Fingerprint, FingerprintError> {
    let value: serde_json::Value = serde_json::from_slice(bytes)?;
    if let Some(found) = value.get("schema_version").and_then(|v| v.as_u64()) {
        check_schema_version(found)?;
    }
    Ok(serde_json::from_value(value)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::test_support::sample_fingerprint;

    #[test]
    fn round_trip_is_lossless() {
        let fp = sample_fingerprint();
        let back = from_json_bytes(&to_json_bytes(&fp)).unwrap();
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
}
