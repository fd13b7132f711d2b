//! Parser for `/proc/PID/smaps` and `/proc/PID/smaps_rollup`: per-mapping and whole-process
//! memory figures in kB, notably `AnonHugePages` (how much of an anonymous mapping is backed by
//! transparent huge pages) and `KernelPageSize` (hugetlbfs mappings say 2048 or 1048576 kB).
//! Probes read it to check that a requested page size took effect; diagnose reads it to report
//! a workload's huge-page use.

use std::collections::BTreeMap;

/// One mapping of a process.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Mapping {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// Permissions as printed (`rw-p`, `r-xp`).
    pub perms: String,
    /// Backing file or pseudo-path (`[heap]`, `[stack]`); `None` for anonymous memory.
    pub path: Option<String>,
    /// Every `Name: N kB` field, in kB.
    pub fields_kb: BTreeMap<String, u64>,
    /// `THPeligible`, when the kernel prints it.
    pub thp_eligible: Option<bool>,
    /// `VmFlags` (`hg` = MADV_HUGEPAGE, `ht` = hugetlb, `nh` = MADV_NOHUGEPAGE).
    pub vm_flags: Vec<String>,
}

impl Mapping {
    /// Field `name` in kB, 0 when absent.
    pub fn kb(&self, name: &str) -> u64 {
        self.fields_kb.get(name).copied().unwrap_or(0)
    }

    /// True if `addr` lies in this mapping.
    pub fn contains(&self, addr: u64) -> bool {
        (self.start..self.end).contains(&addr)
    }
}

/// Parses a mapping header line: `start-end perms offset dev inode [path]`.
fn parse_header(line: &str) -> Option<Mapping> {
    let mut parts = line.split_whitespace();
    let (start, end) = parts.next()?.split_once('-')?;
    let start = u64::from_str_radix(start, 16).ok()?;
    let end = u64::from_str_radix(end, 16).ok()?;
    let perms = parts.next()?.to_string();
    let (_offset, _dev, _inode) = (parts.next()?, parts.next()?, parts.next()?);
    let path: String = parts.collect::<Vec<_>>().join(" ");
    Some(Mapping {
        start,
        end,
        perms,
        path: (!path.is_empty()).then_some(path),
        ..Mapping::default()
    })
}

/// Parses `Name:   123 kB` into (`Name`, 123).
fn parse_kb_field(line: &str) -> Option<(String, u64)> {
    let (name, rest) = line.split_once(':')?;
    let value = rest.trim().strip_suffix("kB")?.trim().parse().ok()?;
    Some((name.trim().to_string(), value))
}

/// Parses smaps text into its mappings, in file order.
pub fn parse_smaps(text: &str) -> Vec<Mapping> {
    let mut maps: Vec<Mapping> = Vec::new();
    for line in text.lines() {
        if let Some((name, kb)) = parse_kb_field(line) {
            if let Some(m) = maps.last_mut() {
                m.fields_kb.insert(name, kb);
            }
        } else if let Some(v) = line.strip_prefix("THPeligible:") {
            if let Some(m) = maps.last_mut() {
                m.thp_eligible = Some(v.trim() == "1");
            }
        } else if let Some(v) = line.strip_prefix("VmFlags:") {
            if let Some(m) = maps.last_mut() {
                m.vm_flags = v.split_whitespace().map(String::from).collect();
            }
        } else if let Some(m) = parse_header(line) {
            maps.push(m);
        }
    }
    maps
}

/// Parses `smaps_rollup` into its kB fields (the whole process summed).
pub fn parse_rollup(text: &str) -> BTreeMap<String, u64> {
    text.lines().filter_map(parse_kb_field).collect()
}

/// The mapping containing `addr`.
pub fn mapping_containing(maps: &[Mapping], addr: u64) -> Option<&Mapping> {
    maps.iter().find(|m| m.contains(addr))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Captured on the Zen 4 KVM guest (THP madvise) from a program that madvised an 8 MiB
    // 2 MiB-aligned region at 0x7fbbc0800000 with MADV_HUGEPAGE and touched it.
    const SMAPS: &str = include_str!("../../tests/fixtures/proc/smaps-thp-madvise.txt");
    const ROLLUP: &str = include_str!("../../tests/fixtures/proc/smaps_rollup.txt");

    #[test]
    fn madvised_region_is_backed_by_huge_pages() {
        let maps = parse_smaps(SMAPS);
        let m = mapping_containing(&maps, 0x7fbb_c080_0000).unwrap();
        assert_eq!(m.kb("AnonHugePages"), 8192);
        assert_eq!(m.kb("KernelPageSize"), 4);
        assert_eq!(m.thp_eligible, Some(true));
        assert!(m.vm_flags.contains(&"hg".to_string()));
        assert_eq!(m.path, None);
        assert_eq!(m.perms, "rw-p");
    }

    #[test]
    fn file_mappings_keep_their_path() {
        let maps = parse_smaps(SMAPS);
        assert!(maps.iter().any(|m| m.path.as_deref() == Some("[stack]")));
        assert!(maps.len() > 10);
        assert!(maps.iter().all(|m| m.start < m.end));
    }

    #[test]
    fn rollup_sums_the_process() {
        let r = parse_rollup(ROLLUP);
        assert_eq!(r["AnonHugePages"], 8192);
        assert_eq!(r["Rss"], 13860);
    }

    #[test]
    fn garbage_gives_nothing() {
        assert!(parse_smaps("hello\nworld").is_empty());
        assert!(parse_rollup("").is_empty());
    }
}
