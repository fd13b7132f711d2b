//! The software-prefetch verdict's words: what a prefetch distance does to streaming reads
//! here, and what page size does, against the P4 large-pages case.

use super::with_interval;
use crate::format::pct;
use crate::reference::{P4_NORTHWOOD_HUGE_PAGE_READ_GAIN_PCT, P4_PRESCOTT_HUGE_PAGE_READ_GAIN_PCT};
use crate::schema::Metric;

/// What page size does to streaming reads.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PageSizeEffect {
    /// Huge pages read this ratio faster.
    Faster(f64),
    /// Huge pages read this ratio slower.
    Slower(f64),
    /// Within the effect bar either way.
    Neutral,
}

/// Which figure set the level, so its interval is printed beside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Decisive {
    /// The best distance's gain.
    Gain,
    /// The worst distance's harm (also when both tie).
    Harm,
}

/// What the software-prefetch verdict rests on.
pub struct Facts<'a> {
    /// Bandwidth at the best distance over none.
    pub best_ratio: f64,
    /// Its metric, for the interval.
    pub best_metric: Option<&'a Metric>,
    /// The best distance.
    pub best_distance_bytes: f64,
    /// Bandwidth at the worst distance over none.
    pub worst_ratio: f64,
    /// Its metric, for the interval.
    pub worst_metric: Option<&'a Metric>,
    /// The worst distance, as the probe named it.
    pub worst_distance_bytes: Option<String>,
    /// One-thread streaming reads without prefetch.
    pub read_bw_gbs: f64,
    /// The worst distance costs at least the effect bar.
    pub hurts: bool,
    /// The best distance gains at least the effect bar.
    pub helps: bool,
    /// What page size does, when measured.
    pub page_size: Option<PageSizeEffect>,
    /// Which figure set the level.
    pub decisive: Decisive,
    /// The effect bar, a fraction either way.
    pub effect_ratio: f64,
}

/// A ratio's distance from 1 as a percentage: 0.8x and 1.2x are both `20%`.
fn off_one(r: f64) -> String {
    pct((r - 1.0).abs(), 0)
}

/// The figure: both ratios, the interval beside the one that set the level.
pub fn figure(f: &Facts<'_>) -> String {
    let (best, worst) = (f.best_ratio, f.worst_ratio);
    match f.decisive {
        Decisive::Gain => format!(
            "{}, worst {worst:.2}x",
            with_interval(format!("best {best:.2}x"), f.best_metric)
        ),
        Decisive::Harm => format!(
            "best {best:.2}x, {}",
            with_interval(format!("worst {worst:.2}x"), f.worst_metric)
        ),
    }
}

/// The one-line summary.
pub fn summary(f: &Facts<'_>) -> String {
    match (f.hurts, f.helps) {
        (true, _) => format!(
            "a prefetch tuned elsewhere can cost {} of streaming bandwidth",
            off_one(f.worst_ratio)
        ),
        (false, true) => format!(
            "software prefetch adds {} to streaming reads",
            off_one(f.best_ratio)
        ),
        (false, false) => {
            "the hardware prefetchers do the job; software prefetch adds little".into()
        }
    }
}

/// The effect bar and the P4 large-pages case.
pub fn reference(f: &Facts<'_>) -> String {
    format!(
        "effect beyond +-{} (the P4 large-pages case: huge pages +{} on Northwood, {} on \
         Prescott)",
        pct(f.effect_ratio, 0),
        pct(P4_NORTHWOOD_HUGE_PAGE_READ_GAIN_PCT / 100.0, 0),
        pct(P4_PRESCOTT_HUGE_PAGE_READ_GAIN_PCT / 100.0, 0)
    )
}

/// What prefetch and page size do to streaming reads here.
pub fn explanation(f: &Facts<'_>) -> String {
    let base = f.read_bw_gbs;
    let mut text = String::new();
    if f.hurts {
        text.push_str(&format!(
            "A software prefetch {} bytes ahead makes one-thread streaming reads {} \
             slower ({:.1} instead of {base:.1} GB/s): prefetch distances tuned on another \
             CPU can cost bandwidth here. ",
            f.worst_distance_bytes.as_deref().unwrap_or("some"),
            off_one(f.worst_ratio),
            base * f.worst_ratio
        ));
    }
    if f.helps {
        text.push_str(&format!(
            "A software prefetch {:.0} bytes ahead makes one-thread streaming reads \
             {} faster ({:.1} instead of {base:.1} GB/s): the hardware prefetchers \
             leave bandwidth unused, and loops without prefetch leave it on the table. ",
            f.best_distance_bytes,
            off_one(f.best_ratio),
            base * f.best_ratio
        ));
    }
    if !f.hurts && !f.helps {
        text.push_str(&format!(
            "Software prefetch changes one-thread streaming reads by less than {} at \
             every distance tried: the hardware prefetchers do the job. ",
            pct(f.effect_ratio, 0)
        ));
    }
    match f.page_size {
        Some(PageSizeEffect::Faster(g)) => text.push_str(&format!(
            "Huge pages read {} faster than 4 KiB pages: streaming stalls at page \
             boundaries, as Northwood's did in the P4 large-pages case (+{}).",
            off_one(g),
            pct(P4_NORTHWOOD_HUGE_PAGE_READ_GAIN_PCT / 100.0, 0)
        )),
        Some(PageSizeEffect::Slower(g)) => text.push_str(&format!(
            "Huge pages read {} slower than 4 KiB pages.",
            off_one(g)
        )),
        Some(PageSizeEffect::Neutral) => text.push_str(
            "Page size hardly changes streaming reads, as on Prescott in the P4 large-pages case.",
        ),
        None => {}
    }
    text.trim_end().to_string()
}

/// The software patterns the hazard hurts.
pub const HURTS: &[&str] = &[
    "streaming loops with software prefetch distances tuned on another CPU",
    "bulk copies, scans and decompression over buffers larger than the caches",
];

/// The hazard's title.
pub const TITLE: &str = "Software prefetch";
