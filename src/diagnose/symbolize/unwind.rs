//! Call stacks without frame pointers: each sample's user registers and stack copy
//! ([`UserStack`]) walked with the mapped binaries' CFI (`.eh_frame` through `.eh_frame_hdr`,
//! `.debug_frame`) by `framehop`, the unwinder samply uses; the vDSO's CFI comes from this
//! process's own copy of it. Code with no CFI (JIT code named by a perf map, hand-written
//! assembly) is walked by frame pointers, framehop's fallback. When
//! no stack was copied, or the walk ends early where the kernel's frame-pointer chain went
//! further, the kernel's chain is kept.
//!
//! Every chain is checked before it is kept ([`check_chain`]): a return address outside the
//! executable mappings, or a frame pointer that does not move up the stack, means the walk
//! read something that is no frame (a function that uses `rbp` as a plain register, as
//! CPython's `libpython` does): the chain is cut before that frame and the CFI walk is preferred,
//! and the report counts the chains rejected.
//!
//! Binaries are read once per file; each process gets its own module list, rebuilt when its
//! mappings change (an exec, a library loaded).

use crate::diagnose::symbolize::symbols::{MapEntry, parse_proc_maps, read_process_memory};
use framehop::x86_64::{CacheX86_64, UnwindRegsX86_64, UnwinderX86_64};
use framehop::{ExplicitModuleSectionInfo, Module, Unwinder};
use object::{Object, ObjectSection, ObjectSegment};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

/// The user registers an unwinder needs on x86-64 (`PERF_SAMPLE_REGS_USER`, parsed by
/// [`crate::diagnose::record::perf_records`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UserRegs {
    /// Instruction pointer.
    pub ip: u64,
    /// Stack pointer.
    pub sp: u64,
    /// Frame pointer (`rbp`).
    pub bp: u64,
}

/// Registers at the sample and the stack bytes copied from `regs.sp` upwards
/// (`PERF_SAMPLE_STACK_USER`, only the part the kernel could copy).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UserStack {
    /// Registers.
    pub regs: UserRegs,
    /// Stack bytes from `regs.sp`.
    pub bytes: Vec<u8>,
}

/// How one sample's stack was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UnwindMethod {
    /// The binaries' CFI, from the copied stack.
    Cfi,
    /// Frame pointers in the copied stack (the sampled code has no CFI: JIT code).
    FramePointers,
    /// The kernel's frame-pointer walk at the sample.
    KernelCallchain,
    /// The sampled address only.
    LeafOnly,
}

impl UnwindMethod {
    /// Words for the terminal.
    pub fn describe(self) -> &'static str {
        match self {
            UnwindMethod::Cfi => "CFI",
            UnwindMethod::FramePointers => "frame pointers",
            UnwindMethod::KernelCallchain => "kernel callchain",
            UnwindMethod::LeafOnly => "leaf only",
        }
    }
}

/// How a recording's stacks were unwound: the typed summary each diagnosis carries.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct UnwindReport {
    /// Samples per method.
    pub samples_by_method: BTreeMap<UnwindMethod, u64>,
    /// Samples whose walk reached the thread's start by any route: the CFI's end of stack, or
    /// a frame in a thread's entry function ([`is_thread_entry`]: `start_thread`, `clone3`,
    /// `_start`, `__libc_start_main`, Go's `runtime.goexit`, ...).
    pub full_stacks: u64,
    /// Samples counted.
    pub samples: u64,
    /// Samples whose frame-pointer chain would have been kept but failed the check (a return
    /// address outside executable code, a frame pointer not moving up the thread's stack): the
    /// kernel's chain where it went further than the stack walk (or no stack was copied), or
    /// the walk's own frames. The chain was cut before the bad frame, or the CFI walk kept
    /// instead. 0 in files written before chains were checked.
    #[serde(default)]
    pub rejected_chains: u64,
}

impl UnwindReport {
    /// Share of samples with a full stack, 0 to 1.
    pub fn full_share(&self) -> f64 {
        if self.samples == 0 {
            0.0
        } else {
            self.full_stacks as f64 / self.samples as f64
        }
    }

    /// The method most samples used.
    pub fn main_method(&self) -> Option<UnwindMethod> {
        self.samples_by_method
            .iter()
            .max_by_key(|(_, n)| **n)
            .map(|(m, _)| *m)
    }

    /// One line: `unwound by CFI 97%, kernel callchain 3%; full stacks (...) 95% of 1234 samples`.
    pub fn line(&self) -> String {
        let total = self.samples.max(1) as f64;
        let mut by: Vec<_> = self.samples_by_method.iter().collect();
        by.sort_by(|a, b| b.1.cmp(a.1));
        let methods: Vec<String> = by
            .iter()
            .map(|(m, n)| format!("{} {:.0}%", m.describe(), **n as f64 * 100.0 / total))
            .collect();
        let rejected = if self.rejected_chains > 0 {
            format!(
                "; {} frame-pointer chain{} rejected (a frame outside code or a frame pointer \
                 not moving up the stack)",
                self.rejected_chains,
                if self.rejected_chains == 1 { "" } else { "s" }
            )
        } else {
            String::new()
        };
        format!(
            "unwound by {}; full stacks (to the thread's start) {:.0}% of {} samples{rejected}",
            methods.join(", "),
            self.full_share() * 100.0,
            self.samples
        )
    }

    fn count(&mut self, method: UnwindMethod, full: bool, rejected: bool) {
        *self.samples_by_method.entry(method).or_default() += 1;
        self.samples += 1;
        if full {
            self.full_stacks += 1;
        }
        if rejected {
            self.rejected_chains += 1;
        }
    }
}

/// Functions in which a thread's stack starts: a walk that reaches one of them has the whole
/// stack, whether or not the unwinder went on to an end-of-stack mark. A frame-pointer chain
/// ends at `start_thread` (glibc's `clone3` keeps no frame pointer); the CFI walk ends at
/// `clone3` or `_start`; Go's goroutines start in `runtime.goexit`, its threads in
/// `runtime.mstart`; musl's threads in `start`/`start_c11`.
const THREAD_ENTRIES: &[&str] = &[
    "start_thread",
    "clone3",
    "__clone3",
    "clone",
    "__clone",
    "__GI___clone3",
    "__GI___clone",
    "_start",
    "__libc_start_main",
    "__libc_start_call_main",
    "__libc_start_main_impl",
    "runtime.goexit",
    "runtime.goexit.abi0",
    "runtime.mstart",
    "runtime.mstart.abi0",
    "runtime.rt0_go",
    "runtime.rt0_go.abi0",
    "start_c11",
    "thread_native_entry",
];

/// True when `function` is where a thread's stack starts ([`THREAD_ENTRIES`]).
pub fn is_thread_entry(function: &str) -> bool {
    THREAD_ENTRIES.contains(&function)
}

/// Why a frame-pointer chain is not trusted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChainFault {
    /// Return address `frame` (0: the innermost caller) lies outside every executable mapping:
    /// a stack or heap address read from a slot that is no frame.
    ReturnOutsideCode {
        /// Index of the bad return address.
        frame: usize,
    },
    /// The frame pointer of return address `frame` is below the stack pointer or not above
    /// the previous frame's: the stack grows down, so callers' frames lie higher.
    FrameNotMovingUp {
        /// Index of the return address the bad frame pointer gave.
        frame: usize,
    },
}

impl ChainFault {
    /// The index of the first caller not to keep.
    pub fn frame(self) -> usize {
        match self {
            ChainFault::ReturnOutsideCode { frame } | ChainFault::FrameNotMovingUp { frame } => {
                frame
            }
        }
    }
}

/// Checks a chain of return addresses `callers` (innermost first) of a sample whose stack
/// pointer was `sp`: each return address must lie in one of the executable mappings `maps`
/// (not checked when no mapping of the process is known), and each frame pointer
/// `frame_pointers[i]` (the slot return address `i` was read from, minus 8, where known) must
/// lie at or above `sp` and above the previous one.
pub fn check_chain(
    maps: &[MapEntry],
    sp: Option<u64>,
    callers: &[u64],
    frame_pointers: &[Option<u64>],
) -> Result<(), ChainFault> {
    let mut below = sp;
    for (frame, &ret) in callers.iter().enumerate() {
        if let Some(fp) = frame_pointers.get(frame).copied().flatten() {
            if below.is_some_and(|b| fp < b || (frame > 0 && fp == b)) {
                return Err(ChainFault::FrameNotMovingUp { frame });
            }
            below = Some(fp);
        }
        if !maps.is_empty() && !maps.iter().any(|m| (m.start..m.end).contains(&ret)) {
            return Err(ChainFault::ReturnOutsideCode { frame });
        }
    }
    Ok(())
}

/// The frame pointers of the kernel's chain `callers`, as far as the copied stack shows them:
/// the kernel walked `[bp] -> (saved bp, return address)` from the sampled `rbp`, so the first
/// is `rbp` itself; a later one is known while the slots lie in the copy and hold the return
/// addresses the kernel gave (`None` after that).
fn kernel_frame_pointers(user: &UserStack, callers: &[u64]) -> Vec<Option<u64>> {
    let word = |addr: u64| -> Option<u64> {
        let at = usize::try_from(addr.checked_sub(user.regs.sp)?).ok()?;
        let b = user.bytes.get(at..at.checked_add(8)?)?;
        Some(u64::from_ne_bytes(b.try_into().ok()?))
    };
    let mut out = Vec::with_capacity(callers.len());
    let mut fp = Some(user.regs.bp);
    for &ret in callers {
        out.push(fp);
        fp = fp
            .filter(|&f| f.checked_add(8).and_then(word) == Some(ret))
            .and_then(word);
    }
    out
}

/// The unwind sections of one binary, read once.
struct FileCfi {
    text_svma: Option<Range<u64>>,
    text: Option<Arc<[u8]>>,
    eh_frame_svma: Option<Range<u64>>,
    eh_frame: Option<Arc<[u8]>>,
    eh_frame_hdr_svma: Option<Range<u64>>,
    eh_frame_hdr: Option<Arc<[u8]>>,
    debug_frame: Option<Arc<[u8]>>,
    got_svma: Option<Range<u64>>,
    /// (file offset, file size, virtual address) of each load segment.
    segments: Vec<(u64, u64, u64)>,
}

impl FileCfi {
    fn read(path: &str) -> Option<FileCfi> {
        FileCfi::parse(&std::fs::read(path).ok()?)
    }

    /// The vDSO's image, read from this process: the kernel maps the same one into every
    /// 64-bit process, so its CFI serves the target's `[vdso]` (where `clock_gettime` and
    /// `Instant::now` run).
    fn vdso() -> Option<FileCfi> {
        let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
        let m = parse_proc_maps(&maps)
            .into_iter()
            .find(|m| &*m.path == VDSO)?;
        FileCfi::parse(&read_process_memory(
            std::process::id(),
            m.start,
            m.end - m.start,
        )?)
    }

    fn parse(data: &[u8]) -> Option<FileCfi> {
        let file = object::File::parse(data).ok()?;
        let section = |name: &str| {
            let s = file.section_by_name(name)?;
            Some((
                s.address()..s.address() + s.size(),
                Arc::<[u8]>::from(s.uncompressed_data().ok()?),
            ))
        };
        let (text_svma, text) = section(".text").unzip();
        let (eh_frame_svma, eh_frame) = section(".eh_frame").unzip();
        let (eh_frame_hdr_svma, eh_frame_hdr) = section(".eh_frame_hdr").unzip();
        let debug_frame = section(".debug_frame").map(|(_, d)| d);
        let got_svma = file
            .section_by_name(".got")
            .map(|s| s.address()..s.address() + s.size());
        let segments = file
            .segments()
            .map(|s| {
                let (off, size) = s.file_range();
                (off, size, s.address())
            })
            .collect();
        Some(FileCfi {
            text_svma,
            text,
            eh_frame_svma,
            eh_frame,
            eh_frame_hdr_svma,
            eh_frame_hdr,
            debug_frame,
            got_svma,
            segments,
        })
    }

    fn has_cfi(&self) -> bool {
        self.eh_frame.is_some() || self.debug_frame.is_some()
    }

    /// The virtual address the byte at `file_offset` (a mapping's page-aligned offset) is
    /// loaded at. A segment's mapping starts at its offset rounded down to a page, which can
    /// lie inside the previous segment (lld's layout: text at file 0x18f70, vaddr 0x19f70,
    /// mapped from 0x18000), so the last segment whose page-rounded range holds the offset is
    /// the one mapped there.
    fn vaddr_of(&self, file_offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .filter(|(off, size, _)| {
                file_offset >= off & !(PAGE_BYTES - 1) && file_offset < off + size
            })
            .max_by_key(|(off, _, _)| *off)
            .map(|(off, _, vaddr)| (vaddr + file_offset).wrapping_sub(*off))
    }
}

/// The vDSO's name in maps and mmap records.
const VDSO: &str = "[vdso]";

/// Page size mappings are aligned to (x86-64).
const PAGE_BYTES: u64 = 4096;

/// One process's modules.
#[derive(Default)]
struct ProcessModules {
    /// Its sections shared with the other processes that map the same file: a server's new
    /// worker costs no copy of the server's text and CFI.
    unwinder: UnwinderX86_64<Arc<[u8]>>,
    /// The mappings the modules were made from, to notice a change.
    from: Vec<(u64, u64, Arc<str>)>,
    /// Address ranges of modules with CFI.
    cfi_ranges: Vec<Range<u64>>,
}

/// The frame pointer of a sleeping thread before one is found: outside any stack.
const UNKNOWN_FRAME_POINTER: u64 = 1;

/// Frame-pointer values tried for a sleeping thread's stack before taking the deepest walk.
const MAX_FRAME_POINTER_GUESSES: usize = 32;

/// Unwinds samples of many processes.
pub struct StackUnwinder {
    files: HashMap<PathBuf, Option<Arc<FileCfi>>>,
    processes: HashMap<u32, ProcessModules>,
    cache: CacheX86_64,
    report: UnwindReport,
}

/// What one sample's walk gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unwound {
    /// Return addresses, innermost caller first (the leaf not repeated).
    pub callers: Vec<u64>,
    /// How.
    pub method: UnwindMethod,
}

impl Default for StackUnwinder {
    fn default() -> StackUnwinder {
        StackUnwinder {
            files: HashMap::new(),
            processes: HashMap::new(),
            cache: CacheX86_64::new(),
            report: UnwindReport::default(),
        }
    }
}

impl StackUnwinder {
    /// The stack of one sample of `pid` at `ip`: the CFI walk of `user` over the process's
    /// mappings `maps`, or the kernel's `kernel_callers` where that went further.
    pub fn unwind(
        &mut self,
        pid: u32,
        maps: &[MapEntry],
        ip: u64,
        user: Option<&UserStack>,
        kernel_callers: Vec<u64>,
        max_frames: usize,
    ) -> Unwound {
        let (u, full, rejected) = self.walk(pid, maps, ip, user, kernel_callers, max_frames);
        self.report.count(u.method, full, rejected);
        u
    }

    /// The stack of a thread asleep in the kernel, from its user `pc` and `sp` and the `bytes`
    /// of its stack from `sp` up, as /proc gives them: return addresses, innermost first. Not
    /// counted in the samples' report.
    ///
    /// /proc gives no frame pointer, and code built with frame pointers keeps its frame's
    /// address (the CFA) in `rbp`, which the system call's wrapper leaves untouched: the walk
    /// stops at the first such frame. So when the walk falls short of the thread's start, `rbp`
    /// is looked for in the stack as Breakpad's stack scan does: each word that could be a
    /// frame's saved `rbp` slot (the word above it a return address into executable code,
    /// the word itself zero or a higher stack address) is tried, and the first that lets the
    /// walk reach the thread's start is taken; failing that, the deepest walk.
    pub fn unwind_sleeping(
        &mut self,
        pid: u32,
        maps: &[MapEntry],
        pc: u64,
        sp: u64,
        bytes: Vec<u8>,
        max_frames: usize,
    ) -> Vec<u64> {
        // Not 0, which a frame-pointer walk takes for the end of the stack: a value no stack
        // read can reach, so a frame that needs rbp fails the walk instead of ending it.
        let mut user = UserStack {
            regs: UserRegs {
                ip: pc,
                sp,
                bp: UNKNOWN_FRAME_POINTER,
            },
            bytes,
        };
        let (first, full, _) = self.walk(pid, maps, pc, Some(&user), Vec::new(), max_frames);
        if full {
            return first.callers;
        }
        let executable = |a: u64| maps.iter().any(|m| (m.start..m.end).contains(&a));
        let word = |b: &[u8], at: usize| -> Option<u64> {
            Some(u64::from_ne_bytes(b.get(at..at + 8)?.try_into().ok()?))
        };
        let top = sp + user.bytes.len() as u64;
        let candidates: Vec<u64> = (0..user.bytes.len().saturating_sub(16))
            .step_by(8)
            .filter_map(|at| {
                let saved = word(&user.bytes, at)?;
                let ret = word(&user.bytes, at + 8)?;
                let slot = sp + at as u64;
                ((saved == 0 || (saved > slot && saved < top + (1 << 20))) && executable(ret))
                    .then_some(slot)
            })
            .take(MAX_FRAME_POINTER_GUESSES)
            .collect();
        let mut best = first.callers;
        for bp in candidates {
            user.regs.bp = bp;
            let (u, full, _) = self.walk(pid, maps, pc, Some(&user), Vec::new(), max_frames);
            if full {
                return u.callers;
            }
            if u.callers.len() > best.len() {
                best = u.callers;
            }
        }
        best
    }

    /// The walk, whether it reached the bottom of the stack, and whether a chain failed
    /// [`check_chain`] (and was cut before its bad frame).
    fn walk(
        &mut self,
        pid: u32,
        maps: &[MapEntry],
        ip: u64,
        user: Option<&UserStack>,
        mut kernel_callers: Vec<u64>,
        max_frames: usize,
    ) -> (Unwound, bool, bool) {
        let frame_pointers = user
            .map(|u| kernel_frame_pointers(u, &kernel_callers))
            .unwrap_or_default();
        // The kernel's chain as it came: a rejected chain counts only where it would have been
        // kept (no stack copy, or longer than the stack walk).
        let unchecked = kernel_callers.len();
        let kernel_fault = check_chain(
            maps,
            user.map(|u| u.regs.sp),
            &kernel_callers,
            &frame_pointers,
        )
        .err();
        if let Some(fault) = kernel_fault {
            kernel_callers.truncate(fault.frame());
        }
        let mut rejected = kernel_fault.is_some() && user.is_none();
        let kernel = |callers: Vec<u64>| Unwound {
            method: if callers.is_empty() {
                UnwindMethod::LeafOnly
            } else {
                UnwindMethod::KernelCallchain
            },
            callers,
        };
        let Some(user) = user else {
            return (kernel(kernel_callers), false, rejected);
        };
        self.sync(pid, maps);
        let p = self.processes.get(&pid).expect("synced");
        let sp = user.regs.sp;
        let bytes = &user.bytes;
        let mut read_stack = |addr: u64| {
            let at = addr.checked_sub(sp).ok_or(())? as usize;
            let word = bytes.get(at..at.checked_add(8).ok_or(())?).ok_or(())?;
            Ok(u64::from_ne_bytes(word.try_into().map_err(|_| ())?))
        };
        let regs = UnwindRegsX86_64::new(ip, sp, user.regs.bp);
        let mut frames = p
            .unwinder
            .iter_frames(ip, regs, &mut self.cache, &mut read_stack);
        let mut callers = Vec::new();
        let mut full = loop {
            match frames.next() {
                Ok(Some(f)) => {
                    if let framehop::FrameAddress::ReturnAddress(_) = f {
                        if callers.len() >= max_frames {
                            break false;
                        }
                        callers.push(f.address());
                    }
                }
                Ok(None) => break true,
                Err(_) => break false,
            }
        };
        // The stack walk's own frames pass the same check: where it followed frame pointers
        // (code without CFI) it may have read a slot that is no frame.
        if let Err(fault) = check_chain(maps, None, &callers, &[]) {
            callers.truncate(fault.frame());
            full = false;
            rejected = true;
        }
        if kernel_fault.is_some() && !full && callers.len() < unchecked {
            rejected = true;
        }
        if !full && callers.len() < kernel_callers.len() {
            return (kernel(kernel_callers), false, rejected);
        }
        let method = if p.cfi_ranges.iter().any(|r| r.contains(&ip)) {
            UnwindMethod::Cfi
        } else {
            UnwindMethod::FramePointers
        };
        (Unwound { callers, method }, full, rejected)
    }

    /// What was unwound how.
    pub fn report(&self) -> UnwindReport {
        self.report.clone()
    }

    /// Makes `pid`'s modules those of `maps` (file-backed executable mappings and the vDSO).
    fn sync(&mut self, pid: u32, maps: &[MapEntry]) {
        let with_cfi = |m: &&MapEntry| m.is_file() || &*m.path == VDSO;
        // Called for every sample: compared in place, without a copy of the maps.
        let unchanged = self.processes.get(&pid).is_some_and(|p| {
            let mut now = maps.iter().filter(with_cfi);
            p.from.iter().all(|(start, pgoff, path)| {
                now.next()
                    .is_some_and(|m| m.start == *start && m.pgoff == *pgoff && m.path == *path)
            }) && now.next().is_none()
        });
        if unchanged {
            return;
        }
        let current: Vec<(u64, u64, Arc<str>)> = maps
            .iter()
            .filter(with_cfi)
            .map(|m| (m.start, m.pgoff, m.path.clone()))
            .collect();
        let mut p = ProcessModules::default();
        for m in maps.iter().filter(with_cfi) {
            let path = PathBuf::from(&*m.path);
            let Some(cfi) = self
                .files
                .entry(path.clone())
                .or_insert_with(|| {
                    if &*m.path == VDSO {
                        FileCfi::vdso()
                    } else {
                        FileCfi::read(&m.path)
                    }
                    .map(Arc::new)
                })
                .clone()
            else {
                continue;
            };
            let Some(vaddr) = cfi.vaddr_of(m.pgoff) else {
                continue;
            };
            let base_avma = m.start.wrapping_sub(vaddr);
            if cfi.has_cfi() {
                p.cfi_ranges.push(m.start..m.end);
            }
            let info = ExplicitModuleSectionInfo {
                base_svma: 0,
                text_svma: cfi.text_svma.clone(),
                text: cfi.text.clone(),
                got_svma: cfi.got_svma.clone(),
                eh_frame_svma: cfi.eh_frame_svma.clone(),
                eh_frame: cfi.eh_frame.clone(),
                eh_frame_hdr_svma: cfi.eh_frame_hdr_svma.clone(),
                eh_frame_hdr: cfi.eh_frame_hdr.clone(),
                debug_frame: cfi.debug_frame.clone(),
                ..Default::default()
            };
            p.unwinder.add_module(Module::new(
                path.to_string_lossy().into_owned(),
                m.start..m.end,
                base_avma,
                info,
            ));
        }
        p.from = current;
        self.processes.insert(pid, p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segments_only(segments: Vec<(u64, u64, u64)>) -> FileCfi {
        FileCfi {
            text_svma: None,
            text: None,
            eh_frame_svma: None,
            eh_frame: None,
            eh_frame_hdr_svma: None,
            eh_frame_hdr: None,
            debug_frame: None,
            got_svma: None,
            segments,
        }
    }

    #[test]
    fn a_text_segment_mapped_from_inside_the_previous_one_gets_its_own_address() {
        // The segments of a rustc/lld release binary (readelf -l): read-only data at file 0,
        // text at file 0x18f70, vaddr 0x19f70; the text mapping's offset is 0x18000.
        let f = segments_only(vec![(0, 0x18f6c, 0), (0x18f70, 0x431d0, 0x19f70)]);
        assert_eq!(f.vaddr_of(0x18000), Some(0x19000));
        assert_eq!(f.vaddr_of(0), Some(0));
        assert_eq!(f.vaddr_of(0x100000), None);
    }

    #[test]
    fn the_kernel_chain_is_kept_where_the_stack_walk_finds_less() {
        let mut u = StackUnwinder::default();
        // No stack copy: the kernel's chain, or the leaf alone.
        let k = u.unwind(1, &[], 0x1000, None, vec![0x2000, 0x3000], 127);
        assert_eq!(k.method, UnwindMethod::KernelCallchain);
        assert_eq!(k.callers, vec![0x2000, 0x3000]);
        assert_eq!(
            u.unwind(1, &[], 0x1000, None, vec![], 127).method,
            UnwindMethod::LeafOnly
        );
        // A stack copy with no module and a frame pointer into nothing: the walk stops at
        // once, the kernel's longer chain wins.
        let user = UserStack {
            regs: UserRegs {
                ip: 0x1000,
                sp: 0x7000,
                bp: 0x9000,
            },
            bytes: vec![0; 64],
        };
        let k = u.unwind(1, &[], 0x1000, Some(&user), vec![0x2000], 127);
        assert_eq!(k.method, UnwindMethod::KernelCallchain);
        // A frame-pointer frame in the copy: bp -> (saved bp 0, return 0x4321), no CFI.
        let mut bytes = vec![0u8; 64];
        bytes[16..24].copy_from_slice(&0u64.to_ne_bytes());
        bytes[24..32].copy_from_slice(&0x4321u64.to_ne_bytes());
        let user = UserStack {
            regs: UserRegs {
                ip: 0x1000,
                sp: 0x7000,
                bp: 0x7010,
            },
            bytes,
        };
        let w = u.unwind(1, &[], 0x1000, Some(&user), vec![], 127);
        assert_eq!(w.method, UnwindMethod::FramePointers);
        assert_eq!(w.callers.first(), Some(&0x4321));
        let r = u.report();
        assert_eq!(r.samples, 4);
        assert_eq!(r.samples_by_method[&UnwindMethod::KernelCallchain], 2);
        assert!(
            r.line().starts_with("unwound by kernel callchain 50%"),
            "{}",
            r.line()
        );
    }

    fn mapping(start: u64, end: u64, path: &str) -> MapEntry {
        MapEntry {
            start,
            end,
            pgoff: 0,
            path: path.into(),
        }
    }

    /// A process's executable mappings: a program, a library, JIT code.
    fn synthetic_maps() -> Vec<MapEntry> {
        vec![
            mapping(0x40_0000, 0x50_0000, "/usr/bin/prog"),
            mapping(
                0x7f00_0000_0000,
                0x7f00_0010_0000,
                "/usr/lib/libpython3.12.so.1.0",
            ),
            mapping(0x7f10_0000_0000, 0x7f10_0000_1000, "//anon"),
        ]
    }

    #[test]
    fn a_chain_of_return_addresses_in_code_with_frame_pointers_moving_up_passes() {
        let maps = synthetic_maps();
        let sp = 0x7ffd_0000_0000;
        let callers = [0x40_1234, 0x7f00_0000_5678, 0x7f10_0000_0100];
        let fps = [Some(sp + 0x40), Some(sp + 0x100), Some(sp + 0x400)];
        assert_eq!(check_chain(&maps, Some(sp), &callers, &fps), Ok(()));
        // Frame pointers not known past the copy: the addresses alone are checked.
        assert_eq!(
            check_chain(&maps, Some(sp), &callers, &[Some(sp + 0x40)]),
            Ok(())
        );
    }

    #[test]
    fn a_chain_through_thread_stack_addresses_is_rejected_at_the_first_of_them() {
        // The CPython 3.12 `-X perf` case: libpython uses rbp as a plain register, so the
        // kernel's chain from it gave two thread-stack addresses as callers.
        let maps = synthetic_maps();
        let sp = 0x7ffd_0000_0000;
        let callers = [0x7ffd_0000_0db0, 0x7f00_0000_5678];
        assert_eq!(
            check_chain(&maps, Some(sp), &callers, &[]),
            Err(ChainFault::ReturnOutsideCode { frame: 0 })
        );
        let callers = [0x40_1234, 0x7ffd_0000_0db0];
        assert_eq!(
            check_chain(&maps, Some(sp), &callers, &[]),
            Err(ChainFault::ReturnOutsideCode { frame: 1 })
        );
    }

    #[test]
    fn a_frame_pointer_below_the_stack_pointer_or_moving_down_is_rejected() {
        let maps = synthetic_maps();
        let sp = 0x7ffd_0000_1000;
        let callers = [0x40_1234, 0x7f00_0000_5678, 0x40_2000];
        assert_eq!(
            check_chain(&maps, Some(sp), &callers, &[Some(sp - 0x10)]),
            Err(ChainFault::FrameNotMovingUp { frame: 0 })
        );
        assert_eq!(
            check_chain(
                &maps,
                Some(sp),
                &callers,
                &[Some(sp + 0x100), Some(sp + 0x80), Some(sp + 0x200)]
            ),
            Err(ChainFault::FrameNotMovingUp { frame: 1 })
        );
        assert_eq!(
            check_chain(
                &maps,
                Some(sp),
                &callers,
                &[Some(sp + 0x100), Some(sp + 0x100)]
            ),
            Err(ChainFault::FrameNotMovingUp { frame: 1 })
        );
    }

    #[test]
    fn a_kernel_chain_through_stack_addresses_gives_way_to_the_stack_walk_and_is_counted() {
        let maps = vec![mapping(0x1000, 0x5000, "//anon")];
        let mut u = StackUnwinder::default();
        // The copy: rbp -> (saved rbp 0, return 0x1234): one good frame-pointer frame.
        let mut bytes = vec![0u8; 64];
        bytes[16..24].copy_from_slice(&0u64.to_ne_bytes());
        bytes[24..32].copy_from_slice(&0x1234u64.to_ne_bytes());
        let user = UserStack {
            regs: UserRegs {
                ip: 0x1000,
                sp: 0x7000,
                bp: 0x7010,
            },
            bytes,
        };
        // The kernel's chain, longer, but its first caller is a stack address.
        let w = u.unwind(1, &maps, 0x1000, Some(&user), vec![0x7ff0, 0x2000], 127);
        assert_eq!(w.callers, vec![0x1234]);
        assert_eq!(w.method, UnwindMethod::FramePointers);
        // That walk reached the stack's end, so the kernel's chain was not going to be kept:
        // not counted.
        assert_eq!(u.report().rejected_chains, 0);
        // No copy: the kernel's chain is cut before its bad frame, and counted.
        let k = u.unwind(1, &maps, 0x1000, None, vec![0x2000, 0x7ff0, 0x3000], 127);
        assert_eq!(k.callers, vec![0x2000]);
        // A copy whose walk finds nothing: the kernel's chain, longer, would have been kept;
        // its good part is, and it counts.
        let stray = UserStack {
            regs: UserRegs {
                ip: 0x1000,
                sp: 0x7000,
                bp: 0x9000,
            },
            bytes: vec![0; 64],
        };
        let k = u.unwind(1, &maps, 0x1000, Some(&stray), vec![0x2000, 0x7ff0], 127);
        assert_eq!(k.callers, vec![0x2000]);
        assert_eq!(k.method, UnwindMethod::KernelCallchain);
        let r = u.report();
        assert_eq!(r.rejected_chains, 2);
        assert!(
            r.line().contains("2 frame-pointer chains rejected"),
            "{}",
            r.line()
        );
    }

    #[test]
    fn the_kernel_frame_pointers_are_read_from_the_copy_while_they_match_its_chain() {
        let mut bytes = vec![0u8; 64];
        // rbp 0x7010 -> (saved 0x7030, ret 0x1111); 0x7030 -> (saved 0x9000, ret 0x2222).
        bytes[0x10..0x18].copy_from_slice(&0x7030u64.to_ne_bytes());
        bytes[0x18..0x20].copy_from_slice(&0x1111u64.to_ne_bytes());
        bytes[0x30..0x38].copy_from_slice(&0x9000u64.to_ne_bytes());
        bytes[0x38..0x40].copy_from_slice(&0x2222u64.to_ne_bytes());
        let user = UserStack {
            regs: UserRegs {
                ip: 0x1000,
                sp: 0x7000,
                bp: 0x7010,
            },
            bytes,
        };
        assert_eq!(
            kernel_frame_pointers(&user, &[0x1111, 0x2222, 0x3333, 0x4444]),
            vec![Some(0x7010), Some(0x7030), Some(0x9000), None]
        );
        // A chain the copy does not show: only rbp is known.
        assert_eq!(
            kernel_frame_pointers(&user, &[0x5555, 0x2222]),
            vec![Some(0x7010), None]
        );
    }

    #[test]
    fn a_thread_started_by_clone3_or_start_thread_or_start_is_a_full_stack() {
        for f in [
            "start_thread",
            "clone3",
            "_start",
            "__libc_start_call_main",
            "runtime.goexit",
        ] {
            assert!(is_thread_entry(f), "{f}");
        }
        assert!(!is_thread_entry("main"));
        assert!(!is_thread_entry("py::crunch_numbers:/tmp/hot.py"));
    }
}
