//! The costs a diagnose finding quotes are this machine's: from a saved check given with
//! `--check`, else measured after the workload by the probe's quick profile; never another
//! CPU's figure typed into the text (the "~22 ns within a Zen 4 CCX" printed on Intel).

use serde_json::Value;
use std::path::{Path, PathBuf};

mod common;
use common::*;

/// A c2c fingerprint of this machine, saved as `check --save` would, with its headline
/// line-transfer figure and the samples it is analysed from set to `ns` (a figure this
/// machine would not measure, to find it in the text) and, when given, its CPU renamed.
fn saved_c2c(dir: &Path, ns: f64, cpu_name: Option<&str>) -> PathBuf {
    let path = dir.join("check.json");
    cpudoctor()
        .args(["probe", "c2c", "--quick", "--save"])
        .arg(&path)
        .assert()
        .success();
    let mut fp: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let c2c = fp["probes"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|p| p["name"] == "c2c")
        .unwrap();
    let m = c2c["metrics"]
        .as_array_mut()
        .and_then(|ms| ms.iter_mut().find(|m| m["name"] == "c2c_latency_ns"))
        .expect("c2c_latency_ns measured (two CPUs)");
    m["value"] = ns.into();
    // A saved file is analysed again from its raw samples (the one judge), so the samples
    // say the same: every pair's one-way handoff at `ns`.
    for (key, values) in c2c["samples"].as_object_mut().unwrap().iter_mut() {
        if key.starts_with("c2c_cas_ns.") {
            for v in values.as_array_mut().unwrap() {
                *v = ns.into();
            }
        }
    }
    if let Some(name) = cpu_name {
        fp["machine"]["cpu"]["model_name"] = name.into();
    }
    std::fs::write(&path, serde_json::to_vec(&fp).unwrap()).unwrap();
    path
}

#[test]
fn a_contended_atomic_quotes_the_line_transfer_of_the_saved_check_given() {
    if !two_cpus() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(prog) = program("locked_counter", Build::FramePointers) else {
        return;
    };
    let check = saved_c2c(dir.path(), 777.7, None);
    let d = diagnose_json(&[
        "--check",
        check.to_str().unwrap(),
        "--",
        prog.to_str().unwrap(),
        "1",
    ]);
    let f = finding(&d, "locked_rmw");
    let text = f["explanation"].as_str().unwrap();
    assert!(text.contains("~777.7 ns per transfer"), "{text}");
    assert!(text.contains("check.json"), "{text}");
    assert!(!text.contains("Zen"), "{text}");
    assert_eq!(d["machine"]["costs"]["from"], "saved_check");
    assert_eq!(d["machine"]["costs"]["line_transfer_ns"], 777.7);
}

#[test]
fn without_a_saved_check_the_cost_is_measured_here_and_another_cpus_check_is_not_used() {
    if !two_cpus() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let Some(prog) = program("locked_counter", Build::FramePointers) else {
        return;
    };
    // A check from another CPU: its figure must not be quoted.
    let check = saved_c2c(dir.path(), 777.7, Some("Some Other CPU"));
    let d = diagnose_json(&[
        "--check",
        check.to_str().unwrap(),
        "--",
        prog.to_str().unwrap(),
        "1",
    ]);
    let costs = &d["machine"]["costs"];
    assert_eq!(costs["from"], "measured_now", "{costs:#}");
    let ns = costs["line_transfer_ns"].as_f64().unwrap();
    assert!(ns > 0.0 && ns != 777.7, "{ns}");
    let text = finding(&d, "locked_rmw")["explanation"].as_str().unwrap();
    assert!(text.contains("measured on this machine"), "{text}");
    assert!(!text.contains("777.7") && !text.contains("Zen"), "{text}");
}
