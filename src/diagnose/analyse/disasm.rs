//! Hot instructions: decode the code around sampled addresses (iced-x86) and say what the
//! hot code is: a spin-wait on PAUSE, a spin loop without PAUSE, a locked read-modify-write,
//! a memory load, or plain computation.
//!
//! A spin loop may re-read its flag through a call (`while (load_turn() != me) ;` with the
//! getter out of line): the loop is a call, and the load sits in another function. This module
//! reads no other function's code; the caller answers, per call, what function it reaches
//! ([`Callee`], judged by [`load_only_leaf`] on that function's decoded bytes), so the
//! analysis stays a pure function of bytes and counts.
//!
//! Skid: a timer sample interrupts the thread at an instruction boundary, so the address it
//! records is usually the instruction *after* the one that was executing: the seed's hot
//! addresses were the `jmp` and the `sub` right after a `pause`. Every sample is therefore
//! judged on two instructions, the one at its address and the one before it. Decoding starts
//! at the symbol's first byte so that "the one before" is a real instruction boundary.

use iced_x86::{
    Decoder, DecoderOptions, FlowControl, Formatter, Instruction, InstructionInfoFactory,
    IntelFormatter, Mnemonic, OpAccess, OpKind, Register,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// The memory operand of an instruction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemOperand {
    /// Operand size in bytes.
    pub size: u32,
    /// Displacement, as a signed offset from the base register.
    pub displacement: i64,
    /// The address itself, when the code fixes it (RIP-relative or absolute).
    pub absolute: Option<u64>,
    /// Base and index registers (full width), `None` entries omitted.
    pub registers: Vec<Register>,
}

/// One decoded instruction and the facts the classifier needs.
#[derive(Debug, Clone)]
pub struct Insn {
    /// Address, in the module's numbering.
    pub addr: u64,
    /// Encoded bytes.
    pub bytes: Vec<u8>,
    /// Intel syntax.
    pub text: String,
    /// Its mnemonic.
    pub mnemonic: Mnemonic,
    /// `pause`.
    pub pause: bool,
    /// A `lock`-prefixed instruction, or `xchg` with a memory operand (implicitly locked).
    pub locked_rmw: bool,
    /// Reads memory (`lea` and `nop` do not).
    pub reads_memory: bool,
    /// Writes memory.
    pub writes_memory: bool,
    /// Writes memory other than the stack slot a push or a call fills implicitly (a call's
    /// return address, an argument pushed): a store.
    pub stores: bool,
    /// A call.
    pub call: bool,
    /// How it passes control on (next instruction, branch, call, return...).
    pub flow: FlowControl,
    /// Target of a direct jump or conditional branch.
    pub branch_target: Option<u64>,
    /// Target of a direct call.
    pub call_target: Option<u64>,
    /// The explicit memory operand, if any.
    pub mem: Option<MemOperand>,
    /// The address a `lea` computes when the code fixes it (RIP-relative): the address of a
    /// global the code goes on to read through the register (`lea rax,[rip+x]; mov esi,[rax]`).
    pub lea_address: Option<u64>,
    /// Registers it writes (full width).
    pub writes_registers: Vec<Register>,
    /// General-purpose registers it reads (full width), address registers included.
    pub reads_registers: Vec<Register>,
}

impl Insn {
    /// One past the last byte.
    pub fn end(&self) -> u64 {
        self.addr + self.bytes.len() as u64
    }
}

fn is_read(a: OpAccess) -> bool {
    matches!(
        a,
        OpAccess::Read | OpAccess::CondRead | OpAccess::ReadWrite | OpAccess::ReadCondWrite
    )
}

fn is_write(a: OpAccess) -> bool {
    matches!(
        a,
        OpAccess::Write | OpAccess::CondWrite | OpAccess::ReadWrite | OpAccess::ReadCondWrite
    )
}

/// Decodes `code`, which starts at `start`, until the bytes run out or stop decoding.
pub fn decode(code: &[u8], start: u64) -> Vec<Insn> {
    let mut decoder = Decoder::with_ip(64, code, start, DecoderOptions::NONE);
    let mut formatter = IntelFormatter::new();
    let mut info = InstructionInfoFactory::new();
    let mut instr = Instruction::default();
    let mut out = Vec::new();
    while decoder.can_decode() {
        let offset = (decoder.ip() - start) as usize;
        decoder.decode_out(&mut instr);
        if instr.is_invalid() {
            break;
        }
        let mut text = String::new();
        formatter.format(&instr, &mut text);
        let facts = info.info(&instr);
        let reads_memory = facts.used_memory().iter().any(|m| is_read(m.access()));
        let writes_memory = facts.used_memory().iter().any(|m| is_write(m.access()));
        let has_mem_operand = (0..instr.op_count()).any(|i| instr.op_kind(i) == OpKind::Memory);
        // An operand the instruction names (a `mov [x]`, a string store's [rdi]) written; a
        // push or call writes only the stack slot below rsp, implicitly.
        let explicit_write = (0..instr.op_count()).any(|i| {
            matches!(
                instr.op_kind(i),
                OpKind::Memory | OpKind::MemoryESDI | OpKind::MemoryESEDI | OpKind::MemoryESRDI
            ) && is_write(facts.op_access(i))
        });
        let stores = explicit_write || (writes_memory && !instr.is_stack_instruction());
        let mem = (has_mem_operand && instr.mnemonic() != Mnemonic::Lea).then(|| MemOperand {
            size: instr.memory_size().size() as u32,
            displacement: instr.memory_displacement64() as i64,
            absolute: if instr.is_ip_rel_memory_operand() {
                Some(instr.ip_rel_memory_address())
            } else if instr.memory_base() == Register::None
                && instr.memory_index() == Register::None
            {
                Some(instr.memory_displacement64())
            } else {
                None
            },
            registers: [instr.memory_base(), instr.memory_index()]
                .into_iter()
                .filter(|r| *r != Register::None && *r != Register::RIP)
                .map(|r| r.full_register())
                .collect(),
        });
        let branch_target = match instr.flow_control() {
            FlowControl::ConditionalBranch | FlowControl::UnconditionalBranch
                if matches!(
                    instr.op0_kind(),
                    OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64
                ) =>
            {
                Some(instr.near_branch_target())
            }
            _ => None,
        };
        let call_target = (instr.flow_control() == FlowControl::Call
            && matches!(
                instr.op0_kind(),
                OpKind::NearBranch16 | OpKind::NearBranch32 | OpKind::NearBranch64
            ))
        .then(|| instr.near_branch_target());
        out.push(Insn {
            addr: instr.ip(),
            bytes: code[offset..offset + instr.len()].to_vec(),
            text,
            mnemonic: instr.mnemonic(),
            pause: instr.mnemonic() == Mnemonic::Pause,
            locked_rmw: instr.has_lock_prefix()
                || (instr.mnemonic() == Mnemonic::Xchg && has_mem_operand),
            reads_memory,
            writes_memory,
            stores,
            call: matches!(
                instr.flow_control(),
                FlowControl::Call | FlowControl::IndirectCall
            ),
            flow: instr.flow_control(),
            branch_target,
            call_target,
            mem,
            lea_address: (instr.mnemonic() == Mnemonic::Lea && instr.is_ip_rel_memory_operand())
                .then(|| instr.ip_rel_memory_address()),
            writes_registers: facts
                .used_registers()
                .iter()
                .filter(|r| is_write(r.access()))
                .map(|r| r.register().full_register())
                .collect(),
            reads_registers: facts
                .used_registers()
                .iter()
                .filter(|r| r.register().is_gpr() && is_read(r.access()))
                .map(|r| r.register().full_register())
                .collect(),
        });
    }
    out
}

/// What a hot site is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SiteKind {
    /// A loop that waits on PAUSE.
    PauseSpin,
    /// A tight loop re-reading one address, with no PAUSE.
    SpinWithoutPause,
    /// A `lock`-prefixed instruction or `xchg` with memory takes the samples.
    LockedRmw,
    /// Memory loads take the samples.
    MemoryLoad,
    /// Anything else.
    Compute,
}

impl SiteKind {
    /// Words for a report.
    pub fn describe(self) -> &'static str {
        match self {
            SiteKind::PauseSpin => "spin-wait on PAUSE",
            SiteKind::SpinWithoutPause => "spin loop without PAUSE",
            SiteKind::LockedRmw => "locked read-modify-write",
            SiteKind::MemoryLoad => "memory loads",
            SiteKind::Compute => "computation",
        }
    }
}

/// What one sample blames, judged on the instruction at its address and the one before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Blame {
    Pause,
    Locked,
    Load,
    Other,
}

fn blame(prev: Option<&Insn>, at: Option<&Insn>) -> (Blame, Option<u64>) {
    let both = [prev, at];
    let pick = |f: &dyn Fn(&Insn) -> bool| both.iter().flatten().find(|i| f(i)).map(|i| i.addr);
    if let Some(a) = pick(&|i| i.pause) {
        (Blame::Pause, Some(a))
    } else if let Some(a) = pick(&|i| i.locked_rmw) {
        (Blame::Locked, Some(a))
    } else if let Some(a) = pick(&|i| i.reads_memory && !i.call) {
        (Blame::Load, Some(a))
    } else {
        (Blame::Other, at.map(|i| i.addr))
    }
}

/// The innermost loop around `ip`: the shortest backward branch at or after `ip` whose target
/// is at or before it. Returns the indices of its first and last instruction.
fn innermost_loop(insns: &[Insn], ip: u64) -> Option<(usize, usize)> {
    insns
        .iter()
        .enumerate()
        .filter_map(|(j, b)| {
            let t = b.branch_target?;
            (t <= ip && b.addr >= ip).then(|| (j, t, b.addr - t))
        })
        .min_by_key(|&(_, _, span)| span)
        .and_then(|(j, t, _)| {
            let first = insns.iter().position(|i| i.addr == t)?;
            Some((first, j))
        })
}

/// A tight loop that re-reads one address and does nothing else: no stores, no calls, no
/// locked ops, and a load whose address registers the loop never changes.
fn is_plain_spin(body: &[Insn]) -> bool {
    const MAX_SPIN_INSNS: usize = 12;
    if body.len() > MAX_SPIN_INSNS
        || body
            .iter()
            .any(|i| i.call || i.writes_memory || i.locked_rmw)
    {
        return false;
    }
    let written: Vec<Register> = body
        .iter()
        .flat_map(|i| i.writes_registers.iter().copied())
        .collect();
    body.iter().any(|i| {
        i.reads_memory
            && i.mem
                .as_ref()
                .is_some_and(|m| m.registers.iter().all(|r| !written.contains(r)))
    })
}

/// What a short load-only leaf function reads: the function a spin loop calls to re-read its
/// flag (`mov eax,[rip+x]; ret`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeafLoad {
    /// Text of its first load (`mov eax,[4038h]`).
    pub load: String,
    /// The caller's registers its load addresses come from (an argument register holding a
    /// pointer); empty when every address is fixed (RIP-relative or absolute).
    pub address_inputs: Vec<Register>,
    /// Registers it writes: its caller cannot count on them keeping their value.
    pub clobbers: Vec<Register>,
}

/// Instructions a load-only leaf may have, its `ret` included: a getter is two to four
/// (`endbr64`, a load or two, `ret`); past eight it does work of its own.
const MAX_LEAF_INSNS: usize = 8;

/// Judges a function decoded from its first byte: a short straight-line leaf that reads memory
/// and returns, with no store (pushes to its own stack aside), no locked instruction, no
/// PAUSE, no call and no branch. Returns what it loads, `None` for anything else.
pub fn load_only_leaf(insns: &[Insn]) -> Option<LeafLoad> {
    // For each register the leaf writes, the caller's registers its value came from: a load's
    // result counts as coming from its address, so `mov rax,[rdi]; mov eax,[rax]` reads an
    // address that follows rdi.
    let mut derived: BTreeMap<Register, Vec<Register>> = BTreeMap::new();
    let inputs = |regs: &[Register], derived: &BTreeMap<Register, Vec<Register>>| {
        let mut v: Vec<Register> = regs
            .iter()
            .filter(|r| **r != Register::RSP)
            .flat_map(|r| derived.get(r).cloned().unwrap_or_else(|| vec![*r]))
            .collect();
        v.sort();
        v.dedup();
        v
    };
    let mut load: Option<LeafLoad> = None;
    for i in insns.iter().take(MAX_LEAF_INSNS) {
        match i.flow {
            FlowControl::Return => {
                return load.map(|mut l| {
                    l.clobbers = derived.keys().copied().collect();
                    l
                });
            }
            FlowControl::Next => {}
            _ => return None,
        }
        if i.stores || i.locked_rmw || i.pause {
            return None;
        }
        // A load from the heap or globals, not the leaf's own stack.
        if let Some(m) = i
            .mem
            .as_ref()
            .filter(|m| i.reads_memory && !m.registers.contains(&Register::RSP) && !i.writes_memory)
        {
            let from = inputs(&m.registers, &derived);
            let l = load.get_or_insert_with(|| LeafLoad {
                load: i.text.clone(),
                address_inputs: Vec::new(),
                clobbers: Vec::new(),
            });
            l.address_inputs.extend(from);
            l.address_inputs.sort();
            l.address_inputs.dedup();
        }
        let from = inputs(&i.reads_registers, &derived);
        for w in i.writes_registers.iter().filter(|r| r.is_gpr()) {
            if *w != Register::RSP {
                derived.insert(*w, from.clone());
            }
        }
    }
    None
}

/// Whether a function only jumps on: a PLT entry (`jmp [rip+got]`, after `endbr64` in a CET
/// build), whose target is in no code the caller's module holds.
pub fn is_jump_stub(insns: &[Insn]) -> bool {
    insns
        .iter()
        .take(2)
        .find(|i| i.flow != FlowControl::Next || i.reads_memory || i.writes_memory)
        .is_some_and(|i| {
            matches!(
                i.flow,
                FlowControl::UnconditionalBranch | FlowControl::IndirectBranch
            )
        })
}

/// A function a loop's call reaches, as the layer that can read other functions' code found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Callee {
    /// Its name.
    pub name: String,
    /// What it loads.
    pub leaf: LeafLoad,
    /// What a runtime's load function is (`V8's Atomics.load`), when it is known by its name
    /// rather than by its code.
    pub known_as: Option<String>,
}

/// A call of a spin loop to a load-only leaf.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpinCall {
    /// The call instruction.
    pub call: u64,
    /// Its return address: callers in sampled stacks sit here.
    pub returns_to: u64,
    /// The function called.
    pub callee: String,
    /// The load it does.
    pub load: String,
    /// What it is, when a runtime's load function known by its name.
    pub known_as: Option<String>,
}

/// Longest loop taken for a spin through calls. A C loop is a handful of instructions; a
/// JIT's keeps its type checks and pushes each call's arguments (V8's loop on two
/// `Atomics.load`s is ~45). What makes a loop a spin is checked by [`spin_through_calls`], not
/// its length; the bound keeps the walk short.
const MAX_CALL_SPIN_INSNS: usize = 64;

/// The general-purpose registers one round of a loop reads: the stack pointer aside, which
/// pushes and calls move and restore.
fn loop_reads(i: &Insn) -> impl Iterator<Item = Register> + '_ {
    i.reads_registers
        .iter()
        .copied()
        .filter(|r| *r != Register::RSP)
}

/// A bounded spin's counter at work: `add rbx,1`, `sub ecx,1`, `inc`, `dec`, `lea rbx,[rbx+1]`
/// writing the one register the loop carries, or its compare with the bound (`cmp rbx,rbp`).
fn is_counter_step(i: &Insn, counter: Register) -> bool {
    match i.mnemonic {
        Mnemonic::Add | Mnemonic::Sub | Mnemonic::Inc | Mnemonic::Dec | Mnemonic::Lea => {
            !i.reads_memory && i.writes_registers.iter().all(|w| *w == counter)
        }
        Mnemonic::Cmp | Mnemonic::Test => true,
        _ => false,
    }
}

/// A loop that re-reads through calls and does nothing else: no stores (a call's
/// return-address push and pushed arguments are none), no locked ops, no PAUSE; every call
/// reaches a load-only function (`callee` says which, the registers its address comes from
/// and those it clobbers); and no value lives from one round to the next but a bounded spin's
/// counter, which no callee takes as its address. That last is what
/// tells a wait from work: a round of a spin makes everything it uses afresh (constants,
/// fixed addresses, registers the loop never writes, what its calls load), while a loop that
/// computes (`x = f(x)`) or walks (`get(i++)`) carries its state round to round, and so does
/// a callee's address that moves. Returns its calls.
fn spin_through_calls(
    body: &[Insn],
    callee: &mut dyn FnMut(&Insn) -> Option<Callee>,
) -> Option<Vec<SpinCall>> {
    if body.len() > MAX_CALL_SPIN_INSNS
        || !body.iter().any(|i| i.call)
        || body.iter().any(|i| i.stores || i.locked_rmw || i.pause)
    {
        return None;
    }
    let mut calls: BTreeMap<u64, Callee> = BTreeMap::new();
    for c in body.iter().filter(|i| i.call) {
        calls.insert(c.addr, callee(c)?);
    }
    // Registers anything in the loop writes; the rest keep their value round after round.
    let written: BTreeSet<Register> = body
        .iter()
        .flat_map(|i| i.writes_registers.iter().copied())
        .chain(calls.values().flat_map(|c| c.leaf.clobbers.iter().copied()))
        .filter(|r| *r != Register::RSP)
        .collect();
    // Registers holding a value made this round. Two rounds over the body in order: the second
    // sees what the first left, as a rotated loop's next round does.
    let mut fresh: BTreeSet<Register> = BTreeSet::new();
    let mut carried_all: BTreeSet<Register> = BTreeSet::new();
    for round in 0..2 {
        let judge = round == 1;
        for i in body {
            let carried: Vec<Register> = loop_reads(i)
                .filter(|r| written.contains(r) && !fresh.contains(r))
                .collect();
            if let Some(c) = calls.get(&i.addr) {
                let moves = c
                    .leaf
                    .address_inputs
                    .iter()
                    .any(|r| written.contains(r) && !fresh.contains(r));
                if judge && moves {
                    return None;
                }
                // What the call returns or leaves behind is made this round.
                fresh.extend(c.leaf.clobbers.iter().copied());
                continue;
            }
            // Anything but a counter's step that uses a carried value (a pushed argument
            // included) is work, or a moving address.
            if judge {
                carried_all.extend(carried.iter().copied());
                if carried_all.len() > 1 || carried.iter().any(|r| !is_counter_step(i, *r)) {
                    return None;
                }
            }
            for w in i.writes_registers.iter().filter(|r| **r != Register::RSP) {
                if carried.is_empty() {
                    fresh.insert(*w);
                } else {
                    fresh.remove(w);
                }
            }
        }
    }
    Some(
        body.iter()
            .filter_map(|i| Some((i, calls.remove(&i.addr)?)))
            .map(|(i, c)| SpinCall {
                call: i.addr,
                returns_to: i.end(),
                callee: c.name,
                load: c.leaf.load,
                known_as: c.known_as,
            })
            .collect(),
    )
}

/// One hot site inside a function.
#[derive(Debug, Clone, PartialEq)]
pub struct SiteAnalysis {
    /// What it is.
    pub kind: SiteKind,
    /// First instruction of the loop (or the hot instruction when not in a loop).
    pub start: u64,
    /// Last instruction.
    pub end: u64,
    /// Samples in it.
    pub samples: u64,
    /// The instruction the samples blame most (skid undone).
    pub hot_addr: u64,
    /// The hot instruction's memory operand, when it has one.
    pub hot_mem: Option<MemOperand>,
    /// Text of the hot instruction.
    pub hot_text: String,
    /// Disassembly lines of the site: address, bytes, instruction, samples at that address.
    pub lines: Listing,
    /// Sampled addresses of the site and their counts.
    pub ip_counts: BTreeMap<u64, u64>,
    /// A spin that re-reads through calls: the calls and what they reach (empty otherwise).
    pub calls: Vec<SpinCall>,
}

/// Groups the samples of one function (`ip_counts`, in the module's numbering) into sites and
/// classifies each. `insns` is the function decoded from its first byte. Calls are taken to
/// reach code of unknown kind: see [`analyze_with_callees`].
pub fn analyze(insns: &[Insn], ip_counts: &BTreeMap<u64, u64>) -> Vec<SiteAnalysis> {
    analyze_with_callees(insns, ip_counts, &mut |_| None)
}

/// [`analyze`], with `callee` telling what a call instruction reaches (asked only for the calls
/// of a hot loop that could be a spin): a loop whose calls all reach load-only leaves is a
/// spin without PAUSE.
pub fn analyze_with_callees(
    insns: &[Insn],
    ip_counts: &BTreeMap<u64, u64>,
    callee: &mut dyn FnMut(&Insn) -> Option<Callee>,
) -> Vec<SiteAnalysis> {
    struct Acc {
        range: (usize, usize),
        in_loop: bool,
        samples: u64,
        by_blame: BTreeMap<u64, (Blame, u64)>,
        ips: BTreeMap<u64, u64>,
    }
    let mut sites: BTreeMap<(usize, usize), Acc> = BTreeMap::new();
    for (&ip, &n) in ip_counts {
        // Instructions are in address order: the one at `ip`, and the one ending there.
        let after = insns.partition_point(|i| i.addr < ip);
        let at_idx = (after < insns.len() && insns[after].addr == ip).then_some(after);
        let prev_idx = after.checked_sub(1).filter(|&i| insns[i].end() == ip);
        let (b, blamed) = blame(prev_idx.map(|i| &insns[i]), at_idx.map(|i| &insns[i]));
        let (range, in_loop) = match innermost_loop(insns, ip) {
            Some(r) => (r, true),
            None => match at_idx.or(prev_idx) {
                Some(i) => ((i, i), false),
                None => continue, // not on an instruction boundary: a misdecode, skip
            },
        };
        let acc = sites.entry(range).or_insert(Acc {
            range,
            in_loop,
            samples: 0,
            by_blame: BTreeMap::new(),
            ips: BTreeMap::new(),
        });
        acc.samples += n;
        *acc.ips.entry(ip).or_default() += n;
        if let Some(a) = blamed {
            let e = acc.by_blame.entry(a).or_insert((b, 0));
            e.1 += n;
        }
    }
    let mut out: Vec<SiteAnalysis> = sites
        .into_values()
        .map(|acc| {
            let body = &insns[acc.range.0..=acc.range.1];
            let share = |k: Blame| {
                acc.by_blame
                    .values()
                    .filter(|(b, _)| *b == k)
                    .map(|(_, n)| n)
                    .sum::<u64>() as f64
                    / acc.samples.max(1) as f64
            };
            let has_call = body.iter().any(|i| i.call);
            let mut calls = Vec::new();
            let kind = if acc.in_loop && !has_call && body.iter().any(|i| i.pause) {
                SiteKind::PauseSpin
            } else if share(Blame::Locked) >= 0.5 {
                SiteKind::LockedRmw
            } else if acc.in_loop && is_plain_spin(body) {
                SiteKind::SpinWithoutPause
            } else if let Some(c) = acc
                .in_loop
                .then(|| spin_through_calls(body, callee))
                .flatten()
            {
                calls = c;
                SiteKind::SpinWithoutPause
            } else if share(Blame::Load) >= 0.5 {
                SiteKind::MemoryLoad
            } else {
                SiteKind::Compute
            };
            let wanted = match kind {
                SiteKind::PauseSpin => Some(Blame::Pause),
                SiteKind::LockedRmw => Some(Blame::Locked),
                SiteKind::MemoryLoad | SiteKind::SpinWithoutPause => Some(Blame::Load),
                SiteKind::Compute => None,
            };
            let hot_addr = acc
                .by_blame
                .iter()
                .filter(|(_, (b, _))| wanted.is_none_or(|w| *b == w))
                .max_by_key(|(_, (_, n))| *n)
                .map(|(a, _)| *a)
                .or_else(|| {
                    body.iter()
                        .find(|i| wanted == Some(Blame::Pause) && i.pause)
                        .map(|i| i.addr)
                })
                .unwrap_or(body[0].addr);
            // Through a call, the re-read is the call: the load is in the callee.
            let hot_addr = calls.first().map_or(hot_addr, |c| c.call);
            let hot = insns.iter().find(|i| i.addr == hot_addr);
            SiteAnalysis {
                kind,
                start: body[0].addr,
                end: body[body.len() - 1].addr,
                samples: acc.samples,
                hot_addr,
                hot_mem: hot.and_then(|i| i.mem.clone()),
                hot_text: hot.map(|i| i.text.clone()).unwrap_or_default(),
                lines: listing(insns, acc.range, hot_addr, &acc.ips),
                ip_counts: acc.ips,
                calls,
            }
        })
        .collect();
    out.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.start.cmp(&b.start)));
    out
}

/// The lines shown for a site: the loop body when short, else a window around the hot
/// instruction; plus the instruction after the site, where skid puts samples.
fn listing(
    insns: &[Insn],
    range: (usize, usize),
    hot_addr: u64,
    ips: &BTreeMap<u64, u64>,
) -> Listing {
    const MAX_LINES: usize = 14;
    let hot_idx = insns
        .iter()
        .position(|i| i.addr == hot_addr)
        .unwrap_or(range.0);
    let (first, last) = if range.1 - range.0 < MAX_LINES {
        (range.0, (range.1 + 1).min(insns.len() - 1))
    } else {
        (
            hot_idx.saturating_sub(6),
            (hot_idx + 6).min(insns.len() - 1),
        )
    };
    Listing(
        insns[first..=last]
            .iter()
            .map(|i| ListingLine {
                hot: i.addr == hot_addr,
                address: i.addr,
                bytes: i.bytes.clone(),
                instruction: i.text.clone(),
                samples: ips.get(&i.addr).copied().unwrap_or(0),
            })
            .collect(),
    )
}

/// One instruction of a site's listing.
///
/// Saved diagnoses hold each line as its text (`=> 0x1208: f3 90   pause  [733 samples]`),
/// the form [`fmt::Display`] writes; reading one parses it back, so files saved before the
/// lines were typed read the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListingLine {
    /// The site's hot instruction (`=>`).
    pub hot: bool,
    /// Address in the module.
    pub address: u64,
    /// Encoded bytes.
    pub bytes: Vec<u8>,
    /// Intel syntax.
    pub instruction: String,
    /// Samples at this address.
    pub samples: u64,
}

impl fmt::Display for ListingLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let bytes: Vec<String> = self.bytes.iter().map(|b| format!("{b:02x}")).collect();
        let mark = if self.hot { "=>" } else { "  " };
        write!(
            f,
            "{mark} {:#x}: {:<24} {}",
            self.address,
            bytes.join(" "),
            self.instruction
        )?;
        if self.samples > 0 {
            write!(f, "  [{} samples]", self.samples)?;
        }
        Ok(())
    }
}

impl std::str::FromStr for ListingLine {
    type Err = String;

    /// Parses the text [`fmt::Display`] writes.
    fn from_str(line: &str) -> Result<Self, String> {
        let bad = || format!("not a disassembly line: {line:?}");
        let hot = line.starts_with("=>");
        let rest = line.get(2..).ok_or_else(bad)?.trim_start();
        let (addr, rest) = rest.split_once(": ").ok_or_else(bad)?;
        let address = u64::from_str_radix(addr.trim_start_matches("0x"), 16).map_err(|_| bad())?;
        let mut words = rest.split_whitespace().peekable();
        // The encoded bytes: two hex digits each.
        let mut bytes = Vec::new();
        while let Some(b) = words
            .peek()
            .filter(|w| w.len() == 2)
            .and_then(|w| u8::from_str_radix(w, 16).ok())
        {
            bytes.push(b);
            words.next();
        }
        let text = words.collect::<Vec<_>>().join(" ");
        let count = |n: &str| -> Option<u64> {
            n.strip_suffix(" samples]")
                .or_else(|| n.strip_suffix(" sample]"))?
                .parse()
                .ok()
        };
        let (instruction, samples) = match text.rsplit_once(" [") {
            Some((i, n)) if count(n).is_some() => (i.trim().to_string(), count(n).unwrap_or(0)),
            _ => (text.trim().to_string(), 0),
        };
        Ok(ListingLine {
            hot,
            address,
            bytes,
            instruction,
            samples,
        })
    }
}

impl Serialize for ListingLine {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ListingLine {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        String::deserialize(d)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// A site's code, one typed line per instruction, `hot` on the one the samples blame.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Listing(pub Vec<ListingLine>);

impl Listing {
    /// No lines (the site was not disassembled).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The lines, in address order.
    pub fn iter(&self) -> std::slice::Iter<'_, ListingLine> {
        self.0.iter()
    }

    /// The lines as text, separated by `sep`.
    pub fn join(&self, sep: &str) -> String {
        self.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(sep)
    }

    /// The instruction right after the hot one: where timer samples land (skid).
    pub fn after_hot(&self) -> Option<&ListingLine> {
        let i = self.iter().position(|l| l.hot)?;
        self.0.get(i + 1)
    }
}

impl<'a> IntoIterator for &'a Listing {
    type Item = &'a ListingLine;
    type IntoIter = std::slice::Iter<'a, ListingLine>;

    fn into_iter(self) -> Self::IntoIter {
        self.0.iter()
    }
}

/// What the code shows about a locked operand and 64-byte cache lines: which operand, where it
/// lies in its line, and whether the split is certain. Facts only; the sentence is
/// [`LineSplit::words`] (from `words::findings::code`), made where it is shown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "split")]
pub enum LineSplit {
    /// The code fixes the address (RIP-relative or absolute; module load addresses are
    /// page-aligned, so the offset in the line is the same at run time) and it crosses a
    /// line: a split lock on every execution.
    Crosses {
        /// Size of the locked operand, bytes.
        operand_bytes: u64,
        /// Its address in the module's numbering.
        address: u64,
        /// Where it starts in its 64-byte line, bytes from the line's start.
        line_offset_bytes: u64,
    },
    /// Register-relative, and the displacement alone reaches past a line's end: it crosses if
    /// the base register is line-aligned. The code alone cannot tell; a hint, not a finding.
    DisplacementCrosses {
        /// Size of the locked operand, bytes.
        operand_bytes: u64,
        /// The displacement from the base register.
        displacement: i64,
        /// Where the displacement falls in a 64-byte line, bytes from the line's start.
        line_offset_bytes: u64,
    },
    /// Register-relative and misaligned for its size: it crosses a line whenever it lands at
    /// the end of one. A hint, not a finding.
    Misaligned {
        /// Size of the locked operand, bytes.
        operand_bytes: u64,
        /// The displacement from the base register.
        displacement: i64,
    },
    /// A file written before these facts were saved: the sentence it carried (`split_note`
    /// for a split lock, `possible_split_note` for a possible one).
    Said {
        /// The saved sentence.
        sentence: String,
        /// True when it said a split lock (`split_note`), false for a possible one.
        certain: bool,
    },
}

impl LineSplit {
    /// True when the operand crosses a line on every execution: a split lock, not a hint.
    pub fn certain(&self) -> bool {
        match self {
            LineSplit::Crosses { .. } => true,
            LineSplit::DisplacementCrosses { .. } | LineSplit::Misaligned { .. } => false,
            LineSplit::Said { certain, .. } => *certain,
        }
    }

    /// The sentence that says it (a saved file's own sentence for [`LineSplit::Said`]).
    pub fn words(&self) -> String {
        use crate::words::findings::code as w;
        match self {
            LineSplit::Crosses {
                operand_bytes,
                address,
                line_offset_bytes,
            } => w::operand_crosses_line(*operand_bytes, *address, *line_offset_bytes),
            LineSplit::DisplacementCrosses {
                operand_bytes,
                displacement,
                line_offset_bytes,
            } => w::displacement_crosses_line(*operand_bytes, *displacement, *line_offset_bytes),
            LineSplit::Misaligned {
                operand_bytes,
                displacement,
            } => w::operand_misaligned(*operand_bytes, *displacement),
            LineSplit::Said { sentence, .. } => sentence.clone(),
        }
    }
}

/// Whether a locked operand straddles a 64-byte cache line, as far as the code shows.
pub fn split_line(mem: &MemOperand) -> Option<LineSplit> {
    const LINE: u64 = 64;
    let size = u64::from(mem.size);
    if size == 0 {
        return None;
    }
    match mem.absolute {
        Some(addr) => {
            let off = addr % LINE;
            (off + size > LINE).then_some(LineSplit::Crosses {
                operand_bytes: size,
                address: addr,
                line_offset_bytes: off,
            })
        }
        None => {
            let off = mem.displacement.rem_euclid(LINE as i64) as u64;
            if off + size > LINE {
                Some(LineSplit::DisplacementCrosses {
                    operand_bytes: size,
                    displacement: mem.displacement,
                    line_offset_bytes: off,
                })
            } else if !off.is_multiple_of(size) {
                Some(LineSplit::Misaligned {
                    operand_bytes: size,
                    displacement: mem.displacement,
                })
            } else {
                None
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(pairs: &[(u64, u64)]) -> BTreeMap<u64, u64> {
        pairs.iter().copied().collect()
    }

    // The seed's .NET JIT_MonEnterWorker spin (skylake-pause-spin.en.txt):
    //   mov eax,r10d / pause / sub eax,1 / jne <pause>
    // with the samples on the `sub` after the `pause`.
    const SEED_SPIN: &[u8] = &[
        0x41, 0x8b, 0xc2, 0xf3, 0x90, 0x83, 0xe8, 0x01, 0x75, 0xf9, 0xc3,
    ];

    #[test]
    fn the_seed_spin_is_a_pause_spin_blamed_on_the_pause() {
        let insns = decode(SEED_SPIN, 0x1000);
        assert_eq!(insns[1].text, "pause");
        let sites = analyze(&insns, &counts(&[(0x1005, 90), (0x1008, 10)]));
        assert_eq!(sites.len(), 1);
        assert_eq!(sites[0].kind, SiteKind::PauseSpin);
        assert_eq!(
            sites[0].hot_addr, 0x1003,
            "skid undone: the pause, not the sub"
        );
        assert_eq!(sites[0].samples, 100);
        assert!(
            sites[0]
                .lines
                .iter()
                .any(|l| l.hot && l.instruction == "pause")
        );
    }

    #[test]
    fn a_lock_add_loop_is_a_locked_rmw() {
        // top: lock add qword ptr [rip+0x2f00],1 / sub ecx,1 / jne top
        let code = [
            0xf0, 0x48, 0x83, 0x05, 0x00, 0x2f, 0x00, 0x00, 0x01, 0x83, 0xe9, 0x01, 0x75, 0xf2,
            0xc3,
        ];
        let insns = decode(&code, 0x2000);
        assert!(insns[0].locked_rmw);
        let sites = analyze(&insns, &counts(&[(0x2009, 50), (0x200c, 5)]));
        assert_eq!(sites[0].kind, SiteKind::LockedRmw);
        assert_eq!(sites[0].hot_addr, 0x2000);
        let mem = sites[0].hot_mem.as_ref().unwrap();
        assert_eq!(mem.absolute, Some(0x2009 + 0x2f00));
        assert_eq!(mem.size, 8);
    }

    #[test]
    fn xchg_with_memory_counts_as_locked() {
        // xchg dword ptr [rdi],eax
        let insns = decode(&[0x87, 0x07], 0);
        assert!(insns[0].locked_rmw);
        // xchg eax,edx: registers only
        assert!(!decode(&[0x92], 0)[0].locked_rmw);
    }

    #[test]
    fn a_flag_poll_without_pause_is_a_plain_spin() {
        // top: mov eax,[rip+0x100] / test eax,eax / je top
        let code = [
            0x8b, 0x05, 0x00, 0x01, 0x00, 0x00, 0x85, 0xc0, 0x74, 0xf6, 0xc3,
        ];
        let insns = decode(&code, 0x3000);
        let sites = analyze(&insns, &counts(&[(0x3006, 40), (0x3008, 40)]));
        assert_eq!(sites[0].kind, SiteKind::SpinWithoutPause);
    }

    // tests/programs/turn_call.c as gcc 12 -O2 builds it (issue 28): the wait loop's load is a
    // call to an out-of-line getter.
    // load_turn at 0x1230: mov eax,[rip+0x2e02] (8b 05 ..) / ret (c3)
    const LOAD_TURN: &[u8] = &[0x8b, 0x05, 0x02, 0x2e, 0x00, 0x00, 0xc3];
    // wait_turn at 0x1240: push rbp / mov rbp,rsp / jmp 0x125a / 10-byte nop /
    // 0x1250: mov eax,[rip+0x2dde] (the stop flag) / test eax,eax / jne 0x1263 (out) /
    // 0x125a: call 0x1230 (e8 d1 ff ff ff) / cmp eax,edi / jne 0x1250 / pop rbp / ret
    const WAIT_TURN: &[u8] = &[
        0x55, 0x48, 0x89, 0xe5, 0xeb, 0x14, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x8b, 0x05, 0xde, 0x2d, 0x00, 0x00, 0x85, 0xc0, 0x75, 0x09, 0xe8, 0xd1, 0xff, 0xff,
        0xff, 0x39, 0xf8, 0x75, 0xed, 0x5d, 0xc3,
    ];

    /// A callee lookup over functions given as (start, bytes, name), as hotspots answers it
    /// from the binary.
    fn callees<'a>(
        funcs: &'a [(u64, &'a [u8], &'a str)],
    ) -> impl FnMut(&Insn) -> Option<Callee> + 'a {
        |call| {
            let target = call.call_target?;
            let (start, code, name) = funcs.iter().find(|f| f.0 == target)?;
            Some(Callee {
                name: name.to_string(),
                leaf: load_only_leaf(&decode(code, *start))?,
                known_as: None,
            })
        }
    }

    #[test]
    fn a_wait_loop_that_calls_a_load_only_getter_is_a_spin_without_pause() {
        // Issue 28: `while (load_turn() != me) ;` with load_turn out of line read as
        // "computation" in wait_turn, 97% of samples.
        let insns = decode(WAIT_TURN, 0x1240);
        let counts = counts(&[(0x1256, 20), (0x125f, 300), (0x1261, 60)]);
        let funcs = [(0x1230, LOAD_TURN, "load_turn")];
        let sites = analyze_with_callees(&insns, &counts, &mut callees(&funcs));
        assert_eq!(sites.len(), 1, "{sites:#?}");
        assert_eq!(sites[0].kind, SiteKind::SpinWithoutPause);
        assert_eq!(sites[0].samples, 380);
        assert_eq!(sites[0].hot_addr, 0x125a, "the call is the re-read");
        assert_eq!(
            sites[0].calls,
            [SpinCall {
                call: 0x125a,
                returns_to: 0x125f,
                callee: "load_turn".into(),
                load: "mov eax,[4038h]".into(),
                known_as: None,
            }]
        );
        // Without a way to read the callee, the same loop is what it was: computation.
        let sites = analyze(&insns, &counts);
        assert_eq!(sites[0].kind, SiteKind::Compute);
        assert!(sites[0].calls.is_empty());
    }

    #[test]
    fn an_argument_set_again_before_each_call_to_the_same_address_is_still_a_spin() {
        // spin_arg at 0: lea rdi,[rip+0x100] / call 0x11 / test eax,eax / je 0 / ret
        // leaf_ptr at 0x11: mov eax,[rdi] / ret
        let code = [
            0x48, 0x8d, 0x3d, 0x00, 0x01, 0x00, 0x00, 0xe8, 0x05, 0x00, 0x00, 0x00, 0x85, 0xc0,
            0x74, 0xf0, 0xc3,
        ];
        let leaf: &[u8] = &[0x8b, 0x07, 0xc3];
        let funcs = [(0x11, leaf, "leaf_ptr")];
        let sites = analyze_with_callees(
            &decode(&code, 0),
            &counts(&[(0xc, 50), (0xe, 10)]),
            &mut callees(&funcs),
        );
        assert_eq!(sites[0].kind, SiteKind::SpinWithoutPause, "{sites:#?}");
        assert_eq!(sites[0].calls[0].load, "mov eax,[rdi]");
    }

    #[test]
    fn a_sum_over_a_getter_with_a_moving_index_is_not_a_spin() {
        // Guards the false positive: no stores, and every call reaches a load-only leaf, but
        // each round reads another element.
        // sumloop at 0x31: mov edi,ebx / call 0xb / add r12d,eax / add ebx,1 / cmp ebx,ebp /
        // jne 0x31
        let code = [
            0x89, 0xdf, 0xe8, 0xd3, 0xff, 0xff, 0xff, 0x41, 0x01, 0xc4, 0x83, 0xc3, 0x01, 0x39,
            0xeb, 0x75, 0xef, 0xc3,
        ];
        // getter at 0xb: lea rax,[rip+0x100] / mov eax,[rax+rdi*4] / ret
        let getter: &[u8] = &[
            0x48, 0x8d, 0x05, 0x00, 0x01, 0x00, 0x00, 0x8b, 0x04, 0xb8, 0xc3,
        ];
        let leaf = load_only_leaf(&decode(getter, 0xb)).expect("a load-only leaf");
        assert_eq!(leaf.address_inputs, [Register::RDI]);
        let funcs = [(0xb, getter, "getter")];
        let sites = analyze_with_callees(
            &decode(&code, 0x31),
            &counts(&[(0x38, 50), (0x3e, 10)]),
            &mut callees(&funcs),
        );
        assert_ne!(sites[0].kind, SiteKind::SpinWithoutPause, "{sites:#?}");
    }

    // Loops around `leaf` (at 0x76: mov eax,[rip+0x100] / ret), hand-assembled (GNU as):
    // 0x00 bounded: call leaf / test eax,eax / jne out / add rbx,1 / cmp rbx,rbp / jne 0x00
    // 0x13 compute: call leaf / imul r12d,r12d,31 / add r12d,eax / cmp eax,0 / je 0x13
    // 0x25 jitlike (V8's shape): mov rdi,imm64 / mov rsi,[rdi+0x1f] / push 0 / mov rcx,imm64 /
    //      push rcx / push 1 / mov eax,3 / call leaf / test al,1 / jne out /
    //      cmp rax,[r13+0x1b0] / jne 0x25
    // 0x5a jitwalk: mov rcx,rbx / push rcx / mov eax,3 / call leaf / add rbx,2 /
    //      cmp rax,[r13+0x1b0] / jne 0x5a
    const LOOPS: &[u8] = &[
        0xe8, 0x71, 0x00, 0x00, 0x00, 0x85, 0xc0, 0x75, 0x09, 0x48, 0x83, 0xc3, 0x01, 0x48, 0x39,
        0xeb, 0x75, 0xee, 0xc3, 0xe8, 0x5e, 0x00, 0x00, 0x00, 0x45, 0x6b, 0xe4, 0x1f, 0x41, 0x01,
        0xc4, 0x83, 0xf8, 0x00, 0x74, 0xef, 0xc3, 0x48, 0xbf, 0x51, 0xea, 0x2a, 0x4b, 0x43, 0x1a,
        0x00, 0x00, 0x48, 0x8b, 0x77, 0x1f, 0x6a, 0x00, 0x48, 0xb9, 0x09, 0x24, 0xcd, 0x38, 0x9a,
        0x26, 0x00, 0x00, 0x51, 0x6a, 0x01, 0xb8, 0x03, 0x00, 0x00, 0x00, 0xe8, 0x2a, 0x00, 0x00,
        0x00, 0xa8, 0x01, 0x75, 0x09, 0x49, 0x3b, 0x85, 0xb0, 0x01, 0x00, 0x00, 0x75, 0xcc, 0xc3,
        0x48, 0x89, 0xd9, 0x51, 0xb8, 0x03, 0x00, 0x00, 0x00, 0xe8, 0x0e, 0x00, 0x00, 0x00, 0x48,
        0x83, 0xc3, 0x02, 0x49, 0x3b, 0x85, 0xb0, 0x01, 0x00, 0x00, 0x75, 0xe5, 0xc3, 0x8b, 0x05,
        0x00, 0x01, 0x00, 0x00, 0xc3,
    ];

    /// The kind of the site the samples at `ips` make in [`LOOPS`].
    fn loops_kind(ips: &[(u64, u64)]) -> SiteKind {
        let funcs = [(0x76, &LOOPS[0x76..], "leaf")];
        let sites = analyze_with_callees(&decode(LOOPS, 0), &counts(ips), &mut callees(&funcs));
        assert_eq!(sites.len(), 1, "{sites:#?}");
        sites[0].kind
    }

    #[test]
    fn a_bounded_spin_through_a_call_is_a_spin_and_a_loop_that_computes_is_not() {
        // The counter is the one value a spin may carry round to round.
        assert_eq!(
            loops_kind(&[(0x5, 40), (0xd, 10)]),
            SiteKind::SpinWithoutPause
        );
        // r12 = r12 * 31 + loaded: work that lives from round to round.
        assert_ne!(
            loops_kind(&[(0x18, 40), (0x1f, 10)]),
            SiteKind::SpinWithoutPause
        );
    }

    #[test]
    fn a_jit_loop_pushing_the_same_arguments_each_round_is_a_spin_one_walking_them_is_not() {
        // V8's loop on Atomics.load pushes constants each round and reloads what the call
        // clobbered: nothing carried.
        assert_eq!(
            loops_kind(&[(0x4c, 40), (0x50, 10)]),
            SiteKind::SpinWithoutPause
        );
        // The pushed argument is a counter: each round reads another place.
        assert_ne!(
            loops_kind(&[(0x68, 40), (0x6c, 10)]),
            SiteKind::SpinWithoutPause
        );
    }

    #[test]
    fn only_a_short_straight_line_leaf_that_loads_and_stores_nothing_is_load_only() {
        let leaf = |code: &[u8]| load_only_leaf(&decode(code, 0));
        // endbr64 (f3 0f 1e fa) / mov eax,[rip+0x100] / ret: a CET build's getter
        let l = leaf(&[
            0xf3, 0x0f, 0x1e, 0xfa, 0x8b, 0x05, 0x00, 0x01, 0x00, 0x00, 0xc3,
        ])
        .expect("load-only");
        assert!(l.address_inputs.is_empty(), "a fixed address: {l:?}");
        assert_eq!(l.clobbers, [Register::RAX]);
        // mov [rip+0x100],eax / ret: a store
        assert_eq!(leaf(&[0x89, 0x05, 0x00, 0x01, 0x00, 0x00, 0xc3]), None);
        // lock add dword [rip+0x100],1 / ret
        assert_eq!(
            leaf(&[0xf0, 0x83, 0x05, 0x00, 0x01, 0x00, 0x00, 0x01, 0xc3]),
            None
        );
        // pause / mov eax,[rip+0x100] / ret: the callee is the pause hint
        assert_eq!(
            leaf(&[0xf3, 0x90, 0x8b, 0x05, 0x00, 0x01, 0x00, 0x00, 0xc3]),
            None
        );
        // test edi,edi / je ret / mov eax,[rip+0x100] / ret: a branch
        assert_eq!(
            leaf(&[
                0x85, 0xff, 0x74, 0x06, 0x8b, 0x05, 0x00, 0x01, 0x00, 0x00, 0xc3
            ]),
            None
        );
        // endbr64 / bnd jmp [rip+0x2fe2]: a .plt.sec entry, no leaf but a stub to pass through
        let plt = decode(
            &[
                0xf3, 0x0f, 0x1e, 0xfa, 0xf2, 0xff, 0x25, 0xe2, 0x2f, 0x00, 0x00,
            ],
            0,
        );
        assert_eq!(load_only_leaf(&plt), None);
        assert!(is_jump_stub(&plt));
        assert!(!is_jump_stub(&decode(LOAD_TURN, 0x1230)));
        // xor eax,eax / ret: loads nothing
        assert_eq!(leaf(&[0x31, 0xc0, 0xc3]), None);
        // push rbp / mov rbp,rsp / mov eax,[rip+0x100] / pop rbp / ret: a frame-pointer
        // build's getter; the push writes only its own stack
        assert!(
            leaf(&[
                0x55, 0x48, 0x89, 0xe5, 0x8b, 0x05, 0x00, 0x01, 0x00, 0x00, 0x5d, 0xc3
            ])
            .is_some()
        );
    }

    #[test]
    fn an_indexed_load_loop_is_memory_loads_not_a_spin() {
        // top: mov rax,[rdi+rcx*8] / add rdx,rax / inc rcx / cmp rcx,rsi / jne top
        let code = [
            0x48, 0x8b, 0x04, 0xcf, 0x48, 0x01, 0xc2, 0x48, 0xff, 0xc1, 0x48, 0x39, 0xf1, 0x75,
            0xf1, 0xc3,
        ];
        let insns = decode(&code, 0x4000);
        let sites = analyze(&insns, &counts(&[(0x4004, 80), (0x400a, 5)]));
        assert_eq!(sites[0].kind, SiteKind::MemoryLoad);
        assert_eq!(sites[0].hot_addr, 0x4000);
    }

    #[test]
    fn only_a_fixed_address_that_crosses_a_line_is_a_split_lock() {
        // Guards the overclaim: register-relative operands are only possibly split (the base
        // is unknown), so they give a hint, never the split-lock hazard.
        let at = |absolute, displacement, size| MemOperand {
            size,
            displacement,
            absolute,
            registers: vec![],
        };
        let crosses = split_line(&at(Some(0x403c), 0, 8)).unwrap();
        assert_eq!(
            crosses,
            LineSplit::Crosses {
                operand_bytes: 8,
                address: 0x403c,
                line_offset_bytes: 60
            }
        );
        assert!(crosses.certain());
        assert_eq!(
            crosses.words(),
            "the 8-byte operand at 0x403c starts at byte 60 of its 64-byte line and ends in the \
             next: a split lock"
        );
        assert_eq!(split_line(&at(Some(0x4038), 0, 8)), None);
        let displaced = split_line(&at(None, 0x3e, 8)).unwrap();
        assert!(!displaced.certain());
        assert!(displaced.words().contains("line-aligned"), "{displaced:?}");
        let misaligned = split_line(&at(None, 0x3, 4)).unwrap();
        assert_eq!(
            misaligned,
            LineSplit::Misaligned {
                operand_bytes: 4,
                displacement: 3
            }
        );
        assert!(!misaligned.certain());
        assert!(misaligned.words().contains("misaligned"), "{misaligned:?}");
        assert_eq!(split_line(&at(None, 0x10, 8)), None);
    }
    #[test]
    fn listing_lines_read_back_as_written_and_find_the_instruction_after_the_hot_one() {
        let l: ListingLine = "=> 0x1398: f3 90                    pause".parse().unwrap();
        assert!(l.hot);
        assert_eq!(
            (
                l.address,
                l.bytes.as_slice(),
                l.instruction.as_str(),
                l.samples
            ),
            (0x1398, &[0xf3, 0x90][..], "pause", 0)
        );
        let text = "   0x139a: 48 83 c2 01              add rdx,1  [1046 samples]";
        let l: ListingLine = text.parse().unwrap();
        assert!(!l.hot);
        assert_eq!(
            (l.address, l.instruction.as_str(), l.samples),
            (0x139a, "add rdx,1", 1046)
        );
        assert_eq!(l.to_string(), text);
        // Brackets inside the instruction are not a sample count.
        let text = "=> 0x1240: f0 48 83 05 f7 2d 00 00 01 lock add qword ptr [4040h],1";
        let l: ListingLine = text.parse().unwrap();
        assert_eq!(l.instruction, "lock add qword ptr [4040h],1");
        assert_eq!(l.to_string(), text);
        let listing: Listing = serde_json::from_str(
            r#"["   0x1396: 90                       nop",
                "=> 0x1398: f3 90                    pause",
                "   0x139a: eb f7                    jmp short 0000000000001393h  [7 samples]"]"#,
        )
        .unwrap();
        let next = listing.after_hot().unwrap();
        assert_eq!(next.instruction, "jmp short 0000000000001393h");
        assert_eq!(next.samples, 7);
        assert!("0x1398 pause".parse::<ListingLine>().is_err());
    }

    /// Diagnoses saved by earlier builds hold their listings as text: each line reads into its
    /// typed fields and writes back the same, so a saved file renders as it did.
    #[test]
    fn saved_listings_write_back_byte_for_byte() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/diagnose");
        let mut lines = 0;
        for e in std::fs::read_dir(dir).unwrap() {
            let v: serde_json::Value =
                serde_json::from_slice(&std::fs::read(e.unwrap().path()).unwrap()).unwrap();
            for list in ["findings", "hot_sites"] {
                for item in v[list].as_array().into_iter().flatten() {
                    for text in item["disassembly"].as_array().into_iter().flatten() {
                        let text = text.as_str().unwrap();
                        let l: ListingLine = text.parse().unwrap();
                        assert_eq!(l.to_string(), text);
                        lines += 1;
                    }
                }
            }
        }
        assert!(lines > 50, "{lines} lines read");
    }
}
