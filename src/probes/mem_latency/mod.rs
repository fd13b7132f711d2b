//! Memory latency: a pointer chase over one random cycle of cache lines
//! ([`crate::measure::chase`]), at buffer
//! sizes from 16 KiB to 1 GiB, on each page kind (4 KiB, transparent huge pages, hugetlbfs
//! 2 MiB and 1 GiB when reserved). Per size: ns and core cycles per load. From the curves
//! ([`curve`]): L1, L2, L3 and DRAM latencies located from the cache sizes sysfs reports and
//! checked against the curve's steps, and the DRAM penalty of 4 KiB pages over huge pages.
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

pub mod curve;

use super::{Probe, ProbeContext, ProbeFailure, Profile};
use crate::format::human_bytes;
use crate::measure::buffer::{Buffer, PageKind, allocate_kinds, kinds_using_mem_available};
use crate::measure::chase::{self, Layout};
use crate::measure::{CoreClock, estimate_core_clock, pin_to_cpu, stats};
use crate::schema::{Better, Metric, ProbeResult, Series, Status};
use curve::{CacheSize, LevelOnCurve, TlbPoint};
use serde_json::json;

/// The memory latency probe.
pub struct MemLatencyProbe;

/// Loads per timed sample, full profile: 65536 take ~0.1 ms in L1 and ~10-40 ms in DRAM behind
/// 4 KiB page walks; long enough to dwarf the clock reads, short enough for several samples
/// per size.
const LOADS_PER_SAMPLE_FULL: u64 = 1 << 16;
/// Loads per timed sample, quick profile: a quarter, still ~16 us in L1.
const LOADS_PER_SAMPLE_QUICK: u64 = 1 << 14;
/// Longest chase warmed up with a whole lap before timing (32 MiB of lines): the lines must
/// be in the cache being measured. Longer chases miss anyway.
const WARM_UP_CAP: u64 = 1 << 19;
/// Largest span of the TLB sweep: 65536 pages of 4 KiB, far past any second-level TLB (3072
/// entries on Zen 4, 1536-2048 on recent Intel cores).
const TLB_SWEEP_MAX_PAGES: u64 = 1 << 16;
/// Smallest span of the quick TLB sweep: 256 pages, past every first-level DTLB (64-96
/// entries), so its points go to where walks start.
const TLB_SWEEP_QUICK_MIN_PAGES: u64 = 256;
/// Seed of the random cycles, fixed so every run chases the same pattern.
const SEED: u64 = 0xC0FF_EE00_D0C7_0A11;

impl Probe for MemLatencyProbe {
    fn name(&self) -> &'static str {
        "mem-latency"
    }

    fn about(&self) -> &'static str {
        "Pointer-chase latency by buffer size and page size (L1/L2/L3/DRAM, TLB reach)"
    }

    fn run(&self, ctx: &ProbeContext) -> Result<ProbeResult, ProbeFailure> {
        crate::arch::require_x86_64().map_err(ProbeFailure::Skipped)?;
        run(ctx)
    }
}

/// The sizes of the full curve: powers of two from 16 KiB to 1 GiB and the points halfway
/// between (x1.5), so each cache edge has a point on either side.
pub fn full_sizes() -> Vec<u64> {
    let mut v = Vec::new();
    let mut s: u64 = 16 << 10;
    while s <= 1 << 30 {
        v.push(s);
        if s < 1 << 30 {
            v.push(s + s / 2);
        }
        s *= 2;
    }
    v
}

/// The quick curve: one point inside each cache level (a quarter of it), one past it (twice
/// it), and DRAM at 4x the last-level cache (`llc`, at least 64 MiB).
pub fn quick_sizes(caches: &[CacheSize], llc: Option<u64>) -> Vec<u64> {
    let mut v = vec![16 << 10];
    for c in caches {
        v.push(c.bytes / 4);
        v.push(c.bytes * 2);
    }
    let llc = llc.unwrap_or(16 << 20);
    v.push((llc * curve::DRAM_MIN_LLC_FACTOR).max(64 << 20));
    // The DRAM point: page-table footprint grows with the memory touched, so the 4 KiB-page
    // penalty of a large heap only shows well past the LLC (1.02x at 128 MiB, 1.5x at 1 GiB on
    // the Zen 4 guest). The caller drops sizes above the quick profile's maximum.
    v.push(QUICK_DRAM_BYTES);
    v.retain(|&s| s >= 16 << 10);
    v.sort_unstable();
    v.dedup();
    v
}

/// The largest size of the quick curve, where `check` reads DRAM latency and the 4 KiB-page
/// penalty.
pub const QUICK_DRAM_BYTES: u64 = 512 << 20;

/// Default largest buffer: 1 GiB full, 512 MiB quick (whose sizes stop at 4x the LLC). Every
/// kind's buffer is mapped at once (see [`time_chases`]), so the buffers drawing on
/// `MemAvailable` (`buffers`: 4 KiB and THP) together never take more than a quarter of it.
fn default_max_size(profile: Profile, buffers: usize) -> u64 {
    let want: u64 = match profile {
        Profile::Full => 1 << 30,
        Profile::Quick => 512 << 20,
    };
    match crate::machine::meminfo::read_mem_available_bytes() {
        Some(avail) => cap_to_available(want, avail, buffers),
        None => want,
    }
}

/// `want`, or the largest power of two such that `buffers` of it fit in a quarter of
/// `available` bytes (at least 1 MiB).
pub fn cap_to_available(want: u64, available: u64, buffers: usize) -> u64 {
    let share = available / 4 / buffers.max(1) as u64;
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
///
/// Each kind must have the caches to itself while it is timed: if the kinds took their samples
/// in turn, every other kind's chase would walk as many lines between two visits to a line as
/// this one does, so the cache footprint would be the sum over kinds (2x with 4 KiB + THP)
/// and a point between LLC/2 and the LLC would read as memory. So each kind takes its samples
/// in a block after an untimed lap that brings its lines and TLB entries back. The kinds are
/// compared with each other and must see the same machine noise, so there are two rounds of
/// blocks in ABBA order (the second round reversed): slow drift hits every kind alike.
#[cfg(target_arch = "x86_64")]
fn time_chases(
    ctx: &ProbeContext,
    starts: &[*const u64],
    slots: u64,
    loads: u64,
    reps: usize,
) -> Vec<Vec<f64>> {
    use crate::arch::{CHASE_LOADS_PER_ITERATION, pointer_chase};
    let clock = ctx.clock;
    let loads = loads.next_multiple_of(CHASE_LOADS_PER_ITERATION);
    // A whole lap while the chase fits in some cache; beyond the cap every load misses anyway
    // and one sample's worth settles the TLB and the core clock.
    let warm_up = if slots <= WARM_UP_CAP { slots } else { loads };
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
            ps[k] = unsafe { pointer_chase(ps[k], warm_up) };
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

impl KindRun {
    fn medians(points: &[(u64, Vec<f64>)]) -> Vec<(u64, f64)> {
        points
            .iter()
            .filter_map(|(s, ns)| stats::median(ns).map(|m| (*s, m)))
            .collect()
    }
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
fn run(_ctx: &ProbeContext) -> Result<ProbeResult, ProbeFailure> {
    unreachable!("require_x86_64 skips first")
}

#[cfg(target_arch = "x86_64")]
fn run(ctx: &ProbeContext) -> Result<ProbeResult, ProbeFailure> {
    let cpu = *ctx
        .cpus()?
        .first()
        .ok_or_else(|| ProbeFailure::Skipped("no CPU available to run on".into()))?;
    let profile = ctx.options.profile;
    let reps = ctx.repetitions(5, 11);
    let loads = match profile {
        Profile::Full => LOADS_PER_SAMPLE_FULL,
        Profile::Quick => LOADS_PER_SAMPLE_QUICK,
    };
    let caches = cache_sizes(ctx);
    let kinds: Vec<PageKind> = ctx
        .options
        .page_kinds
        .clone()
        .unwrap_or_else(|| PageKind::ALL.to_vec());
    let max_size = ctx
        .options
        .max_size
        .unwrap_or_else(|| default_max_size(profile, kinds_using_mem_available(&kinds)));
    let mut sizes: Vec<u64> = ctx.options.sizes.clone().unwrap_or_else(|| match profile {
        Profile::Full => full_sizes(),
        Profile::Quick => quick_sizes(
            &caches,
            ctx.machine.topology.as_ref().and_then(|t| t.llc_bytes()),
        ),
    });
    sizes.iter_mut().for_each(|s| *s = (*s / 64) * 64);
    sizes.retain(|&s| s >= 128 && s <= max_size);
    sizes.sort_unstable();
    sizes.dedup();
    let Some(&largest) = sizes.last() else {
        return Err(ProbeFailure::Skipped(format!(
            "no buffer size at or below the maximum of {}",
            human_bytes(max_size)
        )));
    };
    let tlb_max_pages = TLB_SWEEP_MAX_PAGES.min(largest / 4096);
    let tlb_sweep = tlb_pages(profile, tlb_max_pages);

    let _pin = pin_to_cpu(cpu)?;
    let core: CoreClock = estimate_core_clock(ctx.clock, 7)
        .ok_or_else(|| ProbeFailure::Failed("core clock estimate failed".into()))?;

    ctx.progress
        .begin("mem-latency", (sizes.len() + tlb_sweep.len()) as u64);
    // Every kind's buffer is mapped at once, so the kinds can take turns (in blocks, see
    // `time_chases`); pinned already, so the pages fault in on this CPU's NUMA node.
    let kb = allocate_kinds(&kinds, |kind| Buffer::allocate(largest, kind))
        .map_err(|e| ProbeFailure::Failed(e.to_string()))?;
    let mut bufs = kb.buffers;
    let backings = kb.records;
    let runs = measure_kinds(ctx, &mut bufs, &sizes, &tlb_sweep, loads, reps);
    drop(bufs);
    ctx.progress.finish();
    if runs.is_empty() {
        return Err(crate::probes::nothing_mapped(&backings));
    }

    let mut r = ProbeResult::new("mem-latency", Status::Ok);
    r.params.insert("cpu".into(), json!(cpu));
    r.params.insert("repetitions".into(), json!(reps));
    r.params.insert("sizes_bytes".into(), json!(sizes));
    r.params.insert("max_size_bytes".into(), json!(max_size));
    r.params.insert("page_kinds".into(), json!(kinds));
    r.params.insert("loads_per_sample".into(), json!(loads));
    r.params.insert("tlb_sweep_pages".into(), json!(tlb_sweep));
    r.effects.insert("pinned_cpus".into(), json!([cpu]));
    r.effects
        .insert("core_clock_ghz".into(), json!(core.hz / 1e9));
    r.effects.insert("page_kinds".into(), json!(backings));
    r.effects.insert(
        "cache_sizes_bytes".into(),
        json!(
            caches
                .iter()
                .map(|c| (format!("l{}", c.level), c.bytes))
                .collect::<std::collections::BTreeMap<_, _>>()
        ),
    );
    summarise(&mut r, &runs, &caches, &core);
    Ok(r)
}

/// The latency curve and the TLB sweep on every buffer, kinds in blocks (see [`time_chases`]).
#[cfg(target_arch = "x86_64")]
fn measure_kinds(
    ctx: &ProbeContext,
    bufs: &mut [Buffer],
    sizes: &[u64],
    tlb_sweep: &[u64],
    loads: u64,
    reps: usize,
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
    for (x, slots, layout) in points {
        // One cycle for every kind: the same pattern, drawn once.
        let next = chase::sattolo_cycle(slots as usize, &mut chase::SplitMix64::new(SEED ^ x));
        let starts: Vec<*const u64> = bufs
            .iter_mut()
            // SAFETY: slots x stride <= the buffer's length (sizes and the sweep are capped
            // by it); buffers are page aligned.
            .map(|b| unsafe { chase::build(b.as_mut_ptr(), &next, layout) })
            .collect();
        drop(next);
        let samples = time_chases(ctx, &starts, slots, loads, reps);
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

/// Metrics, samples, series and the level analysis from the measured kinds.
fn summarise(r: &mut ProbeResult, runs: &[KindRun], caches: &[CacheSize], core: &CoreClock) {
    let ghz = core.hz / 1e9;
    let mut steps = serde_json::Map::new();
    for run in runs {
        let k = run.kind.name();
        steps.insert(
            k.to_string(),
            json!(curve::curve_steps(&KindRun::medians(&run.curve))),
        );
        for (size, ns) in &run.curve {
            r.samples
                .insert(format!("latency_ns.{k}.{size}"), ns.clone());
        }
        for (pages, ns) in &run.tlb {
            r.samples.insert(
                format!("tlb_sweep_latency_ns.{k}.{pages}_pages"),
                ns.clone(),
            );
        }
        let med = KindRun::medians(&run.curve);
        r.series.push(Series::Xy {
            name: format!("latency_{k}"),
            x_label: "size_bytes".into(),
            y_label: "latency_ns".into(),
            points: med.iter().map(|&(s, ns)| [s as f64, ns]).collect(),
        });
        r.series.push(Series::Xy {
            name: format!("latency_cycles_{k}"),
            x_label: "size_bytes".into(),
            y_label: "latency_cycles".into(),
            points: med.iter().map(|&(s, ns)| [s as f64, ns * ghz]).collect(),
        });
        r.series.push(Series::Xy {
            name: format!("tlb_sweep_{k}"),
            x_label: "size_bytes spanned (one line per 4 KiB page)".into(),
            y_label: "latency_ns".into(),
            points: KindRun::medians(&run.tlb)
                .iter()
                .map(|&(p, ns)| [(p * 4096) as f64, ns])
                .collect(),
        });
    }

    r.effects.insert("curve_steps_bytes".into(), json!(steps));

    let small = runs.iter().find(|r| r.kind == PageKind::Base4k);
    let huge = runs.iter().find(|r| r.kind.is_huge());
    // Cache latencies on huge pages where they took: 4 KiB pages add TLB misses from 288 KiB
    // (Zen 4's 72-entry L1 DTLB) on, which are not the cache's latency.
    let main = huge.or(small).expect("at least one kind ran");
    r.effects
        .insert("latency_page_kind".into(), json!(main.kind.name()));
    let levels = curve::locate_levels(&KindRun::medians(&main.curve), caches);
    let samples_at = |run: &KindRun, size: u64| {
        run.curve
            .iter()
            .find(|(s, _)| *s == size)
            .map(|(_, ns)| ns.clone())
            .unwrap_or_default()
    };
    for level in &levels {
        if !level.confirmed() {
            // The curve contradicts the size sysfs gives (no step past it, or a step before
            // it): what was read "inside" is another level's latency, not this one's.
            continue;
        }
        let ns = samples_at(main, level.at_size_bytes);
        let cycles: Vec<f64> = ns.iter().map(|x| x * ghz).collect();
        let name = &level.name;
        r.metrics.extend(
            [
                Metric::from_samples(&format!("{name}_latency_ns"), "ns", Better::Lower, &ns),
                Metric::from_samples(
                    &format!("{name}_latency_cycles"),
                    "cycles",
                    Better::Lower,
                    &cycles,
                ),
            ]
            .into_iter()
            .flatten(),
        );
    }
    r.effects.insert("levels".into(), json!(levels));

    // DRAM on 4 KiB pages, and the penalty over huge pages, at the same (largest) size.
    let dram: Option<&LevelOnCurve> = levels.iter().find(|l| l.name == "dram");
    if let (Some(small), Some(d)) = (small, dram) {
        let ns = samples_at(small, d.at_size_bytes);
        if let Some(m) = Metric::from_samples("dram_latency_4k_ns", "ns", Better::Lower, &ns) {
            if main.kind.is_huge() {
                // The kinds take turns (ABBA, see `time_chases`): sample i of each comes from
                // the same half of the run, so their ratios pair.
                let huge_ns = samples_at(main, d.at_size_bytes);
                r.metrics.extend(Metric::paired_ratio(
                    "tlb_penalty_ratio",
                    Better::Lower,
                    &ns,
                    &huge_ns,
                ));
            }
            r.metrics.push(m);
        }
    }

    // TLB reach from the one-line-per-page sweep on both kinds.
    if let (Some(small), Some(huge)) = (small, huge) {
        let s = KindRun::medians(&small.tlb);
        let h = KindRun::medians(&huge.tlb);
        let points: Vec<TlbPoint> = s
            .iter()
            .zip(&h)
            .filter(|(a, b)| a.0 == b.0)
            .map(|(a, b)| TlbPoint {
                pages: a.0,
                ns_4k: a.1,
                ns_huge: b.1,
            })
            .collect();
        r.series.push(Series::Xy {
            name: "tlb_extra_cycles_4k".into(),
            x_label: "size_bytes spanned (one line per 4 KiB page)".into(),
            y_label: "extra_latency_cycles (4 KiB over huge pages)".into(),
            points: points
                .iter()
                .map(|p| [(p.pages * 4096) as f64, (p.ns_4k - p.ns_huge) * ghz])
                .collect(),
        });
        // The knee of each repetition's sweep (sample k of every point, both page kinds), so
        // the reach has an interval: on a shared guest one sweep's knee moved between 4 and
        // 128 MiB from run to run, and a single knee of the medians hid that.
        let reps = small
            .tlb
            .iter()
            .chain(&huge.tlb)
            .map(|(_, v)| v.len())
            .min()
            .unwrap_or(0);
        let knees: Vec<f64> = (0..reps)
            .filter_map(|k| {
                let sweep: Vec<TlbPoint> = small
                    .tlb
                    .iter()
                    .zip(&huge.tlb)
                    .filter(|(a, b)| a.0 == b.0)
                    .map(|(a, b)| TlbPoint {
                        pages: a.0,
                        ns_4k: a.1[k],
                        ns_huge: b.1[k],
                    })
                    .collect();
                curve::tlb_reach(&sweep, core.hz).map(|b| b as f64)
            })
            .collect();
        let knee_metric = if knees.len() * 2 > reps {
            Metric::from_samples("tlb_reach_bytes", "bytes", Better::Higher, &knees)
        } else {
            None
        };
        r.samples
            .insert("tlb_reach_bytes.repetitions".into(), knees.clone());
        match knee_metric.or_else(|| {
            (reps <= 1)
                .then(|| curve::tlb_reach(&points, core.hz))
                .flatten()
                .map(|bytes| {
                    Metric::derived("tlb_reach_bytes", bytes as f64, "bytes", Better::Higher)
                })
        }) {
            Some(m) => r.metrics.push(m),
            None => {
                r.effects.insert(
                    "tlb_reach".into(),
                    json!(
                        "no knee in most repetitions of the sweep: page walks did not start, \
                         started at once, or moved from one repetition to the next"
                    ),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_sizes_span_16k_to_1g_with_midpoints() {
        let s = full_sizes();
        assert_eq!(s.first(), Some(&(16 << 10)));
        assert_eq!(s.last(), Some(&(1 << 30)));
        assert!(s.contains(&(48 << 10)));
        assert!(s.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn quick_sizes_bracket_each_cache() {
        let caches = [
            CacheSize {
                level: 1,
                bytes: 32 << 10,
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
        assert_eq!(
            quick_sizes(&caches, Some(32 << 20)),
            [
                16 << 10,
                64 << 10,
                256 << 10,
                2 << 20,
                8 << 20,
                64 << 20,
                128 << 20,
                512 << 20
            ]
        );
    }

    #[test]
    fn buffers_of_every_kind_fit_in_a_quarter_of_available_memory() {
        // Regression: the cap counted one buffer while every kind is mapped at once.
        assert_eq!(cap_to_available(1 << 30, 24 << 30, 2), 1 << 30);
        assert_eq!(cap_to_available(1 << 30, 4 << 30, 1), 1 << 30);
        assert_eq!(cap_to_available(1 << 30, 4 << 30, 2), 512 << 20);
        assert_eq!(cap_to_available(1 << 30, 3 << 30, 2), 256 << 20);
        assert_eq!(cap_to_available(1 << 30, 1 << 20, 2), 1 << 20);
    }

    #[test]
    fn tlb_sweep_doubles_with_midpoints_in_full() {
        assert_eq!(tlb_pages(Profile::Quick, 2048), [256, 512, 1024, 2048]);
        assert_eq!(tlb_pages(Profile::Full, 32), [8, 12, 16, 24, 32]);
    }
}
