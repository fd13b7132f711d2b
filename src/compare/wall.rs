//! Two diagnoses' wall-clock views compared, as [`super::profile`] compares their CPU shares:
//! where the threads' time went (running, waiting for a CPU, blocked by reason, asleep in a
//! known wait) as a *share of the threads' time*, which does not depend on run length or
//! thread count, and as *threads in that state on average* (its time / the window); then the
//! off-CPU stacks by place (state, leaf function, the waiter of a known wait), most grown
//! first.
//!
//! What counts as a change is not the CPU shares' rule. An on-CPU share is a count of samples
//! with a binomial error ([`crate::stats::share_difference_se`]); the wall states are timed
//! by the kernel's own accounting (each thread's schedstat counts, or its context-switch
//! records), so a run's shares carry no sampling error (only
//! which reason a short wait had comes from the looks at /proc). What moves them is the run
//! itself: other load, scheduling, where the lock holder was preempted. That run-to-run noise
//! one run per side cannot measure, so no standard error is invented for it: a share that
//! moved by [`MIN_WALL_CHANGE`] or more is marked (the one change rule, [`crate::stats::effect`],
//! with no interval and that floor), and the rule says in words that only repeated runs of
//! each side tell whether that is beyond noise.

use super::profile::Direction;
use crate::diagnose::Diagnosis;
use crate::diagnose::analyse::hotspots::short_module;
use crate::diagnose::analyse::runtimes::WaitKind;
use crate::diagnose::analyse::wall::{StateTimes, WallReport};
use crate::diagnose::record::wall::{BlockReason, OffCpu};
use crate::stats::effect::{Effect, Rule};
use crate::words::compare as words;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Smallest move of a wall share that is marked: 5 points of the threads' time. Measured on
/// the 2-vCPU Zen 4 development guest with other builds running, three identical runs of
/// `mutex_wait 2 4` (tests/programs) spent 29.4%, 39.4% and 42.8% of their threads' time
/// waiting for a CPU, and two of `mutex_wait 2 2` 15.6% and 23.3%: on a shared machine a
/// single pair of runs moves by more than this with nothing changed, which the rule says.
pub const MIN_WALL_CHANGE: f64 = 0.05;

/// A state of the threads' time, as the diff lists it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum WallState {
    /// On a CPU.
    Running,
    /// Runnable, waiting for a CPU.
    Runnable,
    /// Asleep for this reason.
    Blocked {
        /// Why.
        reason: BlockReason,
    },
    /// Asleep in a known wait of this kind (a part of the blocked time, by what the stack
    /// says: a lock, a condition...).
    Wait {
        /// The kind.
        kind: WaitKind,
    },
}

/// One side's time in a state, or at a place.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct WallAmount {
    /// Thread time, s.
    pub s: f64,
    /// Share of the threads' wall time.
    pub share: f64,
    /// Threads in it on average: its time / the window.
    pub threads: f64,
}

/// A state on both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StateChange {
    /// The state.
    #[serde(flatten)]
    pub state: WallState,
    /// Old side.
    pub old: WallAmount,
    /// New side.
    pub new: WallAmount,
    /// New share minus old share (0.105 = +10.5 points).
    pub share_change: f64,
    /// Moved by [`MIN_WALL_CHANGE`] or more (grown, shrunk), or less (within).
    pub direction: Direction,
}

/// One side of a group of threads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupSide {
    /// Threads.
    pub threads: u32,
    /// Their wall time together, s.
    pub wall_s: f64,
    /// The window the wall-clock view covers, s.
    pub window_s: f64,
}

/// The threads of one command (or all of them) on both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WallGroup {
    /// Command name; `None` for all threads together.
    pub command: Option<String>,
    /// Old side (`None`: no such command there).
    pub old: Option<GroupSide>,
    /// New side.
    pub new: Option<GroupSide>,
    /// Running, runnable, blocked by reason, then the known waits, in that order.
    pub states: Vec<StateChange>,
}

/// Where threads waited off the CPU: the state, the leaf function of the stack and, for a
/// known wait, who waited.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct OffCpuPlace {
    /// Runnable, or blocked and why.
    #[serde(flatten)]
    pub state: OffCpu,
    /// The leaf function (`module (unnamed code)` without a name); `None` when the stack was
    /// not known.
    pub function: Option<String>,
    /// Its module's file name.
    pub module: Option<String>,
    /// The known wait's kind, when the stack shows one.
    pub wait: Option<WaitKind>,
    /// The first caller outside the wait code: who waited.
    pub waiter: Option<String>,
}

/// An off-CPU place on both sides.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlaceChange {
    /// The place.
    pub place: OffCpuPlace,
    /// Old side (share of all threads' time).
    pub old: WallAmount,
    /// New side.
    pub new: WallAmount,
    /// New share minus old share.
    pub share_change: f64,
    /// Moved by [`MIN_WALL_CHANGE`] or more, or less.
    pub direction: Direction,
}

/// Two wall-clock views compared: the `wall` object of a diagnosis diff.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WallDiff {
    /// How the shares are compared and how far to trust a move, in words.
    pub rule: String,
    /// All threads first, then each command when either side has several.
    pub groups: Vec<WallGroup>,
    /// Off-CPU places, most grown first, most shrunk last.
    pub off_cpu: Vec<PlaceChange>,
}

fn amount(s: f64, side: Option<&GroupSide>) -> WallAmount {
    let Some(g) = side else {
        return WallAmount::default();
    };
    WallAmount {
        s,
        share: if g.wall_s > 0.0 { s / g.wall_s } else { 0.0 },
        threads: if g.window_s > 0.0 {
            s / g.window_s
        } else {
            0.0
        },
    }
}

fn direction(d: f64) -> Direction {
    // No interval: one run a side cannot measure the run-to-run noise (see above).
    Direction::of(
        Rule {
            floor: Some(MIN_WALL_CHANGE),
            ..Rule::default()
        }
        .read(&Effect::difference(d, None)),
    )
}

/// The seconds of each state in `t`.
fn seconds(t: &StateTimes) -> BTreeMap<WallState, f64> {
    let mut m = BTreeMap::new();
    m.insert(WallState::Running, t.running_s);
    m.insert(WallState::Runnable, t.runnable_s);
    for r in &t.blocked {
        *m.entry(WallState::Blocked { reason: r.reason })
            .or_default() += r.s;
    }
    for k in &t.waits {
        *m.entry(WallState::Wait { kind: k.kind }).or_default() += k.s;
    }
    m
}

/// A group's states on both sides, in [`WallState`]'s order (running, runnable, blocked by
/// reason, waits).
fn group(
    command: Option<String>,
    old: Option<(&StateTimes, GroupSide)>,
    new: Option<(&StateTimes, GroupSide)>,
) -> WallGroup {
    let (os, ns) = (
        old.map(|(t, _)| seconds(t)).unwrap_or_default(),
        new.map(|(t, _)| seconds(t)).unwrap_or_default(),
    );
    let (og, ng) = (old.map(|(_, g)| g), new.map(|(_, g)| g));
    let keys: BTreeSet<WallState> = os.keys().chain(ns.keys()).copied().collect();
    let states = keys
        .into_iter()
        .map(|state| {
            let a = amount(os.get(&state).copied().unwrap_or(0.0), og.as_ref());
            let b = amount(ns.get(&state).copied().unwrap_or(0.0), ng.as_ref());
            let d = b.share - a.share;
            StateChange {
                state,
                old: a,
                new: b,
                share_change: d,
                // A command on one side only has no share to compare.
                direction: if og.is_some() && ng.is_some() {
                    direction(d)
                } else {
                    Direction::Within
                },
            }
        })
        .collect();
    WallGroup {
        command,
        old: og,
        new: ng,
        states,
    }
}

/// All threads of a report together.
fn all_threads(w: &WallReport) -> (StateTimes, GroupSide) {
    let mut t = StateTimes::default();
    let mut threads = 0;
    let mut blocked: BTreeMap<BlockReason, f64> = BTreeMap::new();
    let mut waits: BTreeMap<WaitKind, f64> = BTreeMap::new();
    for c in &w.commands {
        threads += c.threads;
        t.wall_s += c.times.wall_s;
        t.running_s += c.times.running_s;
        t.spinning_s += c.times.spinning_s;
        t.runnable_s += c.times.runnable_s;
        t.blocked_s += c.times.blocked_s;
        for r in &c.times.blocked {
            *blocked.entry(r.reason).or_default() += r.s;
        }
        for k in &c.times.waits {
            *waits.entry(k.kind).or_default() += k.s;
        }
    }
    t.blocked = blocked
        .into_iter()
        .map(|(reason, s)| crate::diagnose::analyse::wall::ReasonTime { reason, s })
        .collect();
    t.waits = waits
        .into_iter()
        .map(|(kind, s)| crate::diagnose::analyse::wall::KindTime { kind, s })
        .collect();
    let g = GroupSide {
        threads,
        wall_s: t.wall_s,
        window_s: w.method.window_s,
    };
    (t, g)
}

/// The off-CPU time of a report by place, s.
fn places(w: &WallReport) -> BTreeMap<OffCpuPlace, f64> {
    let mut m = BTreeMap::new();
    for s in &w.stacks {
        let leaf = s.frames.first();
        let module = leaf.map(|f| short_module(&f.module).to_string());
        let place = OffCpuPlace {
            state: s.state,
            function: leaf.map(|f| {
                f.function
                    .clone()
                    .unwrap_or_else(|| format!("{} (unnamed code)", short_module(&f.module)))
            }),
            module,
            wait: s.wait.as_ref().map(|x| x.kind),
            waiter: s.wait.as_ref().and_then(|x| x.waiter.clone()),
        };
        *m.entry(place).or_default() += s.ns as f64 / 1e9;
    }
    m
}

/// The wall-clock views of `old` and `new` compared; `None` unless both have one (the
/// profile diff's notes say which lacks it).
pub fn compare(old: &Diagnosis, new: &Diagnosis) -> Option<WallDiff> {
    let (ow, nw) = (old.wall.as_ref()?, new.wall.as_ref()?);
    let (ot, og) = all_threads(ow);
    let (nt, ng) = all_threads(nw);
    let mut groups = vec![group(None, Some((&ot, og)), Some((&nt, ng)))];
    if ow.commands.len() > 1 || nw.commands.len() > 1 {
        let names: BTreeSet<&str> = ow
            .commands
            .iter()
            .chain(&nw.commands)
            .map(|c| c.command.as_str())
            .collect();
        for name in names {
            let side = |w: &WallReport| {
                w.commands.iter().find(|c| c.command == name).map(|c| {
                    (
                        c.times.clone(),
                        GroupSide {
                            threads: c.threads,
                            wall_s: c.times.wall_s,
                            window_s: w.method.window_s,
                        },
                    )
                })
            };
            let (a, b) = (side(ow), side(nw));
            groups.push(group(
                Some(name.to_string()),
                a.as_ref().map(|(t, g)| (t, *g)),
                b.as_ref().map(|(t, g)| (t, *g)),
            ));
        }
    }
    let (op, np) = (places(ow), places(nw));
    let keys: BTreeSet<&OffCpuPlace> = op.keys().chain(np.keys()).collect();
    let mut off_cpu: Vec<PlaceChange> = keys
        .into_iter()
        .map(|p| {
            let a = amount(op.get(p).copied().unwrap_or(0.0), Some(&og));
            let b = amount(np.get(p).copied().unwrap_or(0.0), Some(&ng));
            let d = b.share - a.share;
            PlaceChange {
                place: p.clone(),
                old: a,
                new: b,
                share_change: d,
                direction: direction(d),
            }
        })
        .collect();
    off_cpu.sort_by(|a, b| {
        b.share_change
            .total_cmp(&a.share_change)
            .then_with(|| a.place.cmp(&b.place))
    });
    Some(WallDiff {
        rule: words::wall_rule(&words::WallRuleFigures {
            old_window_s: og.window_s,
            new_window_s: ng.window_s,
            min_change: MIN_WALL_CHANGE,
        }),
        groups,
        off_cpu,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::test_fixture as fixture;

    fn mutex_wait() -> WallDiff {
        compare(
            &fixture("mutex-wait-2-zen4-kvm.json"),
            &fixture("mutex-wait-4-zen4-kvm.json"),
        )
        .expect("both have a wall view")
    }

    #[test]
    fn the_lock_wait_of_mutex_wait_grows_with_more_threads_and_its_shares_add_up() {
        let d = mutex_wait();
        assert_eq!(d.groups.len(), 1, "one command: all threads only");
        let g = &d.groups[0];
        assert_eq!(g.command, None);
        assert_eq!((g.old.unwrap().threads, g.new.unwrap().threads), (3, 5));
        let state = |s: WallState| g.states.iter().find(|x| x.state == s).unwrap();
        // Running, runnable and blocked split each side's whole thread time.
        for side in [|c: &StateChange| c.old.share, |c: &StateChange| c.new.share] {
            let sum: f64 = g
                .states
                .iter()
                .filter(|c| !matches!(c.state, WallState::Wait { .. }))
                .map(side)
                .sum();
            assert!((sum - 1.0).abs() < 1e-9, "{sum}");
        }
        // 2 threads -> 4 on one lock: the lock wait's share grows by more than 5 points
        // (33.0% -> 59.0% in these runs), and more threads sleep on it at any moment.
        let lock = state(WallState::Wait {
            kind: WaitKind::Lock,
        });
        assert_eq!(lock.direction, Direction::Grown, "{lock:?}");
        assert!(lock.new.threads > lock.old.threads * 2.0, "{lock:?}");
        // The main thread's join is one thread of 3, then one of 5: its share shrinks.
        let join = state(WallState::Wait {
            kind: WaitKind::Condition,
        });
        assert_eq!(join.direction, Direction::Shrunk, "{join:?}");
        // In order: running, runnable, blocked, waits.
        assert_eq!(g.states[0].state, WallState::Running);
        assert_eq!(g.states[1].state, WallState::Runnable);
        // The place that grew most: asleep on the mutex in __lll_lock_wait, for
        // take_lock_and_work.
        let first = &d.off_cpu[0];
        assert_eq!(first.place.function.as_deref(), Some("__lll_lock_wait"));
        assert_eq!(first.place.waiter.as_deref(), Some("take_lock_and_work"));
        assert_eq!(first.place.wait, Some(WaitKind::Lock));
        assert_eq!(first.direction, Direction::Grown);
        // Most shrunk last.
        let last = d.off_cpu.last().unwrap();
        assert!(last.share_change < 0.0, "{last:?}");
        assert!(d.rule.contains("repeated runs"), "{}", d.rule);
    }

    #[test]
    fn the_wall_diff_round_trips_through_json() {
        let d = mutex_wait();
        let json = serde_json::to_string(&d).unwrap();
        assert!(
            json.contains("{\"state\":\"wait\",\"kind\":\"lock\""),
            "{json}"
        );
        assert!(json.contains("\"state\":\"blocked\",\"reason\":\"futex\""));
        let back: WallDiff = serde_json::from_str(&json).unwrap();
        assert_eq!(back, d);
    }

    #[test]
    fn a_move_under_five_points_is_within() {
        assert_eq!(direction(0.049), Direction::Within);
        assert_eq!(direction(0.05), Direction::Grown);
        assert_eq!(direction(-0.2), Direction::Shrunk);
    }

    #[test]
    fn without_a_wall_view_on_either_side_there_is_nothing_to_compare() {
        let with = fixture("mutex-wait-4-zen4-kvm.json");
        let without = fixture("spin-phases-4000-zen3-kvm.json");
        assert!(compare(&with, &without).is_none());
        assert!(compare(&without, &with).is_none());
    }
}
