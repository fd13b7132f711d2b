//! `cpudoctor spin --handoff`: the fingerprint it writes validates against the documented
//! schema and carries the probe's metrics and series, the model lock runs both policies, and
//! bad input gets one clear line, exit 2 and no file. The C, Go and Java programs have their
//! own tests (`handoff_programs.rs`); these runs use the in-process runtimes to stay short.

use predicates::prelude::*;
#[cfg(target_arch = "x86_64")]
use serde_json::Value;

mod common;
use common::*;

#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
const SHORT: [&str; 9] = [
    "--items",
    "3",
    "--work-ms",
    "2",
    "--delays",
    "1,3",
    "--quick",
    "--runtimes",
    "rust,model",
];

#[cfg(target_arch = "x86_64")]
#[test]
fn handoff_json_validates_and_reports_each_runtime_and_delay() {
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("handoff.json");
    let fp = json_of(
        cpudoctor()
            .args([
                "spin",
                "--handoff",
                "--json",
                "--pause-ns",
                "43",
                "--cores",
                "24",
            ])
            .args(SHORT)
            .arg("--save")
            .arg(&saved),
    );
    assert!(schema_errors(&fp).is_empty(), "{:#?}", schema_errors(&fp));
    assert_eq!(fp["command"], "spin --handoff");
    let file: Value = serde_json::from_slice(&std::fs::read(&saved).unwrap()).unwrap();
    assert_eq!(file, fp, "--save writes what --json prints");

    let p = probe(&fp, "handoff");
    assert_eq!(p["status"], "ok");
    assert_eq!(p["params"]["items"], 3);
    assert_eq!(p["params"]["model_pause_ns"], 43.0);
    assert_eq!(p["params"]["model_pause_source"], "given");
    assert_eq!(
        p["params"]["repetitions"], 3,
        "three runs per cell unless told"
    );
    assert_eq!(p["params"]["model_cores"], 24);
    for rt in ["rust_std", "model_dotnet_legacy", "model_dotnet_normalized"] {
        assert_eq!(p["effects"]["runtimes"][rt]["status"], "ok", "{rt}");
        for d in ["1", "3"] {
            let wall = probe_metric(p, &format!("{rt}_delay_{d}ms_wall_ms"));
            let ideal = probe_metric(p, &format!("delay_{d}ms_ideal_ms"));
            // Busy waits on both sides make the ideal a hard floor.
            assert!(wall >= ideal, "{rt} at {d} ms: {wall} < {ideal}");
            probe_metric(p, &format!("{rt}_delay_{d}ms_wait_cpu_ms"));
        }
        probe_metric(p, &format!("{rt}_worst_slowdown_ratio"));
    }
    // The legacy plan at 24 cores: nine rounds, the longest 328,050 PAUSEs of 43 ns.
    let legacy = &p["effects"]["runtimes"]["model_dotnet_legacy"];
    assert_eq!(legacy["modelled_pauses_before_check"][8], 328_050);
    assert_eq!(legacy["modelled_longest_run_ns"], 328_050.0 * 43.0);
    let series = strings(&p["series"], "name");
    assert!(series.contains(&"ideal_ms"));
    assert!(series.contains(&"wall_ms.model_dotnet_legacy"));
    assert!(series.contains(&"wait_cpu_ms.rust_std"));
}

// Regression: the model lock counted this machine's PAUSEs, so preemption and pause-loop exits
// stretched its rounds, and the only check on the legacy/normalized ratio was that it was
// positive. With rounds run to their modelled deadlines, the seed's Skylake-SP (43 ns, 24
// cores) with a 10 ms worker and D = 2.5 ms frees the lock 7.5 ms into the sender's spin, just
// after round 8 ends (7.05 ms): the sender sees it at the end of round 9 (21.16 ms), so an item
// takes 2.5 + 21.16 ms instead of 10 ms, 2.4x. On the loaded 2-vCPU guest the medians of three
// run pairs came out at 1.5 to 1.6x (a late wake-up lets the sender batch items), and once,
// with the other vCPU busy, 1.19x. The test asks only that legacy is slower (the size of the gap
// is `bench/handoff.sh`'s to measure); the looks below pin the mechanism: a lock that looked
// at every PAUSE would take one look, not nine.
#[cfg(target_arch = "x86_64")]
#[test]
fn model_legacy_is_slower_than_normalized_in_the_seed_case() {
    let fp = json_of(cpudoctor().args([
        "spin",
        "--handoff",
        "--json",
        "--pause-ns",
        "43",
        "--cores",
        "24",
        "--items",
        "20",
        "--delays",
        "2.5",
        "--runtimes",
        "model",
    ]));
    let p = probe(&fp, "handoff");
    let ratio = entry(&p["metrics"], "name", "model_legacy_over_normalized_ratio");
    assert_eq!(ratio["spread"]["n"], 3);
    let median = ratio["value"].as_f64().unwrap();
    assert!(median > 1.0, "legacy/normalized {median} (predicted 2.4)");
    let legacy = &p["effects"]["runtimes"]["model_dotnet_legacy"]["lock_stats"]["delay_2p5ms"];
    for run in legacy.as_array().unwrap() {
        // A contended acquisition looks at the end of rounds 1 to 9 before it gets the lock.
        assert!(run["looks"].as_u64().unwrap() >= 9, "{run}");
    }
}

// Regression: the probe timed PAUSE itself while the pause probe of the same run measured it
// too, so one fingerprint carried two PAUSE figures. The model lock now models the pause
// probe's `pause_ns`.
#[cfg(target_arch = "x86_64")]
#[test]
fn handoff_models_the_pause_probes_figure_when_none_is_given() {
    let fp = json_of(
        cpudoctor()
            .args(["spin", "--handoff", "--json"])
            .args([
                "--items",
                "2",
                "--work-ms",
                "1",
                "--delays",
                "1",
                "--repetitions",
                "1",
            ])
            .args(["--runtimes", "model_dotnet_normalized"]),
    );
    let (pause, handoff) = (probe(&fp, "pause"), probe(&fp, "handoff"));
    assert_eq!(
        handoff["params"]["model_pause_ns"].as_f64().unwrap(),
        probe_metric(pause, "pause_ns")
    );
    assert!(
        handoff["params"]["model_pause_source"]
            .as_str()
            .unwrap()
            .contains("pause probe")
    );
    assert!(handoff["effects"].get("measured_pause_ns").is_none());
}

#[cfg(target_arch = "x86_64")]
#[test]
fn handoff_table_has_a_row_per_runtime_and_a_column_per_delay() {
    cpudoctor()
        .args(["spin", "--handoff"])
        .args(SHORT)
        .assert()
        .success()
        .stdout(
            predicate::str::contains("D=1 ms")
                .and(predicate::str::contains("D=3 ms"))
                .and(predicate::str::contains("ideal"))
                .and(predicate::str::contains("rust_std"))
                .and(predicate::str::contains("model_dotnet_legacy"))
                .and(predicate::str::contains("model_dotnet_normalized"))
                .and(predicate::str::contains(
                    "CPU burned by the waiting threads",
                )),
        );
}

#[test]
fn bad_handoff_input_is_one_line_exit_2_and_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("never.json");
    for (args, says) in [
        (
            &["--delays", "1,0"][..],
            "must be a number above 0 and at most 86400000, got 0",
        ),
        (
            &["--work-ms", "-1"][..],
            "must be a number above 0 and at most 86400000, got -1",
        ),
        (&["--runtimes", "dotnet"][..], "unknown runtime 'dotnet'"),
        (&["--delays", "1,2,1"][..], "--delays lists 1 twice"),
        (
            &["--pause-ns", "0"][..],
            "must be a number above 0 and at most 10000, got 0",
        ),
    ] {
        cpudoctor()
            .args(["spin", "--handoff"])
            .args(args)
            .arg("--save")
            .arg(&saved)
            .assert()
            .code(2)
            .stderr(predicate::str::contains(says));
        assert!(!saved.exists(), "{args:?} wrote a file");
    }
}

#[test]
fn handoff_options_need_handoff() {
    cpudoctor()
        .args(["spin", "--items", "5"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--handoff"));
}
