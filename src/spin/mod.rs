//! The spin model: how long each runtime's locks spin on PAUSE before they block, given a
//! PAUSE cost and a core count. Pure arithmetic, so another machine can be modelled here by
//! giving its PAUSE cost (`cpudoctor spin --pause-ns 43 --cores 24`).
//!
//! [`dotnet`] holds the seed's .NET legacy policy in full (rounds, totals, the last round that
//! sets the worst extra delay after a release) and the time-normalized policy that replaced
//! it; [`runtimes`] holds the table of spin-before-block policies by runtime; [`policy`] turns
//! the two .NET policies into spin plans (PAUSE runs between looks at the lock) for the model
//! lock of the handoff experiment.

pub mod dotnet;
pub mod innodb;
pub mod policy;
pub mod runtimes;

pub use dotnet::{LegacySpin, NormalizedSpin};
pub use runtimes::{RUNTIMES, SpinBudget, SpinCost, SpinPolicy, spin_cost};

use serde::{Deserialize, Serialize};

/// Where the PAUSE cost a model is computed at came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PauseSource {
    /// Given by the user (`--pause-ns`), to model another CPU.
    Given,
    /// Measured on this machine.
    Measured,
}

/// The spin model at one PAUSE cost and core count: what `cpudoctor spin --json` prints.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpinModel {
    /// The core count the .NET legacy limit scales with (`--cores`, or this machine's logical
    /// CPUs).
    pub cores: u64,
    /// .NET's legacy policy at this core count.
    pub dotnet_legacy: LegacyModel,
    /// .NET's time-normalized policy at this PAUSE cost.
    pub dotnet_normalized: NormalizedModel,
    /// One PAUSE, ns.
    pub pause_ns: f64,
    /// Whether `pause_ns` was given or measured.
    pub pause_source: PauseSource,
    /// Each runtime's spin before blocking, in the order of [`RUNTIMES`].
    pub runtimes: Vec<SpinCost>,
}

/// .NET's legacy policy: its schedule and what it costs at one PAUSE cost.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LegacyModel {
    /// The last round, ns: the longest a waiter keeps spinning after the lock is freed.
    pub last_round_ns: f64,
    /// The rounds of PAUSEs at this core count.
    pub schedule: LegacySpin,
    /// Total spin before blocking, ns.
    pub total_ns: f64,
}

/// .NET's time-normalized policy: its schedule and what it costs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NormalizedModel {
    /// The longest iteration, ns: the longest a waiter spins on after the lock is freed.
    pub longest_iteration_ns: f64,
    /// The iterations of PAUSEs at this PAUSE cost.
    pub schedule: NormalizedSpin,
    /// Total spin before waiting, ns.
    pub total_ns: f64,
}

impl SpinModel {
    /// The model at `pause_ns` per PAUSE on `cores` cores.
    pub fn new(pause_ns: f64, pause_source: PauseSource, cores: u64) -> SpinModel {
        let legacy = LegacySpin::new(cores);
        let normalized = NormalizedSpin::new(pause_ns);
        SpinModel {
            cores,
            dotnet_legacy: LegacyModel {
                last_round_ns: legacy.last_round_ns(pause_ns),
                total_ns: legacy.total_ns(pause_ns),
                schedule: legacy,
            },
            dotnet_normalized: NormalizedModel {
                longest_iteration_ns: normalized.longest_iteration_ns(),
                total_ns: normalized.total_ns(),
                schedule: normalized,
            },
            pause_ns,
            pause_source,
            runtimes: RUNTIMES
                .iter()
                .map(|p| spin_cost(p, pause_ns, cores))
                .collect(),
        }
    }
}
