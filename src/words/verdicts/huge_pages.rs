//! The huge-pages verdict's words: the THP mode, what a madvised region got, and what 4 KiB
//! pages cost here.

use crate::format::human_bytes;
use crate::machine::ThpEnabled;

/// What a madvised THP buffer got.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// It was backed by huge pages (most of it).
    pub took: bool,
    /// The fraction (0-1) of it on huge pages.
    pub huge_fraction: f64,
    /// Its size.
    pub mapping_bytes: u64,
    /// What the buffer's record says about it.
    pub note: String,
}

/// What the huge-pages verdict is about.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// THP is off: nothing else matters.
    Never,
    /// A request was made and did or did not take.
    Requested(Request),
}

/// What the huge-pages verdict rests on.
pub struct Facts {
    /// The THP mode, when known.
    pub mode: Option<ThpEnabled>,
    /// What was found.
    pub outcome: Outcome,
    /// The huge page size a THP request asks for.
    pub huge_page_bytes: u64,
    /// DRAM latency on 4 KiB over huge pages, when measured.
    pub penalty_ratio: Option<f64>,
}

fn mode_text(f: &Facts) -> &'static str {
    f.mode.map_or("unknown", ThpEnabled::as_str)
}

/// The figure: the mode, and whether a request took.
pub fn figure(f: &Facts) -> String {
    match &f.outcome {
        Outcome::Never => "THP never".to_string(),
        Outcome::Requested(r) => format!(
            "THP {}, {} ({})",
            mode_text(f),
            if r.took { "taken" } else { "request not taken" },
            crate::format::pct(r.huge_fraction, 0)
        ),
    }
}

/// The one-line summary.
pub fn summary(f: &Facts) -> &'static str {
    match &f.outcome {
        Outcome::Never => "THP is off: even programs that ask get 4 KiB pages",
        Outcome::Requested(r) if !r.took => "programs that ask for huge pages get 4 KiB pages",
        Outcome::Requested(_) if f.mode == Some(ThpEnabled::Madvise) => {
            "programs that ask for huge pages (madvise) get them"
        }
        Outcome::Requested(_) => "huge pages are handed out when asked for",
    }
}

/// What a working setup looks like.
pub fn reference(f: &Facts) -> String {
    format!(
        "THP madvise or always, and an madvised region backed by {} pages \
         (AnonHugePages in /proc/self/smaps)",
        human_bytes(f.huge_page_bytes)
    )
}

/// What programs get here, and what 4 KiB pages cost.
pub fn explanation(f: &Facts) -> String {
    let lead = match &f.outcome {
        Outcome::Never => "Transparent huge pages are off (mode never): every program gets 4 KiB \
                           pages, even one that asks for huge pages with madvise."
            .to_string(),
        Outcome::Requested(r) if !r.took => format!(
            "A {} region madvised for huge pages got {} of them ({}): programs \
             that ask for huge pages silently run on 4 KiB pages.",
            human_bytes(r.mapping_bytes),
            crate::format::pct(r.huge_fraction, 0),
            r.note
        ),
        Outcome::Requested(r) => format!(
            "A {} region madvised for huge pages got {} of it on {} pages.{}",
            human_bytes(r.mapping_bytes),
            crate::format::pct(r.huge_fraction, 0),
            human_bytes(f.huge_page_bytes),
            if f.mode == Some(ThpEnabled::Madvise) {
                " In madvise mode only programs that ask get them."
            } else {
                ""
            }
        ),
    };
    let cost = match f.penalty_ratio {
        Some(p) => format!(
            " Measured here, a random load from DRAM takes {p:.2}x as long on 4 KiB pages \
             as on huge pages."
        ),
        None => String::new(),
    };
    format!("{lead}{cost}")
}

/// Why there is no verdict: the THP buffer could not be tried (`note` says why), or no buffer
/// asked for THP.
pub fn not_tried(note: Option<&str>) -> String {
    match note {
        Some(note) => format!("the THP buffer could not be tried: {note}"),
        None => "no buffer of this run asked for transparent huge pages (the memory probes \
                 try them unless --pages leaves THP out)"
            .into(),
    }
}

/// The software patterns the hazard hurts.
pub const HURTS: &[&str] = &[
    "programs that ask for transparent huge pages (JVM -XX:+UseTransparentHugePages, \
     glibc.malloc.hugetlb=1, databases and caches that madvise their heaps)",
    "random access over memory larger than the TLB reach of 4 KiB pages",
];

/// The hazard's title.
pub const TITLE: &str = "Huge pages";
