//! Who shares a cache line, proven: what `diagnose`'s watch of the hot code's cache lines saw
//! through hardware watchpoints (the x86 debug registers, which need no PMU), word by word,
//! and the verdict drawn from it. Saved in a diagnosis as `line_watch`.
//!
//! The watch aims first: execute breakpoints on the hot instructions that touch memory give
//! their registers before they run, so the address each touches; the lines those addresses
//! fall on most are then watched, four 8-byte words at a time, on every thread of the
//! process. Each hit names the thread and the instruction; whether it wrote or read is the
//! instruction's own decoded access.
//!
//! The verdict ([`LineVerdict::of`]) follows the words' accessors only, never a model of the
//! program: false sharing is different threads on different words of one line, at least one
//! of them writing; true sharing is one word written by one thread and touched by another.

use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// Bytes in a cache line on x86-64: the unit coherence moves between cores.
pub const LINE_BYTES: u64 = 64;

/// Bytes one watchpoint covers: the widest x86 debug registers watch (`DR7` LEN = 8).
pub const WORD_BYTES: u64 = 8;

/// Where to move a falsely shared field on x86-64: 128 bytes apart, not 64. Intel's L2
/// spatial prefetcher fetches lines in 128-byte-aligned pairs ("Intel 64 and IA-32
/// Architectures Optimization Reference Manual", the L2 streamer/spatial prefetcher), so two
/// fields one line apart can still contend; crossbeam's `CachePadded` aligns to 128 on x86-64
/// for that reason ("Starting from Intel's Sandy Bridge, spatial prefetcher is now pulling
/// pairs of 64-byte cache lines at a time").
pub const PAD_BYTES: u64 = 128;

/// Handoffs a word needs to count as shared ([`WordAccesses::handed_off`]).
pub const MIN_HANDOFFS: u64 = 4;

/// The least share of a word's accesses that are handoffs, for it to count as shared.
pub const MIN_HANDOFF_SHARE: f64 = 0.01;

/// The watch as the diagnosis keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LineWatch {
    /// The lines were watched, or why not.
    pub outcome: WatchOutcome,
    /// The process watched.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// Threads of that process the watchpoints were set on.
    #[serde(default)]
    pub threads: u32,
    /// Wall time the watch took, aim and watch together, ms: the most the watched threads
    /// were slowed by its traps (each hit traps into the kernel, ~10 us).
    pub spent_ms: f64,
    /// The recording's window, s, which the watch's budget is a share of.
    pub window_s: f64,
    /// Watchpoint hits taken, aim and watch together.
    pub hits: u64,
    /// Hits one watchpoint takes before it stops itself (the budget's cap); a word whose
    /// watchpoint reached it has lower-bound counts.
    #[serde(default)]
    pub hits_per_watchpoint: u32,
    /// The hot instructions aimed at and what their operands touched.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub aimed: Vec<AimedInstruction>,
    /// The lines watched, hottest first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lines: Vec<WatchedLine>,
    /// The command diagnose started was killed by SIGTRAP during or right after the watch: a
    /// watchpoint's debug trap reached it without its cause, which some hypervisors do
    /// ([`crate::reference::SPURIOUS_DEBUG_TRAP_HITS_INTEL_KVM`]). An attached process's end
    /// cannot be read that way; one that ended during the watch is
    /// [`WatchSkipped::EndedDuringWatch`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub killed_by_trap: bool,
}

impl LineWatch {
    /// A watch that did not run.
    pub fn skipped(why: WatchSkipped, window_s: f64) -> LineWatch {
        LineWatch {
            outcome: WatchOutcome::Skipped { why },
            pid: None,
            threads: 0,
            spent_ms: 0.0,
            window_s,
            hits: 0,
            hits_per_watchpoint: 0,
            aimed: Vec::new(),
            lines: Vec::new(),
            killed_by_trap: false,
        }
    }

    /// The watch's time as a share of the recording's window.
    pub fn share_of_window(&self) -> f64 {
        self.spent_ms / 1e3 / self.window_s.max(1e-9)
    }
}

/// Whether the watch ran.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum WatchOutcome {
    /// The lines were watched.
    Watched,
    /// It did not run, for this reason.
    Skipped {
        /// Why.
        why: WatchSkipped,
    },
}

/// Why the watch did not run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum WatchSkipped {
    /// The program ended before the window did: its lines can only be watched while it runs
    /// (a `--duration` shorter than its run, or `--pid`).
    TargetEnded,
    /// No process had samples from two threads: nothing to share.
    OneThread,
    /// No hot instruction touches memory through an operand the watch can aim at.
    NoMemoryAccess,
    /// The program ended while it was watched (its threads were gone when the next turn was
    /// armed).
    EndedDuringWatch,
    /// The kernel refused a breakpoint.
    Refused {
        /// The kernel's error.
        error: String,
    },
    /// The instructions aimed at did not run during the aim.
    NotRun,
    /// Their accesses fell on many lines, none often enough to watch (a pointer chase).
    NoHotLine,
    /// Not an x86-64 machine: the aim decodes x86-64 code and reads x86 registers.
    NotX86,
}

/// A hot instruction the watch aimed at.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AimedInstruction {
    /// Its function.
    pub function: String,
    /// Its file.
    pub module: String,
    /// Its address in the module's numbering.
    pub address: u64,
    /// The instruction.
    pub instruction: String,
    /// Times it ran during the aim.
    pub hits: u64,
    /// Distinct lines its operand touched.
    pub lines: u64,
    /// Distinct threads that ran it.
    pub threads: u64,
}

/// One watched cache line.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WatchedLine {
    /// Address of the line's first byte.
    pub address: u64,
    /// The mapping that holds it: the file whose data it is (or whose `.bss` follows its
    /// mapping), or the mapping's name (`[heap]`, `[stack]`, `[anon]`).
    pub region: String,
    /// The words touched, by offset.
    pub words: Vec<WordAccesses>,
    /// What the accesses make of the line.
    pub verdict: LineVerdict,
    /// How long the line was watched (both halves), ms.
    pub watched_ms: f64,
    /// True when a watchpoint reached its hit cap before its turn ended: counts are then
    /// lower bounds, the accessors still named.
    #[serde(default)]
    pub capped: bool,
}

/// The static data a word belongs to: an ELF data symbol and the word's offset in it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataSymbol {
    /// The symbol (`stats`).
    pub name: String,
    /// The word's offset from the symbol's start, bytes.
    pub offset: u64,
}

/// One 8-byte word of a line and who touched it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WordAccesses {
    /// Offset of the word in the line (0, 8, ... 56).
    pub offset: u64,
    /// The data symbol holding the word, for static data in a file with symbols: words of
    /// one line can belong to different variables.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub symbol: Option<DataSymbol>,
    /// Times the next access to the word, in time order, came from another thread than the
    /// last (within one turn of the aim or the watch): each moves the line between cores. Two
    /// threads with almost none took turns one after the other (a goroutine or task moved
    /// between threads), which is not sharing.
    #[serde(default)]
    pub handoffs: u64,
    /// Threads and code that touched it, most hits first.
    pub accessors: Vec<Accessor>,
}

impl WordAccesses {
    /// Threads that wrote it.
    pub fn writers(&self) -> BTreeSet<u32> {
        self.accessors
            .iter()
            .filter(|a| a.writes > 0)
            .map(|a| a.tid)
            .collect()
    }

    /// True when its threads took turns on it: at least [`MIN_HANDOFFS`] handoffs and
    /// [`MIN_HANDOFF_SHARE`] of its accesses. A goroutine moved once between two threads
    /// makes one or two in a turn; two threads writing one counter, hundreds.
    pub fn handed_off(&self) -> bool {
        let accesses: u64 = self.accessors.iter().map(|a| a.writes + a.reads).sum();
        self.handoffs >= MIN_HANDOFFS && self.handoffs as f64 >= MIN_HANDOFF_SHARE * accesses as f64
    }

    /// Threads that touched it.
    pub fn threads(&self) -> BTreeSet<u32> {
        self.accessors.iter().map(|a| a.tid).collect()
    }
}

/// One thread's accesses to a word from one instruction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Accessor {
    /// Thread id.
    pub tid: u32,
    /// Thread name (`comm`); empty when it could not be read.
    #[serde(default)]
    pub thread: String,
    /// Function of the instruction.
    pub function: String,
    /// `file:line` of the instruction, from DWARF.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source_line: Option<String>,
    /// The instruction, when it could be decoded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instruction: Option<String>,
    /// Hits that wrote the word (a store or a read-modify-write).
    pub writes: u64,
    /// Hits that only read it.
    pub reads: u64,
}

/// What the accesses to one line make of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LineVerdict {
    /// Different threads on different words, one of them writing: the line moves between
    /// their cores though they share no data. Moving the words apart ends it.
    FalseSharing,
    /// One word written by one thread and touched by another: the data itself is shared, and
    /// padding cannot help; writing it less often (or per thread) does.
    TrueSharing,
    /// Both on one line.
    TrueAndFalseSharing,
    /// Several threads read it, none wrote during the watch: no coherence traffic.
    ReadMostly,
    /// One thread at a time touched it: one thread only, or threads that took turns without
    /// interleaving (a goroutine moved between threads).
    OneThread,
}

impl LineVerdict {
    /// The verdict of a line's words.
    ///
    /// True sharing: a word written by a thread and touched by another, the two taking turns
    /// on it ([`WordAccesses::handed_off`]). False sharing: a thread writes one word while
    /// another thread touches a different word it does not touch itself.
    pub fn of(words: &[WordAccesses]) -> LineVerdict {
        let true_shared = words
            .iter()
            .any(|w| !w.writers().is_empty() && w.threads().len() >= 2 && w.handed_off());
        let false_shared = words.iter().any(|w1| {
            w1.writers().iter().any(|&writer| {
                words.iter().any(|w2| {
                    w2.offset != w1.offset
                        && w2
                            .threads()
                            .iter()
                            .any(|&t| t != writer && !w1.threads().contains(&t))
                })
            })
        });
        let threads: BTreeSet<u32> = words.iter().flat_map(WordAccesses::threads).collect();
        match (true_shared, false_shared) {
            (true, true) => LineVerdict::TrueAndFalseSharing,
            (true, false) => LineVerdict::TrueSharing,
            (false, true) => LineVerdict::FalseSharing,
            (false, false)
                if threads.len() >= 2 && words.iter().all(|w| w.writers().is_empty()) =>
            {
                LineVerdict::ReadMostly
            }
            (false, false) => LineVerdict::OneThread,
        }
    }

    /// The worse of two verdicts (true and false sharing worst, one thread least).
    pub fn worst(self, other: LineVerdict) -> LineVerdict {
        if other.severity() > self.severity() {
            other
        } else {
            self
        }
    }

    /// How bad a verdict is: 0 for one thread, 4 for true and false sharing.
    pub fn severity(self) -> u8 {
        match self {
            LineVerdict::TrueAndFalseSharing => 4,
            LineVerdict::TrueSharing => 3,
            LineVerdict::FalseSharing => 2,
            LineVerdict::ReadMostly => 1,
            LineVerdict::OneThread => 0,
        }
    }

    /// True when the line costs coherence traffic.
    pub fn is_hazard(self) -> bool {
        matches!(
            self,
            LineVerdict::FalseSharing | LineVerdict::TrueSharing | LineVerdict::TrueAndFalseSharing
        )
    }
}

/// The watched lines of two diagnoses compared (`diff`'s `lines`, made by
/// `compare::lines`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LineChanges {
    /// Whether each side's lines were watched, or why not (absent: the side has no watch).
    pub old: SideWatch,
    /// The new side's.
    pub new: SideWatch,
    /// Data shared on either side, or whose verdict changed; shared on the new side first.
    pub changes: Vec<LineChange>,
}

/// One side's watch, as the comparison needs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "watch", rename_all = "snake_case")]
pub enum SideWatch {
    /// Its lines were watched.
    Watched,
    /// They were not, for this reason.
    Skipped {
        /// Why.
        why: WatchSkipped,
    },
    /// The diagnosis has no watch (run without `--watch`, or a file older than it).
    Absent,
}

/// One data's verdict on each side.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LineChange {
    /// The data: a symbol (`stats`), or `written in f, g` for data without one.
    pub data: String,
    /// Its verdict in the old diagnosis; absent when no watched line held it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old: Option<LineVerdict>,
    /// In the new one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new: Option<LineVerdict>,
}

impl LineChange {
    /// True when the old side shared it and the new side watched it and does not.
    pub fn stopped_sharing(&self) -> bool {
        self.old.is_some_and(LineVerdict::is_hazard)
            && !self.new.is_some_and(LineVerdict::is_hazard)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn word(offset: u64, accesses: &[(u32, u64, u64)]) -> WordAccesses {
        WordAccesses {
            offset,
            symbol: None,
            handoffs: 100,
            accessors: accesses
                .iter()
                .map(|&(tid, writes, reads)| Accessor {
                    tid,
                    thread: format!("t{tid}"),
                    function: "f".into(),
                    source_line: None,
                    instruction: None,
                    writes,
                    reads,
                })
                .collect(),
        }
    }

    #[test]
    fn two_threads_writing_their_own_word_is_false_sharing() {
        let line = [word(0, &[(1, 50, 0)]), word(8, &[(2, 40, 0)])];
        assert_eq!(LineVerdict::of(&line), LineVerdict::FalseSharing);
    }

    #[test]
    fn a_writer_and_a_reader_of_another_word_is_false_sharing() {
        let line = [word(0, &[(1, 50, 0)]), word(16, &[(2, 0, 70)])];
        assert_eq!(LineVerdict::of(&line), LineVerdict::FalseSharing);
    }

    #[test]
    fn one_word_written_by_all_is_true_sharing() {
        let line = [word(0, &[(1, 50, 0), (2, 45, 0)])];
        assert_eq!(LineVerdict::of(&line), LineVerdict::TrueSharing);
        let producer_consumer = [word(0, &[(1, 10, 0), (2, 0, 90)])];
        assert_eq!(
            LineVerdict::of(&producer_consumer),
            LineVerdict::TrueSharing
        );
    }

    #[test]
    fn a_shared_word_beside_a_private_one_is_both() {
        let line = [word(0, &[(1, 50, 0), (2, 45, 0)]), word(8, &[(3, 20, 0)])];
        assert_eq!(LineVerdict::of(&line), LineVerdict::TrueAndFalseSharing);
    }

    #[test]
    fn reads_only_or_one_thread_is_no_hazard() {
        let read = [word(0, &[(1, 0, 9), (2, 0, 9)]), word(8, &[(3, 0, 1)])];
        assert_eq!(LineVerdict::of(&read), LineVerdict::ReadMostly);
        let one = [word(0, &[(1, 9, 9)]), word(8, &[(1, 3, 0)])];
        assert_eq!(LineVerdict::of(&one), LineVerdict::OneThread);
        assert!(!LineVerdict::ReadMostly.is_hazard() && LineVerdict::FalseSharing.is_hazard());
    }
}
