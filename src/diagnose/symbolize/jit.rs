//! JIT code without the user's help: names and bytes of code a runtime compiles at run time.
//!
//! Names: JITs publish them in `/tmp/perf-PID.map`. HotSpot writes one at exit with
//! `-XX:+DumpPerfMapAtExit` (JDK 17+), which diagnose adds through `JAVA_TOOL_OPTIONS` to a
//! command it starts, together with `-XX:+PreserveFramePointer` so that stacks walk through
//! compiled Java frames; a running HotSpot (attached with `--pid`) is asked with
//! `jcmd PID Compiler.perfmap`, early and again before diagnose stops. Node
//! (`--perf-basic-prof`) and .NET (`DOTNET_PerfMapEnabled=1`) write maps while they run.
//!
//! Bytes: a map written at exit arrives when the code is gone, so while the process lives the
//! bytes around its hottest addresses in anonymous executable memory are copied ([`HotCode`]),
//! bounded per process, newest copy last (a JIT reuses addresses for new code).

use super::namespace::ProcessView;
use super::symbols::{self, MapEntry};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The HotSpot options diagnose adds to a command it starts. `IgnoreUnrecognizedVMOptions`
/// keeps a JDK older than 17 (no `DumpPerfMapAtExit`) starting; `PreserveFramePointer` costs
/// compiled Java code one register (a few percent at most) and gives stacks through it.
pub const HOTSPOT_OPTIONS: &str = "-XX:+IgnoreUnrecognizedVMOptions -XX:+UnlockDiagnosticVMOptions \
                                   -XX:+DumpPerfMapAtExit -XX:+PreserveFramePointer";

/// `JAVA_TOOL_OPTIONS` for a started command: the user's own, then diagnose's.
pub fn java_tool_options() -> (String, String) {
    let value = match std::env::var("JAVA_TOOL_OPTIONS") {
        Ok(v) if !v.trim().is_empty() => format!("{v} {HOTSPOT_OPTIONS}"),
        _ => HOTSPOT_OPTIONS.to_string(),
    };
    ("JAVA_TOOL_OPTIONS".into(), value)
}

/// Where diagnose reads the perf map of running process `pid`: `/tmp/perf-PID.map`, or in a
/// container the one in its own `/tmp` named by the PID it has inside.
pub fn perf_map_path(pid: u32) -> PathBuf {
    ProcessView::of(pid).perf_map()
}

/// The Java home of a process that maps HotSpot (`HOME/lib/server/libjvm.so`).
pub fn hotspot_home(maps: &[MapEntry]) -> Option<PathBuf> {
    maps.iter().find_map(|m| {
        let p = Path::new(&*m.path);
        (p.file_name()? == "libjvm.so")
            .then(|| p.parent()?.parent()?.parent().map(Path::to_path_buf))?
    })
}

/// A JVM's version, from its `release` file (`JAVA_VERSION="17.0.15"`).
pub fn java_version(home: &Path, pid: u32) -> Option<String> {
    // The process's own view of its files first (a container), then ours.
    let rel = home.strip_prefix("/").unwrap_or(home).join("release");
    let text = std::fs::read_to_string(Path::new(&format!("/proc/{pid}/root")).join(&rel))
        .or_else(|_| std::fs::read_to_string(home.join("release")))
        .ok()?;
    parse_release_version(&text)
}

fn parse_release_version(text: &str) -> Option<String> {
    text.lines()
        .find_map(|l| l.strip_prefix("JAVA_VERSION="))
        .map(|v| v.trim().trim_matches('"').to_string())
}

/// The feature release of a Java version string: `17.0.15` -> 17, `25` -> 25, `1.8.0_402`
/// -> 8.
pub fn feature_release(version: &str) -> Option<u32> {
    let mut parts = version.split(['.', '_', '-', '+']);
    let first: u32 = parts.next()?.parse().ok()?;
    if first == 1 {
        parts.next()?.parse().ok()
    } else {
        Some(first)
    }
}

/// A `jcmd PID Compiler.perfmap` in flight, not waited for by the recording loop.
pub struct PerfMapRequest {
    child: Child,
    started: Instant,
}

/// Longest a `jcmd` may take (it starts a JVM of its own) before it is abandoned.
const JCMD_TIMEOUT: Duration = Duration::from_secs(20);

impl PerfMapRequest {
    /// Starts `jcmd PID Compiler.perfmap`, with the JVM's own `jcmd` when it has one. A JVM in
    /// another mount namespace (a container) is asked by its own `jcmd` run in its mount and
    /// PID namespaces (`nsenter -t PID -m -p`) with the PID it has there; without a `jcmd`
    /// inside, by diagnose's (a JDK 10 or later attaches through `/proc/PID/root` itself).
    pub fn start(pid: u32, home: &Path) -> std::io::Result<PerfMapRequest> {
        let view = ProcessView::of(pid);
        let own = home.join("bin/jcmd");
        let mut command = if view.own_mounts && view.path(&own).exists() {
            let mut c = Command::new("nsenter");
            c.args(["-t", &pid.to_string(), "-m", "-p", "--"])
                .arg(&own)
                .arg(view.inner_pid.to_string());
            c
        } else {
            let jcmd = if own.exists() && !view.own_mounts {
                own
            } else {
                PathBuf::from("jcmd")
            };
            let mut c = Command::new(jcmd);
            c.arg(pid.to_string());
            c
        };
        let child = command
            .arg("Compiler.perfmap")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        Ok(PerfMapRequest {
            child,
            started: Instant::now(),
        })
    }

    /// `Some(true)` when jcmd succeeded, `Some(false)` when it failed or took too long,
    /// `None` while it runs.
    pub fn poll(&mut self) -> Option<bool> {
        match self.child.try_wait() {
            Ok(Some(status)) => Some(status.success()),
            Ok(None) if self.started.elapsed() > JCMD_TIMEOUT => {
                crate::process::kill_child(&mut self.child);
                Some(false)
            }
            Ok(None) => None,
            Err(_) => Some(false),
        }
    }

    /// Waits for jcmd (up to its timeout).
    pub fn wait(mut self) -> bool {
        loop {
            if let Some(ok) = self.poll() {
                return ok;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Bytes copied on each side of a hot page: a window that holds the start of most compiled
/// methods (HotSpot's hot methods are a few hundred bytes to a few KiB).
const WINDOW_BEFORE: u64 = 8 * 1024;
const WINDOW_AFTER: u64 = 2 * 1024;
/// Hot pages copied per process each time, and the most distinct pages kept per process
/// (each window ~14 KiB: 4 MiB at most).
const HOT_PAGES: usize = 8;
const MAX_PAGES_PER_PROCESS: usize = 300;

/// One copy of a window: (copy number, window start, bytes).
type PageCopy = (u64, u64, Vec<u8>);

/// Copies of the hottest anonymous executable code of each process, taken while it runs.
/// A page hot again is copied again, replacing its older copy: a JIT writes new code next
/// to code it compiled a moment ago (a C2 method beside the C1 one it replaces), so an
/// early copy of a page can lack the code sampled later.
#[derive(Default)]
pub struct HotCode {
    /// Per process and hot page: its newest copy.
    pages: HashMap<u32, BTreeMap<u64, PageCopy>>,
    copies: u64,
}

impl HotCode {
    /// Copies the windows around the hottest pages of `hot` (page -> samples, mapping start,
    /// mapping end) in anonymous memory of live process `pid`.
    pub fn refresh(&mut self, pid: u32, hot: &BTreeMap<u64, (u64, u64, u64)>) {
        let mut pages: Vec<(&u64, &(u64, u64, u64))> = hot.iter().collect();
        pages.sort_by_key(|(_, (n, _, _))| std::cmp::Reverse(*n));
        for (&page, &(_, map_start, map_end)) in pages.into_iter().take(HOT_PAGES) {
            let kept = self.pages.entry(pid).or_default();
            if kept.len() >= MAX_PAGES_PER_PROCESS && !kept.contains_key(&page) {
                continue;
            }
            let start = page.saturating_sub(WINDOW_BEFORE).max(map_start);
            let end = (page + 4096 + WINDOW_AFTER).min(map_end);
            if end <= start {
                continue;
            }
            if let Some(b) = symbols::read_process_memory(pid, start, end - start) {
                self.copies += 1;
                kept.insert(page, (self.copies, start, b));
            }
        }
    }

    /// The copies of each process as (start, bytes), oldest first, so that where windows
    /// overlap the newest copy is found first from the end.
    pub fn into_blocks(self) -> HashMap<u32, Vec<(u64, Vec<u8>)>> {
        self.pages
            .into_iter()
            .map(|(pid, pages)| {
                let mut v: Vec<PageCopy> = pages.into_values().collect();
                v.sort_by_key(|(n, _, _)| *n);
                (pid, v.into_iter().map(|(_, s, b)| (s, b)).collect())
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn hotspot_is_found_by_its_libjvm_and_its_version_read_from_release() {
        let maps = vec![
            MapEntry {
                start: 0x1000,
                end: 0x2000,
                pgoff: 0,
                path: Arc::from("/usr/lib/x86_64-linux-gnu/libc.so.6"),
            },
            MapEntry {
                start: 0x3000,
                end: 0x4000,
                pgoff: 0,
                path: Arc::from("/usr/lib/jvm/java-17-openjdk-amd64/lib/server/libjvm.so"),
            },
        ];
        assert_eq!(
            hotspot_home(&maps),
            Some(PathBuf::from("/usr/lib/jvm/java-17-openjdk-amd64"))
        );
        assert_eq!(hotspot_home(&maps[..1]), None);
        let release = "IMPLEMENTOR=\"Eclipse Adoptium\"\nJAVA_VERSION=\"25.0.1\"\n";
        assert_eq!(parse_release_version(release).as_deref(), Some("25.0.1"));
        assert_eq!(feature_release("17.0.15"), Some(17));
        assert_eq!(feature_release("25"), Some(25));
        assert_eq!(feature_release("1.8.0_402"), Some(8));
        assert_eq!(feature_release("21-ea"), Some(21));
    }

    #[test]
    fn hot_code_of_this_process_is_copied_bounded_to_its_mapping_newest_copy_kept() {
        let pid = std::process::id();
        let here = feature_release as *const () as u64;
        let page = here & !4095;
        let mut hc = HotCode::default();
        let hot = BTreeMap::from([(page, (10, page, page + 4096))]);
        hc.refresh(pid, &hot);
        hc.refresh(pid, &hot);
        let all = hc.into_blocks();
        let blocks = &all[&pid];
        assert_eq!(
            blocks.len(),
            1,
            "a page hot twice is kept once, as its newest copy"
        );
        assert_eq!(blocks[0].0, page, "clipped to the mapping's start");
        assert_eq!(blocks[0].1.len(), 4096, "clipped to the mapping's end");
        let off = (here - page) as usize;
        // SAFETY: reading 4 bytes of this process's own code.
        let live = unsafe { std::slice::from_raw_parts(here as *const u8, 4) };
        assert_eq!(&blocks[0].1[off..off + 4], live);
    }
}
