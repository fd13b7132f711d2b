//! Issue 23, "never lose a result, never harm a file": each case of its list, as a new user
//! found it, is a test named `case_N_...`. Outputs through symlinks, FIFOs, 0600 files and
//! stdout; numbers at their extremes; paths checked before work; inputs read once; signals
//! to `diagnose`; what `fleet`, `explain` and `check` used to skip or accept silently.
//!
//! Every writer here runs on saved fixtures or on a run that measures nothing (a probe that
//! skips), so the file takes seconds; the recordings are of `true` and `sleep`.

use serde_json::Value;
use std::fs;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt, PermissionsExt, symlink};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

mod common;
use common::*;

const FINGERPRINT: &str = "fingerprints/zen2-kvm-check.json";
const DIAGNOSIS: &str = "diagnose/pause-spin-zen4-kvm.json";

/// Runs to the end, with no stdin.
fn run(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// Arguments as OsStr, paths and words alike.
macro_rules! args {
    ($($a:expr),* $(,)?) => { &[$(std::ffi::OsStr::new(&$a)),*] };
}

/// Refused with exit 2: one line (clap's usage hint aside) naming `words`, no panic.
fn refused(o: &Output, words: &str) {
    let err = stderr_of(o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(words), "wanted {words:?} in: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

/// Temporary files a write left in `dir`.
fn temporaries(dir: &Path) -> Vec<String> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".tmp-") || n.contains("write-test"))
        .collect()
}

/// Where a test sends one output.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Dest {
    /// A symlink to a file that exists: the link must stay, the target get the bytes.
    Symlink,
    /// A named pipe with a reader: it must stay a pipe, the reader get the bytes.
    Fifo,
    /// A file with mode 0600: it must keep the mode.
    Private,
    /// `-`: stdout gets the bytes, and nothing else.
    Stdout,
}

const DESTS: [Dest; 4] = [Dest::Symlink, Dest::Fifo, Dest::Private, Dest::Stdout];

/// One output's destination, made ready.
struct Prepared {
    dest: Dest,
    path: PathBuf,
    target: PathBuf,
    reader: Option<JoinHandle<Vec<u8>>>,
}

fn prepare(dir: &Path, name: &str, dest: Dest) -> Prepared {
    let path = dir.join(name);
    let target = dir.join(format!("{name}.target"));
    let mut reader = None;
    match dest {
        Dest::Symlink => {
            fs::write(&target, b"old").unwrap();
            symlink(target.file_name().unwrap(), &path).unwrap();
        }
        Dest::Fifo => {
            nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
            let p = path.clone();
            reader = Some(std::thread::spawn(move || fs::read(p).unwrap()));
        }
        Dest::Private => {
            fs::write(&path, b"old").unwrap();
            fs::set_permissions(&path, fs::Permissions::from_mode(0o600)).unwrap();
        }
        Dest::Stdout => {}
    }
    Prepared {
        dest,
        path: if dest == Dest::Stdout {
            PathBuf::from("-")
        } else {
            path
        },
        target,
        reader,
    }
}

impl Prepared {
    /// The bytes the output got, after checking the destination is as it was.
    fn collect(self, stdout: &[u8]) -> Vec<u8> {
        match self.dest {
            Dest::Symlink => {
                let m = fs::symlink_metadata(&self.path).unwrap();
                assert!(m.file_type().is_symlink(), "{:?} replaced", self.path);
                fs::read(&self.target).unwrap()
            }
            Dest::Fifo => {
                // A reader still waiting (the command failed before opening the pipe) gets
                // an empty write instead of hanging the test.
                let _ = fs::OpenOptions::new()
                    .write(true)
                    .custom_flags(libc::O_NONBLOCK)
                    .open(&self.path);
                let got = self.reader.unwrap().join().unwrap();
                let m = fs::symlink_metadata(&self.path).unwrap();
                assert!(m.file_type().is_fifo(), "{:?} replaced", self.path);
                got
            }
            Dest::Private => {
                let m = fs::metadata(&self.path).unwrap();
                assert_eq!(m.permissions().mode() & 0o777, 0o600, "{:?}", self.path);
                fs::read(&self.path).unwrap()
            }
            Dest::Stdout => stdout.to_vec(),
        }
    }
}

/// What an output must look like.
fn html(b: &[u8]) -> bool {
    b.starts_with(b"<!DOCTYPE html") && b.trim_ascii_end().ends_with(b"</html>")
}
fn json_with(key: &'static str) -> impl Fn(&[u8]) -> bool {
    move |b| serde_json::from_slice::<Value>(b).is_ok_and(|v| v.get(key).is_some())
}
fn gzip(b: &[u8]) -> bool {
    b.starts_with(&[0x1f, 0x8b])
}
fn folded(b: &[u8]) -> bool {
    !b.is_empty() && b.ends_with(b"\n") && !b.starts_with(b"{")
}
fn prometheus(b: &[u8]) -> bool {
    String::from_utf8_lossy(b).contains("cpudoctor_")
}

/// Runs `command` (built from the output path) once per destination, and checks each output.
fn every_destination(
    what: &str,
    name: &str,
    command: impl Fn(&Path) -> Vec<std::ffi::OsString>,
    exit: Option<i32>,
    valid: impl Fn(&[u8]) -> bool,
) {
    for dest in DESTS {
        let dir = tempfile::tempdir().unwrap();
        let p = prepare(dir.path(), name, dest);
        let out = Command::new(bin())
            .args(command(&p.path))
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            exit.or(Some(0)),
            "{what} to {dest:?}: {}",
            stderr_of(&out)
        );
        let stdout = out.stdout.clone();
        let got = p.collect(&stdout);
        assert!(
            valid(&got),
            "{what} to {dest:?} wrote {} bytes: {:?}",
            got.len(),
            String::from_utf8_lossy(&got[..got.len().min(200)])
        );
        if dest != Dest::Stdout {
            // stdout held the screen, not the output.
            assert_ne!(stdout, got, "{what} to {dest:?}");
        }
        assert!(temporaries(dir.path()).is_empty(), "{what} to {dest:?}");
    }
}

fn os(v: &[&dyn AsRef<std::ffi::OsStr>]) -> Vec<std::ffi::OsString> {
    v.iter().map(|a| a.as_ref().to_os_string()).collect()
}

#[test]
fn case_1_every_output_kind_through_a_symlink_to_a_fifo_to_a_0600_file_and_to_stdout() {
    // Regression: every writer renamed a temporary file over the path: a symlink became a
    // regular file (its target untouched), so did a FIFO, and a 0600 file came back 0644.
    let fp = fixture(FINGERPRINT);
    let diag = fixture(DIAGNOSIS);
    every_destination(
        "report -o (fingerprints)",
        "r.html",
        |o| os(&[&"report", &fp, &"-o", &o]),
        None,
        html,
    );
    every_destination(
        "report -o (diagnoses)",
        "d.html",
        |o| os(&[&"report", &diag, &"-o", &o]),
        None,
        html,
    );
    every_destination(
        "diagnose --pprof",
        "p.pb.gz",
        |o| os(&[&"diagnose", &"--from", &diag, &"--pprof", &o]),
        None,
        gzip,
    );
    every_destination(
        "diagnose --folded",
        "f.folded",
        |o| os(&[&"diagnose", &"--from", &diag, &"--folded", &o]),
        None,
        folded,
    );
    every_destination(
        "fleet --html",
        "fleet.html",
        |o| os(&[&"fleet", &fp, &"--html", &o]),
        None,
        html,
    );
    // `check` and `probe` share their writer (`--save`, `--prom`); a probe that skips at once
    // (c2c on one CPU) writes both without measuring, and exits 1 for having measured nothing
    // (issue 29).
    every_destination(
        "probe --save",
        "fp.json",
        |o| os(&[&"probe", &"c2c", &"--cpus", &"0", &"--quick", &"--save", &o]),
        Some(1),
        json_with("schema_version"),
    );
    every_destination(
        "probe --prom",
        "fp.prom",
        |o| os(&[&"probe", &"c2c", &"--cpus", &"0", &"--quick", &"--prom", &o]),
        Some(1),
        prometheus,
    );
}

#[test]
fn case_1_a_recording_is_saved_through_a_symlink_to_a_fifo_to_a_0600_file_and_to_stdout() {
    // `diagnose --save` while recording (of `true`: nothing to sample, the file is written).
    every_destination(
        "diagnose --save",
        "d.json",
        |o| os(&[&"diagnose", &"--save", &o, &"--", &"true"]),
        None,
        json_with("diagnosis_version"),
    );
}

#[test]
fn case_1_a_handoff_fingerprint_is_saved_through_a_symlink_to_a_fifo_to_a_0600_file_and_to_stdout()
{
    // The shortest handoff: the model lock only, one item, one delay, one run; the four
    // destinations at once (seconds each, mostly the PAUSE measurement before it).
    let runs: Vec<_> = DESTS
        .into_iter()
        .map(|dest| {
            std::thread::spawn(move || {
                let dir = tempfile::tempdir().unwrap();
                let p = prepare(dir.path(), "h.json", dest);
                let out = Command::new(bin())
                    .args([
                        "spin",
                        "--handoff",
                        "--quick",
                        "--runtimes",
                        "model",
                        "--items",
                        "1",
                        "--delays",
                        "1",
                        "--work-ms",
                        "1",
                        "--repetitions",
                        "1",
                        "--pause-ns",
                        "43",
                        "--save",
                    ])
                    .arg(&p.path)
                    .stdin(Stdio::null())
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{dest:?}: {}", stderr_of(&out));
                let got = p.collect(&out.stdout);
                assert!(json_with("schema_version")(&got), "{dest:?}");
                assert!(temporaries(dir.path()).is_empty(), "{dest:?}");
            })
        })
        .collect();
    for r in runs {
        r.join().unwrap();
    }
}

#[test]
fn case_1_report_to_dev_full_is_an_error_and_the_device_stays() {
    // Regression: as root, `report -o /dev/full` put an HTML file where /dev/full was; as
    // any user, `-o /dev/stdout` said "no permission to write in /dev".
    let o = run(args!["report", fixture(FINGERPRINT), "-o", "/dev/full"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr_of(&o));
    assert!(stderr_of(&o).contains("no space left"), "{}", stderr_of(&o));
    let m = fs::metadata("/dev/full").unwrap();
    assert!(m.file_type().is_char_device(), "/dev/full was replaced");
    let o = run(args!["report", fixture(FINGERPRINT), "-o", "/dev/stdout"]);
    assert!(o.status.success(), "{}", stderr_of(&o));
    assert!(html(&o.stdout));
}

#[test]
fn case_1_killed_mid_write_leaves_no_temporary_file_and_never_half_a_file() {
    // Regression: a `.NAME.tmp-PID` was left behind when cpudoctor was killed mid-write.
    // SIGTERM at growing delays across the write of a large report: whenever it lands, the
    // directory holds no temporary file, and the report is whole or absent.
    let fp = fixture(FINGERPRINT);
    let inputs: Vec<&Path> = std::iter::repeat_n(fp.as_path(), 12).collect();
    for step in 0..12u64 {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("r.html");
        let mut child = Command::new(bin())
            .arg("report")
            .args(&inputs)
            .arg("-o")
            .arg(&out)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(20 * step));
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        );
        let status = child.wait().unwrap();
        assert!(
            status.success() || status.signal() == Some(libc::SIGTERM),
            "{status:?}"
        );
        assert!(temporaries(dir.path()).is_empty(), "step {step}");
        if let Ok(b) = fs::read(&out) {
            assert!(html(&b), "step {step}: half a report");
        }
    }
}

#[test]
fn case_2_overflow_cores_beyond_the_range_are_refused_with_the_range() {
    // Regression: `spin --pause-ns 43 --cores 18446744073709551615` spun at 100% CPU growing
    // ~1 GB/s; `--cores 1e15` printed a wrapped limit.
    for cores in ["18446744073709551615", "65537", "0", "1e15"] {
        let o = run(args!["spin", "--pause-ns", "43", "--cores", cores]);
        refused(&o, "--cores");
    }
    let o = run(args!["spin", "--pause-ns", "43", "--cores", "65537"]);
    refused(&o, "1..=65536");
    let o = run(args![
        "spin",
        "--pause-ns",
        "43",
        "--cores",
        "65536",
        "--json"
    ]);
    assert!(o.status.success(), "{}", stderr_of(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(
        v["dotnet_legacy"]["schedule"]["limit_pauses"],
        20_000 * 65_536
    );
}

#[test]
fn case_3_panics_on_large_durations_are_refused_with_the_range() {
    // Regression: "cannot convert float seconds to Duration" with a backtrace, and
    // `--delays 1e30` panicked a worker and hung the main thread.
    for (args, option) in [
        (
            &["diagnose", "--duration", "1e30", "--", "true"][..],
            "--duration",
        ),
        (
            &[
                "spin",
                "--handoff",
                "--quick",
                "--runtimes",
                "model",
                "--work-ms",
                "1e30",
            ][..],
            "--work-ms",
        ),
        (
            &[
                "spin",
                "--handoff",
                "--quick",
                "--runtimes",
                "model",
                "--delays",
                "1,1e30",
            ][..],
            "--delays",
        ),
        (&["spin", "--pause-ns", "NaN"][..], "--pause-ns"),
        (&["spin", "--pause-ns", "inf"][..], "--pause-ns"),
        (&["spin", "--pause-ns", "-1"][..], "--pause-ns"),
        (&["probe", "c2c", "--budget", "1e30"][..], "--budget"),
        (
            &["probe", "pause", "--repetitions", "4294967295"][..],
            "--repetitions",
        ),
        (&["check", "--runs", "0"][..], "--runs"),
    ] {
        let o = Command::new(bin()).args(args).output().unwrap();
        refused(&o, option);
        assert!(
            stderr_of(&o).contains("at most") || stderr_of(&o).contains("not in"),
            "{args:?}: the range is named: {}",
            stderr_of(&o)
        );
    }
}

#[test]
fn case_3_completions_and_man_to_a_full_or_closed_stdout_do_not_panic() {
    // Regression: `completions bash > /dev/full` panicked inside clap_complete.
    for what in [&["completions", "bash"][..], &["man"][..]] {
        let o = Command::new(bin())
            .args(what)
            .stdout(fs::File::create("/dev/full").unwrap())
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{what:?}: {}", stderr_of(&o));
        assert!(stderr_of(&o).contains("cannot write to stdout"), "{what:?}");
        assert!(!stderr_of(&o).contains("panicked"), "{what:?}");
        // A closed stdout (`>&-`).
        let o = Command::new("sh")
            .arg("-c")
            .arg("exec \"$0\" \"$@\" >&-")
            .arg(bin())
            .args(what)
            .output()
            .unwrap();
        assert!(!stderr_of(&o).contains("panicked"), "{what:?}");
        assert_ne!(o.status.code(), Some(101), "{what:?}");
    }
}

#[test]
fn case_4_output_paths_are_checked_before_the_work() {
    // Regression: `diagnose --save <300-char name>.json -- sleep 5` recorded 5 s, then failed
    // and printed nothing: the recording was lost. `check --save` with such a name measured
    // everything first. `--save o --pprof o` was accepted and the JSON silently lost.
    let dir = tempfile::tempdir().unwrap();
    let long = dir.path().join(format!("{}.json", "a".repeat(300)));
    let marker = dir.path().join("ran");
    let o = run(args![
        "diagnose",
        "--save",
        long,
        "--",
        "sh",
        "-c",
        format!("touch {}", marker.display())
    ]);
    refused(&o, "305 bytes long, more than the");
    assert!(
        !marker.exists(),
        "the command ran before the path was checked"
    );
    let o = run(args!["check", "--save", long]);
    refused(&o, "305 bytes long");
    assert!(
        !stderr_of(&o).contains("cpudoctor check:"),
        "measured first: {}",
        stderr_of(&o)
    );
    let same = dir.path().join("o");
    let o = run(args![
        "diagnose",
        "--save",
        same,
        "--pprof",
        same,
        "--",
        "sh",
        "-c",
        format!("touch {}", marker.display())
    ]);
    refused(&o, "--save and --pprof both name");
    assert!(!marker.exists());
    // Through a symlink it is the same file all the same.
    fs::write(&same, b"x").unwrap();
    let link = dir.path().join("link");
    symlink(&same, &link).unwrap();
    let o = run(args![
        "diagnose",
        "--from",
        fixture(DIAGNOSIS),
        "--pprof",
        same,
        "--folded",
        link
    ]);
    refused(&o, "--pprof and --folded both name");
    // An output that is an input, an unwritable directory, `-` beside --json.
    let copy = dir.path().join("fp.json");
    fs::copy(fixture(FINGERPRINT), &copy).unwrap();
    let o = run(args!["report", copy, "-o", copy]);
    refused(&o, "is also an input");
    assert_eq!(
        fs::read(&copy).unwrap(),
        fs::read(fixture(FINGERPRINT)).unwrap()
    );
    let o = run(args![
        "diagnose",
        "--from",
        fixture(DIAGNOSIS),
        "--json",
        "--pprof",
        "-"
    ]);
    refused(
        &o,
        "--pprof - writes to stdout, where --json already prints",
    );
    let o = run(args!["check", "--save", "/proc/nope/fp.json"]);
    refused(&o, "does not exist");
    // A directory no one may create files in (root included).
    let o = run(args!["check", "--prom", "/proc/fp.prom"]);
    refused(&o, "cannot write /proc/fp.prom");
    assert!(temporaries(dir.path()).is_empty());
}

/// Runs `cpudoctor args` with a writer feeding `fifo`; fails, instead of hanging, when the
/// command is still running after 60 s.
fn with_fifo_input(args: &[&std::ffi::OsStr], fifo: &Path, content: Vec<u8>) -> Output {
    nix::unistd::mkfifo(fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
    let path = fifo.to_path_buf();
    let writer = std::thread::spawn(move || {
        if let Ok(mut f) = fs::OpenOptions::new().write(true).open(&path) {
            let _ = std::io::Write::write_all(&mut f, &content);
        }
    });
    let mut child = Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            // Release the writer should it still wait for a reader.
            let _ = fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(fifo);
            panic!("{args:?} hangs on a FIFO");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(fifo);
    writer.join().unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn case_5_inputs_opened_twice_a_fifo_stdin_and_process_substitution_are_read_once() {
    // Regression: `diff good.json <(cat good.json)` said "/dev/fd/63 is not a cpudoctor
    // fingerprint (EOF)"; a named FIFO hung `diff` and `report` forever.
    let fp = fixture(FINGERPRINT);
    let bytes = fs::read(&fp).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("in.json");
    let o = with_fifo_input(args!["diff", fp, fifo], &fifo, bytes.clone());
    assert!(o.status.success(), "{}", stderr_of(&o));
    fs::remove_file(&fifo).unwrap();
    let html_out = dir.path().join("r.html");
    let o = with_fifo_input(args!["report", fifo, "-o", html_out], &fifo, bytes.clone());
    assert!(o.status.success(), "{}", stderr_of(&o));
    assert!(html(&fs::read(&html_out).unwrap()));
    // A diagnosis through a FIFO is told from its bytes as well.
    fs::remove_file(&fifo).unwrap();
    let diag = fixture(DIAGNOSIS);
    let o = with_fifo_input(args!["diff", diag, fifo], &fifo, fs::read(&diag).unwrap());
    assert!(o.status.success(), "{}", stderr_of(&o));
    // stdin, once.
    let o = Command::new(bin())
        .args(["diff", "-"])
        .arg(&fp)
        .stdin(fs::File::open(&fp).unwrap())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr_of(&o));
    let o = Command::new(bin())
        .args(["diff", "-", "-"])
        .stdin(fs::File::open(&fp).unwrap())
        .output()
        .unwrap();
    refused(&o, "stdin (-) can be read once only");
    // Process substitution, as a shell does it.
    let o = Command::new("bash")
        .arg("-c")
        .arg("exec \"$0\" diff \"$1\" <(cat \"$1\")")
        .arg(bin())
        .arg(&fp)
        .output();
    match o {
        Ok(o) => assert!(o.status.success(), "{}", stderr_of(&o)),
        Err(_) => missing_tool("bash", "apt-get install bash"),
    }
}

/// The direct children of `pid`, from every one of its threads.
fn children_of(pid: u32) -> Vec<i32> {
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .flat_map(|t| {
            fs::read_to_string(t.path().join("children"))
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect::<Vec<i32>>()
        })
        .collect()
}

/// True while `pid` runs (a zombie waiting for init to reap it has stopped running).
fn running(pid: i32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let state = s.get(s.rfind(')')? + 1..)?.split_whitespace().next()?;
            Some(state != "Z" && state != "X")
        })
        .unwrap_or(false)
}

/// `diagnose --save FILE -- sleep 30` with the sleep started; its PID and the sleep's.
fn diagnose_sleeping(save: &Path) -> (std::process::Child, i32) {
    let mut child = Command::new(bin())
        .args(["diagnose", "--save"])
        .arg(save)
        .args(["--", "sleep", "30"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let sleep = loop {
        if let Some(&c) = children_of(child.id()).first() {
            // Running `sleep` (exec'd), so the recording is under way.
            let comm = fs::read_to_string(format!("/proc/{c}/comm")).unwrap_or_default();
            if comm.trim() == "sleep" {
                break c;
            }
        }
        if let Some(s) = child.try_wait().unwrap() {
            panic!("diagnose ended before the workload started: {s:?}");
        }
        assert!(Instant::now() < deadline, "the workload never started");
        std::thread::sleep(Duration::from_millis(20));
    };
    // The recording loop is running (it starts as the command is released).
    std::thread::sleep(Duration::from_millis(300));
    (child, sleep)
}

/// Waits up to `within` for `pid` to stop running.
fn gone_within(pid: i32, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while running(pid) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    !running(pid)
}

#[test]
fn case_6_signals_sighup_sigint_sigterm_sigquit_to_diagnose_save_the_recording_and_stop_the_workload()
 {
    // Regression: SIGHUP to `diagnose --save s.json -- sleep 30` (a dropped ssh session)
    // killed it at once, wrote nothing, and left `sleep 30` running under init.
    for sig in [
        nix::sys::signal::Signal::SIGHUP,
        nix::sys::signal::Signal::SIGINT,
        nix::sys::signal::Signal::SIGTERM,
        nix::sys::signal::Signal::SIGQUIT,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let save = dir.path().join("s.json");
        let (mut child, sleep) = diagnose_sleeping(&save);
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), sig).unwrap();
        let status = child.wait().unwrap();
        // It ends by the signal, as `perf record` does: a shell sees 128 + N (130 for SIGINT);
        // SIGQUIT exits with 131 rather than dump core.
        if sig == nix::sys::signal::Signal::SIGQUIT {
            assert_eq!(status.code(), Some(131), "{sig}: {status:?}");
        } else {
            assert_eq!(status.signal(), Some(sig as i32), "{sig}: {status:?}");
        }
        let d: Value = serde_json::from_slice(&fs::read(&save).unwrap()).unwrap();
        assert_eq!(d["target"]["ended"], "killed by SIGTERM", "{sig}");
        assert!(
            gone_within(sleep, Duration::from_secs(5)),
            "{sig}: sleep runs"
        );
        assert!(temporaries(dir.path()).is_empty());
    }
}

#[test]
fn case_6_signals_sigkill_to_diagnose_leaves_no_workload_running() {
    // Regression: SIGKILL orphaned the workload (the docs say it is never left running).
    let dir = tempfile::tempdir().unwrap();
    let (mut child, sleep) = diagnose_sleeping(&dir.path().join("s.json"));
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(
        gone_within(sleep, Duration::from_secs(2)),
        "sleep {sleep} outlived diagnose"
    );
}

#[test]
fn case_7_silent_skips_a_symlink_loop_and_a_dangling_link_are_named() {
    // Regression: `fleet DIR` skipped them without naming them ("0 file(s) skipped").
    let dir = tempfile::tempdir().unwrap();
    fs::copy(fixture(FINGERPRINT), dir.path().join("host-a.json")).unwrap();
    symlink("nowhere.json", dir.path().join("gone.json")).unwrap();
    symlink("loop-b.json", dir.path().join("loop-a.json")).unwrap();
    symlink("loop-a.json", dir.path().join("loop-b.json")).unwrap();
    let o = run(args!["fleet", dir.path()]);
    assert!(o.status.success(), "{}", stderr_of(&o));
    let err = stderr_of(&o);
    assert!(err.contains("gone.json: a dangling symlink"), "{err}");
    assert!(err.contains("loop-a.json: a symlink loop"), "{err}");
    assert!(err.contains("loop-b.json: a symlink loop"), "{err}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("3 file(s) skipped"));
}

#[test]
fn case_8_explain_on_a_saved_diagnosis_says_it_is_a_diagnosis() {
    // Regression: `explain X SAVED_DIAGNOSIS.json` said "expected struct CpuIdentity".
    let o = run(args!["explain", "slow_pause", fixture(DIAGNOSIS)]);
    refused(
        &o,
        "is not a cpudoctor fingerprint (it is a saved diagnosis",
    );
}

#[test]
fn case_8_schema_version_0_is_refused_alike_by_diff_report_fleet_and_explain() {
    // Regression: `schema_version 0` was accepted by `diff`, refused by `fleet`.
    let dir = tempfile::tempdir().unwrap();
    let mut v: Value = serde_json::from_slice(&fs::read(fixture(FINGERPRINT)).unwrap()).unwrap();
    v["schema_version"] = 0.into();
    let zero = dir.path().join("zero.json");
    fs::write(&zero, v.to_string()).unwrap();
    let words = "schema_version 0, which no cpudoctor writes";
    let good = fixture(FINGERPRINT);
    refused(&run(args!["diff", good, zero]), words);
    refused(
        &run(args!["report", zero, "-o", dir.path().join("r.html")]),
        words,
    );
    refused(&run(args!["explain", "slow_pause", zero]), words);
    refused(&run(args!["fleet", zero]), words);
    // The same for a diagnosis.
    let mut d: Value = serde_json::from_slice(&fs::read(fixture(DIAGNOSIS)).unwrap()).unwrap();
    d["diagnosis_version"] = 0.into();
    fs::write(&zero, d.to_string()).unwrap();
    refused(
        &run(args!["diff", fixture(DIAGNOSIS), zero]),
        "diagnosis_version 0, which no cpudoctor writes",
    );
}

#[test]
fn case_8_check_with_every_probe_skipped_does_not_exit_0() {
    // Regression: `check` with every probe skipped exited 0 with an empty fingerprint.
    let list = run(args!["probe", "--list"]);
    let mut args: Vec<String> = vec!["check".into()];
    for line in String::from_utf8_lossy(&list.stdout).lines() {
        let name = line.split_whitespace().next().unwrap();
        args.extend(["--skip".into(), name.to_string()]);
    }
    let o = Command::new(bin()).args(&args).output().unwrap();
    refused(&o, "--skip leaves no probe to run");
    // Every probe that runs skips: on one CPU, the probes that need two (the only ones left
    // here). The fingerprint is printed and saved (it says why), and the exit status says
    // nothing was measured.
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("fp.json");
    let two_cpu = ["c2c", "split-lock", "split-lock-neighbour", "sharing"];
    let mut cmd = Command::new(bin());
    cmd.args(["check", "--save"]).arg(&save);
    for line in String::from_utf8_lossy(&list.stdout).lines() {
        let name = line.split_whitespace().next().unwrap();
        if !two_cpu.contains(&name) {
            cmd.args(["--skip", name]);
        }
    }
    on_one_cpu(&mut cmd);
    let o = cmd.output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", stderr_of(&o));
    assert!(
        stderr_of(&o).contains("nothing was measured"),
        "{}",
        stderr_of(&o)
    );
    let fp: Value = serde_json::from_slice(&fs::read(&save).unwrap()).unwrap();
    for name in two_cpu {
        assert_eq!(probe(&fp, name)["status"], "skipped", "{name}");
    }
}
