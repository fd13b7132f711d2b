//! The 4 KiB page penalty verdict's words: what a page walk adds to a random DRAM load here,
//! by memory touched, and why a VM pays more.

use super::with_interval;
use crate::format::human_bytes;
use crate::reference::{NATIVE_PAGE_WALK_REFERENCES, NESTED_PAGE_WALK_REFERENCES};
use crate::schema::{Level, Metric};

/// What the 4 KiB page penalty verdict rests on.
pub struct Facts<'a> {
    /// The level judged.
    pub level: Level,
    /// DRAM latency on 4 KiB over huge pages, the figure judged.
    pub penalty_ratio: f64,
    /// Its metric, for the interval.
    pub penalty_metric: &'a Metric,
    /// A random DRAM load on 4 KiB pages.
    pub small_page_ns: f64,
    /// The same on huge pages.
    pub huge_page_ns: f64,
    /// What the huge pages were, as the probe names the page kind (`thp`, `hugetlb_2m`), when
    /// it says.
    pub huge_kind: Option<String>,
    /// DRAM itself, at the flat part of the latency curve.
    pub dram_ns: Option<f64>,
    /// The size the penalty is read at.
    pub size_bytes: Option<u64>,
    /// The penalty at each DRAM size, smallest first.
    pub by_size: Vec<(u64, f64)>,
    /// Where 4 KiB pages start paying walks.
    pub tlb_reach_bytes: Option<u64>,
    /// The hypervisor's vendor, on a guest.
    pub hypervisor: Option<String>,
    /// The notice and hazard thresholds, quoted in the reference.
    pub notice_ratio: f64,
    /// The hazard threshold.
    pub hazard_ratio: f64,
}

/// The figure: the ratio with its interval, and both latencies.
pub fn figure(f: &Facts<'_>) -> String {
    format!(
        "{}, {:.0} vs {:.0} ns",
        with_interval(format!("{:.2}x", f.penalty_ratio), Some(f.penalty_metric)),
        f.small_page_ns,
        f.huge_page_ns
    )
}

/// The one-line summary.
pub fn summary(f: &Facts<'_>) -> String {
    format!(
        "a random DRAM load takes {:.0} ns longer on 4 KiB pages than on huge",
        f.small_page_ns - f.huge_page_ns
    )
}

/// The thresholds and the page-walk reference.
pub fn reference(f: &Facts<'_>) -> String {
    format!(
        "notice at {}x, hazard at {}x (nested paging: up to \
         {NESTED_PAGE_WALK_REFERENCES} references per walk, Bhargava et al. 2008)",
        f.notice_ratio, f.hazard_ratio
    )
}

/// What page walks add here, and what to do.
pub fn explanation(f: &Facts<'_>) -> String {
    let (small, huge) = (f.small_page_ns, f.huge_page_ns);
    let huge_kind = f.huge_kind.as_deref().unwrap_or("huge pages");
    let mut text = format!(
        "Random loads over {} take {small:.0} ns on 4 KiB pages against {huge:.0} ns on \
         {huge_kind} ({:.2}x): page walks add {:.0} ns to each.",
        f.size_bytes
            .map(human_bytes)
            .unwrap_or_else(|| "a buffer beyond the caches".into()),
        f.penalty_ratio,
        small - huge
    );
    if let (Some(first), Some(last)) = (f.by_size.first(), f.by_size.last())
        && f.by_size.len() > 1
    {
        text.push_str(&format!(
            " {}: {}.",
            if last.1 > first.1 {
                "It grows with the memory touched"
            } else {
                "By memory touched"
            },
            f.by_size
                .iter()
                .map(|(s, r)| format!("{r:.2}x at {}", human_bytes(*s)))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    if let Some(dram) = f.dram_ns {
        text.push_str(&format!(
            " DRAM itself answers in {dram:.0} ns on {huge_kind}, where the latency curve \
             is flat; at {} huge pages pay some walks too.",
            f.size_bytes
                .map(human_bytes)
                .unwrap_or_else(|| "the largest size".into())
        ));
    }
    if let Some(reach) = f.tlb_reach_bytes {
        text.push_str(&format!(
            " Past {} of memory touched at random, 4 KiB pages start paying page walks \
             (their TLB reach).",
            human_bytes(reach)
        ));
    }
    if let Some(vendor) = &f.hypervisor {
        text.push_str(&format!(
            " This is a {vendor} guest: with nested paging each 4 KiB TLB miss walks the guest's \
             and the host's page tables, up to {NESTED_PAGE_WALK_REFERENCES} memory references \
             instead of {NATIVE_PAGE_WALK_REFERENCES}, which is why 4 KiB pages cost so much \
             more in a VM."
        ));
    }
    text.push_str(match f.level {
        Level::Ok => " Huge pages buy little for random access here.",
        _ => {
            " Hash tables, B-trees, graph walks and large GC heaps pay this on every miss; \
             huge pages (THP madvise, hugetlbfs) remove most of it."
        }
    });
    text
}

/// The software patterns the hazard hurts.
pub const HURTS: &[&str] = &[
    "random access over large memory on 4 KiB pages (hash tables, B-trees, graphs, \
     pointer-heavy heaps)",
    "garbage-collected heaps and in-memory databases larger than the TLB reach",
];

/// The hazard's title.
pub const TITLE: &str = "4 KiB page penalty";
