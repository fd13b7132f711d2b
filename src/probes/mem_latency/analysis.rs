//! The memory-latency probe's figures, computed from its raw record
//! ([`MemLatencyRaw`]: the samples per page kind and size, the page kinds asked for, the
//! cache sizes and core clock it recorded). [`analyse`] is a pure function of that record:
//! the probe calls it on what it just measured, and a fingerprint saved by any earlier build
//! is analysed again by it ([`reanalyze`]), so a corpus of saved machines is judged by
//! today's reading of the curve.
//!
//! What it derives: the cache levels and DRAM located on the curve ([`super::curve`]), their
//! latencies in ns and core cycles, the 4 KiB page penalty at the largest DRAM size (and at
//! every DRAM size, since it grows with the memory touched), and the TLB reach. A figure it
//! cannot derive is named in the result's `not_measured` with the reason, so the hazard that
//! reads it is "not judged" with that reason rather than gone.

use super::curve::{self, CacheSize, LevelOnCurve, TlbPoint};
use crate::format::human_bytes;
use crate::measure::buffer::PageKind;
use crate::schema::figures::{Analysis, RawRecord};
use crate::schema::probes::mem_latency::{
    CurveLevel, MemLatencyAnalysis, MemLatencyFigures as F, MemLatencyRaw,
};
use crate::schema::{Better, Metric, ProbeResult, Series};
use crate::stats;
use std::collections::BTreeMap;

/// One page kind's saved samples: (size or pages, samples) in rising order.
struct KindSamples {
    kind: PageKind,
    curve: Vec<(u64, Vec<f64>)>,
    tlb: Vec<(u64, Vec<f64>)>,
}

impl KindSamples {
    fn medians(points: &[(u64, Vec<f64>)]) -> Vec<(u64, f64)> {
        points
            .iter()
            .filter_map(|(s, ns)| stats::median(ns).map(|m| (*s, m)))
            .collect()
    }

    fn at(&self, size: u64) -> Option<&[f64]> {
        self.curve
            .iter()
            .find(|(s, _)| *s == size)
            .map(|(_, v)| v.as_slice())
    }
}

/// The kinds in `raw`'s samples, in the order the probe ran them (`params.page_kinds`, else
/// [`PageKind::ALL`]'s).
fn kinds_of(raw: &MemLatencyRaw) -> Vec<KindSamples> {
    let mut order: Vec<PageKind> = raw.params.page_kinds.clone();
    for k in PageKind::ALL {
        if !order.contains(&k) {
            order.push(k);
        }
    }
    let points = |m: &BTreeMap<(PageKind, u64), Vec<f64>>, kind: PageKind| {
        m.iter()
            .filter(|((k, _), _)| *k == kind)
            .map(|((_, x), v)| (*x, v.clone()))
            .collect::<Vec<_>>()
    };
    order
        .into_iter()
        .map(|kind| KindSamples {
            kind,
            curve: points(&raw.samples.latency_ns, kind),
            tlb: points(&raw.samples.tlb_sweep_latency_ns, kind),
        })
        .filter(|k| !k.curve.is_empty() || !k.tlb.is_empty())
        .collect()
}

/// Why huge pages were not measured, from the page-kind records the probe kept.
fn huge_pages_missing(raw: &MemLatencyRaw) -> String {
    let notes: Vec<String> = raw
        .effects
        .page_kinds
        .iter()
        .filter(|o| o.requested().is_huge())
        .map(|o| format!("{}: {}", o.requested().name(), o.note()))
        .collect();
    if notes.is_empty() {
        "no huge page kind was measured (none requested)".into()
    } else {
        format!("no huge page kind took ({})", notes.join("; "))
    }
}

/// Every figure of the memory-latency probe, from `raw`'s samples, params and effects, and
/// what the analysis derives beside them.
pub fn analyse(raw: &MemLatencyRaw) -> Analysis<MemLatencyAnalysis> {
    let mut a = Analysis::<MemLatencyAnalysis>::default();
    let kinds = kinds_of(raw);
    let caches: Vec<CacheSize> = raw.effects.cache_sizes_bytes.0.clone();
    let ghz = raw
        .effects
        .core_clock_ghz
        .filter(|g| g.is_finite() && *g > 0.0);
    curves(&mut a, &kinds, ghz);

    let small = kinds
        .iter()
        .find(|k| k.kind == PageKind::Base4k && !k.curve.is_empty());
    let huge = kinds
        .iter()
        .find(|k| k.kind.is_huge() && !k.curve.is_empty());
    // Cache latencies on huge pages where they took: 4 KiB pages add TLB misses from 288 KiB
    // (Zen 4's 72-entry L1 DTLB) on, which are not the cache's latency.
    let Some(main) = huge.or(small) else {
        a.not_measured.insert(
            F::DRAM_LATENCY_NS,
            "no latency curve in the saved samples".into(),
        );
        return a;
    };
    a.figures.derived.latency_page_kind = Some(main.kind);
    let points = KindSamples::medians(&main.curve);
    let mut levels = curve::locate_levels(&points, &caches);
    let dram = curve::locate_dram(&points, &levels, &caches);

    for level in &levels {
        let Some(at) = level.level() else { continue };
        if level.confirmed() {
            latency_metrics(&mut a, at, main.at(level.at_size_bytes).unwrap_or(&[]), ghz);
        } else if let Some((ns, _)) = at.ids() {
            a.not_measured
                .insert(ns, level_not_confirmed(level, &levels));
        }
    }
    match &dram {
        Ok(d) => latency_metrics(
            &mut a,
            CurveLevel::Dram,
            main.at(d.at_size_bytes).unwrap_or(&[]),
            ghz,
        ),
        Err(why) => {
            a.not_measured
                .insert(F::DRAM_LATENCY_NS, format!("DRAM not reached: {why}"));
        }
    }

    penalty(&mut a, raw, main, small, dram.as_ref().ok());
    if let Ok(d) = dram {
        levels.push(d);
    }
    a.figures.derived.levels = Some(levels);
    tlb_reach(&mut a, small, huge, ghz);
    a
}

/// Per kind: the latency curve (in ns, and in cycles where the core clock is known), its
/// steps, and the TLB sweep.
fn curves(a: &mut Analysis<MemLatencyAnalysis>, kinds: &[KindSamples], ghz: Option<f64>) {
    let mut steps = BTreeMap::new();
    let series = &mut a.figures.derived.series;
    for k in kinds {
        let name = k.kind.name();
        let med = KindSamples::medians(&k.curve);
        steps.insert(k.kind, curve::curve_steps(&med));
        series.push(Series::Xy {
            name: format!("latency_{name}"),
            x_label: "size_bytes".into(),
            y_label: "latency_ns".into(),
            points: med.iter().map(|&(s, ns)| [s as f64, ns]).collect(),
        });
        if let Some(ghz) = ghz {
            series.push(Series::Xy {
                name: format!("latency_cycles_{name}"),
                x_label: "size_bytes".into(),
                y_label: "latency_cycles".into(),
                points: med.iter().map(|&(s, ns)| [s as f64, ns * ghz]).collect(),
            });
        }
        series.push(Series::Xy {
            name: format!("tlb_sweep_{name}"),
            x_label: "size_bytes spanned (one line per 4 KiB page)".into(),
            y_label: "latency_ns".into(),
            points: KindSamples::medians(&k.tlb)
                .iter()
                .map(|&(p, ns)| [(p * 4096) as f64, ns])
                .collect(),
        });
    }
    a.figures.derived.curve_steps_bytes = Some(steps);
}

/// `level`'s latency figures: ns from `ns`, and cycles where the core clock is known.
fn latency_metrics(
    a: &mut Analysis<MemLatencyAnalysis>,
    level: CurveLevel,
    ns: &[f64],
    ghz: Option<f64>,
) {
    let Some((ns_slot, cycles_slot)) = a.figures.figures.latency_mut(level) else {
        return;
    };
    *ns_slot = Metric::from_samples("latency_ns", "ns", Better::Lower, ns);
    if let Some(ghz) = ghz {
        let cycles: Vec<f64> = ns.iter().map(|x| x * ghz).collect();
        *cycles_slot = Metric::from_samples("latency_cycles", "cycles", Better::Lower, &cycles);
    }
}

/// Why a cache level's latency is not reported.
fn level_not_confirmed(l: &LevelOnCurve, levels: &[LevelOnCurve]) -> String {
    let size = l.cache_bytes.map(human_bytes).unwrap_or_default();
    let at = human_bytes(l.at_size_bytes);
    if l.dram_like == Some(true) {
        let l2 = levels
            .iter()
            .find(|x| x.level() == Some(CurveLevel::Cache(2)))
            .map_or(0.0, |x| x.latency_ns);
        return format!(
            "the curve shows no distinct level between L2 and DRAM: {:.0} ns at {at} (inside \
             the {size} sysfs reports) is {:.0}x L2's {:.1} ns, DRAM's latency, not a \
             cache's (a guest's share of a shared cache can be far smaller than its size)",
            l.latency_ns,
            l.latency_ns / l2,
            l2
        );
    }
    if l.flat_inside == Some(false) {
        return format!(
            "the curve steps up before the {size} sysfs reports (by {at}): what was read \
             inside is already the next level's latency"
        );
    }
    format!(
        "the curve does not step up past the {size} sysfs reports ({}x from {at} to {})",
        l.step_ratio.map_or("?".into(), |r| format!("{r:.2}")),
        l.beyond_size_bytes.map(human_bytes).unwrap_or_default()
    )
}

/// The 4 KiB page penalty: 4 KiB pages over huge pages at every DRAM size (from the DRAM
/// level's start), the headline at the largest, where the footprint is largest.
fn penalty(
    a: &mut Analysis<MemLatencyAnalysis>,
    raw: &MemLatencyRaw,
    main: &KindSamples,
    small: Option<&KindSamples>,
    dram: Option<&LevelOnCurve>,
) {
    let why = match (small, main.kind.is_huge(), dram) {
        (None, _, _) => Some("4 KiB pages were not measured".to_string()),
        (_, false, _) => Some(huge_pages_missing(raw)),
        (_, _, None) => Some(
            a.not_measured
                .get(&F::DRAM_LATENCY_NS)
                .cloned()
                .unwrap_or_else(|| "DRAM not reached".into()),
        ),
        _ => None,
    };
    let (Some(small), Some(dram), None) = (small, dram, why.clone()) else {
        let why = why.unwrap_or_default();
        for id in [
            F::TLB_PENALTY_RATIO,
            F::DRAM_LATENCY_4K_NS,
            F::DRAM_LATENCY_HUGE_NS,
        ] {
            a.not_measured.insert(id, why.clone());
        }
        // Without huge pages, DRAM on 4 KiB pages is all there is: still a figure.
        if main.kind == PageKind::Base4k
            && let Some(d) = dram
        {
            a.not_measured.remove(&F::DRAM_LATENCY_4K_NS);
            a.figures.figures.dram_latency_4k_ns = Metric::from_samples(
                "dram_latency_4k_ns",
                "ns",
                Better::Lower,
                main.at(d.at_size_bytes).unwrap_or(&[]),
            );
        }
        return;
    };
    let start = dram
        .plateau_bytes
        .map_or(dram.at_size_bytes, |p| p[0])
        .min(dram.at_size_bytes);
    let mut by_size: Vec<(u64, Metric)> = Vec::new();
    for (size, ns_4k) in small.curve.iter().filter(|(s, _)| *s >= start) {
        let Some(ns_huge) = main.at(*size) else {
            continue;
        };
        // The kinds take turns (ABBA, see `time_chases`): sample i of each comes from the
        // same half of the run, so their ratios pair.
        if let Some(m) = Metric::paired_ratio("penalty_ratio", Better::Lower, ns_4k, ns_huge) {
            by_size.push((*size, m));
        }
    }
    let Some((largest, ratio)) = by_size.last().cloned() else {
        a.not_measured.insert(
            F::TLB_PENALTY_RATIO,
            "no DRAM size was measured on both 4 KiB and huge pages".into(),
        );
        return;
    };
    let f = &mut a.figures.figures;
    f.tlb_penalty_ratio = Some(ratio);
    f.dram_latency_4k_ns = Metric::from_samples(
        "dram_latency_4k_ns",
        "ns",
        Better::Lower,
        small.at(largest).unwrap_or(&[]),
    );
    f.dram_latency_huge_ns = Metric::from_samples(
        "dram_latency_huge_ns",
        "ns",
        Better::Lower,
        main.at(largest).unwrap_or(&[]),
    );
    let d = &mut a.figures.derived;
    d.tlb_penalty_size_bytes = Some(largest);
    d.tlb_penalty_by_size = Some(by_size.iter().map(|(s, m)| (*s, m.value)).collect());
    d.series.push(Series::Xy {
        name: "tlb_penalty_by_size".into(),
        x_label: "size_bytes".into(),
        y_label: "latency ratio, 4 KiB over huge pages".into(),
        points: by_size.iter().map(|(s, m)| [*s as f64, m.value]).collect(),
    });
}

/// TLB reach from the one-line-per-page sweep on both kinds.
fn tlb_reach(
    a: &mut Analysis<MemLatencyAnalysis>,
    small: Option<&KindSamples>,
    huge: Option<&KindSamples>,
    ghz: Option<f64>,
) {
    let (Some(small), Some(huge), Some(ghz)) = (small, huge, ghz) else {
        return;
    };
    if small.tlb.is_empty() || huge.tlb.is_empty() {
        return;
    }
    let hz = ghz * 1e9;
    let s = KindSamples::medians(&small.tlb);
    let h = KindSamples::medians(&huge.tlb);
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
    a.figures.derived.series.push(Series::Xy {
        name: "tlb_extra_cycles_4k".into(),
        x_label: "size_bytes spanned (one line per 4 KiB page)".into(),
        y_label: "extra_latency_cycles (4 KiB over huge pages)".into(),
        points: points
            .iter()
            .map(|p| [(p.pages * 4096) as f64, (p.ns_4k - p.ns_huge) * ghz])
            .collect(),
    });
    // The knee of each repetition's sweep (sample k of every point, both page kinds), so the
    // reach has an interval: on a shared guest one sweep's knee moved between 4 and 128 MiB
    // from run to run, and a single knee of the medians hid that.
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
            curve::tlb_reach(&sweep, hz).map(|b| b as f64)
        })
        .collect();
    let knee_metric = if knees.len() * 2 > reps {
        Metric::from_samples("tlb_reach_bytes", "bytes", Better::Higher, &knees)
    } else {
        None
    };
    a.figures.derived.tlb_reach_repetitions_bytes = Some(knees.clone());
    match knee_metric.or_else(|| {
        (reps <= 1)
            .then(|| curve::tlb_reach(&points, hz))
            .flatten()
            .map(|bytes| Metric::derived("tlb_reach_bytes", bytes as f64, "bytes", Better::Higher))
    }) {
        Some(m) => a.figures.figures.tlb_reach_bytes = Some(m),
        None => {
            a.not_measured.insert(
                F::TLB_REACH_BYTES,
                format!(
                    "no knee in most repetitions of the sweep ({} of {reps}): page walks did \
                     not start, started at once, or moved from one repetition to the next",
                    knees.len()
                ),
            );
        }
    }
}

/// `saved` with every figure the analysis derives recomputed by today's analysis: metrics,
/// series, `not_measured`, derived effects and samples replaced; raw samples, params and the
/// other effects kept; `saved` as it is when it holds no latency curve. For a result combined
/// from several runs (`--runs`), only the first run's samples were saved, so the figures
/// become that run's (the `<metric>.runs` samples stay).
pub fn reanalyze(saved: &ProbeResult) -> ProbeResult {
    let mut r = saved.clone();
    if let Ok(raw) = MemLatencyRaw::read_from(saved) {
        analyse(&raw).write_into(&mut r);
    }
    r
}
