//! The 4 KiB page penalty. A random load from memory larger than the TLB reach pays a page
//! walk on top of the DRAM access. Natively a walk is up to 4 dependent memory references,
//! mostly cached; inside a VM with nested paging (EPT/NPT) it is two-dimensional, up to 24
//! references through guest and host tables (Bhargava et al., "Accelerating two-dimensional
//! page walks for virtualized systems", ASPLOS 2008), so 4 KiB pages cost far more there. The
//! seed (`p4-large-pages-prefetch.ru.txt`) shows the TLB reach (64 entries x 4 KiB = 256 KiB
//! on Pentium 4) shaping the latency curve. The mem-latency probe measures the same random
//! chase over the same size on 4 KiB and on huge pages: their ratio is the penalty.

use super::{Hazard, Inputs};
use crate::format::human_bytes;
use crate::schema::{Level, Verdict};

/// At or above this ratio of DRAM latency on 4 KiB over huge pages, page walks add half a DRAM
/// access to every random load: a workload bound by such loads loses a third of its speed to
/// 4 KiB pages.
pub const HAZARD_RATIO: f64 = 1.5;
/// At or above this, walks are a visible cost: 20% is four times the 5% spread that marks a
/// noisy figure ([`crate::measure::stats::WIDE_RELATIVE_SPREAD`]).
pub const NOTICE_RATIO: f64 = 1.2;

/// The 4 KiB page penalty rule.
pub struct SmallPagePenalty;

impl Hazard for SmallPagePenalty {
    fn id(&self) -> &'static str {
        "small_page_penalty"
    }

    fn title(&self) -> &'static str {
        "4 KiB page penalty"
    }

    fn reads(&self) -> &'static [(&'static str, &'static str)] {
        &[("mem-latency", "tlb_penalty_ratio")]
    }

    fn quotes(&self) -> &'static [(&'static str, &'static str)] {
        &[
            ("mem-latency", "dram_latency_4k_ns"),
            ("mem-latency", "dram_latency_ns"),
            ("mem-latency", "tlb_reach_bytes"),
        ]
    }

    fn hurts(&self) -> &'static [&'static str] {
        &[
            "random access over large memory on 4 KiB pages (hash tables, B-trees, graphs, \
             pointer-heavy heaps)",
            "garbage-collected heaps and in-memory databases larger than the TLB reach",
        ]
    }

    fn verdict(&self, fp: &Inputs<'_>) -> Option<Verdict> {
        let ratio = fp.metric("mem-latency", "tlb_penalty_ratio")?.value;
        let small = fp.metric("mem-latency", "dram_latency_4k_ns")?.value;
        let huge = fp.metric("mem-latency", "dram_latency_ns")?.value;
        let reach = fp
            .metric("mem-latency", "tlb_reach_bytes")
            .map(|m| m.value as u64);
        let size = fp
            .effect("mem-latency", "levels")
            .and_then(|l| l.as_array())
            .and_then(|l| l.iter().find(|x| x["name"] == "dram"))
            .and_then(|d| d["at_size_bytes"].as_u64());
        let huge_kind = fp
            .effect("mem-latency", "latency_page_kind")
            .and_then(|k| k.as_str())
            .unwrap_or("huge pages")
            .to_string();
        let (level, borderline) = super::level_near_thresholds(
            fp,
            ratio,
            fp.metric("mem-latency", "tlb_penalty_ratio")
                .and_then(|m| m.interval.as_ref()),
            Level::Ok,
            &[(NOTICE_RATIO, Level::Notice), (HAZARD_RATIO, Level::Hazard)],
        );
        let mut text = format!(
            "Random loads over {} take {small:.0} ns on 4 KiB pages against {huge:.0} ns on \
             {huge_kind} ({ratio:.2}x): page walks add {:.0} ns to each.",
            size.map(human_bytes)
                .unwrap_or_else(|| "a buffer beyond the caches".into()),
            small - huge
        );
        if let Some(reach) = reach {
            text.push_str(&format!(
                " Past {} of memory touched at random, 4 KiB pages start paying page walks \
                 (their TLB reach).",
                human_bytes(reach)
            ));
        }
        if let Some(hv) = &fp.machine.hypervisor {
            text.push_str(&format!(
                " This is a {} guest: with nested paging each 4 KiB TLB miss walks the guest's \
                 and the host's page tables, up to 24 memory references instead of 4, which is \
                 why 4 KiB pages cost so much more in a VM.",
                hv.vendor
            ));
        }
        text.push_str(match level {
            Level::Ok => " Huge pages buy little for random access here.",
            _ => {
                " Hash tables, B-trees, graph walks and large GC heaps pay this on every miss; \
                 huge pages (THP madvise, hugetlbfs) remove most of it."
            }
        });
        let summary = format!(
            "a random DRAM load takes {:.0} ns longer on 4 KiB pages than on huge",
            small - huge
        );
        Some(Verdict {
            hazard: self.id().into(),
            title: self.title().into(),
            summary,
            level,
            figure: format!(
                "{}, {small:.0} vs {huge:.0} ns",
                super::with_interval(
                    format!("{ratio:.2}x"),
                    fp.metric("mem-latency", "tlb_penalty_ratio")
                )
            ),
            reference: format!(
                "notice at {NOTICE_RATIO}x, hazard at {HAZARD_RATIO}x (nested paging: up to \
                 24 references per walk, Bhargava et al. 2008)"
            ),
            explanation: text,
            borderline,
        })
    }
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
            json!([{"name": "dram", "at_size_bytes": 1u64 << 30}]),
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
