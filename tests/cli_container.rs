//! cpudoctor under a container's limits (issue 29). `check` and `diagnose -- PROGRAM` run in a
//! cgroup with a 512 MiB memory limit, a half-CPU quota (50000 of 100000 us) and a pids limit,
//! as a Kubernetes pod with `memory: 512Mi, cpu: 500m` would: each finishes (before, `check`
//! was OOM-killed after ~2 s with nothing saved), says what the limits were and what they did,
//! and saves its file; `check` reads the same limits inside a cgroup namespace (a container's
//! view, the hierarchies mounted again with `unshare`). Then `check` under `prlimit --as=100M` (it aborted with a backtrace,
//! exit 134) and with no thread to spare (`prlimit --nproc`, unprivileged: `check` and `spin
//! --handoff` panicked, exit 101): each probe that cannot run is skipped with why.
//!
//! The cgroup is made in the v1 hierarchies (memory, cpu, cpuacct, pids) where they are
//! mounted, else under the v2 unified hierarchy (the controllers enabled in the root's
//! `cgroup.subtree_control`), and removed after. Making one needs root and a writable cgroupfs;
//! where that fails the test fails saying why (`CPUDOCTOR_ALLOW_SKIP=1` turns it into
//! `SKIPPED`), as every test whose machine lacks what it needs does.

mod common;

use common::{Build, missing_hardware, missing_tool, probe, program};
use serde_json::Value;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const MEMORY_LIMIT_BYTES: u64 = 512 << 20;
const QUOTA_US: u64 = 50_000;
const PERIOD_US: u64 = 100_000;
const PIDS_MAX: u64 = 64;

const BIN: &str = env!("CARGO_BIN_EXE_cpudoctor");

/// The quickest `check` that still runs both memory probes (and the thread-hungry sharing and
/// c2c probes): the two bus-locking probes left out.
const QUICK_CHECK: [&str; 5] = [
    "check",
    "--skip",
    "split-lock",
    "--skip",
    "split-lock-neighbour",
];

/// A cgroup made for one test, removed when dropped.
struct TestCgroup {
    /// `v1` or `v2`, as `machine.cgroup.version` says it (`hybrid` counts as v1).
    version: &'static str,
    /// Each directory made (one per v1 hierarchy, or the one v2 cgroup).
    dirs: Vec<PathBuf>,
    /// The directory with the memory controller's files.
    memory: PathBuf,
}

fn write(path: &Path, value: &str) -> Result<(), String> {
    fs::write(path, value).map_err(|e| format!("cannot write {value:?} to {}: {e}", path.display()))
}

impl TestCgroup {
    /// Makes cgroup `name` with the limits above, or says why it cannot.
    fn make(name: &str) -> Result<TestCgroup, String> {
        let root = Path::new("/sys/fs/cgroup");
        let name = format!("{name}-{}", std::process::id());
        if root.join("memory/memory.limit_in_bytes").exists() {
            let mut cg = TestCgroup {
                version: "v1",
                dirs: Vec::new(),
                memory: root.join("memory").join(&name),
            };
            // cpu and cpuacct may share one hierarchy (`cpu,cpuacct` with two links to it).
            let mut seen = Vec::new();
            for h in ["memory", "cpu", "cpuacct", "pids"] {
                let mount = root.join(h);
                let real = fs::canonicalize(&mount)
                    .map_err(|e| format!("no v1 {h} hierarchy at {}: {e}", mount.display()))?;
                if seen.contains(&real) {
                    continue;
                }
                seen.push(real);
                let dir = mount.join(&name);
                fs::create_dir(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
                cg.dirs.push(dir);
            }
            let at = |h: &str| root.join(h).join(&name);
            write(
                &at("memory").join("memory.limit_in_bytes"),
                &MEMORY_LIMIT_BYTES.to_string(),
            )?;
            write(&at("cpu").join("cpu.cfs_period_us"), &PERIOD_US.to_string())?;
            write(&at("cpu").join("cpu.cfs_quota_us"), &QUOTA_US.to_string())?;
            write(&at("pids").join("pids.max"), &PIDS_MAX.to_string())?;
            Ok(cg)
        } else if root.join("cgroup.controllers").exists() {
            let controllers =
                fs::read_to_string(root.join("cgroup.controllers")).unwrap_or_default();
            for c in ["memory", "cpu", "pids"] {
                if !controllers.split_whitespace().any(|x| x == c) {
                    return Err(format!("the v2 root does not offer the {c} controller"));
                }
            }
            // Enabled already where a runtime delegates them; enabling them in a cgroup that
            // holds processes (a container's namespace root) fails with EBUSY, which says why.
            let enabled =
                fs::read_to_string(root.join("cgroup.subtree_control")).unwrap_or_default();
            if ["memory", "cpu", "pids"]
                .iter()
                .any(|c| !enabled.split_whitespace().any(|x| x == *c))
            {
                write(&root.join("cgroup.subtree_control"), "+memory +cpu +pids")?;
            }
            let dir = root.join(&name);
            fs::create_dir(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
            let cg = TestCgroup {
                version: "v2",
                dirs: vec![dir.clone()],
                memory: dir.clone(),
            };
            write(&dir.join("memory.max"), &MEMORY_LIMIT_BYTES.to_string())?;
            write(&dir.join("cpu.max"), &format!("{QUOTA_US} {PERIOD_US}"))?;
            write(&dir.join("pids.max"), &PIDS_MAX.to_string())?;
            Ok(cg)
        } else {
            Err("no cgroup filesystem at /sys/fs/cgroup".into())
        }
    }

    /// `program args` started inside the cgroup: a shell moves itself into each directory,
    /// then execs the program.
    fn command(&self, program: &str, args: &[&str]) -> Command {
        let mut c = Command::new("sh");
        c.arg("-c")
            .arg(
                r#"for d in $CGROUP_DIRS; do echo $$ > "$d/cgroup.procs" || exit 99; done; exec "$@""#,
            )
            .arg("sh")
            .arg(program)
            .args(args)
            .env(
                "CGROUP_DIRS",
                self.dirs
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect::<Vec<_>>()
                    .join(" "),
            );
        c
    }

    /// The most memory the cgroup has used, in bytes (v1 `memory.max_usage_in_bytes`, v2
    /// `memory.peak` on kernels that have it).
    fn peak_memory_bytes(&self) -> Option<u64> {
        ["memory.max_usage_in_bytes", "memory.peak"]
            .iter()
            .find_map(|f| fs::read_to_string(self.memory.join(f)).ok())
            .and_then(|t| t.trim().parse().ok())
    }
}

impl Drop for TestCgroup {
    fn drop(&mut self) {
        for dir in &self.dirs {
            // The last task may take a moment to leave after it was reaped.
            for _ in 0..50 {
                if fs::remove_dir(dir).is_ok() || !dir.exists() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
    }
}

/// The test's cgroup, or `None` after saying why there is none (a failure unless
/// `CPUDOCTOR_ALLOW_SKIP=1`).
fn cgroup(name: &str) -> Option<TestCgroup> {
    match TestCgroup::make(name) {
        Ok(cg) => Some(cg),
        Err(why) => {
            missing_hardware(
                "a cgroup it can make with memory, cpu and pids limits",
                &format!("run as root with a writable cgroupfs ({why})"),
            );
            None
        }
    }
}

fn text(o: &Output) -> String {
    format!(
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A memory probe under a limit: measured, saying what the limit left it (`memory_limit`)
/// and, where its buffers are smaller than it wanted, that they were sized to the limit (its
/// effect `key`); or skipped because the limit leaves too little, the reason naming it.
fn assert_sized_or_not_judged(fp: &Value, name: &str, key: &str, limit_words: &str) {
    let p = probe(fp, name);
    match p["status"].as_str() {
        Some("ok") => {
            let left = p["effects"]["memory_limit"]
                .as_str()
                .unwrap_or_else(|| panic!("{name} ran under the limit without naming it: {p}"));
            assert!(
                left.starts_with(&format!("{limit_words} leaves")),
                "{name}: {left}"
            );
            if let Some(why) = p["effects"][key].as_str() {
                assert!(
                    why.contains(&format!("sized to {limit_words}")),
                    "{name}: {why}"
                );
            }
        }
        Some("skipped") => {
            let why = p["reason"].as_str().unwrap();
            assert!(
                why.contains(&format!("{limit_words} leaves")) && why.contains("cpudoctor probe"),
                "{name}: {why}"
            );
        }
        other => panic!("{name} ended {other:?}: {p}"),
    }
}

/// Every hazard that reads `probe_name` is judged or "not judged" with why: none is lost.
fn assert_judged_or_said_why(fp: &Value, hazards: &[&str]) {
    for h in hazards {
        let judged = fp["verdicts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["hazard"] == *h);
        let not_judged = fp["not_judged"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|n| n["hazard"] == *h);
        assert!(
            judged || not_judged.is_some_and(|n| !n["why"].as_str().unwrap_or("").is_empty()),
            "{h} neither judged nor said why"
        );
    }
}

#[test]
fn check_in_a_512_mib_cgroup_with_half_a_cpu_finishes_says_the_limits_and_saves() {
    let Some(cg) = cgroup("cpudoctor-test-check") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("fp.json");
    let mut args = QUICK_CHECK.to_vec();
    args.extend(["--save", save.to_str().unwrap()]);
    let o = cg.command(BIN, &args).output().unwrap();
    let peak = cg.peak_memory_bytes();
    let version = cg.version;
    drop(cg);
    assert!(o.status.success(), "{}", text(&o));
    // The screen names each limit, and what the quota did (the line wraps at 100 columns).
    let out = String::from_utf8_lossy(&o.stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    for needle in [
        format!("cgroup {version}: memory limit 512 MiB"),
        "CPU quota 0.5 CPU (throttled in ".into(),
        "periods while measuring)".into(),
        format!("pids limit {PIDS_MAX}"),
    ] {
        assert!(out.contains(&needle), "no {needle:?} in\n{out}");
    }
    let fp: Value = serde_json::from_str(&fs::read_to_string(&save).unwrap()).unwrap();
    let c = &fp["machine"]["cgroup"];
    assert_eq!(c["memory_limit_bytes"], MEMORY_LIMIT_BYTES, "{c}");
    assert_eq!(c["cpu_quota"]["quota_us"], QUOTA_US, "{c}");
    assert_eq!(c["cpu_quota"]["period_us"], PERIOD_US, "{c}");
    assert_eq!(c["pids_max"], PIDS_MAX, "{c}");
    assert!(
        c["memory_usage_bytes"].as_u64().unwrap() < MEMORY_LIMIT_BYTES,
        "{c}"
    );
    assert!(
        common::schema_errors(&fp).is_empty(),
        "{:?}",
        common::schema_errors(&fp)
    );
    assert_sized_or_not_judged(
        &fp,
        "mem-latency",
        "max_size_capped",
        "the 512 MiB cgroup memory limit",
    );
    assert_sized_or_not_judged(
        &fp,
        "bandwidth",
        "buffer_capped",
        "the 512 MiB cgroup memory limit",
    );
    assert_judged_or_said_why(
        &fp,
        &["huge_pages", "small_page_penalty", "software_prefetch"],
    );
    // Buffers the limit made smaller are said on the screen too, as saved.
    for (name, key) in [
        ("mem-latency", "max_size_capped"),
        ("bandwidth", "buffer_capped"),
    ] {
        if let Some(why) = probe(&fp, name)["effects"][key].as_str() {
            let said = format!("{name}: {why}.");
            let said = said.split_whitespace().collect::<Vec<_>>().join(" ");
            assert!(out.contains(&said), "no {said:?} in\n{out}");
        }
    }
    if let Some(peak) = peak {
        eprintln!("check's cgroup peaked at {} MiB", peak >> 20);
    }
}

/// The shell commands that mount this machine's memory, cpu, cpuacct and pids hierarchies (or
/// the v2 one) again where they are, as a container runtime does inside a cgroup namespace.
fn remount_cgroups() -> String {
    let mountinfo = fs::read_to_string("/proc/self/mountinfo").unwrap();
    let mut lines = Vec::new();
    for l in mountinfo.lines() {
        let Some((left, right)) = l.split_once(" - ") else {
            continue;
        };
        let mount_point = left.split(' ').nth(4).unwrap_or("");
        let mut r = right.split(' ');
        let (fstype, _, options) = (r.next(), r.next(), r.next().unwrap_or(""));
        match fstype {
            Some("cgroup2") if mount_point == "/sys/fs/cgroup" => lines.push(format!(
                "umount {mount_point} && mount -t cgroup2 cgroup2 {mount_point}"
            )),
            Some("cgroup") => {
                let wanted: Vec<&str> = options
                    .split(',')
                    .filter(|o| ["memory", "cpu", "cpuacct", "pids"].contains(o))
                    .collect();
                if !wanted.is_empty() {
                    lines.push(format!(
                        "umount {mount_point} && mount -t cgroup -o {} cgroup {mount_point}",
                        wanted.join(",")
                    ));
                }
            }
            _ => {}
        }
    }
    lines.join(" && ")
}

#[test]
fn check_in_a_cgroup_namespace_reads_the_same_limits() {
    // A container's view: a cgroup namespace whose root is the container's cgroup, the
    // hierarchies mounted again inside it (`/proc/self/cgroup` then says `/`).
    if Command::new("unshare").arg("--version").output().is_err() {
        missing_tool("unshare", "apt-get install util-linux");
        return;
    }
    let Some(cg) = cgroup("cpudoctor-test-ns") else {
        return;
    };
    let script = format!("{} && exec \"$@\"", remount_cgroups());
    let mut args = vec![
        "--cgroup",
        "--mount",
        "--propagation",
        "private",
        "sh",
        "-c",
        &script,
        "sh",
        BIN,
        "check",
        "--json",
    ];
    // The memory probes and pause: the limits are what is read here.
    args.extend(["--skip", "split-lock", "--skip", "split-lock-neighbour"]);
    args.extend(["--skip", "sharing", "--skip", "c2c"]);
    let o = cg.command("unshare", &args).output().unwrap();
    drop(cg);
    assert_no_crash(&o);
    let fp: Value = serde_json::from_slice(&o.stdout).unwrap();
    let c = &fp["machine"]["cgroup"];
    assert_eq!(c["memory_limit_bytes"], MEMORY_LIMIT_BYTES, "{c}");
    assert_eq!(c["cpu_quota"]["quota_us"], QUOTA_US, "{c}");
    assert_eq!(c["pids_max"], PIDS_MAX, "{c}");
    assert_sized_or_not_judged(
        &fp,
        "mem-latency",
        "max_size_capped",
        "the 512 MiB cgroup memory limit",
    );
}

#[test]
fn diagnose_in_a_cgroup_with_half_a_cpu_finishes_names_the_quota_and_saves() {
    let Some(program) = program("cpu_bound", Build::Distribution) else {
        return;
    };
    let Some(cg) = cgroup("cpudoctor-test-diagnose") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let save = dir.path().join("diagnosis.json");
    // About 2 s of CPU: throttled to half a CPU, a few seconds of wall time.
    let o = cg
        .command(
            BIN,
            &[
                "diagnose",
                "--save",
                save.to_str().unwrap(),
                "--",
                program.to_str().unwrap(),
                "400000000",
            ],
        )
        .output()
        .unwrap();
    drop(cg);
    assert!(o.status.success(), "{}", text(&o));
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains("CPU quota"),
        "the quota is not named:\n{}",
        text(&o)
    );
    let saved: Value = serde_json::from_str(&fs::read_to_string(&save).unwrap()).unwrap();
    assert!(saved.is_object(), "{saved}");
}

/// `prlimit`, or `None` after saying it is missing.
fn prlimit() -> Option<&'static str> {
    match Command::new("prlimit").arg("--version").output() {
        Ok(o) if o.status.success() => Some("prlimit"),
        _ => {
            missing_tool("prlimit", "apt-get install util-linux");
            None
        }
    }
}

/// Exit status and stderr of a run that must end on its own: no panic, no abort.
fn assert_no_crash(o: &Output) {
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        o.status.code() == Some(0) && !err.contains("panicked") && !err.contains("backtrace"),
        "{}",
        text(o)
    );
}

#[test]
fn check_under_a_100_mib_address_space_limit_skips_what_does_not_fit_and_exits_0() {
    // Regression (issue 29): a 16 MiB allocation for the chase's cycle failed and the process
    // aborted with a backtrace (exit 134).
    let Some(prlimit) = prlimit() else {
        return;
    };
    let mut args = vec!["--as=104857600", BIN];
    args.extend(QUICK_CHECK);
    args.push("--json");
    let o = Command::new(prlimit).args(&args).output().unwrap();
    assert_no_crash(&o);
    let fp: Value = serde_json::from_slice(&o.stdout).unwrap();
    let limit = "the 100 MiB address-space limit (RLIMIT_AS)";
    assert_sized_or_not_judged(&fp, "mem-latency", "max_size_capped", limit);
    assert_sized_or_not_judged(&fp, "bandwidth", "buffer_capped", limit);
    assert_judged_or_said_why(&fp, &["small_page_penalty", "software_prefetch"]);
}

/// `args` run with RLIMIT_NPROC 1 as an unprivileged user: `nobody` through `setpriv` when
/// this is root (root is exempt from the limit), else this user.
fn without_threads(args: &[&str]) -> Option<Output> {
    let prlimit = prlimit()?;
    let root = nix::unistd::Uid::effective().is_root();
    let mut c = if root {
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=nobody",
            "--regid=nogroup",
            "--clear-groups",
            prlimit,
        ]);
        c
    } else {
        Command::new(prlimit)
    };
    c.arg("--nproc=1").arg(BIN).args(args).current_dir("/");
    match c.output() {
        Ok(o) => Some(o),
        Err(e) => {
            missing_tool(&format!("setpriv ({e})"), "apt-get install util-linux");
            None
        }
    }
}

#[test]
fn check_with_no_thread_to_spare_skips_the_threaded_probes_with_why() {
    // Regression (issue 29): "failed to spawn thread" panicked c2c (exit 101), and split-lock
    // failed where it could not start its second thread. Every probe but pause needs one (the
    // bus-locking ones are skipped before they lock anything).
    let Some(o) = without_threads(&["check", "--json"]) else {
        return;
    };
    assert_no_crash(&o);
    let fp: Value = serde_json::from_slice(&o.stdout).unwrap();
    for name in [
        "c2c",
        "split-lock",
        "split-lock-neighbour",
        "sharing",
        "bandwidth",
        "mem-latency",
    ] {
        let p = probe(&fp, name);
        let why = p["reason"].as_str().unwrap_or("");
        assert!(
            p["status"] == "skipped" && why.contains("cannot start a thread"),
            "{name}: {p}"
        );
    }
}

#[test]
fn spin_handoff_with_no_thread_to_spare_is_skipped_not_a_panic() {
    // Regression (issue 29): the in-process runs panicked (exit 101).
    let Some(o) = without_threads(&["spin", "--handoff", "--quick", "--json"]) else {
        return;
    };
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !err.contains("panicked") && o.status.code() != Some(101),
        "{}",
        text(&o)
    );
    let all = format!("{}{err}", String::from_utf8_lossy(&o.stdout));
    assert!(all.contains("cannot start a thread"), "{}", text(&o));
}
