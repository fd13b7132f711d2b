//! Kernel time: whether kernel code was sampled (and why not), its functions named from
//! `/proc/kallsyms`, and each process's and thread's split of samples between user space and
//! the kernel. A server that lives in system calls (Redis under `redis-benchmark`: most of its
//! CPU time in the network stack) is misread when only its user space is sampled; where kernel
//! sampling is refused, the CPU time the samples do not cover is stated from /proc.
//!
//! The kernel's own rules (`kernel/events/core.c`, `perf_allow_kernel`): kernel code may be
//! sampled with `perf_event_paranoid` <= 1, or with `CAP_PERFMON` (`CAP_SYS_ADMIN` before
//! Linux 5.8); at 2 and above an unprivileged `perf_event_open` with `exclude_kernel` clear
//! fails with EACCES. The sampler tries kernel code first and falls back to user space only.

use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The module name kernel frames carry, as `perf` names the kernel's image (and as pprof's
/// tools take it).
pub const KERNEL_MODULE: &str = "[kernel.kallsyms]";

/// The name of kernel code when `/proc/kallsyms` hides its addresses.
pub const UNNAMED_KERNEL: &str = "[kernel code, unnamed]";

/// The lowest kernel address on 64-bit Linux (x86-64 and arm64 keep the kernel in the upper
/// half of the address space): an address at or above it in a call chain is kernel code.
pub const KERNEL_SPACE_START: u64 = 0xffff_8000_0000_0000;

/// Whether kernel code was sampled.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "state")]
pub enum KernelSampling {
    /// Kernel code was sampled with user space (`exclude_kernel` clear).
    Sampled,
    /// `--user-only` asked for user space only.
    Off,
    /// The kernel refused kernel sampling; user space only was sampled.
    Refused {
        /// `kernel.perf_event_paranoid` then, when it could be read.
        paranoid: Option<i32>,
        /// The error of the refused open.
        error: String,
    },
}

impl KernelSampling {
    /// True when kernel code was sampled.
    pub fn sampled(&self) -> bool {
        matches!(self, KernelSampling::Sampled)
    }
}

/// `kernel.perf_event_paranoid` now, when it can be read.
pub fn paranoid() -> Option<i32> {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .ok()
        .and_then(|s| s.trim().parse().ok())
}

/// One kernel function: its start and name.
#[derive(Debug, Clone, PartialEq, Eq)]
struct KernelSymbol {
    addr: u64,
    name: Arc<str>,
}

/// The kernel's function symbols from `/proc/kallsyms`, sorted by address, read once per
/// diagnosis.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Kallsyms {
    symbols: Vec<KernelSymbol>,
    /// True when the file listed symbols but every address read zero (`kptr_restrict`).
    hidden: bool,
}

/// Why kernel code could not be named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unnamed {
    /// `/proc/kallsyms` could not be read.
    Unreadable,
    /// Its addresses read zero: `kernel.kptr_restrict` hides them from this user (1: without
    /// `CAP_SYSLOG`; 2: from everyone).
    Hidden,
}

impl Kallsyms {
    /// Parses the text of `/proc/kallsyms`: `ADDRESS TYPE NAME [MODULE]` per line. Only code
    /// symbols (types `t`/`T`, and `w`/`W` weak ones) are kept; a module's symbol keeps its
    /// module's name (`nf_hook_slow [nf_tables]` reads `nf_hook_slow`).
    pub fn parse(text: &str) -> Kallsyms {
        let mut listed = false;
        let mut symbols: Vec<KernelSymbol> = text
            .lines()
            .filter_map(|line| {
                let mut f = line.split_whitespace();
                let addr = u64::from_str_radix(f.next()?, 16).ok()?;
                let kind = f.next()?;
                let name = f.next()?;
                if !matches!(kind, "t" | "T" | "w" | "W") {
                    return None;
                }
                listed = true;
                (addr != 0).then(|| KernelSymbol {
                    addr,
                    name: Arc::from(name),
                })
            })
            .collect();
        symbols.sort_by_key(|s| s.addr);
        let hidden = listed && symbols.is_empty();
        Kallsyms { symbols, hidden }
    }

    /// Reads `/proc/kallsyms`.
    pub fn read() -> Kallsyms {
        std::fs::read_to_string("/proc/kallsyms")
            .map(|t| Kallsyms::parse(&t))
            .unwrap_or_default()
    }

    /// Why kernel code goes unnamed, or `None` when it is named.
    pub fn unnamed(&self) -> Option<Unnamed> {
        match (self.symbols.is_empty(), self.hidden) {
            (false, _) => None,
            (true, true) => Some(Unnamed::Hidden),
            (true, false) => Some(Unnamed::Unreadable),
        }
    }

    /// The function containing `addr` and its start: the last symbol at or below it (kallsyms
    /// gives no sizes).
    pub fn lookup(&self, addr: u64) -> Option<(u64, &str)> {
        let i = self.symbols.partition_point(|s| s.addr <= addr);
        let s = self.symbols.get(i.checked_sub(1)?)?;
        Some((s.addr, &s.name))
    }

    /// The size of the function at `start`: up to the next symbol (0 for the last).
    pub fn size_at(&self, start: u64) -> u64 {
        let i = self.symbols.partition_point(|s| s.addr <= start);
        self.symbols
            .get(i)
            .map_or(0, |next| next.addr.saturating_sub(start))
    }
}

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

/// A kernel function's samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KernelFunction {
    /// Its name, from `/proc/kallsyms`.
    pub function: String,
    /// Samples in it.
    pub samples: u64,
    /// Share of all samples.
    pub share: f64,
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

/// Kernel functions listed in the report.
pub const KERNEL_FUNCTIONS: usize = 10;

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "\
ffffffff81000000 T _stext
ffffffff81000080 T entry_SYSCALL_64
ffffffff81a00000 D some_data
ffffffff81b00000 t tcp_sendmsg_locked
ffffffff81b00400 T tcp_sendmsg
ffffffffc0300000 t nf_hook_slow\t[nf_tables]
";

    #[test]
    fn kernel_addresses_name_the_function_they_lie_in() {
        let k = Kallsyms::parse(TEXT);
        assert_eq!(k.unnamed(), None);
        assert_eq!(
            k.lookup(0xffffffff81b00410),
            Some((0xffffffff81b00400, "tcp_sendmsg"))
        );
        assert_eq!(
            k.lookup(0xffffffff81b00000),
            Some((0xffffffff81b00000, "tcp_sendmsg_locked"))
        );
        // Data symbols are not functions: an address past one belongs to the code before.
        assert_eq!(
            k.lookup(0xffffffff81a00010),
            Some((0xffffffff81000080, "entry_SYSCALL_64"))
        );
        assert_eq!(k.lookup(0xffffffffc0300004).unwrap().1, "nf_hook_slow");
        assert_eq!(k.lookup(0x1000), None, "below the kernel's first symbol");
        assert_eq!(k.size_at(0xffffffff81b00000), 0x400);
    }

    #[test]
    fn addresses_hidden_by_kptr_restrict_leave_kernel_code_unnamed_and_say_why() {
        let hidden = TEXT
            .lines()
            .map(|l| format!("0000000000000000{}", &l[16..]))
            .collect::<Vec<_>>()
            .join("\n");
        let k = Kallsyms::parse(&hidden);
        assert_eq!(k.unnamed(), Some(Unnamed::Hidden));
        assert_eq!(k.lookup(0xffffffff81b00410), None);
        assert_eq!(Kallsyms::parse("").unnamed(), Some(Unnamed::Unreadable));
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

    #[test]
    fn this_machines_kallsyms_parses() {
        // Whatever this user may see: named functions, or a reason why not.
        let k = Kallsyms::read();
        match k.unnamed() {
            None => assert!(k.lookup(u64::MAX).is_some()),
            Some(why) => assert!(k.lookup(u64::MAX).is_none(), "{why:?}"),
        }
    }
}
