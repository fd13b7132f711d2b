//! Cross-core latency. Every lock, queue slot or reference count handed from one core to
//! another moves its cache line, and the move costs what the `c2c` probe measures. Published
//! core-to-core tests (chipsandcheese and AnandTech, the design notes' reference figures) put
//! Zen 4 EPYC at ~9 ns between SMT siblings, ~22 ns inside a CCX, ~100 ns between CCDs and
//! ~200 ns between sockets; a monolithic client die sits at 20-40 ns.

use super::{Hazard, Inputs};
use crate::format::human_ns;
use crate::schema::{Level, Verdict};

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
        "Cross-core latency"
    }

    fn reads(&self) -> &'static [(&'static str, &'static str)] {
        &[("c2c", "c2c_latency_ns"), ("c2c", "c2c_latency_cycles")]
    }

    fn quotes(&self) -> &'static [(&'static str, &'static str)] {
        &[
            ("c2c", "c2c_load_store_latency_ns"),
            ("c2c", "c2c_smt_sibling_ns"),
            ("c2c", "c2c_shared_l3_ns"),
            ("c2c", "c2c_other_l3_ns"),
            ("c2c", "c2c_other_numa_node_ns"),
        ]
    }

    fn hurts(&self) -> &'static [&'static str] {
        &[
            "locks and queues handed between threads on different cores",
            "producer/consumer handoffs and work stealing",
            "reference counts and statistics counters updated from many cores",
        ]
    }

    fn verdict(&self, fp: &Inputs<'_>) -> Option<Verdict> {
        let ns = fp.metric("c2c", "c2c_latency_ns")?.value;
        let cycles = fp.metric("c2c", "c2c_latency_cycles").map(|m| m.value);
        let flag = fp
            .metric("c2c", "c2c_load_store_latency_ns")
            .map(|m| m.value);
        let (level, borderline) = super::level_near_thresholds(
            fp,
            ns,
            fp.metric("c2c", "c2c_latency_ns")
                .and_then(|m| m.interval.as_ref()),
            Level::Ok,
            &[(NOTICE_NS, Level::Notice), (HAZARD_NS, Level::Hazard)],
        );
        let one_way = super::with_interval(
            format!("{ns:.0} ns one way"),
            fp.metric("c2c", "c2c_latency_ns"),
        );
        let figure = match cycles {
            Some(c) => format!("{one_way} = {c:.0} cycles"),
            None => one_way,
        };
        let per_second = 1e3 / (2.0 * ns);
        let mut explanation = format!(
            "Handing a cache line from one core to another takes {} here, so a lock or \
             queue slot passed back and forth between two threads costs at least {} per round \
             trip and tops out near {per_second:.1} million handoffs per second, whatever the \
             code around it does.",
            human_ns(ns),
            human_ns(2.0 * ns)
        );
        let groups: Vec<(&str, f64)> = [
            ("SMT siblings", "c2c_smt_sibling_ns"),
            ("cores sharing an L3", "c2c_shared_l3_ns"),
            ("cores on different L3s", "c2c_other_l3_ns"),
            ("different NUMA nodes", "c2c_other_numa_node_ns"),
        ]
        .into_iter()
        .filter_map(|(label, metric)| Some((label, fp.metric("c2c", metric)?.value)))
        .collect();
        if groups.len() > 1 {
            let parts: Vec<String> = groups
                .iter()
                .map(|(l, v)| format!("{l} {}", human_ns(*v)))
                .collect();
            explanation.push_str(&format!(
                " By topology: {}; threads that talk to each other belong on the closest \
                 group (thread affinity, cpusets).",
                parts.join(", ")
            ));
        }
        let only_shared_l3 = groups.len() == 1 && groups[0].0 == "cores sharing an L3";
        if fp.machine.hypervisor.is_some() && only_shared_l3 && ns >= NOTICE_NS {
            explanation.push_str(&format!(
                " The guest's topology says these vCPUs share an L3, but {} is what a hop \
                 between L3s costs (~100 ns between Zen 4 CCDs, ~22 ns inside one): the \
                 hypervisor placed them on cores the guest cannot see apart.",
                human_ns(ns)
            ));
        }
        let moves: Vec<String> = fp
            .effect("c2c", "placements")
            .and_then(|m| m.as_object())
            .map(|m| {
                m.iter()
                    .filter_map(|(pair, v)| {
                        Some(format!(
                            "{pair} read {} in {:.0}% of its samples",
                            human_ns(v.get("other_ns")?.as_f64()?),
                            v.get("other_share")?.as_f64()? * 100.0
                        ))
                    })
                    .collect()
            })
            .unwrap_or_default();
        if !moves.is_empty() {
            explanation.push_str(&format!(
                " The host moved the vCPUs during the run ({}): the figure is the placement \
                 most samples saw. On a VM, which cores the vCPUs share changes at the host's \
                 will; `check --runs 5` shows how often.",
                moves.join("; ")
            ));
        }
        if let Some(f) = flag {
            explanation.push_str(&format!(
                " A plain flag (store on one line, spin on another) takes {} per direction: \
                 a store's ownership request plus the reader's miss, with no lock involved.",
                human_ns(f)
            ));
        }
        let summary = format!(
            "a lock passed between two cores costs {} a round trip",
            human_ns(2.0 * ns)
        );
        Some(Verdict {
            hazard: self.id().into(),
            title: self.title().into(),
            summary,
            level,
            figure,
            reference: "Zen 4 EPYC: SMT sibling ~9 ns, same CCX ~22 ns, other CCD ~100 ns, \
                        other socket ~200 ns (chipsandcheese, AnandTech core-to-core tests)"
                .into(),
            explanation,
            borderline,
        })
    }
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
        let mut fp = fp_with(&[("c2c_latency_ns", 26.0)]);
        fp.probes[0].effects.insert(
            "placements".into(),
            serde_json::json!({"cpu0-cpu1": {"main_ns": 26.0, "other_ns": 92.0, "other_share": 0.33}}),
        );
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
