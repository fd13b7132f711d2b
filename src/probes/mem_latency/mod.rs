//! Memory latency: a pointer chase over one random cycle of cache lines
//! ([`crate::measure::chase`]), at buffer sizes from 16 KiB to at least 4x the last-level cache
//! and at least 1 GiB, on each page kind (4 KiB, transparent huge pages, hugetlbfs 2 MiB and
//! 1 GiB when reserved). Per size: ns per load, as raw samples. [`analysis`] reads them: L1,
//! L2 and L3 located from the cache sizes sysfs reports and checked against the curve's
//! steps, DRAM found as the curve's plateau ([`curve::locate_dram`]), and the penalty of 4 KiB
//! pages over huge pages at the DRAM sizes.
//!
//! A second sweep touches one line per 4 KiB page and grows the number of pages, on 4 KiB and
//! on huge pages: the same lines, so the caches behave alike and the difference is the TLB.
//! Where 4 KiB pages start paying page walks is the TLB reach.
//!
//! Every buffer's page size is read back from /proc/self/smaps after it is touched; a page
//! kind that did not take is reported in `effects.page_kinds` and not measured.

// Elsewhere than x86-64 the probe skips before measuring (`arch::require_x86_64`) and the
// kernels it times do not exist, so its measuring half is compiled but never called there.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code, unused_imports))]

pub mod analysis;
pub mod curve;

pub use analysis::{analyse, reanalyze};

use super::{Measurement, ProbeContext, ProbeFailure, Profile};
use crate::format::human_bytes;
use crate::machine::Machine;
use crate::measure::buffer::{Buffer, PageKind, allocate_kinds, kinds_using_mem_available};
use crate::measure::chase::{self, Layout};
use crate::measure::{CoreClock, estimate_core_clock, pin_to_cpu};
use crate::names::probe;
use crate::schema::figures::Analysis;
use crate::schema::probes::mem_latency::{
    CacheSizes, MemLatencyAnalysis, MemLatencyEffects, MemLatencyParams, MemLatencyRaw,
    MemLatencySamples,
};
use crate::words;
use curve::CacheSize;

/// The memory latency probe.
pub struct MemLatencyProbe;

/// Loads per timed sample, full profile: 65536 take ~0.1 ms in L1 and ~10-40 ms in DRAM behind
/// 4 KiB page walks; long enough to dwarf the clock reads, short enough for several samples
/// per size.
const LOADS_PER_SAMPLE_FULL: u64 = 1 << 16;
/// Loads per timed sample, quick profile: a quarter, still ~16 us in L1.
const LOADS_PER_SAMPLE_QUICK: u64 = 1 << 14;
/// Longest chase warmed up with whole laps before timing (32 MiB of lines): the lines must be
/// in the cache being measured. Longer chases miss anyway.
const WARM_UP_CAP: u64 = 1 << 19;
/// Most loads spent warming one block up: laps go on while each is at least
/// [`WARM_UP_SETTLED`] faster than the one before. One lap does not fill a last-level cache
/// that learns reuse before it keeps lines: on the Zen 5 guest a chase over 8 MiB read 82-90,
/// 27-40, 18-30, 16-24 ns per load in its first four laps and settled at 12 ns after six (a C
/// chase, 2026-11-24); the Emerald Rapids guest's 4 MiB samples fell from 131 to 41 ns within
/// one quick check. 2^20 loads are eight laps of 8 MiB, ~15 ms at L3 latency.
const WARM_UP_MAX_LOADS: u64 = 1 << 20;
/// A lap at most this fraction faster than the one before ends the warm-up.
const WARM_UP_SETTLED: f64 = 0.9;
/// Most laps warming up a chase of the TLB sweep. One lap left the sweep's largest points
/// (2-4 MiB of lines, past L2) reading whichever page kind went second in a round 50-200
/// cycles slower, so the knee of most repetitions vanished (the Zen 5 guest: reach found in
/// 0 of 5 quick checks, 4 of 5 with laps until settled); four laps settle them mostly, at a
/// bounded cost (its laps are 1-4 MiB of lines).
const WARM_UP_SWEEP_LAPS: u64 = 4;
/// Most sample-sized stretches warming up a chase past the warm-up cap. One stretch left the
/// quick profile's 1 GiB chase 5-10% slower on THP and up to 1.4x slower on 4 KiB pages than
/// with four (173-181 against 158-166 ns THP, 251-266 against 179-180 ns 4 KiB on the Zen 5
/// guest, 2026-11-24; a C chase warmed up with 2^20 loads: 170-174 ns THP): a block starts
/// just after the other page kind's block has filled the page-walk caches with its own
/// tables. The stretches usually settle after two or three.
const WARM_UP_MAX_STRETCHES: u64 = 8;
/// Past the warm-up cap, the fewest loads before the stretches may be called settled, as a
/// fraction of the chase's slots. A 64-byte line holds the 4 KiB page-table entries of 8 pages,
/// so a chase has a line of entries for every 512 slots (a guest's host has as many again for
/// the guest's memory); 1/64 of the slots is eight random loads for each, enough to bring
/// nearly all of them back after the other page kind's block evicted them. Stopping at the
/// first stretch not 10% faster than the one before read the quick check's 1 GiB chase at
/// 170-191 ns on 4 KiB pages and 139-147 ns on THP on the Zen 3 guest, while a C chase of 10M
/// loads over 1 GiB paid 148-158 and 130 ns in the same minutes; with 1/128, 151-157 and
/// 131-138 ns; with 1/64, 146-151 and 127-131 ns, ~0.15 s more a check (2026-12-03,
/// `bench/mem.sh`).
const WARM_UP_MIN_SLOTS_FRACTION: u64 = 64;
/// Largest span of the TLB sweep: 65536 pages of 4 KiB, far past any second-level TLB (3072
/// entries on Zen 4, 1536-2048 on recent Intel cores).
const TLB_SWEEP_MAX_PAGES: u64 = 1 << 16;
/// Smallest span of the quick TLB sweep: 256 pages, past every first-level DTLB (64-96
/// entries), so its points go to where walks start.
const TLB_SWEEP_QUICK_MIN_PAGES: u64 = 256;
/// Seed of the random cycles, fixed so every run chases the same pattern.
const SEED: u64 = 0xC0FF_EE00_D0C7_0A11;

impl Measurement for MemLatencyProbe {
    type Raw = MemLatencyRaw;
    type Figures = MemLatencyAnalysis;
    const NAME: &'static str = probe::MEM_LATENCY;
    const ABOUT: &'static str =
        "Pointer-chase latency by buffer size and page size (L1/L2/L3/DRAM, TLB reach)";

    fn measure(&self, ctx: &ProbeContext) -> Result<MemLatencyRaw, ProbeFailure> {
        crate::arch::require_x86_64().map_err(ProbeFailure::Skipped)?;
        measure(ctx)
    }

    /// Every figure comes from the curve ([`analysis`]): a saved result that ran ok and saved
    /// its `latency_ns.*` samples is judged by this build's reading of the curve.
    fn analyse(raw: &MemLatencyRaw, _machine: &Machine) -> Analysis<MemLatencyAnalysis> {
        analysis::analyse(raw)
    }
}

/// The default sweeps reach at least this far, whatever the LLC: the penalty of 4 KiB pages grows with the
/// memory touched (1.02x at 128 MiB, 1.5x at 1 GiB on the Zen 4 guest; 1.09x at 64 MiB, 1.74x
/// at 512 MiB, 2.1x at 2 GiB of a C chase on the Emerald Rapids guest), so a sweep that stops
/// at 4x a small LLC would miss what a large heap pays.
pub const LARGEST_MIN_BYTES: u64 = 1 << 30;

/// The smallest buffer the latency curve walks: two cache lines, the least a pointer chase
/// can go around (sizes are rounded down to whole 64-byte lines).
pub const MIN_BUFFER_BYTES: u64 = 128;

/// The largest size of the default sweeps: at least [`curve::DRAM_MIN_LLC_FACTOR`] times the
/// last-level cache sysfs reports (`llc`) and at least [`LARGEST_MIN_BYTES`], in whole 2 MiB
/// pages. The Emerald Rapids guest reports a 260 MiB L3: 1040 MiB.
pub fn largest_size(llc: Option<u64>) -> u64 {
    llc.map_or(0, |l| l.saturating_mul(curve::DRAM_MIN_LLC_FACTOR))
        .max(LARGEST_MIN_BYTES)
        .next_multiple_of(2 << 20)
}

/// The sizes of the full curve: powers of two from 16 KiB and the points halfway between
/// (x1.5), so each cache edge has a point on either side, up to `largest` (which is always
/// the last point; a grid point within 4/3 of it is left out).
pub fn full_sizes(largest: u64) -> Vec<u64> {
    let mut v = Vec::new();
    let mut s: u64 = 16 << 10;
    while s * 4 <= largest * 3 {
        v.push(s);
        if (s + s / 2) * 4 <= largest * 3 {
            v.push(s + s / 2);
        }
        s *= 2;
    }
    v.push(largest);
    v
}

/// The quick curve: 16 KiB (inside every L1), one point inside each larger cache level (a
/// quarter of it, which also shows the step past the level before), and three DRAM points a
/// factor of 4 apart ending at `largest` (see [`largest_size`]): the plateau needs points
/// that span a factor of several (see [`curve::locate_dram`]), and the 4 KiB penalty grows
/// with the footprint. The points past L1 and L2 of earlier versions are gone: the next
/// level's inside point shows the step, and time goes to the DRAM points instead.
pub fn quick_sizes(caches: &[CacheSize], largest: u64) -> Vec<u64> {
    let mut v = vec![16 << 10];
    v.extend(caches.iter().map(|c| c.bytes / 4));
    v.extend([largest / 16, largest / 4, largest]);
    v.iter_mut().for_each(|s| *s = (*s / 64) * 64);
    v.retain(|&s| s >= 16 << 10);
    v.sort_unstable();
    v.dedup();
    v
}

/// Where the cache-sizes from sysfs are unknown, the smallest DRAM point a limit may leave
/// the sweep: 4x a 16 MiB last-level cache.
pub const DRAM_POINT_MIN_BYTES: u64 = 64 << 20;

/// The largest buffer the default sweep may map: `largest`, or less when every kind's buffer
/// (they are mapped at once, see [`time_chases`]; `buffers` of them draw on the memory room:
/// 4 KiB and THP) would take more than the room allows them ([`MemoryRoom::for_buffers`]: a
/// quarter of `MemAvailable`, three quarters of what a cgroup limit or `RLIMIT_AS` leaves).
/// Returns the cap and, when it is below `largest`, why; skipped when a limit leaves less
/// than `needed` per buffer (the sweep would not reach past the caches, and a DRAM figure
/// from a cache would be invented).
fn default_max_size(
    largest: u64,
    buffers: usize,
    needed: u64,
) -> Result<(u64, Option<String>), ProbeFailure> {
    let Some(room) = crate::machine::meminfo::read_memory_room() else {
        return Ok((largest, None));
    };
    let cap = cap_to_available(largest, room.for_buffers(), buffers);
    if room.is_limit() && cap < needed.min(largest) {
        return Err(ProbeFailure::Skipped(words::machine::limit_leaves(
            &room,
            buffers,
            needed,
            probe::MEM_LATENCY,
        )));
    }
    let why = (cap < largest).then(|| {
        format!(
            "the sweep stops at {} instead of {}: {}",
            human_bytes(cap),
            human_bytes(largest),
            words::machine::buffers_capped(buffers, largest, &room)
        )
    });
    Ok((cap, why))
}

/// `want`, or the largest power of two such that `buffers` of it fit in `budget` bytes (at
/// least 1 MiB).
pub fn cap_to_available(want: u64, budget: u64, buffers: usize) -> u64 {
    let share = budget / buffers.max(1) as u64;
    if share >= want {
        want
    } else {
        (share.max(1 << 20) + 1).next_power_of_two() / 2
    }
}

/// The data caches sysfs reports, by level.
pub fn cache_sizes(ctx: &ProbeContext) -> Vec<CacheSize> {
    let Some(topo) = ctx.machine.topology.as_ref() else {
        return Vec::new();
    };
    (1..=4)
        .filter_map(|level| {
            topo.data_cache(level).map(|c| CacheSize {
                level,
                bytes: c.size_bytes,
            })
        })
        .collect()
}

/// Times chases through `slots` slots, one per page kind (`starts`); returns ns/load per kind.
/// A chase that fits the warm-up cap is warmed up in laps until they stop getting faster, at
/// most [`WARM_UP_MAX_LOADS`] loads, or `max_laps` laps when given (the TLB sweep).
///
/// Each kind must have the caches to itself while it is timed: if the kinds took their samples
/// in turn, every other kind's chase would walk as many lines between two visits to a line as
/// this one does, so the cache footprint would be the sum over kinds (2x with 4 KiB + THP)
/// and a point between LLC/2 and the LLC would read as memory. So each kind takes its samples
/// in a block after untimed laps that bring its lines and TLB entries back (see
/// [`WARM_UP_MAX_LOADS`]). The kinds are
/// compared with each other and must see the same machine noise, so there are two rounds of
/// blocks in ABBA order (the second round reversed): slow drift hits every kind alike.
#[cfg(target_arch = "x86_64")]
fn time_chases(
    ctx: &ProbeContext,
    starts: &[*const u64],
    slots: u64,
    loads: u64,
    reps: usize,
    max_laps: Option<u64>,
) -> Vec<Vec<f64>> {
    use crate::arch::{CHASE_LOADS_PER_ITERATION, pointer_chase};
    let clock = ctx.clock;
    let loads = loads.next_multiple_of(CHASE_LOADS_PER_ITERATION);
    // Whole laps while the chase fits in some cache, until they stop getting faster; beyond
    // the cap every load misses the caches anyway, and sample-sized stretches until they stop
    // getting faster settle the TLB, the page-walk caches (the other kind's block evicted
    // them) and the core clock.
    let (unit, least, budget) = if slots > WARM_UP_CAP {
        let least = (slots / WARM_UP_MIN_SLOTS_FRACTION).next_multiple_of(loads);
        (loads, least, least.max(loads * WARM_UP_MAX_STRETCHES))
    } else {
        let cap = max_laps.map_or(WARM_UP_MAX_LOADS, |n| n * slots);
        (slots, 0, cap.max(slots))
    };
    let warm_up = |p: *const u64| -> *const u64 {
        let (mut p, mut done, mut last) = (p, 0u64, f64::INFINITY);
        while done + unit <= budget {
            let t0 = clock.start();
            // SAFETY: as for every chase below.
            p = unsafe { pointer_chase(p, unit) };
            let lap = clock.ticks_to_ns(clock.end() - t0);
            done += unit;
            if done >= least && lap > last * WARM_UP_SETTLED {
                break;
            }
            last = lap;
        }
        p
    };
    let mut ps: Vec<*const u64> = starts.to_vec();
    let mut ns = vec![Vec::with_capacity(reps); starts.len()];
    let kinds: Vec<usize> = (0..starts.len()).collect();
    let rounds = [
        (kinds.clone(), reps.div_ceil(2)),
        (kinds.into_iter().rev().collect::<Vec<_>>(), reps / 2),
    ];
    for (order, samples) in rounds {
        if samples == 0 {
            continue;
        }
        for k in order {
            // SAFETY (all chases): every start heads a cycle `chase::build` wrote in a live
            // buffer, and a chase only ever stops on a slot of that cycle.
            ps[k] = warm_up(ps[k]);
            for _ in 0..samples {
                let t0 = clock.start();
                ps[k] = unsafe { pointer_chase(ps[k], loads) };
                let t1 = clock.end();
                ns[k].push(clock.ticks_to_ns(t1 - t0) / loads as f64);
            }
        }
    }
    std::hint::black_box(ps);
    ns
}

/// One page kind's measurements.
struct KindRun {
    kind: PageKind,
    /// (size, ns samples) per size.
    curve: Vec<(u64, Vec<f64>)>,
    /// (pages, ns samples) of the one-line-per-page sweep.
    tlb: Vec<(u64, Vec<f64>)>,
}

/// Page counts of the TLB sweep up to `max_pages`: powers of two from 8 with the x1.5 points
/// in the full profile, powers of two from 256 in the quick one.
fn tlb_pages(profile: Profile, max_pages: u64) -> Vec<u64> {
    let mut v = Vec::new();
    let mut n = match profile {
        Profile::Full => 8u64,
        Profile::Quick => TLB_SWEEP_QUICK_MIN_PAGES,
    };
    while n <= max_pages {
        v.push(n);
        if profile == Profile::Full && n + n / 2 <= max_pages {
            v.push(n + n / 2);
        }
        n *= 2;
    }
    v
}

#[cfg(not(target_arch = "x86_64"))]
fn measure(_ctx: &ProbeContext) -> Result<MemLatencyRaw, ProbeFailure> {
    unreachable!("require_x86_64 skips first")
}

#[cfg(target_arch = "x86_64")]
fn measure(ctx: &ProbeContext) -> Result<MemLatencyRaw, ProbeFailure> {
    let cpu = *ctx
        .cpus()?
        .first()
        .ok_or_else(|| ProbeFailure::Skipped("no CPU available to run on".into()))?;
    let profile = ctx.options.profile;
    // Six is the fewest repetitions whose median interval reaches 95% (five reach 93.8%).
    let reps = ctx.repetitions(6, 11);
    let loads = match profile {
        Profile::Full => LOADS_PER_SAMPLE_FULL,
        Profile::Quick => LOADS_PER_SAMPLE_QUICK,
    };
    let caches = cache_sizes(ctx);
    let llc = ctx.machine.topology.as_ref().and_then(|t| t.llc_bytes());
    let kinds: Vec<PageKind> = ctx
        .options
        .page_kinds
        .clone()
        .unwrap_or_else(|| PageKind::ALL.to_vec());
    // A limit on this process (cgroup, RLIMIT_AS) is said even where the buffers fit it.
    let limit = crate::machine::meminfo::read_memory_room().filter(|r| r.is_limit());
    let Sweep {
        sizes,
        max_size,
        capped,
        largest,
    } = sweep(ctx, &caches, llc, &kinds)?;
    let tlb_max_pages = TLB_SWEEP_MAX_PAGES.min(largest / 4096);
    let tlb_sweep = tlb_pages(profile, tlb_max_pages);

    // The largest chase's cycle takes a quarter of a second to draw at 1 GiB: drawn by a
    // thread spawned before this one is pinned, so it can run on another CPU while this one
    // faults the buffers in. Nothing is timed until both are done.
    let largest_cycle = crate::measure::threads::spawn(move || {
        chase::sattolo_cycle(
            (largest / 64) as usize,
            &mut chase::SplitMix64::new(SEED ^ largest),
        )
    })?;
    let _pin = pin_to_cpu(cpu)?;
    ctx.progress
        .begin(probe::MEM_LATENCY, (sizes.len() + tlb_sweep.len()) as u64);
    // Every kind's buffer is mapped at once, so the kinds can take turns (in blocks, see
    // `time_chases`); pinned already, so the pages fault in on this CPU's NUMA node.
    let kb = allocate_kinds(&kinds, |kind| Buffer::allocate(largest, kind))
        .map_err(|e| ProbeFailure::Failed(e.to_string()))?;
    let largest_cycle = largest_cycle
        .join()
        .map_err(|_| ProbeFailure::Failed("the thread drawing the chase's cycle failed".into()))?;
    let core: CoreClock = estimate_core_clock(ctx.clock, 7)
        .ok_or_else(|| ProbeFailure::Failed("core clock estimate failed".into()))?;
    let mut bufs = kb.buffers;
    let backings = kb.records;
    let runs = measure_kinds(
        ctx,
        &mut bufs,
        &sizes,
        &tlb_sweep,
        loads,
        reps,
        (largest, largest_cycle),
    );
    drop(bufs);
    ctx.progress.finish();
    if runs.is_empty() {
        return Err(crate::probes::nothing_mapped(&backings));
    }

    Ok(MemLatencyRaw {
        params: MemLatencyParams {
            cpu,
            repetitions: reps,
            sizes_bytes: sizes,
            max_size_bytes: max_size,
            page_kinds: kinds,
            loads_per_sample: loads,
            tlb_sweep_pages: tlb_sweep,
        },
        effects: MemLatencyEffects {
            pinned_cpus: vec![cpu],
            core_clock_ghz: Some(core.hz / 1e9),
            page_kinds: backings,
            cache_sizes_bytes: CacheSizes(caches),
            max_size_capped: capped,
            memory_limit: limit.map(|room| words::machine::room_left(&room)),
        },
        samples: samples_of(&runs),
        series: Vec::new(),
    })
}

/// The sizes the latency curve is measured at, up to the largest memory allows.
struct Sweep {
    sizes: Vec<u64>,
    max_size: u64,
    /// Why the sweep stops below the size it wanted, when it does.
    capped: Option<String>,
    largest: u64,
}

/// The sweep's sizes: `--sizes`, or the profile's points up to four LLCs, capped at
/// `--max-size` or what memory allows (the cap itself the last point); cache-line multiples,
/// sorted, at least 128 bytes.
fn sweep(
    ctx: &ProbeContext,
    caches: &[CacheSize],
    llc: Option<u64>,
    kinds: &[PageKind],
) -> Result<Sweep, ProbeFailure> {
    let profile = ctx.options.profile;
    let wanted = largest_size(llc);
    let (max_size, capped) = match ctx.options.max_size {
        Some(m) => (
            m,
            (m < wanted).then(|| {
                format!(
                    "the sweep stops at {} instead of {}: --max-size",
                    human_bytes(m),
                    human_bytes(wanted)
                )
            }),
        ),
        None => default_max_size(
            wanted,
            kinds_using_mem_available(kinds),
            llc.map_or(DRAM_POINT_MIN_BYTES, |l| {
                l.saturating_mul(curve::DRAM_MIN_LLC_FACTOR)
            }),
        )?,
    };
    let mut sizes: Vec<u64> = match ctx.options.sizes.clone() {
        Some(s) => s,
        None => {
            let mut s = match profile {
                Profile::Full => full_sizes(wanted),
                Profile::Quick => quick_sizes(caches, wanted),
            };
            // Capped: the cap itself becomes the largest point, so DRAM is still read as far
            // out as memory allows.
            if s.last().is_some_and(|&l| l > max_size) {
                s.push(max_size);
            }
            s
        }
    };
    sizes.iter_mut().for_each(|s| *s = (*s / 64) * 64);
    sizes.retain(|&s| (MIN_BUFFER_BYTES..=max_size).contains(&s));
    sizes.sort_unstable();
    sizes.dedup();
    let Some(&largest) = sizes.last() else {
        return Err(ProbeFailure::Skipped(format!(
            "no buffer size between {} and the maximum of {}",
            human_bytes(MIN_BUFFER_BYTES),
            human_bytes(max_size)
        )));
    };
    Ok(Sweep {
        sizes,
        max_size,
        capped,
        largest,
    })
}

/// Every sample, by kind: the latency curve's per size, the TLB sweep's per page count.
fn samples_of(runs: &[KindRun]) -> MemLatencySamples {
    let mut s = MemLatencySamples::default();
    for run in runs {
        for (size, ns) in &run.curve {
            s.latency_ns.insert((run.kind, *size), ns.clone());
        }
        for (pages, ns) in &run.tlb {
            s.tlb_sweep_latency_ns
                .insert((run.kind, *pages), ns.clone());
        }
    }
    s
}

/// The latency curve and the TLB sweep on every buffer, kinds in blocks (see [`time_chases`]).
/// `drawn` is a size and its cycle drawn already.
#[cfg(target_arch = "x86_64")]
fn measure_kinds(
    ctx: &ProbeContext,
    bufs: &mut [Buffer],
    sizes: &[u64],
    tlb_sweep: &[u64],
    loads: u64,
    reps: usize,
    drawn: (u64, Vec<u32>),
) -> Vec<KindRun> {
    let mut runs: Vec<KindRun> = bufs
        .iter()
        .map(|b| KindRun {
            kind: b.kind(),
            curve: Vec::new(),
            tlb: Vec::new(),
        })
        .collect();
    let points = sizes
        .iter()
        .map(|&s| (s, s / 64, Layout::Lines))
        .chain(tlb_sweep.iter().map(|&p| (p, p, Layout::OneLinePerPage)));
    let mut drawn = Some(drawn);
    for (x, slots, layout) in points {
        // One cycle for every kind: the same pattern, drawn once (the largest one already).
        let next = match drawn.take_if(|d| layout == Layout::Lines && d.0 == x) {
            Some((_, next)) => next,
            None => chase::sattolo_cycle(slots as usize, &mut chase::SplitMix64::new(SEED ^ x)),
        };
        let starts: Vec<*const u64> = bufs
            .iter_mut()
            // SAFETY: slots x stride <= the buffer's length (sizes and the sweep are capped
            // by it); buffers are page aligned.
            .map(|b| unsafe { chase::build(b.as_mut_ptr(), &next, layout) })
            .collect();
        drop(next);
        let max_laps = (layout == Layout::OneLinePerPage).then_some(WARM_UP_SWEEP_LAPS);
        let samples = time_chases(ctx, &starts, slots, loads, reps, max_laps);
        for (run, ns) in runs.iter_mut().zip(samples) {
            match layout {
                Layout::Lines => run.curve.push((x, ns)),
                Layout::OneLinePerPage => run.tlb.push((x, ns)),
            }
        }
        ctx.progress.advance(1);
    }
    runs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_sizes_span_16k_to_the_largest_with_midpoints() {
        let s = full_sizes(1 << 30);
        assert_eq!(s.first(), Some(&(16 << 10)));
        assert_eq!(&s[s.len() - 3..], [512 << 20, 768 << 20, 1 << 30]);
        assert!(s.contains(&(48 << 10)));
        assert!(s.windows(2).all(|w| w[0] < w[1]));
        // The Emerald Rapids guest: 1040 MiB ends the curve, 1 GiB beside it is left out.
        let s = full_sizes(1040 << 20);
        assert_eq!(&s[s.len() - 2..], [768 << 20, 1040 << 20]);
    }

    const ZEN5: [CacheSize; 3] = [
        CacheSize {
            level: 1,
            bytes: 48 << 10,
        },
        CacheSize {
            level: 2,
            bytes: 1 << 20,
        },
        CacheSize {
            level: 3,
            bytes: 32 << 20,
        },
    ];

    #[test]
    fn the_largest_size_is_4x_the_llc_and_at_least_1_gib() {
        assert_eq!(largest_size(Some(32 << 20)), 1 << 30);
        assert_eq!(largest_size(None), 1 << 30);
        // The Emerald Rapids guest reports a 260 MiB L3: its sweep stopped at 512 MiB, short
        // of DRAM by the sizes, and the 4 KiB page penalty went unjudged.
        assert_eq!(largest_size(Some(260 << 20)), 1040 << 20);
        // Whole 2 MiB pages.
        assert_eq!(largest_size(Some((300 << 20) + 4096)), 1202 << 20);
    }

    #[test]
    fn quick_sizes_read_inside_each_cache_and_dram_at_three_sizes() {
        assert_eq!(
            quick_sizes(&ZEN5, largest_size(Some(32 << 20))),
            [16 << 10, 256 << 10, 8 << 20, 64 << 20, 256 << 20, 1 << 30]
        );
        assert_eq!(
            quick_sizes(&curve::EMERALD_RAPIDS_GUEST, largest_size(Some(260 << 20))),
            [16 << 10, 512 << 10, 65 << 20, 260 << 20, 1040 << 20]
        );
    }

    #[test]
    fn buffers_of_every_kind_fit_in_a_quarter_of_available_memory() {
        // Regression: the cap counted one buffer while every kind is mapped at once.
        use crate::machine::meminfo::memory_room;
        let quarter = |avail: u64| memory_room(Some(avail), None, None).unwrap().for_buffers();
        assert_eq!(cap_to_available(1 << 30, quarter(24 << 30), 2), 1 << 30);
        assert_eq!(cap_to_available(1 << 30, quarter(4 << 30), 1), 1 << 30);
        assert_eq!(cap_to_available(1 << 30, quarter(4 << 30), 2), 512 << 20);
        assert_eq!(cap_to_available(1 << 30, quarter(3 << 30), 2), 256 << 20);
        assert_eq!(cap_to_available(1 << 30, quarter(1 << 20), 2), 1 << 20);
    }

    #[test]
    fn a_512_mib_cgroup_leaves_each_of_two_buffers_128_mib() {
        // issue 29: check was OOM-killed in a 512 MiB cgroup; three quarters of what the limit
        // leaves (472 MiB) over two buffers is 177 MiB: the power of two below is 128 MiB, 4x
        // the 32 MiB L3 of the Zen 4 guest, so DRAM is still reached.
        use crate::machine::meminfo::memory_room;
        let room = memory_room(Some(22 << 30), Some((512 << 20, 40 << 20)), None).unwrap();
        assert_eq!(cap_to_available(1 << 30, room.for_buffers(), 2), 128 << 20);
        let why = words::machine::buffers_capped(2, 1 << 30, &room);
        assert_eq!(
            why,
            "sized to the 512 MiB cgroup memory limit, which leaves 472 MiB"
        );
        let skip = words::machine::limit_leaves(&room, 2, 256 << 20, probe::MEM_LATENCY);
        assert!(
            skip.starts_with("the 512 MiB cgroup memory limit leaves 472 MiB, too little for 2"),
            "{skip}"
        );
        assert!(skip.ends_with("cpudoctor probe mem-latency"), "{skip}");
    }

    #[test]
    fn tlb_sweep_doubles_with_midpoints_in_full() {
        assert_eq!(tlb_pages(Profile::Quick, 2048), [256, 512, 1024, 2048]);
        assert_eq!(tlb_pages(Profile::Full, 32), [8, 12, 16, 24, 32]);
    }
}
