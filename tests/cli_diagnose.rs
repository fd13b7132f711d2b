//! `cpudoctor diagnose` end to end: small C programs (tests/programs/, built with the system C
//! compiler into a temporary directory) each show their pattern on this machine, whatever its
//! PMU. Assertions are on which finding appears and rough sample shares, never on times: the
//! machine is shared and noisy.

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

fn cpudoctor() -> Command {
    Command::cargo_bin("cpudoctor").unwrap()
}

/// Builds every test program once per test binary.
fn programs() -> &'static Path {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    DIR.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/programs");
        for name in [
            "pause_spin",
            "locked_counter",
            "split_lock",
            "random_access",
            "jit",
        ] {
            let status = std::process::Command::new("cc")
                .args(["-O2", "-g", "-pthread", "-o"])
                .arg(dir.path().join(name))
                .arg(src.join(format!("{name}.c")))
                .status()
                .expect("a C compiler (cc) is needed to build the diagnose test programs");
            assert!(status.success(), "cc failed on {name}.c");
        }
        dir
    })
    .path()
}

fn program(name: &str) -> PathBuf {
    programs().join(name)
}

fn diagnose_json(args: &[&str]) -> Value {
    let out = cpudoctor()
        .arg("diagnose")
        .arg("--json")
        .args(args)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    serde_json::from_slice(&out).expect("stdout is one JSON document")
}

fn run_program(name: &str, args: &[&str]) -> Value {
    let p = program(name);
    let mut all = vec!["--", p.to_str().unwrap()];
    all.extend_from_slice(args);
    diagnose_json(&all)
}

fn finding<'a>(d: &'a Value, id: &str) -> &'a Value {
    d["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id)
        .unwrap_or_else(|| panic!("no {id} finding in {:#}", d["findings"]))
}

#[test]
fn a_pause_spin_names_the_spinning_function_and_costs_it_in_measured_pause() {
    let d = run_program("pause_spin", &["1.5"]);
    assert_eq!(d["diagnosis_version"], 1);
    let f = finding(&d, "pause_spin");
    assert_eq!(f["symbol"], "spin_wait_on_flag");
    // One thread spins the whole run while main sleeps: nearly every sample.
    assert!(f["sample_share"].as_f64().unwrap() > 0.5, "{f:#}");
    assert!(
        f["disassembly"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l.as_str().unwrap().starts_with("=>") && l.as_str().unwrap().contains("pause")),
        "the hot line is the pause (skid undone): {f:#}"
    );
    let pause_ns = d["machine"]["pause"]["ns"]
        .as_f64()
        .expect("PAUSE measured");
    assert!(pause_ns > 0.1 && pause_ns < 10_000.0);
    assert!(f["explanation"].as_str().unwrap().contains("PAUSE costs"));
}

#[test]
fn a_contended_lock_prefixed_counter_is_a_locked_rmw_hotspot_of_two_threads() {
    let d = run_program("locked_counter", &["1"]);
    let f = finding(&d, "locked_rmw");
    assert_eq!(f["symbol"], "contended_increment");
    assert!(f["sample_share"].as_f64().unwrap() > 0.5, "{f:#}");
    let site = &d["hot_sites"][0];
    assert_eq!(site["kind"], "locked_rmw");
    assert!(site["instruction"].as_str().unwrap().starts_with("lock "));
    assert_eq!(site["threads"].as_array().unwrap().len(), 2, "{site:#}");
    assert!(f["title"].as_str().unwrap().starts_with("contended"));
}

#[test]
fn a_split_lock_loop_is_a_locked_hotspot_with_the_split_noted() {
    // 0.3 s: bus locks slow every core of the host, so this stays short.
    let d = run_program("split_lock", &["0.3"]);
    let site = &d["hot_sites"][0];
    assert_eq!(site["kind"], "locked_rmw");
    assert_eq!(site["symbol"], "split_locked_increment");
    let note = site["split_note"].as_str().expect("split noted");
    assert!(note.contains("byte 60"), "{note}");
    let f = finding(&d, "split_lock");
    assert_eq!(f["level"], "hazard");
    assert!(f["sample_share"].as_f64().unwrap() > 0.5);
}

#[test]
fn random_loads_over_a_large_4k_page_buffer_give_the_page_size_finding() {
    let d = run_program("random_access", &["1.5", "256"]);
    let f = finding(&d, "small_pages");
    assert_eq!(f["symbol"], "random_reads");
    assert!(f["sample_share"].as_f64().unwrap() > 0.3, "{f:#}");
    let p = d["processes"]
        .as_array()
        .unwrap()
        .iter()
        .max_by_key(|p| p["anonymous_kb"].as_u64().unwrap())
        .unwrap();
    assert!(p["anonymous_kb"].as_u64().unwrap() >= 200 * 1024, "{p:#}");
    assert!(
        p["anon_huge_pages_kb"].as_u64().unwrap() < 16 * 1024,
        "{p:#}"
    );
    let thp = d["machine"]["thp"].as_str().unwrap_or("unknown");
    assert!(f["evidence"].as_array().unwrap().iter().any(|e| {
        e.as_str()
            .unwrap()
            .contains(&format!("transparent huge pages: {thp}"))
    }));
}

#[test]
fn a_jit_perf_map_names_samples_in_anonymous_executable_memory() {
    let d = run_program("jit", &["1"]);
    let functions = d["functions"].as_array().unwrap();
    let named = |name: &str| {
        functions
            .iter()
            .find(|f| f["symbol"] == name)
            .unwrap_or_else(|| panic!("{name} not among {functions:#?}"))
    };
    // Both spellings of the map: bare hex (spinWait) and 0x-prefixed (countDown).
    assert_eq!(named("JitCompiled::spinWait")["module"], "//anon");
    assert!(named("JitCompiled::countDown")["samples"].as_u64().unwrap() > 0);
    // The map is gone when the program exits; its names and code were kept while it ran.
    let f = finding(&d, "pause_spin");
    assert_eq!(f["symbol"], "JitCompiled::spinWait");
}

#[test]
fn attaching_to_a_running_process_by_pid_finds_its_spin() {
    let mut child = std::process::Command::new(program("pause_spin"))
        .arg("30")
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(200));
    let pid = child.id().to_string();
    let d = diagnose_json(&["--pid", &pid, "--duration", "1"]);
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(d["target"]["pid"].as_u64().unwrap().to_string(), pid);
    assert!(d["target"]["command"].is_null());
    assert_eq!(finding(&d, "pause_spin")["symbol"], "spin_wait_on_flag");
}

#[test]
fn the_terminal_report_says_once_what_the_pmu_situation_is_and_still_reports() {
    let p = program("locked_counter");
    let out = cpudoctor()
        .args(["diagnose", "--", p.to_str().unwrap(), "0.5"])
        .assert()
        .success()
        .get_output()
        .clone();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8(out.stderr).unwrap();
    let pmu_lines = stdout
        .lines()
        .filter(|l| l.starts_with("PMU ") || l.starts_with("Counters "))
        .count();
    assert_eq!(pmu_lines, 1, "{stdout}");
    if stdout.contains("\nPMU ") {
        assert_eq!(stdout.matches("are not available").count(), 1, "{stdout}");
    }
    // The mode is announced once on stderr, never silently chosen.
    assert_eq!(
        stderr.matches("cpudoctor diagnose: ").count(),
        1,
        "{stderr}"
    );
    assert!(stderr.contains(" Hz ("));
    // Everything that needs no PMU is still there.
    for section in [
        "Findings",
        "Hot sites",
        "Functions",
        "Threads",
        "Process totals",
    ] {
        assert!(stdout.contains(section), "no {section} in {stdout}");
    }
    assert!(stdout.contains("contended_increment"));
}

#[test]
fn a_command_that_cannot_start_is_one_line_and_exit_2() {
    for (cmd, says) in [
        ("no-such-program-cpudoctor-test", "not found in PATH"),
        ("/nonexistent/dir/program", "No such file"),
    ] {
        cpudoctor()
            .args(["diagnose", "--", cmd])
            .assert()
            .code(2)
            .stdout("")
            .stderr(
                predicate::str::contains(format!("cannot start '{cmd}'"))
                    .and(predicate::str::contains(says))
                    .and(predicate::function(|s: &str| {
                        s.lines().filter(|l| l.starts_with("error:")).count() == 1
                    })),
            );
    }
}

#[test]
fn a_pid_that_does_not_exist_is_one_line_and_exit_2() {
    cpudoctor()
        .args(["diagnose", "--pid", "99999999", "--duration", "1"])
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains("no process with PID 99999999"));
}

#[test]
fn another_users_process_is_refused_with_the_fix() {
    // PID 1 belongs to root. As root, drop to nobody to be the other user.
    let exe = assert_cmd::cargo::cargo_bin("cpudoctor");
    let mut cmd = if nix::unistd::geteuid().is_root() {
        let mut c = Command::new("setpriv");
        c.args(["--reuid=65534", "--regid=65534", "--clear-groups"])
            .arg(&exe);
        c
    } else {
        Command::new(&exe)
    };
    cmd.args(["diagnose", "--pid", "1", "--duration", "1"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("process 1 belongs to uid 0").and(
            predicate::str::contains("run cpudoctor as that user or as root"),
        ));
}

#[test]
fn no_workload_or_a_bad_duration_is_refused() {
    cpudoctor().args(["diagnose"]).assert().code(2);
    cpudoctor()
        .args(["diagnose", "--duration", "0", "--", "true"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "--duration must be a positive number",
        ));
    cpudoctor()
        .args(["diagnose", "--pid", "1", "--", "true"])
        .assert()
        .code(2);
}
