//! The typed face of a probe's result: what a probe measured (its raw record) and what its
//! analysis made of it (its figures), each a type of its own per probe, in `schema::probes`.
//!
//! A saved [`ProbeResult`] keeps one JSON layout for every probe (`params`, `effects`,
//! `samples`, `series` and a `metrics` list): the raw record is what serde writes into the
//! four maps, the figures are the `metrics` list, each metric named after its field. So the
//! names are written once, as field names, and serde (or [`figures!`]) derives the strings;
//! nothing outside `schema` looks a figure up by a string.
//!
//! - [`Figures`]: a probe's headline figures, one `Option<Metric>` field each, declared with
//!   [`figures!`] (which also gives every figure a [`FigureId`] constant, for the hazards'
//!   `reads()` and `diff`'s drift rules). A probe whose figures are named by parts (the c2c
//!   figure per CPU-pair group, handoff's per runtime and delay) implements the trait by hand.
//! - [`RawRecord`]: what a probe saves of its measurement, read back from a saved file to be
//!   analysed again by this build ([`ProbeRaw`] is the usual shape: typed params, effects and
//!   samples, written into the result's maps by serde).

use super::{Metric, ProbeResult, Series, Status};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::collections::BTreeMap;

/// One headline figure of one probe, as the hazards declare what they read and `diff` finds
/// it in two fingerprints: the probe's name and the figure's (its field's) name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FigureId {
    /// The probe that measures it (a `names::probe` constant).
    pub probe: &'static str,
    /// The figure's name, as its metric is named in the file (`pause_ns`).
    pub metric: &'static str,
}

impl FigureId {
    /// The figure `metric` of probe `probe`.
    pub const fn new(probe: &'static str, metric: &'static str) -> FigureId {
        FigureId { probe, metric }
    }
}

/// A probe's headline figures as one type (declare it with [`figures!`]).
pub trait Figures: Default {
    /// The probe whose `metrics` these are.
    const PROBE: &'static str;
    /// Every figure the type names, in the order the probe reports them; empty for a type
    /// whose figures are named by parts (see [`Figures::ids`]).
    const IDS: &'static [FigureId];
    /// The figures as the saved `metrics` list, in report order, each metric named after its
    /// field; absent figures are left out.
    fn into_metrics(self) -> Vec<Metric>;
    /// The figures of a saved `metrics` list (metrics it does not name are ignored).
    fn from_metrics(metrics: &[Metric]) -> Self;
    /// The ids of the figures this value holds (for figures named by parts, the parts this
    /// value has).
    fn ids(&self) -> Vec<FigureId> {
        Self::IDS.to_vec()
    }
    /// Writes what the analysis derived beside the figures (curves for charts, derived
    /// effects: see [`WithDerived`]) into `result`, over what it held; most figures have none.
    fn write_derived(&self, _result: &mut ProbeResult) {}
}

/// A probe's figures with what its analysis derives beside them and saves (charts' curves,
/// facts such as where a curve steps), as one [`Figures`] for [`crate::probes::Measurement`]:
/// the derived part `D` is a [`RawRecord`] written over the saved result's own, so a saved
/// file analysed again carries this build's curves and facts too. Read back from a saved
/// file, the derived part is read by `D`'s [`RawRecord::read_from`] (the figures' own
/// [`Figures::from_metrics`] leaves it at its default).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct WithDerived<F, D> {
    /// The headline figures.
    pub figures: F,
    /// What the analysis derived beside them.
    pub derived: D,
}

impl<F: Figures, D: RawRecord + Default> Figures for WithDerived<F, D> {
    const PROBE: &'static str = F::PROBE;
    const IDS: &'static [FigureId] = F::IDS;

    fn into_metrics(self) -> Vec<Metric> {
        self.figures.into_metrics()
    }

    fn from_metrics(metrics: &[Metric]) -> Self {
        WithDerived {
            figures: F::from_metrics(metrics),
            derived: D::default(),
        }
    }

    fn ids(&self) -> Vec<FigureId> {
        self.figures.ids()
    }

    fn write_derived(&self, result: &mut ProbeResult) {
        self.figures.write_derived(result);
        self.derived.write_into(result);
    }
}

/// Declares a probe's figures: a struct of `Option<Metric>` fields, a [`FigureId`] constant for
/// each, and its [`Figures`] impl. The field name is the metric's name in the file, written
/// once; the constant is its id:
///
/// ```ignore
/// figures! {
///     /// What the PAUSE probe reports.
///     pub struct PauseFigures for crate::names::probe::PAUSE {
///         /// PAUSE latency on the fastest CPU (median), ns.
///         pause_ns / PAUSE_NS,
///     }
/// }
/// ```
#[macro_export]
macro_rules! figures {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident for $probe:path {
            $( $(#[$fmeta:meta])* $field:ident / $id:ident ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Default, PartialEq)]
        $vis struct $name {
            $( $(#[$fmeta])* pub $field: Option<$crate::schema::Metric>, )*
        }

        impl $name {
            $(
                #[doc = concat!("The id of `", stringify!($field), "`.")]
                pub const $id: $crate::schema::figures::FigureId =
                    $crate::schema::figures::FigureId::new($probe, stringify!($field));
            )*
        }

        impl $crate::schema::figures::Figures for $name {
            const PROBE: &'static str = $probe;
            const IDS: &'static [$crate::schema::figures::FigureId] = &[$( $name::$id ),*];

            fn into_metrics(self) -> Vec<$crate::schema::Metric> {
                let mut out = Vec::new();
                $(
                    if let Some(mut m) = self.$field {
                        m.name = stringify!($field).to_string();
                        out.push(m);
                    }
                )*
                out
            }

            fn from_metrics(metrics: &[$crate::schema::Metric]) -> Self {
                let find = |name: &str| metrics.iter().find(|m| m.name == name).cloned();
                $name { $( $field: find(stringify!($field)), )* }
            }
        }
    };
}

/// What a probe saves of its measurement, enough for its analysis to run again on a saved
/// file: written into a [`ProbeResult`]'s `params`, `effects`, `samples` and `series`, and
/// read back from them.
pub trait RawRecord: Sized {
    /// Writes the record into `result`'s maps (adding to what is there).
    fn write_into(&self, result: &mut ProbeResult);
    /// The record of a saved result; an error names what is missing or malformed.
    fn read_from(result: &ProbeResult) -> Result<Self, RawError>;
}

/// A saved result whose raw record this build cannot read (a file from a build that saved
/// less, or an edited one): its saved figures stand.
#[derive(Debug, thiserror::Error)]
#[error("the saved {probe} result's {part} cannot be read: {source}")]
pub struct RawError {
    /// The probe.
    pub probe: String,
    /// `params`, `effects` or `samples`.
    pub part: &'static str,
    /// What serde said.
    #[source]
    pub source: serde_json::Error,
}

impl RawError {
    /// A `map_err` for reading `part` of `result`: the serde error with the probe and part.
    pub fn of(
        result: &ProbeResult,
        part: &'static str,
    ) -> impl FnOnce(serde_json::Error) -> RawError {
        let probe = result.name.clone();
        move |source| RawError {
            probe,
            part,
            source,
        }
    }
}

/// The effects of `result` read as `T` (a typed view of what took effect).
pub fn effects_of<T: DeserializeOwned>(result: &ProbeResult) -> Result<T, RawError> {
    from_map(&result.effects).map_err(RawError::of(result, "effects"))
}

/// The usual raw record: typed parameters (how it ran), effects (what took effect: pinned
/// CPUs, page sizes, core clock...), samples (each field a list of numbers, its name carrying
/// its unit) and chart series. Each part is a serde struct whose field names are the keys of
/// the saved maps; fields older files lack are `#[serde(default)]`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ProbeRaw<P, E, S> {
    /// How the probe ran (`params`).
    pub params: P,
    /// What took effect (`effects`).
    pub effects: E,
    /// Raw samples (`samples`: every value a list of numbers).
    pub samples: S,
    /// Curves, bars and matrices for charts (`series`).
    pub series: Vec<Series>,
}

impl<P, E, S> RawRecord for ProbeRaw<P, E, S>
where
    P: Serialize + DeserializeOwned,
    E: Serialize + DeserializeOwned,
    S: Serialize + DeserializeOwned,
{
    fn write_into(&self, result: &mut ProbeResult) {
        result.params.extend(to_map(&self.params));
        result.effects.extend(to_map(&self.effects));
        for (k, v) in to_map(&self.samples) {
            let values: Vec<f64> = serde_json::from_value(v).unwrap_or_else(|e| {
                panic!("sample `{k}` of a raw record is not a list of numbers: {e}")
            });
            result.samples.insert(k, values);
        }
        result.series.extend(self.series.iter().cloned());
    }

    fn read_from(result: &ProbeResult) -> Result<Self, RawError> {
        let err = |part: &'static str| RawError::of(result, part);
        let samples: serde_json::Map<String, Value> = result
            .samples
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(v.clone())))
            .collect();
        Ok(ProbeRaw {
            params: from_map(&result.params).map_err(err("params"))?,
            effects: from_map(&result.effects).map_err(err("effects"))?,
            samples: serde_json::from_value(Value::Object(samples)).map_err(err("samples"))?,
            series: result.series.clone(),
        })
    }
}

/// A serde struct as the key-value map a result saves it as. A type that does not serialise
/// to a map is a bug in its declaration.
pub fn to_map<T: Serialize>(value: &T) -> BTreeMap<String, Value> {
    match serde_json::to_value(value).expect("a raw record serialises") {
        Value::Object(map) => map.into_iter().collect(),
        Value::Null => BTreeMap::new(),
        other => panic!("a raw record part must serialise to a map, not {other}"),
    }
}

/// A serde struct read from the key-value map a result saved.
pub fn from_map<T: DeserializeOwned>(map: &BTreeMap<String, Value>) -> serde_json::Result<T> {
    serde_json::from_value(Value::Object(
        map.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
    ))
}

/// What a probe's analysis made of its raw record: its figures, and the figures it could not
/// give, each with why (see [`ProbeResult::not_measured`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Analysis<F> {
    /// The headline figures.
    pub figures: F,
    /// Figures this record could not give, with why (a sentence from `words`).
    pub not_measured: BTreeMap<FigureId, String>,
}

impl<F: Figures> Analysis<F> {
    /// Figures alone, every one measured.
    pub fn of(figures: F) -> Analysis<F> {
        Analysis {
            figures,
            not_measured: BTreeMap::new(),
        }
    }

    /// Writes the analysis into `result`: its metrics, `not_measured` and what it derived
    /// beside the figures ([`Figures::write_derived`]) replaced.
    pub fn write_into(self, result: &mut ProbeResult) {
        result.not_measured = self
            .not_measured
            .into_iter()
            .map(|(id, why)| (id.metric.to_string(), why))
            .collect();
        self.figures.write_derived(result);
        result.metrics = self.figures.into_metrics();
    }
}

impl ProbeResult {
    /// This result's figures as `F`, when it is a result of `F`'s probe that ran ok.
    pub fn figures<F: Figures>(&self) -> Option<F> {
        (self.name == F::PROBE && self.status == Status::Ok).then(|| F::from_metrics(&self.metrics))
    }

    /// This result's raw record as `R` (see [`RawRecord::read_from`]).
    pub fn raw<R: RawRecord>(&self) -> Result<R, RawError> {
        R::read_from(self)
    }
}

impl super::Fingerprint {
    /// The figures of `F`'s probe, when it ran ok.
    pub fn figures<F: Figures>(&self) -> Option<F> {
        self.probe(F::PROBE)?.figures()
    }

    /// One figure by its id, when its probe ran ok and gave it.
    pub fn figure(&self, id: FigureId) -> Option<&Metric> {
        self.metric(id.probe, id.metric)
    }

    /// The raw record of `probe` as `R`, when that probe ran ok and its record reads.
    pub fn raw<R: RawRecord>(&self, probe: &str) -> Option<R> {
        self.probe(probe)
            .filter(|p| p.status == Status::Ok)
            .and_then(|p| p.raw().ok())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::Better;
    use serde::Deserialize;

    const DEMO: &str = "demo";

    crate::figures! {
        /// Two figures of a made-up probe.
        pub struct TwoFigures for DEMO {
            /// First.
            first_ns / FIRST_NS,
            /// Second.
            second_ratio / SECOND_RATIO,
        }
    }

    #[test]
    fn figures_go_to_the_metrics_list_named_after_their_fields_and_back() {
        let figures = TwoFigures {
            first_ns: Some(Metric::derived("anything", 3.0, "ns", Better::Lower)),
            second_ratio: None,
        };
        let metrics = figures.clone().into_metrics();
        assert_eq!(metrics.len(), 1);
        assert_eq!(metrics[0].name, "first_ns");
        let back = TwoFigures::from_metrics(&metrics);
        assert_eq!(back.first_ns.map(|m| m.value), Some(3.0));
        assert!(back.second_ratio.is_none());
        assert_eq!(
            TwoFigures::SECOND_RATIO,
            FigureId::new("demo", "second_ratio")
        );
        assert_eq!(TwoFigures::IDS.len(), 2);
    }

    #[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
    struct Params {
        reps: usize,
    }
    #[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
    struct Effects {
        #[serde(default)]
        pinned_cpus: Vec<usize>,
    }
    #[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
    struct Samples {
        #[serde(rename = "x_ns.cpu0")]
        x_ns_cpu0: Vec<f64>,
    }

    #[test]
    fn a_raw_record_round_trips_through_the_saved_maps_and_says_what_it_lacks() {
        let raw = ProbeRaw {
            params: Params { reps: 3 },
            effects: Effects {
                pinned_cpus: vec![0, 1],
            },
            samples: Samples {
                x_ns_cpu0: vec![1.0, 2.0],
            },
            series: Vec::new(),
        };
        let mut r = ProbeResult::new("demo", Status::Ok);
        raw.write_into(&mut r);
        assert_eq!(r.samples["x_ns.cpu0"], vec![1.0, 2.0]);
        assert_eq!(r.params["reps"], serde_json::json!(3));
        let back: ProbeRaw<Params, Effects, Samples> = r.raw().unwrap();
        assert_eq!(back, raw);
        r.params.clear();
        let e = r.raw::<ProbeRaw<Params, Effects, Samples>>().unwrap_err();
        assert_eq!(e.part, "params");
        assert!(e.to_string().contains("reps"), "{e}");
    }
}
