//! Results as JSON (`--json`, `--save`): a fingerprint, a diagnosis, a diff, an experiment, a
//! fleet. The document is the result's serde form, pretty-printed and newline-terminated, so
//! the field names and units are the type's (`docs/schema.md` for the fingerprint); reading a
//! saved file back is `schema::json`'s.

use super::Export;
use serde::Serialize;

/// The JSON exporter, for every serde result.
#[derive(Debug, Clone, Copy, Default)]
pub struct Json;

impl<T: Serialize + ?Sized> Export<T> for Json {
    fn export(&self, value: &T) -> Vec<u8> {
        // serde_json fails only on a map whose keys are not strings or numbers, or a
        // `Serialize` that fails by itself; cpudoctor's results have neither.
        let mut v = serde_json::to_vec_pretty(value).expect("cpudoctor's results serialise");
        v.push(b'\n');
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::json::from_json_bytes;
    use crate::schema::test_support::sample_fingerprint;

    #[test]
    fn a_fingerprint_reads_back_as_it_was_written() {
        let fp = sample_fingerprint();
        let bytes = Json.export(&fp);
        assert!(bytes.ends_with(b"}\n"), "pretty, newline-terminated");
        assert!(bytes.starts_with(b"{\n  \""), "pretty-printed");
        let back = from_json_bytes(&bytes).unwrap();
        assert_eq!(Json.export(&back), bytes);
    }
}
