//! Each runtime's handoff program (`runtimes/handoff/`) is built with the local toolchain, run
//! briefly (4 items of 2 ms, two delays, two repetitions), and its output checked against
//! format 1. A missing toolchain fails its tests (or, with CPUDOCTOR_ALLOW_SKIP=1, skips them
//! with the reason printed); CI installs them.

mod common;

use cpudoctor::probes::handoff::external::{self, BuildError, RunArgs, Toolchain};
use cpudoctor::probes::handoff::format::WaitCpu;
use cpudoctor::probes::handoff::ideal_ms;
use std::path::PathBuf;
use std::process::Command;

fn cache_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("handoff-cache")
}

/// The built program, or `None` (with the reason printed) when the toolchain is missing.
fn build(tc: Toolchain) -> Option<external::Built> {
    match external::build(tc, &cache_dir()) {
        Ok(b) => Some(b),
        Err(BuildError::Missing(why)) => {
            common::missing_tool(
                &format!("the {} toolchain", tc.name()),
                &format!("{why}; apt-get install gcc golang-go default-jdk-headless"),
            );
            None
        }
        Err(BuildError::Failed(why)) => panic!("{} build failed: {why}", tc.name()),
    }
}

fn check_program(tc: Toolchain, variant: &str) {
    let Some(built) = build(tc) else { return };
    let delays = [1.0, 3.0];
    let args = RunArgs {
        variant,
        items: 4,
        work_ms: 2.0,
        repetitions: 2,
        delays_ms: &delays,
    };
    let out = external::run(&built, &args).unwrap_or_else(|e| panic!("{variant}: {e}"));
    assert_eq!(out.runtime, tc.name());
    assert_eq!(out.variant, variant);
    assert_eq!(out.runs.len(), 4, "one run line per delay and repetition");
    for (i, r) in out.runs.iter().enumerate() {
        assert_eq!(r.delay_ms, delays[i / 2]);
        assert_eq!(r.rep, (i % 2) as u32);
        assert_eq!((r.items, r.items_done, r.work_ms), (4, 4, 2.0));
        // Both sides busy-wait wall time (the worker 4 x 2 ms under the lock, the sender
        // 4 x D after each item), so the ideal is a hard floor, not a timing target.
        let floor_ns = ideal_ms(4, 2.0, r.delay_ms) * 1e6;
        assert!(r.wall_ns as f64 >= floor_ns, "{variant}: {r:?}");
        assert!(r.sender_lock_wait_ns <= r.wall_ns, "{variant}: {r:?}");
        match r.wait_cpu {
            // One thread's CPU time cannot exceed the wall time it ran in.
            WaitCpu::PerThread { sender_ns, .. } => {
                assert!(tc_times_threads(tc), "{variant}: {r:?}");
                assert!(sender_ns <= r.wall_ns, "{variant}: {r:?}");
            }
            // Process CPU less the busy work it was asked for: never more than the process.
            WaitCpu::ProcessMinusBusy { ns } => {
                assert!(!tc_times_threads(tc), "{variant}: {r:?}");
                assert!(ns <= r.process_cpu_ns, "{variant}: {r:?}");
            }
        }
    }
}

/// Whether the program of `tc` times its threads with per-thread CPU clocks. Go does not:
/// its goroutines are not bound to threads (binding them would change the runtime measured).
fn tc_times_threads(tc: Toolchain) -> bool {
    tc != Toolchain::Go
}

fn check_bad_variant_is_refused(tc: Toolchain) {
    let Some(built) = build(tc) else { return };
    let args = RunArgs {
        variant: "no-such-variant",
        items: 1,
        work_ms: 1.0,
        repetitions: 1,
        delays_ms: &[1.0],
    };
    let out: std::process::Output = external::command(&built, &args).output().unwrap();
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown variant"));
    assert!(out.stdout.is_empty(), "nothing on stdout for a refused run");
}

#[test]
fn c_pthread_default_program_reports_every_run_in_format_1() {
    check_program(Toolchain::C, "default");
}

#[test]
fn c_pthread_adaptive_program_reports_every_run_in_format_1() {
    check_program(Toolchain::C, "adaptive");
}

#[test]
fn go_sync_program_reports_every_run_in_format_1() {
    check_program(Toolchain::Go, "sync");
}

// Regression: the Go program locked its goroutines to OS threads to time them, which changes
// how sync.Cond wakes them; the runtime measured was not the one users run.
#[test]
fn go_program_leaves_goroutines_unbound_to_threads() {
    let src = include_str!("../runtimes/handoff/handoff.go");
    let code: String = src
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    assert!(
        !code.contains("LockOSThread"),
        "handoff.go binds goroutines to threads"
    );
}

#[test]
fn java_synchronized_program_reports_every_run_in_format_1() {
    check_program(Toolchain::Java, "synchronized");
}

#[test]
fn java_reentrantlock_program_reports_every_run_in_format_1() {
    check_program(Toolchain::Java, "reentrantlock");
}

#[test]
fn every_program_refuses_an_unknown_variant() {
    for tc in [Toolchain::C, Toolchain::Go, Toolchain::Java] {
        check_bad_variant_is_refused(tc);
    }
}

#[test]
fn c_program_header_and_end_lines_are_literal() {
    let Some(built) = build(Toolchain::C) else {
        return;
    };
    let out = Command::new(built.dir.join("handoff"))
        .args(["default", "2", "1", "1", "1"])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0], "cpudoctor-handoff 1 runtime=c variant=default");
    assert!(lines[1].starts_with("run delay_ms=1 rep=0 items=2 work_ms=1 items_done=2 wall_ns="));
    assert_eq!(lines[2], "end runs=1");
}
