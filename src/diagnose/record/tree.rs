//! The processes a recording follows: an attached process's descendants, found in /proc, and
//! what was followed, grouped by command for the report.
//!
//! A process-per-connection server (PostgreSQL) or a pre-fork one (nginx, Apache) does its
//! work in children that ran before diagnose attached: the events that `inherit` gives a
//! process's threads reach only children forked *after* they were opened, so attaching to
//! the parent alone samples nothing of them. Attaching therefore walks the tree down, all
//! generations, and opens events on every thread of it. A process's children are read from
//! `/proc/PID/task/TID/children` of each of its threads (each thread lists the children it
//! forked); a kernel built without `CONFIG_PROC_CHILDREN` has no such file, and then every
//! `/proc/*/stat` is read for its parent's PID.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;

/// Parses `/proc/PID/task/TID/children`: the PIDs of the children that thread forked,
/// space-separated (with a trailing space).
pub fn parse_children(text: &str) -> Vec<u32> {
    text.split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// The parent's PID in a `/proc/PID/stat` line (its fourth field). The name before it sits in
/// parentheses and may hold spaces and parentheses, so fields are counted from the last `)`.
pub fn parse_ppid(stat: &str) -> Option<u32> {
    let rest = stat.get(stat.rfind(')')? + 1..)?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// `root`'s descendants, all generations, parents before their children (each generation in
/// PID order), from `children_of`. A PID met twice (a list read while it changed) is kept once.
pub fn descendants(root: u32, mut children_of: impl FnMut(u32) -> Vec<u32>) -> Vec<u32> {
    let mut seen = BTreeSet::from([root]);
    let mut out = Vec::new();
    let mut generation = vec![root];
    while !generation.is_empty() {
        let mut next: Vec<u32> = generation
            .iter()
            .flat_map(|&p| children_of(p))
            .filter(|c| seen.insert(*c))
            .collect();
        next.sort_unstable();
        out.extend(&next);
        generation = next;
    }
    out
}

/// [`descendants`] from `(pid, ppid)` pairs, as a scan of every `/proc/*/stat` gives them.
pub fn descendants_by_parent(root: u32, parents: &[(u32, u32)]) -> Vec<u32> {
    let mut children: BTreeMap<u32, Vec<u32>> = BTreeMap::new();
    for &(pid, ppid) in parents {
        children.entry(ppid).or_default().push(pid);
    }
    descendants(root, |p| children.get(&p).cloned().unwrap_or_default())
}

/// The children of process `pid` from its threads' `children` files; `None` when the kernel
/// has no such file (built without `CONFIG_PROC_CHILDREN`) or the process is gone.
fn children_from_task_files(pid: u32) -> Option<Vec<u32>> {
    let mut out = Vec::new();
    let mut any = false;
    for tid in super::target::threads_of(pid as i32) {
        if let Ok(text) = fs::read_to_string(format!("/proc/{pid}/task/{tid}/children")) {
            any = true;
            out.extend(parse_children(&text));
        }
    }
    any.then_some(out)
}

/// `(pid, ppid)` of every process, from `/proc/*/stat`.
fn all_parents() -> Vec<(u32, u32)> {
    let Ok(dir) = fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| {
        let pid: u32 = e.ok()?.file_name().to_str()?.parse().ok()?;
        let ppid = parse_ppid(&fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)?;
        Some((pid, ppid))
    })
    .collect()
}

/// The descendants of `root` now, all generations, parents first (zombies not yet reaped
/// included). Empty when it has none or has gone.
pub fn descendants_of(root: u32) -> Vec<u32> {
    if children_from_task_files(root).is_some() {
        descendants(root, |p| children_from_task_files(p).unwrap_or_default())
    } else {
        descendants_by_parent(root, &all_parents())
    }
}

/// A process's command name (`/proc/PID/comm`: the executable's name, 15 bytes at most, or
/// what the process set with `PR_SET_NAME`); `None` when it has gone.
pub fn command_of(pid: u32) -> Option<String> {
    let text = fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(text.trim_end_matches('\n').to_string())
}

/// One process a recording followed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FollowedProcess {
    /// Its PID.
    pub pid: u32,
    /// Its command name (the last seen: an exec during the recording renames it).
    pub command: String,
    /// True when it ran before the recording began (attached to, or found at the attach);
    /// false when it started while recording (the started command itself included).
    pub at_attach: bool,
    /// True when it had exited when the recording stopped.
    pub exited: bool,
}

/// The processes a recording meets, as it meets them, each named from /proc then (a short
/// one may be gone before the end), and the parent of each one forked while recording.
#[derive(Debug, Default)]
pub struct Followed {
    /// PID -> (command name when met, ran before the recording).
    met: BTreeMap<u32, (Option<String>, bool)>,
    /// PID -> parent PID, from the fork records.
    parents: BTreeMap<u32, u32>,
}

impl Followed {
    /// A process that ran before the recording began: the one attached to, its children then.
    pub fn running(&mut self, pid: u32) {
        self.met.insert(pid, (command_of(pid), true));
    }

    /// A process started while recording (a process met already stays as it was met).
    pub fn started(&mut self, pid: u32) {
        self.met
            .entry(pid)
            .or_insert_with(|| (command_of(pid), false));
    }

    /// Process `pid` was forked by `parent` (a fork record).
    pub fn forked(&mut self, pid: u32, parent: u32) {
        self.parents.insert(pid, parent);
    }

    /// Every process met, in PID order: named by `latest` where it knows the name (an exec
    /// while recording renames a process), else by the name it had when met, else (one that
    /// forked and exited between two looks, without an exec) by its parent's, else `?`;
    /// exited unless `running` says otherwise.
    pub fn finish(
        self,
        latest: impl Fn(u32) -> Option<String>,
        running: impl Fn(u32) -> bool,
    ) -> Vec<FollowedProcess> {
        let own = |pid: u32| {
            latest(pid).or_else(|| self.met.get(&pid).and_then(|(name, _)| name.clone()))
        };
        let name = |pid: u32| {
            // Up the fork records (a PID cannot be its own ancestor; the bound is for safety).
            let mut at = pid;
            for _ in 0..64 {
                if let Some(n) = own(at) {
                    return n;
                }
                match self.parents.get(&at) {
                    Some(&p) => at = p,
                    None => break,
                }
            }
            "?".to_string()
        };
        self.met
            .iter()
            .map(|(&pid, &(_, at_attach))| FollowedProcess {
                pid,
                command: name(pid),
                at_attach,
                exited: !running(pid),
            })
            .collect()
    }
}

/// The processes of one command name that a recording followed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FollowedCommand {
    /// The command name (`comm`).
    pub command: String,
    /// Processes of that name followed.
    pub processes: u64,
    /// Of them, those that ran when diagnose attached.
    pub at_attach: u64,
    /// Of them, those started while recording (a started command counts here).
    pub started: u64,
    /// Of them, those that had exited when the recording stopped.
    pub exited: u64,
    /// Samples taken in them.
    pub samples: u64,
    /// Their PIDs, in order.
    pub pids: Vec<u32>,
}

/// The followed processes grouped by command name, with the samples of each (`samples_by_pid`),
/// most samples first, then most processes, then by name.
pub fn by_command(
    processes: &[FollowedProcess],
    samples_by_pid: &BTreeMap<u32, u64>,
) -> Vec<FollowedCommand> {
    let mut groups: BTreeMap<&str, FollowedCommand> = BTreeMap::new();
    for p in processes {
        let g = groups.entry(&p.command).or_insert_with(|| FollowedCommand {
            command: p.command.clone(),
            processes: 0,
            at_attach: 0,
            started: 0,
            exited: 0,
            samples: 0,
            pids: Vec::new(),
        });
        g.processes += 1;
        if p.at_attach {
            g.at_attach += 1;
        } else {
            g.started += 1;
        }
        g.exited += u64::from(p.exited);
        g.samples += samples_by_pid.get(&p.pid).copied().unwrap_or(0);
        g.pids.push(p.pid);
    }
    let mut v: Vec<FollowedCommand> = groups.into_values().collect();
    for g in &mut v {
        g.pids.sort_unstable();
    }
    v.sort_by(|a, b| {
        b.samples
            .cmp(&a.samples)
            .then(b.processes.cmp(&a.processes))
            .then(a.command.cmp(&b.command))
    });
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_postmasters_children_file_lists_its_backends() {
        // Read from PostgreSQL 15's postmaster (PID 12668) with eight pgbench clients
        // connected: its five auxiliary processes and the backends, with the kernel's trailing
        // space.
        let text = include_str!("../../../tests/fixtures/proc/task/children-postmaster.txt");
        let pids = parse_children(text);
        assert!(text.ends_with(' '), "the fixture is the file as read");
        assert_eq!(pids.len(), 13, "{pids:?}");
        assert_eq!((pids[0], pids[12]), (12669, 12726));
        assert!(parse_children("").is_empty());
    }

    #[test]
    fn the_parent_pid_is_read_after_the_name_whatever_the_name_holds() {
        // A backend of that postmaster (PID 12668), busy under pgbench -S.
        let backend = include_str!("../../../tests/fixtures/proc/task/stat-backend.txt");
        assert_eq!(parse_ppid(backend), Some(12668));
        let postmaster = include_str!("../../../tests/fixtures/proc/task/children-postmaster.txt");
        assert!(parse_children(postmaster).contains(&12726));
        // A name with spaces and parentheses does not shift the fields.
        assert_eq!(
            parse_ppid("42 (my (odd) name) S 7 42 42 0 -1 0 7 0 3 0 250 50"),
            Some(7)
        );
        assert_eq!(parse_ppid("42 (truncated"), None);
    }

    #[test]
    fn descendants_cover_every_generation_once_parents_first() {
        // 1 -> 10, 11; 10 -> 20; 20 -> 30; and 99 elsewhere (not 1's).
        let parents = [(10, 1), (11, 1), (20, 10), (30, 20), (99, 2), (1, 0)];
        assert_eq!(descendants_by_parent(1, &parents), vec![10, 11, 20, 30]);
        assert_eq!(descendants_by_parent(20, &parents), vec![30]);
        assert!(descendants_by_parent(99, &parents).is_empty());
        // A list read while it changed names a child twice: kept once, and no loop.
        let twice = descendants(1, |p| match p {
            1 => vec![10, 10],
            10 => vec![1, 20],
            _ => vec![],
        });
        assert_eq!(twice, vec![10, 20]);
    }

    #[test]
    fn this_process_finds_a_grandchild_through_proc() {
        // sh starts a sleep and waits: the sleep is this process's grandchild.
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & wait"])
            .spawn()
            .unwrap();
        let sh = child.id();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        let sleep = loop {
            let d = descendants_of(sh);
            if !d.is_empty() || std::time::Instant::now() > deadline {
                break d;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        };
        let found = descendants_of(std::process::id());
        let name = command_of(sh);
        let _ = std::process::Command::new("kill")
            .args(sleep.iter().map(u32::to_string))
            .status();
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(sleep.len(), 1, "{sleep:?}");
        // Other tests' children may be there too; sh and its sleep, parent first, are.
        let at = |p: u32| found.iter().position(|&f| f == p);
        assert!(at(sh) < at(sleep[0]) && at(sh).is_some(), "{found:?}");
        assert_eq!(name.as_deref(), Some("sh"));
    }

    #[test]
    fn a_process_is_named_by_its_latest_name_and_counted_once() {
        let me = std::process::id();
        let mut f = Followed::default();
        f.running(me);
        f.started(me); // met again (a fork record after the scan): still one that ran before
        f.started(99_999_999); // gone before it was read: no name from /proc
        f.started(99_999_998);
        // Forked by this process and gone before a look, without an exec: its parent's name.
        f.started(99_999_997);
        f.forked(99_999_997, me);
        let latest = |pid| (pid == 99_999_998).then(|| "sed".to_string());
        let v = f.finish(latest, |pid| pid == me);
        assert_eq!(v.len(), 4);
        let mine = v.iter().find(|p| p.pid == me).unwrap();
        assert!(mine.at_attach && !mine.exited);
        assert_eq!(Some(mine.command.clone()), command_of(me));
        let gone = v.iter().find(|p| p.pid == 99_999_999).unwrap();
        assert_eq!(
            (gone.command.as_str(), gone.at_attach, gone.exited),
            ("?", false, true)
        );
        // An exec while recording renamed it: the latest name wins.
        assert_eq!(
            v.iter().find(|p| p.pid == 99_999_998).unwrap().command,
            "sed"
        );
        let forked = v.iter().find(|p| p.pid == 99_999_997).unwrap();
        assert_eq!(forked.command, mine.command);
    }

    #[test]
    fn followed_processes_group_by_command_with_their_samples() {
        let p = |pid, command: &str, at_attach, exited| FollowedProcess {
            pid,
            command: command.into(),
            at_attach,
            exited,
        };
        let processes = [
            p(100, "postgres", true, false),
            p(102, "postgres", true, false),
            p(101, "postgres", true, true),
            p(200, "postgres", false, false),
            p(300, "psql", false, true),
        ];
        let samples = BTreeMap::from([(100, 5), (102, 40), (200, 10), (300, 90)]);
        let g = by_command(&processes, &samples);
        assert_eq!(g.len(), 2);
        // Most samples first: psql's one process outweighs postgres's four.
        assert_eq!(g[0].command, "psql");
        assert_eq!((g[0].processes, g[0].started, g[0].exited), (1, 1, 1));
        let pg = &g[1];
        assert_eq!(
            (
                pg.processes,
                pg.at_attach,
                pg.started,
                pg.exited,
                pg.samples
            ),
            (4, 3, 1, 1, 55)
        );
        assert_eq!(pg.pids, vec![100, 101, 102, 200]);
    }
}
