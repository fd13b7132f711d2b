//! Parser for `/proc/cpuinfo` (x86 layout): vendor, family/model/stepping, model name, flags,
//! logical CPU count. Identity comes from the first processor block; flags are those every
//! block has in common, so a hybrid CPU reports only what all its cores can do.

use std::collections::BTreeSet;

/// What cpuinfo says about the CPU.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct CpuInfo {
    /// `vendor_id`: `GenuineIntel`, `AuthenticAMD`, `HygonGenuine`, ...
    pub vendor_id: String,
    /// `cpu family`, decimal, already including the extended family.
    pub family: u32,
    /// `model`, decimal, already including the extended model.
    pub model: u32,
    /// `stepping`.
    pub stepping: u32,
    /// `model name`.
    pub model_name: String,
    /// `microcode`, as printed (`0x1000065`).
    pub microcode: Option<String>,
    /// Flags present on every processor.
    pub flags: BTreeSet<String>,
    /// Number of `processor` blocks (online logical CPUs).
    pub processors: usize,
}

impl CpuInfo {
    /// True if every processor has `flag`.
    pub fn has_flag(&self, flag: &str) -> bool {
        self.flags.contains(flag)
    }
}

/// Parses cpuinfo text. Fields that are absent stay at their defaults; text with no
/// `processor` line gives `None`.
pub fn parse_cpuinfo(text: &str) -> Option<CpuInfo> {
    let mut info = CpuInfo::default();
    let mut common_flags: Option<BTreeSet<String>> = None;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let (key, value) = (key.trim(), value.trim());
        let first = info.processors <= 1;
        match key {
            "processor" => info.processors += 1,
            "vendor_id" if first => info.vendor_id = value.to_string(),
            "cpu family" if first => info.family = value.parse().unwrap_or(0),
            "model" if first => info.model = value.parse().unwrap_or(0),
            "stepping" if first => info.stepping = value.parse().unwrap_or(0),
            "model name" if first => info.model_name = value.to_string(),
            "microcode" if first => info.microcode = Some(value.to_string()),
            "flags" => {
                let these: BTreeSet<String> = value.split_whitespace().map(String::from).collect();
                common_flags = Some(match common_flags {
                    None => these,
                    Some(prev) => prev.intersection(&these).cloned().collect(),
                });
            }
            _ => {}
        }
    }
    if info.processors == 0 {
        return None;
    }
    info.flags = common_flags.unwrap_or_default();
    Some(info)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = format!(
            "{}/tests/fixtures/cpuinfo/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn amd_zen4_kvm_guest() {
        let c = parse_cpuinfo(&fixture("amd-zen4-epyc-kvm.txt")).unwrap();
        assert_eq!(c.vendor_id, "AuthenticAMD");
        assert_eq!((c.family, c.model, c.stepping), (25, 17, 1));
        assert_eq!(c.model_name, "AMD EPYC");
        assert_eq!(c.microcode.as_deref(), Some("0x1000065"));
        assert_eq!(c.processors, 2);
        assert!(c.has_flag("hypervisor"));
        assert!(c.has_flag("constant_tsc") && c.has_flag("nonstop_tsc"));
        assert!(!c.has_flag("split_lock_detect"));
    }

    #[test]
    fn intel_haswell_desktop() {
        let c = parse_cpuinfo(&fixture("intel-haswell-i7-4790k.txt")).unwrap();
        assert_eq!(c.vendor_id, "GenuineIntel");
        assert_eq!((c.family, c.model, c.stepping), (6, 60, 3));
        assert_eq!(c.model_name, "Intel(R) Core(TM) i7-4790K CPU @ 4.00GHz");
        assert_eq!(c.processors, 1);
        assert!(c.has_flag("avx2"));
        assert!(!c.has_flag("hypervisor"));
    }

    #[test]
    fn flags_are_those_all_processors_share() {
        let text = "processor : 0\nflags : a b c\n\nprocessor : 1\nflags : b c d\n";
        let c = parse_cpuinfo(text).unwrap();
        assert_eq!(c.flags.iter().collect::<Vec<_>>(), ["b", "c"]);
        assert_eq!(c.processors, 2);
    }

    #[test]
    fn text_without_processors_is_rejected() {
        assert_eq!(parse_cpuinfo("not cpuinfo at all"), None);
        assert_eq!(parse_cpuinfo(""), None);
    }
}
