//! Cross-core latency. Every lock, queue slot or reference count handed from one core to
//! another moves its cache line, and the move costs what the `c2c` probe measures. Published
//! core-to-core tests (chipsandcheese and AnandTech, the design notes' reference figures) put
//! Zen 4 EPYC at ~9 ns between SMT siblings, ~22 ns inside a CCX, ~100 ns between CCDs and
//! ~200 ns between sockets; a monolithic client die sits at 20-40 ns.

use super::{Hazard, Inputs};
use crate::machine::topology::PairGroup;
use crate::names::probe;
use crate::schema::figures::FigureId;
use crate::schema::probes::c2c::{C2cFigures as F, C2cRaw};
use crate::schema::{Level, Verdict};
use crate::words::verdicts::cross_core::{self as words, Facts, Group, Move};

/// At or above this one-way latency, handoffs cost what a cross-socket hop costs (~200 ns on
/// Zen 4 EPYC).
pub const HAZARD_NS: f64 = 150.0;
/// At or above this, handoffs leave the shared cache (~100 ns between Zen 4 CCDs, against
/// ~22 ns inside a CCX).
pub const NOTICE_NS: f64 = 60.0;

/// The cross-core latency rule.
pub struct CrossCoreLatency;

impl Hazard for CrossCoreLatency {
    fn id(&self) -> &'static str {
        "cross_core_latency"
    }

    fn title(&self) -> &'static str {
        words::TITLE
    }

    fn reads(&self) -> &'static [FigureId] {
        &[F::C2C_LATENCY_NS, F::C2C_LATENCY_CYCLES]
    }

    fn quotes(&self) -> &'static [FigureId] {
        &[
            F::C2C_LOAD_STORE_LATENCY_NS,
            F::C2C_SMT_SIBLING_NS,
            F::C2C_SHARED_L3_NS,
            F::C2C_OTHER_L3_NS,
            F::C2C_OTHER_NUMA_NODE_NS,
        ]
    }

    fn hurts(&self) -> &'static [&'static str] {
        words::HURTS
    }

    fn verdict(&self, fp: &Inputs<'_>) -> Option<Verdict> {
        let f = fp.figures::<F>()?;
        let latency = f.c2c_latency_ns.as_ref()?;
        let ns = latency.value;
        let (level, borderline) = super::level_near_thresholds(
            fp,
            ns,
            latency.interval.as_ref(),
            Level::Ok,
            &[(NOTICE_NS, Level::Notice), (HAZARD_NS, Level::Hazard)],
        );
        let groups = groups(&f);
        let only_shared_l3 = groups.len() == 1 && groups[0].0 == Group::SharedL3;
        let facts = Facts {
            latency_ns: ns,
            latency_metric: latency,
            latency_cycles: f.c2c_latency_cycles.as_ref().map(|m| m.value),
            flag_ns: f.c2c_load_store_latency_ns.as_ref().map(|m| m.value),
            hidden_topology: fp.machine.hypervisor.is_some() && only_shared_l3 && ns >= NOTICE_NS,
            groups,
            moves: moves(fp),
        };
        Some(Verdict {
            hazard: self.id().into(),
            title: self.title().into(),
            summary: words::summary(&facts),
            level,
            figure: words::figure(&facts),
            reference: words::reference(),
            explanation: words::explanation(&facts),
            borderline,
        })
    }
}

/// The topology groups the probe timed, with their one-way latency.
fn groups(f: &F) -> Vec<(Group, f64)> {
    f.by_group
        .iter()
        .filter_map(|(g, m)| {
            let group = match g {
                PairGroup::SmtSibling => Group::SmtSiblings,
                PairGroup::SharedL3 => Group::SharedL3,
                PairGroup::OtherL3 => Group::OtherL3,
                PairGroup::OtherNumaNode => Group::OtherNumaNode,
                PairGroup::Unknown => return None,
            };
            Some((group, m.value))
        })
        .collect()
}

/// The pairs whose placement the host changed during the run (the probe's `placements`).
fn moves(fp: &Inputs<'_>) -> Vec<Move> {
    fp.raw::<C2cRaw>(probe::C2C)
        .map(|raw| {
            raw.effects
                .placements
                .iter()
                .map(|(pair, p)| Move {
                    pair: pair.to_string(),
                    other_ns: p.other_ns,
                    other_share: p.other_share,
                })
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Fingerprint;
    use crate::schema::{Better, Metric, ProbeResult, Status};

    fn fp_with(metrics: &[(&str, f64)]) -> Fingerprint {
        let mut fp = crate::schema::test_support::empty_fingerprint();
        let mut p = ProbeResult::new("c2c", Status::Ok);
        for (n, v) in metrics {
            p.metrics.push(Metric::derived(n, *v, "ns", Better::Lower));
        }
        fp.probes.push(p);
        fp
    }

    #[test]
    fn this_guest_is_a_notice_and_the_hidden_topology_is_named() {
        // The Zen 4 KVM guest: 106 ns between two vCPUs that sysfs puts on one L3.
        let v = CrossCoreLatency
            .judge(&fp_with(&[
                ("c2c_latency_ns", 106.0),
                ("c2c_shared_l3_ns", 106.0),
                ("c2c_load_store_latency_ns", 250.0),
            ]))
            .unwrap();
        assert_eq!(v.level, Level::Notice);
        assert!(
            v.explanation.contains("212.0 ns per round"),
            "{}",
            v.explanation
        );
        assert!(v.explanation.contains("4.7 million"), "{}", v.explanation);
        assert!(
            v.explanation.contains("cannot see apart"),
            "{}",
            v.explanation
        );
        assert!(
            v.explanation.contains("250.0 ns per direction"),
            "{}",
            v.explanation
        );
    }

    #[test]
    fn a_single_ccx_is_ok_and_a_cross_socket_median_is_a_hazard() {
        let ok = CrossCoreLatency
            .judge(&fp_with(&[
                ("c2c_latency_ns", 22.0),
                ("c2c_shared_l3_ns", 22.0),
            ]))
            .unwrap();
        assert_eq!(ok.level, Level::Ok);
        assert!(!ok.explanation.contains("cannot see apart"));
        let far = CrossCoreLatency
            .judge(&fp_with(&[
                ("c2c_latency_ns", 190.0),
                ("c2c_shared_l3_ns", 22.0),
                ("c2c_other_numa_node_ns", 200.0),
            ]))
            .unwrap();
        assert_eq!(far.level, Level::Hazard);
        assert!(
            far.explanation.contains("cores sharing an L3 22.0 ns"),
            "{}",
            far.explanation
        );
        assert!(
            far.explanation.contains("different NUMA nodes 200.0 ns"),
            "{}",
            far.explanation
        );
    }

    #[test]
    fn no_c2c_result_means_no_verdict() {
        let fp = crate::schema::test_support::empty_fingerprint();
        assert_eq!(CrossCoreLatency.judge(&fp), None);
    }

    #[test]
    fn a_vcpu_move_during_the_run_is_said_with_both_placements() {
        use crate::schema::figures::RawRecord;
        use crate::schema::probes::c2c::{C2cParams, CpuPair, Placement};
        let mut fp = fp_with(&[("c2c_latency_ns", 26.0)]);
        let mut raw = C2cRaw {
            params: C2cParams {
                cpus: vec![0, 1],
                ..C2cParams::default()
            },
            ..C2cRaw::default()
        };
        raw.effects.placements.insert(
            CpuPair { a: 0, b: 1 },
            Placement {
                main_ns: 26.0,
                other_ns: 92.0,
                other_share: 0.33,
            },
        );
        raw.write_into(&mut fp.probes[0]);
        let v = CrossCoreLatency.judge(&fp).unwrap();
        assert_eq!(v.level, Level::Ok);
        assert!(
            v.explanation
                .contains("The host moved the vCPUs during the run (cpu0-cpu1 read 92.0 ns in 33%"),
            "{}",
            v.explanation
        );
    }
}
