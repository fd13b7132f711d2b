//! CPU topology and caches from sysfs (`/sys/devices/system`): which logical CPUs are SMT
//! siblings, which share a last-level cache, which sit on which NUMA node, and each cache's
//! size, line and sharing. Reads from a root path so tests run on fixture trees.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::Path;

/// Where one logical CPU sits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CpuPlace {
    /// Logical CPU number.
    pub cpu: usize,
    /// `topology/core_id`.
    pub core_id: Option<i64>,
    /// `topology/physical_package_id` (socket).
    pub package_id: Option<i64>,
    /// Logical CPUs on the same physical core, this one included.
    pub smt_siblings: Vec<usize>,
    /// The lowest CPU sharing this CPU's last-level cache: equal values mean a shared LLC.
    pub llc_id: Option<usize>,
    /// NUMA node.
    pub numa_node: Option<usize>,
}

/// One kind of cache (level and type), as the sysfs `cache/indexN` directories describe it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cache {
    /// 1, 2, 3, ...
    pub level: u32,
    /// `Data`, `Instruction` or `Unified`.
    pub kind: String,
    /// Size of one instance, in bytes.
    pub size_bytes: u64,
    /// Coherency line size, in bytes.
    pub line_bytes: Option<u64>,
    /// Associativity.
    pub ways: Option<u64>,
    /// Number of distinct instances across the online CPUs.
    pub instances: usize,
    /// Logical CPUs sharing one instance (from the first CPU's view), as a cpu list.
    pub shared_cpu_list: String,
}

/// The machine's topology.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    /// Online logical CPUs.
    pub online_cpus: Vec<usize>,
    /// Physical cores (distinct package and core id).
    pub cores: usize,
    /// Sockets.
    pub packages: usize,
    /// NUMA nodes (1 when sysfs has none).
    pub numa_nodes: usize,
    /// Logical CPUs per core, the largest seen.
    pub threads_per_core: usize,
    /// True when some core runs more than one logical CPU.
    pub smt: bool,
    /// Per-CPU placement.
    pub cpus: Vec<CpuPlace>,
    /// Caches, by level and kind.
    pub caches: Vec<Cache>,
}

/// The most CPUs a list may name: Linux's largest `NR_CPUS` (8192 with CONFIG_MAXSMP) eight
/// times over. A CPU at or above it makes a list malformed, so `--cpus 0-99999999999` is
/// refused instead of building a list of a hundred billion CPUs.
pub const MAX_CPUS: usize = 65_536;

/// Parses a Linux cpu list (`0-3,8,10-11`). Malformed pieces make the whole list `None`. A CPU
/// named twice (`0,0`, `0-1,1`) is kept once, where it first appears: a probe given the same
/// CPU twice would otherwise pair a CPU with itself.
pub fn parse_cpu_list(text: &str) -> Option<Vec<usize>> {
    let text = text.trim();
    if text.is_empty() {
        return Some(Vec::new());
    }
    let mut out = Vec::new();
    for part in text.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if b < a || b >= MAX_CPUS {
                    return None;
                }
                out.extend(a..=b);
            }
            None => out.push(part.trim().parse().ok().filter(|&c| c < MAX_CPUS)?),
        }
    }
    Some(dedup_keeping_order(out))
}

/// `cpus` without repeats, each kept where it first appears (the order can matter: a probe
/// may give its first CPU a role, such as the split-lock victim).
pub fn dedup_keeping_order(cpus: Vec<usize>) -> Vec<usize> {
    let mut seen = BTreeSet::new();
    cpus.into_iter().filter(|c| seen.insert(*c)).collect()
}

/// Parses a sysfs cache size (`32K`, `32768K`, `2M`, `512`) to bytes.
pub fn parse_cache_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let (num, mult) = match t.chars().last()? {
        'K' | 'k' => (&t[..t.len() - 1], 1 << 10),
        'M' | 'm' => (&t[..t.len() - 1], 1 << 20),
        'G' | 'g' => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    num.trim().parse::<u64>().ok().map(|n| n * mult)
}

fn read_trim(path: &Path) -> Option<String> {
    fs::read_to_string(path).ok().map(|s| s.trim().to_string())
}

/// Reads the topology under `root` (normally `/sys/devices/system`). `None` when there is no
/// `cpu/online` file to start from.
pub fn read_topology(root: &Path) -> Option<Topology> {
    let online_cpus = parse_cpu_list(&read_trim(&root.join("cpu/online"))?)?;
    let node_of = read_numa_nodes(root);
    let numa_nodes = node_of.values().collect::<BTreeSet<_>>().len().max(1);

    let mut cpus = Vec::new();
    // (level, kind) -> (size, line, ways, distinct shared lists, first shared list)
    let mut caches: BTreeMap<(u32, String), (Cache, BTreeSet<String>)> = BTreeMap::new();
    for &cpu in &online_cpus {
        let dir = root.join(format!("cpu/cpu{cpu}"));
        let topo = dir.join("topology");
        let num = |f: &str| read_trim(&topo.join(f)).and_then(|s| s.parse::<i64>().ok());
        let smt_siblings = read_trim(&topo.join("thread_siblings_list"))
            .and_then(|s| parse_cpu_list(&s))
            .unwrap_or_else(|| vec![cpu]);

        let mut llc: Option<(u32, usize)> = None;
        for index in cache_indices(&dir.join("cache")) {
            let idx = dir.join("cache").join(index);
            let Some(level) = read_trim(&idx.join("level")).and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let kind = read_trim(&idx.join("type")).unwrap_or_else(|| "Unified".into());
            let shared = read_trim(&idx.join("shared_cpu_list")).unwrap_or_default();
            let shared_cpus = parse_cpu_list(&shared).unwrap_or_default();
            if kind != "Instruction" && llc.is_none_or(|(l, _)| level > l) {
                llc = shared_cpus.iter().min().map(|&m| (level, m));
            }
            let Some(size_bytes) = read_trim(&idx.join("size")).and_then(|s| parse_cache_size(&s))
            else {
                continue;
            };
            let entry = caches.entry((level, kind.clone())).or_insert_with(|| {
                let n = |f: &str| read_trim(&idx.join(f)).and_then(|s| s.parse().ok());
                (
                    Cache {
                        level,
                        kind,
                        size_bytes,
                        line_bytes: n("coherency_line_size"),
                        ways: n("ways_of_associativity"),
                        instances: 0,
                        shared_cpu_list: shared.clone(),
                    },
                    BTreeSet::new(),
                )
            });
            entry.1.insert(shared);
        }
        cpus.push(CpuPlace {
            cpu,
            core_id: num("core_id"),
            package_id: num("physical_package_id"),
            smt_siblings,
            llc_id: llc.map(|(_, id)| id),
            numa_node: node_of.get(&cpu).copied(),
        });
    }

    let cores = cpus
        .iter()
        .map(|c| (c.package_id, c.smt_siblings.clone()))
        .collect::<BTreeSet<_>>()
        .len();
    let packages = cpus
        .iter()
        .map(|c| c.package_id)
        .collect::<BTreeSet<_>>()
        .len();
    let threads_per_core = cpus.iter().map(|c| c.smt_siblings.len()).max().unwrap_or(1);
    Some(Topology {
        online_cpus,
        cores,
        packages,
        numa_nodes,
        threads_per_core,
        smt: threads_per_core > 1,
        cpus,
        caches: caches
            .into_values()
            .map(|(mut c, lists)| {
                c.instances = lists.len();
                c
            })
            .collect(),
    })
}

fn cache_indices(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("index"))
        .collect();
    v.sort();
    v
}

fn read_numa_nodes(root: &Path) -> BTreeMap<usize, usize> {
    let mut map = BTreeMap::new();
    for entry in fs::read_dir(root.join("node"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(node) = name.strip_prefix("node").and_then(|n| n.parse().ok()) else {
            continue;
        };
        let list = read_trim(&entry.path().join("cpulist")).and_then(|s| parse_cpu_list(&s));
        for cpu in list.unwrap_or_default() {
            map.insert(cpu, node);
        }
    }
    map
}

impl Topology {
    /// The cache of `level` holding data (Data or Unified), if sysfs lists one.
    pub fn data_cache(&self, level: u32) -> Option<&Cache> {
        self.caches
            .iter()
            .find(|c| c.level == level && c.kind != "Instruction")
    }

    /// Size of one instance of the last-level cache (the highest level holding data), in
    /// bytes: what every memory probe sizes its buffers against.
    pub fn llc_bytes(&self) -> Option<u64> {
        self.caches
            .iter()
            .filter(|c| c.kind != "Instruction")
            .max_by_key(|c| (c.level, c.size_bytes))
            .map(|c| c.size_bytes)
    }

    /// Placement of `cpu`.
    pub fn place(&self, cpu: usize) -> Option<&CpuPlace> {
        self.cpus.iter().find(|p| p.cpu == cpu)
    }
}

/// Where two CPUs sit relative to each other, closest first: the c2c probe's groups, the
/// heatmap's legend and the fingerprint's metric names share this one list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PairGroup {
    /// Two logical CPUs of one physical core.
    SmtSibling,
    /// Different cores sharing the last-level cache.
    SharedL3,
    /// Different last-level caches on the same NUMA node.
    OtherL3,
    /// Different NUMA nodes.
    OtherNumaNode,
    /// sysfs did not say.
    Unknown,
}

impl PairGroup {
    /// Identifier used in metric names and JSON (`shared_l3`).
    pub fn key(self) -> &'static str {
        match self {
            PairGroup::SmtSibling => "smt_sibling",
            PairGroup::SharedL3 => "shared_l3",
            PairGroup::OtherL3 => "other_l3",
            PairGroup::OtherNumaNode => "other_numa_node",
            PairGroup::Unknown => "unknown",
        }
    }

    /// The group a [`PairGroup::key`] names.
    pub fn from_key(key: &str) -> Option<PairGroup> {
        [
            PairGroup::SmtSibling,
            PairGroup::SharedL3,
            PairGroup::OtherL3,
            PairGroup::OtherNumaNode,
            PairGroup::Unknown,
        ]
        .into_iter()
        .find(|g| g.key() == key)
    }

    /// Words for a reader (`shared L3`).
    pub fn label(self) -> &'static str {
        match self {
            PairGroup::SmtSibling => "SMT sibling",
            PairGroup::SharedL3 => "shared L3",
            PairGroup::OtherL3 => "other L3",
            PairGroup::OtherNumaNode => "other NUMA node",
            PairGroup::Unknown => "topology unknown",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/sysfs")
            .join(name)
    }

    #[test]
    fn cpu_lists() {
        assert_eq!(
            parse_cpu_list("0-3,8,10-11"),
            Some(vec![0, 1, 2, 3, 8, 10, 11])
        );
        assert_eq!(parse_cpu_list("5\n"), Some(vec![5]));
        assert_eq!(parse_cpu_list(""), Some(vec![]));
        assert_eq!(parse_cpu_list("3-1"), None);
        assert_eq!(parse_cpu_list("a"), None);
    }

    #[test]
    fn cpu_list_0_0_and_0_1_1_name_each_cpu_once() {
        // Regression: `--cpus 0,0` passed the two-CPU check and then had no pair to measure;
        // `--cpus 0-1,1` gave a three-row c2c matrix with cpu1 twice.
        assert_eq!(parse_cpu_list("0,0"), Some(vec![0]));
        assert_eq!(parse_cpu_list("0-1,1"), Some(vec![0, 1]));
        assert_eq!(parse_cpu_list("3,1-3,0"), Some(vec![3, 1, 2, 0]));
    }

    #[test]
    fn cache_sizes() {
        assert_eq!(parse_cache_size("32K"), Some(32 * 1024));
        assert_eq!(parse_cache_size("32768K"), Some(32 << 20));
        assert_eq!(parse_cache_size("2M"), Some(2 << 20));
        assert_eq!(parse_cache_size("512"), Some(512));
        assert_eq!(parse_cache_size("big"), None);
    }

    #[test]
    fn zen4_kvm_guest_two_cores_one_l3() {
        let t = read_topology(&fixture("amd-zen4-kvm-2cpu")).unwrap();
        assert_eq!(t.online_cpus, vec![0, 1]);
        assert_eq!((t.cores, t.packages, t.numa_nodes), (2, 1, 1));
        assert!(!t.smt);
        let l1d = t.data_cache(1).unwrap();
        assert_eq!(
            (l1d.size_bytes, l1d.kind.as_str(), l1d.instances),
            (32 << 10, "Data", 2)
        );
        assert_eq!(l1d.line_bytes, Some(64));
        let l2 = t.data_cache(2).unwrap();
        assert_eq!((l2.size_bytes, l2.instances), (1 << 20, 2));
        let l3 = t.data_cache(3).unwrap();
        assert_eq!((l3.size_bytes, l3.instances), (32 << 20, 1));
        assert_eq!(l3.shared_cpu_list, "0-1");
        assert_eq!(t.llc_bytes(), Some(32 << 20));
        // Both CPUs share the L3, so they report the same LLC id.
        assert_eq!(t.place(0).unwrap().llc_id, Some(0));
        assert_eq!(t.place(1).unwrap().llc_id, Some(0));
        assert_eq!(t.place(1).unwrap().numa_node, Some(0));
    }

    #[test]
    fn missing_root_is_none() {
        assert_eq!(read_topology(Path::new("/nonexistent/sysfs")), None);
    }
}
