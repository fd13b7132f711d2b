//! A diagnosis as folded stacks (`--folded`): one line per distinct stack, outermost caller
//! first, `;`-separated, a space and its count; what flamegraph.pl, inferno and speedscope
//! read. A pure function of a [`Diagnosis`] returning bytes ([`Folded`]), so a run and a saved
//! file convert the same way. The stacks and their folded names are
//! [`crate::diagnose::stacks`]'s, shared with the flame graphs and the comparisons.

use super::Export;
use crate::diagnose::Diagnosis;
use crate::diagnose::stacks::{FOLDED_WALL_UNIT_NS, LeafOffsets, folded_samples, folded_wall_ns};

/// The folded-stacks exporter; its [`LeafOffsets`] says whether a named leaf keeps its offset
/// (`spin+0x1a`: the `--folded` file keeps it).
///
/// Without a wall-clock view, [`folded_samples`] (counts are samples). With one, on- and
/// off-CPU stacks in one file, counted in microseconds of thread time
/// ([`FOLDED_WALL_UNIT_NS`]): an on-CPU stack its samples times the sampling period, an
/// off-CPU one the time recorded in it, with a last frame that names the state
/// (`[blocked: futex]`, `[runnable]`; alone when the stack was not known). A line under half
/// a microsecond is left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Folded(pub LeafOffsets);

impl Export<Diagnosis> for Folded {
    fn export(&self, d: &Diagnosis) -> Vec<u8> {
        let leaf = self.0;
        let Some(lines) = folded_wall_ns(d, leaf) else {
            return folded_samples(d, leaf).into_bytes();
        };
        let mut out = String::new();
        for (names, (_, ns)) in lines {
            let us = (ns / FOLDED_WALL_UNIT_NS).round() as u64;
            if us > 0 {
                out.push_str(&format!("{} {us}\n", names.join(";")));
            }
        }
        out.into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::stacks::stacks_of;
    use crate::diagnose::symbolize::kallsyms::KERNEL_MODULE;
    use crate::diagnose::symbolize::stack::{StackCount, StackFrame};
    use crate::diagnose::test_fixture as fixture;

    /// The file's text, through the exporter.
    fn folded(d: &Diagnosis, leaf: LeafOffsets) -> String {
        String::from_utf8(Folded(leaf).export(d)).expect("folded stacks are text")
    }

    #[test]
    fn folded_stacks_put_each_function_under_its_callers() {
        let d = fixture("spin-phases-4000-zen3-kvm.json");
        let text = folded(&d, LeafOffsets::Keep);
        insta::assert_snapshot!("folded_spin_phases_4000", text);
        let total: u64 = text
            .lines()
            .map(|l| l.rsplit_once(' ').unwrap().1.parse::<u64>().unwrap())
            .sum();
        assert_eq!(total, d.sampling.samples, "every sample in one line");
        // Without offsets, one line per call path.
        let plain = folded(&d, LeafOffsets::Drop);
        assert!(
            plain
                .lines()
                .any(|l| l.contains(";main;serve;wait_for_item ")),
            "{plain}"
        );
        assert!(plain.lines().count() <= text.lines().count());
    }

    /// The Redis case: a sample in tcp_sendmsg under write(2) under the server's own code.
    #[test]
    fn kernel_frames_fold_with_the_flame_graph_kernel_suffix() {
        let mut d = fixture("spin-phases-4000-zen3-kvm.json");
        let frame = |function: &str, module: &str, offset| StackFrame {
            address: 0xffff_ffff_8100_0000 + offset,
            function: Some(function.into()),
            module: module.into(),
            offset,
            file_offset: None,
        };
        d.stacks = vec![StackCount {
            frames: vec![
                frame("tcp_sendmsg", KERNEL_MODULE, 0x1a),
                frame("__x64_sys_write", KERNEL_MODULE, 0x10),
                frame("write", "/usr/lib/x86_64-linux-gnu/libc.so.6", 0x14),
                frame("main", "/usr/bin/redis-check-rdb", 0x30),
            ],
            samples: 7,
        }];
        d.wall = None;
        assert_eq!(
            folded(&d, LeafOffsets::Keep),
            "main;write;__x64_sys_write_[k];tcp_sendmsg+0x1a_[k] 7\n"
        );
        assert_eq!(
            folded(&d, LeafOffsets::Drop),
            "main;write;__x64_sys_write_[k];tcp_sendmsg_[k] 7\n"
        );
    }

    /// (frames, count) of each folded line.
    fn lines_of(text: &str) -> Vec<(Vec<&str>, u64)> {
        text.lines()
            .map(|l| {
                let (stack, n) = l.rsplit_once(' ').unwrap();
                (stack.split(';').collect(), n.parse().unwrap())
            })
            .collect()
    }

    #[test]
    fn wall_folded_stacks_count_microseconds_of_thread_time_with_the_state_on_top() {
        let d = fixture("mutex-wait-4-zen4-kvm.json");
        let wall = d.wall.as_ref().unwrap();
        let text = folded(&d, LeafOffsets::Keep);
        insta::assert_snapshot!("folded_wall_mutex_wait_4", text);
        let lines = lines_of(&text);
        // A state frame is always the last, and only off-CPU stacks have one.
        for (frames, _) in &lines {
            for (i, f) in frames.iter().enumerate() {
                if f.starts_with('[') {
                    assert_eq!(i, frames.len() - 1, "{frames:?}");
                }
            }
        }
        let count = |last: &str, with: &str| -> u64 {
            lines
                .iter()
                .filter(|(f, _)| {
                    *f.last().unwrap() == last && f.iter().any(|x| x.starts_with(with))
                })
                .map(|(_, n)| n)
                .sum()
        };
        // Asleep on the mutex: the stack's ns, in us.
        let lock = wall
            .stacks
            .iter()
            .find(|s| {
                s.wait
                    .as_ref()
                    .is_some_and(|w| w.waiter.as_deref() == Some("take_lock_and_work"))
            })
            .unwrap();
        assert_eq!(
            count("[blocked: futex]", "__lll_lock_wait"),
            (lock.ns as f64 / 1e3).round() as u64
        );
        // On the CPU: samples x 1e6 / 499 us each.
        let computing: u64 = d
            .stacks
            .iter()
            .filter(|s| s.frames[0].function.as_deref() == Some("compute_under_lock"))
            .map(|s| s.samples)
            .sum();
        let on: u64 = lines
            .iter()
            .filter(|(f, _)| f.last().unwrap().starts_with("compute_under_lock+0x"))
            .map(|(_, n)| n)
            .sum();
        let expected = computing as f64 * 1e6 / 499.0;
        assert!((on as f64 - expected).abs() <= 1.0, "{on} vs {expected}");
        assert!(count("[runnable]", "compute_under_lock") > 0);
        // All of it: the on-CPU samples' time and every off-CPU stack's, each line rounded to
        // the microsecond.
        let total: u64 = lines.iter().map(|(_, n)| n).sum();
        let want = d.sampling.samples as f64 * 1e6 / 499.0
            + wall.stacks.iter().map(|s| s.ns as f64 / 1e3).sum::<f64>();
        assert!(
            (total as f64 - want).abs() <= lines.len() as f64,
            "{total} vs {want}"
        );
    }

    #[test]
    fn without_a_wall_view_the_folded_stacks_count_samples_as_before() {
        let mut d = fixture("mutex-wait-4-zen4-kvm.json");
        d.wall = None;
        let text = folded(&d, LeafOffsets::Keep);
        assert_eq!(text, folded_samples(&d, LeafOffsets::Keep));
        assert!(!text.contains('['), "{text}");
        let total: u64 = lines_of(&text).iter().map(|(_, n)| n).sum();
        assert_eq!(total, d.sampling.samples);
    }

    #[test]
    fn a_file_saved_without_stacks_folds_its_hottest_functions_as_leaves() {
        let d = fixture("pause-spin-zen4-kvm.json");
        assert!(d.stacks.is_empty());
        assert!(stacks_of(&d).from_functions);
        let text = folded(&d, LeafOffsets::Keep);
        assert!(!text.contains("+0x"), "no address, no offset: {text}");
        assert_eq!(text.lines().count(), d.functions.len(), "{text}");
    }
}
