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
use crate::names::metric;
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
            MachineFigure::CoreClockGhz => metric::CORE_CLOCK_GHZ,
            MachineFigure::PauseNs => metric::PAUSE_NS,
            MachineFigure::LineTransferNs => metric::C2C_LATENCY_NS,
            MachineFigure::SplitLockNs => metric::SPLIT_LOCK_LATENCY_NS,
            MachineFigure::DramLatency4kNs => metric::DRAM_LATENCY_4K_NS,
            MachineFigure::DramLatencyHugeNs => metric::DRAM_LATENCY_HUGE_NS,
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
