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
    Accessor, AimedInstruction, DataName, LineVerdict, LineWatch, WatchOutcome, WatchedLine,
    WordAccesses,
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
                threads: a.threads.len() as u64,
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
    })
}

fn line(
    rec: &Recording,
    w: &WatchRecording,
    l: &watch::LineHits,
    symz: &mut Symbolizer,
) -> WatchedLine {
    // (offset, tid, function, instruction) -> accessor
    let mut by: BTreeMap<(u64, u32, String, u64), Accessor> = BTreeMap::new();
    for h in &l.hits {
        let (function, _, address, insn) = named_at(symz, &h.after, Find::EndingAt);
        let insn_addr = insn.as_ref().map_or(address, |i| i.addr);
        let source_line = insn
            .as_ref()
            .and_then(|i| symz.source_line(&h.after, i.addr));
        let writes = insn.as_ref().is_some_and(|i| i.writes_memory);
        let a = by
            .entry((h.offset, h.tid, function.clone(), insn_addr))
            .or_insert_with(|| Accessor {
                tid: h.tid,
                thread: rec
                    .thread_names
                    .get(&h.tid)
                    .cloned()
                    .unwrap_or_else(|| h.tid.to_string()),
                function,
                source_line,
                instruction: insn.map(|i| i.text),
                writes: 0,
                reads: 0,
            });
        if writes {
            a.writes += h.count;
        } else {
            a.reads += h.count;
        }
    }
    let mut words: BTreeMap<u64, Vec<Accessor>> = BTreeMap::new();
    for ((offset, ..), a) in by {
        words.entry(offset).or_default().push(a);
    }
    let words: Vec<WordAccesses> = words
        .into_iter()
        .map(|(offset, mut accessors)| {
            accessors.sort_by_key(|a| std::cmp::Reverse(a.writes + a.reads));
            WordAccesses { offset, accessors }
        })
        .collect();
    let first_touched = l.address + words.first().map_or(0, |w| w.offset);
    WatchedLine {
        address: l.address,
        data: data_name(w.pid, &l.region, l.address, first_touched),
        verdict: LineVerdict::of(&words),
        words,
        watched_ms: l.watched.as_secs_f64() * 1e3,
        capped: l.capped,
    }
}

/// Which instruction of a location is meant.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Find {
    /// The one at it (an execute breakpoint's).
    At,
    /// The one ending at it (a data breakpoint traps after the access).
    EndingAt,
}

/// The function, module, address (module numbering) and instruction of a location.
fn named_at(
    symz: &mut Symbolizer,
    loc: &Location,
    find: Find,
) -> (String, String, u64, Option<Insn>) {
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

/// The data symbol holding `first_touched` (a file's data or `.bss`), or the mapping.
fn data_name(pid: u32, region: &Region, line: u64, first_touched: u64) -> DataName {
    match region {
        Region::Named(name) => DataName {
            region: name.clone(),
            symbol: None,
            symbol_offset: None,
        },
        Region::File { path, base } => {
            let found = elf_data_symbol(pid, path, *base, line, first_touched);
            DataName {
                region: path.clone(),
                symbol: found.as_ref().map(|f| f.0.clone()),
                symbol_offset: found.map(|f| f.1),
            }
        }
    }
}

/// The ELF object symbol holding `addr` (mapped with the file's offset 0 at `base`), and the
/// line's start relative to the symbol.
fn elf_data_symbol(pid: u32, path: &str, base: u64, line: u64, addr: u64) -> Option<(String, i64)> {
    let bytes = std::fs::read(format!("/proc/{pid}/root{path}"))
        .or_else(|_| std::fs::read(path))
        .ok()?;
    let file = object::File::parse(&*bytes).ok()?;
    // The segment mapped from offset 0 sets the file's numbering against `base`.
    let first = file
        .segments()
        .find(|s| s.file_range().0 == 0)
        .map_or(0, |s| s.address() & !0xfff);
    let vaddr = addr.checked_sub(base)? + first;
    let sym = file.symbols().find(|s| {
        s.kind() == SymbolKind::Data
            && s.size() > 0
            && s.address() <= vaddr
            && vaddr < s.address() + s.size()
    })?;
    let line_vaddr = line.checked_sub(base)? + first;
    Some((
        sym.name().ok()?.to_string(),
        line_vaddr as i64 - sym.address() as i64,
    ))
}
