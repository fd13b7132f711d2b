//! What the diagnosis could not look into, and how to let it: samples in code without a name
//! (a stripped binary, JIT code with no perf map), or named but not disassembled. Each gap
//! comes with the fix for the runtime or binary it is in: `node --perf-basic-prof` for V8,
//! `-X perf` for CPython 3.12+, `jcmd PID Compiler.perfmap` for HotSpot, the debug package
//! (by build-id) of a distribution binary.
//!
//! "No findings" is said only when at least [`ENOUGH_ANALYSED`] of the samples were analysed;
//! otherwise the report says what was not, and how to fix that.

use super::{FuncAcc, MIN_DECODE_SHARE};
use crate::diagnose::record::recording::Recording;
use crate::diagnose::symbolize::symbols::{Location, unnamed_function};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

/// Share of samples analysed from which a diagnosis without findings may say "No findings": a
/// spin or a locked hotspot becomes a finding from 5% of the samples
/// (`rules::NOTICE_SHARE`); with less than 80% analysed, the rest is four times that bar and
/// could hide several such problems.
pub const ENOUGH_ANALYSED: f64 = 0.80;

/// Smallest share of samples a gap is reported at (its samples still count as not analysed).
pub const GAP_SHARE: f64 = 0.01;

/// How much of the recording the diagnosis looked into, and why not the rest.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Coverage {
    /// Samples counted.
    pub samples: u64,
    /// Samples in code that was named (a symbol, a perf map, a CFI entry's bounds) and, when
    /// its function has at least 1% of the samples, disassembled and classified.
    pub analysed: u64,
    /// The gaps of at least [`GAP_SHARE`] of the samples, most samples first.
    pub gaps: Vec<CoverageGap>,
}

impl Coverage {
    /// Share of samples analysed, 0 to 1 (1 with no samples: nothing was left out).
    pub fn analysed_share(&self) -> f64 {
        if self.samples == 0 {
            1.0
        } else {
            self.analysed as f64 / self.samples as f64
        }
    }

    /// True when enough was analysed for "No findings" to mean something
    /// ([`ENOUGH_ANALYSED`]).
    pub fn enough(&self) -> bool {
        self.analysed_share() >= ENOUGH_ANALYSED
    }

    /// The sentence for a diagnosis without findings ([`crate::words::diagnose::no_findings`]).
    pub fn no_findings(coverage: Option<&Coverage>) -> String {
        crate::words::diagnose::no_findings(
            coverage
                .filter(|c| !c.enough())
                .map(Coverage::analysed_share),
        )
    }

    /// The coverage section's heading.
    pub fn heading(&self) -> String {
        crate::words::diagnose::coverage_heading(self.enough(), self.analysed_share(), self.samples)
    }
}

/// Samples of one module left out of the analysis, or not named, for one cause.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoverageGap {
    /// Why.
    pub cause: GapCause,
    /// The file, or the anonymous region (`//anon`).
    pub module: String,
    /// The runtime whose JIT code it is, for [`GapCause::JitWithoutPerfMap`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<JitRuntime>,
    /// A process it was sampled in (the one with most samples in it).
    pub pid: u32,
    /// Samples in it.
    pub samples: u64,
    /// Share of all samples.
    pub share: f64,
    /// Of `samples`, those analysed nonetheless: code with no symbol whose functions its CFI
    /// entries bound is disassembled and classified (the gap is its names).
    #[serde(default)]
    pub analysed: u64,
    /// What would close it, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<Fix>,
}

impl CoverageGap {
    /// What the gap is, why it was not analysed, and the fix, in a sentence or two.
    pub fn sentence(&self) -> String {
        use crate::words::diagnose as w;
        let what = match self.cause {
            GapCause::JitWithoutPerfMap => w::gap_jit_without_perf_map(
                self.runtime.unwrap_or(JitRuntime::Other).name(),
                &self.module,
                self.pid,
            ),
            GapCause::NoSymbol => w::gap_no_symbol(
                &self.module,
                self.analysed as f64 / self.samples.max(1) as f64,
            ),
            GapCause::NotDisassembled => w::gap_not_disassembled(&self.module),
            GapCause::OutsideMappings => w::gap_outside_mappings(),
            GapCause::InterpreterWithoutNames => {
                w::gap_interpreter_without_names(&self.module, self.pid)
            }
        };
        match &self.fix {
            Some(fix) => w::gap_with_fix(&what, &fix.instruction()),
            None => what,
        }
    }
}

impl Fix {
    /// The fix, as an instruction.
    pub fn instruction(&self) -> String {
        use crate::words::diagnose as w;
        match self {
            Fix::NodePerfMap => w::fix_node_perf_map(),
            Fix::PythonPerf { version } => {
                let old = version.as_deref().filter(|v| {
                    v.split_once('.')
                        .and_then(|(_, m)| m.parse::<u32>().ok())
                        .is_some_and(|m| m < 12)
                });
                w::fix_python_perf(old)
            }
            Fix::HotSpotPerfMap { pid } => w::fix_hotspot_perf_map(*pid),
            Fix::DotnetPerfMap => w::fix_dotnet_perf_map(),
            Fix::PerfMap => w::fix_perf_map(),
            Fix::DebugSymbols {
                build_id,
                package,
                debug_package,
            } => w::fix_debug_symbols(
                build_id.as_deref(),
                package.as_deref(),
                debug_package.as_deref(),
            ),
        }
    }
}

/// Why samples were not analysed or not named.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GapCause {
    /// Code in a file-backed binary with no symbol for it (a stripped binary).
    NoSymbol,
    /// Code in anonymous executable memory (a JIT's) with no perf map naming it.
    JitWithoutPerfMap,
    /// Named code of a function with at least 1% of the samples that was not disassembled
    /// (its bytes could not be read, or more functions were hot than are decoded).
    NotDisassembled,
    /// Addresses outside every mapping the recording knew.
    OutsideMappings,
    /// CPython's interpreter running Python code with no perf map: the samples name its C
    /// functions (analysed), never the Python functions they run.
    InterpreterWithoutNames,
}

/// A runtime that compiles code at run time, told from the files its process maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum JitRuntime {
    /// Node.js (V8): maps `node` or `libnode.so`.
    Node,
    /// The HotSpot JVM: maps `libjvm.so`.
    #[serde(rename = "hotspot")]
    HotSpot,
    /// CPython: maps `python3.X` or `libpython3.X.so` (its perf trampolines are JIT code).
    #[serde(rename = "cpython")]
    CPython,
    /// .NET: maps `libcoreclr.so`.
    Dotnet,
    /// None of these.
    Other,
}

/// What closes a gap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "kind")]
pub enum Fix {
    /// Start node with `--perf-basic-prof` (or `--perf-prof`): V8 writes `/tmp/perf-PID.map`.
    NodePerfMap,
    /// CPython 3.12+: `-X perf` or `PYTHONPERFSUPPORT=1` (older versions have neither).
    PythonPerf {
        /// The version the process maps (`3.12`), when its file name says it.
        version: Option<String>,
    },
    /// HotSpot: `jcmd PID Compiler.perfmap` while it runs (JDK 17+), or
    /// `-XX:+DumpPerfMapAtExit`, and `-XX:+PreserveFramePointer` for stacks through it.
    #[serde(rename = "hotspot-perf-map")]
    HotSpotPerfMap {
        /// The JVM's process id.
        pid: u32,
    },
    /// .NET: `DOTNET_PerfMapEnabled=1`.
    DotnetPerfMap,
    /// Another JIT: have it write `/tmp/perf-PID.map`.
    PerfMap,
    /// A stripped binary: its separate debug symbols, found by build-id.
    DebugSymbols {
        /// The binary's GNU build-id, hex (what `debuginfod-find debuginfo` and
        /// `/usr/lib/debug/.build-id/` look up).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        build_id: Option<String>,
        /// The Debian package that installed it (`dpkg -S`), when one did.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        package: Option<String>,
        /// The package with its debug symbols: `PACKAGE-dbgsym` (`libc6-dbg` for glibc).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        debug_package: Option<String>,
    },
}

/// Gap key: cause, module, runtime.
type GapKey = (GapCause, String, Option<JitRuntime>);

/// The coverage of a recording whose samples were grouped into `funcs`; `decoded` tells
/// whether a function's code was disassembled.
pub(super) fn of(
    rec: &Recording,
    funcs: &[FuncAcc],
    decoded: &dyn Fn(&FuncAcc) -> bool,
) -> Coverage {
    let total = rec.total_samples.max(1) as f64;
    let samples: u64 = funcs.iter().map(|f| f.samples).sum();
    let runtimes = Runtimes::of(rec);
    // (samples, analysed, samples per pid)
    let mut gaps: HashMap<GapKey, (u64, u64, BTreeMap<u32, u64>)> = HashMap::new();
    let mut analysed = 0;
    for f in funcs {
        let pid = loc_pid(&f.loc);
        let file_backed = f.module.starts_with('/') && !f.module.starts_with("//");
        let cfi_named = f
            .symbol
            .as_ref()
            .is_some_and(|s| s.name == unnamed_function(&f.module, s.addr));
        let hot = f.samples as f64 / total >= MIN_DECODE_SHARE;
        // Kernel code is named from kallsyms and listed as kernel time, never disassembled:
        // named is analysed (the Kernel line says why it is unnamed when kallsyms hides it).
        let kernel = matches!(f.loc, Location::Kernel { .. });
        let ok = f.symbol.is_some() && (kernel || !hot || decoded(f));
        if ok {
            analysed += f.samples;
        }
        let key = match (&f.loc, &f.symbol) {
            (Location::Kernel { .. }, Some(_)) => continue,
            (Location::Kernel { .. }, None) => (GapCause::NoSymbol, f.module.clone(), None),
            (Location::Unknown { .. }, _) => (GapCause::OutsideMappings, f.module.clone(), None),
            _ if file_backed && (f.symbol.is_none() || cfi_named) => {
                (GapCause::NoSymbol, f.module.clone(), None)
            }
            (_, None) if f.module == "[vdso]" => (GapCause::NoSymbol, f.module.clone(), None),
            (_, None) => (
                GapCause::JitWithoutPerfMap,
                f.module.clone(),
                Some(runtimes.of_pid(pid)),
            ),
            (_, Some(_)) if !ok => (GapCause::NotDisassembled, f.module.clone(), None),
            _ if file_backed
                && runtime_of_file(f.module.rsplit('/').next().unwrap_or(&f.module))
                    == JitRuntime::CPython
                && rec.perf_maps.get(&pid).is_none_or(Vec::is_empty) =>
            {
                (
                    GapCause::InterpreterWithoutNames,
                    f.module.clone(),
                    Some(JitRuntime::CPython),
                )
            }
            _ => continue,
        };
        let g = gaps.entry(key).or_default();
        g.0 += f.samples;
        if ok {
            g.1 += f.samples;
        }
        *g.2.entry(pid).or_default() += f.samples;
    }
    let mut gaps: Vec<CoverageGap> = gaps
        .into_iter()
        .filter(|(_, g)| g.0 as f64 / total >= GAP_SHARE)
        .map(|((cause, module, runtime), (n, ok, pids))| {
            let pid = pids
                .iter()
                .max_by_key(|(p, n)| (**n, std::cmp::Reverse(**p)))
                .map_or(0, |(p, _)| *p);
            let fix = match cause {
                GapCause::JitWithoutPerfMap | GapCause::InterpreterWithoutNames => {
                    runtime.map(|r| r.fix(pid, &runtimes))
                }
                GapCause::NoSymbol if module.starts_with('/') => Some(debug_symbols(&module, pid)),
                _ => None,
            };
            CoverageGap {
                cause,
                module,
                runtime,
                pid,
                samples: n,
                share: n as f64 / total,
                analysed: ok,
                fix,
            }
        })
        .collect();
    gaps.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then(a.cause.cmp(&b.cause))
            .then(a.module.cmp(&b.module))
    });
    Coverage {
        samples,
        analysed,
        gaps,
    }
}

fn loc_pid(loc: &Location) -> u32 {
    match loc {
        Location::File { pid, .. } | Location::Anon { pid, .. } | Location::Unknown { pid, .. } => {
            *pid
        }
        Location::Kernel { .. } => 0,
    }
}

/// The files each process was seen running code of (samples and stacks), and its JVMs.
struct Runtimes {
    files: HashMap<u32, BTreeSet<Arc<str>>>,
    jvms: BTreeSet<u32>,
    commands: HashMap<u32, String>,
}

impl Runtimes {
    fn of(rec: &Recording) -> Runtimes {
        let mut files: HashMap<u32, BTreeSet<Arc<str>>> = HashMap::new();
        let locs = rec.samples.keys().chain(rec.stacks.keys().flatten());
        for loc in locs {
            if let Location::File { path, pid, .. } = loc
                && !files.get(pid).is_some_and(|s| s.contains(path))
            {
                files.entry(*pid).or_default().insert(path.clone());
            }
        }
        Runtimes {
            files,
            jvms: rec.jvms.keys().copied().collect(),
            commands: rec
                .followed
                .iter()
                .map(|p| (p.pid, p.command.clone()))
                .collect(),
        }
    }

    fn of_pid(&self, pid: u32) -> JitRuntime {
        if self.jvms.contains(&pid) {
            return JitRuntime::HotSpot;
        }
        let names = self
            .files
            .get(&pid)
            .into_iter()
            .flatten()
            .map(|p| p.rsplit('/').next().unwrap_or(p).to_string())
            .chain(self.commands.get(&pid).cloned());
        let mut found = JitRuntime::Other;
        for n in names {
            let r = runtime_of_file(&n);
            if r != JitRuntime::Other {
                found = r;
                if r != JitRuntime::CPython {
                    // A Node or JVM process may map a libpython (an addon); its own JIT wins.
                    break;
                }
            }
        }
        found
    }

    /// The CPython version a process maps (`3.12`), from a file name.
    fn python_version(&self, pid: u32) -> Option<String> {
        self.files.get(&pid)?.iter().find_map(|p| {
            let name = p.rsplit('/').next()?;
            python_version_of(name)
        })
    }
}

/// The runtime a mapped file's name (or a command name) belongs to.
pub fn runtime_of_file(name: &str) -> JitRuntime {
    if name == "node" || name == "nodejs" || name.starts_with("libnode.so") {
        JitRuntime::Node
    } else if name == "libjvm.so" || name == "java" {
        JitRuntime::HotSpot
    } else if python_version_of(name).is_some() {
        JitRuntime::CPython
    } else if name == "libcoreclr.so" || name == "dotnet" {
        JitRuntime::Dotnet
    } else {
        JitRuntime::Other
    }
}

/// `3.12` from `python3.12`, `libpython3.12.so.1.0`.
fn python_version_of(name: &str) -> Option<String> {
    let rest = name
        .strip_prefix("libpython")
        .or_else(|| name.strip_prefix("python"))?;
    let v: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let v = v.trim_end_matches('.');
    let (major, minor) = v.split_once('.')?;
    (major == "3" && !minor.is_empty() && minor.chars().all(|c| c.is_ascii_digit()))
        .then(|| v.to_string())
}

impl JitRuntime {
    fn fix(self, pid: u32, runtimes: &Runtimes) -> Fix {
        match self {
            JitRuntime::Node => Fix::NodePerfMap,
            JitRuntime::HotSpot => Fix::HotSpotPerfMap { pid },
            JitRuntime::CPython => Fix::PythonPerf {
                version: runtimes.python_version(pid),
            },
            JitRuntime::Dotnet => Fix::DotnetPerfMap,
            JitRuntime::Other => Fix::PerfMap,
        }
    }

    /// The runtime's name for a reader.
    pub fn name(self) -> &'static str {
        match self {
            JitRuntime::Node => "Node.js (V8)",
            JitRuntime::HotSpot => "the HotSpot JVM",
            JitRuntime::CPython => "CPython",
            JitRuntime::Dotnet => ".NET",
            JitRuntime::Other => "a JIT",
        }
    }
}

/// The debug symbols of file `path` mapped by `pid`: its build-id, and on a system with dpkg
/// the package that installed it.
fn debug_symbols(path: &str, pid: u32) -> Fix {
    let build_id = [format!("/proc/{pid}/root{path}"), path.to_string()]
        .iter()
        .find_map(|p| build_id_of(p));
    let package = dpkg_package(path);
    let debug_package = package.as_deref().map(debug_package_of);
    Fix::DebugSymbols {
        build_id,
        package,
        debug_package,
    }
}

/// The GNU build-id of an ELF file, hex.
fn build_id_of(path: &str) -> Option<String> {
    use object::Object;
    let data = std::fs::read(path).ok()?;
    let file = object::File::parse(&*data).ok()?;
    let id = file.build_id().ok()??;
    (!id.is_empty()).then(|| id.iter().map(|b| format!("{b:02x}")).collect())
}

/// The package `dpkg -S` says installed `path` (tried as given, resolved, and with `/usr`
/// added or removed: a merged-/usr system registers either).
fn dpkg_package(path: &str) -> Option<String> {
    let mut tries = vec![path.to_string()];
    if let Ok(real) = std::fs::canonicalize(path) {
        tries.push(real.to_string_lossy().into_owned());
    }
    for p in tries.clone() {
        match p.strip_prefix("/usr") {
            Some(rest) => tries.push(rest.to_string()),
            None => tries.push(format!("/usr{p}")),
        }
    }
    tries.dedup();
    tries.iter().find_map(|p| {
        let out = std::process::Command::new("dpkg")
            .args(["-S", p])
            .stdin(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        if !out.status.success() {
            return None;
        }
        parse_dpkg_search(&String::from_utf8_lossy(&out.stdout))
    })
}

/// The package of `dpkg -S`'s first line: `libc6:amd64: /lib/x86_64-linux-gnu/libc.so.6` ->
/// `libc6`. A diversion line (`diversion by ...`) names no package.
fn parse_dpkg_search(out: &str) -> Option<String> {
    let line = out.lines().find(|l| !l.starts_with("diversion "))?;
    let (pkgs, _) = line.split_once(": ")?;
    let first = pkgs.split(',').next()?.trim();
    let name = first.split(':').next()?;
    (!name.is_empty()).then(|| name.to_string())
}

/// Debian's debug package of `package`: `PACKAGE-dbgsym` from the debug archive; glibc's is
/// `libc6-dbg`.
fn debug_package_of(package: &str) -> String {
    if package == "libc6" {
        "libc6-dbg".into()
    } else {
        format!("{package}-dbgsym")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runtimes_are_told_from_the_files_they_map() {
        assert_eq!(runtime_of_file("node"), JitRuntime::Node);
        assert_eq!(runtime_of_file("libnode.so.115"), JitRuntime::Node);
        assert_eq!(runtime_of_file("libjvm.so"), JitRuntime::HotSpot);
        assert_eq!(runtime_of_file("python3.12"), JitRuntime::CPython);
        assert_eq!(runtime_of_file("libpython3.12.so.1.0"), JitRuntime::CPython);
        assert_eq!(runtime_of_file("libcoreclr.so"), JitRuntime::Dotnet);
        assert_eq!(runtime_of_file("libc.so.6"), JitRuntime::Other);
        assert_eq!(
            python_version_of("libpython3.12.so.1.0").as_deref(),
            Some("3.12")
        );
        assert_eq!(python_version_of("python3.11").as_deref(), Some("3.11"));
        assert_eq!(python_version_of("python3"), None);
    }

    #[test]
    fn dpkg_search_output_gives_the_package_and_its_debug_package() {
        let p = parse_dpkg_search("libc6:amd64: /lib/x86_64-linux-gnu/libc.so.6\n").unwrap();
        assert_eq!(p, "libc6");
        assert_eq!(debug_package_of(&p), "libc6-dbg");
        let p = parse_dpkg_search("mariadb-server-core: /usr/sbin/mariadbd\n").unwrap();
        assert_eq!(debug_package_of(&p), "mariadb-server-core-dbgsym");
        assert_eq!(parse_dpkg_search(""), None);
    }

    #[test]
    fn runtimes_and_fixes_have_the_json_names_the_docs_give() {
        let v = |x: serde_json::Value| x.to_string();
        assert_eq!(v(serde_json::json!(JitRuntime::HotSpot)), "\"hotspot\"");
        assert_eq!(v(serde_json::json!(JitRuntime::CPython)), "\"cpython\"");
        assert_eq!(
            v(serde_json::json!(Fix::HotSpotPerfMap { pid: 7 })),
            r#"{"kind":"hotspot-perf-map","pid":7}"#
        );
        assert_eq!(
            v(serde_json::json!(GapCause::JitWithoutPerfMap)),
            "\"jit-without-perf-map\""
        );
        let fix = Fix::DebugSymbols {
            build_id: Some("ab12".into()),
            package: Some("mariadb-server-core".into()),
            debug_package: Some("mariadb-server-core-dbgsym".into()),
        };
        let said = fix.instruction();
        assert!(
            said.contains("apt-get install mariadb-server-core-dbgsym"),
            "{said}"
        );
        assert!(said.contains("debuginfod-find debuginfo ab12"), "{said}");
        let old = Fix::PythonPerf {
            version: Some("3.11".into()),
        };
        assert!(
            old.instruction().starts_with("CPython 3.11 cannot"),
            "{}",
            old.instruction()
        );
    }

    #[test]
    fn no_findings_needs_most_samples_analysed() {
        let c = |analysed| Coverage {
            samples: 1000,
            analysed,
            gaps: Vec::new(),
        };
        assert!(c(800).enough());
        assert!(!c(16).enough());
        assert!(Coverage::default().enough());
    }
}
