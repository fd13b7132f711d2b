//! Issue 29, item 3: saved files are read with a bound. `diff base.json /dev/zero` (and
//! `explain`, `report`, `fleet`, `diagnose --from`; `/dev/urandom`, `<(yes '[')`) read 24 GB
//! in 25 s until the OOM killer came. Each reader now goes through one function that checks
//! the JSON as it arrives and stops at a size cap: each case is one line and exit 2, fast.

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

mod common;
use common::fixture;

const FINGERPRINT: &str = "fingerprints/zen2-kvm-check.json";

/// An endless source on stdin: `/dev/zero`, `/dev/urandom`, or a writer of `[` lines (what
/// `yes '['` gives), each fed through a pipe so nothing can seek or stat it.
#[derive(Debug, Clone, Copy)]
enum Endless {
    Zero,
    Urandom,
    Brackets,
}

/// Runs cpudoctor with `args` (`-` in them reads stdin) fed by `source`; killed after 30 s so
/// a regression fails the test instead of filling the machine's memory.
fn run_fed(args: &[&str], source: Endless) -> (Option<i32>, String, Duration) {
    let started = Instant::now();
    let mut child: Child = Command::new(assert_cmd::cargo::cargo_bin("cpudoctor"))
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let feeder = std::thread::spawn(move || {
        let chunk: Vec<u8> = match source {
            Endless::Zero => vec![0; 64 << 10],
            Endless::Urandom => {
                let mut v = vec![0; 64 << 10];
                std::io::Read::read_exact(
                    &mut std::fs::File::open("/dev/urandom").unwrap(),
                    &mut v,
                )
                .unwrap();
                v
            }
            Endless::Brackets => b"[\n".repeat(32 << 10),
        };
        // Ends when the reader closes the pipe (EPIPE) or after 30 s.
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until && stdin.write_all(&chunk).is_ok() {}
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = started.elapsed();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    feeder.join().unwrap();
    (status.and_then(|s| s.code()), err, elapsed)
}

/// Refused at once: exit 2, one line, no panic, well within the 30 s the endless read was
/// given (a real refusal takes milliseconds; the margin is for a loaded CI machine).
fn refused_fast(args: &[&str], source: Endless) {
    let (code, err, elapsed) = run_fed(args, source);
    assert_eq!(code, Some(2), "{args:?} < {source:?}: {err}");
    assert_eq!(
        err.trim_end().lines().count(),
        1,
        "{args:?} < {source:?}: {err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        elapsed < Duration::from_secs(10),
        "{args:?} < {source:?} took {elapsed:?}"
    );
}

#[test]
fn case_endless_input_diff_base_and_dev_zero_is_one_line_and_exit_2() {
    let base = fixture(FINGERPRINT);
    let base = base.to_str().unwrap();
    for source in [Endless::Zero, Endless::Urandom, Endless::Brackets] {
        refused_fast(&["diff", base, "-"], source);
    }
}

#[test]
fn case_endless_input_explain_report_and_diagnose_from_are_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let html = dir.path().join("r.html");
    let html = html.to_str().unwrap();
    for source in [Endless::Zero, Endless::Urandom, Endless::Brackets] {
        refused_fast(&["explain", "slow_pause", "-"], source);
        refused_fast(&["report", "-", "--output", html], source);
        refused_fast(&["diagnose", "--from", "-"], source);
    }
    assert!(
        !Path::new(html).exists(),
        "a report was written from garbage"
    );
}

#[test]
fn case_endless_input_fleet_of_dev_zero_is_refused() {
    let started = Instant::now();
    let out = Command::new(assert_cmd::cargo::cargo_bin("cpudoctor"))
        .args(["fleet", "/dev/zero", "/dev/urandom"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no fingerprint could be read"), "{err}");
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
}
