//! The workload: a command diagnose starts, or a running process it attaches to.
//!
//! A started command is forked and held before `execve` until the sampling events are open
//! on it (with `enable_on_exec`), so its first instruction is already followed, as
//! `perf record -- CMD` does. `std::process::Command` cannot be used for this: its `spawn`
//! waits for the exec to happen, which a child held before exec never does.
//!
//! A started command is diagnose's to stop: at the end of `--duration`, on Ctrl-C or SIGTERM,
//! and when diagnose itself fails or panics ([`Launched`]'s `Drop`), the command *and every
//! process it started* are signalled. The descendants are known from the sampler's fork
//! records (which follow daemons that leave the process group, unlike a group kill) and held
//! as pidfds, so a recycled PID is never signalled. The command stays in diagnose's process
//! group and keeps the terminal: an interactive command reads it as usual. The command itself
//! dies with diagnose even when diagnose is killed by SIGKILL (`PR_SET_PDEATHSIG`); the
//! processes it started then are its own to stop.

use crate::process::{self, Held, Stop};
use nix::sys::wait::WaitStatus;
use nix::unistd::{ForkResult, Pid, fork, pipe2};
use std::ffi::CString;
use std::fs;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

/// Why a command could not be started or a process attached to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TargetError {
    /// The program was not found or could not be executed.
    CannotStart {
        /// The command as given.
        program: String,
        /// Why, in words.
        reason: String,
    },
    /// No process with that PID.
    NoSuchProcess(i32),
    /// The process belongs to another user.
    NotOwner {
        /// The PID.
        pid: i32,
        /// Its owner's uid.
        uid: u32,
    },
}

/// Finds `program` as `execvp` would: a path when it contains a slash, else the first
/// executable file of that name in `PATH`.
pub fn resolve_program(program: &str, path_var: Option<&str>) -> Result<PathBuf, TargetError> {
    let cannot = |reason: &str| TargetError::CannotStart {
        program: program.to_string(),
        reason: reason.to_string(),
    };
    if program.is_empty() {
        return Err(cannot("empty command"));
    }
    if program.contains('/') {
        let p = PathBuf::from(program);
        return match fs::metadata(&p) {
            Ok(m) if m.is_file() => Ok(p),
            Ok(_) => Err(cannot("not a regular file")),
            Err(e) => Err(cannot(&e.to_string())),
        };
    }
    path_var
        .unwrap_or("/usr/local/bin:/usr/bin:/bin")
        .split(':')
        .filter(|d| !d.is_empty())
        .map(|d| Path::new(d).join(program))
        .find(|p| is_executable(p))
        .ok_or_else(|| cannot("not found in PATH"))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// A forked child held before `execve`, then the running command and the processes it
/// started. Dropping it kills all of them (unless they have exited).
pub struct Launched {
    /// The child's PID (also its TID until it starts threads).
    pub pid: Pid,
    go: Option<OwnedFd>,
    exec_error: OwnedFd,
    program: String,
    reaped: bool,
    descendants: Vec<Held>,
    /// The command's process group: it and everything it starts that stays in it.
    group: Option<process::Group>,
    /// The terminal (stdin) was handed to the command's group; taken back when it ends.
    terminal_handed: bool,
    /// The command was ended by a Ctrl-C or Ctrl-\ at the terminal it held: a stop for the
    /// whole tree, as when the signal reached diagnose.
    interrupted_at_terminal: Option<i32>,
    /// The signal sent to the tree so far, so that processes found later get it too.
    sent: Option<Stop>,
}

/// Forks a child that waits, then execs `argv`. With `stdout_to_stderr` the child's output
/// goes to stderr, so that a JSON report on stdout stays clean.
/// With `stdout_fd` (a pipe's write end, close-on-exec) its output goes there instead.
/// `env` holds variables set for the child on top of diagnose's own environment.
pub fn launch(
    argv: &[String],
    stdout_to_stderr: bool,
    stdout_fd: Option<std::os::fd::RawFd>,
    env: &[(String, String)],
) -> Result<Launched, TargetError> {
    let program = argv.first().cloned().unwrap_or_default();
    let path = resolve_program(&program, std::env::var("PATH").ok().as_deref())?;
    let cannot = |reason: String| TargetError::CannotStart {
        program: program.clone(),
        reason,
    };
    // Everything the child needs is allocated before fork: after it, the child may only make
    // async-signal-safe calls.
    let c_path = CString::new(path.as_os_str().as_bytes()).map_err(|e| cannot(e.to_string()))?;
    let c_args: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<_, _>>()
        .map_err(|e| cannot(e.to_string()))?;
    let mut c_argv: Vec<*const libc::c_char> = c_args.iter().map(|a| a.as_ptr()).collect();
    c_argv.push(std::ptr::null());
    let c_env: Vec<CString> = std::env::vars_os()
        .filter(|(k, _)| !env.iter().any(|(name, _)| k.as_bytes() == name.as_bytes()))
        .map(|(k, v)| [k.as_bytes(), b"=", v.as_bytes()].concat())
        .chain(env.iter().map(|(k, v)| format!("{k}={v}").into_bytes()))
        .map(CString::new)
        .collect::<Result<_, _>>()
        .map_err(|e| cannot(e.to_string()))?;
    let mut c_envp: Vec<*const libc::c_char> = c_env.iter().map(|a| a.as_ptr()).collect();
    c_envp.push(std::ptr::null());
    let (go_r, go_w) = pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| cannot(e.to_string()))?;
    let (err_r, err_w) = pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| cannot(e.to_string()))?;
    // SAFETY: getpid has no preconditions.
    let parent = unsafe { libc::getpid() };
    // The command leads a process group of its own (ended as a whole, by cpudoctor or by the
    // watchdog should cpudoctor be killed). When diagnose holds the terminal (stdin is one
    // and diagnose's group is in the foreground), the command's group gets it, so that it
    // reads and writes the terminal as from a shell; Ctrl-C then reaches the command, and
    // diagnose, seeing it end, keeps what was recorded.
    let hand_terminal = owns_terminal();
    // SAFETY: the child only calls prctl, getppid, setpgid, sigprocmask, tcsetpgrp, signal,
    // close, read, dup2, execve, write and _exit, all async-signal-safe, on memory allocated
    // before the fork.
    match unsafe { fork() }.map_err(|e| cannot(e.to_string()))? {
        ForkResult::Child => unsafe {
            // The command dies with diagnose, even when diagnose is killed by SIGKILL and
            // cannot stop it (the kernel ties this to the forking thread: the recording runs
            // on the main thread, which lives until the end). If diagnose died before the
            // prctl took, the child has been reparented already: leave.
            process::die_with_parent();
            if libc::getppid() != parent {
                libc::_exit(127);
            }
            libc::setpgid(0, 0);
            if hand_terminal {
                take_terminal(libc::getpgrp());
            }
            // Rust ignores SIGPIPE and execve keeps an ignored signal: the command gets the
            // default, as from a shell.
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            // The child's copy of the write end must go, or it would never read EOF when
            // diagnose gives up on it (O_CLOEXEC closes it only at the exec it is waiting for).
            libc::close(go_w.as_raw_fd());
            libc::close(err_r.as_raw_fd());
            let mut b = 0u8;
            let n = libc::read(go_r.as_raw_fd(), (&mut b as *mut u8).cast(), 1);
            if n != 1 {
                libc::_exit(127);
            }
            if let Some(fd) = stdout_fd {
                libc::dup2(fd, 1);
            } else if stdout_to_stderr {
                libc::dup2(2, 1);
            }
            libc::execve(c_path.as_ptr(), c_argv.as_ptr(), c_envp.as_ptr());
            let errno = *libc::__errno_location();
            libc::write(err_w.as_raw_fd(), (&errno as *const i32).cast(), 4);
            libc::_exit(127);
        },
        ForkResult::Parent { child } => {
            drop(go_r);
            drop(err_w);
            let group = process::Group::of_leader(child.as_raw() as u32);
            if hand_terminal {
                // SAFETY: as in the child; whichever runs first, the terminal is the group's.
                unsafe { take_terminal(group.id()) };
            }
            Ok(Launched {
                pid: child,
                go: Some(go_w),
                exec_error: err_r,
                program,
                reaped: false,
                descendants: Vec::new(),
                group: Some(group),
                terminal_handed: hand_terminal,
                interrupted_at_terminal: None,
                sent: None,
            })
        }
    }
}

impl Launched {
    /// Lets the child exec. Reports an exec failure (the error pipe closes on success).
    pub fn release(&mut self) -> Result<(), TargetError> {
        if let Some(go) = self.go.take() {
            let mut f = fs::File::from(go);
            let _ = f.write_all(&[1]);
        }
        let mut f =
            fs::File::from(
                self.exec_error
                    .try_clone()
                    .map_err(|e| TargetError::CannotStart {
                        program: self.program.clone(),
                        reason: e.to_string(),
                    })?,
            );
        let mut buf = [0u8; 4];
        match f.read(&mut buf) {
            Ok(4) => {
                let _ = process::reap(self.pid);
                self.reaped = true;
                Err(TargetError::CannotStart {
                    program: self.program.clone(),
                    reason: std::io::Error::from_raw_os_error(i32::from_ne_bytes(buf)).to_string(),
                })
            }
            _ => Ok(()),
        }
    }

    /// Gives up on a child that never got released (the events could not be opened): it
    /// reads EOF and exits without running the command; `Drop` makes sure of it.
    pub fn abandon(self) {}

    /// The command's exit, if it has exited: reaps it and returns its resource usage.
    pub fn try_wait(&mut self) -> Option<(WaitStatus, libc::rusage)> {
        if self.reaped {
            return None;
        }
        let r = process::try_reap_with_usage(self.pid);
        self.reaped = r.is_some();
        if let Some((WaitStatus::Signaled(_, sig, _), _)) = r
            && self.terminal_handed
            && matches!(
                sig,
                nix::sys::signal::Signal::SIGINT | nix::sys::signal::Signal::SIGQUIT
            )
        {
            self.interrupted_at_terminal = Some(sig as i32);
        }
        if self.reaped {
            self.give_terminal_back();
        }
        r
    }

    /// The signal (SIGINT, SIGQUIT) of a Ctrl-C or Ctrl-\ that ended the command while it held
    /// the terminal.
    pub fn interrupted_at_terminal(&self) -> Option<i32> {
        self.interrupted_at_terminal
    }

    /// Follows a process the command started (from a fork record), so that stopping the
    /// command stops it too. A process found after the stop began gets the same signal.
    pub fn adopt(&mut self, pid: u32) {
        if pid == self.pid.as_raw() as u32 || self.descendants.iter().any(|d| d.pid() == pid) {
            return;
        }
        if let Some(d) = Held::open(pid) {
            if let Some(how) = self.sent {
                d.signal(how);
            }
            self.descendants.push(d);
        }
    }

    /// Forgets a process that exited (its exit record was seen).
    pub fn forget(&mut self, pid: u32) {
        self.descendants.retain(|d| d.pid() != pid);
    }

    /// Stops following the processes the command started (it exited on its own and left
    /// them running in the background, as a shell would); returns how many still run. Their
    /// process group is left to them too: neither diagnose's end nor the watchdog kills it.
    pub fn leave_running(&mut self) -> usize {
        let alive = self.descendants_alive();
        self.descendants.clear();
        if let Some(g) = self.group.take() {
            g.leave_running();
        }
        self.give_terminal_back();
        alive
    }

    /// Takes the terminal back from the command's group, once.
    fn give_terminal_back(&mut self) {
        if std::mem::take(&mut self.terminal_handed) {
            // SAFETY: getpgrp has no preconditions; take_terminal blocks SIGTTOU around it.
            unsafe { take_terminal(libc::getpgrp()) };
        }
    }

    /// Processes the command started that are still running.
    pub fn descendants_alive(&self) -> usize {
        self.descendants.iter().filter(|d| d.alive()).count()
    }

    /// Stops the command and every process it started: SIGTERM, or SIGKILL when `hard`.
    pub fn terminate(&mut self, hard: bool) {
        let how = if hard { Stop::Kill } else { Stop::Terminate };
        self.sent = Some(how);
        if !self.reaped {
            process::signal(self.pid, how);
        }
        if let Some(g) = &self.group {
            g.signal(how);
        }
        for d in &self.descendants {
            d.signal(how);
        }
    }
}

/// Whether process `pid` is not dumpable (it called `prctl(PR_SET_DUMPABLE, 0)`, changed its
/// user ids, or runs a setuid or file-capability program): the kernel then lets only a tracer
/// with CAP_SYS_PTRACE sample it, whatever `perf_event_paranoid` says. Told from its `/proc`
/// entries, which the kernel gives to root while the process is not dumpable, though its
/// real user is another.
pub fn not_dumpable(pid: i32) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = fs::metadata(format!("/proc/{pid}/environ")) else {
        return false;
    };
    let real_uid = fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|u| u.split_whitespace().next()?.parse::<u32>().ok())
        });
    meta.uid() == 0 && real_uid.is_some_and(|u| u != 0)
}

/// Whether diagnose may hand the terminal to the command: stdin is a terminal and diagnose's
/// process group is its foreground.
fn owns_terminal() -> bool {
    // SAFETY: isatty, tcgetpgrp and getpgrp take an fd or nothing.
    unsafe { libc::isatty(0) == 1 && libc::tcgetpgrp(0) == libc::getpgrp() }
}

/// Makes `pgid` the foreground group of the terminal on stdin, with SIGTTOU blocked (a
/// background group that sets it would be stopped). Async-signal-safe.
unsafe fn take_terminal(pgid: libc::pid_t) {
    // SAFETY: sigset calls on a local set, tcsetpgrp on fd 0; all async-signal-safe.
    unsafe {
        let mut block: libc::sigset_t = std::mem::zeroed();
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut block);
        libc::sigaddset(&mut block, libc::SIGTTOU);
        libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut old);
        libc::tcsetpgrp(0, pgid);
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
    }
}

impl Drop for Launched {
    /// Diagnose started the command; whatever ends diagnose (an error, a panic) ends it too,
    /// with everything it started, rather than leaving it spinning unobserved. After a normal
    /// recording the command has exited and been reaped; descendants the recording chose to
    /// leave running (it ended on its own) were forgotten by then.
    fn drop(&mut self) {
        drop(self.go.take()); // a held child reads EOF and exits 127
        // `kill_and_reap` waits only for a child it could kill: one it may not signal
        // (setuid) might never exit, and is reaped by init once diagnose exits.
        if !self.reaped {
            process::kill_and_reap(self.pid);
        }
        for d in &self.descendants {
            d.signal(Stop::Kill);
        }
        drop(self.group.take()); // kills what is left of the group
        self.give_terminal_back();
    }
}

/// Checks that `pid` exists and that this user may trace it (same uid, or root).
pub fn check_attachable(pid: i32) -> Result<(), TargetError> {
    let status = fs::read_to_string(format!("/proc/{pid}/status"))
        .map_err(|_| TargetError::NoSuchProcess(pid))?;
    if pid <= 0 {
        return Err(TargetError::NoSuchProcess(pid));
    }
    let uid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|v| v.split_whitespace().nth(1)) // effective uid
        .and_then(|v| v.parse::<u32>().ok());
    let me = nix::unistd::geteuid().as_raw();
    match uid {
        Some(u) if me != 0 && u != me => Err(TargetError::NotOwner { pid, uid: u }),
        _ => Ok(()),
    }
}

/// A process named as the user ran it: `argv[0]`'s file name (`redis-server`), and the
/// executable when its file name differs (Debian's `redis-server` is a symlink to
/// `redis-check-rdb`, whose name the code's module carries).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ProcessName {
    /// The file name of `argv[0]` (the first word of a title the process wrote over its
    /// arguments: Redis's `/usr/bin/redis-server 127.0.0.1:6379`).
    pub name: String,
    /// The executable's path, when its file name is not `name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executable: Option<String>,
}

impl ProcessName {
    /// From the text of `/proc/PID/cmdline` and the target of `/proc/PID/exe`; `None` when
    /// the command line is empty (a kernel thread, a zombie).
    pub fn from_parts(cmdline: &[u8], exe: Option<&str>) -> Option<ProcessName> {
        let argv0 = cmdline.split(|&b| b == 0).next()?;
        let argv0 = String::from_utf8_lossy(argv0);
        let first = argv0.split_whitespace().next()?;
        let name = first.rsplit('/').next().unwrap_or(first).to_string();
        if name.is_empty() {
            return None;
        }
        let exe = exe.map(|e| e.strip_suffix(" (deleted)").unwrap_or(e));
        let executable = exe
            .filter(|e| e.rsplit('/').next() != Some(name.as_str()))
            .map(str::to_string);
        Some(ProcessName { name, executable })
    }

    /// Process `pid` now, as the user ran it.
    pub fn of(pid: u32) -> Option<ProcessName> {
        let cmdline = fs::read(format!("/proc/{pid}/cmdline")).ok()?;
        let exe = fs::read_link(format!("/proc/{pid}/exe")).ok();
        ProcessName::from_parts(&cmdline, exe.as_deref().and_then(|p| p.to_str()))
    }

    /// `redis-server (/usr/bin/redis-check-rdb)`, or the name alone.
    pub fn describe(&self) -> String {
        match &self.executable {
            Some(exe) => format!("{} ({exe})", self.name),
            None => self.name.clone(),
        }
    }
}

/// The thread ids of process `pid`.
pub fn threads_of(pid: i32) -> Vec<i32> {
    let mut tids: Vec<i32> = fs::read_dir(format!("/proc/{pid}/task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default();
    tids.sort_unstable();
    tids
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_named_as_the_user_ran_it_with_its_executable_beside() {
        // The Redis case: Debian's redis-server is a symlink to redis-check-rdb, and Redis
        // writes a title over its arguments.
        let n = ProcessName::from_parts(
            b"/usr/bin/redis-server 127.0.0.1:6379\0\0\0",
            Some("/usr/bin/redis-check-rdb"),
        )
        .unwrap();
        assert_eq!(n.name, "redis-server");
        assert_eq!(n.describe(), "redis-server (/usr/bin/redis-check-rdb)");
        // Run by its own name: nothing beside.
        let n = ProcessName::from_parts(b"postgres\0-D\0/tmp/x\0", Some("/usr/lib/pg/postgres"));
        assert_eq!(n.unwrap().describe(), "postgres");
        assert_eq!(ProcessName::from_parts(b"", None), None);
        // This test process: its own name.
        let me = ProcessName::of(std::process::id()).unwrap();
        assert!(!me.name.is_empty());
    }
    use nix::sys::signal::kill;

    #[test]
    fn programs_resolve_through_path_like_execvp() {
        assert!(resolve_program("sh", Some("/nonexistent:/bin:/usr/bin")).is_ok());
        let e = resolve_program("no-such-program-xyz", Some("/bin")).unwrap_err();
        assert!(
            matches!(e, TargetError::CannotStart { ref reason, .. } if reason.contains("PATH"))
        );
        let e = resolve_program("./no/such/file", None).unwrap_err();
        assert!(matches!(e, TargetError::CannotStart { .. }));
    }

    #[test]
    fn this_process_is_attachable_and_a_dead_pid_is_not() {
        assert!(check_attachable(std::process::id() as i32).is_ok());
        // PID numbers are below pid_max (at most 2^22), so this one never exists.
        assert_eq!(
            check_attachable(99_999_999),
            Err(TargetError::NoSuchProcess(99_999_999))
        );
        assert!(threads_of(std::process::id() as i32).contains(&(std::process::id() as i32)));
    }

    #[test]
    fn an_abandoned_child_exits_without_running_the_command() {
        // Guards the hang when the events cannot be opened: the child held its own copy of
        // the release pipe's write end, never saw EOF, and abandon() waited for it forever.
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("ran");
        let argv = [
            "sh".to_string(),
            "-c".to_string(),
            format!("touch {}", marker.display()),
        ];
        let child = launch(&argv, false, None, &[]).unwrap();
        let pid = child.pid;
        child.abandon();
        assert_eq!(kill(pid, None), Err(nix::errno::Errno::ESRCH), "reaped");
        assert!(!marker.exists(), "the command never ran");
    }

    #[test]
    fn dropping_a_started_command_kills_it_and_the_processes_it_started() {
        // Guards the leak on an error or panic during the recording.
        let argv = [
            "sh".to_string(),
            "-c".to_string(),
            "sleep 60 & sleep 60 & wait".to_string(),
        ];
        let mut child = launch(&argv, false, None, &[]).unwrap();
        child.release().unwrap();
        let root = child.pid.as_raw();
        let children_file = format!("/proc/{root}/task/{root}/children");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let grandchildren: Vec<u32> = loop {
            let v: Vec<u32> = fs::read_to_string(&children_file)
                .unwrap_or_default()
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect();
            if v.len() >= 2 || std::time::Instant::now() > deadline {
                break v;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        assert!(!grandchildren.is_empty(), "sh started nothing");
        for &g in &grandchildren {
            child.adopt(g);
        }
        assert_eq!(child.descendants_alive(), grandchildren.len());
        let probes: Vec<Held> = grandchildren
            .iter()
            .filter_map(|&g| Held::open(g))
            .collect();
        drop(child);
        assert_eq!(
            kill(Pid::from_raw(root), None),
            Err(nix::errno::Errno::ESRCH)
        );
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while probes.iter().any(Held::alive) && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert!(!probes.iter().any(Held::alive), "a sleep outlived the drop");
    }

    /// Issue 29: a non-dumpable target was blamed on "seccomp or LSM". Told apart from a
    /// dumpable one: a forked child that makes itself non-dumpable (as root, after taking
    /// another user's ids, which alone makes a process non-dumpable).
    #[test]
    fn a_non_dumpable_process_is_told_apart() {
        let root = unsafe { libc::geteuid() } == 0;
        let start = |dumpable: libc::c_ulong| -> i32 {
            // SAFETY: the child makes only async-signal-safe calls and never returns.
            match unsafe { libc::fork() } {
                0 => unsafe {
                    if root && libc::setuid(65534) != 0 {
                        libc::_exit(1);
                    }
                    libc::prctl(libc::PR_SET_DUMPABLE, dumpable, 0, 0, 0);
                    libc::pause();
                    libc::_exit(0)
                },
                pid => pid,
            }
        };
        let hidden = start(0);
        let open = start(1);
        std::thread::sleep(std::time::Duration::from_millis(200));
        let (h, o) = (not_dumpable(hidden), not_dumpable(open));
        for pid in [hidden, open] {
            process::kill_and_reap(Pid::from_raw(pid));
        }
        assert!(h, "a non-dumpable process was not seen as one");
        assert!(!o, "a dumpable process was seen as non-dumpable");
    }
}
