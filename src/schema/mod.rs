//! The fingerprint: the versioned JSON document every command writes and `diff` and `report`
//! read. One serde type tree; `docs/schema.md` and `docs/fingerprint.schema.json` describe the
//! same thing for readers and validators and must change with it.
//!
//! Version policy: adding an optional field keeps `schema_version`; renaming, removing or
//! changing the meaning of a field bumps it.

pub mod disturbance;
pub mod figures;
pub mod json;
pub mod line_sharing;
pub mod probes;
pub mod split_lock;
#[cfg(test)]
pub(crate) mod test_support;

use crate::machine::Machine;
use crate::measure::ClockInfo;
use crate::stats::Summary;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// Version of the fingerprint layout this build writes.
pub const SCHEMA_VERSION: u32 = 1;

/// Everything one run of cpudoctor found on one machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// Layout version ([`SCHEMA_VERSION`] when written by this build).
    pub schema_version: u32,
    /// The tool that wrote the file.
    pub tool: Tool,
    /// The command that produced it (`check`, `probe pause`, ...).
    pub command: String,
    /// Seconds since the Unix epoch when the run started.
    pub created_unix_s: u64,
    /// Host facts.
    pub machine: Machine,
    /// The clock timings were read with.
    pub clock: ClockInfo,
    /// One entry per probe run, in run order.
    pub probes: Vec<ProbeResult>,
    /// Hazard verdicts drawn from the probes and machine facts.
    pub verdicts: Vec<Verdict>,
    /// Hazards whose probes ran (or were asked for) but which could not be judged, each with
    /// why: a verdict never disappears silently. Absent in files from builds before it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_judged: Vec<NotJudged>,
}

/// Name and version of the writer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tool {
    /// Always `cpudoctor`.
    pub name: String,
    /// Crate version.
    pub version: String,
}

impl Tool {
    /// This build.
    pub fn this() -> Tool {
        Tool {
            name: env!("CARGO_PKG_NAME").to_string(),
            version: env!("CARGO_PKG_VERSION").to_string(),
        }
    }
}

/// Outcome of a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// It ran and its metrics are valid.
    Ok,
    /// It could not run on this machine; `reason` says why. No metrics.
    Skipped,
    /// It started and went wrong; `reason` says how. No metrics.
    Failed,
}

/// What one probe measured, with its inputs, what took effect, and the raw samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeResult {
    /// Probe name (`pause`, ...).
    pub name: String,
    /// Outcome.
    pub status: Status,
    /// Why it was skipped or failed; absent when ok.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Parameters it ran with (profile, repetitions, CPUs, sizes, ...).
    pub params: BTreeMap<String, Value>,
    /// What actually took effect (pinned CPUs, page size obtained, core clock, ...).
    pub effects: BTreeMap<String, Value>,
    /// Headline figures.
    pub metrics: Vec<Metric>,
    /// Raw samples by name; the name carries the unit (`pause_ns.cpu0`).
    pub samples: BTreeMap<String, Vec<f64>>,
    /// Curves, bars and matrices for charts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub series: Vec<Series>,
    /// Headline figures this run could not measure, by metric name, with why (no size of
    /// the latency sweep reached DRAM; the two threads never ran as two cores). A hazard that
    /// reads one is "not judged" with that reason instead of judged on a guess.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub not_measured: BTreeMap<String, String>,
    /// Wall time the probe took, in seconds.
    pub duration_s: f64,
    /// What else the CPUs did while it measured (CPU quota throttling, steal, other tasks,
    /// its threads' wait for a CPU) and whether that disturbed its figures
    /// ([`disturbance::Disturbance::by`] not empty): a disturbed figure is shown marked and
    /// `diff` does not call it changed. Absent in files from builds before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disturbance: Option<disturbance::Disturbance>,
}

/// Which way a metric is better, so comparisons know a regression from an improvement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Better {
    /// Lower is better (latencies, penalties).
    Lower,
    /// Higher is better (bandwidth, gains).
    Higher,
    /// Neither: a fact, not a score (core clock, a period).
    #[default]
    Neither,
}

/// What a figure's move beyond noise is, by which way it is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moved {
    /// The worse way: a regression.
    Worse,
    /// The better way: an improvement.
    Better,
    /// The figure has no better direction (a fact): changed, no more.
    Changed,
}

impl Better {
    /// What a move `way` ([`crate::stats::effect`]'s reading of the figure) is for this
    /// figure: the one place a move becomes a regression or an improvement.
    pub fn moved(self, way: crate::stats::effect::Way) -> Moved {
        use crate::stats::effect::Way;
        match (self, way) {
            (Better::Neither, _) => Moved::Changed,
            (Better::Lower, Way::Up) | (Better::Higher, Way::Down) => Moved::Worse,
            (Better::Lower, Way::Down) | (Better::Higher, Way::Up) => Moved::Better,
        }
    }
}

/// One headline figure.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Metric {
    /// Name in the field's words, unit suffixed (`pause_ns`, `pause_cycles`).
    pub name: String,
    /// The figure (a median unless the name says otherwise).
    pub value: f64,
    /// Unit (`ns`, `cycles`, `ratio`, `GB/s`, ...).
    pub unit: String,
    /// Which way is better.
    #[serde(default)]
    pub better: Better,
    /// Spread of the samples behind the figure; absent for derived figures.
    pub spread: Option<Summary>,
    /// Confidence interval of `value` (of the median, for a measured figure), when the probe
    /// sampled it in blocks spread over its run; absent in files from builds without it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<Interval>,
}

/// A confidence interval for a figure, in the figure's unit.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Lower bound.
    pub low: f64,
    /// Upper bound.
    pub high: f64,
    /// The coverage this interval achieves (0.961 for the order-statistic interval of nine
    /// samples): at least the nominal 95% when there were enough values, less with fewer (3
    /// runs reach 0.75), and printed as such (see [`crate::format::interval_words`]).
    pub confidence: f64,
}

impl Interval {
    /// The 95% interval of the median of `samples` (see
    /// [`crate::stats::median_interval`]); `None` with fewer than two samples, whose
    /// "interval" would cover nothing.
    pub fn of_median(samples: &[f64]) -> Option<Interval> {
        crate::stats::median_interval(samples, crate::stats::CONFIDENCE)
            .filter(|&(_, _, coverage)| coverage > 0.0)
            .map(|(low, high, confidence)| Interval {
                low,
                high,
                confidence,
            })
    }

    /// `(low, high)`, as [`crate::stats::effect::Effect`] takes an interval.
    pub fn bounds(&self) -> (f64, f64) {
        (self.low, self.high)
    }
}

impl Metric {
    /// A metric summarising `samples` (median value, spread attached); `None` without samples.
    /// Its `interval` is the 95% confidence interval of the median (order statistics).
    pub fn from_samples(name: &str, unit: &str, better: Better, samples: &[f64]) -> Option<Metric> {
        let interval = Interval::of_median(samples);
        crate::stats::summarize(samples).map(|s| Metric {
            name: name.into(),
            value: s.median,
            unit: unit.into(),
            better,
            spread: Some(s),
            interval,
        })
    }

    /// A figure over values from different places (one per CPU, one per CPU pair), not
    /// repetitions of one measurement: the median with its spread, and no confidence interval,
    /// since the values differ because the places do (their min and max are a range).
    pub fn across_places(name: &str, unit: &str, better: Better, values: &[f64]) -> Option<Metric> {
        Metric::from_samples(name, unit, better, values).map(|m| Metric {
            interval: None,
            ..m
        })
    }

    /// The figure's interval as a reader sees it (`95% CI 24.08-24.12 ns`, or with too few
    /// values `n=3: 75% CI ...`); `None` without one.
    pub fn interval_text(&self) -> Option<String> {
        let i = self.interval.as_ref()?;
        Some(crate::format::interval_words(
            i.low,
            i.high,
            &self.unit,
            i.confidence,
            crate::stats::CONFIDENCE,
            self.spread.as_ref().map(|s| s.n),
        ))
    }

    /// A ratio of two figures sampled in pairs (`num[i]` and `den[i]` in the same block of
    /// time): the median of the paired ratios, with its interval.
    pub fn paired_ratio(name: &str, better: Better, num: &[f64], den: &[f64]) -> Option<Metric> {
        let ratios = crate::stats::paired_ratios(num, den);
        Metric::from_samples(name, "ratio", better, &ratios)
    }

    /// A derived metric (a ratio of medians, say) with no spread of its own.
    pub fn derived(name: &str, value: f64, unit: &str, better: Better) -> Metric {
        Metric {
            name: name.into(),
            value,
            unit: unit.into(),
            better,
            spread: None,
            interval: None,
        }
    }
}

/// Chart data attached to a probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Series {
    /// A curve: y against x.
    Xy {
        /// Series name (`latency_4k`, ...).
        name: String,
        /// What x is, with unit (`size_bytes`).
        x_label: String,
        /// What y is, with unit (`latency_ns`).
        y_label: String,
        /// Points in x order.
        points: Vec<[f64; 2]>,
    },
    /// Labelled bars.
    Bars {
        /// Series name (`pause_ns_per_cpu`, ...).
        name: String,
        /// Unit of the values.
        unit: String,
        /// One label per bar.
        labels: Vec<String>,
        /// One value per bar.
        values: Vec<f64>,
    },
    /// A matrix, such as core-to-core latency; absent cells are `null`.
    Matrix {
        /// Series name.
        name: String,
        /// Unit of the cells.
        unit: String,
        /// Row labels.
        rows: Vec<String>,
        /// Column labels.
        cols: Vec<String>,
        /// Cells, row-major.
        values: Vec<Vec<Option<f64>>>,
    },
}

/// How serious a verdict is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Nothing to worry about here.
    Ok,
    /// Worth knowing; hurts some software patterns.
    Notice,
    /// Software that trips on this will run measurably slower here.
    Hazard,
}

impl Level {
    /// The level as tables show it: a hazard in capitals, so it stands out in a column.
    pub fn word(self) -> &'static str {
        match self {
            Level::Ok => "ok",
            Level::Notice => "notice",
            Level::Hazard => "HAZARD",
        }
    }
}

/// A hazard judged on this machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    /// Stable identifier (`slow_pause`, ...).
    pub hazard: String,
    /// Short human title (`PAUSE latency`).
    pub title: String,
    /// Severity.
    pub level: Level,
    /// What it means for software in one short line with this machine's figure, for the
    /// one-screen summary (`a lock passed between two cores costs 71 ns a round trip`).
    /// Empty in files from builds before 0.1 wrote it; renderers then use the explanation's
    /// first sentence.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub summary: String,
    /// The measured figure as shown to a reader (`24.6 ns = 90 cycles`).
    pub figure: String,
    /// What it is judged against, with sources (`~10 cycles Haswell; ~140 Skylake-SP`).
    pub reference: String,
    /// What it means for software, with this machine's own numbers.
    pub explanation: String,
    /// When the figure's interval straddles a threshold: the other level it reaches (the
    /// verdict is then "borderline" between `level` and this one). Absent when the interval
    /// lies on one side, or in files from builds without intervals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub borderline: Option<Level>,
}

/// A hazard this run could not judge: its probe did not run ok, or a figure it reads was not
/// measured. Shown where the verdict would be, so nothing vanishes and nothing is called ok
/// without a measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NotJudged {
    /// Stable identifier of the hazard (`small_page_penalty`, ...).
    pub hazard: String,
    /// Short human title (`4 KiB page penalty`).
    pub title: String,
    /// Why there is no verdict, in a sentence (`no size of the latency sweep reached DRAM`).
    pub why: String,
    /// The command that measures what is missing (`cpudoctor explain small_page_penalty`).
    pub measure_with: String,
}

impl ProbeResult {
    /// An empty result for `name` with the given status.
    pub fn new(name: &str, status: Status) -> ProbeResult {
        ProbeResult {
            name: name.to_string(),
            status,
            reason: None,
            params: BTreeMap::new(),
            effects: BTreeMap::new(),
            metrics: Vec::new(),
            samples: BTreeMap::new(),
            series: Vec::new(),
            not_measured: BTreeMap::new(),
            duration_s: 0.0,
            disturbance: None,
        }
    }

    /// The metric called `name`, if present.
    pub fn metric(&self, name: &str) -> Option<&Metric> {
        self.metrics.iter().find(|m| m.name == name)
    }

    /// What disturbed its figures, when something did (see [`disturbance`]).
    pub fn disturbed(&self) -> Option<&disturbance::Disturbance> {
        self.disturbance.as_ref().filter(|d| d.disturbed())
    }
}

impl Fingerprint {
    /// The result of probe `name`, if it ran (whatever its status).
    pub fn probe(&self, name: &str) -> Option<&ProbeResult> {
        self.probes.iter().find(|p| p.name == name)
    }

    /// Metric `metric` of probe `probe`, only when that probe ran ok.
    pub fn metric(&self, probe: &str, metric: &str) -> Option<&Metric> {
        self.probe(probe)
            .filter(|p| p.status == Status::Ok)
            .and_then(|p| p.metric(metric))
    }
}
