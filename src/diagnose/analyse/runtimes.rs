//! What runtimes' own lock code looks like in a profile: the functions in which HotSpot,
//! glibc, Go, .NET, Rust's std and parking_lot spin or wait for a lock, as data, joined with
//! each runtime's spin policy from [`crate::spin::runtimes`], so a finding can name the
//! runtime, the lock (the lock-entry function and the caller above it in the stack), what the
//! spin costs at this CPU's PAUSE, and that runtime's own remedy, never another's.

use crate::spin::runtimes::{POSTGRESQL_S_LOCK, RUNTIMES, SpinCost, SpinPolicy, spin_cost};
use crate::words::findings::runtimes as words;

/// A runtime with lock code diagnose knows.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Runtime {
    /// The HotSpot JVM's monitors (`synchronized`).
    #[serde(rename = "hotspot")]
    HotSpot,
    /// glibc's pthread mutexes.
    Glibc,
    /// Go's runtime and `sync.Mutex`.
    Go,
    /// .NET's `Monitor` (`lock`).
    Dotnet,
    /// Rust std's futex mutex.
    RustStd,
    /// The parking_lot crate.
    ParkingLot,
    /// PostgreSQL's spinlocks (`s_lock`, buffer headers, LWLock wait lists).
    #[serde(rename = "postgresql")]
    PostgreSql,
    /// InnoDB's lock spin (MariaDB's srw_lock waits, MySQL's `ut_delay`): known by name where
    /// symbols exist, else from the code ([`super::innodb`]).
    #[serde(rename = "innodb")]
    InnoDb,
}

/// What a known function does in the lock's slow path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Spins (PAUSE or plain loads) hoping the holder lets go.
    Spin,
    /// Blocks or yields in the kernel.
    Wait,
    /// Takes the lock: the frame that says which lock is waited for.
    Enter,
}

/// How a function name is matched.
#[derive(Debug, Clone, Copy)]
enum Name {
    Exact(&'static str),
    Prefix(&'static str),
    Contains(&'static str),
}

impl Name {
    fn matches(self, f: &str) -> bool {
        match self {
            Name::Exact(n) => f == n,
            Name::Prefix(n) => f.starts_with(n),
            Name::Contains(n) => f.contains(n),
        }
    }
}

/// A known lock function.
struct Known {
    runtime: Runtime,
    name: Name,
    role: Role,
}

use Name::{Contains, Exact, Prefix};
use Role::{Enter, Spin, Wait};
use Runtime::{Dotnet, Glibc, Go, HotSpot, InnoDb, ParkingLot, PostgreSql, RustStd};

/// The table. Names as the symbol tables spell them (C++ demangled without parameters
/// matched by prefix; Go's as its symbol table writes them, with and without the
/// `internal/sync` move of Go 1.24).
const KNOWN: &[Known] = &[
    // HotSpot: ObjectMonitor spins on plain loads with a SpinPause() every few iterations,
    // then parks (JDK 17: TrySpin; later JDKs renamed it try_spin / spin_enter).
    k(HotSpot, Prefix("ObjectMonitor::TrySpin"), Spin),
    k(HotSpot, Prefix("ObjectMonitor::try_spin"), Spin),
    k(HotSpot, Prefix("ObjectMonitor::spin_enter"), Spin),
    k(HotSpot, Prefix("ObjectMonitor::short_fixed_spin"), Spin),
    k(HotSpot, Exact("SpinPause"), Spin),
    k(HotSpot, Prefix("ObjectMonitor::EnterI"), Wait),
    k(HotSpot, Prefix("ObjectMonitor::ReenterI"), Wait),
    k(HotSpot, Prefix("ObjectMonitor::enter"), Enter),
    k(HotSpot, Prefix("ObjectSynchronizer::enter"), Enter),
    k(
        HotSpot,
        Prefix("SharedRuntime::complete_monitor_locking"),
        Enter,
    ),
    // glibc: the adaptive mutex spins inside pthread_mutex_lock, then sleeps in the futex.
    k(Glibc, Exact("pthread_mutex_lock"), Enter),
    k(Glibc, Exact("___pthread_mutex_lock"), Enter),
    k(Glibc, Exact("__pthread_mutex_lock"), Enter),
    k(Glibc, Prefix("__lll_lock_wait"), Wait),
    k(Glibc, Prefix("__pthread_mutex_lock_full"), Enter),
    // Go: procyield is the PAUSE loop, lockSlow the sync.Mutex slow path, lock2 the runtime's
    // own lock.
    k(Go, Prefix("runtime.procyield"), Spin),
    k(Go, Contains("sync.runtime_doSpin"), Spin),
    k(Go, Contains("sync.(*Mutex).lockSlow"), Enter),
    k(Go, Contains("sync.(*RWMutex).Lock"), Enter),
    k(Go, Exact("runtime.lock2"), Enter),
    k(Go, Contains("sync.runtime_SemacquireMutex"), Wait),
    k(Go, Exact("runtime.osyield"), Wait),
    k(Go, Exact("runtime.futex"), Wait),
    // .NET: the Skylake case's functions.
    k(Dotnet, Prefix("AwareLock::Contention"), Spin),
    k(Dotnet, Prefix("AwareLock::SpinWait"), Spin),
    k(Dotnet, Prefix("ThreadNative::SpinWait"), Spin),
    k(Dotnet, Prefix("YieldProcessorNormalized"), Spin),
    k(Dotnet, Prefix("JIT_MonEnterWorker"), Enter),
    k(Dotnet, Prefix("JIT_MonEnter"), Enter),
    // Rust std's futex mutex (paths of std 1.62+, before and after the sys::sync move).
    k(RustStd, Contains("mutex::futex::Mutex::spin"), Spin),
    k(RustStd, Contains("futex_mutex::Mutex::spin"), Spin),
    k(
        RustStd,
        Contains("mutex::futex::Mutex::lock_contended"),
        Enter,
    ),
    k(
        RustStd,
        Contains("futex_mutex::Mutex::lock_contended"),
        Enter,
    ),
    // parking_lot.
    k(
        ParkingLot,
        Contains("parking_lot_core::spinwait::SpinWait::spin"),
        Spin,
    ),
    k(
        ParkingLot,
        Contains("parking_lot::raw_mutex::RawMutex::lock_slow"),
        Enter,
    ),
    k(
        ParkingLot,
        Contains("parking_lot_core::parking_lot::park"),
        Wait,
    ),
    // PostgreSQL: s_lock (the SpinLockAcquire slow path) and perform_spin_delay spin with
    // SPIN_DELAY (PAUSE, inlined from spin_delay), then pg_usleep. The functions that take a
    // spinlock themselves say which: a buffer header, an LWLock's wait list, WAL insertion.
    k(PostgreSql, Exact("s_lock"), Spin),
    k(PostgreSql, Exact("perform_spin_delay"), Spin),
    k(PostgreSql, Exact("spin_delay"), Spin),
    k(PostgreSql, Exact("LockBufHdr"), Enter),
    k(PostgreSql, Exact("WaitBufHdrUnlocked"), Enter),
    k(PostgreSql, Exact("LWLockWaitListLock"), Enter),
    k(PostgreSql, Exact("ReserveXLogInsertLocation"), Enter),
    // InnoDB, where symbols exist (a debug package, a MySQL build): MariaDB 10.6+ spins in the
    // spinning instances of its srw_lock waits (srw_lock.cc), MySQL and older MariaDB in
    // ut_delay under the mutex and rw-lock spin. Stripped builds are recognised from the code.
    k(InnoDb, Prefix("srw_mutex_impl<true>::wait_and_lock"), Spin),
    k(InnoDb, Prefix("srw_mutex_impl<true>::wr_wait"), Spin),
    k(InnoDb, Prefix("ssux_lock_impl<true>::wr_wait"), Spin),
    k(InnoDb, Prefix("ssux_lock_impl<true>::rd_wait"), Spin),
    k(InnoDb, Prefix("ssux_lock_impl<true>::read_lock"), Spin),
    k(InnoDb, Prefix("ssux_lock_impl<true>::update_lock"), Spin),
    k(InnoDb, Prefix("srw_lock_<true>::"), Spin),
    k(InnoDb, Prefix("ut_delay"), Spin),
    k(InnoDb, Contains("::spin_and_try_lock"), Spin),
    k(InnoDb, Prefix("rw_lock_s_lock_spin"), Spin),
    k(InnoDb, Prefix("srw_mutex_impl<false>::wait_and_lock"), Wait),
    k(InnoDb, Prefix("ssux_lock_impl<false>::"), Wait),
    k(InnoDb, Prefix("sync_array_wait_event"), Wait),
    k(InnoDb, Prefix("rw_lock_x_lock_func"), Enter),
];

const fn k(runtime: Runtime, name: Name, role: Role) -> Known {
    Known {
        runtime,
        name,
        role,
    }
}

/// Runtime functions whose work is one load of shared memory, known by their names because
/// their code is no short leaf to judge: V8's Atomics.load builtin checks the typed array's
/// kind, the index and detachment around one `mov`, in ~2 KiB with calls on its slow paths.
/// Called in a loop, it is the loop's re-read. Names as node's symbol table and its perf map
/// (`--perf-basic-prof`) spell them; what each is, for a reader.
const LOAD_FUNCTIONS: &[(Name, &str)] = &[
    (Exact("Builtins_AtomicsLoad"), "V8's Atomics.load"),
    (Exact("Builtin:AtomicsLoad"), "V8's Atomics.load"),
];

/// What a runtime's load function is (`V8's Atomics.load`), when the table knows its name.
pub fn load_function(function: &str) -> Option<&'static str> {
    LOAD_FUNCTIONS
        .iter()
        .find(|(name, _)| name.matches(function))
        .map(|(_, what)| *what)
}

/// The runtime and role of a function name, when the table knows it.
pub fn classify(function: &str) -> Option<(Runtime, Role)> {
    KNOWN
        .iter()
        .find(|k| k.name.matches(function))
        .map(|k| (k.runtime, k.role))
}

impl Runtime {
    /// The runtime's name for a reader.
    pub fn name(self) -> &'static str {
        match self {
            HotSpot => "HotSpot",
            Glibc => "glibc",
            Go => "Go",
            Dotnet => ".NET",
            RustStd => "Rust std",
            ParkingLot => "parking_lot",
            PostgreSql => "PostgreSQL",
            InnoDb => "InnoDB",
        }
    }

    /// The lock it spins for.
    pub fn lock(self) -> &'static str {
        match self {
            HotSpot => "Java monitor (synchronized)",
            Glibc => "pthread mutex",
            Go => "sync.Mutex / runtime lock",
            Dotnet => "Monitor (lock)",
            RustStd => "std::sync::Mutex",
            ParkingLot => "parking_lot::Mutex",
            PostgreSql => "spinlock (s_lock)",
            InnoDb => "lock spin (srw_mutex, ssux_lock, ut_delay)",
        }
    }

    /// Its spin policy in the spin model; none for InnoDB, whose spin is set by the server's
    /// knobs (its cost comes from the values read, [`super::innodb::InnodbSpin`]).
    pub fn policy(self) -> Option<&'static SpinPolicy> {
        let key = match self {
            PostgreSql => return Some(&POSTGRESQL_S_LOCK),
            InnoDb => return None,
            HotSpot => "HotSpot",
            Glibc => "glibc",
            Go => "Go",
            // The Skylake case's runtime: the legacy count is what spins for too long.
            Dotnet => ".NET legacy",
            RustStd => "Rust std",
            ParkingLot => "parking_lot",
        };
        RUNTIMES.iter().find(|p| p.runtime == key)
    }

    /// What the spin costs at `pause_ns` per PAUSE on `cores` cores.
    pub fn spin_cost(self, pause_ns: f64, cores: u64) -> Option<SpinCost> {
        self.policy().map(|p| spin_cost(p, pause_ns, cores))
    }

    /// This runtime's own remedy and knobs.
    pub fn remedy(self) -> &'static str {
        match self {
            HotSpot => words::HOTSPOT_REMEDY,
            Glibc => words::GLIBC_REMEDY,
            Go => words::GO_REMEDY,
            Dotnet => words::DOTNET_REMEDY,
            RustStd => words::RUST_STD_REMEDY,
            ParkingLot => words::PARKING_LOT_REMEDY,
            PostgreSql => words::POSTGRESQL_REMEDY,
            InnoDb => words::INNODB_REMEDY,
        }
    }
}

/// The runtime lock seen in a call stack (function names, leaf first): the runtime, the
/// lock-entry function, and the first caller outside the runtime's lock code (the user's
/// function waiting for the lock).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockInStack {
    /// The runtime.
    pub runtime: Runtime,
    /// Where the lock is taken (`sync.(*Mutex).lockSlow`, `ObjectMonitor::enter`).
    pub enter: Option<String>,
    /// The caller that waits for it.
    pub waiter: Option<String>,
}

/// Reads a stack (names, leaf first) for a runtime's lock code.
pub fn lock_in_stack<'a>(names: impl IntoIterator<Item = &'a str>) -> Option<LockInStack> {
    let mut found: Option<LockInStack> = None;
    for name in names {
        match (classify(name), &mut found) {
            (Some((rt, role)), None) => {
                found = Some(LockInStack {
                    runtime: rt,
                    enter: (role == Enter).then(|| name.to_string()),
                    waiter: None,
                });
            }
            (Some((rt, role)), Some(l)) if rt == l.runtime => {
                if role == Enter && l.enter.is_none() {
                    l.enter = Some(name.to_string());
                }
            }
            (_, Some(l)) => {
                if !is_runtime_plumbing(l.runtime, name) {
                    l.waiter = Some(name.to_string());
                    break;
                }
            }
            (None, None) => {}
        }
    }
    found
}

/// Frames between a lock's code and its user that are the runtime's own: the JVM's stubs
/// and interpreter, Go's sync wrappers.
fn is_runtime_plumbing(rt: Runtime, name: &str) -> bool {
    match rt {
        HotSpot => {
            !name.contains('(')
                || name.starts_with("Runtime1")
                || name.contains("Stub")
                || name.starts_with("SharedRuntime::")
                || name.starts_with("ObjectSynchronizer::")
                || name.starts_with("InterpreterRuntime::")
        }
        Go => name == "sync.(*Mutex).Lock" || name == "internal/sync.(*Mutex).Lock",
        _ => false,
    }
}

/// What a sleeping thread waits for, as the code it sleeps in says.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum WaitKind {
    /// A lock another thread holds: time lost to contention.
    Lock,
    /// A park that may be a lock or a queue (`LockSupport.park`): the caller says which.
    Park,
    /// A condition, semaphore or join: waiting for another thread's work.
    Condition,
    /// Waiting for a client's next request.
    Client,
    /// A thread with nothing to do: a pool, scheduler or event loop waiting for work.
    Idle,
    /// A timed sleep.
    Sleep,
}

impl WaitKind {
    /// One word for a table.
    pub fn word(self) -> &'static str {
        match self {
            WaitKind::Lock => "lock",
            WaitKind::Park => "park",
            WaitKind::Condition => "condition",
            WaitKind::Client => "client",
            WaitKind::Idle => "idle",
            WaitKind::Sleep => "sleep",
        }
    }

    /// Which kind says most when a stack holds several: a lock over the condition variable
    /// it sleeps on, a client read over the event loop it waits in.
    fn rank(self) -> u8 {
        match self {
            WaitKind::Lock => 5,
            WaitKind::Park => 4,
            WaitKind::Client => 3,
            WaitKind::Condition => 2,
            WaitKind::Sleep => 1,
            WaitKind::Idle => 0,
        }
    }
}

/// A wait function some runtime or server is known by.
struct KnownWait {
    /// Whose code: `glibc`, `HotSpot`, `PostgreSQL`...
    owner: &'static str,
    name: Name,
    kind: WaitKind,
    /// What is waited for, in the owner's words.
    what: &'static str,
}

const fn w(owner: &'static str, name: Name, kind: WaitKind, what: &'static str) -> KnownWait {
    KnownWait {
        owner,
        name,
        kind,
        what,
    }
}

/// The C library's waits: the floor under every runtime built on it, so a runtime's own
/// entry above them in the stack says more.
const LIBC: &str = "glibc";

/// Wait functions by runtime (names as the symbol tables spell them).
const WAITS: &[KnownWait] = &[
    // glibc.
    w(
        LIBC,
        Prefix("__lll_lock_wait_private"),
        WaitKind::Lock,
        "a glibc internal lock",
    ),
    w(
        LIBC,
        Prefix("__lll_lock_wait"),
        WaitKind::Lock,
        "a pthread mutex",
    ),
    w(
        LIBC,
        Contains("pthread_mutex_lock"),
        WaitKind::Lock,
        "a pthread mutex",
    ),
    w(
        LIBC,
        Contains("pthread_rwlock_"),
        WaitKind::Lock,
        "a pthread rwlock",
    ),
    w(
        LIBC,
        Contains("pthread_cond_"),
        WaitKind::Condition,
        "a condition variable",
    ),
    w(
        LIBC,
        Contains("sem_wait"),
        WaitKind::Condition,
        "a semaphore",
    ),
    w(
        LIBC,
        Contains("sem_timedwait"),
        WaitKind::Condition,
        "a semaphore",
    ),
    w(
        LIBC,
        Contains("pthread_join"),
        WaitKind::Condition,
        "joining a thread",
    ),
    w(
        LIBC,
        Contains("pthread_clockjoin"),
        WaitKind::Condition,
        "joining a thread",
    ),
    // HotSpot.
    w(
        "HotSpot",
        Prefix("ObjectMonitor::EnterI"),
        WaitKind::Lock,
        "a Java monitor (synchronized)",
    ),
    w(
        "HotSpot",
        Prefix("ObjectMonitor::ReenterI"),
        WaitKind::Lock,
        "a Java monitor (synchronized)",
    ),
    w(
        "HotSpot",
        Prefix("ObjectMonitor::wait"),
        WaitKind::Condition,
        "Object.wait()",
    ),
    w(
        "HotSpot",
        Prefix("JVM_MonitorWait"),
        WaitKind::Condition,
        "Object.wait()",
    ),
    w(
        "HotSpot",
        Prefix("Unsafe_Park"),
        WaitKind::Park,
        "LockSupport.park (a java.util.concurrent lock, queue or future)",
    ),
    w(
        "HotSpot",
        Prefix("Parker::park"),
        WaitKind::Park,
        "LockSupport.park (a java.util.concurrent lock, queue or future)",
    ),
    w(
        "HotSpot",
        Prefix("JVM_Sleep"),
        WaitKind::Sleep,
        "Thread.sleep",
    ),
    w(
        "HotSpot",
        Prefix("Monitor::wait"),
        WaitKind::Idle,
        "a HotSpot service thread's queue (GC, compiler, VM thread)",
    ),
    // Go: goroutines park inside the runtime; what a thread shows is the scheduler idle.
    w(
        "Go",
        Exact("runtime.stopm"),
        WaitKind::Idle,
        "the Go scheduler, with no goroutine to run",
    ),
    w(
        "Go",
        Exact("runtime.notetsleepg"),
        WaitKind::Idle,
        "a Go runtime timer or signal",
    ),
    w(
        "Go",
        Exact("runtime.netpoll"),
        WaitKind::Idle,
        "Go's network poller",
    ),
    w(
        "Go",
        Exact("runtime.usleep"),
        WaitKind::Sleep,
        "the Go runtime's sysmon",
    ),
    w(
        "Go",
        Exact("runtime.lock2"),
        WaitKind::Lock,
        "a Go runtime lock",
    ),
    // PostgreSQL.
    w(
        "PostgreSQL",
        Exact("ProcSleep"),
        WaitKind::Lock,
        "a heavyweight lock (Lock:* in pg_stat_activity: a row, tuple or transaction)",
    ),
    w(
        "PostgreSQL",
        Exact("LWLockAcquire"),
        WaitKind::Lock,
        "an LWLock (LWLock:* in pg_stat_activity)",
    ),
    w(
        "PostgreSQL",
        Exact("LWLockAcquireOrWait"),
        WaitKind::Lock,
        "an LWLock (LWLock:* in pg_stat_activity)",
    ),
    w(
        "PostgreSQL",
        Exact("LWLockWaitForVar"),
        WaitKind::Lock,
        "an LWLock (LWLock:* in pg_stat_activity)",
    ),
    w(
        "PostgreSQL",
        Exact("pg_usleep"),
        WaitKind::Sleep,
        "pg_usleep (a spinlock's back-off, or a delay)",
    ),
    w(
        "PostgreSQL",
        Exact("secure_read"),
        WaitKind::Client,
        "the client's next command (Client:ClientRead)",
    ),
    w(
        "PostgreSQL",
        Exact("WaitEventSetWait"),
        WaitKind::Idle,
        "its latch (an idle server process)",
    ),
    // InnoDB, where symbols exist.
    w(
        "InnoDB",
        Prefix("srw_mutex_impl<"),
        WaitKind::Lock,
        "an InnoDB srw_lock (a page latch, lock_sys or trx_sys mutex)",
    ),
    w(
        "InnoDB",
        Prefix("ssux_lock_impl<"),
        WaitKind::Lock,
        "an InnoDB srw_lock (a page latch, lock_sys or trx_sys mutex)",
    ),
    w(
        "InnoDB",
        Prefix("sync_array_wait_event"),
        WaitKind::Lock,
        "an InnoDB mutex or rw-lock (sync array)",
    ),
    w(
        "InnoDB",
        Prefix("lock_wait"),
        WaitKind::Lock,
        "an InnoDB row lock (innodb_lock_wait_timeout)",
    ),
    // CPython.
    w(
        "CPython",
        Exact("take_gil"),
        WaitKind::Lock,
        "the GIL (global interpreter lock)",
    ),
    w(
        "CPython",
        Prefix("PyThread_acquire_lock"),
        WaitKind::Lock,
        "a threading.Lock",
    ),
    w("CPython", Exact("pysleep"), WaitKind::Sleep, "time.sleep"),
    // Rust.
    w(
        "Rust std",
        Contains("futex::Mutex>::lock_contended"),
        WaitKind::Lock,
        "a std::sync::Mutex",
    ),
    w(
        "Rust std",
        Contains("futex::Mutex::lock_contended"),
        WaitKind::Lock,
        "a std::sync::Mutex",
    ),
    w(
        "Rust std",
        Contains("futex::Condvar>::wait"),
        WaitKind::Condition,
        "a std::sync::Condvar",
    ),
    w(
        "Rust std",
        Contains("futex::Condvar::wait"),
        WaitKind::Condition,
        "a std::sync::Condvar",
    ),
    w(
        "parking_lot",
        Contains("parking_lot::raw_mutex::RawMutex::lock_slow"),
        WaitKind::Lock,
        "a parking_lot::Mutex",
    ),
    w(
        "parking_lot",
        Contains("parking_lot_core::parking_lot::park"),
        WaitKind::Park,
        "parking_lot (a lock or condvar)",
    ),
];

/// A known wait found in a sleeping thread's stack.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct WaitInStack {
    /// Whose code (`glibc`, `HotSpot`, `PostgreSQL`...).
    pub owner: String,
    /// What kind of wait.
    pub kind: WaitKind,
    /// What is waited for, in the owner's words.
    pub what: String,
    /// The function that says so.
    pub function: String,
    /// The first caller outside the owner's wait code: who waits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiter: Option<String>,
}

/// Reads a sleeping thread's stack (names, leaf first) for a known wait: a runtime's or
/// server's own entry beats the C library's under it, then the kind that says most
/// ([`WaitKind::rank`]), then the innermost. The waiter is the first frame after it that no
/// wait entry and no runtime plumbing claims.
pub fn wait_in_stack<'a>(names: impl IntoIterator<Item = &'a str>) -> Option<WaitInStack> {
    let names: Vec<&str> = names.into_iter().collect();
    let found = names
        .iter()
        .enumerate()
        .filter_map(|(i, n)| WAITS.iter().find(|k| k.name.matches(n)).map(|k| (i, k)))
        .max_by_key(|(i, k)| (k.owner != LIBC, k.kind.rank(), std::cmp::Reverse(*i)))?;
    let (at, k) = found;
    // A park under java.util.concurrent's lock classes is a lock (ReentrantLock,
    // ReentrantReadWriteLock, ...); under a queue or a future it stays a park.
    let juc_lock = k.kind == WaitKind::Park
        && k.owner == "HotSpot"
        && names[at..]
            .iter()
            .any(|n| JUC_LOCK_CLASSES.iter().any(|c| n.contains(c)));
    let candidates: Vec<&str> = names[at + 1..]
        .iter()
        .copied()
        .filter(|n| {
            !WAITS.iter().any(|k| k.name.matches(n))
                && classify(n).is_none()
                && !is_wait_plumbing(k.owner, n)
        })
        .collect();
    // A function with a name says more than one a stripped binary's CFI bounds
    // (`postgres@0x45d8a0`), when one comes within a few frames.
    let unnamed = |n: &str| n.is_empty() || n.contains("@0x");
    // CPython's frames between the GIL and the Python code are the interpreter's own
    // (`_PyEval_EvalFrameDefault`, `method_vectorcall`...): the waiting Python function is not
    // in a native stack without a perf map, so no caller is named rather than the interpreter.
    let waiter = (k.owner != "CPython")
        .then(|| {
            candidates
                .iter()
                .take(NAMED_WAITER_REACH)
                .find(|n| !unnamed(n))
                .or(candidates.first())
                .map(|n| n.to_string())
        })
        .flatten();
    Some(WaitInStack {
        owner: k.owner.to_string(),
        kind: if juc_lock { WaitKind::Lock } else { k.kind },
        what: if juc_lock {
            "a java.util.concurrent lock (ReentrantLock and its kin)".to_string()
        } else {
            k.what.to_string()
        },
        function: names[at].to_string(),
        waiter,
    })
}

/// Frames past the wait looked through for a named waiter before an unnamed one is taken.
const NAMED_WAITER_REACH: usize = 3;

/// java.util.concurrent's lock package, as HotSpot's perf map names its methods: its frames
/// are the lock's plumbing between a park and the code that waits.
const JUC_LOCKS: &str = "java.util.concurrent.locks.";
/// Its lock classes (a latch or semaphore parks through the same package, and is no lock).
const JUC_LOCK_CLASSES: &[&str] = &[
    "java.util.concurrent.locks.ReentrantLock",
    "java.util.concurrent.locks.ReentrantReadWriteLock",
    "java.util.concurrent.locks.StampedLock",
];

/// Frames between a wait and the code that asked for it that belong to the runtime.
fn is_wait_plumbing(owner: &str, name: &str) -> bool {
    match owner {
        "HotSpot" => {
            is_runtime_plumbing(HotSpot, name)
                || name.starts_with("Unsafe_")
                || name.contains("jdk.internal.misc.Unsafe.park")
                || name.contains(JUC_LOCKS)
        }
        "Go" => name.starts_with("runtime."),
        "CPython" => name.starts_with("_Py") || name.starts_with("PyEval_") || name == "drop_gil",
        "PostgreSQL" => matches!(
            name,
            "WaitLatch"
                | "WaitLatchOrSocket"
                | "WaitEventSetWait"
                | "WaitEventSetWaitBlock"
                | "PGSemaphoreLock"
                | "LockAcquire"
                | "LockAcquireExtended"
                | "XactLockTableWait"
                | "secure_read"
                | "pq_recvbuf"
                | "pq_getbyte"
        ),
        _ => name.starts_with("__") || name.starts_with("pthread_") || name.starts_with("___"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_runtime_has_a_spin_policy_and_its_own_remedy() {
        for rt in [HotSpot, Glibc, Go, Dotnet, RustStd, ParkingLot, PostgreSql] {
            assert!(rt.policy().is_some(), "{rt:?} has no spin policy");
            let others = [
                ("GOMAXPROCS", Go),
                ("mutex_spin_count", Glibc),
                ("LongAdder", HotSpot),
                (".NET Core 3.0", Dotnet),
                ("PgBouncer", PostgreSql),
            ];
            for (word, owner) in others {
                assert!(
                    owner == rt || !rt.remedy().contains(word),
                    "{rt:?}'s remedy speaks of {word}"
                );
            }
        }
        let go = Go.spin_cost(40.0, 8).unwrap();
        assert_eq!(go.spin_ns, 120.0 * 40.0);
    }

    #[test]
    fn a_go_stack_names_the_lock_and_the_users_function() {
        let stack = [
            "runtime.procyield",
            "sync.(*Mutex).lockSlow",
            "sync.(*Mutex).Lock",
            "main.incrementShared",
            "main.main.func1",
        ];
        let l = lock_in_stack(stack).unwrap();
        assert_eq!(l.runtime, Go);
        assert_eq!(l.enter.as_deref(), Some("sync.(*Mutex).lockSlow"));
        assert_eq!(l.waiter.as_deref(), Some("main.incrementShared"));
    }

    #[test]
    fn a_hotspot_stack_skips_stubs_to_the_java_method() {
        let stack = [
            "ObjectMonitor::TrySpin(JavaThread*)",
            "ObjectMonitor::enter(JavaThread*)",
            "ObjectSynchronizer::enter(Handle, BasicLock*, JavaThread*)",
            "SharedRuntime::complete_monitor_locking_C(oopDesc*, BasicLock*, JavaThread*)",
            "_complete_monitor_locking_Java",
            "void Contended.increment()",
        ];
        let l = lock_in_stack(stack).unwrap();
        assert_eq!(l.runtime, HotSpot);
        assert_eq!(
            l.enter.as_deref(),
            Some("ObjectMonitor::enter(JavaThread*)")
        );
        assert_eq!(l.waiter.as_deref(), Some("void Contended.increment()"));
        assert_eq!(classify("__lll_lock_wait"), Some((Glibc, Wait)));
        assert_eq!(lock_in_stack(["main", "start"]), None);
    }

    #[test]
    fn a_sleeping_threads_stack_names_the_wait_the_runtime_knows_over_the_libc_under_it() {
        // A glibc mutex waiter: the user's function is the waiter.
        let w = wait_in_stack([
            "__lll_lock_wait",
            "___pthread_mutex_lock",
            "worker",
            "start_thread",
        ])
        .unwrap();
        assert_eq!((w.owner.as_str(), w.kind), ("glibc", WaitKind::Lock));
        assert_eq!(w.waiter.as_deref(), Some("worker"));
        // PostgreSQL's heavyweight lock sleeps on its latch in epoll: the lock says most.
        let w = wait_in_stack([
            "epoll_wait",
            "WaitEventSetWait",
            "WaitLatch",
            "ProcSleep",
            "WaitOnLock",
            "LockAcquireExtended",
            "XactLockTableWait",
            "heapam_tuple_lock",
            "ExecUpdate",
        ])
        .unwrap();
        assert_eq!((w.owner.as_str(), w.kind), ("PostgreSQL", WaitKind::Lock));
        assert_eq!(w.function, "ProcSleep");
        assert_eq!(w.waiter.as_deref(), Some("WaitOnLock"));
        // Debian's postgres is stripped of its static functions: WaitOnLock is unnamed, and
        // the first named caller past the lock's plumbing says more.
        let w = wait_in_stack([
            "epoll_wait",
            "WaitEventSetWait",
            "WaitLatch",
            "ProcSleep",
            "postgres@0x45d8a0",
            "LockAcquireExtended",
            "XactLockTableWait",
            "heap_update",
        ])
        .unwrap();
        assert_eq!(w.waiter.as_deref(), Some("heap_update"));
        // An LWLock over glibc's semaphore.
        let w = wait_in_stack([
            "do_futex_wait",
            "__new_sem_wait_slow64",
            "PGSemaphoreLock",
            "LWLockAcquire",
            "XLogFlush",
        ])
        .unwrap();
        assert_eq!(w.function, "LWLockAcquire");
        assert_eq!(w.waiter.as_deref(), Some("XLogFlush"));
        // An idle backend waits for its client, not a lock.
        let w = wait_in_stack([
            "epoll_wait",
            "WaitEventSetWait",
            "secure_read",
            "pq_recvbuf",
            "PostgresMain",
        ])
        .unwrap();
        assert_eq!(w.kind, WaitKind::Client);
        assert_eq!(w.waiter.as_deref(), Some("PostgresMain"));
        // A JVM park over pthread_cond_wait is the park, waited for by the Java method.
        let w = wait_in_stack([
            "__futex_abstimed_wait_common",
            "___pthread_cond_wait",
            "Parker::park(bool, long)",
            "Unsafe_Park",
            "void jdk.internal.misc.Unsafe.park(boolean, long)",
            "void java.util.concurrent.locks.LockSupport.park(java.lang.Object)",
        ])
        .unwrap();
        assert_eq!((w.owner.as_str(), w.kind), ("HotSpot", WaitKind::Park));
        assert_eq!(w.waiter, None, "only the JDK's own frames above it");
        // The same park under ReentrantLock is a lock, waited for by the user's method.
        let w = wait_in_stack([
            "___pthread_cond_wait",
            "Parker::park(bool, long)",
            "Unsafe_Park",
            "void jdk.internal.misc.Unsafe.park(boolean, long)",
            "void java.util.concurrent.locks.LockSupport.park(java.lang.Object)",
            "int java.util.concurrent.locks.AbstractQueuedSynchronizer.acquire(...)",
            "void java.util.concurrent.locks.ReentrantLock.lock()",
            "void Counter.increment()",
        ])
        .unwrap();
        assert_eq!(w.kind, WaitKind::Lock);
        assert_eq!(w.waiter.as_deref(), Some("void Counter.increment()"));
        assert_eq!(wait_in_stack(["read", "main"]), None);
    }

    #[test]
    fn a_postgresql_spinlock_stack_names_the_buffer_header_and_the_function_that_pins_it() {
        // The shape of PostgreSQL 15's buffer-header spin (bufmgr.c, s_lock.c).
        let stack = [
            "perform_spin_delay",
            "LockBufHdr",
            "ReadBuffer_common",
            "ReadBufferExtended",
            "heapam_index_fetch_tuple",
        ];
        let l = lock_in_stack(stack).unwrap();
        assert_eq!(l.runtime, PostgreSql);
        assert_eq!(l.enter.as_deref(), Some("LockBufHdr"));
        assert_eq!(l.waiter.as_deref(), Some("ReadBuffer_common"));
        assert_eq!(classify("s_lock"), Some((PostgreSql, Spin)));
        let c = PostgreSql.spin_cost(40.0, 2).unwrap();
        assert_eq!(c.spin_ns, 100.0 * 40.0);
    }
}
