//! The watch: which threads touch which words of the cache lines the hot code works on, seen
//! through hardware watchpoints (`PERF_TYPE_BREAKPOINT`: the x86 debug registers, which every
//! KVM guest has and which need no PMU). It runs once the recording's window is over and
//! while the workload still runs, for a bounded time ([`WatchBudget`]).
//!
//! Two steps, each on every thread of the process:
//! 1. **Aim.** The hottest sampled addresses give the instructions they blame (the one at the
//!    sample and the ones that end there, decoded from the process's memory); those with a
//!    memory operand get execute breakpoints, whose hits carry the registers before the
//!    instruction runs, so the exact address its operand touches. The lines hit most are
//!    kept ([`MAX_LINES`]).
//! 2. **Watch.** Each kept line is watched in two turns of four 8-byte words (x86 has four
//!    debug registers), read/write, each hit naming the thread and the instruction after the
//!    access (data breakpoints trap once the access is done).
//!
//! Each hit traps into the kernel (~10 us on the KVM guests measured), so every watchpoint
//! stops itself after [`WatchBudget::hits_per_event`] hits (`PERF_EVENT_IOC_REFRESH`) and
//! every turn after its share of the budget. What the accesses mean is `analyse::lines`'.
//!
//! Only with `--watch`: on some hypervisors a trap reaches the thread with its cause lost and
//! the kernel kills the program with SIGTRAP
//! ([`crate::reference::SPURIOUS_DEBUG_TRAP_HITS_INTEL_KVM`]); the recording says when the
//! program ended during the watch.

use super::sampler::{OpenError, RawRing, open_event};
use super::target;
use crate::diagnose::symbolize::symbols::{AddressSpaces, Location, read_process_memory};
use crate::machine::pmu::PerfErrno;
use crate::schema::line_sharing::{LINE_BYTES, WORD_BYTES, WatchSkipped};
use iced_x86::{Decoder, DecoderOptions, Instruction, Mnemonic, OpKind, Register};
use perf_event_open_sys::bindings::{
    HW_BREAKPOINT_RW, HW_BREAKPOINT_X, PERF_RECORD_SAMPLE, PERF_SAMPLE_ADDR, PERF_SAMPLE_IP,
    PERF_SAMPLE_REGS_USER, PERF_SAMPLE_TID, PERF_SAMPLE_TIME, PERF_TYPE_BREAKPOINT,
    perf_event_attr,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::os::fd::{AsRawFd, OwnedFd};
use std::time::{Duration, Instant};

/// Debug registers on x86-64: watchpoints one thread can have at once.
const DEBUG_REGISTERS: usize = 4;

/// Lines watched at most: two turns each.
pub const MAX_LINES: usize = 2;

/// Hot sampled addresses aimed from, at most, and the share of the process's samples one
/// needs: the instructions that matter, not every address sampled once.
const MAX_HOT_ADDRESSES: usize = 8;
const MIN_ADDRESS_SHARE: f64 = 0.02;

/// Instructions aimed at, at most ([`DEBUG_REGISTERS`] a turn).
const MAX_AIMED: usize = 16;

/// A line is watched when it took this share of the aim's hits and at least
/// [`MIN_LINE_HITS`]: a pointer chase spreads its hits over as many lines as loads.
const MIN_LINE_SHARE: f64 = 0.1;
const MIN_LINE_HITS: u64 = 3;

/// Share of the budget the aim takes; the watch has the rest.
const AIM_SHARE: f64 = 0.25;

/// Data pages of each thread's ring: a watch hit is 32 bytes, an aim hit ~170; 64 KiB holds
/// a turn's capped hits of one thread.
const RING_PAGES: usize = 16;

/// `perf_event_x86_regs` bits of the general-purpose registers (AX..IP, R8..R15), in the
/// order the kernel writes them.
const GPRS: [(u32, Register); 17] = [
    (0, Register::RAX),
    (1, Register::RBX),
    (2, Register::RCX),
    (3, Register::RDX),
    (4, Register::RSI),
    (5, Register::RDI),
    (6, Register::RBP),
    (7, Register::RSP),
    (8, Register::RIP),
    (16, Register::R8),
    (17, Register::R9),
    (18, Register::R10),
    (19, Register::R11),
    (20, Register::R12),
    (21, Register::R13),
    (22, Register::R14),
    (23, Register::R15),
];

/// How long the watch may slow the workload.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WatchBudget {
    /// Share of the recording's window the watch may last: its traps slow the watched
    /// threads for at most that long.
    pub share_of_window: f64,
    /// Shortest watch, whatever the window (a turn needs a few ms to see a hot line).
    pub min: Duration,
    /// Longest watch, whatever the window.
    pub max: Duration,
    /// Hits one watchpoint takes before the kernel disables it.
    pub hits_per_event: u32,
}

impl WatchBudget {
    /// The default: 2% of the window (the share the sampler aims at), from 100 ms to 1 s,
    /// 500 hits a watchpoint (~5 ms of traps). Below 100 ms, the aim's turn (a quarter) is
    /// shorter than a busy 2-CPU machine keeps a runnable thread off its CPU, and a writer
    /// can be missed (seen in CI at 50 ms).
    pub const DEFAULT: WatchBudget = WatchBudget {
        share_of_window: 0.02,
        min: Duration::from_millis(100),
        max: Duration::from_secs(1),
        hits_per_event: 500,
    };

    /// The watch's length for a window.
    pub fn length(&self, window: Duration) -> Duration {
        window
            .mul_f64(self.share_of_window)
            .clamp(self.min, self.max)
    }
}

/// What the watch saw, for `analyse::lines`.
#[derive(Debug, Clone, Default)]
pub struct WatchRecording {
    /// Why it did not run, when it did not.
    pub skipped: Option<WatchSkipped>,
    /// The process watched.
    pub pid: u32,
    /// Threads the watchpoints were set on.
    pub threads: u32,
    /// Wall time it took.
    pub spent: Duration,
    /// Hits, aim and watch.
    pub hits: u64,
    /// Hits one watchpoint takes before it stops itself.
    pub hits_per_watchpoint: u32,
    /// The watched threads' names (`comm`), read when the watch began: threads the sampler
    /// never named are named here.
    pub thread_names: BTreeMap<u32, String>,
    /// Instructions aimed at.
    pub aimed: Vec<AimedHits>,
    /// Handoffs during the aim per word address (8-byte aligned; [`handoffs`]).
    pub aim_handoffs: BTreeMap<u64, u64>,
    /// Lines watched.
    pub lines: Vec<LineHits>,
    /// Breakpoints were armed on the program (the aim began).
    pub armed: bool,
    /// The started command was killed by SIGTRAP after the breakpoints were armed (set by
    /// the recording, which reaps it).
    pub killed_by_trap: bool,
}

/// One instruction aimed at and where its operand went.
#[derive(Debug, Clone)]
pub struct AimedHits {
    /// The instruction's location.
    pub location: Location,
    /// Times it ran during the aim.
    pub hits: u64,
    /// Hits per thread and address its operand touched: each one an access as exact as a
    /// watchpoint's, so the lines' words count them too.
    pub accesses: BTreeMap<(u32, u64), u64>,
    /// Hits per line its operand touched.
    pub lines: BTreeMap<u64, u64>,
}

impl AimedHits {
    /// Threads that ran it.
    pub fn threads(&self) -> BTreeSet<u32> {
        self.accesses.keys().map(|&(tid, _)| tid).collect()
    }
}

/// One watched line's hits.
#[derive(Debug, Clone)]
pub struct LineHits {
    /// Its first byte.
    pub address: u64,
    /// The mapping it lies in.
    pub region: Region,
    /// Hits by (word offset, thread, location of the instruction after the access).
    pub hits: Vec<WordHit>,
    /// Handoffs per word offset ([`handoffs`]).
    pub handoffs: BTreeMap<u64, u64>,
    /// How long it was watched.
    pub watched: Duration,
    /// A watchpoint reached its hit cap.
    pub capped: bool,
}

/// Hits on one word by one thread from one instruction.
#[derive(Debug, Clone)]
pub struct WordHit {
    /// Offset of the word in the line.
    pub offset: u64,
    /// Thread.
    pub tid: u32,
    /// The instruction after the access (where a data breakpoint traps).
    pub after: Location,
    /// Hits.
    pub count: u64,
}

/// The mapping a line lies in, from `/proc/PID/maps`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Region {
    /// A file's mapping (its data), or the anonymous mapping right after it (its `.bss`):
    /// `base` is where the file's offset 0 is mapped.
    File {
        /// The file.
        path: String,
        /// Address of its offset 0.
        base: u64,
    },
    /// Another mapping, by its name (`[heap]`, `[stack]`, empty for anonymous memory).
    Named(String),
}

/// Picks the process to watch and its hot addresses from the samples: the followed process
/// with the most samples among those sampled on two threads or more; its addresses with
/// [`MIN_ADDRESS_SHARE`] of its samples, hottest first.
pub fn choose_target(
    samples: &HashMap<Location, BTreeMap<u32, u64>>,
    alive: impl Fn(u32) -> bool,
) -> Result<(u32, Vec<u64>), WatchSkipped> {
    /// One process's samples: how many, on which threads, and per address.
    #[derive(Default)]
    struct Sampled {
        samples: u64,
        threads: BTreeSet<u32>,
        addresses: Vec<(u64, u64)>,
    }
    let mut per_pid: BTreeMap<u32, Sampled> = BTreeMap::new();
    for (loc, threads) in samples {
        let (pid, addr) = match *loc {
            Location::File { pid, addr, .. } | Location::Anon { pid, addr, .. } => (pid, addr),
            Location::Unknown { .. } | Location::Kernel { .. } => continue,
        };
        let n: u64 = threads.values().sum();
        let e = per_pid.entry(pid).or_default();
        e.samples += n;
        e.threads.extend(threads.keys());
        e.addresses.push((addr, n));
    }
    let (pid, chosen) = per_pid
        .into_iter()
        .filter(|(pid, s)| s.threads.len() >= 2 && alive(*pid))
        .max_by_key(|(pid, s)| (s.samples, std::cmp::Reverse(*pid)))
        .ok_or(WatchSkipped::OneThread)?;
    let (total, mut addrs) = (chosen.samples, chosen.addresses);
    addrs.sort_by_key(|&(a, n)| (std::cmp::Reverse(n), a));
    let hot: Vec<u64> = addrs
        .into_iter()
        .filter(|&(_, n)| n as f64 >= MIN_ADDRESS_SHARE * total as f64)
        .take(MAX_HOT_ADDRESSES)
        .map(|(a, _)| a)
        .collect();
    if hot.is_empty() {
        return Err(WatchSkipped::NoMemoryAccess);
    }
    Ok((pid, hot))
}

/// The instruction at `ip` and those that end at `ip` (a timer sample lands on the
/// instruction after the slow one), decoded from `code` (which starts at `code_start`),
/// kept when the watch can aim at their memory operand.
pub fn blamed_instructions(code: &[u8], code_start: u64, ip: u64) -> Vec<Instruction> {
    let mut out = Vec::new();
    let mut ending_found = false;
    for start in ip.saturating_sub(15)..=ip {
        let Some(from) = start.checked_sub(code_start).map(|o| o as usize) else {
            continue;
        };
        if from >= code.len() {
            continue;
        }
        let mut decoder = Decoder::with_ip(64, &code[from..], start, DecoderOptions::NONE);
        let insn = decoder.decode();
        if insn.is_invalid() || (start != ip && insn.next_ip() != ip) {
            continue;
        }
        // Of the decodings that end at `ip`, the earliest start is the whole instruction; a
        // later one starts inside it (`or [rcx],al` from the last bytes of `lock add
        // [rdi+8],1`) and would take a debug register for an address that never executes.
        if start != ip {
            if ending_found {
                continue;
            }
            ending_found = true;
        }
        if aimable(&insn) {
            out.push(insn);
        }
    }
    out
}

/// An explicit memory operand at a flat address (not `fs:`/`gs:`, which the sampled
/// registers cannot resolve), of an instruction that accesses it.
fn aimable(insn: &Instruction) -> bool {
    let touches = !matches!(
        insn.mnemonic(),
        Mnemonic::Lea
            | Mnemonic::Nop
            | Mnemonic::Prefetchnta
            | Mnemonic::Prefetcht0
            | Mnemonic::Prefetcht1
            | Mnemonic::Prefetcht2
            | Mnemonic::Prefetchw
            | Mnemonic::Clflush
            | Mnemonic::Clflushopt
    );
    touches
        && memory_operand(insn).is_some()
        && !matches!(insn.memory_segment(), Register::FS | Register::GS)
}

fn memory_operand(insn: &Instruction) -> Option<u32> {
    (0..insn.op_count()).find(|&i| insn.op_kind(i) == OpKind::Memory)
}

/// The address `insn`'s memory operand touches given the registers before it runs.
pub fn operand_address(insn: &Instruction, regs: &HashMap<Register, u64>) -> Option<u64> {
    let op = memory_operand(insn)?;
    insn.virtual_address(op, 0, |reg, _, _| match reg {
        Register::ES | Register::CS | Register::SS | Register::DS => Some(0),
        r => {
            let full = regs.get(&r.full_register()).copied()?;
            let bits = r.size() * 8;
            Some(if bits >= 64 {
                full
            } else {
                full & ((1u64 << bits) - 1)
            })
        }
    })
}

/// Watches the lines `pid`'s hot code touches, within `budget` of a `window` recorded.
pub fn watch(
    pid: u32,
    hot: &[u64],
    spaces: &AddressSpaces,
    window: Duration,
    budget: &WatchBudget,
) -> WatchRecording {
    let started = Instant::now();
    let length = budget.length(window);
    let mut out = WatchRecording {
        pid,
        hits_per_watchpoint: budget.hits_per_event,
        ..Default::default()
    };
    let threads: Vec<i32> = target::threads_of(pid as i32);
    out.threads = threads.len() as u32;
    out.thread_names = threads
        .iter()
        .filter_map(|&tid| {
            let comm = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/comm")).ok()?;
            Some((tid as u32, comm.trim_end().to_string()))
        })
        .collect();
    let mut aimed: Vec<Instruction> = Vec::new();
    for &ip in hot {
        let Some(code) = read_process_memory(pid, ip.saturating_sub(15), 31) else {
            continue;
        };
        for insn in blamed_instructions(&code, ip.saturating_sub(15), ip) {
            if !aimed.iter().any(|a| a.ip() == insn.ip()) {
                aimed.push(insn);
            }
        }
    }
    aimed.truncate(MAX_AIMED);
    if aimed.is_empty() {
        out.skipped = Some(WatchSkipped::NoMemoryAccess);
        return out;
    }
    let turns = aimed.len().div_ceil(DEBUG_REGISTERS);
    let aim_turn = length.mul_f64(AIM_SHARE) / turns as u32;
    let mut by_ip: BTreeMap<u64, AimedHits> = BTreeMap::new();
    out.armed = true;
    for chunk in aimed.chunks(DEBUG_REGISTERS) {
        let addrs: Vec<u64> = chunk.iter().map(Instruction::ip).collect();
        let hits = match arm_turn(&threads, &addrs, Arm::Execute, aim_turn, budget) {
            Ok(h) => h,
            Err(e) => return refused(out, &e, started),
        };
        let mut words: Vec<(u64, u64, u32)> = Vec::new();
        for h in hits {
            out.hits += 1;
            let Some(insn) = chunk.iter().find(|i| i.ip() == h.bp_addr) else {
                continue;
            };
            let Some(regs) = h.regs.as_ref() else {
                continue;
            };
            let Some(addr) = operand_address(insn, regs) else {
                continue;
            };
            let e = by_ip.entry(insn.ip()).or_insert_with(|| AimedHits {
                location: spaces.locate(pid, insn.ip()),
                hits: 0,
                accesses: BTreeMap::new(),
                lines: BTreeMap::new(),
            });
            e.hits += 1;
            *e.accesses.entry((h.tid, addr)).or_default() += 1;
            words.push((addr & !(WORD_BYTES - 1), h.time, h.tid));
            let size = u64::from(insn.memory_size().size().max(1) as u32);
            for line in lines_of(addr, size) {
                *e.lines.entry(line).or_default() += 1;
            }
        }
        for (word, n) in handoffs(words) {
            *out.aim_handoffs.entry(word).or_default() += n;
        }
    }
    out.aimed = by_ip.into_values().collect();
    if out.aimed.is_empty() {
        out.skipped = Some(WatchSkipped::NotRun);
        out.spent = started.elapsed();
        return out;
    }
    let chosen = hot_lines(&out.aimed);
    if chosen.is_empty() {
        out.skipped = Some(WatchSkipped::NoHotLine);
        out.spent = started.elapsed();
        return out;
    }
    // Each turn takes its share of what is left, so that arming and draining the turns
    // before it (a few ms on many threads) stay inside the budget.
    let deadline = started + length;
    let mut turns_left = (chosen.len() * 2) as u32;
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    for line in chosen {
        let mut hits: BTreeMap<(u64, u32, u64), u64> = BTreeMap::new();
        let mut capped = false;
        let mut line_handoffs: BTreeMap<u64, u64> = BTreeMap::new();
        let began = Instant::now();
        for half in 0..2u64 {
            let words: Vec<u64> = (0..DEBUG_REGISTERS as u64)
                .map(|w| line + (half * DEBUG_REGISTERS as u64 + w) * WORD_BYTES)
                .collect();
            let turn = deadline.saturating_duration_since(Instant::now()) / turns_left.max(1);
            turns_left = turns_left.saturating_sub(1);
            let taken = match arm_turn(&threads, &words, Arm::ReadWrite, turn, budget) {
                Ok(h) => h,
                Err(e) => return refused(out, &e, started),
            };
            let mut per_event: HashMap<(u32, u64), u32> = HashMap::new();
            for (offset, n) in handoffs(
                taken
                    .iter()
                    .map(|h| (h.bp_addr - line, h.time, h.tid))
                    .collect(),
            ) {
                *line_handoffs.entry(offset).or_default() += n;
            }
            for h in taken {
                out.hits += 1;
                *hits.entry((h.bp_addr - line, h.tid, h.ip)).or_default() += 1;
                let n = per_event.entry((h.tid, h.bp_addr)).or_default();
                *n += 1;
                capped |= *n >= budget.hits_per_event;
            }
        }
        out.lines.push(LineHits {
            address: line,
            region: region_of(&maps, line),
            hits: hits
                .into_iter()
                .map(|((offset, tid, ip), count)| WordHit {
                    offset,
                    tid,
                    after: spaces.locate(pid, ip),
                    count,
                })
                .collect(),
            handoffs: line_handoffs,
            watched: began.elapsed(),
            capped,
        });
    }
    out.spent = started.elapsed();
    out
}

/// The lines `[addr, addr + size)` touches.
fn lines_of(addr: u64, size: u64) -> impl Iterator<Item = u64> {
    let first = addr & !(LINE_BYTES - 1);
    let last = (addr + size - 1) & !(LINE_BYTES - 1);
    (first..=last).step_by(LINE_BYTES as usize)
}

/// The lines to watch: those with [`MIN_LINE_SHARE`] of all aim hits and [`MIN_LINE_HITS`],
/// most hits first, [`MAX_LINES`] at most.
pub fn hot_lines(aimed: &[AimedHits]) -> Vec<u64> {
    let mut per_line: BTreeMap<u64, u64> = BTreeMap::new();
    for a in aimed {
        for (&line, &n) in &a.lines {
            *per_line.entry(line).or_default() += n;
        }
    }
    let total: u64 = per_line.values().sum();
    let mut lines: Vec<(u64, u64)> = per_line
        .into_iter()
        .filter(|&(_, n)| n >= MIN_LINE_HITS && n as f64 >= MIN_LINE_SHARE * total as f64)
        .collect();
    lines.sort_by_key(|&(l, n)| (std::cmp::Reverse(n), l));
    lines.into_iter().take(MAX_LINES).map(|(l, _)| l).collect()
}

/// The mapping holding `addr` in a `/proc/PID/maps` text: a file's, or the anonymous one
/// right after a file's (its `.bss`), with where the file's offset 0 lies.
pub fn region_of(maps: &str, addr: u64) -> Region {
    struct Entry<'a> {
        start: u64,
        end: u64,
        offset: u64,
        inode: &'a str,
        path: &'a str,
    }
    let entries: Vec<Entry> = maps
        .lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let (start, end) = f.next()?.split_once('-')?;
            let _perms = f.next()?;
            let offset = u64::from_str_radix(f.next()?, 16).ok()?;
            let _dev = f.next()?;
            let inode = f.next()?;
            Some(Entry {
                start: u64::from_str_radix(start, 16).ok()?,
                end: u64::from_str_radix(end, 16).ok()?,
                offset,
                inode,
                path: f.next().unwrap_or(""),
            })
        })
        .collect();
    let Some(i) = entries.iter().position(|e| e.start <= addr && addr < e.end) else {
        return Region::Named("[unknown]".into());
    };
    let is_file = |e: &Entry| e.inode != "0" && e.path.starts_with('/');
    let file = if is_file(&entries[i]) {
        Some(entries[i].path)
    } else if i > 0 && is_file(&entries[i - 1]) && entries[i - 1].end == entries[i].start {
        Some(entries[i - 1].path)
    } else {
        None
    };
    match file {
        Some(path) => {
            let base = entries
                .iter()
                .filter(|e| e.path == path && e.offset == 0)
                .map(|e| e.start)
                .min()
                .unwrap_or(entries[i].start - entries[i].offset);
            Region::File {
                path: path.to_string(),
                base,
            }
        }
        None => Region::Named(match entries[i].path {
            "" => "[anon]".to_string(),
            p => p.to_string(),
        }),
    }
}

/// What a turn's breakpoints watch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arm {
    /// Execution of an instruction: hits carry the registers before it runs.
    Execute,
    /// Reads and writes of an 8-byte word.
    ReadWrite,
}

/// One breakpoint hit.
struct Hit {
    tid: u32,
    /// The breakpoint's address (which of the turn's it is).
    bp_addr: u64,
    /// The instruction pointer at the trap.
    ip: u64,
    /// When, ns of CLOCK_MONOTONIC (one clock on every CPU, so threads' hits interleave).
    time: u64,
    /// The general-purpose registers (execute breakpoints only).
    regs: Option<HashMap<Register, u64>>,
}

fn breakpoint_attr(addr: u64, arm: Arm) -> perf_event_attr {
    let mut attr = perf_event_attr {
        type_: PERF_TYPE_BREAKPOINT,
        ..Default::default()
    };
    attr.sample_type = (PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME) as u64;
    attr.set_use_clockid(1);
    attr.clockid = libc::CLOCK_MONOTONIC;
    match arm {
        Arm::Execute => {
            attr.bp_type = HW_BREAKPOINT_X;
            // The kernel takes only sizeof(long) for an execute breakpoint.
            attr.__bindgen_anon_4.bp_len = std::mem::size_of::<libc::c_long>() as u64;
            attr.sample_type |= PERF_SAMPLE_REGS_USER as u64;
            attr.sample_regs_user = GPRS.iter().map(|(bit, _)| 1u64 << bit).sum();
        }
        Arm::ReadWrite => {
            attr.bp_type = HW_BREAKPOINT_RW;
            attr.__bindgen_anon_4.bp_len = WORD_BYTES;
            // The sample's address is the breakpoint's (`perf_bp_event`): which word.
            attr.sample_type |= PERF_SAMPLE_ADDR as u64;
        }
    }
    attr.__bindgen_anon_3.bp_addr = addr;
    attr.__bindgen_anon_1.sample_period = 1;
    attr.set_disabled(1);
    attr.set_exclude_kernel(1);
    attr.set_exclude_hv(1);
    attr
}

/// One thread's breakpoints of a turn: the first owns the ring the others write to.
struct Armed {
    fds: Vec<OwnedFd>,
    ring: RawRing,
}

/// The watch so far, ended by the kernel's refusal of a breakpoint on every thread: no such
/// task means the program ended meanwhile (perhaps killed by a trap of the turn before).
fn refused(mut out: WatchRecording, e: &OpenError, started: Instant) -> WatchRecording {
    out.skipped = Some(match e.kind() {
        PerfErrno::NoSuchTask => WatchSkipped::EndedDuringWatch,
        _ => WatchSkipped::Refused {
            error: e.io().to_string(),
        },
    });
    out.spent = started.elapsed();
    out
}

/// Arms a breakpoint at each of `addrs` on every thread for `length` (each stopping itself
/// after the budget's hits), then takes the hits. A thread that exits meanwhile is skipped;
/// a refusal on every thread is the kernel's answer.
fn arm_turn(
    threads: &[i32],
    addrs: &[u64],
    arm: Arm,
    length: Duration,
    budget: &WatchBudget,
) -> Result<Vec<Hit>, OpenError> {
    let mut armed: Vec<(u32, Armed)> = Vec::new();
    let mut refused = None;
    'threads: for &tid in threads {
        let mut fds = Vec::new();
        let mut ring: Option<RawRing> = None;
        for &addr in addrs {
            let mut attr = breakpoint_attr(addr, arm);
            let fd = match open_event(&mut attr, tid, -1) {
                Ok(fd) => fd,
                Err(e) => {
                    refused.get_or_insert(e);
                    continue 'threads;
                }
            };
            match &ring {
                None => match RawRing::map(&fd, RING_PAGES) {
                    Ok(r) => ring = Some(r),
                    Err(_) => continue 'threads,
                },
                Some(_) => {
                    // SAFETY: both fds are perf events of this thread, open here.
                    let leader = fds.first().map(|f: &OwnedFd| f.as_raw_fd()).unwrap_or(-1);
                    if unsafe { perf_event_open_sys::ioctls::SET_OUTPUT(fd.as_raw_fd(), leader) }
                        != 0
                    {
                        continue 'threads;
                    }
                }
            }
            fds.push(fd);
        }
        if let Some(ring) = ring {
            armed.push((tid as u32, Armed { fds, ring }));
        }
    }
    if armed.is_empty() {
        return match refused {
            Some(e) => Err(e),
            None => Ok(Vec::new()),
        };
    }
    for (_, a) in &armed {
        for fd in &a.fds {
            // SAFETY: an open perf event; REFRESH enables it for that many overflows.
            unsafe {
                perf_event_open_sys::ioctls::REFRESH(fd.as_raw_fd(), budget.hits_per_event as i32)
            };
        }
    }
    std::thread::sleep(length);
    let mut hits = Vec::new();
    for (tid, mut a) in armed {
        for fd in &a.fds {
            // SAFETY: an open perf event.
            unsafe { perf_event_open_sys::ioctls::DISABLE(fd.as_raw_fd(), 0) };
        }
        a.ring.drain(|kind, body| {
            if kind == PERF_RECORD_SAMPLE
                && let Some(h) = parse_hit(body, arm, addrs)
            {
                hits.push(Hit { tid, ..h });
            }
        });
    }
    Ok(hits)
}

/// A breakpoint sample: `ip`, `pid, tid`, `time`, then `addr` (read/write) or the user
/// registers (execute: `abi`, then the registers in bit order).
fn parse_hit(body: &[u8], arm: Arm, addrs: &[u64]) -> Option<Hit> {
    let u64_at = |i: usize| -> Option<u64> {
        Some(u64::from_ne_bytes(body.get(i..i + 8)?.try_into().ok()?))
    };
    let ip = u64_at(0)?;
    let tid = u32::from_ne_bytes(body.get(12..16)?.try_into().ok()?);
    let time = u64_at(16)?;
    match arm {
        Arm::ReadWrite => Some(Hit {
            tid,
            bp_addr: u64_at(24)?,
            ip,
            time,
            regs: None,
        }),
        Arm::Execute => {
            let abi = u64_at(24)?;
            let regs: HashMap<Register, u64> = if abi == 0 {
                HashMap::new()
            } else {
                GPRS.iter()
                    .enumerate()
                    .filter_map(|(i, &(_, r))| Some((r, u64_at(32 + 8 * i)?)))
                    .collect()
            };
            // An execute breakpoint traps before the instruction: the IP is its address.
            let bp_addr = *addrs.iter().find(|&&a| a == ip)?;
            Some(Hit {
                tid,
                bp_addr,
                ip,
                time,
                regs: (!regs.is_empty()).then_some(regs),
            })
        }
    }
}

/// Handoffs per word: how often, in time order, the next access to a word came from another
/// thread than the last. `accesses` are (word address, time, thread), any order.
pub fn handoffs(mut accesses: Vec<(u64, u64, u32)>) -> BTreeMap<u64, u64> {
    accesses.sort_unstable();
    let mut out: BTreeMap<u64, u64> = BTreeMap::new();
    for pair in accesses.windows(2) {
        let ((w1, _, t1), (w2, _, t2)) = (pair[0], pair[1]);
        if w1 == w2 {
            *out.entry(w1).or_default() += u64::from(t1 != t2);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_locked_add_before_a_sample_is_aimed_at() {
        // 0x1000: lock add qword [rdi+8], 1 (f0 48 83 47 08 01); 0x1006: jmp (eb f8)
        let code = [0xf0, 0x48, 0x83, 0x47, 0x08, 0x01, 0xeb, 0xf8];
        let found = blamed_instructions(&code, 0x1000, 0x1006);
        let ips: Vec<String> = found.iter().map(|i| format!("{:#x} {i}", i.ip())).collect();
        assert_eq!(found.len(), 1, "{ips:?}");
        assert_eq!(found[0].ip(), 0x1000);
        let regs = HashMap::from([(Register::RDI, 0x7000_0040u64)]);
        assert_eq!(operand_address(&found[0], &regs), Some(0x7000_0048));
    }

    #[test]
    fn rip_relative_and_tls_operands() {
        // mov eax, [rip+0x10] at 0x2000 (8b 05 10 00 00 00): 0x2006 + 0x10.
        let code = [0x8b, 0x05, 0x10, 0, 0, 0];
        let found = blamed_instructions(&code, 0x2000, 0x2000);
        assert_eq!(operand_address(&found[0], &HashMap::new()), Some(0x2016));
        // mov rax, fs:[0x28] (64 48 8b 04 25 28 00 00 00): no flat address to aim at.
        let tls = [0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0, 0, 0];
        assert!(blamed_instructions(&tls, 0x3000, 0x3000).is_empty());
    }

    /// Two threads alternating on a word hand it off at each access; one thread, then the
    /// other (a goroutine moved between threads), hands it off once.
    #[test]
    fn handoffs_count_alternations_in_time_not_threads() {
        let alternating = (0..10).map(|i| (0x40, i, 1 + (i % 2) as u32)).collect();
        assert_eq!(handoffs(alternating)[&0x40], 9);
        let moved = (0..10)
            .map(|i| (0x40, i, if i < 5 { 1 } else { 2 }))
            .collect();
        assert_eq!(handoffs(moved)[&0x40], 1);
        let two_words = vec![(0x40, 1, 1), (0x48, 2, 2), (0x40, 3, 1)];
        assert_eq!(handoffs(two_words).get(&0x40), Some(&0));
    }

    #[test]
    fn a_chase_has_no_hot_line_and_a_counter_has_one() {
        let aimed = |lines: &[(u64, u64)]| AimedHits {
            location: Location::Kernel { addr: 0 },
            hits: lines.iter().map(|l| l.1).sum(),
            accesses: BTreeMap::from([((1, 0x40), 1)]),
            lines: lines.iter().copied().collect(),
        };
        let chase: Vec<(u64, u64)> = (0..200).map(|i| (i * 64, 1)).collect();
        assert!(hot_lines(&[aimed(&chase)]).is_empty());
        let counters = [aimed(&[(0x40, 60)]), aimed(&[(0x40, 50), (0x80, 2)])];
        assert_eq!(hot_lines(&counters), vec![0x40]);
    }

    #[test]
    fn bss_is_named_after_its_file() {
        let maps = "\
555555554000-555555555000 r--p 00000000 fd:01 42 /tmp/shapes
555555555000-555555556000 r-xp 00001000 fd:01 42 /tmp/shapes
555555557000-555555558000 rw-p 00002000 fd:01 42 /tmp/shapes
555555558000-555555559000 rw-p 00000000 00:00 0
555555559000-55555557a000 rw-p 00000000 00:00 0 [heap]
7ffff7d00000-7ffff7d21000 rw-p 00000000 00:00 0
";
        let file = Region::File {
            path: "/tmp/shapes".into(),
            base: 0x555555554000,
        };
        assert_eq!(region_of(maps, 0x555555557010), file);
        assert_eq!(region_of(maps, 0x555555558040), file);
        assert_eq!(
            region_of(maps, 0x555555559040),
            Region::Named("[heap]".into())
        );
        assert_eq!(
            region_of(maps, 0x7ffff7d00040),
            Region::Named("[anon]".into())
        );
    }

    #[test]
    fn the_budget_is_a_share_of_the_window_within_bounds() {
        let b = WatchBudget::DEFAULT;
        assert_eq!(
            b.length(Duration::from_secs(10)),
            Duration::from_millis(200)
        );
        assert_eq!(b.length(Duration::from_secs(1)), Duration::from_millis(100));
        assert_eq!(b.length(Duration::from_secs(3600)), Duration::from_secs(1));
    }
}
