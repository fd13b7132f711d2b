//! From samples to hot code: name every sampled address, total the samples per function, then
//! decode the hottest functions and classify their hot sites (see [`super::disasm`]), with the
//! share of samples each takes in total and per thread.

use super::disasm::{self, SiteKind};
use super::innodb;
use super::runtimes::{self, Role, Runtime};
use crate::diagnose::record::recording::Recording;
use crate::diagnose::record::threads::ThreadFigures;
use crate::diagnose::record::wall::{OffCpu, WallRecording};
use crate::diagnose::symbolize::kallsyms::Unnamed;
use crate::diagnose::symbolize::stack::{StackCount, StackFrame};
use crate::diagnose::symbolize::symbols::{Location, Symbol, Symbolizer};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

mod calls;
pub mod coverage;

/// A function and its samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HotFunction {
    /// Symbol name; `file@0xSTART` for a function of a stripped file known by its CFI
    /// bounds; `module+0xaddr` when there is neither.
    pub symbol: String,
    /// File or region.
    pub module: String,
    /// Samples in it.
    pub samples: u64,
    /// Share of all samples.
    pub share: f64,
    /// The call paths that led here, most samples first (empty without call chains).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub callers: Vec<CallerPath>,
    /// The threads sampled in it, most samples first: a finding about threads contending
    /// in a function counts them here, over all its instructions, not only its hot sites.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub threads: Vec<SiteThread>,
}

/// One way a function was reached: its callers, innermost first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallerPath {
    /// Caller names, innermost first (`module+0x...` for unnamed code).
    pub frames: Vec<String>,
    /// Samples of the function reached this way.
    pub samples: u64,
    /// Share of the function's samples.
    pub share: f64,
}

/// Caller paths kept per function, and frames per path.
const CALLER_PATHS: usize = 3;
const CALLER_DEPTH: usize = 6;

/// One frame's name for a reader.
pub fn frame_name(f: &StackFrame) -> String {
    match &f.function {
        Some(n) => n.clone(),
        None => format!("{}+{:#x}", short_module(&f.module), f.offset),
    }
}

/// The caller paths of the function named `symbol` in `module`, from the stacks whose leaf
/// lies in it. Frames of the function itself (recursion) are skipped.
pub fn callers_of(stacks: &[StackCount], symbol: &str, module: &str) -> Vec<CallerPath> {
    let mut paths: HashMap<Vec<String>, u64> = HashMap::new();
    let mut total = 0;
    for s in stacks {
        let Some(leaf) = s.frames.first() else {
            continue;
        };
        if leaf.module != module || leaf.function.as_deref() != Some(symbol) {
            continue;
        }
        total += s.samples;
        let path: Vec<String> = s.frames[1..]
            .iter()
            .filter(|f| f.function.as_deref() != Some(symbol))
            .take(CALLER_DEPTH)
            .map(frame_name)
            .collect();
        if !path.is_empty() {
            *paths.entry(path).or_default() += s.samples;
        }
    }
    let mut v: Vec<CallerPath> = paths
        .into_iter()
        .map(|(frames, samples)| CallerPath {
            frames,
            samples,
            share: samples as f64 / total.max(1) as f64,
        })
        .collect();
    v.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.frames.cmp(&b.frames)));
    v.truncate(CALLER_PATHS);
    v
}

/// Share of samples whose stack is cut: it ends in JIT or unknown memory instead of the
/// thread's start, because a frame there keeps no frame pointer. Only stacks that have
/// callers at all are judged (a one-frame stack is a leaf-only sample).
pub fn cut_share(stacks: &[StackCount]) -> f64 {
    let (mut cut, mut all) = (0, 0);
    for s in stacks.iter().filter(|s| s.frames.len() > 1) {
        all += s.samples;
        let last = s.frames.last().expect("frames");
        if !last.module.starts_with('/') || last.module.starts_with("//") {
            cut += s.samples;
        }
    }
    cut as f64 / all.max(1) as f64
}

/// One thread's part of a hot site.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SiteThread {
    /// Thread id.
    pub tid: u32,
    /// Thread name.
    pub name: String,
    /// Samples of this thread at the site.
    pub samples: u64,
    /// Share of this thread's samples.
    pub share_of_thread: f64,
}

/// A classified hot site.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HotSite {
    /// What it is.
    pub kind: SiteKind,
    /// Containing function.
    pub symbol: String,
    /// File or region.
    pub module: String,
    /// Address of the hot instruction in the module's numbering (ELF virtual address).
    pub address: u64,
    /// Offset of the hot instruction from the function's start.
    pub offset: u64,
    /// The hot instruction (skid undone).
    pub instruction: String,
    /// Samples in the site.
    pub samples: u64,
    /// Share of all samples.
    pub share: f64,
    /// Threads sampled here, busiest first.
    pub threads: Vec<SiteThread>,
    /// The site's code, `=>` on the hot instruction, samples per address.
    pub disassembly: disasm::Listing,
    /// `file:line` of the hot instruction, from DWARF.
    pub source_line: Option<String>,
    /// How the hot locked operand meets 64-byte cache lines, as far as the code shows: it
    /// crosses one (a split lock) or may (register-relative); absent for other sites. Saved
    /// as `line_split`; files written before it was typed carry the sentences `split_note`
    /// (a split lock) and `possible_split_note` (a possible one), read as
    /// [`disasm::LineSplit::Said`].
    #[serde(flatten, with = "saved_line_split")]
    pub line_split: Option<disasm::LineSplit>,
    /// A spin that re-reads through calls: what it calls to load. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reads_through: Option<ReadsThrough>,
    /// InnoDB's spin, when the site is one (recognised from its code, or by its function's
    /// name): whose, which spin, and the knobs this process runs with. Absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub innodb: Option<super::innodb::InnodbSpin>,
}

/// [`HotSite::line_split`] as saved: the facts under `line_split`; from files written before
/// they were, the sentence of `split_note` (a split lock) or `possible_split_note` (a possible
/// one).
mod saved_line_split {
    use super::disasm::LineSplit;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize)]
    struct Out<'a> {
        #[serde(skip_serializing_if = "Option::is_none")]
        line_split: Option<&'a LineSplit>,
    }

    #[derive(Deserialize)]
    struct In {
        #[serde(default)]
        line_split: Option<LineSplit>,
        #[serde(default)]
        split_note: Option<String>,
        #[serde(default)]
        possible_split_note: Option<String>,
    }

    pub fn serialize<S: Serializer>(v: &Option<LineSplit>, s: S) -> Result<S::Ok, S::Error> {
        Out {
            line_split: v.as_ref(),
        }
        .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<LineSplit>, D::Error> {
        let saved = In::deserialize(d)?;
        let said = |sentence: String, certain| LineSplit::Said { sentence, certain };
        Ok(saved
            .line_split
            .or_else(|| saved.split_note.map(|n| said(n, true)))
            .or_else(|| saved.possible_split_note.map(|n| said(n, false))))
    }
}

/// An off-CPU stack of one thread with its frames named: what [`super::wall::report`] takes.
#[derive(Debug, Clone, PartialEq)]
pub struct NamedWait {
    /// Thread.
    pub tid: u32,
    /// State.
    pub state: OffCpu,
    /// Frames, leaf first.
    pub frames: Vec<StackFrame>,
    /// Time, ns.
    pub ns: u64,
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

/// Kernel functions listed in the report.
pub const KERNEL_FUNCTIONS: usize = 10;

/// What a spin loop calls to re-read its flag: `while (load_turn() != me) ;`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadsThrough {
    /// The load-only functions its calls reach.
    pub functions: Vec<String>,
    /// The load the first does (`mov eax,[4038h]`); empty for a runtime's load function.
    pub load: String,
    /// What the first is when a runtime's load function known by its name (`V8's
    /// Atomics.load`), whose code is no short leaf.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub known_as: Option<String>,
    /// Samples in them under the loop's calls, counted in the site's `samples`; absent without
    /// call stacks, which alone tell which of their samples the loop took.
    pub samples: Option<u64>,
}

/// Samples of one kind.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KindShare {
    /// The kind.
    pub kind: SiteKind,
    /// Samples.
    pub samples: u64,
    /// Share of the samples it is counted against (all, or one thread's).
    pub share: f64,
}

/// A thread: kernel figures, samples, and where its samples went.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadReport {
    /// Kernel figures.
    #[serde(flatten)]
    pub figures: ThreadFigures,
    /// Samples of this thread.
    pub samples: u64,
    /// Share of all samples.
    pub sample_share: f64,
    /// Share of this thread's samples in each kind of hot site.
    pub kinds: Vec<KindShare>,
    /// Of its samples, those in kernel code (0 when kernel code was not sampled, and in
    /// files written before it was).
    #[serde(default)]
    pub kernel_samples: u64,
}

/// What the samples say.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HotSpots {
    /// Hottest functions.
    pub functions: Vec<HotFunction>,
    /// Classified sites of the hottest functions, hottest first.
    pub sites: Vec<HotSite>,
    /// Share of all samples per kind.
    pub kinds: Vec<KindShare>,
    /// Threads, busiest first.
    pub threads: Vec<ThreadReport>,
    /// What could not be done (no code bytes, no symbols).
    pub notes: Vec<String>,
    /// Distinct call stacks, named, most samples first.
    #[serde(default)]
    pub stacks: Vec<StackCount>,
    /// The wall-clock view's off-CPU stacks, named (empty without it): the input of
    /// [`super::wall::report`].
    #[serde(skip)]
    pub waits: Vec<NamedWait>,
    /// The hottest kernel functions (empty unless kernel code was sampled).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kernel_functions: Vec<KernelFunction>,
    /// Why kernel code was sampled but not named.
    #[serde(skip)]
    pub kernel_unnamed: Option<Unnamed>,
    /// What was analysed and what was not, with the fixes (absent for hot spots not made from
    /// a recording).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coverage: Option<coverage::Coverage>,
    /// Samples whose named stack reaches a thread's entry function
    /// ([`crate::diagnose::symbolize::unwind::is_thread_entry`]).
    #[serde(default)]
    pub full_stacks: u64,
    /// The watch of the hot code's cache lines, named (absent when it was not asked for).
    #[serde(skip)]
    pub line_watch: Option<crate::schema::line_sharing::LineWatch>,
}

/// Share of cut stacks from which a note says so.
const CUT_NOTE_SHARE: f64 = 0.10;
/// Functions reported.
const TOP_FUNCTIONS: usize = 15;
/// Functions disassembled.
const DECODED_FUNCTIONS: usize = 10;
/// A function is decoded when it has at least this share of the samples.
pub const MIN_DECODE_SHARE: f64 = 0.01;
/// A site is reported when it has at least this share.
const MIN_SITE_SHARE: f64 = 0.005;
/// Longest function decoded whole; beyond, a window around the samples.
const MAX_DECODE_BYTES: u64 = 256 * 1024;

struct FuncAcc {
    module: String,
    symbol: Option<Symbol>,
    fallback_addr: u64,
    /// Unnamed, and grouped per mapping (`fallback_addr` is the mapping's start).
    whole_mapping: bool,
    loc: Location,
    samples: u64,
    ips: BTreeMap<u64, BTreeMap<u32, u64>>,
}

/// Per-thread samples over some addresses' `tid -> samples` counts, most samples first.
fn threads_of<'a>(
    per_ip: impl Iterator<Item = &'a BTreeMap<u32, u64>>,
    thread_samples: &BTreeMap<u32, u64>,
    thread_name: &dyn Fn(u32) -> String,
) -> Vec<SiteThread> {
    let mut per_thread: BTreeMap<u32, u64> = BTreeMap::new();
    for tids in per_ip {
        for (&tid, &n) in tids {
            *per_thread.entry(tid).or_default() += n;
        }
    }
    let mut threads: Vec<SiteThread> = per_thread
        .into_iter()
        .map(|(tid, n)| SiteThread {
            tid,
            name: thread_name(tid),
            samples: n,
            share_of_thread: n as f64 / thread_samples[&tid].max(1) as f64,
        })
        .collect();
    threads.sort_by_key(|t| std::cmp::Reverse(t.samples));
    threads
}

/// Samples per thread and site kind, from the decoded functions.
type KindByThread = BTreeMap<(u32, SiteKind), u64>;

/// Names, totals and classifies the samples of a recording.
pub fn analyze(rec: &Recording) -> HotSpots {
    let mut symz = symbolizer_for(rec);
    let total = rec.total_samples.max(1) as f64;
    let (funcs, thread_samples) = group_by_function(rec, &mut symz);
    let thread_name = |tid: u32| thread_name(rec, tid);
    let mut out = HotSpots {
        functions: function_rows(&funcs, total, &thread_samples, &thread_name),
        ..HotSpots::default()
    };
    let mut kind_by_thread = KindByThread::new();
    // Kernel code is listed as kernel time, not disassembled: its bytes are not the
    // process's, and the user-space rules do not judge it.
    let decoded: Vec<&FuncAcc> = funcs
        .iter()
        .filter(|f| !matches!(f.loc, Location::Kernel { .. }))
        .filter(|f| f.samples as f64 / total >= MIN_DECODE_SHARE)
        .take(DECODED_FUNCTIONS)
        .collect();
    let under = calls::UnderCalls::new(&rec.stacks, &mut symz);
    let mut decoder = SiteDecoder {
        symz: &mut symz,
        total,
        thread_samples: &thread_samples,
        thread_name: &thread_name,
        under,
        globals: HashMap::new(),
    };
    // A spin that re-reads through a call takes its callee's samples under the loop: found
    // first, so that the callee's own sites count only the rest.
    let claims = decoder.claims(&decoded, rec);
    let mut disassembled: std::collections::HashSet<(String, u64)> = Default::default();
    for f in decoded {
        if decoder.decode(f, &claims, &mut out, &mut kind_by_thread) {
            disassembled.insert((f.module.clone(), f.fallback_addr));
        }
    }
    out.coverage = Some(coverage::of(rec, &funcs, &|f| {
        disassembled.contains(&(f.module.clone(), f.fallback_addr))
    }));
    out.sites
        .sort_by(|a, b| b.samples.cmp(&a.samples).then(a.address.cmp(&b.address)));
    out.stacks = name_stacks(&rec.stacks, &mut symz);
    out.line_watch = super::lines::report(rec, &mut symz);
    out.full_stacks = full_stacks(&out.stacks);
    if let Some(w) = &rec.wall {
        out.waits = name_waits(w, &mut symz);
    }
    // Callers of the functions worth a look, the bar code is disassembled at: a caller path
    // of a function under it explains nothing a reader acts on.
    for f in out
        .functions
        .iter_mut()
        .filter(|f| f.share >= MIN_DECODE_SHARE)
    {
        f.callers = callers_of(&out.stacks, &f.symbol, &f.module);
    }
    if rec.callchains {
        out.notes.extend(cut_stacks_note(rec, &out.stacks));
    }
    out.kernel_functions = funcs
        .iter()
        .filter(|f| matches!(f.loc, Location::Kernel { .. }))
        .take(KERNEL_FUNCTIONS)
        .map(|f| KernelFunction {
            function: func_name(f),
            samples: f.samples,
            share: f.samples as f64 / total,
        })
        .collect();
    if !out.kernel_functions.is_empty() {
        out.kernel_unnamed = symz.kernel_unnamed();
    }
    out.kinds = kind_shares(&kind_by_thread, total);
    out.threads = thread_reports(rec, &thread_samples, &kind_by_thread, total);
    out
}

/// A symbolizer that knows the recording's perf maps, JIT code and live processes.
fn symbolizer_for(rec: &Recording) -> Symbolizer {
    let mut symz = Symbolizer::default();
    for (pid, m) in &rec.perf_maps {
        symz.set_perf_map(*pid, m.clone());
    }
    for (pid, code) in &rec.jit_code {
        symz.set_jit_code(*pid, code.clone());
    }
    symz.live_pids = rec.live_pids.clone();
    symz
}

/// The samples grouped per function, most samples first, and the samples per thread.
fn group_by_function(rec: &Recording, symz: &mut Symbolizer) -> (Vec<FuncAcc>, BTreeMap<u32, u64>) {
    let mut funcs: HashMap<(String, u64), FuncAcc> = HashMap::new();
    let mut thread_samples: BTreeMap<u32, u64> = BTreeMap::new();
    for (loc, tids) in &rec.samples {
        let named = symz.name(loc);
        // Code in an ELF image with no name: the symbolizer names the function its CFI
        // entry bounds (`file@0xSTART`), so it groups like a symbol; what even CFI does not
        // cover, per address. Unnamed code elsewhere (JIT code without a perf map): per mapping, so that
        // one region's samples add up instead of scattering over its addresses.
        let group = match (&named.symbol, named.mapping) {
            (Some(s), _) => s.addr,
            (None, Some(start)) => start,
            (None, None) => named.address,
        };
        let acc = funcs
            .entry((named.module.clone(), group))
            .or_insert_with(|| FuncAcc {
                module: named.module.clone(),
                symbol: named.symbol.clone(),
                fallback_addr: group,
                whole_mapping: named.symbol.is_none() && named.mapping.is_some(),
                loc: loc.clone(),
                samples: 0,
                ips: BTreeMap::new(),
            });
        let per_ip = acc.ips.entry(named.address).or_default();
        for (&tid, &n) in tids {
            acc.samples += n;
            *per_ip.entry(tid).or_default() += n;
            *thread_samples.entry(tid).or_default() += n;
        }
    }
    let mut funcs: Vec<FuncAcc> = funcs.into_values().collect();
    funcs.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.module.cmp(&b.module)));
    (funcs, thread_samples)
}

/// The function table: one row per module and name, so that a JIT's recompilations of one
/// function (V8 perf-map entries, HotSpot's tiers, each at its own address) add up in one row;
/// the hot sites keep each copy's addresses. Most samples first, [`TOP_FUNCTIONS`] of them.
fn function_rows(
    funcs: &[FuncAcc],
    total: f64,
    thread_samples: &BTreeMap<u32, u64>,
    thread_name: &dyn Fn(u32) -> String,
) -> Vec<HotFunction> {
    let mut rows: Vec<(String, String, Vec<&FuncAcc>)> = Vec::new();
    let mut index: HashMap<(String, String), usize> = HashMap::new();
    for f in funcs {
        let key = (f.module.clone(), func_name(f));
        match index.get(&key) {
            Some(&i) => rows[i].2.push(f),
            None => {
                index.insert(key.clone(), rows.len());
                rows.push((key.0, key.1, vec![f]));
            }
        }
    }
    let mut out: Vec<HotFunction> = rows
        .into_iter()
        .map(|(module, symbol, copies)| {
            let samples: u64 = copies.iter().map(|f| f.samples).sum();
            HotFunction {
                symbol,
                module,
                samples,
                share: samples as f64 / total,
                callers: Vec::new(),
                threads: threads_of(
                    copies.iter().flat_map(|f| f.ips.values()),
                    thread_samples,
                    thread_name,
                ),
            }
        })
        .collect();
    out.sort_by(|a, b| b.samples.cmp(&a.samples).then(a.module.cmp(&b.module)));
    out.truncate(TOP_FUNCTIONS);
    out
}

/// Samples whose stack reaches a thread's entry function by any route: the kernel's
/// frame-pointer chain ends at `start_thread` (glibc's `clone3` keeps no frame pointer), a CFI
/// walk at `clone3` or `_start`, Go's at `runtime.goexit`.
pub fn full_stacks(stacks: &[StackCount]) -> u64 {
    stacks
        .iter()
        .filter(|s| {
            s.frames.iter().skip(1).rev().any(|f| {
                f.function
                    .as_deref()
                    .is_some_and(crate::diagnose::symbolize::unwind::is_thread_entry)
            })
        })
        .map(|s| s.samples)
        .sum()
}

/// A function's name for the report: its symbol, else its module and address or mapping.
fn func_name(f: &FuncAcc) -> String {
    match &f.symbol {
        Some(s) => s.name.clone(),
        None if f.whole_mapping => {
            format!(
                "{} mapping at {:#x}",
                short_module(&f.module),
                f.fallback_addr
            )
        }
        None => format!("{}+{:#x}", short_module(&f.module), f.fallback_addr),
    }
}

/// A thread's name as sampled, else as /proc showed it, else empty.
fn thread_name(rec: &Recording, tid: u32) -> String {
    rec.thread_names
        .get(&tid)
        .cloned()
        .or_else(|| {
            rec.threads
                .iter()
                .find(|t| t.tid == tid)
                .map(|t| t.name.clone())
        })
        .unwrap_or_default()
}

/// Disassembles a hot function and finds its sites.
struct SiteDecoder<'a> {
    symz: &'a mut Symbolizer,
    total: f64,
    thread_samples: &'a BTreeMap<u32, u64>,
    thread_name: &'a dyn Fn(u32) -> String,
    /// What loops' calls reach.
    under: calls::UnderCalls,
    /// Each module's InnoDB globals (none for a module without InnoDB), read once.
    globals: HashMap<String, Option<innodb::Globals>>,
}

impl SiteDecoder<'_> {
    /// The symbol of `f` and its code decoded, or a note why it cannot be disassembled.
    fn code(&mut self, f: &FuncAcc) -> Result<(Symbol, Vec<disasm::Insn>), String> {
        let share = 100.0 * f.samples as f64 / self.total;
        let Some(sym) = &f.symbol else {
            return Err(format!(
                "{} ({share:.1}% of samples) has no symbol; not disassembled",
                func_name(f),
            ));
        };
        let (start, len) = decode_window(f, sym);
        let Some(code) = self.symz.code(&f.loc, start, len) else {
            return Err(format!(
                "{} ({share:.1}% of samples): code not readable (anonymous memory of a process \
                 that has exited); named but not disassembled",
                sym.name,
            ));
        };
        Ok((sym.clone(), disasm::decode(&code, start)))
    }

    /// The sites of function `f` into `out` (or a note why it was not disassembled), and its
    /// samples per thread and site kind into `kind_by_thread`; less what spins through calls
    /// took from `f`, plus what a spin of `f` took from its callees (`claims`).
    fn decode(
        &mut self,
        f: &FuncAcc,
        claims: &calls::Claims,
        out: &mut HotSpots,
        kind_by_thread: &mut KindByThread,
    ) -> bool {
        let total = self.total;
        let (sym, insns) = match self.code(f) {
            Ok(c) => c,
            Err(note) => {
                out.notes.push(note);
                return false;
            }
        };
        let ips = claims.remaining(f);
        let ip_counts: BTreeMap<u64, u64> = ips
            .iter()
            .map(|(&ip, tids)| (ip, tids.values().sum()))
            .collect();
        let (symz, under) = (&mut *self.symz, &mut self.under);
        let sites = disasm::analyze_with_callees(&insns, &ip_counts, &mut |c| {
            under.callee(symz, &f.loc, &f.module, c)
        });
        for site in sites {
            // What the spin's calls took in their callees, per thread.
            let mut taken: BTreeMap<u32, u64> = BTreeMap::new();
            for c in &site.calls {
                for (&tid, &n) in claims
                    .by_call
                    .get(&(f.module.clone(), c.returns_to))
                    .into_iter()
                    .flatten()
                {
                    *taken.entry(tid).or_default() += n;
                }
            }
            let taken_samples: u64 = taken.values().sum();
            let samples = site.samples + taken_samples;
            let share = samples as f64 / total;
            for tids in site.ip_counts.keys().map(|ip| &ips[ip]).chain([&taken]) {
                for (&tid, &n) in tids {
                    *kind_by_thread.entry((tid, site.kind)).or_default() += n;
                }
            }
            if share < MIN_SITE_SHARE {
                continue;
            }
            let threads = threads_of(
                site.ip_counts.keys().map(|ip| &ips[ip]).chain([&taken]),
                self.thread_samples,
                self.thread_name,
            );
            let reads_through = site.calls.first().map(|first| {
                let mut functions: Vec<String> = Vec::new();
                for c in &site.calls {
                    if !functions.contains(&c.callee) {
                        functions.push(c.callee.clone());
                    }
                }
                ReadsThrough {
                    functions,
                    load: first.load.clone(),
                    known_as: first.known_as.clone(),
                    samples: claims.stacks.then_some(taken_samples),
                }
            });
            let line_split = (site.kind == SiteKind::LockedRmw)
                .then(|| site.hot_mem.as_ref().and_then(disasm::split_line))
                .flatten();
            out.sites.push(HotSite {
                kind: site.kind,
                symbol: sym.name.clone(),
                module: f.module.clone(),
                address: site.hot_addr,
                offset: site.hot_addr - sym.addr,
                instruction: site.hot_text.clone(),
                samples,
                share,
                threads,
                disassembly: site.lines.clone(),
                source_line: self.symz.source_line(&f.loc, site.hot_addr),
                line_split,
                reads_through,
                innodb: (site.kind == SiteKind::PauseSpin)
                    .then(|| self.innodb(f, &sym, &insns, site.start))
                    .flatten(),
            });
        }
        true
    }
}

impl SiteDecoder<'_> {
    /// InnoDB's spin in function `f` (decoded as `insns`), whose PAUSE loop starts at
    /// `loop_start`: recognised from its code, else by its name; with the knobs' values read
    /// from the process's memory while it lives, else its command line, else the defaults.
    fn innodb(
        &mut self,
        f: &FuncAcc,
        sym: &Symbol,
        insns: &[disasm::Insn],
        loop_start: u64,
    ) -> Option<innodb::InnodbSpin> {
        let symz = &mut *self.symz;
        let g = self
            .globals
            .entry(f.module.clone())
            .or_insert_with(|| symz.elf_image(&f.loc).and_then(innodb::Globals::from_elf))
            .as_ref()?;
        let by_name = matches!(
            runtimes::classify(&sym.name),
            Some((Runtime::InnoDb, Role::Spin))
        );
        let (m, recognised) = match innodb::recognise(insns, loop_start, g) {
            Some(m) => {
                let (address, instruction) = m.multiplier_read.clone();
                (
                    m,
                    innodb::Recognised::Code {
                        instruction,
                        address,
                    },
                )
            }
            None if by_name => (innodb::by_name(g)?, innodb::Recognised::Name),
            None => return None,
        };
        // The module's load bias, from the sample's address and its number in the module.
        let (pid, bias) = match &f.loc {
            Location::File { pid, addr, .. } => {
                (*pid, addr.wrapping_sub(symz.name(&f.loc).address))
            }
            _ => return None,
        };
        let live = symz.live_pids.contains(&pid);
        let mut read = |v: innodb::Variable| {
            if !live || !(1..=8).contains(&v.size) {
                return None;
            }
            let bytes = crate::diagnose::symbolize::symbols::read_process_memory(
                pid,
                v.address.wrapping_add(bias),
                v.size,
            )?;
            let mut word = [0u8; 8];
            word[..bytes.len().min(8)].copy_from_slice(&bytes[..bytes.len().min(8)]);
            (bytes.len() as u64 == v.size).then(|| u64::from_le_bytes(word))
        };
        let args: Vec<String> = std::fs::read(format!("/proc/{pid}/cmdline"))
            .map(|b| {
                b.split(|c| *c == 0)
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect()
            })
            .unwrap_or_default();
        Some(innodb::InnodbSpin {
            server: m.server,
            shape: m.shape,
            knobs: innodb::knob_values(&m, g, &mut read, &args),
            recognised,
        })
    }
}

/// Where to disassemble a function (start, length in bytes).
fn decode_window(f: &FuncAcc, sym: &Symbol) -> (u64, u64) {
    let last_ip = *f
        .ips
        .keys()
        .next_back()
        .expect("a sampled function has samples");
    let first_ip = *f.ips.keys().next().expect("a sampled function has samples");
    // Whole function when its size is known; else up to past the last sample, far enough
    // to reach the backward branch that closes a loop around it.
    // Saturating: a perf map may place a symbol at the top of the address space.
    let end = if sym.size > 0 {
        sym.addr.saturating_add(sym.size)
    } else {
        last_ip.saturating_add(256)
    };
    let start = if end - sym.addr > MAX_DECODE_BYTES {
        // Too long to decode whole: a window before the first sample; its first
        // instructions may be misdecoded, the decoder resynchronises within a few.
        first_ip.saturating_sub(4096).max(sym.addr)
    } else {
        sym.addr
    };
    let len = end
        .min(start.saturating_add(MAX_DECODE_BYTES))
        .saturating_sub(start);
    (start, len)
}

/// A note when many sampled stacks were cut short in JIT or unknown code.
fn cut_stacks_note(rec: &Recording, stacks: &[StackCount]) -> Option<String> {
    let cut = cut_share(stacks);
    (cut >= CUT_NOTE_SHARE).then(|| {
        format!(
            "{:.0}% of sampled stacks end in JIT or unknown code, where a frame keeps no \
             frame pointer, so their outer callers are missing{}",
            100.0 * cut,
            if rec.jvms.is_empty() {
                ""
            } else {
                " (a JVM attached to, not started by diagnose: start it with \
                 -XX:+PreserveFramePointer)"
            }
        )
    })
}

/// The samples of each site kind over all threads.
fn kind_shares(kind_by_thread: &KindByThread, total: f64) -> Vec<KindShare> {
    let mut kinds: BTreeMap<SiteKind, u64> = BTreeMap::new();
    for ((_, k), n) in kind_by_thread {
        *kinds.entry(*k).or_default() += n;
    }
    kinds
        .into_iter()
        .map(|(kind, samples)| KindShare {
            kind,
            samples,
            share: samples as f64 / total,
        })
        .collect()
}

/// Every thread /proc showed, plus any seen only in samples (too short-lived), with its
/// samples and site kinds, most samples first.
fn thread_reports(
    rec: &Recording,
    thread_samples: &BTreeMap<u32, u64>,
    kind_by_thread: &KindByThread,
    total: f64,
) -> Vec<ThreadReport> {
    let mut figures: Vec<ThreadFigures> = rec.threads.clone();
    for &tid in thread_samples.keys() {
        if !figures.iter().any(|f| f.tid == tid) {
            figures.push(ThreadFigures {
                pid: rec.thread_pid.get(&tid).copied().unwrap_or(0),
                tid,
                name: thread_name(rec, tid),
                wall_s: 0.0,
                cpu_s: 0.0,
                system_s: None,
                cpu_per_wall: 0.0,
                run_delay_s: None,
                voluntary_switches: 0,
                involuntary_switches: 0,
                minor_faults: 0,
                major_faults: 0,
            });
        }
    }
    let mut threads: Vec<ThreadReport> = figures
        .into_iter()
        .map(|fig| {
            let n = thread_samples.get(&fig.tid).copied().unwrap_or(0);
            let kinds = kind_by_thread
                .iter()
                .filter(|((tid, _), _)| *tid == fig.tid)
                .map(|((_, kind), &k)| KindShare {
                    kind: *kind,
                    samples: k,
                    share: k as f64 / n.max(1) as f64,
                })
                .collect();
            ThreadReport {
                kernel_samples: rec.kernel_samples.get(&fig.tid).copied().unwrap_or(0),
                figures: fig,
                samples: n,
                sample_share: n as f64 / total,
                kinds,
            }
        })
        .collect();
    threads.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then(b.figures.cpu_s.total_cmp(&a.figures.cpu_s))
    });
    threads
}

/// Names every frame of the sampled stacks. Callers were located at their return address
/// minus one; their frames give the return address itself, as pprof and perf do.
fn name_stacks(stacks: &HashMap<Vec<Location>, u64>, symz: &mut Symbolizer) -> Vec<StackCount> {
    let mut out: Vec<StackCount> = stacks
        .iter()
        .map(|(locs, &samples)| StackCount {
            frames: name_frames(locs, symz),
            samples,
        })
        .collect();
    // Most samples first; equal counts in a fixed order, so the same recording gives the
    // same document.
    out.sort_by(|a, b| {
        b.samples.cmp(&a.samples).then_with(|| {
            let key = |s: &StackCount| s.frames.iter().map(|f| f.address).collect::<Vec<_>>();
            key(a).cmp(&key(b))
        })
    });
    out
}

/// Names every frame of one stack (leaf first, callers located at their return address minus
/// one, which their frames give back).
fn name_frames(locs: &[Location], symz: &mut Symbolizer) -> Vec<StackFrame> {
    locs.iter()
        .enumerate()
        .map(|(i, loc)| {
            let named = symz.name(loc);
            let back = u64::from(i > 0);
            let offset = match (&named.symbol, named.mapping) {
                (Some(s), _) => named.address - s.addr,
                (None, Some(start)) => named.address - start,
                (None, None) => named.address,
            } + back;
            StackFrame {
                address: location_address(loc) + back,
                function: named.symbol.map(|s| s.name),
                module: named.module,
                offset,
                file_offset: match loc {
                    Location::File { file_offset, .. } => Some(file_offset + back),
                    _ => None,
                },
            }
        })
        .collect()
}

/// The off-CPU stacks of the wall-clock view, named like the samples' stacks.
fn name_waits(wall: &WallRecording, symz: &mut Symbolizer) -> Vec<NamedWait> {
    let mut out: Vec<NamedWait> = wall
        .stacks
        .iter()
        .map(|((tid, state, locs), &ns)| NamedWait {
            tid: *tid,
            state: *state,
            frames: name_frames(locs, symz),
            ns,
        })
        .collect();
    out.sort_by(|a, b| b.ns.cmp(&a.ns).then(a.tid.cmp(&b.tid)));
    out
}

/// The absolute address of a location in its process.
fn location_address(loc: &Location) -> u64 {
    match loc {
        Location::File { addr, .. }
        | Location::Anon { addr, .. }
        | Location::Unknown { addr, .. }
        | Location::Kernel { addr } => *addr,
    }
}

/// The file name of a module path, absolute or relative (`./pause_rounds`: a diagnosis saved
/// with the program's path shortened, as the Emerald Rapids regression corpus was, must meet
/// `/tmp/x/pause_rounds` of another machine under one name); names that are no path
/// (`[kernel.kallsyms]`, `//anon`) as they are.
pub fn short_module(module: &str) -> &str {
    if module.starts_with("//") || !module.contains('/') {
        return module;
    }
    module.rsplit('/').next().unwrap_or(module)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::diagnose::record::sampler::SamplingMode;

    /// The split_lock regression diagnosis (zen4-kvm), saved before the split was typed: its
    /// `split_note` sentence loads as a certain split (what `needs_line_costs` and `diff`'s
    /// mechanism read), says the same sentence, and is saved again as `line_split`.
    #[test]
    fn a_module_is_named_by_its_file_whatever_its_path() {
        assert_eq!(
            short_module("/tmp/tmp.c9E4WnNZwC/pause_rounds"),
            "pause_rounds"
        );
        assert_eq!(short_module("./pause_rounds"), "pause_rounds");
        assert_eq!(short_module("[kernel.kallsyms]"), "[kernel.kallsyms]");
        assert_eq!(short_module("//anon"), "//anon");
        assert_eq!(short_module("pause_rounds"), "pause_rounds");
    }

    /// The Zen 4 guest's split-lock diagnosis of 2026-11-27 (its regression corpus then),
    /// saved with the split as a sentence.
    #[test]
    fn a_split_note_saved_as_a_sentence_loads_as_a_certain_split() {
        let path = format!(
            "{}/tests/fixtures/diagnose/split-lock-note-sentence-zen4-kvm.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let bytes = std::fs::read(path).unwrap();
        assert!(String::from_utf8_lossy(&bytes).contains("\"split_note\":\"the 8-byte"));
        let d = crate::diagnose::from_json_bytes(&bytes).unwrap();
        let site = d
            .hot_sites
            .iter()
            .find(|s| s.line_split.is_some())
            .expect("the split site");
        let split = site.line_split.as_ref().unwrap();
        assert!(split.certain());
        assert_eq!(
            split.words(),
            "the 8-byte operand at 0x40bc starts at byte 60 of its 64-byte line and ends in the \
             next: a split lock"
        );
        assert!(d.findings.iter().any(|f| f.id == "split_lock"));
        let hot = HotSpots {
            sites: d.hot_sites.clone(),
            ..HotSpots::default()
        };
        assert!(crate::diagnose::needs_line_costs(&hot, &[]).1);
        let again = serde_json::to_value(site).unwrap();
        assert!(again.get("split_note").is_none(), "{again}");
        assert_eq!(again["line_split"]["split"], "said");
        assert_eq!(serde_json::from_value::<HotSite>(again).unwrap(), *site);
    }

    /// A register-relative operand's `possible_split_note` of an older file is a possible
    /// split, and a site with neither field has none; the facts saved now read back as they were.
    #[test]
    fn a_possible_split_note_loads_as_a_hint_and_facts_round_trip() {
        let mut site = serde_json::to_value(HotSite {
            kind: SiteKind::LockedRmw,
            symbol: "lockSlow".into(),
            module: "/bin/go".into(),
            address: 0x1000,
            offset: 0x10,
            instruction: "lock cmpxchg [rdi+3Ch],ecx".into(),
            samples: 10,
            share: 0.5,
            threads: Vec::new(),
            disassembly: disasm::Listing::default(),
            source_line: None,
            line_split: None,
            reads_through: None,
            innodb: None,
        })
        .unwrap();
        assert!(site.get("line_split").is_none(), "absent, not null: {site}");
        assert_eq!(
            serde_json::from_value::<HotSite>(site.clone())
                .unwrap()
                .line_split,
            None
        );
        site["split_note"] = serde_json::Value::Null;
        site["possible_split_note"] = "the 8-byte operand sits at displacement 0x3c".into();
        let old: HotSite = serde_json::from_value(site.clone()).unwrap();
        let split = old.line_split.unwrap();
        assert!(!split.certain());
        assert_eq!(
            split.words(),
            "the 8-byte operand sits at displacement 0x3c"
        );
        let facts = disasm::LineSplit::DisplacementCrosses {
            operand_bytes: 8,
            displacement: 0x3c,
            line_offset_bytes: 60,
        };
        let mut now: HotSite = serde_json::from_value(site).unwrap();
        now.line_split = Some(facts.clone());
        let saved = serde_json::to_value(&now).unwrap();
        assert_eq!(saved["line_split"]["split"], "displacement_crosses");
        let back: HotSite = serde_json::from_value(saved).unwrap();
        assert_eq!(back.line_split, Some(facts));
    }

    fn recording(samples: HashMap<Location, BTreeMap<u32, u64>>) -> Recording {
        let total = samples.values().flat_map(|t| t.values()).sum();
        Recording {
            watch: None,
            mode: SamplingMode::CpuClock,
            scope: crate::diagnose::record::sampler::SamplingScope::PerTask,
            per_task_because: None,
            kernel: crate::diagnose::record::sampler::KernelSampling::Off,
            root_name: None,
            kernel_samples: BTreeMap::new(),
            other_samples: 0,
            frequency_hz: 499,
            wall_s: 1.0,
            root_pid: 99_999_997,
            followed: Vec::new(),
            no_children: false,
            command: None,
            ended: "exited with status 0".into(),
            interrupted_by: None,
            samples,
            stacks: HashMap::new(),
            callchains: false,
            unwinding: None,
            total_samples: total,
            lost: 0,
            thread_names: BTreeMap::new(),
            thread_pid: BTreeMap::new(),
            threads: Vec::new(),
            processes: Vec::new(),
            totals: None,
            counter_values: Vec::new(),
            counters_unavailable: Vec::new(),
            perf_maps: HashMap::new(),
            jit_code: HashMap::new(),
            live_pids: Vec::new(),
            jvms: BTreeMap::new(),
            namespaces: Vec::new(),
            notes: Vec::new(),
            wall: None,
        }
    }

    #[test]
    fn unnamed_anonymous_code_adds_up_per_mapping_not_per_address() {
        // Guards the scattering: JIT code without a perf map showed as one "function" per
        // sampled address ([anon]+0x...ab46, +0x...ab7c), each too small to notice.
        let at = |addr: u64| Location::Anon {
            pid: 99_999_997,
            addr,
            region: "//anon".into(),
            map_start: 0x7f00_0000_0000,
        };
        let mut samples = HashMap::new();
        for (i, addr) in [0x7f00_0000_0b46u64, 0x7f00_0000_0b7c, 0x7f00_0000_2000]
            .into_iter()
            .enumerate()
        {
            samples.insert(at(addr), BTreeMap::from([(7u32, 10 + i as u64)]));
        }
        let hot = analyze(&recording(samples));
        assert_eq!(hot.functions.len(), 1, "{:#?}", hot.functions);
        assert_eq!(hot.functions[0].symbol, "//anon mapping at 0x7f0000000000");
        assert_eq!(hot.functions[0].samples, 33);
        assert!(hot.notes[0].contains("has no symbol"), "{:?}", hot.notes);
    }

    #[test]
    fn stacks_are_named_leaf_first_with_callers_at_their_return_address() {
        // JIT code named by a perf map: `spin` called from `caller`, twice from one return
        // address and once from another, plus a leaf-only stack (no chain sampled).
        let pid = 99_999_997;
        let at = |addr: u64| Location::Anon {
            pid,
            addr,
            region: "//anon".into(),
            map_start: 0x7f00_0000_0000,
        };
        let leaf = at(0x7f00_0000_1010);
        let mut rec = recording(HashMap::from([(leaf.clone(), BTreeMap::from([(7, 4)]))]));
        // Callers are located at return address - 1 (the recorder does that).
        rec.stacks = HashMap::from([
            (vec![leaf.clone(), at(0x7f00_0000_2033 - 1)], 2),
            (vec![leaf.clone(), at(0x7f00_0000_2050 - 1)], 1),
            (vec![leaf.clone()], 1),
        ]);
        rec.perf_maps.insert(
            pid,
            vec![
                Symbol {
                    addr: 0x7f00_0000_1000,
                    size: 0x40,
                    name: "spin".into(),
                },
                Symbol {
                    addr: 0x7f00_0000_2000,
                    size: 0x100,
                    name: "caller".into(),
                },
            ],
        );
        let hot = analyze(&rec);
        assert_eq!(hot.stacks.len(), 3, "{:#?}", hot.stacks);
        let top = &hot.stacks[0];
        assert_eq!(top.samples, 2);
        let names: Vec<_> = top.frames.iter().map(|f| f.function.as_deref()).collect();
        assert_eq!(names, [Some("spin"), Some("caller")]);
        assert_eq!(
            (top.frames[0].address, top.frames[0].offset),
            (0x7f00_0000_1010, 0x10)
        );
        assert_eq!(
            (top.frames[1].address, top.frames[1].offset),
            (0x7f00_0000_2033, 0x33)
        );
        assert_eq!(top.frames[1].module, "//anon");
        let total: u64 = hot.stacks.iter().map(|s| s.samples).sum();
        assert_eq!(total, 4, "every sample is in exactly one stack");
        assert!(hot.stacks.iter().any(|s| s.frames.len() == 1));
    }

    const TEST_PID: u32 = 99_999_997;
    const TEST_BASE: u64 = 0x7f00_0000_0000;

    fn test_at(off: u64) -> Location {
        Location::Anon {
            pid: TEST_PID,
            addr: TEST_BASE + off,
            region: "//anon".into(),
            map_start: TEST_BASE,
        }
    }

    /// Issue 28's shape in JIT code named by a perf map: `wait_turn` spins on a call to a
    /// function at 0x1230 named `callee` (`mov eax,[rip+x]; ret`), called directly or
    /// `through_stub` (a PLT-like `jmp` at 0x1220 whose target only the stacks show).
    fn turn_recording(callee: &str, through_stub: bool) -> Recording {
        // 0x1220 stub: jmp 0x1230; 11 bytes of padding; load_turn at 0x1230:
        // mov eax,[rip+0x2e02] / ret; 9 bytes of padding; wait_turn at 0x1240: push rbp /
        // mov rbp,rsp / jmp 0x125a / nop / 0x1250: mov eax,[rip+0x2dde] / test eax,eax /
        // jne 0x1263 / 0x125a: call 0x1230 (or 0x1220) / cmp eax,edi / jne 0x1250 / pop rbp /
        // ret (tests/programs/turn_call.c, gcc 12 -O2)
        let mut code = vec![0xe9, 0x0b, 0x00, 0x00, 0x00];
        code.extend([0x90; 11]);
        code.extend([0x8b, 0x05, 0x02, 0x2e, 0x00, 0x00, 0xc3]);
        code.extend([0x90; 9]);
        code.extend([
            0x55, 0x48, 0x89, 0xe5, 0xeb, 0x14, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00,
            0x00, 0x00, 0x8b, 0x05, 0xde, 0x2d, 0x00, 0x00, 0x85, 0xc0, 0x75, 0x09, 0xe8, 0xd1,
            0xff, 0xff, 0xff, 0x39, 0xf8, 0x75, 0xed, 0x5d, 0xc3,
        ]);
        if through_stub {
            code[0x20 + 0x1b] = 0xc1; // call rel32 -0x3f: to 0x1220
        }
        let at = test_at;
        let mut rec = recording(HashMap::from([
            (at(0x125f), BTreeMap::from([(7, 50), (8, 30)])),
            (at(0x1236), BTreeMap::from([(7, 12), (8, 8)])),
        ]));
        rec.callchains = true;
        let player = at(0x2000);
        rec.stacks = HashMap::from([
            (vec![at(0x125f), player.clone()], 80),
            // In the callee, its caller at the call's return address minus one (the stub
            // jumps, so it leaves no frame).
            (vec![at(0x1236), at(0x125e), player], 20),
        ]);
        let sym = |off: u64, size, name: &str| Symbol {
            addr: TEST_BASE + off,
            size,
            name: name.into(),
        };
        rec.perf_maps.insert(
            TEST_PID,
            vec![
                sym(0x1220, 5, "stub"),
                sym(0x1230, 7, callee),
                sym(0x1240, 0x25, "wait_turn"),
                sym(0x2000, 0x100, "player"),
            ],
        );
        rec.jit_code
            .insert(TEST_PID, vec![(TEST_BASE + 0x1220, code)]);
        rec
    }

    /// The samples a spin through a call takes under its loop belong to it, per thread, and
    /// leave the callee with no site of its own.
    #[test]
    fn a_spin_through_a_call_takes_its_callees_samples_under_the_loop() {
        let base = TEST_BASE;
        let mut rec = turn_recording("load_turn", false);
        let hot = analyze(&rec);
        assert_eq!(
            hot.sites.len(),
            1,
            "load_turn has no site left: {:#?}",
            hot.sites
        );
        let s = &hot.sites[0];
        assert_eq!(
            (s.kind, s.symbol.as_str(), s.samples),
            (SiteKind::SpinWithoutPause, "wait_turn", 100)
        );
        assert_eq!(
            s.reads_through,
            Some(ReadsThrough {
                functions: vec!["load_turn".into()],
                load: format!("mov eax,[{:X}h]", base + 0x4038),
                known_as: None,
                samples: Some(20),
            })
        );
        let threads: Vec<(u32, u64)> = s.threads.iter().map(|t| (t.tid, t.samples)).collect();
        assert_eq!(threads, [(7, 62), (8, 38)]);
        assert_eq!(hot.kinds.len(), 1, "{:?}", hot.kinds);
        assert_eq!(
            (hot.kinds[0].kind, hot.kinds[0].samples),
            (SiteKind::SpinWithoutPause, 100)
        );
        // Without call stacks the loop is still a spin through load_turn, but which of
        // load_turn's samples it took is unknown: none are claimed.
        rec.callchains = false;
        rec.stacks.clear();
        let hot = analyze(&rec);
        let s = &hot.sites[0];
        assert_eq!((s.kind, s.samples), (SiteKind::SpinWithoutPause, 80));
        assert_eq!(s.reads_through.as_ref().unwrap().samples, None);
        assert_eq!(hot.sites[1].symbol, "load_turn");
    }

    #[test]
    fn a_call_through_a_stub_is_resolved_by_the_stacks_and_a_runtime_load_by_its_name() {
        // A PLT-like stub: the call's target jumps on; the stacks show load_turn under it.
        let hot = analyze(&turn_recording("load_turn", true));
        let s = &hot.sites[0];
        assert_eq!(
            (s.kind, s.samples),
            (SiteKind::SpinWithoutPause, 100),
            "{s:#?}"
        );
        let through = s.reads_through.as_ref().unwrap();
        assert_eq!(through.functions, ["load_turn"]);
        assert_eq!(through.samples, Some(20));
        // V8's Atomics.load builtin is known by its name (its code is no short leaf).
        let hot = analyze(&turn_recording("Builtin:AtomicsLoad", false));
        let through = hot.sites[0].reads_through.as_ref().unwrap();
        assert_eq!(through.known_as.as_deref(), Some("V8's Atomics.load"));
        assert_eq!(through.functions, ["Builtin:AtomicsLoad"]);
    }

    fn anon(pid: u32, addr: u64) -> Location {
        Location::Anon {
            pid,
            addr,
            region: "//anon".into(),
            map_start: 0x7f00_0000_0000,
        }
    }

    fn sym(addr: u64, size: u64, name: &str) -> Symbol {
        Symbol {
            addr,
            size,
            name: name.into(),
        }
    }

    #[test]
    fn a_jit_function_compiled_three_times_is_one_row_of_the_function_table() {
        // The two Node workers case: V8 compiled `crunch` three times, each copy at its own
        // address in the perf map; the table showed three rows.
        let pid = 99_999_991;
        let base = 0x7f00_0000_0000;
        let samples = HashMap::from([
            (anon(pid, base + 0x1010), BTreeMap::from([(pid, 30)])),
            (anon(pid, base + 0x2010), BTreeMap::from([(pid, 20)])),
            (anon(pid, base + 0x3010), BTreeMap::from([(pid, 10)])),
            (anon(pid, base + 0x4010), BTreeMap::from([(pid, 40)])),
        ]);
        let mut rec = recording(samples);
        rec.perf_maps.insert(
            pid,
            vec![
                sym(base + 0x1000, 0x100, "JS:*crunch /tmp/hot.js:1"),
                sym(base + 0x2000, 0x100, "JS:*crunch /tmp/hot.js:1"),
                sym(base + 0x3000, 0x100, "JS:*crunch /tmp/hot.js:1"),
                sym(base + 0x4000, 0x100, "JS:*other /tmp/hot.js:9"),
            ],
        );
        let hot = analyze(&rec);
        let rows: Vec<(&str, u64)> = hot
            .functions
            .iter()
            .map(|f| (f.symbol.as_str(), f.samples))
            .collect();
        assert_eq!(
            rows,
            vec![
                ("JS:*crunch /tmp/hot.js:1", 60),
                ("JS:*other /tmp/hot.js:9", 40)
            ]
        );
        assert_eq!(hot.functions[0].threads[0].samples, 60);
    }

    #[test]
    fn jit_code_without_a_perf_map_is_not_analysed_and_the_fix_is_nodes() {
        // The `node hot.js` case: 98% of samples in one anonymous mapping, and the screen said
        // "No findings".
        let pid = 99_999_992;
        let base = 0x7f00_0000_0000;
        let samples = HashMap::from([
            (anon(pid, base + 0x1010), BTreeMap::from([(pid, 90)])),
            (anon(pid, base + 0x2010), BTreeMap::from([(pid, 8)])),
            (
                Location::Unknown { pid, addr: 0x1234 },
                BTreeMap::from([(pid, 2)]),
            ),
        ]);
        let mut rec = recording(samples);
        rec.followed = vec![crate::diagnose::record::tree::FollowedProcess {
            pid,
            command: "node".into(),
            at_attach: false,
            exited: true,
        }];
        let c = analyze(&rec)
            .coverage
            .expect("a recording has its coverage");
        assert_eq!((c.samples, c.analysed), (100, 0));
        assert!(!c.enough());
        let g = &c.gaps[0];
        assert_eq!(g.cause, coverage::GapCause::JitWithoutPerfMap);
        assert_eq!(g.runtime, Some(coverage::JitRuntime::Node));
        assert_eq!(g.samples, 98);
        assert_eq!(g.fix, Some(coverage::Fix::NodePerfMap));
        assert!(
            g.sentence().contains("--perf-basic-prof"),
            "{}",
            g.sentence()
        );
        assert_eq!(c.gaps[1].cause, coverage::GapCause::OutsideMappings);
        let said = coverage::Coverage::no_findings(Some(&c));
        assert!(!said.starts_with("No findings:"), "{said}");
        assert!(said.contains("0.0% of samples analysed"), "{said}");
    }

    fn frame(function: Option<&str>) -> StackFrame {
        StackFrame {
            address: 0x1000,
            function: function.map(str::to_string),
            module: "/usr/lib/x86_64-linux-gnu/libc.so.6".into(),
            offset: 0,
            file_offset: None,
        }
    }

    #[test]
    fn a_stack_reaching_start_thread_without_clone3_is_full() {
        // The two Node workers case: the kernel's frame-pointer chain ends at start_thread
        // (clone3 keeps no frame pointer), and "full stacks" said 3%.
        let stack = |names: &[Option<&str>], samples| StackCount {
            frames: names.iter().map(|n| frame(*n)).collect(),
            samples,
        };
        let stacks = vec![
            stack(
                &[Some("work"), Some("worker_main"), Some("start_thread")],
                50,
            ),
            stack(&[Some("work"), Some("start_thread"), Some("clone3")], 20),
            stack(
                &[Some("work"), Some("main"), Some("__libc_start_call_main")],
                5,
            ),
            stack(&[Some("work"), None, None], 7),
            stack(&[Some("start_thread")], 3),
        ];
        assert_eq!(full_stacks(&stacks), 75);
    }
}
