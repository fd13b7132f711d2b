//! The false-sharing verdict's words: each access pattern's cost on one line against apart,
//! the worst named first, what true sharing costs, and the Netflix JVM case.

use super::with_interval;
use crate::format::human_ns;
use crate::reference::{
    NETFLIX_BIG_INSTANCE_EXPECTED_SPEEDUP, NETFLIX_BIG_INSTANCE_GAIN_PCT,
    NETFLIX_BIG_INSTANCE_VCPUS, NETFLIX_SHARED_LINE_EIGHTHS, NETFLIX_SLOW_NODE_CPI_RATIO,
    NETFLIX_TRUE_SHARING_FIX_SPEEDUP,
};
use crate::schema::{Level, Metric};

/// The access patterns the sharing probe times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pattern {
    /// Plain per-thread counters on one line.
    Plain,
    /// `lock xadd` per-thread counters on one line.
    Atomic,
    /// Loads of a line another core writes.
    Reader,
    /// Stores to a line other cores read.
    Writer,
    /// One atomic written from two cores (true sharing), standing in where a file has no
    /// atomic pattern.
    SharedAtomic,
}

impl Pattern {
    /// What the pattern is, as the verdict names it.
    fn name(self) -> &'static str {
        match self {
            Pattern::Plain => "plain per-thread counters on one line",
            Pattern::Atomic => "atomic per-thread counters on one line",
            Pattern::Reader => "reads of a line another core writes",
            Pattern::Writer => "writes to a line other cores read",
            Pattern::SharedAtomic => "one atomic written from two cores",
        }
    }

    /// Its short label in the figure line.
    fn label(self) -> &'static str {
        match self {
            Pattern::Plain => "plain",
            Pattern::Atomic => "atomic",
            Pattern::Reader => "reader",
            Pattern::Writer => "writer",
            Pattern::SharedAtomic => "one shared atomic",
        }
    }

    /// What one operation is.
    fn op(self) -> &'static str {
        match self {
            Pattern::Plain | Pattern::Atomic | Pattern::SharedAtomic => "update",
            Pattern::Reader => "load",
            Pattern::Writer => "store",
        }
    }

    /// True for a pattern the probe measures as false sharing; false for the one atomic
    /// written from every core, which stands in only in files without the atomic pattern.
    pub fn direct(self) -> bool {
        self != Pattern::SharedAtomic
    }
}

/// One pattern's figures.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PatternFigures {
    /// The pattern.
    pub pattern: Pattern,
    /// On one line over apart.
    pub ratio: f64,
    /// Per-operation time on one line and apart, when the file has them.
    pub op_ns: Option<(f64, f64)>,
}

/// True sharing's figures: one atomic from every thread against per-thread ones.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrueSharing {
    /// Shared over private.
    pub ratio: f64,
    /// Per increment, shared.
    pub shared_ns: f64,
    /// Per increment, private.
    pub private_ns: f64,
}

/// How the probe laid the threads' fields out.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Layout {
    /// Fields on one line: this far apart.
    pub packed_spacing_bytes: u64,
    /// The cache line.
    pub line_bytes: u64,
    /// Fields apart: this far apart (two lines, for the adjacent-line prefetcher).
    pub padded_spacing_bytes: u64,
}

/// What the false-sharing verdict rests on.
pub struct Facts<'a> {
    /// The worst pattern's level.
    pub level: Level,
    /// Its borderline level.
    pub borderline: Option<Level>,
    /// Every pattern judged, worst first.
    pub patterns: Vec<PatternFigures>,
    /// The worst pattern's ratio metric, for the interval.
    pub worst_metric: Option<&'a Metric>,
    /// Threads the probe ran.
    pub threads: u64,
    /// The probe's layout.
    pub layout: Layout,
    /// Plain stores hide the shared line on this CPU while locked operations pay.
    pub plain_stores_hide: bool,
    /// ...and loads pay too.
    pub loads_pay_too: bool,
    /// True sharing's figures, when measured.
    pub true_sharing: Option<TrueSharing>,
}

/// `0.61 ns`: two decimals below 10 ns, where plain loads and stores live.
fn per_op(ns: f64) -> String {
    if ns < 10.0 {
        format!("{ns:.2} ns")
    } else {
        human_ns(ns)
    }
}

/// `atomic per-thread counters on one line: 29.4 ns per update against 6.2 ns 128 bytes
/// apart (4.7x)`, or the ratio alone when the times are absent.
fn pattern_words(p: &PatternFigures, layout: &Layout) -> String {
    let apart = if p.pattern.direct() {
        format!("{} bytes apart", layout.padded_spacing_bytes)
    } else {
        "on per-thread counters".to_string()
    };
    match p.op_ns {
        Some((a, b)) => format!(
            "{}: {} per {} against {} {apart} ({:.1}x)",
            p.pattern.name(),
            per_op(a),
            p.pattern.op(),
            per_op(b),
            p.ratio
        ),
        None => format!("{}: {:.1}x", p.pattern.name(), p.ratio),
    }
}

/// `atomic 4.7x (95% CI 3.7-5.0x), reader 1.8x, plain 1.0x, writer 1.0x`: worst first, with
/// the interval it was judged on beside it; the explanation says what each compares.
pub fn figure(f: &Facts<'_>) -> String {
    f.patterns
        .iter()
        .enumerate()
        .map(|(k, p)| {
            let text = format!("{} {:.1}x", p.pattern.label(), p.ratio);
            if k == 0 {
                with_interval(text, f.worst_metric)
            } else {
                text
            }
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The one-line summary.
pub fn summary(f: &Facts<'_>) -> String {
    let Some(worst) = f.patterns.first() else {
        return String::new();
    };
    if f.level == Level::Ok && f.borderline.is_none() {
        format!(
            "fields of different threads on one line cost at most {:.1}x ({})",
            worst.ratio,
            worst.pattern.label()
        )
    } else if worst.pattern.direct() {
        format!(
            "{}: {:.1}x; pad to {} bytes",
            worst.pattern.name(),
            worst.ratio,
            f.layout.padded_spacing_bytes
        )
    } else {
        format!(
            "{}: {:.1}x per-thread ones",
            worst.pattern.name(),
            worst.ratio
        )
    }
}

/// The Netflix JVM case.
pub fn reference() -> String {
    format!(
        "the Netflix JVM case: false sharing {} CPI; padding, then not writing \
         the shared field, gave {NETFLIX_TRUE_SHARING_FIX_SPEEDUP}x throughput",
        times_word(NETFLIX_SLOW_NODE_CPI_RATIO)
    )
}

/// `tripled` for 3x; `multiplied by N` otherwise.
fn times_word(ratio: f64) -> String {
    if (ratio - 3.0).abs() < 1e-9 {
        "tripled".into()
    } else {
        format!("multiplied by {ratio}")
    }
}

/// Each pattern's cost, worst first, what it means on this CPU, and the cure.
pub fn explanation(f: &Facts<'_>) -> String {
    let Some((worst, others)) = f.patterns.split_first() else {
        return String::new();
    };
    let l = &f.layout;
    let mut explanation = format!(
        "{} threads, their fields {} bytes apart (one {}-byte line) against {} \
         bytes apart. Worst, {}",
        f.threads,
        l.packed_spacing_bytes,
        l.line_bytes,
        l.padded_spacing_bytes,
        pattern_words(worst, l)
    );
    for o in others {
        explanation.push_str(&format!("; {}", pattern_words(o, l)));
    }
    explanation.push('.');
    if !worst.pattern.direct() {
        explanation.push_str(
            " This file has no per-thread atomic or reader figures (an earlier cpudoctor \
             saved it): one atomic written from both cores pays what per-thread atomics on \
             one line pay, a locked operation waiting for a line another core wrote, so it \
             stands for them here.",
        );
    }
    if f.plain_stores_hide {
        explanation.push_str(
            " Plain stores hide it on this CPU (they retire through the store buffer while \
             the line moves); locked operations wait for the line",
        );
        explanation.push_str(if f.loads_pay_too {
            ", and so do loads."
        } else {
            "."
        });
    }
    explanation.push_str(&netflix_case(l));
    let cure = format!(
        "padding cannot fix that, only not writing the shared value can (per-thread \
         counters summed on read; the Netflix case's second fix stopped writing the shared \
         cache for {NETFLIX_TRUE_SHARING_FIX_SPEEDUP}x)."
    );
    if !worst.pattern.direct() {
        // Its figures are already above, as the worst pattern.
        explanation.push_str(&format!(
            " A field every thread writes is true sharing: {cure}"
        ));
    } else if let Some(t) = f.true_sharing {
        explanation.push_str(&format!(
            " True sharing: all threads incrementing one atomic take {} per increment \
             against {} on per-thread counters ({:.1}x); {cure}",
            per_op(t.shared_ns),
            per_op(t.private_ns),
            t.ratio
        ));
    }
    explanation
}

/// The Netflix JVM case and the cure for false sharing.
fn netflix_case(l: &Layout) -> String {
    format!(
        " This is the Netflix JVM case: a field written from every thread beside one read \
         by all shared a line {NETFLIX_SHARED_LINE_EIGHTHS} times in 8, those nodes ran at \
         {NETFLIX_SLOW_NODE_CPI_RATIO}x the CPI, and a {NETFLIX_BIG_INSTANCE_VCPUS}-vCPU \
         instance gave {} more throughput instead of \
         {NETFLIX_BIG_INSTANCE_EXPECTED_SPEEDUP}x. Pad fields that different threads write to \
         {} bytes (the adjacent-line prefetcher pairs lines): @Contended, alignas({}), \
         crossbeam's CachePadded.",
        crate::format::pct(NETFLIX_BIG_INSTANCE_GAIN_PCT / 100.0, 0),
        l.padded_spacing_bytes,
        l.padded_spacing_bytes
    )
}

/// The software patterns the hazard hurts.
pub const HURTS: &[&str] = &[
    "per-thread counters and statistics side by side (an array of AtomicU64, \
     LongAdder cells, Java volatile counters), atomic or plain",
    "a field read by every thread beside one written by any (the JVM's \
     secondary-super cache, JDK-8180450)",
    "counters and caches written from every core (true sharing)",
];

/// The hazard's title.
pub const TITLE: &str = "False sharing";
