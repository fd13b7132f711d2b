//! The page-size finding: a large anonymous memory on 4 KiB pages with hot memory loads.

use super::pct;
use crate::format::group_thousands;
use crate::machine::ThpEnabled;
use crate::reference::{STLB_ENTRIES_SKYLAKE, STLB_ENTRIES_ZEN4};

/// The process whose memory is on small pages, in MiB.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessPages<'a> {
    /// Process id.
    pub pid: u32,
    /// Its name.
    pub name: &'a str,
    /// Anonymous memory, MiB.
    pub anonymous_mib: u64,
    /// Of it on huge pages, MiB.
    pub huge_mib: u64,
    /// Resident set, MiB.
    pub rss_mib: u64,
}

/// `process 5 (rand): 512 MiB anonymous memory, 0 MiB of it on huge pages ...`.
pub fn process(p: &ProcessPages) -> String {
    format!(
        "process {} ({}): {} MiB anonymous memory, {} MiB of it on huge pages (AnonHugePages), \
         RSS {} MiB",
        p.pid, p.name, p.anonymous_mib, p.huge_mib, p.rss_mib
    )
}

/// `transparent huge pages: madvise`.
pub fn thp(enabled: Option<ThpEnabled>) -> String {
    format!(
        "transparent huge pages: {}",
        enabled.map_or("unknown", ThpEnabled::as_str)
    )
}

/// `70.0% of samples on memory loads`.
pub fn load_share(share: f64) -> String {
    format!("{} of samples on memory loads", pct(share))
}

/// Data-TLB walks per 1000 instructions, or why they could not be counted.
pub fn tlb_walks(per_thousand_instructions: Option<f64>) -> String {
    match per_thousand_instructions {
        Some(w) => format!("{w:.2} data-TLB walks per 1000 instructions"),
        None => "no PMU: TLB misses cannot be counted here; the finding rests on the page size \
                 and the hot loads"
            .into(),
    }
}

/// `512 MiB on 4 KiB pages with hot memory loads`.
pub fn title(anonymous_mib: u64) -> String {
    format!("{anonymous_mib} MiB on 4 KiB pages with hot memory loads")
}

/// What small pages cost: the memory in pages against what a second-level TLB reaches.
pub fn explanation(anonymous_mib: u64, pages_4k: u64) -> String {
    // Reach in MiB with 4 KiB pages and in GiB with 2 MiB pages.
    let reach_4k_mib = |entries: u64| entries * 4 / 1024;
    let reach_2m_gib = |entries: u64| entries * 2 / 1024;
    format!(
        "{anonymous_mib} MiB of anonymous memory is {} 4 KiB pages. A second-level TLB of \
         {STLB_ENTRIES_SKYLAKE} (Skylake) to {STLB_ENTRIES_ZEN4} (Zen 4) entries reaches {}-{} \
         MiB with 4 KiB pages, {}-{} GiB with 2 MiB pages: loads that jump around this memory \
         mostly miss the TLB and walk the page tables, a chain of dependent memory reads per \
         load.",
        group_thousands(pages_4k),
        reach_4k_mib(STLB_ENTRIES_SKYLAKE),
        reach_4k_mib(STLB_ENTRIES_ZEN4),
        reach_2m_gib(STLB_ENTRIES_SKYLAKE),
        reach_2m_gib(STLB_ENTRIES_ZEN4),
    )
}

/// What to do, by this machine's THP setting.
pub fn advice(enabled: Option<ThpEnabled>) -> &'static str {
    match enabled {
        Some(ThpEnabled::Madvise) => {
            "THP is in madvise mode here: madvise(MADV_HUGEPAGE) the large buffers (2 \
             MiB-aligned), or set transparent_hugepage=always; JVMs: \
             -XX:+UseTransparentHugePages."
        }
        Some(ThpEnabled::Never) => {
            "THP is off here: enable it (madvise or always) and madvise the large buffers, or \
             use hugetlbfs (MAP_HUGETLB)."
        }
        _ => {
            "THP is on but the memory is not on huge pages: check fragmentation (khugepaged, \
             defrag setting) or allocate from hugetlbfs."
        }
    }
}
