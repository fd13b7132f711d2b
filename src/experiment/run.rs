//! Running the experiment: each arm's setup applied to the user's command (affinity,
//! `PR_SET_THP_DISABLE`, the glibc tunable that asks for huge pages, a neighbour on another
//! CPU), the runs interleaved round by round, each timed from spawn to exit, its stdout kept
//! for `--metric`, and its `AnonHugePages` read from `/proc/PID/smaps_rollup` while it runs.
//!
//! Affinity and the THP switch are set in the child between fork and exec (`pre_exec`, two
//! system calls, both async-signal-safe), so they hold from the command's first instruction
//! and are inherited by every thread and child it makes.

use super::neighbour::Neighbour;
use super::{
    ArmResult, ExperimentMachine, ExperimentResult, KIND, Measure, PagesSetting, Plan,
    SCHEMA_VERSION, Variant, ratios,
};
use crate::diagnose::record::work::extract_metric;
use crate::machine::{Machine, ThpEnabled};
use crate::measure::{Clock, Progress};
use std::io::Read;
use std::os::unix::process::CommandExt;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often `smaps_rollup` is read while the command runs. Reading it takes the command's
/// memory-map lock, so not often; a run shorter than this is read once, at its start.
const SMAPS_EVERY: Duration = Duration::from_millis(50);
/// Most bytes of the command's stdout kept for `--metric` (the rest is read and dropped).
const STDOUT_KEEP_BYTES: usize = crate::diagnose::record::work::STDOUT_KEEP_BYTES;
/// Bytes of its stderr kept to name a failure.
const STDERR_KEEP_BYTES: usize = 4096;

/// The glibc tunable that makes malloc mark its heaps `MADV_HUGEPAGE` (glibc 2.35 and later;
/// glibc manual, "Memory Allocation Tunables", `glibc.malloc.hugetlb=1`).
pub const HUGE_TUNABLE: &str = "glibc.malloc.hugetlb=1";

/// How one run is set up.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Setup {
    /// CPUs the command may run on; all when `None`.
    pub cpus: Option<Vec<usize>>,
    /// `prctl(PR_SET_THP_DISABLE, 1)` before exec.
    pub thp_disabled: bool,
    /// `GLIBC_TUNABLES` to set (appended to the caller's own).
    pub glibc_tunables: Option<String>,
}

/// What one run did.
#[derive(Debug, Clone)]
pub struct RunOutcome {
    /// How it ended.
    pub status: ExitStatus,
    /// Seconds from spawn to exit.
    pub wall_s: f64,
    /// Its stdout (the first [`STDOUT_KEEP_BYTES`]).
    pub stdout: String,
    /// How many bytes it wrote to stdout in all (more than `stdout` holds past the cap).
    pub stdout_bytes: u64,
    /// The last line of its stderr.
    pub stderr_last_line: Option<String>,
    /// The largest `AnonHugePages` seen, in bytes; `None` when never read.
    pub anon_huge_bytes: Option<u64>,
}

/// The setup of `variant`.
pub fn setup_of(variant: &Variant) -> Setup {
    let mut s = Setup {
        cpus: variant.cpus().map(<[usize]>::to_vec),
        ..Setup::default()
    };
    match variant {
        Variant::Pages {
            setting: PagesSetting::ThpDisabled,
        } => s.thp_disabled = true,
        Variant::Pages {
            setting: PagesSetting::HugeAsked,
        } => s.glibc_tunables = Some(HUGE_TUNABLE.into()),
        _ => {}
    }
    s
}

/// `GLIBC_TUNABLES` with `add` appended to what the caller already set.
pub fn tunables_with(existing: Option<&str>, add: &str) -> String {
    match existing {
        Some(e) if !e.is_empty() => format!("{e}:{add}"),
        _ => add.to_string(),
    }
}

/// Reads `r` to its end, keeping its first (or with `tail`, last) `keep` bytes; returns them
/// and how many bytes were read in all.
fn read_all_keeping(mut r: impl Read, keep: usize, tail: bool) -> (Vec<u8>, u64) {
    let mut out = Vec::new();
    let mut total = 0u64;
    let mut buf = [0u8; 8192];
    while let Ok(n) = r.read(&mut buf) {
        if n == 0 {
            break;
        }
        total += n as u64;
        out.extend_from_slice(&buf[..n]);
        if out.len() > keep {
            if tail {
                out.drain(..out.len() - keep);
            } else {
                out.truncate(keep);
            }
        }
    }
    (out, total)
}

fn anon_huge_bytes(pid: u32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    crate::machine::smaps::parse_rollup(&text)
        .get("AnonHugePages")
        .map(|kb| kb * 1024)
}

/// Runs `command` once under `setup`, in a process group of its own: when the command exits,
/// whatever it started and left behind (`sh -c 'sleep 41 & ...'`) is killed, so that the next
/// run starts alone and its stdout reaches EOF; when `stop` is set (a signal to cpudoctor),
/// the whole group is killed and the run ends early.
pub fn run_once(
    command: &[String],
    setup: &Setup,
    stop: &AtomicBool,
) -> std::io::Result<RunOutcome> {
    let mut cmd = Command::new(&command[0]);
    cmd.args(&command[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(add) = &setup.glibc_tunables {
        let existing = std::env::var("GLIBC_TUNABLES").ok();
        cmd.env("GLIBC_TUNABLES", tunables_with(existing.as_deref(), add));
    }
    crate::process::tie_to_parent(&mut cmd);
    crate::process::own_group(&mut cmd);
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if let Some(cpus) = &setup.cpus {
        // A CPU beyond what a cpu_set_t can name cannot be in this process's allowed set
        // (sched_getaffinity reads the same type), so none is dropped in practice.
        for &c in cpus.iter().filter(|&&c| c < libc::CPU_SETSIZE as usize) {
            // SAFETY: c is below CPU_SETSIZE (filtered above).
            unsafe { libc::CPU_SET(c, &mut set) };
        }
    }
    let (pin, thp_off) = (setup.cpus.is_some(), setup.thp_disabled);
    // SAFETY: between fork and exec only sched_setaffinity and prctl, both system calls.
    unsafe {
        cmd.pre_exec(move || {
            if pin && libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0
            {
                return Err(std::io::Error::last_os_error());
            }
            if thp_off && libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let t0 = Instant::now();
    let mut child = cmd.spawn()?;
    let group = crate::process::Group::of_leader(child.id());
    let out = child.stdout.take().expect("piped");
    let err = child.stderr.take().expect("piped");
    let out_reader = std::thread::spawn(move || read_all_keeping(out, STDOUT_KEEP_BYTES, false));
    let err_reader = std::thread::spawn(move || read_all_keeping(err, STDERR_KEEP_BYTES, true));
    let pid = child.id();
    let mut huge: Option<u64> = None;
    let status = loop {
        if let Some(b) = anon_huge_bytes(pid) {
            huge = Some(huge.map_or(b, |h| h.max(b)));
        }
        // Wait in short steps so the smaps reads keep their pace.
        let next = Instant::now() + SMAPS_EVERY;
        let mut done = None;
        while Instant::now() < next {
            if let Some(s) = child.try_wait()? {
                done = Some(s);
                break;
            }
            if stop.load(Ordering::SeqCst) {
                group.signal(crate::process::Stop::Kill);
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        if let Some(s) = done {
            break s;
        }
    };
    let wall_s = t0.elapsed().as_secs_f64();
    drop(group); // what the command left running
    let (stdout, stdout_bytes) = out_reader.join().unwrap_or_default();
    let stdout = String::from_utf8_lossy(&stdout).into_owned();
    let stderr = String::from_utf8_lossy(&err_reader.join().unwrap_or_default().0).into_owned();
    Ok(RunOutcome {
        status,
        wall_s,
        stdout,
        stdout_bytes,
        stderr_last_line: stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.trim().chars().take(200).collect()),
        anon_huge_bytes: huge,
    })
}

/// Whether `program` can be started: a path to an executable file, or a name found in
/// `PATH`; otherwise why not (checked before any run, so a typo is one line, not a failed
/// arm per variant).
pub fn startable(program: &str) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &std::path::Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let p = std::path::Path::new(program);
        return if !p.exists() {
            Err("no such file".into())
        } else if executable(p) {
            Ok(())
        } else {
            Err("not an executable file".into())
        };
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    if std::env::split_paths(&path).any(|d| executable(&d.join(program))) {
        Ok(())
    } else {
        Err("not found in PATH".into())
    }
}

/// What the user asked to run, besides the variants.
#[derive(Debug, Clone)]
pub struct Spec {
    /// The command and its arguments (at least one word).
    pub command: Vec<String>,
    /// A shell command run before each run (`sh -c`), untimed.
    pub prepare: Option<String>,
    /// The measure.
    pub measure: Measure,
    /// The compiled `--metric` expression, when the measure is a metric.
    pub metric: Option<regex::Regex>,
    /// Timed rounds.
    pub runs: usize,
    /// Rounds thrown away first.
    pub warmup: usize,
}

/// One line for a run that failed.
fn failure_line(o: &RunOutcome) -> String {
    let how = match (
        o.status.code(),
        std::os::unix::process::ExitStatusExt::signal(&o.status),
    ) {
        (Some(c), _) => format!("exit status {c}"),
        (None, Some(s)) => format!(
            "killed by {}",
            nix::sys::signal::Signal::try_from(s)
                .map_or_else(|_| format!("signal {s}"), |s| s.as_str().to_string())
        ),
        _ => "ended abnormally".into(),
    };
    match &o.stderr_last_line {
        Some(l) => format!("{how}: {l}"),
        None => how,
    }
}

/// The measure of one successful run, or why there is none.
fn measure_of(spec: &Spec, o: &RunOutcome) -> Result<f64, String> {
    if !o.status.success() {
        return Err(failure_line(o));
    }
    match &spec.metric {
        None => Ok(o.wall_s),
        // The first match is the figure, so a match in the kept part is the one in the whole
        // output; a miss says when the output went past what was kept (issue 29: silently).
        Some(re) => extract_metric(re, &o.stdout).ok_or_else(|| {
            if o.stdout_bytes > STDOUT_KEEP_BYTES as u64 {
                format!(
                    "no number matching /{}/ in the first {} of its output (it wrote {}; \
                     --metric reads that much, print the figure earlier)",
                    re.as_str(),
                    crate::format::human_bytes(STDOUT_KEEP_BYTES as u64),
                    crate::format::human_bytes(o.stdout_bytes)
                )
            } else {
                format!("no number matching /{}/ in its output", re.as_str())
            }
        }),
    }
}

fn prepare(cmd: &str, stop: &AtomicBool) -> Result<(), String> {
    let mut sh = Command::new("sh");
    sh.args(["-c", cmd])
        .stdin(Stdio::null())
        .stdout(Stdio::null());
    crate::process::tie_to_parent(&mut sh);
    crate::process::own_group(&mut sh);
    let mut child = sh
        .spawn()
        .map_err(|e| format!("--prepare: cannot run sh: {e}"))?;
    // Its group, like the command's: what it leaves running is killed when it ends.
    let group = crate::process::Group::of_leader(child.id());
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break s,
            Ok(None) if stop.load(Ordering::SeqCst) => {
                group.signal(crate::process::Stop::Kill);
            }
            Ok(None) => {}
            Err(e) => return Err(format!("--prepare: {e}")),
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    drop(group);
    if status.success() {
        Ok(())
    } else {
        Err(format!("--prepare '{cmd}' failed ({status})"))
    }
}

/// The machine facts an experiment records.
pub fn machine_facts(m: &Machine) -> ExperimentMachine {
    ExperimentMachine {
        hostname: m.hostname.clone(),
        cpu: m.cpu_line(),
        allowed_cpus: m.allowed_cpus.clone(),
        thp: m.thp.as_ref().map(|t| t.enabled.as_str().to_string()),
        split_lock: m.split_lock.effective,
        hypervisor: m.hypervisor.as_ref().map(|h| h.vendor.clone()),
    }
}

/// Runs `plan`: warmup rounds, then `spec.runs` rounds of every arm in order. An arm whose
/// run fails stops there (its failure kept in one line); the other arms go on. When `stop` is
/// set (cpudoctor got SIGINT, SIGTERM or SIGHUP), the run in flight is killed with its
/// process group, the unfinished round is dropped, and the result holds the rounds measured
/// so far (`runs` says how many) with a note that says so.
pub fn execute(
    spec: &Spec,
    plan: &Plan,
    machine: &Machine,
    clock: &Clock,
    progress: &dyn Progress,
    stop: &AtomicBool,
) -> ExperimentResult {
    let started_unix_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let llc = machine.topology.as_ref().and_then(|t| t.llc_bytes());
    let mut arms: Vec<ArmResult> = plan
        .arms
        .iter()
        .map(|v| ArmResult {
            variant: v.clone(),
            samples: Vec::new(),
            wall_s: Vec::new(),
            anon_huge_bytes: Vec::new(),
            median: None,
            failure: None,
            neighbour: None,
        })
        .collect();
    // Neighbours are made once per arm, before the first round, and kept idle between runs.
    let mut neighbours: Vec<Option<Neighbour>> = plan
        .arms
        .iter()
        .zip(arms.iter_mut())
        .map(|(v, arm)| match v {
            Variant::Neighbour {
                kind,
                neighbour_cpu,
                ..
            } => match Neighbour::new(
                *kind,
                *neighbour_cpu,
                llc,
                machine.split_lock.effective,
                machine.hypervisor.is_some(),
                clock,
            ) {
                Ok(n) => Some(n),
                Err(e) => {
                    arm.failure = Some(format!("the {} neighbour: {e}", kind.as_str()));
                    None
                }
            },
            _ => None,
        })
        .collect();
    let setups: Vec<_> = plan.arms.iter().map(setup_of).collect();
    let rounds = spec.warmup + spec.runs;
    progress.begin("experiment", (rounds * plan.arms.len()) as u64);
    let mut timed_done = 0;
    let mut notes = plan.notes.clone();
    for round in 0..rounds {
        let timed = round >= spec.warmup;
        // What an interrupted round would leave, to put back: its runs are not kept.
        let before: Vec<(usize, Option<String>)> = arms
            .iter()
            .map(|a| (a.samples.len(), a.failure.clone()))
            .collect();
        for (i, arm) in arms.iter_mut().enumerate() {
            if stop.load(Ordering::SeqCst) {
                break;
            }
            progress.advance(1);
            if arm.failure.is_some() {
                if timed {
                    arm.samples.push(None);
                    arm.wall_s.push(None);
                    arm.anon_huge_bytes.push(None);
                }
                continue;
            }
            let outcome = one_run(spec, &setups[i], neighbours[i].as_mut(), stop);
            let (sample, wall, huge) = match outcome {
                Ok((o, m)) => match m {
                    Ok(m) => (Some(m), Some(o.wall_s), o.anon_huge_bytes),
                    Err(e) => {
                        arm.failure = Some(e);
                        (None, Some(o.wall_s), o.anon_huge_bytes)
                    }
                },
                Err(e) => {
                    arm.failure = Some(e);
                    (None, None, None)
                }
            };
            if timed {
                arm.samples.push(sample);
                arm.wall_s.push(wall);
                arm.anon_huge_bytes.push(huge);
            }
        }
        if stop.load(Ordering::SeqCst) {
            for (arm, (len, failure)) in arms.iter_mut().zip(before) {
                arm.samples.truncate(len);
                arm.wall_s.truncate(len);
                arm.anon_huge_bytes.truncate(len);
                arm.failure = failure;
            }
            notes.push(crate::words::experiment::stopped(timed_done, spec.runs));
            break;
        }
        if timed {
            timed_done += 1;
        }
    }
    progress.finish();
    for (arm, n) in arms.iter_mut().zip(&neighbours) {
        let got: Vec<f64> = arm.samples.iter().flatten().copied().collect();
        arm.median = crate::stats::median(&got);
        arm.neighbour = n.as_ref().map(Neighbour::report);
    }
    drop(neighbours.drain(..));
    let comparisons = ratios::compare(&plan.comparisons, &arms, &spec.measure);
    let scaling = ratios::scaling(&comparisons, &arms, &spec.measure);
    ExperimentResult {
        kind: KIND.into(),
        schema_version: SCHEMA_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").into(),
        started_unix_s,
        command: spec.command.clone(),
        prepare: spec.prepare.clone(),
        measure: spec.measure.clone(),
        runs: timed_done,
        warmup: spec.warmup,
        machine: machine_facts(machine),
        arms,
        comparisons,
        scaling,
        not_run: plan.not_run.clone(),
        notes,
    }
}

/// One run with its neighbour around it: the outcome and its measure (or why none).
#[allow(clippy::type_complexity)]
fn one_run(
    spec: &Spec,
    setup: &Setup,
    neighbour: Option<&mut Neighbour>,
    stop: &AtomicBool,
) -> Result<(RunOutcome, Result<f64, String>), String> {
    if let Some(p) = &spec.prepare {
        prepare(p, stop)?;
    }
    let mut neighbour = neighbour;
    if let Some(n) = neighbour.as_deref_mut() {
        n.start().map_err(|e| format!("the neighbour: {e}"))?;
    }
    let outcome = run_once(&spec.command, setup, stop);
    if let Some(n) = neighbour {
        n.stop().map_err(|e| format!("the neighbour: {e}"))?;
    }
    let o = outcome.map_err(|e| format!("cannot run {}: {e}", spec.command[0]))?;
    let m = measure_of(spec, &o);
    Ok((o, m))
}

/// Whether `--pages` can run here, and the note that says what the kernel allows.
pub fn pages_allowed(thp: Option<ThpEnabled>) -> Result<Option<String>, String> {
    match thp {
        Some(ThpEnabled::Never) => Err(
            "--pages: transparent huge pages are 'never' for the whole system \
             (/sys/kernel/mm/transparent_hugepage/enabled): the command cannot get huge \
             pages, so there is nothing to compare"
                .into(),
        ),
        Some(ThpEnabled::Always) => Ok(Some(
            "THP is 'always': every large anonymous mapping may get huge pages unasked".into(),
        )),
        Some(ThpEnabled::Madvise) => Ok(Some(format!(
            "THP is 'madvise': huge pages are asked for with GLIBC_TUNABLES={HUGE_TUNABLE} \
             (malloc's heaps only; a program that maps its own memory must madvise it)"
        ))),
        None => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tunables_append_to_the_callers_own() {
        assert_eq!(tunables_with(None, HUGE_TUNABLE), HUGE_TUNABLE);
        assert_eq!(
            tunables_with(Some("glibc.malloc.arena_max=2"), HUGE_TUNABLE),
            format!("glibc.malloc.arena_max=2:{HUGE_TUNABLE}")
        );
    }

    #[test]
    fn thp_disabled_and_affinity_reach_the_command() {
        let setup = Setup {
            cpus: Some(vec![crate::machine::allowed_cpus()[0]]),
            thp_disabled: true,
            glibc_tunables: Some(HUGE_TUNABLE.into()),
        };
        let cmd: Vec<String> = [
            "sh",
            "-c",
            "grep -E '^(THP_enabled|Cpus_allowed_list)' /proc/self/status; echo $GLIBC_TUNABLES",
        ]
        .map(String::from)
        .to_vec();
        let o = run_once(&cmd, &setup, &AtomicBool::new(false)).unwrap();
        assert!(o.status.success());
        assert!(o.stdout.contains("THP_enabled:\t0"), "{}", o.stdout);
        let cpu = crate::machine::allowed_cpus()[0];
        assert!(
            o.stdout.contains(&format!("Cpus_allowed_list:\t{cpu}\n")),
            "{}",
            o.stdout
        );
        assert!(o.stdout.contains(HUGE_TUNABLE), "{}", o.stdout);
    }

    #[test]
    fn a_failing_command_names_its_status_and_last_stderr_line() {
        let cmd: Vec<String> = [
            "sh",
            "-c",
            "echo first >&2; echo 'no such input' >&2; exit 3",
        ]
        .map(String::from)
        .to_vec();
        let o = run_once(&cmd, &Setup::default(), &AtomicBool::new(false)).unwrap();
        assert_eq!(failure_line(&o), "exit status 3: no such input");
    }
}
