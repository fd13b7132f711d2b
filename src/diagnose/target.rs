//! The workload: a command diagnose starts, or a running process it attaches to.
//!
//! A started command is forked and held before `execve` until the sampling events are open
//! on it (with `enable_on_exec`), so its first instruction is already followed, as
//! `perf record -- CMD` does. `std::process::Command` cannot be used for this: its `spawn`
//! waits for the exec to happen, which a child held before exec never does.

use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
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

/// A forked child held before `execve`.
pub struct Launched {
    /// The child's PID (also its TID until it starts threads).
    pub pid: Pid,
    go: Option<OwnedFd>,
    exec_error: OwnedFd,
    program: String,
}

/// Forks a child that waits, then execs `argv`. With `stdout_to_stderr` the child's output
/// goes to stderr, so that a JSON report on stdout stays clean.
pub fn launch(argv: &[String], stdout_to_stderr: bool) -> Result<Launched, TargetError> {
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
    let (go_r, go_w) = pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| cannot(e.to_string()))?;
    let (err_r, err_w) = pipe2(nix::fcntl::OFlag::O_CLOEXEC).map_err(|e| cannot(e.to_string()))?;
    // SAFETY: the child only calls read, dup2, execv, write and _exit, all async-signal-safe,
    // on memory allocated before the fork.
    match unsafe { fork() }.map_err(|e| cannot(e.to_string()))? {
        ForkResult::Child => unsafe {
            let mut b = 0u8;
            let n = libc::read(go_r.as_raw_fd(), (&mut b as *mut u8).cast(), 1);
            if n != 1 {
                libc::_exit(127);
            }
            if stdout_to_stderr {
                libc::dup2(2, 1);
            }
            libc::execv(c_path.as_ptr(), c_argv.as_ptr());
            let errno = *libc::__errno_location();
            libc::write(err_w.as_raw_fd(), (&errno as *const i32).cast(), 4);
            libc::_exit(127);
        },
        ForkResult::Parent { child } => {
            drop(go_r);
            drop(err_w);
            Ok(Launched {
                pid: child,
                go: Some(go_w),
                exec_error: err_r,
                program,
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
                let _ = waitpid(self.pid, None);
                Err(TargetError::CannotStart {
                    program: self.program.clone(),
                    reason: std::io::Error::from_raw_os_error(i32::from_ne_bytes(buf)).to_string(),
                })
            }
            _ => Ok(()),
        }
    }

    /// Kills a child that never got released (events could not be opened).
    pub fn abandon(mut self) {
        drop(self.go.take()); // the child reads EOF and exits 127
        let _ = waitpid(self.pid, None);
    }

    /// The child's exit, if it has exited: reaps it and returns its resource usage.
    pub fn try_wait(&self) -> Option<(WaitStatus, libc::rusage)> {
        let mut status = 0;
        // SAFETY: rusage is plain data filled by the kernel.
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: wait4 on our own child with valid out-pointers.
        let r = unsafe {
            libc::wait4(
                self.pid.as_raw(),
                &mut status,
                WaitPidFlag::WNOHANG.bits(),
                &mut usage,
            )
        };
        if r == self.pid.as_raw() {
            WaitStatus::from_raw(self.pid, status)
                .ok()
                .map(|s| (s, usage))
        } else {
            None
        }
    }

    /// Asks the child to stop (at the end of `--duration`).
    pub fn terminate(&self, hard: bool) {
        let _ = kill(
            self.pid,
            if hard {
                Signal::SIGKILL
            } else {
                Signal::SIGTERM
            },
        );
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
}
