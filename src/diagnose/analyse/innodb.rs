//! InnoDB's spin, recognised from the code rather than from names: distribution builds of
//! MariaDB are stripped, and their lock waits show as `mariadbd@0xde2ac0`.
//!
//! MariaDB (10.6+) spins in its `srw_mutex` and `ssux_lock` waits: `srw_pause_delay()`
//! (storage/innobase/sync/srw_lock.cc) is `my_cpu_relax_multiplier / 4 * srv_spin_wait_delay`
//! PAUSEs a round, for up to `srv_n_spin_wait_rounds` rounds, then a futex wait; and
//! `LF_BACKOFF()` (include/my_cpu.h) spins `my_cpu_relax_multiplier` PAUSEs between looks at
//! a reference count. `my_cpu_relax_multiplier` is exported (it is mysys's, set by
//! `my_cpu_init` at start-up: 200, or 100 where 16 PAUSEs take over 30 TSC cycles each), so
//! the dynamic symbol table gives its address even in a stripped binary; a PAUSE spin in a
//! function that reads it is one of these. The function reads `srv_spin_wait_delay`
//! (`innodb_spin_wait_delay`) right after it, multiplied in (`imul`), and
//! `srv_n_spin_wait_rounds` (`innodb_sync_spin_loops`) as the round count: the code gives their
//! addresses, and the process's memory their values now (a `SET GLOBAL` included).
//!
//! MySQL 8's `ut_delay` spins `delay * ut::spin_wait_pause_multiplier` PAUSEs
//! (`innodb_spin_wait_pause_multiplier`); MySQL's binaries keep their symbols, so it is known
//! by its name and the variables by theirs.
//!
//! [`recognise`] is a pure function of decoded instructions and the module's [`Globals`];
//! [`knob_values`] reads the values through a reader the caller gives (`/proc/PID/mem`).

use super::disasm::Insn;
use crate::spin::innodb::KNOBS;
pub use crate::spin::innodb::{Knob, KnobValue, Server, SpinShape, ValueFrom};
use iced_x86::{Mnemonic, Register};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// How a site was known as InnoDB's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "by")]
pub enum Recognised {
    /// Its code reads the server's PAUSE multiplier.
    Code {
        /// The instruction that reads it, as disassembled (`mov r12d,[rax]` after a `lea`).
        instruction: String,
        /// Its address.
        address: u64,
    },
    /// Its function's name (`ut_delay`, `srw_mutex_impl<true>::wait_and_lock()`).
    Name,
}

/// An InnoDB spin site: whose, what, how known, and the knobs it runs with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InnodbSpin {
    /// MariaDB or MySQL.
    pub server: Server,
    /// A lock's spin or the reference-count back-off.
    pub shape: SpinShape,
    /// How it was recognised.
    pub recognised: Recognised,
    /// The knobs its spin reads, with their values in this process; for MariaDB's back-off
    /// (which reads the multiplier only) also the lock spin's delay and rounds where the binary
    /// shows them ([`Globals::scanned`]), so a side whose lock spin was too cold to decode
    /// still has the server's settings.
    pub knobs: Vec<KnobValue>,
}

impl InnodbSpin {
    /// A knob's value, when listed and known.
    pub fn value(&self, knob: Knob) -> Option<u64> {
        self.knobs
            .iter()
            .find(|k| k.knob == knob)
            .and_then(|k| k.value)
    }

    /// PAUSEs of one round ([`crate::spin::innodb::pauses_per_round`]), when the values
    /// are known.
    pub fn pauses_per_round(&self) -> Option<u64> {
        crate::spin::innodb::pauses_per_round(
            self.server,
            self.shape,
            self.value(self.server.multiplier())?,
            self.value(Knob::SpinWaitDelay),
        )
    }
}

/// A global variable of the server's spin, where the module keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Variable {
    /// Its virtual address in the module.
    pub address: u64,
    /// Its size in bytes.
    pub size: u64,
}

/// The spin's globals in one module: those its symbol tables name, the GOT slots that hold
/// their addresses (code built position-independent reads them through those), and the lock
/// spin's delay and round count as the module's code reads them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Globals {
    /// By knob.
    pub named: BTreeMap<Knob, Variable>,
    /// GOT slot -> the variable's address it holds.
    pub got: BTreeMap<u64, u64>,
    /// The lock spin's delay and round count (`SpinWaitDelay`, `SyncSpinLoops`) where the
    /// symbol tables do not name them (Debian's mariadbd exports the multiplier only): read
    /// once per binary from its code ([`lock_spin_variables`]), so a process whose lock spin is
    /// too cold to be sampled still has its settings.
    pub scanned: BTreeMap<Knob, Variable>,
}

impl Globals {
    /// The globals of an ELF image; `None` when it has no PAUSE multiplier of MariaDB or
    /// MySQL (no InnoDB in it).
    pub fn from_elf(image: &[u8]) -> Option<Globals> {
        use object::{Object, ObjectSymbol, ObjectSymbolTable, RelocationTarget, SymbolKind};
        let file = object::File::parse(image).ok()?;
        let mut g = Globals::default();
        for s in file.symbols().chain(file.dynamic_symbols()) {
            if s.kind() != SymbolKind::Data || !s.is_definition() || s.address() == 0 {
                continue;
            }
            let Ok(name) = s.name() else { continue };
            if let Some(k) = KNOBS.iter().find(|k| k.variable() == name) {
                g.named.entry(*k).or_insert(Variable {
                    address: s.address(),
                    size: s.size(),
                });
            }
        }
        if !g.named.contains_key(&Knob::CpuRelaxMultiplier)
            && !g.named.contains_key(&Knob::SpinWaitPauseMultiplier)
        {
            return None;
        }
        let wanted: Vec<u64> = g.named.values().map(|v| v.address).collect();
        let dynsyms = file.dynamic_symbol_table();
        for (slot, r) in file.dynamic_relocations().into_iter().flatten() {
            let target = match r.target() {
                RelocationTarget::Symbol(i) => dynsyms
                    .as_ref()
                    .and_then(|t| t.symbol_by_index(i).ok())
                    .map(|s| s.address().wrapping_add(r.addend() as u64)),
                // A position-independent executable's GOT entry of its own global.
                RelocationTarget::Absolute => Some(r.addend() as u64),
                _ => None,
            };
            if let Some(t) = target.filter(|t| wanted.contains(t)) {
                g.got.insert(slot, t);
            }
        }
        if let Some((delay, rounds)) = lock_spin_variables(&file, &g) {
            for (k, v) in [(Knob::SpinWaitDelay, delay), (Knob::SyncSpinLoops, rounds)] {
                if !g.named.contains_key(&k) {
                    g.scanned.insert(k, v);
                }
            }
        }
        Some(g)
    }

    /// The server whose multiplier this module holds (MariaDB's first).
    pub fn server(&self) -> Option<Server> {
        if self.named.contains_key(&Knob::CpuRelaxMultiplier) {
            Some(Server::MariaDb)
        } else if self.named.contains_key(&Knob::SpinWaitPauseMultiplier) {
            Some(Server::MySql)
        } else {
            None
        }
    }
}

/// Bytes decoded after each reference to the PAUSE multiplier when scanning a binary for its
/// lock spin: the delay and the round count are read 2 to 6 instructions after it in MariaDB
/// 10.11's three srw_lock waits ([`NEAR_MULTIPLIER`] instructions of up to 8 bytes).
const SCAN_WINDOW_BYTES: usize = 8 * (NEAR_MULTIPLIER + 2);

/// The delay and round count variables the binary's lock spins read: every instruction of its
/// executable sections that takes the PAUSE multiplier's address (`lea` of it, or a `mov` from
/// its GOT slot) is decoded onwards and read as [`recognise`] reads a lock spin; the pair most
/// of them read. `None` where no code reads one (a back-off alone) or the symbol tables name
/// both. One linear pass over the code (~0.2 s for mariadbd's 20 MiB of text, release build).
fn lock_spin_variables(file: &object::File, g: &Globals) -> Option<(Variable, Variable)> {
    use iced_x86::{Decoder, DecoderOptions, Instruction};
    use object::{Object, ObjectSection, SectionKind};
    if g.named.contains_key(&Knob::SpinWaitDelay) && g.named.contains_key(&Knob::SyncSpinLoops) {
        return None;
    }
    let server = g.server()?;
    let multiplier = g.named.get(&server.multiplier())?.address;
    let mut found: BTreeMap<(u64, u64, u64, u64), usize> = BTreeMap::new();
    for section in file.sections().filter(|s| s.kind() == SectionKind::Text) {
        let (Ok(code), base) = (section.data(), section.address()) else {
            continue;
        };
        let mut decoder = Decoder::with_ip(64, code, base, DecoderOptions::NONE);
        let mut i = Instruction::default();
        while decoder.can_decode() {
            decoder.decode_out(&mut i);
            if i.is_invalid() || !i.is_ip_rel_memory_operand() {
                continue;
            }
            let target = i.ip_rel_memory_address();
            let takes_it = match i.mnemonic() {
                Mnemonic::Lea => target == multiplier,
                Mnemonic::Mov => g.got.get(&target) == Some(&multiplier),
                _ => false,
            };
            if !takes_it {
                continue;
            }
            let at = (i.ip() - base) as usize;
            let window = &code[at..code.len().min(at + SCAN_WINDOW_BYTES)];
            let insns = super::disasm::decode(window, i.ip());
            let Some(end) = insns.last().map(|x| x.addr) else {
                continue;
            };
            if let Some(CodeMatch {
                shape: SpinShape::LockSpin,
                delay: Some(d),
                rounds: Some(r),
                ..
            }) = recognise(&insns, end, g)
            {
                *found
                    .entry((d.address, d.size, r.address, r.size))
                    .or_default() += 1;
            }
        }
    }
    let ((da, ds, ra, rs), _) = found.into_iter().max_by_key(|(_, n)| *n)?;
    Some((
        Variable {
            address: da,
            size: ds,
        },
        Variable {
            address: ra,
            size: rs,
        },
    ))
}

/// What the spin's code reads, found by [`recognise`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodeMatch {
    /// Whose.
    pub server: Server,
    /// Which spin.
    pub shape: SpinShape,
    /// The instruction that reads the multiplier: address and text.
    pub multiplier_read: (u64, String),
    /// The variable multiplied in (`imul`) next to it: `srv_spin_wait_delay`.
    pub delay: Option<Variable>,
    /// The round count read next to it: `srv_n_spin_wait_rounds`.
    pub rounds: Option<Variable>,
}

/// A read of a fixed global.
struct Read {
    index: usize,
    address: u64,
    size: u64,
    mnemonic: Mnemonic,
}

/// The reads of fixed globals in `insns`: direct (`mov esi,[rip+x]`), through a register a
/// `lea` loaded (`lea rax,[rip+x]; mov esi,[rax]`), or through a GOT slot
/// (`mov rax,[rip+got]; mov esi,[rax]`).
fn global_reads(insns: &[Insn], g: &Globals) -> Vec<Read> {
    let mut holds: BTreeMap<Register, u64> = BTreeMap::new();
    let mut out = Vec::new();
    for (index, i) in insns.iter().enumerate() {
        let dest = i.writes_registers.iter().copied().find(|r| r.is_gpr());
        let mut points_to = None;
        if let Some(a) = i.lea_address {
            points_to = Some(a);
        } else if let Some(m) = i.mem.as_ref().filter(|_| i.reads_memory && !i.call) {
            let at = m.absolute.or_else(|| match m.registers.as_slice() {
                [r] if m.displacement == 0 => holds.get(r).copied(),
                _ => None,
            });
            if let Some(a) = at {
                match g.got.get(&a) {
                    Some(&target) if i.mnemonic == Mnemonic::Mov => points_to = Some(target),
                    _ => out.push(Read {
                        index,
                        address: a,
                        size: u64::from(m.size),
                        mnemonic: i.mnemonic,
                    }),
                }
            }
        }
        for w in &i.writes_registers {
            holds.remove(w);
        }
        if let (Some(r), Some(a)) = (dest, points_to) {
            holds.insert(r, a);
        }
    }
    out
}

/// Instructions after the multiplier's read within which the delay and the round count are
/// read: in MariaDB 10.11's three srw_lock waits, 2 to 6.
const NEAR_MULTIPLIER: usize = 12;

/// Recognises InnoDB's spin in a function decoded from its first byte, whose PAUSE loop
/// starts at `loop_start`: the function reads the server's PAUSE multiplier (the read nearest
/// before the loop is taken). Next to it, a global multiplied in is the delay and another
/// read is the round count: a lock's spin; the multiplier alone is MariaDB's back-off.
/// Variables the symbol tables name win over what the code suggests.
pub fn recognise(insns: &[Insn], loop_start: u64, g: &Globals) -> Option<CodeMatch> {
    let server = g.server()?;
    let multiplier = g.named.get(&server.multiplier())?.address;
    let reads = global_reads(insns, g);
    let is_mult = |r: &&Read| r.address == multiplier;
    let m = reads
        .iter()
        .filter(is_mult)
        .rfind(|r| insns[r.index].addr <= loop_start)
        .or_else(|| reads.iter().find(is_mult))?;
    let near: Vec<&Read> = reads
        .iter()
        .filter(|r| r.index > m.index && r.index <= m.index + NEAR_MULTIPLIER)
        .filter(|r| r.address != multiplier)
        .collect();
    let var = |r: &Read| Variable {
        address: r.address,
        size: r.size,
    };
    let delay_read = near.iter().find(|r| r.mnemonic == Mnemonic::Imul);
    let delay = g
        .named
        .get(&Knob::SpinWaitDelay)
        .copied()
        .or_else(|| delay_read.map(|r| var(r)));
    let rounds = g.named.get(&Knob::SyncSpinLoops).copied().or_else(|| {
        let d = delay_read?;
        near.iter()
            .find(|r| r.address != d.address && r.mnemonic == Mnemonic::Mov)
            .map(|r| var(r))
    });
    let shape = match (server, delay_read) {
        (Server::MariaDb, None) => SpinShape::Backoff,
        _ => SpinShape::LockSpin,
    };
    let i = &insns[m.index];
    Some(CodeMatch {
        server,
        shape,
        multiplier_read: (i.addr, i.text.clone()),
        delay: delay.filter(|_| shape == SpinShape::LockSpin),
        rounds: rounds.filter(|_| shape == SpinShape::LockSpin),
    })
}

/// The match for a function known by its name (`ut_delay`, an srw_lock wait) whose code did
/// not show the multiplier's read: the variables the symbol tables name.
pub fn by_name(g: &Globals) -> Option<CodeMatch> {
    let server = g.server()?;
    Some(CodeMatch {
        server,
        shape: SpinShape::LockSpin,
        multiplier_read: (0, String::new()),
        delay: g.named.get(&Knob::SpinWaitDelay).copied(),
        rounds: g.named.get(&Knob::SyncSpinLoops).copied(),
    })
}

/// The value of `--innodb-spin-wait-delay=N` (or `_`, or `--loose-`) on a command line, the
/// last one given.
pub fn command_line_value(args: &[String], knob: Knob) -> Option<u64> {
    let dashed = knob.name().replace('_', "-");
    args.iter()
        .filter_map(|a| {
            let a = a.strip_prefix("--")?;
            let a = a.strip_prefix("loose-").unwrap_or(a);
            let (k, v) = a.split_once('=')?;
            (k.replace('_', "-") == dashed).then(|| v.trim().parse().ok())?
        })
        .next_back()
}

/// The knobs of a match with their values: read through `read` (a variable's address and
/// size to its value, `None` when unreadable), else from the command line `args`, else the
/// server's default.
pub fn knob_values(
    m: &CodeMatch,
    g: &Globals,
    read: &mut dyn FnMut(Variable) -> Option<u64>,
    args: &[String],
) -> Vec<KnobValue> {
    let mut knobs = vec![(
        m.server.multiplier(),
        g.named.get(&m.server.multiplier()).copied(),
    )];
    let scanned = |k: Knob| g.scanned.get(&k).copied();
    if m.shape == SpinShape::LockSpin {
        knobs.push((
            Knob::SpinWaitDelay,
            m.delay.or(scanned(Knob::SpinWaitDelay)),
        ));
        knobs.push((
            Knob::SyncSpinLoops,
            m.rounds.or(scanned(Knob::SyncSpinLoops)),
        ));
    } else if let (Some(d), Some(r)) = (scanned(Knob::SpinWaitDelay), scanned(Knob::SyncSpinLoops))
    {
        // The back-off reads the multiplier only; the server's lock-spin settings are listed
        // beside it (the same process's), so a side whose lock spin was too cold to decode
        // still says whether `innodb_spin_wait_delay` changed.
        knobs.push((Knob::SpinWaitDelay, Some(d)));
        knobs.push((Knob::SyncSpinLoops, Some(r)));
    }
    knobs
        .into_iter()
        .map(|(knob, var)| {
            let read = var
                .and_then(&mut *read)
                .filter(|v| *v <= knob.upper_bound());
            let (value, from) = match read {
                Some(v) => (Some(v), ValueFrom::ProcessMemory),
                None => match command_line_value(args, knob).filter(|_| knob.settable()) {
                    Some(v) => (Some(v), ValueFrom::CommandLine),
                    None => match knob.default_value(m.server) {
                        Some(v) => (Some(v), ValueFrom::ServerDefault),
                        None => (None, ValueFrom::Unknown),
                    },
                },
            };
            KnobValue { knob, value, from }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::analyse::disasm::decode;

    /// MariaDB 10.11.19's (Debian 12) `srw_mutex_impl<true>::wait_and_lock`, from its start to
    /// the PAUSE loop, at 0xde2ac0 of /usr/sbin/mariadbd: the multiplier at 0x1838638 (its
    /// dynamic symbol), the delay at 0x2170b78, the rounds at 0x2170b80.
    const WAIT_AND_LOCK: &[u8] = &[
        0x55, // push rbp
        0x48, 0x89, 0xe5, // mov rbp,rsp
        0x41, 0x55, // push r13
        0x49, 0x89, 0xfd, // mov r13,rdi
        0x41, 0x54, // push r12
        0x53, // push rbx
        0x48, 0x8d, 0x5f, 0x04, // lea rbx,[rdi+4]
        0x48, 0x83, 0xec, 0x08, // sub rsp,8
        0x48, 0x8d, 0x05, 0x5d, 0x5b, 0xa5, 0x00, // lea rax,[rip+0xa55b5d]
        0x44, 0x8b, 0x20, // mov r12d,[rax]
        0x48, 0x8d, 0x05, 0x93, 0xe0, 0x38, 0x01, // lea rax,[rip+0x138e093]
        0x41, 0xc1, 0xec, 0x02, // shr r12d,2
        0x44, 0x0f, 0xaf, 0x20, // imul r12d,[rax]
        0x48, 0x8d, 0x05, 0x8c, 0xe0, 0x38, 0x01, // lea rax,[rip+0x138e08c]
        0x48, 0x8b, 0x10, // mov rdx,[rax]
        0x48, 0x85, 0xd2, // test rdx,rdx
        0x74, 0x3b, // je
        0x41, 0x8d, 0x74, 0x24, 0xff, // lea esi,[r12-1]
        0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00, // nop
        0x89, 0xf0, // mov eax,esi
        0x45, 0x85, 0xe4, // test r12d,r12d
        0x74, 0x08, // je
        0x90, // nop
        0xf3, 0x90, // pause
        0x83, 0xe8, 0x01, // sub eax,1
        0x73, 0xf9, // jae
    ];

    fn mariadb_globals() -> Globals {
        let mut g = Globals::default();
        g.named.insert(
            Knob::CpuRelaxMultiplier,
            Variable {
                address: 0x1838638,
                size: 4,
            },
        );
        g
    }

    // The MariaDB InnoDB spin case: Debian's stripped mariadbd names none of its lock code; its
    // wait reads the exported multiplier, then the delay (multiplied in) and the round count.
    #[test]
    fn the_mariadb_innodb_spin_case_is_recognised_from_the_multiplier_read() {
        let insns = decode(WAIT_AND_LOCK, 0xde2ac0);
        let pause = insns.iter().find(|i| i.pause).unwrap().addr;
        assert_eq!(pause, 0xde2b10);
        let m = recognise(&insns, pause, &mariadb_globals()).unwrap();
        assert_eq!(m.server, Server::MariaDb);
        assert_eq!(m.shape, SpinShape::LockSpin);
        assert_eq!(m.multiplier_read.0, 0xde2adb);
        assert_eq!(
            m.delay,
            Some(Variable {
                address: 0x2170b78,
                size: 4
            })
        );
        assert_eq!(
            m.rounds,
            Some(Variable {
                address: 0x2170b80,
                size: 8
            })
        );
        // Values from memory win; the multiplier has no setting, the rest fall back to the
        // command line, then the default.
        let mem: BTreeMap<u64, u64> = [(0x1838638, 100), (0x2170b78, 4), (0x2170b80, 30)].into();
        let g = mariadb_globals();
        let k = knob_values(&m, &g, &mut |v| mem.get(&v.address).copied(), &[]);
        let vals: Vec<_> = k.iter().map(|k| (k.knob, k.value, k.from)).collect();
        assert_eq!(
            vals,
            [
                (
                    Knob::CpuRelaxMultiplier,
                    Some(100),
                    ValueFrom::ProcessMemory
                ),
                (Knob::SpinWaitDelay, Some(4), ValueFrom::ProcessMemory),
                (Knob::SyncSpinLoops, Some(30), ValueFrom::ProcessMemory),
            ]
        );
        let spin = InnodbSpin {
            server: m.server,
            shape: m.shape,
            recognised: Recognised::Name,
            knobs: k,
        };
        assert_eq!(spin.pauses_per_round(), Some(100));
        let args = ["--innodb_spin_wait_delay=7".to_string()];
        let k = knob_values(&m, &g, &mut |_| None, &args);
        let vals: Vec<_> = k.iter().map(|k| (k.knob, k.value, k.from)).collect();
        assert_eq!(
            vals,
            [
                (Knob::CpuRelaxMultiplier, None, ValueFrom::Unknown),
                (Knob::SpinWaitDelay, Some(7), ValueFrom::CommandLine),
                (Knob::SyncSpinLoops, Some(30), ValueFrom::ServerDefault),
            ]
        );
        // A value past what the server accepts was not the variable.
        let k = knob_values(&m, &g, &mut |_| Some(1 << 40), &[]);
        assert_eq!(k[1].from, ValueFrom::ServerDefault);
    }

    #[test]
    fn a_pause_loop_that_reads_no_multiplier_is_not_innodbs() {
        let insns = decode(WAIT_AND_LOCK, 0xde2ac0);
        let mut g = mariadb_globals();
        g.named.get_mut(&Knob::CpuRelaxMultiplier).unwrap().address = 0x1234;
        assert_eq!(recognise(&insns, 0xde2b10, &g), None);
        assert_eq!(recognise(&insns, 0xde2b10, &Globals::default()), None);
    }

    #[test]
    fn the_multiplier_read_through_the_got_and_alone_is_the_backoff() {
        // mov rax,[rip+got]; mov ecx,[rax]; lea eax,[rcx-1]; pause; sub eax,1; jae
        let code = [
            0x48, 0x8b, 0x05, 0xf9, 0x0f, 0x00, 0x00, // mov rax,[rip+0xff9] -> 0x2000
            0x8b, 0x08, // mov ecx,[rax]
            0x8d, 0x41, 0xff, // lea eax,[rcx-1]
            0xf3, 0x90, // pause
            0x83, 0xe8, 0x01, // sub eax,1
            0x73, 0xf9, // jae
        ];
        let insns = decode(&code, 0x1000);
        let mut g = mariadb_globals();
        g.got.insert(0x2000, 0x1838638);
        let m = recognise(&insns, 0x100c, &g).unwrap();
        assert_eq!(m.shape, SpinShape::Backoff);
        assert_eq!(m.multiplier_read.0, 0x1007);
        let k = knob_values(&m, &g, &mut |_| Some(200), &[]);
        assert_eq!(k.len(), 1);
    }

    #[test]
    fn command_line_spellings() {
        let a = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let k = Knob::SpinWaitDelay;
        assert_eq!(
            command_line_value(&a(&["--innodb-spin-wait-delay=0"]), k),
            Some(0)
        );
        assert_eq!(
            command_line_value(
                &a(&[
                    "--loose-innodb_spin_wait_delay=2",
                    "--innodb_spin_wait_delay=9"
                ]),
                k
            ),
            Some(9)
        );
        assert_eq!(
            command_line_value(&a(&["--innodb-sync-spin-loops=5"]), k),
            None
        );
    }
}
