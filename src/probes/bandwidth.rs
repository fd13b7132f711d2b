//! Sequential read bandwidth from memory, with the widest vector loads the CPU has (AVX-512,
//! else AVX2, else SSE2): one thread and all threads, on 4 KiB and on huge pages, without and
//! with software prefetch at a few distances. Buffers are well beyond the last-level cache
//! (4x or more), so every line comes from DRAM. A timed pass reads one window of the buffer
//! (at most [`PASS_BYTES_QUICK`] or [`PASS_BYTES_FULL`]), the next pass the next window: the
//! time a pass takes does not grow with the cache sysfs reports (a guest reports its host's
//! L3: 260 MiB on the Emerald Rapids guest, whose quick probe read 1 GiB per pass and took
//! 7.6 s), and a window is read again only after the rest of the buffer, 3x the LLC or more,
//! has gone through the caches.
//!
//! The seed case (`p4-large-pages-prefetch.ru.txt`): whether prefetch survives a TLB miss
//! decides whether large pages help streaming. A CPU whose prefetches stop at a page boundary
//! reads faster on huge pages (Northwood: 3.2 vs 3.8 GB/s); one whose prefetches walk the page
//! tables does not care (Prescott: 4.2 GB/s either way). The gains this probe reports are that
//! comparison on the machine at hand.

// Elsewhere than x86-64 the probe skips before measuring (`arch::require_x86_64`) and the
// kernels it times do not exist, so its measuring half is compiled but never called there.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code, unused_imports))]

use super::{Measurement, ProbeContext, ProbeFailure, Profile};
use crate::format::human_bytes;
use crate::machine::Machine;
use crate::measure::buffer::{Buffer, PageKind, allocate_kinds, kinds_using_mem_available};
use crate::measure::pin_to_cpu;
use crate::names::probe;
use crate::schema::figures::Analysis;
use crate::schema::probes::bandwidth::{
    BandwidthAnalysis, BandwidthDerived, BandwidthEffects, BandwidthParams, BandwidthRaw,
    BandwidthSamples, Prefetch, PrefetchOn, ReadConfig,
};
use crate::schema::{Better, Metric, Series};
use crate::stats;
use std::collections::BTreeMap;

/// The bandwidth probe.
pub struct BandwidthProbe;

/// Software prefetch distances, in bytes ahead of the loads: one 512-byte iteration ahead
/// (well inside a page), half a 4 KiB page, and two pages ahead (every prefetch lands in the
/// next-but-one page, so it meets the TLB miss first: the seed's case).
pub const PREFETCH_DISTANCES: [usize; 3] = [512, 2048, 8192];

/// Most bytes one timed pass reads, quick profile: 256 MiB take 10-30 ms at the 8-40 GB/s
/// of one core, far above the clock's resolution.
pub const PASS_BYTES_QUICK: u64 = 256 << 20;
/// Most bytes one timed pass reads, full profile.
pub const PASS_BYTES_FULL: u64 = 1 << 30;

/// Windows a buffer of `size` bytes is read in, one per pass: one when a pass may read it
/// whole, else at least [`MIN_WINDOWS`].
pub fn windows_per_buffer(size: u64, pass_bytes: u64) -> usize {
    if size <= pass_bytes {
        1
    } else {
        (size.div_ceil(pass_bytes) as usize).max(MIN_WINDOWS)
    }
}

/// Fewest windows of a buffer read in windows: a window comes round after the other three
/// quarters of the buffer, 3x the LLC at the quick profile's 4x, went through the caches.
pub const MIN_WINDOWS: usize = 4;

/// Buffer size: 16x the last-level cache for the full profile, 4x for the quick one, with a
/// floor for machines whose cache sysfs does not report.
fn default_size(profile: Profile, llc: Option<u64>) -> u64 {
    let llc = llc.unwrap_or(32 << 20);
    match profile {
        Profile::Full => (llc * 16).max(256 << 20),
        Profile::Quick => (llc * 4).max(64 << 20),
    }
}

impl Measurement for BandwidthProbe {
    type Raw = BandwidthRaw;
    type Figures = BandwidthAnalysis;
    const NAME: &'static str = probe::BANDWIDTH;
    const ABOUT: &'static str =
        "Sequential read bandwidth (widest vector loads; 1 and all threads; page size; prefetch)";

    fn measure(&self, ctx: &ProbeContext) -> Result<BandwidthRaw, ProbeFailure> {
        crate::arch::require_x86_64().map_err(ProbeFailure::Skipped)?;
        measure(ctx)
    }

    fn analyse(raw: &BandwidthRaw, _machine: &Machine) -> Analysis<BandwidthAnalysis> {
        Analysis::of(analyse(raw))
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn measure(_ctx: &ProbeContext) -> Result<BandwidthRaw, ProbeFailure> {
    unreachable!("require_x86_64 skips first")
}

/// One measured configuration.
struct Config {
    kind: PageKind,
    threads: usize,
    prefetch: Option<usize>,
    gbs: Vec<f64>,
}

impl Config {
    fn new(kind: PageKind, threads: usize, prefetch: Option<usize>) -> Config {
        Config {
            kind,
            threads,
            prefetch,
            gbs: Vec::new(),
        }
    }

    fn key(&self) -> ReadConfig {
        ReadConfig {
            threads: self.threads,
            kind: self.kind,
            prefetch_bytes: self.prefetch,
        }
    }

    fn median(&self) -> Option<f64> {
        stats::median(&self.gbs)
    }
}

/// Bytes each of `threads` readers takes of a `len`-byte buffer: whole read iterations.
#[cfg(target_arch = "x86_64")]
fn slice_bytes(len: usize, threads: usize) -> usize {
    use crate::arch::READ_BYTES_PER_ITERATION;
    (len / threads.max(1)) / READ_BYTES_PER_ITERATION * READ_BYTES_PER_ITERATION
}

/// True when `cpus` sit on more than one NUMA node (as far as sysfs says).
#[cfg(target_arch = "x86_64")]
fn spans_numa_nodes(ctx: &ProbeContext, cpus: &[usize]) -> bool {
    let Some(t) = ctx.machine.topology.as_ref() else {
        return false;
    };
    let nodes: std::collections::BTreeSet<Option<usize>> = cpus
        .iter()
        .map(|&c| t.place(c).and_then(|p| p.numa_node))
        .collect();
    nodes.len() > 1
}

/// Part `window.0` (modulo `window.1`) of `window.1` equal parts of a slice of `slice` bytes:
/// (offset, length), whole read iterations.
#[cfg(target_arch = "x86_64")]
fn window_of(slice: usize, window: (usize, usize)) -> (usize, usize) {
    use crate::arch::READ_BYTES_PER_ITERATION;
    let parts = window.1.max(1);
    let len = (slice / parts) / READ_BYTES_PER_ITERATION * READ_BYTES_PER_ITERATION;
    ((window.0 % parts) * len, len)
}

/// One pass over `buf` by one thread per CPU of `cpus` (pinned), each over part `window.0`
/// of `window.1` of its own slice; returns GB/s: all bytes over the time from the first
/// thread's start to the last one's end.
#[cfg(target_arch = "x86_64")]
fn read_pass(
    ctx: &ProbeContext,
    buf: &Buffer,
    cpus: &[usize],
    width: crate::arch::VectorWidth,
    prefetch: Option<usize>,
    window: (usize, usize),
) -> Result<f64, ProbeFailure> {
    use crate::arch::sequential_read;
    use std::sync::Barrier;
    let n = cpus.len();
    let slice = slice_bytes(buf.len(), n);
    let (offset, len) = window_of(slice, window);
    let base = buf.as_ptr() as usize;
    let clock = ctx.clock;
    let barrier = Barrier::new(n);
    let stamps: Vec<Result<(u64, u64), ProbeFailure>> = std::thread::scope(|s| {
        let handles: Vec<_> = cpus
            .iter()
            .enumerate()
            .map(|(i, &cpu)| {
                let barrier = &barrier;
                s.spawn(move || {
                    let pinned = pin_to_cpu(cpu).map_err(ProbeFailure::from);
                    // Every thread reaches the barrier, pinned or not, so none waits forever.
                    barrier.wait();
                    let t0 = clock.start();
                    // SAFETY: the window lies inside the slice, inside the buffer, a 512-byte
                    // multiple, aligned.
                    unsafe {
                        sequential_read(
                            (base + i * slice + offset) as *const u8,
                            len,
                            width,
                            prefetch,
                        )
                    };
                    let t1 = clock.end();
                    pinned.map(|_| (t0, t1))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("reader thread panicked"))
            .collect()
    });
    let stamps: Vec<(u64, u64)> = stamps.into_iter().collect::<Result<_, _>>()?;
    let start = stamps.iter().map(|t| t.0).min().expect("n >= 1");
    let end = stamps.iter().map(|t| t.1).max().expect("n >= 1");
    Ok((len * n) as f64 / clock.ticks_to_ns(end - start))
}

#[cfg(target_arch = "x86_64")]
fn measure(ctx: &ProbeContext) -> Result<BandwidthRaw, ProbeFailure> {
    use crate::arch::VectorWidth;
    let cpus = ctx.cpus()?;
    // Every pass reads from threads of its own, one per CPU.
    crate::measure::threads::check_can_start(cpus.len())?;
    let first = *cpus
        .first()
        .ok_or_else(|| ProbeFailure::Skipped("no CPU available to run on".into()))?;
    let profile = ctx.options.profile;
    // Six is the fewest repetitions whose median interval reaches 95% (order statistics:
    // five reach 93.8%), the level every interval is printed at.
    let reps = ctx.repetitions(6, 11);
    let width = VectorWidth::widest();
    let llc = ctx.machine.topology.as_ref().and_then(|t| t.llc_bytes());
    let kinds: Vec<PageKind> = ctx
        .options
        .page_kinds
        .clone()
        .unwrap_or_else(|| PageKind::ALL.to_vec());
    // On a NUMA machine the all-threads pass gets buffers of its own, each slice faulted in
    // by its reader, so every thread reads its own node's memory; the one-thread buffers are
    // faulted in on the first CPU. On one node the same buffer serves both.
    let per_thread_buffers = cpus.len() > 1 && spans_numa_nodes(ctx, &cpus);
    let buffers = kinds_using_mem_available(&kinds) * if per_thread_buffers { 2 } else { 1 };
    // A limit on this process (cgroup, RLIMIT_AS) is said even where the buffers fit it.
    let limit = crate::machine::meminfo::read_memory_room().filter(|r| r.is_limit());
    let needed = llc.unwrap_or(32 << 20) * LIMIT_MIN_LLC_FACTOR;
    let (size, capped) = buffer_size(ctx, default_size(profile, llc), buffers, needed)?;
    let size = size.next_multiple_of(1 << 21);
    let windows = windows_per_buffer(
        size,
        match profile {
            Profile::Full => PASS_BYTES_FULL,
            Profile::Quick => PASS_BYTES_QUICK,
        },
    );

    // Every kind's buffer is mapped at once so the configurations can take their passes in
    // turn: they are compared with each other, so a neighbour's burst on a shared machine must
    // hit them alike (a streaming read evicts everything, so the turns do not disturb each
    // other's caches). Pinned while mapping, so the pages fault in on the first CPU's node.
    let kb = {
        let _pin = pin_to_cpu(first)?;
        allocate_kinds(&kinds, |kind| Buffer::allocate(size, kind))
            .map_err(|e| ProbeFailure::Failed(e.to_string()))?
    };
    let backings = kb.records;
    let bufs = kb.buffers;
    let all_bufs = if per_thread_buffers {
        all_threads_buffers(&bufs, size, &cpus)?
    } else {
        Vec::new()
    };
    let configs = configurations(&bufs, cpus.len());
    let readers = Readers {
        first,
        cpus: &cpus,
        bufs: &bufs,
        all_bufs: &all_bufs,
        width,
        windows,
    };
    let configs = measure_passes(ctx, &readers, configs, reps)?;
    drop(bufs);
    drop(all_bufs);
    if configs.is_empty() {
        return Err(super::nothing_mapped(&backings));
    }

    Ok(BandwidthRaw {
        params: BandwidthParams {
            cpus: cpus.clone(),
            repetitions: reps,
            buffer_bytes: size,
            windows_per_buffer: Some(windows),
            page_kinds: kinds,
            prefetch_distances_bytes: PREFETCH_DISTANCES.to_vec(),
        },
        effects: BandwidthEffects {
            buffer_capped: capped,
            memory_limit: limit.map(|room| crate::words::machine::room_left(&room)),
            pinned_cpus: cpus,
            vector_isa: width.name().to_string(),
            vector_width_bits: width.bits(),
            page_kinds: backings,
            first_touch_cpu: Some(first),
            all_threads_first_touch: Some(
                if per_thread_buffers {
                    "each reader's slice"
                } else {
                    "first_touch_cpu (one NUMA node)"
                }
                .to_string(),
            ),
            buffer_over_llc_ratio: llc.map(|llc| size as f64 / llc as f64),
        },
        samples: BandwidthSamples {
            read_bw_gbs: configs.into_iter().map(|c| (c.key(), c.gbs)).collect(),
        },
        series: Vec::new(),
    })
}

/// The all-threads pass's own buffers on a NUMA machine, one per kind the one-thread
/// buffers got, each reader's slice faulted in by that reader.
#[cfg(target_arch = "x86_64")]
fn all_threads_buffers(
    bufs: &[Buffer],
    size: u64,
    cpus: &[usize],
) -> Result<Vec<Buffer>, ProbeFailure> {
    let slice = slice_bytes(size as usize, cpus.len());
    let kinds_taken: Vec<PageKind> = bufs.iter().map(Buffer::kind).collect();
    Ok(allocate_kinds(&kinds_taken, |kind| {
        Buffer::allocate_touched_by(size, kind, cpus, slice)
    })
    .map_err(|e| ProbeFailure::Failed(e.to_string()))?
    .buffers)
}

/// Fewest last-level caches a buffer must span for a pass to stream from DRAM under a limit:
/// with [`MIN_WINDOWS`] windows, a window comes round after 1.5x the LLC went through.
pub const LIMIT_MIN_LLC_FACTOR: u64 = 2;

/// The buffers' size: `wanted`, capped so `buffers` of them take at most what the memory room
/// allows them ([`crate::machine::meminfo::MemoryRoom::for_buffers`]), and at `--max-size`;
/// with the reason when capped. Skipped when a limit (cgroup, `RLIMIT_AS`) leaves less than
/// `needed` per buffer.
fn buffer_size(
    ctx: &ProbeContext,
    wanted: u64,
    buffers: usize,
    needed: u64,
) -> Result<(u64, Option<String>), ProbeFailure> {
    let mut size = wanted;
    let mut capped = None;
    if let Some(room) = crate::machine::meminfo::read_memory_room() {
        size = super::mem_latency::cap_to_available(size, room.for_buffers(), buffers);
        if room.is_limit() && ctx.options.max_size.is_none() && size < needed.min(wanted) {
            return Err(ProbeFailure::Skipped(crate::words::machine::limit_leaves(
                &room,
                buffers,
                needed,
                probe::BANDWIDTH,
            )));
        }
        if size < wanted {
            capped = Some(format!(
                "{} instead of {}: {}",
                human_bytes(size),
                human_bytes(wanted),
                crate::words::machine::buffers_capped(buffers, wanted, &room)
            ));
        }
    }
    if let Some(max) = ctx.options.max_size
        && max < size
    {
        size = max;
        capped = Some(format!(
            "{} instead of {}: --max-size",
            human_bytes(max),
            human_bytes(wanted)
        ));
    }
    Ok((size, capped))
}

/// The configurations, each with the index of its buffer: per kind, one thread without and
/// with each prefetch distance, then all threads.
fn configurations(bufs: &[Buffer], threads: usize) -> Vec<(usize, Config)> {
    let mut configs: Vec<(usize, Config)> = Vec::new();
    for (b, buf) in bufs.iter().enumerate() {
        for prefetch in std::iter::once(None).chain(PREFETCH_DISTANCES.map(Some)) {
            configs.push((b, Config::new(buf.kind(), 1, prefetch)));
        }
        if threads > 1 {
            configs.push((b, Config::new(buf.kind(), threads, None)));
        }
    }
    configs
}

/// Where the passes read: the first CPU (one thread) or all of them, the buffers per kind
/// (and the all-threads pass's own, on NUMA machines), the loads' width and windows.
#[cfg(target_arch = "x86_64")]
struct Readers<'a> {
    first: usize,
    cpus: &'a [usize],
    bufs: &'a [Buffer],
    all_bufs: &'a [Buffer],
    width: crate::arch::VectorWidth,
    windows: usize,
}

/// `reps` timed rounds (after one warm-up) of one pass per configuration, in turn; returns
/// the configurations with their samples.
#[cfg(target_arch = "x86_64")]
fn measure_passes(
    ctx: &ProbeContext,
    at: &Readers,
    mut configs: Vec<(usize, Config)>,
    reps: usize,
) -> Result<Vec<Config>, ProbeFailure> {
    ctx.progress.begin(probe::BANDWIDTH, reps as u64 + 1);
    // Pass 0 warms every configuration up (page-table caches, the core clock) untimed. Every
    // pass reads the next window, of whichever buffer: a window comes round again only after
    // the other windows, the rest of a buffer, went through the caches.
    let mut pass = 0usize;
    for rep in 0..=reps {
        for (b, c) in configs.iter_mut() {
            let (on, buf): (&[usize], &Buffer) = if c.threads == 1 {
                (std::slice::from_ref(&at.first), &at.bufs[*b])
            } else {
                let own = at.all_bufs.iter().find(|x| x.kind() == c.kind);
                (at.cpus, own.unwrap_or(&at.bufs[*b]))
            };
            let gbs = read_pass(ctx, buf, on, at.width, c.prefetch, (pass, at.windows))?;
            pass += 1;
            if rep > 0 {
                c.gbs.push(gbs);
            }
        }
        ctx.progress.advance(1);
    }
    ctx.progress.finish();
    Ok(configs.into_iter().map(|(_, c)| c).collect())
}

/// The configurations of a raw record, in the order they were measured ([`configurations`]):
/// per page kind in the order asked for, one thread without and with each prefetch distance,
/// then all threads.
fn configs_of(raw: &BandwidthRaw) -> Vec<Config> {
    let rank = |k: PageKind| {
        raw.params
            .page_kinds
            .iter()
            .chain(&PageKind::ALL)
            .position(|x| *x == k)
    };
    let mut configs: Vec<Config> = raw
        .samples
        .read_bw_gbs
        .iter()
        .map(|(c, gbs)| Config {
            kind: c.kind,
            threads: c.threads,
            prefetch: c.prefetch_bytes,
            gbs: gbs.clone(),
        })
        .collect();
    configs.sort_by_key(|c| (rank(c.kind), c.threads, c.prefetch));
    configs
}

/// Every figure of a raw record, and the bars and facts beside them.
fn analyse(raw: &BandwidthRaw) -> BandwidthAnalysis {
    summarise(&configs_of(raw), raw.params.cpus.len())
}

/// Figures and bars from the measured configurations (at least one).
fn summarise(configs: &[Config], all_threads: usize) -> BandwidthAnalysis {
    let mut a = BandwidthAnalysis::default();
    a.derived.series.push(Series::Bars {
        name: BandwidthDerived::BARS.into(),
        unit: "GB/s".into(),
        labels: configs
            .iter()
            .map(|c| {
                format!(
                    "{} thread(s), {}{}",
                    c.threads,
                    c.kind.name(),
                    c.prefetch
                        .map(|d| format!(", prefetch {}", human_bytes(d as u64)))
                        .unwrap_or_default()
                )
            })
            .collect(),
        values: configs
            .iter()
            .map(|c| c.median().unwrap_or(f64::NAN))
            .collect(),
    });
    let Some(first) = configs.first() else {
        return a;
    };

    let find = |kind: PageKind, threads: usize, prefetch: Option<usize>| {
        configs
            .iter()
            .find(|c| c.kind == kind && c.threads == threads && c.prefetch == prefetch)
    };
    // Headline figures on 4 KiB pages, what a program gets unless it asks for more; on the
    // first kind measured when 4 KiB was not asked for.
    let base = if find(PageKind::Base4k, 1, None).is_some() {
        PageKind::Base4k
    } else {
        first.kind
    };
    a.derived.read_bw_page_kind = Some(base);
    let huge = configs
        .iter()
        .map(|c| c.kind)
        .find(|k| k.is_huge() && *k != base);
    let gbs = |c: Option<&Config>| {
        c.and_then(|c| Metric::from_samples("read_bw_gbs", "GB/s", Better::Higher, &c.gbs))
    };
    let f = &mut a.figures;
    f.read_bw_1t_gbs = gbs(find(base, 1, None));
    f.read_bw_all_gbs = gbs(find(base, all_threads, None));
    // Every configuration is read once per round, so sample i of two configurations comes
    // from the same moment: ratios pair them, and a neighbour's burst cancels out.
    if let Some(h) = huge {
        a.derived.huge_page_kind = Some(h);
        f.read_bw_1t_huge_gbs = gbs(find(h, 1, None));
        f.read_bw_all_huge_gbs = gbs(find(h, all_threads, None));
        f.huge_page_read_gain_ratio = ratio(find(h, 1, None), find(base, 1, None));
    }
    for (on, kind) in [(PrefetchOn::Base, Some(base)), (PrefetchOn::Huge, huge)] {
        let Some(kind) = kind else { continue };
        let (p, gains) = prefetch(configs, kind);
        a.figures.set_prefetch(on, p);
        a.derived.prefetch_gain_by_distance.insert(kind, gains);
    }
    a
}

/// The paired ratio of two configurations' samples (`a` over `b`).
fn ratio(a: Option<&Config>, b: Option<&Config>) -> Option<Metric> {
    Metric::paired_ratio("ratio", Better::Neither, &a?.gbs, &b?.gbs)
}

/// Prefetch on `kind`: the best and worst distance against none (the best distance itself
/// where its gain beats the noise), and every distance's gain.
fn prefetch(configs: &[Config], kind: PageKind) -> (Prefetch, BTreeMap<u64, f64>) {
    let find = |prefetch: Option<usize>| {
        configs
            .iter()
            .find(|c| c.kind == kind && c.threads == 1 && c.prefetch == prefetch)
    };
    let gains: Vec<(usize, Metric)> = PREFETCH_DISTANCES
        .iter()
        .filter_map(|&d| Some((d, ratio(find(Some(d)), find(None))?)))
        .collect();
    let by_distance = gains.iter().map(|(d, g)| (*d as u64, g.value)).collect();
    let best = gains.iter().max_by(|a, b| a.1.value.total_cmp(&b.1.value));
    let worst = gains.iter().min_by(|a, b| a.1.value.total_cmp(&b.1.value));
    let mut p = Prefetch::default();
    if let (Some((d, best)), Some((_, worst))) = (best, worst) {
        p.gain = Some(best.clone());
        p.worst = Some(worst.clone());
        // A best distance means something only when its gain beats the noise: its
        // interval lies wholly above 1 (no gain).
        if best.interval.is_none_or(|i| i.low > 1.0) {
            p.best_distance = Some(Metric::derived(
                "distance_bytes",
                *d as f64,
                "bytes",
                Better::Neither,
            ));
        }
    }
    (p, by_distance)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(kind: PageKind, threads: usize, prefetch: Option<usize>, gbs: f64) -> Config {
        Config {
            kind,
            threads,
            prefetch,
            gbs: vec![gbs * 0.99, gbs, gbs * 1.01],
        }
    }

    #[test]
    fn gains_compare_like_with_like() {
        use crate::schema::{ProbeResult, Status};
        let configs = vec![
            config(PageKind::Base4k, 1, None, 20.0),
            config(PageKind::Base4k, 1, Some(512), 19.0),
            config(PageKind::Base4k, 1, Some(2048), 22.0),
            config(PageKind::Base4k, 1, Some(8192), 21.0),
            config(PageKind::Base4k, 2, None, 30.0),
            config(PageKind::Thp, 1, None, 24.0),
            config(PageKind::Thp, 1, Some(512), 24.0),
            config(PageKind::Thp, 1, Some(2048), 24.0),
            config(PageKind::Thp, 1, Some(8192), 24.0),
            config(PageKind::Thp, 2, None, 33.0),
        ];
        let raw = BandwidthRaw {
            params: BandwidthParams {
                cpus: vec![0, 1],
                page_kinds: vec![PageKind::Base4k, PageKind::Thp],
                ..BandwidthParams::default()
            },
            samples: BandwidthSamples {
                read_bw_gbs: configs.iter().map(|c| (c.key(), c.gbs.clone())).collect(),
            },
            ..BandwidthRaw::default()
        };
        let machine = crate::schema::test_support::empty_fingerprint().machine;
        let mut r = ProbeResult::new("bandwidth", Status::Ok);
        crate::schema::figures::RawRecord::write_into(&raw, &mut r);
        BandwidthProbe::analyse(&raw, &machine).write_into(&mut r);
        let m = |n: &str| r.metric(n).unwrap_or_else(|| panic!("no {n}")).value;
        assert_eq!(m("read_bw_1t_gbs"), 20.0);
        assert_eq!(m("read_bw_all_gbs"), 30.0);
        assert_eq!(m("read_bw_all_huge_gbs"), 33.0);
        assert!((m("huge_page_read_gain_ratio") - 1.2).abs() < 1e-12);
        assert!((m("prefetch_read_gain_ratio") - 1.1).abs() < 1e-12);
        assert!((m("prefetch_read_worst_ratio") - 0.95).abs() < 1e-12);
        assert_eq!(m("prefetch_best_distance_bytes"), 2048.0);
        assert!((m("prefetch_read_gain_huge_ratio") - 1.0).abs() < 1e-12);
        assert_eq!(r.effects["read_bw_page_kind"], "4k");
        assert_eq!(r.effects["huge_page_kind"], "thp");
        assert_eq!(
            r.effects["prefetch_gain_by_distance"]["4k"]["2048"],
            serde_json::json!(1.1)
        );
        assert_eq!(r.samples["read_bw_gbs.1t.4k.pf2048"].len(), 3);
        // The bars keep the order the configurations were measured in.
        let Some(crate::schema::Series::Bars { labels, .. }) = r.series.first() else {
            panic!("no bars: {:?}", r.series)
        };
        assert_eq!(labels[0], "1 thread(s), 4k");
        assert_eq!(labels[4], "2 thread(s), 4k");
        assert_eq!(labels[5], "1 thread(s), thp");
        // The figures in the order the probe always reported them.
        let names: Vec<&str> = r.metrics.iter().map(|m| m.name.as_str()).collect();
        assert_eq!(
            names[..5],
            [
                "read_bw_1t_gbs",
                "read_bw_all_gbs",
                "read_bw_1t_huge_gbs",
                "read_bw_all_huge_gbs",
                "huge_page_read_gain_ratio"
            ]
        );
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn a_pass_reads_one_window_and_the_next_pass_the_next() {
        // The Emerald Rapids guest's quick buffer: 4x its 260 MiB L3, five windows of 208 MiB.
        let size = 1040usize << 20;
        let windows = windows_per_buffer(size as u64, PASS_BYTES_QUICK);
        assert_eq!(windows, 5);
        assert_eq!(windows_per_buffer(128 << 20, PASS_BYTES_QUICK), 1);
        assert_eq!(windows_per_buffer(300 << 20, PASS_BYTES_QUICK), 4);
        assert_eq!(window_of(size, (0, windows)), (0, 208 << 20));
        assert_eq!(window_of(size, (1, windows)), (208 << 20, 208 << 20));
        assert_eq!(window_of(size, (4, windows)), (832 << 20, 208 << 20));
        assert_eq!(window_of(size, (5, windows)), (0, 208 << 20));
        // One window: the whole slice, as before windows.
        assert_eq!(window_of(128 << 20, (3, 1)), (0, 128 << 20));
        // Two readers: each slice in the same number of windows.
        let slice = slice_bytes(size, 2);
        let (off, len) = window_of(slice, (4, windows));
        assert!(off + len <= slice && len % 512 == 0);
    }

    #[test]
    fn buffers_are_well_beyond_the_llc() {
        assert_eq!(default_size(Profile::Full, Some(32 << 20)), 512 << 20);
        assert_eq!(default_size(Profile::Quick, Some(32 << 20)), 128 << 20);
        assert_eq!(default_size(Profile::Quick, Some(4 << 20)), 64 << 20);
    }
}
