//! Control of the processes cpudoctor starts: wait for one until a deadline, ask it to stop
//! (SIGTERM), kill it (SIGKILL), reap it, and tie a forked child's life to its parent's; and
//! the fatal signals cpudoctor itself receives (SIGHUP, SIGINT, SIGQUIT, SIGTERM), caught
//! into a pipe so that an ordinary thread decides what to do with them.
//!
//! The split-lock locker (a forked child), the handoff runner (a `std::process::Child`) and
//! diagnose (a command held before `execve`, and the processes it started) all stop children
//! the same way: give them a deadline, then kill and reap, so none is left running or as a
//! zombie. This module is the one place that sends SIGKILL.

use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::io::Read;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant};

/// How a process is asked to end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// SIGTERM: the process may clean up, or ignore it.
    Terminate,
    /// SIGKILL: the process ends, if we may signal it at all.
    Kill,
}

impl Stop {
    fn signal(self) -> Signal {
        match self {
            Stop::Terminate => Signal::SIGTERM,
            Stop::Kill => Signal::SIGKILL,
        }
    }
}

/// Sends `how` to `pid`; false when it could not be sent (gone, or not ours to signal).
pub fn signal(pid: Pid, how: Stop) -> bool {
    kill(pid, how.signal()).is_ok()
}

/// The end of child `pid` if it has ended, reaped; `None` while it runs (or stopped, or when
/// it is not our child to wait for).
pub fn try_reap(pid: Pid) -> Option<WaitStatus> {
    match waitpid(pid, Some(WaitPidFlag::WNOHANG)) {
        Ok(s @ (WaitStatus::Exited(..) | WaitStatus::Signaled(..))) => Some(s),
        _ => None,
    }
}

/// As [`try_reap`], with the child's resource usage (CPU time, page faults) from `wait4`.
pub fn try_reap_with_usage(pid: Pid) -> Option<(WaitStatus, libc::rusage)> {
    let mut status = 0;
    // SAFETY: rusage is plain data filled by the kernel.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child with valid out-pointers.
    let r = unsafe {
        libc::wait4(
            pid.as_raw(),
            &mut status,
            WaitPidFlag::WNOHANG.bits(),
            &mut usage,
        )
    };
    if r == pid.as_raw() {
        WaitStatus::from_raw(pid, status).ok().map(|s| (s, usage))
    } else {
        None
    }
}

/// Waits (blocking) for child `pid` to end and reaps it.
pub fn reap(pid: Pid) -> Option<WaitStatus> {
    waitpid(pid, None).ok()
}

/// Polls child `pid` every `poll` until it ends (reaped, its status returned) or `deadline`
/// passes (`None`; it still runs).
pub fn wait_until(pid: Pid, deadline: Instant, poll: Duration) -> Option<WaitStatus> {
    loop {
        if let Some(s) = try_reap(pid) {
            return Some(s);
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::thread::sleep(poll);
    }
}

/// Kills child `pid` and reaps it. Waits only for a child it could kill: one it may not
/// signal (setuid) might never exit, and is reaped by init once cpudoctor exits. False when
/// the signal could not be sent.
pub fn kill_and_reap(pid: Pid) -> bool {
    let sent = signal(pid, Stop::Kill);
    if sent {
        let _ = reap(pid);
    }
    sent
}

/// Polls `child` every `poll` until it ends (its status returned) or `deadline` passes
/// (`Ok(None)`; it still runs).
pub fn wait_child_until(
    child: &mut Child,
    deadline: Instant,
    poll: Duration,
) -> std::io::Result<Option<ExitStatus>> {
    loop {
        if let Some(s) = child.try_wait()? {
            return Ok(Some(s));
        }
        if Instant::now() >= deadline {
            return Ok(None);
        }
        std::thread::sleep(poll);
    }
}

/// Kills `child` and reaps it (`Child::kill` sends SIGKILL).
pub fn kill_child(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// Asks the kernel to SIGKILL the calling process when the thread that forked it dies
/// (`PR_SET_PDEATHSIG`), for a child that must never outlive cpudoctor. Async-signal-safe
/// (one system call), so a child may call it between `fork` and `_exit`. The caller checks
/// right after that its parent had not already gone: the signal is only armed from now on.
pub fn die_with_parent() {
    // SAFETY: prctl with integer arguments only.
    unsafe {
        libc::prctl(
            libc::PR_SET_PDEATHSIG,
            libc::SIGKILL as libc::c_ulong,
            0,
            0,
            0,
        );
    }
}

/// Makes `cmd`'s process die (SIGKILL) when the thread that spawns it dies, cpudoctor killed
/// by SIGKILL included, so a program started for a measurement never runs on unobserved.
/// Spawn from a thread that lives as long as the program (the kernel ties the signal to the
/// spawning *thread*).
pub fn tie_to_parent(cmd: &mut Command) -> &mut Command {
    // SAFETY: getpid before the fork; in the child only prctl, getppid and _exit, all
    // async-signal-safe.
    let parent = unsafe { libc::getpid() };
    unsafe {
        cmd.pre_exec(move || {
            die_with_parent();
            if libc::getppid() != parent {
                libc::_exit(127);
            }
            Ok(())
        })
    }
}

/// A process group cpudoctor started: a workload (`experiment`'s command, `diagnose -- CMD`)
/// and every process it starts, which stay in its group unless they leave it on purpose (a
/// daemon's `setsid`). Ended as a whole: [`Group::signal`] reaches every member, and dropping
/// the group kills what is left. While it lives it is listed with the watchdog, a small
/// process forked once that kills every listed group when cpudoctor ends for any reason,
/// SIGKILL included, which `PR_SET_PDEATHSIG` alone cannot do (it reaches the direct child
/// only, and a shell's `sleep 41 &` lived on).
pub struct Group {
    pgid: i32,
}

impl Group {
    /// The group led by `pid`, a child spawned with [`own_group`] (its group id is its PID).
    pub fn of_leader(pid: u32) -> Group {
        let pgid = pid as i32;
        // Also from the parent, as a shell does: whichever of the two runs first, the group
        // exists before either goes on (EACCES once the child has exec'd: it did it itself).
        // SAFETY: setpgid with two PIDs.
        unsafe { libc::setpgid(pgid, pgid) };
        watchdog_tell(pgid);
        Group { pgid }
    }

    /// The group id (the leader's PID).
    pub fn id(&self) -> i32 {
        self.pgid
    }

    /// Sends `how` to every process of the group; false when none is left.
    pub fn signal(&self, how: Stop) -> bool {
        nix::sys::signal::killpg(Pid::from_raw(self.pgid), how.signal()).is_ok()
    }

    /// Whether any process of the group still runs (or is a zombie not yet reaped).
    pub fn alive(&self) -> bool {
        nix::sys::signal::killpg(Pid::from_raw(self.pgid), None).is_ok()
    }

    /// Leaves the group running on purpose (a command that exited and left processes in the
    /// background, as a shell would): no longer killed on drop nor by the watchdog.
    pub fn leave_running(self) {
        watchdog_tell(-self.pgid);
        std::mem::forget(self);
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.signal(Stop::Kill);
        watchdog_tell(-self.pgid);
    }
}

/// Makes `cmd`'s process lead a process group of its own, so that [`Group`] can end it with
/// everything it starts (and a terminal's Ctrl-C, sent to the foreground group, reaches
/// cpudoctor, which ends the group itself).
pub fn own_group(cmd: &mut Command) -> &mut Command {
    cmd.process_group(0)
}

/// The write end of the pipe to the watchdog (-1 before the first group).
static WATCHDOG: std::sync::Mutex<i32> = std::sync::Mutex::new(-1);

/// Tells the watchdog of a group (`pgid`) or that it is gone (`-pgid`); starts the watchdog
/// on first use. A failure to start it leaves the groups to [`Group`]'s drop and to the
/// signal handlers: no worse than before it existed.
fn watchdog_tell(pgid_or_gone: i32) {
    let Ok(mut fd) = WATCHDOG.lock() else { return };
    if *fd < 0 && pgid_or_gone > 0 {
        *fd = start_watchdog().unwrap_or(-1);
    }
    if *fd >= 0 {
        let b = pgid_or_gone.to_ne_bytes();
        // SAFETY: a 4-byte write to our pipe (atomic below PIPE_BUF).
        unsafe { libc::write(*fd, b.as_ptr().cast(), 4) };
    }
}

/// Most groups the watchdog keeps at once (cpudoctor runs one or two at a time).
const WATCHDOG_GROUPS: usize = 256;

/// Forks the watchdog: it reads group ids from a pipe whose only writer is cpudoctor (the
/// write end is close-on-exec, so no workload holds it), and when the pipe reads EOF,
/// cpudoctor having ended however it ended, it sends SIGKILL to every group still listed and
/// exits. It leads a group of its own and ignores the terminal's and `kill`'s usual signals,
/// so that what ends cpudoctor (a Ctrl-C to the foreground group, `kill -TERM -PGID`) does
/// not end it first; it holds no other file (stdin, stdout and stderr are /dev/null), so a
/// reader of cpudoctor's output sees EOF when cpudoctor ends. Returns the write end.
fn start_watchdog() -> Option<i32> {
    let (r, w) = nix::unistd::pipe2(nix::fcntl::OFlag::O_CLOEXEC).ok()?;
    let (r, w) = (
        std::os::fd::IntoRawFd::into_raw_fd(r),
        std::os::fd::IntoRawFd::into_raw_fd(w),
    );
    // SAFETY: the child makes only async-signal-safe calls (setpgid, signal, open, dup2,
    // close, syscall, read, kill, _exit) on memory it owns on its stack.
    match unsafe { libc::fork() } {
        -1 => {
            // SAFETY: our own fds.
            unsafe {
                libc::close(r);
                libc::close(w);
            }
            None
        }
        0 => unsafe {
            libc::setpgid(0, 0);
            for sig in [
                libc::SIGHUP,
                libc::SIGINT,
                libc::SIGQUIT,
                libc::SIGTERM,
                libc::SIGPIPE,
            ] {
                libc::signal(sig, libc::SIG_IGN);
            }
            let null = libc::open(c"/dev/null".as_ptr(), libc::O_RDWR);
            for std_fd in 0..3 {
                libc::dup2(null, std_fd);
            }
            let keep = 3;
            if r != keep {
                libc::dup2(r, keep);
            }
            if libc::syscall(libc::SYS_close_range, keep + 1, u32::MAX, 0) != 0 {
                for fd in keep + 1..65536 {
                    libc::close(fd);
                }
            }
            let mut groups = [0i32; WATCHDOG_GROUPS];
            let mut b = [0u8; 4];
            loop {
                let mut got = 0;
                while got < 4 {
                    let n = libc::read(keep, b.as_mut_ptr().add(got).cast(), 4 - got);
                    if n > 0 {
                        got += n as usize;
                    } else if n < 0 && *libc::__errno_location() == libc::EINTR {
                        continue;
                    } else {
                        break;
                    }
                }
                if got < 4 {
                    break; // EOF: cpudoctor is gone
                }
                let v = i32::from_ne_bytes(b);
                if v > 0 {
                    if let Some(slot) = groups.iter_mut().find(|g| **g == 0) {
                        *slot = v;
                    }
                } else if let Some(slot) = groups.iter_mut().find(|g| **g == -v) {
                    *slot = 0;
                }
            }
            for &g in groups.iter().filter(|&&g| g > 0) {
                libc::kill(-g, libc::SIGKILL);
            }
            libc::_exit(0)
        },
        _ => {
            // SAFETY: the read end is the watchdog's now.
            unsafe { libc::close(r) };
            Some(w)
        }
    }
}

/// The signals that end cpudoctor from outside: a closed terminal or dropped ssh session
/// (SIGHUP), Ctrl-C (SIGINT), Ctrl-\ (SIGQUIT), `kill`, `timeout` or a job runner (SIGTERM).
pub const FATAL_SIGNALS: [Signal; 4] = [
    Signal::SIGHUP,
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGTERM,
];

/// Write end of the signal pipe, for the handler (-1 until [`catch_fatal_signals`]).
static SIGNAL_PIPE: AtomicI32 = AtomicI32::new(-1);
/// The process that installed the handler: a forked child that inherits it (the split-lock
/// locker) must take the signal's default action, not report it as cpudoctor's.
static SIGNAL_OWNER: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_fatal_signal(sig: libc::c_int) {
    // SAFETY: getpid, signal, raise and write are async-signal-safe; errno is restored so the
    // interrupted code never sees ours.
    unsafe {
        let errno = *libc::__errno_location();
        if libc::getpid() != SIGNAL_OWNER.load(Ordering::Relaxed) {
            libc::signal(sig, libc::SIG_DFL);
            libc::raise(sig);
        } else {
            let fd = SIGNAL_PIPE.load(Ordering::Relaxed);
            let b = sig as u8;
            if fd >= 0 {
                libc::write(fd, (&b as *const u8).cast(), 1);
            }
        }
        *libc::__errno_location() = errno;
    }
}

/// The fatal signals caught since [`catch_fatal_signals`], in order of arrival.
pub struct CaughtSignals {
    read: std::fs::File,
}

impl CaughtSignals {
    /// Waits for the next one; `None` if the pipe broke (it never does while the process runs).
    pub fn wait(&mut self) -> Option<Signal> {
        let mut b = [0u8; 1];
        loop {
            match self.read.read(&mut b) {
                Ok(1) => return Signal::try_from(i32::from(b[0])).ok(),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                _ => return None,
            }
        }
    }
}

/// Catches [`FATAL_SIGNALS`] from now on: each one is written to a pipe that the caller reads
/// from a thread of its own ([`CaughtSignals::wait`]), where anything may be done (remove
/// temporary files, stop a workload, write what was recorded). Blocking calls elsewhere are
/// restarted, not failed with EINTR. Call once.
pub fn catch_fatal_signals() -> std::io::Result<CaughtSignals> {
    use nix::fcntl::OFlag;
    use nix::sys::signal::{SaFlags, SigAction, SigHandler, SigSet, sigaction};
    let (r, w) = nix::unistd::pipe2(OFlag::O_CLOEXEC)?;
    // A full pipe must never block the handler: the byte is dropped instead (the reader has
    // a signal to act on already).
    nix::fcntl::fcntl(&w, nix::fcntl::FcntlArg::F_SETFL(OFlag::O_NONBLOCK))?;
    // SAFETY: getpid has no preconditions.
    SIGNAL_OWNER.store(unsafe { libc::getpid() }, Ordering::Relaxed);
    SIGNAL_PIPE.store(std::os::fd::IntoRawFd::into_raw_fd(w), Ordering::Relaxed);
    let action = SigAction::new(
        SigHandler::Handler(on_fatal_signal),
        SaFlags::SA_RESTART,
        SigSet::empty(),
    );
    for sig in FATAL_SIGNALS {
        // SAFETY: the handler only makes async-signal-safe calls.
        unsafe { sigaction(sig, &action) }?;
    }
    Ok(CaughtSignals {
        read: std::fs::File::from(r),
    })
}

/// A process held by pidfd (one our child started, say), so that a recycled PID is never
/// signalled. Where the kernel has no pidfds (before 5.3) the PID is signalled directly.
pub struct Held {
    pid: u32,
    pidfd: Option<OwnedFd>,
}

impl Held {
    /// Holds `pid`; `None` when it is already gone.
    pub fn open(pid: u32) -> Option<Held> {
        // SAFETY: pidfd_open takes a PID and flags and returns a new fd or -1.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
        if fd >= 0 {
            // SAFETY: the kernel just returned this fd; nothing else owns it.
            let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
            return Some(Held {
                pid,
                pidfd: Some(fd),
            });
        }
        match std::io::Error::last_os_error().raw_os_error() {
            Some(libc::ENOSYS) => Some(Held { pid, pidfd: None }),
            _ => None, // already gone
        }
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Sends `how`; a process that is gone or not ours to signal is left as it is.
    pub fn signal(&self, how: Stop) {
        match &self.pidfd {
            // SAFETY: pidfd_send_signal on our own pidfd, no siginfo.
            Some(fd) => unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd.as_raw_fd(),
                    how.signal() as libc::c_int,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                );
            },
            None => {
                let _ = signal(Pid::from_raw(self.pid as i32), how);
            }
        }
    }

    /// Whether the process still runs.
    pub fn alive(&self) -> bool {
        match &self.pidfd {
            Some(fd) => {
                // A pidfd polls readable once the process has exited.
                let mut p = libc::pollfd {
                    fd: fd.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd, no wait.
                let n = unsafe { libc::poll(&mut p, 1, 0) };
                n == 0
            }
            None => kill(Pid::from_raw(self.pid as i32), None).is_ok(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::{Command, Stdio};

    fn spawn(script: &str) -> Child {
        Command::new("sh")
            .args(["-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// A child reaped by PID through the functions under test, not through `Child`.
    #[allow(clippy::zombie_processes)]
    fn start(script: &str) -> (Pid, std::process::ChildStdout) {
        let mut c = spawn(script);
        (Pid::from_raw(c.id() as i32), c.stdout.take().unwrap())
    }

    /// Long enough that no test waits for it to end on its own.
    const FOREVER: Duration = Duration::from_secs(30);

    #[test]
    fn a_child_that_exits_before_the_deadline_is_reaped_with_its_code() {
        let (pid, _out) = start("exit 3");
        let s = wait_until(pid, Instant::now() + FOREVER, Duration::from_millis(5));
        assert!(matches!(s, Some(WaitStatus::Exited(_, 3))), "{s:?}");
        // Reaped: nothing is left to wait for.
        assert_eq!(try_reap(pid), None);
        assert_eq!(
            kill(pid, None),
            Err(nix::errno::Errno::ESRCH),
            "no zombie left"
        );
    }

    #[test]
    fn a_child_still_running_at_the_deadline_is_left_running_then_killed_and_reaped() {
        let (pid, _out) = start("exec sleep 30");
        assert_eq!(
            wait_until(pid, Instant::now(), Duration::from_millis(1)),
            None
        );
        assert!(kill(pid, None).is_ok(), "still running after the deadline");
        assert!(kill_and_reap(pid));
        assert_eq!(kill(pid, None), Err(nix::errno::Errno::ESRCH), "reaped");
        // Nothing left to kill.
        assert!(!kill_and_reap(pid));
    }

    #[test]
    fn sigterm_ends_a_plain_child_and_the_status_says_so() {
        let (pid, _out) = start("exec sleep 30");
        assert!(signal(pid, Stop::Terminate));
        let s = wait_until(pid, Instant::now() + FOREVER, Duration::from_millis(5));
        assert!(
            matches!(s, Some(WaitStatus::Signaled(_, Signal::SIGTERM, _))),
            "{s:?}"
        );
    }

    #[test]
    fn a_child_that_ignores_sigterm_outlives_it_and_sigkill_ends_it() {
        // The case diagnose's grace period exists for: SIGTERM first, SIGKILL after.
        let (pid, mut out) = start("trap '' TERM; echo ready; sleep 5");
        // Wait until the trap is set, else SIGTERM could land before it.
        let mut ready = [0u8; 6];
        std::io::Read::read_exact(&mut out, &mut ready).unwrap();
        assert!(signal(pid, Stop::Terminate));
        let after_term = wait_until(
            pid,
            Instant::now() + Duration::from_millis(200),
            Duration::from_millis(5),
        );
        assert_eq!(
            after_term, None,
            "SIGTERM was ignored, the shell still runs"
        );
        assert!(signal(pid, Stop::Kill));
        let s = wait_until(pid, Instant::now() + FOREVER, Duration::from_millis(5));
        assert!(
            matches!(s, Some(WaitStatus::Signaled(_, Signal::SIGKILL, _))),
            "{s:?}"
        );
    }

    #[test]
    fn a_std_child_past_its_deadline_is_killed_and_reaped() {
        let mut c = spawn("exec sleep 30");
        let r = wait_child_until(&mut c, Instant::now(), Duration::from_millis(1)).unwrap();
        assert!(r.is_none(), "still running at the deadline");
        kill_child(&mut c);
        assert_eq!(
            kill(Pid::from_raw(c.id() as i32), None),
            Err(nix::errno::Errno::ESRCH)
        );
        let mut done = spawn("exit 0");
        let r = wait_child_until(
            &mut done,
            Instant::now() + FOREVER,
            Duration::from_millis(5),
        );
        assert!(r.unwrap().is_some_and(|s| s.success()));
    }

    #[test]
    fn reaping_with_usage_reports_the_exit() {
        let (pid, _out) = start("exit 7");
        let deadline = Instant::now() + FOREVER;
        let got = loop {
            if let Some(r) = try_reap_with_usage(pid) {
                break Some(r);
            }
            if Instant::now() > deadline {
                break None;
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        assert!(matches!(got, Some((WaitStatus::Exited(_, 7), _))));
    }

    #[test]
    fn a_held_process_is_seen_alive_then_gone_after_a_kill() {
        let mut c = spawn("exec sleep 30");
        let held = Held::open(c.id()).unwrap();
        assert_eq!(held.pid(), c.id());
        assert!(held.alive());
        held.signal(Stop::Kill);
        let _ = c.wait();
        assert!(!held.alive());
    }
}
