//! Kernel time in a diagnosis: the share of samples in kernel code per process, the hottest
//! kernel functions, where user space entered the kernel (a system call's wrapper, a page
//! fault), and the followed threads' CPU time by the kernel's own accounting against what the
//! samples stand for. A server that lives in system calls (Redis under `redis-benchmark`: most
//! of its CPU time in the network stack) is misread when only its user space is sampled;
//! where kernel sampling is refused ([`KernelSampling`]), the CPU time the samples do not
//! cover is stated from /proc. Kernel code is named by [`crate::diagnose::symbolize::kallsyms`].
//!
//! A split lock the kernel traps ([`split_lock_trap`]) spends its time in the kernel's trap
//! handler, not at the locked instruction: on the Emerald Rapids guest whose kernel traps bus
//! locks, 62% of a split-lock loop's samples were in `exc_debug_user`, entered from the
//! locking function, against 38% at the instruction.

use crate::diagnose::analyse::hotspots::{self, HotSpots, KernelFunction};
use crate::diagnose::record::recording::Recording;
use crate::diagnose::record::sampler::KernelSampling;
use crate::diagnose::record::threads;
use crate::diagnose::symbolize::kallsyms::{KERNEL_MODULE, Unnamed};
use crate::diagnose::symbolize::stack::StackCount;
use crate::machine::SplitLockTrap;
use serde::{Deserialize, Serialize};

/// One process's split of samples between user space and the kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessSplit {
    /// Process id.
    pub pid: u32,
    /// The process's command name (`comm`).
    pub command: String,
    /// Samples of the process.
    pub samples: u64,
    /// Of them, samples in kernel code.
    pub kernel_samples: u64,
    /// `kernel_samples / samples`.
    pub kernel_share: f64,
}

/// The CPU time of the followed threads by where it went, from /proc (`utime`, `stime`),
/// against what the samples stand for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CpuCoverage {
    /// CPU seconds of the followed threads while recorded.
    pub cpu_s: f64,
    /// Of them, seconds in the kernel (system time).
    pub system_s: f64,
    /// CPU seconds the samples stand for: samples over the sampling frequency.
    pub sampled_s: f64,
}

impl CpuCoverage {
    /// The kernel's share of the CPU time, by its own accounting.
    pub fn system_share(&self) -> f64 {
        self.system_s / self.cpu_s.max(1e-9)
    }
}

/// How a thread came into the kernel, told from the kernel frames of its stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum KernelEntryKind {
    /// A system call (`entry_SYSCALL_64`, arm64's `el0_svc`): the user frame is its wrapper
    /// (`write`, `epoll_wait`).
    SystemCall,
    /// A page fault (`asm_exc_page_fault`, arm64's `el0_da`): the user frame faulted.
    PageFault,
    /// Anything else: an interrupt or an exception taken in user space, or a stack whose
    /// entry was not sampled.
    Other,
}

impl KernelEntryKind {
    /// How the screen names an entry from the user function `from`: `write` (a system call's
    /// wrapper), `page faults in memcpy`, `other entries from main`.
    pub fn label(self, from: &str) -> String {
        match self {
            KernelEntryKind::SystemCall => from.to_string(),
            KernelEntryKind::PageFault => format!("page faults in {from}"),
            KernelEntryKind::Other => format!("other entries from {from}"),
        }
    }

    /// The kind of entry a kernel stack shows, from its functions' names (leaf first);
    /// `None` when it shows none (a chain the kernel could not walk past a retpoline thunk,
    /// `__x86_indirect_thunk_rax`, ends before the entry).
    pub fn of<'a>(functions: impl IntoIterator<Item = &'a str>) -> Option<KernelEntryKind> {
        let mut kind = None;
        for f in functions {
            if matches!(
                f,
                "entry_SYSCALL_64"
                    | "entry_SYSCALL_64_after_hwframe"
                    | "do_syscall_64"
                    | "el0_svc"
                    | "invoke_syscall"
            ) {
                return Some(KernelEntryKind::SystemCall);
            }
            if matches!(
                f,
                "asm_exc_page_fault" | "exc_page_fault" | "do_page_fault" | "el0_da" | "el0_ia"
            ) {
                kind = Some(KernelEntryKind::PageFault);
            } else if kind.is_none()
                && (f.starts_with("asm_sysvec_")
                    || f.starts_with("asm_common_interrupt")
                    || f.starts_with("irqentry_")
                    || f.starts_with("asm_exc_")
                    || f.starts_with("el0_interrupt")
                    || f.starts_with("el1_interrupt"))
            {
                kind = Some(KernelEntryKind::Other);
            }
        }
        kind
    }
}

/// Kernel samples by where user space entered the kernel.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelEntry {
    /// The user function the thread entered the kernel from: a system call's wrapper
    /// (`write`), the function that faulted; `-` when the stack has no user frame.
    pub from: String,
    /// How it entered.
    pub kind: KernelEntryKind,
    /// Kernel samples under it.
    pub samples: u64,
    /// Share of all samples.
    pub share: f64,
}

/// Kernel time in a diagnosis.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelReport {
    /// Whether kernel code was sampled, and why not.
    pub sampling: KernelSampling,
    /// Samples in kernel code.
    pub samples: u64,
    /// Their share of all samples.
    pub share: f64,
    /// The hottest kernel functions, most samples first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<KernelFunction>,
    /// Kernel samples by the user function that entered the kernel (a system call's wrapper),
    /// most samples first; empty without call chains.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub entries: Vec<KernelEntry>,
    /// Why kernel code is unnamed (`kptr_restrict` hides its addresses, or `/proc/kallsyms`
    /// could not be read); absent when it is named or was not sampled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unnamed_because: Option<String>,
    /// Each process's split, most samples first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub processes: Vec<ProcessSplit>,
    /// The followed threads' CPU time by the kernel's accounting, and what the samples cover;
    /// absent when /proc gave no user/system split.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuCoverage>,
}

/// Kernel entries listed in the report.
const KERNEL_ENTRIES: usize = 10;

/// The kernel samples of `stacks` by the user function their thread entered the kernel from
/// (the first user frame under the kernel's), most samples first. A stack whose kernel chain
/// shows no entry (cut short) counts with the entry of the same user function that others
/// show (a system call's wrapper, mostly), else as another entry.
fn kernel_entries(stacks: &[StackCount], total: u64) -> Vec<KernelEntry> {
    use std::collections::HashMap;
    let mut by: HashMap<(String, KernelEntryKind), u64> = HashMap::new();
    let mut unknown: HashMap<String, u64> = HashMap::new();
    for s in stacks {
        let user = s
            .frames
            .iter()
            .position(|f| f.module != KERNEL_MODULE)
            .unwrap_or(s.frames.len());
        if user == 0 {
            continue;
        }
        let kind = KernelEntryKind::of(
            s.frames[..user]
                .iter()
                .filter_map(|f| f.function.as_deref()),
        );
        let from = s
            .frames
            .get(user)
            .map_or_else(|| "-".to_string(), hotspots::frame_name);
        match kind {
            Some(kind) => *by.entry((from, kind)).or_default() += s.samples,
            None => *unknown.entry(from).or_default() += s.samples,
        }
    }
    for (from, samples) in unknown {
        let known = [KernelEntryKind::SystemCall, KernelEntryKind::PageFault]
            .into_iter()
            .find(|k| by.contains_key(&(from.clone(), *k)))
            .unwrap_or(KernelEntryKind::Other);
        *by.entry((from, known)).or_default() += samples;
    }
    let mut v: Vec<KernelEntry> = by
        .into_iter()
        .map(|((from, kind), samples)| KernelEntry {
            from,
            kind,
            samples,
            share: samples as f64 / total.max(1) as f64,
        })
        .collect();
    v.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then_with(|| a.from.cmp(&b.from))
            .then(a.kind.cmp(&b.kind))
    });
    v.truncate(KERNEL_ENTRIES);
    v
}

/// The kernel functions a split lock's trap runs in, each with its trap: the one list that
/// tells a trap's samples from other kernel time.
///
/// From arch/x86/kernel/traps.c: a `#DB` taken in user mode enters at `asm_exc_debug`
/// (`exc_debug`, `noist_exc_debug`), runs `exc_debug_user`, which calls `handle_bus_lock`
/// when DR6 says a bus lock was taken; an `#AC` enters at `asm_exc_alignment_check`
/// (`exc_alignment_check`), which calls `handle_user_split_lock`. From
/// arch/x86/kernel/cpu/bus_lock.c: `handle_bus_lock` warns, sleeps in `msleep` while over
/// `ratelimit:N`, or sends SIGBUS; `handle_user_split_lock` calls `split_lock_warn`, which
/// warns and, under `kernel.split_lock_mitigate`, sleeps (`msleep_interruptible`) and waits
/// for `buslock_sem`; `__split_lock_reenable` and `__split_lock_reenable_unlock` are the
/// delayed work that turns detection back on (in a kworker: never the locker's stack, listed
/// so a stack that shows them is read as the trap's). What these call (`msleep`,
/// `___ratelimit`, `_printk`, a timer interrupt taken meanwhile) counts through them: a stack
/// is the trap's when any of its kernel frames is listed, so a function called from anywhere
/// else need not be.
pub const SPLIT_LOCK_TRAP_PATH: &[(&str, SplitLockTrap)] = &[
    ("asm_exc_debug", SplitLockTrap::BusLockDebug),
    ("exc_debug", SplitLockTrap::BusLockDebug),
    ("noist_exc_debug", SplitLockTrap::BusLockDebug),
    ("exc_debug_user", SplitLockTrap::BusLockDebug),
    ("handle_bus_lock", SplitLockTrap::BusLockDebug),
    (
        "asm_exc_alignment_check",
        SplitLockTrap::SplitLockAlignmentCheck,
    ),
    (
        "exc_alignment_check",
        SplitLockTrap::SplitLockAlignmentCheck,
    ),
    (
        "handle_user_split_lock",
        SplitLockTrap::SplitLockAlignmentCheck,
    ),
    ("split_lock_warn", SplitLockTrap::SplitLockAlignmentCheck),
    (
        "__split_lock_reenable",
        SplitLockTrap::SplitLockAlignmentCheck,
    ),
    (
        "__split_lock_reenable_unlock",
        SplitLockTrap::SplitLockAlignmentCheck,
    ),
];

/// Kernel samples in a split lock's trap, entered from one user function.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrapSamples {
    /// The trap most of them were in.
    pub trap: SplitLockTrap,
    /// Kernel samples in the trap path ([`SPLIT_LOCK_TRAP_PATH`]) under that function.
    pub samples: u64,
}

/// The kernel samples of `stacks` in a split lock's trap ([`SPLIT_LOCK_TRAP_PATH`]) whose
/// thread entered the kernel from `symbol` in `module` (the first user frame under the
/// kernel's: the locking function, as the kernel's `entries` name it); `None` when there are
/// none, as where split locks are plain bus locks (an AMD guest: no detection) or without
/// call chains (a stack of its sampled function only shows no user frame).
pub fn split_lock_trap(stacks: &[StackCount], symbol: &str, module: &str) -> Option<TrapSamples> {
    let mut by_trap: std::collections::BTreeMap<SplitLockTrap, u64> = Default::default();
    for s in stacks {
        let user = s
            .frames
            .iter()
            .position(|f| f.module != KERNEL_MODULE)
            .unwrap_or(s.frames.len());
        let from = s.frames.get(user);
        if user == 0
            || from.is_none_or(|f| f.module != module || f.function.as_deref() != Some(symbol))
        {
            continue;
        }
        let trap = s.frames[..user].iter().find_map(|f| {
            SPLIT_LOCK_TRAP_PATH
                .iter()
                .find(|(name, _)| f.function.as_deref() == Some(*name))
                .map(|(_, trap)| *trap)
        });
        if let Some(trap) = trap {
            // Saturating: a saved file's counts are outside input.
            let n = by_trap.entry(trap).or_default();
            *n = n.saturating_add(s.samples);
        }
    }
    let trap = by_trap.iter().max_by_key(|(_, n)| **n).map(|(t, _)| *t)?;
    Some(TrapSamples {
        trap,
        samples: by_trap.values().fold(0u64, |a, n| a.saturating_add(*n)),
    })
}

/// Kernel time: the share of samples in kernel code per process (from each thread's kernel
/// samples), the hottest kernel functions, and the followed threads' CPU time by the kernel's
/// accounting against what the samples stand for.
pub fn report(rec: &Recording, hot: &mut HotSpots) -> KernelReport {
    use std::collections::BTreeMap;
    let mut by_pid: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    for t in &hot.threads {
        let e = by_pid.entry(t.figures.pid).or_default();
        e.0 += t.samples;
        e.1 += t.kernel_samples;
    }
    let command = |pid: u32| {
        rec.followed
            .iter()
            .find(|p| p.pid == pid)
            .map(|p| p.command.clone())
            .or_else(|| rec.thread_names.get(&pid).cloned())
            .unwrap_or_else(|| "?".into())
    };
    let mut processes: Vec<ProcessSplit> = by_pid
        .into_iter()
        .filter(|(_, (samples, _))| *samples > 0)
        .map(|(pid, (samples, kernel_samples))| ProcessSplit {
            pid,
            command: command(pid),
            samples,
            kernel_samples,
            kernel_share: kernel_samples as f64 / samples as f64,
        })
        .collect();
    processes.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.pid.cmp(&b.pid)));
    let samples: u64 = rec.kernel_samples.values().sum();
    let with_split: Vec<&threads::ThreadFigures> = rec
        .threads
        .iter()
        .filter(|t| t.system_s.is_some())
        .collect();
    let cpu = (!with_split.is_empty()).then(|| CpuCoverage {
        cpu_s: with_split.iter().map(|t| t.cpu_s).sum(),
        system_s: with_split.iter().filter_map(|t| t.system_s).sum(),
        sampled_s: rec.total_samples as f64 / rec.frequency_hz.max(1) as f64,
    });
    let unnamed_because = hot.kernel_unnamed.map(|u| {
        crate::words::diagnose::kernel_unnamed(
            u == Unnamed::Hidden,
            std::fs::read_to_string("/proc/sys/kernel/kptr_restrict")
                .ok()
                .and_then(|s| s.trim().parse().ok()),
        )
    });
    KernelReport {
        entries: if rec.callchains {
            kernel_entries(&hot.stacks, rec.total_samples)
        } else {
            Vec::new()
        },
        sampling: rec.kernel.clone(),
        samples,
        share: samples as f64 / rec.total_samples.max(1) as f64,
        functions: std::mem::take(&mut hot.kernel_functions),
        unnamed_because,
        processes,
        cpu,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::symbolize::stack::StackFrame;

    /// A named frame of `module`.
    fn frame(function: &str, module: &str) -> StackFrame {
        StackFrame {
            address: 1,
            function: Some(function.into()),
            module: module.into(),
            offset: 0,
            file_offset: None,
        }
    }

    /// The dd case: `read`'s kernel chains cut at a retpoline thunk count with its system
    /// call, not as another way in.
    #[test]
    fn kernel_samples_group_by_the_user_function_that_entered_the_kernel() {
        let k = |f: &str| frame(f, KERNEL_MODULE);
        let libc = |f: &str| frame(f, "/usr/lib/x86_64-linux-gnu/libc.so.6");
        let stacks = vec![
            StackCount {
                frames: vec![k("read_zero"), k("do_syscall_64"), libc("read")],
                samples: 6,
            },
            StackCount {
                frames: vec![k("__x86_indirect_thunk_rax"), libc("read")],
                samples: 2,
            },
            StackCount {
                frames: vec![k("clear_page_erms"), k("exc_page_fault"), libc("memset")],
                samples: 1,
            },
            StackCount {
                frames: vec![libc("memset")],
                samples: 1,
            },
        ];
        let e = kernel_entries(&stacks, 10);
        let got: Vec<(&str, KernelEntryKind, u64)> = e
            .iter()
            .map(|e| (e.from.as_str(), e.kind, e.samples))
            .collect();
        assert_eq!(
            got,
            vec![
                ("read", KernelEntryKind::SystemCall, 8),
                ("memset", KernelEntryKind::PageFault, 1),
            ]
        );
        assert_eq!(e[0].share, 0.8);
    }

    /// The Emerald Rapids guest whose kernel traps bus locks: the #DB handler's stacks
    /// (with what it called, and a timer interrupt taken inside it) are the trap's; a timer
    /// interrupt taken at the locked instruction and another function's trap are not.
    #[test]
    fn a_split_locks_trap_is_the_kernel_samples_of_its_handler_under_the_locking_function() {
        let k = |f: &str| frame(f, KERNEL_MODULE);
        let user = |f: &str| frame(f, "./split_lock");
        let stack = |frames: Vec<StackFrame>, samples| StackCount { frames, samples };
        let stacks = vec![
            stack(
                vec![
                    k("exc_debug_user"),
                    k("asm_exc_debug"),
                    user("split_locked_add"),
                ],
                21382,
            ),
            stack(
                vec![
                    k("___ratelimit"),
                    k("handle_bus_lock"),
                    k("exc_debug_user"),
                    k("asm_exc_debug"),
                    user("split_locked_add"),
                ],
                5,
            ),
            stack(
                vec![
                    k("handle_softirqs"),
                    k("asm_sysvec_apic_timer_interrupt"),
                    k("exc_debug_user"),
                    k("asm_exc_debug"),
                    user("split_locked_add"),
                ],
                6,
            ),
            stack(
                vec![
                    k("handle_softirqs"),
                    k("asm_sysvec_apic_timer_interrupt"),
                    user("split_locked_add"),
                ],
                9,
            ),
            stack(vec![user("split_locked_add"), user("main")], 13303),
            stack(
                vec![
                    k("exc_debug_user"),
                    k("asm_exc_debug"),
                    user("other_locker"),
                ],
                7,
            ),
        ];
        let t = split_lock_trap(&stacks, "split_locked_add", "./split_lock").unwrap();
        assert_eq!(t.trap, SplitLockTrap::BusLockDebug);
        assert_eq!(t.samples, 21382 + 5 + 6);
        // The same function in another module is another function.
        assert_eq!(
            split_lock_trap(&stacks, "split_locked_add", "./other"),
            None
        );
        // No trap under it: none.
        assert_eq!(
            split_lock_trap(&stacks[3..5], "split_locked_add", "./split_lock"),
            None
        );
    }

    #[test]
    fn a_kernel_stack_tells_a_system_call_from_a_page_fault() {
        use KernelEntryKind::*;
        let write = ["_raw_spin_unlock_irqrestore", "vfs_write", "do_syscall_64"];
        assert_eq!(KernelEntryKind::of(write), Some(SystemCall));
        let fault = ["clear_page_erms", "handle_mm_fault", "exc_page_fault"];
        assert_eq!(KernelEntryKind::of(fault), Some(PageFault));
        // A fault taken inside a system call (copying to user memory) is the system call's.
        let both = [
            "handle_mm_fault",
            "exc_page_fault",
            "_copy_to_user",
            "do_syscall_64",
        ];
        assert_eq!(KernelEntryKind::of(both), Some(SystemCall));
        let timer = [
            "irqentry_exit_to_user_mode",
            "asm_sysvec_apic_timer_interrupt",
        ];
        assert_eq!(KernelEntryKind::of(timer), Some(Other));
        // A chain cut at a retpoline thunk says nothing.
        assert_eq!(KernelEntryKind::of(["__x86_indirect_thunk_rax"]), None);
    }
}
