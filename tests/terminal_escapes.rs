//! Issue 29: terminal escapes passed through. A saved hostname `"\u001b]0;pwned\u0007"`, a
//! saved command, a target's thread name were printed raw by `diff`, `report`'s text and
//! `diagnose`, so a file from elsewhere could retitle the reader's terminal (or worse: OSC 52
//! writes the clipboard). Terminal text now loses every control character but newline and tab
//! at the one writer of screen text; colour is cpudoctor's own and only where it colours.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

mod common;
use common::fixture;

const TITLE: &str = "\u{1b}]0;pwned\u{7}";

fn run(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(assert_cmd::cargo::cargo_bin("cpudoctor"))
        .args(args)
        .stdin(Stdio::null())
        .env_remove("NO_COLOR")
        .output()
        .unwrap()
}

/// No control character but newline and tab in `bytes`; the forged text still shows,
/// harmless, so the reader sees what the file carried.
fn no_controls(what: &str, bytes: &[u8], shown: &str) {
    let text = String::from_utf8_lossy(bytes);
    let bad: Vec<char> = text
        .chars()
        .filter(|c| c.is_control() && *c != '\n' && *c != '\t')
        .collect();
    assert!(bad.is_empty(), "{what} printed {bad:?}:\n{text}");
    assert!(
        text.contains(shown),
        "{what} does not show {shown:?}:\n{text}"
    );
}

/// The fixture fingerprint with `edit` applied, written to `dir/name`.
fn forged(dir: &Path, name: &str, src: &str, edit: impl FnOnce(&mut Value)) -> PathBuf {
    let mut v: Value = serde_json::from_slice(&std::fs::read(fixture(src)).unwrap()).unwrap();
    edit(&mut v);
    let path = dir.join(name);
    std::fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    path
}

#[test]
fn case_escape_in_saved_hostname_and_command_is_not_printed_by_diff_and_explain() {
    let dir = tempfile::tempdir().unwrap();
    let src = "fingerprints/zen2-kvm-check.json";
    let old = forged(dir.path(), "old.json", src, |_| {});
    let new = forged(dir.path(), "new.json", src, |v| {
        v["machine"]["hostname"] = format!("{TITLE}evil-host").into();
        v["command"] = format!("check{TITLE}\u{9b}2J").into();
    });
    let o = run(&["diff".as_ref(), old.as_os_str(), new.as_os_str()]);
    assert!(o.status.code().is_some_and(|c| c <= 3), "{o:?}");
    no_controls("diff", &o.stdout, "evil-host");
    let o = run(&["explain".as_ref(), "slow_pause".as_ref(), new.as_os_str()]);
    assert!(o.status.success(), "{o:?}");
    no_controls("explain", &o.stdout, "");
}

#[test]
fn case_escape_in_saved_thread_name_is_not_printed_by_diagnose_from_and_diff() {
    let dir = tempfile::tempdir().unwrap();
    let src = "diagnose/pause-spin-zen4-kvm.json";
    let old = forged(dir.path(), "old.json", src, |_| {});
    let new = forged(dir.path(), "new.json", src, |v| {
        v["threads"][0]["name"] = format!("{TITLE}spinner").into();
        v["target"]["command"] = Value::Array(vec![format!("./x{TITLE}").into()]);
    });
    let o = run(&["diagnose".as_ref(), "--from".as_ref(), new.as_os_str()]);
    assert!(o.status.success(), "{o:?}");
    no_controls("diagnose --from", &o.stdout, "]0;pwned");
    let o = run(&["diff".as_ref(), old.as_os_str(), new.as_os_str()]);
    assert!(o.status.code().is_some_and(|c| c <= 3), "{o:?}");
    no_controls("diff of diagnoses", &o.stdout, "");
}

#[test]
fn case_escape_in_a_file_refused_is_not_printed_in_the_error() {
    let dir = tempfile::tempdir().unwrap();
    let bad = forged(
        dir.path(),
        "bad.json",
        "fingerprints/zen2-kvm-check.json",
        |v| {
            // An unknown enum value: serde quotes it in its complaint.
            v["verdicts"][0]["level"] = format!("{TITLE}nope").into();
        },
    );
    let o = run(&["explain".as_ref(), "slow_pause".as_ref(), bad.as_os_str()]);
    assert_eq!(o.status.code(), Some(2), "{o:?}");
    no_controls("explain's error", &o.stderr, "error:");
}

/// A live target names its thread with an escape (`/proc/self/comm`); diagnose's screen shows
/// the name without it.
#[test]
fn case_escape_in_a_live_thread_name_is_not_printed_by_diagnose() {
    let script = r#"printf '\033]0;pwned\007spin' > /proc/self/comm; i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done"#;
    let o = run(&[
        "diagnose".as_ref(),
        "--no-wall".as_ref(),
        "--".as_ref(),
        "sh".as_ref(),
        "-c".as_ref(),
        script.as_ref(),
    ]);
    let err = String::from_utf8_lossy(&o.stderr);
    if o.status.code() == Some(1) && err.contains("perf_event") {
        panic!(
            "diagnose cannot sample here (install perf permissions: kernel.perf_event_paranoid <= 2): {err}"
        );
    }
    assert!(o.status.success(), "{o:?}");
    no_controls("diagnose", &o.stdout, "]0;pwned");
    no_controls("diagnose's stderr", &o.stderr, "");
}
