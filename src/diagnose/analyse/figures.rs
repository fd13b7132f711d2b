//! The machine a diagnosis ran on, in the figures its findings depend on (issue 31).
//!
//! `diff` of two saved diagnoses says *why* a program is slower on one side: each function
//! that moved has a mechanism (a PAUSE spin, a contended line, a split lock, loads from DRAM on
//! 4 KiB pages, plain computation), and each mechanism is governed by one figure of the
//! machine. A saved diagnosis therefore carries those figures as they were on that machine at
//! that time: measured after the recording, or taken from a saved `check` given with
//! `--check`. `diff --machines` supplies them for files saved without them.
//!
//! This module owns the vocabulary (which figures, their units, their fingerprint metric);
//! measuring them is the recording's job, comparing them is `compare`'s.

use super::rules::CostSource;
use crate::machine::ThpEnabled;
use crate::schema::probes::mem_latency::MemLatencyFigures;
use crate::schema::probes::pause::PauseFigures;
use crate::schema::probes::split_lock::SplitLockFigures;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A figure of the machine that governs one mechanism of a program's hot code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MachineFigure {
    /// The core clock while the probes ran, GHz: plain computation takes a fixed number of
    /// cycles, so its time goes as the inverse of the clock.
    CoreClockGhz,
    /// Nanoseconds per PAUSE: a spin of a fixed PAUSE count takes that many of them.
    PauseNs,
    /// One-way handoff of a cache line between two cores by `lock cmpxchg`, ns: a contended
    /// locked read-modify-write waits for one per acquisition.
    LineTransferNs,
    /// One split lock (a locked operation across two cache lines), ns.
    SplitLockNs,
    /// A dependent load from DRAM on 4 KiB pages, page walk included, ns.
    // snake_case alone would write `dram_latency4k_ns`; the name is the metric's (files
    // written with that spelling still read).
    #[serde(rename = "dram_latency_4k_ns", alias = "dram_latency4k_ns")]
    DramLatency4kNs,
    /// A dependent load from DRAM on huge pages, ns.
    DramLatencyHugeNs,
}

impl MachineFigure {
    /// Every figure, in the order a screen lists them.
    pub const ALL: [MachineFigure; 6] = [
        MachineFigure::CoreClockGhz,
        MachineFigure::PauseNs,
        MachineFigure::LineTransferNs,
        MachineFigure::SplitLockNs,
        MachineFigure::DramLatency4kNs,
        MachineFigure::DramLatencyHugeNs,
    ];

    /// The fingerprint metric that holds this figure (a saved `check`).
    pub fn metric(self) -> &'static str {
        match self {
            MachineFigure::CoreClockGhz => PauseFigures::CORE_CLOCK_GHZ.metric,
            MachineFigure::PauseNs => PauseFigures::PAUSE_NS.metric,
            MachineFigure::LineTransferNs => {
                crate::schema::probes::c2c::C2cFigures::C2C_LATENCY_NS.metric
            }
            MachineFigure::SplitLockNs => SplitLockFigures::SPLIT_LOCK_LATENCY_NS.metric,
            MachineFigure::DramLatency4kNs => MemLatencyFigures::DRAM_LATENCY_4K_NS.metric,
            MachineFigure::DramLatencyHugeNs => MemLatencyFigures::DRAM_LATENCY_HUGE_NS.metric,
        }
    }

    /// Its short name, as a screen or a progress line lists it.
    pub fn label(self) -> &'static str {
        match self {
            MachineFigure::CoreClockGhz => "core clock",
            MachineFigure::PauseNs => "PAUSE",
            MachineFigure::LineTransferNs => "line transfer",
            MachineFigure::SplitLockNs => "split lock",
            MachineFigure::DramLatency4kNs => "DRAM (4 KiB)",
            MachineFigure::DramLatencyHugeNs => "DRAM (huge)",
        }
    }

    /// Its unit, as a screen writes it after the number.
    pub fn unit(self) -> &'static str {
        match self {
            MachineFigure::CoreClockGhz => "GHz",
            _ => "ns",
        }
    }

    /// Whether the mechanism it governs takes longer as the figure grows (a latency) rather
    /// than shorter (a clock).
    pub fn time_grows_with_it(self) -> bool {
        !matches!(self, MachineFigure::CoreClockGhz)
    }
}

/// One figure and where it came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FigureValue {
    /// The figure, in [`MachineFigure::unit`].
    pub value: f64,
    /// A saved check (`from`: `saved_check`, with its `file`) or `measured_now`, after the
    /// recording.
    #[serde(flatten)]
    pub source: CostSource,
    /// True when it was measured while other work loaded the CPUs (its probe's disturbance
    /// record): it may read off.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub disturbed: bool,
}

/// The CPU, as CPUID names it (vendor, family, model tell designs apart in a guest).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FiguresCpu {
    /// `GenuineIntel`, `AuthenticAMD`, ...
    pub vendor: String,
    /// Family (decimal, extended family included).
    pub family: u32,
    /// Model (decimal, extended model included).
    pub model: u32,
    /// Marketing name from cpuinfo.
    pub model_name: String,
    /// Microarchitecture (`Zen 4`, `Emerald Rapids`, ...) or `unknown`.
    pub microarchitecture: String,
}

/// The machine of one diagnosis, in the figures its findings depend on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MachineFigures {
    /// The CPU (absent where cpuinfo could not be read).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<FiguresCpu>,
    /// Logical CPUs online.
    pub logical_cpus: usize,
    /// The hypervisor, when the machine is a guest (`KVM`, ...); absent on bare metal or when
    /// it could not be told.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hypervisor: Option<String>,
    /// Transparent huge pages mode.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thp: Option<ThpEnabled>,
    /// The figures measured or taken from a saved check; a figure not needed by this
    /// diagnosis's hot code, or that could not be measured, is absent.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub figures: BTreeMap<MachineFigure, FigureValue>,
}

impl MachineFigures {
    /// The value of one figure, when present.
    pub fn value(&self, f: MachineFigure) -> Option<f64> {
        self.figures.get(&f).map(|v| v.value)
    }
}

/// Which figures to measure after a recording (`--figures`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FiguresAsked {
    /// Those the hot code calls for, and the core clock always.
    #[default]
    Needed,
    /// Also PAUSE, line transfer and DRAM whatever the hot code (a baseline saved for later
    /// diffs); split lock still only when needed (measuring it locks the bus for every
    /// neighbour).
    All,
    /// None: the CPU facts only.
    None,
}

/// What a diagnosis's hot code calls for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FiguresNeeded {
    /// A spin (on PAUSE, without it, or a runtime's lock spin) is hot.
    pub pause: bool,
    /// A locked read-modify-write is hot (or cross-core HITMs were counted).
    pub line_transfer: bool,
    /// A hot locked operation splits across two lines.
    pub split_lock: bool,
    /// Hot loads miss the caches (memory loads, 4 KiB page walks).
    pub dram: bool,
}

/// The figures still to measure now, in [`MachineFigure::ALL`]'s order: those `asked` and
/// `needed` call for that `have` lacks (from a saved check, or measured for the findings
/// already). The core clock is always asked for, except with [`FiguresAsked::None`].
pub fn to_measure(
    asked: FiguresAsked,
    needed: FiguresNeeded,
    have: &BTreeMap<MachineFigure, FigureValue>,
) -> Vec<MachineFigure> {
    let all = match asked {
        FiguresAsked::None => return Vec::new(),
        FiguresAsked::All => true,
        FiguresAsked::Needed => false,
    };
    MachineFigure::ALL
        .into_iter()
        .filter(|f| match f {
            MachineFigure::CoreClockGhz => true,
            MachineFigure::PauseNs => all || needed.pause,
            MachineFigure::LineTransferNs => all || needed.line_transfer,
            MachineFigure::SplitLockNs => needed.split_lock,
            MachineFigure::DramLatency4kNs | MachineFigure::DramLatencyHugeNs => all || needed.dram,
        })
        .filter(|f| !have.contains_key(f))
        .collect()
}

/// The probe whose metric holds a figure in a saved check, split locks read as the split-lock
/// verdict reads them (the trapped figure where the kernel traps them).
pub fn probe_of(f: MachineFigure) -> &'static str {
    use crate::names::probe;
    match f {
        MachineFigure::CoreClockGhz | MachineFigure::PauseNs => probe::PAUSE,
        MachineFigure::LineTransferNs => probe::C2C,
        MachineFigure::SplitLockNs => probe::SPLIT_LOCK,
        MachineFigure::DramLatency4kNs | MachineFigure::DramLatencyHugeNs => probe::MEM_LATENCY,
    }
}

/// The figures a saved check holds, each marked as coming from `file`, with the CPU, its
/// logical CPUs, hypervisor and THP mode. A figure whose probe did not run, or whose run was
/// disturbed and says so, is kept with `disturbed` set; one not measured is absent.
pub fn from_fingerprint(fp: &crate::schema::Fingerprint, file: &str) -> MachineFigures {
    let figures = figures_of(
        fp,
        &CostSource::SavedCheck {
            file: file.to_string(),
        },
    );
    let cpu = &fp.machine.cpu;
    MachineFigures {
        cpu: Some(FiguresCpu {
            vendor: cpu.vendor.clone(),
            family: cpu.family,
            model: cpu.model,
            model_name: cpu.model_name.clone(),
            microarchitecture: cpu.microarchitecture.clone(),
        }),
        logical_cpus: fp.machine.logical_cpus,
        hypervisor: fp.machine.hypervisor.as_ref().map(|h| h.vendor.clone()),
        thp: fp.machine.thp.as_ref().map(|t| t.enabled),
        figures,
    }
}

/// This machine as it is now (CPU, logical CPUs, hypervisor, THP mode), without figures yet:
/// what every recorded diagnosis carries, `--figures none` included.
pub fn of_machine(m: &crate::machine::Machine) -> MachineFigures {
    MachineFigures {
        cpu: Some(FiguresCpu {
            vendor: m.cpu.vendor.clone(),
            family: m.cpu.family,
            model: m.cpu.model,
            model_name: m.cpu.model_name.clone(),
            microarchitecture: m.cpu.microarchitecture.clone(),
        }),
        logical_cpus: m.logical_cpus,
        hypervisor: m.hypervisor.as_ref().map(|h| h.vendor.clone()),
        thp: m.thp.as_ref().map(|t| t.enabled),
        figures: BTreeMap::new(),
    }
}

/// Every figure a fingerprint holds (a saved check, or probes run after the recording), each
/// marked with `source`, and `disturbed` where its probe's run was.
pub fn figures_of(
    fp: &crate::schema::Fingerprint,
    source: &CostSource,
) -> BTreeMap<MachineFigure, FigureValue> {
    let mut figures = BTreeMap::new();
    for f in MachineFigure::ALL {
        let probe = probe_of(f);
        let metric = fp.metric(probe, f.metric()).or_else(|| match f {
            // Where the kernel traps split locks the probe names the figure so.
            MachineFigure::SplitLockNs => fp.figure(SplitLockFigures::SPLIT_LOCK_TRAPPED_NS),
            // The clock is estimated by several probes; the PAUSE probe's is preferred.
            MachineFigure::CoreClockGhz => fp
                .probes
                .iter()
                .filter(|p| p.status == crate::schema::Status::Ok)
                .find_map(|p| p.metric(f.metric())),
            _ => None,
        });
        if let Some(m) = metric {
            figures.insert(
                f,
                FigureValue {
                    value: m.value,
                    source: source.clone(),
                    disturbed: fp.probe(probe).and_then(|p| p.disturbed()).is_some(),
                },
            );
        }
    }
    figures
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(rel: &str) -> crate::schema::Fingerprint {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/machines")
            .join(rel);
        crate::schema::json::from_json_bytes(&std::fs::read(path).unwrap()).unwrap()
    }

    #[test]
    fn each_figure_reads_back_and_dram_on_4k_is_named_as_its_metric() {
        for f in MachineFigure::ALL {
            let json = serde_json::to_string(&f).unwrap();
            assert_eq!(serde_json::from_str::<MachineFigure>(&json).unwrap(), f);
        }
        assert_eq!(
            serde_json::to_string(&MachineFigure::DramLatency4kNs).unwrap(),
            format!("\"{}\"", MemLatencyFigures::DRAM_LATENCY_4K_NS.metric)
        );
        let old: MachineFigure = serde_json::from_str("\"dram_latency4k_ns\"").unwrap();
        assert_eq!(old, MachineFigure::DramLatency4kNs);
    }

    #[test]
    fn the_figures_measured_are_those_asked_and_needed_and_not_had() {
        use MachineFigure::*;
        let none = BTreeMap::new();
        let needed = FiguresNeeded::default();
        assert_eq!(
            to_measure(FiguresAsked::Needed, needed, &none),
            vec![CoreClockGhz]
        );
        assert!(to_measure(FiguresAsked::None, needed, &none).is_empty());
        // All: PAUSE, line transfer and DRAM whatever the hot code, never the split lock.
        assert_eq!(
            to_measure(FiguresAsked::All, needed, &none),
            vec![
                CoreClockGhz,
                PauseNs,
                LineTransferNs,
                DramLatency4kNs,
                DramLatencyHugeNs
            ]
        );
        let split_and_dram = FiguresNeeded {
            split_lock: true,
            dram: true,
            ..needed
        };
        let mut have = BTreeMap::new();
        have.insert(
            CoreClockGhz,
            FigureValue {
                value: 3.7,
                source: CostSource::MeasuredNow,
                disturbed: false,
            },
        );
        assert_eq!(
            to_measure(FiguresAsked::Needed, split_and_dram, &have),
            vec![SplitLockNs, DramLatency4kNs, DramLatencyHugeNs]
        );
    }

    /// The Zen 4 and Emerald Rapids guests' checks hold the figures a diff needs, with the
    /// PAUSE of each as its refs.txt gives it (Zen 4 ~24.5 ns, Emerald Rapids ~13 ns); DRAM
    /// where the latency curve reached it (not on Emerald Rapids, whose L3 the quick curve
    /// does not leave).
    #[test]
    fn a_saved_check_gives_every_figure_with_its_source() {
        let zen4 = from_fingerprint(&fixture("zen4-kvm/check-runs3-a.json"), "zen4.json");
        let emr = from_fingerprint(
            &fixture("emerald-rapids-kvm/check-runs3-a.json"),
            "emr.json",
        );
        for m in [&zen4, &emr] {
            for f in [
                MachineFigure::CoreClockGhz,
                MachineFigure::PauseNs,
                MachineFigure::LineTransferNs,
            ] {
                assert!(m.value(f).is_some_and(|v| v > 0.0), "{f:?} missing: {m:?}");
            }
        }
        assert!(
            zen4.value(MachineFigure::DramLatency4kNs)
                .is_some_and(|v| v > 30.0)
        );
        assert!(
            zen4.value(MachineFigure::DramLatencyHugeNs)
                .is_some_and(|v| v > 30.0)
        );
        let (z, e) = (
            zen4.value(MachineFigure::PauseNs).unwrap(),
            emr.value(MachineFigure::PauseNs).unwrap(),
        );
        assert!(
            (15.0..40.0).contains(&z) && (5.0..20.0).contains(&e),
            "{z} {e}"
        );
        assert_eq!(zen4.cpu.as_ref().unwrap().vendor, "AuthenticAMD");
        assert_eq!(emr.cpu.as_ref().unwrap().vendor, "GenuineIntel");
        assert!(matches!(
            &zen4.figures[&MachineFigure::PauseNs].source,
            CostSource::SavedCheck { file } if file == "zen4.json"
        ));
    }
}
