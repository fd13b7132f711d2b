//! Naming addresses: which file backs an address (from `/proc/PID/maps` and the sampler's
//! mmap records), the ELF symbol that contains it (symbol table, or the dynamic one of a
//! stripped library), the source line when the file carries DWARF, and the names JITs publish
//! in `/tmp/perf-PID.map` for code in anonymous memory (HotSpot with perf-map-agent or
//! `-XX:+DumpPerfMapAtExit`, .NET with `DOTNET_PerfMapEnabled=1`, V8 with `--perf-basic-prof`).

use super::kallsyms::{KERNEL_MODULE, Kallsyms, UNNAMED_KERNEL, Unnamed};
use object::{Object, ObjectSection, ObjectSegment, ObjectSymbol, SymbolKind};
use std::collections::HashMap;
use std::os::unix::fs::MetadataExt;
use std::sync::Arc;

/// One executable mapping of a process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapEntry {
    /// First address.
    pub start: u64,
    /// One past the last.
    pub end: u64,
    /// File offset mapped at `start`.
    pub pgoff: u64,
    /// Backing file or pseudo-name (`//anon`, `[vdso]`, `[anon:...]`, empty for anonymous).
    pub path: Arc<str>,
}

impl MapEntry {
    /// True when a file on disk backs it (an absolute path).
    pub fn is_file(&self) -> bool {
        self.path.starts_with('/') && !self.path.starts_with("//")
    }
}

/// Parses the executable mappings of a `/proc/PID/maps` text.
pub fn parse_proc_maps(text: &str) -> Vec<MapEntry> {
    text.lines()
        .filter_map(|line| {
            let mut f = line.split_whitespace();
            let (start, end) = f.next()?.split_once('-')?;
            let perms = f.next()?;
            let pgoff = u64::from_str_radix(f.next()?, 16).ok()?;
            let (_dev, _inode) = (f.next()?, f.next()?);
            let path: Vec<&str> = f.collect();
            if !perms.contains('x') {
                return None;
            }
            Some(MapEntry {
                start: u64::from_str_radix(start, 16).ok()?,
                end: u64::from_str_radix(end, 16).ok()?,
                pgoff,
                path: Arc::from(path.join(" ")),
            })
        })
        .collect()
}

/// Where a sampled address lies, fixed at the time of the sample.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Location {
    /// In a file-backed mapping: the file and the offset in it.
    File {
        /// Path of the file, as the process sees it.
        path: Arc<str>,
        /// Offset in the file.
        file_offset: u64,
        /// Process (its `/proc/PID/root` resolves the path; its perf map names code in a
        /// file that is no ELF, such as a JIT's memfd).
        pid: u32,
        /// The absolute address.
        addr: u64,
        /// Start of the mapping.
        map_start: u64,
    },
    /// In memory no file backs (JIT code, the vDSO): the absolute address.
    Anon {
        /// Process, whose perf map names it.
        pid: u32,
        /// The address.
        addr: u64,
        /// The mapping's pseudo-name.
        region: Arc<str>,
        /// Start of the mapping.
        map_start: u64,
    },
    /// Outside every known mapping.
    Unknown {
        /// Process.
        pid: u32,
        /// The address.
        addr: u64,
    },
    /// In the kernel (named from `/proc/kallsyms`, never disassembled).
    Kernel {
        /// The kernel address.
        addr: u64,
    },
}

/// The executable mappings of every followed process, as they change.
#[derive(Debug, Default)]
pub struct AddressSpaces {
    by_pid: HashMap<u32, Vec<MapEntry>>,
}

impl AddressSpaces {
    /// Adds a mapping; a later mapping at the same address hides an earlier one.
    pub fn add(&mut self, pid: u32, entry: MapEntry) {
        self.by_pid.entry(pid).or_default().push(entry);
    }

    /// A new process starts with its parent's mappings (fork records carry no mmaps).
    pub fn fork(&mut self, parent: u32, child: u32) {
        if parent != child
            && let Some(m) = self.by_pid.get(&parent).cloned()
        {
            self.by_pid.insert(child, m);
        }
    }

    /// An exec replaces the address space.
    pub fn exec(&mut self, pid: u32) {
        self.by_pid.remove(&pid);
    }

    /// The executable mappings of process `pid`, oldest first.
    pub fn maps(&self, pid: u32) -> &[MapEntry] {
        self.by_pid.get(&pid).map_or(&[], Vec::as_slice)
    }

    /// The mapping `addr` lies in, in process `pid` now.
    pub fn mapping(&self, pid: u32, addr: u64) -> Option<&MapEntry> {
        self.by_pid
            .get(&pid)?
            .iter()
            .rev()
            .find(|m| (m.start..m.end).contains(&addr))
    }

    /// Where `addr` lies in process `pid` now.
    pub fn locate(&self, pid: u32, addr: u64) -> Location {
        let found = self
            .by_pid
            .get(&pid)
            .and_then(|maps| maps.iter().rev().find(|m| (m.start..m.end).contains(&addr)));
        match found {
            Some(m) if m.is_file() => Location::File {
                path: m.path.clone(),
                file_offset: addr - m.start + m.pgoff,
                pid,
                addr,
                map_start: m.start,
            },
            Some(m) => Location::Anon {
                pid,
                addr,
                region: m.path.clone(),
                map_start: m.start,
            },
            None => Location::Unknown { pid, addr },
        }
    }
}

/// A named code range.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    /// Start (ELF virtual address for files, absolute for JIT code).
    pub addr: u64,
    /// Size in bytes, 0 when unknown.
    pub size: u64,
    /// Demangled name.
    pub name: String,
}

/// Finds the symbol containing `addr` in a list sorted by address. A symbol of unknown size
/// extends to the next one.
pub fn symbol_containing(symbols: &[Symbol], addr: u64) -> Option<&Symbol> {
    let i = symbols.partition_point(|s| s.addr <= addr);
    let s = symbols.get(i.checked_sub(1)?)?;
    // `addr - s.addr`: a perf map (anyone's file in /tmp) may put a symbol at the top of the
    // address space, where `addr + size` would overflow.
    (s.size == 0 || addr - s.addr < s.size).then_some(s)
}

/// Parses a perf map: `START SIZE NAME` per line, START and SIZE in hex with or without `0x`
/// (perf-map-agent and .NET write none, some V8 builds write `0x`). Returns symbols sorted.
pub fn parse_perf_map(text: &str) -> Vec<Symbol> {
    let hex = |s: &str| {
        let s = s
            .strip_prefix("0x")
            .or_else(|| s.strip_prefix("0X"))
            .unwrap_or(s);
        u64::from_str_radix(s, 16).ok()
    };
    let mut v: Vec<Symbol> = text
        .lines()
        .filter_map(|line| {
            let mut parts = line.trim().splitn(3, char::is_whitespace);
            let addr = hex(parts.next()?)?;
            let size = hex(parts.next()?.trim())?;
            let name = parts.next()?.trim().to_string();
            (!name.is_empty()).then_some(Symbol { addr, size, name })
        })
        .collect();
    v.sort_by_key(|s| s.addr);
    v
}

/// Where a file's function names came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameSource {
    /// Its own symbol table.
    OwnSymbols,
    /// A separate debug file (by build-id or `.gnu_debuglink`), at this path.
    DebugFile(String),
    /// Its MiniDebugInfo (`.gnu_debugdata`: an xz-compressed ELF with a symbol table).
    MiniDebugInfo,
    /// Only its dynamic symbols (exported functions) and, elsewhere, CFI bounds.
    DynamicOnly,
}

/// Where separate debug files are looked for: `/usr/lib/debug` unless a test gives its own.
#[derive(Debug, Clone)]
pub struct DebugDirs {
    /// Global debug directories (`.build-id/xx/rest.debug` and `<dir>/<debuglink>` under each).
    pub roots: Vec<std::path::PathBuf>,
}

impl Default for DebugDirs {
    fn default() -> Self {
        DebugDirs {
            roots: vec!["/usr/lib/debug".into()],
        }
    }
}

/// An ELF file's code: load segments, symbols (its own, a separate debug file's or its
/// MiniDebugInfo's), CFI function bounds, and DWARF lines when present.
pub struct ElfModule {
    data: Vec<u8>,
    segments: Vec<(u64, u64, u64)>, // (file offset, file size, virtual address)
    /// Function symbols, sorted by address.
    pub symbols: Vec<Symbol>,
    /// Where the names came from.
    pub names_from: NameSource,
    /// Function bounds `(start, length)` from `.eh_frame` FDEs, sorted by start: code with no
    /// symbol is still grouped and disassembled per function.
    pub cfi_functions: Vec<(u64, u64)>,
    lines: Option<addr2line::Loader>,
}

/// Function symbols of an object file (symbol table and dynamic symbols), demangled.
fn function_symbols(file: &object::File) -> Vec<Symbol> {
    file.symbols()
        .chain(file.dynamic_symbols())
        .filter(|s| s.kind() == SymbolKind::Text && s.is_definition() && s.address() != 0)
        .filter_map(|s| {
            let name = s.name().ok()?;
            Some(Symbol {
                addr: s.address(),
                size: s.size(),
                name: addr2line::demangle_auto(name.into(), None).into_owned(),
            })
        })
        .collect()
}

/// The `(start, length)` of every function an `.eh_frame` FDE covers, sorted.
fn cfi_functions(file: &object::File) -> Vec<(u64, u64)> {
    use addr2line::gimli::{self, UnwindSection};
    let Some(section) = file.section_by_name(".eh_frame") else {
        return Vec::new();
    };
    let Ok(data) = section.data() else {
        return Vec::new();
    };
    let endian = if file.is_little_endian() {
        gimli::RunTimeEndian::Little
    } else {
        gimli::RunTimeEndian::Big
    };
    let mut eh = gimli::EhFrame::new(data, endian);
    eh.set_address_size(if file.is_64() { 8 } else { 4 });
    let mut bases = gimli::BaseAddresses::default().set_eh_frame(section.address());
    if let Some(text) = file.section_by_name(".text") {
        bases = bases.set_text(text.address());
    }
    let mut out = Vec::new();
    let mut entries = eh.entries(&bases);
    // A malformed entry ends the walk: the FDEs before it are still good.
    while let Ok(Some(entry)) = entries.next() {
        if let gimli::CieOrFde::Fde(partial) = entry
            && let Ok(fde) = partial.parse(|section, bases, o| section.cie_from_offset(bases, o))
            && fde.len() > 0
        {
            out.push((fde.initial_address(), fde.len()));
        }
    }
    out.sort_unstable();
    out
}

/// The build-id of an object file, as lowercase hex.
fn build_id_hex(file: &object::File) -> Option<String> {
    let id = file.build_id().ok()??;
    (!id.is_empty()).then(|| id.iter().map(|b| format!("{b:02x}")).collect())
}

/// The separate debug file of `path` (whose object is `file`): by build-id under each debug
/// root, else by `.gnu_debuglink` (beside it, in `.debug/` beside it, under each root at its
/// directory) with the link's CRC checked, as GDB looks them up. A build-id candidate must
/// carry the same build-id.
fn find_debug_file(file: &object::File, path: &str, dirs: &DebugDirs) -> Option<(String, Vec<u8>)> {
    if let Some(id) = build_id_hex(file)
        && id.len() > 2
    {
        for root in &dirs.roots {
            let p = root.join(format!(".build-id/{}/{}.debug", &id[..2], &id[2..]));
            if let Ok(data) = std::fs::read(&p)
                && object::File::parse(&*data)
                    .ok()
                    .is_some_and(|d| build_id_hex(&d).as_deref() == Some(&id))
            {
                return Some((p.to_string_lossy().into_owned(), data));
            }
        }
    }
    let (name, crc) = file.gnu_debuglink().ok()??;
    let name = std::str::from_utf8(name).ok()?;
    let own = std::path::Path::new(path);
    let dir = own.parent()?;
    let mut candidates = vec![dir.join(name), dir.join(".debug").join(name)];
    for root in &dirs.roots {
        let rel = dir.strip_prefix("/").unwrap_or(dir);
        candidates.push(root.join(rel).join(name));
    }
    candidates.into_iter().find_map(|p| {
        // The link may name the file itself (a debug file beside an unstripped copy).
        if p == own {
            return None;
        }
        let data = std::fs::read(&p).ok()?;
        (crc32fast::hash(&data) == crc).then(|| (p.to_string_lossy().into_owned(), data))
    })
}

/// The symbols of a MiniDebugInfo section: an xz stream holding an ELF with a `.symtab`.
fn mini_debug_info_symbols(file: &object::File) -> Option<Vec<Symbol>> {
    let packed = file.section_by_name(".gnu_debugdata")?.data().ok()?;
    let mut elf = Vec::new();
    lzma_rs::xz_decompress(&mut std::io::BufReader::new(packed), &mut elf).ok()?;
    let inner = object::File::parse(&*elf).ok()?;
    Some(function_symbols(&inner))
}

impl ElfModule {
    /// Loads `path`, with separate debug files from `/usr/lib/debug`; `None` when it is not a
    /// readable object file.
    pub fn load(path: &str) -> Option<ElfModule> {
        ElfModule::load_with(path, &DebugDirs::default())
    }

    /// Loads `path`, looking for its separate debug file in `dirs`.
    pub fn load_with(path: &str, dirs: &DebugDirs) -> Option<ElfModule> {
        let data = std::fs::read(path).ok()?;
        let debug = {
            let file = object::File::parse(&*data).ok()?;
            // A file with its own full symbol table and DWARF needs nothing else.
            let complete = file.section_by_name(".symtab").is_some()
                && file.section_by_name(".debug_line").is_some();
            if complete {
                None
            } else {
                find_debug_file(&file, path, dirs)
            }
        };
        ElfModule::parse_with(data, Some(path), debug)
    }

    /// Parses an ELF image; DWARF lines are read from `path` when given and present.
    pub fn parse(data: Vec<u8>, path: Option<&str>) -> Option<ElfModule> {
        ElfModule::parse_with(data, path, None)
    }

    /// Parses an ELF image with its separate debug file `(path, bytes)` when one was found:
    /// names and lines come from the debug file then.
    fn parse_with(
        data: Vec<u8>,
        path: Option<&str>,
        debug: Option<(String, Vec<u8>)>,
    ) -> Option<ElfModule> {
        let (segments, symbols, names_from, cfi, lines_from) = {
            let file = object::File::parse(&*data).ok()?;
            let segments = file
                .segments()
                .map(|s| {
                    let (off, size) = s.file_range();
                    (off, size, s.address())
                })
                .collect();
            let mut symbols = function_symbols(&file);
            let own_symtab = file.symbols().any(|s| s.kind() == SymbolKind::Text);
            let debug_file = debug
                .as_ref()
                .and_then(|(p, d)| Some((p, object::File::parse(&**d).ok()?)));
            let mut lines_from = path
                .filter(|_| file.section_by_name(".debug_line").is_some())
                .map(str::to_string);
            let names_from = if let Some((p, d)) = &debug_file {
                symbols.extend(function_symbols(d));
                if d.section_by_name(".debug_line").is_some() {
                    lines_from = Some(p.to_string());
                }
                NameSource::DebugFile(p.to_string())
            } else if own_symtab {
                NameSource::OwnSymbols
            } else if let Some(mini) = mini_debug_info_symbols(&file) {
                symbols.extend(mini);
                NameSource::MiniDebugInfo
            } else {
                NameSource::DynamicOnly
            };
            // At one address: sized symbols before unsized ones, then the public name before
            // glibc's internal aliases (`__GI___lll_lock_wait`, `___pthread_mutex_lock`);
            // the first is kept.
            let alias_rank = |s: &Symbol| {
                let n = s.name.as_str();
                (
                    n.starts_with("__GI_"),
                    n.len() - n.trim_start_matches('_').len(),
                )
            };
            symbols.sort_by(|a, b| {
                a.addr
                    .cmp(&b.addr)
                    .then(b.size.cmp(&a.size))
                    .then_with(|| alias_rank(a).cmp(&alias_rank(b)))
            });
            symbols.dedup_by_key(|s| s.addr);
            (
                segments,
                symbols,
                names_from,
                cfi_functions(&file),
                lines_from,
            )
        };
        let lines = lines_from.and_then(|p| addr2line::Loader::new(p).ok());
        Some(ElfModule {
            data,
            segments,
            symbols,
            names_from,
            cfi_functions: cfi,
            lines,
        })
    }

    /// The function an FDE says contains `vaddr`: `(start, length)`.
    pub fn cfi_function(&self, vaddr: u64) -> Option<(u64, u64)> {
        let i = self.cfi_functions.partition_point(|(s, _)| *s <= vaddr);
        let (start, len) = *self.cfi_functions.get(i.checked_sub(1)?)?;
        (vaddr - start < len).then_some((start, len))
    }

    /// The virtual address at which the byte at `file_offset` is loaded.
    pub fn vaddr_of(&self, file_offset: u64) -> Option<u64> {
        self.segments
            .iter()
            .find(|(off, size, _)| (*off..off.saturating_add(*size)).contains(&file_offset))
            .map(|(off, _, vaddr)| vaddr.wrapping_add(file_offset - off))
    }

    /// Up to `len` bytes of the file image at virtual address `vaddr` (clipped to its segment).
    pub fn bytes_at(&self, vaddr: u64, len: u64) -> Option<&[u8]> {
        let (off, size, seg) = self
            .segments
            .iter()
            .find(|(_, size, seg)| (*seg..seg.saturating_add(*size)).contains(&vaddr))?;
        // Saturating: a malformed ELF file's segment may claim the whole address space.
        let start = off.saturating_add(vaddr - seg);
        let end = start.saturating_add(len).min(off.saturating_add(*size));
        self.data.get(start as usize..end as usize)
    }

    /// The file's image as read: for what reads more of the ELF than code and function names
    /// (a server's data symbols and GOT, `diagnose::analyse::innodb`).
    pub fn image(&self) -> &[u8] {
        &self.data
    }

    /// `file:line` of `vaddr`, from DWARF.
    pub fn source_line(&self, vaddr: u64) -> Option<String> {
        let loc = self.lines.as_ref()?.find_location(vaddr).ok()??;
        Some(format!("{}:{}", loc.file?, loc.line?))
    }
}

/// The name given to a function of file `module` that has no symbol, known by the bounds its
/// CFI entry gives: `file@0xSTART`.
pub fn unnamed_function(module: &str, start: u64) -> String {
    let file = module.rsplit('/').next().unwrap_or(module);
    format!("{file}@{start:#x}")
}

/// A sampled address, named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Named {
    /// File path, or the region (`//anon`, `[vdso]`, `[unknown]`).
    pub module: String,
    /// The address in the module's own numbering (ELF virtual address; absolute for JIT).
    pub address: u64,
    /// The containing symbol, if any.
    pub symbol: Option<Symbol>,
    /// Start of the mapping, for an address in absolute numbering (no ELF behind it): code
    /// without a name is grouped per mapping, not per address.
    pub mapping: Option<u64>,
}

/// An ELF image in the cache: a file by device and inode (one copy however many processes
/// or mount namespaces map it), or the vDSO.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum ModuleKey {
    File(u64, u64),
    Vdso,
}

/// How a location is numbered: in an ELF image's virtual addresses, or absolute.
enum Numbering {
    Elf(ModuleKey, u64),
    Absolute {
        pid: u32,
        addr: u64,
        mapping: Option<u64>,
    },
    /// A kernel address: named from kallsyms, no bytes to read.
    Kernel(u64),
}

/// Loads and caches modules and perf maps, and names locations.
#[derive(Default)]
pub struct Symbolizer {
    modules: HashMap<ModuleKey, Option<ElfModule>>,
    /// Which module a (path, pid) opens, once looked up.
    paths: HashMap<(Arc<str>, u32), Option<ModuleKey>>,
    perf_maps: HashMap<u32, Vec<Symbol>>,
    jit_code: HashMap<u32, Vec<(u64, Vec<u8>)>>,
    /// Where code bytes of anonymous memory can still be read (live processes only).
    pub live_pids: Vec<u32>,
    /// Where separate debug files are looked for.
    pub debug_dirs: DebugDirs,
    /// The kernel's symbols, read at the first kernel address named.
    kallsyms: Option<Kallsyms>,
}

impl Symbolizer {
    /// The kernel's symbols, read once.
    fn kallsyms(&mut self) -> &Kallsyms {
        self.kallsyms.get_or_insert_with(Kallsyms::read)
    }

    /// Why kernel code is unnamed (`/proc/kallsyms` unreadable, or its addresses hidden), or
    /// `None` when it is named.
    pub fn kernel_unnamed(&mut self) -> Option<Unnamed> {
        self.kallsyms().unnamed()
    }

    /// A kernel address named: the function kallsyms places it in, or for all unnamed kernel
    /// code one name ([`UNNAMED_KERNEL`]), so its samples add up.
    fn name_kernel(&mut self, addr: u64) -> Named {
        let k = self.kallsyms();
        let symbol = match k.lookup(addr) {
            Some((start, name)) => Symbol {
                addr: start,
                size: k.size_at(start),
                name: name.to_string(),
            },
            None => Symbol {
                addr: 0,
                size: 0,
                name: UNNAMED_KERNEL.to_string(),
            },
        };
        Named {
            module: KERNEL_MODULE.to_string(),
            address: addr,
            symbol: Some(symbol),
            mapping: None,
        }
    }

    /// Gives the JIT symbols of process `pid` (from its perf map, read while it ran).
    pub fn set_perf_map(&mut self, pid: u32, symbols: Vec<Symbol>) {
        self.perf_maps.insert(pid, symbols);
    }

    /// Gives code copied from process `pid` while it ran (JIT symbols; newest last).
    pub fn set_jit_code(&mut self, pid: u32, code: Vec<(u64, Vec<u8>)>) {
        self.jit_code.insert(pid, code);
    }

    /// The ELF file mapped from `path` by `pid`, loaded once per file.
    fn file_module(&mut self, path: &Arc<str>, pid: u32) -> Option<ModuleKey> {
        if let Some(k) = self.paths.get(&(path.clone(), pid)) {
            return *k;
        }
        // A deleted file's path may hold another file by now; its own bytes are not on disk.
        let key = if path.ends_with(" (deleted)") {
            None
        } else {
            // The process's own view first (a container's files), then ours (it has exited).
            [format!("/proc/{pid}/root{path}"), path.to_string()]
                .into_iter()
                .find_map(|p| {
                    let meta = std::fs::metadata(&p).ok()?;
                    let key = ModuleKey::File(meta.dev(), meta.ino());
                    let loaded = self
                        .modules
                        .entry(key)
                        .or_insert_with(|| ElfModule::load_with(&p, &self.debug_dirs));
                    loaded.is_some().then_some(key)
                })
        };
        self.paths.insert((path.clone(), pid), key);
        key
    }

    /// The vDSO image: the process's own while it runs, else this process's, which the same
    /// kernel maps identically.
    fn vdso_module(&mut self, pid: u32) -> Option<ModuleKey> {
        let live = self.live_pids.contains(&pid);
        self.modules
            .entry(ModuleKey::Vdso)
            .or_insert_with(|| {
                let image = live
                    .then(|| vdso_image(pid))
                    .flatten()
                    .or_else(|| vdso_image(std::process::id()))?;
                ElfModule::parse(image, None)
            })
            .as_ref()
            .map(|_| ModuleKey::Vdso)
    }

    fn numbering(&mut self, loc: &Location) -> Numbering {
        match loc {
            Location::File {
                path,
                file_offset,
                pid,
                addr,
                map_start,
            } => match self.file_module(path, *pid) {
                Some(key) => {
                    let m = self.modules[&key]
                        .as_ref()
                        .expect("a cached key has a module");
                    Numbering::Elf(key, m.vaddr_of(*file_offset).unwrap_or(*file_offset))
                }
                None => Numbering::Absolute {
                    pid: *pid,
                    addr: *addr,
                    mapping: Some(*map_start),
                },
            },
            Location::Anon {
                pid,
                addr,
                region,
                map_start,
            } => {
                let vdso = if &**region == "[vdso]" {
                    self.vdso_module(*pid)
                } else {
                    None
                };
                match vdso {
                    Some(key) => {
                        let m = self.modules[&key]
                            .as_ref()
                            .expect("a cached key has a module");
                        let offset = addr - map_start;
                        Numbering::Elf(key, m.vaddr_of(offset).unwrap_or(offset))
                    }
                    None => Numbering::Absolute {
                        pid: *pid,
                        addr: *addr,
                        mapping: Some(*map_start),
                    },
                }
            }
            Location::Unknown { pid, addr } => Numbering::Absolute {
                pid: *pid,
                addr: *addr,
                mapping: None,
            },
            // Named by `name_kernel` and never read: no process of ours has these bytes.
            Location::Kernel { addr } => Numbering::Kernel(*addr),
        }
    }

    /// Names a location.
    pub fn name(&mut self, loc: &Location) -> Named {
        if let Location::Kernel { addr } = loc {
            return self.name_kernel(*addr);
        }
        let module = match loc {
            Location::File { path, .. } => path.to_string(),
            Location::Anon { region, .. } if region.is_empty() => "[anon]".into(),
            Location::Anon { region, .. } => region.to_string(),
            Location::Unknown { .. } => "[unknown]".into(),
            Location::Kernel { .. } => KERNEL_MODULE.into(),
        };
        match self.numbering(loc) {
            Numbering::Kernel(addr) => self.name_kernel(addr),
            Numbering::Elf(key, address) => {
                let m = self.modules[&key].as_ref();
                // No symbol: the function its CFI entry bounds, named `file@0xSTART`, so its
                // samples add up per function and its code can be decoded from the start.
                // A symbol of unknown size reaches only as far as the next function CFI
                // bounds (`_init` and hand-written assembly often have size 0).
                let by_cfi = m.and_then(|m| m.cfi_function(address));
                let symbol = m
                    .and_then(|m| symbol_containing(&m.symbols, address))
                    .filter(|s| s.size > 0 || by_cfi.is_none_or(|(start, _)| start <= s.addr))
                    .cloned()
                    .or_else(|| {
                        let (start, len) = by_cfi?;
                        Some(Symbol {
                            addr: start,
                            size: len,
                            name: unnamed_function(&module, start),
                        })
                    });
                Named {
                    module,
                    address,
                    symbol,
                    mapping: None,
                }
            }
            Numbering::Absolute { pid, addr, mapping } => Named {
                module,
                address: addr,
                symbol: self
                    .perf_maps
                    .get(&pid)
                    .and_then(|m| symbol_containing(m, addr))
                    .cloned(),
                mapping,
            },
        }
    }

    /// Code bytes `[addr, addr + len)` in the numbering [`Symbolizer::name`] gave `loc`: from
    /// the ELF image, else from code copied while the process ran, else from the memory of a
    /// process that is still alive.
    pub fn code(&mut self, loc: &Location, addr: u64, len: u64) -> Option<Vec<u8>> {
        match self.numbering(loc) {
            Numbering::Kernel(_) => None,
            Numbering::Elf(key, _) => self.modules[&key]
                .as_ref()?
                .bytes_at(addr, len)
                .map(<[u8]>::to_vec),
            Numbering::Absolute { pid, .. } => {
                // Newest copy first: a JIT may reuse an address for new code.
                let copied = self.jit_code.get(&pid).and_then(|blocks| {
                    blocks.iter().rev().find_map(|(start, bytes)| {
                        let from = addr.checked_sub(*start)? as usize;
                        (from < bytes.len())
                            .then(|| bytes[from..(from + len as usize).min(bytes.len())].to_vec())
                    })
                });
                if copied.is_some() || !self.live_pids.contains(&pid) {
                    return copied;
                }
                read_process_memory(pid, addr, len)
            }
        }
    }

    /// The function that starts at `addr` in `loc`'s numbering (a direct call's target in the
    /// same module): its symbol, or in a stripped file the function its CFI bounds.
    pub fn function_at(&mut self, loc: &Location, addr: u64) -> Option<Symbol> {
        let file = match loc {
            Location::File { path, .. } => path.rsplit('/').next().unwrap_or(path).to_string(),
            Location::Anon { region, .. } => region.to_string(),
            Location::Unknown { .. } => "[unknown]".into(),
            Location::Kernel { .. } => return None,
        };
        let found = match self.numbering(loc) {
            Numbering::Kernel(_) => None,
            Numbering::Elf(key, _) => {
                let m = self.modules[&key].as_ref()?;
                symbol_containing(&m.symbols, addr).cloned().or_else(|| {
                    let (start, size) = m.cfi_function(addr)?;
                    Some(Symbol {
                        addr: start,
                        size,
                        name: format!("{file}@{start:#x}"),
                    })
                })
            }
            Numbering::Absolute { pid, .. } => self
                .perf_maps
                .get(&pid)
                .and_then(|m| symbol_containing(m, addr))
                .cloned(),
        };
        found.filter(|s| s.addr == addr)
    }

    /// The ELF image behind `loc` (its file's bytes), when it is one.
    pub fn elf_image(&mut self, loc: &Location) -> Option<&[u8]> {
        match self.numbering(loc) {
            Numbering::Elf(key, _) => self.modules[&key].as_ref().map(ElfModule::image),
            Numbering::Absolute { .. } | Numbering::Kernel(_) => None,
        }
    }

    /// `file:line` for an address in `loc`'s numbering, from DWARF.
    pub fn source_line(&mut self, loc: &Location, addr: u64) -> Option<String> {
        match self.numbering(loc) {
            Numbering::Elf(key, _) => self.modules[&key].as_ref()?.source_line(addr),
            Numbering::Absolute { .. } | Numbering::Kernel(_) => None,
        }
    }
}

/// The vDSO of process `pid`: the `[vdso]` mapping of its address space, an ELF image.
fn vdso_image(pid: u32) -> Option<Vec<u8>> {
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).ok()?;
    let m = parse_proc_maps(&maps)
        .into_iter()
        .find(|m| &*m.path == "[vdso]")?;
    read_process_memory(pid, m.start, m.end - m.start)
}

/// Reads `len` bytes at `addr` of process `pid` (`/proc/PID/mem`, ptrace access needed).
pub fn read_process_memory(pid: u32, addr: u64, len: u64) -> Option<Vec<u8>> {
    use std::os::unix::fs::FileExt;
    let f = std::fs::File::open(format!("/proc/{pid}/mem")).ok()?;
    let mut buf = vec![0u8; len as usize];
    let n = f.read_at(&mut buf, addr).ok()?;
    buf.truncate(n);
    (n > 0).then_some(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
55d0c8a00000-55d0c8a01000 r--p 00000000 fd:01 123 /usr/bin/spin
55d0c8a01000-55d0c8a02000 r-xp 00001000 fd:01 123 /usr/bin/spin
7f00aa000000-7f00aa010000 rwxp 00000000 00:00 0
7f00bb028000-7f00bb1bd000 r-xp 00028000 fd:01 456 /usr/lib/x86_64-linux-gnu/libc.so.6
7ffd1e9f0000-7ffd1e9f2000 r-xp 00000000 00:00 0                          [vdso]
";

    #[test]
    fn only_executable_mappings_are_kept_with_their_offsets() {
        let m = parse_proc_maps(MAPS);
        assert_eq!(m.len(), 4);
        assert_eq!(m[0].pgoff, 0x1000);
        assert_eq!(&*m[0].path, "/usr/bin/spin");
        assert_eq!(&*m[1].path, "");
        assert_eq!(&*m[3].path, "[vdso]");
        assert!(m[2].is_file() && !m[1].is_file() && !m[3].is_file());
    }

    #[test]
    fn addresses_locate_to_file_offsets_or_anonymous_memory() {
        let mut a = AddressSpaces::default();
        for e in parse_proc_maps(MAPS) {
            a.add(7, e);
        }
        assert_eq!(
            a.locate(7, 0x55d0c8a01136),
            Location::File {
                path: "/usr/bin/spin".into(),
                file_offset: 0x1136,
                pid: 7,
                addr: 0x55d0c8a01136,
                map_start: 0x55d0c8a01000,
            }
        );
        assert!(matches!(a.locate(7, 0x7f00aa000010), Location::Anon { .. }));
        assert!(matches!(a.locate(7, 0x10), Location::Unknown { .. }));
        a.fork(7, 8);
        assert!(matches!(a.locate(8, 0x55d0c8a01136), Location::File { .. }));
        a.exec(8);
        assert!(matches!(
            a.locate(8, 0x55d0c8a01136),
            Location::Unknown { .. }
        ));
    }

    #[test]
    fn perf_maps_parse_with_and_without_0x() {
        // Guards the two spellings JITs use: perf-map-agent/.NET (bare hex) and 0x-prefixed.
        let text = include_str!("../../../tests/fixtures/perf-map/perf-1234.map");
        let s = parse_perf_map(text);
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].name, "LazyCompile:*spinWait /app/lock.js:12");
        assert_eq!(s[0].addr, 0x3ec4e8b00040);
        assert_eq!(s[0].size, 0x80);
        assert_eq!(
            s[2].name,
            "void System.Threading.SpinWait::SpinOnce(int32)[Optimized]"
        );
        assert_eq!(s[2].size, 0x6c);
        let hit = symbol_containing(&s, 0x7f6a1c0a1050).unwrap();
        assert!(hit.name.starts_with("Interpreter"));
        assert!(symbol_containing(&s, 0x7f6a1c0a1000 + 0x200).is_none());
    }

    #[test]
    fn this_test_binary_names_its_own_functions() {
        let exe = std::fs::read_link("/proc/self/exe").unwrap();
        let m = ElfModule::load(exe.to_str().unwrap()).unwrap();
        assert!(m.symbols.len() > 100);
        assert!(m.symbols.windows(2).all(|w| w[0].addr < w[1].addr));
        let s = m
            .symbols
            .iter()
            .find(|s| s.name.contains("this_test_binary_names_its_own_functions"))
            .expect("own symbol");
        assert_eq!(
            symbol_containing(&m.symbols, s.addr + 1).unwrap().name,
            s.name
        );
        assert!(m.bytes_at(s.addr, 16).is_some_and(|b| b.len() == 16));
    }

    #[test]
    fn code_in_a_memfd_mapping_is_named_from_the_perf_map() {
        // Guards .NET 7+'s W^X JIT: its code is in "/memfd:doublemapper (deleted)", a file
        // mapping that is no ELF on disk, so the perf map must name it.
        let mut z = Symbolizer::default();
        z.set_perf_map(
            4242,
            parse_perf_map("7f0000001000 40 JitCompiled::spinWait\n"),
        );
        z.set_jit_code(4242, vec![(0x7f00_0000_1000, vec![0xf3, 0x90, 0xc3])]);
        let loc = Location::File {
            path: "/memfd:doublemapper (deleted)".into(),
            file_offset: 0x1010,
            pid: 4242,
            addr: 0x7f00_0000_1010,
            map_start: 0x7f00_0000_0000,
        };
        let n = z.name(&loc);
        assert_eq!(n.symbol.unwrap().name, "JitCompiled::spinWait");
        assert_eq!(n.address, 0x7f00_0000_1010, "absolute numbering");
        assert_eq!(n.mapping, Some(0x7f00_0000_0000));
        assert_eq!(z.code(&loc, 0x7f00_0000_1000, 2), Some(vec![0xf3, 0x90]));
    }

    #[test]
    fn vdso_addresses_are_named_from_the_vdso_image() {
        // The vDSO is an ELF image in memory: clock_gettime's fast path lives there, and a
        // program that polls the clock spends its samples in it.
        let me = std::process::id();
        let maps = parse_proc_maps(&std::fs::read_to_string("/proc/self/maps").unwrap());
        let Some(vdso) = maps.iter().find(|m| &*m.path == "[vdso]") else {
            // vdso=0 on the kernel command line: fails, or skips with CPUDOCTOR_ALLOW_SKIP=1.
            let skip = std::env::var("CPUDOCTOR_ALLOW_SKIP").as_deref() == Ok("1");
            assert!(skip, "no [vdso] mapping here; CPUDOCTOR_ALLOW_SKIP=1 skips");
            return eprintln!("SKIPPED: no [vdso] mapping in this process (vdso=0?)");
        };
        let image = ElfModule::parse(vdso_image(me).unwrap(), None).unwrap();
        let sym = image
            .symbols
            .iter()
            .find(|s| s.name.contains("clock_gettime"))
            .expect("the vDSO exports clock_gettime")
            .clone();
        let offset = image.segments[0].0 + (sym.addr - image.segments[0].2);
        let loc = Location::Anon {
            pid: me,
            addr: vdso.start + offset + 1,
            region: "[vdso]".into(),
            map_start: vdso.start,
        };
        let mut z = Symbolizer {
            live_pids: vec![me],
            ..Symbolizer::default()
        };
        let n = z.name(&loc);
        assert_eq!(n.module, "[vdso]");
        assert_eq!(n.symbol.map(|s| s.name), Some(sym.name));
        assert!(z.code(&loc, sym.addr, 4).is_some_and(|b| b.len() == 4));
    }
}
