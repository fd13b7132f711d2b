//! The words of the cache-line watch (`schema::line_sharing`): what each watched line is, who
//! writes and reads its words, the fix in those terms, and why a watch did not run.

use crate::format::{count_of, group_thousands, human_ns, pct};
use crate::schema::line_sharing::{
    Accessor, LineChange, LineChanges, LineVerdict, LineWatch, PAD_BYTES, SideWatch, WatchSkipped,
    WatchedLine, WordAccesses,
};

/// A word's name: its data symbol and offset (`stats+0x8`), else the mapping, the line's
/// address and the offset in it (`[heap] 0x55d0c8a04040+0x8`).
pub fn word_name(line: &WatchedLine, w: &WordAccesses) -> String {
    match &w.symbol {
        Some(s) => format!("{}+{:#x}", s.name, s.offset),
        None => format!(
            "{} {:#x}+{:#x}",
            short(&line.region),
            line.address,
            w.offset
        ),
    }
}

fn short(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// A verdict in a sentence: `false sharing`.
pub fn verdict_name(v: LineVerdict) -> &'static str {
    match v {
        LineVerdict::FalseSharing => "false sharing",
        LineVerdict::TrueSharing => "true sharing",
        LineVerdict::TrueAndFalseSharing => "true and false sharing",
        LineVerdict::ReadMostly => "read by several threads, written by none",
        LineVerdict::OneThread => "one thread only",
    }
}

/// Why one side has no verdict for a data the other side shares.
fn unseen(side: &SideWatch, run: &str) -> String {
    match side {
        SideWatch::Watched => format!(
            "not on the lines watched in the {run} run (its code was not among the hot \
             instructions aimed at)"
        ),
        SideWatch::Skipped { why } => format!("not watched in the {run} run: {}", skipped(why)),
        SideWatch::Absent => {
            format!(
                "the {run} run has no watch (run without --watch, or a file older than the watch)"
            )
        }
    }
}

/// One data's verdicts in `diff`: `stats: false sharing -> one thread only: it stopped being
/// shared`.
pub fn change(c: &LineChange, sides: &LineChanges) -> String {
    let hazard = |v: Option<LineVerdict>| v.is_some_and(LineVerdict::is_hazard);
    let what = match (c.old, c.new) {
        (Some(o), Some(n)) if o == n => format!("{} in both runs", verdict_name(n)),
        (Some(o), Some(n)) if hazard(Some(o)) && !hazard(Some(n)) => format!(
            "{} -> {}: it stopped being shared",
            verdict_name(o),
            verdict_name(n)
        ),
        (Some(o), Some(n)) if !hazard(Some(o)) && hazard(Some(n)) => format!(
            "{} -> {}: it became shared",
            verdict_name(o),
            verdict_name(n)
        ),
        (Some(o), Some(n)) => format!("{} -> {}", verdict_name(o), verdict_name(n)),
        (Some(o), None) => format!(
            "{} in the old run; {}",
            verdict_name(o),
            unseen(&sides.new, "new")
        ),
        (None, Some(n)) => format!(
            "{} in the new run; {}",
            verdict_name(n),
            unseen(&sides.old, "old")
        ),
        (None, None) => "watched in neither run".into(),
    };
    format!("{}: {what}", c.data)
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
    let fields: Vec<String> = line.words.iter().map(|w| word_name(line, w)).collect();
    format!(
        "{what} on the line at {:#x} ({}, in {}): {}",
        line.address,
        fields.join(", "),
        short(&line.region),
        match line.verdict {
            LineVerdict::FalseSharing | LineVerdict::TrueAndFalseSharing if written_apart(line) => {
                "different threads write different fields of one cache line"
            }
            LineVerdict::FalseSharing | LineVerdict::TrueAndFalseSharing => {
                "other threads read fields beside one that a thread writes"
            }
            LineVerdict::TrueSharing if line.words.iter().any(|w| w.writers().len() >= 2) => {
                "one field is written by several threads"
            }
            LineVerdict::TrueSharing => "one field is written by one thread and used by another",
            LineVerdict::ReadMostly | LineVerdict::OneThread => "no coherence traffic",
        }
    )
}

/// True when two words of the line have different writers: the classic false sharing.
fn written_apart(line: &WatchedLine) -> bool {
    let writers: Vec<_> = line
        .words
        .iter()
        .map(WordAccesses::writers)
        .filter(|w| !w.is_empty())
        .collect();
    writers.iter().any(|a| writers.iter().any(|b| a != b))
}

/// Accessor groups shown per word; the rest are counted.
const SHOWN_ACCESSORS: usize = 4;

/// A word's accessors, one per thread and function (its instructions' counts together):
/// `writer-a (tid 812) writes 500x in count_hits (shapes.c:15)`.
fn accessors(all: &[Accessor]) -> String {
    /// One thread's accesses from one function.
    struct Group<'a> {
        tid: u32,
        function: &'a str,
        thread: &'a str,
        writes: u64,
        reads: u64,
        lines: Vec<&'a str>,
    }
    // In the order of `all`, most hits first.
    let mut groups: Vec<Group> = Vec::new();
    for a in all {
        let at = match groups
            .iter()
            .position(|g| g.tid == a.tid && g.function == a.function)
        {
            Some(i) => i,
            None => {
                groups.push(Group {
                    tid: a.tid,
                    function: &a.function,
                    thread: &a.thread,
                    writes: 0,
                    reads: 0,
                    lines: Vec::new(),
                });
                groups.len() - 1
            }
        };
        let g = &mut groups[at];
        g.writes += a.writes;
        g.reads += a.reads;
        if let Some(l) = a.source_line.as_deref().map(short)
            && !g.lines.contains(&l)
        {
            g.lines.push(l);
        }
    }
    let mut out: Vec<String> = groups
        .iter()
        .take(SHOWN_ACCESSORS)
        .map(|g| {
            let verb = match (g.writes, g.reads) {
                (0, r) => format!("reads {}x", group_thousands(r)),
                (w, 0) => format!("writes {}x", group_thousands(w)),
                (w, r) => format!(
                    "writes {}x, reads {}x",
                    group_thousands(w),
                    group_thousands(r)
                ),
            };
            let who = if g.thread.is_empty() {
                format!("tid {}", g.tid)
            } else {
                format!("{} (tid {})", g.thread, g.tid)
            };
            let at = if g.lines.is_empty() {
                String::new()
            } else {
                format!(" ({})", g.lines.join(", "))
            };
            let function = g.function;
            format!("{who} {verb} in {function}{at}")
        })
        .collect();
    if groups.len() > SHOWN_ACCESSORS {
        out.push(format!("{} more", groups.len() - SHOWN_ACCESSORS));
    }
    out.join("; ")
}

/// A word's row: its name (the data symbol and offset, else the line and the offset in it)
/// and who touched it.
pub fn word_row(line: &WatchedLine, w: &WordAccesses) -> String {
    let handoffs = if w.threads().len() >= 2 {
        format!(
            "; {} between threads",
            count_of(w.handoffs as usize, "handoff", "handoffs")
        )
    } else {
        String::new()
    };
    format!(
        "{}: {}{handoffs}",
        word_name(line, w),
        accessors(&w.accessors)
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
        .filter(|w| !w.writers().is_empty() && w.threads().len() >= 2 && w.handed_off())
        .map(|w| word_name(line, w))
        .collect();
    let pad = || {
        let Some(first) = written.first() else {
            return String::new();
        };
        let first_writers = first.writers();
        // Words written by other threads move apart; words only read, by threads other
        // than a word's writers, pay for each write too.
        let apart: Vec<String> = written
            .iter()
            .filter(|w| w.writers() != first_writers)
            .map(|w| word_name(line, w))
            .collect();
        let read_beside: Vec<String> = line
            .words
            .iter()
            .filter(|w| w.writers().is_empty() && !w.threads().is_subset(&first_writers))
            .map(|w| word_name(line, w))
            .collect();
        let moved = if apart.is_empty() {
            &read_beside
        } else {
            &apart
        };
        let mut out = format!(
            "move {} at least {PAD_BYTES} bytes away from {} (a line apart is not enough on \
             x86-64: the spatial prefetcher fetches lines in pairs), e.g. pad each thread's \
             fields to their own {PAD_BYTES}-byte block",
            moved.join(", "),
            word_name(line, first)
        );
        if !apart.is_empty() && !read_beside.is_empty() {
            out.push_str(&format!(
                "; {} (read by other threads) pays for each of those writes too: keep it off \
                 their lines",
                read_beside.join(", ")
            ));
        }
        out
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

/// The command killed by a trap of the watch, said beside whatever the watch saw.
pub fn killed_by_trap() -> String {
    format!(
        "The program was killed by SIGTRAP during the watch: a watchpoint's debug trap reached \
         it without its cause, which this hypervisor does (an Intel KVM guest did so about once \
         in {} hits). The watch is not safe for programs that must keep running here; run \
         without --watch",
        group_thousands(crate::reference::SPURIOUS_DEBUG_TRAP_HITS_INTEL_KVM as u64)
    )
}

/// The hint where a hot line was found but not watched: what --watch would add.
pub fn not_asked() -> String {
    "Cache lines not watched: --watch names the threads and fields that share the hot line \
     (hardware watchpoints, ~2% of the window; a trap can kill the program on some \
     hypervisors)."
        .into()
}

/// Why the watch did not run.
pub fn skipped(why: &WatchSkipped) -> String {
    match why {
        WatchSkipped::TargetEnded => "the program ended before the window did; its lines can \
            only be watched while it runs (give --duration shorter than its run, or --pid)"
            .into(),
        WatchSkipped::EndedDuringWatch => "the program ended while its lines were watched; \
            a watchpoint's trap can kill it with SIGTRAP on some hypervisors (see --watch)"
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
            often enough to watch"
            .into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::line_sharing::DataSymbol;

    fn word(
        offset: u64,
        symbol: &str,
        at: u64,
        accessors: &[(u32, &str, u64, u64)],
    ) -> WordAccesses {
        WordAccesses {
            offset,
            handoffs: 100,
            symbol: Some(DataSymbol {
                name: symbol.into(),
                offset: at,
            }),
            accessors: accessors
                .iter()
                .map(|&(tid, function, writes, reads)| Accessor {
                    tid,
                    thread: if tid == 3 {
                        String::new()
                    } else {
                        format!("w{tid}")
                    },
                    function: function.into(),
                    source_line: Some("/src/go/time_linux_amd64.s:54".into()),
                    instruction: None,
                    writes,
                    reads,
                })
                .collect(),
        }
    }

    fn line(words: Vec<WordAccesses>) -> WatchedLine {
        WatchedLine {
            address: 0x5ab3c0,
            region: "/tmp/gofs".into(),
            verdict: LineVerdict::of(&words),
            words,
            watched_ms: 25.0,
            capped: false,
        }
    }

    /// The Go shape: two goroutines' counters in one struct beside a runtime variable both
    /// read. The written fields move apart; the read one is named as paying too; a thread
    /// without a name is its tid; one thread's instructions in one function are one entry.
    #[test]
    fn false_sharing_with_a_word_read_beside_it() {
        let l = line(vec![
            word(
                0,
                "runtime.vdsoClockgettimeSym",
                0,
                &[
                    (1, "time.now", 0, 6),
                    (1, "time.now", 0, 6),
                    (3, "time.now", 0, 5),
                ],
            ),
            word(8, "main.stats", 0, &[(1, "main.countHits", 500, 0)]),
            word(16, "main.stats", 8, &[(2, "main.countMisses", 500, 0)]),
        ]);
        assert_eq!(l.verdict, LineVerdict::FalseSharing);
        assert!(
            heading(&l).contains("different threads write different fields"),
            "{}",
            heading(&l)
        );
        let row = word_row(&l, &l.words[0]);
        assert_eq!(
            row,
            "runtime.vdsoClockgettimeSym+0x0: w1 (tid 1) reads 12x in time.now \
             (time_linux_amd64.s:54); tid 3 reads 5x in time.now (time_linux_amd64.s:54); 100 \
             handoffs between threads"
        );
        let fix = fix(&l).unwrap();
        assert!(
            fix.starts_with("Do: move main.stats+0x8 at least 128 bytes away from main.stats+0x0"),
            "{fix}"
        );
        assert!(
            fix.contains("runtime.vdsoClockgettimeSym+0x0 (read by other threads)"),
            "{fix}"
        );
    }

    /// One writer and a reader of the word beside it: the reader's word moves.
    #[test]
    fn false_sharing_by_a_reader_beside_a_writer() {
        let l = line(vec![
            word(0, "flag", 0, &[(2, "poll", 0, 40)]),
            word(8, "count", 0, &[(1, "bump", 500, 0)]),
        ]);
        assert_eq!(l.verdict, LineVerdict::FalseSharing);
        assert!(
            heading(&l).contains("other threads read fields beside one"),
            "{}",
            heading(&l)
        );
        assert!(
            fix(&l)
                .unwrap()
                .starts_with("Do: move flag+0x0 at least 128 bytes away from count+0x0")
        );
    }

    /// `diff` of the false-sharing run against its fix: the sentence says it stopped, and
    /// a side that was not watched is never read as "stopped".
    #[test]
    fn a_change_says_stopped_only_where_the_new_side_watched_it() {
        let c = LineChange {
            data: "stats".into(),
            old: Some(LineVerdict::FalseSharing),
            new: Some(LineVerdict::OneThread),
        };
        let both = LineChanges {
            old: SideWatch::Watched,
            new: SideWatch::Watched,
            changes: vec![c.clone()],
        };
        assert_eq!(
            change(&c, &both),
            "stats: false sharing -> one thread only: it stopped being shared"
        );
        let gone = LineChange { new: None, ..c };
        let ended = LineChanges {
            new: SideWatch::Skipped {
                why: WatchSkipped::TargetEnded,
            },
            ..both
        };
        let s = change(&gone, &ended);
        assert!(
            s.starts_with(
                "stats: false sharing in the old run; not watched in the new run: the program ended"
            ),
            "{s}"
        );
        assert!(!s.contains("stopped"), "{s}");
    }
}
