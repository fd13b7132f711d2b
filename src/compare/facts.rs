//! The machine facts a comparison shows (CPU, microarchitecture, kernel, THP mode,
//! hypervisor...), each with the text shown and the raw value it is compared by. Facts are
//! compared on their raw values, never on the rounded text: two sizes that print alike must
//! not read as equal, and a figure rounded for display must not flip between two runs of one
//! machine at a rounding boundary.

use crate::schema::Fingerprint;
use crate::words::machine::{caches_line, split_lock_words, topology_line};

/// Relative difference below which two TSC frequencies are one clock. A calibrated TSC differs
/// by a few kHz (a few parts per million) from run to run of one machine, while CPU models
/// of one family differ by 100 MHz or more (about 4% at 2.5 GHz): 0.5% sits far from both.
pub const TSC_TOLERANCE: f64 = 0.005;

/// What a fact is compared by.
#[derive(Debug, Clone, PartialEq)]
pub enum FactValue {
    /// An identity (names, counts, sizes in bytes): equal or not.
    Exact(String),
    /// A measured frequency in Hz, equal within [`TSC_TOLERANCE`]; `None` when not measured.
    Frequency(Option<f64>),
}

/// One machine fact of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct MachineFact {
    /// What the fact is (`CPU`, `Kernel`, ...).
    pub name: &'static str,
    /// The value as shown.
    pub shown: String,
    /// The raw value it is compared by.
    pub value: FactValue,
}

impl MachineFact {
    /// Whether this fact is the same as `other` (the same fact of another run).
    pub fn same_as(&self, other: &MachineFact) -> bool {
        match (&self.value, &other.value) {
            (FactValue::Exact(a), FactValue::Exact(b)) => a == b,
            (FactValue::Frequency(Some(a)), FactValue::Frequency(Some(b))) => {
                (a - b).abs() <= TSC_TOLERANCE * a.abs().min(b.abs())
            }
            (FactValue::Frequency(a), FactValue::Frequency(b)) => a.is_none() && b.is_none(),
            _ => false,
        }
    }
}

/// A fact whose text is its raw value.
fn exact(name: &'static str, shown: String) -> MachineFact {
    MachineFact {
        name,
        value: FactValue::Exact(shown.clone()),
        shown,
    }
}

/// A fact shown one way and compared by `raw`.
fn exact_by(name: &'static str, shown: String, raw: String) -> MachineFact {
    MachineFact {
        name,
        shown,
        value: FactValue::Exact(raw),
    }
}

/// The machine facts of a run, in reading order.
pub fn machine_facts(fp: &Fingerprint) -> Vec<MachineFact> {
    let m = &fp.machine;
    let c = &m.cpu;
    let unknown = || "unknown".to_string();
    let topology = m.topology.as_ref();
    // Sizes in bytes, so two caches that print alike still compare by what they are.
    let caches_raw = topology.map_or_else(unknown, |t| {
        let raw: Vec<_> = t
            .caches
            .iter()
            .filter(|c| c.kind != "Instruction")
            .map(|c| (c.level, &c.kind, c.size_bytes, c.instances))
            .collect();
        format!("{raw:?}")
    });
    vec![
        // The CPU by CPUID first: a guest's brand string ("AMD EPYC") is shared by designs
        // years apart, so two files that print the same CPU name may not be the same CPU.
        exact("CPU", c.id().to_string()),
        exact("Microarchitecture", c.microarchitecture.clone()),
        exact(
            "Brand string",
            if c.model_name.is_empty() {
                c.vendor.clone()
            } else {
                c.model_name.clone()
            },
        ),
        exact("Microcode", c.microcode.clone().unwrap_or_else(unknown)),
        exact("Logical CPUs", m.logical_cpus.to_string()),
        exact("Topology", topology.map_or_else(unknown, topology_line)),
        exact_by(
            "Caches",
            topology.map_or_else(unknown, caches_line),
            caches_raw,
        ),
        exact("Kernel", m.kernel_release.clone().unwrap_or_else(unknown)),
        exact(
            "Hypervisor",
            m.hypervisor
                .as_ref()
                .map_or("none (bare metal)".to_string(), |h| h.vendor.clone()),
        ),
        exact(
            "THP mode",
            m.thp.as_ref().map_or_else(unknown, |t| {
                format!(
                    "{} (defrag {})",
                    t.enabled,
                    t.defrag.as_deref().unwrap_or("unknown")
                )
            }),
        ),
        exact(
            "PMU",
            if m.pmu.usable {
                "hardware counters".to_string()
            } else {
                "none".to_string()
            },
        ),
        exact(
            "Split-lock handling",
            split_lock_words(
                m.split_lock.effective,
                fp.split_lock_seen().map(|s| s.mechanism),
            ),
        ),
        MachineFact {
            name: "TSC frequency",
            shown: fp
                .clock
                .tsc_hz
                .map_or("not used".to_string(), |hz| format!("{:.1} MHz", hz / 1e6)),
            value: FactValue::Frequency(fp.clock.tsc_hz),
        },
        exact("Host name", m.hostname.clone().unwrap_or_else(unknown)),
        exact("cpudoctor version", fp.tool.version.clone()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::test_support::sample_fingerprint;

    fn fact<'a>(facts: &'a [MachineFact], name: &str) -> &'a MachineFact {
        facts.iter().find(|f| f.name == name).unwrap()
    }

    #[test]
    fn tsc_frequencies_a_rounding_boundary_apart_are_the_same_clock() {
        // Regression guard: 2.594999 and 2.595001 GHz printed as "2.59 GHz" and "2.60 GHz"
        // and read as a different machine.
        let (mut a, mut b) = (sample_fingerprint(), sample_fingerprint());
        a.clock.tsc_hz = Some(2_594_999_000.0);
        b.clock.tsc_hz = Some(2_595_001_000.0);
        let (fa, fb) = (machine_facts(&a), machine_facts(&b));
        assert!(fact(&fa, "TSC frequency").same_as(fact(&fb, "TSC frequency")));
        // Another CPU model: 100 MHz apart.
        b.clock.tsc_hz = Some(2_695_000_000.0);
        let fb = machine_facts(&b);
        assert!(!fact(&fa, "TSC frequency").same_as(fact(&fb, "TSC frequency")));
        // Measured in one run only.
        b.clock.tsc_hz = None;
        let fb = machine_facts(&b);
        assert!(!fact(&fa, "TSC frequency").same_as(fact(&fb, "TSC frequency")));
        assert_eq!(fact(&fb, "TSC frequency").shown, "not used");
    }

    #[test]
    fn caches_compare_by_size_in_bytes_not_by_their_text() {
        let real = || {
            crate::schema::json::from_json_bytes(include_bytes!(
                "../../tests/fixtures/fingerprints/zen4-kvm-check.json"
            ))
            .unwrap()
        };
        let (a, mut b) = (real(), real());
        // 1 MiB and 1 byte prints as "1.00 MiB", like 1 MiB would print at two decimals.
        let l2 = b
            .machine
            .topology
            .as_mut()
            .unwrap()
            .caches
            .iter_mut()
            .find(|c| c.level == 2)
            .unwrap();
        l2.size_bytes += 1;
        let (fa, fb) = (machine_facts(&a), machine_facts(&b));
        assert!(!fact(&fa, "Caches").same_as(fact(&fb, "Caches")));
        assert!(fact(&fa, "Caches").same_as(fact(&machine_facts(&a), "Caches")));
    }
}
