//! The InnoDB spin finding's sentences: where the spin is, how it was known, the knobs this
//! process runs with, what a round costs at this CPU's PAUSE, and which knob to try.

use crate::format::{group_thousands, human_ns, pct};
use crate::spin::innodb::{
    BACKOFF_SOURCE, InnodbSpinCost, Knob, KnobValue, MARIADB_SOURCE, MYSQL_SOURCE, Server,
    SpinShape, ValueFrom,
};

/// `threads spin in MariaDB's InnoDB lock waits (innodb_spin_wait_delay = 4)`.
pub fn title(server: Server, delay: Option<&KnobValue>) -> String {
    let knob = delay
        .and_then(|k| Some(format!(" ({} = {})", k.knob.name(), k.value?)))
        .unwrap_or_default();
    format!(
        "threads spin in {}'s InnoDB lock waits{knob}",
        server.name()
    )
}

/// `threads spin in MariaDB's reference-count back-off (LF_BACKOFF)`.
pub fn backoff_title(server: Server) -> String {
    format!(
        "threads spin in {}'s reference-count back-off (LF_BACKOFF)",
        server.name()
    )
}

/// What to do about the back-off: no setting sizes it; the references come from the same
/// contention.
pub const BACKOFF_ADVICE: &str = "The back-off has no setting (my_cpu_relax_multiplier is \
    calibrated at start-up): a thread waits here while others still reference what it \
    releases; under a commit (ha_commit_trans in its callers), other sessions converting its \
    row locks. It grows when the lock waits spin less (innodb_spin_wait_delay lowered): weigh \
    the throughput, not this share. Fewer sessions on the hot rows is what shrinks it: spread \
    the writes, batch them, or cap the concurrent writers.";

/// `30.6% of all samples in InnoDB's spin: f 15.9%, g 9.4%, h 1.5% (back-off)`.
pub fn share(share: f64, functions: &[(&str, f64, SpinShape)]) -> String {
    format!(
        "{} of all samples in InnoDB's spin: {}",
        pct(share, 1),
        functions
            .iter()
            .map(|(f, s, shape)| {
                let what = match shape {
                    SpinShape::LockSpin => "",
                    SpinShape::Backoff => " (back-off)",
                };
                format!("{f} {}{what}", pct(*s, 1))
            })
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// How the spin was known: from the code (`function` reads the multiplier with
/// `instruction`), or by its name.
pub fn recognised(server: Server, by_code: Option<(&str, &str)>) -> String {
    let multiplier = server.multiplier().name();
    match by_code {
        Some((function, instruction)) => format!(
            "recognised from the code: {function} reads {}'s {multiplier} (`{instruction}`) to \
             size its PAUSE loop, as InnoDB's waits do (the binary names none of them)",
            server.name()
        ),
        None => "known by its function's name".to_string(),
    }
}

/// Where a value came from, for a reader.
fn from_words(from: ValueFrom, knob: Knob) -> String {
    match from {
        ValueFrom::ProcessMemory => "read from its memory".into(),
        ValueFrom::CommandLine => "from its command line".into(),
        ValueFrom::ServerDefault => format!(
            "the server's default, unread: `SELECT @@{}` tells",
            knob.name()
        ),
        ValueFrom::Unknown => "unreadable: reading /proc/PID/mem needs ptrace permission \
                               (root)"
            .into(),
    }
}

/// `this process runs with innodb_spin_wait_delay = 4, ... (read from its memory)`.
pub fn knobs(knobs: &[KnobValue]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut froms: Vec<(ValueFrom, Vec<String>)> = Vec::new();
    for k in knobs {
        let v = k
            .value
            .map(|v| format!("{} = {v}", k.knob.name()))
            .unwrap_or_else(|| k.knob.name().to_string());
        match froms.iter_mut().find(|(f, _)| *f == k.from) {
            Some((_, vs)) => vs.push(v),
            None => froms.push((k.from, vec![v])),
        }
    }
    for (from, vs) in &froms {
        let knob = knobs
            .iter()
            .find(|k| k.from == *from)
            .map(|k| k.knob)
            .unwrap_or(Knob::SpinWaitDelay);
        parts.push(format!("{} ({})", vs.join(", "), from_words(*from, knob)));
    }
    format!("this process runs with {}", parts.join("; "))
}

const SYMPTOM: &str = "Spinning is the symptom: many sessions want one lock (a hot row, its \
                       index page, the transaction system) and each spins before it sleeps.";

/// What the spin costs here. `cost` is the lock spin's at `pause_ns` (none when a value is
/// unknown), `backoff_ns` one look of the back-off.
pub fn explanation(
    server: Server,
    knobs: &[KnobValue],
    cost: Option<InnodbSpinCost>,
    backoff_ns: Option<f64>,
    pause_ns: Option<f64>,
) -> String {
    let value = |k: Knob| {
        knobs
            .iter()
            .find(|v| v.knob == k)
            .and_then(|v| v.value)
            .map_or("?".to_string(), |v| v.to_string())
    };
    let Some(pause) = pause_ns else {
        return format!(
            "InnoDB's spin waits on PAUSE; the PAUSE cost could not be measured here, see \
             `cpudoctor check`. {SYMPTOM}"
        );
    };
    let mut s = String::new();
    if let Some(c) = cost {
        let round = match server {
            Server::MariaDb => format!(
                "my_cpu_relax_multiplier / 4 x innodb_spin_wait_delay = {} / 4 x {} = {} PAUSEs",
                value(Knob::CpuRelaxMultiplier),
                value(Knob::SpinWaitDelay),
                group_thousands(c.pauses_per_round)
            ),
            Server::MySql => format!(
                "up to innodb_spin_wait_delay x innodb_spin_wait_pause_multiplier = {} x {} = {} \
                 PAUSEs",
                value(Knob::SpinWaitDelay),
                value(Knob::SpinWaitPauseMultiplier),
                group_thousands(c.pauses_per_round)
            ),
        };
        let rounds = c.rounds.map_or("innodb_sync_spin_loops".to_string(), |r| {
            format!("innodb_sync_spin_loops = {r}")
        });
        let whole = c
            .spin_ns
            .map(|ns| format!(", the whole spin {}", human_ns(ns)))
            .unwrap_or_default();
        let source = match server {
            Server::MariaDb => MARIADB_SOURCE,
            Server::MySql => MYSQL_SOURCE,
        };
        s.push_str(&format!(
            "InnoDB spins up to {rounds} rounds of {round} between tries, then sleeps in a \
             futex: one round lasts {} at this CPU's {pause:.1} ns per PAUSE{whole} ({source}).",
            human_ns(c.round_ns)
        ));
    } else if let Some(b) = backoff_ns {
        s.push_str(&format!(
            "MariaDB's back-off spins {} PAUSEs ({}) at this CPU's {pause:.1} ns per PAUSE \
             between looks at a count of references, for as long as other threads hold one \
             ({BACKOFF_SOURCE}).",
            value(Knob::CpuRelaxMultiplier),
            human_ns(b)
        ));
    } else {
        s.push_str(&format!(
            "InnoDB's lock spin waits on PAUSE at this CPU's {pause:.1} ns per PAUSE; its knobs' \
             values are not all known, so its length is not given."
        ));
    }
    format!("{s} {SYMPTOM}")
}

/// What to do: the knob, its value now, what to try.
pub fn advice(server: Server, delay: Option<&KnobValue>, rounds: Option<&KnobValue>) -> String {
    let now = |k: Option<&KnobValue>| {
        k.and_then(|k| k.value)
            .map(|v| format!(" (now {v})"))
            .unwrap_or_default()
    };
    let first = match delay.and_then(|d| d.value) {
        Some(0) => "innodb_spin_wait_delay is already 0: what spins is the re-reading of the \
                    lock word between tries; fewer sessions on the hot lock is what is left."
            .to_string(),
        _ => format!(
            "Lower innodb_spin_wait_delay{}, the PAUSEs between tries, and measure: `SET GLOBAL \
             innodb_spin_wait_delay=0` (or 1, 2) under the same load, then compare the \
             throughput; it takes effect at once, and the value that wins belongs in the \
             server's configuration file.",
            now(delay)
        ),
    };
    let multiplier = match server {
        Server::MariaDb => "",
        Server::MySql => {
            " innodb_spin_wait_pause_multiplier scales every PAUSE run (lower it where PAUSE is \
             slow)."
        }
    };
    format!(
        "{first} innodb_sync_spin_loops{} bounds the rounds before a thread sleeps.{multiplier} \
         The cause is the contention: spread the hot row's writes (a row per client or shard, \
         summed when read), batch them, or cap the concurrent writers (thread_handling=\
         pool-of-threads, a smaller client pool).",
        now(rounds)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(knob: Knob, value: u64, from: ValueFrom) -> KnobValue {
        KnobValue {
            knob,
            value: Some(value),
            from,
        }
    }

    #[test]
    fn the_knob_and_its_value_are_named() {
        let d = kv(Knob::SpinWaitDelay, 4, ValueFrom::ProcessMemory);
        let r = kv(Knob::SyncSpinLoops, 30, ValueFrom::ProcessMemory);
        let m = kv(Knob::CpuRelaxMultiplier, 100, ValueFrom::ProcessMemory);
        assert_eq!(
            title(Server::MariaDb, Some(&d)),
            "threads spin in MariaDB's InnoDB lock waits (innodb_spin_wait_delay = 4)"
        );
        let a = advice(Server::MariaDb, Some(&d), Some(&r));
        assert!(a.contains("innodb_spin_wait_delay (now 4)"), "{a}");
        assert!(a.contains("SET GLOBAL innodb_spin_wait_delay=0"), "{a}");
        assert!(!a.contains("glibc") && !a.contains(".NET"), "{a}");
        let k = knobs(&[m, d, r]);
        assert_eq!(
            k,
            "this process runs with my_cpu_relax_multiplier = 100, innodb_spin_wait_delay = 4, \
             innodb_sync_spin_loops = 30 (read from its memory)"
        );
        let c = crate::spin::innodb::spin_cost(100, Some(30), 24.4);
        let e = explanation(Server::MariaDb, &[m, d, r], Some(c), None, Some(24.4));
        assert!(e.contains("100 / 4 x 4 = 100 PAUSEs"), "{e}");
        assert!(e.contains("one round lasts 2.4 us"), "{e}");
        assert!(e.contains("the whole spin 73.2 us"), "{e}");
        assert!(!e.contains("glibc") && !e.contains(".NET"), "{e}");
        let d0 = kv(Knob::SpinWaitDelay, 0, ValueFrom::ProcessMemory);
        assert!(advice(Server::MariaDb, Some(&d0), Some(&r)).contains("already 0"));
    }
}
