//! One recording: start or attach to the workload, sample it, and read its kernel signals
//! while it runs (a thread's or process's /proc entries vanish when it exits, so they are read
//! every ~100 ms), until it exits, the duration ends, or the user interrupts.

use super::counters::{CounterSpec, CounterValue, Counters};
use super::memory::{self, ProcessMemory};
use super::sampler::{OpenError, Record, Sampler, SamplingMode};
use super::symbols::{self, AddressSpaces, Location, MapEntry, Symbol};
use super::target::{self, TargetError};
use super::threads::{ThreadFigures, ThreadTracker};
use crate::error::InputError;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// What to diagnose.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Start this command (argv) and follow it and its children.
    Command(Vec<String>),
    /// Attach to this running process.
    Pid(i32),
}

/// How to record.
#[derive(Debug, Clone)]
pub struct RecordOptions {
    /// The workload.
    pub target: Target,
    /// Stop after this long (a started command is then sent SIGTERM).
    pub duration: Option<Duration>,
    /// Samples per second per running thread.
    pub frequency_hz: u64,
    /// The sampling event.
    pub mode: SamplingMode,
    /// CPUs to open per-CPU events on (all online CPUs).
    pub cpus: Vec<usize>,
    /// Hardware counters to count (empty without a PMU).
    pub counters: Vec<CounterSpec>,
    /// Send a started command's stdout to stderr (keeps a JSON report clean).
    pub child_stdout_to_stderr: bool,
}

/// Whole-process totals of a started command, from `wait4`: exact, exited threads included.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessTotals {
    /// User CPU seconds.
    pub user_s: f64,
    /// System CPU seconds.
    pub system_s: f64,
    /// Minor page faults.
    pub minor_faults: u64,
    /// Major page faults.
    pub major_faults: u64,
    /// Voluntary context switches.
    pub voluntary_switches: u64,
    /// Involuntary context switches.
    pub involuntary_switches: u64,
    /// Peak resident set, kB.
    pub max_rss_kb: u64,
}

/// Everything one recording saw.
pub struct Recording {
    /// The sampling event.
    pub mode: SamplingMode,
    /// Requested frequency.
    pub frequency_hz: u64,
    /// Wall time recorded, s.
    pub wall_s: f64,
    /// The process started or attached to.
    pub root_pid: u32,
    /// The command line, when started.
    pub command: Option<Vec<String>>,
    /// How it ended (`exited with 0`, `killed by SIGTERM`, `still running`).
    pub ended: String,
    /// Samples by location and thread.
    pub samples: HashMap<Location, BTreeMap<u32, u64>>,
    /// Total samples.
    pub total_samples: u64,
    /// Records the kernel dropped.
    pub lost: u64,
    /// Thread names from the sampler's comm records (thread id -> name).
    pub thread_names: BTreeMap<u32, String>,
    /// Process of each thread.
    pub thread_pid: BTreeMap<u32, u32>,
    /// Per-thread kernel figures.
    pub threads: Vec<ThreadFigures>,
    /// Memory of each process at its largest.
    pub processes: Vec<ProcessMemory>,
    /// Exact totals of a started command.
    pub totals: Option<ProcessTotals>,
    /// Hardware counter values (empty without a PMU).
    pub counter_values: Vec<CounterValue>,
    /// Counters the PMU refused.
    pub counters_unavailable: Vec<(String, String)>,
    /// JIT symbols of each process, from its perf map.
    pub perf_maps: HashMap<u32, Vec<Symbol>>,
    /// Code of JIT symbols, copied from the process while it ran (address, bytes).
    pub jit_code: HashMap<u32, Vec<(u64, Vec<u8>)>>,
    /// Processes still alive at the end (their memory can be read).
    pub live_pids: Vec<u32>,
}

fn input_error(e: TargetError) -> anyhow::Error {
    match e {
        TargetError::CannotStart { program, reason } => {
            InputError::CommandNotStarted { program, reason }.into()
        }
        TargetError::NoSuchProcess(pid) => InputError::NoSuchProcess(pid).into(),
        TargetError::NotOwner { pid, uid } => InputError::ProcessNotOwned { pid, uid }.into(),
    }
}

fn open_error(e: OpenError, pid: i32, mode: SamplingMode) -> anyhow::Error {
    match e {
        OpenError::NotPermitted => InputError::PerfNotPermitted {
            paranoid: std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                .ok()
                .and_then(|s| s.trim().parse().ok()),
        }
        .into(),
        OpenError::NoSuchTask => InputError::NoSuchProcess(pid).into(),
        OpenError::NoSuchEvent => anyhow::anyhow!(
            "the {} event is not available on this machine",
            mode.event_name()
        ),
        OpenError::Other(io) => {
            anyhow::Error::new(io).context(format!("cannot open the {} event", mode.event_name()))
        }
    }
}

/// Largest JIT symbol whose code is copied, and the most copied per process: enough for the
/// hot methods of a JVM or .NET process without copying its whole code cache.
const JIT_SYMBOL_MAX_BYTES: u64 = 64 * 1024;
const JIT_CODE_MAX_BYTES: usize = 8 << 20;

/// Copies the code of newly published JIT symbols while the process is alive, so that hot
/// JIT code can be disassembled after it exits.
fn copy_jit_code(pid: u32, syms: &[Symbol], code: &mut Vec<(u64, Vec<u8>)>) {
    let mut total: usize = code.iter().map(|(_, b)| b.len()).sum();
    for s in syms {
        if total >= JIT_CODE_MAX_BYTES {
            break;
        }
        if s.size == 0 || s.size > JIT_SYMBOL_MAX_BYTES || code.iter().any(|(a, _)| *a == s.addr) {
            continue;
        }
        if let Some(bytes) = symbols::read_process_memory(pid, s.addr, s.size) {
            total += bytes.len();
            code.push((s.addr, bytes));
        }
    }
}

/// The perf map of `pid`, when its size or time changed since `seen`.
fn refresh_perf_map(pid: u32, seen: &mut HashMap<u32, (u64, SystemTime)>) -> Option<Vec<Symbol>> {
    let path = format!("/tmp/perf-{pid}.map");
    let meta = std::fs::metadata(&path).ok()?;
    let stamp = (meta.len(), meta.modified().ok()?);
    if seen.get(&pid) == Some(&stamp) {
        return None;
    }
    let text = std::fs::read_to_string(&path).ok()?;
    seen.insert(pid, stamp);
    Some(symbols::parse_perf_map(&text))
}

struct State {
    spaces: AddressSpaces,
    samples: HashMap<Location, BTreeMap<u32, u64>>,
    total: u64,
    lost: u64,
    names: BTreeMap<u32, String>,
    thread_pid: BTreeMap<u32, u32>,
    pids: BTreeSet<u32>,
    new_tids: Vec<u32>,
}

impl State {
    fn apply(&mut self, records: &mut Vec<Record>) {
        records.sort_by_key(Record::time_ns);
        for r in records.drain(..) {
            match r {
                Record::Sample { pid, tid, ip, .. } => {
                    self.total += 1;
                    let loc = self.spaces.locate(pid, ip);
                    *self.samples.entry(loc).or_default().entry(tid).or_default() += 1;
                    self.thread_pid.insert(tid, pid);
                }
                Record::Mmap {
                    pid,
                    start,
                    len,
                    pgoff,
                    filename,
                    ..
                } => self.spaces.add(
                    pid,
                    MapEntry {
                        start,
                        end: start + len,
                        pgoff,
                        path: filename.into(),
                    },
                ),
                Record::Comm {
                    pid,
                    tid,
                    comm,
                    exec,
                    ..
                } => {
                    if exec {
                        self.spaces.exec(pid);
                    }
                    self.names.insert(tid, comm);
                    self.thread_pid.insert(tid, pid);
                }
                Record::Fork { pid, ppid, tid, .. } => {
                    self.spaces.fork(ppid, pid);
                    self.pids.insert(pid);
                    self.thread_pid.insert(tid, pid);
                    self.new_tids.push(tid);
                }
                Record::Exit { .. } => {}
                Record::Lost { count } => self.lost += count,
            }
        }
    }
}

/// Records the workload. Bad input (a command that cannot start, a PID that is not there or
/// not ours, perf_event_open refused) comes back as an [`InputError`].
pub fn record(opts: &RecordOptions, stop: &AtomicBool) -> Result<Recording> {
    let started = Instant::now();
    let mut st = State {
        spaces: AddressSpaces::default(),
        samples: HashMap::new(),
        total: 0,
        lost: 0,
        names: BTreeMap::new(),
        thread_pid: BTreeMap::new(),
        pids: BTreeSet::new(),
        new_tids: Vec::new(),
    };
    let (mut sampler, mut counters, child, root) = match &opts.target {
        Target::Command(argv) => {
            let mut child =
                target::launch(argv, opts.child_stdout_to_stderr).map_err(input_error)?;
            let pid = child.pid.as_raw();
            let sampler =
                match Sampler::open(&[pid], &opts.cpus, opts.mode, opts.frequency_hz, true) {
                    Ok(s) => s,
                    Err(e) => {
                        child.abandon();
                        return Err(open_error(e, pid, opts.mode));
                    }
                };
            let counters = (!opts.counters.is_empty())
                .then(|| Counters::open(&opts.counters, &[pid], &opts.cpus, true));
            child.release().map_err(input_error)?;
            (sampler, counters, Some(child), pid)
        }
        Target::Pid(pid) => {
            let pid = *pid;
            target::check_attachable(pid).map_err(input_error)?;
            if let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/maps")) {
                for e in symbols::parse_proc_maps(&text) {
                    st.spaces.add(pid as u32, e);
                }
            }
            let tids = target::threads_of(pid);
            if tids.is_empty() {
                return Err(InputError::NoSuchProcess(pid).into());
            }
            let sampler = Sampler::open(&tids, &opts.cpus, opts.mode, opts.frequency_hz, false)
                .map_err(|e| open_error(e, pid, opts.mode))?;
            let counters = (!opts.counters.is_empty())
                .then(|| Counters::open(&opts.counters, &tids, &opts.cpus, false));
            sampler.enable();
            if let Some(c) = &counters {
                c.enable();
            }
            (sampler, counters, None, pid)
        }
    };
    let root = root as u32;
    st.pids.insert(root);
    let mut sampler_tids: BTreeSet<i32> = target::threads_of(root as i32).into_iter().collect();
    let mut tracker = ThreadTracker::new(child.is_some());
    let mut memory: BTreeMap<u32, ProcessMemory> = BTreeMap::new();
    let mut perf_maps: HashMap<u32, Vec<Symbol>> = HashMap::new();
    let mut perf_map_seen = HashMap::new();
    let mut jit_code: HashMap<u32, Vec<(u64, Vec<u8>)>> = HashMap::new();
    let mut records = Vec::new();
    let mut last_threads = Instant::now() - Duration::from_secs(1);
    let mut last_memory = last_threads;
    let mut terminated_at: Option<Instant> = None;
    let mut exit: Option<(String, Option<ProcessTotals>)> = None;
    loop {
        sampler.drain(&mut records);
        st.apply(&mut records);
        if child.is_none() {
            // Attached: threads that existed before attaching but were missed, or were created
            // by threads opened later, get their own events (inherit covers the rest).
            for tid in target::threads_of(root as i32) {
                if sampler_tids.insert(tid) {
                    let _ = sampler.add_task(tid);
                    if let Some(c) = counters.as_mut() {
                        c.add_task(tid);
                    }
                }
            }
        }
        st.new_tids.clear();
        let now = Instant::now();
        if now - last_threads >= Duration::from_millis(100) {
            for &pid in &st.pids {
                tracker.poll(pid);
                if let Some(m) = refresh_perf_map(pid, &mut perf_map_seen) {
                    copy_jit_code(pid, &m, jit_code.entry(pid).or_default());
                    perf_maps.insert(pid, m);
                }
            }
            last_threads = now;
        }
        if now - last_memory >= Duration::from_millis(500) {
            for &pid in &st.pids {
                if let Some(m) = memory::read_process(pid) {
                    let keep = memory.get(&pid).is_none_or(|old| m.rss_kb >= old.rss_kb);
                    if keep {
                        memory.insert(pid, m);
                    }
                }
            }
            last_memory = now;
        }
        match &child {
            Some(c) => {
                if let Some((status, usage)) = c.try_wait() {
                    exit = Some((describe_status(status), Some(totals_of(&usage))));
                    break;
                }
                let over = opts.duration.is_some_and(|d| started.elapsed() >= d)
                    || stop.load(Ordering::Relaxed);
                match terminated_at {
                    None if over => {
                        c.terminate(false);
                        terminated_at = Some(now);
                    }
                    Some(t) if now - t > Duration::from_secs(2) => c.terminate(true),
                    _ => {}
                }
            }
            None => {
                let gone = !std::path::Path::new(&format!("/proc/{root}")).exists();
                if gone {
                    exit = Some(("exited during the recording".into(), None));
                    break;
                }
                if opts.duration.is_some_and(|d| started.elapsed() >= d)
                    || stop.load(Ordering::Relaxed)
                {
                    break;
                }
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    sampler.disable();
    sampler.drain(&mut records);
    st.apply(&mut records);
    let counter_values = counters.as_ref().map(|c| c.read()).unwrap_or_default();
    let live_pids: Vec<u32> = st
        .pids
        .iter()
        .copied()
        .filter(|p| std::path::Path::new(&format!("/proc/{p}")).exists())
        .collect();
    let (ended, totals) = exit.unwrap_or_else(|| ("still running (attached)".into(), None));
    Ok(Recording {
        mode: opts.mode,
        frequency_hz: opts.frequency_hz,
        wall_s: started.elapsed().as_secs_f64(),
        root_pid: root,
        command: match &opts.target {
            Target::Command(a) => Some(a.clone()),
            Target::Pid(_) => None,
        },
        ended,
        samples: st.samples,
        total_samples: st.total,
        lost: st.lost,
        thread_names: st.names,
        thread_pid: st.thread_pid,
        threads: tracker.figures(),
        processes: memory.into_values().collect(),
        totals,
        counter_values,
        counters_unavailable: counters.map(|c| c.unavailable).unwrap_or_default(),
        perf_maps,
        jit_code,
        live_pids,
    })
}

fn describe_status(s: nix::sys::wait::WaitStatus) -> String {
    use nix::sys::wait::WaitStatus;
    match s {
        WaitStatus::Exited(_, code) => format!("exited with status {code}"),
        WaitStatus::Signaled(_, sig, _) => format!("killed by {sig}"),
        other => format!("{other:?}"),
    }
}

fn totals_of(u: &libc::rusage) -> ProcessTotals {
    let secs = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    ProcessTotals {
        user_s: secs(u.ru_utime),
        system_s: secs(u.ru_stime),
        minor_faults: u.ru_minflt as u64,
        major_faults: u.ru_majflt as u64,
        voluntary_switches: u.ru_nvcsw as u64,
        involuntary_switches: u.ru_nivcsw as u64,
        max_rss_kb: u.ru_maxrss as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refused_perf_event_open_becomes_the_paranoid_input_error_with_its_fix() {
        let e = open_error(OpenError::NotPermitted, 1, SamplingMode::CpuClock);
        let input = e
            .downcast_ref::<InputError>()
            .expect("an input error (exit 2)");
        assert!(matches!(input, InputError::PerfNotPermitted { .. }));
        let text = input.to_string();
        assert!(
            text.contains("sysctl kernel.perf_event_paranoid=1"),
            "{text}"
        );
        assert!(text.contains("CAP_PERFMON"));
    }

    #[test]
    fn target_errors_map_to_input_errors() {
        let e = input_error(TargetError::NotOwner { pid: 1, uid: 0 });
        assert_eq!(
            e.downcast_ref::<InputError>(),
            Some(&InputError::ProcessNotOwned { pid: 1, uid: 0 })
        );
        let e = open_error(OpenError::NoSuchTask, 42, SamplingMode::Cycles);
        assert_eq!(
            e.downcast_ref::<InputError>(),
            Some(&InputError::NoSuchProcess(42))
        );
    }
}
