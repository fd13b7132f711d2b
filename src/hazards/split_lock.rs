//! Split locks: an atomic on a value that straddles two cache lines takes a bus lock. The
//! split-lock case (chipsandcheese, "Investigating Split Locks on x86-64") measured 500 ns
//! core to core on Zen 5 and ~7 us on Arrow Lake and Alder Lake P-cores, against tens of ns
//! aligned, and up to 10x slower L2, L3 and DRAM accesses on OTHER cores (Zen 2, Zen 5).
//! Linux (Documentation/admin-guide/kernel-parameters.txt, `split_lock_detect`; the
//! `split_lock_mitigate` sysctl) traps them where the CPU can: a warning and a 10 ms sleep per
//! split lock by default, or SIGBUS with `fatal`. A host can trap a guest's split locks too,
//! though the guest's kernel never sees them: the Emerald Rapids KVM guest reads ~2 us bus
//! locks between 100-500 us traps, and a neighbour that does not notice.
//!
//! So the verdict first names the mechanism its figures show (`schema::split_lock`: bus lock,
//! trapped by this kernel, trapped by the host, fatal), then says what a program that issues
//! split locks gets (the cost of one, how many a second it can issue) and what its neighbours
//! get, from the measured neighbour ratios: bus locks slow every tenant, traps protect them
//! and punish the program. Fingerprints without per-op times (before issue 19) are judged from
//! the mean: in a guest, 10 us or more per split lock is a trap. A verdict stands even when
//! the probes could not run, where the kernel's state alone decides what a program meets.

use super::{Hazard, Inputs};
use crate::names::probe;
use crate::schema::figures::FigureId;
use crate::schema::probes::split_lock::{
    SplitLockFigures, SplitLockMeasured, SplitLockRecord, SplitLockSeen,
};
use crate::schema::probes::split_lock_neighbour::SplitLockNeighbourFigures;
use crate::schema::split_lock::SplitLockMechanism;
use crate::schema::{Level, Verdict};
use crate::words::verdicts::split_lock::{self as words, CoreToCore, Facts, Neighbour};

/// At or above this split-lock latency, split locks cost what the split-lock case called
/// "bad to horrifying" (Zen 5 ~500 ns; Arrow Lake ~7 us): a hazard from 1 us.
pub const HAZARD_NS: f64 = 1000.0;
/// From here, a split lock costs several aligned handoffs.
pub const NOTICE_NS: f64 = 300.0;
/// At or above this many aligned handoffs per split lock, a hazard (~10x on the Zen 4 guest).
pub const HAZARD_RATIO: f64 = 8.0;
/// From here, a split lock costs what several aligned handoffs cost.
pub const NOTICE_RATIO: f64 = 3.0;
/// A neighbour's DRAM latency rising this much under split locks is a hazard (up to 10x in
/// the split-lock case on Zen 2/5; about 2x on Arrow Lake).
pub const HAZARD_NEIGHBOUR_LATENCY_RATIO: f64 = 2.0;
/// Below this neighbour latency ratio (and above its inverse for bandwidth) the neighbour is
/// unharmed: the victim's DRAM figures move 0.96-1.17x between quiet runs on the guests (the
/// Emerald Rapids guest's `.runs` samples under trapped split locks; the Zen 3 guest's
/// `bench/stability.sh`), while bus locks move them 4.7-10x on Zen 2/3/5 guests.
pub const NEIGHBOUR_HARM_RATIO: f64 = 1.25;

/// The split-lock rule.
pub struct SplitLock;

/// What a neighbour felt, from its DRAM latency and streaming bandwidth ratios: harmed when
/// either moved past [`NEIGHBOUR_HARM_RATIO`].
fn neighbour_of(latency: Option<f64>, bandwidth: Option<f64>) -> Neighbour {
    let Some(latency_ratio) = latency else {
        return Neighbour::Unknown;
    };
    let harmed = latency_ratio >= NEIGHBOUR_HARM_RATIO
        || bandwidth.is_some_and(|b| b > 0.0 && 1.0 / b >= NEIGHBOUR_HARM_RATIO);
    if harmed {
        Neighbour::Slowed {
            latency_ratio,
            bandwidth_ratio: bandwidth,
        }
    } else {
        Neighbour::Unharmed {
            latency_ratio,
            bandwidth_ratio: bandwidth,
        }
    }
}

impl Hazard for SplitLock {
    fn id(&self) -> &'static str {
        "split_lock"
    }

    fn title(&self) -> &'static str {
        words::TITLE
    }

    fn reads(&self) -> &'static [FigureId] {
        &[
            SplitLockFigures::SPLIT_LOCK_RATIO,
            SplitLockFigures::SPLIT_LOCK_LATENCY_NS,
            SplitLockFigures::SPLIT_LOCK_TRAPPED_NS,
            SplitLockFigures::SPLIT_LOCK_OP_MEAN_NS,
            SplitLockNeighbourFigures::SPLIT_LOCK_NEIGHBOUR_LATENCY_RATIO,
            SplitLockNeighbourFigures::SPLIT_LOCK_NEIGHBOUR_BANDWIDTH_RATIO,
        ]
    }

    fn quotes(&self) -> &'static [FigureId] {
        &[
            SplitLockFigures::ALIGNED_LOCK_LATENCY_NS,
            SplitLockNeighbourFigures::AGGRESSOR_SPLIT_LOCKS_PER_S,
        ]
    }

    fn hurts(&self) -> &'static [&'static str] {
        words::hurts()
    }

    fn verdict(&self, fp: &Inputs<'_>) -> Option<Verdict> {
        let figures = fp.figures::<SplitLockFigures>().unwrap_or_default();
        let neighbour = fp
            .figures::<SplitLockNeighbourFigures>()
            .unwrap_or_default();
        let facts = gather(fp, &figures, &neighbour)?;
        Some(Verdict {
            hazard: self.id().into(),
            title: self.title().into(),
            summary: words::summary(&facts),
            level: level(&facts),
            figure: words::figure(&facts),
            reference: words::reference(),
            explanation: words::explanation(&facts),
            borderline: None,
        })
    }
}

/// The figures the verdict rests on, and the mechanism they show; `None` when neither a
/// measurement nor the kernel's state names one.
fn gather<'a>(
    fp: &'a Inputs<'_>,
    figures: &'a SplitLockFigures,
    neighbour: &SplitLockNeighbourFigures,
) -> Option<Facts<'a>> {
    let kernel = &fp.machine.split_lock;
    let value = |m: &Option<crate::schema::Metric>| m.as_ref().map(|m| m.value);
    let effects = fp
        .raw::<SplitLockRecord>(probe::SPLIT_LOCK)
        .map(|r| r.effects)
        .unwrap_or_default();
    let measured_in_child =
        effects.split_lock_measured == Some(SplitLockMeasured::KernelMitigation);
    // Where the kernel traps, the probe times one thread's trapped locks in a child
    // (`split_lock_trapped_ns`); fingerprints from before that name carried the same
    // figure as `split_lock_latency_ns` with `split_lock_measured: kernel_mitigation`.
    let split_metric = figures
        .split_lock_latency_ns
        .as_ref()
        .or(figures.split_lock_trapped_ns.as_ref());
    let split = split_metric.map(|m| m.value);
    // What one thread pays per split lock, traps included: the per-op mean where the
    // probe timed ops one by one, else the figure it had.
    let op_metric = figures.split_lock_op_mean_ns.as_ref();
    let cost = figures.cost_per_lock_ns();
    let n_lat = value(&neighbour.split_lock_neighbour_latency_ratio);
    let seen = SplitLockSeen::of(figures, &effects, fp.machine)?;
    let (mechanism, shape) = (seen.mechanism, seen.shape);
    let core_to_core = match (
        split,
        value(&figures.aligned_lock_latency_ns),
        measured_in_child,
    ) {
        (Some(split_ns), Some(aligned_ns), false) if aligned_ns > 0.0 => Some(CoreToCore {
            split_ns,
            aligned_ns,
        }),
        _ => None,
    };
    Some(Facts {
        kernel,
        measured: seen.measured(&effects),
        mechanism,
        shape,
        split_metric,
        aligned_ratio: value(&figures.split_lock_ratio),
        op_metric,
        cost_ns: cost,
        core_to_core,
        percentiles_ns: effects.split_lock_op_percentiles_ns.map(|p| (p.p50, p.p90)),
        neighbour: neighbour_of(
            n_lat,
            value(&neighbour.split_lock_neighbour_bandwidth_ratio),
        ),
        aggressor_split_locks_per_s: value(&neighbour.aggressor_split_locks_per_s),
        every_tenant_pays: n_lat.is_some_and(|l| l >= HAZARD_NEIGHBOUR_LATENCY_RATIO),
    })
}

/// The level: a kernel that penalises split locks or kills makes any program that issues
/// them a hazard; a trap is judged by its cost; a bus lock by its cost, its ratio to an
/// aligned atomic and what it does to a neighbour.
fn level(f: &Facts<'_>) -> Level {
    let cost = f.cost_ns;
    match f.mechanism {
        SplitLockMechanism::Fatal => Level::Hazard,
        _ if f.kernel.effective.penalises() => Level::Hazard,
        SplitLockMechanism::TrappedByHost | SplitLockMechanism::TrappedByKernel => {
            if cost.is_some_and(|c| c >= HAZARD_NS) {
                Level::Hazard
            } else {
                Level::Notice
            }
        }
        SplitLockMechanism::BusLock => {
            // Where the kernel acts but let the bus locks through (warn only), the child
            // timed one thread's: no core-to-core figure, the per-op cost stands in.
            let split = f.split_metric.map(|m| m.value).or(cost);
            let ratio = f.aligned_ratio;
            let hazard = split.is_some_and(|s| s >= HAZARD_NS)
                || ratio.is_some_and(|r| r >= HAZARD_RATIO)
                || f.every_tenant_pays;
            let notice =
                split.is_some_and(|s| s >= NOTICE_NS) || ratio.is_some_and(|r| r >= NOTICE_RATIO);
            if hazard {
                Level::Hazard
            } else if notice {
                Level::Notice
            } else {
                Level::Ok
            }
        }
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
            v.explanation.contains("the kernel's penalty instead")
                && v.explanation
                    .contains("measured: a bus lock at hardware cost, 1.1 us each"),
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
    fn a_kernel_that_only_warns_leaves_bus_locks_judged_by_their_per_op_cost() {
        // split_lock_detect=warn without the sleep: the child timed hardware-cost locks.
        let mut f = fp(
            &[
                ("split-lock", "split_lock_trapped_ns", 1300.0),
                ("split-lock", "split_lock_op_mean_ns", 1300.0),
                ("split-lock", "aligned_lock_latency_ns", 40.0),
            ],
            Some("kernel_mitigation"),
        );
        f.machine.split_lock = split_lock_state(true, true, None, Some(0));
        f.probes[0]
            .effects
            .insert("split_lock_mechanism".into(), "bus_lock".into());
        let v = SplitLock.judge(&f).unwrap();
        assert_eq!(v.level, Level::Hazard, "{}", v.figure);
        assert!(v.figure.starts_with("1.3 us"), "{}", v.figure);
        assert!(
            !v.explanation.contains("10 ms sleep instead"),
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

    fn fixture(path: &str) -> Fingerprint {
        let bytes = std::fs::read(format!(
            "{}/tests/fixtures/{path}",
            env!("CARGO_MANIFEST_DIR")
        ))
        .unwrap();
        crate::schema::json::from_json_bytes(&bytes).unwrap()
    }

    #[test]
    fn the_emerald_rapids_guest_is_trapped_by_the_host_and_its_neighbours_unharmed() {
        // The Emerald Rapids KVM guest, saved before per-op timing: 126 us (runs3-a) and
        // 132 us (single) per split lock, the neighbour's DRAM latency 1.0x. Its verdict said
        // "full hardware cost, unreported" and "slow every tenant of the host"; the host traps
        // them (C reference: ~2 us bus locks between 100-500 us traps).
        for (file, each) in [
            ("check-runs3-a.json", "126.2 us"),
            ("check-single.json", "131.6 us"),
        ] {
            let f = fixture(&format!("machines/emerald-rapids-kvm/{file}"));
            let v = SplitLock.judge(&f).unwrap();
            assert_eq!(v.level, Level::Hazard, "{file}");
            assert!(
                v.figure
                    .starts_with(&format!("trapped by the host, {each} each")),
                "{file}: {}",
                v.figure
            );
            assert!(
                v.figure.ends_with("neighbour DRAM latency 1.0x"),
                "{}",
                v.figure
            );
            assert!(
                v.summary.contains("the host traps split locks"),
                "{}",
                v.summary
            );
            assert!(v.summary.contains("a second at most"), "{}", v.summary);
            assert!(v.summary.ends_with("neighbours unharmed"), "{}", v.summary);
            for wrong in [
                "every tenant",
                "full hardware cost",
                "slows the other cores",
            ] {
                assert!(
                    !v.explanation.contains(wrong),
                    "{file}: {wrong}: {}",
                    v.explanation
                );
            }
            for right in [
                "neighbours unharmed, the host traps the locker; the program issuing split locks \
                 is punished",
                "hard-drive seek",
                "a policy the guest cannot see",
            ] {
                assert!(
                    v.explanation.contains(right),
                    "{file}: {right}: {}",
                    v.explanation
                );
            }
        }
        // ~7,900 a second at 126.2 us.
        let v = SplitLock
            .judge(&fixture("machines/emerald-rapids-kvm/check-runs3-a.json"))
            .unwrap();
        assert!(v.summary.contains("7,900 a second"), "{}", v.summary);
    }

    #[test]
    fn the_zen3_guest_bus_locks_and_slows_its_neighbour() {
        // The AMD guests: real bus locks, 1.5 us, the neighbour's DRAM latency 4.7x.
        let v = SplitLock
            .judge(&fixture("fingerprints/zen3-kvm-runs3-a.json"))
            .unwrap();
        assert_eq!(v.level, Level::Hazard);
        assert!(v.figure.contains("= 62.2x aligned"), "{}", v.figure);
        assert!(
            v.figure.ends_with("neighbour DRAM latency 4.7x"),
            "{}",
            v.figure
        );
        assert!(v.summary.contains("slows the other cores"), "{}", v.summary);
        assert!(
            v.explanation.contains("slow every tenant"),
            "{}",
            v.explanation
        );
        assert!(!v.explanation.contains("trap them:"), "{}", v.explanation);
    }

    /// A fingerprint as this build writes it: per-op figures and the recorded mechanism.
    fn per_op_fp(mechanism: &str, shape: Option<&str>, op_mean_ns: f64, n_lat: f64) -> Fingerprint {
        let mut f = fp(
            &[
                ("split-lock", "split_lock_latency_ns", 150e3),
                ("split-lock", "aligned_lock_latency_ns", 60.0),
                ("split-lock", "split_lock_ratio", 2500.0),
                ("split-lock", "split_lock_op_mean_ns", op_mean_ns),
                (
                    "split-lock-neighbour",
                    "split_lock_neighbour_latency_ratio",
                    n_lat,
                ),
                (
                    "split-lock-neighbour",
                    "split_lock_neighbour_bandwidth_ratio",
                    0.97,
                ),
                (
                    "split-lock-neighbour",
                    "aggressor_split_locks_per_s",
                    5400.0,
                ),
            ],
            Some("hardware"),
        );
        let p = &mut f.probes[0];
        p.effects
            .insert("split_lock_mechanism".into(), mechanism.into());
        if let Some(shape) = shape {
            p.effects
                .insert("split_lock_trap_shape".into(), shape.into());
        }
        p.effects.insert(
            "split_lock_op_percentiles_ns".into(),
            serde_json::json!({"p0": 2000.0, "p10": 2100.0, "p50": 2300.0, "p90": 177e3,
                               "p99": 383e3, "p100": 437e3}),
        );
        f
    }

    #[test]
    fn the_recorded_mechanism_and_shape_are_named() {
        let v = SplitLock
            .judge(&per_op_fp(
                "trapped_by_host",
                Some("short_traps"),
                184e3,
                1.02,
            ))
            .unwrap();
        assert_eq!(v.level, Level::Hazard);
        assert!(
            v.figure.starts_with("trapped by the host, 184.0 us each"),
            "{}",
            v.figure
        );
        assert!(v.summary.contains("5,400 a second"), "{}", v.summary);
        for right in [
            "half take 2.3 us or less and one in ten 177.0 us or more",
            "VM exits or a rate limit",
            "because the host's trap holds the looping core to 5,400 split locks a second, so \
             the bus is rarely locked",
        ] {
            assert!(v.explanation.contains(right), "{right}: {}", v.explanation);
        }
        let v = SplitLock
            .judge(&per_op_fp("trapped_by_host", Some("sleep"), 3e6, 1.0))
            .unwrap();
        assert!(
            v.explanation.contains("sleeps near 10 ms"),
            "{}",
            v.explanation
        );
    }

    #[test]
    fn what_the_probe_records_on_a_trapping_host_is_what_the_verdict_reads() {
        // The Emerald Rapids guest's per-op shape (refs.txt: ~2 us bus locks, 100-500 us
        // traps), through the probe's own recording, judged: the words the probe writes are
        // the words the verdict reads.
        use crate::probes::Measurement;
        use crate::probes::split_lock::per_op::{Block, summarize};
        use crate::probes::split_lock::{SplitLockProbe, record_per_op, test_raw};
        use crate::schema::figures::RawRecord;
        let block = |i: usize| Block {
            per_op_ns: (0..100)
                .map(|k| {
                    if (k + i) % 5 < 2 {
                        2100.0 + 10.0 * k as f64
                    } else {
                        100e3 + 4e3 * k as f64
                    }
                })
                .collect(),
            ..Block::default()
        };
        let s = summarize(&[block(0), block(1), block(2)]).unwrap();
        let mut f = crate::schema::test_support::empty_fingerprint();
        assert!(f.machine.hypervisor.is_some());
        let mut raw = test_raw(f.machine.split_lock.effective);
        record_per_op(&mut raw, &s);
        let mut p = ProbeResult::new("split-lock", Status::Ok);
        raw.write_into(&mut p);
        SplitLockProbe::analyse(&raw, &f.machine).write_into(&mut p);
        let json = serde_json::to_value(&p).unwrap();
        let p: ProbeResult = serde_json::from_value(json).unwrap();
        assert_eq!(p.effects["split_lock_mechanism"], "trapped_by_host");
        assert_eq!(p.effects["split_lock_trap_shape"], "short_traps");
        f.probes = vec![p];
        let mut n = ProbeResult::new("split-lock-neighbour", Status::Ok);
        for (name, v) in [
            ("split_lock_neighbour_latency_ratio", 1.02),
            ("split_lock_neighbour_bandwidth_ratio", 0.97),
        ] {
            n.metrics
                .push(Metric::derived(name, v, "ratio", Better::Lower));
        }
        f.probes.push(n);
        let v = SplitLock.judge(&f).unwrap();
        assert_eq!(v.level, Level::Hazard);
        assert!(
            v.figure.starts_with("trapped by the host, "),
            "{}",
            v.figure
        );
        assert!(v.summary.ends_with("neighbours unharmed"), "{}", v.summary);
        for right in [
            "VM exits or a rate limit",
            "half take",
            "neighbours unharmed, the host traps the locker",
        ] {
            assert!(v.explanation.contains(right), "{right}: {}", v.explanation);
        }
    }

    #[test]
    fn a_bus_lock_that_spares_the_neighbour_never_claims_every_tenant() {
        // Alder Lake in the split-lock case: slow split locks, neighbours barely touched.
        let v = SplitLock
            .judge(&per_op_fp("bus_lock", None, 7000.0, 1.1))
            .unwrap();
        assert_eq!(v.level, Level::Hazard);
        assert!(!v.explanation.contains("every tenant"), "{}", v.explanation);
        assert!(
            v.explanation.contains("neighbours unharmed"),
            "{}",
            v.explanation
        );
        assert!(v.summary.ends_with("other cores unharmed"), "{}", v.summary);
        assert!(
            v.explanation
                .contains("One thread issuing them back to back pays 7.0 us each"),
            "{}",
            v.explanation
        );
    }

    #[test]
    fn no_measurement_and_no_trapping_means_no_verdict() {
        let f = crate::schema::test_support::empty_fingerprint();
        assert_eq!(SplitLock.judge(&f), None);
    }
}
