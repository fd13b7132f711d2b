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
