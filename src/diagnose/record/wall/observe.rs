//! Why a thread is off the CPU and where in its code, read from /proc while it sleeps:
//! `/proc/PID/task/TID/syscall` gives the system call it sleeps in, its arguments, and its
//! user stack pointer and instruction pointer; the top of its stack is read from
//! `/proc/PID/mem` and walked with the binaries' CFI, as the on-CPU samples are. An fd
//! argument is named by `/proc/PID/fd/N` (a socket, a pipe, a file).
//!
//! This works without privileges beyond ptrace access to one's own processes, which is why it
//! is the source of blocked stacks (the kernel's context-switch sample would need kernel
//! sampling rights). It is a sampler: each look sees the threads asleep at that moment, so a
//! wait is seen in proportion to its length; the switch records time each wait exactly.

use super::super::perf_records::MAX_STACK_FRAMES;
use crate::diagnose::symbolize::symbols::{AddressSpaces, Location};
use crate::diagnose::symbolize::unwind::StackUnwinder;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeSet, HashMap};

/// Why a thread sleeps, from the system call it sleeps in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockReason {
    /// `futex`: a lock, a condition variable or a park (the stack says which).
    Futex,
    /// `poll`, `epoll_wait`, `select`: waiting for any of several events.
    Poll,
    /// Reading, writing or accepting on a socket.
    Socket,
    /// Reading or writing a pipe or FIFO.
    Pipe,
    /// Reading a terminal.
    Terminal,
    /// Reading or writing a file or device: disk I/O.
    FileIo,
    /// `nanosleep`, `clock_nanosleep`: a timed sleep.
    Sleep,
    /// `wait4`, `waitid`: waiting for a child process.
    Child,
    /// `io_uring_enter`, `io_getevents`: waiting for asynchronous I/O.
    AsyncIo,
    /// `pause`, `sigsuspend`, `rt_sigtimedwait`: waiting for a signal.
    Signal,
    /// System V semaphores and message queues (`semop`, `msgrcv`).
    SysV,
    /// In the kernel outside any system call: a page fault (reading a page from disk, or
    /// waiting for another thread's fault on the same page).
    PageFault,
    /// Another system call.
    OtherSyscall,
    /// No look at /proc fell inside this wait (a wait shorter than the time between looks,
    /// or a thread /proc would not show).
    Unobserved,
}

impl BlockReason {
    /// Short words for a table or a flame graph frame.
    pub fn word(self) -> &'static str {
        match self {
            BlockReason::Futex => "futex",
            BlockReason::Poll => "poll/epoll",
            BlockReason::Socket => "socket",
            BlockReason::Pipe => "pipe",
            BlockReason::Terminal => "terminal",
            BlockReason::FileIo => "file I/O",
            BlockReason::Sleep => "sleep",
            BlockReason::Child => "child wait",
            BlockReason::AsyncIo => "async I/O",
            BlockReason::Signal => "signal wait",
            BlockReason::SysV => "SysV IPC",
            BlockReason::PageFault => "page fault",
            BlockReason::OtherSyscall => "other syscall",
            BlockReason::Unobserved => "not observed",
        }
    }
}

/// What `/proc/PID/task/TID/syscall` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyscallLine {
    /// The thread is running or runnable: nothing to read.
    Running,
    /// Asleep in system call `number` with its six arguments, at user `sp` and `pc` (the
    /// instruction after the `syscall`).
    InSyscall {
        /// Syscall number.
        number: i64,
        /// Arguments.
        args: [u64; 6],
        /// User stack pointer.
        sp: u64,
        /// User instruction pointer.
        pc: u64,
    },
    /// Asleep in the kernel outside a system call (a page fault), at user `sp` and `pc`.
    NotInSyscall {
        /// User stack pointer.
        sp: u64,
        /// User instruction pointer.
        pc: u64,
    },
}

impl SyscallLine {
    /// User stack and instruction pointers, when asleep.
    pub fn sp_pc(&self) -> Option<(u64, u64)> {
        match *self {
            SyscallLine::Running => None,
            SyscallLine::InSyscall { sp, pc, .. } | SyscallLine::NotInSyscall { sp, pc } => {
                Some((sp, pc))
            }
        }
    }
}

/// Parses `/proc/PID/task/TID/syscall`: `running`, `-1 SP PC`, or `NR A1..A6 SP PC` (hex
/// with `0x`, the number in decimal).
pub fn parse_syscall(text: &str) -> Option<SyscallLine> {
    let f: Vec<&str> = text.split_whitespace().collect();
    let hex = |s: &str| u64::from_str_radix(s.strip_prefix("0x")?, 16).ok();
    match f.as_slice() {
        ["running"] => Some(SyscallLine::Running),
        ["-1", sp, pc] => Some(SyscallLine::NotInSyscall {
            sp: hex(sp)?,
            pc: hex(pc)?,
        }),
        [nr, a @ .., sp, pc] if a.len() == 6 => {
            let mut args = [0u64; 6];
            for (slot, s) in args.iter_mut().zip(a) {
                *slot = hex(s)?;
            }
            Some(SyscallLine::InSyscall {
                number: nr.parse().ok()?,
                args,
                sp: hex(sp)?,
                pc: hex(pc)?,
            })
        }
        _ => None,
    }
}

/// What an fd names, from its `/proc/PID/fd/N` link target.
pub fn fd_reason(target: &str) -> BlockReason {
    if target.starts_with("socket:") {
        BlockReason::Socket
    } else if target.starts_with("pipe:") {
        BlockReason::Pipe
    } else if target.starts_with("/dev/pts/") || target.starts_with("/dev/tty") {
        BlockReason::Terminal
    } else if target.starts_with("anon_inode:") {
        BlockReason::Poll
    } else {
        BlockReason::FileIo
    }
}

/// Why a thread sleeps in `line`; `fd_target` reads the link of an fd argument.
pub fn reason(line: &SyscallLine, fd_target: impl Fn(i32) -> Option<String>) -> BlockReason {
    let (number, args) = match *line {
        SyscallLine::Running => return BlockReason::Unobserved,
        SyscallLine::NotInSyscall { .. } => return BlockReason::PageFault,
        SyscallLine::InSyscall { number, args, .. } => (number, args),
    };
    let by_fd = || {
        fd_target(args[0] as i32)
            .map(|t| fd_reason(&t))
            .unwrap_or(BlockReason::FileIo)
    };
    match number {
        libc::SYS_futex => BlockReason::Futex,
        #[cfg(target_arch = "x86_64")]
        libc::SYS_poll | libc::SYS_select | libc::SYS_epoll_wait => BlockReason::Poll,
        libc::SYS_ppoll | libc::SYS_pselect6 | libc::SYS_epoll_pwait => BlockReason::Poll,
        libc::SYS_read
        | libc::SYS_readv
        | libc::SYS_pread64
        | libc::SYS_preadv
        | libc::SYS_write
        | libc::SYS_writev
        | libc::SYS_pwrite64
        | libc::SYS_pwritev => by_fd(),
        libc::SYS_recvfrom
        | libc::SYS_recvmsg
        | libc::SYS_recvmmsg
        | libc::SYS_sendto
        | libc::SYS_sendmsg
        | libc::SYS_sendmmsg
        | libc::SYS_accept
        | libc::SYS_accept4
        | libc::SYS_connect => BlockReason::Socket,
        libc::SYS_nanosleep | libc::SYS_clock_nanosleep => BlockReason::Sleep,
        libc::SYS_wait4 | libc::SYS_waitid => BlockReason::Child,
        libc::SYS_io_uring_enter | libc::SYS_io_getevents => BlockReason::AsyncIo,
        #[cfg(target_arch = "x86_64")]
        libc::SYS_pause => BlockReason::Signal,
        libc::SYS_rt_sigsuspend | libc::SYS_rt_sigtimedwait => BlockReason::Signal,
        libc::SYS_semop | libc::SYS_semtimedop | libc::SYS_msgrcv | libc::SYS_msgsnd => {
            BlockReason::SysV
        }
        libc::SYS_fsync | libc::SYS_fdatasync | libc::SYS_sync_file_range => BlockReason::FileIo,
        // io_pgetevents, epoll_pwait2 and futex_waitv (the same number on every
        // architecture since 5.x's unified table) are newer than the libc crate's tables.
        333 if cfg!(target_arch = "x86_64") => BlockReason::AsyncIo,
        441 => BlockReason::Poll,
        449 => BlockReason::Futex,
        _ => BlockReason::OtherSyscall,
    }
}

/// The most syscall files an [`Observer`] keeps open, a file descriptor each (as the
/// thread tracker's kept files); beyond, a thread's file is opened at each look.
pub const OPEN_SYSCALL_MAX: usize = 4096;

/// Bytes of a sleeping thread's stack read for unwinding: as much as an on-CPU sample copies.
pub const STACK_BYTES: usize = super::super::sampler::USER_STACK_BYTES as usize;

/// Reads the top of a stack: up to [`STACK_BYTES`] from `sp`, fewer where the mapping ends.
pub fn read_stack(mem: &std::fs::File, sp: u64) -> Vec<u8> {
    use std::os::unix::fs::FileExt;
    let mut buf = vec![0u8; STACK_BYTES];
    let mut got = 0;
    // A read that crosses the end of the stack's mapping stops there: keep what came.
    while got < buf.len() {
        match mem.read_at(&mut buf[got..], sp + got as u64) {
            Ok(0) | Err(_) => break,
            Ok(n) => got += n,
        }
    }
    buf.truncate(got);
    buf
}

/// What a look at one thread found: its reason and stack, and the line they came from.
#[derive(Debug, Clone)]
struct Seen {
    line: SyscallLine,
    reason: BlockReason,
    stack: Vec<Location>,
}

/// Looks at sleeping threads, keeping what it needs between looks: an open `/proc/PID/mem`
/// per process, and each thread's last look, reused while the thread still sleeps on the
/// same line (same call, arguments, stack and instruction pointer): an idle thread of a
/// server costs one small read per look.
#[derive(Default)]
pub struct Observer {
    mem: HashMap<u32, Option<std::fs::File>>,
    /// Each thread's `/proc/PID/task/TID/syscall`, open: read again from offset 0 the kernel
    /// writes it afresh, so a look costs one `pread`, not an open's path walk and a close
    /// (the opens were a third of the looks' cost on MariaDB under sysbench). Closed when the
    /// thread is gone ([`Observer::keep_only`]); at most [`OPEN_SYSCALL_MAX`].
    syscall: HashMap<u32, std::fs::File>,
    last: HashMap<u32, Seen>,
    /// Processes whose threads /proc would not show (no ptrace access): said once.
    pub refused: BTreeSet<u32>,
}

impl Observer {
    /// Looks at thread `tid` of `pid`: `None` when it is on a CPU or runnable (or gone);
    /// else why it sleeps and its stack (empty when the stack could not be read),
    /// unwound over `maps` by `unwinder` and located in `spaces`.
    pub fn look(
        &mut self,
        pid: u32,
        tid: u32,
        spaces: &AddressSpaces,
        unwinder: &mut StackUnwinder,
    ) -> Option<(BlockReason, Vec<Location>)> {
        let text = match self.syscall_text(pid, tid) {
            Ok(t) => t,
            Err(e) => {
                if e.kind() == std::io::ErrorKind::PermissionDenied {
                    self.refused.insert(pid);
                }
                self.syscall.remove(&tid);
                return None;
            }
        };
        let line = parse_syscall(&text)?;
        let (sp, pc) = line.sp_pc()?;
        if let Some(s) = self.last.get(&tid)
            && s.line == line
        {
            return Some((s.reason, s.stack.clone()));
        }
        let reason = reason(&line, |fd| {
            std::fs::read_link(format!("/proc/{pid}/fd/{fd}"))
                .ok()
                .map(|p| p.display().to_string())
        });
        let stack = match self.stack_bytes(pid, sp) {
            Some(bytes) => {
                let callers = unwinder.unwind_sleeping(
                    pid,
                    spaces.maps(pid),
                    pc,
                    sp,
                    bytes,
                    MAX_STACK_FRAMES,
                );
                let mut stack = Vec::with_capacity(1 + callers.len());
                stack.push(spaces.locate(pid, pc));
                stack.extend(
                    callers
                        .iter()
                        .map(|&r| spaces.locate(pid, r.saturating_sub(1))),
                );
                stack
            }
            None => vec![spaces.locate(pid, pc)],
        };
        self.last.insert(
            tid,
            Seen {
                line,
                reason,
                stack: stack.clone(),
            },
        );
        Some((reason, stack))
    }

    /// The top of a sleeping thread's stack, through the process's `/proc/PID/mem`, kept open.
    /// An open `mem` reads the address space the process had when it was opened: after an
    /// `execve` (a shell script's `exec python3`) it reads nothing, so an empty read opens it
    /// again once.
    fn stack_bytes(&mut self, pid: u32, sp: u64) -> Option<Vec<u8>> {
        let open = || std::fs::File::open(format!("/proc/{pid}/mem")).ok();
        let mem = self.mem.entry(pid).or_insert_with(open);
        let bytes = read_stack(mem.as_ref()?, sp);
        if !bytes.is_empty() {
            return Some(bytes);
        }
        *mem = open();
        let bytes = read_stack(mem.as_ref()?, sp);
        (!bytes.is_empty()).then_some(bytes)
    }

    /// The thread's syscall line, through its file kept open (opened on the first look).
    fn syscall_text(&mut self, pid: u32, tid: u32) -> std::io::Result<String> {
        use std::os::unix::fs::FileExt;
        let path = || format!("/proc/{pid}/task/{tid}/syscall");
        if !self.syscall.contains_key(&tid) {
            if self.syscall.len() >= OPEN_SYSCALL_MAX {
                return std::fs::read_to_string(path());
            }
            self.syscall.insert(tid, std::fs::File::open(path())?);
        }
        // The longest line: the number, six arguments, sp and pc in hex, under 200 bytes.
        let mut buf = [0u8; 256];
        let n = self.syscall[&tid].read_at(&mut buf, 0)?;
        Ok(String::from_utf8_lossy(&buf[..n]).into_owned())
    }

    /// Closes the syscall files of threads not in `tids` (gone, or no longer followed).
    pub fn keep_only(&mut self, tids: &std::collections::HashSet<u32>) {
        self.syscall.retain(|tid, _| tids.contains(tid));
        self.last.retain(|tid, _| tids.contains(tid));
    }

    /// Forgets a process that exited.
    pub fn forget(&mut self, pid: u32) {
        self.mem.remove(&pid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_shapes_of_the_syscall_file_parse() {
        // Real lines from this machine: a thread in futex_wait, one in a page fault, one on CPU.
        let futex = "202 0x7f5a1c000b50 0x80 0x2 0x0 0x0 0x0 0x7ffd8b5e5a88 0x7f5a1bd8f00d\n";
        assert_eq!(
            parse_syscall(futex),
            Some(SyscallLine::InSyscall {
                number: 202,
                args: [0x7f5a1c000b50, 0x80, 2, 0, 0, 0],
                sp: 0x7ffd8b5e5a88,
                pc: 0x7f5a1bd8f00d,
            })
        );
        assert_eq!(
            parse_syscall("-1 0x7ffd8b5e5a88 0x55d0c8a01136\n"),
            Some(SyscallLine::NotInSyscall {
                sp: 0x7ffd8b5e5a88,
                pc: 0x55d0c8a01136
            })
        );
        assert_eq!(parse_syscall("running\n"), Some(SyscallLine::Running));
        assert_eq!(parse_syscall("202 0x1 0x2\n"), None);
        assert_eq!(parse_syscall(""), None);
    }

    #[test]
    #[cfg(target_arch = "x86_64")]
    fn the_reason_comes_from_the_syscall_and_an_fd_from_its_link() {
        let line = |number: i64, fd: u64| SyscallLine::InSyscall {
            number,
            args: [fd, 0, 0, 0, 0, 0],
            sp: 1,
            pc: 2,
        };
        let links = |fd: i32| match fd {
            3 => Some("socket:[4242]".to_string()),
            4 => Some("pipe:[77]".to_string()),
            5 => Some("/var/lib/postgresql/base/1/1259".to_string()),
            _ => None,
        };
        assert_eq!(reason(&line(202, 0), links), BlockReason::Futex);
        assert_eq!(reason(&line(232, 0), links), BlockReason::Poll); // epoll_wait
        assert_eq!(reason(&line(0, 3), links), BlockReason::Socket); // read(socket)
        assert_eq!(reason(&line(0, 4), links), BlockReason::Pipe);
        assert_eq!(reason(&line(17, 5), links), BlockReason::FileIo); // pread64
        assert_eq!(reason(&line(230, 0), links), BlockReason::Sleep); // clock_nanosleep
        assert_eq!(reason(&line(61, 0), links), BlockReason::Child); // wait4
        assert_eq!(reason(&line(39, 0), links), BlockReason::OtherSyscall); // getpid
        assert_eq!(
            reason(&SyscallLine::NotInSyscall { sp: 1, pc: 2 }, links),
            BlockReason::PageFault
        );
        assert_eq!(fd_reason("/dev/pts/3"), BlockReason::Terminal);
        assert_eq!(fd_reason("anon_inode:[eventfd]"), BlockReason::Poll);
    }

    #[test]
    fn a_sleeping_thread_of_this_process_is_seen_in_its_syscall_with_its_stack() {
        // A thread asleep in a pipe read, looked at through /proc as diagnose looks.
        let (r, w) = nix::unistd::pipe().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            tx.send(nix::unistd::gettid().as_raw()).unwrap();
            let mut b = [0u8; 1];
            nix::unistd::read(&r, &mut b).unwrap();
        });
        let tid = rx.recv().unwrap();
        let pid = std::process::id();
        let path = format!("/proc/{pid}/task/{tid}/syscall");
        let mut seen = None;
        for _ in 0..200 {
            let line = std::fs::read_to_string(&path)
                .ok()
                .and_then(|t| parse_syscall(&t));
            if let Some(l @ SyscallLine::InSyscall { .. }) = line {
                seen = Some(l);
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        let line = seen.expect("the reader was seen asleep within a second");
        let links = |fd: i32| std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok();
        let why = reason(&line, |fd| links(fd).map(|p| p.display().to_string()));
        let (sp, _) = line.sp_pc().unwrap();
        let mem = std::fs::File::open(format!("/proc/{pid}/mem")).unwrap();
        let stack = read_stack(&mem, sp);
        nix::unistd::write(&w, b"x").unwrap();
        reader.join().unwrap();
        assert_eq!(why, BlockReason::Pipe, "{line:?}");
        assert!(stack.len() >= 64, "the top of its stack is readable");
    }

    /// The syscall file kept open follows its thread: a pipe read, then a sleep, each seen
    /// through the same file; the file closes when the thread is no longer looked at.
    #[test]
    fn a_kept_syscall_file_follows_its_thread_from_one_wait_to_the_next() {
        let (r, w) = nix::unistd::pipe().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let sleeper = std::thread::spawn(move || {
            tx.send(nix::unistd::gettid().as_raw() as u32).unwrap();
            let mut b = [0u8; 1];
            nix::unistd::read(&r, &mut b).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(400));
        });
        let tid = rx.recv().unwrap();
        let pid = std::process::id();
        let (spaces, mut unwinder) = (AddressSpaces::default(), StackUnwinder::default());
        let mut observer = Observer::default();
        let mut wait_for = |want: BlockReason, observer: &mut Observer| {
            for _ in 0..200 {
                if let Some((why, _)) = observer.look(pid, tid, &spaces, &mut unwinder)
                    && why == want
                {
                    return true;
                }
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
            false
        };
        assert!(wait_for(BlockReason::Pipe, &mut observer));
        assert!(observer.syscall.contains_key(&tid));
        nix::unistd::write(&w, b"x").unwrap();
        assert!(wait_for(BlockReason::Sleep, &mut observer));
        assert_eq!(observer.syscall.len(), 1, "one file, read again");
        sleeper.join().unwrap();
        observer.keep_only(&std::collections::HashSet::new());
        assert!(observer.syscall.is_empty() && observer.last.is_empty());
    }
}
