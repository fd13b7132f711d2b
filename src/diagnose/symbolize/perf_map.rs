//! Following a JIT's perf map (`/tmp/perf-PID.map`) while the process runs: the map only
//! grows (HotSpot's agents, .NET and V8 append a line per compiled method), and a large JVM's
//! map reaches tens of megabytes, so it is read from where the last read stopped, never again
//! from the start; a map that shrank or was replaced is read afresh. The code of each new
//! symbol is copied from the process at once, so that hot JIT code can be disassembled after
//! the process has exited (the map and the memory are gone by then).

use super::namespace::ProcessView;
use super::symbols::{self, Symbol};
use std::collections::HashSet;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;

/// Largest JIT symbol whose code is copied, and the most copied per process: enough for the
/// hot methods of a JVM or .NET process without copying its whole code cache.
const JIT_SYMBOL_MAX_BYTES: u64 = 64 * 1024;
const JIT_CODE_MAX_BYTES: usize = 8 << 20;

/// How often a running process's namespaces are looked at again for its map's path: the look
/// reads four namespace links and its status, and the map is refreshed every 100 ms for every
/// followed process (38 PostgreSQL backends: a fifth of diagnose's own CPU time).
const VIEW_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// One process's perf map, read so far.
#[derive(Debug, Default)]
pub struct PerfMapFollower {
    /// (device, inode) of the file read, to notice a replaced map.
    file: Option<(u64, u64)>,
    /// Bytes consumed, complete lines only.
    offset: u64,
    /// A line the JIT has not finished writing yet.
    partial: Vec<u8>,
    /// Symbols in file order: a later line for the same address is newer code.
    symbols: Vec<Symbol>,
    /// Code copied from the process: (address, bytes).
    code: Vec<(u64, Vec<u8>)>,
    copied: HashSet<(u64, u64)>,
    code_bytes: usize,
    /// The process's namespaces and root, taken at the first refresh (while it runs): its
    /// map is named by its own PID in its own `/tmp`.
    view: Option<ProcessView>,
    /// When the view was looked at last.
    viewed_at: Option<std::time::Instant>,
}

impl PerfMapFollower {
    /// Reads what was appended to `/tmp/perf-PID.map` (in the process's own mount namespace,
    /// by its own PID) since the last call and copies the new symbols' code from process `pid`.
    pub fn refresh(&mut self, pid: u32) {
        let path = self.path(pid);
        let Ok(mut f) = std::fs::File::open(&path) else {
            return;
        };
        let Ok(meta) = f.metadata() else {
            return;
        };
        let id = (meta.dev(), meta.ino());
        if self.file != Some(id) || meta.len() < self.offset {
            // A new or rewritten map: its lines replace what was read (copied code stays).
            self.file = Some(id);
            self.offset = 0;
            self.partial.clear();
            self.symbols.clear();
        }
        if meta.len() == self.offset || f.seek(SeekFrom::Start(self.offset)).is_err() {
            return;
        }
        let mut bytes = Vec::new();
        if f.read_to_end(&mut bytes).is_err() {
            return;
        }
        self.offset += bytes.len() as u64;
        let new = self.feed(&bytes);
        self.copy_code(pid, new);
    }

    /// Takes appended bytes; returns the index of the first new symbol.
    fn feed(&mut self, bytes: &[u8]) -> usize {
        let first_new = self.symbols.len();
        self.partial.extend_from_slice(bytes);
        let Some(end) = self.partial.iter().rposition(|&b| b == b'\n') else {
            return first_new;
        };
        let complete: Vec<u8> = self.partial.drain(..=end).collect();
        let mut parsed = symbols::parse_perf_map(&String::from_utf8_lossy(&complete));
        // parse_perf_map sorts; file order matters only among equal addresses, where the
        // stable sort kept it.
        self.symbols.append(&mut parsed);
        first_new
    }

    fn copy_code(&mut self, pid: u32, first_new: usize) {
        for s in &self.symbols[first_new..] {
            if self.code_bytes >= JIT_CODE_MAX_BYTES {
                break;
            }
            if s.size == 0 || s.size > JIT_SYMBOL_MAX_BYTES || !self.copied.insert((s.addr, s.size))
            {
                continue;
            }
            if let Some(bytes) = symbols::read_process_memory(pid, s.addr, s.size) {
                self.code_bytes += bytes.len();
                self.code.push((s.addr, bytes));
            }
        }
    }

    /// The symbols, sorted by address (newest last among equal addresses), and the code
    /// copied (newest last).
    pub fn finish(self) -> (Vec<Symbol>, Vec<(u64, Vec<u8>)>) {
        let mut symbols = self.symbols;
        symbols.sort_by_key(|s| s.addr);
        (symbols, self.code)
    }

    /// Reads the map from its start at the next refresh: a JVM asked again for its map
    /// (`jcmd Compiler.perfmap`) rewrites the whole file, possibly in place.
    pub fn reread(&mut self) {
        self.file = None;
    }

    /// Where process `pid`'s map is read. Its namespaces are looked at again each
    /// [`VIEW_EVERY`] while it runs (a container's `/tmp` may be mounted after it started) and
    /// the last view taken while it ran is kept after it exits.
    pub fn path(&mut self, pid: u32) -> std::path::PathBuf {
        let due = self.viewed_at.is_none_or(|at| at.elapsed() >= VIEW_EVERY);
        if due {
            let now = ProcessView::of(pid);
            self.viewed_at = Some(std::time::Instant::now());
            if self.view.is_none() || now.holds_tmp() {
                self.view = Some(now);
            }
        }
        self.view.as_ref().expect("set above").perf_map()
    }

    /// The process's namespaces, when they were looked at.
    pub fn view(&self) -> Option<&ProcessView> {
        self.view.as_ref()
    }

    /// Number of symbols read.
    pub fn symbol_count(&self) -> usize {
        self.symbols.len()
    }

    /// True when nothing was read.
    pub fn is_empty(&self) -> bool {
        self.symbols.is_empty() && self.code.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_growing_map_is_read_line_by_line_including_a_line_split_across_reads() {
        // Guards reading only what was appended: a JIT writes a line in pieces.
        let mut f = PerfMapFollower::default();
        assert_eq!(f.feed(b"1000 10 first\n2000 2"), 0);
        assert_eq!(f.symbols.len(), 1);
        assert_eq!(f.feed(b"0 second\n"), 1);
        assert_eq!(f.symbols.len(), 2);
        assert_eq!(f.symbols[1].name, "second");
        assert_eq!(f.symbols[1].size, 0x20);
        f.feed(b"1000 8 first-recompiled\n");
        let (syms, _) = f.finish();
        let hit = symbols::symbol_containing(&syms, 0x1004).unwrap();
        assert_eq!(hit.name, "first-recompiled", "the newer line wins");
    }

    #[test]
    fn the_maps_of_this_process_are_read_again_only_when_they_grow() {
        let pid = std::process::id();
        let path = format!("/tmp/perf-{pid}.map");
        let here = symbols::read_process_memory as *const () as u64;
        std::fs::write(&path, format!("{here:x} 10 read_process_memory\n")).unwrap();
        let mut f = PerfMapFollower::default();
        f.refresh(pid);
        f.refresh(pid);
        assert_eq!(f.symbols.len(), 1);
        assert_eq!(f.code.len(), 1, "the code was copied once");
        let mut file = std::fs::OpenOptions::new()
            .append(true)
            .open(&path)
            .unwrap();
        std::io::Write::write_all(&mut file, format!("{:x} 8 more\n", here + 0x40).as_bytes())
            .unwrap();
        f.refresh(pid);
        std::fs::remove_file(&path).unwrap();
        let (syms, code) = f.finish();
        assert_eq!(syms.len(), 2);
        assert_eq!(code.len(), 2);
        assert_eq!(code[0].1.len(), 16);
    }
}
