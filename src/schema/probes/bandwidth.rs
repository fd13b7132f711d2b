//! The bandwidth probe's result: sequential read bandwidth per configuration (threads, page
//! kind, software prefetch distance) as raw samples, and the figures its analysis reads from
//! them. The prefetch figures come in two sets, on the headline page kind and on huge pages
//! ([`PrefetchOn`]), each named here once.

use crate::figures;
use crate::measure::buffer::{PageKind, PageKindOutcome};
use crate::schema::figures::{FigureId, ProbeRaw, RawError, RawRecord, WithDerived};
use crate::schema::figures::{effects_of, to_map};
use crate::schema::{Metric, ProbeResult, Series};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

figures! {
    /// What the bandwidth probe reports, in report order. Headline figures are on the page
    /// kind named by [`BandwidthDerived::read_bw_page_kind`] (4 KiB unless the run asked only
    /// for huge pages); `_huge` figures on [`BandwidthDerived::huge_page_kind`].
    pub struct BandwidthFigures for crate::names::probe::BANDWIDTH {
        /// Read bandwidth of one thread, no software prefetch, GB/s.
        read_bw_1t_gbs / READ_BW_1T_GBS,
        /// Read bandwidth of all threads together, GB/s.
        read_bw_all_gbs / READ_BW_ALL_GBS,
        /// One thread on huge pages, GB/s.
        read_bw_1t_huge_gbs / READ_BW_1T_HUGE_GBS,
        /// All threads on huge pages, GB/s.
        read_bw_all_huge_gbs / READ_BW_ALL_HUGE_GBS,
        /// One thread's bandwidth on huge pages over the headline page kind, ratio (paired).
        huge_page_read_gain_ratio / HUGE_PAGE_READ_GAIN_RATIO,
        /// Best prefetch distance's bandwidth over none, headline page kind, ratio.
        prefetch_read_gain_ratio / PREFETCH_READ_GAIN_RATIO,
        /// Worst prefetch distance's bandwidth over none, headline page kind, ratio.
        prefetch_read_worst_ratio / PREFETCH_READ_WORST_RATIO,
        /// The best prefetch distance, bytes ahead of the loads; only where its gain's
        /// interval lies wholly above 1.
        prefetch_best_distance_bytes / PREFETCH_BEST_DISTANCE_BYTES,
        /// Best prefetch distance over none on huge pages, ratio.
        prefetch_read_gain_huge_ratio / PREFETCH_READ_GAIN_HUGE_RATIO,
        /// Worst prefetch distance over none on huge pages, ratio.
        prefetch_read_worst_huge_ratio / PREFETCH_READ_WORST_HUGE_RATIO,
        /// The best prefetch distance on huge pages, bytes (as its headline twin).
        prefetch_best_distance_huge_bytes / PREFETCH_BEST_DISTANCE_HUGE_BYTES,
    }
}

/// Which page kind a set of prefetch figures is read on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrefetchOn {
    /// The headline page kind ([`BandwidthDerived::read_bw_page_kind`]).
    Base,
    /// Huge pages ([`BandwidthDerived::huge_page_kind`]).
    Huge,
}

/// The prefetch figures on one page kind: the best and worst distance's bandwidth over none,
/// and the best distance itself.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prefetch {
    /// Best distance over none, ratio.
    pub gain: Option<Metric>,
    /// Worst distance over none, ratio.
    pub worst: Option<Metric>,
    /// The best distance, bytes, where its gain beats the noise.
    pub best_distance: Option<Metric>,
}

/// The ids of one page kind's prefetch figures: gain, worst, best distance.
pub struct PrefetchIds {
    /// Best distance over none.
    pub gain: FigureId,
    /// Worst distance over none.
    pub worst: FigureId,
    /// The best distance.
    pub best_distance: FigureId,
}

impl PrefetchOn {
    /// The ids of this page kind's prefetch figures.
    pub const fn ids(self) -> PrefetchIds {
        match self {
            PrefetchOn::Base => PrefetchIds {
                gain: BandwidthFigures::PREFETCH_READ_GAIN_RATIO,
                worst: BandwidthFigures::PREFETCH_READ_WORST_RATIO,
                best_distance: BandwidthFigures::PREFETCH_BEST_DISTANCE_BYTES,
            },
            PrefetchOn::Huge => PrefetchIds {
                gain: BandwidthFigures::PREFETCH_READ_GAIN_HUGE_RATIO,
                worst: BandwidthFigures::PREFETCH_READ_WORST_HUGE_RATIO,
                best_distance: BandwidthFigures::PREFETCH_BEST_DISTANCE_HUGE_BYTES,
            },
        }
    }
}

impl BandwidthFigures {
    /// The prefetch figures on `on`.
    pub fn prefetch(&self, on: PrefetchOn) -> Prefetch {
        let (gain, worst, best_distance) = match on {
            PrefetchOn::Base => (
                &self.prefetch_read_gain_ratio,
                &self.prefetch_read_worst_ratio,
                &self.prefetch_best_distance_bytes,
            ),
            PrefetchOn::Huge => (
                &self.prefetch_read_gain_huge_ratio,
                &self.prefetch_read_worst_huge_ratio,
                &self.prefetch_best_distance_huge_bytes,
            ),
        };
        Prefetch {
            gain: gain.clone(),
            worst: worst.clone(),
            best_distance: best_distance.clone(),
        }
    }

    /// Sets the prefetch figures on `on`.
    pub fn set_prefetch(&mut self, on: PrefetchOn, p: Prefetch) {
        let slots = match on {
            PrefetchOn::Base => (
                &mut self.prefetch_read_gain_ratio,
                &mut self.prefetch_read_worst_ratio,
                &mut self.prefetch_best_distance_bytes,
            ),
            PrefetchOn::Huge => (
                &mut self.prefetch_read_gain_huge_ratio,
                &mut self.prefetch_read_worst_huge_ratio,
                &mut self.prefetch_best_distance_huge_bytes,
            ),
        };
        *slots.0 = p.gain;
        *slots.1 = p.worst;
        *slots.2 = p.best_distance;
    }
}

/// How the bandwidth probe ran (`params`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BandwidthParams {
    /// The CPUs read from (one thread on the first, then one on each).
    #[serde(default)]
    pub cpus: Vec<usize>,
    /// Timed rounds, each one pass per configuration.
    #[serde(default)]
    pub repetitions: usize,
    /// Size of each buffer, bytes.
    #[serde(default)]
    pub buffer_bytes: u64,
    /// Windows each buffer is read in, one per pass (files of earlier builds lack it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub windows_per_buffer: Option<usize>,
    /// The page kinds asked for, in the order the configurations were measured.
    #[serde(default)]
    pub page_kinds: Vec<PageKind>,
    /// Software prefetch distances tried, bytes ahead of the loads.
    #[serde(default)]
    pub prefetch_distances_bytes: Vec<usize>,
}

/// What took effect when the bandwidth probe ran (`effects`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BandwidthEffects {
    /// Why the buffers are smaller than wanted (a sentence), when they are.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer_capped: Option<String>,
    /// What a cgroup memory limit or `RLIMIT_AS` left the process (a sentence), when one
    /// applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit: Option<String>,
    /// The CPUs the readers were pinned to.
    #[serde(default)]
    pub pinned_cpus: Vec<usize>,
    /// The vector loads used (`avx512`, `avx2`, `sse2`).
    #[serde(default)]
    pub vector_isa: String,
    /// Their width, bits.
    #[serde(default)]
    pub vector_width_bits: u32,
    /// What became of each page kind asked for (a record this build cannot read is left out).
    #[serde(default, deserialize_with = "outcomes_one_by_one")]
    pub page_kinds: Vec<PageKindOutcome>,
    /// The CPU that faulted the one-thread buffers in (files of earlier builds lack it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub first_touch_cpu: Option<usize>,
    /// Where the all-threads pass's pages were faulted in (a phrase).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub all_threads_first_touch: Option<String>,
    /// Buffer size over the last-level cache, where sysfs reports one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer_over_llc_ratio: Option<f64>,
}

/// Record by record: one this build cannot read does not hide the others.
pub(super) fn outcomes_one_by_one<'de, D: serde::Deserializer<'de>>(
    d: D,
) -> Result<Vec<PageKindOutcome>, D::Error> {
    let records: Vec<serde_json::Value> = Deserialize::deserialize(d)?;
    Ok(records
        .into_iter()
        .filter_map(|r| serde_json::from_value(r).ok())
        .collect())
}

/// The effects alone, for readers of what took effect (the hazards, the summary screen):
/// read from a saved result's `effects` whatever its samples.
impl RawRecord for BandwidthEffects {
    fn write_into(&self, result: &mut ProbeResult) {
        result.effects.extend(to_map(self));
    }

    fn read_from(result: &ProbeResult) -> Result<Self, RawError> {
        effects_of(result)
    }
}

/// One measured configuration: how many threads read, on which page kind, with software
/// prefetch how far ahead (or none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReadConfig {
    /// Reader threads.
    pub threads: usize,
    /// Page kind of the buffer.
    pub kind: PageKind,
    /// Prefetch distance, bytes ahead of the loads; `None` without prefetch.
    pub prefetch_bytes: Option<usize>,
}

impl ReadConfig {
    /// Its sample's name: `read_bw_gbs.1t.4k.none`, `read_bw_gbs.2t.thp.pf2048`.
    pub fn sample_name(&self) -> String {
        format!(
            "read_bw_gbs.{}t.{}.{}",
            self.threads,
            self.kind.name(),
            self.prefetch_bytes
                .map(|d| format!("pf{d}"))
                .unwrap_or_else(|| "none".into())
        )
    }

    /// The configuration a sample name names ([`ReadConfig::sample_name`]).
    pub fn of_sample_name(name: &str) -> Option<ReadConfig> {
        let rest = name.strip_prefix("read_bw_gbs.")?;
        let mut parts = rest.split('.');
        let (Some(threads), Some(kind), Some(pf), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return None;
        };
        Some(ReadConfig {
            threads: threads.strip_suffix('t')?.parse().ok()?,
            kind: PageKind::parse(kind)?,
            prefetch_bytes: match pf {
                "none" => None,
                d => Some(d.strip_prefix("pf")?.parse().ok()?),
            },
        })
    }
}

/// The raw samples (`samples`): GB/s of each timed pass, per configuration. Other samples
/// (a combined result's `<figure>.runs`) are not part of the record.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(
    try_from = "BTreeMap<String, Vec<f64>>",
    into = "BTreeMap<String, Vec<f64>>"
)]
pub struct BandwidthSamples {
    /// GB/s per pass, per configuration (`read_bw_gbs.<threads>t.<kind>.<prefetch>`).
    pub read_bw_gbs: BTreeMap<ReadConfig, Vec<f64>>,
}

impl TryFrom<BTreeMap<String, Vec<f64>>> for BandwidthSamples {
    type Error = String;

    fn try_from(map: BTreeMap<String, Vec<f64>>) -> Result<Self, String> {
        let read_bw_gbs: BTreeMap<ReadConfig, Vec<f64>> = map
            .into_iter()
            .filter_map(|(k, v)| Some((ReadConfig::of_sample_name(&k)?, v)))
            .collect();
        if read_bw_gbs.is_empty() {
            return Err("no read_bw_gbs samples".into());
        }
        Ok(BandwidthSamples { read_bw_gbs })
    }
}

impl From<BandwidthSamples> for BTreeMap<String, Vec<f64>> {
    fn from(s: BandwidthSamples) -> Self {
        s.read_bw_gbs
            .into_iter()
            .map(|(c, v)| (c.sample_name(), v))
            .collect()
    }
}

/// What the bandwidth probe saves of its measurement.
pub type BandwidthRaw = ProbeRaw<BandwidthParams, BandwidthEffects, BandwidthSamples>;

/// What the analysis derives beside the figures: the page kinds they are read on, every
/// prefetch distance's gain (`effects`), and the bars of every configuration (`series`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BandwidthDerived {
    /// The page kind of the headline figures (4 KiB unless the run asked only for huge pages).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_bw_page_kind: Option<PageKind>,
    /// The huge page kind of the `_huge` figures, when one was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub huge_page_kind: Option<PageKind>,
    /// Per page kind, per prefetch distance (bytes), its one-thread bandwidth over none
    /// (the median of the paired ratios).
    #[serde(default)]
    pub prefetch_gain_by_distance: BTreeMap<PageKind, BTreeMap<u64, f64>>,
    /// Median GB/s of every configuration, as bars.
    #[serde(skip)]
    pub series: Vec<Series>,
}

impl BandwidthDerived {
    /// The name of the bars of every configuration (`series`).
    pub const BARS: &str = "read_bw_gbs";
    /// The `effects` keys the derived part writes (and replaces).
    pub const EFFECTS: [&str; 3] = [
        "read_bw_page_kind",
        "huge_page_kind",
        "prefetch_gain_by_distance",
    ];
}

impl RawRecord for BandwidthDerived {
    fn write_into(&self, result: &mut ProbeResult) {
        for k in Self::EFFECTS {
            result.effects.remove(k);
        }
        result.effects.extend(to_map(self));
        result.series = self.series.clone();
    }

    fn read_from(result: &ProbeResult) -> Result<Self, RawError> {
        let mut d: BandwidthDerived = effects_of(result)?;
        d.series = result.series.clone();
        Ok(d)
    }
}

/// The bandwidth probe's analysis: its figures and what it derives beside them.
pub type BandwidthAnalysis = WithDerived<BandwidthFigures, BandwidthDerived>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configurations_round_trip_their_sample_names() {
        let c = ReadConfig {
            threads: 2,
            kind: PageKind::Thp,
            prefetch_bytes: Some(2048),
        };
        assert_eq!(c.sample_name(), "read_bw_gbs.2t.thp.pf2048");
        assert_eq!(ReadConfig::of_sample_name(&c.sample_name()), Some(c));
        let none = ReadConfig::of_sample_name("read_bw_gbs.1t.4k.none").unwrap();
        assert_eq!(none.prefetch_bytes, None);
        assert_eq!(ReadConfig::of_sample_name("read_bw_1t_gbs.runs"), None);
    }

    #[test]
    fn every_derived_effect_is_replaced() {
        let full = BandwidthDerived {
            read_bw_page_kind: Some(PageKind::Base4k),
            huge_page_kind: Some(PageKind::Thp),
            ..BandwidthDerived::default()
        };
        let keys: Vec<String> = to_map(&full).into_keys().collect();
        assert_eq!(keys.len(), BandwidthDerived::EFFECTS.len());
        for k in keys {
            assert!(BandwidthDerived::EFFECTS.contains(&k.as_str()), "{k}");
        }
    }

    #[test]
    fn prefetch_figures_are_named_once_per_page_kind() {
        assert_eq!(
            PrefetchOn::Huge.ids().gain.metric,
            "prefetch_read_gain_huge_ratio"
        );
        assert_eq!(
            PrefetchOn::Base.ids().best_distance.metric,
            "prefetch_best_distance_bytes"
        );
    }
}
