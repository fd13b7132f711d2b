//! The memory-latency probe's result: ns per load of a pointer chase per buffer size and page
//! kind, and of the one-line-per-page TLB sweep, as raw samples; the figures its analysis
//! reads from the curve (cache levels, DRAM, the 4 KiB page penalty, the TLB reach); and what
//! the analysis derives beside them (where it placed each level, the curves for charts).

use crate::figures;
use crate::measure::buffer::{PageKind, PageKindOutcome};
use crate::schema::figures::{FigureId, ProbeRaw, RawError, RawRecord, WithDerived};
use crate::schema::figures::{effects_of, to_map};
use crate::schema::{Metric, ProbeResult, Series};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

figures! {
    /// What the memory-latency probe reports, in report order. Cache and DRAM latencies are
    /// read on huge pages where they took (see [`MemLatencyDerived::latency_page_kind`]).
    pub struct MemLatencyFigures for crate::names::probe::MEM_LATENCY {
        /// L1 latency, ns per dependent load.
        l1_latency_ns / L1_LATENCY_NS,
        /// L1 latency, core cycles.
        l1_latency_cycles / L1_LATENCY_CYCLES,
        /// L2 latency, ns.
        l2_latency_ns / L2_LATENCY_NS,
        /// L2 latency, core cycles.
        l2_latency_cycles / L2_LATENCY_CYCLES,
        /// L3 latency, ns (absent where the curve shows no distinct L3).
        l3_latency_ns / L3_LATENCY_NS,
        /// L3 latency, core cycles.
        l3_latency_cycles / L3_LATENCY_CYCLES,
        /// L4 latency, ns (where sysfs reports an L4).
        l4_latency_ns / L4_LATENCY_NS,
        /// L4 latency, core cycles.
        l4_latency_cycles / L4_LATENCY_CYCLES,
        /// DRAM latency, ns, where the curve's plateau is.
        dram_latency_ns / DRAM_LATENCY_NS,
        /// DRAM latency, core cycles.
        dram_latency_cycles / DRAM_LATENCY_CYCLES,
        /// DRAM latency on 4 KiB pages over huge pages at the largest DRAM size, ratio
        /// (paired).
        tlb_penalty_ratio / TLB_PENALTY_RATIO,
        /// DRAM latency on 4 KiB pages at that size, ns (page walks included).
        dram_latency_4k_ns / DRAM_LATENCY_4K_NS,
        /// DRAM latency on huge pages at that size, ns.
        dram_latency_huge_ns / DRAM_LATENCY_HUGE_NS,
        /// The largest span 4 KiB pages cover before loads pay page walks, bytes.
        tlb_reach_bytes / TLB_REACH_BYTES,
    }
}

/// A level of the memory hierarchy the curve is read at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum CurveLevel {
    /// A cache level as sysfs numbers it (1 to 4).
    Cache(u32),
    /// Main memory.
    Dram,
}

impl CurveLevel {
    /// Its name on the curve and in `effects.levels` (`l1`, `dram`).
    pub fn name(self) -> String {
        match self {
            CurveLevel::Cache(n) => format!("l{n}"),
            CurveLevel::Dram => "dram".into(),
        }
    }

    /// The level a name on the curve names.
    pub fn of_name(name: &str) -> Option<CurveLevel> {
        match name {
            "dram" => Some(CurveLevel::Dram),
            l => Some(CurveLevel::Cache(l.strip_prefix('l')?.parse().ok()?)),
        }
    }

    /// The ids of its latency figures: (ns, cycles); `None` for a level without figures.
    pub const fn ids(self) -> Option<(FigureId, FigureId)> {
        use MemLatencyFigures as F;
        Some(match self {
            CurveLevel::Cache(1) => (F::L1_LATENCY_NS, F::L1_LATENCY_CYCLES),
            CurveLevel::Cache(2) => (F::L2_LATENCY_NS, F::L2_LATENCY_CYCLES),
            CurveLevel::Cache(3) => (F::L3_LATENCY_NS, F::L3_LATENCY_CYCLES),
            CurveLevel::Cache(4) => (F::L4_LATENCY_NS, F::L4_LATENCY_CYCLES),
            CurveLevel::Dram => (F::DRAM_LATENCY_NS, F::DRAM_LATENCY_CYCLES),
            CurveLevel::Cache(_) => return None,
        })
    }
}

impl MemLatencyFigures {
    /// The latency figures of `level`: (ns, cycles); `None` for a level without figures.
    pub fn latency_mut(
        &mut self,
        level: CurveLevel,
    ) -> Option<(&mut Option<Metric>, &mut Option<Metric>)> {
        Some(match level {
            CurveLevel::Cache(1) => (&mut self.l1_latency_ns, &mut self.l1_latency_cycles),
            CurveLevel::Cache(2) => (&mut self.l2_latency_ns, &mut self.l2_latency_cycles),
            CurveLevel::Cache(3) => (&mut self.l3_latency_ns, &mut self.l3_latency_cycles),
            CurveLevel::Cache(4) => (&mut self.l4_latency_ns, &mut self.l4_latency_cycles),
            CurveLevel::Dram => (&mut self.dram_latency_ns, &mut self.dram_latency_cycles),
            CurveLevel::Cache(_) => return None,
        })
    }
}

/// One cache level as sysfs reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheSize {
    /// 1, 2, 3.
    pub level: u32,
    /// Size of one instance in bytes.
    pub bytes: u64,
}

/// The data caches sysfs reported when the probe ran, by level (`effects.cache_sizes_bytes`:
/// `{"l1": bytes, ...}`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(from = "BTreeMap<String, u64>", into = "BTreeMap<String, u64>")]
pub struct CacheSizes(pub Vec<CacheSize>);

impl From<BTreeMap<String, u64>> for CacheSizes {
    fn from(m: BTreeMap<String, u64>) -> Self {
        let mut v: Vec<CacheSize> = m
            .into_iter()
            .filter_map(|(k, bytes)| {
                Some(CacheSize {
                    level: k.strip_prefix('l')?.parse().ok()?,
                    bytes,
                })
            })
            .collect();
        v.sort_by_key(|c| c.level);
        CacheSizes(v)
    }
}

impl From<CacheSizes> for BTreeMap<String, u64> {
    fn from(c: CacheSizes) -> Self {
        c.0.into_iter()
            .map(|c| (CurveLevel::Cache(c.level).name(), c.bytes))
            .collect()
    }
}

/// How the memory-latency probe ran (`params`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemLatencyParams {
    /// The CPU the chase ran on.
    #[serde(default)]
    pub cpu: usize,
    /// Timed samples per size and page kind.
    #[serde(default)]
    pub repetitions: usize,
    /// Buffer sizes of the latency curve, bytes.
    #[serde(default)]
    pub sizes_bytes: Vec<u64>,
    /// The largest size the sweep was allowed, bytes.
    #[serde(default)]
    pub max_size_bytes: u64,
    /// The page kinds asked for, in the order they were measured.
    #[serde(default)]
    pub page_kinds: Vec<PageKind>,
    /// Dependent loads per timed sample.
    #[serde(default)]
    pub loads_per_sample: u64,
    /// Page counts of the one-line-per-page TLB sweep.
    #[serde(default)]
    pub tlb_sweep_pages: Vec<u64>,
}

/// What took effect when the memory-latency probe ran (`effects`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemLatencyEffects {
    /// The CPU the chase was pinned to.
    #[serde(default)]
    pub pinned_cpus: Vec<usize>,
    /// The core clock estimated before the chase, GHz (cycles figures need it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_clock_ghz: Option<f64>,
    /// What became of each page kind asked for (a record this build cannot read is left out).
    #[serde(default, deserialize_with = "super::bandwidth::outcomes_one_by_one")]
    pub page_kinds: Vec<PageKindOutcome>,
    /// The data caches sysfs reported.
    #[serde(default)]
    pub cache_sizes_bytes: CacheSizes,
    /// Why the sweep stops short of the size it wanted (a sentence), when it does.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_size_capped: Option<String>,
    /// What a cgroup memory limit or `RLIMIT_AS` left the process (a sentence), when one
    /// applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit: Option<String>,
}

/// The effects alone, for readers of what took effect (the hazards, the summary screen).
impl RawRecord for MemLatencyEffects {
    fn write_into(&self, result: &mut ProbeResult) {
        result.effects.extend(to_map(self));
    }

    fn read_from(result: &ProbeResult) -> Result<Self, RawError> {
        effects_of(result)
    }
}

/// The raw samples (`samples`): ns per load, per page kind and buffer size
/// (`latency_ns.<kind>.<bytes>`) and per page kind and page count of the TLB sweep
/// (`tlb_sweep_latency_ns.<kind>.<pages>_pages`). A result without a latency curve has no
/// record (its saved figures stand); other samples are not part of it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(
    try_from = "BTreeMap<String, Vec<f64>>",
    into = "BTreeMap<String, Vec<f64>>"
)]
pub struct MemLatencySamples {
    /// ns per load of each sample, by (page kind, buffer bytes).
    pub latency_ns: BTreeMap<(PageKind, u64), Vec<f64>>,
    /// ns per load of each sample of the TLB sweep, by (page kind, pages).
    pub tlb_sweep_latency_ns: BTreeMap<(PageKind, u64), Vec<f64>>,
}

impl TryFrom<BTreeMap<String, Vec<f64>>> for MemLatencySamples {
    type Error = String;

    fn try_from(map: BTreeMap<String, Vec<f64>>) -> Result<Self, String> {
        let mut s = MemLatencySamples::default();
        if !map.keys().any(|k| k.starts_with("latency_ns.")) {
            return Err("no latency_ns samples".into());
        }
        for (name, v) in map {
            let mut parts = name.split('.');
            let (Some(what), Some(kind), Some(x), None) =
                (parts.next(), parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            let Some(kind) = PageKind::ALL.into_iter().find(|k| k.name() == kind) else {
                continue;
            };
            match what {
                "latency_ns" => {
                    if let Ok(size) = x.parse::<u64>() {
                        s.latency_ns.insert((kind, size), v);
                    }
                }
                "tlb_sweep_latency_ns" => {
                    if let Some(Ok(pages)) = x.strip_suffix("_pages").map(str::parse::<u64>) {
                        s.tlb_sweep_latency_ns.insert((kind, pages), v);
                    }
                }
                _ => {}
            }
        }
        Ok(s)
    }
}

impl From<MemLatencySamples> for BTreeMap<String, Vec<f64>> {
    fn from(s: MemLatencySamples) -> Self {
        let curve = s
            .latency_ns
            .into_iter()
            .map(|((k, size), v)| (format!("latency_ns.{k}.{size}"), v));
        let tlb = s
            .tlb_sweep_latency_ns
            .into_iter()
            .map(|((k, pages), v)| (format!("tlb_sweep_latency_ns.{k}.{pages}_pages"), v));
        curve.chain(tlb).collect()
    }
}

/// What the memory-latency probe saves of its measurement.
pub type MemLatencyRaw = ProbeRaw<MemLatencyParams, MemLatencyEffects, MemLatencySamples>;

/// Where a level was read on the curve, and whether the curve steps up past it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LevelOnCurve {
    /// `l1`, `l2`, `l3` or `dram` (see [`CurveLevel::name`]).
    pub name: String,
    /// Size sysfs reports (absent for DRAM).
    #[serde(default)]
    pub cache_bytes: Option<u64>,
    /// Buffer size the latency was read at.
    pub at_size_bytes: u64,
    /// Median latency there, in ns.
    pub latency_ns: f64,
    /// Buffer size past the level where the step was checked (absent for DRAM, or when no
    /// size that large was measured).
    #[serde(default)]
    pub beyond_size_bytes: Option<u64>,
    /// Latency there over latency inside.
    #[serde(default)]
    pub step_ratio: Option<f64>,
    /// True when the curve rises past the level by the analysis's step ratio, as the sysfs
    /// size says it should; false means the cache does not behave like its reported size
    /// (a VM's virtual topology, a cache shared with busy neighbours).
    #[serde(default)]
    pub step_seen: Option<bool>,
    /// Smallest measured size in the level's range (past the previous level).
    #[serde(default)]
    pub range_start_bytes: Option<u64>,
    /// True when the curve does not step up between the start of the level's range and
    /// where it is read; false means the level ends before its sysfs size (the latency read
    /// is already the next level's).
    #[serde(default)]
    pub flat_inside: Option<bool>,
    /// For a level past L2: true when what was read inside it is many times L2's latency,
    /// i.e. DRAM (a guest's small share of a shared L3). Absent when L2 was not confirmed
    /// or for L1, L2 and DRAM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dram_like: Option<bool>,
    /// DRAM only: how it was found, `plateau` (from the curve) or `size` (far past the
    /// reported LLC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found_by: Option<DramFoundBy>,
    /// DRAM only, found by the curve: the first and last size of the plateau.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plateau_bytes: Option<[u64; 2]>,
}

impl LevelOnCurve {
    /// True unless the curve contradicts the sysfs size: the latency can be reported as this
    /// level's.
    pub fn confirmed(&self) -> bool {
        self.step_seen != Some(false)
            && self.flat_inside != Some(false)
            && self.dram_like != Some(true)
    }

    /// The level it is, when its name is one.
    pub fn level(&self) -> Option<CurveLevel> {
        CurveLevel::of_name(&self.name)
    }
}

/// How DRAM was found on a curve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DramFoundBy {
    /// A plateau of the curve far above L2.
    Plateau,
    /// A size far past the reported last-level cache.
    Size,
}

/// What the analysis derives beside the figures (`effects`, one sample, `series`), replaced
/// when a saved file is analysed again.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemLatencyDerived {
    /// Per page kind, the sizes where its curve steps up, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub curve_steps_bytes: Option<BTreeMap<PageKind, Vec<u64>>>,
    /// The page kind the cache and DRAM latencies are read on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_page_kind: Option<PageKind>,
    /// Where each level (and DRAM) was read on the curve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub levels: Option<Vec<LevelOnCurve>>,
    /// The DRAM size the 4 KiB page penalty is read at, bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tlb_penalty_size_bytes: Option<u64>,
    /// The penalty at every DRAM size (bytes), ratio.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tlb_penalty_by_size: Option<BTreeMap<u64, f64>>,
    /// The TLB sweep's knee in each repetition, bytes (`samples`).
    #[serde(skip)]
    pub tlb_reach_repetitions_bytes: Option<Vec<f64>>,
    /// The curves for charts (`series`).
    #[serde(skip)]
    pub series: Vec<Series>,
}

impl MemLatencyDerived {
    /// The `effects` keys the derived part writes (and replaces). `tlb_reach` is an earlier
    /// build's reason for a missing TLB reach, now in `not_measured`.
    pub const EFFECTS: [&str; 6] = [
        "curve_steps_bytes",
        "latency_page_kind",
        "levels",
        "tlb_penalty_by_size",
        "tlb_penalty_size_bytes",
        "tlb_reach",
    ];
    /// The sample of the TLB reach's repetitions.
    pub const TLB_REACH_REPETITIONS: &str = "tlb_reach_bytes.repetitions";
}

impl RawRecord for MemLatencyDerived {
    fn write_into(&self, result: &mut ProbeResult) {
        for k in Self::EFFECTS {
            result.effects.remove(k);
        }
        result.samples.remove(Self::TLB_REACH_REPETITIONS);
        result.effects.extend(to_map(self));
        if let Some(knees) = &self.tlb_reach_repetitions_bytes {
            result
                .samples
                .insert(Self::TLB_REACH_REPETITIONS.into(), knees.clone());
        }
        result.series = self.series.clone();
    }

    fn read_from(result: &ProbeResult) -> Result<Self, RawError> {
        let mut d: MemLatencyDerived = effects_of(result)?;
        d.tlb_reach_repetitions_bytes = result.samples.get(Self::TLB_REACH_REPETITIONS).cloned();
        d.series = result.series.clone();
        Ok(d)
    }
}

/// The memory-latency probe's analysis: its figures and what it derives beside them.
pub type MemLatencyAnalysis = WithDerived<MemLatencyFigures, MemLatencyDerived>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_round_trip_their_names_and_a_result_without_a_curve_has_none() {
        let mut map = BTreeMap::new();
        map.insert("latency_ns.thp.16384".to_string(), vec![1.0]);
        map.insert("tlb_sweep_latency_ns.4k.256_pages".to_string(), vec![2.0]);
        map.insert("dram_latency_ns.runs".to_string(), vec![3.0]);
        let s = MemLatencySamples::try_from(map).unwrap();
        assert_eq!(s.latency_ns[&(PageKind::Thp, 16384)], [1.0]);
        assert_eq!(s.tlb_sweep_latency_ns[&(PageKind::Base4k, 256)], [2.0]);
        let back: BTreeMap<String, Vec<f64>> = s.into();
        assert_eq!(back.len(), 2);
        assert!(back.contains_key("tlb_sweep_latency_ns.4k.256_pages"));
        let none = BTreeMap::from([("tlb_reach_bytes.runs".to_string(), vec![1.0])]);
        assert!(MemLatencySamples::try_from(none).is_err());
    }

    #[test]
    fn every_derived_effect_is_replaced() {
        let full = MemLatencyDerived {
            curve_steps_bytes: Some(BTreeMap::new()),
            latency_page_kind: Some(PageKind::Thp),
            levels: Some(Vec::new()),
            tlb_penalty_size_bytes: Some(1),
            tlb_penalty_by_size: Some(BTreeMap::new()),
            ..MemLatencyDerived::default()
        };
        for k in to_map(&full).keys() {
            assert!(MemLatencyDerived::EFFECTS.contains(&k.as_str()), "{k}");
        }
    }

    #[test]
    fn levels_have_their_figures() {
        assert_eq!(
            CurveLevel::of_name("l3")
                .and_then(CurveLevel::ids)
                .unwrap()
                .0,
            MemLatencyFigures::L3_LATENCY_NS
        );
        assert_eq!(CurveLevel::of_name("dram"), Some(CurveLevel::Dram));
        assert_eq!(CurveLevel::Cache(2).name(), "l2");
    }
}
