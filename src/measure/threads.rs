//! Threads that may not start. `std::thread::spawn` panics when the kernel refuses a thread
//! (EAGAIN under a cgroup's pids limit or `RLIMIT_NPROC`, ENOMEM under `RLIMIT_AS`); a probe
//! must say `skipped` and why instead. Every thread a probe starts goes through here, and a
//! probe whose threads wait for each other (a barrier, a ping-pong) first checks with
//! [`check_can_start`] that all of them can be alive at once, so a refusal half-way never
//! leaves a started thread waiting for one that never came.

use std::io;
use std::sync::mpsc;
use std::thread::{Builder, JoinHandle, Scope, ScopedJoinHandle};

/// The kernel refused a thread.
#[derive(Debug, thiserror::Error)]
#[error("cannot start a thread: {0}")]
pub struct ThreadError(#[from] pub io::Error);

impl ThreadError {
    /// Whether a limit on tasks refused it (EAGAIN: a pids limit or `RLIMIT_NPROC`), rather
    /// than memory for its stack (ENOMEM).
    pub fn is_task_limit(&self) -> bool {
        self.0.raw_os_error() == Some(libc::EAGAIN)
    }
}

/// Starts `f` on a new thread of scope `s`.
pub fn spawn_scoped<'scope, 'env, T, F>(
    s: &'scope Scope<'scope, 'env>,
    f: F,
) -> Result<ScopedJoinHandle<'scope, T>, ThreadError>
where
    F: FnOnce() -> T + Send + 'scope,
    T: Send + 'scope,
{
    Ok(Builder::new().spawn_scoped(s, f)?)
}

/// Starts `f` on a new thread.
pub fn spawn<T, F>(f: F) -> Result<JoinHandle<T>, ThreadError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    Ok(Builder::new().spawn(f)?)
}

/// Whether `n` more threads can be alive at once now: starts them, each waiting until the
/// last has started (or one was refused), then lets them end.
pub fn check_can_start(n: usize) -> Result<(), ThreadError> {
    let (release, wait) = mpsc::channel::<()>();
    let wait = std::sync::Arc::new(std::sync::Mutex::new(wait));
    let mut started = Vec::with_capacity(n);
    let mut refused = None;
    for _ in 0..n {
        let wait = wait.clone();
        match Builder::new().stack_size(64 << 10).spawn(move || {
            // Ends when the sender is dropped: every thread sees the channel close.
            let _ = wait.lock().map(|w| w.recv());
        }) {
            Ok(h) => started.push(h),
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    drop(release);
    for h in started {
        let _ = h.join();
    }
    match refused {
        Some(e) => Err(ThreadError(e)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_few_threads_can_start_here() {
        check_can_start(4).unwrap();
        let h = spawn(|| 7).unwrap();
        assert_eq!(h.join().unwrap(), 7);
        let v = std::thread::scope(|s| spawn_scoped(s, || 8).unwrap().join().unwrap());
        assert_eq!(v, 8);
    }

    #[test]
    fn a_task_limit_is_told_from_a_memory_one() {
        let again = ThreadError(io::Error::from_raw_os_error(libc::EAGAIN));
        assert!(again.is_task_limit());
        assert!(!ThreadError(io::Error::from_raw_os_error(libc::ENOMEM)).is_task_limit());
        assert!(
            again.to_string().starts_with("cannot start a thread: "),
            "{again}"
        );
    }
}
