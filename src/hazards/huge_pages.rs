//! Huge pages that are off or do not take. Transparent huge pages in `never` mode give every
//! program 4 KiB pages, including those that ask for more (a JVM with
//! `-XX:+UseTransparentHugePages`, glibc malloc with `glibc.malloc.hugetlb=1`); in `madvise`
//! or `always` mode a request can still fail (fragmented memory, defrag off), which nothing
//! reports. The memory probes ask for THP on a 2 MiB-aligned region and read back
//! `AnonHugePages` from /proc/self/smaps; this rule reads what they found, and the THP mode
//! from sysfs.

use super::{Hazard, Inputs};
use crate::machine::ThpEnabled;
use crate::measure::buffer::{HUGE_2M, PageKind, PageKindOutcome};
use crate::names::probe;
use crate::schema::figures::FigureId;
use crate::schema::probes::bandwidth::BandwidthEffects;
use crate::schema::probes::mem_latency::{MemLatencyEffects, MemLatencyFigures};
use crate::schema::{Level, Verdict};
use crate::words::verdicts::huge_pages::{self as words, Facts, Outcome, Request};

/// The huge-pages rule.
pub struct HugePages;

/// What became of the page kinds each memory probe asked for (`effects.page_kinds`):
/// mem-latency's, then bandwidth's.
fn page_kinds(fp: &Inputs<'_>) -> Vec<Vec<PageKindOutcome>> {
    [
        fp.raw::<MemLatencyEffects>(probe::MEM_LATENCY)
            .map(|e| e.page_kinds),
        fp.raw::<BandwidthEffects>(probe::BANDWIDTH)
            .map(|e| e.page_kinds),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// What the probes found for the THP request, from the first memory probe whose THP buffer
/// was made. A buffer that could not be allocated (too little memory left after the other
/// kinds' buffers) says nothing about whether huge pages take, so it is passed over.
fn thp_outcome(fp: &Inputs<'_>) -> Option<Request> {
    page_kinds(fp).into_iter().find_map(|kinds| {
        let thp = kinds
            .into_iter()
            .find(|k| k.requested() == PageKind::Thp && k.took().is_some())?;
        Some(match thp.backing() {
            Some(b) => Request {
                took: b.took,
                huge_fraction: b.huge_fraction,
                mapping_bytes: b.mapping_bytes,
                note: b.note.clone(),
            },
            None => Request {
                took: thp.took()?,
                huge_fraction: 0.0,
                mapping_bytes: 0,
                note: thp.note().to_string(),
            },
        })
    })
}

impl Hazard for HugePages {
    fn id(&self) -> &'static str {
        "huge_pages"
    }

    fn title(&self) -> &'static str {
        words::TITLE
    }

    fn reads(&self) -> &'static [FigureId] {
        // Judged from the THP mode and what the buffers got (effects), not from a figure.
        &[]
    }

    fn quotes(&self) -> &'static [FigureId] {
        &[MemLatencyFigures::TLB_PENALTY_RATIO]
    }

    fn probes(&self) -> Vec<&'static str> {
        vec![probe::MEM_LATENCY]
    }

    fn unjudged_reason(&self, fp: &Inputs<'_>) -> String {
        let unmapped = page_kinds(fp).into_iter().find_map(|kinds| {
            kinds
                .into_iter()
                .find(|k| k.requested() == PageKind::Thp)
                .map(|k| k.note().to_string())
        });
        words::not_tried(unmapped.as_deref())
    }

    fn hurts(&self) -> &'static [&'static str] {
        words::HURTS
    }

    fn verdict(&self, fp: &Inputs<'_>) -> Option<Verdict> {
        let mode = fp.machine.thp.as_ref().map(|t| t.enabled);
        let outcome = match (thp_outcome(fp), mode) {
            (_, Some(ThpEnabled::Never)) => Outcome::Never,
            (Some(request), _) => Outcome::Requested(request),
            // madvise or always, but no buffer tried: no verdict without a measurement.
            (None, _) => return None,
        };
        let level = match &outcome {
            Outcome::Never => Level::Notice,
            Outcome::Requested(r) if !r.took => Level::Hazard,
            Outcome::Requested(_) => Level::Ok,
        };
        let facts = Facts {
            mode,
            outcome,
            huge_page_bytes: HUGE_2M,
            penalty_ratio: fp
                .figures::<MemLatencyFigures>()
                .and_then(|f| f.tlb_penalty_ratio)
                .map(|m| m.value),
        };
        Some(Verdict {
            hazard: self.id().into(),
            title: self.title().into(),
            summary: words::summary(&facts).into(),
            level,
            figure: words::figure(&facts),
            reference: words::reference(&facts),
            explanation: words::explanation(&facts),
            borderline: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Fingerprint;
    use crate::schema::{Better, Metric, ProbeResult, Status};
    use serde_json::json;

    fn fingerprint(mode: &str, thp: Option<serde_json::Value>) -> Fingerprint {
        let mut fp = crate::schema::test_support::empty_fingerprint();
        fp.machine.thp = Some(crate::machine::ThpMode {
            enabled: ThpEnabled::from_word(mode).unwrap(),
            defrag: None,
        });
        if let Some(thp) = thp {
            let mut p = ProbeResult::new("mem-latency", Status::Ok);
            p.effects.insert(
                "page_kinds".into(),
                json!([{"requested": "4k", "took": true}, thp]),
            );
            p.metrics.push(Metric::derived(
                "tlb_penalty_ratio",
                1.5,
                "ratio",
                Better::Lower,
            ));
            fp.probes.push(p);
        }
        fp
    }

    /// A THP buffer's record as the probes write it.
    fn thp_made(
        took: bool,
        huge_fraction: f64,
        mapping_bytes: u64,
        note: &str,
    ) -> serde_json::Value {
        serde_json::to_value(PageKindOutcome::Made {
            backing: crate::measure::PageBacking {
                requested: PageKind::Thp,
                took,
                page_bytes: if took { 2 << 20 } else { 4096 },
                mapping_bytes,
                resident_bytes: mapping_bytes,
                anon_huge_bytes: (huge_fraction * mapping_bytes as f64) as u64,
                kernel_page_bytes: 4096,
                huge_fraction,
                note: note.into(),
            },
            allocated: true,
        })
        .unwrap()
    }

    #[test]
    fn a_request_that_did_not_take_is_a_hazard() {
        let thp = thp_made(false, 0.12, 268435456, "memory fragmented");
        let v = HugePages.judge(&fingerprint("madvise", Some(thp))).unwrap();
        assert_eq!(v.level, Level::Hazard);
        assert!(v.explanation.contains("256 MiB"), "{}", v.explanation);
        assert!(v.explanation.contains("12%"), "{}", v.explanation);
        assert!(v.explanation.contains("1.50x"), "{}", v.explanation);
    }

    #[test]
    fn a_thp_buffer_that_could_not_be_allocated_is_not_a_hazard() {
        // Regression: `--max-size 16G` on a 24 GiB machine left no memory for the THP buffer
        // after the 4 KiB one; the failed allocation read as "THP request not taken (0%)".
        let thp = json!({"requested": "thp", "allocated": false,
            "note": "a 16 GiB buffer is more than the 7 GiB of memory available (MemAvailable)"});
        // Nor is it ok: nothing was measured, and the reason is the buffer's own note.
        let fp = fingerprint("madvise", Some(thp));
        assert_eq!(HugePages.judge(&fp), None);
        assert_eq!(
            HugePages.not_judged(&fp).unwrap().why,
            "the THP buffer could not be tried: a 16 GiB buffer is more than the 7 GiB of \
             memory available (MemAvailable)"
        );
    }

    #[test]
    fn thp_never_is_a_notice_even_without_probes() {
        let v = HugePages.judge(&fingerprint("never", None)).unwrap();
        assert_eq!(v.level, Level::Notice);
        assert_eq!(v.figure, "THP never");
    }

    #[test]
    fn a_request_that_took_is_ok() {
        let thp = thp_made(true, 1.0, 1073741824, "");
        let v = HugePages.judge(&fingerprint("madvise", Some(thp))).unwrap();
        assert_eq!(v.level, Level::Ok);
        assert!(v.explanation.contains("only programs that ask"));
    }

    /// Fingerprints of an earlier version kept `{requested, took, note}` per kind.
    #[test]
    fn a_brief_record_from_an_earlier_version_is_still_judged() {
        let thp = json!({"requested": "thp", "took": false, "note": "THP never"});
        let v = HugePages.judge(&fingerprint("madvise", Some(thp))).unwrap();
        assert_eq!(v.level, Level::Hazard, "{v:?}");
    }

    #[test]
    fn nothing_known_means_no_verdict() {
        let mut fp = crate::schema::test_support::empty_fingerprint();
        fp.machine.thp = None;
        assert_eq!(HugePages.judge(&fp), None);
    }
}
