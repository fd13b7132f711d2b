//! Deterministic fingerprints for unit tests of hazards and exporters.

use super::{
    Better, Fingerprint, Level, Metric, ProbeResult, SCHEMA_VERSION, Series, Status, Tool, Verdict,
};
use crate::machine::{CpuIdentity, Machine, PmuStatus, kernel};
use crate::measure::{ClockInfo, ClockSource};
use crate::names::probe;
use crate::schema::probes::pause::PauseFigures;

/// A made-up 2-CPU Zen 4 KVM guest: no PMU, THP `madvise`, split locks invisible to its
/// kernel. Unit tests take this machine, never the live one (`Machine::detect`), so they
/// give the same answer on every host.
pub fn test_machine() -> Machine {
    Machine {
        hostname: Some("test-host".into()),
        cpu: CpuIdentity {
            vendor: "AuthenticAMD".into(),
            family: 25,
            model: 17,
            stepping: 1,
            model_name: "AMD EPYC".into(),
            microarchitecture: "Zen 4".into(),
            microcode: None,
            arch: "x86_64".into(),
            tsc_invariant: true,
            flags_of_interest: vec!["constant_tsc".into(), "nonstop_tsc".into()],
        },
        logical_cpus: 2,
        allowed_cpus: vec![0, 1],
        topology: None,
        kernel_release: Some("6.18.0".into()),
        hypervisor: Some(crate::machine::Hypervisor {
            vendor: "KVM".into(),
        }),
        pmu: PmuStatus {
            usable: false,
            errno: Some(2),
            reason: Some(
                "no hardware PMU is exposed (common in VMs); only software events work".into(),
            ),
        },
        perf_event_paranoid: Some(2),
        thp: Some(crate::machine::ThpMode {
            enabled: crate::machine::ThpEnabled::Madvise,
            defrag: None,
        }),
        split_lock: kernel::split_lock_state(false, false, None, Some(1)),
        cgroup: None,
    }
}

/// A fingerprint of [`test_machine`] with no probes.
pub fn empty_fingerprint() -> Fingerprint {
    Fingerprint {
        schema_version: SCHEMA_VERSION,
        tool: Tool {
            name: "cpudoctor".into(),
            version: "0.0.0-test".into(),
        },
        command: "check".into(),
        created_unix_s: 1_800_000_000,
        machine: test_machine(),
        clock: ClockInfo {
            source: ClockSource::Tsc,
            reason: "test".into(),
            tsc_hz: Some(2.596e9),
            tsc_hz_source: Some("calibrated".into()),
            tsc_hz_calibrated: Some(2.596e9),
        },
        probes: Vec::new(),
        verdicts: Vec::new(),
        not_judged: Vec::new(),
    }
}

/// The empty fingerprint plus a PAUSE probe result and its verdict.
pub fn sample_fingerprint() -> Fingerprint {
    let mut fp = empty_fingerprint();
    let samples = vec![24.5, 24.6, 24.4, 24.5, 24.7];
    let mut p = ProbeResult::new(probe::PAUSE, Status::Ok);
    p.params.insert("repetitions".into(), 5.into());
    p.effects
        .insert("pause_loop_exits".into(), "not seen".into());
    p.metrics.push(
        Metric::from_samples(PauseFigures::PAUSE_NS.metric, "ns", Better::Lower, &samples).unwrap(),
    );
    p.samples.insert("pause_ns.cpu0".into(), samples);
    p.series.push(Series::Bars {
        name: "pause_ns_per_cpu".into(),
        unit: "ns".into(),
        labels: vec!["cpu0".into()],
        values: vec![24.5],
    });
    p.duration_s = 0.25;
    fp.probes.push(p);
    fp.probes.push(ProbeResult {
        reason: Some("needs two CPUs".into()),
        ..ProbeResult::new(probe::C2C, Status::Skipped)
    });
    fp.verdicts.push(Verdict {
        hazard: "slow_pause".into(),
        title: "PAUSE latency".into(),
        level: Level::Notice,
        summary: "spin counts last 6.1x Haswell's".into(),
        figure: "24.5 ns = 90 cycles".into(),
        reference: "~10 cycles Haswell; ~140 cycles Skylake-SP".into(),
        explanation: "PAUSE is several times the ~10 cycles spin counts were tuned for.".into(),
        borderline: None,
    });
    fp
}

/// A probe's record of a run throttled by a 0.5-CPU quota in 9 of 10 periods, on CPU 0.
pub fn throttled_by_quota() -> super::disturbance::Disturbance {
    use super::disturbance::{Disturbance, DisturbedBy};
    Disturbance {
        by: vec![DisturbedBy::CpuQuota],
        wall_s: 1.0,
        cpus: vec![0],
        cpu_quota_cpus: Some(0.5),
        periods: Some(10),
        throttled_periods: Some(9),
        throttled_s: Some(0.4),
        steal_ratio: None,
        others_busy_cpus: None,
        run_queue_wait_ratio: None,
    }
}
