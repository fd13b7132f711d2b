//! Wiring one run: detect the machine, calibrate the clock, run the chosen probes, judge the
//! hazards, and hand back the fingerprint. The binary calls this; so do integration tests.

use crate::error::InputError;
use crate::hazards;
use crate::machine::Machine;
use crate::measure::{Clock, Progress, pin};
use crate::probes::{self, Probe, ProbeContext, ProbeOptions};
use crate::report::schema::{Fingerprint, SCHEMA_VERSION, Tool};

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
    let mut fp = Fingerprint {
        schema_version: SCHEMA_VERSION,
        tool: Tool::this(),
        command: command.to_string(),
        created_unix_s,
        machine: host.machine.clone(),
        clock: host.clock.info().clone(),
        probes,
        verdicts: Vec::new(),
    };
    fp.verdicts = hazards::judge_all(&fp);
    fp
}

#[cfg(test)]
mod tests {
    use super::*;

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
