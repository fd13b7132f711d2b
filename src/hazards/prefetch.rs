//! Software prefetch that hurts or helps streaming reads, and whether page size matters to
//! them. Code often carries prefetch distances tuned on one CPU (`__builtin_prefetch(p + D)`
//! in hand-written loops, memcpy and compression libraries, JIT-emitted prefetches); on another
//! CPU the same distance can cost bandwidth (the hardware prefetchers already had the line, or
//! the prefetch lands in a page whose TLB entry is missing) or be needed. The seed
//! (`p4-large-pages-prefetch.ru.txt`) shows the page-size side: Northwood's prefetches stop at
//! a TLB miss, so huge pages raised its streaming bandwidth from 3.2 to 3.8 GB/s (+19%);
//! Prescott's do not, and it read 4.2 GB/s either way.

use super::{Hazard, Inputs};
use crate::measure::buffer::PageKind;
use crate::names::probe;
use crate::schema::figures::FigureId;
use crate::schema::probes::bandwidth::{BandwidthDerived, BandwidthFigures as F, PrefetchOn};
use crate::schema::{Interval, Level, Metric, Verdict};
use crate::words::verdicts::prefetch::{self as words, Decisive, Facts, PageSizeEffect};

/// A prefetch distance that changes streaming bandwidth by this much (either way) is worth
/// knowing: half the seed's +19% Northwood effect, and twice the 5% spread that marks a noisy
/// figure ([`crate::stats::WIDE_RELATIVE_SPREAD`]).
pub const EFFECT_RATIO: f64 = 0.10;

/// The software-prefetch rule.
pub struct SoftwarePrefetch;

impl Hazard for SoftwarePrefetch {
    fn id(&self) -> &'static str {
        "software_prefetch"
    }

    fn title(&self) -> &'static str {
        words::TITLE
    }

    fn reads(&self) -> &'static [FigureId] {
        &[F::PREFETCH_READ_GAIN_RATIO, F::PREFETCH_READ_WORST_RATIO]
    }

    fn quotes(&self) -> &'static [FigureId] {
        &[
            F::PREFETCH_BEST_DISTANCE_BYTES,
            F::READ_BW_1T_GBS,
            F::HUGE_PAGE_READ_GAIN_RATIO,
        ]
    }

    fn hurts(&self) -> &'static [&'static str] {
        words::HURTS
    }

    fn verdict(&self, fp: &Inputs<'_>) -> Option<Verdict> {
        let f = fp.figures::<F>()?;
        let prefetch = f.prefetch(PrefetchOn::Base);
        let (best_metric, worst_metric) = (prefetch.gain?, prefetch.worst?);
        let (best, worst) = (best_metric.value, worst_metric.value);
        let base = f.read_bw_1t_gbs.as_ref()?.value;
        let (help_level, hurt_level, level, borderline) = levels(fp, (&best_metric, &worst_metric));
        let facts = Facts {
            best_ratio: best,
            best_metric: Some(&best_metric),
            best_distance_bytes: prefetch.best_distance.map_or(0.0, |m| m.value),
            worst_ratio: worst,
            worst_metric: Some(&worst_metric),
            worst_distance_bytes: worst_distance(fp),
            read_bw_gbs: base,
            hurts: worst <= 1.0 - EFFECT_RATIO,
            helps: best >= 1.0 + EFFECT_RATIO,
            page_size: f.huge_page_read_gain_ratio.map(|g| g.value).map(|g| {
                if g >= 1.0 + EFFECT_RATIO {
                    PageSizeEffect::Faster(g)
                } else if g <= 1.0 - EFFECT_RATIO {
                    PageSizeEffect::Slower(g)
                } else {
                    PageSizeEffect::Neutral
                }
            }),
            // The interval beside the figure that set the level (the harm when both tie).
            decisive: if help_level > hurt_level {
                Decisive::Gain
            } else {
                Decisive::Harm
            },
            effect_ratio: EFFECT_RATIO,
        };
        Some(Verdict {
            hazard: self.id().into(),
            title: self.title().into(),
            summary: words::summary(&facts),
            level,
            figure: words::figure(&facts),
            reference: words::reference(&facts),
            explanation: words::explanation(&facts),
            borderline,
        })
    }
}

/// The levels of the gain and of the harm, the verdict's level (the higher) and its
/// borderline. With intervals: an effect counts only when its whole interval is past the bar;
/// one that reaches the bar is borderline.
fn levels(
    fp: &Inputs<'_>,
    (best, worst): (&Metric, &Metric),
) -> (Level, Level, Level, Option<Level>) {
    let (help_level, help_border) = super::level_near_thresholds(
        fp,
        best.value,
        best.interval.as_ref(),
        Level::Ok,
        &[(1.0 + EFFECT_RATIO, Level::Notice)],
    );
    // The worst ratio falls as the harm grows: judge its negation.
    let negated = worst.interval.map(|i| Interval {
        low: -i.high,
        high: -i.low,
        confidence: i.confidence,
    });
    let (hurt_level, hurt_border) = super::level_near_thresholds(
        fp,
        -worst.value,
        negated.as_ref(),
        Level::Ok,
        &[(-(1.0 - EFFECT_RATIO), Level::Notice)],
    );
    let level = help_level.max(hurt_level);
    let borderline = help_border.max(hurt_border).filter(|b| *b > level);
    (help_level, hurt_level, level, borderline)
}

/// The worst prefetch distance, from the page kind the headline figures are on
/// (`read_bw_page_kind`: 4k unless the run asked only for huge pages).
fn worst_distance(fp: &Inputs<'_>) -> Option<String> {
    let derived = fp.raw::<BandwidthDerived>(probe::BANDWIDTH)?;
    let headline_kind = derived.read_bw_page_kind.unwrap_or(PageKind::Base4k);
    let mut gains: Vec<(String, f64)> = derived
        .prefetch_gain_by_distance
        .get(&headline_kind)?
        .iter()
        .map(|(d, g)| (d.to_string(), *g))
        .collect();
    // In the order the file lists them (by name), so a tie names the distance it named.
    gains.sort_by(|a, b| a.0.cmp(&b.0));
    gains
        .into_iter()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(d, _)| d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Fingerprint;
    use crate::schema::{Better, Metric, ProbeResult, Status};
    use serde_json::json;

    fn fingerprint(best: f64, worst: f64, huge_gain: f64) -> Fingerprint {
        let mut fp = crate::schema::test_support::empty_fingerprint();
        let mut p = ProbeResult::new("bandwidth", Status::Ok);
        p.metrics.extend([
            Metric::derived("read_bw_1t_gbs", 20.0, "GB/s", Better::Higher),
            Metric::derived("prefetch_read_gain_ratio", best, "ratio", Better::Neither),
            Metric::derived("prefetch_read_worst_ratio", worst, "ratio", Better::Neither),
            Metric::derived(
                "prefetch_best_distance_bytes",
                2048.0,
                "bytes",
                Better::Neither,
            ),
            Metric::derived(
                "huge_page_read_gain_ratio",
                huge_gain,
                "ratio",
                Better::Neither,
            ),
        ]);
        p.effects.insert(
            "prefetch_gain_by_distance".into(),
            json!({"4k": {"512": best, "8192": worst}}),
        );
        fp.probes.push(p);
        fp
    }

    #[test]
    fn prefetch_that_hurts_is_a_notice_with_its_distance() {
        let v = SoftwarePrefetch
            .judge(&fingerprint(1.02, 0.7, 1.0))
            .unwrap();
        assert_eq!(v.level, Level::Notice);
        assert!(
            v.explanation.contains("8192 bytes ahead"),
            "{}",
            v.explanation
        );
        assert!(v.explanation.contains("30% slower"), "{}", v.explanation);
        assert!(
            v.explanation.contains("14.0 instead of 20.0"),
            "{}",
            v.explanation
        );
        assert!(v.explanation.contains("Prescott"), "{}", v.explanation);
    }

    #[test]
    fn the_worst_distance_comes_from_the_kind_the_figures_are_on() {
        // Regression: with `--pages thp` the headline figures are on THP, but the distance
        // named in the verdict was looked up under "4k".
        let mut fp = fingerprint(1.02, 0.75, 1.0);
        let p = &mut fp.probes[0];
        p.effects.insert("read_bw_page_kind".into(), json!("thp"));
        p.effects.insert(
            "prefetch_gain_by_distance".into(),
            json!({"4k": {"512": 0.5, "8192": 1.0}, "thp": {"512": 1.02, "2048": 0.75}}),
        );
        let v = SoftwarePrefetch.judge(&fp).unwrap();
        assert!(
            v.explanation.contains("2048 bytes ahead"),
            "{}",
            v.explanation
        );
    }

    #[test]
    fn prefetch_that_helps_is_a_notice() {
        let v = SoftwarePrefetch
            .judge(&fingerprint(1.4, 0.98, 1.19))
            .unwrap();
        assert_eq!(v.level, Level::Notice);
        assert!(v.explanation.contains("40% faster"), "{}", v.explanation);
        assert!(v.explanation.contains("Northwood"), "{}", v.explanation);
    }

    #[test]
    fn no_effect_is_ok() {
        let v = SoftwarePrefetch
            .judge(&fingerprint(1.03, 0.97, 1.0))
            .unwrap();
        assert_eq!(v.level, Level::Ok);
    }

    #[test]
    fn no_bandwidth_probe_means_no_verdict() {
        let fp = crate::schema::test_support::empty_fingerprint();
        assert_eq!(SoftwarePrefetch.judge(&fp), None);
    }
}
