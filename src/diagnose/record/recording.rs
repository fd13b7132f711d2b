//! One recording: start or attach to the workload, sample it, and read its kernel signals
//! while it runs (a thread's or process's /proc entries vanish when it exits, so they are read
//! every ~100 ms), until it exits, the duration ends, or the user interrupts.

use super::counters::{CounterSpec, CounterValue};
use super::memory::ProcessMemory;
use super::sampler::{
    self, Follow, Inherit, KernelSampling, OpenError, Record, SampleLayout, Sampler, SamplingMode,
    SamplingScope,
};
use super::target::{ProcessName, TargetError};
use super::threads::ThreadFigures;
use super::tree::FollowedProcess;
use super::wall::timeline::{Phase, SwitchEvent};
use super::wall::{WallRecorder, WallRecording};
use crate::diagnose::symbolize::kallsyms::KERNEL_SPACE_START;
use crate::diagnose::symbolize::namespace::NamespacedProcess;
use crate::diagnose::symbolize::symbols::{AddressSpaces, Location, MapEntry, Symbol};
use crate::diagnose::symbolize::unwind::{StackUnwinder, UnwindReport};
use crate::error::InputError;
use crate::machine::pmu::PerfErrno;
use anyhow::Result;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

mod filter;
mod run;
use run::Run;

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
    /// Send a started command's stdout into this pipe instead (`diagnose --metric` reads it
    /// through a [`super::work::Tee`], which passes it on to the user). Opened close-on-exec.
    pub child_stdout: Option<std::sync::Arc<std::os::fd::OwnedFd>>,
    /// Sample user call chains with each sample: the user stack and registers for CFI
    /// unwinding, and the kernel's frame-pointer chain as the fallback.
    pub callchains: bool,
    /// Account every thread's whole wall time: each thread's schedstat counts (or switch
    /// records, below), and looks at sleeping threads through /proc ([`super::wall`]).
    pub wall: bool,
    /// Time the wall-clock view's states by context-switch records on the sampling events
    /// (`--switches`): every interval, at a cost at every switch. Also where the kernel keeps
    /// no schedstat counts.
    pub switches: bool,
    /// Follow an attached process's child processes: those running at the attach (all
    /// generations) and those it starts. False (`--no-children`): the process and its threads
    /// only. A started command is always followed into everything it starts.
    pub children: bool,
    /// Sample per task even where CPU-wide events are permitted (`--per-task`).
    pub per_task: bool,
    /// Sample kernel code too where the kernel permits it; false with `--user-only`.
    pub kernel: bool,
    /// Watch the hot code's cache lines once the window is over, while the workload still
    /// runs ([`super::watch`]); `None` unless `--watch` asked for it.
    pub watch: Option<super::watch::WatchBudget>,
}

impl RecordOptions {
    /// True unless `--no-children` keeps an attached process's children out.
    fn follows_children(&self) -> bool {
        self.children || matches!(self.target, Target::Command(_))
    }

    /// How new tasks get the events: everything the workload starts, or with `--no-children`
    /// its threads only where the kernel can (5.13+; an older one passes them to forked
    /// processes too, whose records the recording then leaves out).
    fn inherit(&self) -> Inherit {
        if !self.follows_children() && Inherit::threads_only_supported() {
            Inherit::ThreadsOnly
        } else {
            Inherit::ThreadsAndChildren
        }
    }

    /// True when the events write switch records: the wall-clock view asked for them, or has
    /// no counts to take its times from.
    fn switch_records(&self) -> bool {
        self.wall && (self.switches || !super::wall::WallSource::counts_available())
    }
}

/// Why the sampling events were per task rather than CPU-wide.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PerTaskBecause {
    /// `--per-task`.
    Asked,
    /// CPU-wide events need root, `CAP_PERFMON` or `perf_event_paranoid` <= 0.
    NotPermitted {
        /// `kernel.perf_event_paranoid` then, when it could be read.
        paranoid: Option<i32>,
    },
    /// The kernel refused them for another reason (its error).
    Refused(String),
}

/// Opens the per-task sampler on `tasks` with the richest layout the kernel takes
/// ([`open_with_layouts`]).
fn open_sampler(
    opts: &RecordOptions,
    tasks: &[i32],
    enable_on_exec: bool,
    notes: &mut Vec<String>,
    kernel_refused: &mut Option<String>,
) -> Result<Sampler, OpenError> {
    open_with_layouts(opts, notes, kernel_refused, |layout| {
        open_sampler_layout(opts, tasks, enable_on_exec, layout)
    })
}

/// Opens the CPU-wide sampler, disabled, unless `--per-task` declines it or the kernel refuses
/// it (not permitted, most often): then `Err` says why, and the caller samples per task.
fn open_cpu_wide(
    opts: &RecordOptions,
    notes: &mut Vec<String>,
    kernel_refused: &mut Option<String>,
) -> Result<Sampler, PerTaskBecause> {
    if opts.per_task {
        return Err(PerTaskBecause::Asked);
    }
    // Notes on a layout refused count only if CPU-wide sampling is used.
    let mut said = Vec::new();
    let opened = open_with_layouts(opts, &mut said, kernel_refused, |layout| {
        Sampler::open_cpu_wide(
            &opts.cpus,
            opts.mode,
            opts.frequency_hz,
            layout,
            opts.switch_records(),
        )
    });
    match opened {
        Ok(s) => {
            notes.extend(said);
            Ok(s)
        }
        Err(e) if e.kind() == PerfErrno::NotPermitted => Err(PerTaskBecause::NotPermitted {
            paranoid: std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
                .ok()
                .and_then(|s| s.trim().parse().ok()),
        }),
        Err(e) => Err(PerTaskBecause::Refused(e.io().to_string())),
    }
}

/// Opens a sampler with `open`, with stack copies and call chains when asked and the kernel
/// takes them; with call chains only when it refuses the stack copies (or the 2 MiB rings they
/// need, over an unprivileged user's `perf_event_mlock_kb`), without when it refuses call
/// chains too (a kernel too old for `sample_max_stack`), with a note each time. Each layout is
/// tried with kernel code first (unless `--user-only`), then, where that is not permitted, user
/// space only, the refusal's error kept in `kernel_refused`.
fn open_with_layouts(
    opts: &RecordOptions,
    notes: &mut Vec<String>,
    kernel_refused: &mut Option<String>,
    open: impl Fn(SampleLayout) -> Result<Sampler, OpenError>,
) -> Result<Sampler, OpenError> {
    let mut open = |layout: SampleLayout| {
        if opts.kernel {
            match open(layout.with_kernel(true)) {
                Err(e) if e.kind() == PerfErrno::NotPermitted => {
                    *kernel_refused = Some(e.io().to_string());
                }
                other => return other,
            }
        }
        open(layout)
    };
    if opts.callchains && cfg!(target_arch = "x86_64") {
        match open(SampleLayout::CHAIN_AND_STACK) {
            Ok(s) => return Ok(s),
            Err(e) => notes.push(format!(
                "the kernel refused user stack copies ({}); stacks are walked by frame pointers",
                e.io()
            )),
        }
    }
    if !opts.callchains {
        return open(SampleLayout::LEAF);
    }
    match open(SampleLayout::CHAIN) {
        Err(e) if e.kind() == PerfErrno::Invalid => {
            let s = open(SampleLayout::LEAF)?;
            notes.push(format!(
                "the kernel refused call chains ({}); stacks are the sampled function only",
                e.io()
            ));
            Ok(s)
        }
        other => other,
    }
}

fn open_sampler_layout(
    opts: &RecordOptions,
    tasks: &[i32],
    enable_on_exec: bool,
    layout: SampleLayout,
) -> Result<Sampler, OpenError> {
    Sampler::open(
        tasks,
        &opts.cpus,
        opts.mode,
        opts.frequency_hz,
        enable_on_exec,
        layout,
        Follow {
            inherit: opts.inherit(),
            switches: opts.switch_records(),
        },
    )
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
    /// Seconds from the start of the recording (just before the command was started) to its
    /// exit as the recorder saw it, for the work measure; absent when cpudoctor ended it
    /// (`--duration`, a signal): then it is not the time its work took. Absent in older files.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_s: Option<f64>,
}

/// Everything one recording saw.
pub struct Recording {
    /// The sampling event.
    pub mode: SamplingMode,
    /// Which tasks the events watched.
    pub scope: SamplingScope,
    /// Why per task, when it was.
    pub per_task_because: Option<PerTaskBecause>,
    /// Whether kernel code was sampled, and why not.
    pub kernel: KernelSampling,
    /// The root process as the user ran it (`argv[0]`) and its executable, from its last
    /// look while it ran.
    pub root_name: Option<ProcessName>,
    /// Samples of processes not followed (CPU-wide events sample every process), dropped.
    pub other_samples: u64,
    /// Requested frequency.
    pub frequency_hz: u64,
    /// Wall time recorded, s.
    pub wall_s: f64,
    /// The process started or attached to.
    pub root_pid: u32,
    /// Every process followed, the root first.
    pub followed: Vec<FollowedProcess>,
    /// True when child processes were not followed (`--no-children`).
    pub no_children: bool,
    /// The command line, when started.
    pub command: Option<Vec<String>>,
    /// How it ended (`exited with 0`, `killed by SIGTERM`, `still running`).
    pub ended: String,
    /// The signal of a Ctrl-C (SIGINT) or Ctrl-\ (SIGQUIT) typed at the terminal the started
    /// command held, which ended the recording: cpudoctor ends by it too once the diagnosis is
    /// written, as when the signal reaches it (a shell loop stops).
    pub interrupted_by: Option<i32>,
    /// Samples by location and thread.
    pub samples: HashMap<Location, BTreeMap<u32, u64>>,
    /// Samples by call stack, leaf first: the leaf is the sampled address, each caller is
    /// located at its return address minus one (inside the call instruction, so a call that
    /// ends a function is named after that function). One frame when no chain was sampled.
    pub stacks: HashMap<Vec<Location>, u64>,
    /// True when samples carried user call chains.
    pub callchains: bool,
    /// How stacks were unwound (absent when no call chains were sampled).
    pub unwinding: Option<UnwindReport>,
    /// Total samples.
    pub total_samples: u64,
    /// Samples in kernel code, per thread (none unless kernel code was sampled).
    pub kernel_samples: BTreeMap<u32, u64>,
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
    /// HotSpot JVMs among the followed processes.
    pub jvms: BTreeMap<u32, Jvm>,
    /// Followed processes in other namespaces (containers).
    pub namespaces: Vec<NamespacedProcess>,
    /// What the recording could not do or chose not to.
    pub notes: Vec<String>,
    /// Every thread's wall time by state, with the stacks it waited in (absent without
    /// `wall`).
    pub wall: Option<WallRecording>,
    /// What the watch of the hot cache lines saw (absent when it was not asked for).
    pub watch: Option<super::watch::WatchRecording>,
}

/// A HotSpot JVM that was followed.
#[derive(Debug, Clone, PartialEq)]
pub struct Jvm {
    /// Its Java home.
    pub home: PathBuf,
    /// `JAVA_VERSION` of its `release` file.
    pub version: Option<String>,
    /// How its JIT code was named, when it was.
    pub names_from: Option<String>,
}

/// Checks that `pid` exists and may be traced, as the recording will: the one-line error comes
/// before anything is printed about sampling (issue 29: the banner came first).
pub fn check_pid(pid: i32) -> anyhow::Result<()> {
    super::target::check_attachable(pid).map_err(input_error)
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

/// How long a stopped command gets between SIGTERM and SIGKILL, and until diagnose gives up
/// on processes that outlive SIGKILL (they are not ours to signal).
const STOP_GRACE: Duration = Duration::from_secs(2);
const STOP_GIVE_UP: Duration = Duration::from_secs(5);

/// What the poll loop does next with a command diagnose launched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum StopStep {
    /// Keep recording.
    Wait,
    /// It exited by itself: stop recording; what it left in the background stays running.
    EndedOnItsOwn,
    /// The duration is over or the user pressed Ctrl-C: SIGTERM to the whole tree.
    Terminate,
    /// SIGTERM was [`STOP_GRACE`] ago and something still runs: SIGKILL.
    Kill,
    /// Stopped by diagnose, and nothing of the tree is left.
    Stopped,
    /// [`STOP_GIVE_UP`] after SIGTERM something still runs (not ours to signal): say so.
    GiveUp,
}

/// The stop policy, apart from the clock and the processes so it is tested with made-up
/// times: `exited` (the command itself), `over` (duration reached or Ctrl-C),
/// `since_terminate` (time since SIGTERM was sent, if it was), `descendants_alive` (asked only
/// when the answer matters: it polls every process the command started).
fn stop_step(
    exited: bool,
    over: bool,
    since_terminate: Option<Duration>,
    descendants_alive: impl FnOnce() -> usize,
) -> StopStep {
    match since_terminate {
        None if exited => StopStep::EndedOnItsOwn,
        None if over => StopStep::Terminate,
        None => StopStep::Wait,
        // Stopped by diagnose: the whole tree goes, so nothing keeps spinning.
        Some(_) if exited && descendants_alive() == 0 => StopStep::Stopped,
        // SIGKILL cannot fail on a process we may signal; one we may not (a setuid program)
        // is reported rather than waited for.
        Some(t) if t > STOP_GIVE_UP => StopStep::GiveUp,
        Some(t) if t > STOP_GRACE => StopStep::Kill,
        Some(_) => StopStep::Wait,
    }
}

/// What the open needed, for an error that says how much.
struct OpenScope<'a> {
    opts: &'a RecordOptions,
    pid: i32,
    /// Threads of every process followed.
    threads: usize,
    processes: usize,
}

fn open_error(e: OpenError, scope: &OpenScope) -> anyhow::Error {
    let mode = scope.opts.mode;
    let sysctl = |name: &str| -> Option<u64> {
        std::fs::read_to_string(format!("/proc/sys/kernel/{name}"))
            .ok()
            .and_then(|s| s.trim().parse().ok())
    };
    match e.kind() {
        PerfErrno::NotPermitted if super::target::not_dumpable(scope.pid) => {
            InputError::TargetNotDumpable(scope.pid).into()
        }
        PerfErrno::NotPermitted => InputError::PerfNotPermitted {
            paranoid: sysctl("perf_event_paranoid").map(|p| p as i32),
        }
        .into(),
        PerfErrno::NoSuchTask => InputError::NoSuchProcess(scope.pid).into(),
        PerfErrno::TooManyFiles => {
            let cpus = scope.opts.cpus.len().max(1);
            InputError::TooManyOpenFiles {
                threads: scope.threads,
                processes: scope.processes,
                cpus,
                needed: scope.threads * cpus + scope.threads * scope.opts.counters.len() + 64,
                limit: sampler::raise_open_file_limit(),
            }
            .into()
        }
        // The kernel refuses a frequency above the sysctl, which it lowers at run time when
        // sampling interrupts take too long (so the clap range cannot know it).
        PerfErrno::Invalid
            if sysctl("perf_event_max_sample_rate")
                .is_some_and(|max| scope.opts.frequency_hz > max) =>
        {
            InputError::SampleRateTooHigh {
                requested: scope.opts.frequency_hz,
                max: sysctl("perf_event_max_sample_rate").unwrap_or(0),
            }
            .into()
        }
        PerfErrno::NoSuchEvent => anyhow::anyhow!(
            "the {} event is not available on this machine",
            mode.event_name()
        ),
        _ => {
            let OpenError::Errno(_, io) = e;
            anyhow::Error::new(io).context(format!("cannot open the {} event", mode.event_name()))
        }
    }
}

#[derive(Default)]
struct State {
    spaces: AddressSpaces,
    unwinder: StackUnwinder,
    samples: HashMap<Location, BTreeMap<u32, u64>>,
    stacks: HashMap<Vec<Location>, u64>,
    total: u64,
    lost: u64,
    names: BTreeMap<u32, String>,
    /// Process of each thread the records showed: a thread here has events, its own or
    /// inherited (only threads with events produce records).
    thread_pid: BTreeMap<u32, u32>,
    /// Followed processes still running.
    pids: BTreeSet<u32>,
    /// Threads of each followed process not yet seen exiting.
    threads: HashMap<u32, BTreeSet<u32>>,
    /// Processes created since the last look (fork records).
    new_pids: Vec<u32>,
    /// Processes with a thread that exited since the last look.
    exits: Vec<u32>,
    /// Every process followed at some time.
    seen: BTreeSet<u32>,
    /// Samples in anonymous executable memory since the last copy of hot code, per process
    /// and page: (samples, mapping start, mapping end).
    anon_pages: HashMap<u32, BTreeMap<u64, (u64, u64, u64)>>,
    /// The wall-clock view, when recorded.
    wall: Option<WallRecorder>,
    /// Samples of each process so far.
    pid_samples: HashMap<u32, u64>,
    /// Samples in kernel code of each thread.
    kernel_samples: BTreeMap<u32, u64>,
}

impl State {
    fn apply(&mut self, records: &mut Vec<Record>) {
        records.sort_by_key(Record::time_ns);
        for r in records.drain(..) {
            match r {
                Record::Sample {
                    pid,
                    tid,
                    ip,
                    in_kernel,
                    kernel_callers,
                    mut callers,
                    user,
                    time_ns,
                } => {
                    self.total += 1;
                    // A sample in the kernel: its kernel frames, then the user stack from where
                    // the thread entered the kernel (the user registers' ip, which the user
                    // chain begins with), walked as a sample there would be.
                    let in_kernel = in_kernel || ip >= KERNEL_SPACE_START;
                    let user_leaf = if in_kernel {
                        let from = user
                            .as_ref()
                            .map(|u| u.regs.ip)
                            .filter(|&a| a != 0)
                            .or_else(|| callers.first().copied());
                        if from.is_some() && callers.first().copied() == from {
                            callers.remove(0);
                        }
                        from
                    } else {
                        Some(ip)
                    };
                    let callers = match user_leaf {
                        Some(at) => {
                            self.unwinder
                                .unwind(
                                    pid,
                                    self.spaces.maps(pid),
                                    at,
                                    user.as_ref(),
                                    callers,
                                    super::perf_records::MAX_STACK_FRAMES,
                                )
                                .callers
                        }
                        None => Vec::new(),
                    };
                    let loc = if in_kernel {
                        Location::Kernel { addr: ip }
                    } else {
                        self.spaces.locate(pid, ip)
                    };
                    // Mappings change (a library unloaded, JIT code moved), so every frame is
                    // located now, at the time of the sample. Callers, and the user address a
                    // kernel sample returns to, at their address minus one (inside the call or
                    // the system call instruction).
                    let mut stack = Vec::with_capacity(2 + kernel_callers.len() + callers.len());
                    stack.push(loc.clone());
                    if in_kernel {
                        stack.extend(kernel_callers.iter().map(|&ret| Location::Kernel {
                            addr: ret.saturating_sub(1),
                        }));
                        stack.extend(
                            user_leaf.map(|at| self.spaces.locate(pid, at.saturating_sub(1))),
                        );
                    }
                    stack.extend(
                        callers
                            .iter()
                            .map(|&ret| self.spaces.locate(pid, ret.saturating_sub(1))),
                    );
                    if let Some(w) = self.wall.as_mut() {
                        w.sample(tid, time_ns, &stack);
                    }
                    *self.stacks.entry(stack).or_default() += 1;
                    if let Location::Anon { region, .. } = &loc
                        && &**region != "[vdso]"
                        && let Some(m) = self.spaces.mapping(pid, ip)
                    {
                        let e = self
                            .anon_pages
                            .entry(pid)
                            .or_default()
                            .entry(ip & !4095)
                            .or_insert((0, m.start, m.end));
                        e.0 += 1;
                    }
                    if in_kernel {
                        *self.kernel_samples.entry(tid).or_default() += 1;
                    }
                    *self.samples.entry(loc).or_default().entry(tid).or_default() += 1;
                    *self.pid_samples.entry(pid).or_default() += 1;
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
                        end: start.saturating_add(len),
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
                Record::Fork {
                    pid,
                    ppid,
                    tid,
                    time_ns,
                } => {
                    if let Some(w) = self.wall.as_mut() {
                        // A new thread waits for its first run on a CPU.
                        w.first_seen(tid, Phase::Runnable, time_ns);
                    }
                    self.spaces.fork(ppid, pid);
                    // A process forked without an exec keeps its parent's name (the kernel
                    // writes no comm record for it): a server's worker is named like it.
                    if pid != ppid
                        && !self.names.contains_key(&tid)
                        && let Some(parent) = self.names.get(&ppid).cloned()
                    {
                        self.names.insert(tid, parent);
                    }
                    self.seen.insert(pid);
                    if self.pids.insert(pid) {
                        self.new_pids.push(pid);
                    }
                    self.threads.entry(pid).or_default().insert(tid);
                    self.thread_pid.insert(tid, pid);
                }
                Record::Exit { pid, tid, time_ns } => {
                    if let Some(w) = self.wall.as_mut() {
                        w.exit(tid, time_ns);
                    }
                    if let Some(t) = self.threads.get_mut(&pid) {
                        t.remove(&tid);
                    }
                    self.exits.push(pid);
                }
                Record::Switch {
                    pid,
                    tid,
                    time_ns,
                    switch,
                } => {
                    if let Some(w) = self.wall.as_mut() {
                        w.switch(SwitchEvent {
                            pid,
                            tid,
                            time_ns,
                            switch,
                        });
                    }
                }
                Record::Lost { count } => self.lost += count,
            }
        }
    }

    /// Processes whose last thread exited, removed from those followed. A process is gone when
    /// no thread of it is left running by the records and /proc agrees (absent, or a zombie),
    /// so lost records never drop a live process.
    fn prune_exited(&mut self) -> Vec<u32> {
        let mut gone = Vec::new();
        for pid in std::mem::take(&mut self.exits) {
            let no_threads = self.threads.get(&pid).is_none_or(BTreeSet::is_empty);
            if no_threads && self.pids.contains(&pid) && !process_running(pid) {
                self.pids.remove(&pid);
                self.threads.remove(&pid);
                gone.push(pid);
            }
        }
        gone
    }
}

/// True while /proc shows process `pid` with a state other than zombie.
fn process_running(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            let state = s.get(s.rfind(')')? + 1..)?.split_whitespace().next()?;
            Some(state != "Z" && state != "X")
        })
        .unwrap_or(false)
}

/// Threads of an attached process and its descendants that have no events yet. A thread or
/// process created by a followed thread inherits its events and must not get its own (it would
/// be sampled twice); only one created between listing the threads and opening its creator's
/// events lacks them. The kernel writes the fork record (or the thread's first sample) within
/// microseconds of the thread appearing in /proc, so a thread that has neither one look
/// (~50 ms) after it was first listed has no events.
///
/// The window closes: once a look finds every listed thread with events and opens none (a
/// thread given events at a look may have created another meanwhile), every task created
/// later inherits them, and the listing can stop ([`Uncovered::settled`]).
#[derive(Default)]
struct Uncovered {
    opened: BTreeSet<i32>,
    pending: BTreeSet<i32>,
    settled: bool,
}

impl Uncovered {
    /// True once a look found no thread without events and gave none its own.
    fn settled(&self) -> bool {
        self.settled
    }

    /// Which listed threads need their own events now; remembers new ones for the next look.
    fn look(&mut self, listed: &[i32], covered: &BTreeMap<u32, u32>) -> Vec<i32> {
        let is_covered = |t: &i32| covered.contains_key(&(*t as u32));
        let due: Vec<i32> = self
            .pending
            .iter()
            .copied()
            .filter(|t| !is_covered(t) && listed.contains(t))
            .collect();
        self.opened.extend(&due);
        self.pending = listed
            .iter()
            .copied()
            .filter(|t| !self.opened.contains(t) && !is_covered(t))
            .collect();
        self.settled = due.is_empty() && self.pending.is_empty();
        due
    }
}

/// Records the workload. Bad input (a command that cannot start, a PID that is not there or
/// not ours, perf_event_open refused, a frequency the kernel refuses, too few file
/// descriptors) comes back as an [`InputError`].
pub fn record(opts: &RecordOptions, stop: &AtomicBool) -> Result<Recording> {
    let started = Instant::now();
    sampler::raise_open_file_limit();
    let mut run = Run::start(opts, started)?;
    while run.poll(stop) {}
    let stopped = run.stop();
    // The window is over and sampling stopped; a started command still runs until its lines
    // are watched.
    run.watch_lines();
    while run.end_command(stop) {}
    run.name_jit_code();
    Ok(run.assemble(stopped))
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
        wall_s: None,
    }
}

/// Context switches a second of the followed threads above which per-task sampling costs the
/// workload more than the 3% diagnose aims at: PostgreSQL lost ~20% at ~41,000 a second
/// (`reference::PGBENCH_PER_TASK_SAMPLING_LOSS`), about 0.5% per 1,000, so ~6,000 a second
/// would cost it 3%; 5,000 says so a little early rather than late.
const PER_TASK_COSTLY_SWITCHES_PER_S: f64 = 5_000.0;

/// What the recording's sampling scope calls for saying: CPU-wide events refused for other
/// reasons than permission; per task for want of permission while the workload switched
/// often enough to pay for it; CPU-wide with most samples other processes'.
pub fn scope_note(rec: &Recording) -> Option<String> {
    match &rec.per_task_because {
        Some(PerTaskBecause::Refused(error)) => {
            Some(crate::words::diagnose::cpu_wide_refused(error))
        }
        Some(PerTaskBecause::NotPermitted { paranoid }) => {
            let switches: u64 = rec
                .threads
                .iter()
                .map(|t| t.voluntary_switches + t.involuntary_switches)
                .sum();
            let rate = switches as f64 / rec.wall_s.max(1e-9);
            (rate >= PER_TASK_COSTLY_SWITCHES_PER_S)
                .then(|| crate::words::diagnose::per_task_at_switch_rate(rate, *paranoid))
        }
        Some(PerTaskBecause::Asked) => None,
        None => (rec.other_samples > rec.total_samples).then(|| {
            crate::words::diagnose::cpu_wide_mostly_others(rec.other_samples, rec.total_samples)
        }),
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn stop_policy_on_a_made_up_clock() {
        let ms = Duration::from_millis;
        let never = || -> usize { panic!("descendants asked when it does not matter") };
        // A command that ends before the duration is left alone, with its background.
        assert_eq!(stop_step(true, false, None, never), StopStep::EndedOnItsOwn);
        assert_eq!(stop_step(false, false, None, never), StopStep::Wait);
        // Duration over (or Ctrl-C): SIGTERM first.
        assert_eq!(stop_step(false, true, None, never), StopStep::Terminate);
        // Within the grace period nothing more is sent.
        assert_eq!(
            stop_step(false, true, Some(ms(1500)), never),
            StopStep::Wait
        );
        // After it, SIGKILL; and after the give-up time, a note instead of a wait.
        assert_eq!(
            stop_step(false, true, Some(ms(2100)), never),
            StopStep::Kill
        );
        assert_eq!(
            stop_step(false, true, Some(ms(5100)), never),
            StopStep::GiveUp
        );
        // The command gone but a child it started still alive: keep going down the ladder.
        assert_eq!(stop_step(true, true, Some(ms(100)), || 1), StopStep::Wait);
        assert_eq!(stop_step(true, true, Some(ms(2100)), || 1), StopStep::Kill);
        assert_eq!(
            stop_step(true, true, Some(ms(100)), || 0),
            StopStep::Stopped
        );
    }

    use super::*;

    fn opts(frequency_hz: u64) -> RecordOptions {
        RecordOptions {
            target: Target::Pid(1),
            duration: None,
            frequency_hz,
            mode: SamplingMode::CpuClock,
            cpus: vec![0, 1],
            counters: Vec::new(),
            child_stdout_to_stderr: false,
            child_stdout: None,
            callchains: true,
            wall: true,
            switches: false,
            children: true,
            per_task: false,
            kernel: true,
            watch: None,
        }
    }

    fn errno(e: i32) -> OpenError {
        OpenError::Errno(PerfErrno::of(e), std::io::Error::from_raw_os_error(e))
    }

    fn input(e: &anyhow::Error) -> &InputError {
        e.downcast_ref::<InputError>()
            .expect("an input error (exit 2)")
    }

    #[test]
    fn a_refused_perf_event_open_advises_the_least_privilege_that_fixes_it() {
        let o = opts(499);
        let scope = OpenScope {
            opts: &o,
            pid: 1,
            threads: 1,
            processes: 1,
        };
        let e = open_error(errno(libc::EACCES), &scope);
        assert!(matches!(input(&e), InputError::PerfNotPermitted { .. }));
        // At 3 (Debian's default), 2 is enough: user-space sampling of one's own processes.
        let strict = InputError::PerfNotPermitted { paranoid: Some(3) }.to_string();
        assert!(
            strict.contains("sysctl kernel.perf_event_paranoid=2"),
            "{strict}"
        );
        assert!(strict.contains("CAP_PERFMON"));
        // At 2 or below the sysctl is not what refused it.
        let policy = InputError::PerfNotPermitted { paranoid: Some(2) }.to_string();
        assert!(policy.contains("seccomp or LSM policy"), "{policy}");
        assert!(!policy.contains("sysctl"), "{policy}");
    }

    #[test]
    fn running_out_of_file_descriptors_is_an_input_error_with_the_count() {
        let o = opts(499);
        let scope = OpenScope {
            opts: &o,
            pid: 1,
            threads: 600,
            processes: 35,
        };
        let e = open_error(errno(libc::EMFILE), &scope);
        let InputError::TooManyOpenFiles { threads, cpus, .. } = input(&e) else {
            panic!("{e:#}");
        };
        assert_eq!((*threads, *cpus), (600, 2));
        let said = e.to_string();
        assert!(said.contains("ulimit -Hn"), "{said}");
        // The threads of every process followed are counted, and following fewer is offered.
        assert!(said.contains("600 thread(s) of 35 process(es)"), "{said}");
        assert!(said.contains("--no-children"), "{said}");
    }

    #[test]
    fn a_frequency_above_the_kernel_maximum_is_an_input_error_naming_the_maximum() {
        let Some(max) = std::fs::read_to_string("/proc/sys/kernel/perf_event_max_sample_rate")
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
        else {
            // A kernel without the sysctl (no perf events) has no maximum to name: EINVAL is
            // not blamed on the frequency, however high.
            let o = opts(u64::MAX);
            let scope = OpenScope {
                opts: &o,
                pid: 1,
                threads: 1,
                processes: 1,
            };
            let e = open_error(errno(libc::EINVAL), &scope);
            assert!(e.downcast_ref::<InputError>().is_none(), "{e}");
            return;
        };
        let o = opts(max + 1);
        let scope = OpenScope {
            opts: &o,
            pid: 1,
            threads: 1,
            processes: 1,
        };
        let e = open_error(errno(libc::EINVAL), &scope);
        assert_eq!(
            input(&e),
            &InputError::SampleRateTooHigh {
                requested: max + 1,
                max
            }
        );
        // EINVAL at an allowed frequency is something else: not blamed on the user.
        let o = opts(1);
        let scope = OpenScope {
            opts: &o,
            pid: 1,
            threads: 1,
            processes: 1,
        };
        assert!(
            open_error(errno(libc::EINVAL), &scope)
                .downcast_ref::<InputError>()
                .is_none()
        );
    }

    #[test]
    fn target_errors_map_to_input_errors() {
        let e = input_error(TargetError::NotOwner { pid: 1, uid: 0 });
        assert_eq!(
            e.downcast_ref::<InputError>(),
            Some(&InputError::ProcessNotOwned { pid: 1, uid: 0 })
        );
        let o = opts(499);
        let scope = OpenScope {
            opts: &o,
            pid: 42,
            threads: 1,
            processes: 1,
        };
        let e = open_error(errno(libc::ESRCH), &scope);
        assert_eq!(
            e.downcast_ref::<InputError>(),
            Some(&InputError::NoSuchProcess(42))
        );
    }

    #[test]
    fn a_thread_created_after_attaching_is_not_given_a_second_event() {
        // Guards the double count: thread 12 was created by a followed thread, so it inherits
        // the events (its fork record says so) and must not get its own; thread 13 was created
        // before its creator was followed and has no record: it gets events one look later.
        let mut u = Uncovered::default();
        u.opened.extend([10, 11]);
        let mut covered = BTreeMap::new();
        assert!(
            u.look(&[10, 11, 12, 13], &covered).is_empty(),
            "not on first sight"
        );
        covered.insert(12, 10); // fork record of 12
        assert_eq!(u.look(&[10, 11, 12, 13], &covered), vec![13]);
        assert!(u.look(&[10, 11, 12, 13], &covered).is_empty(), "once only");
    }

    #[test]
    fn a_child_process_forked_after_attaching_is_not_given_a_second_event() {
        // The same guarantee across the attached tree: root 10 and its child process 20 (with
        // thread 21) got events at the attach. Process 30, forked by 21 afterwards, inherits
        // them (its fork record says so); process 31, forked by 20 between the scan and the
        // opening, has neither record nor events, and gets its own one look later.
        let mut u = Uncovered::default();
        u.opened.extend([10, 20, 21]);
        let listed = [10, 20, 21, 30, 31];
        let mut covered = BTreeMap::new();
        assert!(u.look(&listed, &covered).is_empty(), "not on first sight");
        covered.insert(30, 30); // fork record of process 30
        assert_eq!(u.look(&listed, &covered), vec![31]);
        // 31 may have forked before its events opened: one more look before the window closes.
        assert!(!u.settled());
        assert!(u.look(&listed, &covered).is_empty(), "once only");
        assert!(u.settled(), "every listed task has events");
    }

    #[test]
    fn a_process_is_followed_until_its_last_thread_exits() {
        let mut st = State::default();
        // A PID no process has (above pid_max), so /proc agrees it is gone.
        let pid = 99_999_998;
        st.apply(&mut vec![
            Record::Fork {
                pid,
                ppid: 1,
                tid: pid,
                time_ns: 1,
            },
            Record::Fork {
                pid,
                ppid: pid,
                tid: pid + 1,
                time_ns: 2,
            },
            Record::Exit {
                pid,
                tid: pid,
                time_ns: 3,
            },
        ]);
        assert_eq!(st.new_pids, vec![pid]);
        assert!(st.prune_exited().is_empty(), "a thread of it still runs");
        st.apply(&mut vec![Record::Exit {
            pid,
            tid: pid + 1,
            time_ns: 4,
        }]);
        assert_eq!(st.prune_exited(), vec![pid]);
        assert!(!st.pids.contains(&pid));
    }
}
