//! Helpers shared by the command-line test binaries: running the binary, reading its JSON,
//! validating fingerprints against the documented schema, finding probes and metrics.
//! Each test binary uses some of them, hence the allowance.
#![allow(dead_code)]

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The cpudoctor binary under test.
pub fn cpudoctor() -> Command {
    Command::cargo_bin("cpudoctor").unwrap()
}

/// Runs `cmd`, which must succeed, and parses its stdout as JSON.
pub fn json_of(cmd: &mut Command) -> Value {
    let out = cmd.assert().success().get_output().stdout.clone();
    serde_json::from_slice(&out).expect("stdout is JSON")
}

/// Runs `cmd`, which must succeed, and returns its stdout as text.
pub fn stdout_text(cmd: &mut Command) -> String {
    let out = cmd.assert().success().get_output().stdout.clone();
    String::from_utf8(out).expect("stdout is UTF-8")
}

/// Runs `cpudoctor diagnose --json ARGS`, which must succeed, and parses the diagnosis.
pub fn diagnose_json(args: &[&str]) -> Value {
    json_of(cpudoctor().args(["diagnose", "--json"]).args(args))
}

/// Where `instance` breaks docs/fingerprint.schema.json; empty when it validates.
pub fn schema_errors(instance: &Value) -> Vec<String> {
    let schema: Value =
        serde_json::from_str(include_str!("../../docs/fingerprint.schema.json")).unwrap();
    let validator = jsonschema::validator_for(&schema).expect("schema compiles");
    validator
        .iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path()))
        .collect()
}

/// The result of probe `name` in a fingerprint.
pub fn probe<'a>(fp: &'a Value, name: &str) -> &'a Value {
    fp["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no probe {name}"))
}

/// Metric `name` of one probe result.
pub fn probe_metric(p: &Value, name: &str) -> f64 {
    p["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name)
        .and_then(|m| m["value"].as_f64())
        .unwrap_or_else(|| panic!("no metric {name}"))
}

/// Metric `name` of probe `probe_name` in a fingerprint.
pub fn metric(fp: &Value, probe_name: &str, name: &str) -> f64 {
    probe_metric(probe(fp, probe_name), name)
}

/// A tool a test needs is missing. The test fails and says how to install it, so a plain
/// `cargo test` never reports a test that did not run as passed; with `CPUDOCTOR_ALLOW_SKIP=1`
/// it prints `SKIPPED` instead and the caller returns (for machines that cannot have the tool).
pub fn missing_tool(what: &str, install: &str) {
    if std::env::var("CPUDOCTOR_ALLOW_SKIP").as_deref() == Ok("1") {
        eprintln!("SKIPPED: {what} is missing ({install}); CPUDOCTOR_ALLOW_SKIP=1");
        return;
    }
    panic!(
        "{what} is missing: {install} (`bash .ci/run` installs it); or set \
         CPUDOCTOR_ALLOW_SKIP=1 to skip the tests that need it"
    );
}

/// The C compiler the tests build their programs with: `$CC` when set and not empty (as the
/// handoff runner reads it), else `cc`. When it cannot be started this goes through
/// [`missing_tool`] (a failure, or `SKIPPED` with `CPUDOCTOR_ALLOW_SKIP=1`) and returns `None`
/// for the caller to return.
pub fn c_compiler() -> Option<String> {
    let cc = std::env::var("CC")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "cc".into());
    match std::process::Command::new(&cc).arg("--version").output() {
        Ok(o) if o.status.success() => Some(cc),
        _ => {
            missing_tool(&format!("a C compiler ({cc})"), "apt-get install gcc");
            None
        }
    }
}

/// The machine lacks what a test needs (a second CPU, say), which no install fixes. As
/// [`missing_tool`]: the test fails, or with `CPUDOCTOR_ALLOW_SKIP=1` prints `SKIPPED` and the
/// caller returns; it never passes without having run.
pub fn missing_hardware(what: &str, need: &str) {
    if std::env::var("CPUDOCTOR_ALLOW_SKIP").as_deref() == Ok("1") {
        eprintln!("SKIPPED: this machine lacks {what} ({need}); CPUDOCTOR_ALLOW_SKIP=1");
        return;
    }
    panic!(
        "this test needs {what}: {need}; or set CPUDOCTOR_ALLOW_SKIP=1 to skip the tests \
         that need it"
    );
}

/// Compiles `tests/programs/NAME.c` with `cc` (from [`c_compiler`]) and `flags` into
/// `DIR/NAME` and returns that path; the compiler failing on it fails the test.
pub fn compile_program(cc: &str, name: &str, flags: &[&str], dir: &Path) -> PathBuf {
    let out = dir.join(name);
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/programs")
        .join(format!("{name}.c"));
    let status = std::process::Command::new(cc)
        .args(flags)
        .arg("-o")
        .arg(&out)
        .arg(src)
        .status()
        .expect("the C compiler started a moment ago");
    assert!(status.success(), "{cc} failed on {name}.c");
    out
}

/// The programs `names` of tests/programs compiled with `flags` into a directory held by
/// `cell`, once per test binary (the first caller builds them); `None` (the test fails, or
/// skips with CPUDOCTOR_ALLOW_SKIP=1) when there is no C compiler.
pub fn programs_built_once(
    cell: &'static std::sync::OnceLock<tempfile::TempDir>,
    names: &[&str],
    flags: &[&str],
) -> Option<&'static Path> {
    if let Some(dir) = cell.get() {
        return Some(dir.path());
    }
    let cc = c_compiler()?;
    let dir = cell.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        for name in names {
            compile_program(&cc, name, flags, dir.path());
        }
        dir
    });
    Some(dir.path())
}

/// Finding `id` of a diagnosis; when there is none the test fails with the findings, the
/// hottest sites and functions and the notes, which say why.
pub fn finding<'a>(d: &'a Value, id: &str) -> &'a Value {
    d["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id)
        .unwrap_or_else(|| {
            let sites: Vec<String> = d["hot_sites"]
                .as_array()
                .into_iter()
                .flatten()
                .take(6)
                .map(|s| format!("{} {} {}", s["symbol"], s["instruction"], s["share"]))
                .collect();
            let functions: Vec<String> = d["functions"]
                .as_array()
                .into_iter()
                .flatten()
                .take(6)
                .map(|f| {
                    format!(
                        "{} {} {} {}",
                        f["symbol"], f["module"], f["share"], f["threads"]
                    )
                })
                .collect();
            panic!(
                "no {id} finding in {:#}\nhot sites: {sites:#?}\nfunctions: {functions:#?}\n\
                 notes: {:#}",
                d["findings"], d["notes"]
            )
        })
}

/// True when this user may sample kernel code: root, or `perf_event_paranoid` <= 1 (a user
/// with CAP_PERFMON but not root is not told apart here: it would fail the assertions of the
/// refused path and say so).
pub fn kernel_sampling_permitted() -> bool {
    let paranoid: i32 = std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(2);
    nix::unistd::geteuid().is_root() || paranoid <= 1
}

/// A temporary directory for a server that refuses to run as root (PostgreSQL, MariaDB):
/// owned by `user` when there is one (this process is root), else by this user.
pub fn server_dir(user: Option<&str>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    if let Some(u) = user {
        assert!(
            std::process::Command::new("chown")
                .arg(u)
                .arg(dir.path())
                .status()
                .unwrap()
                .success(),
            "chown {u} of the server's directory"
        );
    }
    dir
}
