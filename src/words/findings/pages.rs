//! The page-size finding: a large anonymous memory on 4 KiB pages with hot memory loads.

use crate::format::{group_thousands, human_bytes, human_kib, pct};
use crate::machine::ThpEnabled;
use crate::reference::{STLB_ENTRIES_SKYLAKE, STLB_ENTRIES_ZEN4};

/// The process whose memory is on small pages, in KiB as /proc gives it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProcessPages<'a> {
    /// Process id.
    pub pid: u32,
    /// Its name.
    pub name: &'a str,
    /// Anonymous memory, KiB.
    pub anonymous_kib: u64,
    /// Of it on huge pages, KiB.
    pub huge_kib: u64,
    /// Resident set, KiB.
    pub rss_kib: u64,
}

/// `process 5 (rand): 512 MiB anonymous memory, 0 MiB of it on huge pages ...`.
pub fn process(p: &ProcessPages) -> String {
    format!(
        "process {} ({}): {} anonymous memory, {} of it on huge pages (AnonHugePages), RSS {}",
        p.pid,
        p.name,
        human_kib(p.anonymous_kib),
        human_kib(p.huge_kib),
        human_kib(p.rss_kib)
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
    format!("{} of samples on memory loads", pct(share, 1))
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
pub fn title(anonymous_kib: u64) -> String {
    format!(
        "{} on 4 KiB pages with hot memory loads",
        human_kib(anonymous_kib)
    )
}

/// What small pages cost: the memory in pages against what a second-level TLB reaches.
pub fn explanation(anonymous_kib: u64, pages_4k: u64) -> String {
    let reach = |entries: u64, page_bytes: u64| human_bytes(entries * page_bytes);
    format!(
        "{} of anonymous memory is {} 4 KiB pages. A second-level TLB of \
         {STLB_ENTRIES_SKYLAKE} (Skylake) to {STLB_ENTRIES_ZEN4} (Zen 4) entries reaches {} to \
         {} with 4 KiB pages, {} to {} with 2 MiB pages: loads that jump around this memory \
         mostly miss the TLB and walk the page tables, a chain of dependent memory reads per \
         load.",
        human_kib(anonymous_kib),
        group_thousands(pages_4k),
        reach(STLB_ENTRIES_SKYLAKE, 4 << 10),
        reach(STLB_ENTRIES_ZEN4, 4 << 10),
        reach(STLB_ENTRIES_SKYLAKE, 2 << 20),
        reach(STLB_ENTRIES_ZEN4, 2 << 20),
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
