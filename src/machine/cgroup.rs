//! A process's control groups: where its cpu, cpuacct, memory and pids controllers live, the
//! limits they set (CPU quota, memory limit, pids limit) and the cpu controller's counters
//! (CPU time used, quota periods, periods throttled, time throttled). `diagnose` reads these to
//! say whether a thread that waited for a CPU was held back by its own quota rather than by
//! another process or the hypervisor. A fingerprint's machine facts carry them too
//! ([`CgroupFacts`]: the limits, what the cgroup used, the cpuset), and the memory probes size
//! their buffers to the room a memory limit leaves ([`ProcessCgroup::memory_headroom`]).
//!
//! Where a controller's directory is takes two files: `/proc/PID/cgroup` names the process's
//! cgroup in each hierarchy (`4:memory:/a/b` for v1, `0::/a/b` for v2), and mountinfo says
//! where each hierarchy is mounted and which cgroup the mount shows at its top (the root
//! field, 4th). The directory is the mount point joined with the cgroup path less that root:
//! - a host mount shows the whole hierarchy (root `/`): `/sys/fs/cgroup/cpu` + `/a/b`;
//! - a container's namespaced view: a cgroup namespace shows the container's cgroup as `/` in
//!   both files, so it resolves to the mount point itself;
//! - Docker without cgroup namespaces bind-mounts the container's cgroup over the hierarchy
//!   (root `/docker/ID`, cgroup `/docker/ID`): again the mount point. The bind is stacked on
//!   the host mount, which it hides, so hidden mounts are dropped first;
//! - a mount whose root lies above the reader's cgroup namespace shows as `/..`; no path
//!   under it can be named, so that controller has no directory.
//!
//! Mountinfo is this reader's (`/proc/self/mountinfo`), not the target's: the directory is
//! opened from this mount namespace, and both files give paths relative to the reader's
//! cgroup namespace (Documentation/admin-guide/cgroup-v2.rst, "Namespace").
//!
//! A limit binds every cgroup below it (a Kubernetes pod's quota binds each container in the
//! pod), so the limits are the tightest on the path from the process's cgroup up to the top of
//! what the mount shows, each with the directory that set it. A process in the root cgroup,
//! with no limit on its path or with no such controller gets `None`, never an error; so do
//! missing and malformed files. Readers take a root path, so they are tested on fixture trees
//! (`tests/fixtures/cgroup/`).

use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Component, Path, PathBuf};

/// Which cgroup hierarchies the reader sees mounted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CgroupVersion {
    /// Only v1 hierarchies (one per controller or group of controllers).
    V1,
    /// Only the v2 unified hierarchy.
    V2,
    /// v1 controllers beside a v2 hierarchy (systemd's "hybrid" layout), which then holds no
    /// controller that a v1 hierarchy holds.
    Hybrid,
}

/// The kind of one hierarchy, which decides the files a controller has there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Hierarchy {
    /// A v1 hierarchy (filesystem type `cgroup`).
    V1,
    /// The v2 unified hierarchy (filesystem type `cgroup2`).
    V2,
}

/// One line of `/proc/PID/cgroup`: `hierarchy-ID:controller-list:cgroup-path`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupMembership {
    /// Hierarchy id; 0 for the v2 hierarchy.
    pub hierarchy_id: u32,
    /// Controllers bound to the hierarchy (`cpu`, `cpuacct`, `name=systemd`); empty for v2.
    pub controllers: Vec<String>,
    /// The cgroup, relative to the reader's cgroup namespace (`/` for its top).
    pub path: String,
}

/// Parses `/proc/PID/cgroup`; lines that do not parse are left out.
pub fn parse_proc_cgroup(text: &str) -> Vec<CgroupMembership> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let hierarchy_id = parts.next()?.trim().parse().ok()?;
            let controllers = parts
                .next()?
                .split(',')
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect();
            let path = parts.next()?;
            path.starts_with('/').then(|| CgroupMembership {
                hierarchy_id,
                controllers,
                path: path.to_string(),
            })
        })
        .collect()
}

/// A cgroup filesystem as mountinfo shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupMount {
    /// v1 or v2.
    pub hierarchy: Hierarchy,
    /// The cgroup shown at the mount point, relative to the reader's cgroup namespace
    /// (mountinfo's 4th field: `/` for a whole hierarchy, `/docker/ID` for a bind, `/..` for a
    /// mount above the namespace).
    pub root: String,
    /// Where it is mounted, in the reader's mount namespace.
    pub mount_point: PathBuf,
    /// Super options; for v1 they name the controllers (`rw,cpu,cpuacct`).
    pub options: Vec<String>,
}

impl CgroupMount {
    /// Whether this is a v1 hierarchy holding `controller`.
    pub fn has_controller(&self, controller: &str) -> bool {
        self.hierarchy == Hierarchy::V1 && self.options.iter().any(|o| o == controller)
    }
}

/// One mountinfo line, the fields this module needs.
struct MountEntry {
    id: u32,
    parent: u32,
    root: String,
    mount_point: String,
    fstype: String,
    super_options: String,
}

/// Mountinfo escapes space, tab, newline and backslash in paths as three octal digits.
fn unescape_octal(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let digits = bytes.get(i + 1..i + 4);
        match digits {
            Some(d) if bytes[i] == b'\\' && d.iter().all(|b| (b'0'..=b'7').contains(b)) => {
                out.push(
                    d.iter()
                        .fold(0u8, |v, b| v.wrapping_mul(8).wrapping_add(b - b'0')),
                );
                i += 4;
            }
            _ => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `ID PARENT MAJ:MIN ROOT MOUNT-POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER-OPTIONS`.
fn parse_mount_line(line: &str) -> Option<MountEntry> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    let dash = fields.iter().position(|f| *f == "-")?;
    if dash < 6 {
        return None;
    }
    Some(MountEntry {
        id: fields[0].parse().ok()?,
        parent: fields[1].parse().ok()?,
        root: unescape_octal(fields[3]),
        mount_point: unescape_octal(fields[4]),
        fstype: fields.get(dash + 1)?.to_string(),
        super_options: fields.get(dash + 3).unwrap_or(&"").to_string(),
    })
}

/// Which entries path lookup cannot reach. A mount is covered when another is mounted on top
/// of it at the same point (a bind over the host's hierarchy); its place is reachable when
/// its parent's is and, where it sits on a directory inside its parent rather than on top of
/// it, the parent is not covered. A mount is visible when its place is reachable and nothing
/// covers it.
fn hidden_mounts(entries: &[MountEntry]) -> Vec<bool> {
    let by_id: HashMap<u32, usize> = entries.iter().enumerate().map(|(i, m)| (m.id, i)).collect();
    let stacked: HashSet<(u32, &str)> = entries
        .iter()
        .filter(|n| n.parent != n.id)
        .map(|n| (n.parent, n.mount_point.as_str()))
        .collect();
    let covered: Vec<bool> = entries
        .iter()
        .map(|m| stacked.contains(&(m.id, m.mount_point.as_str())))
        .collect();
    let mut reachable: Vec<Option<bool>> = vec![None; entries.len()];
    for first in 0..entries.len() {
        // Climb to a mount whose answer is known (or the top, whose parent is outside the
        // namespace), then settle the chain on the way down. A cycle, which a real
        // mountinfo cannot have, stops the climb at the length of the table.
        let mut chain = vec![first];
        let mut known = true;
        while let Some(&i) = chain.last() {
            if reachable[i].is_some() {
                break;
            }
            match by_id.get(&entries[i].parent) {
                Some(&p) if p != i && chain.len() <= entries.len() => chain.push(p),
                Some(&p) if p != i => {
                    known = false;
                    break;
                }
                _ => {
                    reachable[i] = Some(true);
                    break;
                }
            }
        }
        while let Some(i) = chain.pop() {
            let Some(&above) = chain.last() else { break };
            let parent_ok = reachable[i].unwrap_or(known);
            let here = &entries[above];
            let on_top = entries[i].mount_point == here.mount_point;
            reachable[above] = Some(parent_ok && (on_top || !covered[i]));
        }
    }
    reachable
        .iter()
        .zip(&covered)
        .map(|(r, c)| *c || !r.unwrap_or(true))
        .collect()
}

/// The cgroup filesystems in mountinfo text that nothing hides, in mountinfo order.
pub fn parse_cgroup_mounts(mountinfo: &str) -> Vec<CgroupMount> {
    let entries: Vec<MountEntry> = mountinfo.lines().filter_map(parse_mount_line).collect();
    let hidden = hidden_mounts(&entries);
    entries
        .into_iter()
        .zip(hidden)
        .filter(|(_, hidden)| !hidden)
        .filter_map(|(e, _)| {
            let hierarchy = match e.fstype.as_str() {
                "cgroup" => Hierarchy::V1,
                "cgroup2" => Hierarchy::V2,
                _ => return None,
            };
            Some(CgroupMount {
                hierarchy,
                root: e.root,
                mount_point: PathBuf::from(e.mount_point),
                options: e.super_options.split(',').map(str::to_string).collect(),
            })
        })
        .collect()
}

/// A controller's directory: a cgroup under a mounted hierarchy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerDir {
    /// v1 or v2: which files the controller has.
    pub hierarchy: Hierarchy,
    /// The hierarchy's mount point, under the root the reader was given.
    pub mount_dir: PathBuf,
    /// The cgroup below the mount point; empty for the cgroup the mount shows at its top.
    pub cgroup: PathBuf,
}

impl ControllerDir {
    /// The directory.
    pub fn dir(&self) -> PathBuf {
        self.mount_dir.join(&self.cgroup)
    }

    /// The parent cgroup, while it is still under the mount point.
    pub fn parent(&self) -> Option<ControllerDir> {
        if self.cgroup.as_os_str().is_empty() {
            return None;
        }
        Some(ControllerDir {
            cgroup: self.cgroup.parent().unwrap_or(Path::new("")).to_path_buf(),
            ..self.clone()
        })
    }

    /// This directory and each parent up to the mount point.
    pub fn up_to_mount(&self) -> impl Iterator<Item = ControllerDir> {
        std::iter::successors(Some(self.clone()), ControllerDir::parent)
    }

    fn read(&self, file: &str) -> Option<String> {
        fs::read_to_string(self.dir().join(file)).ok()
    }
}

/// Where a process's controllers are, as the reader sees them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessCgroup {
    /// The hierarchies mounted.
    pub version: CgroupVersion,
    /// The cpu controller (quota, throttling); on v2 the process's cgroup, whose `cpu.stat`
    /// reports usage even where the cpu controller is not enabled.
    pub cpu: Option<ControllerDir>,
    /// The cpuacct controller (v1 CPU usage); on v2 the same as `cpu`.
    pub cpuacct: Option<ControllerDir>,
    /// The memory controller.
    pub memory: Option<ControllerDir>,
    /// The pids controller.
    pub pids: Option<ControllerDir>,
    /// The cpuset controller (absent from files saved before it was read).
    #[serde(default)]
    pub cpuset: Option<ControllerDir>,
}

/// v1 controllers that mark a hierarchy as a v1 controller hierarchy (a mount of only
/// `name=systemd` holds none and does not make a machine v1).
const V1_CONTROLLERS: &[&str] = &[
    "cpu",
    "cpuacct",
    "cpuset",
    "memory",
    "devices",
    "freezer",
    "net_cls",
    "net_prio",
    "blkio",
    "perf_event",
    "hugetlb",
    "pids",
    "rdma",
    "misc",
];

/// `path` below `root`, both relative to the reader's cgroup namespace; `None` when the path
/// is not under the root or climbs out of the namespace (`/..`).
fn below(path: &str, root: &str) -> Option<PathBuf> {
    let rest = Path::new(path).strip_prefix(root).ok()?;
    rest.components()
        .all(|c| matches!(c, Component::Normal(_)))
        .then(|| rest.to_path_buf())
}

/// `mount_point` under `root` (the reader's `/`, or a fixture tree).
fn under_root(root: &Path, mount_point: &Path) -> PathBuf {
    root.join(mount_point.strip_prefix("/").unwrap_or(mount_point))
}

fn controller_dir(
    root: &Path,
    controller: &str,
    memberships: &[CgroupMembership],
    mounts: &[CgroupMount],
) -> Option<ControllerDir> {
    let place = |m: &CgroupMount, path: &str| {
        Some(ControllerDir {
            hierarchy: m.hierarchy,
            mount_dir: under_root(root, &m.mount_point),
            cgroup: below(path, &m.root)?,
        })
    };
    // A controller bound to a v1 hierarchy is nowhere else.
    if let Some(v1) = memberships
        .iter()
        .find(|l| l.hierarchy_id != 0 && l.controllers.iter().any(|c| c == controller))
    {
        return mounts
            .iter()
            .filter(|m| m.has_controller(controller))
            .find_map(|m| place(m, &v1.path));
    }
    let v2 = memberships
        .iter()
        .find(|l| l.hierarchy_id == 0 && l.controllers.is_empty())?;
    mounts
        .iter()
        .filter(|m| m.hierarchy == Hierarchy::V2)
        .find_map(|m| place(m, &v2.path))
}

/// Where a process's controllers are, from its `/proc/PID/cgroup` lines and the reader's
/// cgroup mounts; mount points are taken under `root`. `None` when no cgroup filesystem is
/// mounted.
pub fn locate(
    root: &Path,
    memberships: &[CgroupMembership],
    mounts: &[CgroupMount],
) -> Option<ProcessCgroup> {
    let v1 = mounts
        .iter()
        .any(|m| V1_CONTROLLERS.iter().any(|c| m.has_controller(c)));
    let v2 = mounts.iter().any(|m| m.hierarchy == Hierarchy::V2);
    let version = match (v1, v2) {
        (true, true) => CgroupVersion::Hybrid,
        (true, false) => CgroupVersion::V1,
        (false, true) => CgroupVersion::V2,
        (false, false) => return None,
    };
    let dir = |c| controller_dir(root, c, memberships, mounts);
    Some(ProcessCgroup {
        version,
        cpu: dir("cpu"),
        cpuacct: dir("cpuacct"),
        memory: dir("memory"),
        pids: dir("pids"),
        cpuset: dir("cpuset"),
    })
}

fn read_cgroup_of(root: &Path, proc_entry: &str) -> Option<ProcessCgroup> {
    let proc = root.join("proc");
    let cgroup = fs::read_to_string(proc.join(proc_entry).join("cgroup")).ok()?;
    let mountinfo = fs::read_to_string(proc.join("self/mountinfo")).ok()?;
    locate(
        root,
        &parse_proc_cgroup(&cgroup),
        &parse_cgroup_mounts(&mountinfo),
    )
}

/// Where process `pid`'s controllers are, reading `ROOT/proc/PID/cgroup` and the reader's
/// `ROOT/proc/self/mountinfo`; `None` when either cannot be read or nothing is mounted.
pub fn read_process_cgroup(root: &Path, pid: u32) -> Option<ProcessCgroup> {
    read_cgroup_of(root, &pid.to_string())
}

/// Where this process's controllers are (`ROOT/proc/self/cgroup`).
pub fn read_self_cgroup(root: &Path) -> Option<ProcessCgroup> {
    read_cgroup_of(root, "self")
}

/// Where process `pid`'s controllers are on this machine.
pub fn process_cgroup(pid: u32) -> Option<ProcessCgroup> {
    read_process_cgroup(Path::new("/"), pid)
}

/// A CFS bandwidth limit: the cgroup's threads may run `quota_us` of CPU time in each
/// `period_us`, on any number of CPUs, then wait for the next period (throttled).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuQuota {
    /// CPU time allowed per period, in microseconds.
    pub quota_us: u64,
    /// The period, in microseconds (100000 by default).
    pub period_us: u64,
}

impl CpuQuota {
    /// The limit in CPUs (quota over period): 0.5 is half a CPU's time.
    pub fn cpus(&self) -> f64 {
        self.quota_us as f64 / self.period_us as f64
    }
}

/// Parses v2 `cpu.max`: `QUOTA PERIOD`, `max PERIOD` for none.
pub fn parse_cpu_max(text: &str) -> Option<CpuQuota> {
    let mut fields = text.split_whitespace();
    let quota = fields.next()?;
    let period_us = fields.next()?.parse().ok().filter(|&p| p > 0)?;
    if quota == "max" {
        return None;
    }
    let quota_us = quota.parse().ok().filter(|&q| q > 0)?;
    Some(CpuQuota {
        quota_us,
        period_us,
    })
}

/// Parses v1 `cpu.cfs_quota_us` (`-1` for none) and `cpu.cfs_period_us`.
pub fn parse_cfs_quota(quota_text: &str, period_text: &str) -> Option<CpuQuota> {
    let quota: i64 = quota_text.trim().parse().ok()?;
    let period_us = period_text.trim().parse().ok().filter(|&p| p > 0)?;
    Some(CpuQuota {
        quota_us: u64::try_from(quota).ok().filter(|&q| q > 0)?,
        period_us,
    })
}

/// A memory limit at or above this is no limit. v1 writes "none" as the largest page count
/// times the page size (9223372036854771712 with 4 KiB pages, a little less with 64 KiB
/// pages); 4 EiB is far above any machine and below every such value.
pub const UNLIMITED_MEMORY_FLOOR_BYTES: u64 = 1 << 62;

/// Parses v2 `memory.max`: bytes, or `max` for none.
pub fn parse_memory_max(text: &str) -> Option<u64> {
    let t = text.trim();
    if t == "max" {
        return None;
    }
    t.parse().ok().filter(|&b| b < UNLIMITED_MEMORY_FLOOR_BYTES)
}

/// Parses v1 `memory.limit_in_bytes`, where none is a huge number.
pub fn parse_memory_limit_in_bytes(text: &str) -> Option<u64> {
    text.trim()
        .parse()
        .ok()
        .filter(|&b| b < UNLIMITED_MEMORY_FLOOR_BYTES)
}

/// Parses `pids.max` (v1 and v2): a count, or `max` for none.
pub fn parse_pids_max(text: &str) -> Option<u64> {
    text.trim().parse().ok()
}

/// The CPU quota set in this one cgroup.
pub fn read_cpu_quota(dir: &ControllerDir) -> Option<CpuQuota> {
    match dir.hierarchy {
        Hierarchy::V2 => parse_cpu_max(&dir.read("cpu.max")?),
        Hierarchy::V1 => parse_cfs_quota(
            &dir.read("cpu.cfs_quota_us")?,
            &dir.read("cpu.cfs_period_us")?,
        ),
    }
}

/// The memory limit set in this one cgroup, in bytes.
pub fn read_memory_limit_bytes(dir: &ControllerDir) -> Option<u64> {
    match dir.hierarchy {
        Hierarchy::V2 => parse_memory_max(&dir.read("memory.max")?),
        Hierarchy::V1 => parse_memory_limit_in_bytes(&dir.read("memory.limit_in_bytes")?),
    }
}

/// Memory this one cgroup uses, in bytes, less its inactive file cache, which the kernel
/// reclaims before it counts against the limit (the "working set" Kubernetes and `docker stats`
/// report): v2 `memory.current` less `inactive_file` of `memory.stat`, v1
/// `memory.usage_in_bytes` less `total_inactive_file`.
pub fn read_memory_usage_bytes(dir: &ControllerDir) -> Option<u64> {
    let (usage, inactive) = match dir.hierarchy {
        Hierarchy::V2 => (dir.read("memory.current")?, "inactive_file"),
        Hierarchy::V1 => (dir.read("memory.usage_in_bytes")?, "total_inactive_file"),
    };
    let usage: u64 = usage.trim().parse().ok()?;
    let inactive = dir
        .read("memory.stat")
        .and_then(|t| flat_keyed(&t, inactive))
        .unwrap_or(0);
    Some(usage.saturating_sub(inactive))
}

/// The tasks in this one cgroup and below (`pids.current`).
pub fn read_pids_current(dir: &ControllerDir) -> Option<u64> {
    dir.read("pids.current")?.trim().parse().ok()
}

/// The CPUs this cgroup may run on, as the kernel lists them (`0-3,6`): v2
/// `cpuset.cpus.effective`, v1 `cpuset.effective_cpus` (or `cpuset.cpus` on kernels without).
pub fn read_cpuset_cpus(dir: &ControllerDir) -> Option<String> {
    let files: &[&str] = match dir.hierarchy {
        Hierarchy::V2 => &["cpuset.cpus.effective"],
        Hierarchy::V1 => &["cpuset.effective_cpus", "cpuset.cpus"],
    };
    files
        .iter()
        .find_map(|f| dir.read(f))
        .map(|t| t.trim().to_string())
        .filter(|t| !t.is_empty())
}

/// The pids limit set in this one cgroup.
pub fn read_pids_max(dir: &ControllerDir) -> Option<u64> {
    parse_pids_max(&dir.read("pids.max")?)
}

/// A limit, and the cgroup that set it (the process's own or one above it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Limit<T> {
    /// The limit.
    pub value: T,
    /// The cgroup whose file set it.
    pub at: ControllerDir,
}

/// The limits that bind a process: for each, the tightest on the path from its cgroup up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CgroupLimits {
    /// CPU quota (the fewest CPUs).
    pub cpu_quota: Option<Limit<CpuQuota>>,
    /// Memory limit in bytes.
    pub memory_limit_bytes: Option<Limit<u64>>,
    /// Most tasks (processes and threads).
    pub pids_max: Option<Limit<u64>>,
}

/// The tightest (least `key`) value `read` finds from `dir` up to its mount point.
fn tightest<T, K: PartialOrd>(
    dir: Option<&ControllerDir>,
    read: impl Fn(&ControllerDir) -> Option<T>,
    key: impl Fn(&T) -> K,
) -> Option<Limit<T>> {
    dir?.up_to_mount()
        .filter_map(|at| {
            Some(Limit {
                value: read(&at)?,
                at,
            })
        })
        .fold(None, |best: Option<Limit<T>>, l| match best {
            Some(b) if key(&b.value) <= key(&l.value) => Some(b),
            _ => Some(l),
        })
}

/// CPU counters of a cgroup at one moment. Each is absent where the file or field is: v2
/// shows the throttling fields only where the cpu controller is enabled, v1 keeps usage in
/// the cpuacct hierarchy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CpuStat {
    /// CPU time used by the cgroup's tasks since it was made, in ns (v2 `usage_usec`, v1
    /// `cpuacct.usage`).
    pub usage_ns: Option<u64>,
    /// Quota periods in which the cgroup had runnable tasks (`nr_periods`).
    pub periods: Option<u64>,
    /// Periods that ended with the quota spent and tasks held back (`nr_throttled`).
    pub throttled_periods: Option<u64>,
    /// Time the cgroup's run queues spent throttled, in ns (v2 `throttled_usec`, v1
    /// `throttled_time`); one queue per CPU, so this can pass wall time.
    pub throttled_ns: Option<u64>,
}

impl CpuStat {
    fn is_empty(&self) -> bool {
        *self == CpuStat::default()
    }
}

/// `key value` lines.
fn flat_keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok())?
    })
}

/// Parses v2 `cpu.stat`; `None` when it holds none of the fields.
pub fn parse_cpu_stat_v2(text: &str) -> Option<CpuStat> {
    let f = |k| flat_keyed(text, k);
    let stat = CpuStat {
        usage_ns: f("usage_usec").map(|us| us.saturating_mul(1000)),
        periods: f("nr_periods"),
        throttled_periods: f("nr_throttled"),
        throttled_ns: f("throttled_usec").map(|us| us.saturating_mul(1000)),
    };
    (!stat.is_empty()).then_some(stat)
}

/// Parses v1 `cpu.stat` and `cpuacct.usage` (ns), either of which may be missing; `None`
/// when neither gives a field.
pub fn parse_cpu_stat_v1(cpu_stat: Option<&str>, cpuacct_usage: Option<&str>) -> Option<CpuStat> {
    let f = |k| cpu_stat.and_then(|t| flat_keyed(t, k));
    let stat = CpuStat {
        usage_ns: cpuacct_usage.and_then(|t| t.trim().parse().ok()),
        periods: f("nr_periods"),
        throttled_periods: f("nr_throttled"),
        throttled_ns: f("throttled_time"),
    };
    (!stat.is_empty()).then_some(stat)
}

/// The memory a cgroup limit leaves: of the cgroups on the path from the process's up, the
/// one with the least room (limit less use).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MemoryHeadroom {
    /// The limit, in bytes.
    pub limit_bytes: u64,
    /// What the cgroup uses, in bytes (see [`read_memory_usage_bytes`]).
    pub usage_bytes: u64,
    /// The cgroup whose limit it is.
    pub at: ControllerDir,
}

impl MemoryHeadroom {
    /// Limit less use.
    pub fn room_bytes(&self) -> u64 {
        self.limit_bytes.saturating_sub(self.usage_bytes)
    }
}

/// The cgroup facts a fingerprint records (`machine.cgroup`): the limits that bind the process
/// that measured and what it had used of them when `check` began. Every field is absent where
/// the controller or file is.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CgroupFacts {
    /// `v1`, `v2` or `hybrid`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<CgroupVersion>,
    /// The memory limit with the least room, in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_limit_bytes: Option<u64>,
    /// What the cgroup of that limit used (the process's own where there is none), in bytes,
    /// less inactive file cache.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_usage_bytes: Option<u64>,
    /// The CPU quota with the fewest CPUs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_quota: Option<CpuQuota>,
    /// The cpu controller's counters of the cgroup whose quota binds (the process's own where
    /// there is none), since it was made.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_stat: Option<CpuStat>,
    /// The CPUs the process's cpuset allows, as the kernel lists them (`0-3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpuset_cpus: Option<String>,
    /// The tightest pids limit.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids_max: Option<u64>,
    /// Tasks in the cgroup of that limit (the process's own where there is none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids_current: Option<u64>,
    /// What `cpu_stat` did from when the machine was read to the end of the probes (see
    /// [`CgroupFacts::note_end`]): the throttling the measurement ran under.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_stat_while_measuring: Option<CpuStatDelta>,
}

impl CgroupFacts {
    /// Whether any limit binds (memory, CPU quota or pids).
    pub fn limited(&self) -> bool {
        self.memory_limit_bytes.is_some() || self.cpu_quota.is_some() || self.pids_max.is_some()
    }

    /// Records what the cpu counters did since these facts were read, from `end`, the same
    /// cgroup's facts read when the probes are done.
    pub fn note_end(&mut self, end: &CgroupFacts) {
        self.cpu_stat_while_measuring = match (&self.cpu_stat, &end.cpu_stat) {
            (Some(a), Some(b)) => Some(CpuStatDelta::between(a, b)),
            _ => None,
        };
    }
}

/// This process's cgroup facts; `None` when no cgroup filesystem can be read.
pub fn self_facts() -> Option<CgroupFacts> {
    Some(read_self_cgroup(Path::new("/"))?.facts())
}

impl ProcessCgroup {
    /// The cgroup facts of the process, read now.
    pub fn facts(&self) -> CgroupFacts {
        let limits = self.limits();
        let headroom = self.memory_headroom();
        let quota_at = limits
            .cpu_quota
            .as_ref()
            .map(|l| &l.at)
            .or(self.cpu.as_ref());
        let pids_at = limits
            .pids_max
            .as_ref()
            .map(|l| &l.at)
            .or(self.pids.as_ref());
        CgroupFacts {
            version: Some(self.version),
            memory_limit_bytes: headroom.as_ref().map(|h| h.limit_bytes),
            memory_usage_bytes: match &headroom {
                Some(h) => Some(h.usage_bytes),
                None => self.memory.as_ref().and_then(read_memory_usage_bytes),
            },
            cpu_quota: limits.cpu_quota.as_ref().map(|l| l.value),
            cpu_stat: quota_at.and_then(|at| self.cpu_stat_at(at)),
            cpuset_cpus: self.cpuset.as_ref().and_then(read_cpuset_cpus),
            pids_max: limits.pids_max.as_ref().map(|l| l.value),
            pids_current: pids_at.and_then(read_pids_current),
            cpu_stat_while_measuring: None,
        }
    }

    /// Of the memory limits on the path from the process's cgroup up, the one that leaves the
    /// least room; `None` where no limit is set or its use cannot be read.
    pub fn memory_headroom(&self) -> Option<MemoryHeadroom> {
        self.memory
            .as_ref()?
            .up_to_mount()
            .filter_map(|at| {
                Some(MemoryHeadroom {
                    limit_bytes: read_memory_limit_bytes(&at)?,
                    usage_bytes: read_memory_usage_bytes(&at)?,
                    at,
                })
            })
            .min_by_key(MemoryHeadroom::room_bytes)
    }

    /// The limits that bind the process.
    pub fn limits(&self) -> CgroupLimits {
        CgroupLimits {
            cpu_quota: tightest(self.cpu.as_ref(), read_cpu_quota, CpuQuota::cpus),
            memory_limit_bytes: tightest(self.memory.as_ref(), read_memory_limit_bytes, |b| *b),
            pids_max: tightest(self.pids.as_ref(), read_pids_max, |n| *n),
        }
    }

    /// The CPU counters of the process's own cgroup.
    pub fn cpu_stat(&self) -> Option<CpuStat> {
        self.cpu_stat_at(self.cpu.as_ref()?)
    }

    /// The CPU counters of `cpu`, a cgroup of the cpu hierarchy (the one whose quota binds,
    /// from [`ProcessCgroup::limits`]). On v1 the usage comes from the cgroup of the same
    /// path in the cpuacct hierarchy, the same directory where the two are mounted together;
    /// the tools that make cgroups (systemd, container runtimes) make the same path in each.
    pub fn cpu_stat_at(&self, cpu: &ControllerDir) -> Option<CpuStat> {
        match cpu.hierarchy {
            Hierarchy::V2 => parse_cpu_stat_v2(&cpu.read("cpu.stat")?),
            Hierarchy::V1 => {
                let usage = self.cpuacct.as_ref().and_then(|acct| {
                    ControllerDir {
                        cgroup: cpu.cgroup.clone(),
                        ..acct.clone()
                    }
                    .read("cpuacct.usage")
                });
                parse_cpu_stat_v1(cpu.read("cpu.stat").as_deref(), usage.as_deref())
            }
        }
    }
}

/// What a cgroup's CPU counters did between two snapshots. A field is absent where either
/// snapshot lacks it, or where it went backwards (the cgroup was removed and made again).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct CpuStatDelta {
    /// CPU time used, in ns.
    pub usage_ns: Option<u64>,
    /// Quota periods with runnable tasks.
    pub periods: Option<u64>,
    /// Periods that ended throttled.
    pub throttled_periods: Option<u64>,
    /// Time throttled, in ns (summed over the cgroup's per-CPU run queues).
    pub throttled_ns: Option<u64>,
}

impl CpuStatDelta {
    /// The change from `start` to `end`.
    pub fn between(start: &CpuStat, end: &CpuStat) -> CpuStatDelta {
        let d = |a: Option<u64>, b: Option<u64>| b?.checked_sub(a?);
        CpuStatDelta {
            usage_ns: d(start.usage_ns, end.usage_ns),
            periods: d(start.periods, end.periods),
            throttled_periods: d(start.throttled_periods, end.throttled_periods),
            throttled_ns: d(start.throttled_ns, end.throttled_ns),
        }
    }

    /// The share of periods that ended throttled; `None` when no period ran.
    pub fn throttled_ratio(&self) -> Option<f64> {
        let periods = self.periods.filter(|&p| p > 0)?;
        Some(self.throttled_periods? as f64 / periods as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(case: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/cgroup")
            .join(case)
    }

    fn text(case: &str, file: &str) -> String {
        fs::read_to_string(fixture(case).join(file)).unwrap()
    }

    const MIB: u64 = 1 << 20;

    #[test]
    fn v1_process_in_the_root_cpu_cgroup_has_no_limits() {
        // This 2-vCPU guest: v1 controllers beside a v2 hierarchy at /sys/fs/cgroup/unified;
        // cpu at the root, memory in a child with no limit.
        let root = fixture("v1-hybrid-root");
        let cg = read_self_cgroup(&root).unwrap();
        assert_eq!(cg.version, CgroupVersion::Hybrid);
        let cpu = cg.cpu.as_ref().unwrap();
        assert_eq!(cpu.hierarchy, Hierarchy::V1);
        assert_eq!(cpu.dir(), root.join("sys/fs/cgroup/cpu"));
        assert_eq!(
            cg.cpuacct.as_ref().unwrap().dir(),
            root.join("sys/fs/cgroup/cpuacct")
        );
        assert_eq!(
            cg.memory.as_ref().unwrap().dir(),
            root.join("sys/fs/cgroup/memory/process_api/93549c420b2e41f008a114784e28cf51")
        );
        let limits = cg.limits();
        assert_eq!(limits.cpu_quota, None, "cfs_quota_us -1 is no quota");
        assert_eq!(limits.memory_limit_bytes, None, "a huge v1 limit is none");
        assert_eq!(
            limits.pids_max, None,
            "the root pids cgroup has no pids.max"
        );
        let stat = cg.cpu_stat().unwrap();
        assert_eq!(stat.usage_ns, Some(682119155450));
        assert_eq!(
            (stat.periods, stat.throttled_periods, stat.throttled_ns),
            (Some(0), Some(0), Some(0))
        );
    }

    #[test]
    fn v1_quota_of_half_a_cpu_throttles_a_busy_loop() {
        // A shell loop for 2 s in a child with cpu.cfs_quota_us 50000, memory 512 MiB, pids
        // 64, read through the loop's own /proc/PID/cgroup (pid renamed 4242).
        let root = fixture("v1-hybrid-quota");
        let cg = read_process_cgroup(&root, 4242).unwrap();
        assert_eq!(cg.version, CgroupVersion::Hybrid);
        let cpu = cg.cpu.clone().unwrap();
        assert_eq!(cpu.cgroup, Path::new("cpudoctor-test"));
        let limits = cg.limits();
        let quota = limits.cpu_quota.unwrap();
        assert_eq!(
            quota.value,
            CpuQuota {
                quota_us: 50000,
                period_us: 100000
            }
        );
        assert_eq!(quota.value.cpus(), 0.5);
        assert_eq!(quota.at, cpu, "the child set it, not the root");
        assert_eq!(limits.memory_limit_bytes.unwrap().value, 512 * MIB);
        assert_eq!(limits.pids_max.unwrap().value, 64);

        let end = cg.cpu_stat_at(&quota.at).unwrap();
        let start = parse_cpu_stat_v1(
            Some(&text("v1-hybrid-quota", "start/cpu.stat")),
            Some(&text("v1-hybrid-quota", "start/cpuacct.usage")),
        )
        .unwrap();
        let d = CpuStatDelta::between(&start, &end);
        assert_eq!(d.periods, Some(20));
        assert_eq!(d.throttled_periods, Some(20));
        assert_eq!(d.throttled_ratio(), Some(1.0));
        // 2 s of wall time at half a CPU: ~1 s run, ~1 s throttled.
        assert_eq!(d.usage_ns, Some(1_000_197_053));
        assert_eq!(d.throttled_ns, Some(999_250_731));

        // The same window in the v2 hierarchy's cpu.stat (usage only: cpu is bound to v1).
        let v2_start = parse_cpu_stat_v2(&text("v1-hybrid-quota", "start/unified.cpu.stat"));
        let v2_end = parse_cpu_stat_v2(&text(
            "v1-hybrid-quota",
            "sys/fs/cgroup/unified/cpudoctor-test/cpu.stat",
        ));
        let v2 = CpuStatDelta::between(&v2_start.unwrap(), &v2_end.unwrap());
        assert_eq!(v2.usage_ns, Some(1_000_197_000));
        assert_eq!(v2.periods, None);
    }

    #[test]
    fn a_container_with_its_own_cgroup_namespace_sees_its_cgroup_as_the_root() {
        // unshare -C -m in a child with a 0.25-CPU quota, the hierarchies mounted again inside
        // as a container runtime does: /proc/self/cgroup says `/`, mountinfo's root `/`.
        let root = fixture("v1-cgroupns-container");
        let cg = read_self_cgroup(&root).unwrap();
        let cpu = cg.cpu.as_ref().unwrap();
        assert_eq!(cpu.dir(), root.join("sys/fs/cgroup/cpu"));
        assert_eq!(cpu.parent(), None, "nothing above the namespace is visible");
        let limits = cg.limits();
        assert_eq!(limits.cpu_quota.unwrap().value.cpus(), 0.25);
        assert_eq!(limits.memory_limit_bytes.unwrap().value, 256 * MIB);
        assert_eq!(limits.pids_max.unwrap().value, 32);
        let stat = cg.cpu_stat().unwrap();
        assert_eq!((stat.periods, stat.throttled_periods), (Some(1), Some(1)));
        assert_eq!(stat.usage_ns, Some(45337114));
    }

    #[test]
    fn mounts_rooted_above_the_cgroup_namespace_give_no_directory() {
        // The same namespace before remounting: the host's mounts show root `/..`.
        let cg = read_self_cgroup(&fixture("v1-cgroupns-host-mounts")).unwrap();
        assert_eq!(cg.version, CgroupVersion::Hybrid);
        assert_eq!((&cg.cpu, &cg.memory, &cg.pids), (&None, &None, &None));
        let limits = cg.limits();
        assert_eq!(limits.cpu_quota, None);
        assert_eq!(limits.memory_limit_bytes, None);
        assert_eq!(cg.cpu_stat(), None);
    }

    #[test]
    fn a_cgroup_bind_mounted_over_the_hierarchy_is_the_mount_point() {
        // Docker before cgroup namespaces: /proc/self/cgroup says /cpudoctor-test and the
        // container's cgroup is bind-mounted (root /cpudoctor-test) over the host's mount,
        // which it hides.
        let root = fixture("v1-bind-mounted");
        let mounts = parse_cgroup_mounts(&text("v1-bind-mounted", "proc/self/mountinfo"));
        let cpu_mounts: Vec<_> = mounts.iter().filter(|m| m.has_controller("cpu")).collect();
        assert_eq!(
            cpu_mounts.len(),
            1,
            "the host mount under the bind is hidden"
        );
        assert_eq!(cpu_mounts[0].root, "/cpudoctor-test");
        let cg = read_self_cgroup(&root).unwrap();
        let cpu = cg.cpu.as_ref().unwrap();
        assert_eq!(cpu.dir(), root.join("sys/fs/cgroup/cpu"));
        assert_eq!(cpu.cgroup, Path::new(""));
        let limits = cg.limits();
        assert_eq!(limits.cpu_quota.unwrap().value.cpus(), 0.25);
        assert_eq!(limits.memory_limit_bytes.unwrap().value, 256 * MIB);
        assert_eq!(limits.pids_max.unwrap().value, 32);
        assert_eq!(cg.cpu_stat().unwrap().usage_ns, Some(20392384));
    }

    #[test]
    fn v2_host_without_the_cpu_controller_has_usage_but_no_quota() {
        // A pure-v2 guest (the GPU machine): the shell's cgroup has only the memory
        // controller, memory.max `max`; cpu.stat has usage and no throttling fields.
        let root = fixture("v2-host");
        let cg = read_self_cgroup(&root).unwrap();
        assert_eq!(cg.version, CgroupVersion::V2);
        let cpu = cg.cpu.clone().unwrap();
        assert_eq!(cpu.hierarchy, Hierarchy::V2);
        assert_eq!(
            cpu.dir(),
            root.join("sys/fs/cgroup/process_api/59cb03ff2a5219a6dc565e977f575b47")
        );
        assert_eq!(cg.memory, Some(cpu.clone()));
        assert_eq!(cg.cpuacct, Some(cpu.clone()));
        let limits = cg.limits();
        assert_eq!(limits.cpu_quota, None, "no cpu.max on the path");
        assert_eq!(limits.memory_limit_bytes, None, "memory.max is `max`");
        assert_eq!(limits.pids_max, None);
        let stat = cg.cpu_stat().unwrap();
        assert_eq!(stat.usage_ns, Some(42_289_000));
        assert_eq!(stat.periods, None);
        // The root's cpu.stat, where the cpu controller is on, has the throttling fields.
        let top = cpu.up_to_mount().last().unwrap();
        assert_eq!(top.dir(), root.join("sys/fs/cgroup"));
        assert_eq!(cg.cpu_stat_at(&top).unwrap().periods, Some(0));

        // A busy loop in a child for 2 s, no quota: 2 s of CPU.
        let child = read_process_cgroup(&root, 4242).unwrap();
        let end = child.cpu_stat().unwrap();
        let start = parse_cpu_stat_v2(&text("v2-host", "start/cpu.stat")).unwrap();
        let d = CpuStatDelta::between(&start, &end);
        assert_eq!(d.usage_ns, Some(2_003_734_000));
        assert_eq!(d.throttled_ratio(), None);
    }

    #[test]
    fn v2_the_pods_quota_binds_a_container_with_none_of_its_own() {
        // Hand-made (tests/fixtures/cgroup/README.md): the pod slice has cpu.max 50000 100000,
        // the container scope `max`; memory is tightest at the container.
        let root = fixture("v2-kubepods-handmade");
        let cg = read_self_cgroup(&root).unwrap();
        let cpu = cg.cpu.clone().unwrap();
        let pod = cpu.parent().unwrap();
        assert!(pod.cgroup.ends_with("kubepods-burstable-pod0f1e2d3c.slice"));
        let limits = cg.limits();
        let quota = limits.cpu_quota.unwrap();
        assert_eq!(quota.value.cpus(), 0.5);
        assert_eq!(quota.at, pod);
        let memory = limits.memory_limit_bytes.unwrap();
        assert_eq!((memory.value, memory.at), (512 * MIB, cpu.clone()));
        assert_eq!(limits.pids_max.unwrap().value, 4096);
        // Throttling shows in the pod's counters, not the container's.
        assert_eq!(cg.cpu_stat().unwrap().throttled_periods, Some(0));
        let start = parse_cpu_stat_v2(&text("v2-kubepods-handmade", "start/pod.cpu.stat"));
        let d = CpuStatDelta::between(&start.unwrap(), &cg.cpu_stat_at(&pod).unwrap());
        assert_eq!(d.periods, Some(20));
        assert_eq!(d.throttled_periods, Some(20));
        assert_eq!(d.throttled_ns, Some(1_000_000_000));
        assert_eq!(d.usage_ns, Some(1_000_000_000));
    }

    #[test]
    fn v2_container_namespace_with_optional_mountinfo_fields() {
        // Hand-made: a Docker container with a private cgroup namespace (`0::/`), mountinfo
        // with an optional field (`master:405`) before the separator.
        let root = fixture("v2-container-handmade");
        let cg = read_self_cgroup(&root).unwrap();
        assert_eq!(cg.version, CgroupVersion::V2);
        assert_eq!(cg.cpu.as_ref().unwrap().dir(), root.join("sys/fs/cgroup"));
        let limits = cg.limits();
        assert_eq!(limits.cpu_quota.unwrap().value.cpus(), 1.5);
        assert_eq!(limits.memory_limit_bytes.unwrap().value, 2048 * MIB);
        assert_eq!(limits.pids_max, None);
        let stat = cg.cpu_stat().unwrap();
        assert_eq!(stat.throttled_ns, Some(3_260_541_000));
    }

    #[test]
    fn quota_and_limit_files_in_each_form() {
        let half = Some(CpuQuota {
            quota_us: 50000,
            period_us: 100000,
        });
        assert_eq!(parse_cpu_max("50000 100000\n"), half);
        assert_eq!(parse_cpu_max("max 100000\n"), None);
        assert_eq!(parse_cfs_quota("50000\n", "100000\n"), half);
        assert_eq!(parse_cfs_quota("-1\n", "100000\n"), None);
        assert_eq!(parse_memory_max("max\n"), None);
        assert_eq!(parse_memory_max("536870912\n"), Some(512 * MIB));
        assert_eq!(
            parse_memory_limit_in_bytes("9223372036854771712\n"),
            None,
            "v1's none with 4 KiB pages"
        );
        assert_eq!(
            parse_memory_limit_in_bytes("9223372036854710272\n"),
            None,
            "v1's none with 64 KiB pages"
        );
        assert_eq!(parse_pids_max("max\n"), None);
        assert_eq!(parse_pids_max("64\n"), Some(64));
    }

    #[test]
    fn v1_facts_read_the_limits_use_less_inactive_cache_pids_and_cpuset() {
        let root = fixture("v1-hybrid-quota");
        let cg = read_process_cgroup(&root, 4242).unwrap();
        let usage: u64 = text(
            "v1-hybrid-quota",
            "sys/fs/cgroup/memory/cpudoctor-test/memory.usage_in_bytes",
        )
        .trim()
        .parse()
        .unwrap();
        let f = cg.facts();
        assert_eq!(f.version, Some(CgroupVersion::Hybrid));
        assert_eq!(f.memory_limit_bytes, Some(512 * MIB));
        // The 50 MB file read into the cache is inactive: it does not count as use.
        let used = f.memory_usage_bytes.unwrap();
        assert!(used < usage && used > 64 * MIB, "{used} of {usage}");
        assert_eq!(f.cpu_quota.map(|q| q.cpus()), Some(0.5));
        assert!(f.cpu_stat.unwrap().throttled_periods.is_some());
        assert_eq!(f.pids_max, Some(64));
        assert!(f.pids_current.is_some_and(|n| n >= 1));
        assert_eq!(f.cpuset_cpus.as_deref(), Some("0-1"));
        assert!(f.limited());
        let h = cg.memory_headroom().unwrap();
        assert_eq!(h.room_bytes(), 512 * MIB - used);
    }

    #[test]
    fn v2_headroom_is_the_cgroup_with_the_least_room_not_the_least_limit() {
        // The container may use 512 MiB and uses 96 MiB (128 less 32 inactive); its pod may
        // use 1 GiB and uses 900 MiB: the pod leaves less.
        let root = fixture("v2-kubepods-handmade");
        let cg = read_self_cgroup(&root).unwrap();
        assert_eq!(cg.limits().memory_limit_bytes.unwrap().value, 512 * MIB);
        let h = cg.memory_headroom().unwrap();
        assert_eq!((h.limit_bytes, h.usage_bytes), (1024 * MIB, 900 * MIB));
        assert_eq!(h.room_bytes(), 124 * MIB);
        let f = cg.facts();
        assert_eq!(f.memory_limit_bytes, Some(1024 * MIB));
        assert_eq!(f.cpuset_cpus.as_deref(), Some("0-3"));
    }

    #[test]
    fn facts_without_any_limit_say_none_and_old_files_load() {
        let f = read_self_cgroup(&fixture("v1-hybrid-root"))
            .unwrap()
            .facts();
        assert!(!f.limited(), "{f:?}");
        let old: CgroupFacts = serde_json::from_str("{}").unwrap();
        assert_eq!(old, CgroupFacts::default());
    }

    #[test]
    fn malformed_files_give_none_not_a_panic() {
        for bad in [
            "",
            "\n",
            "max",
            "x y",
            "0 100000",
            "50000 0",
            "-5 100000",
            "50000",
        ] {
            assert_eq!(parse_cpu_max(bad), None, "{bad:?}");
        }
        assert_eq!(parse_cfs_quota("", "100000"), None);
        assert_eq!(parse_cfs_quota("50000", "0"), None);
        assert_eq!(parse_cfs_quota("50000", "garbage"), None);
        assert_eq!(parse_memory_max("lots"), None);
        assert_eq!(parse_memory_limit_in_bytes("-1"), None);
        assert_eq!(parse_pids_max(""), None);
        assert_eq!(parse_cpu_stat_v2(""), None);
        assert_eq!(parse_cpu_stat_v2("usage_usec lots\nnonsense"), None);
        assert_eq!(parse_cpu_stat_v1(None, None), None);
        assert_eq!(parse_cpu_stat_v1(Some("garbage"), Some("x")), None);
        assert_eq!(
            parse_cpu_stat_v1(None, Some("123\n")).unwrap().usage_ns,
            Some(123)
        );
        assert!(parse_proc_cgroup("garbage\n1:cpu\n:::\nx:cpu:/a\n").is_empty());
        assert!(parse_cgroup_mounts("garbage\n1 2 3\n- - -\n").is_empty());
    }

    #[test]
    fn missing_trees_and_files_give_none() {
        let nowhere = Path::new("/nonexistent/cpudoctor");
        assert_eq!(read_self_cgroup(nowhere), None);
        assert_eq!(read_process_cgroup(nowhere, 1), None);
        // A located cgroup whose files are gone.
        let gone = ControllerDir {
            hierarchy: Hierarchy::V2,
            mount_dir: nowhere.to_path_buf(),
            cgroup: PathBuf::from("a/b"),
        };
        assert_eq!(read_cpu_quota(&gone), None);
        assert_eq!(read_memory_limit_bytes(&gone), None);
        assert_eq!(read_pids_max(&gone), None);
        let cg = ProcessCgroup {
            cpuset: None,
            version: CgroupVersion::V2,
            cpu: Some(gone.clone()),
            cpuacct: Some(gone.clone()),
            memory: Some(gone.clone()),
            pids: None,
        };
        assert_eq!(cg.cpu_stat(), None);
        assert_eq!(cg.limits().cpu_quota, None);
    }

    #[test]
    fn version_follows_what_is_mounted() {
        let memberships = parse_proc_cgroup("1:cpu,cpuacct:/a\n0::/a\n");
        // A v1-only machine: cpu and cpuacct mounted together, no cgroup2.
        let v1 = parse_cgroup_mounts(
            "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup rw,cpu,cpuacct\n",
        );
        let cg = locate(Path::new("/"), &memberships, &v1).unwrap();
        assert_eq!(cg.version, CgroupVersion::V1);
        assert_eq!(
            cg.cpu, cg.cpuacct,
            "co-mounted controllers share a directory"
        );
        assert_eq!(
            cg.cpu.unwrap().dir(),
            Path::new("/sys/fs/cgroup/cpu,cpuacct/a")
        );
        assert_eq!(cg.memory, None, "no memory hierarchy mounted");
        // A named hierarchy beside cgroup2 is still v2.
        let v2 = parse_cgroup_mounts(
            "40 31 0:37 / /sys/fs/cgroup/systemd rw - cgroup cgroup rw,name=systemd\n\
             41 31 0:38 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n",
        );
        let only_v2 = parse_proc_cgroup("0::/a\n");
        assert_eq!(
            locate(Path::new("/"), &only_v2, &v2).unwrap().version,
            CgroupVersion::V2
        );
        assert_eq!(locate(Path::new("/"), &memberships, &[]), None);
    }

    #[test]
    fn paths_outside_the_namespace_or_beside_the_mount_root_are_not_guessed() {
        assert_eq!(below("/a/b", "/"), Some(PathBuf::from("a/b")));
        assert_eq!(below("/docker/x", "/docker/x"), Some(PathBuf::new()));
        assert_eq!(
            below("/docker/xy", "/docker/x"),
            None,
            "a prefix, not a parent"
        );
        assert_eq!(below("/", "/.."), None);
        assert_eq!(
            below("/../other", "/"),
            None,
            "a cgroup outside our namespace"
        );
    }

    #[test]
    fn mounts_under_a_covered_mount_are_hidden_too() {
        // A tmpfs over /sys/fs/cgroup hides the cpu hierarchy under the old one, and the bind
        // stacked on that; the cgroup2 mounted under the new tmpfs is what lookup reaches.
        let mounts = parse_cgroup_mounts(
            "1 0 254:0 / / rw - ext4 /dev/vda rw\n\
             10 1 0:28 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n\
             11 10 0:29 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n\
             12 11 0:29 /a /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n\
             13 10 0:40 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n\
             14 13 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n",
        );
        assert_eq!(mounts.len(), 1, "{mounts:?}");
        assert_eq!(mounts[0].hierarchy, Hierarchy::V2);
        // A parent loop, which no kernel writes, ends without hanging.
        let looped = parse_cgroup_mounts(
            "5 6 0:1 / /a rw - cgroup2 cgroup2 rw\n6 5 0:2 / /b rw - tmpfs tmpfs rw\n",
        );
        assert!(looped.is_empty());
    }

    #[test]
    fn mountinfo_escapes_are_undone() {
        let m = parse_cgroup_mounts(
            "41 31 0:38 /a\\040b /mnt/my\\040cgroups rw - cgroup2 cgroup2 rw,nsdelegate\n",
        );
        assert_eq!(m[0].mount_point, Path::new("/mnt/my cgroups"));
        assert_eq!(m[0].root, "/a b");
        assert_eq!(unescape_octal("back\\134slash\\9"), "back\\slash\\9");
    }

    #[test]
    fn this_process_cgroup_is_found_where_cgroups_are_mounted() {
        let Some(cg) = read_self_cgroup(Path::new("/")) else {
            return; // no cgroup filesystem in this sandbox: nothing to find
        };
        if let Some(cpu) = &cg.cpu {
            assert!(cpu.dir().is_dir(), "{cpu:?}");
        }
        let _ = cg.limits();
    }
}
