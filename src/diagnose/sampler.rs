//! Sampling through `perf_event_open`: where the target's threads run, thread by thread, from
//! an mmap ring buffer per CPU.
//!
//! One event per (task, CPU) with `inherit`, so threads and child processes created later are
//! followed: the kernel refuses to mmap an inherited per-task event that is not bound to a CPU
//! (`perf_mmap`: "Don't allow mmap() of inherited per-task counters"), which is why there is
//! one ring per CPU, and every other event on that CPU sends its records there
//! (`PERF_EVENT_IOC_SET_OUTPUT`). Records carry the instruction pointer, the thread and the
//! time; `mmap2`, `comm` and `task` records say which file backs which address, what threads are
//! called and when they come and go, so samples can be named after the target has exited.
//!
//! Without a hardware PMU the event is the `cpu-clock` software timer; with one, core cycles.
//! Either way the sample lands after the instruction that was executing (skid), which the
//! disassembly layer allows for.

use perf_event_open_sys::bindings::{
    PERF_COUNT_HW_CPU_CYCLES, PERF_COUNT_SW_CPU_CLOCK, PERF_FLAG_FD_CLOEXEC, PERF_RECORD_COMM,
    PERF_RECORD_EXIT, PERF_RECORD_FORK, PERF_RECORD_LOST, PERF_RECORD_MISC_COMM_EXEC,
    PERF_RECORD_MMAP2, PERF_RECORD_SAMPLE, PERF_SAMPLE_IP, PERF_SAMPLE_TID, PERF_SAMPLE_TIME,
    PERF_TYPE_HARDWARE, PERF_TYPE_SOFTWARE, perf_event_attr, perf_event_mmap_page,
};
use serde::{Deserialize, Serialize};
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

/// One record from the ring, reduced to what diagnose uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Record {
    /// A sample: where thread `tid` of process `pid` was at `time_ns`.
    Sample {
        /// Process.
        pid: u32,
        /// Thread.
        tid: u32,
        /// `perf_clock` time in ns.
        time_ns: u64,
        /// Instruction pointer.
        ip: u64,
    },
    /// An executable mapping appeared.
    Mmap {
        /// Process.
        pid: u32,
        /// First address.
        start: u64,
        /// Length in bytes.
        len: u64,
        /// File offset mapped at `start`.
        pgoff: u64,
        /// Backing file, or a pseudo-name (`//anon`, `[vdso]`).
        filename: String,
        /// Time in ns.
        time_ns: u64,
    },
    /// A thread got a name; `exec` when it came from an `execve`.
    Comm {
        /// Process.
        pid: u32,
        /// Thread.
        tid: u32,
        /// Name.
        comm: String,
        /// True when the name comes from an exec (the address space was replaced).
        exec: bool,
        /// Time in ns.
        time_ns: u64,
    },
    /// A thread or process was created.
    Fork {
        /// New process.
        pid: u32,
        /// Parent process.
        ppid: u32,
        /// New thread.
        tid: u32,
        /// Time in ns.
        time_ns: u64,
    },
    /// A thread exited.
    Exit {
        /// Process.
        pid: u32,
        /// Thread.
        tid: u32,
        /// Time in ns.
        time_ns: u64,
    },
    /// The kernel dropped records because the ring was full.
    Lost {
        /// How many.
        count: u64,
    },
}

impl Record {
    /// Time of the record, for merging rings in order (`Lost` sorts first).
    pub fn time_ns(&self) -> u64 {
        match self {
            Record::Sample { time_ns, .. }
            | Record::Mmap { time_ns, .. }
            | Record::Comm { time_ns, .. }
            | Record::Fork { time_ns, .. }
            | Record::Exit { time_ns, .. } => *time_ns,
            Record::Lost { .. } => 0,
        }
    }
}

struct Cursor<'a> {
    b: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn u32(&mut self) -> Option<u32> {
        let (v, rest) = self.b.split_first_chunk::<4>()?;
        self.b = rest;
        Some(u32::from_ne_bytes(*v))
    }
    fn u64(&mut self) -> Option<u64> {
        let (v, rest) = self.b.split_first_chunk::<8>()?;
        self.b = rest;
        Some(u64::from_ne_bytes(*v))
    }
    fn skip(&mut self, n: usize) -> Option<()> {
        self.b = self.b.get(n..)?;
        Some(())
    }
    /// A NUL-terminated string padded to 8 bytes, followed by the `sample_id` trailer
    /// (`pid, tid, time`) that `sample_id_all` appends: the trailer is read from the end.
    fn string_then_trailer(&mut self) -> Option<(String, u64)> {
        let trailer_at = self.b.len().checked_sub(16)?;
        let text = &self.b[..trailer_at];
        let end = text.iter().position(|&c| c == 0).unwrap_or(text.len());
        let s = String::from_utf8_lossy(&text[..end]).into_owned();
        self.b = &self.b[trailer_at..];
        let _pid_tid = self.u64()?;
        Some((s, self.u64()?))
    }
}

/// Parses one record body (after the 8-byte header) written with this module's attributes:
/// `sample_type = IP | TID | TIME` and `sample_id_all`. Unknown types give `None`.
pub fn parse_record(kind: u32, misc: u16, body: &[u8]) -> Option<Record> {
    let mut c = Cursor { b: body };
    match kind {
        PERF_RECORD_SAMPLE => {
            let ip = c.u64()?;
            let pid = c.u32()?;
            let tid = c.u32()?;
            let time_ns = c.u64()?;
            Some(Record::Sample {
                pid,
                tid,
                time_ns,
                ip,
            })
        }
        PERF_RECORD_MMAP2 => {
            let pid = c.u32()?;
            let _tid = c.u32()?;
            let start = c.u64()?;
            let len = c.u64()?;
            let pgoff = c.u64()?;
            // Either maj, min, ino, ino_generation or (PERF_RECORD_MISC_MMAP_BUILD_ID) a build
            // id: 24 bytes both ways.
            c.skip(24)?;
            let _prot = c.u32()?;
            let _flags = c.u32()?;
            let (filename, time_ns) = c.string_then_trailer()?;
            Some(Record::Mmap {
                pid,
                start,
                len,
                pgoff,
                filename,
                time_ns,
            })
        }
        PERF_RECORD_COMM => {
            let pid = c.u32()?;
            let tid = c.u32()?;
            let (comm, time_ns) = c.string_then_trailer()?;
            Some(Record::Comm {
                pid,
                tid,
                comm,
                exec: misc as u32 & PERF_RECORD_MISC_COMM_EXEC != 0,
                time_ns,
            })
        }
        PERF_RECORD_FORK | PERF_RECORD_EXIT => {
            let pid = c.u32()?;
            let ppid = c.u32()?;
            let tid = c.u32()?;
            let _ptid = c.u32()?;
            let time_ns = c.u64()?;
            Some(if kind == PERF_RECORD_FORK {
                Record::Fork {
                    pid,
                    ppid,
                    tid,
                    time_ns,
                }
            } else {
                Record::Exit { pid, tid, time_ns }
            })
        }
        PERF_RECORD_LOST => {
            let _id = c.u64()?;
            Some(Record::Lost { count: c.u64()? })
        }
        _ => None,
    }
}

/// Why events could not be opened.
#[derive(Debug)]
pub enum OpenError {
    /// EACCES / EPERM: `perf_event_paranoid` or missing capability.
    NotPermitted,
    /// ESRCH: the task is gone.
    NoSuchTask,
    /// ENOENT / EOPNOTSUPP / ENODEV: the event does not exist here (no PMU).
    NoSuchEvent,
    /// Anything else.
    Other(io::Error),
}

impl OpenError {
    fn from_io(e: io::Error) -> OpenError {
        match e.raw_os_error() {
            Some(libc::EACCES | libc::EPERM) => OpenError::NotPermitted,
            Some(libc::ESRCH) => OpenError::NoSuchTask,
            Some(libc::ENOENT | libc::EOPNOTSUPP | libc::ENODEV) => OpenError::NoSuchEvent,
            _ => OpenError::Other(e),
        }
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
/// `perf_event_paranoid=2` without privileges), following children, with the side records
/// symbolisation needs.
fn sampling_attr(mode: SamplingMode, frequency_hz: u64, enable_on_exec: bool) -> perf_event_attr {
    let (type_, config) = mode.type_and_config();
    let mut attr = perf_event_attr {
        type_,
        config,
        sample_type: (PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME) as u64,
        ..Default::default()
    };
    attr.__bindgen_anon_1.sample_freq = frequency_hz;
    attr.set_freq(1);
    attr.set_disabled(1);
    attr.set_inherit(1);
    attr.set_enable_on_exec(u64::from(enable_on_exec));
    attr.set_exclude_kernel(1);
    attr.set_exclude_hv(1);
    attr.set_mmap(1);
    attr.set_mmap2(1);
    attr.set_comm(1);
    attr.set_comm_exec(1);
    attr.set_task(1);
    attr.set_sample_id_all(1);
    attr
}

/// One mmap ring buffer.
struct Ring {
    base: *mut u8,
    len: usize,
    data_offset: usize,
    data_size: usize,
    scratch: Vec<u8>,
}

// SAFETY: the mapping is owned by the Ring and only touched through &mut self.
unsafe impl Send for Ring {}

impl Ring {
    fn map(fd: &OwnedFd, data_pages: usize) -> io::Result<Ring> {
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

    /// Moves every complete record into `out`.
    fn drain(&mut self, out: &mut Vec<Record>) {
        let (head_a, tail_a) = Ring::head_tail(self.base);
        let head = head_a.load(Ordering::Acquire);
        let mut tail = tail_a.load(Ordering::Relaxed);
        // SAFETY: the data area lies inside the mapping.
        let data =
            unsafe { std::slice::from_raw_parts(self.base.add(self.data_offset), self.data_size) };
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
            self.scratch.resize(size as usize - 8, 0);
            copy_wrapped(data, (at + 8) % self.data_size, &mut self.scratch);
            if let Some(r) = parse_record(kind, misc, &self.scratch) {
                out.push(r);
            }
            tail += size;
        }
        tail_a.store(tail, Ordering::Release);
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

/// Data pages per ring: 256 KiB holds ~8000 samples, over a second at 4 kHz on one CPU, far
/// more than the 50 ms between drains.
const DATA_PAGES: usize = 64;

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
}

impl Sampler {
    /// Opens sampling events for `tasks` (thread ids; one is enough for a process that is about
    /// to exec, whose threads are then inherited) on every CPU in `cpus`.
    pub fn open(
        tasks: &[i32],
        cpus: &[usize],
        mode: SamplingMode,
        frequency_hz: u64,
        enable_on_exec: bool,
    ) -> Result<Sampler, OpenError> {
        let mut s = Sampler {
            rings: Vec::new(),
            fds: Vec::new(),
            leaders: Vec::new(),
            mode,
            frequency_hz,
            enable_on_exec,
        };
        for &cpu in cpus {
            let mut attr = sampling_attr(mode, frequency_hz, enable_on_exec);
            let Some((&first, _)) = tasks.split_first() else {
                break;
            };
            let fd = open_event(&mut attr, first, cpu as i32)?;
            s.rings
                .push(Ring::map(&fd, DATA_PAGES).map_err(OpenError::Other)?);
            s.leaders.push((cpu, fd.as_raw_fd()));
            s.fds.push(fd);
        }
        for &task in tasks.iter().skip(1) {
            match s.add_task(task) {
                // A thread that exited since the caller listed it is not an error.
                Ok(()) | Err(OpenError::NoSuchTask) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(s)
    }

    /// Adds a thread found after opening (attach mode): its events write to the CPU rings.
    pub fn add_task(&mut self, task: i32) -> Result<(), OpenError> {
        for i in 0..self.leaders.len() {
            let (cpu, leader) = self.leaders[i];
            let mut attr = sampling_attr(self.mode, self.frequency_hz, self.enable_on_exec);
            let fd = open_event(&mut attr, task, cpu as i32)?;
            // SAFETY: both fds are open perf events on the same CPU.
            if unsafe { perf_event_open_sys::ioctls::SET_OUTPUT(fd.as_raw_fd(), leader) } != 0 {
                return Err(OpenError::Other(io::Error::last_os_error()));
            }
            if !self.enable_on_exec {
                enable_fd(&fd);
            }
            self.fds.push(fd);
        }
        Ok(())
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
            r.drain(out);
        }
    }
}

fn enable_fd(fd: &OwnedFd) {
    // SAFETY: fd is an open perf event.
    unsafe { perf_event_open_sys::ioctls::ENABLE(fd.as_raw_fd(), 0) };
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(words: &[u64]) -> Vec<u8> {
        words.iter().flat_map(|w| w.to_ne_bytes()).collect()
    }

    fn pid_tid(pid: u32, tid: u32) -> u64 {
        u64::from(pid) | (u64::from(tid) << 32)
    }

    #[test]
    fn sample_record_gives_ip_thread_and_time() {
        let body = bytes(&[0x401136, pid_tid(100, 101), 5_000]);
        assert_eq!(
            parse_record(PERF_RECORD_SAMPLE, 0, &body),
            Some(Record::Sample {
                pid: 100,
                tid: 101,
                time_ns: 5_000,
                ip: 0x401136
            })
        );
    }

    #[test]
    fn mmap2_record_gives_the_file_and_reads_the_trailer_time() {
        let mut body = bytes(&[pid_tid(7, 7), 0x5555_0000, 0x2000, 0x1000, 0, 0, 0]);
        body.extend(5u32.to_ne_bytes()); // prot
        body.extend(2u32.to_ne_bytes()); // flags
        body.extend(b"/usr/bin/true\0\0\0"); // padded to 8
        body.extend(bytes(&[pid_tid(7, 7), 42]));
        assert_eq!(
            parse_record(PERF_RECORD_MMAP2, 0, &body),
            Some(Record::Mmap {
                pid: 7,
                start: 0x5555_0000,
                len: 0x2000,
                pgoff: 0x1000,
                filename: "/usr/bin/true".into(),
                time_ns: 42
            })
        );
    }

    #[test]
    fn comm_exec_flag_is_kept() {
        let mut body = bytes(&[pid_tid(9, 9)]);
        body.extend(b"spin\0\0\0\0");
        body.extend(bytes(&[pid_tid(9, 9), 77]));
        let r = parse_record(PERF_RECORD_COMM, PERF_RECORD_MISC_COMM_EXEC as u16, &body);
        assert_eq!(
            r,
            Some(Record::Comm {
                pid: 9,
                tid: 9,
                comm: "spin".into(),
                exec: true,
                time_ns: 77
            })
        );
    }

    #[test]
    fn truncated_records_are_rejected_not_misread() {
        assert_eq!(parse_record(PERF_RECORD_SAMPLE, 0, &[0u8; 12]), None);
        assert_eq!(parse_record(PERF_RECORD_COMM, 0, &[0u8; 8]), None);
        assert_eq!(parse_record(999, 0, &[0u8; 64]), None);
    }

    #[test]
    fn wrapped_copy_joins_the_end_and_the_start() {
        let data = [1u8, 2, 3, 4, 5, 6];
        let mut out = [0u8; 4];
        copy_wrapped(&data, 4, &mut out);
        assert_eq!(out, [5, 6, 1, 2]);
    }

    #[test]
    fn sampling_this_process_yields_samples_of_this_thread() {
        // Guards the ring reader end to end on the running kernel: a busy loop sampled with
        // cpu-clock must produce samples of the calling thread.
        let tid = nix::unistd::gettid().as_raw();
        let cpus: Vec<usize> = crate::measure::allowed_cpus();
        let mut s = match Sampler::open(&[tid], &cpus, SamplingMode::CpuClock, 1000, false) {
            Ok(s) => s,
            Err(OpenError::NotPermitted) => return, // not allowed here; the CLI test covers it
            Err(e) => panic!("cannot open cpu-clock: {e:?}"),
        };
        s.enable();
        let t0 = std::time::Instant::now();
        let mut x = 1u64;
        while t0.elapsed().as_millis() < 200 {
            x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
        }
        s.disable();
        let mut out = Vec::new();
        s.drain(&mut out);
        let mine = out
            .iter()
            .filter(|r| matches!(r, Record::Sample { tid: t, .. } if *t as i32 == tid))
            .count();
        assert!(mine >= 20, "only {mine} samples in 200 ms at 1 kHz");
    }
}
