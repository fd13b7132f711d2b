//! A split-lock loop in a child process, started and stopped on command.
//!
//! Where the kernel traps split locks, the locking task may sleep 10 ms per trap
//! (`kernel.split_lock_mitigate=1`), be rate-limited (`split_lock_detect=ratelimit:N`) or be
//! killed with SIGBUS (`split_lock_detect=fatal`). None of that may land on cpudoctor itself,
//! so the locking runs in a forked child, and what the parent sees (ops per second, or the
//! signal that ended the child) is the kernel's mitigation as measured. The noisy-neighbour
//! probe uses the same child as its aggressor in every mode, so the path is exercised on
//! machines without detection too.
//!
//! The same child times split locks one by one on command ([`Locker::time_ops`], through
//! [`super::per_op`]), so where the kernel traps, the per-op times show its mitigation (a mode
//! near 10 ms for the sleep) without cpudoctor itself being trapped.
//!
//! Parent and child talk through one shared anonymous mapping: the parent writes a command
//! word, the child answers with its state and running totals, and leaves per-op times in the
//! mapping's tail. After `fork` the child calls only
//! async-signal-safe functions (prctl, affinity, clock, nanosleep, `_exit`) and inline
//! assembly; it never allocates, since another thread of the parent may have held the
//! allocator's lock.
//!
//! A child that outlived cpudoctor (Ctrl-C, a crash, `kill -9`) would bus-lock a shared host
//! forever, so it asks the kernel for SIGKILL when its parent dies (`PR_SET_PDEATHSIG`, through
//! [`crate::process::die_with_parent`], as every SIGKILL cpudoctor arranges goes through there),
//! checks right after that the parent had not already gone (the race between `fork` and the
//! `prctl`), and while idle looks at `getppid` too. The death signal follows the *thread*
//! that forked; a [`Locker`] is not `Send`, so it lives and dies on that thread.

use super::per_op::{Block, context_switches};
use crate::measure::Clock;
use crate::measure::SPLIT_OFFSET;
use crate::measure::clock::monotonic_ns;
use crate::process;
use nix::sys::wait::WaitStatus;
use nix::unistd::{ForkResult, Pid, fork};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Most split locks one [`Locker::time_ops`] block may time: where the kernel sleeps 10 ms
/// per trap and then lets split locks through for two ticks, the time budget, not the count,
/// must end a block (a ~1 us bus lock fills 16384 in ~16 ms).
pub const MAX_TIMED_OPS: usize = 16384;
/// The header page of the shared mapping: command, state, totals, the locked block.
const HEADER_BYTES: usize = 4096;
const MAP_BYTES: usize = HEADER_BYTES + MAX_TIMED_OPS * 8;
// Word offsets in the shared mapping, one line each so the parent's polling does not share a
// line with the counters the child writes.
const CMD: usize = 0;
const STATE: usize = 64;
const OPS: usize = 128;
const LOCK_NS: usize = 192;
/// A 128-byte-aligned block; the child locks the 8 bytes at `SPLIT_OFFSET` in it.
const TARGET_BLOCK: usize = 256;
/// Split locks per burst between looks at the command word.
const BATCH: usize = 512;
/// Parameters and results of a timed block: most ops, budget in clock ticks, ops timed,
/// context switches meanwhile.
const TIME_MAX_OPS: usize = 576;
const TIME_BUDGET_TICKS: usize = 640;
const TIMED_OPS: usize = 704;
const TIMED_VOLUNTARY: usize = 768;
const TIMED_INVOLUNTARY: usize = 832;
const TIMED_ELAPSED_TICKS: usize = 896;
/// Where the per-op ticks of a timed block start.
const TICKS: usize = HEADER_BYTES;

const CMD_IDLE: u64 = 0;
const CMD_LOCK: u64 = 1;
const CMD_EXIT: u64 = 2;
const CMD_TIME: u64 = 3;
const STATE_STARTING: u64 = 0;
const STATE_IDLE: u64 = 1;
const STATE_LOCKING: u64 = 2;
const STATE_PIN_FAILED: u64 = 3;
const STATE_TIMED: u64 = 4;
/// How long the child waits for the scheduler to move it onto its CPU after setting its
/// affinity (the same bound `measure::pin_to_cpu` uses).
const PIN_DEADLINE_NS: u64 = 100_000_000;

/// How long the parent waits for the child to answer a command. A trapped split lock with
/// `split_lock_mitigate=1` takes ~10 ms, and a timed block is tens of ms, so two seconds are
/// generous.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);
/// How long a dropped locker's child gets to exit on command before it is killed.
const EXIT_GRACE: Duration = Duration::from_millis(200);

/// How the child ended, when it did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChildEnd {
    /// It exited with this code.
    Exited(i32),
    /// A signal ended it (`SIGBUS` under `split_lock_detect=fatal`).
    Signaled(String),
    /// It stopped answering and was killed.
    Unresponsive,
}

impl std::fmt::Display for ChildEnd {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ChildEnd::Exited(code) => write!(f, "exited with code {code}"),
            ChildEnd::Signaled(sig) => write!(f, "killed by {sig}"),
            ChildEnd::Unresponsive => write!(f, "stopped answering and was killed"),
        }
    }
}

/// Running totals of the child's locking.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LockTotals {
    /// Split locks executed so far.
    pub ops: u64,
    /// Nanoseconds spent in locking phases so far.
    pub locking_ns: f64,
}

impl LockTotals {
    /// Time per split lock over the span between `earlier` and `self`; `None` when no lock
    /// completed in between.
    pub fn ns_per_op_since(&self, earlier: &LockTotals) -> Option<f64> {
        let ops = self.ops.checked_sub(earlier.ops)?;
        (ops > 0).then(|| (self.locking_ns - earlier.locking_ns) / ops as f64)
    }
}

/// The child process and its shared page.
pub struct Locker {
    pid: Pid,
    page: *mut u8,
    ended: std::cell::RefCell<Option<ChildEnd>>,
}

impl Locker {
    fn word(&self, offset: usize) -> &AtomicU64 {
        // SAFETY: the page is mapped for the Locker's lifetime; offsets are aligned words.
        unsafe { AtomicU64::from_ptr(self.page.add(offset).cast()) }
    }

    /// Forks a child pinned to `cpu` that waits for [`Locker::start`]; each locking burst is
    /// `batch` split locks between looks at the command word. `clock` times the child's
    /// per-op blocks.
    pub fn spawn(cpu: usize, batch: u64, clock: &Clock) -> Result<Locker, String> {
        if cpu >= libc::CPU_SETSIZE as usize {
            return Err(format!(
                "CPU {cpu} is beyond what an affinity mask can name"
            ));
        }
        // SAFETY: a fresh anonymous shared mapping; checked for failure below.
        let page = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                MAP_BYTES,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if page == libc::MAP_FAILED {
            return Err(format!("mmap: {}", std::io::Error::last_os_error()));
        }
        let page = page.cast::<u8>();
        // SAFETY: in the fresh mapping, an aligned word.
        unsafe { AtomicU64::from_ptr(page.add(BATCH).cast()) }
            .store(batch.max(1), Ordering::Relaxed);
        let clock = clock.clone();
        let parent = nix::unistd::getpid();
        // SAFETY: the child runs only async-signal-safe code (see `child_main`).
        match unsafe { fork() } {
            Err(e) => {
                // SAFETY: mapped above, not shared with anyone.
                unsafe { libc::munmap(page.cast(), MAP_BYTES) };
                Err(format!("fork: {e}"))
            }
            Ok(ForkResult::Child) => child_main(page, cpu, &clock, parent.as_raw()),
            Ok(ForkResult::Parent { child }) => {
                let locker = Locker {
                    pid: child,
                    page,
                    ended: Default::default(),
                };
                match locker.wait_state(|s| s != STATE_STARTING)? {
                    STATE_PIN_FAILED => Err(format!(
                        "the locking child could not be pinned to CPU {cpu}"
                    )),
                    _ => Ok(locker),
                }
            }
        }
    }

    /// The child's process id.
    #[cfg(test)]
    pub fn pid(&self) -> Pid {
        self.pid
    }

    /// Whether the child has ended, and how (`None` while it runs).
    pub fn poll_end(&self) -> Option<ChildEnd> {
        if self.ended.borrow().is_none()
            && let Some(status) = process::try_reap(self.pid)
        {
            self.record_end(status);
        }
        self.ended.borrow().clone()
    }

    fn record_end(&self, status: WaitStatus) {
        let end = match status {
            WaitStatus::Exited(_, code) => ChildEnd::Exited(code),
            WaitStatus::Signaled(_, sig, _) => ChildEnd::Signaled(sig.as_str().to_string()),
            _ => return,
        };
        *self.ended.borrow_mut() = Some(end);
    }

    /// Waits until the child's state satisfies `done`, or it ends, or it stops answering.
    fn wait_state(&self, done: impl Fn(u64) -> bool) -> Result<u64, String> {
        let deadline = Instant::now() + ANSWER_TIMEOUT;
        loop {
            let s = self.word(STATE).load(Ordering::Acquire);
            if done(s) {
                return Ok(s);
            }
            if let Some(end) = self.poll_end() {
                return Err(format!("the locking child {end}"));
            }
            if Instant::now() > deadline {
                process::kill_and_reap(self.pid);
                *self.ended.borrow_mut() = Some(ChildEnd::Unresponsive);
                return Err(format!("the locking child {}", ChildEnd::Unresponsive));
            }
            std::thread::sleep(Duration::from_micros(50));
        }
    }

    /// Starts the split-lock loop; returns once the child is locking.
    pub fn start(&self) -> Result<(), String> {
        self.word(CMD).store(CMD_LOCK, Ordering::Release);
        self.wait_state(|s| s == STATE_LOCKING).map(|_| ())
    }

    /// Stops the loop; returns the totals once the child is idle. An error carries how the
    /// child ended when it did not survive (SIGBUS under `split_lock_detect=fatal`).
    pub fn stop(&self) -> Result<LockTotals, String> {
        self.word(CMD).store(CMD_IDLE, Ordering::Release);
        self.wait_state(|s| s == STATE_IDLE)?;
        Ok(self.totals())
    }

    /// Split locks per burst from the next burst on (the child reads it between bursts).
    pub fn set_batch(&self, batch: u64) {
        self.word(BATCH).store(batch.max(1), Ordering::Relaxed);
    }

    /// Times up to `max_ops` (at most [`MAX_TIMED_OPS`]) split locks one by one in the child,
    /// stopping once `budget` is spent, and returns them with the child's context switches
    /// meanwhile. The child must be idle. An error carries how the child ended when it did
    /// not survive (SIGBUS under `split_lock_detect=fatal`).
    pub fn time_ops(
        &self,
        clock: &Clock,
        max_ops: usize,
        budget: Duration,
    ) -> Result<Block, String> {
        let max_ops = max_ops.clamp(1, MAX_TIMED_OPS);
        let budget_ticks = (budget.as_nanos() as f64 / clock.ns_per_tick()) as u64;
        self.word(TIME_MAX_OPS)
            .store(max_ops as u64, Ordering::Relaxed);
        self.word(TIME_BUDGET_TICKS)
            .store(budget_ticks, Ordering::Relaxed);
        self.word(CMD).store(CMD_TIME, Ordering::Release);
        let timed = self.wait_state(|s| s == STATE_TIMED);
        self.word(CMD).store(CMD_IDLE, Ordering::Release);
        timed?;
        let n = (self.word(TIMED_OPS).load(Ordering::Acquire) as usize).min(max_ops);
        let block = Block {
            per_op_ns: (0..n)
                .map(|i| clock.ticks_to_ns(self.word(TICKS + 8 * i).load(Ordering::Relaxed)))
                .collect(),
            voluntary_switches: self.word(TIMED_VOLUNTARY).load(Ordering::Relaxed),
            involuntary_switches: self.word(TIMED_INVOLUNTARY).load(Ordering::Relaxed),
            elapsed_ns: clock.ticks_to_ns(self.word(TIMED_ELAPSED_TICKS).load(Ordering::Relaxed)),
        };
        self.wait_state(|s| s == STATE_IDLE)?;
        Ok(block)
    }

    /// The child's running count of split locks, for sampling alongside other work (it
    /// advances once per batch).
    pub fn ops_counter(&self) -> &AtomicU64 {
        self.word(OPS)
    }

    /// The running totals as last published by the child.
    pub fn totals(&self) -> LockTotals {
        LockTotals {
            ops: self.word(OPS).load(Ordering::Acquire),
            locking_ns: self.word(LOCK_NS).load(Ordering::Acquire) as f64,
        }
    }
}

impl Drop for Locker {
    fn drop(&mut self) {
        if self.poll_end().is_none() {
            self.word(CMD).store(CMD_EXIT, Ordering::Release);
            let deadline = Instant::now() + EXIT_GRACE;
            match process::wait_until(self.pid, deadline, Duration::from_micros(200)) {
                Some(status) => self.record_end(status),
                None => {
                    process::kill_and_reap(self.pid);
                }
            }
        }
        // SAFETY: mapped in `spawn`; the child is gone.
        unsafe { libc::munmap(self.page.cast(), MAP_BYTES) };
    }
}

/// The child: tie its life to the parent's, pin, then obey the command word until told to
/// exit.
fn child_main(page: *mut u8, cpu: usize, clock: &Clock, parent: libc::pid_t) -> ! {
    // SAFETY (whole function): `page` is the shared mapping, inherited across fork; only
    // async-signal-safe calls follow, and the process leaves through `_exit`.
    unsafe {
        let word = |off: usize| AtomicU64::from_ptr(page.add(off).cast());
        // Killed with the parent; and if the parent died before the prctl took, the child has
        // already been reparented, so leave now.
        process::die_with_parent();
        let orphaned = || libc::getppid() != parent;
        if orphaned() {
            libc::_exit(4);
        }
        // Rust's runtime handles SIGBUS to report stack overflows; the child wants the plain
        // default, so the kernel's SIGBUS for a split lock ends it at once.
        libc::signal(libc::SIGBUS, libc::SIG_DFL);
        if !pin_self(cpu) {
            word(STATE).store(STATE_PIN_FAILED, Ordering::Release);
            libc::_exit(3);
        }
        let target = page.add(TARGET_BLOCK + SPLIT_OFFSET);
        let mut ops = 0u64;
        let mut locking_ns = 0u64;
        let mut burst_start = 0u64;
        let mut state;
        macro_rules! set_state {
            ($s:expr) => {{
                state = $s;
                word(STATE).store(state, Ordering::Release);
            }};
        }
        set_state!(STATE_IDLE);
        loop {
            match word(CMD).load(Ordering::Acquire) {
                CMD_LOCK => {
                    if state != STATE_LOCKING {
                        burst_start = monotonic_ns();
                        set_state!(STATE_LOCKING);
                    }
                    let batch = word(BATCH).load(Ordering::Relaxed).max(1);
                    split_lock_add(target, batch);
                    ops += batch;
                    word(OPS).store(ops, Ordering::Release);
                }
                CMD_TIME if state != STATE_TIMED => {
                    let max = (word(TIME_MAX_OPS).load(Ordering::Relaxed) as usize)
                        .clamp(1, MAX_TIMED_OPS);
                    let budget = word(TIME_BUDGET_TICKS).load(Ordering::Relaxed);
                    let ticks = std::slice::from_raw_parts_mut(page.add(TICKS).cast::<u64>(), max);
                    let (v0, i0) = context_switches(libc::RUSAGE_SELF);
                    let (n, elapsed) = time_split_locks(clock, target, ticks, budget);
                    let (v1, i1) = context_switches(libc::RUSAGE_SELF);
                    word(TIMED_ELAPSED_TICKS).store(elapsed, Ordering::Relaxed);
                    word(TIMED_VOLUNTARY).store(v1.saturating_sub(v0), Ordering::Relaxed);
                    word(TIMED_INVOLUNTARY).store(i1.saturating_sub(i0), Ordering::Relaxed);
                    word(TIMED_OPS).store(n as u64, Ordering::Relaxed);
                    set_state!(STATE_TIMED);
                }
                CMD_IDLE | CMD_TIME => {
                    if state == STATE_LOCKING {
                        locking_ns += monotonic_ns() - burst_start;
                        word(LOCK_NS).store(locking_ns, Ordering::Release);
                        word(OPS).store(ops, Ordering::Release);
                    }
                    if state != STATE_IDLE && word(CMD).load(Ordering::Acquire) == CMD_IDLE {
                        set_state!(STATE_IDLE);
                    }
                    if orphaned() {
                        libc::_exit(4);
                    }
                    let pause = libc::timespec {
                        tv_sec: 0,
                        tv_nsec: 200_000,
                    };
                    libc::nanosleep(&pause, std::ptr::null_mut());
                }
                _ => libc::_exit(0),
            }
        }
    }
}

/// Times split locks one by one (see [`super::per_op::time_split_locks`]); only x86-64 has
/// them here.
///
/// # Safety
/// As for `arch::lock_add_loop`.
unsafe fn time_split_locks(
    clock: &Clock,
    target: *mut u8,
    ticks: &mut [u64],
    budget: u64,
) -> (usize, u64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: forwarded from the caller.
    unsafe {
        super::per_op::time_split_locks(clock, target, ticks, budget)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (clock, target, ticks, budget);
        // SAFETY: `_exit` is async-signal-safe; a panic after fork is not.
        unsafe { libc::_exit(5) }
    }
}

/// `count` split locks on `target`. Only x86-64 has them here; elsewhere the probes skip
/// before a locker is spawned.
///
/// # Safety
/// As for `arch::lock_add_loop`.
unsafe fn split_lock_add(target: *mut u8, count: u64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: forwarded from the caller.
    unsafe {
        crate::arch::lock_add_loop(target, count)
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (target, count);
        // SAFETY: `_exit` is async-signal-safe; a panic after fork is not.
        unsafe { libc::_exit(5) }
    }
}

/// Pins the calling (child) process to `cpu` and waits until it runs there, as
/// `measure::pin_to_cpu` does, without allocating: true once it does.
fn pin_self(cpu: usize) -> bool {
    // SAFETY: plain system calls on a stack-local mask.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return false;
        }
        let deadline = monotonic_ns() + PIN_DEADLINE_NS;
        while libc::sched_getcpu() != cpu as libc::c_int {
            if monotonic_ns() > deadline {
                return false;
            }
            libc::sched_yield();
        }
        true
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;
    use nix::sys::signal::{Signal, kill};

    fn test_clock() -> Clock {
        Clock::clock_gettime("test".into())
    }

    #[test]
    fn child_locks_on_command_and_reports_totals() {
        let cpu = *crate::measure::allowed_cpus().last().unwrap();
        let l = Locker::spawn(cpu, 16, &test_clock()).unwrap();
        let before = l.totals();
        assert_eq!(before.ops, 0);
        l.start().unwrap();
        std::thread::sleep(Duration::from_millis(20));
        let after = l.stop().unwrap();
        assert!(after.ops > 0, "no split lock ran");
        let ns = after.ns_per_op_since(&before).unwrap();
        // A split lock takes between a few ns and a 10 ms trap; anything else is a bug.
        assert!(ns > 1.0 && ns < 20e6, "{ns} ns per split lock");
        // Idle: the count stays put.
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(l.totals().ops, after.ops);
    }

    #[test]
    fn the_child_times_split_locks_one_by_one_and_locks_again_after() {
        let cpu = *crate::measure::allowed_cpus().last().unwrap();
        let clock = test_clock();
        let l = Locker::spawn(cpu, 1, &clock).unwrap();
        let b = l.time_ops(&clock, 100, Duration::from_secs(1)).unwrap();
        assert_eq!(b.per_op_ns.len(), 100);
        assert!(b.per_op_ns.iter().sum::<f64>() > 0.0);
        assert!(b.per_op_ns.iter().all(|&ns| ns < 1e9), "{:?}", b.per_op_ns);
        // A spent budget ends the block after one op.
        let b = l.time_ops(&clock, 100, Duration::ZERO).unwrap();
        assert_eq!(b.per_op_ns.len(), 1);
        l.set_batch(4);
        l.start().unwrap();
        std::thread::sleep(Duration::from_millis(5));
        assert!(l.stop().unwrap().ops > 0);
    }

    #[test]
    fn a_child_killed_by_sigbus_is_reported_as_such() {
        // What `split_lock_detect=fatal` does to the locker, delivered by hand.
        let cpu = *crate::measure::allowed_cpus().last().unwrap();
        let l = Locker::spawn(cpu, 16, &test_clock()).unwrap();
        l.start().unwrap();
        kill(l.pid(), Signal::SIGBUS).unwrap();
        // Delivery to a process running on another CPU is not instant.
        let deadline = Instant::now() + Duration::from_secs(2);
        while l.poll_end().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let err = l.stop().unwrap_err();
        assert!(err.contains("SIGBUS"), "{err}");
        assert_eq!(l.poll_end(), Some(ChildEnd::Signaled("SIGBUS".into())));
    }

    #[test]
    fn a_timed_block_in_a_child_killed_by_sigbus_says_so() {
        // What split_lock_detect=fatal does to the per-op timing, delivered by hand.
        let cpu = *crate::measure::allowed_cpus().last().unwrap();
        let clock = test_clock();
        let l = Locker::spawn(cpu, 1, &clock).unwrap();
        kill(l.pid(), Signal::SIGBUS).unwrap();
        let deadline = Instant::now() + Duration::from_secs(2);
        while l.poll_end().is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        let err = l
            .time_ops(&clock, 10, Duration::from_millis(10))
            .unwrap_err();
        assert!(err.contains("SIGBUS"), "{err}");
    }

    #[test]
    fn pinning_outside_the_mask_is_an_error() {
        assert!(Locker::spawn(1 << 20, 1, &test_clock()).is_err());
    }
}
