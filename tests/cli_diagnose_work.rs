//! `cpudoctor diagnose` records what `diff` needs to say why a program is slower (issue 31):
//! the machine's figures (`machine.figures`) and the work measure (`work`), end to end on small
//! C programs from tests/programs/. Assertions are on what is recorded and its shape, never on
//! how long anything took: the machine is shared and noisy.

use predicates::prelude::*;
use serde_json::Value;

mod common;
use common::*;

/// `diagnose --save FILE ARGS -- PROGRAM PROGRAM_ARGS`, which must succeed: the saved
/// diagnosis and what was printed on stdout (the program's output, then the screen).
fn diagnose_saved(args: &[&str], name: &str, program_args: &[&str]) -> Option<(Value, String)> {
    let p = program(name, Build::FramePointers)?;
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("d.json");
    let out = cpudoctor()
        .args(["diagnose", "--save", saved.to_str().unwrap()])
        .args(args)
        .arg("--")
        .arg(&p)
        .args(program_args)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let d = serde_json::from_slice(&std::fs::read(&saved).unwrap()).unwrap();
    Some((d, String::from_utf8(out).unwrap()))
}

/// The vendor_id of /proc/cpuinfo.
fn cpu_vendor() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .unwrap()
        .lines()
        .find_map(|l| {
            l.strip_prefix("vendor_id")
                .map(|v| v.trim_start_matches([' ', '\t', ':']))
        })
        .unwrap_or_default()
        .to_string()
}

fn values(d: &Value) -> Vec<f64> {
    d["work"]["values"]
        .as_array()
        .unwrap_or_else(|| panic!("no work values: {}", d["work"]))
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect()
}

/// Every diagnosis carries the CPU and the core clock (a computation's time goes as its
/// inverse, so a diff needs it on both sides), and by default the diagnosed run's wall time,
/// profiler attached.
#[test]
fn a_saved_diagnosis_carries_the_cpu_the_clock_and_the_wall_time() {
    let Some((d, _)) = diagnose_saved(&[], "cpu_bound", &["100000000"]) else {
        return;
    };
    let f = &d["machine"]["figures"];
    if cfg!(target_arch = "x86_64") {
        assert_eq!(f["cpu"]["vendor"], cpu_vendor().as_str(), "{f}");
        let clock = &f["figures"]["core_clock_ghz"];
        assert!(clock["value"].as_f64().unwrap() > 0.0, "{f}");
        assert_eq!(clock["from"], "measured_now");
    }
    assert!(f["logical_cpus"].as_u64().unwrap() >= 1);
    assert_eq!(d["work"]["measure"], "wall_time");
    assert_eq!(d["work"]["with_profiler"], true);
    let v = values(&d);
    assert_eq!(v.len(), 1);
    assert!(v[0] > 0.0);
}

/// `--runs 3`: three more runs without the profiler, each one value; `--measure cpu` takes
/// user + system time from wait4.
#[test]
fn runs_without_the_profiler_give_one_value_each() {
    let Some((d, out)) = diagnose_saved(
        &["--runs", "3", "--measure", "cpu"],
        "cpu_bound",
        &["50000000"],
    ) else {
        return;
    };
    assert_eq!(d["work"]["measure"], "cpu_time");
    assert_eq!(d["work"]["with_profiler"], false);
    let v = values(&d);
    assert_eq!(v.len(), 3, "{}", d["work"]);
    assert!(v.iter().all(|x| *x > 0.0), "{v:?}");
    // The program's own output of the diagnosed run and of the three runs reached stdout.
    let program_line = regex::Regex::new(r"^[0-9.]+ [0-9.]+ [0-9]+$").unwrap();
    let printed = out.lines().filter(|l| program_line.is_match(l)).count();
    assert_eq!(printed, 4, "{out}");
    assert!(
        out.contains("Work        CPU time, 3 runs without the profiler"),
        "{out}"
    );
}

/// `--metric` reads the number the program prints, and the output still reaches the user:
/// cpu_bound prints its wall time, its CPU time and a checksum fixed by the round count.
#[test]
fn the_metric_is_the_number_the_program_printed() {
    let re = r"^[0-9.]+ [0-9.]+ ([0-9]+)$";
    let Some((d, out)) = diagnose_saved(
        &[
            "--metric",
            "(?m)^[0-9.]+ [0-9.]+ ([0-9]+)$",
            "--higher-is-better",
        ],
        "cpu_bound",
        &["1000000"],
    ) else {
        return;
    };
    let line = out
        .lines()
        .find(|l| regex::Regex::new(re).unwrap().is_match(l))
        .unwrap_or_else(|| panic!("the program's output did not reach stdout: {out}"));
    let printed: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
    assert_eq!(d["work"]["measure"], "metric");
    assert_eq!(d["work"]["higher_is_better"], true);
    assert_eq!(d["work"]["with_profiler"], true);
    assert_eq!(values(&d), vec![printed]);
    // The same without the profiler, twice.
    let Some((d, _)) = diagnose_saved(
        &["--metric", "(?m)^[0-9.]+ [0-9.]+ ([0-9]+)$", "--runs", "2"],
        "cpu_bound",
        &["1000000"],
    ) else {
        return;
    };
    assert_eq!(d["work"]["with_profiler"], false);
    assert_eq!(values(&d), vec![printed, printed]);
}

/// A run whose output lacks the metric: one error line, exit 1, the diagnosis still saved
/// (without a work measure).
#[test]
fn output_without_the_metric_is_one_error_line() {
    let Some(p) = program("cpu_bound", Build::FramePointers) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("d.json");
    let out = cpudoctor()
        .args(["diagnose", "--save", saved.to_str().unwrap()])
        .args(["--metric", r"ops/s: ([0-9.]+)", "--"])
        .arg(&p)
        .arg("1000")
        .assert()
        .code(1)
        .get_output()
        .clone();
    let stderr = String::from_utf8(out.stderr).unwrap();
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(
        errors[0].contains("printed no number matching /ops/s: ([0-9.]+)/"),
        "{stderr}"
    );
    let d: Value = serde_json::from_slice(&std::fs::read(&saved).unwrap()).unwrap();
    assert!(d.get("work").is_none(), "{}", d["work"]);
}

/// `--figures none`: the CPU facts, no figure measured.
#[test]
fn figures_none_records_the_cpu_and_no_figure() {
    let Some((d, _)) = diagnose_saved(&["--figures", "none"], "cpu_bound", &["10000000"]) else {
        return;
    };
    let f = &d["machine"]["figures"];
    assert!(f["cpu"]["vendor"].is_string(), "{f}");
    assert!(f.get("figures").is_none(), "{f}");
}

/// A check saved on this machine gives every figure it holds, marked with its file; nothing
/// it holds is measured again.
#[test]
fn a_check_from_this_cpu_gives_its_figures() {
    if !cfg!(target_arch = "x86_64") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let check = dir.path().join("check.json");
    cpudoctor()
        .args([
            "probe",
            "pause",
            "--quick",
            "--save",
            check.to_str().unwrap(),
        ])
        .assert()
        .success();
    let Some((d, _)) = diagnose_saved(
        &["--check", check.to_str().unwrap()],
        "cpu_bound",
        &["10000000"],
    ) else {
        return;
    };
    let f = &d["machine"]["figures"]["figures"];
    for name in ["pause_ns", "core_clock_ghz"] {
        assert_eq!(f[name]["from"], "saved_check", "{name}: {f}");
        assert_eq!(f[name]["file"], check.to_str().unwrap(), "{name}: {f}");
        assert!(f[name]["value"].as_f64().unwrap() > 0.0);
    }
}

/// `--figures all`: PAUSE and DRAM (and the line transfer and the shared atomic, given two
/// CPUs) whatever the hot code, a baseline for later diffs; never the split lock, which stalls
/// every neighbour.
#[test]
fn figures_all_measures_the_baseline_but_not_the_split_lock() {
    if !cfg!(target_arch = "x86_64") {
        return;
    }
    let Some((d, _)) = diagnose_saved(&["--figures", "all"], "cpu_bound", &["10000000"]) else {
        return;
    };
    let f = &d["machine"]["figures"]["figures"];
    let mut wanted = vec!["core_clock_ghz", "pause_ns", "dram_latency_4k_ns"];
    let cpus = allowed_cpus().len();
    if cpus >= 2 {
        wanted.push("line_transfer_ns");
        wanted.push("shared_atomic_ns");
    }
    for name in wanted {
        assert!(
            f[name]["value"].as_f64().is_some_and(|v| v > 0.0),
            "{name} missing: {f}"
        );
        assert_eq!(f[name]["from"], "measured_now");
    }
    assert!(f.get("split_lock_ns").is_none(), "{f}");
}

/// A command that `--duration` ended did not finish its work: no work measure, and no error
/// (a plain `--duration` run asked for none).
#[test]
fn a_command_ended_by_the_duration_records_no_work_and_no_error() {
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("d.json");
    cpudoctor()
        .args(["diagnose", "--save", saved.to_str().unwrap()])
        .args([
            "--duration",
            "0.3",
            "--figures",
            "none",
            "--",
            "sleep",
            "20",
        ])
        .assert()
        .success();
    let d: Value = serde_json::from_slice(&std::fs::read(&saved).unwrap()).unwrap();
    assert!(d.get("work").is_none(), "{}", d["work"]);
    assert!(d["machine"]["figures"]["cpu"].is_object());
}

/// Hot loads from a buffer on 4 KiB pages: DRAM latency on 4 KiB and on huge pages is
/// measured after the recording (a reduced latency curve) and saved.
#[test]
fn hot_memory_loads_bring_the_dram_figures() {
    if !cfg!(target_arch = "x86_64") {
        return;
    }
    let Some((d, _)) = diagnose_saved(&[], "random_access", &["1", "256"]) else {
        return;
    };
    let f = &d["machine"]["figures"]["figures"];
    for name in ["dram_latency_4k_ns", "core_clock_ghz"] {
        assert!(
            f[name]["value"].as_f64().is_some_and(|v| v > 0.0),
            "{name} missing: {f}; hot sites {}",
            d["hot_sites"]
        );
    }
    // The split lock is never measured unless a split lock is hot.
    assert!(f.get("split_lock_ns").is_none(), "{f}");
}

/// An attached process's work is the rate the user read from its own client, one value per
/// `--rate`.
#[test]
fn rates_named_for_an_attached_process_are_its_work() {
    let mut sleeper = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    struct Kill<'a>(&'a mut std::process::Child);
    impl Drop for Kill<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let pid = sleeper.id().to_string();
    let _guard = Kill(&mut sleeper);
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("d.json");
    let assert = cpudoctor()
        .args(["diagnose", "--save", saved.to_str().unwrap(), "--pid", &pid])
        .args(["--duration", "0.3", "--figures", "none"])
        .args(["--rate", "9388tps", "--rate", "9412 TPS"])
        .assert();
    let out = assert.get_output();
    if out.status.code() == Some(2)
        && String::from_utf8_lossy(&out.stderr).contains("perf_event_open")
    {
        missing_hardware("permission to sample", "perf_event_paranoid or root");
        return;
    }
    assert!(out.status.success(), "{out:?}");
    let d: Value = serde_json::from_slice(&std::fs::read(&saved).unwrap()).unwrap();
    assert_eq!(d["work"]["measure"], "rate");
    assert_eq!(d["work"]["unit"], "tps");
    assert_eq!(values(&d), vec![9388.0, 9412.0]);
}

/// Bad input is one line and exit status 2 before anything runs.
#[test]
fn bad_work_input_is_refused_before_anything_runs() {
    for (args, says) in [
        (&["--runs", "0", "--", "true"][..], "--runs"),
        (&["--rate", "abc", "--pid", "1"], "--rate"),
        (&["--metric", "x", "--pid", "1"], "--metric"),
        (&["--rate", "5tps", "--", "true"], "--rate"),
        (&["--runs", "2", "--pid", "1"], "--runs"),
        (&["--measure", "cpu", "--pid", "1"], "--measure"),
        (
            &["--rate", "5tps", "--rate", "6qps", "--pid", "1"],
            "--rate is given in tps and in qps",
        ),
        (&["--metric", "(", "--", "true"], "not a regular expression"),
        (&["--figures", "some", "--", "true"], "--figures"),
    ] {
        cpudoctor()
            .arg("diagnose")
            .args(args)
            .assert()
            .code(2)
            .stdout("")
            .stderr(
                predicate::str::starts_with("error:")
                    .and(predicate::str::contains(says))
                    .and(predicate::str::contains("cpudoctor diagnose:").not()),
            );
    }
}
