//! The core-to-core latency probe's result (`probes::c2c`): one-way cache-line handoffs per
//! CPU pair, its figures over the pairs and one per topology group (`c2c_shared_l3_ns`).

use crate::machine::topology::PairGroup;
use crate::names::probe;
use crate::schema::Metric;
use crate::schema::figures::{FigureId, Figures, ProbeRaw};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::collections::BTreeMap;

/// The c2c matrix series of the `lock cmpxchg` handoff (ns per pair).
pub const CAS_MATRIX_SERIES: &str = "c2c_latency_ns";
/// The c2c matrix series of the load-then-store handoff (ns per pair).
pub const LOAD_STORE_MATRIX_SERIES: &str = "c2c_load_store_latency_ns";
/// The c2c bars of the `lock cmpxchg` handoff's median per pair group.
pub const BY_GROUP_SERIES: &str = "c2c_latency_ns_by_group";

/// What the c2c probe reports, in report order; the per-group figures are named by their
/// group (`c2c_{group}_ns`, see [`C2cFigures::group_id`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct C2cFigures {
    /// One-way `lock cmpxchg` handoff, ns: the median of the pair medians (a range across
    /// pairs), or one pair's samples when one pair was measured.
    pub c2c_latency_ns: Option<Metric>,
    /// The fastest pair's median, ns.
    pub c2c_latency_min_ns: Option<Metric>,
    /// The slowest pair's median, ns.
    pub c2c_latency_max_ns: Option<Metric>,
    /// `c2c_latency_ns` in core cycles, when the core clock was estimated.
    pub c2c_latency_cycles: Option<Metric>,
    /// One-way handoff by a plain load-then-store flag, ns (over pairs as `c2c_latency_ns`).
    pub c2c_load_store_latency_ns: Option<Metric>,
    /// Per topology group measured (never [`PairGroup::Unknown`]), its pairs' medians, ns (a
    /// range across pairs), closest group first.
    pub by_group: BTreeMap<PairGroup, Metric>,
}

/// The groups a figure is given for, with their figures' ids.
const GROUPS: [(PairGroup, FigureId); 4] = [
    (PairGroup::SmtSibling, C2cFigures::C2C_SMT_SIBLING_NS),
    (PairGroup::SharedL3, C2cFigures::C2C_SHARED_L3_NS),
    (PairGroup::OtherL3, C2cFigures::C2C_OTHER_L3_NS),
    (PairGroup::OtherNumaNode, C2cFigures::C2C_OTHER_NUMA_NODE_NS),
];

impl C2cFigures {
    /// The id of `c2c_latency_ns`.
    pub const C2C_LATENCY_NS: FigureId = FigureId::new(probe::C2C, "c2c_latency_ns");
    /// The id of `c2c_latency_min_ns`.
    pub const C2C_LATENCY_MIN_NS: FigureId = FigureId::new(probe::C2C, "c2c_latency_min_ns");
    /// The id of `c2c_latency_max_ns`.
    pub const C2C_LATENCY_MAX_NS: FigureId = FigureId::new(probe::C2C, "c2c_latency_max_ns");
    /// The id of `c2c_latency_cycles`.
    pub const C2C_LATENCY_CYCLES: FigureId = FigureId::new(probe::C2C, "c2c_latency_cycles");
    /// The id of `c2c_load_store_latency_ns`.
    pub const C2C_LOAD_STORE_LATENCY_NS: FigureId =
        FigureId::new(probe::C2C, "c2c_load_store_latency_ns");
    /// The id of the SMT siblings' figure.
    pub const C2C_SMT_SIBLING_NS: FigureId = FigureId::new(probe::C2C, "c2c_smt_sibling_ns");
    /// The id of the shared-L3 pairs' figure.
    pub const C2C_SHARED_L3_NS: FigureId = FigureId::new(probe::C2C, "c2c_shared_l3_ns");
    /// The id of the other-L3 pairs' figure.
    pub const C2C_OTHER_L3_NS: FigureId = FigureId::new(probe::C2C, "c2c_other_l3_ns");
    /// The id of the other-NUMA-node pairs' figure.
    pub const C2C_OTHER_NUMA_NODE_NS: FigureId =
        FigureId::new(probe::C2C, "c2c_other_numa_node_ns");

    /// The id of a group's figure; `None` for [`PairGroup::Unknown`], which has none.
    pub fn group_id(group: PairGroup) -> Option<FigureId> {
        GROUPS.iter().find(|(g, _)| *g == group).map(|(_, id)| *id)
    }

    /// The figures every file names the same way, with their fields.
    fn fixed(&self) -> [(FigureId, &Option<Metric>); 5] {
        [
            (C2cFigures::C2C_LATENCY_NS, &self.c2c_latency_ns),
            (C2cFigures::C2C_LATENCY_MIN_NS, &self.c2c_latency_min_ns),
            (C2cFigures::C2C_LATENCY_MAX_NS, &self.c2c_latency_max_ns),
            (C2cFigures::C2C_LATENCY_CYCLES, &self.c2c_latency_cycles),
            (
                C2cFigures::C2C_LOAD_STORE_LATENCY_NS,
                &self.c2c_load_store_latency_ns,
            ),
        ]
    }
}

impl Figures for C2cFigures {
    const PROBE: &'static str = probe::C2C;
    const IDS: &'static [FigureId] = &[
        C2cFigures::C2C_LATENCY_NS,
        C2cFigures::C2C_LATENCY_MIN_NS,
        C2cFigures::C2C_LATENCY_MAX_NS,
        C2cFigures::C2C_LATENCY_CYCLES,
        C2cFigures::C2C_LOAD_STORE_LATENCY_NS,
        C2cFigures::C2C_SMT_SIBLING_NS,
        C2cFigures::C2C_SHARED_L3_NS,
        C2cFigures::C2C_OTHER_L3_NS,
        C2cFigures::C2C_OTHER_NUMA_NODE_NS,
    ];

    fn into_metrics(self) -> Vec<Metric> {
        let named = |id: FigureId, m: Metric| Metric {
            name: id.metric.to_string(),
            ..m
        };
        let mut out: Vec<Metric> = self
            .fixed()
            .into_iter()
            .filter_map(|(id, m)| m.clone().map(|m| named(id, m)))
            .collect();
        out.extend(
            self.by_group
                .into_iter()
                .filter_map(|(g, m)| Some(named(C2cFigures::group_id(g)?, m))),
        );
        out
    }

    fn from_metrics(metrics: &[Metric]) -> Self {
        let find = |id: FigureId| metrics.iter().find(|m| m.name == id.metric).cloned();
        C2cFigures {
            c2c_latency_ns: find(C2cFigures::C2C_LATENCY_NS),
            c2c_latency_min_ns: find(C2cFigures::C2C_LATENCY_MIN_NS),
            c2c_latency_max_ns: find(C2cFigures::C2C_LATENCY_MAX_NS),
            c2c_latency_cycles: find(C2cFigures::C2C_LATENCY_CYCLES),
            c2c_load_store_latency_ns: find(C2cFigures::C2C_LOAD_STORE_LATENCY_NS),
            by_group: GROUPS
                .iter()
                .filter_map(|&(g, id)| Some((g, find(id)?)))
                .collect(),
        }
    }

    fn ids(&self) -> Vec<FigureId> {
        let mut ids: Vec<FigureId> = self
            .fixed()
            .into_iter()
            .filter(|(_, m)| m.is_some())
            .map(|(id, _)| id)
            .collect();
        ids.extend(
            self.by_group
                .keys()
                .filter_map(|&g| C2cFigures::group_id(g)),
        );
        ids
    }
}

/// Two CPUs of a measured pair, `a` having started the exchange; in files `cpuA-cpuB`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CpuPair {
    /// The CPU that started the exchange.
    pub a: usize,
    /// The other CPU.
    pub b: usize,
}

impl std::fmt::Display for CpuPair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "cpu{}-cpu{}", self.a, self.b)
    }
}

impl std::str::FromStr for CpuPair {
    type Err = String;
    fn from_str(s: &str) -> Result<CpuPair, String> {
        let bad = || format!("`{s}` is not a CPU pair (`cpu0-cpu1`)");
        let (a, b) = s.split_once('-').ok_or_else(bad)?;
        let cpu = |x: &str| x.strip_prefix("cpu")?.parse().ok();
        Ok(CpuPair {
            a: cpu(a).ok_or_else(bad)?,
            b: cpu(b).ok_or_else(bad)?,
        })
    }
}

impl Serialize for CpuPair {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for CpuPair {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<CpuPair, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// How the c2c probe ran (`params`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct C2cParams {
    /// The CPUs whose pairs were candidates.
    pub cpus: Vec<usize>,
    /// Samples per pair and protocol.
    pub samples: usize,
    /// Handoffs timed per sample.
    pub handoffs_per_sample: u64,
    /// Handoffs before the first sample.
    pub warmup_handoffs: u64,
    /// Time budget of the sweep, s (pairs are sampled when all would not fit).
    pub budget_s: f64,
}

/// A pair whose samples split between two vCPU placements (the host moved a vCPU).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Placement {
    /// Median of the placement most samples saw, ns.
    pub main_ns: f64,
    /// Median of the other placement, ns.
    pub other_ns: f64,
    /// Share of the samples the other placement saw, 0-1.
    pub other_share: f64,
}

/// What took effect in the c2c probe (`effects`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct C2cEffects {
    /// Whether any pair saw its vCPU placement change. Files from builds before it are not
    /// analysed again: those builds took every pair's samples whole (no placement split) and
    /// gave no interval, and their saved figures stand.
    pub vcpu_placement_changed: bool,
    /// The pairs whose placement changed, with both placements' figures.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub placements: BTreeMap<CpuPair, Placement>,
    /// The CPUs the threads were pinned to.
    #[serde(default)]
    pub pinned_cpus: Vec<usize>,
    /// Pairs of the CPUs in all.
    #[serde(default)]
    pub pairs_total: usize,
    /// Pairs measured.
    #[serde(default)]
    pub pairs_measured: usize,
    /// Whether fewer pairs were measured than there are (the budget did not fit them all).
    #[serde(default)]
    pub pairs_sampled: bool,
    /// Whether the sweep stopped at twice its budget.
    #[serde(default)]
    pub budget_exhausted: bool,
    /// Each measured pair's topology group.
    #[serde(default)]
    pub pair_groups: BTreeMap<CpuPair, PairGroup>,
    /// The first CPU's core clock, GHz, when it could be estimated.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub core_clock_ghz: Option<f64>,
}

/// One pair's samples, ns per one-way handoff.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PairSamples {
    /// By `lock cmpxchg` (`c2c_cas_ns.cpuA-cpuB`).
    pub cas_ns: Vec<f64>,
    /// By a load-then-store flag (`c2c_load_store_ns.cpuA-cpuB`).
    pub load_store_ns: Vec<f64>,
}

/// The c2c probe's samples, per pair (in files `c2c_cas_ns.cpu0-cpu1` and
/// `c2c_load_store_ns.cpu0-cpu1`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct C2cSamples {
    /// Each measured pair's samples.
    pub pairs: BTreeMap<CpuPair, PairSamples>,
}

const CAS_SAMPLES: &str = "c2c_cas_ns.";
const LOAD_STORE_SAMPLES: &str = "c2c_load_store_ns.";

impl Serialize for C2cSamples {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(2 * self.pairs.len()))?;
        for (pair, p) in &self.pairs {
            map.serialize_entry(&format!("{CAS_SAMPLES}{pair}"), &p.cas_ns)?;
            map.serialize_entry(&format!("{LOAD_STORE_SAMPLES}{pair}"), &p.load_store_ns)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for C2cSamples {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<C2cSamples, D::Error> {
        let all = BTreeMap::<String, Vec<f64>>::deserialize(d)?;
        let mut pairs: BTreeMap<CpuPair, PairSamples> = BTreeMap::new();
        for (key, values) in all {
            let (pair, cas) = if let Some(p) = key.strip_prefix(CAS_SAMPLES) {
                (p, true)
            } else if let Some(p) = key.strip_prefix(LOAD_STORE_SAMPLES) {
                (p, false)
            } else {
                continue;
            };
            let pair: CpuPair = pair.parse().map_err(serde::de::Error::custom)?;
            let e = pairs.entry(pair).or_default();
            if cas {
                e.cas_ns = values;
            } else {
                e.load_store_ns = values;
            }
        }
        Ok(C2cSamples { pairs })
    }
}

/// The c2c probe's raw record.
pub type C2cRaw = ProbeRaw<C2cParams, C2cEffects, C2cSamples>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_and_samples_keep_the_names_saved_files_carry() {
        let pair: CpuPair = "cpu0-cpu12".parse().unwrap();
        assert_eq!(pair, CpuPair { a: 0, b: 12 });
        assert_eq!(pair.to_string(), "cpu0-cpu12");
        let mut s = C2cSamples::default();
        s.pairs.insert(
            pair,
            PairSamples {
                cas_ns: vec![1.0],
                load_store_ns: vec![2.0],
            },
        );
        let v = serde_json::to_value(&s).unwrap();
        assert_eq!(v["c2c_cas_ns.cpu0-cpu12"], serde_json::json!([1.0]));
        assert_eq!(v["c2c_load_store_ns.cpu0-cpu12"], serde_json::json!([2.0]));
        let back: C2cSamples = serde_json::from_value(v).unwrap();
        assert_eq!(back, s);
        assert_eq!(
            C2cFigures::group_id(PairGroup::OtherNumaNode)
                .unwrap()
                .metric,
            "c2c_other_numa_node_ns"
        );
        assert_eq!(C2cFigures::group_id(PairGroup::Unknown), None);
    }
}
