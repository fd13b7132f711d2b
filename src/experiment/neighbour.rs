//! The neighbours of `--neighbour`: the probes' own aggressors, run on a CPU the command does
//! not use for the whole of each of the command's runs.
//!
//! - `split-locks`: the split-lock probes' locking child ([`Locker`]), so where a kernel or
//!   host traps split locks it is that child that sleeps or dies, never cpudoctor or the
//!   user's command. Before the first run its split locks are timed one by one alone, and
//!   the split-lock probe's rule ([`crate::schema::split_lock::classify`]) says whether they
//!   are trapped; a trapped neighbour barely locks the bus, and the result says so beside
//!   the figure measured.
//! - `memory`: a thread streaming reads over a buffer four times the last-level cache (the
//!   split-lock-neighbour probe's victim buffer, the bandwidth probe's widest loads).
//! - `atomics`: a thread of back-to-back `lock xadd` on its own line (the sharing probe's
//!   loop): atomics that stay in the neighbour's cache, a control that should cost the
//!   command nothing but a share of the power budget.
//!
//! A [`Locker`] is not `Send` (its child's death signal follows the thread that forked it), so
//! a [`Neighbour`] lives and is dropped on the thread that made it.

use super::NeighbourKind;
use crate::machine::SplitLockMode;
#[cfg(target_arch = "x86_64")]
use crate::measure::buffer::{Buffer, PageKind};
use crate::measure::{Clock, pin_to_cpu};
use crate::probes::split_lock::locker::{LockTotals, Locker};
use crate::schema::split_lock::{MechanismEvidence, OpCensus, classify};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// How long the split-lock neighbour's locks are timed alone before the first run: the
/// split-lock-neighbour probe's figures (10 ms or 2000 locks).
const ALONE_PROBE: Duration = Duration::from_millis(10);
/// See [`ALONE_PROBE`].
const ALONE_PROBE_OPS: usize = 2000;

/// What a neighbour did over an arm's runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NeighbourReport {
    /// Which neighbour.
    pub kind: NeighbourKind,
    /// The CPU it ran on.
    pub cpu: usize,
    /// Split locks: the split-lock probe's rule found them trapped (by this kernel or by the
    /// host: `mechanism` says which), so the neighbour barely locked the bus.
    pub trapped: bool,
    /// Split locks: the mechanism the split-lock rule named (`bus_lock`, `trapped_by_host`,
    /// `trapped_by_kernel`, `fatal`).
    pub mechanism: Option<crate::schema::split_lock::SplitLockMechanism>,
    /// Split locks: mean ns per split lock timed alone before the runs.
    pub alone_split_lock_ns: Option<f64>,
    /// Work the neighbour did per second of the command's runs: split locks per second,
    /// bytes read per second, or locked increments per second.
    pub rate_per_s: Option<f64>,
    /// Why the neighbour stopped, if it did (the locking child killed by SIGBUS).
    pub failure: Option<String>,
}

/// A thread's aggressor loop and its stop flag.
struct Spinner {
    stop: Arc<AtomicBool>,
    exit: Arc<AtomicBool>,
    units: Arc<AtomicU64>,
    handle: Option<JoinHandle<()>>,
}

enum Aggressor {
    Locks(Locker),
    #[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
    Thread(Spinner),
}

/// A neighbour ready to run beside the command.
pub struct Neighbour {
    aggressor: Aggressor,
    report: NeighbourReport,
    /// Work counted and ns spent while running, over all runs.
    units: u64,
    ns: f64,
    started: Option<(u64, LockTotals, std::time::Instant)>,
}

/// Bytes of the memory neighbour's buffer: four times the last-level cache, as the
/// split-lock-neighbour probe's victim.
pub fn memory_bytes(llc_bytes: Option<u64>) -> usize {
    crate::probes::split_lock_neighbour::buffer_bytes(llc_bytes)
}

impl Neighbour {
    /// Prepares a `kind` neighbour on `cpu` (idle until [`Neighbour::start`]).
    pub fn new(
        kind: NeighbourKind,
        cpu: usize,
        llc_bytes: Option<u64>,
        split_lock: SplitLockMode,
        guest: bool,
        clock: &Clock,
    ) -> Result<Neighbour, String> {
        crate::arch::require_x86_64()?;
        let mut report = NeighbourReport {
            kind,
            cpu,
            trapped: false,
            mechanism: None,
            alone_split_lock_ns: None,
            rate_per_s: None,
            failure: None,
        };
        let aggressor = match kind {
            NeighbourKind::SplitLocks => {
                let locker = Locker::spawn(cpu, 8, clock)?;
                let alone = locker.time_ops(clock, ALONE_PROBE_OPS, ALONE_PROBE)?;
                let evidence = MechanismEvidence {
                    kernel: split_lock,
                    guest,
                    killed_by_sigbus: false,
                    census: Some(OpCensus::of(
                        &alone.per_op_ns,
                        alone.voluntary_switches,
                        alone.involuntary_switches,
                    )),
                    mean_ns: None,
                };
                let mechanism = classify(&evidence).map(|(m, _)| m);
                report.trapped = mechanism.is_some_and(|m| m.trapped());
                report.mechanism = mechanism;
                report.alone_split_lock_ns = alone.mean_ns();
                if report.trapped {
                    // Trapped locks take 10 us or more each: look at the command word often.
                    locker.set_batch(1);
                }
                Aggressor::Locks(locker)
            }
            #[cfg(target_arch = "x86_64")]
            NeighbourKind::Memory => Aggressor::Thread(spawn_thread(cpu, move || {
                let width = crate::arch::VectorWidth::widest();
                let buf = Buffer::allocate(memory_bytes(llc_bytes) as u64, PageKind::Thp)
                    .map_err(|e| e.to_string())?;
                const CHUNK: usize = 1 << 20;
                Ok(move |stop: &AtomicBool, units: &AtomicU64| {
                    for off in (0..=buf.len() - CHUNK).step_by(CHUNK) {
                        if stop.load(Ordering::Relaxed) {
                            return;
                        }
                        // SAFETY: the chunk lies inside the buffer, which is page aligned and
                        // a whole number of MiB.
                        unsafe {
                            crate::arch::sequential_read(buf.as_ptr().add(off), CHUNK, width, None)
                        };
                        units.fetch_add(CHUNK as u64, Ordering::Relaxed);
                    }
                })
            })?),
            #[cfg(target_arch = "x86_64")]
            NeighbourKind::Atomics => Aggressor::Thread(spawn_thread(cpu, || {
                // Its own line: 64-byte aligned, touched by nobody else.
                #[repr(align(64))]
                struct Line(u64);
                let mut line = Box::new(Line(0));
                const BATCH: u64 = 1 << 16;
                Ok(move |_stop: &AtomicBool, units: &AtomicU64| {
                    // SAFETY: an aligned word this thread owns.
                    unsafe { crate::arch::lock_xadd_loop(&mut line.0, BATCH) };
                    units.fetch_add(BATCH, Ordering::Relaxed);
                })
            })?),
            // `require_x86_64` above has already refused.
            #[cfg(not(target_arch = "x86_64"))]
            NeighbourKind::Memory | NeighbourKind::Atomics => {
                let _ = llc_bytes;
                return Err("the memory and atomics neighbours need x86-64".into());
            }
        };
        Ok(Neighbour {
            aggressor,
            report,
            units: 0,
            ns: 0.0,
            started: None,
        })
    }

    /// Starts the aggressor; returns once it runs.
    pub fn start(&mut self) -> Result<(), String> {
        let now = std::time::Instant::now();
        match &self.aggressor {
            Aggressor::Locks(l) => {
                l.start()?;
                self.started = Some((0, l.totals(), now));
            }
            Aggressor::Thread(s) => {
                s.stop.store(false, Ordering::Relaxed);
                self.started = Some((
                    s.units.load(Ordering::Relaxed),
                    LockTotals {
                        ops: 0,
                        locking_ns: 0.0,
                    },
                    now,
                ));
            }
        }
        Ok(())
    }

    /// Stops the aggressor and counts what it did meanwhile.
    pub fn stop(&mut self) -> Result<(), String> {
        let Some((units0, totals0, t0)) = self.started.take() else {
            return Ok(());
        };
        let elapsed_ns = t0.elapsed().as_nanos() as f64;
        match &self.aggressor {
            Aggressor::Locks(l) => match l.stop() {
                Ok(t) => {
                    self.units += t.ops.saturating_sub(totals0.ops);
                    self.ns += elapsed_ns;
                }
                Err(e) => {
                    self.report.failure = Some(e.clone());
                    return Err(e);
                }
            },
            Aggressor::Thread(s) => {
                self.units += s.units.load(Ordering::Relaxed).saturating_sub(units0);
                self.ns += elapsed_ns;
            }
        }
        Ok(())
    }

    /// What it did over all the runs so far.
    pub fn report(&self) -> NeighbourReport {
        let mut r = self.report.clone();
        r.rate_per_s = (self.ns > 0.0).then(|| self.units as f64 / (self.ns / 1e9));
        r
    }
}

impl Drop for Neighbour {
    fn drop(&mut self) {
        if let Aggressor::Thread(s) = &mut self.aggressor {
            s.exit.store(true, Ordering::Relaxed);
            s.stop.store(true, Ordering::Relaxed);
            if let Some(h) = s.handle.take() {
                h.thread().unpark();
                let _ = h.join();
            }
        }
    }
}

/// A thread pinned to `cpu` that runs `make` once (allocating what it needs; its error is
/// returned here) and then, while `stop` is clear, calls the work it made over and over (each
/// call a short burst that adds what it did to the counter); it waits while `stop` is set and
/// ends when `exit` is.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
fn spawn_thread<W>(
    cpu: usize,
    make: impl FnOnce() -> Result<W, String> + Send + 'static,
) -> Result<Spinner, String>
where
    W: FnMut(&AtomicBool, &AtomicU64),
{
    let stop = Arc::new(AtomicBool::new(true));
    let exit = Arc::new(AtomicBool::new(false));
    let units = Arc::new(AtomicU64::new(0));
    let (s, x, u) = (stop.clone(), exit.clone(), units.clone());
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let handle = std::thread::spawn(move || {
        let made = pin_to_cpu(cpu)
            .map_err(|e| e.to_string())
            .and_then(|pin| make().map(|w| (pin, w)));
        let (_pin, mut work) = match made {
            Ok(m) => {
                let _ = ready_tx.send(Ok(()));
                m
            }
            Err(e) => {
                let _ = ready_tx.send(Err(e));
                return;
            }
        };
        while !x.load(Ordering::Relaxed) {
            if s.load(Ordering::Relaxed) {
                std::thread::park_timeout(Duration::from_micros(200));
            } else {
                work(&s, &u);
            }
        }
    });
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(Spinner {
            stop,
            exit,
            units,
            handle: Some(handle),
        }),
        Ok(Err(e)) => {
            let _ = handle.join();
            Err(e)
        }
        Err(_) => Err("the neighbour thread ended before it started".into()),
    }
}
