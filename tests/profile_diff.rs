//! The Skylake PAUSE case's method end to end: a C program alternates work with a spin-wait of
//! N PAUSEs (tests/programs/spin_phases.c), diagnosed at a small N (the old CPU: the wait is
//! short) and a large N (the new CPU: the same spin count lasts far longer). `diff` on the two
//! saved diagnoses must rank the spin-wait first as grown with its `pause` on both sides and
//! the work as shrunk; `go tool pprof` must read the pprof exports, alone and with
//! `-diff_base`; the folded file must put the spin-wait under its caller. Then bad input: one
//! line each, exit 2, nothing half-written.
//!
//! N is chosen from this machine's own PAUSE and work costs (`spin_phases --calibrate`), so
//! the shares are about 15% and 80% whatever the CPU. Assertions are on ranks and
//! directions, never on times.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

mod common;
use common::*;

/// The two recordings, made once per test binary.
struct Runs {
    dir: tempfile::TempDir,
    small: u64,
    large: u64,
}

impl Runs {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// Builds spin_phases, calibrates N, and diagnoses it at a small and a large N (2.5 s each),
/// saving each diagnosis with its pprof and folded exports. `None` (the test fails, or skips
/// with CPUDOCTOR_ALLOW_SKIP=1) when there is no C compiler.
fn runs() -> Option<&'static Runs> {
    static RUNS: OnceLock<Runs> = OnceLock::new();
    if let Some(r) = RUNS.get() {
        return Some(r);
    }
    let exe = program("spin_phases", Build::FramePointers)?;
    Some(RUNS.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let out = std::process::Command::new(&exe)
            .arg("--calibrate")
            .output()
            .unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let v: Vec<f64> = text
            .split_whitespace()
            .map(|x| x.parse().unwrap())
            .collect();
        let (pause_ns, work_ns) = (v[0].max(0.1), v[1]);
        // Wait / work of ~0.18 (the wait ~15% of the time) and ~4 (~80%).
        let small = ((0.18 * work_ns / pause_ns).round() as u64).max(1);
        let large = ((4.0 * work_ns / pause_ns).round() as u64).max(small * 8);
        for (name, n) in [("old", small), ("new", large)] {
            cpudoctor()
                .arg("diagnose")
                .arg("--save")
                .arg(dir.path().join(format!("{name}.json")))
                .arg("--pprof")
                .arg(dir.path().join(format!("{name}.pb.gz")))
                .arg("--folded")
                .arg(dir.path().join(format!("{name}.folded")))
                .arg("--")
                .arg(&exe)
                .args(["2.5", &n.to_string()])
                .assert()
                .success();
        }
        Runs { dir, small, large }
    }))
}

fn diff_json(old: &Path, new: &Path) -> Value {
    let out = cpudoctor()
        .args(["diff", "--json"])
        .arg(old)
        .arg(new)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    serde_json::from_slice(&out).expect("stdout is JSON")
}

#[test]
fn diff_ranks_the_spin_wait_first_with_pause_on_both_sides_and_the_work_shrunk() {
    let Some(r) = runs() else {
        return;
    };
    let d = diff_json(&r.path("old.json"), &r.path("new.json"));
    let ctx = format!("N {} -> {}: {:#}", r.small, r.large, d["functions"]);
    assert_eq!(d["kind"], "diagnosis_diff");
    let first = &d["functions"][0];
    assert_eq!(first["name"], "wait_for_item", "{ctx}");
    assert_eq!(first["direction"], "grown", "{ctx}");
    let work = entry(&d["functions"], "name", "do_work");
    assert_eq!(work["direction"], "shrunk", "{ctx}");
    assert!(work["share_change"].as_f64().unwrap() < 0.0);
    let g = &d["grown"][0];
    assert_eq!(g["name"], "wait_for_item");
    for side in ["old", "new"] {
        assert_eq!(g[side]["site"]["instruction"], "pause", "{side}: {g:#}");
        assert_eq!(g[side]["site"]["kind"], "pause_spin", "{side}");
        assert!(g[side]["site"]["next"]["instruction"].is_string(), "{side}");
        assert_eq!(g[side]["callers"][0]["frames"][0], "serve", "{side}: {g:#}");
        assert!(d[side]["cpu"].is_string());
    }

    // The text says the same in 80 columns, and prints its rule.
    let text = stdout_text(
        cpudoctor()
            .arg("diff")
            .arg(r.path("old.json"))
            .arg(r.path("new.json"))
            .env("COLUMNS", "80"),
    );
    for l in text.lines() {
        assert!(l.chars().count() <= 80, "wider than 80: {l}");
    }
    assert!(text.contains("Compared by share of samples"), "{text}");
    assert!(
        text.contains("Grown: wait_for_item (spin_phases)"),
        "{text}"
    );
    let hot = text.lines().find(|l| l.contains("│ hot")).expect(&text);
    assert_eq!(
        hot.matches("`pause`").count(),
        2,
        "pause on both sides: {hot}"
    );
    let table = text.split("Functions, most grown first").nth(1).unwrap();
    let spin = table.find("wait_for_item").unwrap();
    let work = table.find("do_work").unwrap();
    assert!(spin < work, "the spin-wait ranks first: {table}");
}

/// `go`, from PATH or Go's default install directory.
fn go() -> Option<PathBuf> {
    let candidates = [PathBuf::from("go"), PathBuf::from("/usr/local/go/bin/go")];
    candidates.into_iter().find(|g| {
        std::process::Command::new(g)
            .arg("version")
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// `go tool pprof -top ARGS` (or, given `-disasm`, that view instead).
fn pprof_top(go: &Path, args: &[&Path]) -> String {
    let tmp = tempfile::tempdir().unwrap();
    let view = if args.first().is_some_and(|a| a.as_os_str() == "-disasm") {
        None
    } else {
        Some("-top")
    };
    let out = std::process::Command::new(go)
        .args(["tool", "pprof"])
        .args(view)
        .args(args)
        // Where pprof would keep profiles it saves; never the user's ~/pprof.
        .env("PPROF_TMPDIR", tmp.path())
        .output()
        .unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "go tool pprof failed: {text}");
    text
}

/// The function rows of `pprof -top`, in order: (flat, name).
fn top_rows(text: &str) -> Vec<(String, String)> {
    text.lines()
        .skip_while(|l| !l.trim_start().starts_with("flat"))
        .skip(1)
        .filter_map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            (w.len() >= 6).then(|| (w[0].to_string(), w[5..].join(" ")))
        })
        .collect()
}

#[test]
fn go_tool_pprof_reads_the_exports_alone_and_as_a_diff() {
    let Some(r) = runs() else {
        return;
    };
    let Some(go) = go() else {
        missing_tool(
            "Go (go tool pprof reads the pprof exports)",
            "apt-get install golang-go, or Go from go.dev/dl in /usr/local/go",
        );
        return;
    };
    let (old, new) = (r.path("old.pb.gz"), r.path("new.pb.gz"));
    let text = pprof_top(&go, &[&new]);
    assert!(text.contains("Type: cpu"), "{text}");
    let rows = top_rows(&text);
    assert_eq!(rows[0].1, "wait_for_item", "{text}");
    assert!(rows.iter().any(|r| r.1 == "do_work"), "{text}");
    assert!(
        rows.iter().any(|r| r.1 == "serve"),
        "callers are there: {text}"
    );

    let text = pprof_top(&go, &[Path::new("-diff_base"), &old, &new]);
    // pprof orders a diff by the size of the change, either way.
    let rows = top_rows(&text);
    let spin = rows.iter().find(|r| r.1 == "wait_for_item").expect(&text);
    assert!(!spin.0.starts_with('-'), "wait_for_item grew: {text}");
    assert!(rows[..2].contains(spin), "{text}");
    let work = rows.iter().find(|r| r.1 == "do_work").expect(&text);
    assert!(work.0.starts_with('-'), "do_work shrank: {text}");

    // The mappings lead pprof to the binary: -disasm lists the spin-wait's code with its
    // samples on the instruction right after PAUSE (objdump comes with the C compiler).
    let text = pprof_top(
        &go,
        &[Path::new("-disasm"), Path::new("wait_for_item"), &new],
    );
    let lines: Vec<&str> = text.lines().collect();
    let pause = lines
        .iter()
        .position(|l| l.contains("PAUSE"))
        .unwrap_or_else(|| panic!("no PAUSE in the listing: {text}"));
    let after = lines[pause + 1].split_whitespace().next().unwrap();
    assert_ne!(after, ".", "samples after PAUSE: {text}");
}

#[test]
fn the_folded_file_has_the_spin_wait_under_its_caller_with_its_offset() {
    let Some(r) = runs() else {
        return;
    };
    let text = std::fs::read_to_string(r.path("new.folded")).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains(";serve;wait_for_item+0x"))
        .unwrap_or_else(|| panic!("no serve;wait_for_item line: {text}"));
    assert!(line.contains("main;serve;wait_for_item+0x"), "{line}");
    let (_, count) = line.rsplit_once(' ').unwrap();
    assert!(count.parse::<u64>().unwrap() > 0);
    // Converting the saved diagnosis gives the same file.
    let again = r.path("again.folded");
    cpudoctor()
        .args(["diagnose", "--from"])
        .arg(r.path("new.json"))
        .arg("--folded")
        .arg(&again)
        .assert()
        .success();
    assert_eq!(std::fs::read_to_string(&again).unwrap(), text);
}

const OLD: &str = "diagnose/spin-phases-140-zen3-kvm.json";
const FINGERPRINT: &str = "fingerprints/pause-near-hazard-above.json";

#[test]
fn a_diagnosis_and_a_fingerprint_are_refused_in_either_order() {
    for (a, b) in [(OLD, FINGERPRINT), (FINGERPRINT, OLD)] {
        let err = input_error(cpudoctor().arg("diff").arg(fixture(a)).arg(fixture(b)));
        assert!(
            err.contains("spin-phases-140-zen3-kvm.json is a saved diagnosis and")
                && err.contains("pause-near-hazard-above.json a saved fingerprint"),
            "{err}"
        );
    }
}

#[test]
fn a_truncated_or_foreign_diagnosis_is_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let whole = std::fs::read(fixture(OLD)).unwrap();
    let cut = dir.path().join("cut.json");
    std::fs::write(&cut, &whole[..whole.len() / 2]).unwrap();
    let err = input_error(cpudoctor().arg("diff").arg(fixture(OLD)).arg(&cut));
    assert!(
        err.contains("cut.json is not a cpudoctor diagnosis (not JSON"),
        "{err}"
    );
    let foreign = dir.path().join("foreign.json");
    std::fs::write(&foreign, r#"{"traceEvents": []}"#).unwrap();
    let err = input_error(cpudoctor().arg("diff").arg(&foreign).arg(fixture(OLD)));
    assert!(
        err.contains("foreign.json is not a cpudoctor diagnosis"),
        "{err}"
    );
    // A pprof file is no saved diagnosis either.
    let pb = dir.path().join("x.pb.gz");
    std::fs::write(&pb, [0x1f, 0x8b, 8, 0, 0, 0, 0, 0]).unwrap();
    let err = input_error(cpudoctor().args(["diagnose", "--from"]).arg(&pb));
    assert!(
        err.contains("x.pb.gz is not a cpudoctor diagnosis (not JSON"),
        "{err}"
    );
    let err = input_error(
        cpudoctor()
            .args(["diagnose", "--from"])
            .arg(fixture(FINGERPRINT)),
    );
    assert!(err.contains("it is a saved fingerprint"), "{err}");
    // A diagnosis from a newer cpudoctor asks for an upgrade.
    let mut v: Value = serde_json::from_slice(&whole).unwrap();
    v["diagnosis_version"] = 99.into();
    let newer = dir.path().join("newer.json");
    std::fs::write(&newer, v.to_string()).unwrap();
    let err = input_error(cpudoctor().arg("diff").arg(fixture(OLD)).arg(&newer));
    assert!(err.contains("diagnosis_version 99"), "{err}");
}

#[test]
fn fail_on_is_refused_for_diagnoses() {
    let err = input_error(
        cpudoctor()
            .args(["diff", "--fail-on", "worse"])
            .arg(fixture(OLD))
            .arg(fixture(OLD)),
    );
    assert!(err.contains("--fail-on gates on"), "{err}");
}

#[test]
fn an_unwritable_export_path_is_one_line_and_nothing_is_written() {
    let dir = tempfile::tempdir().unwrap();
    // A directory where the file should go, and a directory that does not exist.
    let taken = dir.path().join("taken.pb.gz");
    std::fs::create_dir(&taken).unwrap();
    let err = input_error(
        cpudoctor()
            .args(["diagnose", "--from"])
            .arg(fixture(OLD))
            .arg("--pprof")
            .arg(&taken),
    );
    assert!(err.contains("taken.pb.gz: it is a directory"), "{err}");
    let missing = dir.path().join("no/such/dir/x.folded");
    let good = dir.path().join("good.pb.gz");
    let err = input_error(
        cpudoctor()
            .args(["diagnose", "--from"])
            .arg(fixture(OLD))
            .arg("--pprof")
            .arg(&good)
            .arg("--folded")
            .arg(&missing),
    );
    assert!(err.contains("does not exist"), "{err}");
    // Checked before anything is written: not even the good path, no temporary file.
    let left: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("taken.pb.gz")]);
    // A run checks before it starts the command.
    let marker = dir.path().join("ran");
    input_error(
        cpudoctor()
            .arg("diagnose")
            .arg("--folded")
            .arg(&missing)
            .args(["--", "touch"])
            .arg(&marker),
    );
    assert!(!marker.exists(), "the command was not started");
}

#[test]
fn an_old_diagnosis_without_stacks_still_converts() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("old.folded");
    cpudoctor()
        .args(["diagnose", "--from"])
        .arg(fixture("diagnose/pause-spin-zen4-kvm.json"))
        .arg("--folded")
        .arg(&out)
        .assert()
        .success()
        .stdout(predicates::str::contains("leaf-only"));
    let text = std::fs::read_to_string(&out).unwrap();
    assert!(
        text.lines().next().unwrap().starts_with("spin_wait"),
        "{text}"
    );
}

#[test]
fn report_refuses_mixed_kinds_and_a_cut_diagnosis_leaving_the_old_page() {
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("report.html");
    std::fs::write(&page, "previous report").unwrap();
    let err = input_error(
        cpudoctor()
            .arg("report")
            .arg(fixture(OLD))
            .arg(fixture(FINGERPRINT))
            .arg("-o")
            .arg(&page),
    );
    assert!(err.contains("a report shows fingerprints"), "{err}");
    let cut = dir.path().join("cut.json");
    let whole = std::fs::read(fixture(OLD)).unwrap();
    std::fs::write(&cut, &whole[..100]).unwrap();
    let err = input_error(
        cpudoctor()
            .arg("report")
            .arg(fixture(OLD))
            .arg(&cut)
            .arg("-o")
            .arg(&page),
    );
    assert!(
        err.contains("cut.json is not a cpudoctor diagnosis"),
        "{err}"
    );
    assert_eq!(std::fs::read_to_string(&page).unwrap(), "previous report");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        2,
        "no temporary file"
    );
    // Two good ones: the page, with both flame graphs and the differential one.
    cpudoctor()
        .arg("report")
        .arg(fixture(OLD))
        .arg(fixture("diagnose/spin-phases-4000-zen3-kvm.json"))
        .arg("-o")
        .arg(&page)
        .assert()
        .success()
        .stdout(predicates::str::contains("2 diagnoses, 3 flame graph(s)"));
}

/// Converts the saved wall view of mutex_wait with 4 threads (a real run on the 2-vCPU Zen 4
/// guest) to `--pprof` and `--folded`; returns the two paths and the lines diagnose printed.
fn wall_exports(dir: &Path) -> (PathBuf, PathBuf, String) {
    let (pb, folded) = (dir.join("wall.pb.gz"), dir.join("wall.folded"));
    let out = stdout_text(
        cpudoctor()
            .args(["diagnose", "--from"])
            .arg(fixture("diagnose/mutex-wait-4-zen4-kvm.json"))
            .arg("--pprof")
            .arg(&pb)
            .arg("--folded")
            .arg(&folded),
    );
    (pb, folded, out)
}

#[test]
fn a_saved_wall_view_converts_to_folded_stacks_in_microseconds_of_thread_time() {
    let dir = tempfile::tempdir().unwrap();
    let (_, folded, out) = wall_exports(dir.path());
    assert!(
        out.contains("on and off the CPU, counted in microseconds of thread time"),
        "{out}"
    );
    assert!(out.contains("-sample_index=wall"), "{out}");
    let text = std::fs::read_to_string(&folded).unwrap();
    let lock = text
        .lines()
        .find(|l| l.contains(";__lll_lock_wait+0x2b;[blocked: futex] "))
        .unwrap_or_else(|| panic!("no lock wait: {text}"));
    // 5,925,453,486 ns asleep on the mutex in the saved file.
    assert!(lock.ends_with(" 5925453"), "{lock}");
    assert!(
        text.contains(";compute_under_lock+0x24;[runnable] "),
        "{text}"
    );
}

#[test]
fn go_tool_pprof_reads_the_wall_sample_type_with_the_waits_beside_the_functions() {
    let Some(go) = go() else {
        missing_tool(
            "Go (go tool pprof reads the pprof exports)",
            "apt-get install golang-go, or Go from go.dev/dl in /usr/local/go",
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (pb, _, _) = wall_exports(dir.path());
    // CPU stays the default view: the off-CPU stacks add nothing to it.
    let text = pprof_top(&go, &[&pb]);
    assert!(text.contains("Type: cpu"), "{text}");
    assert!(!text.contains("[blocked"), "{text}");
    let text = pprof_top(&go, &[Path::new("-sample_index=wall"), &pb]);
    assert!(text.contains("Type: wall"), "{text}");
    // 996 samples x 2,004,008 ns = 2.00 s on the CPU, and 8.03 s off it: 10.02 s of the 5
    // threads' time (the switch records give them 10.05 s; the on-CPU part is sampled).
    assert!(text.contains("Total samples = 10.02s"), "{text}");
    let rows = top_rows(&text);
    let names: Vec<&str> = rows.iter().map(|r| r.1.as_str()).collect();
    assert_eq!(
        names[..3],
        ["[blocked: futex]", "compute_under_lock", "[runnable]"],
        "{text}"
    );
    // The labels select a state.
    let text = pprof_top(
        &go,
        &[
            Path::new("-sample_index=wall"),
            Path::new("-tagfocus=wait=lock"),
            &pb,
        ],
    );
    let rows = top_rows(&text);
    assert_eq!(rows[0].1, "[blocked: futex]", "{text}");
    assert!(rows.iter().any(|r| r.1 == "__lll_lock_wait"), "{text}");
    assert!(
        !rows.iter().any(|r| r.1 == "main"),
        "the join is no lock: {text}"
    );
}
