//! Sampling through `perf_event_open`: where the target's threads run, thread by thread, from
//! an mmap ring buffer per CPU. Two scopes ([`SamplingScope`]):
//!
//! - **Per task**: one event per (task, CPU) with `inherit`, so threads and child processes
//!   created later are followed: the kernel refuses to mmap an inherited per-task event that is
//!   not bound to a CPU (`perf_mmap`: "Don't allow mmap() of inherited per-task counters"),
//!   which is why there is one ring per CPU, and every other event on that CPU sends its
//!   records there (`PERF_EVENT_IOC_SET_OUTPUT`). Allowed unprivileged, but the kernel
//!   schedules a task's events in and out at each of its context switches: for `cpu-clock`
//!   that starts and cancels an hrtimer, which in a VM is an exit to the hypervisor each time.
//!   PostgreSQL switching ~42,000 times a second lost ~20% of its throughput so, ~12%
//!   CPU-wide (`reference::PGBENCH_PER_TASK_SAMPLING_LOSS`).
//! - **CPU-wide**: one event per CPU for every process (`pid` -1; root, `CAP_PERFMON` or
//!   `perf_event_paranoid` <= 0), which stays scheduled across context switches. Its ring
//!   holds every process's records; the caller keeps those of the processes it follows,
//!   and [`Sampler::drain_wanted`] skips the samples and switches of the others where they lie.
//!
//! Records carry the instruction pointer, the thread and the time; `mmap2`, `comm` and `task`
//! records say which file backs which address, what threads are called and when they come and
//! go, so samples can be named after the target has exited.
//!
//! This file holds the unsafe part (the open, the rings in shared memory); the records read
//! from them are parsed by the pure code of [`super::perf_records`].
//!
//! Without a hardware PMU the event is the `cpu-clock` software timer; with one, core cycles.
//! Either way the sample lands after the instruction that was executing (skid), which the
//! disassembly layer allows for.

pub use super::perf_records::Record;
pub use super::perf_records::SampleLayout;
use super::perf_records::{
    MAX_STACK_FRAMES, PROCESS_AND_TIME_BYTES, USER_REGS_MASK, forked_process, parse_record,
    process_and_time,
};
use crate::machine::pmu::PerfErrno;
use perf_event_open_sys::bindings::{
    PERF_COUNT_HW_CPU_CYCLES, PERF_COUNT_SW_CPU_CLOCK, PERF_FLAG_FD_CLOEXEC, PERF_RECORD_SAMPLE,
    PERF_SAMPLE_CALLCHAIN, PERF_SAMPLE_IP, PERF_SAMPLE_REGS_USER, PERF_SAMPLE_STACK_USER,
    PERF_SAMPLE_TID, PERF_SAMPLE_TIME, PERF_TYPE_HARDWARE, PERF_TYPE_SOFTWARE, perf_event_attr,
    perf_event_mmap_page,
};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};

/// Which event drives the samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SamplingMode {
    /// The `cpu-clock` software timer: works everywhere, including VMs without a PMU.
    CpuClock,
    /// Hardware core cycles: needs a usable PMU.
    Cycles,
}

impl SamplingMode {
    /// The event's name as `perf` spells it.
    pub fn event_name(self) -> &'static str {
        match self {
            SamplingMode::CpuClock => "cpu-clock",
            SamplingMode::Cycles => "cycles",
        }
    }

    fn type_and_config(self) -> (u32, u64) {
        match self {
            SamplingMode::CpuClock => (PERF_TYPE_SOFTWARE, PERF_COUNT_SW_CPU_CLOCK as u64),
            SamplingMode::Cycles => (PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES as u64),
        }
    }
}

/// Which tasks the sampling events watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SamplingScope {
    /// One event per CPU for every process; the followed processes' records kept in user
    /// space. Needs root, `CAP_PERFMON` or `perf_event_paranoid` <= 0.
    CpuWide,
    /// One event per followed thread and CPU, inherited by what it creates (what every
    /// diagnosis used before CPU-wide sampling, hence the default of older files).
    #[default]
    PerTask,
}

impl SamplingScope {
    /// How the screen says it.
    pub fn words(self) -> &'static str {
        match self {
            SamplingScope::CpuWide => "CPU-wide",
            SamplingScope::PerTask => "per task",
        }
    }
}

/// Which tasks created later get the events of the task that creates them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inherit {
    /// Its new threads and the processes it forks (`inherit`), as `perf record` follows them.
    ThreadsAndChildren,
    /// Its new threads only (`inherit` with `inherit_thread`, Linux 5.13): a process it forks
    /// gets no events (`--no-children`).
    ThreadsOnly,
}

/// What the events follow beyond the sampled threads: the tasks they create, and every
/// context switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Follow {
    /// Which new tasks inherit the events.
    pub inherit: Inherit,
    /// A record each time a thread goes onto or off a CPU.
    pub switches: bool,
}

impl Inherit {
    /// Sets the attribute's inheritance (after `inherit` is set).
    pub fn apply(self, attr: &mut perf_event_attr) {
        attr.set_inherit(1);
        attr.set_inherit_thread(u64::from(self == Inherit::ThreadsOnly));
    }

    /// True when this kernel takes `inherit_thread` (5.13 and later; an older one refuses the
    /// bit it does not know with EINVAL): a disabled software event on this thread, closed at
    /// once, tried once per process.
    pub fn threads_only_supported() -> bool {
        static SUPPORTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *SUPPORTED.get_or_init(Inherit::try_threads_only)
    }

    fn try_threads_only() -> bool {
        let mut attr = perf_event_attr {
            type_: PERF_TYPE_SOFTWARE,
            config: PERF_COUNT_SW_CPU_CLOCK as u64,
            ..Default::default()
        };
        attr.set_disabled(1);
        attr.set_exclude_kernel(1);
        attr.set_exclude_hv(1);
        Inherit::ThreadsOnly.apply(&mut attr);
        open_event(&mut attr, 0, -1).is_ok()
    }
}

/// Why events could not be opened (the errno classified by [`PerfErrno`]).
#[derive(Debug)]
pub enum OpenError {
    /// The errno's meaning, with the error itself.
    Errno(PerfErrno, io::Error),
}

impl OpenError {
    fn from_io(e: io::Error) -> OpenError {
        OpenError::Errno(PerfErrno::of(e.raw_os_error().unwrap_or(0)), e)
    }

    /// What the errno means.
    pub fn kind(&self) -> PerfErrno {
        match self {
            OpenError::Errno(k, _) => *k,
        }
    }

    /// The error itself.
    pub fn io(&self) -> &io::Error {
        match self {
            OpenError::Errno(_, e) => e,
        }
    }
}

/// Raises the soft open-file limit to the hard one, as `perf record` does: attaching opens one
/// event per thread and CPU, which for a large JVM on a large machine is beyond the usual
/// soft limit of 1024. Returns the limit now in force.
pub fn raise_open_file_limit() -> u64 {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => {
            if setrlimit(Resource::RLIMIT_NOFILE, hard, hard).is_ok() {
                hard
            } else {
                soft
            }
        }
        Ok((soft, _)) => soft,
        Err(_) => 0,
    }
}

/// Opens one event; `pid`/`cpu` as `perf_event_open(2)` takes them.
pub fn open_event(attr: &mut perf_event_attr, pid: i32, cpu: i32) -> Result<OwnedFd, OpenError> {
    attr.size = std::mem::size_of::<perf_event_attr>() as u32;
    // SAFETY: attr is a valid, fully initialised perf_event_attr; the returned fd is owned here.
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(attr, pid, cpu, -1, PERF_FLAG_FD_CLOEXEC as u64)
    };
    if fd < 0 {
        return Err(OpenError::from_io(io::Error::last_os_error()));
    }
    // SAFETY: fd was just returned by the kernel and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The sampling attributes: frequency-based, user space only (allowed up to
/// `perf_event_paranoid=2` without privileges) unless the layout asks for kernel code too
/// ([`SampleLayout::kernel`]), following children, with the side records
/// symbolisation needs; with `switches`, a record each time a thread goes onto or off a CPU
/// (what the wall-clock view is built from; allowed unprivileged too), timed by
/// `CLOCK_MONOTONIC` so that the records line up with what diagnose reads from /proc.
fn sampling_attr(
    mode: SamplingMode,
    frequency_hz: u64,
    enable_on_exec: bool,
    layout: SampleLayout,
    follow: Follow,
) -> perf_event_attr {
    let (type_, config) = mode.type_and_config();
    let mut sample_type = (PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME) as u64;
    if layout.callchain {
        sample_type |= PERF_SAMPLE_CALLCHAIN as u64;
    }
    if layout.user_stack {
        sample_type |= (PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER) as u64;
    }
    let mut attr = perf_event_attr {
        type_,
        config,
        sample_type,
        ..Default::default()
    };
    if layout.callchain {
        // The user stack, walked by frame pointers in the kernel at the sample: kept beside
        // the stack copy as the fallback where CFI unwinding finds nothing. The kernel's own
        // frames only when kernel code is sampled.
        attr.set_exclude_callchain_kernel(u64::from(!layout.kernel));
        attr.sample_max_stack = MAX_STACK_FRAMES as u16;
    }
    if layout.user_stack {
        attr.sample_regs_user = USER_REGS_MASK;
        attr.sample_stack_user = USER_STACK_BYTES;
    }
    attr.__bindgen_anon_1.sample_freq = frequency_hz;
    attr.set_freq(1);
    attr.set_disabled(1);
    attr.set_enable_on_exec(u64::from(enable_on_exec));
    attr.set_exclude_kernel(u64::from(!layout.kernel));
    attr.set_exclude_hv(1);
    attr.set_mmap(1);
    attr.set_mmap2(1);
    attr.set_comm(1);
    attr.set_comm_exec(1);
    attr.set_task(1);
    attr.set_sample_id_all(1);
    follow.inherit.apply(&mut attr);
    if follow.switches {
        attr.set_context_switch(1);
    }
    // Records timed in the clock diagnose reads /proc by: the wall-clock view joins samples
    // to the counts read beside them, and switch records to the looks.
    attr.set_use_clockid(1);
    attr.clockid = libc::CLOCK_MONOTONIC;
    attr
}

/// The attributes of a CPU-wide event: those of [`sampling_attr`] without inheritance (an
/// event of every process has nothing to pass on) and without `enable_on_exec` (there is no
/// exec of its own), timed by `CLOCK_MONOTONIC` with or without switch records, so that its
/// records can be held back against a drain's start ([`Sampler::drain_wanted`]).
fn cpu_wide_attr(
    mode: SamplingMode,
    frequency_hz: u64,
    layout: SampleLayout,
    switches: bool,
) -> perf_event_attr {
    let follow = Follow {
        inherit: Inherit::ThreadsAndChildren,
        switches,
    };
    let mut attr = sampling_attr(mode, frequency_hz, false, layout, follow);
    attr.set_inherit(0);
    attr.set_inherit_thread(0);
    attr
}

/// Bytes of user stack copied with each sample for CFI unwinding. perf's own default is 8 KiB;
/// 16 KiB holds the frames from a thread's start to a leaf in the programs this tool meets
/// (a C `main` -> worker -> spin is under 1 KiB; a Rust thread's start, closure shims and
/// `Mutex::lock` -> futex take 2-4 KiB; a JVM's interpreter frames more), while the copy stays
/// a memcpy of ~1 us per sample. The kernel copies only up to the top of the stack.
pub const USER_STACK_BYTES: u32 = 16 * 1024;

/// One mmap ring buffer.
struct Ring {
    base: *mut u8,
    len: usize,
    data_offset: usize,
    data_size: usize,
    scratch: Vec<u8>,
    /// What samples carry.
    layout: SampleLayout,
}

// SAFETY: the mapping is owned by the Ring and only touched through &mut self.
unsafe impl Send for Ring {}

impl Ring {
    fn map(fd: &OwnedFd, data_pages: usize, layout: SampleLayout) -> io::Result<Ring> {
        let page = page_size();
        let len = page * (1 + data_pages);
        // SAFETY: mapping a perf fd as the kernel documents: one header page plus 2^n data
        // pages, shared, read-write so data_tail can be written back.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        let header = base as *const perf_event_mmap_page;
        // SAFETY: the header page is mapped; data_offset/data_size exist since Linux 4.1 and
        // read 0 before that, in which case the data area starts at the second page.
        let (off, size) = unsafe { ((*header).data_offset, (*header).data_size) };
        let (data_offset, data_size) = if size == 0 {
            (page, page * data_pages)
        } else {
            (off as usize, size as usize)
        };
        Ok(Ring {
            base: base as *mut u8,
            len,
            data_offset,
            data_size,
            scratch: Vec::new(),
            layout,
        })
    }

    fn head_tail<'a>(base: *mut u8) -> (&'a AtomicU64, &'a AtomicU64) {
        let header = base as *mut perf_event_mmap_page;
        // SAFETY: data_head and data_tail are naturally aligned u64 fields of the mapped header
        // page, shared with the kernel; atomics give the acquire/release pairing it requires.
        unsafe {
            (
                AtomicU64::from_ptr(std::ptr::addr_of_mut!((*header).data_head)),
                AtomicU64::from_ptr(std::ptr::addr_of_mut!((*header).data_tail)),
            )
        }
    }

    /// Where the kernel has written up to now.
    fn head(&self) -> u64 {
        Ring::head_tail(self.base).0.load(Ordering::Acquire)
    }

    fn data(&self) -> &[u8] {
        // SAFETY: the data area lies inside the mapping.
        unsafe { std::slice::from_raw_parts(self.base.add(self.data_offset), self.data_size) }
    }

    /// Calls `each(kind, misc, offset of the body in the data area, size)` for every complete
    /// record from the tail to `head`, and returns where the last one ends.
    fn walk(&self, head: u64, mut each: impl FnMut(u32, u16, usize, usize)) -> u64 {
        let mut tail = Ring::head_tail(self.base).1.load(Ordering::Relaxed);
        let data = self.data();
        while head.saturating_sub(tail) >= 8 {
            let at = (tail % self.data_size as u64) as usize;
            let mut hdr = [0u8; 8];
            copy_wrapped(data, at, &mut hdr);
            let kind = u32::from_ne_bytes(hdr[0..4].try_into().expect("4 bytes"));
            let misc = u16::from_ne_bytes(hdr[4..6].try_into().expect("2 bytes"));
            let size = u16::from_ne_bytes(hdr[6..8].try_into().expect("2 bytes")) as u64;
            if size < 8 || head - tail < size {
                break;
            }
            each(kind, misc, (at + 8) % self.data_size, size as usize - 8);
            tail += size;
        }
        tail
    }

    /// Moves every complete record up to `head` into `out`; with `wanted`, a sample or switch
    /// whose process and time it refuses is skipped unread. Returns the samples skipped.
    fn drain_to(
        &mut self,
        head: u64,
        out: &mut Vec<Record>,
        wanted: Option<&dyn Fn(u32, u64) -> bool>,
    ) -> u64 {
        let mut scratch = std::mem::take(&mut self.scratch);
        let mut skipped = 0;
        let data = self.data();
        let tail = self.walk(head, |kind, misc, body_at, len| {
            if let Some(wanted) = wanted {
                let mut start = [0u8; PROCESS_AND_TIME_BYTES];
                let n = len.min(PROCESS_AND_TIME_BYTES);
                copy_wrapped(data, body_at, &mut start[..n]);
                if let Some((pid, time_ns)) = process_and_time(kind, &start[..n])
                    && !wanted(pid, time_ns)
                {
                    skipped += u64::from(kind == PERF_RECORD_SAMPLE);
                    return;
                }
            }
            scratch.resize(len, 0);
            copy_wrapped(data, body_at, &mut scratch);
            if let Some(r) = parse_record(kind, misc, &scratch, self.layout) {
                out.push(r);
            }
        });
        self.scratch = scratch;
        Ring::head_tail(self.base).1.store(tail, Ordering::Release);
        skipped
    }

    /// The processes of the fork records up to `head`, without consuming them.
    fn forks_to(&self, head: u64, forked: &mut HashSet<u32>) {
        let data = self.data();
        self.walk(head, |kind, _, body_at, len| {
            if len >= 4 {
                let mut start = [0u8; 4];
                copy_wrapped(data, body_at, &mut start);
                forked.extend(forked_process(kind, &start));
            }
        });
    }
}

/// A ring whose records the caller parses itself ([`super::watch`], whose breakpoint samples
/// carry other fields than the sampler's).
pub(super) struct RawRing(Ring);

impl RawRing {
    /// Maps `fd`'s ring: one header page and `data_pages` (a power of two) data pages.
    pub(super) fn map(fd: &OwnedFd, data_pages: usize) -> io::Result<RawRing> {
        Ring::map(fd, data_pages, SampleLayout::LEAF).map(RawRing)
    }

    /// Calls `each(kind, body)` for every complete record written so far, and consumes them.
    pub(super) fn drain(&mut self, mut each: impl FnMut(u32, &[u8])) {
        let ring = &mut self.0;
        let mut scratch = std::mem::take(&mut ring.scratch);
        let head = ring.head();
        let data = ring.data();
        let tail = ring.walk(head, |kind, _, body_at, len| {
            scratch.resize(len, 0);
            copy_wrapped(data, body_at, &mut scratch);
            each(kind, &scratch);
        });
        ring.scratch = scratch;
        Ring::head_tail(ring.base).1.store(tail, Ordering::Release);
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly what map() mapped.
        unsafe { libc::munmap(self.base as *mut libc::c_void, self.len) };
    }
}

fn copy_wrapped(data: &[u8], at: usize, out: &mut [u8]) {
    let first = out.len().min(data.len() - at);
    out[..first].copy_from_slice(&data[at..at + first]);
    let rest = out.len() - first;
    out[first..].copy_from_slice(&data[..rest]);
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as usize } else { 4096 }
}

/// Data pages per ring: 512 KiB holds ~16000 samples without call chains and ~2000 with
/// 30-frame chains, half a second at 4 kHz on one CPU, far more than the 50 ms between drains.
const DATA_PAGES: usize = 128;

/// Data pages per ring when samples carry a [`USER_STACK_BYTES`] stack copy (~16.5 KiB each):
/// 2 MiB holds ~120 samples, 120 ms at 999 Hz on one CPU, over twice the time between drains.
const DATA_PAGES_WITH_STACKS: usize = 512;

/// The open sampling events and their rings.
pub struct Sampler {
    rings: Vec<Ring>,
    /// Every event, ring owners included: kept open until the sampler is dropped.
    fds: Vec<OwnedFd>,
    /// The event of each CPU whose ring the other events on that CPU write to.
    leaders: Vec<(usize, i32)>,
    mode: SamplingMode,
    frequency_hz: u64,
    enable_on_exec: bool,
    layout: SampleLayout,
    follow: Follow,
    scope: SamplingScope,
    /// Samples [`Sampler::drain_wanted`] skipped unread.
    skipped_samples: u64,
}

impl Sampler {
    /// A sampler with no events yet, for [`Sampler::open`] and [`Sampler::open_cpu_wide`].
    fn unopened(
        mode: SamplingMode,
        frequency_hz: u64,
        enable_on_exec: bool,
        layout: SampleLayout,
        follow: Follow,
        scope: SamplingScope,
    ) -> Sampler {
        Sampler {
            rings: Vec::new(),
            fds: Vec::new(),
            leaders: Vec::new(),
            mode,
            frequency_hz,
            enable_on_exec,
            layout,
            follow,
            scope,
            skipped_samples: 0,
        }
    }

    /// Opens sampling events for `tasks` (thread ids; one is enough for a process that is about
    /// to exec, whose threads are then inherited) on every CPU in `cpus`, with what `layout`
    /// asks beyond the sampled address (call chains, registers and stack copies), following
    /// what `follow` says (inheritance, context switches).
    pub fn open(
        tasks: &[i32],
        cpus: &[usize],
        mode: SamplingMode,
        frequency_hz: u64,
        enable_on_exec: bool,
        layout: SampleLayout,
        follow: Follow,
    ) -> Result<Sampler, OpenError> {
        let mut s = Sampler::unopened(
            mode,
            frequency_hz,
            enable_on_exec,
            layout,
            follow,
            SamplingScope::PerTask,
        );
        let pages = data_pages(layout);
        for &cpu in cpus {
            let mut attr = sampling_attr(mode, frequency_hz, enable_on_exec, layout, follow);
            let Some((&first, _)) = tasks.split_first() else {
                break;
            };
            let fd = open_event(&mut attr, first, cpu as i32)?;
            s.rings
                .push(Ring::map(&fd, pages, layout).map_err(OpenError::from_io)?);
            s.leaders.push((cpu, fd.as_raw_fd()));
            s.fds.push(fd);
        }
        for &task in tasks.iter().skip(1) {
            match s.add_task(task) {
                // A thread that exited since the caller listed it is not an error.
                Ok(()) => {}
                Err(e) if e.kind() == PerfErrno::NoSuchTask => {}
                Err(e) => return Err(e),
            }
        }
        Ok(s)
    }

    /// Opens one event of every process on each CPU in `cpus` (`pid` -1), disabled, each with
    /// its own ring; `switches` adds a record at each context switch of every task. Refused
    /// (`PerfErrno::NotPermitted`) without root, `CAP_PERFMON` or `perf_event_paranoid` <= 0.
    pub fn open_cpu_wide(
        cpus: &[usize],
        mode: SamplingMode,
        frequency_hz: u64,
        layout: SampleLayout,
        switches: bool,
    ) -> Result<Sampler, OpenError> {
        let follow = Follow {
            inherit: Inherit::ThreadsAndChildren,
            switches,
        };
        let mut s = Sampler::unopened(
            mode,
            frequency_hz,
            false,
            layout,
            follow,
            SamplingScope::CpuWide,
        );
        for &cpu in cpus {
            let mut attr = cpu_wide_attr(mode, frequency_hz, layout, switches);
            let fd = open_event(&mut attr, -1, cpu as i32)?;
            s.rings
                .push(Ring::map(&fd, data_pages(layout), layout).map_err(OpenError::from_io)?);
            s.fds.push(fd);
        }
        Ok(s)
    }

    /// Which tasks the events watch.
    pub fn scope(&self) -> SamplingScope {
        self.scope
    }

    /// Samples of processes not wanted, skipped unread by [`Sampler::drain_wanted`].
    pub fn skipped_samples(&self) -> u64 {
        self.skipped_samples
    }

    /// Adds a thread found after opening (attach mode): its events write to the CPU rings.
    /// Nothing to do for CPU-wide events, which watch every task already.
    pub fn add_task(&mut self, task: i32) -> Result<(), OpenError> {
        for i in 0..self.leaders.len() {
            let (cpu, leader) = self.leaders[i];
            let mut attr = sampling_attr(
                self.mode,
                self.frequency_hz,
                self.enable_on_exec,
                self.layout,
                self.follow,
            );
            let fd = open_event(&mut attr, task, cpu as i32)?;
            // SAFETY: both fds are open perf events on the same CPU.
            if unsafe { perf_event_open_sys::ioctls::SET_OUTPUT(fd.as_raw_fd(), leader) } != 0 {
                return Err(OpenError::from_io(io::Error::last_os_error()));
            }
            if !self.enable_on_exec {
                enable_fd(&fd);
            }
            self.fds.push(fd);
        }
        Ok(())
    }

    /// What samples carry.
    pub fn layout(&self) -> SampleLayout {
        self.layout
    }

    /// True when the events write a record at each context switch.
    pub fn switches(&self) -> bool {
        self.follow.switches
    }

    /// Starts every event (attach mode; a launched command starts at its exec).
    pub fn enable(&self) {
        self.fds.iter().for_each(enable_fd);
    }

    /// Stops every event.
    pub fn disable(&self) {
        for fd in &self.fds {
            // SAFETY: fd is an open perf event.
            unsafe { perf_event_open_sys::ioctls::DISABLE(fd.as_raw_fd(), 0) };
        }
    }

    /// Moves the records of every ring into `out`, each ring in order.
    pub fn drain(&mut self, out: &mut Vec<Record>) {
        for r in &mut self.rings {
            let head = r.head();
            r.drain_to(head, out, None);
        }
    }

    /// As [`Sampler::drain`], but a sample or switch record is read only when
    /// `wanted(pid, time_ns)` says so or its process was forked in the records of this drain
    /// (that fork record may sit in a ring read later, and only the caller, reading the
    /// records in time order, can tell whose child it is): the others are skipped where they
    /// lie, a sample's stack copy unread, and counted ([`Sampler::skipped_samples`]). What
    /// every ring holds is fixed first, so the forks looked at are those of the records read.
    pub fn drain_wanted(&mut self, out: &mut Vec<Record>, wanted: impl Fn(u32, u64) -> bool) {
        let heads: Vec<u64> = self.rings.iter().map(Ring::head).collect();
        let mut forked = HashSet::new();
        for (r, &head) in self.rings.iter().zip(&heads) {
            r.forks_to(head, &mut forked);
        }
        let wanted = |pid: u32, time_ns: u64| wanted(pid, time_ns) || forked.contains(&pid);
        for (r, &head) in self.rings.iter_mut().zip(&heads) {
            self.skipped_samples += r.drain_to(head, out, Some(&wanted));
        }
    }
}

/// Data pages of each ring for what samples carry.
fn data_pages(layout: SampleLayout) -> usize {
    if layout.user_stack {
        DATA_PAGES_WITH_STACKS
    } else {
        DATA_PAGES
    }
}

fn enable_fd(fd: &OwnedFd) {
    // SAFETY: fd is an open perf event.
    unsafe { perf_event_open_sys::ioctls::ENABLE(fd.as_raw_fd(), 0) };
}

/// Default samples per second. A cpu-clock sample costs the sampled thread ~20 us in a KVM
/// guest (timer interrupt and reprogramming exit to the hypervisor; `perf record` pays the
/// same, see `bench/diagnose_overhead.sh`): ~1% at 499 Hz against a 3% budget, where perf's
/// 4000 Hz would cost ~9%. An odd rate avoids beating with periodic timers.
pub const DEFAULT_FREQUENCY_HZ: u64 = 499;

/// The sampling event for this machine, and why.
pub fn choose_mode(machine: &crate::machine::Machine) -> (SamplingMode, String) {
    if machine.pmu.usable {
        (
            SamplingMode::Cycles,
            "hardware PMU available: sampling core cycles".into(),
        )
    } else {
        (
            SamplingMode::CpuClock,
            format!(
                "{}: sampling the cpu-clock software timer; hardware counters (CPI, TLB \
                 misses, bus locks, machine clears, HITM) are not available",
                machine
                    .pmu
                    .reason
                    .as_deref()
                    .unwrap_or("perf_event_open of cycles failed")
            ),
        )
    }
}

/// Whether kernel code was sampled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "state")]
pub enum KernelSampling {
    /// Kernel code was sampled with user space (`exclude_kernel` clear).
    Sampled,
    /// `--user-only` asked for user space only.
    Off,
    /// The kernel refused kernel sampling; user space only was sampled.
    Refused {
        /// `kernel.perf_event_paranoid` then, when it could be read.
        paranoid: Option<i32>,
        /// The error of the refused open.
        error: String,
    },
}

impl KernelSampling {
    /// True when kernel code was sampled.
    pub fn sampled(&self) -> bool {
        matches!(self, KernelSampling::Sampled)
    }
}

/// `kernel.perf_event_paranoid` now, when it can be read.
pub fn paranoid() -> Option<i32> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapped_copy_joins_the_end_and_the_start() {
        let data = [1u8, 2, 3, 4, 5, 6];
        let mut out = [0u8; 4];
        copy_wrapped(&data, 4, &mut out);
        assert_eq!(out, [5, 6, 1, 2]);
    }

    #[test]
    fn threads_only_events_leave_a_forked_process_unsampled() {
        // Guards --no-children: with `inherit_thread` a process forked by the sampled thread
        // gets no events; with plain `inherit` (the control) it does.
        if !Inherit::threads_only_supported() {
            return; // before Linux 5.13: the recording leaves their records out instead
        }
        let tid = nix::unistd::gettid().as_raw();
        let cpus: Vec<usize> = crate::measure::allowed_cpus();
        for (inherit, followed) in [
            (Inherit::ThreadsAndChildren, true),
            (Inherit::ThreadsOnly, false),
        ] {
            let mut s = match Sampler::open(
                &[tid],
                &cpus,
                SamplingMode::CpuClock,
                1000,
                false,
                SampleLayout::LEAF,
                Follow {
                    inherit,
                    switches: false,
                },
            ) {
                Ok(s) => s,
                Err(e) if e.kind() == PerfErrno::NotPermitted => return,
                Err(e) => panic!("cannot open cpu-clock: {e:?}"),
            };
            s.enable();
            // A shell counting to 200,000: a fraction of a second of CPU in the child.
            let child = std::process::Command::new("sh")
                .args(["-c", "i=0; while [ $i -lt 200000 ]; do i=$((i+1)); done"])
                .spawn()
                .unwrap();
            let pid = child.id();
            child.wait_with_output().unwrap();
            s.disable();
            let mut out = Vec::new();
            s.drain(&mut out);
            let samples = out
                .iter()
                .filter(|r| matches!(r, Record::Sample { pid: p, .. } if *p == pid))
                .count();
            if followed {
                assert!(
                    samples > 5,
                    "{inherit:?}: {samples} samples of the forked shell"
                );
            } else {
                assert_eq!(samples, 0, "{inherit:?}: samples of the forked shell");
            }
        }
    }

    #[test]
    fn a_cpu_wide_sampler_skips_the_samples_of_processes_not_wanted() {
        // Guards the cheap filter of CPU-wide sampling: a busy shell running beside this
        // thread is sampled by the CPU-wide events, but its samples (stack copies included)
        // are skipped unread and counted, while this thread's are read.
        let cpus: Vec<usize> = crate::measure::allowed_cpus();
        let mut busy = std::process::Command::new("sh")
            .args(["-c", "while :; do :; done"])
            .spawn()
            .unwrap();
        let other = busy.id();
        let opened = Sampler::open_cpu_wide(
            &cpus,
            SamplingMode::CpuClock,
            1000,
            SampleLayout::CHAIN_AND_STACK,
            true,
        );
        let mut s = match opened {
            Ok(s) => s,
            Err(e) if e.kind() == PerfErrno::NotPermitted => {
                let _ = busy.kill();
                let _ = busy.wait();
                return; // not root: the per-task mode is what runs
            }
            Err(e) => panic!("cannot open CPU-wide cpu-clock: {e:?}"),
        };
        assert_eq!(s.scope(), SamplingScope::CpuWide);
        let me = std::process::id();
        s.enable();
        crate::diagnose::burn_thread_cpu(std::time::Duration::from_millis(200));
        s.disable();
        let _ = busy.kill();
        let _ = busy.wait();
        let mut out = Vec::new();
        s.drain_wanted(&mut out, |pid, _| pid == me);
        let of = |p: u32| {
            out.iter()
                .filter(|r| matches!(r, Record::Sample { pid, .. } if *pid == p))
                .count()
        };
        assert!(of(me) >= 20, "only {} samples of this process", of(me));
        assert_eq!(of(other), 0, "samples of the process not wanted were read");
        let switches_of_other = out
            .iter()
            .filter(|r| matches!(r, Record::Switch { pid, .. } if *pid == other))
            .count();
        assert_eq!(switches_of_other, 0);
        if cpus.len() > 1 {
            assert!(s.skipped_samples() > 0, "the busy shell was never sampled");
        }
    }

    #[test]
    fn sampling_this_process_yields_samples_of_this_thread() {
        // Guards the ring reader end to end on the running kernel: a busy loop sampled with
        // cpu-clock must produce samples of the calling thread.
        let tid = nix::unistd::gettid().as_raw();
        let cpus: Vec<usize> = crate::measure::allowed_cpus();
        let mut s = match Sampler::open(
            &[tid],
            &cpus,
            SamplingMode::CpuClock,
            1000,
            false,
            SampleLayout::CHAIN_AND_STACK,
            Follow {
                inherit: Inherit::ThreadsAndChildren,
                switches: false,
            },
        ) {
            Ok(s) => s,
            Err(e) if e.kind() == PerfErrno::NotPermitted => return, // the CLI tests cover it
            Err(e) => panic!("cannot open cpu-clock: {e:?}"),
        };
        s.enable();
        // 200 ms of this thread's own CPU time, however long a shared machine takes to give it.
        crate::diagnose::burn_thread_cpu(std::time::Duration::from_millis(200));
        s.disable();
        let mut out = Vec::new();
        s.drain(&mut out);
        let mine = out
            .iter()
            .filter(|r| matches!(r, Record::Sample { tid: t, .. } if *t as i32 == tid))
            .count();
        assert!(mine >= 20, "only {mine} samples in 200 ms of CPU at 1 kHz");
        // Each carries this thread's registers and a stack copy that starts at its SP.
        let with_stack = out
            .iter()
            .filter(|r| {
                matches!(r, Record::Sample { tid: t, user: Some(u), .. }
                    if *t as i32 == tid && !u.bytes.is_empty() && u.regs.sp != 0)
            })
            .count();
        assert!(
            with_stack * 10 >= mine * 9,
            "{with_stack} of {mine} with a stack copy"
        );
    }

    #[test]
    fn the_sampling_event_follows_the_pmu_and_says_why() {
        let mut m = crate::machine::Machine::detect();
        m.pmu.usable = false;
        m.pmu.reason = Some("no hardware PMU is exposed".into());
        let (mode, why) = choose_mode(&m);
        assert_eq!(mode, SamplingMode::CpuClock);
        assert!(why.starts_with("no hardware PMU is exposed: sampling the cpu-clock"));
        m.pmu.usable = true;
        assert_eq!(choose_mode(&m).0, SamplingMode::Cycles);
    }
}
