//! Kernel code named: its functions from `/proc/kallsyms`, and why they go unnamed when its
//! addresses are hidden (`kptr_restrict`) or the file cannot be read; the module name kernel
//! frames carry, and where kernel addresses begin.

use std::sync::Arc;

/// The module name kernel frames carry, as `perf` names the kernel's image (and as pprof's
/// tools take it).
pub const KERNEL_MODULE: &str = "[kernel.kallsyms]";

/// The name of kernel code when `/proc/kallsyms` hides its addresses.
pub const UNNAMED_KERNEL: &str = "[kernel code, unnamed]";

/// The lowest kernel address on 64-bit Linux (x86-64 and arm64 keep the kernel in the upper
/// half of the address space): an address at or above it in a call chain is kernel code.
pub const KERNEL_SPACE_START: u64 = 0xffff_8000_0000_0000;

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
    fn this_machines_kallsyms_parses() {
        // Whatever this user may see: named functions, or a reason why not.
        let k = Kallsyms::read();
        match k.unnamed() {
            None => assert!(k.lookup(u64::MAX).is_some()),
            Some(why) => assert!(k.lookup(u64::MAX).is_none(), "{why:?}"),
        }
    }
}
