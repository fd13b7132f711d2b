//! The words of the cache-line watch (`schema::line_sharing`): what each watched line is, who
//! writes and reads its words, the fix in those terms, and why a watch did not run.

use crate::format::{count_of, group_thousands, human_ns, pct};
use crate::schema::line_sharing::{
    Accessor, DataName, LineVerdict, LineWatch, PAD_BYTES, WatchSkipped, WatchedLine, WordAccesses,
};

/// A word's name: the data symbol and offset (`stats+0x8`), else the line's address and the
/// offset (`[heap] 0x55d0c8a04040+0x8`).
pub fn word_name(line: &WatchedLine, offset: u64) -> String {
    data_at(&line.data, line.address, offset)
}

fn data_at(data: &DataName, line: u64, offset: u64) -> String {
    match (&data.symbol, data.symbol_offset) {
        (Some(s), Some(at)) => {
            let off = at + offset as i64;
            match off {
                0 => format!("{s}+0x0"),
                o if o < 0 => format!("{s}-{:#x}", -o),
                o => format!("{s}+{o:#x}"),
            }
        }
        _ => format!("{} {:#x}+{offset:#x}", short(&data.region), line),
    }
}

fn short(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// The line's heading: the verdict and where.
pub fn heading(line: &WatchedLine) -> String {
    let what = match line.verdict {
        LineVerdict::FalseSharing => "False sharing",
        LineVerdict::TrueSharing => "True sharing",
        LineVerdict::TrueAndFalseSharing => "True and false sharing",
        LineVerdict::ReadMostly => "Read by several threads, written by none",
        LineVerdict::OneThread => "One thread only",
    };
    let fields: Vec<String> = line
        .words
        .iter()
        .map(|w| word_name(line, w.offset))
        .collect();
    format!(
        "{what} on the line at {:#x} ({}, in {}): {}",
        line.address,
        fields.join(", "),
        short(&line.data.region),
        match line.verdict {
            LineVerdict::FalseSharing | LineVerdict::TrueAndFalseSharing =>
                "different threads write different fields of one cache line",
            LineVerdict::TrueSharing if line.words.iter().any(|w| w.writers().len() >= 2) => {
                "one field is written by several threads"
            }
            LineVerdict::TrueSharing => "one field is written by one thread and used by another",
            LineVerdict::ReadMostly | LineVerdict::OneThread => "no coherence traffic",
        }
    )
}

/// One accessor of a word: `writer-a (tid 812) writes 500x in count_hits (shapes.c:15)`.
fn accessor(a: &Accessor) -> String {
    let verb = match (a.writes, a.reads) {
        (0, r) => format!("reads {}x", group_thousands(r)),
        (w, 0) => format!("writes {}x", group_thousands(w)),
        (w, r) => format!(
            "writes {}x, reads {}x",
            group_thousands(w),
            group_thousands(r)
        ),
    };
    let at = a
        .source_line
        .as_deref()
        .map(|l| format!(" ({})", short(l)))
        .unwrap_or_default();
    format!("{} (tid {}) {verb} in {}{at}", a.thread, a.tid, a.function)
}

/// A word's row: its name and each accessor.
pub fn word_row(line: &WatchedLine, w: &WordAccesses) -> String {
    let who: Vec<String> = w.accessors.iter().map(accessor).collect();
    format!(
        "+{:<2} {}: {}",
        w.offset,
        word_name(line, w.offset),
        who.join("; ")
    )
}

/// What to do about the line, in its own fields.
pub fn fix(line: &WatchedLine) -> Option<String> {
    let written: Vec<&WordAccesses> = line
        .words
        .iter()
        .filter(|w| !w.writers().is_empty())
        .collect();
    let shared: Vec<String> = line
        .words
        .iter()
        .filter(|w| !w.writers().is_empty() && w.threads().len() >= 2)
        .map(|w| word_name(line, w.offset))
        .collect();
    let pad = || {
        let first = written.first().map(|w| w.offset).unwrap_or(0);
        let others: Vec<String> = line
            .words
            .iter()
            .filter(|w| w.offset != first)
            .map(|w| word_name(line, w.offset))
            .collect();
        format!(
            "move {} at least {PAD_BYTES} bytes away from {} (a line apart is not enough on \
             x86-64: the spatial prefetcher fetches lines in pairs), e.g. pad each thread's \
             fields to their own {PAD_BYTES}-byte block",
            others.join(", "),
            word_name(line, first)
        )
    };
    let stop_sharing = || {
        format!(
            "{} is itself shared: padding cannot help; give each thread its own copy and \
             combine them when read, or write it less often (write only when the value \
             changes, as the JDK fix for the Netflix case did)",
            shared.join(", ")
        )
    };
    match line.verdict {
        LineVerdict::FalseSharing => Some(format!("Do: {}.", pad())),
        LineVerdict::TrueSharing => Some(format!("Do: {}.", stop_sharing())),
        LineVerdict::TrueAndFalseSharing => Some(format!("Do: {}; and {}.", stop_sharing(), pad())),
        LineVerdict::ReadMostly | LineVerdict::OneThread => None,
    }
}

/// What the watch took: its time against the window and its hits.
pub fn cost(w: &LineWatch) -> String {
    format!(
        "{} watched on {} for {} ({} of the {} window, the most its traps slowed them), {} hits{}",
        count_of(w.lines.len(), "line", "lines"),
        count_of(w.threads as usize, "thread", "threads"),
        human_ns(w.spent_ms * 1e6),
        pct(w.share_of_window(), 1),
        human_ns(w.window_s * 1e9),
        group_thousands(w.hits),
        if w.lines.iter().any(|l| l.capped) {
            format!(
                "; some watchpoints reached their {}-hit cap, so counts are lower bounds",
                group_thousands(w.hits_per_watchpoint as u64)
            )
        } else {
            String::new()
        }
    )
}

/// Why the watch did not run.
pub fn skipped(why: &WatchSkipped) -> String {
    match why {
        WatchSkipped::TargetEnded => "the program ended before the window did; its lines can \
            only be watched while it runs (give --duration shorter than its run, or --pid)"
            .into(),
        WatchSkipped::OneThread => "no process ran on two threads: no line to share".into(),
        WatchSkipped::NoMemoryAccess => {
            "no hot instruction touches memory through an operand a breakpoint can aim at".into()
        }
        WatchSkipped::Refused { error } => format!(
            "the kernel refused a hardware breakpoint ({error}): it needs perf_event_open on \
             the process (root, CAP_PERFMON or kernel.perf_event_paranoid <= 2 for your own), \
             a free debug register (no debugger attached) and a kernel with \
             CONFIG_HAVE_HW_BREAKPOINT"
        ),
        WatchSkipped::NotRun => "the hot instructions did not run during the aim".into(),
        WatchSkipped::NotX86 => "the watch decodes x86-64 code and reads x86 registers; the \
            machine recorded is not x86-64"
            .into(),
        WatchSkipped::NoHotLine => "the hot instructions' accesses fell on many lines, none \
            often (a walk through memory, not a shared line)"
            .into(),
    }
}
