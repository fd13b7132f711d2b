//! False and true sharing. Threads that write different variables on one cache line make the
//! line move between their cores on every write. The seed (Netflix, "Seeing through hardware
//! counters") found it in the JVM: `_secondary_super_cache` next to `_secondary_supers`,
//! written from every thread, shared a line 7 times in 8; those nodes ran at 3x the CPI, and
//! a 48-vCPU instance gave 25% more throughput instead of 3x. Padding fixed it; then the
//! shared field itself (true sharing) was the limit, and only not writing it gave 3.5x.

use super::{Hazard, Inputs};
use crate::format::human_ns;
use crate::reference::NETFLIX_TRUE_SHARING_FIX_SPEEDUP;
use crate::schema::{Level, Verdict};

/// At or above this packed/padded time ratio, false sharing costs what the seed's slow nodes
/// paid (3x the CPI).
pub const HAZARD_RATIO: f64 = 3.0;
/// From here, a shared line measurably slows independent writers.
pub const NOTICE_RATIO: f64 = 1.5;

/// The false-sharing rule.
pub struct FalseSharing;

impl Hazard for FalseSharing {
    fn id(&self) -> &'static str {
        "false_sharing"
    }

    fn title(&self) -> &'static str {
        "False sharing"
    }

    fn reads(&self) -> &'static [(&'static str, &'static str)] {
        &[("sharing", "false_sharing_ratio")]
    }

    fn quotes(&self) -> &'static [(&'static str, &'static str)] {
        &[
            ("sharing", "packed_increment_ns"),
            ("sharing", "padded_increment_ns"),
            ("sharing", "true_sharing_ratio"),
            ("sharing", "shared_atomic_increment_ns"),
            ("sharing", "private_atomic_increment_ns"),
        ]
    }

    fn hurts(&self) -> &'static [&'static str] {
        &[
            "fields written by different threads on one cache line (counters, flags, runtime \
             metadata such as the JVM's secondary-super cache)",
            "counters and caches written from every core (true sharing)",
        ]
    }

    fn verdict(&self, fp: &Inputs<'_>) -> Option<Verdict> {
        let ratio = fp.metric("sharing", "false_sharing_ratio")?.value;
        let packed = fp.metric("sharing", "packed_increment_ns").map(|m| m.value);
        let padded = fp.metric("sharing", "padded_increment_ns").map(|m| m.value);
        let true_ratio = fp.metric("sharing", "true_sharing_ratio").map(|m| m.value);
        let shared = fp
            .metric("sharing", "shared_atomic_increment_ns")
            .map(|m| m.value);
        let private = fp
            .metric("sharing", "private_atomic_increment_ns")
            .map(|m| m.value);
        let threads = fp
            .param("sharing", "threads")
            .and_then(|t| t.as_u64())
            .unwrap_or(2);
        let (level, borderline) = super::level_near_thresholds(
            fp,
            ratio,
            fp.metric("sharing", "false_sharing_ratio")
                .and_then(|m| m.interval.as_ref()),
            Level::Ok,
            &[(NOTICE_RATIO, Level::Notice), (HAZARD_RATIO, Level::Hazard)],
        );
        let mut figure = super::with_interval(
            format!("packed {ratio:.1}x padded"),
            fp.metric("sharing", "false_sharing_ratio"),
        );
        if let Some(t) = true_ratio {
            figure.push_str(&format!("; one shared atomic {t:.1}x private"));
        }
        let mut explanation = format!(
            "{threads} threads each updating its own counter run {ratio:.1}x slower when the \
             counters share a 64-byte line"
        );
        if let (Some(a), Some(b)) = (packed, padded) {
            explanation.push_str(&format!(
                " ({} per update) than 128 bytes apart ({})",
                human_ns(a),
                human_ns(b)
            ));
        }
        explanation.push_str(
            ". This is the Netflix JVM case: two fields written from every thread shared a \
             line 7 times in 8, those nodes ran at 3x the CPI, and a 48-vCPU instance gave \
             25% more throughput instead of 3x. Pad fields written by different threads to \
             128 bytes (the adjacent-line prefetcher pairs lines): @Contended, alignas(128), \
             crossbeam's CachePadded.",
        );
        if let (Some(t), Some(s), Some(p)) = (true_ratio, shared, private) {
            explanation.push_str(&format!(
                " True sharing: all threads incrementing one atomic take {} per increment \
                 against {} on per-thread counters ({t:.1}x); padding cannot fix that, only \
                 not writing the shared value can (per-thread counters summed on read; the \
                 Netflix case's second fix stopped writing the shared cache for \
                 {NETFLIX_TRUE_SHARING_FIX_SPEEDUP}x).",
                human_ns(s),
                human_ns(p)
            ));
        }
        let summary =
            format!("per-thread counters on one line run {ratio:.1}x slower; pad to 128 bytes");
        Some(Verdict {
            hazard: self.id().into(),
            title: self.title().into(),
            summary,
            level,
            figure,
            reference: format!(
                "the Netflix JVM case: false sharing tripled CPI; padding, then not writing \
                 the shared field, gave {NETFLIX_TRUE_SHARING_FIX_SPEEDUP}x throughput"
            ),
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

    fn fp(metrics: &[(&str, f64)]) -> Fingerprint {
        let mut fp = crate::schema::test_support::empty_fingerprint();
        let mut p = ProbeResult::new("sharing", Status::Ok);
        p.params.insert("threads".into(), 2.into());
        for (n, v) in metrics {
            p.metrics.push(Metric::derived(n, *v, "ns", Better::Lower));
        }
        fp.probes.push(p);
        fp
    }

    #[test]
    fn the_zen4_guest_figures() {
        let v = FalseSharing
            .judge(&fp(&[
                ("false_sharing_ratio", 3.44),
                ("packed_increment_ns", 0.93),
                ("padded_increment_ns", 0.27),
                ("true_sharing_ratio", 4.53),
                ("shared_atomic_increment_ns", 9.25),
                ("private_atomic_increment_ns", 2.04),
            ]))
            .unwrap();
        // 3.44x on a guest is within the 25% guard band of the 3x line: borderline.
        assert_eq!(
            (v.level, v.borderline),
            (Level::Notice, Some(Level::Hazard))
        );
        assert_eq!(
            v.figure,
            "packed 3.4x padded; one shared atomic 4.5x private"
        );
        assert!(v.explanation.starts_with("2 threads"), "{}", v.explanation);
        assert!(
            v.explanation
                .contains("(0.9 ns per update) than 128 bytes apart (0.3 ns)"),
            "{}",
            v.explanation
        );
        assert!(
            v.explanation
                .contains("9.2 ns per increment against 2.0 ns"),
            "{}",
            v.explanation
        );
    }

    #[test]
    fn thresholds() {
        let level = |r| {
            FalseSharing
                .judge(&fp(&[("false_sharing_ratio", r)]))
                .unwrap()
                .level
        };
        // Clear of the 10% guard band around 1.5x and 3x.
        // On a guest (the test fingerprint's), the band is 25%.
        assert_eq!(level(1.1), Level::Ok);
        assert_eq!(level(2.0), Level::Notice);
        assert_eq!(level(4.0), Level::Hazard);
        // At a threshold: borderline, judged at the lower level.
        assert_eq!(level(3.0), Level::Notice);
    }

    #[test]
    fn no_sharing_result_means_no_verdict() {
        let f = crate::schema::test_support::empty_fingerprint();
        assert_eq!(FalseSharing.judge(&f), None);
    }
}
