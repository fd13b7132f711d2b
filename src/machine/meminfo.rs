//! Memory facts a buffer needs before it is mapped: how much memory the kernel could hand out
//! without swapping (`MemAvailable` in /proc/meminfo), how much this process may still map
//! under its cgroup memory limit and `RLIMIT_AS` ([`read_memory_room`]: the least of the three,
//! which the memory probes size their buffers to), and how many hugetlbfs pages of each
//! size are reserved and free (`/sys/kernel/mm/hugepages/hugepages-<N>kB/`). Parsers take text
//! or a root path, so they are tested on fixtures.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

/// Parses /proc/meminfo into its fields. Values are as printed: kB for fields with a `kB`
/// suffix (`MemAvailable`), plain counts for the others (`HugePages_Free`).
pub fn parse_meminfo(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|line| {
            let (name, rest) = line.split_once(':')?;
            let value = rest.trim().trim_end_matches("kB").trim().parse().ok()?;
            Some((name.trim().to_string(), value))
        })
        .collect()
}

/// `MemAvailable` in bytes, from meminfo text.
pub fn mem_available_bytes(meminfo: &BTreeMap<String, u64>) -> Option<u64> {
    meminfo
        .get("MemAvailable")
        .map(|kb| kb.saturating_mul(1024))
}

/// `MemAvailable` of this machine now, in bytes.
pub fn read_mem_available_bytes() -> Option<u64> {
    let text = fs::read_to_string("/proc/meminfo").ok()?;
    mem_available_bytes(&parse_meminfo(&text))
}

/// What bounds the memory this process may map now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemoryBound {
    /// `MemAvailable`: what the kernel could hand out without swapping, shared with every
    /// other process on the machine.
    Available,
    /// A cgroup memory limit (the process's or one above it), less what its cgroup uses.
    CgroupLimit,
    /// `RLIMIT_AS` (`ulimit -v`, `prlimit --as`), less the address space already mapped.
    AddressSpace,
}

/// How much memory this process may map now, and what bounds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryRoom {
    /// What bounds it.
    pub bound: MemoryBound,
    /// The bound itself, in bytes: `MemAvailable`, the cgroup limit or `RLIMIT_AS`.
    pub limit_bytes: u64,
    /// What is left under it now, in bytes (`MemAvailable` itself for [`MemoryBound::Available`]).
    pub room_bytes: u64,
}

impl MemoryRoom {
    /// The bytes a probe's buffers may take together: a quarter of `MemAvailable` (the rest
    /// of the machine needs the rest), three quarters of what a limit leaves (the chase's
    /// cycle, thread stacks and the allocator's arenas take the rest, and a cgroup at its
    /// limit is OOM-killed, a process at `RLIMIT_AS` gets ENOMEM).
    pub fn for_buffers(&self) -> u64 {
        match self.bound {
            MemoryBound::Available => self.room_bytes / 4,
            MemoryBound::CgroupLimit | MemoryBound::AddressSpace => self.room_bytes / 4 * 3,
        }
    }

    /// Whether a limit set on this process (cgroup or `RLIMIT_AS`), not the machine, bounds it.
    pub fn is_limit(&self) -> bool {
        self.bound != MemoryBound::Available
    }
}

/// Of `MemAvailable`, a cgroup limit and its use, and `RLIMIT_AS` and the address space
/// mapped (each in bytes, absent where unknown or unlimited), the one that leaves the
/// buffers least ([`MemoryRoom::for_buffers`]); `None` when none is known.
pub fn memory_room(
    available: Option<u64>,
    cgroup: Option<(u64, u64)>,
    address_space: Option<(u64, u64)>,
) -> Option<MemoryRoom> {
    let limit = |bound, (limit_bytes, used): (u64, u64)| MemoryRoom {
        bound,
        limit_bytes,
        room_bytes: limit_bytes.saturating_sub(used),
    };
    [
        available.map(|a| MemoryRoom {
            bound: MemoryBound::Available,
            limit_bytes: a,
            room_bytes: a,
        }),
        cgroup.map(|c| limit(MemoryBound::CgroupLimit, c)),
        address_space.map(|a| limit(MemoryBound::AddressSpace, a)),
    ]
    .into_iter()
    .flatten()
    .min_by_key(MemoryRoom::for_buffers)
}

/// `VmSize` of /proc/self/status (the address space mapped, what `RLIMIT_AS` counts), in bytes.
fn read_vm_size_bytes() -> Option<u64> {
    let text = fs::read_to_string("/proc/self/status").ok()?;
    parse_meminfo(&text)
        .get("VmSize")
        .map(|kb| kb.saturating_mul(1024))
}

/// `RLIMIT_AS` (soft) and the address space mapped now, in bytes; `None` when unlimited.
fn read_address_space() -> Option<(u64, u64)> {
    let (soft, _) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_AS).ok()?;
    (soft != nix::sys::resource::RLIM_INFINITY).then_some(())?;
    Some((soft, read_vm_size_bytes()?))
}

/// How much memory this process may map now: the least of `MemAvailable`, its cgroup's
/// memory limit less use ([`super::cgroup::ProcessCgroup::memory_headroom`]) and `RLIMIT_AS`
/// less the address space mapped.
pub fn read_memory_room() -> Option<MemoryRoom> {
    let cgroup = super::cgroup::read_self_cgroup(Path::new("/"))
        .and_then(|cg| cg.memory_headroom())
        .map(|h| (h.limit_bytes, h.usage_bytes));
    memory_room(read_mem_available_bytes(), cgroup, read_address_space())
}

/// One hugetlbfs pool (one page size).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HugePagePool {
    /// Page size in bytes (2097152, 1073741824).
    pub page_bytes: u64,
    /// Pages in the pool (`nr_hugepages`).
    pub total: u64,
    /// Pages not yet handed out (`free_hugepages`).
    pub free: u64,
    /// Free pages already promised to mappings (`resv_hugepages`).
    pub reserved: u64,
}

impl HugePagePool {
    /// Pages a new mapping can still get: free minus those promised to others.
    pub fn available(&self) -> u64 {
        self.free.saturating_sub(self.reserved)
    }
}

/// Reads every pool under `root` (normally `/sys/kernel/mm/hugepages`), smallest page first.
/// A directory whose files cannot be read is left out.
pub fn read_hugepage_pools(root: &Path) -> Vec<HugePagePool> {
    let Ok(entries) = fs::read_dir(root) else {
        return Vec::new();
    };
    let number = |dir: &Path, file: &str| -> Option<u64> {
        fs::read_to_string(dir.join(file)).ok()?.trim().parse().ok()
    };
    let mut pools: Vec<HugePagePool> = entries
        .filter_map(Result::ok)
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let kb: u64 = name
                .strip_prefix("hugepages-")?
                .strip_suffix("kB")?
                .parse()
                .ok()?;
            let dir = e.path();
            Some(HugePagePool {
                page_bytes: kb * 1024,
                total: number(&dir, "nr_hugepages")?,
                free: number(&dir, "free_hugepages")?,
                reserved: number(&dir, "resv_hugepages").unwrap_or(0),
            })
        })
        .collect();
    pools.sort_by_key(|p| p.page_bytes);
    pools
}

/// The pools of this machine.
pub fn hugepage_pools() -> Vec<HugePagePool> {
    read_hugepage_pools(Path::new("/sys/kernel/mm/hugepages"))
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn the_room_is_what_leaves_the_buffers_least() {
        // A 24 GiB machine in a 512 MiB cgroup using 40 MiB: the cgroup bounds.
        let r = memory_room(Some(22 << 30), Some((512 * MIB, 40 * MIB)), None).unwrap();
        assert_eq!(r.bound, MemoryBound::CgroupLimit);
        assert_eq!((r.limit_bytes, r.room_bytes), (512 * MIB, 472 * MIB));
        assert_eq!(r.for_buffers(), 354 * MIB);
        assert!(r.is_limit());
        // A 1 GiB limit on a machine with 2 GiB available: a quarter of 2 GiB leaves less.
        let r = memory_room(Some(2048 * MIB), Some((1024 * MIB, 0)), None).unwrap();
        assert_eq!(r.bound, MemoryBound::Available);
        assert_eq!(r.for_buffers(), 512 * MIB);
        // prlimit --as=100M with 30 MiB mapped.
        let r = memory_room(Some(22 << 30), None, Some((100 * MIB, 30 * MIB))).unwrap();
        assert_eq!(r.bound, MemoryBound::AddressSpace);
        assert_eq!(r.room_bytes, 70 * MIB);
        // Over its limit already: no room, not an underflow.
        let r = memory_room(None, Some((100 * MIB, 120 * MIB)), None).unwrap();
        assert_eq!(r.room_bytes, 0);
        assert_eq!(memory_room(None, None, None), None);
    }

    #[test]
    fn this_process_has_room() {
        let r = read_memory_room().unwrap();
        assert!(r.room_bytes > 0 && r.room_bytes <= r.limit_bytes, "{r:?}");
    }

    // /proc/meminfo of the Zen 4 KVM guest (24 GiB, no hugetlbfs pages reserved).
    const MEMINFO: &str = include_str!("../../tests/fixtures/proc/meminfo.txt");

    #[test]
    fn meminfo_fields_keep_their_units() {
        let m = parse_meminfo(MEMINFO);
        assert_eq!(m["MemTotal"], 24684096);
        assert_eq!(mem_available_bytes(&m), Some(24256756 * 1024));
        assert_eq!(m["HugePages_Free"], 0);
        assert_eq!(m["Hugepagesize"], 2048);
        // The same guest with 8 x 2 MiB pages reserved and a mapping holding 4 of them.
        let r = parse_meminfo(include_str!(
            "../../tests/fixtures/proc/meminfo-hugetlb-reserved.txt"
        ));
        assert_eq!(
            (
                r["HugePages_Total"],
                r["HugePages_Free"],
                r["HugePages_Rsvd"]
            ),
            (8, 6, 2)
        );
    }

    #[test]
    fn garbage_meminfo_has_no_available_memory() {
        assert_eq!(mem_available_bytes(&parse_meminfo("nothing here")), None);
    }

    #[test]
    fn pools_are_read_from_the_sysfs_tree() {
        let root = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/fixtures/sysfs/hugepages-reserved"
        ));
        let pools = read_hugepage_pools(root);
        assert_eq!(pools.len(), 2);
        assert_eq!(pools[0].page_bytes, 2 << 20);
        assert_eq!(pools[1].page_bytes, 1 << 30);
        assert_eq!(
            (pools[0].total, pools[0].free, pools[0].reserved),
            (8, 6, 2)
        );
        assert_eq!(pools[0].available(), 4);
        assert_eq!(pools[1].available(), 0);
    }

    #[test]
    fn a_missing_tree_has_no_pools() {
        assert!(read_hugepage_pools(Path::new("/nonexistent/hugepages")).is_empty());
    }
}
