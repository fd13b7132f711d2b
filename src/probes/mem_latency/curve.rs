//! Reading a latency curve: where each cache level is (from the sizes sysfs reports), whether
//! the curve really steps up past each one, and where page walks start in the TLB sweep.
//! Pure functions over (size, latency) points, tested on exact inputs.

use serde::Serialize;

/// A cache level's latency is read at the largest measured size that fits in a quarter of
/// the cache (or, when none does, half of it), so a random chase rarely misses it: a random
/// set of lines does not spread evenly over the sets (physically indexed caches see 4 KiB
/// frames scattered by the OS), and other tenants or the page tables take part of the cache.
pub const INSIDE_FRACTIONS: [f64; 2] = [0.25, 0.5];
/// The step past a level is read at the smallest measured size of at least twice the cache.
pub const BEYOND_FACTOR: u64 = 2;
/// DRAM latency is read only at sizes of at least this many times the last-level cache: a
/// random chase over 4x the LLC still hits it a quarter of the time, so smaller buffers would
/// understate DRAM latency by more than that.
pub const DRAM_MIN_LLC_FACTOR: u64 = 4;
/// Rise from inside a level to beyond it that counts as a step. Each level of a cache
/// hierarchy is at least ~2x slower than the one before (L1 4-5 cycles, L2 12-14, L3 40-50,
/// DRAM 200+ on recent x86, 7-cpu.com); half inside vs twice beyond, a correct sysfs size
/// must show at least +20%.
pub const STEP_MIN_RATIO: f64 = 1.2;

/// One cache level as sysfs reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheSize {
    /// 1, 2, 3.
    pub level: u32,
    /// Size of one instance in bytes.
    pub bytes: u64,
}

/// Where a level was read on the curve, and whether the curve steps up past it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LevelOnCurve {
    /// `l1`, `l2`, `l3` or `dram`.
    pub name: String,
    /// Size sysfs reports (absent for DRAM).
    pub cache_bytes: Option<u64>,
    /// Buffer size the latency was read at.
    pub at_size_bytes: u64,
    /// Median latency there, in ns.
    pub latency_ns: f64,
    /// Buffer size past the level where the step was checked (absent for DRAM, or when no
    /// size that large was measured).
    pub beyond_size_bytes: Option<u64>,
    /// Latency there over latency inside.
    pub step_ratio: Option<f64>,
    /// True when the curve rises by at least [`STEP_MIN_RATIO`] past the level, as the sysfs
    /// size says it should; false means the cache does not behave like its reported size
    /// (a VM's virtual topology, a cache shared with busy neighbours).
    pub step_seen: Option<bool>,
    /// Smallest measured size in the level's range (past the previous level).
    pub range_start_bytes: Option<u64>,
    /// True when the curve does not step up by [`CURVE_STEP_RATIO`] between the start of the
    /// level's range and where it is read; false means the level ends before its sysfs size
    /// (the latency read is already the next level's).
    pub flat_inside: Option<bool>,
}

impl LevelOnCurve {
    /// True unless the curve contradicts the sysfs size: the latency can be reported as this
    /// level's.
    pub fn confirmed(&self) -> bool {
        self.step_seen != Some(false) && self.flat_inside != Some(false)
    }
}

/// Places L1..L3 and DRAM on a curve of `(size_bytes, median_ns)` points sorted by size. A
/// level without a measured size in its range is left out rather than read elsewhere.
pub fn locate_levels(points: &[(u64, f64)], caches: &[CacheSize]) -> Vec<LevelOnCurve> {
    let mut caches = caches.to_vec();
    caches.sort_by_key(|c| c.level);
    let at = |size: u64| points.iter().find(|p| p.0 == size).map(|p| p.1);
    let mut out = Vec::new();
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
        out.push(LevelOnCurve {
            name: format!("l{}", c.level),
            cache_bytes: Some(c.bytes),
            at_size_bytes: inside,
            latency_ns: lat,
            beyond_size_bytes: beyond,
            step_ratio: ratio,
            step_seen: ratio.map(|r| r >= STEP_MIN_RATIO),
            range_start_bytes: range_start,
            flat_inside: flat,
        });
    }
    if let (Some(llc), Some(&(largest, lat))) = (caches.last(), points.last())
        && largest >= llc.bytes * DRAM_MIN_LLC_FACTOR
    {
        out.push(LevelOnCurve {
            name: "dram".into(),
            cache_bytes: None,
            at_size_bytes: largest,
            latency_ns: lat,
            beyond_size_bytes: None,
            step_ratio: None,
            step_seen: None,
            range_start_bytes: None,
            flat_inside: None,
        });
    }
    out
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

    #[test]
    fn levels_are_read_inside_each_cache_and_steps_checked_beyond() {
        let levels = locate_levels(&curve(), &ZEN4);
        let names: Vec<&str> = levels.iter().map(|l| l.name.as_str()).collect();
        assert_eq!(names, ["l1", "l2", "l3", "dram"]);
        assert_eq!(levels[0].at_size_bytes, 16 << 10);
        assert_eq!(levels[0].beyond_size_bytes, Some(64 << 10));
        // A quarter of the cache where measured, half of it for L1 (no point at 8 KiB).
        assert_eq!(levels[1].at_size_bytes, 256 << 10);
        assert_eq!(levels[2].at_size_bytes, 8 << 20);
        assert_eq!(levels[2].beyond_size_bytes, Some(64 << 20));
        assert_eq!(levels[3].latency_ns, 85.0);
        assert!(levels[..3].iter().all(|l| l.step_seen == Some(true)));
        assert!(levels.iter().all(LevelOnCurve::confirmed));
        assert_eq!(levels[2].range_start_bytes, Some(2 << 20));
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
    fn dram_needs_a_buffer_well_beyond_the_llc() {
        let c: Vec<(u64, f64)> = curve().into_iter().filter(|p| p.0 <= 64 << 20).collect();
        let levels = locate_levels(&c, &ZEN4);
        assert!(levels.iter().all(|l| l.name != "dram"));
    }

    #[test]
    fn a_level_with_no_measured_size_is_left_out() {
        let c = vec![(16 << 10, 1.0), (1 << 30, 90.0)];
        let names: Vec<String> = locate_levels(&c, &ZEN4)
            .into_iter()
            .map(|l| l.name)
            .collect();
        assert_eq!(names, ["l1", "dram"]);
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
