//! Reading a latency curve: where each cache level is (from the sizes sysfs reports), whether
//! the curve really steps up past each one, where DRAM is (from the curve's own plateau, not
//! from sizes), and where page walks start in the TLB sweep. Pure functions over
//! (size, latency) points, tested on exact inputs.
//!
//! DRAM is found from the curve because the sizes can lie: a guest reports its host's L3
//! (260 MiB on the Emerald Rapids guest) while its share of it is a few MiB, so every size up
//! to 512 MiB sat "inside the L3" and the 140-155 ns plateau was labelled L3 latency.

pub use crate::schema::probes::mem_latency::{CacheSize, CurveLevel, DramFoundBy, LevelOnCurve};
use serde::Serialize;

/// A cache level's latency is read at the largest measured size that fits in a quarter of
/// the cache (or, when none does, half of it), so a random chase rarely misses it: a random
/// set of lines does not spread evenly over the sets (physically indexed caches see 4 KiB
/// frames scattered by the OS), and other tenants or the page tables take part of the cache.
pub const INSIDE_FRACTIONS: [f64; 2] = [0.25, 0.5];
/// The step past a level is read at the smallest measured size of at least twice the cache.
/// DRAM plateau points start at this many times the largest cache the curve confirms, so the
/// plateau starts past it.
pub const BEYOND_FACTOR: u64 = 2;
/// When the curve alone cannot show a DRAM plateau, DRAM latency is read only at sizes of at
/// least this many times the last-level cache sysfs reports: a random chase over 4x the LLC
/// still hits it a quarter of the time, so smaller buffers would understate DRAM latency by
/// more than that. The quick sweep's largest size is at least this far out too (Linux's
/// resctrl selftest moved its buffers to at least 2x the L3 for the same reason).
pub const DRAM_MIN_LLC_FACTOR: u64 = 4;
/// Rise from inside a level to beyond it that counts as a step. Each level of a cache
/// hierarchy is at least ~2x slower than the one before (L1 4-5 cycles, L2 12-14, L3 40-50,
/// DRAM 200+ on recent x86, 7-cpu.com); half inside vs twice beyond, a correct sysfs size
/// must show at least +20%.
pub const STEP_MIN_RATIO: f64 = 1.2;
/// A level at least this many times slower than L2 is DRAM, not a cache, whatever size sysfs
/// gives it. The slowest L3s are mesh L3s of large Intel servers, ~33 ns against ~5.5 ns for
/// their L2 (6x; Sapphire Rapids, chipsandcheese.com); AMD's are 3-4x their L2 (Zen 2: 13 ns
/// against 3.3 ns, tests/fixtures/fingerprints/zen2-kvm-check.json). DRAM is 20-45x L2 on every
/// machine measured: 141 ns against 5.9 ns on the Emerald Rapids guest, 137 against 3.3 on
/// Zen 2, 160 against 3.9 on Zen 3. 10x sits between the two with a margin on both sides.
pub const DRAM_MIN_L2_RATIO: f64 = 10.0;
/// A run of sizes counts as the DRAM plateau only when it spans at least this factor in size
/// ("flat across a factor of several"): one point far above L2 could sit on the way from a
/// cache to DRAM.
pub const PLATEAU_MIN_SPAN: u64 = 4;

/// Places L1..L3 on a curve of `(size_bytes, median_ns)` points sorted by size. A level
/// without a measured size in its range is left out rather than read elsewhere. An L3 (or
/// L4) whose inside reads as DRAM is kept, marked `dram_like`, and not confirmed: the curve
/// shows no distinct level between L2 and DRAM there.
pub fn locate_levels(points: &[(u64, f64)], caches: &[CacheSize]) -> Vec<LevelOnCurve> {
    let mut caches = caches.to_vec();
    caches.sort_by_key(|c| c.level);
    let at = |size: u64| points.iter().find(|p| p.0 == size).map(|p| p.1);
    let mut out: Vec<LevelOnCurve> = Vec::new();
    let mut previous = 0u64;
    for c in &caches {
        let inside = INSIDE_FRACTIONS.iter().find_map(|f| {
            let limit = (c.bytes as f64 * f) as u64;
            points
                .iter()
                .filter(|p| p.0 > previous && p.0 <= limit)
                .map(|p| p.0)
                .max()
        });
        let range_start = points.iter().map(|p| p.0).find(|&s| s > previous);
        previous = c.bytes;
        let Some(inside) = inside else { continue };
        let beyond = points
            .iter()
            .map(|p| p.0)
            .filter(|&s| s >= c.bytes * BEYOND_FACTOR)
            .min();
        let lat = at(inside).expect("inside is a measured size");
        let ratio = beyond.and_then(at).map(|b| b / lat);
        let flat = range_start
            .and_then(at)
            .map(|first| lat < first * CURVE_STEP_RATIO);
        let dram_like = if c.level > 2 {
            confirmed_l2(&out).map(|l2| lat >= l2.latency_ns * DRAM_MIN_L2_RATIO)
        } else {
            None
        };
        out.push(LevelOnCurve {
            name: CurveLevel::Cache(c.level).name(),
            cache_bytes: Some(c.bytes),
            at_size_bytes: inside,
            latency_ns: lat,
            beyond_size_bytes: beyond,
            step_ratio: ratio,
            step_seen: ratio.map(|r| r >= STEP_MIN_RATIO),
            range_start_bytes: range_start,
            flat_inside: flat,
            dram_like,
            found_by: None,
            plateau_bytes: None,
        });
    }
    out
}

fn confirmed_l2(levels: &[LevelOnCurve]) -> Option<&LevelOnCurve> {
    levels
        .iter()
        .find(|l| l.level() == Some(CurveLevel::Cache(2)) && l.confirmed())
}

/// Finds DRAM on a curve of `(size_bytes, median_ns)` points sorted by size, given the cache
/// levels [`locate_levels`] placed and the sysfs sizes. Returns the DRAM level (the size its
/// latency is read at, how it was found) or, when the curve shows none, why.
///
/// From the curve: sizes past the caches (at least [`BEYOND_FACTOR`] times the largest cache
/// the curve confirms) whose latency is at least [`DRAM_MIN_L2_RATIO`] times L2's are DRAM
/// sizes, and the plateau is where they are flat. Past the caches, residual cache hits fade
/// as the size grows and page walks begin: even a guest's huge pages walk past a few hundred
/// MiB, because the host backs them with its own pages (THP 160 ns at 512 MiB, 218 at 1 GiB,
/// 302 at 2 GiB on the Emerald Rapids guest, C reference). Both are least where the curve is
/// flattest, so DRAM latency is read at the upper size of the two neighbouring DRAM sizes
/// whose latencies differ least per doubling of size, provided the run around them with no
/// step ([`CURVE_STEP_RATIO`] between its lowest and highest point) spans at least
/// [`PLATEAU_MIN_SPAN`] in size ("flat across a factor of several"); else the next flattest
/// pair is tried. Pairs at or past [`DRAM_MIN_LLC_FACTOR`] times the reported LLC come first:
/// there no cache can hold a quarter of the lines whatever the curve says, so a noisy dip
/// where a guest's share of the L3 ends is not taken for DRAM, and the figure means what it
/// meant before the plateau (the AMD guests' DRAM at 512 MiB). Where the reported LLC is the
/// host's and no such pair exists (the Emerald Rapids guest), the curve alone decides, and the
/// plateau may lie below the L3 size sysfs reports.
///
/// When the curve shows no plateau (too few points past the caches, or no L2 to compare
/// with), DRAM is the largest size of at least [`DRAM_MIN_LLC_FACTOR`] times the reported
/// LLC, as long as it is not within [`DRAM_MIN_L2_RATIO`] of L2.
pub fn locate_dram(
    points: &[(u64, f64)],
    levels: &[LevelOnCurve],
    caches: &[CacheSize],
) -> Result<LevelOnCurve, String> {
    let Some(llc) = caches.iter().max_by_key(|c| c.level) else {
        return Err("sysfs reports no cache sizes, so no size can be told to lie past them".into());
    };
    let l2_ns = confirmed_l2(levels).map(|l| l.latency_ns);
    let dram = |at: u64, ns: f64, by: DramFoundBy, plateau: Option<[u64; 2]>| LevelOnCurve {
        name: CurveLevel::Dram.name(),
        cache_bytes: None,
        at_size_bytes: at,
        latency_ns: ns,
        beyond_size_bytes: None,
        step_ratio: None,
        step_seen: None,
        range_start_bytes: None,
        flat_inside: None,
        dram_like: None,
        found_by: Some(by),
        plateau_bytes: plateau,
    };
    if let Some(l2_ns) = l2_ns
        && let Some((first, last, at)) = plateau(points, levels, l2_ns, llc.bytes)
    {
        let (at, ns) = points[at];
        return Ok(dram(
            at,
            ns,
            DramFoundBy::Plateau,
            Some([points[first].0, points[last].0]),
        ));
    }
    let far_above_l2 = |ns: f64| l2_ns.is_none_or(|l2| ns >= l2 * DRAM_MIN_L2_RATIO);
    if let Some(&(at, ns)) = points
        .iter()
        .rev()
        .find(|p| p.0 >= llc.bytes * DRAM_MIN_LLC_FACTOR && far_above_l2(p.1))
    {
        return Ok(dram(at, ns, DramFoundBy::Size, None));
    }
    let largest = points.last().map_or(0, |p| p.0);
    Err(match l2_ns {
        Some(_) => format!(
            "the curve shows no DRAM plateau (sizes {PLATEAU_MIN_SPAN}x apart or more, all at \
             least {DRAM_MIN_L2_RATIO}x L2's latency, with no {CURVE_STEP_RATIO}x step between \
             them), and no size of {DRAM_MIN_LLC_FACTOR}x the {} last-level cache or more was \
             measured (largest {})",
            crate::format::human_bytes(llc.bytes),
            crate::format::human_bytes(largest)
        ),
        None => format!(
            "no L2 latency to tell DRAM from a cache by (no size inside L2 confirmed on the \
             curve), and no size of {DRAM_MIN_LLC_FACTOR}x the {} last-level cache or more was \
             measured (largest {})",
            crate::format::human_bytes(llc.bytes),
            crate::format::human_bytes(largest)
        ),
    })
}

/// Indexes (first, last, read at) of the DRAM plateau in `points` (see [`locate_dram`]): the
/// neighbouring pairs of DRAM sizes from the flattest (least change in latency per doubling
/// of size), each grown into the widest run around it with no step; the first run spanning
/// [`PLATEAU_MIN_SPAN`] is the plateau, read at its pair's upper point. Pairs at or past
/// [`DRAM_MIN_LLC_FACTOR`] times the reported LLC (`llc_bytes`) are tried first.
fn plateau(
    points: &[(u64, f64)],
    levels: &[LevelOnCurve],
    l2_ns: f64,
    llc_bytes: u64,
) -> Option<(usize, usize, usize)> {
    let cache_end = levels
        .iter()
        .filter(|l| l.confirmed())
        .filter_map(|l| l.cache_bytes)
        .max()
        .unwrap_or(0);
    let eligible = |i: usize| {
        points[i].0 >= cache_end * BEYOND_FACTOR && points[i].1 >= l2_ns * DRAM_MIN_L2_RATIO
    };
    let slope = |i: usize| {
        let (a, b) = (points[i], points[i + 1]);
        (b.1 / a.1).ln().abs() / (b.0 as f64 / a.0 as f64).ln()
    };
    let flat = |a: usize, b: usize| {
        let run = &points[a..=b];
        let low = run.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
        let high = run.iter().map(|p| p.1).fold(0.0, f64::max);
        high < low * CURVE_STEP_RATIO
    };
    let mut pairs: Vec<usize> = (0..points.len().saturating_sub(1))
        .filter(|&i| eligible(i) && eligible(i + 1) && flat(i, i + 1))
        .collect();
    let near = |i: usize| points[i].0 < llc_bytes.saturating_mul(DRAM_MIN_LLC_FACTOR);
    pairs.sort_by(|&a, &b| {
        (near(a), slope(a))
            .partial_cmp(&(near(b), slope(b)))
            .expect("finite")
    });
    pairs.into_iter().find_map(|i| {
        let (mut first, mut last) = (i, i + 1);
        while first > 0 && eligible(first - 1) && flat(first - 1, last) {
            first -= 1;
        }
        while last + 1 < points.len() && eligible(last + 1) && flat(first, last + 1) {
            last += 1;
        }
        (points[last].0 >= points[first].0 * PLATEAU_MIN_SPAN).then_some((first, last, i + 1))
    })
}

/// Rise between neighbouring points of the curve that counts as a step when listing where the
/// curve steps: the smallest gap between neighbouring levels (L1 to L2, ~3x) with a wide
/// margin for points that straddle an edge.
pub const CURVE_STEP_RATIO: f64 = 1.5;

/// The sizes at which the curve steps up: each point at least [`CURVE_STEP_RATIO`] times the
/// one before. Compared with the sysfs cache sizes, they show a cache that is smaller than
/// reported (a VM's share of a shared L3, say).
pub fn curve_steps(points: &[(u64, f64)]) -> Vec<u64> {
    points
        .windows(2)
        .filter(|w| w[1].1 >= w[0].1 * CURVE_STEP_RATIO)
        .map(|w| w[1].0)
        .collect()
}

/// Extra latency of 4 KiB pages over huge pages, in core cycles, above which a load pays a
/// page walk rather than a second-level TLB hit. A walk adds at least one dependent load from
/// the cache holding the page tables (an L2 hit is ~14 cycles on current cores, 7-cpu.com),
/// and a nested walk in a VM up to 24 (Bhargava et al., "Accelerating two-dimensional page
/// walks for virtualized systems", ASPLOS 2008): 40 cycles and more on a Zen 4 guest. A
/// second-level TLB hit adds a few cycles at most: under 2 on that guest between 288 KiB
/// (past its 72-entry L1 DTLB) and 4 MiB, up to 13 at 8 MiB with a shared machine's noise.
/// 20 sits between the two.
pub const WALK_EXTRA_CYCLES: f64 = 20.0;

/// One point of the TLB sweep: `pages` 4 KiB pages touched, one line each.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct TlbPoint {
    /// Pages in the chase.
    pub pages: u64,
    /// Median ns per load on 4 KiB pages.
    pub ns_4k: f64,
    /// Median ns per load on huge pages, same lines.
    pub ns_huge: f64,
}

/// The TLB reach of 4 KiB pages: the largest span (pages x 4 KiB) before the chase on 4 KiB
/// pages starts paying [`WALK_EXTRA_CYCLES`] over the same chase on huge pages, at two points
/// in a row (or at the last point). `None` when walks never start in the sweep, or start at
/// its first point.
pub fn tlb_reach(points: &[TlbPoint], core_hz: f64) -> Option<u64> {
    let walks = |p: &TlbPoint| (p.ns_4k - p.ns_huge) * core_hz * 1e-9 >= WALK_EXTRA_CYCLES;
    // Two in a row, so one noisy point on a shared machine does not move the knee.
    let first_walk =
        (0..points.len()).find(|&i| walks(&points[i]) && points.get(i + 1).is_none_or(walks))?;
    (first_walk > 0).then(|| points[first_walk - 1].pages * 4096)
}

/// The caches sysfs reports on the Emerald Rapids KVM guest (its L3 shared with the host's
/// other tenants), for the tests here and in the probe.
#[cfg(test)]
pub(super) const EMERALD_RAPIDS_GUEST: [CacheSize; 3] = [
    CacheSize {
        level: 1,
        bytes: 48 << 10,
    },
    CacheSize {
        level: 2,
        bytes: 2 << 20,
    },
    CacheSize {
        level: 3,
        bytes: 260 << 20,
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    const ZEN4: [CacheSize; 3] = [
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

    fn curve() -> Vec<(u64, f64)> {
        vec![
            (16 << 10, 1.1),
            (64 << 10, 3.5),
            (256 << 10, 3.6),
            (512 << 10, 3.8),
            (2 << 20, 9.0),
            (8 << 20, 10.0),
            (16 << 20, 11.0),
            (64 << 20, 60.0),
            (1 << 30, 85.0),
        ]
    }

    fn dram(c: &[(u64, f64)], caches: &[CacheSize]) -> Result<LevelOnCurve, String> {
        locate_dram(c, &locate_levels(c, caches), caches)
    }

    #[test]
    fn levels_are_read_inside_each_cache_and_steps_checked_beyond() {
        let levels = locate_levels(&curve(), &ZEN4);
        let names: Vec<&str> = levels.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["l1", "l2", "l3"]);
        assert_eq!(levels[0].at_size_bytes, 16 << 10);
        assert_eq!(levels[0].beyond_size_bytes, Some(64 << 10));
        // A quarter of the cache where measured, half of it for L1 (no point at 8 KiB).
        assert_eq!(levels[1].at_size_bytes, 256 << 10);
        assert_eq!(levels[2].at_size_bytes, 8 << 20);
        assert_eq!(levels[2].beyond_size_bytes, Some(64 << 20));
        assert_eq!(levels[2].dram_like, Some(false));
        assert!(levels.iter().all(|l| l.step_seen == Some(true)));
        assert!(levels.iter().all(LevelOnCurve::confirmed));
        assert_eq!(levels[2].range_start_bytes, Some(2 << 20));
        // DRAM past twice the L3: 60 and 85 ns, no step between them, 16x apart.
        let d = dram(&curve(), &ZEN4).unwrap();
        assert_eq!(d.found_by, Some(DramFoundBy::Plateau));
        assert_eq!(d.plateau_bytes, Some([64 << 20, 1 << 30]));
        assert_eq!((d.at_size_bytes, d.latency_ns), (1 << 30, 85.0));
    }

    #[test]
    fn a_level_that_ends_before_its_sysfs_size_is_not_confirmed() {
        // A guest's share of a shared L3: the curve leaves it at 4 MiB, not 32 MiB, so what is
        // read at 8 MiB is already DRAM, and past 64 MiB it rises further still.
        let mut c = curve();
        c[5].1 = 150.0; // 8 MiB
        c[6].1 = 190.0; // 16 MiB
        c[7].1 = 230.0; // 64 MiB
        let levels = locate_levels(&c, &ZEN4);
        assert_eq!(levels[2].name, "l3");
        assert_eq!(levels[2].flat_inside, Some(false));
        assert!(!levels[2].confirmed());
        assert!(levels[1].confirmed());
    }

    #[test]
    fn a_level_without_a_step_is_flagged() {
        // An L3 that behaves like an L2 extension: no rise past 32 MiB.
        let mut c = curve();
        c[7].1 = 11.5;
        let levels = locate_levels(&c, &ZEN4);
        assert_eq!(levels[2].step_seen, Some(false));
    }

    #[test]
    fn one_point_past_the_caches_is_not_a_plateau_and_not_past_4x_the_llc() {
        let c: Vec<(u64, f64)> = curve().into_iter().filter(|p| p.0 <= 64 << 20).collect();
        let why = dram(&c, &ZEN4).unwrap_err();
        assert!(why.contains("no DRAM plateau"), "{why}");
        assert!(why.contains("largest 64 MiB"), "{why}");
    }

    #[test]
    fn without_l2_on_the_curve_dram_is_read_past_4x_the_llc() {
        let c = vec![(16 << 10, 1.0), (1 << 30, 90.0)];
        let names: Vec<String> = locate_levels(&c, &ZEN4)
            .into_iter()
            .map(|l| l.name)
            .collect();
        assert_eq!(names, ["l1"]);
        let d = dram(&c, &ZEN4).unwrap();
        assert_eq!(d.found_by, Some(DramFoundBy::Size));
        assert_eq!(d.at_size_bytes, 1 << 30);
        assert!(dram(&c, &[]).unwrap_err().contains("no cache sizes"));
    }

    #[test]
    fn the_emerald_rapids_guest_reaches_dram_inside_its_reported_l3() {
        // Its quick check on THP (check-runs3-a.json): 127 ns at 4 MiB and 141 ns at 65 MiB
        // is DRAM (a C chase: 139-150 ns from 16 to 256 MiB), although sysfs reports a 260 MiB
        // L3; 512 MiB is page walks. Before, the plateau was labelled L3 and DRAM was absent.
        let c = [
            (16 << 10, 1.67),
            (96 << 10, 5.34),
            (512 << 10, 5.94),
            (4 << 20, 127.0),
            (65 << 20, 140.75),
            (512 << 20, 216.4),
        ];
        let levels = locate_levels(&c, &EMERALD_RAPIDS_GUEST);
        assert_eq!(levels[2].name, "l3");
        assert_eq!(levels[2].dram_like, Some(true));
        assert!(!levels[2].confirmed());
        let d = dram(&c, &EMERALD_RAPIDS_GUEST).unwrap();
        assert_eq!(d.found_by, Some(DramFoundBy::Plateau));
        assert_eq!(d.plateau_bytes, Some([4 << 20, 65 << 20]));
        assert_eq!((d.at_size_bytes, d.latency_ns), (65 << 20, 140.75));
    }

    #[test]
    fn the_plateau_is_read_before_huge_page_walks_lift_it() {
        // The C chase on the Emerald Rapids guest at the quick sweep's DRAM sizes: THP rises
        // 1.5x from 256 MiB to 1 GiB (walks: the host backs the guest's huge pages with its
        // own pages).
        let c = [
            (16 << 10, 1.67),
            (512 << 10, 5.94),
            (65 << 20, 143.6),
            (260 << 20, 150.5),
            (1040 << 20, 218.6),
        ];
        let d = dram(&c, &EMERALD_RAPIDS_GUEST).unwrap();
        assert_eq!(d.plateau_bytes, Some([65 << 20, 260 << 20]));
        assert_eq!(d.at_size_bytes, 260 << 20);
    }

    #[test]
    fn the_latency_is_read_where_the_plateau_is_flattest() {
        // A Zen 5 guest's C chase (THP): residual L3 hits below 128 MiB, the plateau to 1 GiB,
        // walks from 1.5 GiB; all within 1.5x, so one run, read where it is flattest.
        let c = [
            (16 << 10, 0.9),
            (256 << 10, 3.2),
            (8 << 20, 12.2),
            (64 << 20, 140.7),
            (128 << 20, 147.1),
            (256 << 20, 155.3),
            (512 << 20, 159.3),
            (1 << 30, 158.8),
            (3 << 29, 190.0),
        ];
        let d = dram(&c, &ZEN4).unwrap();
        assert_eq!(d.plateau_bytes, Some([64 << 20, 3 << 29]));
        assert_eq!((d.at_size_bytes, d.latency_ns), (1 << 30, 158.8));
    }

    #[test]
    fn residual_cache_hits_at_twice_the_l3_do_not_set_dram_latency() {
        // The Zen 2 guest (zen2-kvm-check.json): a 16 MiB L3 at 13 ns, 102 ns at 32 MiB (half
        // of the lines still hit it), 121 at 64 MiB, 137 at 512 MiB.
        let zen2 = [
            CacheSize {
                level: 1,
                bytes: 32 << 10,
            },
            CacheSize {
                level: 2,
                bytes: 512 << 10,
            },
            CacheSize {
                level: 3,
                bytes: 16 << 20,
            },
        ];
        let c = [
            (16 << 10, 1.18),
            (64 << 10, 2.85),
            (128 << 10, 3.32),
            (1 << 20, 10.86),
            (4 << 20, 12.97),
            (32 << 20, 101.74),
            (64 << 20, 121.01),
            (512 << 20, 136.66),
        ];
        let levels = locate_levels(&c, &zen2);
        assert!(levels[2].confirmed(), "{levels:?}");
        let d = dram(&c, &zen2).unwrap();
        assert_eq!((d.at_size_bytes, d.latency_ns), (512 << 20, 136.66));
    }

    #[test]
    fn steps_are_where_the_curve_jumps() {
        assert_eq!(curve_steps(&curve()), [64 << 10, 2 << 20, 64 << 20]);
        assert!(curve_steps(&[(1, 1.0)]).is_empty());
    }

    fn tlb(points: &[(u64, f64, f64)]) -> Vec<TlbPoint> {
        points
            .iter()
            .map(|&(pages, ns_4k, ns_huge)| TlbPoint {
                pages,
                ns_4k,
                ns_huge,
            })
            .collect()
    }

    #[test]
    fn reach_is_the_last_span_before_walks_start() {
        // 3 GHz: 20 cycles = 6.7 ns. The second-level TLB hit (+2 ns) does not count.
        let p = tlb(&[
            (64, 1.2, 1.2),
            (256, 3.3, 1.3),
            (2048, 5.0, 3.0),
            (4096, 12.0, 3.5),
            (16384, 30.0, 4.0),
        ]);
        assert_eq!(tlb_reach(&p, 3e9), Some(2048 * 4096));
    }

    #[test]
    fn a_single_noisy_point_does_not_set_the_reach() {
        let p = tlb(&[
            (64, 1.2, 1.2),
            (128, 9.0, 1.2),
            (256, 1.3, 1.3),
            (4096, 12.0, 3.5),
        ]);
        assert_eq!(tlb_reach(&p, 3e9), Some(256 * 4096));
    }

    #[test]
    fn a_noisy_late_point_does_not_push_the_reach_out() {
        let p = tlb(&[
            (256, 1.3, 1.3),
            (2048, 5.0, 3.0),
            (4096, 12.0, 3.5),
            (8192, 30.0, 4.0),
            (16384, 30.0, 29.0),
            (32768, 90.0, 30.0),
        ]);
        assert_eq!(tlb_reach(&p, 3e9), Some(2048 * 4096));
    }

    #[test]
    fn no_walks_in_the_sweep_means_no_reach() {
        let p = tlb(&[(64, 1.2, 1.2), (256, 3.3, 1.3)]);
        assert_eq!(tlb_reach(&p, 3e9), None);
    }
}
