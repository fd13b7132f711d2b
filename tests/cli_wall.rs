//! `cpudoctor diagnose`'s wall-clock view on programs whose time off the CPU is known by
//! construction: threads asleep on one mutex, and a thread pinned to a CPU beside a busy
//! process. Assertions are shares by a wide margin, never times: the machine is shared.
//!
//! The programs have frame pointers ([`Build::FramePointers`]), as the other diagnose tests'
//! do: a sleeping thread's stack then runs through frames that keep their CFA in rbp, which
//! /proc does not give (the case the stack scan in `unwind_sleeping` guards).

use serde_json::Value;
use std::path::Path;

mod common;
use common::{Build, allowed_cpus, diagnose_json, finding, program};

fn frames(stack: &Value) -> Vec<String> {
    stack["frames"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["function"].as_str().unwrap_or("?").to_string())
        .collect()
}

/// The view's source this machine gives by default: each thread's schedstat counts where the
/// kernel keeps them (three fields, this thread run at least once), else switch records.
fn default_source() -> &'static str {
    let counts = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_default();
    let f: Vec<u64> = counts
        .split_whitespace()
        .filter_map(|f| f.parse().ok())
        .collect();
    if f.len() == 3 && f[2] > 0 {
        "schedstat"
    } else {
        "switch_records"
    }
}

#[test]
fn four_threads_on_one_mutex_sleep_on_it_with_the_caller_that_takes_it() {
    mutex_waiters_sleep_on_the_lock(&[], default_source());
}

#[test]
fn timed_by_switch_records_the_mutex_waiters_sleep_on_it_too() {
    mutex_waiters_sleep_on_the_lock(&["--switches"], "switch_records");
}

fn mutex_waiters_sleep_on_the_lock(args: &[&str], source: &str) {
    let Some(p) = program("mutex_wait", Build::FramePointers) else {
        return;
    };
    // Four threads, each holding the lock ~2 ms at a time: while one holds it, the others
    // sleep in the futex; on any number of CPUs each is asleep about three quarters of the
    // time (less what it waits for a CPU on a busy machine).
    let mut argv = args.to_vec();
    argv.extend(["--", p.to_str().unwrap(), "2", "4"]);
    let d = diagnose_json(&argv);
    assert_eq!(
        d["wall"]["method"]["source"], source,
        "{:#}",
        d["wall"]["method"]
    );
    let f = finding(&d, "lock_wait");
    assert_eq!(f["symbol"], "take_lock_and_work", "{f:#}");
    assert!(
        f["title"].as_str().unwrap().contains("pthread mutex"),
        "{f:#}"
    );
    let share = f["wall_share"].as_f64().unwrap();
    assert!(
        share >= 0.25,
        "asleep on the lock {share:.3} of their wall time: {f:#}"
    );
    // The stack they sleep in reaches each thread's start through the frame-pointer frames.
    let w = &d["wall"];
    let lock_stack = w["stacks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["state"] == "blocked" && s["wait"]["kind"] == "lock")
        .unwrap_or_else(|| panic!("no lock stack: {:#}", w["stacks"]));
    let names = frames(lock_stack);
    for want in ["take_lock_and_work", "worker", "start_thread"] {
        assert!(names.iter().any(|n| n == want), "{want} missing: {names:?}");
    }
    assert_eq!(lock_stack["reason"], "futex");
    // Every worker's states add up to its wall time, and the four are in the table.
    let workers: Vec<&Value> = w["threads"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|t| t["tid"] != t["pid"])
        .collect();
    assert_eq!(workers.len(), 4, "{:#}", w["threads"]);
    for t in workers {
        let sum: f64 = ["running_s", "runnable_s", "blocked_s"]
            .iter()
            .map(|k| t[k].as_f64().unwrap())
            .sum();
        let wall = t["wall_s"].as_f64().unwrap();
        assert!((sum - wall).abs() <= 0.01 * wall, "{t:#}");
    }
}

/// `taskset`'s arguments to run a program on one CPU only (`-c CPU PROGRAM ARGS...`).
fn on_cpu(cpu: usize, program: &Path, args: &[&str]) -> Vec<String> {
    let mut v = vec![
        "-c".to_string(),
        cpu.to_string(),
        program.display().to_string(),
    ];
    v.extend(args.iter().map(|a| a.to_string()));
    v
}

#[test]
fn a_thread_pinned_beside_a_busy_process_waits_for_a_cpu_about_half_its_time() {
    let Some(p) = program("mutex_wait", Build::FramePointers) else {
        return;
    };
    let busy = program("cpu_bound", Build::FramePointers).unwrap();
    // A CPU this process may run on, for two programs to share.
    let cpu = allowed_cpus()[0];
    // The neighbour: CPU-bound for longer than the workload, on the same CPU.
    let mut neighbour = std::process::Command::new("taskset")
        .args(on_cpu(cpu, &busy, &["40000000000"]))
        .stdout(std::process::Stdio::null())
        .spawn()
        .expect("taskset (util-linux)");
    // One thread computing without a break (a lock no one else wants) for 2 s.
    let argv = on_cpu(cpu, &p, &["2", "1"]);
    let mut args = vec!["--", "taskset"];
    args.extend(argv.iter().map(String::as_str));
    let d = diagnose_json(&args);
    let neighbour_pid = neighbour.id();
    let _ = neighbour.kill();
    let _ = neighbour.wait();
    let w = &d["wall"];
    let worker = w["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["tid"] != t["pid"] && t["name"] == "mutex_wait")
        .unwrap_or_else(|| panic!("no worker: {:#}", w["threads"]));
    let share = worker["runnable_s"].as_f64().unwrap() / worker["wall_s"].as_f64().unwrap();
    // Two busy programs on one CPU: each waits for it about half the time; more when other
    // work shares that CPU too (0.89 with a build running beside the test on the 2-vCPU
    // guest: a third of the CPU each), and it still ran some of the time.
    assert!(
        (0.25..=0.97).contains(&share),
        "waited for a CPU {share:.3} of its wall time: {worker:#}"
    );
    let f = finding(&d, "waiting_for_cpu");
    assert!(f["wall_share"].as_f64().unwrap() >= 0.2, "{f:#}");
    // What held the CPU: the neighbour is among the other processes named.
    let others: Vec<u64> = w["cpu"]["others"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["pid"].as_u64().unwrap())
        .collect();
    assert!(
        others.contains(&u64::from(neighbour_pid)),
        "neighbour {neighbour_pid} not in {:#}",
        w["cpu"]
    );
}

#[test]
fn without_the_wall_clock_view_a_diagnosis_has_none() {
    let Some(p) = program("mutex_wait", Build::FramePointers) else {
        return;
    };
    let d = diagnose_json(&["--no-wall", "--", p.to_str().unwrap(), "0.5", "2"]);
    assert!(d.get("wall").is_none(), "{:#}", d["wall"]);
    assert!(
        !d["findings"]
            .as_array()
            .unwrap()
            .iter()
            .any(|f| f["id"] == "lock_wait"),
        "a lock wait without the view that sees it"
    );
}
