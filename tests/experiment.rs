//! `cpudoctor experiment` on real programs (tests/programs/): the 4 KiB penalty of a 1 GiB
//! pointer chase under `--pages`, a streaming program beside the split-lock neighbour, per-
//! thread counters on one line against their padded twin under `--cpus 1,2`, and the bad
//! inputs (a failing command, a variant the machine cannot do, a missing program).
//!
//! Assertions are directions with wide margins: this machine is shared, and the figures
//! themselves are the experiment's to report.

mod common;

use common::{Build, allowed_cpus, cpudoctor, missing_hardware, program, serial, two_cpus};
use serde_json::Value;
use std::path::Path;

/// Whether `--pages` can run here: where transparent huge pages are 'never' for the whole
/// system, `experiment` refuses it (nothing to compare), so the tests that run its arms go
/// through [`missing_hardware`].
fn huge_pages_allowed() -> bool {
    let thp =
        std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
    if thp.contains("[never]") {
        missing_hardware(
            "transparent huge pages",
            "THP is 'never' here, and `experiment --pages` needs huge pages to compare",
        );
        return false;
    }
    true
}

/// Runs `experiment ARGS --json -- CMD` and returns its JSON and exit code.
fn experiment(args: &[&str], cmd: &[&str]) -> (Value, i32) {
    let out = cpudoctor()
        .arg("experiment")
        .args(args)
        .arg("--json")
        .arg("--")
        .args(cmd)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(&text).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}): {text}\nstderr: {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (v, out.status.code().unwrap_or(-1))
}

fn comparison<'a>(v: &'a Value, family: &str) -> &'a Value {
    common::entry(&v["comparisons"], "family", family)
}

#[test]
fn pages_show_the_4k_penalty_of_a_1_gib_pointer_chase() {
    let _turn = serial();
    let Some(chase) = program("chase_malloc", Build::Distribution) else {
        return;
    };
    if !huge_pages_allowed() {
        return;
    }
    let chase = chase.to_str().unwrap();
    let (v, code) = experiment(
        &[
            "--pages",
            "--runs",
            "5",
            "--warmup",
            "0",
            "--metric",
            r"ns/step: ([0-9.]+)",
        ],
        &[chase, "1024", "2000000"],
    );
    assert_eq!(code, 0, "{v:#}");
    let c = comparison(&v, "pages");
    // The arm is THP off, the baseline huge pages asked: ns per step, lower is better, so
    // the ratio is the 4 KiB penalty. The mem-latency probe's DRAM-sized 4 KiB penalty on
    // Zen 4 guests is 1.3-2x (page walks through the guest's and the host's tables); assert
    // its direction and order only.
    let ratio = c["ratio"].as_f64().unwrap();
    assert!(
        (1.1..10.0).contains(&ratio),
        "4 KiB / huge = {ratio}: {v:#}"
    );
    assert!(c["speed"].as_f64().unwrap() < 1.0);
    // What the command got: most of its 1 GiB on huge pages when asked, none when THP is off.
    let arms = v["arms"].as_array().unwrap();
    let huge_of = |setting: &str| -> Vec<u64> {
        let a = arms
            .iter()
            .find(|a| a["variant"]["setting"] == setting)
            .unwrap();
        a["anon_huge_bytes"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_u64)
            .collect()
    };
    assert!(
        huge_of("huge_asked").iter().all(|&b| b >= 512 << 20),
        "{v:#}"
    );
    assert!(huge_of("thp_disabled").iter().all(|&b| b == 0), "{v:#}");
    assert!(
        c["meaning"]
            .as_str()
            .unwrap()
            .contains("of huge pages when asked")
    );
}

#[test]
fn a_split_lock_neighbour_slows_a_memory_stream_or_is_said_to_be_trapped() {
    let _turn = serial();
    let Some(stream) = program("stream_sum", Build::Distribution) else {
        return;
    };
    if !two_cpus() || !cpudoctor::arch::SUPPORTED {
        return;
    }
    let (v, code) = experiment(
        &[
            "--neighbour",
            "split-locks",
            "--runs",
            "5",
            "--warmup",
            "1",
            "--metric",
            r"GB/s: ([0-9.]+)",
            "--higher-is-better",
        ],
        &[stream.to_str().unwrap(), "256", "16"],
    );
    assert_eq!(code, 0, "{v:#}");
    let c = comparison(&v, "neighbour");
    let arm = &v["arms"][c["arm"].as_u64().unwrap() as usize];
    let meaning = c["meaning"].as_str().unwrap();
    if arm["neighbour"]["trapped"] == true {
        // A host that traps split locks: the neighbour barely locks the bus, and the line
        // says so beside the figure.
        assert!(meaning.contains("traps split locks"), "{meaning}");
        assert!(meaning.contains("trapped"), "{meaning}");
    } else {
        // Bus locks are real here (Zen 4 guests run them: 5-10x slower DRAM streams in the
        // split-lock-neighbour probe); on a shared machine the locker gets part of its CPU,
        // so assert a sixth slower at least (1.3-1.8x on this guest with a stream of scalar loads).
        let speed = c["speed"].as_f64().unwrap();
        assert!(speed < 0.85, "speed beside split locks {speed}: {v:#}");
        assert!(meaning.contains("slower"), "{meaning}");
        assert!(arm["neighbour"]["rate_per_s"].as_f64().unwrap() > 0.0);
    }
    // The command ran on the CPUs the neighbour did not use.
    let cpus = arm["variant"]["cpus"].as_array().unwrap();
    assert!(!cpus.contains(&arm["variant"]["neighbour_cpu"]));
}

#[test]
fn counters_on_one_line_do_not_scale_and_their_padded_twin_does() {
    let _turn = serial();
    let Some(counters) = program("thread_counters", Build::Distribution) else {
        return;
    };
    if !two_cpus() {
        return;
    }
    let speedup_at_2 = |layout: &str| -> f64 {
        let (v, code) = experiment(
            &["--cpus", "1,2", "--runs", "7", "--warmup", "1"],
            &[counters.to_str().unwrap(), layout, "100000000"],
        );
        assert_eq!(code, 0, "{v:#}");
        let p = &v["scaling"]["points"];
        assert_eq!(p[0]["cpus"], 1);
        assert_eq!(p[1]["cpus"], 2);
        assert_eq!(p[1]["ideal"], 2.0);
        p[1]["speedup"].as_f64().unwrap()
    };
    let packed = speedup_at_2("packed");
    let padded = speedup_at_2("padded");
    // Packed: every increment takes the line from the other core, so two threads are no
    // faster than one (often slower). Padded: each counter on its own line scales, as far
    // as a shared machine gives it the second CPU.
    assert!(packed < 1.2, "packed speedup {packed}");
    assert!(
        padded > 1.3 * packed,
        "padded {padded} against packed {packed}"
    );
}

#[test]
fn a_variant_that_fails_is_one_line_and_the_others_still_run() {
    if !two_cpus() || !huge_pages_allowed() {
        return;
    }
    // Fails only with THP disabled (its /proc status says THP_enabled: 0).
    let script = "grep -q 'THP_enabled:.*0' /proc/self/status && { echo 'no THP for me' >&2; \
                  exit 4; }; exit 0";
    let out = cpudoctor()
        .args([
            "experiment",
            "--pages",
            "--cpus",
            "1,2",
            "--runs",
            "2",
            "--warmup",
            "0",
            "--",
            "sh",
            "-c",
            script,
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("THP off: exit status 4: no THP for me"),
        "{text}"
    );
    assert!(text.contains("2 CPUs"), "{text}");
    assert!(text.contains("Scaling"), "{text}");
}

#[test]
fn a_command_that_always_fails_ends_with_status_1_after_naming_it() {
    if !huge_pages_allowed() {
        return;
    }
    let out = cpudoctor()
        .args([
            "experiment",
            "--pages",
            "--runs",
            "2",
            "--",
            "sh",
            "-c",
            "echo broken input >&2; exit 3",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("exit status 3: broken input"), "{text}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    for (args, says) in [
        (
            vec!["experiment", "--pages", "--", "./no-such-program"],
            "cannot start './no-such-program': no such file",
        ),
        (vec!["experiment", "--", "true"], "nothing to vary"),
        (vec!["experiment", "--pages"], "nothing to run"),
        (
            vec!["experiment", "--pages", "--metric", "(", "--", "true"],
            "--metric '(' is not a regular expression",
        ),
    ] {
        let out = cpudoctor().args(&args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
    // clap's own refusals: an unknown neighbour, a CPU count of 0.
    for args in [
        vec!["experiment", "--neighbour", "cosmic-rays", "--", "true"],
        vec!["experiment", "--cpus", "0,2", "--", "true"],
    ] {
        let out = cpudoctor().args(&args).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn a_variant_the_machine_cannot_do_is_one_line_and_the_rest_runs() {
    if !huge_pages_allowed() {
        return;
    }
    // More CPUs than this process may use: one line for that count, the curve of the rest.
    let n = allowed_cpus().len();
    let too_many = (n + 1).to_string();
    let counts = format!("1,{too_many}");
    let out = cpudoctor()
        .args([
            "experiment",
            "--pages",
            "--cpus",
            &counts,
            "--runs",
            "2",
            "--warmup",
            "0",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains(&format!("--cpus {too_many}: this process may use {n} CPU")),
        "{text}"
    );
    assert!(text.contains("THP off"), "{text}");
}

#[test]
fn report_draws_saved_experiments_and_refuses_to_mix_them() {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("experiment.html");
    cpudoctor()
        .arg("report")
        .arg(fixtures.join("experiment/pages_neighbour.json"))
        .arg(fixtures.join("experiment/scaling_packed.json"))
        .arg("-o")
        .arg(&page)
        .assert()
        .success();
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("Effect on the command"));
    assert!(html.contains("Throughput against CPUs"));
    let fingerprint = std::fs::read_dir(fixtures.join("fingerprints"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "json"))
        .unwrap();
    let out = cpudoctor()
        .arg("report")
        .arg(fixtures.join("experiment/scaling_packed.json"))
        .arg(&fingerprint)
        .arg("-o")
        .arg(dir.path().join("mixed.html"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("is an experiment and"), "{err}");
    assert!(!dir.path().join("mixed.html").exists());
}

#[test]
fn prepare_runs_before_every_run_and_a_missing_metric_is_named() {
    if !huge_pages_allowed() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("prepared");
    let prepare = format!("echo x >> {}", log.display());
    cpudoctor()
        .args([
            "experiment",
            "--pages",
            "--runs",
            "2",
            "--warmup",
            "1",
            "--prepare",
            &prepare,
            "--metric",
            r"score: ([0-9]+)",
            "--",
            "echo",
            "score: 42",
        ])
        .assert()
        .success();
    // Two arms, three rounds (one warmup).
    let lines = std::fs::read_to_string(&log).unwrap().lines().count();
    assert_eq!(lines, 6);
    let (v, code) = experiment(
        &["--pages", "--runs", "2", "--metric", r"score: ([0-9]+)"],
        &["echo", "no figure here"],
    );
    assert_eq!(code, 1);
    assert_eq!(
        v["arms"][0]["failure"],
        "no number matching /score: ([0-9]+)/ in its output"
    );
}
