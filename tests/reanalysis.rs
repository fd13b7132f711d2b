//! Every fingerprint saved in `tests/fixtures` (the corpus machines, the fixtures of the
//! commands, files of earlier builds), judged again by this build through the one path users
//! take (`session::judge`: each probe's saved raw record analysed again, then every hazard),
//! verdict for verdict and figure for figure against a snapshot. Written before the typed
//! probe results (issue 32) moved every probe to `measure` + `analyse`, so the move is held to
//! give what the string-keyed code gave on every file: a changed line in the snapshot is a
//! changed analysis, to be explained where it is accepted.

use cpudoctor::schema::Fingerprint;
use cpudoctor::schema::json::from_json_bytes;
use std::fmt::Write;
use std::path::{Path, PathBuf};

fn fingerprints(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            fingerprints(&p, out);
        } else if p.extension().is_some_and(|e| e == "json")
            && std::fs::read(&p)
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                .is_some_and(|v| v.get("schema_version").is_some() && v.get("probes").is_some())
        {
            out.push(p);
        }
    }
}

/// Four significant digits: enough to see an analysis change, not the float noise of a sum
/// taken in another order.
fn sig(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return format!("{x}");
    }
    let digits = 4 - 1 - x.abs().log10().floor() as i32;
    format!("{:.*}", digits.max(0) as usize, x)
}

fn summary(fp: &Fingerprint) -> String {
    let mut s = String::new();
    for v in &fp.verdicts {
        let border = v
            .borderline
            .map_or(String::new(), |b| format!("/{}", b.word()));
        writeln!(
            s,
            "  verdict {} {}{border}: {}",
            v.hazard,
            v.level.word(),
            v.figure
        )
        .unwrap();
    }
    for n in &fp.not_judged {
        writeln!(s, "  not judged {}: {}", n.hazard, n.why).unwrap();
    }
    for p in &fp.probes {
        for m in &p.metrics {
            let ci = m.interval.map_or(String::new(), |i| {
                format!(" [{}, {}]", sig(i.low), sig(i.high))
            });
            writeln!(
                s,
                "  {}/{} = {}{ci} {}",
                p.name,
                m.name,
                sig(m.value),
                m.unit
            )
            .unwrap();
        }
        for (k, why) in &p.not_measured {
            writeln!(s, "  {}/{k} not measured: {why}", p.name).unwrap();
        }
    }
    s
}

#[test]
fn every_saved_fingerprint_is_judged_again_as_before() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let mut files = Vec::new();
    fingerprints(&root, &mut files);
    assert!(files.len() >= 20, "found only {} fingerprints", files.len());
    let mut all = String::new();
    for path in files {
        let bytes = std::fs::read(&path).unwrap();
        let fp = from_json_bytes(&bytes)
            .unwrap_or_else(|e| panic!("{} no longer loads: {e}", path.display()));
        let again = cpudoctor::session::judge(&fp);
        let name = path.strip_prefix(&root).unwrap().display().to_string();
        writeln!(all, "{name}\n{}", summary(&again)).unwrap();
    }
    insta::assert_snapshot!(all);
}
