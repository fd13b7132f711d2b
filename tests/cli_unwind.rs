//! Call stacks without frame pointers, end to end: `diagnose --folded` of programs built the
//! way distributions and `cargo build --release` build them shows every caller, from the
//! thread's start down to the sampled function, because samples carry the user stack and the
//! binaries' CFI walks it. Assertions are on which frames appear and shares with a wide
//! margin, never on times.

use serde_json::Value;
use std::path::Path;

mod common;
use common::*;

/// Runs `diagnose --json --folded --no-wall` on `program args`: the diagnosis and the folded
/// lines as (frames root first, samples). On-CPU only: with the wall-clock view the counts
/// would be microseconds and off-CPU stacks would join them.
fn diagnose_folded(program: &Path, args: &[&str]) -> (Value, Vec<(Vec<String>, u64)>) {
    let dir = tempfile::tempdir().unwrap();
    let folded = dir.path().join("stacks.folded");
    let d = json_of(
        cpudoctor()
            .args(["diagnose", "--json", "--no-wall", "--folded"])
            .arg(&folded)
            .arg("--")
            .arg(program)
            .args(args),
    );
    let text = std::fs::read_to_string(&folded).expect("the folded file was written");
    let lines = text
        .lines()
        .map(|l| {
            let (stack, n) = l.rsplit_once(' ').expect("`stack count`");
            (
                stack.split(';').map(str::to_string).collect(),
                n.parse().expect("a count"),
            )
        })
        .collect();
    (d, lines)
}

/// The function of a folded frame (`run_round.constprop.0`, `wait_for_peer+0x12` ->
/// `run_round`, `wait_for_peer`).
fn function(frame: &str) -> &str {
    let f = frame.split('+').next().unwrap();
    f.split('.').next().unwrap()
}

/// Samples whose leaf is `leaf`, and those of them whose frames hold `chain` in a row.
fn with_chain(lines: &[(Vec<String>, u64)], leaf: &str, chain: &[&str]) -> (u64, u64) {
    let mut all = 0;
    let mut chained = 0;
    for (frames, n) in lines {
        if frames.last().map(|f| function(f)) != Some(leaf) {
            continue;
        }
        all += n;
        let names: Vec<&str> = frames.iter().map(|f| function(f)).collect();
        if names.windows(chain.len()).any(|w| w == chain) {
            chained += n;
        }
    }
    (all, chained)
}

fn cfi_samples(d: &Value) -> u64 {
    d["sampling"]["stacks"]["samples_by_method"]["cfi"]
        .as_u64()
        .unwrap_or(0)
}

fn leaf_spin_shows_main_down_to_the_spin(build: Build) {
    let Some(exe) = program("leaf_spin", build) else {
        return;
    };
    let (d, lines) = diagnose_folded(&exe, &["1.5"]);
    let (all, chained) = with_chain(
        &lines,
        "wait_for_peer",
        &["main", "run_round", "wait_for_peer"],
    );
    assert!(all > 100, "few samples in the spin: {lines:?}");
    assert!(
        chained * 10 >= all * 9,
        "{chained} of {all} spin samples show main;run_round;wait_for_peer: {lines:?}"
    );
    assert!(cfi_samples(&d) > 0, "{}", d["sampling"]);
}

#[test]
fn leaf_spin_with_frame_pointers_keeps_its_caller() {
    // GCC gives the leaf no frame even with -fno-omit-frame-pointer: the kernel's frame-pointer
    // walk skips run_round; the CFI walk does not.
    leaf_spin_shows_main_down_to_the_spin(Build::FramePointersButNotLeaves);
}

#[test]
fn leaf_spin_without_frame_pointers_keeps_every_caller() {
    leaf_spin_shows_main_down_to_the_spin(Build::Distribution);
}

#[test]
fn rust_release_mutex_shows_the_users_loop_down_to_the_lock() {
    let rustc = std::env::var("RUSTC").unwrap_or_else(|_| "rustc".into());
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("rust_mutex");
    // opt-level 3 without debug info and without frame pointers: what `cargo build --release`
    // gives.
    let status = std::process::Command::new(&rustc)
        .args(["-C", "opt-level=3", "-o"])
        .arg(&exe)
        .arg(source("rust_mutex/main.rs"))
        .status();
    match status {
        Ok(s) => assert!(s.success(), "{rustc} failed on rust_mutex/main.rs"),
        Err(_) => {
            missing_tool(&format!("rustc ({rustc})"), "rustup");
            return;
        }
    }
    let (d, lines) = diagnose_folded(&exe, &["1.5"]);
    // Samples in the lock's slow path (its spin before the futex wait) reach the user's loop.
    let lock_leaf = lines
        .iter()
        .filter_map(|(f, _)| f.last())
        .map(|f| function(f).to_string())
        .find(|f| f.contains("Mutex>::lock_contended"));
    let lock_leaf = lock_leaf.unwrap_or_else(|| panic!("no sample in the lock's spin: {lines:?}"));
    let (all, chained) = with_chain(
        &lines,
        &lock_leaf,
        &["main::worker_loop", "main::add_under_lock", &lock_leaf],
    );
    assert!(
        chained * 10 >= all * 8,
        "{chained} of {all} samples in the lock show worker_loop;add_under_lock: {lines:?}"
    );
    let (all, chained) = with_chain(
        &lines,
        "main::add_under_lock",
        &["main::worker_loop", "main::add_under_lock"],
    );
    assert!(
        all > 0 && chained * 10 >= all * 8,
        "{chained} of {all}: {lines:?}"
    );
    assert!(cfi_samples(&d) > 0, "{}", d["sampling"]);
    let full = d["sampling"]["stacks"]["full_stacks"].as_u64().unwrap();
    let n = d["sampling"]["stacks"]["samples"].as_u64().unwrap();
    assert!(
        full * 2 >= n,
        "{full} of {n} stacks reach the thread's start"
    );
}

#[test]
fn a_stripped_distribution_binary_gets_stacks_to_its_start() {
    // Debian's gzip: stripped, no frame pointers; its .eh_frame is all there is to walk by.
    let Some(gzip) = ["/usr/bin/gzip", "/bin/gzip"]
        .into_iter()
        .map(Path::new)
        .find(|p| p.exists())
    else {
        missing_tool("gzip", "apt-get install gzip");
        return;
    };
    let script = format!(
        "head -c 1500000000 /dev/zero | {} -1 >/dev/null",
        gzip.display()
    );
    let (d, lines) = diagnose_folded(Path::new("/bin/sh"), &["-c", &script]);
    // Stripped: named by its CFI bounds (`gzip@0x4290+0x10d`) or, outside them, by address.
    let in_gzip = |f: &String| f.starts_with("gzip@0x") || f.starts_with("gzip+0x");
    let all: u64 = lines
        .iter()
        .filter(|(f, _)| f.last().is_some_and(in_gzip))
        .map(|(_, n)| n)
        .sum();
    // From the sampled gzip code through gzip's callers to libc's start of main.
    let deep: u64 = lines
        .iter()
        .filter(|(f, _)| f.last().is_some_and(in_gzip))
        .filter(|(f, _)| {
            f.len() >= 5
                && f.iter().any(|x| x == "__libc_start_main")
                && f.iter().rev().skip(1).take(2).all(in_gzip)
        })
        .map(|(_, n)| n)
        .sum();
    assert!(all > 50, "few samples in gzip: {lines:?}");
    assert!(
        deep * 10 >= all * 8,
        "{deep} of {all} gzip samples reach __libc_start_main through gzip's callers: {lines:?}"
    );
    assert!(cfi_samples(&d) > 0, "{}", d["sampling"]);
}
