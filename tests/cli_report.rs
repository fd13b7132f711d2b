//! `cpudoctor diff` and `cpudoctor report` from the command line: real fingerprints of one
//! machine compare clean, a slow-PAUSE copy is flagged, and each kind of bad input gets one
//! clear line, exit 2, and nothing written to `-o`.

use predicates::prelude::*;
use serde_json::Value;
use std::path::PathBuf;

mod common;
use common::*;

/// A saved fingerprint of tests/fixtures/fingerprints.
fn fingerprint(name: &str) -> PathBuf {
    common::fixture("fingerprints").join(name)
}

const REAL_CHECK: &str = "zen4-kvm-check.json";
const REAL_FULL: &str = "zen4-kvm-probe-full.json";
const SLOW_PAUSE: &str = "slow-pause-skylake-sp.json";
const SYNTHETIC: &str = "synthetic-all-series.json";
const REAL_ALL: &str = "zen4-kvm-probe-all.json";
const REAL_CHECK_ALL: &str = "zen4-kvm-check-all.json";
const NEAR_HAZARD_BELOW: &str = "pause-near-hazard-below.json";
const NEAR_HAZARD_ABOVE: &str = "pause-near-hazard-above.json";

#[test]
fn every_fixture_fingerprint_matches_the_documented_schema() {
    let schema: Value =
        serde_json::from_str(include_str!("../docs/fingerprint.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    for name in [
        REAL_CHECK,
        REAL_FULL,
        SLOW_PAUSE,
        SYNTHETIC,
        REAL_ALL,
        REAL_CHECK_ALL,
        NEAR_HAZARD_BELOW,
        NEAR_HAZARD_ABOVE,
    ] {
        let fp: Value = serde_json::from_slice(&std::fs::read(fingerprint(name)).unwrap()).unwrap();
        let errors: Vec<String> = validator.iter_errors(&fp).map(|e| e.to_string()).collect();
        assert!(errors.is_empty(), "{name}: {errors:#?}");
    }
}

#[test]
fn diff_of_two_runs_of_this_machine_reports_no_regression() {
    cpudoctor()
        .arg("diff")
        .arg(fingerprint(REAL_CHECK))
        .arg(fingerprint(REAL_FULL))
        .assert()
        .success()
        .stdout(predicate::str::contains("Machine facts: identical."))
        .stdout(predicate::str::contains("No figure moved beyond noise."))
        .stdout(predicate::str::contains("Worse in new").not())
        .stdout(predicate::str::contains("Verdicts that changed").not());
}

#[test]
fn diff_against_a_slow_pause_cpu_flags_the_hazard_and_names_spin_waits() {
    let d = json_of(
        cpudoctor()
            .args(["diff", "--json"])
            .arg(fingerprint(REAL_FULL))
            .arg(fingerprint(SLOW_PAUSE)),
    );
    let h = &d["hazards"][0];
    assert_eq!(h["hazard"], "slow_pause");
    assert_eq!(h["old"]["level"], "notice");
    assert_eq!(h["new"]["level"], "hazard");
    assert_eq!(h["direction"], "worse");
    assert!(h["hurts"][0].as_str().unwrap().starts_with("spin-waits"));
    assert_eq!(d["machine"][1]["fact"], "Microarchitecture");
    assert_eq!(d["machine"][1]["new"], "Skylake-SP");
    let pause = entry(&d["metrics"], "metric", "pause_ns");
    assert_eq!(pause["change"], "worse");
}

#[test]
fn diff_shows_probes_of_one_file_as_not_measured() {
    cpudoctor()
        .args(["diff", "--all"])
        .arg(fingerprint(SYNTHETIC))
        .arg(fingerprint(REAL_CHECK))
        .env("COLUMNS", "400")
        .assert()
        .success()
        .stdout(predicate::str::contains("Not measured in new ("))
        .stdout(predicate::str::contains(
            "probes mem-latency, c2c, bandwidth (not in this file)",
        ))
        .stdout(predicate::str::contains("Not compared ("))
        .stdout(predicate::str::contains("No figure moved beyond noise."));
}

#[test]
fn diff_of_a_missing_file_says_so() {
    let err = input_error(
        cpudoctor()
            .arg("diff")
            .arg(fingerprint("no-such.json"))
            .arg(fingerprint(REAL_FULL)),
    );
    assert!(err.contains("no-such.json: no such file"), "{err}");
}

#[test]
fn diff_of_a_file_that_is_not_json_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, "PAUSE 43 ns\n").unwrap();
    let err = input_error(
        cpudoctor()
            .arg("diff")
            .arg(fingerprint(REAL_FULL))
            .arg(&junk),
    );
    assert!(
        err.contains("junk.json is not a cpudoctor fingerprint (not JSON"),
        "{err}"
    );
    // JSON of another shape is named as such.
    std::fs::write(&junk, "{\"hello\": 1}").unwrap();
    let err = input_error(
        cpudoctor()
            .arg("diff")
            .arg(fingerprint(REAL_FULL))
            .arg(&junk),
    );
    assert!(err.contains("(wrong shape: missing field"), "{err}");
}

#[test]
fn diff_of_a_newer_schema_asks_for_an_upgrade() {
    let dir = tempfile::tempdir().unwrap();
    let newer = dir.path().join("newer.json");
    let mut fp: Value =
        serde_json::from_slice(&std::fs::read(fingerprint(REAL_FULL)).unwrap()).unwrap();
    fp["schema_version"] = 99.into();
    std::fs::write(&newer, fp.to_string()).unwrap();
    let err = input_error(
        cpudoctor()
            .arg("diff")
            .arg(&newer)
            .arg(fingerprint(REAL_FULL)),
    );
    assert!(err.contains("schema_version 99"), "{err}");
    assert!(err.contains("upgrade cpudoctor"), "{err}");
}

#[test]
fn report_writes_one_self_contained_page() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report.html");
    cpudoctor()
        .arg("report")
        .arg(fingerprint(REAL_FULL))
        .arg(fingerprint(SLOW_PAUSE))
        .arg(fingerprint(SYNTHETIC))
        .arg("-o")
        .arg(&out)
        .assert()
        .success()
        .stdout(predicate::str::contains("(3 fingerprint(s), 5 chart(s))"));
    let page = std::fs::read_to_string(&out).unwrap();
    for id in [
        "chart-spin-before-block",
        "chart-pause-pause-ns-per-cpu",
        "chart-mem-latency-latency-ns-size-bytes",
        "chart-c2c-c2c-latency-ns",
        "chart-bandwidth-read-bandwidth-gbps",
    ] {
        assert!(page.contains(&format!("id=\"{id}\"")), "missing {id}");
    }
    assert!(page.contains("Diff: zen4-kvm-probe-full.json → slow-pause-skylake-sp.json"));
    // Only the report itself is in the directory: no temporary file left behind.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn report_with_a_bad_input_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report.html");
    // An existing report stays as it was.
    std::fs::write(&out, "previous report").unwrap();
    let err = input_error(
        cpudoctor()
            .arg("report")
            .arg(fingerprint(REAL_FULL))
            .arg(dir.path().join("missing.json"))
            .arg("-o")
            .arg(&out),
    );
    assert!(err.contains("missing.json: no such file"), "{err}");
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "previous report");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn report_into_a_missing_directory_fails_before_reading() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("no/such/report.html");
    let err = input_error(
        cpudoctor()
            .arg("report")
            .arg(fingerprint(REAL_FULL))
            .arg("-o")
            .arg(&out),
    );
    assert!(err.contains("does not exist"), "{err}");
    assert!(!out.exists());
}

#[test]
fn report_needs_an_output_path() {
    cpudoctor()
        .arg("report")
        .arg(fingerprint(REAL_FULL))
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--output"));
}

#[test]
fn diff_of_a_verdict_crossing_its_threshold_within_noise_reports_no_regression() {
    // Regression guard: PAUSE at 118 and 122 cycles (3.4% apart, within noise) either side of
    // the 120-cycle hazard line read "notice -> HAZARD, now hurts more".
    let d = json_of(
        cpudoctor()
            .args(["diff", "--json"])
            .arg(fingerprint(NEAR_HAZARD_BELOW))
            .arg(fingerprint(NEAR_HAZARD_ABOVE)),
    );
    assert_eq!(d["counts"]["worse"], 0);
    // Both figures lie within the guard band of the line: both runs read notice/HAZARD, so
    // the verdict does not change at all.
    assert_eq!(d["hazards"], serde_json::json!([]));
    assert!(
        d["hazards_unchanged"]
            .as_array()
            .unwrap()
            .contains(&"slow_pause".into())
    );
    cpudoctor()
        .arg("diff")
        .arg(fingerprint(NEAR_HAZARD_BELOW))
        .arg(fingerprint(NEAR_HAZARD_ABOVE))
        .assert()
        .success()
        .stdout(predicate::str::contains("now hurts more").not())
        .stdout(predicate::str::contains("Worse in new").not());
}

#[test]
fn diff_of_a_file_listing_a_probe_twice_compares_the_first_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let twice = dir.path().join("twice.json");
    let mut fp: Value =
        serde_json::from_slice(&std::fs::read(fingerprint(REAL_CHECK)).unwrap()).unwrap();
    let pause = fp["probes"][0].clone();
    fp["probes"].as_array_mut().unwrap().push(pause);
    std::fs::write(&twice, fp.to_string()).unwrap();
    let d = json_of(
        cpudoctor()
            .args(["diff", "--json"])
            .arg(fingerprint(REAL_CHECK))
            .arg(&twice),
    );
    let pause_ns = d["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["metric"] == "pause_ns")
        .count();
    assert_eq!(pause_ns, 1);
    assert_eq!(d["duplicate_probes"][0]["probe"], "pause");
    assert_eq!(d["duplicate_probes"][0]["times"], 2);
}

#[test]
fn report_of_a_file_that_is_not_json_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report.html");
    std::fs::write(&out, "previous report").unwrap();
    let junk = dir.path().join("junk.json");
    std::fs::write(&junk, "PAUSE 43 ns\n").unwrap();
    let err = input_error(
        cpudoctor()
            .arg("report")
            .arg(fingerprint(REAL_FULL))
            .arg(&junk)
            .arg("-o")
            .arg(&out),
    );
    assert!(
        err.contains("junk.json is not a cpudoctor fingerprint (not JSON"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&out).unwrap(), "previous report");
    // The report and the junk input: no temporary file left behind.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}

#[test]
fn report_of_a_newer_schema_asks_for_an_upgrade_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report.html");
    let newer = dir.path().join("newer.json");
    let mut fp: Value =
        serde_json::from_slice(&std::fs::read(fingerprint(REAL_FULL)).unwrap()).unwrap();
    fp["schema_version"] = 99.into();
    std::fs::write(&newer, fp.to_string()).unwrap();
    let err = input_error(cpudoctor().arg("report").arg(&newer).arg("-o").arg(&out));
    assert!(err.contains("schema_version 99"), "{err}");
    assert!(err.contains("upgrade cpudoctor"), "{err}");
    assert!(!out.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn report_with_an_unplottable_series_draws_the_rest_and_says_what_it_left_out() {
    // Regression guard: a size-axis series with x = 0 failed the whole report ("no points",
    // exit 1).
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report.html");
    let input = dir.path().join("zero-size.json");
    let mut fp: Value =
        serde_json::from_slice(&std::fs::read(fingerprint(SYNTHETIC)).unwrap()).unwrap();
    let mem = fp["probes"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|p| p["name"] == "mem-latency")
        .unwrap();
    for s in mem["series"].as_array_mut().unwrap() {
        for p in s["points"].as_array_mut().unwrap() {
            p[0] = 0.0.into();
        }
    }
    std::fs::write(&input, fp.to_string()).unwrap();
    cpudoctor()
        .arg("report")
        .arg(&input)
        .arg("-o")
        .arg(&out)
        .assert()
        .success()
        .stdout(predicate::str::contains("(1 fingerprint(s), 4 chart(s))"))
        .stdout(predicate::str::contains(
            "Not drawn: Memory latency: latency (ns) by size (bytes): no point can be placed",
        ));
    let page = std::fs::read_to_string(&out).unwrap();
    assert!(page.contains("class=\"chart-skipped\""));
    assert!(page.contains("id=\"chart-c2c-c2c-latency-ns\""));
}

#[test]
fn report_of_a_real_full_fingerprint_has_every_chart_kind() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report.html");
    cpudoctor()
        .arg("report")
        .arg(fingerprint(REAL_ALL))
        .arg("-o")
        .arg(&out)
        .assert()
        .success()
        .stdout(predicate::str::contains("Not drawn").not());
    let page = std::fs::read_to_string(&out).unwrap();
    for kind in ["spin", "bars", "xy"] {
        assert!(
            page.contains(&format!("data-kind=\"{kind}\"")),
            "no {kind} chart"
        );
    }
    // Two CPUs: the core-to-core matrix holds one pair, which the verdict's figure already
    // says, so it is left out (heatmaps are tested on the synthetic 4-CPU fixture).
    assert!(!page.contains("data-kind=\"matrix\""));
    // Latency curves per page kind, on the log size axis.
    assert!(page.contains("id=\"chart-mem-latency-latency-ns-size-bytes\""));
    assert!(page.contains("latency_4k") && page.contains("latency_thp"));
}
