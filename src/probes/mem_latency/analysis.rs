//! The memory-latency probe's figures, recomputed from what it saved: the raw samples
//! (`latency_ns.<kind>.<bytes>`, `tlb_sweep_latency_ns.<kind>.<pages>_pages`), its params
//! (`page_kinds`) and the facts it recorded (`effects.cache_sizes_bytes`,
//! `effects.core_clock_ghz`). [`analyze`] is a pure function of a [`ProbeResult`]: the probe
//! calls it on what it just measured, and [`reanalyze`] calls it on a fingerprint saved by any
//! earlier build, so a corpus of saved machines is judged by today's reading of the curve.
//!
//! What it derives: the cache levels and DRAM located on the curve ([`super::curve`]), their
//! latencies in ns and core cycles, the 4 KiB page penalty at the largest DRAM size (and at
//! every DRAM size, since it grows with the memory touched), and the TLB reach. A figure it
//! cannot derive is named in the result's `not_measured` with the reason, so the hazard that
//! reads it is "not judged" with that reason rather than gone.

use super::curve::{self, CacheSize, LevelOnCurve, TlbPoint};
use crate::format::human_bytes;
use crate::measure::buffer::{PageKind, PageKindOutcome};
use crate::names::metric;
use crate::schema::{Better, Metric, ProbeResult, Series};
use crate::stats;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Effects the analysis writes (and [`reanalyze`] replaces). `tlb_reach` is an earlier
/// build's reason for a missing TLB reach, now in `not_measured`.
pub const DERIVED_EFFECTS: [&str; 6] = [
    "curve_steps_bytes",
    "latency_page_kind",
    "levels",
    "tlb_penalty_by_size",
    "tlb_penalty_size_bytes",
    "tlb_reach",
];

/// Samples the analysis writes.
pub const DERIVED_SAMPLES: [&str; 1] = ["tlb_reach_bytes.repetitions"];

/// Everything the analysis derives from a saved result.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Analysis {
    /// Headline figures.
    pub metrics: Vec<Metric>,
    /// Curves for charts.
    pub series: Vec<Series>,
    /// Derived effects: `levels`, `curve_steps_bytes`, `latency_page_kind`,
    /// `tlb_penalty_size_bytes`, `tlb_penalty_by_size`.
    pub effects: BTreeMap<String, Value>,
    /// Derived samples: `tlb_reach_bytes.repetitions`.
    pub samples: BTreeMap<String, Vec<f64>>,
    /// Figures not derived, with why (the result's `not_measured`).
    pub not_measured: BTreeMap<String, String>,
}

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

/// The kinds in `saved`'s samples, in the order the probe ran them (`params.page_kinds`, else
/// [`PageKind::ALL`]'s).
fn kinds_of(saved: &ProbeResult) -> Vec<KindSamples> {
    let mut order: Vec<PageKind> = saved
        .params
        .get("page_kinds")
        .and_then(|v| serde_json::from_value::<Vec<PageKind>>(v.clone()).ok())
        .unwrap_or_default();
    for k in PageKind::ALL {
        if !order.contains(&k) {
            order.push(k);
        }
    }
    let mut out: Vec<KindSamples> = order
        .into_iter()
        .map(|kind| KindSamples {
            kind,
            curve: Vec::new(),
            tlb: Vec::new(),
        })
        .collect();
    for (name, v) in &saved.samples {
        let mut parts = name.split('.');
        let (Some(what), Some(kind), Some(x), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            continue;
        };
        let Some(k) = out.iter_mut().find(|k| k.kind.name() == kind) else {
            continue;
        };
        match what {
            "latency_ns" => {
                if let Ok(size) = x.parse::<u64>() {
                    k.curve.push((size, v.clone()));
                }
            }
            "tlb_sweep_latency_ns" => {
                if let Some(Ok(pages)) = x.strip_suffix("_pages").map(str::parse::<u64>) {
                    k.tlb.push((pages, v.clone()));
                }
            }
            _ => {}
        }
    }
    out.retain(|k| !k.curve.is_empty() || !k.tlb.is_empty());
    for k in &mut out {
        k.curve.sort_by_key(|p| p.0);
        k.tlb.sort_by_key(|p| p.0);
    }
    out
}

/// The cache sizes the probe recorded (`effects.cache_sizes_bytes`: `{"l1": bytes, ...}`).
pub fn saved_cache_sizes(saved: &ProbeResult) -> Vec<CacheSize> {
    let mut v: Vec<CacheSize> = saved
        .effects
        .get("cache_sizes_bytes")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .filter_map(|(k, b)| {
                    Some(CacheSize {
                        level: k.strip_prefix('l')?.parse().ok()?,
                        bytes: b.as_u64()?,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    v.sort_by_key(|c| c.level);
    v
}

/// Why huge pages were not measured, from the page-kind records the probe kept.
fn huge_pages_missing(saved: &ProbeResult) -> String {
    let notes: Vec<String> = saved
        .effects
        .get("page_kinds")
        .and_then(|v| serde_json::from_value::<Vec<PageKindOutcome>>(v.clone()).ok())
        .unwrap_or_default()
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

/// Every figure of the memory-latency probe, from `saved`'s samples, params and effects.
pub fn analyze(saved: &ProbeResult) -> Analysis {
    let mut a = Analysis::default();
    let kinds = kinds_of(saved);
    let caches = saved_cache_sizes(saved);
    let ghz = saved
        .effects
        .get(metric::CORE_CLOCK_GHZ)
        .and_then(Value::as_f64)
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
            metric::DRAM_LATENCY_NS.into(),
            "no latency curve in the saved samples".into(),
        );
        return a;
    };
    a.effects
        .insert("latency_page_kind".into(), json!(main.kind.name()));
    let points = KindSamples::medians(&main.curve);
    let mut levels = curve::locate_levels(&points, &caches);
    let dram = curve::locate_dram(&points, &levels, &caches);

    let with_cycles = |a: &mut Analysis, name: &str, ns: &[f64]| latency_metrics(a, name, ns, ghz);
    for level in &levels {
        if level.confirmed() {
            with_cycles(
                &mut a,
                &level.name,
                main.at(level.at_size_bytes).unwrap_or(&[]),
            );
        } else {
            a.not_measured.insert(
                format!("{}_latency_ns", level.name),
                level_not_confirmed(level, &levels),
            );
        }
    }
    match &dram {
        Ok(d) => with_cycles(&mut a, "dram", main.at(d.at_size_bytes).unwrap_or(&[])),
        Err(why) => {
            a.not_measured.insert(
                metric::DRAM_LATENCY_NS.into(),
                format!("DRAM not reached: {why}"),
            );
        }
    }

    penalty(&mut a, saved, main, small, dram.as_ref().ok());
    if let Ok(d) = dram {
        levels.push(d);
    }
    a.effects.insert("levels".into(), json!(levels));
    tlb_reach(&mut a, small, huge, ghz);
    a
}

/// Per kind: the latency curve (in ns, and in cycles where the core clock is known), its
/// steps, and the TLB sweep.
fn curves(a: &mut Analysis, kinds: &[KindSamples], ghz: Option<f64>) {
    let mut steps = serde_json::Map::new();
    for k in kinds {
        let name = k.kind.name();
        let med = KindSamples::medians(&k.curve);
        steps.insert(name.to_string(), json!(curve::curve_steps(&med)));
        a.series.push(Series::Xy {
            name: format!("latency_{name}"),
            x_label: "size_bytes".into(),
            y_label: "latency_ns".into(),
            points: med.iter().map(|&(s, ns)| [s as f64, ns]).collect(),
        });
        if let Some(ghz) = ghz {
            a.series.push(Series::Xy {
                name: format!("latency_cycles_{name}"),
                x_label: "size_bytes".into(),
                y_label: "latency_cycles".into(),
                points: med.iter().map(|&(s, ns)| [s as f64, ns * ghz]).collect(),
            });
        }
        a.series.push(Series::Xy {
            name: format!("tlb_sweep_{name}"),
            x_label: "size_bytes spanned (one line per 4 KiB page)".into(),
            y_label: "latency_ns".into(),
            points: KindSamples::medians(&k.tlb)
                .iter()
                .map(|&(p, ns)| [(p * 4096) as f64, ns])
                .collect(),
        });
    }
    a.effects
        .insert("curve_steps_bytes".into(), Value::Object(steps));
}

/// `NAME_latency_ns` from `ns`, and `NAME_latency_cycles` where the core clock is known.
fn latency_metrics(a: &mut Analysis, name: &str, ns: &[f64], ghz: Option<f64>) {
    a.metrics.extend(Metric::from_samples(
        &format!("{name}_latency_ns"),
        "ns",
        Better::Lower,
        ns,
    ));
    if let Some(ghz) = ghz {
        let cycles: Vec<f64> = ns.iter().map(|x| x * ghz).collect();
        a.metrics.extend(Metric::from_samples(
            &format!("{name}_latency_cycles"),
            "cycles",
            Better::Lower,
            &cycles,
        ));
    }
}

/// Why a cache level's latency is not reported.
fn level_not_confirmed(l: &LevelOnCurve, levels: &[LevelOnCurve]) -> String {
    let size = l.cache_bytes.map(human_bytes).unwrap_or_default();
    let at = human_bytes(l.at_size_bytes);
    if l.dram_like == Some(true) {
        let l2 = levels
            .iter()
            .find(|x| x.name == "l2")
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
    a: &mut Analysis,
    saved: &ProbeResult,
    main: &KindSamples,
    small: Option<&KindSamples>,
    dram: Option<&LevelOnCurve>,
) {
    let why = match (small, main.kind.is_huge(), dram) {
        (None, _, _) => Some("4 KiB pages were not measured".to_string()),
        (_, false, _) => Some(huge_pages_missing(saved)),
        (_, _, None) => Some(
            a.not_measured
                .get(metric::DRAM_LATENCY_NS)
                .cloned()
                .unwrap_or_else(|| "DRAM not reached".into()),
        ),
        _ => None,
    };
    let (Some(small), Some(dram), None) = (small, dram, why.clone()) else {
        let why = why.unwrap_or_default();
        for m in [
            metric::TLB_PENALTY_RATIO,
            metric::DRAM_LATENCY_4K_NS,
            metric::DRAM_LATENCY_HUGE_NS,
        ] {
            a.not_measured.insert(m.into(), why.clone());
        }
        // Without huge pages, DRAM on 4 KiB pages is all there is: still a figure.
        if main.kind == PageKind::Base4k
            && let Some(d) = dram
        {
            a.not_measured.remove(metric::DRAM_LATENCY_4K_NS);
            a.metrics.extend(Metric::from_samples(
                metric::DRAM_LATENCY_4K_NS,
                "ns",
                Better::Lower,
                main.at(d.at_size_bytes).unwrap_or(&[]),
            ));
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
        if let Some(m) =
            Metric::paired_ratio(metric::TLB_PENALTY_RATIO, Better::Lower, ns_4k, ns_huge)
        {
            by_size.push((*size, m));
        }
    }
    let Some((largest, ratio)) = by_size.last().cloned() else {
        a.not_measured.insert(
            metric::TLB_PENALTY_RATIO.into(),
            "no DRAM size was measured on both 4 KiB and huge pages".into(),
        );
        return;
    };
    a.metrics.push(ratio);
    a.metrics.extend(Metric::from_samples(
        metric::DRAM_LATENCY_4K_NS,
        "ns",
        Better::Lower,
        small.at(largest).unwrap_or(&[]),
    ));
    a.metrics.extend(Metric::from_samples(
        metric::DRAM_LATENCY_HUGE_NS,
        "ns",
        Better::Lower,
        main.at(largest).unwrap_or(&[]),
    ));
    a.effects
        .insert("tlb_penalty_size_bytes".into(), json!(largest));
    a.effects.insert(
        "tlb_penalty_by_size".into(),
        json!(
            by_size
                .iter()
                .map(|(s, m)| (s.to_string(), m.value))
                .collect::<BTreeMap<_, _>>()
        ),
    );
    a.series.push(Series::Xy {
        name: "tlb_penalty_by_size".into(),
        x_label: "size_bytes".into(),
        y_label: "latency ratio, 4 KiB over huge pages".into(),
        points: by_size.iter().map(|(s, m)| [*s as f64, m.value]).collect(),
    });
}

/// TLB reach from the one-line-per-page sweep on both kinds.
fn tlb_reach(
    a: &mut Analysis,
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
    a.series.push(Series::Xy {
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
        Metric::from_samples(metric::TLB_REACH_BYTES, "bytes", Better::Higher, &knees)
    } else {
        None
    };
    a.samples
        .insert("tlb_reach_bytes.repetitions".into(), knees.clone());
    match knee_metric.or_else(|| {
        (reps <= 1)
            .then(|| curve::tlb_reach(&points, hz))
            .flatten()
            .map(|bytes| {
                Metric::derived(
                    metric::TLB_REACH_BYTES,
                    bytes as f64,
                    "bytes",
                    Better::Higher,
                )
            })
    }) {
        Some(m) => a.metrics.push(m),
        None => {
            a.not_measured.insert(
                metric::TLB_REACH_BYTES.into(),
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
/// other effects kept. For a result combined from several runs (`--runs`), only the first run's samples
/// were saved, so the figures become that run's (the `<metric>.runs` samples stay).
pub fn reanalyze(saved: &ProbeResult) -> ProbeResult {
    let mut r = saved.clone();
    apply(&mut r, analyze(saved));
    r
}

/// Replaces `r`'s derived figures with `a`'s.
pub fn apply(r: &mut ProbeResult, a: Analysis) {
    for k in DERIVED_EFFECTS {
        r.effects.remove(k);
    }
    for k in DERIVED_SAMPLES {
        r.samples.remove(k);
    }
    r.metrics = a.metrics;
    r.series = a.series;
    r.not_measured = a.not_measured;
    r.effects.extend(a.effects);
    r.samples.extend(a.samples);
}
