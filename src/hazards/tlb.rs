//! The 4 KiB page penalty. A random load from memory larger than the TLB reach pays a page
//! walk on top of the DRAM access. Natively a walk is up to 4 dependent memory references,
//! mostly cached; inside a VM with nested paging (EPT/NPT) it is two-dimensional, up to 24
//! references through guest and host tables (Bhargava et al., "Accelerating two-dimensional
//! page walks for virtualized systems", ASPLOS 2008), so 4 KiB pages cost far more there. The
//! seed (`p4-large-pages-prefetch.ru.txt`) shows the TLB reach (64 entries x 4 KiB = 256 KiB
//! on Pentium 4) shaping the latency curve. The mem-latency probe measures the same random
//! chase over the same size on 4 KiB and on huge pages: their ratio is the penalty, judged at
//! the largest DRAM size the probe reached (the penalty grows with the memory touched), never
//! at a size the caches still serve. Without a DRAM size (the sweep did not reach past the
//! caches, or the probe did not run) there is no verdict, and the probe says why in
//! `effects.not_measured`.

use super::{Hazard, Inputs};
use crate::names::probe;
use crate::schema::figures::FigureId;
use crate::schema::probes::mem_latency::{CurveLevel, MemLatencyDerived, MemLatencyFigures as F};
use crate::schema::{Level, Verdict};
use crate::words::verdicts::tlb::{self as words, Facts};

/// At or above this ratio of DRAM latency on 4 KiB over huge pages, page walks add half a DRAM
/// access to every random load: a workload bound by such loads loses a third of its speed to
/// 4 KiB pages.
pub const HAZARD_RATIO: f64 = 1.5;
/// At or above this, walks are a visible cost: 20% is four times the 5% spread that marks a
/// noisy figure ([`crate::stats::WIDE_RELATIVE_SPREAD`]).
pub const NOTICE_RATIO: f64 = 1.2;

/// The 4 KiB page penalty rule.
pub struct SmallPagePenalty;

impl Hazard for SmallPagePenalty {
    fn id(&self) -> &'static str {
        "small_page_penalty"
    }

    fn title(&self) -> &'static str {
        words::TITLE
    }

    fn reads(&self) -> &'static [FigureId] {
        &[F::TLB_PENALTY_RATIO]
    }

    fn quotes(&self) -> &'static [FigureId] {
        &[
            F::DRAM_LATENCY_4K_NS,
            F::DRAM_LATENCY_HUGE_NS,
            F::DRAM_LATENCY_NS,
            F::TLB_REACH_BYTES,
        ]
    }

    fn hurts(&self) -> &'static [&'static str] {
        words::HURTS
    }

    fn verdict(&self, fp: &Inputs<'_>) -> Option<Verdict> {
        let f = fp.figures::<F>()?;
        let penalty = f.tlb_penalty_ratio.as_ref()?;
        let small = f.dram_latency_4k_ns.as_ref()?.value;
        // Huge pages at the size the penalty is read at; an earlier build read the penalty at
        // the DRAM size itself and saved no figure of its own for it.
        let dram = f.dram_latency_ns.as_ref().map(|m| m.value);
        let huge = f.dram_latency_huge_ns.as_ref().map(|m| m.value).or(dram)?;
        let derived = fp
            .raw::<MemLatencyDerived>(probe::MEM_LATENCY)
            .unwrap_or_default();
        let (level, borderline) = super::level_near_thresholds(
            fp,
            penalty.value,
            penalty.interval.as_ref(),
            Level::Ok,
            &[(NOTICE_RATIO, Level::Notice), (HAZARD_RATIO, Level::Hazard)],
        );
        let facts = Facts {
            level,
            penalty_ratio: penalty.value,
            penalty_metric: penalty,
            small_page_ns: small,
            huge_page_ns: huge,
            huge_kind: derived.latency_page_kind.map(|k| k.name().to_string()),
            // Quoted only where it differs from the huge-page figure by more than 5%.
            dram_ns: dram.filter(|d| (d - huge).abs() > 0.05 * d),
            size_bytes: penalty_size(&derived),
            by_size: derived
                .tlb_penalty_by_size
                .iter()
                .flatten()
                .map(|(s, r)| (*s, *r))
                .collect(),
            tlb_reach_bytes: f.tlb_reach_bytes.as_ref().map(|m| m.value as u64),
            hypervisor: fp
                .machine
                .hypervisor
                .as_ref()
                .map(|hv| hv.vendor.to_string()),
            notice_ratio: NOTICE_RATIO,
            hazard_ratio: HAZARD_RATIO,
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

/// The DRAM size the penalty was read at (older fingerprints: the DRAM level's size).
fn penalty_size(derived: &MemLatencyDerived) -> Option<u64> {
    derived.tlb_penalty_size_bytes.or_else(|| {
        derived
            .levels
            .iter()
            .flatten()
            .find(|l| l.level() == Some(CurveLevel::Dram))
            .map(|d| d.at_size_bytes)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Fingerprint;
    use crate::schema::{Better, Metric, ProbeResult, Status};
    use serde_json::json;

    fn fingerprint(small: f64, huge: f64, vm: bool) -> Fingerprint {
        let mut fp = crate::schema::test_support::empty_fingerprint();
        if !vm {
            fp.machine.hypervisor = None;
        }
        let mut p = ProbeResult::new("mem-latency", Status::Ok);
        p.metrics.extend([
            Metric::derived("dram_latency_ns", huge, "ns", Better::Lower),
            Metric::derived("dram_latency_4k_ns", small, "ns", Better::Lower),
            Metric::derived("tlb_penalty_ratio", small / huge, "ratio", Better::Lower),
            Metric::derived("tlb_reach_bytes", 8388608.0, "bytes", Better::Higher),
        ]);
        p.effects.insert("latency_page_kind".into(), json!("thp"));
        p.effects.insert(
            "levels".into(),
            json!([{"name": "dram", "at_size_bytes": 1u64 << 30, "latency_ns": huge}]),
        );
        fp.probes.push(p);
        fp
    }

    #[test]
    fn a_large_penalty_in_a_vm_is_a_hazard_that_names_nested_paging() {
        let v = SmallPagePenalty
            .judge(&fingerprint(220.0, 110.0, true))
            .unwrap();
        assert_eq!(v.level, Level::Hazard);
        assert!(v.explanation.contains("1 GiB"), "{}", v.explanation);
        assert!(v.explanation.contains("add 110 ns"), "{}", v.explanation);
        assert!(v.explanation.contains("8 MiB"), "{}", v.explanation);
        assert!(v.explanation.contains("KVM guest"), "{}", v.explanation);
        assert!(v.explanation.contains("nested paging"));
    }

    #[test]
    fn bare_metal_does_not_mention_nested_paging() {
        let v = SmallPagePenalty
            .judge(&fingerprint(108.0, 80.0, false))
            .unwrap();
        assert_eq!(v.level, Level::Notice);
        assert!(!v.explanation.contains("nested"), "{}", v.explanation);
    }

    #[test]
    fn a_small_penalty_is_ok() {
        let v = SmallPagePenalty
            .judge(&fingerprint(90.0, 85.0, false))
            .unwrap();
        assert_eq!(v.level, Level::Ok);
    }

    #[test]
    fn without_both_page_sizes_there_is_no_verdict() {
        let mut fp = fingerprint(180.0, 110.0, true);
        fp.probes[0]
            .metrics
            .retain(|m| m.name != "tlb_penalty_ratio");
        assert_eq!(SmallPagePenalty.judge(&fp), None);
    }
}
