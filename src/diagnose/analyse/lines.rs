//! The watch's hits named ([`report`]): each watched line's words with the threads and
//! functions that wrote and read them, the data symbol that holds the line, and the verdict
//! ([`LineVerdict::of`]). Whether a hit wrote is the accessing instruction's own decoded
//! access: a data breakpoint traps after the access, so the instruction is the one that ends
//! where the trap landed, found by decoding its function from the start.

use super::disasm::{self, Insn};
use crate::diagnose::record::recording::Recording;
use crate::diagnose::record::watch::{self, Region, WatchRecording};
use crate::diagnose::symbolize::symbols::{Location, Symbolizer};
use crate::schema::line_sharing::{
    Accessor, AimedInstruction, DataSymbol, LINE_BYTES, LineVerdict, LineWatch, WORD_BYTES,
    WatchOutcome, WatchedLine, WordAccesses,
};
use object::{Object, ObjectSegment, ObjectSymbol, SymbolKind};
use std::collections::BTreeMap;

/// Longest function decoded to find an instruction; beyond, the bytes before the trap.
const MAX_DECODE_BYTES: u64 = 256 * 1024;

/// The watch as the diagnosis keeps it; `None` when it was not asked for.
pub fn report(rec: &Recording, symz: &mut Symbolizer) -> Option<LineWatch> {
    let w = rec.watch.as_ref()?;
    if let Some(why) = &w.skipped {
        let mut out = LineWatch::skipped(why.clone(), rec.wall_s);
        out.spent_ms = w.spent.as_secs_f64() * 1e3;
        out.hits = w.hits;
        out.threads = w.threads;
        out.pid = (w.pid != 0).then_some(w.pid);
        out.killed_by_trap = w.killed_by_trap;
        return Some(out);
    }
    let aimed = w
        .aimed
        .iter()
        .map(|a| {
            let (function, module, address, insn) = named_at(symz, &a.location, Find::At);
            AimedInstruction {
                function,
                module,
                address,
                instruction: insn.map_or_else(String::new, |i| i.text),
                hits: a.hits,
                lines: a.lines.len() as u64,
                threads: a.threads().len() as u64,
            }
        })
        .collect();
    let lines = w.lines.iter().map(|l| line(rec, w, l, symz)).collect();
    Some(LineWatch {
        outcome: WatchOutcome::Watched,
        pid: Some(w.pid),
        threads: w.threads,
        spent_ms: w.spent.as_secs_f64() * 1e3,
        window_s: rec.wall_s,
        hits: w.hits,
        hits_per_watchpoint: w.hits_per_watchpoint,
        aimed,
        lines,
        killed_by_trap: w.killed_by_trap,
    })
}

fn line(
    rec: &Recording,
    w: &WatchRecording,
    l: &watch::LineHits,
    symz: &mut Symbolizer,
) -> WatchedLine {
    // (phase, offset, tid, function, instruction) -> accessor. The phases (the aim, each
    // half of the watch) are separate turns: a goroutine or task may sit on another thread
    // in each, so who shares is judged within a phase as well as over all of them.
    let mut by: BTreeMap<(Phase, u64, u32, String, u64), Accessor> = BTreeMap::new();
    let mut add =
        |phase: Phase, offset: u64, tid: u32, named: Named, source_line: Option<String>, n: u64| {
            let (function, _, address, insn) = named;
            let insn_addr = insn.as_ref().map_or(address, |i| i.addr);
            let writes = insn.as_ref().is_some_and(|i| i.writes_memory);
            let a = by
                .entry((phase, offset, tid, function.clone(), insn_addr))
                .or_insert_with(|| Accessor {
                    tid,
                    thread: rec
                        .thread_names
                        .get(&tid)
                        .or_else(|| w.thread_names.get(&tid))
                        .cloned()
                        .unwrap_or_default(),
                    function,
                    source_line,
                    instruction: insn.map(|i| i.text),
                    writes: 0,
                    reads: 0,
                });
            if writes {
                a.writes += n;
            } else {
                a.reads += n;
            }
        };
    for h in &l.hits {
        let named = named_at(symz, &h.after, Find::EndingAt);
        let source_line = named
            .3
            .as_ref()
            .and_then(|i| symz.source_line(&h.after, i.addr));
        let half = Phase::Watch(h.offset / (LINE_BYTES / 2));
        add(half, h.offset, h.tid, named, source_line, h.count);
    }
    // The aim's hits on this line are accesses too (the address each hot instruction
    // touched, by which thread): a thread the scheduler kept off its CPU during the line's
    // short watch is still counted where the aim saw it.
    for a in &w.aimed {
        let on_line: Vec<(u32, u64, u64)> = a
            .accesses
            .iter()
            .filter(|&(&(_, addr), _)| addr >= l.address && addr < l.address + LINE_BYTES)
            .map(|(&(tid, addr), &n)| (tid, (addr - l.address) & !(WORD_BYTES - 1), n))
            .collect();
        if on_line.is_empty() {
            continue;
        }
        let named = named_at(symz, &a.location, Find::At);
        let source_line = named
            .3
            .as_ref()
            .and_then(|i| symz.source_line(&a.location, i.addr));
        for (tid, offset, n) in on_line {
            add(
                Phase::Aim,
                offset,
                tid,
                named.clone(),
                source_line.clone(),
                n,
            );
        }
    }
    let handoffs = |phase: Option<Phase>, offset: u64| -> u64 {
        let watch = l.handoffs.get(&offset).copied().unwrap_or(0);
        let aim = w
            .aim_handoffs
            .get(&(l.address + offset))
            .copied()
            .unwrap_or(0);
        match phase {
            None => watch + aim,
            Some(Phase::Aim) => aim,
            Some(Phase::Watch(_)) => watch,
        }
    };
    // Each phase's words, for its verdict.
    let mut verdict = LineVerdict::OneThread;
    for phase in [Phase::Aim, Phase::Watch(0), Phase::Watch(1)] {
        let mut words: BTreeMap<u64, Vec<Accessor>> = BTreeMap::new();
        for ((p, offset, ..), a) in &by {
            if *p == phase {
                words.entry(*offset).or_default().push(a.clone());
            }
        }
        let words: Vec<WordAccesses> = words
            .into_iter()
            .map(|(offset, accessors)| WordAccesses {
                offset,
                symbol: None,
                handoffs: handoffs(Some(phase), offset),
                accessors,
            })
            .collect();
        verdict = verdict.worst(LineVerdict::of(&words));
    }
    // All phases together, for the words shown (and their verdict too).
    let mut merged: BTreeMap<(u64, u32, String, u64), Accessor> = BTreeMap::new();
    for ((_, offset, tid, function, insn), a) in by {
        let m = merged
            .entry((offset, tid, function, insn))
            .or_insert_with(|| Accessor {
                writes: 0,
                reads: 0,
                ..a.clone()
            });
        m.writes += a.writes;
        m.reads += a.reads;
    }
    let mut words: BTreeMap<u64, Vec<Accessor>> = BTreeMap::new();
    for ((offset, ..), a) in merged {
        words.entry(offset).or_default().push(a);
    }
    let (region, symbols) = match &l.region {
        Region::Named(name) => (name.clone(), Vec::new()),
        Region::File { path, base } => {
            let addrs: Vec<u64> = words.keys().map(|o| l.address + o).collect();
            (path.clone(), elf_data_symbols(w.pid, path, *base, &addrs))
        }
    };
    let words: Vec<WordAccesses> = words
        .into_iter()
        .enumerate()
        .map(|(i, (offset, mut accessors))| {
            accessors.sort_by_key(|a| std::cmp::Reverse(a.writes + a.reads));
            WordAccesses {
                offset,
                symbol: symbols.get(i).cloned().flatten(),
                handoffs: handoffs(None, offset),
                accessors,
            }
        })
        .collect();
    WatchedLine {
        address: l.address,
        region,
        verdict: verdict.worst(LineVerdict::of(&words)),
        words,
        watched_ms: l.watched.as_secs_f64() * 1e3,
        capped: l.capped,
    }
}

/// A turn of the watch: the aim, or a half of the line's words.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    Aim,
    Watch(u64),
}

/// Which instruction of a location is meant.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Find {
    /// The one at it (an execute breakpoint's).
    At,
    /// The one ending at it (a data breakpoint traps after the access).
    EndingAt,
}

/// A location's function, module, address (module numbering) and instruction.
type Named = (String, String, u64, Option<Insn>);

/// The function, module, address (module numbering) and instruction of a location.
fn named_at(symz: &mut Symbolizer, loc: &Location, find: Find) -> Named {
    let named = symz.name(loc);
    let function = named.symbol.as_ref().map_or_else(
        || {
            format!(
                "{}@{:#x}",
                named.module.rsplit('/').next().unwrap_or(&named.module),
                named.address
            )
        },
        |s| s.name.clone(),
    );
    let wanted = |i: &Insn| match find {
        Find::At => i.addr == named.address,
        Find::EndingAt => i.end() == named.address,
    };
    let from_start = named
        .symbol
        .as_ref()
        .filter(|s| named.address - s.addr <= MAX_DECODE_BYTES)
        .and_then(|s| {
            let len = named.address - s.addr + 16;
            let code = symz.code(loc, s.addr, len)?;
            disasm::decode(&code, s.addr)
                .into_iter()
                .find(|i| wanted(i))
        });
    // No symbol: the bytes before the trap, decoded back to an instruction that ends there.
    let insn = from_start.or_else(|| {
        let start = named.address.saturating_sub(15);
        let code = symz.code(loc, start, named.address - start + 16)?;
        let ip = named.address;
        let blamed = watch::blamed_instructions(&code, start, ip);
        let i = blamed
            .iter()
            .find(|i| (find == Find::At) == (i.ip() == ip))?;
        let from = (i.ip() - start) as usize;
        disasm::decode(&code[from..from + i.len()], i.ip())
            .into_iter()
            .next()
    });
    (function, named.module, named.address, insn)
}

/// The ELF object symbol holding each of `addrs` (the file mapped with its offset 0 at
/// `base`) and the address's offset in it; empty when the file cannot be read.
fn elf_data_symbols(pid: u32, path: &str, base: u64, addrs: &[u64]) -> Vec<Option<DataSymbol>> {
    let Ok(bytes) =
        std::fs::read(format!("/proc/{pid}/root{path}")).or_else(|_| std::fs::read(path))
    else {
        return Vec::new();
    };
    let Ok(file) = object::File::parse(&*bytes) else {
        return Vec::new();
    };
    // The segment mapped from offset 0 sets the file's numbering against `base`.
    let first = file
        .segments()
        .find(|s| s.file_range().0 == 0)
        .map_or(0, |s| s.address() & !0xfff);
    let data: Vec<_> = file
        .symbols()
        .filter(|s| s.kind() == SymbolKind::Data && s.size() > 0)
        .collect();
    addrs
        .iter()
        .map(|&addr| {
            let vaddr = addr.checked_sub(base)? + first;
            let sym = data
                .iter()
                .find(|s| s.address() <= vaddr && vaddr < s.address() + s.size())?;
            Some(DataSymbol {
                name: sym.name().ok()?.to_string(),
                offset: vaddr - sym.address(),
            })
        })
        .collect()
}
