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
use crate::schema::probes::sharing::SharingFigures;
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
    /// One split lock (a locked operation across two cache lines) as one thread pays it, traps
    /// included, ns: the probe's per-op mean ([`SplitLockFigures::cost_per_lock_ns`]). Not
    /// the split lock handed between two cores: on the Zen 3 guest that read 1451 ns (its runs
    /// 1.42x apart) where the single-thread program paid 1030-1353 ns an add and the per-op
    /// mean read 1124 ns.
    SplitLockNs,
    /// One `lock xadd` of a counter every thread (one per CPU) writes at once, ns per
    /// increment (the sharing probe's true-sharing case): what a contended locked
    /// read-modify-write pays per operation. Not one line transfer: a core that holds the line
    /// may complete several operations before it moves (40 ns here against an 88 ns handoff on
    /// the Emerald Rapids guest, 8.5-10 ns against 28 ns on the Zen 4 guest), so the handoff
    /// predicted a contended add across those two 1.5x off, this figure within 1.13-1.2x.
    SharedAtomicNs,
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
    pub const ALL: [MachineFigure; 7] = [
        MachineFigure::CoreClockGhz,
        MachineFigure::PauseNs,
        MachineFigure::LineTransferNs,
        MachineFigure::SplitLockNs,
        MachineFigure::SharedAtomicNs,
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
            MachineFigure::SharedAtomicNs => SharingFigures::SHARED_ATOMIC_INCREMENT_NS.metric,
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
            MachineFigure::SharedAtomicNs => "shared atomic",
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
    /// The memory-latency curve the DRAM figures were read from, by buffer size (the same
    /// measurement as `dram_latency_4k_ns` and `dram_latency_huge_ns`, which are its last
    /// size): `diff` reads it at the program's own footprint, since the 4 KiB penalty grows
    /// with the footprint. Empty where the latency probe did not run (and in older files).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub latency_curve: Vec<CurvePoint>,
}

/// One buffer size of a memory-latency curve: ns per dependent load of a random chase over
/// that many bytes, on each page size measured (medians of the probe's samples).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    /// The buffer chased, bytes.
    pub size_bytes: u64,
    /// On 4 KiB pages, ns per load (page walks included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ns_4k: Option<f64>,
    /// On huge pages (those the probe read its latencies on), ns per load.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ns_huge: Option<f64>,
}

impl CurvePoint {
    /// Its value for a DRAM figure (`None` for the others).
    fn value(&self, f: MachineFigure) -> Option<f64> {
        match f {
            MachineFigure::DramLatency4kNs => self.ns_4k,
            MachineFigure::DramLatencyHugeNs => self.ns_huge,
            _ => None,
        }
    }
}

/// Whether a curve read at `at_bytes` reaches a program's `footprint`: within 10% of it (the
/// corpus chase's 1 GiB buffer is 1 GiB and 96 KiB of anonymous memory).
pub fn curve_reaches(at_bytes: u64, footprint: u64) -> bool {
    at_bytes as f64 >= 0.9 * footprint as f64
}

/// A DRAM figure read off a latency curve at a footprint.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CurveReading {
    /// ns per load at `at_bytes`.
    pub ns: f64,
    /// The size read: the footprint asked for, or the curve's end nearest to it.
    pub at_bytes: u64,
}

impl MachineFigures {
    /// The value of one figure, when present.
    pub fn value(&self, f: MachineFigure) -> Option<f64> {
        self.figures.get(&f).map(|v| v.value)
    }

    /// A DRAM figure at `bytes` of footprint, from the latency curve: interpolated in log size
    /// between the two sizes around it (latency grows about linearly in log footprint past the
    /// last-level cache: 241, 274, 383 ns at 0.5, 1 and 2 GiB on 4 KiB pages for the C chase of
    /// the Emerald Rapids guest), and outside the curve the value at its nearest end (no
    /// extrapolation: `at_bytes` says where it was read). `None` without a curve for `f`.
    pub fn latency_at(&self, f: MachineFigure, bytes: u64) -> Option<CurveReading> {
        let mut points: Vec<(u64, f64)> = self
            .latency_curve
            .iter()
            .filter_map(|p| Some((p.size_bytes, p.value(f)?)))
            .filter(|(s, v)| *s > 0 && v.is_finite() && *v > 0.0)
            .collect();
        points.sort_by_key(|p| p.0);
        let (first, last) = (*points.first()?, *points.last()?);
        if bytes <= first.0 {
            return Some(CurveReading {
                ns: first.1,
                at_bytes: first.0,
            });
        }
        if bytes >= last.0 {
            return Some(CurveReading {
                ns: last.1,
                at_bytes: last.0,
            });
        }
        let i = points.iter().position(|p| p.0 >= bytes)?;
        let ((s0, v0), (s1, v1)) = (points[i - 1], points[i]);
        let t = (bytes as f64 / s0 as f64).ln() / (s1 as f64 / s0 as f64).ln();
        Some(CurveReading {
            ns: v0 + t * (v1 - v0),
            at_bytes: bytes,
        })
    }

    /// Whether the two are the same kind of machine: one CPU (vendor, family, model), one
    /// hypervisor, as many CPUs. Two diagnoses of such a pair read their figures from one
    /// measurement where they can (see `compare::why`).
    pub fn same_machine_as(&self, other: &MachineFigures) -> bool {
        let cpu = |m: &MachineFigures| {
            m.cpu
                .as_ref()
                .map(|c| (c.vendor.clone(), c.family, c.model))
        };
        cpu(self).is_some()
            && cpu(self) == cpu(other)
            && self.hypervisor == other.hypervisor
            && self.logical_cpus == other.logical_cpus
    }
}

/// A program's memory footprint for its DRAM figures: the anonymous memory of its largest
/// process, bytes (each process walks its own page tables, so the largest one's size is what
/// its page walks see); `None` where none was read.
pub fn footprint_bytes(
    processes: &[crate::diagnose::record::memory::ProcessMemory],
) -> Option<u64> {
    processes
        .iter()
        .map(|p| p.anonymous_kb.saturating_mul(1024))
        .max()
        .filter(|b| *b > 0)
}

/// The latency curve of a fingerprint's memory-latency probe (empty where it did not run ok or
/// kept no samples): the median of each size's samples on 4 KiB pages and on the huge page
/// kind the probe read its latencies on.
pub fn latency_curve_of(fp: &crate::schema::Fingerprint) -> Vec<CurvePoint> {
    use crate::measure::buffer::PageKind;
    use crate::schema::probes::mem_latency::{MemLatencyDerived, MemLatencyRaw};
    let Some(raw) = fp.raw::<MemLatencyRaw>(crate::names::probe::MEM_LATENCY) else {
        return Vec::new();
    };
    let derived = fp.raw::<MemLatencyDerived>(crate::names::probe::MEM_LATENCY);
    let huge = derived
        .and_then(|d| d.latency_page_kind)
        .filter(|k| k.is_huge())
        .or_else(|| {
            [PageKind::Thp, PageKind::Hugetlb2m]
                .into_iter()
                .find(|k| raw.samples.latency_ns.keys().any(|(kind, _)| kind == k))
        });
    let median = |kind: PageKind, size: u64| {
        raw.samples
            .latency_ns
            .get(&(kind, size))
            .and_then(|v| crate::stats::median(v))
    };
    let mut sizes: Vec<u64> = raw.samples.latency_ns.keys().map(|(_, s)| *s).collect();
    sizes.sort_unstable();
    sizes.dedup();
    sizes
        .into_iter()
        .map(|size| CurvePoint {
            size_bytes: size,
            ns_4k: median(PageKind::Base4k, size),
            ns_huge: huge.and_then(|k| median(k, size)),
        })
        .filter(|p| p.ns_4k.is_some() || p.ns_huge.is_some())
        .collect()
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
/// already), or has only as measured while disturbed (see [`offer`]). The core clock is always
/// asked for, except with [`FiguresAsked::None`].
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
            MachineFigure::LineTransferNs | MachineFigure::SharedAtomicNs => {
                all || needed.line_transfer
            }
            MachineFigure::SplitLockNs => needed.split_lock,
            MachineFigure::DramLatency4kNs | MachineFigure::DramLatencyHugeNs => all || needed.dram,
        })
        .filter(|f| have.get(f).is_none_or(|v| v.disturbed))
        .collect()
}

/// Offers a figure to `have`: taken where `have` has none of it, or has it only as measured
/// while disturbed and this one was not. Returns whether it was taken. Why: a saved check
/// taken while the hypervisor stole the CPUs reads its figures off (the Zen 3 guest's shared
/// atomic add 22 ns in a check with 14% steal, where the contended program itself paid 12-18 ns
/// an add), and a diff predicts from them; the quiet figure measured now is the machine's.
pub fn offer(
    have: &mut BTreeMap<MachineFigure, FigureValue>,
    figure: MachineFigure,
    value: FigureValue,
) -> bool {
    let take = have
        .get(&figure)
        .is_none_or(|old| old.disturbed && !value.disturbed);
    if take {
        have.insert(figure, value);
    }
    take
}

/// The probe whose metric holds a figure in a saved check, split locks read as the split-lock
/// verdict reads them (the trapped figure where the kernel traps them).
pub fn probe_of(f: MachineFigure) -> &'static str {
    use crate::names::probe;
    match f {
        MachineFigure::CoreClockGhz | MachineFigure::PauseNs => probe::PAUSE,
        MachineFigure::LineTransferNs => probe::C2C,
        MachineFigure::SplitLockNs => probe::SPLIT_LOCK,
        MachineFigure::SharedAtomicNs => probe::SHARING,
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
        latency_curve: latency_curve_of(fp),
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
        latency_curve: Vec::new(),
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
        let metric = match f {
            // What one thread pays: the per-op mean, else (where the kernel traps split locks)
            // the trapped mean, else (files from before per-op timing) the handoff.
            MachineFigure::SplitLockNs => fp
                .figure(SplitLockFigures::SPLIT_LOCK_OP_MEAN_NS)
                .or_else(|| fp.figure(SplitLockFigures::SPLIT_LOCK_TRAPPED_NS)),
            _ => None,
        };
        let metric = metric
            .or_else(|| fp.metric(probe, f.metric()))
            .or_else(|| match f {
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
        // All: PAUSE, line transfer, the shared atomic and DRAM whatever the hot code, never
        // the split lock.
        assert_eq!(
            to_measure(FiguresAsked::All, needed, &none),
            vec![
                CoreClockGhz,
                PauseNs,
                LineTransferNs,
                SharedAtomicNs,
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

    /// The Zen 3 guest's corpus check (14% steal): its shared atomic add read 22 ns, marked
    /// disturbed, where the contended program paid 12-18 ns an add, and a diff to Zen 4
    /// predicted 0.45x against 0.75x observed. A disturbed figure is measured again, and the
    /// quiet one replaces it; a disturbed one never replaces a quiet one.
    #[test]
    fn a_figure_measured_while_disturbed_is_measured_again_and_the_quiet_one_kept() {
        use MachineFigure::*;
        let saved = |value: f64, disturbed: bool| FigureValue {
            value,
            source: CostSource::SavedCheck {
                file: "check.json".into(),
            },
            disturbed,
        };
        let now = |value: f64, disturbed: bool| FigureValue {
            value,
            source: CostSource::MeasuredNow,
            disturbed,
        };
        let locked = FiguresNeeded {
            line_transfer: true,
            ..FiguresNeeded::default()
        };
        let mut have = BTreeMap::new();
        have.insert(CoreClockGhz, saved(3.1, false));
        have.insert(LineTransferNs, saved(29.0, false));
        have.insert(SharedAtomicNs, saved(22.0, true));
        assert_eq!(
            to_measure(FiguresAsked::Needed, locked, &have),
            vec![SharedAtomicNs]
        );
        // Disturbed again now: the saved one stays.
        assert!(!offer(&mut have, SharedAtomicNs, now(25.0, true)));
        assert_eq!(have[&SharedAtomicNs].value, 22.0);
        assert!(offer(&mut have, SharedAtomicNs, now(12.5, false)));
        assert_eq!(have[&SharedAtomicNs], now(12.5, false));
        // A quiet figure had is kept, whatever comes later.
        assert!(!offer(&mut have, LineTransferNs, now(31.0, false)));
        assert!(!offer(&mut have, SharedAtomicNs, now(9.0, true)));
        assert_eq!(have[&SharedAtomicNs].value, 12.5);
        assert!(to_measure(FiguresAsked::Needed, locked, &have).is_empty());
    }

    fn curve(points: &[(u64, Option<f64>, Option<f64>)]) -> MachineFigures {
        let mut m = of_machine(&crate::schema::test_support::test_machine());
        m.latency_curve = points
            .iter()
            .map(|&(size_bytes, ns_4k, ns_huge)| CurvePoint {
                size_bytes,
                ns_4k,
                ns_huge,
            })
            .collect();
        m
    }

    /// Between two sizes the curve is read in log size (halfway between 512 MiB and 2 GiB is
    /// 1 GiB); outside it at its nearest end, which the reading names; a page size the curve
    /// lacks gives nothing.
    #[test]
    fn the_latency_curve_is_read_between_its_sizes_and_at_its_ends_outside() {
        use MachineFigure::*;
        let m = curve(&[
            (2 << 30, Some(400.0), Some(260.0)),
            (512 << 20, Some(240.0), None),
        ]);
        let at = |f, b| m.latency_at(f, b).map(|r| (r.ns, r.at_bytes));
        assert_eq!(at(DramLatency4kNs, 1 << 30), Some((320.0, 1 << 30)));
        assert_eq!(at(DramLatency4kNs, 64 << 20), Some((240.0, 512 << 20)));
        assert_eq!(at(DramLatency4kNs, 8 << 30), Some((400.0, 2 << 30)));
        assert_eq!(at(DramLatencyHugeNs, 1 << 30), Some((260.0, 2 << 30)));
        assert_eq!(at(PauseNs, 1 << 30), None);
        assert_eq!(curve(&[]).latency_at(DramLatency4kNs, 1 << 30), None);
    }

    /// A saved check's curve is its probe's medians per size, both page sizes; the Zen 4
    /// guest's quick curve ends at the 1 GiB its DRAM figures are read at.
    #[test]
    fn a_saved_checks_latency_curve_ends_where_its_dram_figures_are_read() {
        let zen4 = from_fingerprint(&fixture("zen4-kvm/check-runs3-a.json"), "zen4.json");
        let last = zen4.latency_curve.last().expect("a curve");
        assert_eq!(last.size_bytes, 1 << 30);
        assert!(last.ns_4k.is_some() && last.ns_huge.is_some(), "{last:?}");
        assert!(
            zen4.latency_curve
                .windows(2)
                .all(|w| w[0].size_bytes < w[1].size_bytes)
        );
        // The figures are medians over the runs; the curve's end is of the same samples.
        let (small, huge) = (
            zen4.value(MachineFigure::DramLatency4kNs).unwrap(),
            zen4.value(MachineFigure::DramLatencyHugeNs).unwrap(),
        );
        assert!(last.ns_4k.unwrap() / small > 0.8 && last.ns_4k.unwrap() / small < 1.25);
        assert!(last.ns_huge.unwrap() / huge > 0.8 && last.ns_huge.unwrap() / huge < 1.25);
    }

    #[test]
    fn one_machine_is_one_cpu_one_hypervisor_and_as_many_cpus() {
        let a = of_machine(&crate::schema::test_support::test_machine());
        let mut b = a.clone();
        assert!(a.same_machine_as(&b));
        b.logical_cpus += 1;
        assert!(!a.same_machine_as(&b));
        let mut c = a.clone();
        c.cpu.as_mut().unwrap().model += 1;
        assert!(!a.same_machine_as(&c));
        let mut d = a.clone();
        d.cpu = None;
        assert!(!d.same_machine_as(&d.clone()));
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
                MachineFigure::SharedAtomicNs,
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
