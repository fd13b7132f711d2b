//! What disturbed a probe while it measured, as its result records it (`disturbance` on a
//! probe result): the CPU quota's throttling, steal time, other tasks busy on its CPUs and
//! its own threads' wait for a CPU, each as a figure over the probe's wall time, and which of
//! them crossed the line that makes its figures "not the machine's". A figure measured while
//! disturbed is shown marked and `diff` does not call it changed.
//!
//! The lines (each a named constant below, with its reason) are chosen so that a disturbance
//! below them cannot by itself move a figure by the smallest change `diff` counts (5%,
//! [`crate::stats::WIDE_RELATIVE_SPREAD`]):
//! - any throttled period: throttling stops every thread of the cgroup until the next period
//!   (up to 50 ms of each 100 ms under a 0.5 CPU quota), far longer than one timed sample,
//!   and the probes' threads that wait on each other (c2c, sharing, the split-lock neighbour)
//!   stop at different times;
//! - steal of 5% of the CPUs' time or more: the hypervisor ran something else on the
//!   physical CPU for that share of the time, which lands in the probe's timings;
//! - the probe's threads waiting on a run queue for 5% of its wall time or more: for that
//!   share the probe's thread was runnable and another task held its CPU;
//! - other tasks busy for a quarter of a CPU or more, on average, on the CPUs the probe may
//!   use. A task on the other vCPU of a small guest shares the core's caches and the host's
//!   memory bandwidth with the probe (the issue's case: a spinning shell loop on the other
//!   vCPU moved `tlb_reach` 8-16x); a quarter of a CPU is a quarter of a busy loop (one CPU,
//!   1.3-1.9 measured beside other builds, docs/check.md), above what an idle system's
//!   daemons should take, and /proc/stat's ticks (10 ms each) put no more than about 0.1 CPU
//!   of error on a 0.2 s probe. A quiet baseline could not be measured on the shared guest
//!   this was written on (loaded by other builds throughout); check it on a quiet machine.
//!
//! Each line is crossed only with evidence beyond what its counter can resolve
//! ([`Resolution`]). `/proc/stat` shows busy and steal time in ticks of 10 ms (USER_HZ 100)
//! per CPU, and with tick-based accounting a CPU's busy time is whoever ran at each scheduler
//! tick; so over a window `W` on `N` CPUs the others' busy time is known to about
//! [`BUSY_TICKS_PER_CPU`] ticks per CPU (`2 N x 10 ms / W` CPUs) and steal to one tick per
//! CPU. A figure counts when it is past its line by more than that; within it, the cause is
//! kept as `unresolved` (the window was too short to tell) and nothing is claimed. On the idle
//! Emerald Rapids guest, c2c's 10 ms window read "other tasks busy 0.86 CPU" from one tick of
//! anything, and the split-lock probe's 0.14 s read steal 9.5% from under three ticks: both
//! within the resolution, and every check of the idle machine opened with "Measured while
//! disturbed". Run-queue delay (schedstat, ns) is exact, but one wakeup may wait a scheduler
//! slice behind a thread of the probe's own ([`RUN_DELAY_SLICE_NS`]); throttled periods are
//! counts.

use serde::{Deserialize, Serialize};

/// Steal, as a share of the watched CPUs' time, from which a probe counts as disturbed.
pub const STEAL_RATIO_LIMIT: f64 = crate::stats::WIDE_RELATIVE_SPREAD;

/// Run-queue delay of the probe's threads, as a share of its wall time, from which it counts
/// as disturbed.
pub const RUN_QUEUE_WAIT_RATIO_LIMIT: f64 = crate::stats::WIDE_RELATIVE_SPREAD;

/// Other tasks' busy time on the probe's CPUs, in CPUs on average over its wall time, from
/// which it counts as disturbed.
pub const OTHERS_BUSY_CPUS_LIMIT: f64 = 0.25;

/// Throttled quota periods from which a probe counts as disturbed: any.
pub const THROTTLED_PERIODS_LIMIT: u64 = 1;

/// Ticks of `/proc/stat` per second (USER_HZ), the unit of its busy and steal times: 100 on
/// every Linux architecture cpudoctor runs on (`sysconf(_SC_CLK_TCK)`).
pub const USER_HZ: f64 = 100.0;

/// How many `/proc/stat` ticks a CPU's busy time over a window may be off by: one from
/// truncating each end's reading, one from tick-based accounting charging a whole scheduler
/// tick (4 ms at HZ 250, 10 ms at HZ 100) to whatever ran at that tick.
pub const BUSY_TICKS_PER_CPU: f64 = 2.0;

/// How many ticks a CPU's steal time over a window may be off by: one, from truncating the
/// readings (the kernel keeps steal in ns from the paravirtual steal clock).
pub const STEAL_TICKS_PER_CPU: f64 = 1.0;

/// How long one wakeup may wait for a CPU without anything disturbing the machine: a thread
/// that wakes onto a CPU another thread holds (the probe's own, as often as not) waits up to a
/// scheduler slice (EEVDF's base slice: 0.75 ms x (1 + log2 CPUs), 3 ms from 8 CPUs). The
/// schedstat counter is exact, but one such wait in c2c's 4 ms window on the idle Zen 2 guest
/// read "waiting for a CPU 8% of the time".
pub const RUN_DELAY_SLICE_NS: f64 = 3e6;

/// What the counters of one window can resolve, in the units of [`WindowFigures`].
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Resolution {
    /// Others' busy time, in CPUs.
    pub others_busy_cpus: f64,
    /// Steal, as a share of the CPUs' time.
    pub steal_ratio: f64,
    /// Run-queue delay, as a share of the wall time.
    pub run_queue_wait_ratio: f64,
}

impl Resolution {
    /// The resolution of a window of `wall_s` seconds over `cpus` CPUs; `accounted_s` is the
    /// CPUs' time accounted (busy, idle and steal together), when known (else `cpus x wall`).
    pub fn of(wall_s: f64, cpus: usize, accounted_s: Option<f64>) -> Resolution {
        let tick_s = 1.0 / USER_HZ;
        let n = cpus.max(1) as f64;
        let accounted = accounted_s.filter(|a| *a > 0.0).unwrap_or(n * wall_s);
        if wall_s <= 0.0 || accounted <= 0.0 {
            return Resolution {
                others_busy_cpus: f64::INFINITY,
                steal_ratio: f64::INFINITY,
                run_queue_wait_ratio: f64::INFINITY,
            };
        }
        Resolution {
            others_busy_cpus: BUSY_TICKS_PER_CPU * n * tick_s / wall_s,
            steal_ratio: STEAL_TICKS_PER_CPU * n * tick_s / accounted,
            run_queue_wait_ratio: RUN_DELAY_SLICE_NS / 1e9 / wall_s,
        }
    }
}

/// One thing that disturbed a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DisturbedBy {
    /// The cgroup's CPU quota stopped the probe's threads in at least one period.
    CpuQuota,
    /// The hypervisor took the CPUs for [`STEAL_RATIO_LIMIT`] of the time or more.
    Steal,
    /// Other tasks ran on the probe's CPUs ([`OTHERS_BUSY_CPUS_LIMIT`] or more).
    OtherTasks,
    /// The probe's threads waited for a CPU ([`RUN_QUEUE_WAIT_RATIO_LIMIT`] of the time or
    /// more).
    WaitedForCpu,
}

/// What the CPUs did while a probe measured, and what of it disturbed the probe.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Disturbance {
    /// What crossed its line, in the order of [`DisturbedBy`]; empty when nothing did (the
    /// probe measured undisturbed).
    pub by: Vec<DisturbedBy>,
    /// What crossed its line only within what its counter resolves over this window (see
    /// [`Resolution`]): the window was too short to tell, and nothing is claimed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unresolved: Vec<DisturbedBy>,
    /// Wall time watched, seconds (the probe's run).
    pub wall_s: f64,
    /// The CPUs watched: those the probe could use, and their SMT siblings.
    pub cpus: Vec<usize>,
    /// The tightest CPU quota on the process's cgroup path, in CPUs (0.5 for
    /// 50000/100000); absent without one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_quota_cpus: Option<f64>,
    /// Quota periods that elapsed (cgroup `cpu.stat` `nr_periods`); absent without a cpu
    /// controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub periods: Option<u64>,
    /// Periods throttled (`nr_throttled`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttled_periods: Option<u64>,
    /// Time throttled, seconds (`throttled_time` v1, `throttled_usec` v2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub throttled_s: Option<f64>,
    /// Steal over the watched CPUs' time (0.1: a tenth taken by the hypervisor).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub steal_ratio: Option<f64>,
    /// Other tasks' busy time on the watched CPUs, in CPUs on average (1.0: one CPU's worth).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub others_busy_cpus: Option<f64>,
    /// Run-queue delay of the probe's threads over its wall time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_queue_wait_ratio: Option<f64>,
}

/// The figures of one window, in the units [`classify`] reads.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct WindowFigures {
    /// Periods throttled.
    pub throttled_periods: Option<u64>,
    /// Steal over the CPUs' time.
    pub steal_ratio: Option<f64>,
    /// Other tasks' busy time, in CPUs.
    pub others_busy_cpus: Option<f64>,
    /// Run-queue delay over wall time.
    pub run_queue_wait_ratio: Option<f64>,
}

/// What crossed its line beyond what its counter resolves, and what crossed it only within
/// that resolution (unresolved: the window could not tell); a figure not read crosses
/// nothing.
pub fn classify(f: &WindowFigures, r: &Resolution) -> (Vec<DisturbedBy>, Vec<DisturbedBy>) {
    let mut by = Vec::new();
    let mut unresolved = Vec::new();
    let mut judge = |cause: DisturbedBy, value: Option<f64>, limit: f64, resolution: f64| {
        let Some(v) = value else {
            return;
        };
        if v - resolution >= limit {
            by.push(cause);
        } else if v >= limit {
            unresolved.push(cause);
        }
    };
    judge(
        DisturbedBy::CpuQuota,
        f.throttled_periods.map(|p| p as f64),
        THROTTLED_PERIODS_LIMIT as f64,
        0.0,
    );
    judge(
        DisturbedBy::Steal,
        f.steal_ratio,
        STEAL_RATIO_LIMIT,
        r.steal_ratio,
    );
    judge(
        DisturbedBy::OtherTasks,
        f.others_busy_cpus,
        OTHERS_BUSY_CPUS_LIMIT,
        r.others_busy_cpus,
    );
    judge(
        DisturbedBy::WaitedForCpu,
        f.run_queue_wait_ratio,
        RUN_QUEUE_WAIT_RATIO_LIMIT,
        r.run_queue_wait_ratio,
    );
    (by, unresolved)
}

const NS: f64 = 1e9;

impl Disturbance {
    /// The record of a window read by [`crate::machine::disturbance::Watch`], classified.
    pub fn of_window(w: &crate::machine::disturbance::CpuWindow) -> Disturbance {
        let wall = w.wall_ns as f64;
        let per_wall = |ns: Option<u64>| ns.filter(|_| wall > 0.0).map(|n| n as f64 / wall);
        let figures = WindowFigures {
            throttled_periods: w.throttled_periods,
            steal_ratio: match (w.steal_ns, w.accounted_ns) {
                (Some(s), Some(a)) if a > 0 => Some(s as f64 / a as f64),
                _ => None,
            },
            others_busy_cpus: per_wall(w.others_busy_ns),
            run_queue_wait_ratio: per_wall(w.run_delay_ns),
        };
        let resolution = Resolution::of(
            wall / NS,
            w.cpus.len(),
            w.accounted_ns.map(|a| a as f64 / NS),
        );
        let (by, unresolved) = classify(&figures, &resolution);
        Disturbance {
            by,
            unresolved,
            wall_s: wall / NS,
            cpus: w.cpus.clone(),
            cpu_quota_cpus: w.cpu_quota_cpus,
            periods: w.periods,
            throttled_periods: w.throttled_periods,
            throttled_s: w.throttled_ns.map(|n| n as f64 / NS),
            steal_ratio: figures.steal_ratio,
            others_busy_cpus: figures.others_busy_cpus,
            run_queue_wait_ratio: figures.run_queue_wait_ratio,
        }
    }

    /// Whether anything crossed its line.
    pub fn disturbed(&self) -> bool {
        !self.by.is_empty()
    }

    /// The record judged again by this build's lines: a cause that a saved file names but
    /// whose figure lies within what the counters resolve over its window moves to
    /// `unresolved` (files written before [`Resolution`] called one tick of a 10 ms window a
    /// disturbance). A cause is never added: a record merged over runs keeps each figure's
    /// largest value and the runs' total wall time, which says less than each run did.
    pub fn rejudged(mut self) -> Disturbance {
        let figures = WindowFigures {
            throttled_periods: self.throttled_periods,
            steal_ratio: self.steal_ratio,
            others_busy_cpus: self.others_busy_cpus,
            run_queue_wait_ratio: self.run_queue_wait_ratio,
        };
        let resolution = Resolution::of(self.wall_s, self.cpus.len(), None);
        let (by, unresolved) = classify(&figures, &resolution);
        let (kept, dropped): (Vec<DisturbedBy>, Vec<DisturbedBy>) =
            self.by.iter().partition(|b| by.contains(b));
        self.by = kept;
        self.unresolved.extend(dropped);
        self.unresolved
            .extend(unresolved.into_iter().filter(|u| !self.by.contains(u)));
        self.unresolved.sort_unstable();
        self.unresolved.dedup();
        self
    }

    /// The record of several runs of one probe (`--runs N`) from each run's: disturbed by
    /// whatever disturbed any run, each figure the largest any run saw, the wall times added.
    pub fn merge(&mut self, other: &Disturbance) {
        self.by.extend(&other.by);
        self.by.sort_unstable();
        self.by.dedup();
        self.unresolved.extend(&other.unresolved);
        self.unresolved.retain(|u| !self.by.contains(u));
        self.unresolved.sort_unstable();
        self.unresolved.dedup();
        self.wall_s += other.wall_s;
        for c in &other.cpus {
            if !self.cpus.contains(c) {
                self.cpus.push(*c);
            }
        }
        let max_f = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        let max_u = |a: Option<u64>, b: Option<u64>| a.max(b);
        self.cpu_quota_cpus = match (self.cpu_quota_cpus, other.cpu_quota_cpus) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.periods = max_u(self.periods, other.periods);
        self.throttled_periods = max_u(self.throttled_periods, other.throttled_periods);
        self.throttled_s = max_f(self.throttled_s, other.throttled_s);
        self.steal_ratio = max_f(self.steal_ratio, other.steal_ratio);
        self.others_busy_cpus = max_f(self.others_busy_cpus, other.others_busy_cpus);
        self.run_queue_wait_ratio = max_f(self.run_queue_wait_ratio, other.run_queue_wait_ratio);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::disturbance::CpuWindow;

    const MS: u64 = 1_000_000;

    fn quiet() -> CpuWindow {
        // A 200 ms probe on two CPUs: 1 ms of others' work, 2 ms waited, no steal, a quota
        // that never ran out.
        CpuWindow {
            wall_ns: 200 * MS,
            cpus: vec![0, 1],
            cpu_quota_cpus: Some(0.5),
            periods: Some(2),
            throttled_periods: Some(0),
            throttled_ns: Some(0),
            steal_ns: Some(0),
            accounted_ns: Some(400 * MS),
            others_busy_ns: Some(MS),
            run_delay_ns: Some(2 * MS),
        }
    }

    #[test]
    fn a_quiet_window_is_undisturbed_even_under_a_quota_that_never_bit() {
        let d = Disturbance::of_window(&quiet());
        assert!(!d.disturbed(), "{d:?}");
        assert_eq!(d.cpu_quota_cpus, Some(0.5));
        assert_eq!(d.others_busy_cpus, Some(0.005));
        assert_eq!(d.run_queue_wait_ratio, Some(0.01));
    }

    #[test]
    fn one_throttled_period_is_enough() {
        let d = Disturbance::of_window(&CpuWindow {
            throttled_periods: Some(1),
            throttled_ns: Some(40 * MS),
            ..quiet()
        });
        assert_eq!(d.by, vec![DisturbedBy::CpuQuota]);
        assert_eq!(d.throttled_s, Some(0.04));
    }

    #[test]
    fn each_line_is_crossed_at_its_limit_and_not_below() {
        let at = |f: WindowFigures| classify(&f, &Resolution::default()).0;
        assert_eq!(
            at(WindowFigures {
                steal_ratio: Some(STEAL_RATIO_LIMIT),
                ..Default::default()
            }),
            vec![DisturbedBy::Steal]
        );
        assert!(
            at(WindowFigures {
                steal_ratio: Some(STEAL_RATIO_LIMIT * 0.99),
                ..Default::default()
            })
            .is_empty()
        );
        assert_eq!(
            at(WindowFigures {
                others_busy_cpus: Some(OTHERS_BUSY_CPUS_LIMIT),
                ..Default::default()
            }),
            vec![DisturbedBy::OtherTasks]
        );
        assert!(
            at(WindowFigures {
                others_busy_cpus: Some(OTHERS_BUSY_CPUS_LIMIT * 0.99),
                ..Default::default()
            })
            .is_empty()
        );
        assert_eq!(
            at(WindowFigures {
                run_queue_wait_ratio: Some(RUN_QUEUE_WAIT_RATIO_LIMIT),
                ..Default::default()
            }),
            vec![DisturbedBy::WaitedForCpu]
        );
        assert!(at(WindowFigures::default()).is_empty(), "nothing read");
    }

    #[test]
    fn a_window_too_short_to_tell_claims_nothing() {
        // The idle Emerald Rapids guest (check-single-a.json): c2c's 10 ms window read other
        // tasks busy 0.86 CPU (one 10 ms tick on one of two CPUs is 1.0), the split-lock
        // probe's 0.14 s read steal 9.5% (under three ticks of 28.8). Both within what the
        // counters resolve over those windows.
        let c2c = Disturbance::of_window(&CpuWindow {
            wall_ns: 10 * MS,
            accounted_ns: Some(20 * MS),
            others_busy_ns: Some(8_641_780),
            run_delay_ns: Some(0),
            ..quiet()
        });
        assert!(!c2c.disturbed(), "{c2c:?}");
        assert_eq!(c2c.unresolved, vec![DisturbedBy::OtherTasks]);
        let split_lock = Disturbance::of_window(&CpuWindow {
            wall_ns: 144 * MS,
            accounted_ns: Some(288 * MS),
            steal_ns: Some(27_428_571),
            others_busy_ns: Some(MS),
            ..quiet()
        });
        assert!(!split_lock.disturbed(), "{split_lock:?}");
        assert_eq!(split_lock.unresolved, vec![DisturbedBy::Steal]);
        // The same figures over a window long enough to resolve them are a disturbance.
        let long = Disturbance::of_window(&CpuWindow {
            wall_ns: 2000 * MS,
            accounted_ns: Some(4000 * MS),
            steal_ns: Some(380 * MS),
            others_busy_ns: Some(1728 * MS),
            ..quiet()
        });
        assert_eq!(long.by, vec![DisturbedBy::Steal, DisturbedBy::OtherTasks]);
        assert!(long.unresolved.is_empty());
    }

    #[test]
    fn a_saved_record_is_rejudged_by_its_windows_resolution_and_never_gains_a_cause() {
        // As the idle Emerald Rapids guest's check saved them at e658d18.
        let saved = |wall_s: f64, by: Vec<DisturbedBy>, steal: f64, others: f64| Disturbance {
            by,
            unresolved: Vec::new(),
            wall_s,
            cpus: vec![0, 1],
            cpu_quota_cpus: None,
            periods: None,
            throttled_periods: None,
            throttled_s: None,
            steal_ratio: Some(steal),
            others_busy_cpus: Some(others),
            run_queue_wait_ratio: Some(0.0),
        };
        let c2c = saved(0.010, vec![DisturbedBy::OtherTasks], 0.0, 0.864).rejudged();
        assert!(!c2c.disturbed());
        assert_eq!(c2c.unresolved, vec![DisturbedBy::OtherTasks]);
        let sl = saved(0.144, vec![DisturbedBy::Steal], 0.095, 0.202).rejudged();
        assert!(!sl.disturbed(), "{sl:?}");
        // A hog beside a 0.2 s probe stays a disturbance.
        let hog = saved(0.2, vec![DisturbedBy::OtherTasks], 0.0, 1.0).rejudged();
        assert_eq!(hog.by, vec![DisturbedBy::OtherTasks]);
        // A figure past its line that the file did not call a disturbance stays uncalled.
        let not_called = saved(2.0, vec![], 0.0, 1.0).rejudged();
        assert!(!not_called.disturbed());
    }

    #[test]
    fn a_hog_on_the_other_cpu_shows_as_other_tasks_and_steal_as_steal() {
        // One CPU of two busy with another task the whole window; a tenth of the time stolen.
        let d = Disturbance::of_window(&CpuWindow {
            others_busy_ns: Some(200 * MS),
            steal_ns: Some(40 * MS),
            ..quiet()
        });
        assert_eq!(d.by, vec![DisturbedBy::Steal, DisturbedBy::OtherTasks]);
        assert_eq!(d.others_busy_cpus, Some(1.0));
        assert_eq!(d.steal_ratio, Some(0.1));
    }

    #[test]
    fn runs_merged_are_disturbed_when_any_run_was() {
        let mut first = Disturbance::of_window(&quiet());
        let second = Disturbance::of_window(&CpuWindow {
            throttled_periods: Some(2),
            ..quiet()
        });
        first.merge(&second);
        assert_eq!(first.by, vec![DisturbedBy::CpuQuota]);
        assert_eq!(first.throttled_periods, Some(2));
        assert!((first.wall_s - 0.4).abs() < 1e-9);
        first.merge(&second);
        assert_eq!(first.by, vec![DisturbedBy::CpuQuota], "each cause once");
    }

    #[test]
    fn an_empty_window_has_no_ratios() {
        let d = Disturbance::of_window(&CpuWindow::default());
        assert!(!d.disturbed());
        assert_eq!((d.others_busy_cpus, d.steal_ratio), (None, None));
    }

    #[test]
    fn the_record_round_trips_and_leaves_out_what_was_not_read() {
        let d = Disturbance::of_window(&CpuWindow {
            throttled_periods: Some(3),
            ..quiet()
        });
        let text = serde_json::to_string(&d).unwrap();
        assert!(text.contains(r#""by":["cpu_quota"]"#), "{text}");
        assert_eq!(serde_json::from_str::<Disturbance>(&text).unwrap(), d);
        let bare = Disturbance::of_window(&CpuWindow {
            wall_ns: MS,
            ..CpuWindow::default()
        });
        let text = serde_json::to_string(&bare).unwrap();
        assert!(!text.contains("steal"), "{text}");
    }
}
