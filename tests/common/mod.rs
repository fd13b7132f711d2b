//! Helpers shared by the command-line test binaries: running the binary, reading its JSON,
//! validating fingerprints against the documented schema, finding probes and metrics, building
//! the test programs ([`program`] by [`Build`]), taking turns ([`serial`]), and what a test
//! needs of the machine ([`two_cpus`], [`missing_tool`], [`missing_hardware`]).
//! Each test binary uses some of them, hence the allowance.
#![allow(dead_code)]

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

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
    entry(&fp["probes"], "name", name)
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

/// How a test program of tests/programs is built: each kind's flags are written here once, so
/// two tests that build a program alike build it the same way.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Build {
    /// As distributions that build for profiling do (Fedora 38+, Ubuntu 24.04): `-O2 -g` with
    /// frame pointers in every function, leaves included, so the kernel's frame-pointer walk
    /// sees every caller.
    FramePointers,
    /// `-O2 -g -fno-omit-frame-pointer` alone: GCC still gives a leaf function no frame, so the
    /// kernel's frame-pointer walk skips the leaf's caller (the CFI walk must find it).
    FramePointersButNotLeaves,
    /// As a distribution builds a package: `-O2 -g`, no frame pointers, a GNU build-id. The
    /// build for programs whose stacks a test does not read.
    Distribution,
}

impl Build {
    fn flags(self) -> &'static [&'static str] {
        match self {
            Build::FramePointers => &[
                "-O2",
                "-g",
                "-pthread",
                "-fno-omit-frame-pointer",
                "-mno-omit-leaf-frame-pointer",
            ],
            Build::FramePointersButNotLeaves => {
                &["-O2", "-g", "-pthread", "-fno-omit-frame-pointer"]
            }
            Build::Distribution => &[
                "-O2",
                "-g",
                "-pthread",
                "-fomit-frame-pointer",
                "-Wl,--build-id",
            ],
        }
    }

    fn folder(self) -> &'static str {
        match self {
            Build::FramePointers => "frame-pointers",
            Build::FramePointersButNotLeaves => "frame-pointers-but-not-leaves",
            Build::Distribution => "distribution",
        }
    }
}

/// Test program `name` (`tests/programs/NAME.c`; `regression/chase` for one in a folder) built
/// the `build` way, once per test binary: the first caller compiles it with [`c_compiler`] into
/// a temporary folder the binary keeps. `None` (the test fails, or skips with
/// CPUDOCTOR_ALLOW_SKIP=1) when there is no C compiler; the compiler failing on the program
/// fails the test.
pub fn program(name: &str, build: Build) -> Option<PathBuf> {
    static BUILT: Mutex<Option<tempfile::TempDir>> = Mutex::new(None);
    // Held while compiling: two tests asking for one program build it once.
    let mut built = BUILT.lock().unwrap_or_else(|e| e.into_inner());
    let dir = built.get_or_insert_with(|| tempfile::tempdir().unwrap());
    let out = dir.path().join(build.folder()).join(name);
    if out.is_file() {
        return Some(out);
    }
    let cc = c_compiler()?;
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let status = std::process::Command::new(&cc)
        .args(build.flags())
        .arg("-o")
        .arg(&out)
        .arg(source(&format!("{name}.c")))
        .status()
        .expect("the C compiler started a moment ago");
    assert!(status.success(), "{cc} failed on {name}.c");
    Some(out)
}

/// A copy of [`program`] in `dir` under its own name, for a test that changes the file (strips
/// it, say); `None` as for [`program`].
pub fn program_in(dir: &Path, name: &str, build: Build) -> Option<PathBuf> {
    let built = program(name, build)?;
    let copy = dir.join(built.file_name().unwrap());
    std::fs::copy(&built, &copy).unwrap();
    Some(copy)
}

/// The measuring tests of one test binary take turns: run side by side they would be each
/// other's neighbours (two ping-pongs on the same CPUs time each other's scheduling; shares of
/// samples mean little when several workloads compete). Hold the guard for the whole test; a
/// test that failed while holding it does not stop the others.
pub fn serial() -> MutexGuard<'static, ()> {
    static SERIAL: Mutex<()> = Mutex::new(());
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The CPUs this process may run on (its affinity mask), as cpudoctor itself reads them.
pub fn allowed_cpus() -> Vec<usize> {
    cpudoctor::machine::allowed_cpus()
}

/// Whether this process may use two CPUs. When it may not, this goes through
/// [`missing_hardware`] (the test fails, or says SKIPPED with CPUDOCTOR_ALLOW_SKIP=1) and
/// returns false for the caller to return.
pub fn two_cpus() -> bool {
    let n = allowed_cpus().len();
    if n < 2 {
        missing_hardware(
            "a second allowed CPU",
            &format!(
                "this process may use {n}; run on a machine (or under an affinity mask) with two"
            ),
        );
        return false;
    }
    true
}

/// `cmd` made to run on the first CPU this process may use, as under `taskset -c N`; returns
/// that CPU.
pub fn on_one_cpu(cmd: &mut std::process::Command) -> usize {
    use std::os::unix::process::CommandExt;
    let cpu = allowed_cpus().first().copied().unwrap_or(0);
    // SAFETY: sched_setaffinity is async-signal-safe; nothing else runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            let mut set = nix::sched::CpuSet::new();
            set.set(cpu).map_err(std::io::Error::from)?;
            nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)
                .map_err(std::io::Error::from)
        });
    }
    cpu
}

/// Runs `cmd`, which must succeed (else the test fails with what it printed), and returns its
/// output.
pub fn output_ok(cmd: &mut std::process::Command) -> std::process::Output {
    let out = cmd.output().expect("the command starts");
    assert!(
        out.status.success(),
        "{:?} failed ({}): {}{}",
        cmd.get_program(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
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

/// The element of the JSON list `list` whose `key` is `value` (a probe by name, a finding by
/// id, a function by name); when there is none the test fails showing the list.
pub fn entry<'a, V>(list: &'a Value, key: &str, value: V) -> &'a Value
where
    Value: PartialEq<V>,
    V: std::fmt::Display + Copy,
{
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .find(|e| e[key] == value)
        .unwrap_or_else(|| panic!("no entry whose {key} is {value} in {list:#}"))
}

/// `tests/fixtures/REL`: a saved file the tests read.
pub fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel)
}

/// `tests/programs/REL`: the source of a test program.
pub fn source(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/programs")
        .join(rel)
}

/// The path of the cpudoctor binary under test, for a `std::process::Command`.
pub fn bin() -> PathBuf {
    assert_cmd::cargo::cargo_bin("cpudoctor")
}

/// What a finished command printed on stderr.
pub fn stderr_of(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// What a finished command printed on stdout.
pub fn stdout_of(o: &std::process::Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Runs `cmd`, which must end as an input error does: exit status 2, nothing on stdout, one
/// line on stderr that starts `error: `; returns that line.
pub fn input_error(cmd: &mut Command) -> String {
    let out = cmd.assert().code(2).stdout(predicates::str::is_empty());
    let stderr = String::from_utf8(out.get_output().stderr.clone()).unwrap();
    assert_eq!(stderr.lines().count(), 1, "one line expected: {stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    stderr
}

/// The `key` of every element of the JSON list `list`, each a string (probe names, hazard ids).
pub fn strings<'a>(list: &'a Value, key: &str) -> Vec<&'a str> {
    list.as_array()
        .unwrap_or_else(|| panic!("not a list: {list}"))
        .iter()
        .map(|e| {
            e[key]
                .as_str()
                .unwrap_or_else(|| panic!("no string {key} in {e}"))
        })
        .collect()
}
