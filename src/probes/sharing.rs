//! False and true sharing: what it costs when threads on different cores touch the same cache
//! line, in the access patterns real code has.
//!
//! False sharing, each pattern once with the threads' fields packed on one 64-byte line (8
//! bytes apart) and once padded to 128 bytes apart (two lines, because the adjacent-line
//! prefetcher pulls lines in pairs):
//! - plain stores: each thread increments its own counter with a plain load, add and store, as
//!   a field update is. `false_sharing_ratio` = packed / padded. Shows on AMD (3-60x on the Zen
//!   2-5 guests); hidden on the Emerald Rapids guest (0.6-1.1x: stores retire through the
//!   store buffer, the line moves behind them).
//! - atomic counters: each thread increments its own counter with `lock xadd`, as per-thread
//!   statistics (Rust `AtomicU64`), `LongAdder` cells and Java volatile counters do.
//!   `false_sharing_atomic_ratio` = packed / private (padded). A locked operation waits for
//!   the line, so this shows on every x86 multi-core (4.1-4.7x on the Emerald Rapids guest).
//! - one writer, readers: thread 0 stores to its field while the others load a neighbouring
//!   field, the Netflix JVM case (JDK-8180450): `_secondary_super_cache` written on subtype
//!   checks from every thread, `_secondary_supers` beside it read by all; 7 times in 8 they
//!   shared a line, those nodes ran at 3x the CPI with 4x the machine clears.
//!   `false_sharing_reader_ratio` (the readers' loads) and `false_sharing_writer_ratio` (the
//!   writer's stores), packed / padded.
//!
//! True sharing: every thread increments one shared atomic, against each its own padded one
//! (`true_sharing_ratio` = shared / private). The Netflix case's second fix: once the padding
//! was in, the shared field itself was the limit, and only not writing it gave 3.5x.
//!
//! Every pattern runs in every sample, in ABBA order from sample to sample, so the paired
//! ratios cancel what the host did during a sample. One thread per CPU (all CPUs by default,
//! `--cpus` to choose), pinned.
//!
//! Pinned threads on two vCPUs are not two cores when the host runs both vCPUs on one core or
//! deschedules one (one check on the Emerald Rapids guest read plain packed 2.71x, true sharing
//! 1.03x and private atomics 14.3 ns instead of 8.5). Each attempt is therefore checked: a
//! shared atomic that costs no more than private ones, while private ones cost more than one
//! thread alone (or while the topology says the CPUs are different cores), or threads whose
//! runs did not overlap, mean the line never moved between cores. The probe then measures
//! again, up to [`MAX_ATTEMPTS`] times, and when it never ran as separate cores it publishes no
//! sharing ratio, only why (`not_measured`).

// Elsewhere than x86-64 the probe skips before measuring (`arch::require_x86_64`) and the
// kernels it times do not exist, so its measuring half is compiled but never called there.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code, unused_imports))]

use super::c2c::require_two_cpus;
use super::{Measurement, ProbeContext, ProbeFailure, Profile};
use crate::machine::Machine;
use crate::measure::{self, Clock, pin_to_cpu};
use crate::names::probe;
use crate::schema::figures::{Analysis, FigureId};
use crate::schema::probes::sharing::{
    SeparateCoresCheck, SharingEffects, SharingFigures, SharingParams, SharingRaw, SharingSamples,
};
use crate::schema::{Better, Metric};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};

/// The sharing probe.
pub struct SharingProbe;

/// How many times the probe measures before it gives up on threads that did not run as
/// separate cores. A host that descheduled a vCPU for one attempt (~0.1 s) rarely does it for
/// three in a row; one that placed both vCPUs on one core for minutes does.
pub const MAX_ATTEMPTS: usize = 3;

/// Below this shared/private atomic ratio the line did not move between cores: every x86
/// multi-core measured pays several times more for one atomic written from two cores (3.2x on
/// the Zen 5 guest, 3.5-8.9x on the Zen 2-4 guests, 3.7-5.1x on the Emerald Rapids guest),
/// while threads sharing one core's L1 pay the same (1.03x in the Emerald Rapids check whose
/// threads shared a core).
pub const TRUE_SHARING_FLOOR: f64 = 1.5;

/// Above this private-atomic/one-thread-alone ratio the threads competed for one core: on
/// separate cores each private line stays in its core and costs what it costs alone (~1.0x);
/// the Emerald Rapids check whose threads shared a core read 14.3 ns against 8.5 (1.7x).
pub const CROWDED_PRIVATE_RATIO: f64 = 1.3;

/// Below this median overlap of the threads' spans (the time all ran at once over the time any
/// ran) the threads mostly ran one after the other: a descheduled vCPU, not contention.
pub const MIN_SPAN_OVERLAP: f64 = 0.5;

/// Counters that share one 64-byte line, eight of them (the rest of the 128 bytes is empty so
/// the next group does not sit on the adjacent line).
#[repr(C, align(128))]
#[derive(Default)]
struct PackedLine([AtomicU64; 8]);

/// A counter alone on its own 128 bytes.
#[repr(C, align(128))]
#[derive(Default)]
struct Padded(AtomicU64);

/// The writer's "done" flag, on its own lines so reading it costs the readers nothing.
#[repr(C, align(128))]
#[derive(Default)]
struct Flag(AtomicBool);

/// Loads a reader issues between two looks at the writer's flag, in rounds of eight: 512 loads,
/// tens of ns alone, so the reader stops within a fraction of a microsecond of the writer.
const READ_ROUNDS_PER_CHECK: u64 = 64;

/// What one thread does during one run.
#[derive(Clone, Copy)]
enum Work<'a> {
    /// `n` plain increments (`mov`, `inc`, `mov`): a non-atomic `field += 1`.
    PlainIncrement(&'a AtomicU64, u64),
    /// `n` `lock xadd` increments.
    AtomicIncrement(&'a AtomicU64, u64),
    /// `n` plain stores, then the flag is raised.
    Write(&'a AtomicU64, u64, &'a AtomicBool),
    /// Plain loads until the flag is raised.
    ReadUntil(&'a AtomicU64, &'a AtomicBool),
}

/// Does `work` and returns how many operations it did. Assembly (`arch`), so a debug build
/// times the same instructions as a release one.
fn perform(work: Work<'_>) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        use crate::arch::{load_loop, lock_xadd_loop, store_increment_loop, store_loop};
        // SAFETY: every counter is live for the run; plain increments and stores are only ever
        // run with one thread per counter (see `Layouts`), locked ones may share it, and loads
        // may race with the writer's aligned stores (the value is discarded).
        unsafe {
            match work {
                Work::PlainIncrement(c, n) => {
                    store_increment_loop(c.as_ptr(), n);
                    n
                }
                Work::AtomicIncrement(c, n) => {
                    lock_xadd_loop(c.as_ptr(), n);
                    n
                }
                Work::Write(c, n, done) => {
                    store_loop(c.as_ptr(), n);
                    done.store(true, Ordering::Release);
                    n
                }
                Work::ReadUntil(c, done) => {
                    let mut rounds = 0;
                    while !done.load(Ordering::Acquire) {
                        load_loop(c.as_ptr(), READ_ROUNDS_PER_CHECK);
                        rounds += READ_ROUNDS_PER_CHECK;
                    }
                    rounds * 8
                }
            }
        }
    }
    // The probe skips before it gets here (`require_x86_64`).
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = work;
        unreachable!("{}", crate::arch::require_x86_64().unwrap_err())
    }
}

/// One thread's part of a run, in clock ticks.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Span {
    start: u64,
    end: u64,
    ops: u64,
}

/// The spans of one run, one per thread in CPU order.
#[derive(Debug, Clone, PartialEq)]
struct Run(Vec<Span>);

impl Run {
    /// From the first thread's start to the last thread's end, in ticks.
    fn wall_ticks(&self) -> u64 {
        let start = self.0.iter().map(|s| s.start).min().unwrap_or(0);
        let end = self.0.iter().map(|s| s.end).max().unwrap_or(0);
        end.saturating_sub(start)
    }

    /// The time every thread ran at once over the time any ran: ~1 when they contended for
    /// the whole run, 0 when one ran after the other.
    fn overlap(&self) -> f64 {
        let last_start = self.0.iter().map(|s| s.start).max().unwrap_or(0);
        let first_end = self.0.iter().map(|s| s.end).min().unwrap_or(0);
        let wall = self.wall_ticks();
        if wall == 0 {
            return 0.0;
        }
        first_end.saturating_sub(last_start) as f64 / wall as f64
    }

    /// ns per operation of one thread.
    fn thread_ns_per_op(&self, clock: &Clock, i: usize) -> f64 {
        let s = self.0[i];
        clock.ticks_to_ns(s.end.saturating_sub(s.start)) / s.ops.max(1) as f64
    }
}

/// Runs `work[i]` on `cpus[i]`, all released at once, and returns each thread's span.
fn run_threads(clock: &Clock, cpus: &[usize], work: &[Work<'_>]) -> Result<Run, String> {
    let ready = AtomicUsize::new(0);
    let failed = AtomicUsize::new(0);
    let n = work.len();
    let spans: Vec<Result<Span, String>> = std::thread::scope(|s| {
        let handles: Vec<_> = cpus
            .iter()
            .zip(work)
            .map(|(&cpu, &w)| {
                let (ready, failed) = (&ready, &failed);
                s.spawn(move || {
                    let _pin = pin_to_cpu(cpu).map_err(|e| {
                        failed.fetch_add(1, Ordering::SeqCst);
                        e.to_string()
                    })?;
                    // The last thread to arrive releases everyone: no coordinator thread
                    // competing for the CPUs.
                    ready.fetch_add(1, Ordering::SeqCst);
                    while ready.load(Ordering::SeqCst) < n {
                        if failed.load(Ordering::SeqCst) > 0 {
                            return Err("another thread could not be pinned".to_string());
                        }
                        std::hint::spin_loop();
                    }
                    let start = clock.start();
                    let ops = perform(w);
                    Ok(Span {
                        start,
                        end: clock.end(),
                        ops,
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into())))
            .collect()
    });
    spans.into_iter().collect::<Result<_, _>>().map(Run)
}

/// The counters of one attempt, fresh so its counts can be checked and no line is warm in a
/// third core's cache from an earlier attempt.
struct Layouts {
    packed: Vec<PackedLine>,
    padded: Vec<Padded>,
    shared: Padded,
    alone: Padded,
}

impl Layouts {
    fn new(n: usize) -> Layouts {
        Layouts {
            packed: (0..n.div_ceil(8)).map(|_| PackedLine::default()).collect(),
            padded: (0..n).map(|_| Padded::default()).collect(),
            shared: Padded::default(),
            alone: Padded::default(),
        }
    }

    /// Thread `i`'s counter when packed eight to a line.
    fn packed(&self, i: usize) -> &AtomicU64 {
        &self.packed[i / 8].0[i % 8]
    }
}

/// Each variant of the sample, in the order of an even sample (odd samples run it backwards).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Variant {
    PlainPacked,
    PlainPadded,
    AtomicPacked,
    AtomicPadded,
    Shared,
    Alone,
    ReadPacked,
    ReadPadded,
}

const SEQUENCE: [Variant; 8] = [
    Variant::PlainPacked,
    Variant::PlainPadded,
    Variant::AtomicPacked,
    Variant::AtomicPadded,
    Variant::Shared,
    Variant::Alone,
    Variant::ReadPacked,
    Variant::ReadPadded,
];

/// ns per operation per thread of one attempt, one entry per sample.
#[derive(Debug, Default, Clone)]
struct Attempt {
    plain_packed: Vec<f64>,
    plain_padded: Vec<f64>,
    atomic_packed: Vec<f64>,
    /// Per-thread atomics padded apart: the atomic pattern's padded side and true sharing's
    /// private side.
    atomic_private: Vec<f64>,
    shared_atomic: Vec<f64>,
    /// One thread alone on the first CPU, a private atomic.
    alone_atomic: Vec<f64>,
    reader_packed: Vec<f64>,
    reader_padded: Vec<f64>,
    writer_packed: Vec<f64>,
    writer_padded: Vec<f64>,
    /// Span overlap of each multi-thread atomic run.
    overlaps: Vec<f64>,
}

/// The figures that say whether the threads ran as separate cores.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CoreCheck {
    /// Median shared / private atomic time.
    pub true_sharing: f64,
    /// Median private atomic time with all threads over one thread alone.
    pub private_vs_alone: f64,
    /// Median overlap of the threads' spans in the atomic runs.
    pub span_overlap: f64,
}

impl CoreCheck {
    /// Why the threads did not run as separate cores, or `None` when they did. `distinct_cores`:
    /// the machine's topology says the CPUs are on different cores (no two are SMT siblings).
    pub fn problem(&self, distinct_cores: bool) -> Option<String> {
        let shared_line_stayed = self.true_sharing < TRUE_SHARING_FLOOR;
        let crowded = self.private_vs_alone > CROWDED_PRIVATE_RATIO;
        if shared_line_stayed && (crowded || distinct_cores) {
            let mut why = format!(
                "one atomic written by every thread cost {:.2}x private ones (separate cores \
                 pay {TRUE_SHARING_FLOOR}x or more)",
                self.true_sharing
            );
            if crowded {
                why.push_str(&format!(
                    " and private atomics cost {:.2}x one thread alone",
                    self.private_vs_alone
                ));
            }
            why.push_str(
                ": the threads shared one core (SMT siblings, or a host that ran both vCPUs \
                 on one core or descheduled one)",
            );
            return Some(why);
        }
        if self.span_overlap < MIN_SPAN_OVERLAP {
            return Some(format!(
                "the threads ran at the same time for only {} of each run: one was \
                 descheduled",
                crate::format::pct(self.span_overlap, 0)
            ));
        }
        None
    }

    /// The check as the file saves it, with the problem found while measuring.
    fn record(&self, problem: &Option<String>) -> SeparateCoresCheck {
        let finite = |x: f64| x.is_finite().then_some(x);
        SeparateCoresCheck {
            true_sharing_ratio: finite(self.true_sharing),
            private_vs_alone_ratio: finite(self.private_vs_alone),
            span_overlap: finite(self.span_overlap),
            separate_cores: problem.is_none(),
            why_not: problem.clone(),
        }
    }

    /// The check a file saved.
    fn of_record(c: &SeparateCoresCheck) -> CoreCheck {
        let or_nan = |x: Option<f64>| x.unwrap_or(f64::NAN);
        CoreCheck {
            true_sharing: or_nan(c.true_sharing_ratio),
            private_vs_alone: or_nan(c.private_vs_alone_ratio),
            span_overlap: or_nan(c.span_overlap),
        }
    }
}

impl Attempt {
    /// The attempt's samples as the file saves them.
    fn into_samples(self) -> SharingSamples {
        SharingSamples {
            packed_increment_ns: self.plain_packed,
            padded_increment_ns: self.plain_padded,
            packed_atomic_increment_ns: self.atomic_packed,
            private_atomic_increment_ns: self.atomic_private,
            shared_atomic_increment_ns: self.shared_atomic,
            single_thread_atomic_increment_ns: self.alone_atomic,
            packed_reader_load_ns: self.reader_packed,
            padded_reader_load_ns: self.reader_padded,
            packed_writer_store_ns: self.writer_packed,
            padded_writer_store_ns: self.writer_padded,
        }
    }

    fn check(&self) -> CoreCheck {
        let med = |v: &[f64]| crate::stats::median(v).unwrap_or(f64::NAN);
        CoreCheck {
            true_sharing: med(&crate::stats::paired_ratios(
                &self.shared_atomic,
                &self.atomic_private,
            )),
            private_vs_alone: med(&crate::stats::paired_ratios(
                &self.atomic_private,
                &self.alone_atomic,
            )),
            span_overlap: med(&self.overlaps),
        }
    }
}

/// The sizes of one attempt.
struct Plan<'a> {
    clock: &'a Clock,
    cpus: &'a [usize],
    samples: usize,
    /// Plain increments and the writer's stores per thread per sample.
    iterations: u64,
    /// Locked increments per thread per sample: fewer in the full profile than plain ones,
    /// because each costs 5-35 ns (a whole full probe took 1.6 s on the Zen 5 guest with
    /// 500k); 200k keeps a thread's start skew (microseconds) under 1% of the run.
    atomic_iterations: u64,
}

impl Plan<'_> {
    /// Measures every variant in every sample, on fresh counters, and checks the counts.
    fn attempt(&self, ctx: &ProbeContext) -> Result<Attempt, ProbeFailure> {
        let (iterations, atomics) = (self.iterations, self.atomic_iterations);
        let n = self.cpus.len();
        let lay = Layouts::new(n);
        let mut a = Attempt::default();
        ctx.progress.begin(probe::SHARING, self.samples as u64);
        for s in 0..self.samples {
            let mut order = SEQUENCE;
            if s % 2 == 1 {
                order.reverse();
            }
            for v in order {
                self.measure(v, &lay, &mut a)?;
            }
            ctx.progress.advance(1);
        }
        ctx.progress.finish();

        // Every increment landed: plain ones by one thread each never lose any, locked ones
        // count them all.
        let samples = self.samples as u64;
        let each = samples * (iterations + atomics);
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let counts_ok = (0..n).all(|i| load(lay.packed(i)) == each)
            && lay.padded.iter().all(|p| load(&p.0) == each)
            && load(&lay.shared.0) == samples * atomics * n as u64
            && load(&lay.alone.0) == samples * atomics;
        if !counts_ok {
            return Err(ProbeFailure::Failed(
                "counters do not add up: the increment loops were not executed as written".into(),
            ));
        }
        Ok(a)
    }

    /// One sample of variant `v` on the counters of `lay`, into `a`.
    fn measure(&self, v: Variant, lay: &Layouts, a: &mut Attempt) -> Result<(), ProbeFailure> {
        let (clock, cpus, iterations) = (self.clock, self.cpus, self.iterations);
        let atomics = self.atomic_iterations;
        let n = cpus.len();
        let per_op = |ticks: u64, ops: u64| clock.ticks_to_ns(ticks) / ops as f64;
        let fail = ProbeFailure::Failed;
        let run = |work: Vec<Work<'_>>| run_threads(clock, cpus, &work).map_err(fail);
        match v {
            Variant::PlainPacked | Variant::PlainPadded => {
                let work = (0..n)
                    .map(|i| {
                        let c = if v == Variant::PlainPacked {
                            lay.packed(i)
                        } else {
                            &lay.padded[i].0
                        };
                        Work::PlainIncrement(c, iterations)
                    })
                    .collect();
                let ns = per_op(run(work)?.wall_ticks(), iterations);
                match v {
                    Variant::PlainPacked => a.plain_packed.push(ns),
                    _ => a.plain_padded.push(ns),
                }
            }
            Variant::AtomicPacked | Variant::AtomicPadded | Variant::Shared => {
                let work = (0..n)
                    .map(|i| {
                        let c = match v {
                            Variant::AtomicPacked => lay.packed(i),
                            Variant::AtomicPadded => &lay.padded[i].0,
                            _ => &lay.shared.0,
                        };
                        Work::AtomicIncrement(c, atomics)
                    })
                    .collect();
                let r = run(work)?;
                a.overlaps.push(r.overlap());
                let ns = per_op(r.wall_ticks(), atomics);
                match v {
                    Variant::AtomicPacked => a.atomic_packed.push(ns),
                    Variant::AtomicPadded => a.atomic_private.push(ns),
                    _ => a.shared_atomic.push(ns),
                }
            }
            Variant::Alone => {
                let r = run_threads(
                    clock,
                    &cpus[..1],
                    &[Work::AtomicIncrement(&lay.alone.0, atomics)],
                )
                .map_err(fail)?;
                a.alone_atomic.push(per_op(r.wall_ticks(), atomics));
            }
            Variant::ReadPacked | Variant::ReadPadded => {
                // Fresh lines each run: the stores overwrite the counts, and the
                // design's rule (a line placed per run) keeps a third core's copy out.
                let packed = PackedLine::default();
                let padded = [Padded::default(), Padded::default()];
                let done = Flag::default();
                let (written, read) = if v == Variant::ReadPacked {
                    (&packed.0[0], &packed.0[1])
                } else {
                    (&padded[0].0, &padded[1].0)
                };
                // Every reader loads the same neighbouring field, as every thread read
                // `_secondary_supers`.
                let work = std::iter::once(Work::Write(written, iterations, &done.0))
                    .chain((1..n).map(|_| Work::ReadUntil(read, &done.0)))
                    .collect();
                let r = run(work)?;
                let writer = r.thread_ns_per_op(clock, 0);
                let reader =
                    (1..n).map(|i| r.thread_ns_per_op(clock, i)).sum::<f64>() / (n - 1) as f64;
                if v == Variant::ReadPacked {
                    a.writer_packed.push(writer);
                    a.reader_packed.push(reader);
                } else {
                    a.writer_padded.push(writer);
                    a.reader_padded.push(reader);
                }
            }
        }
        Ok(())
    }
}

/// Whether the machine's topology places every CPU of `cpus` on a different core (no two are
/// SMT siblings); false when it does not say.
fn distinct_cores(machine: &Machine, cpus: &[usize]) -> bool {
    let Some(t) = &machine.topology else {
        return false;
    };
    cpus.iter().all(|&c| {
        t.place(c)
            .is_some_and(|p| !cpus.iter().any(|&o| o != c && p.smt_siblings.contains(&o)))
    })
}

/// Why the saved attempt's threads did not run as separate cores, or `None` when they did (or
/// the file is from a build that did not check): the last check, judged by this build.
fn refusal(effects: &SharingEffects) -> Option<String> {
    let last = effects.separate_cores_checks.last()?;
    let distinct = effects.topology_distinct_cores.unwrap_or(false);
    let why = CoreCheck::of_record(last).problem(distinct)?;
    Some(format!(
        "the threads did not run as separate cores in {} attempts: {why}",
        effects
            .attempts
            .unwrap_or(effects.separate_cores_checks.len())
    ))
}

/// The figures of a sharing record: per-operation times (ns, and cycles at the first CPU's
/// core clock: TSC ticks are not core cycles), as measured whether or not the threads ran as
/// separate cores (the checks in `effects` say which), and the paired ratios, which a run
/// whose threads did not run as separate cores does not give (each `not_measured`, with why).
pub fn analyse(raw: &SharingRaw) -> Analysis<SharingFigures> {
    let s = &raw.samples;
    let ns = |ns: &[f64]| Metric::from_samples("", "ns", Better::Lower, ns);
    let ghz = raw.effects.core_clock_ghz;
    let cycles = |ns: &[f64]| {
        let ghz = ghz?;
        let cycles: Vec<f64> = ns.iter().map(|x| x * ghz).collect();
        Metric::from_samples("", "cycles", Better::Lower, &cycles)
    };
    let mut f = SharingFigures {
        packed_increment_ns: ns(&s.packed_increment_ns),
        padded_increment_ns: ns(&s.padded_increment_ns),
        packed_atomic_increment_ns: ns(&s.packed_atomic_increment_ns),
        private_atomic_increment_ns: ns(&s.private_atomic_increment_ns),
        shared_atomic_increment_ns: ns(&s.shared_atomic_increment_ns),
        single_thread_atomic_increment_ns: ns(&s.single_thread_atomic_increment_ns),
        packed_reader_load_ns: ns(&s.packed_reader_load_ns),
        padded_reader_load_ns: ns(&s.padded_reader_load_ns),
        packed_writer_store_ns: ns(&s.packed_writer_store_ns),
        padded_writer_store_ns: ns(&s.padded_writer_store_ns),
        packed_increment_cycles: cycles(&s.packed_increment_ns),
        padded_increment_cycles: cycles(&s.padded_increment_ns),
        packed_atomic_increment_cycles: cycles(&s.packed_atomic_increment_ns),
        private_atomic_increment_cycles: cycles(&s.private_atomic_increment_ns),
        shared_atomic_increment_cycles: cycles(&s.shared_atomic_increment_ns),
        single_thread_atomic_increment_cycles: cycles(&s.single_thread_atomic_increment_ns),
        packed_reader_load_cycles: cycles(&s.packed_reader_load_ns),
        padded_reader_load_cycles: cycles(&s.padded_reader_load_ns),
        packed_writer_store_cycles: cycles(&s.packed_writer_store_ns),
        padded_writer_store_cycles: cycles(&s.padded_writer_store_ns),
        ..SharingFigures::default()
    };
    let mut not_measured = std::collections::BTreeMap::new();
    match refusal(&raw.effects) {
        // Sample i of each variant is from the same moment: paired ratios cancel what the
        // host did during that sample.
        None => {
            let ratio =
                |num: &[f64], den: &[f64]| Metric::paired_ratio("", Better::Lower, num, den);
            f.false_sharing_ratio = ratio(&s.packed_increment_ns, &s.padded_increment_ns);
            f.false_sharing_atomic_ratio = ratio(
                &s.packed_atomic_increment_ns,
                &s.private_atomic_increment_ns,
            );
            f.false_sharing_reader_ratio =
                ratio(&s.packed_reader_load_ns, &s.padded_reader_load_ns);
            f.false_sharing_writer_ratio =
                ratio(&s.packed_writer_store_ns, &s.padded_writer_store_ns);
            f.true_sharing_ratio = ratio(
                &s.shared_atomic_increment_ns,
                &s.private_atomic_increment_ns,
            );
        }
        Some(why) => {
            not_measured = SharingFigures::RATIOS
                .iter()
                .map(|&id: &FigureId| (id, why.clone()))
                .collect();
        }
    }
    Analysis {
        figures: f,
        not_measured,
    }
}

impl Measurement for SharingProbe {
    type Raw = SharingRaw;
    type Figures = SharingFigures;
    const NAME: &'static str = probe::SHARING;
    const ABOUT: &'static str = "false sharing (plain, atomic and reader fields packed in a \
                                 line vs padded) and true sharing (one atomic)";

    fn measure(&self, ctx: &ProbeContext) -> Result<SharingRaw, ProbeFailure> {
        crate::arch::require_x86_64().map_err(ProbeFailure::Skipped)?;
        let cpus = ctx.cpus()?;
        require_two_cpus(&cpus)?;
        crate::measure::threads::check_can_start(cpus.len())?;
        // Many short samples: a sample ends when its slowest thread does, so one thread
        // preempted by another program stretches the whole sample, and on a shared machine
        // the shorter the sample the fewer are hit. Per sample (quick) on the Zen 5 guest:
        // ~8 ms, most of it the atomics (~15 ns shared, ~5 ns private).
        let plan = Plan {
            clock: ctx.clock,
            cpus: &cpus,
            samples: ctx.repetitions(9, 31),
            iterations: match ctx.options.profile {
                Profile::Quick => 200_000,
                Profile::Full => 500_000,
            },
            atomic_iterations: 200_000,
        };
        let distinct = distinct_cores(ctx.machine, &cpus);
        let mut checks = Vec::new();
        let (t, problem) = loop {
            let a = plan.attempt(ctx)?;
            let check = a.check();
            let problem = check.problem(distinct);
            checks.push(check.record(&problem));
            if problem.is_none() || checks.len() >= MAX_ATTEMPTS {
                break (a, problem);
            }
        };
        let core_hz = {
            let _pin = pin_to_cpu(cpus[0])?;
            measure::estimate_core_clock(ctx.clock, 5).map(|c| c.hz)
        };

        let n = cpus.len();
        Ok(SharingRaw {
            params: SharingParams {
                cpus: cpus.clone(),
                threads: n,
                samples: plan.samples,
                increments_per_thread: plan.iterations,
                atomic_increments_per_thread: plan.atomic_iterations,
                writer_stores: Some(plan.iterations),
                packed_stride_bytes: 8,
                padded_stride_bytes: 128,
            },
            effects: SharingEffects {
                pinned_cpus: cpus.clone(),
                packed_lines: n.div_ceil(8),
                topology_distinct_cores: Some(distinct),
                attempts: Some(checks.len()),
                separate_cores: Some(problem.is_none()),
                separate_cores_checks: checks,
                core_clock_ghz: core_hz.map(|hz| hz / 1e9),
            },
            samples: t.into_samples(),
            series: Vec::new(),
        })
    }

    fn analyse(raw: &SharingRaw, _machine: &Machine) -> Analysis<SharingFigures> {
        analyse(raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::figures::Figures;

    #[test]
    fn layouts_put_packed_counters_on_one_line_and_padded_ones_apart() {
        let lines = [PackedLine::default(), PackedLine::default()];
        let a = &lines[0].0[0] as *const _ as usize;
        let h = &lines[0].0[7] as *const _ as usize;
        let next = &lines[1].0[0] as *const _ as usize;
        assert_eq!(a / 64, h / 64, "eight counters share one line");
        assert_eq!(next - a, 128, "the next group skips the adjacent line");
        let p = [Padded::default(), Padded::default()];
        assert_eq!(
            &p[1].0 as *const _ as usize - &p[0].0 as *const _ as usize,
            128
        );
    }

    #[test]
    fn every_kernel_does_what_it_counts() {
        let c = AtomicU64::new(0);
        assert_eq!(perform(Work::PlainIncrement(&c, 1000)), 1000);
        assert_eq!(perform(Work::AtomicIncrement(&c, 500)), 500);
        assert_eq!(c.load(Ordering::Relaxed), 1500);
        let done = AtomicBool::new(false);
        assert_eq!(perform(Work::Write(&c, 10, &done)), 10);
        assert!(done.load(Ordering::Relaxed), "the writer raises the flag");
        // A reader whose writer is done stops at once.
        assert_eq!(perform(Work::ReadUntil(&c, &done)), 0);
    }

    #[test]
    fn a_reader_stops_when_its_writer_is_done() {
        let (c, done) = (AtomicU64::new(0), AtomicBool::new(false));
        let loads = std::thread::scope(|s| {
            let reader = s.spawn(|| perform(Work::ReadUntil(&c, &done)));
            perform(Work::Write(&c, 100_000, &done));
            reader.join().unwrap()
        });
        assert_eq!(loads % (8 * READ_ROUNDS_PER_CHECK), 0);
    }

    #[test]
    fn span_overlap_is_the_shared_time_over_the_whole() {
        let span = |start, end| Span { start, end, ops: 1 };
        assert_eq!(Run(vec![span(0, 100), span(0, 100)]).overlap(), 1.0);
        assert_eq!(
            Run(vec![span(0, 100), span(50, 150)]).overlap(),
            50.0 / 150.0
        );
        // One after the other: no overlap, not a negative one.
        assert_eq!(Run(vec![span(0, 100), span(200, 300)]).overlap(), 0.0);
        assert_eq!(Run(vec![span(0, 100), span(200, 300)]).wall_ticks(), 300);
    }

    #[test]
    fn the_emerald_rapids_check_whose_threads_shared_a_core_is_refused() {
        // The Emerald Rapids guest: one check read true sharing 1.03x and private atomics
        // 14.3 ns against the 8.5 ns one thread pays alone.
        let shared_core = CoreCheck {
            true_sharing: 1.03,
            private_vs_alone: 14.3 / 8.5,
            span_overlap: 0.98,
        };
        let why = shared_core.problem(true).expect("refused");
        assert!(why.contains("1.03x private"), "{why}");
        assert!(why.contains("1.68x one thread alone"), "{why}");
        assert!(why.contains("shared one core"), "{why}");
        // Even where the topology does not say the CPUs are separate cores, crowded private
        // atomics give it away.
        assert!(shared_core.problem(false).is_some());
    }

    #[test]
    fn separate_cores_pass_the_check() {
        // The same guest's good checks: ~4.3x true sharing, private ~ alone.
        let good = CoreCheck {
            true_sharing: 4.3,
            private_vs_alone: 1.05,
            span_overlap: 0.97,
        };
        assert_eq!(good.problem(true), None);
        // SMT siblings chosen on purpose (the topology says so) share L1: true sharing ~1x
        // with private atomics uncrowded is what those CPUs do, not a host's doing.
        let siblings = CoreCheck {
            true_sharing: 1.1,
            private_vs_alone: 1.1,
            span_overlap: 0.99,
        };
        assert_eq!(siblings.problem(false), None);
        assert!(siblings.problem(true).is_some(), "but not on claimed cores");
    }

    /// An attempt with the Emerald Rapids guest's figures of a check whose threads shared a
    /// core (plain packed 2.71x, true sharing 1.03x, private atomics 14.3 ns against 8.5).
    fn shared_core_attempt() -> Attempt {
        let v = |x: f64| vec![x; 3];
        Attempt {
            plain_packed: v(5.7),
            plain_padded: v(2.1),
            atomic_packed: v(14.5),
            atomic_private: v(14.3),
            shared_atomic: v(14.7),
            alone_atomic: v(8.5),
            reader_packed: v(0.4),
            reader_padded: v(0.35),
            writer_packed: v(0.35),
            writer_padded: v(0.35),
            overlaps: v(0.95),
        }
    }

    /// The raw record of one attempt `a` as the probe saves it, its threads on separate
    /// cores by the topology, the core clock at `ghz`.
    fn raw_of(a: Attempt, ghz: Option<f64>) -> SharingRaw {
        let problem = a.check().problem(true);
        SharingRaw {
            params: SharingParams {
                cpus: vec![0, 1],
                threads: 2,
                samples: 3,
                ..SharingParams::default()
            },
            effects: SharingEffects {
                topology_distinct_cores: Some(true),
                attempts: Some(1),
                separate_cores_checks: vec![a.check().record(&problem)],
                separate_cores: Some(problem.is_none()),
                core_clock_ghz: ghz,
                ..SharingEffects::default()
            },
            samples: a.into_samples(),
            series: Vec::new(),
        }
    }

    #[test]
    fn a_refused_attempt_gives_its_times_and_no_ratio() {
        let a = shared_core_attempt();
        let why = a.check().problem(true).expect("refused");
        let analysis = analyse(&raw_of(a, Some(3.0)));
        let f = &analysis.figures;
        for id in SharingFigures::RATIOS {
            let why_not = analysis.not_measured.get(&id).expect("not measured");
            assert!(why_not.ends_with(&why), "{why_not}");
            assert!(why_not.contains("in 1 attempts"), "{why_not}");
        }
        assert!(f.false_sharing_ratio.is_none() && f.true_sharing_ratio.is_none());
        // The times stay, as measured: they show what happened.
        assert_eq!(f.private_atomic_increment_ns.as_ref().unwrap().value, 14.3);
        assert_eq!(
            f.single_thread_atomic_increment_ns.as_ref().unwrap().value,
            8.5
        );
        let cycles = f.private_atomic_increment_cycles.as_ref().unwrap().value;
        assert!((cycles - 14.3 * 3.0).abs() < 1e-9, "{cycles}");
    }

    #[test]
    fn an_accepted_attempt_gives_every_paired_ratio() {
        let mut a = shared_core_attempt();
        a.shared_atomic = vec![35.0; 3];
        a.atomic_packed = vec![29.4; 3];
        a.atomic_private = vec![6.2; 3];
        a.alone_atomic = vec![6.1; 3];
        assert_eq!(a.check().problem(true), None);
        let analysis = analyse(&raw_of(a, None));
        assert!(analysis.not_measured.is_empty());
        let metrics = analysis.figures.clone().into_metrics();
        for id in SharingFigures::RATIOS {
            assert!(
                metrics.iter().any(|m| m.name == id.metric),
                "{id:?} missing"
            );
        }
        let atomic = analysis.figures.false_sharing_atomic_ratio.unwrap().value;
        assert!((atomic - 29.4 / 6.2).abs() < 1e-9, "{atomic}");
        assert!(
            analysis.figures.packed_increment_cycles.is_none(),
            "no clock, no cycles"
        );
    }

    #[test]
    fn a_file_from_before_the_check_gives_its_ratios() {
        // Files saved before the probe checked for separate cores have no checks: their
        // ratios stand.
        let mut raw = raw_of(shared_core_attempt(), None);
        raw.effects.separate_cores_checks.clear();
        let analysis = analyse(&raw);
        assert!(analysis.not_measured.is_empty());
        assert!(analysis.figures.true_sharing_ratio.is_some());
    }

    #[test]
    fn threads_that_ran_one_after_the_other_are_refused() {
        let sequential = CoreCheck {
            true_sharing: 3.0,
            private_vs_alone: 1.0,
            span_overlap: 0.2,
        };
        let why = sequential.problem(true).expect("refused");
        assert!(why.contains("only 20%"), "{why}");
    }
}
