//! Wiring one run: detect the machine, calibrate the clock, run the chosen probes, judge the
//! hazards, and hand back the fingerprint. The binary calls this; so do integration tests.

use crate::diagnose::analyse::rules::{CostSource, MachineCosts, PauseCost};
use crate::error::InputError;
use crate::hazards;
use crate::machine::Machine;
use crate::measure::{Clock, Progress, pin};
use crate::names::probe;
use crate::probes::{self, Probe, ProbeContext, ProbeOptions, Profile};
use crate::schema::probes::c2c::C2cFigures;
use crate::schema::probes::pause::PauseFigures;
use crate::schema::probes::split_lock::SplitLockFigures;
use crate::schema::{Fingerprint, SCHEMA_VERSION, Tool};

/// The machine and its clock, set up once per run.
pub struct Host {
    /// Host facts.
    pub machine: Machine,
    /// The calibrated clock.
    pub clock: Clock,
}

impl Host {
    /// Detects the machine and calibrates the clock (about 30 ms).
    pub fn detect() -> Host {
        let machine = Machine::detect();
        let clock = Clock::detect(machine.cpu.tsc_invariant);
        Host { machine, clock }
    }
}

/// Resolves probe names; an empty list means every probe.
pub fn select_probes(names: &[String]) -> Result<Vec<&'static dyn Probe>, InputError> {
    if names.is_empty() {
        return Ok(probes::all().to_vec());
    }
    // `probe pause pause` runs pause once: a fingerprint holds one result per probe.
    let mut unique: Vec<&String> = Vec::new();
    for n in names {
        if !unique.contains(&n) {
            unique.push(n);
        }
    }
    unique
        .into_iter()
        .map(|n| {
            probes::by_name(n).ok_or_else(|| InputError::UnknownProbe {
                name: n.to_string(),
                known: probes::all()
                    .iter()
                    .map(|p| p.name())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
        })
        .collect()
}

/// Checks that requested CPUs are ones this process may run on.
pub fn validate_cpus(cpus: &[usize], machine: &Machine) -> Result<(), InputError> {
    let bad: Vec<usize> = cpus
        .iter()
        .copied()
        .filter(|c| !machine.allowed_cpus.contains(c))
        .collect();
    if bad.is_empty() {
        Ok(())
    } else {
        Err(InputError::CpusNotAllowed {
            cpus: pin::format_cpu_list(&bad),
            allowed: pin::format_cpu_list(&machine.allowed_cpus),
        })
    }
}

/// Runs `selected` probes and judges the hazards.
pub fn run(
    host: &Host,
    command: &str,
    selected: &[&dyn Probe],
    options: &ProbeOptions,
    progress: &dyn Progress,
) -> Fingerprint {
    let ctx = ProbeContext {
        machine: &host.machine,
        clock: &host.clock,
        options,
        progress,
    };
    let created_unix_s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let probes = selected
        .iter()
        .map(|p| probes::run_probe(*p, &ctx))
        .collect();
    let mut machine = host.machine.clone();
    if let (Some(start), Some(end)) = (
        machine.cgroup.as_mut(),
        crate::machine::cgroup::self_facts(),
    ) {
        start.note_end(&end);
    }
    let mut fp = Fingerprint {
        schema_version: SCHEMA_VERSION,
        tool: Tool::this(),
        command: command.to_string(),
        created_unix_s,
        machine,
        clock: host.clock.info().clone(),
        probes,
        verdicts: Vec::new(),
        not_judged: Vec::new(),
    };
    fp = judge(&fp);
    fp
}

/// Runs the pause probe alone and takes PAUSE from it: the figure `spin`'s model, the
/// handoff's model lock and diagnose's spin findings are priced in. Returns the fingerprint
/// too (the handoff report keeps the probe's verdict), and PAUSE as measured or, when the
/// probe has no figure, its reason (see [`pause_of`]).
pub fn measure_pause(
    host: &Host,
    command: &str,
    options: &ProbeOptions,
    progress: &dyn Progress,
) -> (Fingerprint, Result<PauseCost, String>) {
    let pause = probes::by_name(probe::PAUSE).expect("pause probe is registered");
    let fp = run(host, command, &[pause], options, progress);
    let cost = pause_of(&fp);
    (fp, cost)
}

/// PAUSE as the fingerprint's pause probe measured it (`pause_ns`, and `pause_cycles` when
/// the core clock was estimated), or the probe's reason for having none ("no result" when it
/// gave none, or did not run).
pub fn pause_of(fp: &Fingerprint) -> Result<PauseCost, String> {
    let figures = fp.figures::<PauseFigures>().unwrap_or_default();
    match figures.pause_ns {
        Some(m) => Ok(PauseCost {
            ns: m.value,
            cycles: figures.pause_cycles.map(|c| c.value),
        }),
        None => Err(fp
            .probe(probe::PAUSE)
            .and_then(|p| p.reason.clone())
            .unwrap_or_else(|| "no result".to_string())),
    }
}

/// The line-transfer and lock costs a fingerprint holds (`c2c`, `split-lock`), for the
/// findings of a diagnosis; `None` when it holds neither.
pub fn line_costs_of(fp: &Fingerprint, source: CostSource) -> Option<MachineCosts> {
    let split = fp.figures::<SplitLockFigures>().unwrap_or_default();
    // What one thread pays for a split lock (as `why` predicts from): the per-op mean, else
    // where the kernel traps them the trapped mean, else (files from before per-op timing)
    // the handoff between two cores. The aligned figure is a handoff, so it is quoted beside
    // the handoff only: against one thread's cost it would compare two things.
    let per_thread = split
        .split_lock_op_mean_ns
        .as_ref()
        .or(split.split_lock_trapped_ns.as_ref());
    let costs = MachineCosts {
        line_transfer_ns: fp
            .figures::<C2cFigures>()
            .and_then(|f| f.c2c_latency_ns)
            .map(|m| m.value),
        aligned_lock_ns: match per_thread {
            Some(_) => None,
            None => split.aligned_lock_latency_ns.as_ref().map(|m| m.value),
        },
        split_lock_ns: per_thread
            .or(split.split_lock_latency_ns.as_ref())
            .map(|m| m.value),
        split_lock_mechanism: fp.split_lock_seen().map(|s| s.mechanism),
        source,
    };
    (costs.line_transfer_ns.is_some() || costs.split_lock_ns.is_some()).then_some(costs)
}

/// Measures the line costs a diagnosis needs with the probes' quick profile: `c2c` for a line
/// transfer, `split-lock` for a split lock.
pub fn measure_line_costs(
    host: &Host,
    line_transfer: bool,
    split_lock: bool,
    progress: &dyn Progress,
) -> Option<MachineCosts> {
    let names = [(probe::C2C, line_transfer), (probe::SPLIT_LOCK, split_lock)];
    let selected: Vec<&dyn Probe> = names
        .iter()
        .filter(|(_, wanted)| *wanted)
        .filter_map(|(name, _)| probes::by_name(name))
        .collect();
    if selected.is_empty() {
        return None;
    }
    let fp = run(
        host,
        "diagnose",
        &selected,
        &ProbeOptions::new(Profile::Quick),
        progress,
    );
    line_costs_of(&fp, CostSource::MeasuredNow)
}

/// Runs the named probes (those registered; a name not found is left out) after a diagnose
/// recording, for the figures its diagnosis carries; `None` when none is left to run.
pub fn measure_named(
    host: &Host,
    names: &[&str],
    options: &ProbeOptions,
    progress: &dyn Progress,
) -> Option<Fingerprint> {
    let selected: Vec<&dyn Probe> = names.iter().filter_map(|n| probes::by_name(n)).collect();
    (!selected.is_empty()).then(|| run(host, "diagnose", &selected, options, progress))
}

/// Largest buffer of the DRAM figures a diagnosis measures, at least: four times the
/// last-level cache, or the program's footprint, where that is more. A quarter of the 1 GiB a
/// check's quick curve reaches, so the chase takes ~2 s instead of ~9 (the Zen 4 guest) for a
/// small program (docs/diagnose.md).
pub const DIAGNOSE_DRAM_BYTES: u64 = 256 << 20;

/// The largest footprint a diagnosis measures DRAM at: the 4 KiB penalty grows with the
/// footprint (1.18x at 512 MiB, 1.41x at 1 GiB, 2.0x at 2 GiB for the C chase of the Zen 4
/// guest), so a 512 MiB program's figure is read at 512 MiB, not at 256; past this, at this
/// (building a 2 GiB cycle takes ~2 s a page size on that guest), and `diff` says the curve
/// ends below the footprint.
pub const DIAGNOSE_DRAM_MAX_BYTES: u64 = 2 << 30;

/// The mem-latency probe reduced to what a diagnosis's DRAM figures need: the quick profile,
/// 4 KiB and transparent huge pages only, and four sizes: 16 KiB and a quarter of L2 (so the
/// curve has the levels DRAM is told from), then a quarter of the largest buffer and the
/// largest: the program's `footprint` (its largest process's anonymous memory, up to
/// [`DIAGNOSE_DRAM_MAX_BYTES`]), [`DIAGNOSE_DRAM_BYTES`] or four times the last-level cache,
/// whichever is most, where DRAM is read. The probe itself keeps its buffers within the
/// memory this process may map.
pub fn dram_options(machine: &Machine, footprint: Option<u64>) -> ProbeOptions {
    let topo = machine.topology.as_ref();
    let l2 = topo
        .and_then(|t| t.data_cache(2))
        .map_or(256 << 10, |c| c.size_bytes / 4);
    let largest = topo
        .and_then(|t| t.llc_bytes())
        .map_or(0, |l| l.saturating_mul(4))
        .max(DIAGNOSE_DRAM_BYTES)
        .max(footprint.unwrap_or(0).min(DIAGNOSE_DRAM_MAX_BYTES))
        .next_multiple_of(2 << 20);
    let mut sizes: Vec<u64> = [16 << 10, l2, largest / 4, largest]
        .iter()
        .map(|s| s / 64 * 64)
        .collect();
    sizes.sort_unstable();
    sizes.dedup();
    ProbeOptions {
        sizes: Some(sizes),
        page_kinds: Some(vec![
            crate::measure::buffer::PageKind::Base4k,
            crate::measure::buffer::PageKind::Thp,
        ]),
        ..ProbeOptions::new(Profile::Quick)
    }
}

/// The core clock now, GHz: the median over the CPUs this process may use of each one's
/// estimate ([`crate::measure::estimate_core_clock`], a chain of dependent adds, a few ms a
/// CPU), and whether the CPUs were disturbed meanwhile (others busy, steal, throttling).
/// `None` off x86-64 or where no CPU could be pinned.
pub fn measure_core_clock(host: &Host) -> Option<(f64, bool)> {
    let cpus = host.machine.allowed_cpus.clone();
    let watch = crate::machine::disturbance::Watch::start();
    let ghz: Vec<f64> = cpus
        .iter()
        .filter_map(|&cpu| {
            let _pin = pin::pin_to_cpu(cpu).ok()?;
            crate::measure::estimate_core_clock(&host.clock, 15).map(|c| c.hz / 1e9)
        })
        .collect();
    let disturbed =
        crate::schema::disturbance::Disturbance::of_window(&watch.finish(&cpus)).disturbed();
    Some((crate::stats::summarize(&ghz)?.median, disturbed))
}

/// Runs the battery `runs` times (at least once) and keeps every run in one fingerprint: see
/// [`combine_runs`]. Run-to-run spread is the noise a shared machine really has (vCPU moves,
/// a neighbour's load), which the repetitions inside one run understate.
pub fn run_repeated(
    host: &Host,
    command: &str,
    selected: &[&dyn Probe],
    options: &ProbeOptions,
    progress: &dyn Progress,
    runs: usize,
) -> Fingerprint {
    let fps: Vec<Fingerprint> = (0..runs.max(1))
        .map(|_| run(host, command, selected, options, progress))
        .collect();
    combine_runs(fps)
}

/// The effect of a `--runs N` result naming each figure only some runs found, with in how
/// many.
const FOUND_IN_SOME_RUNS_ONLY: &str = "found_in_some_runs_only";

/// One fingerprint from several runs of the same battery on one machine: each probe is the
/// first run's, with every figure that every run measured replaced by the median over the
/// runs, its spread and 95% interval taken across the runs, and each run's value kept in
/// `samples["<metric>.runs"]`; `params.runs` says how many. A probe that did not run ok in
/// every run keeps the first run's result. Verdicts are judged again on the combined figures.
pub fn combine_runs(mut fps: Vec<Fingerprint>) -> Fingerprint {
    let n = fps.len();
    let mut first = fps.remove(0);
    if n == 1 {
        return first;
    }
    for p in first.probes.iter_mut() {
        let others: Vec<&crate::schema::ProbeResult> = fps
            .iter()
            .filter_map(|f| f.probe(&p.name))
            .filter(|q| q.status == p.status)
            .collect();
        if p.status != crate::schema::Status::Ok || others.len() + 1 != n {
            continue;
        }
        p.params.insert("runs".into(), serde_json::json!(n));
        p.duration_s += others.iter().map(|q| q.duration_s).sum::<f64>();
        // A figure is the median over the runs, so a run measured while disturbed is in it:
        // the combined result is disturbed when any run was.
        for q in &others {
            match (&mut p.disturbance, &q.disturbance) {
                (Some(d), Some(o)) => d.merge(o),
                (None, Some(o)) => p.disturbance = Some(o.clone()),
                _ => {}
            }
        }
        // A figure that some runs did not find (a TLB knee one sweep saw and the next did
        // not) is not a property of the machine: it is left out and the probe says so.
        let mut partial = serde_json::Map::new();
        p.metrics.retain(|m| {
            let found = 1 + others
                .iter()
                .filter(|q| q.metric(&m.name).is_some())
                .count();
            if found < n {
                partial.insert(m.name.clone(), serde_json::json!(found));
            }
            found == n
        });
        for q in &others {
            for m in &q.metrics {
                if p.metric(&m.name).is_none() && !partial.contains_key(&m.name) {
                    let found = others
                        .iter()
                        .filter(|o| o.metric(&m.name).is_some())
                        .count();
                    partial.insert(m.name.clone(), serde_json::json!(found));
                }
            }
        }
        // A figure a run could not measure, with why (the sharing probe's threads not running
        // as separate cores in one of three runs): the reason travels to the combined file, so
        // its hazard says why it is not judged instead of "absent".
        for name in partial.keys() {
            if p.not_measured.contains_key(name) {
                continue;
            }
            if let Some(why) = others.iter().find_map(|q| q.not_measured.get(name)) {
                p.not_measured
                    .insert(name.clone(), format!("not measured in every run: {why}"));
            }
        }
        if !partial.is_empty() {
            p.effects.insert(
                FOUND_IN_SOME_RUNS_ONLY.into(),
                serde_json::Value::Object(partial),
            );
        }
        for m in p.metrics.iter_mut() {
            let values: Vec<f64> = std::iter::once(m.value)
                .chain(
                    others
                        .iter()
                        .filter_map(|q| q.metric(&m.name).map(|x| x.value)),
                )
                .collect();
            if let Some(summary) = crate::stats::summarize(&values) {
                m.value = summary.median;
                m.spread = Some(summary);
                m.interval = crate::schema::Interval::of_median(&values);
            }
            p.samples.insert(format!("{}.runs", m.name), values);
        }
    }
    // The first run's verdicts were judged on its own figures: judged again on the combined.
    first.verdicts.clear();
    judge(&first)
}

/// The one judge, for every path (`check`, `--runs`, `diff`, `report`, `explain`, `fleet`, the
/// corpus test): `fp` as this build judges it. Every probe's saved raw record is analysed
/// again by this build ([`reanalyze`]), then every hazard is judged on the figures: its
/// verdicts and the hazards not judged, with why (a hazard today's rule cannot judge on an
/// older file keeps the verdict the file saved). Files from machines no longer at hand (the
/// corpus of real machines in `tests/fixtures/machines/`) stay comparable as the analysis
/// improves.
pub fn judge(fp: &Fingerprint) -> Fingerprint {
    let mut out = reanalyze(fp);
    hazards::judge_into(&mut out);
    out
}

/// The first step of [`judge`]: a saved fingerprint with each probe result whose probe can
/// recompute its figures from the saved raw record ([`Probe::reanalyze`]) recomputed by this
/// build's analysis; its stored verdicts are left as saved.
/// A result of `--runs N` saved only its first run's samples: there a figure both analyses
/// give keeps its saved value (the median across the runs, with their interval), a figure
/// some runs did not find stays out (`found_in_some_runs_only`, see [`combine_runs`]), a
/// figure only the new analysis gives comes from the first run, and one it no longer gives is
/// gone.
fn reanalyze(fp: &Fingerprint) -> Fingerprint {
    let mut out = fp.clone();
    for p in out.probes.iter_mut() {
        // What disturbed the run is a fact of the run; whether its figures resolve that is
        // this build's judgement (`Disturbance::rejudged`).
        p.disturbance = p.disturbance.take().map(|d| d.rejudged());
        let Some(mut fresh) = probes::by_name(&p.name)
            .and_then(|probe| probe.reanalyze(p, &fp.machine))
            .or_else(|| probes::handoff::reanalyze(p, &fp.machine))
        else {
            continue;
        };
        let runs = p.params.get("runs").and_then(|r| r.as_u64()).unwrap_or(1);
        if runs > 1 {
            let partial = p.effects.get(FOUND_IN_SOME_RUNS_ONLY);
            fresh
                .metrics
                .retain(|m| partial.and_then(|f| f.get(&m.name)).is_none());
            for m in fresh.metrics.iter_mut() {
                if let Some(saved) = p.metric(&m.name) {
                    *m = saved.clone();
                }
            }
        }
        if fresh.disturbance.is_none() {
            fresh.disturbance = p.disturbance.clone();
        }
        *p = fresh;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pause_of_takes_ns_and_cycles_or_the_probes_reason() {
        use crate::schema::{Better, Metric, ProbeResult, Status};
        let mut fp = crate::schema::test_support::empty_fingerprint();
        assert_eq!(pause_of(&fp), Err("no result".to_string()));
        let mut skipped = ProbeResult::new("pause", Status::Skipped);
        skipped.reason = Some("not x86-64".into());
        fp.probes.push(skipped);
        assert_eq!(pause_of(&fp), Err("not x86-64".to_string()));
        let mut p = ProbeResult::new("pause", Status::Ok);
        p.metrics
            .push(Metric::from_samples("pause_ns", "ns", Better::Lower, &[30.0]).unwrap());
        fp.probes = vec![p.clone()];
        assert_eq!(
            pause_of(&fp),
            Ok(PauseCost {
                ns: 30.0,
                cycles: None
            })
        );
        p.metrics
            .push(Metric::from_samples("pause_cycles", "cycles", Better::Lower, &[90.0]).unwrap());
        fp.probes = vec![p];
        assert_eq!(pause_of(&fp).unwrap().cycles, Some(90.0));
    }

    #[test]
    fn a_split_locks_cost_is_what_one_thread_pays_and_the_aligned_handoff_only_beside_a_handoff() {
        // The Zen 3 guest: handoff 1451 ns, per-op mean 1124 ns, its program 1091-1353 ns an add.
        use crate::schema::{Better, Metric, ProbeResult, Status};
        let metric = |name: &str, v: f64| Metric::from_samples(name, "ns", Better::Lower, &[v]);
        let mut p = ProbeResult::new(probe::SPLIT_LOCK, Status::Ok);
        p.metrics.extend([
            metric("aligned_lock_latency_ns", 98.0).unwrap(),
            metric("split_lock_latency_ns", 1451.0).unwrap(),
        ]);
        let mut fp = crate::schema::test_support::empty_fingerprint();
        fp.probes = vec![p.clone()];
        let old = line_costs_of(&fp, CostSource::MeasuredNow).unwrap();
        assert_eq!(
            (old.split_lock_ns, old.aligned_lock_ns),
            (Some(1451.0), Some(98.0))
        );
        p.metrics
            .push(metric("split_lock_op_mean_ns", 1124.0).unwrap());
        fp.probes = vec![p];
        let now = line_costs_of(&fp, CostSource::MeasuredNow).unwrap();
        assert_eq!(
            (now.split_lock_ns, now.aligned_lock_ns),
            (Some(1124.0), None)
        );
    }

    #[test]
    fn combined_runs_take_the_median_across_runs_and_keep_each_value() {
        use crate::schema::{Better, Metric, ProbeResult, Status};
        let with_pause = |ns: f64| {
            let mut fp = crate::schema::test_support::empty_fingerprint();
            let mut p = ProbeResult::new("pause", Status::Ok);
            p.metrics
                .push(Metric::from_samples("pause_ns", "ns", Better::Lower, &[ns, ns]).unwrap());
            fp.probes.push(p);
            fp
        };
        let fp = combine_runs([24.0, 40.0, 25.0, 26.0, 24.5].map(with_pause).to_vec());
        let m = fp.metric("pause", "pause_ns").unwrap();
        assert_eq!(m.value, 25.0);
        // Five values: the interval is their range (93.75% coverage).
        let i = m.interval.unwrap();
        assert_eq!((i.low, i.high), (24.0, 40.0));
        assert_eq!(fp.probe("pause").unwrap().samples["pause_ns.runs"].len(), 5);
        assert_eq!(fp.probe("pause").unwrap().params["runs"], 5);
        // A figure only some runs found is left out, and the probe says in how many.
        let mut runs = [24.0, 25.0, 26.0].map(with_pause).to_vec();
        runs[1].probes[0].metrics.push(
            Metric::from_samples("tlb_reach_bytes", "bytes", Better::Higher, &[4e6]).unwrap(),
        );
        let fp = combine_runs(runs);
        assert!(fp.metric("pause", "tlb_reach_bytes").is_none());
        assert_eq!(
            fp.probe("pause").unwrap().effects["found_in_some_runs_only"]["tlb_reach_bytes"],
            1
        );
        // A figure a later run could not measure carries that run's reason.
        let mut runs = [24.0, 25.0, 26.0].map(with_pause).to_vec();
        for r in runs.iter_mut().take(2) {
            r.probes[0].metrics.push(
                Metric::from_samples("tlb_reach_bytes", "bytes", Better::Higher, &[4e6]).unwrap(),
            );
        }
        runs[2].probes[0]
            .not_measured
            .insert("tlb_reach_bytes".into(), "no knee".into());
        let fp = combine_runs(runs);
        assert_eq!(
            fp.probe("pause").unwrap().not_measured["tlb_reach_bytes"],
            "not measured in every run: no knee"
        );
        // One run is returned as it is.
        let one = combine_runs(vec![with_pause(24.0)]);
        assert_eq!(one.metric("pause", "pause_ns").unwrap().value, 24.0);
    }

    /// The reduced latency curve of a diagnosis: the two levels DRAM is told from, and DRAM
    /// at four times the last-level cache, 256 MiB or the program's footprint, on 4 KiB and
    /// THP.
    #[test]
    fn the_dram_curve_has_the_levels_and_two_dram_points() {
        let mut m = crate::schema::test_support::test_machine();
        m.topology = None;
        let o = dram_options(&m, None);
        assert_eq!(
            o.sizes.as_deref(),
            Some(&[16 << 10, 256 << 10, 64 << 20, 256 << 20][..])
        );
        assert_eq!(o.profile, Profile::Quick);
        assert_eq!(o.page_kinds.as_ref().map(Vec::len), Some(2));
        // The Zen 4 guest: 1 MiB L2, 32 MiB L3 (4x is 128 MiB: 256 MiB stays).
        m.topology = crate::machine::topology::read_topology(std::path::Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/sysfs/amd-zen4-kvm-2cpu"
        )));
        let sizes = dram_options(&m, None).sizes.unwrap();
        assert_eq!(
            sizes,
            vec![16 << 10, 256 << 10, 64 << 20, 256 << 20],
            "{sizes:?}"
        );
        // A 260 MiB L3 (the Emerald Rapids guest): DRAM at 1040 MiB.
        if let Some(t) = m.topology.as_mut() {
            for c in t.caches.iter_mut().filter(|c| c.level == 3) {
                c.size_bytes = 260 << 20;
            }
        }
        assert_eq!(
            dram_options(&m, None).sizes.unwrap().last(),
            Some(&(1040 << 20))
        );
        // A program of 1.5 GiB + 100 KiB: DRAM read at its footprint, rounded up to whole
        // 2 MiB pages; one of 40 GiB at the cap.
        let big = dram_options(&m, Some((1536 << 20) + (100 << 10)))
            .sizes
            .unwrap();
        assert_eq!(big.last(), Some(&(1538 << 20)), "{big:?}");
        let huge = dram_options(&m, Some(40 << 30)).sizes.unwrap();
        assert_eq!(huge.last(), Some(&DIAGNOSE_DRAM_MAX_BYTES), "{huge:?}");
    }

    #[test]
    fn a_probe_named_twice_runs_once() {
        let names = vec!["pause".to_string(), "pause".to_string()];
        let probes = select_probes(&names).unwrap();
        assert_eq!(probes.len(), 1);
    }

    #[test]
    fn an_unknown_name_lists_the_known_ones() {
        let err = select_probes(&["nope".to_string()]).err().unwrap();
        assert!(err.to_string().contains("known probes: pause"), "{err}");
    }
}
