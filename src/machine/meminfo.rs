//! Memory facts a buffer needs before it is mapped: how much memory the kernel could hand out
//! without swapping (`MemAvailable` in /proc/meminfo), and how many hugetlbfs pages of each
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
