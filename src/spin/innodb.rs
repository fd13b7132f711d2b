//! InnoDB's spin as the server sets it: whose InnoDB (MariaDB or MySQL), which spin, the
//! knobs that size it and where their values came from, and what a round costs in PAUSEs.
//! Pure vocabulary and arithmetic; `diagnose::analyse::innodb` recognises the spin in a process and
//! reads the values.

use serde::{Deserialize, Serialize};

/// Where the formula comes from.
pub const MARIADB_SOURCE: &str = "MariaDB storage/innobase/sync/srw_lock.cc: srw_pause_delay() \
    = my_cpu_relax_multiplier / 4 * srv_spin_wait_delay PAUSEs a round, up to \
    srv_n_spin_wait_rounds rounds; mysys/my_cpu.c: the multiplier is 200, or 100 where a PAUSE \
    takes over 30 TSC cycles";
/// MySQL's.
pub const MYSQL_SOURCE: &str = "MySQL storage/innobase/ut/ut0ut.cc: ut_delay(delay) spins \
    delay * innodb_spin_wait_pause_multiplier PAUSEs, delay drawn up to innodb_spin_wait_delay, \
    up to innodb_sync_spin_loops rounds";
/// MariaDB's back-off.
pub const BACKOFF_SOURCE: &str = "MariaDB include/my_cpu.h: LF_BACKOFF() spins \
    my_cpu_relax_multiplier PAUSEs between looks";

/// Whose InnoDB.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Server {
    /// MariaDB 10.6+: srw_lock spins scaled by `my_cpu_relax_multiplier`.
    MariaDb,
    /// MySQL 8: `ut_delay` scaled by `innodb_spin_wait_pause_multiplier`.
    MySql,
}

impl Server {
    /// Its name for a reader.
    pub fn name(self) -> &'static str {
        match self {
            Server::MariaDb => "MariaDB",
            Server::MySql => "MySQL",
        }
    }

    /// Its PAUSE multiplier.
    pub fn multiplier(self) -> Knob {
        match self {
            Server::MariaDb => Knob::CpuRelaxMultiplier,
            Server::MySql => Knob::SpinWaitPauseMultiplier,
        }
    }
}

/// What an InnoDB spin site is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpinShape {
    /// A lock's spin: rounds of PAUSEs between tries, then a futex wait (MariaDB's
    /// `srw_mutex`/`ssux_lock` waits; MySQL's mutex and rw-lock spin through `ut_delay`).
    LockSpin,
    /// MariaDB's `LF_BACKOFF`: `my_cpu_relax_multiplier` PAUSEs between looks, unbounded: the
    /// lock-free hash's and a committing transaction's wait for references to drop.
    Backoff,
}

/// A server setting the spin reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Knob {
    /// MariaDB's `my_cpu_relax_multiplier` (calibrated at start-up, no setting).
    #[serde(rename = "my_cpu_relax_multiplier")]
    CpuRelaxMultiplier,
    /// `innodb_spin_wait_delay` (`srv_spin_wait_delay`).
    #[serde(rename = "innodb_spin_wait_delay")]
    SpinWaitDelay,
    /// `innodb_sync_spin_loops` (`srv_n_spin_wait_rounds`).
    #[serde(rename = "innodb_sync_spin_loops")]
    SyncSpinLoops,
    /// MySQL's `innodb_spin_wait_pause_multiplier` (`ut::spin_wait_pause_multiplier`).
    #[serde(rename = "innodb_spin_wait_pause_multiplier")]
    SpinWaitPauseMultiplier,
}

impl Knob {
    /// The name a reader sets or reads it by.
    pub fn name(self) -> &'static str {
        match self {
            Knob::CpuRelaxMultiplier => "my_cpu_relax_multiplier",
            Knob::SpinWaitDelay => "innodb_spin_wait_delay",
            Knob::SyncSpinLoops => "innodb_sync_spin_loops",
            Knob::SpinWaitPauseMultiplier => "innodb_spin_wait_pause_multiplier",
        }
    }

    /// The global variable behind it, as the symbol table spells it.
    pub(crate) fn variable(self) -> &'static str {
        match self {
            Knob::CpuRelaxMultiplier => "my_cpu_relax_multiplier",
            Knob::SpinWaitDelay => "srv_spin_wait_delay",
            Knob::SyncSpinLoops => "srv_n_spin_wait_rounds",
            Knob::SpinWaitPauseMultiplier => "_ZN2ut26spin_wait_pause_multiplierE",
        }
    }

    /// The server's default, when it has one (the multiplier of MariaDB is calibrated).
    /// MariaDB 10.11 and MySQL 8.0 system-variable documentation.
    pub fn default_value(self, server: Server) -> Option<u64> {
        match (self, server) {
            (Knob::CpuRelaxMultiplier, _) => None,
            (Knob::SpinWaitDelay, Server::MariaDb) => Some(4),
            (Knob::SpinWaitDelay, Server::MySql) => Some(6),
            (Knob::SyncSpinLoops, _) => Some(30),
            (Knob::SpinWaitPauseMultiplier, _) => Some(50),
        }
    }

    /// Largest value the server accepts: a value read past it was not this variable.
    pub(crate) fn upper_bound(self) -> u64 {
        match self {
            Knob::CpuRelaxMultiplier => 10_000,
            Knob::SpinWaitDelay => 6_000,
            Knob::SyncSpinLoops => u64::from(u32::MAX),
            Knob::SpinWaitPauseMultiplier => 100,
        }
    }

    /// Whether `SET GLOBAL` and the command line set it.
    pub fn settable(self) -> bool {
        self != Knob::CpuRelaxMultiplier
    }
}

pub(crate) const KNOBS: [Knob; 4] = [
    Knob::CpuRelaxMultiplier,
    Knob::SpinWaitDelay,
    Knob::SyncSpinLoops,
    Knob::SpinWaitPauseMultiplier,
];

/// Where a knob's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ValueFrom {
    /// Read from the process's memory at the end of the recording: what it runs with.
    ProcessMemory,
    /// The server's command line (`--innodb-spin-wait-delay=N`); a `SET GLOBAL` since is not
    /// seen.
    CommandLine,
    /// Not read: the server's default, unless a configuration file or `SET GLOBAL` changed it.
    ServerDefault,
    /// Not known (MariaDB's calibrated multiplier, its memory unreadable).
    Unknown,
}

/// A knob and its value in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct KnobValue {
    /// The knob.
    pub knob: Knob,
    /// Its value, when known.
    pub value: Option<u64>,
    /// Where the value came from.
    pub from: ValueFrom,
}

/// What one spin costs: PAUSEs a round, rounds, and their time at a PAUSE cost.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct InnodbSpinCost {
    /// PAUSEs a round.
    pub pauses_per_round: u64,
    /// Rounds before the futex wait (`None` for the back-off, which has no bound).
    pub rounds: Option<u64>,
    /// One round, in ns.
    pub round_ns: f64,
    /// The whole spin before the wait, in ns (`None` for the back-off).
    pub spin_ns: Option<f64>,
}

/// PAUSEs of one round: MariaDB's `multiplier / 4 * delay` (integer arithmetic, as the
/// server does it), MySQL's `delay * multiplier` at most (its rounds draw a delay up to
/// `innodb_spin_wait_delay`); for the back-off, `multiplier` a look.
pub fn pauses_per_round(
    server: Server,
    shape: SpinShape,
    multiplier: u64,
    delay: Option<u64>,
) -> Option<u64> {
    match (shape, server) {
        (SpinShape::Backoff, _) => Some(multiplier),
        (SpinShape::LockSpin, Server::MariaDb) => Some(multiplier / 4 * delay?),
        (SpinShape::LockSpin, Server::MySql) => Some(multiplier * delay?),
    }
}

/// The cost of a spin at `pause_ns` per PAUSE.
pub fn spin_cost(pauses_per_round: u64, rounds: Option<u64>, pause_ns: f64) -> InnodbSpinCost {
    let round_ns = pauses_per_round as f64 * pause_ns;
    InnodbSpinCost {
        pauses_per_round,
        rounds,
        round_ns,
        spin_ns: rounds.map(|r| r as f64 * round_ns),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mariadbs_round_is_the_multiplier_over_four_times_the_delay() {
        let p = pauses_per_round(Server::MariaDb, SpinShape::LockSpin, 100, Some(4));
        assert_eq!(p, Some(100));
        assert_eq!(
            pauses_per_round(Server::MariaDb, SpinShape::LockSpin, 200, Some(0)),
            Some(0)
        );
        // 30 rounds of 100 PAUSEs at 24.4 ns: 73.2 us before the futex wait.
        let c = spin_cost(100, Some(30), 24.4);
        assert!((c.spin_ns.unwrap() - 73_200.0).abs() < 1e-6);
        assert_eq!(
            pauses_per_round(Server::MySql, SpinShape::LockSpin, 50, Some(6)),
            Some(300)
        );
        assert_eq!(
            pauses_per_round(Server::MariaDb, SpinShape::Backoff, 200, None),
            Some(200)
        );
    }
}
