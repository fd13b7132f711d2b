//! Probes: one module per microbenchmark. A probe takes its parameters from
//! [`ProbeContext`], measures, and returns raw samples plus what took effect. It never prints
//! and never judges; the hazards layer does the judging.
//!
//! Adding a probe: write a module with a type implementing [`Probe`], then list it in
//! [`all`]. Every probe has a quick profile (what `check` runs, a second or so) and a full
//! profile (`probe NAME`).

pub mod bandwidth;
pub mod c2c;
pub mod handoff;
pub mod mem_latency;
pub mod pause;
pub mod sharing;
pub mod split_lock;
pub mod split_lock_neighbour;

use crate::machine::Machine;
use crate::measure::{Clock, PageKind, Progress};
use crate::schema::figures::{Analysis, Figures, RawRecord};
use crate::schema::{ProbeResult, Status};
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// How thoroughly to measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Profile {
    /// Short, for `check`: enough repetitions for a stable median.
    Quick,
    /// Longer, for `probe`: more repetitions and wider sweeps.
    Full,
}

/// Knobs shared by all probes; each probe reads the ones it has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeOptions {
    /// Quick or full.
    pub profile: Profile,
    /// CPUs to measure on (default: every CPU this process may use).
    pub cpus: Option<Vec<usize>>,
    /// Repetitions per measurement (default: by profile).
    pub repetitions: Option<usize>,
    /// Time budget for probes that sweep many cases (the c2c matrix samples CPU pairs when
    /// all would not fit); default by profile.
    pub budget: Option<std::time::Duration>,
    /// Bus locking in total for the split-lock neighbour probe; default by profile.
    pub duration: Option<std::time::Duration>,
    /// Buffer sizes of the memory latency curve, in bytes (default: by profile).
    pub sizes: Option<Vec<u64>>,
    /// Largest buffer a memory probe may map, in bytes (default: by profile).
    pub max_size: Option<u64>,
    /// Page kinds the memory probes measure (default: every kind).
    pub page_kinds: Option<Vec<PageKind>>,
}

impl ProbeOptions {
    /// Defaults for a profile.
    pub fn new(profile: Profile) -> ProbeOptions {
        ProbeOptions {
            profile,
            cpus: None,
            repetitions: None,
            budget: None,
            duration: None,
            sizes: None,
            max_size: None,
            page_kinds: None,
        }
    }
}

/// Everything a probe may use while it runs.
pub struct ProbeContext<'a> {
    /// Host facts.
    pub machine: &'a Machine,
    /// The calibrated clock.
    pub clock: &'a Clock,
    /// Parameters.
    pub options: &'a ProbeOptions,
    /// Where to report progress between timed sections.
    pub progress: &'a dyn Progress,
}

impl ProbeContext<'_> {
    /// The CPUs to measure on: the requested ones, or all allowed ones, each once (in the
    /// order first given). Requested CPUs outside the allowed set are an error, not silently
    /// dropped.
    pub fn cpus(&self) -> Result<Vec<usize>, ProbeFailure> {
        let allowed = &self.machine.allowed_cpus;
        match &self.options.cpus {
            None => Ok(allowed.clone()),
            Some(req) => {
                let req = &crate::machine::topology::dedup_keeping_order(req.clone());
                let bad: Vec<usize> = req
                    .iter()
                    .copied()
                    .filter(|c| !allowed.contains(c))
                    .collect();
                if bad.is_empty() {
                    Ok(req.clone())
                } else {
                    Err(ProbeFailure::Skipped(format!(
                        "CPU {} not available to this process (allowed: {})",
                        crate::measure::pin::format_cpu_list(&bad),
                        crate::measure::pin::format_cpu_list(allowed)
                    )))
                }
            }
        }
    }

    /// Repetitions: the requested count, or `quick` / `full` by profile.
    pub fn repetitions(&self, quick: usize, full: usize) -> usize {
        self.options
            .repetitions
            .unwrap_or(match self.options.profile {
                Profile::Quick => quick,
                Profile::Full => full,
            })
            .max(1)
    }
}

/// Why a probe produced no metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeFailure {
    /// It cannot run on this machine (wrong architecture, too few CPUs, no permission).
    Skipped(String),
    /// It started and something went wrong.
    Failed(String),
}

/// A thread that could not be pinned fails the probe: every probe pins before it times, and
/// a figure from the wrong CPU would be invented.
impl From<crate::measure::PinError> for ProbeFailure {
    fn from(e: crate::measure::PinError) -> ProbeFailure {
        ProbeFailure::Failed(e.to_string())
    }
}

/// A thread the kernel refused (a pids limit, `RLIMIT_NPROC`, `RLIMIT_AS`) skips the probe:
/// the machine may be fine, this process may not start what the measurement needs.
impl From<crate::measure::ThreadError> for ProbeFailure {
    fn from(e: crate::measure::ThreadError) -> ProbeFailure {
        ProbeFailure::Skipped(crate::words::machine::thread_refused(&e))
    }
}

/// The skip of a memory probe none of whose requested page kinds could be mapped, with each
/// kind's note (`backings`: the page-backing records the probes keep in `effects`).
pub fn nothing_mapped(backings: &[crate::measure::buffer::PageKindOutcome]) -> ProbeFailure {
    ProbeFailure::Skipped(format!(
        "no requested page kind could be mapped: {}",
        backings
            .iter()
            .map(|b| b.note())
            .collect::<Vec<_>>()
            .join("; ")
    ))
}

/// One microbenchmark.
pub trait Probe: Sync {
    /// Name used on the command line and in the fingerprint.
    fn name(&self) -> &'static str;
    /// One line saying what it measures.
    fn about(&self) -> &'static str;
    /// Measures. On success the result's status is `ok`.
    fn run(&self, ctx: &ProbeContext) -> Result<ProbeResult, ProbeFailure>;
    /// The figures of a saved result of this probe recomputed from its raw samples, params
    /// and effects by this build's analysis; `None` when the probe's analysis cannot be
    /// separated from its measurement, or the saved result lacks what it needs (then the
    /// saved figures stand).
    fn reanalyze(&self, _saved: &ProbeResult, _machine: &Machine) -> Option<ProbeResult> {
        None
    }
}

/// A probe in two steps, each with its own type: [`Measurement::measure`] runs on the machine
/// and returns only what it measured (the raw record a file saves); [`Measurement::analyse`]
/// is a pure function of that record and the machine's facts, so a saved file is analysed
/// again by this build (`diff`, `report`, `explain` and the corpus test all do) and a change
/// to an analysis reaches every file already saved. Every `Measurement` is a [`Probe`].
pub trait Measurement: Sync {
    /// What is saved: params, effects, samples, series (a type in `schema::probes`).
    type Raw: RawRecord;
    /// The headline figures (a type in `schema::probes`).
    type Figures: Figures;
    /// Name used on the command line and in the fingerprint.
    const NAME: &'static str;
    /// One line saying what it measures.
    const ABOUT: &'static str;
    /// Measures, and nothing else: no metric is computed here.
    fn measure(&self, ctx: &ProbeContext) -> Result<Self::Raw, ProbeFailure>;
    /// The figures of a raw record, by this build's analysis: pure, no clock, no machine
    /// access beyond the facts in `machine`.
    fn analyse(raw: &Self::Raw, machine: &Machine) -> Analysis<Self::Figures>;
}

impl<M: Measurement> Probe for M {
    fn name(&self) -> &'static str {
        M::NAME
    }

    fn about(&self) -> &'static str {
        M::ABOUT
    }

    fn run(&self, ctx: &ProbeContext) -> Result<ProbeResult, ProbeFailure> {
        let raw = self.measure(ctx)?;
        let mut result = ProbeResult::new(M::NAME, Status::Ok);
        raw.write_into(&mut result);
        M::analyse(&raw, ctx.machine).write_into(&mut result);
        Ok(result)
    }

    fn reanalyze(&self, saved: &ProbeResult, machine: &Machine) -> Option<ProbeResult> {
        if saved.status != Status::Ok {
            return None;
        }
        let raw: M::Raw = saved.raw().ok()?;
        let mut fresh = saved.clone();
        M::analyse(&raw, machine).write_into(&mut fresh);
        Some(fresh)
    }
}

/// Every probe, in the order `check` runs them.
pub fn all() -> &'static [&'static dyn Probe] {
    &[
        &pause::PauseProbe,
        &c2c::C2cProbe,
        &split_lock::SplitLockProbe,
        &split_lock_neighbour::SplitLockNeighbourProbe,
        &sharing::SharingProbe,
        &mem_latency::MemLatencyProbe,
        &bandwidth::BandwidthProbe,
    ]
}

/// The probe called `name`.
pub fn by_name(name: &str) -> Option<&'static dyn Probe> {
    all().iter().copied().find(|p| p.name() == name)
}

/// Runs `probe`, turning a skip or failure into a result with that status, and recording
/// the profile and wall time.
pub fn run_probe(probe: &dyn Probe, ctx: &ProbeContext) -> ProbeResult {
    let started = Instant::now();
    // What else the CPUs it may use did while it ran (quota throttling, steal, other tasks,
    // its own wait for a CPU): recorded on every result, so a figure measured while disturbed
    // is marked where it is shown and `diff` does not call it changed.
    let watch = crate::machine::disturbance::Watch::start();
    let mut result = match probe.run(ctx) {
        Ok(r) => r,
        Err(ProbeFailure::Skipped(reason)) => {
            let mut r = ProbeResult::new(probe.name(), Status::Skipped);
            r.reason = Some(reason);
            r
        }
        Err(ProbeFailure::Failed(reason)) => {
            let mut r = ProbeResult::new(probe.name(), Status::Failed);
            r.reason = Some(reason);
            r
        }
    };
    result
        .params
        .entry("profile".into())
        .or_insert_with(|| serde_json::to_value(ctx.options.profile).expect("enum serialises"));
    result.duration_s = started.elapsed().as_secs_f64();
    let watched = watched_cpus(ctx);
    result.disturbance = Some(crate::schema::disturbance::Disturbance::of_window(
        &watch.finish(&watched),
    ));
    result
}

/// The CPUs whose time says whether a probe was disturbed: those it may measure on, and their
/// SMT siblings (a busy sibling shares the core's execution units and caches with the probe's
/// thread, even when this process may not run there).
fn watched_cpus(ctx: &ProbeContext) -> Vec<usize> {
    let mut cpus = ctx
        .cpus()
        .unwrap_or_else(|_| ctx.machine.allowed_cpus.clone());
    if let Some(t) = &ctx.machine.topology {
        let siblings: Vec<usize> = t
            .cpus
            .iter()
            .filter(|p| cpus.contains(&p.cpu))
            .flat_map(|p| p.smt_siblings.iter().copied())
            .collect();
        cpus.extend(siblings);
    }
    cpus.sort_unstable();
    cpus.dedup();
    cpus
}

/// For tests that move a line between two CPUs: whether this process may use two. Without
/// them the test fails, as the integration tests' `missing_hardware` does, unless
/// `CPUDOCTOR_ALLOW_SKIP=1` turns that into a skip said on stderr: a test that could not run
/// never passes silently.
#[cfg(test)]
pub(crate) fn two_cpus_or_skip() -> bool {
    if crate::measure::allowed_cpus().len() >= 2 {
        return true;
    }
    if std::env::var("CPUDOCTOR_ALLOW_SKIP").as_deref() == Ok("1") {
        eprintln!("SKIPPED: this process may use one CPU; the test needs two");
        return false;
    }
    panic!(
        "this test needs two CPUs (taskset or a cpuset allows one); CPUDOCTOR_ALLOW_SKIP=1 skips it"
    )
}

/// For tests that run a probe on this machine as `machine` describes it (a fact changed to
/// reach a path the machine in hand does not take): the clock detected, no progress shown.
#[cfg(all(test, target_arch = "x86_64"))]
pub(crate) fn run_here(
    probe: &dyn Probe,
    machine: &Machine,
    options: &ProbeOptions,
) -> Result<ProbeResult, ProbeFailure> {
    let clock = Clock::detect(machine.cpu.tsc_invariant);
    probe.run(&ProbeContext {
        machine,
        clock: &clock,
        options,
        progress: &crate::measure::NoProgress,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_probe_goes_by_a_name_in_names() {
        // Readers look figures up by `names::probe`; a probe renamed without it would vanish
        // from every verdict and diff rule that reads it.
        let mut ids: Vec<&str> = all().iter().map(|p| p.name()).collect();
        ids.push(crate::names::probe::HANDOFF);
        ids.sort_unstable();
        let mut named = crate::names::probe::ALL.to_vec();
        named.sort_unstable();
        assert_eq!(ids, named);
    }

    use super::*;

    #[test]
    fn a_pin_error_fails_the_probe_with_its_words() {
        let e = crate::measure::PinError::DidNotMigrate {
            cpu: 3,
            running_on: 0,
        };
        assert_eq!(
            ProbeFailure::from(e),
            ProbeFailure::Failed("pinned to CPU 3 but the thread still runs on CPU 0".into())
        );
    }
}
