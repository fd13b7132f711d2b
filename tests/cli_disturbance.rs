//! Figures that say what disturbed them (issue 29, item 2): a probe run in a cgroup whose CPU
//! quota throttles it is marked, on the screen and in the saved fingerprint, and `diff` does
//! not call a figure changed when one run was measured under a quota.
//!
//! The quota test makes a cgroup (v1 `cpu.cfs_quota_us`, or v2 `cpu.max`) at the top of the
//! cpu hierarchy this process sees, which takes root (or a delegated hierarchy); without one it
//! fails saying so, or with `CPUDOCTOR_ALLOW_SKIP=1` prints `SKIPPED` (the convention of
//! `tests/common`): it never passes without having run.

use cpudoctor::machine::cgroup::{Hierarchy, read_self_cgroup};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;
use common::*;

/// A cgroup with a CPU quota of a fifth of a CPU, removed when dropped.
struct FifthCpu {
    dir: PathBuf,
}

impl Drop for FifthCpu {
    fn drop(&mut self) {
        // Its processes have ended by now; a cgroup with none can be removed.
        let _ = fs::remove_dir(&self.dir);
    }
}

/// 20000 us every 100000 us: a fifth of a CPU. The issue's half CPU does not always throttle a
/// one-CPU probe on a loaded 2-vCPU guest: measured beside other builds, `probe pause --cpus 0`
/// waited for its CPU 55% of the time and so used under half a CPU in each of 16 periods, none
/// throttled (and the mark, rightly, said other tasks rather than the quota). A fifth of a CPU
/// is throttled unless the probe gets under a fifth of its CPU.
const QUOTA_US: u64 = 20_000;
const PERIOD_US: u64 = 100_000;

fn fifth_cpu_cgroup(name: &str) -> Result<FifthCpu, String> {
    let cg = read_self_cgroup(Path::new("/")).ok_or("no cgroup hierarchy is mounted")?;
    let cpu = cg.cpu.ok_or("no cpu controller is mounted")?;
    let top = cpu.mount_dir.clone();
    let dir = top.join(format!("{name}-{}", std::process::id()));
    let write = |file: &Path, text: &str| {
        fs::write(file, text).map_err(|e| format!("writing {text:?} to {}: {e}", file.display()))
    };
    fs::create_dir(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let made = FifthCpu { dir: dir.clone() };
    match cpu.hierarchy {
        Hierarchy::V1 => {
            write(&dir.join("cpu.cfs_period_us"), &PERIOD_US.to_string())?;
            write(&dir.join("cpu.cfs_quota_us"), &QUOTA_US.to_string())?;
        }
        Hierarchy::V2 => {
            let enabled =
                fs::read_to_string(top.join("cgroup.subtree_control")).unwrap_or_default();
            if !enabled.split_whitespace().any(|c| c == "cpu") {
                write(&top.join("cgroup.subtree_control"), "+cpu")?;
            }
            write(&dir.join("cpu.max"), &format!("{QUOTA_US} {PERIOD_US}"))?;
        }
    }
    Ok(made)
}

/// `cpudoctor ARGS` started inside `cg` (the shell moves itself in, then execs).
fn run_in(cg: &FifthCpu, args: &[&str]) -> std::process::Output {
    let bin = assert_cmd::cargo::cargo_bin("cpudoctor");
    Command::new("sh")
        .arg("-c")
        .arg(r#"echo $$ > "$0/cgroup.procs" && exec "$@""#)
        .arg(&cg.dir)
        .arg(bin)
        .args(args)
        .env("COLUMNS", "100")
        .output()
        .unwrap()
}

fn by_of(p: &Value) -> Vec<String> {
    p["disturbance"]["by"]
        .as_array()
        .unwrap_or_else(|| panic!("no disturbance record in {p}"))
        .iter()
        .map(|b| b.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_probe_throttled_by_a_cpu_quota_is_marked_on_the_screen_and_in_the_file() {
    let cg = match fifth_cpu_cgroup("cpudoctor-test-quota") {
        Ok(cg) => cg,
        Err(why) => {
            return missing_hardware(
                "a cgroup it can give a CPU quota",
                &format!("root and a cgroup v1 cpu hierarchy or a v2 cpu controller ({why})"),
            );
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("quota.json");
    // PAUSE spins for about half a second of CPU time: well past 20 ms in a 100 ms period.
    let out = run_in(
        &cg,
        &[
            "probe",
            "pause",
            "--quick",
            "--cpus",
            "0",
            "--save",
            saved.to_str().unwrap(),
        ],
    );
    // Words as a reader reads them, whatever the wrapping.
    let screen = String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        out.status.success(),
        "{screen}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        screen.contains("Measured under a CPU quota of 0.2 CPU (throttled in"),
        "{screen}"
    );
    assert!(
        screen.contains("figures below are not the machine's"),
        "{screen}"
    );
    assert!(
        screen.contains("(disturbed)"),
        "verdict unmarked:\n{screen}"
    );

    let fp: Value = serde_json::from_slice(&fs::read(&saved).unwrap()).unwrap();
    let errors = schema_errors(&fp);
    assert!(errors.is_empty(), "{errors:#?}");
    let pause = probe(&fp, "pause");
    assert!(by_of(pause).contains(&"cpu_quota".to_string()), "{pause}");
    let d = &pause["disturbance"];
    assert_eq!(d["cpu_quota_cpus"], 0.2);
    assert!(d["throttled_periods"].as_u64().unwrap() >= 1, "{d}");
    // CPU 0, and its SMT siblings where it has any.
    assert!(
        d["cpus"]
            .as_array()
            .unwrap()
            .contains(&serde_json::json!(0)),
        "{d}"
    );

    // The same probe outside the cgroup is not marked for a quota, when this process has none:
    // the mark comes from the quota, not from every run.
    let own_quota = read_self_cgroup(Path::new("/")).and_then(|c| c.limits().cpu_quota);
    if own_quota.is_none() {
        let free =
            json_of(cpudoctor().args(["probe", "pause", "--quick", "--cpus", "0", "--json"]));
        let p = probe(&free, "pause");
        assert!(!by_of(p).contains(&"cpu_quota".to_string()), "{p}");
        assert!(p["disturbance"]["cpu_quota_cpus"].is_null(), "{p}");
    }
}

fn fixture(name: &str) -> String {
    format!(
        "{}/tests/fixtures/fingerprints/{name}",
        env!("CARGO_MANIFEST_DIR")
    )
}

/// The diff tests' files, all `check`s of one 2-vCPU Zen 4 guest: a run saved before probes
/// recorded their disturbance (read as undisturbed), one under a 0.5 CPU quota that throttled
/// the probes, one beside a busy loop on the other vCPU (the issue's two cases).
const QUIET: &str = "zen4-kvm-check-all.json";
const QUOTA: &str = "zen4-kvm-check-quota-half.json";
const HOG: &str = "zen4-kvm-check-hog.json";

fn diff_json(old: &str, new: &str) -> Value {
    json_of(cpudoctor().args(["diff", "--json"]).arg(old).arg(new))
}

const MOVED: [&str; 4] = ["worse", "better", "changed", "host_drift"];

#[test]
fn diff_against_a_disturbed_run_calls_nothing_changed_and_says_why() {
    for (old, new, why) in [
        (
            QUIET,
            QUOTA,
            "not compared: the new run was measured under a CPU quota of 0.5 CPU",
        ),
        (
            QUOTA,
            QUIET,
            "not compared: the old run was measured under a CPU quota of 0.5 CPU",
        ),
        (
            QUIET,
            HOG,
            "not compared: the new run was measured while disturbed (other tasks busy",
        ),
    ] {
        let d = diff_json(&fixture(old), &fixture(new));
        let moved: Vec<&Value> = d["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| MOVED.contains(&m["change"].as_str().unwrap()))
            .collect();
        assert!(moved.is_empty(), "{old} -> {new}: {moved:#?}");
        assert!(
            d["counts"]["disturbed"].as_u64().unwrap() > 0,
            "{}",
            d["counts"]
        );
        let hazards = d["hazards"].as_array().unwrap();
        assert!(
            hazards
                .iter()
                .all(|h| !["worse", "better"].contains(&h["direction"].as_str().unwrap())),
            "{hazards:#?}"
        );
        let text = stdout_text(
            cpudoctor()
                .args(["diff"])
                .arg(fixture(old))
                .arg(fixture(new))
                .env("COLUMNS", "100"),
        )
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
        assert!(text.contains(why), "{text}");
        assert!(!text.contains("Worse in new"), "{text}");
        assert!(!text.contains("Better in new"), "{text}");
    }
}

#[test]
fn the_same_pair_without_the_mark_does_show_changes() {
    // The guard of the test above: with the disturbance records taken out of the quota run,
    // the same figures are compared and some move beyond noise, so "nothing changed" there
    // comes from the mark and not from figures that happen to agree.
    let mut quota: Value = serde_json::from_slice(&fs::read(fixture(QUOTA)).unwrap()).unwrap();
    for p in quota["probes"].as_array_mut().unwrap() {
        p.as_object_mut().unwrap().remove("disturbance");
    }
    let dir = tempfile::tempdir().unwrap();
    let unmarked = dir.path().join("unmarked.json");
    fs::write(&unmarked, serde_json::to_vec(&quota).unwrap()).unwrap();
    let d = diff_json(&fixture(QUIET), unmarked.to_str().unwrap());
    let moved = d["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| MOVED.contains(&m["change"].as_str().unwrap()))
        .count();
    assert!(moved > 0, "{:#}", d["counts"]);
    assert_eq!(d["counts"]["disturbed"], 0);
}
