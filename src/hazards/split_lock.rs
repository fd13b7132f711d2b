//! Split locks: an atomic on a value that straddles two cache lines takes a bus lock. The
//! split-lock seed (chipsandcheese, "Investigating Split Locks on x86-64") measured 500 ns
//! core to core on Zen 5 and ~7 us on Arrow Lake and Alder Lake P-cores, against tens of ns
//! aligned, and up to 10x slower L2, L3 and DRAM accesses on OTHER cores (Zen 2, Zen 5).
//! Linux (Documentation/admin-guide/kernel-parameters.txt, `split_lock_detect`; the
//! `split_lock_mitigate` sysctl) traps them where the CPU can: a warning and a 10 ms sleep per
//! split lock by default, or SIGBUS with `fatal`.
//!
//! The verdict reads both: the kernel's handling from the machine facts (a verdict even when
//! the probe could not run, since the kernel state alone decides what a program meets), and
//! the measured cost when the probes ran.

use super::{Hazard, Inputs};
use crate::format::human_ns;
use crate::schema::{Level, Verdict};

/// At or above this split-lock latency, split locks cost what the seed called "bad to
/// horrifying" (Zen 5 ~500 ns; Arrow Lake ~7 us): a hazard from 1 us.
pub const HAZARD_NS: f64 = 1000.0;
/// From here, a split lock costs several aligned handoffs.
pub const NOTICE_NS: f64 = 300.0;
/// At or above this many aligned handoffs per split lock, a hazard (~10x on the Zen 4 guest).
pub const HAZARD_RATIO: f64 = 8.0;
/// A neighbour's DRAM latency rising this much under split locks is a hazard (up to 10x in
/// the seed on Zen 2/5; about 2x on Arrow Lake).
pub const HAZARD_NEIGHBOUR_LATENCY_RATIO: f64 = 2.0;

/// The split-lock rule.
pub struct SplitLock;

/// Kernel modes that stop or slow a split-locking program.
impl Hazard for SplitLock {
    fn id(&self) -> &'static str {
        "split_lock"
    }

    fn title(&self) -> &'static str {
        "Split locks"
    }

    fn reads(&self) -> &'static [(&'static str, &'static str)] {
        &[
            ("split-lock", "split_lock_ratio"),
            ("split-lock", "split_lock_latency_ns"),
            ("split-lock", "split_lock_trapped_ns"),
            ("split-lock-neighbour", "split_lock_neighbour_latency_ratio"),
            (
                "split-lock-neighbour",
                "split_lock_neighbour_bandwidth_ratio",
            ),
        ]
    }

    fn quotes(&self) -> &'static [(&'static str, &'static str)] {
        &[("split-lock", "aligned_lock_latency_ns")]
    }

    fn hurts(&self) -> &'static [&'static str] {
        &[
            "atomics on misaligned or packed fields (packed structs, unaligned casts into buffers)",
            "programs that trip kernel split-lock detection (10 ms sleep per split lock, or SIGBUS)",
            "every other tenant of the host while split locks run (noisy neighbour)",
        ]
    }

    fn verdict(&self, fp: &Inputs<'_>) -> Option<Verdict> {
        let state = &fp.machine.split_lock;
        let mode = state.effective;
        let measured_in_child = fp
            .effect("split-lock", "split_lock_measured")
            .and_then(|v| v.as_str())
            == Some("kernel_mitigation");
        // Where the kernel traps, the probe times one thread's trapped locks in a child
        // (`split_lock_trapped_ns`); fingerprints from before that name carried the same
        // figure as `split_lock_latency_ns` with `split_lock_measured: kernel_mitigation`.
        let split = fp
            .metric("split-lock", "split_lock_latency_ns")
            .or_else(|| fp.metric("split-lock", "split_lock_trapped_ns"))
            .map(|m| m.value);
        let aligned = fp
            .metric("split-lock", "aligned_lock_latency_ns")
            .map(|m| m.value);
        let ratio = fp.metric("split-lock", "split_lock_ratio").map(|m| m.value);
        let n_lat = fp
            .metric("split-lock-neighbour", "split_lock_neighbour_latency_ratio")
            .map(|m| m.value);
        let n_bw = fp
            .metric(
                "split-lock-neighbour",
                "split_lock_neighbour_bandwidth_ratio",
            )
            .map(|m| m.value);
        if split.is_none() && !mode.penalises() {
            return None;
        }

        let level = if mode.penalises() {
            Level::Hazard
        } else {
            let hazard = split.is_some_and(|s| s >= HAZARD_NS)
                || ratio.is_some_and(|r| r >= HAZARD_RATIO)
                || n_lat.is_some_and(|r| r >= HAZARD_NEIGHBOUR_LATENCY_RATIO);
            let notice = split.is_some_and(|s| s >= NOTICE_NS) || ratio.is_some_and(|r| r >= 3.0);
            if hazard {
                Level::Hazard
            } else if notice {
                Level::Notice
            } else {
                Level::Ok
            }
        };

        let split_metric = fp
            .metric("split-lock", "split_lock_latency_ns")
            .or_else(|| fp.metric("split-lock", "split_lock_trapped_ns"));
        let mut figure = match (split, ratio) {
            (Some(s), Some(r)) => format!(
                "{} = {r:.1}x aligned",
                super::with_interval(human_ns(s), split_metric)
            ),
            (Some(s), None) => super::with_interval(human_ns(s), split_metric),
            (None, _) => format!("kernel: {mode}"),
        };
        if measured_in_child && split.is_some() {
            figure.push_str(&format!(" (kernel {mode})"));
        }
        if let Some(l) = n_lat {
            figure.push_str(&format!("; neighbour DRAM latency {l:.1}x"));
        }

        let mut explanation = String::from(
            "An atomic on a value that straddles two cache lines (a field of a packed struct, \
             an unaligned cast into a byte buffer) cannot lock one line and takes a bus lock.",
        );
        match (split, aligned, measured_in_child) {
            (Some(s), Some(a), false) => explanation.push_str(&format!(
                " Here one costs {} core to core, {:.1}x an aligned one ({}).",
                human_ns(s),
                s / a,
                human_ns(a)
            )),
            (Some(s), _, true) => explanation.push_str(&format!(
                " Here the kernel traps them: a program pays {} per split lock (measured in a \
                 child process), the kernel's mitigation rather than the hardware's cost.",
                human_ns(s)
            )),
            _ => {}
        }
        if let (Some(l), Some(b)) = (n_lat, n_bw) {
            explanation.push_str(&format!(
                " While one core loops split locks, another core's DRAM accesses take {l:.1}x \
                 as long and its streaming reads get {:.0}% of their bandwidth: split locks \
                 slow every tenant of the host, not only the program that issues them.",
                b * 100.0
            ));
        }
        explanation.push_str(&format!(" Kernel: {}.", state.summary));
        if !mode.kernel_acts() {
            explanation.push_str(
                " On a host whose kernel traps them (the Linux default on CPUs that detect \
                 split locks), each one costs a 10 ms sleep instead, or kills the process \
                 with split_lock_detect=fatal.",
            );
        }
        explanation.push_str(
            " Fix: align atomics to their size (alignas, #[repr(align)]) and never update \
             fields of packed structs atomically.",
        );
        let summary = match (split, measured_in_child) {
            (Some(s), false) => format!(
                "an atomic across two cache lines costs {}{}",
                human_ns(s),
                if n_lat.is_some() {
                    " and slows the other cores"
                } else {
                    ""
                }
            ),
            (Some(s), true) => format!("the kernel traps split locks: {} each", human_ns(s)),
            (None, _) => format!("the kernel traps split locks ({mode})"),
        };
        Some(Verdict {
            hazard: self.id().into(),
            title: self.title().into(),
            summary,
            level,
            figure,
            reference: "Zen 5 ~500 ns, Arrow Lake/Alder Lake P ~7 us core to core; up to 10x \
                        slower L2/L3/DRAM on other cores (chipsandcheese); Linux: 10 ms sleep \
                        per trapped split lock (split_lock_mitigate=1)"
                .into(),
            explanation,
            borderline: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::kernel::split_lock_state;
    use crate::schema::Fingerprint;
    use crate::schema::{Better, Metric, ProbeResult, Status};

    fn fp(metrics: &[(&str, &str, f64)], measured: Option<&str>) -> Fingerprint {
        let mut fp = crate::schema::test_support::empty_fingerprint();
        for probe in ["split-lock", "split-lock-neighbour"] {
            let mut p = ProbeResult::new(probe, Status::Ok);
            for (pn, n, v) in metrics {
                if *pn == probe {
                    p.metrics.push(Metric::derived(n, *v, "ns", Better::Lower));
                }
            }
            if let Some(m) = measured {
                p.effects.insert("split_lock_measured".into(), m.into());
            }
            fp.probes.push(p);
        }
        fp
    }

    #[test]
    fn the_zen4_guest_is_a_hazard_in_its_own_numbers() {
        let v = SplitLock
            .judge(&fp(
                &[
                    ("split-lock", "split_lock_latency_ns", 1090.0),
                    ("split-lock", "aligned_lock_latency_ns", 98.0),
                    ("split-lock", "split_lock_ratio", 11.1),
                    (
                        "split-lock-neighbour",
                        "split_lock_neighbour_latency_ratio",
                        10.8,
                    ),
                    (
                        "split-lock-neighbour",
                        "split_lock_neighbour_bandwidth_ratio",
                        0.06,
                    ),
                ],
                Some("hardware"),
            ))
            .unwrap();
        assert_eq!(v.level, Level::Hazard);
        assert_eq!(
            v.figure,
            "1.1 us = 11.1x aligned; neighbour DRAM latency 10.8x"
        );
        assert!(
            v.explanation.contains("11.1x an aligned one (98.0 ns)"),
            "{}",
            v.explanation
        );
        assert!(v.explanation.contains("10.8x"), "{}", v.explanation);
        assert!(
            v.explanation.contains("6% of their bandwidth"),
            "{}",
            v.explanation
        );
        assert!(
            v.explanation.contains("10 ms sleep instead"),
            "{}",
            v.explanation
        );
    }

    #[test]
    fn a_cheap_split_lock_is_ok() {
        // Piledriver-like: the seed's best case.
        let v = SplitLock
            .judge(&fp(
                &[
                    ("split-lock", "split_lock_latency_ns", 120.0),
                    ("split-lock", "aligned_lock_latency_ns", 60.0),
                    ("split-lock", "split_lock_ratio", 2.0),
                ],
                Some("hardware"),
            ))
            .unwrap();
        assert_eq!(v.level, Level::Ok);
    }

    #[test]
    fn kernel_sleep_is_a_hazard_and_labelled_as_the_mitigation() {
        let mut f = fp(
            &[
                ("split-lock", "split_lock_trapped_ns", 10.2e6),
                ("split-lock", "aligned_lock_latency_ns", 40.0),
            ],
            Some("kernel_mitigation"),
        );
        f.machine.split_lock = split_lock_state(true, true, None, Some(1));
        let v = SplitLock.judge(&f).unwrap();
        assert_eq!(v.level, Level::Hazard);
        assert!(
            v.figure.contains("10.2 ms") && v.figure.contains("(kernel warn+sleep)"),
            "{}",
            v.figure
        );
        assert!(
            v.explanation.contains("kernel's mitigation"),
            "{}",
            v.explanation
        );
    }

    #[test]
    fn fatal_mode_gives_a_verdict_even_without_measurements() {
        let mut f = crate::schema::test_support::empty_fingerprint();
        f.machine.split_lock = split_lock_state(true, true, Some("fatal".into()), None);
        let v = SplitLock.judge(&f).unwrap();
        assert_eq!(v.level, Level::Hazard);
        assert_eq!(v.figure, "kernel: fatal");
        assert!(v.explanation.contains("SIGBUS"), "{}", v.explanation);
    }

    #[test]
    fn no_measurement_and_no_trapping_means_no_verdict() {
        let f = crate::schema::test_support::empty_fingerprint();
        assert_eq!(SplitLock.judge(&f), None);
    }
}
