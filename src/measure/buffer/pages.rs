//! The page-size vocabulary and its judge: the kinds a buffer can ask for ([`PageKind`]),
//! what one got ([`PageBacking`], read from its smaps entry by [`judge_backing`]), and what
//! became of each kind a probe asked for ([`PageKindOutcome`], the records of
//! `effects.page_kinds`).

use crate::format::{human_bytes, pct};
use crate::machine::smaps::Mapping;
use serde::{Deserialize, Serialize};
use std::fmt;

/// 2 MiB, the x86-64 huge page (PMD) size.
pub const HUGE_2M: u64 = 2 << 20;

/// 1 GiB, the x86-64 gigantic page (PUD) size.
pub const HUGE_1G: u64 = 1 << 30;

/// Share of a THP buffer that must be backed by huge pages for the request to count as taken.
/// A fully touched, 2 MiB-aligned madvised region gets 100% when memory is not fragmented;
/// below 90% the figures would mix page sizes too much to carry a huge-page label.
pub const THP_TOOK_FRACTION: f64 = 0.9;

/// The page size a buffer asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PageKind {
    /// 4 KiB pages, THP explicitly refused.
    #[serde(rename = "4k")]
    Base4k,
    /// Transparent huge pages via `madvise(MADV_HUGEPAGE)`.
    Thp,
    /// hugetlbfs 2 MiB pages (`MAP_HUGETLB | MAP_HUGE_2MB`).
    #[serde(rename = "hugetlb_2m")]
    Hugetlb2m,
    /// hugetlbfs 1 GiB pages (`MAP_HUGETLB | MAP_HUGE_1GB`).
    #[serde(rename = "hugetlb_1g")]
    Hugetlb1g,
}

impl PageKind {
    /// Every kind, smallest page first.
    pub const ALL: [PageKind; 4] = [
        PageKind::Base4k,
        PageKind::Thp,
        PageKind::Hugetlb2m,
        PageKind::Hugetlb1g,
    ];

    /// Name on the command line and in the fingerprint (`4k`, `thp`, `hugetlb_2m`, ...).
    pub fn name(self) -> &'static str {
        match self {
            PageKind::Base4k => "4k",
            PageKind::Thp => "thp",
            PageKind::Hugetlb2m => "hugetlb_2m",
            PageKind::Hugetlb1g => "hugetlb_1g",
        }
    }

    /// Parses a name as [`PageKind::name`] prints it (a `-` may stand for the `_`).
    pub fn parse(s: &str) -> Option<PageKind> {
        let s = s.trim().to_ascii_lowercase().replace('-', "_");
        PageKind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// The page size asked for, in bytes.
    pub fn page_bytes(self) -> u64 {
        match self {
            PageKind::Base4k => 4096,
            PageKind::Thp | PageKind::Hugetlb2m => HUGE_2M,
            PageKind::Hugetlb1g => HUGE_1G,
        }
    }

    /// True for every kind but 4 KiB.
    pub fn is_huge(self) -> bool {
        self != PageKind::Base4k
    }
}

impl fmt::Display for PageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a buffer actually got, read back from `/proc/self/smaps` after touching it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PageBacking {
    /// The kind asked for.
    pub requested: PageKind,
    /// True when the pages are the size asked for.
    pub took: bool,
    /// The page size the buffer is (mostly) backed by, in bytes.
    pub page_bytes: u64,
    /// Size of the mapping holding the buffer, in bytes.
    pub mapping_bytes: u64,
    /// Resident bytes of the mapping (`Rss`, or `Private_Hugetlb` + `Shared_Hugetlb`).
    pub resident_bytes: u64,
    /// Bytes backed by transparent huge pages (`AnonHugePages`).
    pub anon_huge_bytes: u64,
    /// `KernelPageSize` of the mapping, in bytes (2 MiB or 1 GiB for hugetlbfs).
    pub kernel_page_bytes: u64,
    /// Share of the resident bytes on pages of the requested size.
    pub huge_fraction: f64,
    /// One sentence on what happened, for a reader.
    pub note: String,
}

/// What became of one page kind a probe asked for: the record in `effects.page_kinds`.
/// In the JSON, a buffer that was made is its [`PageBacking`] with `"allocated": true`; one that
/// could not be made (too little memory, no hugetlbfs pages) is `{"requested", "allocated":
/// false, "note"}` and carries no `took`: a failed allocation says nothing about whether the
/// page size would have taken. Files from before `allocated` existed read as made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PageKindOutcome {
    /// The buffer was made; what it got.
    Made {
        /// What the buffer got.
        #[serde(flatten)]
        backing: PageBacking,
        /// Always true here.
        #[serde(default = "yes")]
        allocated: bool,
    },
    /// The buffer could not be made.
    NotMade {
        /// The kind asked for.
        requested: PageKind,
        /// Always false here.
        allocated: bool,
        /// Why not.
        note: String,
    },
    /// A record from a fingerprint of an earlier version, which kept only whether the
    /// request took (a kind that could not be made also read `took: false` then).
    Brief {
        /// The kind asked for.
        requested: PageKind,
        /// Whether the pages are the size asked for.
        took: bool,
        /// What happened.
        #[serde(default)]
        note: String,
    },
}

fn yes() -> bool {
    true
}

impl PageKindOutcome {
    /// The kind asked for.
    pub fn requested(&self) -> PageKind {
        match self {
            PageKindOutcome::Made { backing, .. } => backing.requested,
            PageKindOutcome::NotMade { requested, .. }
            | PageKindOutcome::Brief { requested, .. } => *requested,
        }
    }

    /// What the buffer got, when it was made and the record kept it.
    pub fn backing(&self) -> Option<&PageBacking> {
        match self {
            PageKindOutcome::Made { backing, .. } => Some(backing),
            PageKindOutcome::NotMade { .. } | PageKindOutcome::Brief { .. } => None,
        }
    }

    /// Whether the request took; `None` when the buffer could not be made.
    pub fn took(&self) -> Option<bool> {
        match self {
            PageKindOutcome::Made { backing, .. } => Some(backing.took),
            PageKindOutcome::NotMade { .. } => None,
            PageKindOutcome::Brief { took, .. } => Some(*took),
        }
    }

    /// The sentence for a reader.
    pub fn note(&self) -> &str {
        match self {
            PageKindOutcome::Made { backing, .. } => &backing.note,
            PageKindOutcome::NotMade { note, .. } | PageKindOutcome::Brief { note, .. } => note,
        }
    }
}

/// Judges a mapping's smaps entry against the request. Pure, so fixtures test it.
pub fn judge_backing(requested: PageKind, m: &Mapping) -> PageBacking {
    let kb = |name: &str| m.kb(name) * 1024;
    let kernel_page_bytes = kb("KernelPageSize");
    let anon_huge_bytes = kb("AnonHugePages");
    let hugetlb_bytes = kb("Private_Hugetlb") + kb("Shared_Hugetlb");
    let resident_bytes = kb("Rss").max(hugetlb_bytes);
    let mapping_bytes = m.end - m.start;
    let share = |part: u64| {
        if resident_bytes == 0 {
            0.0
        } else {
            part as f64 / resident_bytes as f64
        }
    };
    let (took, page_bytes, huge_fraction, note) = match requested {
        PageKind::Base4k => {
            let took = anon_huge_bytes == 0 && kernel_page_bytes == 4096;
            let note = if took {
                "4 KiB pages, no transparent huge pages".to_string()
            } else {
                format!(
                    "asked for 4 KiB pages but {} of the mapping is on transparent huge pages",
                    human_bytes(anon_huge_bytes)
                )
            };
            (took, 4096, 1.0 - share(anon_huge_bytes), note)
        }
        PageKind::Thp => {
            let f = share(anon_huge_bytes);
            let took = f >= THP_TOOK_FRACTION;
            let note = if took {
                format!("{} on 2 MiB transparent huge pages", pct(f, 0))
            } else if m.thp_eligible == Some(false) {
                "madvise(MADV_HUGEPAGE) did not take: the kernel says this mapping is not \
                 eligible for transparent huge pages (THP mode never, or disabled for the \
                 process)"
                    .to_string()
            } else {
                format!(
                    "madvise(MADV_HUGEPAGE) did not take: only {} on huge pages \
                     (memory fragmented, or THP defrag off)",
                    pct(f, 0)
                )
            };
            (took, if took { HUGE_2M } else { 4096 }, f, note)
        }
        PageKind::Hugetlb2m | PageKind::Hugetlb1g => {
            let want = requested.page_bytes();
            let took = kernel_page_bytes == want && hugetlb_bytes > 0;
            let note = if took {
                format!("hugetlbfs pages of {}", human_bytes(want))
            } else {
                format!(
                    "asked for {} hugetlbfs pages, the mapping has {} pages",
                    human_bytes(want),
                    human_bytes(kernel_page_bytes)
                )
            };
            (took, kernel_page_bytes, share(hugetlb_bytes), note)
        }
    };
    PageBacking {
        requested,
        took,
        page_bytes,
        mapping_bytes,
        resident_bytes,
        anon_huge_bytes,
        kernel_page_bytes,
        huge_fraction,
        note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::smaps;

    const SMAPS_THP: &str = include_str!("../../../tests/fixtures/proc/smaps-thp-madvise.txt");
    // A process that mapped 4 x 2 MiB hugetlbfs pages at 0x7fd515000000 (touching two) and a
    // 4 MiB MADV_NOHUGEPAGE region at 0x7fd514c00000 (touching all), on the Zen 4 guest.
    const SMAPS_HUGETLB: &str =
        include_str!("../../../tests/fixtures/proc/smaps-hugetlb-2m-and-nohugepage.txt");

    fn mapping(text: &str, addr: u64) -> Mapping {
        smaps::mapping_containing(&smaps::parse_smaps(text), addr)
            .unwrap()
            .clone()
    }

    #[test]
    fn madvised_thp_region_took() {
        let b = judge_backing(PageKind::Thp, &mapping(SMAPS_THP, 0x7fbb_c080_0000));
        assert!(b.took, "{b:?}");
        assert_eq!(b.page_bytes, HUGE_2M);
        assert_eq!(b.anon_huge_bytes, 8 << 20);
        assert_eq!(b.huge_fraction, 1.0);
    }
    #[test]
    fn thp_request_on_a_4k_region_is_reported_as_not_taken() {
        // The NOHUGEPAGE region stands in for a THP request the kernel ignored.
        let b = judge_backing(PageKind::Thp, &mapping(SMAPS_HUGETLB, 0x7fd5_14c0_0000));
        assert!(!b.took);
        assert_eq!(b.page_bytes, 4096);
        assert!(b.note.contains("did not take"), "{}", b.note);
    }
    #[test]
    fn nohugepage_region_is_4k() {
        let b = judge_backing(PageKind::Base4k, &mapping(SMAPS_HUGETLB, 0x7fd5_14c0_0000));
        assert!(b.took, "{b:?}");
        assert_eq!((b.page_bytes, b.resident_bytes), (4096, 4 << 20));
        // And a 4k request that landed on THP is caught.
        let b = judge_backing(PageKind::Base4k, &mapping(SMAPS_THP, 0x7fbb_c080_0000));
        assert!(!b.took);
    }
    #[test]
    fn hugetlb_2m_mapping_is_recognised_and_1g_request_is_not_taken() {
        let m = mapping(SMAPS_HUGETLB, 0x7fd5_1500_0000);
        let b = judge_backing(PageKind::Hugetlb2m, &m);
        assert!(b.took, "{b:?}");
        assert_eq!(b.kernel_page_bytes, HUGE_2M);
        assert_eq!(b.resident_bytes, 4 << 20);
        let b = judge_backing(PageKind::Hugetlb1g, &m);
        assert!(!b.took);
    }
    #[test]
    fn page_kinds_round_trip_their_names() {
        for k in PageKind::ALL {
            assert_eq!(PageKind::parse(k.name()), Some(k));
        }
        assert_eq!(PageKind::parse("hugetlb-1g"), Some(PageKind::Hugetlb1g));
        assert_eq!(PageKind::parse("8k"), None);
    }
}
