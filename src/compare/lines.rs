//! The watched cache lines of two diagnoses, matched by the data they hold ([`compare`]): a
//! line that stopped (or started) being shared between the runs. Addresses move between runs
//! (ASLR, another build), so a line is known by its words' data symbols, or for heap data by
//! the functions that touched it; each data keeps the worst verdict of the lines it is on.

use crate::diagnose::Diagnosis;
use crate::schema::line_sharing::{
    LineChange, LineChanges, LineVerdict, LineWatch, SideWatch, WatchOutcome, WordAccesses,
};
use std::collections::{BTreeMap, BTreeSet};

/// The lines compared; `None` when neither side has a watch.
pub fn compare(old: &Diagnosis, new: &Diagnosis) -> Option<LineChanges> {
    if old.line_watch.is_none() && new.line_watch.is_none() {
        return None;
    }
    let (o, n) = (
        verdicts(old.line_watch.as_ref()),
        verdicts(new.line_watch.as_ref()),
    );
    let keys: BTreeSet<&String> = o.keys().chain(n.keys()).collect();
    let mut changes: Vec<LineChange> = keys
        .into_iter()
        .map(|k| LineChange {
            data: k.clone(),
            old: o.get(k).copied(),
            new: n.get(k).copied(),
        })
        .filter(|c| {
            c.old.is_some_and(LineVerdict::is_hazard) || c.new.is_some_and(LineVerdict::is_hazard)
        })
        .collect();
    // Shared on the new side first, worst first; then what the old side shared.
    changes.sort_by_key(|c| {
        (
            std::cmp::Reverse(c.new.map_or(0, |v| v.severity() + 1)),
            std::cmp::Reverse(c.old.map_or(0, |v| v.severity() + 1)),
            c.data.clone(),
        )
    });
    Some(LineChanges {
        old: side(old.line_watch.as_ref()),
        new: side(new.line_watch.as_ref()),
        changes,
    })
}

fn side(w: Option<&LineWatch>) -> SideWatch {
    match w.map(|w| &w.outcome) {
        None => SideWatch::Absent,
        Some(WatchOutcome::Watched) => SideWatch::Watched,
        Some(WatchOutcome::Skipped { why }) => SideWatch::Skipped { why: why.clone() },
    }
}

/// A word's data, as the two sides can agree on it.
fn data_key(w: &WordAccesses) -> String {
    match &w.symbol {
        Some(s) => s.name.clone(),
        None => {
            let functions: BTreeSet<&str> =
                w.accessors.iter().map(|a| a.function.as_str()).collect();
            format!(
                "written in {}",
                functions.into_iter().collect::<Vec<_>>().join(", ")
            )
        }
    }
}

/// Each data's worst verdict over the lines it is on.
fn verdicts(w: Option<&LineWatch>) -> BTreeMap<String, LineVerdict> {
    let mut out: BTreeMap<String, LineVerdict> = BTreeMap::new();
    for line in w.map_or(&[][..], |w| &w.lines) {
        for word in &line.words {
            let e = out.entry(data_key(word)).or_insert(line.verdict);
            if line.verdict.severity() > e.severity() {
                *e = line.verdict;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::line_sharing::{Accessor, DataSymbol, WatchedLine};

    fn watch(lines: &[(&str, &[(u32, u64)])]) -> LineWatch {
        let lines = lines
            .iter()
            .map(|(symbol, words)| {
                let words: Vec<WordAccesses> = words
                    .iter()
                    .map(|&(tid, offset)| WordAccesses {
                        offset,
                        handoffs: 100,
                        symbol: Some(DataSymbol {
                            name: symbol.to_string(),
                            offset,
                        }),
                        accessors: vec![Accessor {
                            tid,
                            thread: String::new(),
                            function: format!("f{tid}"),
                            source_line: None,
                            instruction: None,
                            writes: 100,
                            reads: 0,
                        }],
                    })
                    .collect();
                WatchedLine {
                    address: 0x1000,
                    region: "/x".into(),
                    verdict: LineVerdict::of(&words),
                    words,
                    watched_ms: 20.0,
                    capped: false,
                }
            })
            .collect();
        LineWatch {
            outcome: WatchOutcome::Watched,
            pid: Some(1),
            threads: 2,
            spent_ms: 100.0,
            window_s: 10.0,
            hits: 1000,
            hits_per_watchpoint: 500,
            aimed: Vec::new(),
            lines,
            killed_by_trap: false,
        }
    }

    /// The fix of the line_sharing.c case: `stats`'s two counters padded onto lines of their
    /// own, one writer each: the data stopped being shared.
    #[test]
    fn a_padded_struct_stopped_sharing() {
        let shared = watch(&[("stats", &[(1, 0), (2, 8)])]);
        let padded = watch(&[("stats", &[(1, 0)]), ("stats", &[(2, 0)])]);
        let (o, n) = (verdicts(Some(&shared)), verdicts(Some(&padded)));
        assert_eq!(o["stats"], LineVerdict::FalseSharing);
        assert_eq!(n["stats"], LineVerdict::OneThread);
        let c = LineChange {
            data: "stats".into(),
            old: o.get("stats").copied(),
            new: n.get("stats").copied(),
        };
        assert!(c.stopped_sharing());
        assert_eq!(side(None), SideWatch::Absent);
    }
}
