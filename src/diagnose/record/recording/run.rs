//! A recording under way, split by the jobs [`super::record`] does: start (launch the command
//! or attach to the process, open the samplers), follow (drain samples, adopt and prune
//! processes, cover new threads), look (threads, JVMs and their perf maps every ~100 ms),
//! read memory (every ~500 ms), the stop policy, stop (last samples, last `jcmd`), name the
//! JIT code, and assemble the [`Recording`].

use super::super::counters::{CounterValue, Counters};
use super::super::memory::{self, ProcessMemory};
use super::super::sampler::{self, KernelSampling};
use super::super::sampler::{Inherit, Sampler};
use super::super::target::{self, Launched, ProcessName, TargetError};
use super::super::threads::ThreadTracker;
use super::super::tree::{self, Followed};
use super::super::wall::cpu::CpuWindow;
use super::super::wall::observe::Observer;
use super::super::wall::timeline::Phase;
use super::super::wall::{WallRecorder, WallRecording, WallSource};
use super::super::watch::{self, WatchRecording};
use super::filter::FollowedFilter;
use super::{
    InputError, Jvm, OpenScope, PerTaskBecause, ProcessTotals, Record, RecordOptions, Recording,
    State, StopStep, Target, Uncovered, describe_status, input_error, open_cpu_wide, open_error,
    open_sampler, process_running, stop_step, totals_of,
};
use crate::diagnose::symbolize::jit::{self, HotCode, PerfMapRequest};
use crate::diagnose::symbolize::namespace::NamespacedProcess;
use crate::diagnose::symbolize::perf_map::PerfMapFollower;
use crate::diagnose::symbolize::symbols;
use crate::measure::clock::monotonic_ns;
use crate::schema::line_sharing::WatchSkipped;
use crate::words::diagnose as words;
use anyhow::Result;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often the threads, JVMs and perf maps are looked at (a thread's /proc entries vanish
/// when it exits), and how often memory is read.
const LOOK_EVERY: Duration = Duration::from_millis(super::super::wall::COUNTS_EVERY_MS);
const MEMORY_EVERY: Duration = Duration::from_millis(500);
/// How often the threads are read in full, `status` (the switch counts) with them, beside the
/// schedstat and `stat` read at every look through files kept open: the switch counts need
/// only the first and last readings, and three opens a thread every 100 ms were ~15% of
/// diagnose's CPU on a busy server.
const FULL_READ_EVERY: Duration = Duration::from_secs(1);
/// How often one process's `smaps_rollup` is read at most, and only when it ran since: the
/// read walks every page table of the process under its mmap lock. A server's backends each
/// map its shared buffers, so reading 38 PostgreSQL backends every 500 ms took 60% of
/// diagnose's own CPU time, and the server's locks with it. Beyond a few processes the
/// interval grows with their number, [`SMAPS_PER_PROCESS`] each: about four reads a second
/// in all. A process that ran since its last read is read once more when recording stops.
const SMAPS_EVERY: Duration = MEMORY_EVERY;
const SMAPS_PER_PROCESS: Duration = Duration::from_millis(250);
/// A process's next `smaps_rollup` read waits at least this many times as long as its last
/// read took, which keeps the walks under 0.5% of a CPU: MariaDB with a 256 MiB buffer pool
/// under sysbench took ~6 ms a read, and the walks were an eighth of diagnose's own CPU time
/// (issue 30). Every process is read once more when recording stops.
const SMAPS_COST_FACTOR: u32 = 200;
/// The poll loop's sleep between rounds.
const ROUND_SLEEP: Duration = Duration::from_millis(50);

/// Switch records are applied this long behind the start of the drain that brought them:
/// a record the kernel timed just before the drain may land in its ring a little later.
const RECORD_SLACK_NS: u64 = 2_000_000;

/// The samplers on the workload, as opened by [`Run::start`].
struct Opened {
    sampler: Sampler,
    /// With CPU-wide events: which of their records are the followed processes'.
    filter: Option<FollowedFilter>,
    /// Why the events are per task, when they are.
    per_task_because: Option<PerTaskBecause>,
    counters: Option<Counters>,
    child: Option<Launched>,
    root: i32,
    /// When the events were enabled (`CLOCK_MONOTONIC` ns): the wall-clock window's start.
    enabled_ns: u64,
    /// The error of the refused kernel sampling, when it was refused.
    kernel_refused: Option<String>,
}

/// What a stopped recording read last: the counters, the processes still running, and the
/// wall-clock view closed at the stop.
pub(super) struct Stopped {
    counter_values: Vec<CounterValue>,
    live_pids: Vec<u32>,
    wall: Option<WallRecording>,
}

/// A recording under way: the workload, its samplers, and what has been read of it so far.
pub(super) struct Run<'a> {
    opts: &'a RecordOptions,
    started: Instant,
    st: State,
    uncovered: Uncovered,
    /// Every process followed, as met.
    followed: Followed,
    /// Processes of the tree that are not this user's to follow (named in a note once).
    not_ours: BTreeSet<u32>,
    notes: Vec<String>,
    sampler: Sampler,
    /// With CPU-wide events: which of their records are the followed processes'.
    filter: Option<FollowedFilter>,
    per_task_because: Option<PerTaskBecause>,
    counters: Option<Counters>,
    /// The launched command; `None` when attached to a running process.
    child: Option<Launched>,
    /// The error of the refused kernel sampling, when it was refused.
    kernel_refused: Option<String>,
    /// The root process as the user ran it, from its last look.
    root_name: Option<ProcessName>,
    root: u32,
    attached: bool,
    /// The user asked for perf maps already: theirs are not diagnose's to remove.
    user_maps: bool,
    jvms: BTreeMap<u32, Jvm>,
    map_existed: BTreeMap<u32, bool>,
    jcmd: HashMap<u32, PerfMapRequest>,
    jcmd_ok: BTreeSet<u32>,
    hot_code: HotCode,
    tracker: ThreadTracker,
    /// Looks at sleeping threads for the wall-clock view.
    observer: Observer,
    /// What the machine's CPUs did, read at the start, for who held them.
    cpu_window: Option<CpuWindow>,
    memory: BTreeMap<u32, ProcessMemory>,
    /// When each process's memory was last read, its samples then, and how long the read took.
    smaps_read: HashMap<u32, (Instant, u64, Duration)>,
    perf_maps: HashMap<u32, PerfMapFollower>,
    records: Vec<Record>,
    last_threads: Instant,
    /// When the threads were last read in full ([`FULL_READ_EVERY`]).
    last_full_read: Instant,
    last_memory: Instant,
    terminated_at: Option<Instant>,
    /// The signal of a Ctrl-C (or Ctrl-\) at the terminal the command held, which ended it.
    interrupted_by: Option<i32>,
    exit: Option<(String, Option<ProcessTotals>)>,
    /// The window ended with the started command still running, left running for the watch.
    window_over: bool,
    /// What the watch saw, once it ran.
    watch: Option<WatchRecording>,
    /// The started command was killed by SIGTRAP (read when it was reaped).
    trapped: bool,
}

/// Launches the command with its samplers opened before it runs: per-task events enabled on
/// exec, or CPU-wide events enabled before the child is released, whose records of the child
/// count from its exec ([`FollowedFilter`]), as the per-task events' do.
fn launch(
    opts: &RecordOptions,
    argv: &[String],
    st: &mut State,
    notes: &mut Vec<String>,
) -> Result<Opened> {
    let mut child = target::launch(
        argv,
        opts.child_stdout_to_stderr,
        opts.child_stdout
            .as_ref()
            .map(|f| std::os::fd::AsRawFd::as_raw_fd(&**f)),
        &[jit::java_tool_options()],
    )
    .map_err(input_error)?;
    let pid = child.pid.as_raw();
    let scope = OpenScope {
        opts,
        pid,
        threads: 1,
        processes: 1,
    };
    let mut kernel_refused = None;
    let (sampler, filter, per_task_because) = match open_cpu_wide(opts, notes, &mut kernel_refused)
    {
        Ok(s) => {
            let root = pid as u32;
            (s, Some(FollowedFilter::new([root], true, Some(root))), None)
        }
        Err(because) => match open_sampler(opts, &[pid], true, notes, &mut kernel_refused) {
            Ok(s) => (s, None, Some(because)),
            Err(e) => {
                child.abandon();
                return Err(open_error(e, &scope));
            }
        },
    };
    let counters = (!opts.counters.is_empty())
        .then(|| Counters::open(&opts.counters, &[pid], true, opts.inherit()));
    if filter.is_some() {
        sampler.enable();
    }
    let enabled_ns = monotonic_ns();
    child.release().map_err(input_error)?;
    st.threads.entry(pid as u32).or_default().insert(pid as u32);
    Ok(Opened {
        sampler,
        filter,
        per_task_because,
        counters,
        child: Some(child),
        root: pid,
        enabled_ns,
        kernel_refused,
    })
}

/// Attaches to a running process: its maps so far, and samplers on each of its threads and,
/// unless `--no-children`, on every thread of its descendants (all generations). A child that
/// exits meanwhile is skipped; one that is not this user's is left out with a note.
///
/// CPU-wide events are enabled before the tree is read: a process forked after that reading
/// has a fork record, one forked before is in it, so none falls between (per-task events,
/// opened on what the reading found, need [`Uncovered`] for that).
fn attach(
    opts: &RecordOptions,
    pid: i32,
    st: &mut State,
    uncovered: &mut Uncovered,
    followed: &mut Followed,
    not_ours: &mut BTreeSet<u32>,
    notes: &mut Vec<String>,
) -> Result<Opened> {
    target::check_attachable(pid).map_err(input_error)?;
    let mut kernel_refused = None;
    let cpu_wide = open_cpu_wide(opts, notes, &mut kernel_refused);
    let cpu_wide_at = cpu_wide.as_ref().ok().map(|s| {
        s.enable();
        monotonic_ns()
    });
    let root_tids = target::threads_of(pid);
    if root_tids.is_empty() {
        return Err(InputError::NoSuchProcess(pid).into());
    }
    // The root's threads first: its first thread owns each CPU's ring.
    let mut processes = vec![(pid as u32, root_tids)];
    if opts.follows_children() {
        for child in tree::descendants_of(pid as u32) {
            if let Some(tids) = followable_threads(child, not_ours, notes) {
                processes.push((child, tids));
            }
        }
    } else if opts.inherit() == Inherit::ThreadsAndChildren && cpu_wide.is_err() {
        notes.push(words::children_inherit_on_old_kernel());
    }
    for (p, tids) in &processes {
        if let Ok(text) = std::fs::read_to_string(format!("/proc/{p}/maps")) {
            for e in symbols::parse_proc_maps(&text) {
                st.spaces.add(*p, e);
            }
        }
        st.pids.insert(*p);
        st.seen.insert(*p);
        st.threads
            .entry(*p)
            .or_default()
            .extend(tids.iter().map(|&t| t as u32));
        followed.running(*p);
    }
    let tids: Vec<i32> = processes
        .iter()
        .flat_map(|(_, t)| t.iter().copied())
        .collect();
    let scope = OpenScope {
        opts,
        pid,
        threads: tids.len(),
        processes: processes.len(),
    };
    let (sampler, filter, per_task_because) = match cpu_wide {
        Ok(s) => {
            let pids = processes.iter().map(|(p, _)| *p);
            let filter = FollowedFilter::new(pids, opts.follows_children(), None);
            (s, Some(filter), None)
        }
        Err(because) => {
            let s = open_sampler(opts, &tids, false, notes, &mut kernel_refused)
                .map_err(|e| open_error(e, &scope))?;
            (s, None, Some(because))
        }
    };
    // The hardware counters are per task either way. With CPU-wide sampling a process
    // forked between the tree's reading and here inherits no counters: a few ms, left out.
    let counters = (!opts.counters.is_empty())
        .then(|| Counters::open(&opts.counters, &tids, false, opts.inherit()));
    let enabled_ns = match cpu_wide_at {
        Some(at) => at,
        None => {
            let at = monotonic_ns();
            sampler.enable();
            at
        }
    };
    if let Some(c) = &counters {
        c.enable();
    }
    uncovered.opened.extend(&tids);
    Ok(Opened {
        sampler,
        filter,
        per_task_because,
        counters,
        child: None,
        root: pid,
        enabled_ns,
        kernel_refused,
    })
}

/// The threads of a descendant found in /proc, when it is one to follow: still running (not a
/// zombie) and this user's. One that is not is remembered in `not_ours`, with a note.
fn followable_threads(
    pid: u32,
    not_ours: &mut BTreeSet<u32>,
    notes: &mut Vec<String>,
) -> Option<Vec<i32>> {
    if not_ours.contains(&pid) || !process_running(pid) {
        return None;
    }
    if let Err(TargetError::NotOwner { uid, .. }) = target::check_attachable(pid as i32) {
        not_ours.insert(pid);
        let command = tree::command_of(pid).unwrap_or_else(|| "?".into());
        notes.push(words::child_not_followed(pid, &command, uid));
        return None;
    }
    let tids = target::threads_of(pid as i32);
    (!tids.is_empty()).then_some(tids)
}

impl<'a> Run<'a> {
    /// Starts the command or attaches to the process, with the samplers open.
    pub(super) fn start(opts: &'a RecordOptions, started: Instant) -> Result<Self> {
        let mut st = State::default();
        let mut uncovered = Uncovered::default();
        let mut followed = Followed::default();
        let mut not_ours = BTreeSet::new();
        let mut notes = Vec::new();
        let opened = match &opts.target {
            Target::Command(argv) => launch(opts, argv, &mut st, &mut notes)?,
            Target::Pid(pid) => attach(
                opts,
                *pid,
                &mut st,
                &mut uncovered,
                &mut followed,
                &mut not_ours,
                &mut notes,
            )?,
        };
        let root = opened.root as u32;
        followed.started(root);
        st.pids.insert(root);
        st.seen.insert(root);
        if opts.wall {
            let source = if opened.sampler.switches() {
                WallSource::SwitchRecords
            } else {
                WallSource::Schedstat
            };
            let mut w = WallRecorder::new(opened.enabled_ns, source);
            if source == WallSource::SwitchRecords {
                // What each thread already running was doing when following began: on a CPU
                // or waiting for one (R), or asleep; its first switch record says the rest.
                for (&pid, tids) in &st.threads {
                    for &tid in tids {
                        let phase = match thread_state(pid, tid) {
                            Some('R') => Phase::Runnable,
                            _ => Phase::Blocked,
                        };
                        w.first_seen(tid, phase, opened.enabled_ns);
                    }
                }
            }
            st.wall = Some(w);
        }
        let attached = opened.child.is_none();
        let user_maps = std::env::var("JAVA_TOOL_OPTIONS").is_ok_and(|v| v.contains("PerfMap"))
            || matches!(&opts.target, Target::Command(a) if a.iter().any(|x| x.contains("PerfMap")));
        let tracker = ThreadTracker::new(opened.child.is_some());
        let cpu_window = st.wall.is_some().then(|| CpuWindow::start(root));
        let last_threads = Instant::now() - Duration::from_secs(1);
        Ok(Run {
            opts,
            started,
            st,
            uncovered,
            followed,
            not_ours,
            notes,
            sampler: opened.sampler,
            filter: opened.filter,
            per_task_because: opened.per_task_because,
            counters: opened.counters,
            child: opened.child,
            kernel_refused: opened.kernel_refused,
            root_name: None,
            root,
            attached,
            user_maps,
            jvms: BTreeMap::new(),
            map_existed: BTreeMap::new(),
            jcmd: HashMap::new(),
            jcmd_ok: BTreeSet::new(),
            hot_code: HotCode::default(),
            tracker,
            observer: Observer::default(),
            cpu_window,
            memory: BTreeMap::new(),
            smaps_read: HashMap::new(),
            perf_maps: HashMap::new(),
            records: Vec::new(),
            last_threads,
            last_full_read: last_threads,
            last_memory: last_threads,
            terminated_at: None,
            interrupted_by: None,
            exit: None,
            window_over: false,
            watch: None,
            trapped: false,
        })
    }

    /// One round of the poll loop; false when the recording is to stop.
    pub(super) fn poll(&mut self, stop: &AtomicBool) -> bool {
        self.follow_processes();
        let now = Instant::now();
        if now - self.last_threads >= LOOK_EVERY {
            self.look_at_processes(now);
            self.last_threads = now;
        }
        if now - self.last_memory >= MEMORY_EVERY {
            self.read_memory();
            self.last_memory = now;
        }
        let go_on = if self.child.is_some() {
            self.command_stop_policy(stop, now)
        } else {
            self.attached_stop_policy(stop)
        };
        if go_on {
            std::thread::sleep(ROUND_SLEEP);
        }
        go_on
    }

    /// Takes the samples so far: adopts new processes, forgets exited ones, and opens events
    /// on an attached tree's threads that have none.
    fn follow_processes(&mut self) {
        let drained_at = monotonic_ns();
        self.take_records(drained_at.saturating_sub(RECORD_SLACK_NS));
        let st = &mut self.st;
        if st.wall.is_some() {
            look_at_sleeping_threads(st, &mut self.observer);
            if let Some(w) = st.wall.as_mut() {
                w.advance(drained_at.saturating_sub(RECORD_SLACK_NS));
            }
        }
        for &pid in &st.new_pids {
            self.followed.started(pid);
        }
        if let Some(c) = self.child.as_mut() {
            for pid in st.new_pids.drain(..) {
                c.adopt(pid);
            }
        }
        st.new_pids.clear();
        for pid in st.prune_exited() {
            self.observer.forget(pid);
            if let Some(f) = self.filter.as_mut() {
                f.forget(pid);
            }
            if let Some(c) = self.child.as_mut() {
                c.forget(pid);
            }
            // A map written at exit is complete now.
            self.perf_maps.entry(pid).or_default().refresh(pid);
        }
        // CPU-wide events watch every task already.
        if self.child.is_none() && self.filter.is_none() {
            self.cover_new_tasks();
        }
    }

    /// Drains the rings into the state, noting each new process's parent. CPU-wide events'
    /// records are those of every process: the followed ones' are kept, the others' older
    /// than `watermark_ns` dropped, newer ones held back ([`FollowedFilter`]). With
    /// `--no-children` the records of other processes are left out: the fork records of the
    /// root's children (written by the root's events), and on a kernel before 5.13, which
    /// passes the events to forked processes, all of theirs.
    fn take_records(&mut self, watermark_ns: u64) {
        match self.filter.as_mut() {
            Some(f) => {
                self.sampler
                    .drain_wanted(&mut self.records, |pid, time_ns| {
                        f.follows(pid) || time_ns >= watermark_ns
                    });
                f.keep_followed(&mut self.records, watermark_ns);
            }
            None => self.sampler.drain(&mut self.records),
        }
        if !self.opts.follows_children() {
            let root = self.root;
            self.records.retain(|r| !of_another_process(r, root));
        }
        for r in &self.records {
            if let Record::Fork { pid, ppid, .. } = *r
                && pid != ppid
            {
                self.followed.forked(pid, ppid);
            }
        }
        self.st.apply(&mut self.records);
    }

    /// Opens events on the attached tree's threads that have none: those created, and the
    /// processes forked, between listing them and opening their creator's events (see
    /// [`Uncovered`]). A process forked by a followed thread afterwards has them by
    /// inheritance, and its fork record says so. Once no such thread is left, there is nothing
    /// more to list: the tree is read from /proc only in the first rounds.
    fn cover_new_tasks(&mut self) {
        if self.uncovered.settled() {
            return;
        }
        let st = &mut self.st;
        let mut pids = vec![self.root];
        if self.opts.follows_children() {
            pids.extend(tree::descendants_of(self.root));
        }
        let mut listed = Vec::new();
        let mut owner = HashMap::new();
        for pid in pids {
            let tids = if st.pids.contains(&pid) {
                target::threads_of(pid as i32)
            } else {
                match followable_threads(pid, &mut self.not_ours, &mut self.notes) {
                    Some(tids) => tids,
                    None => continue,
                }
            };
            for &tid in &tids {
                owner.insert(tid, pid);
            }
            listed.extend(tids);
        }
        for tid in self.uncovered.look(&listed, &st.thread_pid) {
            let pid = owner[&tid];
            if st.pids.insert(pid) {
                // Forked before its parent had events: no fork record, no mmap records.
                st.seen.insert(pid);
                if let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/maps")) {
                    for e in symbols::parse_proc_maps(&text) {
                        st.spaces.add(pid, e);
                    }
                }
                self.followed.started(pid);
            }
            st.threads.entry(pid).or_default().insert(tid as u32);
            let _ = self.sampler.add_task(tid);
            if let Some(c) = self.counters.as_mut() {
                c.add_task(tid);
            }
        }
    }

    /// Threads, JVMs and perf maps of the followed processes, and `jcmd` for attached JVMs.
    fn look_at_processes(&mut self, now: Instant) {
        // The root as the user ran it, the last look that saw it (a started command's first
        // look may come before its exec, while it is still a copy of this program).
        let exe = |pid: String| std::fs::read_link(format!("/proc/{pid}/exe")).ok();
        if exe(self.root.to_string()) != exe("self".into())
            && let Some(name) = ProcessName::of(self.root)
        {
            self.root_name = Some(name);
        }
        self.read_threads(false);
        for &pid in &self.st.pids {
            self.map_existed
                .entry(pid)
                .or_insert_with(|| jit::perf_map_path(pid).exists());
            self.perf_maps.entry(pid).or_default().refresh(pid);
            if !self.jvms.contains_key(&pid)
                && let Some(home) = jit::hotspot_home(self.st.spaces.maps(pid))
            {
                let version = jit::java_version(&home, pid);
                self.jvms.insert(
                    pid,
                    Jvm {
                        home,
                        version,
                        names_from: None,
                    },
                );
            }
        }
        // An attached JVM is asked for its map once it has run a second under diagnose
        // (code compiled before then is named even if the JVM exits first).
        if self.attached && now - self.started >= Duration::from_secs(1) {
            for (&pid, jvm) in &self.jvms {
                if !self.jcmd.contains_key(&pid)
                    && !self.jcmd_ok.contains(&pid)
                    && let Ok(r) = PerfMapRequest::start(pid, &jvm.home)
                {
                    self.jcmd.insert(pid, r);
                }
            }
        }
        let (jcmd_ok, perf_maps) = (&mut self.jcmd_ok, &mut self.perf_maps);
        self.jcmd.retain(|&pid, r| match r.poll() {
            None => true,
            Some(ok) => {
                if ok {
                    jcmd_ok.insert(pid);
                    perf_maps.entry(pid).or_default().reread();
                }
                false
            }
        });
    }

    /// Hot anonymous code copied, and each process's memory (kept at its largest RSS).
    fn read_memory(&mut self) {
        for (pid, pages) in std::mem::take(&mut self.st.anon_pages) {
            if self.st.pids.contains(&pid) {
                self.hot_code.refresh(pid, &pages);
            }
        }
        let every = SMAPS_EVERY.max(SMAPS_PER_PROCESS * self.st.pids.len() as u32);
        self.read_smaps(every);
    }

    /// Each followed process's memory, when it ran since its last read and that was `every`
    /// ago (or it was never read).
    fn read_smaps(&mut self, every: Duration) {
        let now = Instant::now();
        for &pid in &self.st.pids {
            let samples = self.st.pid_samples.get(&pid).copied().unwrap_or(0);
            // At the stop (`every` zero) the cost no longer matters: the last read is taken.
            let wait = |took: Duration| match every.is_zero() {
                true => every,
                false => every.max(took * SMAPS_COST_FACTOR),
            };
            let due = self
                .smaps_read
                .get(&pid)
                .is_none_or(|&(at, seen, took)| now - at >= wait(took) && samples > seen);
            if !due {
                continue;
            }
            let read = memory::read_process(pid);
            self.smaps_read
                .insert(pid, (now, samples, Instant::now() - now));
            if let Some(m) = read {
                let keep = self
                    .memory
                    .get(&pid)
                    .is_none_or(|old| m.rss_kb >= old.rss_kb);
                if keep {
                    self.memory.insert(pid, m);
                }
            }
        }
    }

    /// The stop policy for a launched command ([`stop_step`]) applied; false to stop.
    fn command_stop_policy(&mut self, stop: &AtomicBool, now: Instant) -> bool {
        let Some(c) = self.child.as_mut() else {
            return false;
        };
        if self.exit.is_none()
            && let Some((status, usage)) = c.try_wait()
        {
            self.trapped = matches!(
                status,
                nix::sys::wait::WaitStatus::Signaled(_, nix::sys::signal::Signal::SIGTRAP, _)
            );
            let mut totals = totals_of(&usage);
            // Ended on its own: the time its work took, as far as the polling tells.
            if self.terminated_at.is_none() {
                totals.wall_s = Some(self.started.elapsed().as_secs_f64());
            }
            self.exit = Some((describe_status(status), Some(totals)));
        }
        let over = self
            .opts
            .duration
            .is_some_and(|d| self.started.elapsed() >= d)
            || stop.load(Ordering::Relaxed);
        // A Ctrl-C at the terminal the command held ended it: a stop for its whole tree, as
        // when the signal reaches diagnose, not an end on its own.
        if let Some(sig) = c.interrupted_at_terminal()
            && self.terminated_at.is_none()
        {
            self.interrupted_by = Some(sig);
            c.terminate(false);
            self.terminated_at = Some(now);
        }
        let since_terminate = self.terminated_at.map(|t| now - t);
        match stop_step(self.exit.is_some(), over, since_terminate, || {
            c.descendants_alive()
        }) {
            StopStep::Wait => true,
            StopStep::EndedOnItsOwn => {
                let left = c.leave_running();
                if left > 0 {
                    self.notes.push(format!(
                        "the command exited leaving {left} process{} it started \
                         running; they were left running and were not followed further",
                        if left == 1 { "" } else { "es" }
                    ));
                }
                false
            }
            StopStep::Terminate if self.opts.watch.is_some() && !self.window_over => {
                // Stopped once its lines are watched ([`Run::end_command`]).
                self.window_over = true;
                false
            }
            StopStep::Terminate => {
                c.terminate(false);
                self.terminated_at = Some(now);
                true
            }
            StopStep::Kill => {
                c.terminate(true);
                true
            }
            StopStep::Stopped => false,
            StopStep::GiveUp => {
                let left = c.leave_running() + usize::from(self.exit.is_none());
                self.notes.push(format!(
                    "{left} process{} of the command could not be stopped (not \
                     permitted to signal them?) and still run",
                    if left == 1 { "" } else { "es" }
                ));
                false
            }
        }
    }

    /// Watches the hot code's cache lines when asked and the workload still runs: a started
    /// command left running at the window's end, or an attached process.
    pub(super) fn watch_lines(&mut self) {
        let Some(budget) = self.opts.watch else {
            return;
        };
        let window = self.started.elapsed();
        let alive = if self.child.is_some() {
            self.window_over && self.exit.is_none()
        } else {
            process_running(self.root)
        };
        let recorded = if !cfg!(target_arch = "x86_64") {
            WatchRecording {
                skipped: Some(WatchSkipped::NotX86),
                ..Default::default()
            }
        } else if !alive {
            WatchRecording {
                skipped: Some(WatchSkipped::TargetEnded),
                ..Default::default()
            }
        } else {
            match watch::choose_target(&self.st.samples, process_running) {
                Ok((pid, hot)) => watch::watch(pid, &hot, &self.st.spaces, window, &budget),
                Err(why) => WatchRecording {
                    skipped: Some(why),
                    ..Default::default()
                },
            }
        };
        self.watch = Some(recorded);
    }

    /// After the watch: stops a started command left running for it, as at the end of the
    /// window ([`stop_step`]); false once done (or when there is nothing to stop).
    pub(super) fn end_command(&mut self, stop: &AtomicBool) -> bool {
        if !self.window_over {
            return false;
        }
        let go_on = self.command_stop_policy(stop, Instant::now());
        if go_on {
            std::thread::sleep(ROUND_SLEEP);
        }
        go_on
    }

    /// An attached process is followed until it exits, the duration ends or Ctrl-C; false to
    /// stop.
    fn attached_stop_policy(&mut self, stop: &AtomicBool) -> bool {
        if !process_running(self.root) {
            self.exit = Some(("exited during the recording".into(), None));
            return false;
        }
        !(self
            .opts
            .duration
            .is_some_and(|d| self.started.elapsed() >= d)
            || stop.load(Ordering::Relaxed))
    }

    /// Reads every followed thread's figures; with the wall-clock view from counts, hands
    /// each thread's counts to it.
    /// Reads the followed processes' threads: in full every [`FULL_READ_EVERY`] and when
    /// `full` (the last reading, at the stop), else only their schedstat times.
    fn read_threads(&mut self, full: bool) {
        let boot_minus_monotonic_ns =
            crate::measure::clock::boot_time_ns().saturating_sub(monotonic_ns());
        let now = Instant::now();
        let full = full || now - self.last_full_read >= FULL_READ_EVERY;
        if full {
            self.last_full_read = now;
        }
        for &pid in &self.st.pids {
            let read = self.tracker.poll(pid, full);
            if let Some(w) = self.st.wall.as_mut()
                && w.source() == WallSource::Schedstat
            {
                for tid in read {
                    if let Some((pid, first, now)) =
                        self.tracker.counts(tid, boot_minus_monotonic_ns)
                    {
                        w.counts(tid, pid, first, now);
                    }
                }
            }
        }
    }

    /// Stops sampling and takes the last samples and counts; an attached JVM still running
    /// is asked once more for its map, for code compiled late.
    pub(super) fn stop(&mut self) -> Stopped {
        self.sampler.disable();
        let end_ns = monotonic_ns();
        // Every record is in: nothing is held back.
        self.take_records(u64::MAX);
        // The last reading of every thread still there, in full, closes its counts at the end.
        self.read_threads(true);
        let wall = self.close_wall(end_ns);
        // The last look at the memory of processes that ran since theirs.
        self.read_smaps(Duration::ZERO);
        let counter_values = self.counters.as_ref().map(|c| c.read()).unwrap_or_default();
        let live_pids: Vec<u32> = self
            .st
            .pids
            .iter()
            .copied()
            .filter(|&p| process_running(p))
            .collect();
        if self.attached {
            for (&pid, jvm) in &self.jvms {
                if !live_pids.contains(&pid) {
                    continue;
                }
                let ok = match self.jcmd.remove(&pid) {
                    Some(r) => r.wait(),
                    None => PerfMapRequest::start(pid, &jvm.home).is_ok_and(PerfMapRequest::wait),
                };
                if ok {
                    self.jcmd_ok.insert(pid);
                    self.perf_maps.entry(pid).or_default().reread();
                }
            }
        }
        Stopped {
            counter_values,
            live_pids,
            wall,
        }
    }

    /// Closes the wall-clock view at `end_ns`: what it lacks, who held the CPUs.
    fn close_wall(&mut self, end_ns: u64) -> Option<WallRecording> {
        let mut w = self.st.wall.take()?;
        let refused = self.observer.refused.len();
        if refused > 0 {
            w.lacks.push(format!(
                "why and where {refused} process{} slept could not be read \
                 (/proc/PID/task/*/syscall needs ptrace access: run diagnose as the processes' \
                 user, or with CAP_SYS_PTRACE); their blocked time is counted without it",
                if refused == 1 { "" } else { "es" }
            ));
        }
        let cpu = self.cpu_window.take().map(|c| c.finish(&self.st.seen));
        let (thread_pid, threads) = (&self.st.thread_pid, &self.st.threads);
        let mut rec = w.finish(end_ns, |tid| {
            thread_pid.get(&tid).copied().or_else(|| {
                threads
                    .iter()
                    .find(|(_, t)| t.contains(&tid))
                    .map(|(&p, _)| p)
            })
        });
        rec.cpu = cpu;
        Some(rec)
    }

    /// Reads the perf maps a last time (JIT code published since the last look, maps written
    /// at exit), says where each JVM's names came from, and removes the map files diagnose
    /// caused.
    pub(super) fn name_jit_code(&mut self) {
        for &pid in self.st.seen.iter() {
            self.perf_maps.entry(pid).or_default().refresh(pid);
        }
        let (attached, user_maps) = (self.attached, self.user_maps);
        for (&pid, jvm) in self.jvms.iter_mut() {
            let read = self
                .perf_maps
                .get(&pid)
                .is_some_and(|f| f.symbol_count() > 0);
            let existed = self.map_existed.get(&pid).copied().unwrap_or(false);
            let by_jcmd = self.jcmd_ok.contains(&pid);
            let ours = if attached {
                by_jcmd && !existed
            } else {
                !user_maps && !existed
            };
            jvm.names_from = read.then(|| {
                if attached && by_jcmd {
                    format!("`jcmd {pid} Compiler.perfmap`, run by diagnose")
                } else if !attached && !user_maps {
                    "the perf map HotSpot wrote at exit (diagnose added -XX:+DumpPerfMapAtExit \
                     to JAVA_TOOL_OPTIONS)"
                        .to_string()
                } else {
                    let f = self.perf_maps.entry(pid).or_default();
                    format!("{}", f.path(pid).display())
                }
            });
            let version = jvm.version.as_deref().unwrap_or("version unknown");
            match &jvm.names_from {
                Some(from) => self.notes.push(format!(
                    "process {pid} is HotSpot {version}: JIT code named from {from}{}",
                    if ours {
                        "; diagnose removed the map file it caused"
                    } else {
                        ""
                    }
                )),
                None => self.notes.push(format!(
                    "process {pid} is HotSpot {version} but no perf map could be had, so JIT \
                     code is unnamed: run it under diagnose, or start it with \
                     -XX:+UnlockDiagnosticVMOptions -XX:+DumpPerfMapAtExit"
                )),
            }
            if ours {
                let _ = std::fs::remove_file(self.perf_maps.entry(pid).or_default().path(pid));
            }
        }
    }

    /// The recording, from what the run read.
    pub(super) fn assemble(self, stopped: Stopped) -> Recording {
        let opts = self.opts;
        let st = self.st;
        let jvms = self.jvms;
        // Processes in other namespaces (containers), and what of theirs could not be read.
        let namespaces: Vec<NamespacedProcess> = self
            .perf_maps
            .iter()
            .filter_map(|(pid, f)| {
                let unnamed_jvm = jvms.get(pid).is_some_and(|j| j.names_from.is_none());
                f.view()?.report(unnamed_jvm)
            })
            .collect();
        let (mut perf_map_symbols, mut jit_code) = (HashMap::new(), HashMap::new());
        for (pid, f) in self.perf_maps {
            if !f.is_empty() {
                let (syms, code) = f.finish();
                perf_map_symbols.insert(pid, syms);
                jit_code.insert(pid, code);
            }
        }
        // Hot code copied while the processes ran: after the maps' copies, so newest last.
        for (pid, blocks) in self.hot_code.into_blocks() {
            jit_code.entry(pid).or_insert_with(Vec::new).extend(blocks);
        }
        let (ended, totals) = self.exit.unwrap_or_else(|| match &opts.target {
            Target::Pid(_) => ("still running (attached)".into(), None),
            Target::Command(_) => ("still running (could not be stopped)".into(), None),
        });
        Recording {
            mode: opts.mode,
            scope: self.sampler.scope(),
            kernel: if self.sampler.layout().kernel {
                KernelSampling::Sampled
            } else {
                match self.kernel_refused {
                    Some(error) => KernelSampling::Refused {
                        paranoid: sampler::paranoid(),
                        error,
                    },
                    None => KernelSampling::Off,
                }
            },
            root_name: self.root_name,
            per_task_because: self.per_task_because,
            other_samples: self.sampler.skipped_samples()
                + self
                    .filter
                    .as_ref()
                    .map_or(0, FollowedFilter::dropped_samples),
            frequency_hz: opts.frequency_hz,
            // The watch ran after the window: not recorded time.
            wall_s: (self.started.elapsed()
                - self.watch.as_ref().map_or(Duration::ZERO, |w| w.spent))
            .as_secs_f64(),
            root_pid: self.root,
            followed: {
                let names = &st.names;
                let threads = self.tracker.figures();
                let live = &stopped.live_pids;
                self.followed.finish(
                    |pid| {
                        names.get(&pid).cloned().or_else(|| {
                            threads
                                .iter()
                                .find(|t| t.tid == pid)
                                .map(|t| t.name.clone())
                        })
                    },
                    |pid| live.contains(&pid),
                )
            },
            no_children: !opts.follows_children(),
            command: match &opts.target {
                Target::Command(a) => Some(a.clone()),
                Target::Pid(_) => None,
            },
            ended,
            interrupted_by: self.interrupted_by,
            samples: st.samples,
            stacks: st.stacks,
            callchains: self.sampler.layout().callchain,
            unwinding: self
                .sampler
                .layout()
                .callchain
                .then(|| st.unwinder.report()),
            total_samples: st.total,
            kernel_samples: st.kernel_samples,
            lost: st.lost,
            thread_names: st.names,
            thread_pid: st.thread_pid,
            threads: self.tracker.figures(),
            processes: self.memory.into_values().collect(),
            totals,
            counter_values: stopped.counter_values,
            counters_unavailable: self.counters.map(|c| c.unavailable).unwrap_or_default(),
            perf_maps: perf_map_symbols,
            jit_code,
            live_pids: stopped.live_pids,
            jvms,
            namespaces,
            notes: self.notes,
            wall: stopped.wall,
            // A command alive when the watch began and killed by SIGTRAP since: a trap of
            // the watch reached it.
            watch: self.watch.map(|mut w| {
                w.killed_by_trap = self.trapped && w.armed;
                w
            }),
        }
    }
}

/// Looks at every followed thread through /proc; those asleep are handed to the wall-clock
/// recorder with why and where they sleep.
fn look_at_sleeping_threads(st: &mut State, observer: &mut Observer) {
    let State {
        wall,
        threads,
        pids,
        spaces,
        unwinder,
        ..
    } = st;
    let Some(w) = wall.as_mut() else {
        return;
    };
    let weight_ns = w.round(monotonic_ns());
    let mut looked = std::collections::HashSet::new();
    for (&pid, tids) in threads.iter() {
        if !pids.contains(&pid) {
            continue;
        }
        for &tid in tids {
            looked.insert(tid);
            if let Some((reason, stack)) = observer.look(pid, tid, spaces, unwinder) {
                w.look(tid, weight_ns, reason, stack);
            }
        }
    }
    observer.keep_only(&looked);
}

/// The state letter of a thread in /proc (`R`, `S`, `D`...).
fn thread_state(pid: u32, tid: u32) -> Option<char> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
    s.get(s.rfind(')')? + 1..)?
        .split_whitespace()
        .next()?
        .chars()
        .next()
}

/// True for a record of a process other than `root`: with `--no-children`, one to leave out.
fn of_another_process(r: &Record, root: u32) -> bool {
    matches!(r,
        Record::Sample { pid, .. }
        | Record::Mmap { pid, .. }
        | Record::Comm { pid, .. }
        | Record::Fork { pid, .. }
        | Record::Exit { pid, .. }
        | Record::Switch { pid, .. } if *pid != root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn without_children_only_the_roots_records_are_kept() {
        // Guards --no-children: the root's events write the fork record of every child it
        // forks (and on a kernel before 5.13 the child inherits them and is sampled); neither
        // may make the child followed. The root's own new thread and lost counts stay.
        let root = 100;
        let sample = |pid, tid| Record::Sample {
            pid,
            tid,
            time_ns: 1,
            ip: 0x1000,
            in_kernel: false,
            kernel_callers: Vec::new(),
            callers: Vec::new(),
            user: None,
        };
        let fork = |pid, tid| Record::Fork {
            pid,
            ppid: root,
            tid,
            time_ns: 1,
        };
        let mut records = vec![
            fork(200, 200),
            fork(root, 101),
            sample(200, 200),
            sample(root, 101),
            Record::Lost { count: 3 },
        ];
        records.retain(|r| !of_another_process(r, root));
        assert_eq!(
            records,
            vec![
                fork(root, 101),
                sample(root, 101),
                Record::Lost { count: 3 }
            ]
        );
    }
}
