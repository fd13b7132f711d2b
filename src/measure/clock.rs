//! The clock every probe times with: the time-stamp counter when the CPU says it is invariant
//! (`constant_tsc` and `nonstop_tsc`), else `clock_gettime(CLOCK_MONOTONIC)`.
//!
//! TSC ticks are not core cycles: the TSC runs at a fixed rate whatever the core clock does.
//! Converting ticks to nanoseconds needs the TSC frequency, taken from CPUID where the CPU or
//! hypervisor reports it, and otherwise calibrated against `CLOCK_MONOTONIC_RAW`. The
//! calibration always runs, so a wrong reported figure shows up in the fingerprint.
//!
//! It is also the one place that reads the kernel's clocks by name: monotonic (safe in a
//! forked child), boot time, and thread and process CPU time.

use serde::{Deserialize, Serialize};
#[cfg(target_arch = "x86_64")]
use std::time::Duration;

/// Which counter a [`Clock`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClockSource {
    /// The time-stamp counter (invariant: fixed rate, runs in every C-state).
    Tsc,
    /// `clock_gettime(CLOCK_MONOTONIC)`, in nanoseconds.
    ClockGettime,
}

/// What the fingerprint records about the clock.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClockInfo {
    /// The counter timings were read from.
    pub source: ClockSource,
    /// Why that counter was chosen.
    pub reason: String,
    /// TSC frequency used to turn ticks into nanoseconds, in Hz (absent without a TSC clock).
    pub tsc_hz: Option<f64>,
    /// Where `tsc_hz` came from: `cpuid_0x15`, `hypervisor_cpuid_0x40000010` or `calibrated`.
    pub tsc_hz_source: Option<String>,
    /// TSC frequency calibrated against CLOCK_MONOTONIC_RAW, in Hz, for cross-checking.
    pub tsc_hz_calibrated: Option<f64>,
}

/// A calibrated clock. `now()` returns ticks; [`Clock::ticks_to_ns`] converts.
#[derive(Debug, Clone)]
pub struct Clock {
    info: ClockInfo,
    ns_per_tick: f64,
}

/// Reported and calibrated TSC frequencies further apart than this are a sign the reported one
/// is wrong (a hypervisor leaf left stale after migration, say); the calibrated one wins.
#[cfg(target_arch = "x86_64")]
const REPORTED_TSC_TOLERANCE: f64 = 0.01;

/// Nanoseconds from `CLOCK_MONOTONIC_RAW` (not slewed by NTP, so it calibrates a counter).
#[cfg(target_arch = "x86_64")]
fn monotonic_raw_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC_RAW)
}

/// Nanoseconds of `clock_id` from `clock_gettime`, straight from libc: no allocation, no
/// panic, so it is async-signal-safe (POSIX lists `clock_gettime`).
fn clock_ns(clock_id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: writes only `ts`. The clocks read here exist on every Linux, so the call does
    // not fail; were it to, `ts` stays zero.
    unsafe { libc::clock_gettime(clock_id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Nanoseconds from `CLOCK_MONOTONIC`. Async-signal-safe: a forked child may read it (the
/// split-lock locker times its bursts with it).
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time the calling thread has used, in nanoseconds (`CLOCK_THREAD_CPUTIME_ID`): what a
/// waiting thread burns, which a busy machine cannot inflate the way it does wall time.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Time since boot in ns, suspend included (`CLOCK_BOOTTIME`, the clock of a thread's
/// `starttime` in /proc).
pub fn boot_time_ns() -> u64 {
    clock_ns(libc::CLOCK_BOOTTIME)
}

/// CPU time the whole process has used, in nanoseconds (`CLOCK_PROCESS_CPUTIME_ID`).
pub fn process_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_PROCESS_CPUTIME_ID)
}

impl Clock {
    /// Chooses and calibrates the clock. `tsc_invariant` comes from the machine facts
    /// (`constant_tsc` and `nonstop_tsc` in /proc/cpuinfo).
    pub fn detect(tsc_invariant: bool) -> Clock {
        if !crate::arch::SUPPORTED {
            return Clock::clock_gettime(format!(
                "no TSC support for {}",
                crate::arch::TARGET_ARCH
            ));
        }
        if !tsc_invariant {
            return Clock::clock_gettime(
                "the TSC is not invariant (constant_tsc and nonstop_tsc not both set)".into(),
            );
        }
        Clock::tsc()
    }

    /// A clock on `clock_gettime(CLOCK_MONOTONIC)`.
    pub fn clock_gettime(reason: String) -> Clock {
        Clock {
            info: ClockInfo {
                source: ClockSource::ClockGettime,
                reason,
                tsc_hz: None,
                tsc_hz_source: None,
                tsc_hz_calibrated: None,
            },
            ns_per_tick: 1.0,
        }
    }

    #[cfg(target_arch = "x86_64")]
    fn tsc() -> Clock {
        let Some(calibrated) = calibrate_tsc_hz(Duration::from_millis(10), 5) else {
            return Clock::clock_gettime(
                "the TSC went backwards between CPUs while calibrating: not usable".into(),
            );
        };
        let reported = reported_tsc_hz();
        let (hz, source) = match reported {
            Some((hz, src)) if (hz / calibrated - 1.0).abs() <= REPORTED_TSC_TOLERANCE => {
                (hz, src.to_string())
            }
            _ => (calibrated, "calibrated".to_string()),
        };
        Clock {
            info: ClockInfo {
                source: ClockSource::Tsc,
                reason: "the TSC is invariant (constant_tsc and nonstop_tsc)".into(),
                tsc_hz: Some(hz),
                tsc_hz_source: Some(source),
                tsc_hz_calibrated: Some(calibrated),
            },
            ns_per_tick: 1e9 / hz,
        }
    }

    #[cfg(not(target_arch = "x86_64"))]
    fn tsc() -> Clock {
        unreachable!("detect() never picks the TSC off x86-64")
    }

    /// What the fingerprint records about this clock.
    pub fn info(&self) -> &ClockInfo {
        &self.info
    }

    /// Ticks at the start of a timed region.
    #[inline(always)]
    pub fn start(&self) -> u64 {
        match self.info.source {
            #[cfg(target_arch = "x86_64")]
            ClockSource::Tsc => crate::arch::tsc_start(),
            _ => monotonic_ns(),
        }
    }

    /// Ticks at the end of a timed region.
    #[inline(always)]
    pub fn end(&self) -> u64 {
        match self.info.source {
            #[cfg(target_arch = "x86_64")]
            ClockSource::Tsc => crate::arch::tsc_end(),
            _ => monotonic_ns(),
        }
    }

    /// Converts a tick count to nanoseconds.
    pub fn ticks_to_ns(&self, ticks: u64) -> f64 {
        ticks as f64 * self.ns_per_tick
    }

    /// Nanoseconds per tick (1 for `clock_gettime`).
    pub fn ns_per_tick(&self) -> f64 {
        self.ns_per_tick
    }
}

/// TSC frequency reported by CPUID: leaf 0x15 (Intel, crystal ratio) or the hypervisor timing
/// leaf 0x40000010 (KVM with the feature exposed, VMware).
#[cfg(target_arch = "x86_64")]
fn reported_tsc_hz() -> Option<(f64, &'static str)> {
    let cpuid = raw_cpuid::CpuId::new();
    if let Some(hz) = cpuid
        .get_tsc_info()
        .and_then(|t| t.tsc_frequency())
        .filter(|&hz| hz > 0)
    {
        return Some((hz as f64, "cpuid_0x15"));
    }
    cpuid
        .get_hypervisor_info()
        .and_then(|h| h.tsc_frequency())
        .filter(|&khz| khz > 0)
        .map(|khz| (khz as f64 * 1e3, "hypervisor_cpuid_0x40000010"))
}

/// Brackets whose two clock reads are further apart than this were interrupted between
/// them; the stamp is taken again.
#[cfg(target_arch = "x86_64")]
const MAX_BRACKET_NS: u64 = 20_000;

/// TSC ticks per second against CLOCK_MONOTONIC_RAW over `rounds` windows of `window`; the
/// median round. Each end point brackets the TSC read between two clock reads, retried until
/// the bracket is tight (not preempted in between), so the clock call's own cost cancels. A
/// round whose TSC went backwards (the thread moved to a CPU whose TSC disagrees) is dropped;
/// `None` when every round was.
#[cfg(target_arch = "x86_64")]
fn calibrate_tsc_hz(window: Duration, rounds: usize) -> Option<f64> {
    let stamp = || {
        let mut best = (0u64, 0.0f64, u64::MAX);
        for _ in 0..10 {
            let a = monotonic_raw_ns();
            let t = crate::arch::tsc_start();
            let b = monotonic_raw_ns();
            if b - a < best.2 {
                best = (t, (a + b) as f64 / 2.0, b - a);
            }
            if b - a <= MAX_BRACKET_NS {
                break;
            }
        }
        (best.0, best.1)
    };
    let mut rates: Vec<f64> = (0..rounds.max(1))
        .filter_map(|_| {
            let (t0, n0) = stamp();
            std::thread::sleep(window);
            let (t1, n1) = stamp();
            (t1 > t0 && n1 > n0).then(|| (t1 - t0) as f64 / ((n1 - n0) * 1e-9))
        })
        .collect();
    rates.sort_by(f64::total_cmp);
    rates.get(rates.len() / 2).copied()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn clock_gettime_ticks_are_nanoseconds() {
        let c = Clock::clock_gettime("test".into());
        assert_eq!(c.ticks_to_ns(1234), 1234.0);
        let a = c.start();
        std::thread::sleep(Duration::from_millis(2));
        assert!(c.end() - a >= 2_000_000);
    }

    #[cfg(target_arch = "x86_64")]
    #[test]
    fn tsc_clock_agrees_with_the_os_clock_over_a_sleep() {
        let c = Clock::detect(true);
        assert_eq!(c.info().source, ClockSource::Tsc);
        let (t0, n0) = (c.start(), monotonic_ns());
        std::thread::sleep(Duration::from_millis(20));
        let (t1, n1) = (c.end(), monotonic_ns());
        let ratio = c.ticks_to_ns(t1 - t0) / (n1 - n0) as f64;
        // Wide margin: the two reads are not simultaneous and the machine is shared.
        assert!((0.9..1.1).contains(&ratio), "tsc/os ratio {ratio}");
    }
}
