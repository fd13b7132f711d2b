//! Host facts: CPU identity and microarchitecture, topology and caches, kernel, hypervisor,
//! PMU, huge pages, split-lock handling. Everything a reader of a fingerprint needs to know
//! about the machine it came from, gathered once. Missing files give absent fields, never an
//! error: a fact that cannot be read is recorded as unknown. [`cgroup`] (a process's cgroup
//! limits and CPU counters) and [`cpu_time`] (busy, idle and stolen CPU time from /proc/stat)
//! are read around a recording, for `diagnose` to say what held a waiting thread's CPU, and
//! around every probe run by [`disturbance`], which says what else the CPUs did meanwhile.

pub mod cgroup;
pub mod cpu_time;
pub mod cpuinfo;
pub mod disturbance;
pub mod hypervisor;
pub mod kernel;
pub mod meminfo;
pub mod pmu;
pub mod smaps;
pub mod topology;
pub mod uarch;

use serde::{Deserialize, Serialize};
use std::fs;
use std::path::Path;

pub use hypervisor::Hypervisor;
pub use kernel::{SplitLockMode, SplitLockState, SplitLockTrap, ThpEnabled, ThpMode};
pub use pmu::PmuStatus;
pub use topology::{Cache, CpuPlace, Topology};

/// CPU identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuIdentity {
    /// `GenuineIntel`, `AuthenticAMD`, ...
    pub vendor: String,
    /// Family (decimal, extended family included).
    pub family: u32,
    /// Model (decimal, extended model included).
    pub model: u32,
    /// Stepping.
    pub stepping: u32,
    /// Marketing name from cpuinfo.
    pub model_name: String,
    /// Microarchitecture (`Skylake-SP`, `Zen 4`, ...) or `unknown`.
    pub microarchitecture: String,
    /// Microcode revision, when cpuinfo shows it.
    pub microcode: Option<String>,
    /// Architecture the binary runs on (`x86_64`, ...).
    pub arch: String,
    /// Whether the TSC is invariant (`constant_tsc` and `nonstop_tsc`).
    pub tsc_invariant: bool,
    /// Selected cpuinfo flags that matter to the probes (vector widths, TSC, split-lock).
    pub flags_of_interest: Vec<String>,
}

/// A CPU as CPUID names it. The brand string does not tell designs apart in a guest ("AMD
/// EPYC" is Zen 2 to Zen 5 there, "Intel(R) Xeon(R) Processor" several Intel generations);
/// vendor, family, model and stepping do. Fleet groups, `diff`'s machine facts and the corpus
/// of real machines key on this.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct CpuId {
    /// `GenuineIntel`, `AuthenticAMD`, ...
    pub vendor: String,
    /// Family (decimal, extended family included).
    pub family: u32,
    /// Model (decimal, extended model included).
    pub model: u32,
    /// Stepping.
    pub stepping: u32,
}

impl std::fmt::Display for CpuId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} family {} model {} stepping {}",
            self.vendor, self.family, self.model, self.stepping
        )
    }
}

impl CpuIdentity {
    /// The CPUID identity.
    pub fn id(&self) -> CpuId {
        CpuId {
            vendor: self.vendor.clone(),
            family: self.family,
            model: self.model,
            stepping: self.stepping,
        }
    }
}

/// Every host fact in a fingerprint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    /// Host name, for telling fingerprints apart.
    pub hostname: Option<String>,
    /// CPU identity.
    pub cpu: CpuIdentity,
    /// Logical CPUs online.
    pub logical_cpus: usize,
    /// Logical CPUs this process may run on (cpuset, taskset).
    pub allowed_cpus: Vec<usize>,
    /// Topology and caches from sysfs; absent when sysfs is not readable.
    pub topology: Option<Topology>,
    /// Kernel release (`uname -r`).
    pub kernel_release: Option<String>,
    /// Hypervisor, or absent on bare metal.
    pub hypervisor: Option<Hypervisor>,
    /// Hardware PMU availability.
    pub pmu: PmuStatus,
    /// `kernel.perf_event_paranoid`.
    pub perf_event_paranoid: Option<i32>,
    /// Transparent huge page mode.
    pub thp: Option<ThpMode>,
    /// Split-lock detection and mitigation.
    pub split_lock: SplitLockState,
    /// The measuring process's cgroup: its memory, CPU and pids limits and what it had used
    /// of them when the machine was read. Absent where no cgroup filesystem is mounted, and in
    /// files saved before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<cgroup::CgroupFacts>,
}

/// cpuinfo flags recorded in the fingerprint because probes and hazards read them.
const FLAGS_OF_INTEREST: &[&str] = &[
    "constant_tsc",
    "nonstop_tsc",
    "tsc_known_freq",
    "hypervisor",
    "split_lock_detect",
    "bus_lock_detect",
    "avx2",
    "avx512f",
    "pdpe1gb",
    "waitpkg",
];

fn read_trim(path: impl AsRef<Path>) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

impl Machine {
    /// Gathers the facts of the machine this runs on.
    pub fn detect() -> Machine {
        let cpuinfo = read_trim("/proc/cpuinfo")
            .and_then(|t| cpuinfo::parse_cpuinfo(&t))
            .unwrap_or_default();
        let topology = topology::read_topology(Path::new("/sys/devices/system"));
        let paranoid =
            read_trim("/proc/sys/kernel/perf_event_paranoid").and_then(|s| s.parse().ok());
        let cmdline = read_trim("/proc/cmdline").unwrap_or_default();
        let thp_dir = Path::new("/sys/kernel/mm/transparent_hugepage");
        let thp = read_trim(thp_dir.join("enabled"))
            .and_then(|t| kernel::parse_bracketed_choice(&t))
            .and_then(|word| ThpEnabled::from_word(&word))
            .map(|enabled| ThpMode {
                enabled,
                defrag: read_trim(thp_dir.join("defrag"))
                    .and_then(|t| kernel::parse_bracketed_choice(&t)),
            });
        let split_lock = kernel::split_lock_state(
            cpuinfo.has_flag("split_lock_detect"),
            cpuinfo.has_flag("bus_lock_detect"),
            kernel::cmdline_value(&cmdline, "split_lock_detect"),
            read_trim("/proc/sys/kernel/split_lock_mitigate").and_then(|s| s.parse().ok()),
        );
        let logical_cpus = topology
            .as_ref()
            .map(|t| t.online_cpus.len())
            .unwrap_or(cpuinfo.processors)
            .max(1);
        Machine {
            hostname: read_trim("/proc/sys/kernel/hostname"),
            cpu: identity(&cpuinfo),
            logical_cpus,
            allowed_cpus: allowed_cpus(),
            topology,
            kernel_release: read_trim("/proc/sys/kernel/osrelease"),
            hypervisor: hypervisor::detect_hypervisor(),
            pmu: pmu::probe_pmu(paranoid),
            perf_event_paranoid: paranoid,
            thp,
            split_lock,
            cgroup: cgroup::self_facts(),
        }
    }

    /// A one-line description of the CPU: `AMD EPYC (Zen 4, family 25 model 17 stepping 1)`.
    pub fn cpu_line(&self) -> String {
        let c = &self.cpu;
        format!(
            "{} ({}, family {} model {} stepping {})",
            if c.model_name.is_empty() {
                &c.vendor
            } else {
                &c.model_name
            },
            c.microarchitecture,
            c.family,
            c.model,
            c.stepping
        )
    }
}

/// CPU identity from parsed cpuinfo.
pub fn identity(info: &cpuinfo::CpuInfo) -> CpuIdentity {
    CpuIdentity {
        vendor: info.vendor_id.clone(),
        family: info.family,
        model: info.model,
        stepping: info.stepping,
        model_name: info.model_name.clone(),
        microarchitecture: uarch::microarchitecture(
            &info.vendor_id,
            info.family,
            info.model,
            info.stepping,
        )
        .to_string(),
        microcode: info.microcode.clone(),
        arch: crate::arch::TARGET_ARCH.to_string(),
        tsc_invariant: info.has_flag("constant_tsc") && info.has_flag("nonstop_tsc"),
        flags_of_interest: FLAGS_OF_INTEREST
            .iter()
            .filter(|f| info.has_flag(f))
            .map(|f| f.to_string())
            .collect(),
    }
}

/// The CPUs this process may run on, ascending: a host fact (cgroups, taskset) that pinning
/// and the machine description both start from.
pub fn allowed_cpus() -> Vec<usize> {
    match nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)) {
        Ok(set) => (0..nix::sched::CpuSet::count())
            .filter(|&c| set.is_set(c).unwrap_or(false))
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_of_the_zen4_fixture() {
        let text = include_str!("../../tests/fixtures/cpuinfo/amd-zen4-epyc-kvm.txt");
        let id = identity(&cpuinfo::parse_cpuinfo(text).unwrap());
        assert_eq!(id.microarchitecture, "Zen 4");
        assert!(id.tsc_invariant);
        assert!(id.flags_of_interest.contains(&"avx512f".to_string()));
        assert!(
            !id.flags_of_interest
                .contains(&"split_lock_detect".to_string())
        );
    }

    #[test]
    fn detect_reads_this_machine_without_failing() {
        let m = Machine::detect();
        assert!(m.logical_cpus >= 1);
        assert!(!m.allowed_cpus.is_empty());
    }
}
