//! The handoff run inside cpudoctor, for any lock with a condition variable: Rust's std
//! `Mutex`/`Condvar` ([`StdMonitor`]) and the model lock (`model_lock::ModelMonitor`).
//!
//! Same shape as the programs in `runtimes/handoff/`: a worker processes each item for
//! `work_ms` of busy work while holding the lock; a sender adds an item under the lock,
//! notifies all, releases, and busy-waits `delay_ms`. CPU time while waiting comes from the
//! per-thread CPU clock (`CLOCK_THREAD_CPUTIME_ID`).

use super::format::{RunRecord, WaitCpu};
use crate::measure::clock::{process_cpu_ns, thread_cpu_ns};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Barrier, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// A lock with a condition variable, as the handoff uses it (a Java monitor, a .NET
/// `Monitor`, a pthread mutex with its condition).
pub trait Monitor: Sync {
    /// Proof the lock is held; releasing it releases the lock.
    type Guard<'a>
    where
        Self: 'a;
    /// Acquires the lock.
    fn enter(&self) -> Self::Guard<'_>;
    /// Releases the lock, waits for a notification, re-acquires the lock. May wake
    /// spuriously; callers re-check their condition.
    fn wait<'a>(&'a self, guard: Self::Guard<'a>) -> Self::Guard<'a>;
    /// Wakes every waiter. Called with the lock held.
    fn notify_all(&self);
}

/// Rust's std `Mutex` and `Condvar` (futex-based on Linux: a short spin, then `futex_wait`).
#[derive(Default)]
pub struct StdMonitor {
    lock: Mutex<()>,
    cond: Condvar,
}

impl Monitor for StdMonitor {
    type Guard<'a> = MutexGuard<'a, ()>;
    fn enter(&self) -> MutexGuard<'_, ()> {
        self.lock.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn wait<'a>(&'a self, guard: MutexGuard<'a, ()>) -> MutexGuard<'a, ()> {
        self.cond.wait(guard).unwrap_or_else(|e| e.into_inner())
    }
    fn notify_all(&self) {
        self.cond.notify_all();
    }
}

/// Busy work for `ms` of wall time, as the seed's `SimulateWork`: the thread keeps its CPU.
/// Saturating: NaN or a negative is no work, and a duration beyond the clock's range spins
/// until stopped rather than panicking in a worker (which left the other waiting forever).
pub fn busy_ms(ms: f64) {
    let d = Duration::try_from_secs_f64(ms / 1e3).unwrap_or(if ms > 0.0 {
        Duration::MAX
    } else {
        Duration::ZERO
    });
    let end = Instant::now().checked_add(d);
    while end.is_none_or(|e| Instant::now() < e) {
        std::hint::black_box(());
    }
}

/// Counters the two threads share. `pending` is only touched with the monitor held; atomics
/// keep the compiler honest without adding ordering the lock does not already give.
#[derive(Default)]
struct Shared {
    pending: AtomicU64,
    completed: AtomicU64,
}

/// Runs the handoff once on `monitor` (fresh state: a new monitor per run).
pub fn run_once<M: Monitor>(
    monitor: &M,
    items: u64,
    work_ms: f64,
    delay_ms: f64,
    rep: u32,
) -> RunRecord {
    let shared = Shared::default();
    let start = Barrier::new(2);
    let process0 = process_cpu_ns();
    // Each thread stamps its own start and end: on a busy machine the spawning thread may get
    // a CPU late, and its stamps would cut the run short.
    let ((w_start, w_end, worker_cpu), (s_start, s_end, lock_wait, sender_cpu)) =
        std::thread::scope(|s| {
            let worker = s.spawn(|| {
                start.wait();
                let t0 = Instant::now();
                let mut wait_cpu = 0;
                while shared.completed.load(Ordering::Relaxed) < items {
                    let cpu0 = thread_cpu_ns();
                    let mut g = monitor.enter();
                    while shared.pending.load(Ordering::Relaxed) == 0 {
                        g = monitor.wait(g);
                    }
                    wait_cpu += thread_cpu_ns().saturating_sub(cpu0);
                    let n = shared.pending.swap(0, Ordering::Relaxed);
                    for _ in 0..n {
                        busy_ms(work_ms); // under the lock, as in the seed
                        shared.completed.fetch_add(1, Ordering::Relaxed);
                    }
                    drop(g);
                }
                (t0, Instant::now(), wait_cpu)
            });
            let sender = s.spawn(|| {
                start.wait();
                let t0 = Instant::now();
                let (mut lock_wait, mut wait_cpu) = (Duration::ZERO, 0);
                for _ in 0..items {
                    let cpu0 = thread_cpu_ns();
                    let w0 = Instant::now();
                    let g = monitor.enter();
                    lock_wait += w0.elapsed();
                    wait_cpu += thread_cpu_ns().saturating_sub(cpu0);
                    shared.pending.fetch_add(1, Ordering::Relaxed);
                    monitor.notify_all();
                    drop(g);
                    busy_ms(delay_ms);
                }
                (t0, Instant::now(), lock_wait, wait_cpu)
            });
            (
                worker.join().expect("worker thread"),
                sender.join().expect("sender thread"),
            )
        });
    let process_cpu = process_cpu_ns().saturating_sub(process0);
    let wall = w_end.max(s_end) - w_start.min(s_start);
    RunRecord {
        delay_ms,
        rep,
        items,
        work_ms,
        items_done: shared.completed.load(Ordering::Relaxed),
        wall_ns: wall.as_nanos() as u64,
        sender_lock_wait_ns: lock_wait.as_nanos() as u64,
        wait_cpu: WaitCpu::PerThread {
            sender_ns: sender_cpu,
            worker_ns: worker_cpu,
        },
        process_cpu_ns: process_cpu,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn std_handoff_processes_every_item_and_takes_at_least_the_work() {
        let r = run_once(&StdMonitor::default(), 5, 1.0, 0.2, 0);
        assert_eq!(r.items_done, 5);
        assert_eq!((r.items, r.delay_ms, r.work_ms), (5, 0.2, 1.0));
        // The work is busy wall time under the lock: 5 x 1 ms cannot take less than 5 ms.
        assert!(r.wall_ns >= 5_000_000, "{}", r.wall_ns);
        assert!(r.process_cpu_ns > 0);
    }

    #[test]
    fn busy_ms_waits_at_least_the_time() {
        let t = Instant::now();
        busy_ms(2.0);
        assert!(t.elapsed() >= Duration::from_millis(2));
        // The extremes end at once instead of panicking.
        for ms in [f64::NAN, -1.0, 0.0, f64::NEG_INFINITY] {
            busy_ms(ms);
        }
    }
}
