//! Issue 29, item 4: process trees owned. `experiment --pages -- sh -c 'sleep 41 & sleep 2'`,
//! then INT, TERM or KILL: both sleeps survived (`PR_SET_PDEATHSIG` reaches the direct child
//! only), and the rounds already measured were thrown away on INT. The workload now runs in a
//! process group of its own, ended as a whole on a signal, on cpudoctor's own SIGKILL (the
//! watchdog) and, for `experiment`, when the command exits (what it left behind); measured
//! rounds are saved on INT and TERM.

mod common;

use serde_json::Value;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Processes whose command line holds `marker` (a sleep with a duration no other process
/// uses).
fn running_with(marker: &str) -> Vec<String> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            e.file_name().to_str()?.parse::<u32>().ok()?;
            let cmdline = std::fs::read(e.path().join("cmdline")).ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            // A zombie waiting for its reaper has ended already.
            let state = stat
                .rsplit(')')
                .next()?
                .split_whitespace()
                .next()?
                .to_string();
            let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            (text.contains(marker) && state != "Z")
                .then(|| format!("{}: {text}", e.path().display()))
        })
        .collect()
}

/// Waits up to 5 s for every process holding `marker` to end; what is left, if any.
fn survivors(marker: &str) -> Vec<String> {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let left = running_with(marker);
        if left.is_empty() || Instant::now() > until {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A duration for `sleep` unique to this test process and `salt`, to find its processes by.
fn marker(salt: u32) -> String {
    format!("41.{}{salt}", std::process::id())
}

fn start(args: &[&str]) -> Child {
    Command::new(assert_cmd::cargo::cargo_bin("cpudoctor"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Waits until the background sleep of `marker` runs (the workload started), at most 20 s.
fn wait_started(marker: &str) {
    let until = Instant::now() + Duration::from_secs(20);
    while running_with(marker).is_empty() {
        assert!(Instant::now() < until, "the workload never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn experiment_then(sig: i32, salt: u32) -> (std::process::ExitStatus, String, Option<Value>) {
    let m = marker(salt);
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("exp.json");
    let script = format!("sleep {m} & sleep 0.4");
    let mut child = start(&[
        "experiment",
        "--pages",
        "--runs",
        "50",
        "--warmup",
        "0",
        "--save",
        save.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &script,
    ]);
    wait_started(&m);
    // A few rounds (two arms of 0.4 s each) are measured first.
    std::thread::sleep(Duration::from_millis(2500));
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as i32, sig) };
    let status = child.wait().unwrap();
    let left = survivors(&m);
    assert!(
        left.is_empty(),
        "after signal {sig}, still running: {left:?}"
    );
    let mut err = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err).unwrap();
    let saved = std::fs::read(&save)
        .ok()
        .map(|b| serde_json::from_slice(&b).unwrap());
    (status, err, saved)
}

/// The rounds measured before the signal are saved, said to be those, and cpudoctor ends as
/// the signal would have ended it.
fn kept_rounds(sig: i32, salt: u32) {
    let (status, err, saved) = experiment_then(sig, salt);
    // Ended as the signal would end it (a shell sees 128 + sig).
    assert!(
        std::os::unix::process::ExitStatusExt::signal(&status) == Some(sig)
            || status.code() == Some(128 + sig),
        "{status:?}: {err}"
    );
    let saved = saved.unwrap_or_else(|| panic!("nothing saved after signal {sig}: {err}"));
    let runs = saved["runs"].as_u64().unwrap();
    assert!((1..50).contains(&runs), "runs {runs}");
    for arm in saved["arms"].as_array().unwrap() {
        assert_eq!(
            arm["samples"].as_array().unwrap().len() as u64,
            runs,
            "{arm}"
        );
    }
    let notes = saved["notes"].to_string();
    assert!(
        notes.contains(&format!("stopped by a signal after {runs} of 50")),
        "{notes}"
    );
}

#[test]
fn case_experiment_int_ends_the_whole_tree_and_keeps_measured_rounds() {
    kept_rounds(libc::SIGINT, 1);
}

#[test]
fn case_experiment_term_ends_the_whole_tree_and_keeps_measured_rounds() {
    kept_rounds(libc::SIGTERM, 2);
}

#[test]
fn case_experiment_killed_leaves_no_process_of_the_workload() {
    let (status, err, _) = experiment_then(libc::SIGKILL, 3);
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(libc::SIGKILL),
        "{err}"
    );
}

/// What a run leaves in the background is killed when the command exits: the next run starts
/// alone, and the run's stdout reaches EOF at once (the experiment waited 41 s for it).
#[test]
fn case_experiment_left_behind_processes_end_with_each_run() {
    let m = marker(4);
    let script = format!("sleep {m} & echo ok");
    let started = Instant::now();
    common::output_ok(
        Command::new(assert_cmd::cargo::cargo_bin("cpudoctor"))
            .args([
                "experiment",
                "--pages",
                "--runs",
                "2",
                "--warmup",
                "0",
                "--json",
            ])
            .args(["--", "sh", "-c", &script])
            .stdin(Stdio::null()),
    );
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took {:?}: a run waited for its background sleep",
        started.elapsed()
    );
    assert!(survivors(&m).is_empty(), "{:?}", running_with(&m));
}

/// `diagnose -- CMD` killed by SIGKILL: the watchdog ends the command's group.
#[test]
fn case_diagnose_killed_leaves_no_process_of_the_workload() {
    let m = marker(5);
    let script = format!("sleep {m} & sleep 30.{}", std::process::id());
    let mut child = start(&["diagnose", "--no-wall", "--", "sh", "-c", &script]);
    wait_started(&m);
    std::thread::sleep(Duration::from_millis(500));
    child.kill().unwrap();
    child.wait().unwrap();
    let left = survivors(&m);
    assert!(left.is_empty(), "still running: {left:?}");
    let left = survivors(&format!("30.{}", std::process::id()));
    assert!(left.is_empty(), "still running: {left:?}");
}

/// `diagnose -- CMD` stopped by SIGTERM ends the background processes too.
#[test]
fn case_diagnose_term_ends_the_whole_tree() {
    let m = marker(6);
    let script = format!("sleep {m} & sleep 31.{}", std::process::id());
    let mut child = start(&["diagnose", "--no-wall", "--", "sh", "-c", &script]);
    wait_started(&m);
    std::thread::sleep(Duration::from_millis(500));
    // SAFETY: a signal to our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    child.wait().unwrap();
    let left = survivors(&m);
    assert!(left.is_empty(), "still running: {left:?}");
}

/// At a terminal, diagnose hands the terminal to the command's group (so it reads and writes
/// it as from a shell); a Ctrl-C there ends the command, and diagnose ends the rest of its
/// tree (a background `sleep` in `sh` ignores SIGINT), and keeps what it recorded. Needs
/// `script` (util-linux) for a pseudo-terminal.
#[test]
fn case_diagnose_ctrl_c_at_a_terminal_ends_the_whole_tree_and_saves() {
    if Command::new("script").arg("--version").output().is_err() {
        common::missing_tool("script", "apt-get install bsdutils (util-linux)");
        return;
    }
    let m = marker(7);
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("d.json");
    let inner = format!(
        "{} diagnose --no-wall --save {} -- sh -c 'sleep {m} & sleep 50'",
        assert_cmd::cargo::cargo_bin("cpudoctor").display(),
        save.display()
    );
    let mut script = Command::new("script")
        .args(["-qec", &inner, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    wait_started(&m);
    std::thread::sleep(Duration::from_millis(500));
    let mut tty = script.stdin.take().unwrap();
    std::io::Write::write_all(&mut tty, b"\x03").unwrap();
    let until = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = script.try_wait().unwrap() {
            break status;
        }
        assert!(Instant::now() < until, "diagnose did not end after Ctrl-C");
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(tty);
    // Ended as the Ctrl-C would have ended it (130, as the README says), once the file is
    // written: it exited 0, and a shell loop around it went on to the next round.
    assert_eq!(status.code(), Some(130), "{status:?}");
    let left = survivors(&m);
    assert!(left.is_empty(), "still running: {left:?}");
    let saved: Value = serde_json::from_slice(&std::fs::read(&save).unwrap()).unwrap();
    assert!(
        saved["target"]["ended"]
            .as_str()
            .unwrap()
            .contains("SIGINT"),
        "{}",
        saved["target"]
    );
}
