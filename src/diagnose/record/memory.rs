//! A process's huge-page use: how much of its anonymous memory transparent huge pages back
//! (`AnonHugePages` against `Anonymous` and `Rss` in `/proc/PID/smaps_rollup`), read while it
//! runs. Judged against the THP mode: in `madvise` mode only regions the program asks for get
//! huge pages, so a large heap that never asks stays on 4 KiB pages.

use crate::machine::smaps::parse_rollup;
use serde::{Deserialize, Serialize};

/// Memory of one process at its largest observed resident size.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessMemory {
    /// Process id.
    pub pid: u32,
    /// Process name.
    pub name: String,
    /// Resident set, kB.
    pub rss_kb: u64,
    /// Anonymous resident memory, kB.
    pub anonymous_kb: u64,
    /// Anonymous memory backed by transparent huge pages, kB.
    pub anon_huge_pages_kb: u64,
}

impl ProcessMemory {
    /// Builds a reading from `smaps_rollup` text.
    pub fn from_rollup(pid: u32, name: &str, text: &str) -> Option<ProcessMemory> {
        let r = parse_rollup(text);
        Some(ProcessMemory {
            pid,
            name: name.to_string(),
            rss_kb: *r.get("Rss")?,
            anonymous_kb: r.get("Anonymous").copied().unwrap_or(0),
            anon_huge_pages_kb: r.get("AnonHugePages").copied().unwrap_or(0),
        })
    }

    /// Share of anonymous memory on huge pages (0 when there is none).
    pub fn huge_share(&self) -> f64 {
        if self.anonymous_kb == 0 {
            0.0
        } else {
            self.anon_huge_pages_kb as f64 / self.anonymous_kb as f64
        }
    }
}

/// Reads process `pid` now; `None` when it has gone or hides its maps.
pub fn read_process(pid: u32) -> Option<ProcessMemory> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).ok()?;
    let name = std::fs::read_to_string(format!("/proc/{pid}/comm")).unwrap_or_default();
    ProcessMemory::from_rollup(pid, name.trim(), &text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rollup_fixture_gives_huge_page_share() {
        let m = ProcessMemory::from_rollup(
            1,
            "probe",
            include_str!("../../../tests/fixtures/proc/smaps_rollup.txt"),
        )
        .unwrap();
        assert_eq!(m.rss_kb, 13860);
        assert_eq!(m.anon_huge_pages_kb, 8192);
        assert!(m.anonymous_kb >= 8192);
        assert!(m.huge_share() > 0.5 && m.huge_share() <= 1.0);
    }

    #[test]
    fn this_process_can_be_read() {
        let m = read_process(std::process::id()).unwrap();
        assert!(m.rss_kb > 0);
    }
}
