//! A target in other namespaces (a container): its paths are in its own mount namespace and
//! its PID is another inside. Files it names (`/proc/PID/maps`, a JVM's home) are read through
//! `/proc/PID/root`; a JIT's perf map is `/tmp/perf-<inner PID>.map` in its own `/tmp`
//! (HotSpot, .NET and V8 name it by `getpid()`, which is the PID the container sees, the last
//! field of `NSpid:` in `/proc/PID/status`). Its root and its `/tmp` are held open while the
//! process runs, so that a map written at exit (`-XX:+DumpPerfMapAtExit`) is still read after
//! `/proc/PID` is gone (and with it the namespace, which unmounts a `/tmp` of its own from
//! every path but an open descriptor). What cannot be read is said, per process, in the diagnosis.

use serde::{Deserialize, Serialize};
use std::fs::File;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// How one process of the target sees the system, when not as diagnose does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespacedProcess {
    /// Its PID as diagnose sees it.
    pub pid: u32,
    /// Its PID inside its own PID namespace (the same as `pid` when it shares diagnose's).
    pub inner_pid: u32,
    /// In a mount namespace other than diagnose's: its files were read through
    /// `/proc/PID/root`.
    pub own_mounts: bool,
    /// In a PID namespace other than diagnose's.
    pub own_pids: bool,
    /// What could not be read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unreadable: Vec<Unreadable>,
}

/// Something of a namespaced process that diagnose could not read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "what", rename_all = "snake_case")]
pub enum Unreadable {
    /// Its root (`/proc/PID/root`): not permitted, or it exited first.
    Root,
    /// A JIT process's perf map, at this path inside it.
    PerfMap {
        /// The path inside the process's mount namespace.
        path: String,
    },
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unreadable::Root => f.write_str("its root (/proc/PID/root)"),
            Unreadable::PerfMap { path } => write!(f, "its perf map {path}"),
        }
    }
}

impl NamespacedProcess {
    /// One line for the report.
    pub fn describe(&self) -> String {
        let which = match (self.own_mounts, self.own_pids) {
            (true, true) => "its own mount and PID namespaces",
            (true, false) => "its own mount namespace",
            (false, true) => "its own PID namespace",
            (false, false) => "diagnose's namespaces",
        };
        let mut line = format!("PID {} runs in {which}", self.pid);
        if self.own_pids {
            line += &format!(" (PID {} inside)", self.inner_pid);
        }
        if self.own_mounts {
            line += &format!("; its files were read through /proc/{}/root", self.pid);
        }
        if !self.unreadable.is_empty() {
            let what: Vec<String> = self.unreadable.iter().map(|u| u.to_string()).collect();
            line += &format!("; could not read {}", what.join(", "));
        }
        line
    }
}

/// A process's view of files and PIDs, taken while it runs.
#[derive(Debug)]
pub struct ProcessView {
    /// Its PID as diagnose sees it.
    pub pid: u32,
    /// Its PID inside its PID namespace.
    pub inner_pid: u32,
    /// In another mount namespace.
    pub own_mounts: bool,
    /// In another PID namespace.
    pub own_pids: bool,
    /// `/proc/PID/root`, held open (other mount namespace only).
    root: Option<File>,
    /// Its `/tmp`, held open (other mount namespace only).
    tmp: Option<File>,
    /// Opening the root failed.
    root_unreadable: bool,
}

/// The namespace a `/proc/.../ns/KIND` link names, as (device, inode).
fn namespace_id(pid: &str, kind: &str) -> Option<(u64, u64)> {
    let m = std::fs::metadata(format!("/proc/{pid}/ns/{kind}")).ok()?;
    Some((m.dev(), m.ino()))
}

/// The last PID of an `NSpid:` line of `/proc/PID/status` (the innermost namespace's).
pub fn inner_pid_of_status(status: &str) -> Option<u32> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("NSpid:"))?
        .split_whitespace()
        .last()?
        .parse()
        .ok()
}

impl ProcessView {
    /// Looks at process `pid` now. A process that is gone, or whose namespaces cannot be
    /// read, is taken to share diagnose's.
    pub fn of(pid: u32) -> ProcessView {
        let p = pid.to_string();
        let differs = |kind: &str| match (namespace_id(&p, kind), namespace_id("self", kind)) {
            (Some(a), Some(b)) => a != b,
            _ => false,
        };
        let own_mounts = differs("mnt");
        let own_pids = differs("pid");
        let inner_pid = std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| inner_pid_of_status(&s))
            .unwrap_or(pid);
        let root = own_mounts
            .then(|| File::open(format!("/proc/{pid}/root")).ok())
            .flatten();
        let tmp = own_mounts
            .then(|| File::open(format!("/proc/{pid}/root/tmp")).ok())
            .flatten();
        ProcessView {
            tmp,
            pid,
            inner_pid,
            own_mounts,
            own_pids,
            root_unreadable: own_mounts && root.is_none(),
            root,
        }
    }

    /// True when it shares neither namespace with diagnose.
    pub fn is_foreign(&self) -> bool {
        self.own_mounts || self.own_pids
    }

    /// Where diagnose reads the path `inside` names in the process's mount namespace: through
    /// its root held open (valid after it exits), else the path itself.
    pub fn path(&self, inside: &Path) -> PathBuf {
        match &self.root {
            Some(root) => {
                let rel = inside.strip_prefix("/").unwrap_or(inside);
                PathBuf::from(format!("/proc/self/fd/{}", root.as_raw_fd())).join(rel)
            }
            None => inside.to_path_buf(),
        }
    }

    /// True when it holds the `/tmp` of another mount namespace open.
    pub fn holds_tmp(&self) -> bool {
        self.tmp.is_some()
    }

    /// The perf map path inside the process (named by its own PID).
    pub fn perf_map_inside(&self) -> PathBuf {
        PathBuf::from(format!("/tmp/perf-{}.map", self.inner_pid))
    }

    /// Where diagnose reads the process's perf map.
    pub fn perf_map(&self) -> PathBuf {
        match &self.tmp {
            Some(tmp) => PathBuf::from(format!(
                "/proc/self/fd/{}/perf-{}.map",
                tmp.as_raw_fd(),
                self.inner_pid
            )),
            None => self.path(&self.perf_map_inside()),
        }
    }

    /// The report's entry for this process (`None` when it shares diagnose's namespaces);
    /// `perf_map_missing` says the process is a JIT whose map was looked for and not read.
    pub fn report(&self, perf_map_missing: bool) -> Option<NamespacedProcess> {
        if !self.is_foreign() {
            return None;
        }
        let mut unreadable = Vec::new();
        if self.root_unreadable {
            unreadable.push(Unreadable::Root);
        }
        if perf_map_missing {
            unreadable.push(Unreadable::PerfMap {
                path: self.perf_map_inside().display().to_string(),
            });
        }
        Some(NamespacedProcess {
            pid: self.pid,
            inner_pid: self.inner_pid,
            own_mounts: self.own_mounts,
            own_pids: self.own_pids,
            unreadable,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_inner_pid_is_the_last_of_nspid() {
        let status = "Name:\tjava\nTgid:\t18299\nNSpid:\t18299\t1\nNSpgid:\t18299\t1\n";
        assert_eq!(inner_pid_of_status(status), Some(1));
        assert_eq!(inner_pid_of_status("NSpid:\t42\n"), Some(42));
        assert_eq!(inner_pid_of_status("Name:\tx\n"), None);
    }

    #[test]
    fn this_process_shares_diagnoses_namespaces_and_reads_its_own_paths() {
        let v = ProcessView::of(std::process::id());
        assert!(!v.is_foreign());
        assert_eq!(v.inner_pid, std::process::id());
        assert_eq!(v.path(Path::new("/tmp/x")), PathBuf::from("/tmp/x"));
        assert_eq!(
            v.perf_map(),
            PathBuf::from(format!("/tmp/perf-{}.map", std::process::id()))
        );
        assert!(v.report(true).is_none());
    }

    #[test]
    fn a_namespaced_process_is_described_in_one_line_with_what_was_unreadable() {
        let n = NamespacedProcess {
            pid: 18299,
            inner_pid: 1,
            own_mounts: true,
            own_pids: true,
            unreadable: vec![Unreadable::PerfMap {
                path: "/tmp/perf-1.map".into(),
            }],
        };
        assert_eq!(
            n.describe(),
            "PID 18299 runs in its own mount and PID namespaces (PID 1 inside); its files were \
             read through /proc/18299/root; could not read its perf map /tmp/perf-1.map"
        );
    }
}
