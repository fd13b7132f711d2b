//! Kernel facts that change what a probe measures: release, transparent huge page mode,
//! `perf_event_paranoid`, and how the kernel treats split locks. Each comes from a small
//! parser over the text of its /proc or /sys file, tested on fixtures.

use serde::{Deserialize, Serialize};

/// Transparent huge page setting (`/sys/kernel/mm/transparent_hugepage/enabled`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThpMode {
    /// The selected mode: `always`, `madvise` or `never`.
    pub enabled: String,
    /// The selected defrag mode, when readable.
    pub defrag: Option<String>,
}

/// The bracketed choice of a sysfs multiple-choice file: `always [madvise] never` -> `madvise`.
pub fn parse_bracketed_choice(text: &str) -> Option<String> {
    let start = text.find('[')?;
    let end = start + text[start..].find(']')?;
    Some(text[start + 1..end].to_string())
}

/// How split locks are handled, from what the kernel exposes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitLockState {
    /// cpuinfo flag `split_lock_detect`: #AC on split locks is available and the kernel uses it.
    pub cpu_split_lock_detect: bool,
    /// cpuinfo flag `bus_lock_detect`: #DB after a bus lock is available.
    pub cpu_bus_lock_detect: bool,
    /// Value of `split_lock_detect=` on the kernel command line, if given.
    pub cmdline: Option<String>,
    /// `kernel.split_lock_mitigate` (1: a trapping task sleeps 10 ms per split lock), if present.
    pub mitigate: Option<u32>,
    /// What that adds up to: `off`, `warn`, `warn+sleep`, `fatal`, `ratelimit:N`, or
    /// `not_detected` when the CPU (or the hypervisor) offers no detection.
    pub effective: String,
    /// One sentence saying what a split lock costs a program here.
    pub summary: String,
}

/// The value of `key=` on a kernel command line (last one wins, as the kernel parses it).
pub fn cmdline_value(cmdline: &str, key: &str) -> Option<String> {
    cmdline
        .split_whitespace()
        .take_while(|w| *w != "--")
        .filter_map(|w| w.strip_prefix(key)?.strip_prefix('='))
        .last()
        .map(String::from)
}

/// Works out the split-lock handling. Linux defaults to `warn` when the CPU can detect
/// (Documentation/admin-guide/kernel-parameters.txt, `split_lock_detect`), and #AC detection
/// is never enabled inside a guest, where the cpuinfo flag is then absent.
pub fn split_lock_state(
    cpu_split_lock_detect: bool,
    cpu_bus_lock_detect: bool,
    cmdline: Option<String>,
    mitigate: Option<u32>,
) -> SplitLockState {
    let detectable = cpu_split_lock_detect || cpu_bus_lock_detect;
    let mode = cmdline.clone().unwrap_or_else(|| "warn".into());
    let (effective, summary) = if !detectable {
        (
            "not_detected".to_string(),
            "the kernel cannot see split locks here (no split_lock_detect or bus_lock_detect \
             flag): they run at full hardware cost, unreported"
                .to_string(),
        )
    } else if mode == "off" {
        (
            "off".into(),
            "detection is off (split_lock_detect=off): split locks run at full hardware cost"
                .into(),
        )
    } else if mode == "fatal" {
        (
            "fatal".into(),
            "a split lock kills the process with SIGBUS (split_lock_detect=fatal)".into(),
        )
    } else if mode.starts_with("ratelimit") {
        (
            mode.clone(),
            format!("bus locks are rate-limited per second ({mode}): excess lockers are slowed"),
        )
    } else if cpu_split_lock_detect && mitigate.unwrap_or(1) == 1 {
        // The 10 ms sleep is on the #AC split-lock path only; #DB bus-lock detection (a CPU
        // with bus_lock_detect alone) just warns.
        (
            "warn+sleep".into(),
            "each trapped split lock logs a warning and the task sleeps 10 ms \
             (kernel.split_lock_mitigate=1)"
                .into(),
        )
    } else {
        (
            "warn".into(),
            "split locks are logged once per task and otherwise run at hardware cost".into(),
        )
    };
    SplitLockState {
        cpu_split_lock_detect,
        cpu_bus_lock_detect,
        cmdline,
        mitigate,
        effective,
        summary,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thp_choice_is_the_bracketed_word() {
        assert_eq!(
            parse_bracketed_choice("always [madvise] never\n").as_deref(),
            Some("madvise")
        );
        assert_eq!(
            parse_bracketed_choice("[always] madvise never").as_deref(),
            Some("always")
        );
        assert_eq!(parse_bracketed_choice("always madvise never"), None);
    }

    #[test]
    fn cmdline_values_stop_at_init_arguments() {
        let c = "quiet split_lock_detect=fatal root=/dev/vda -- split_lock_detect=off";
        assert_eq!(
            cmdline_value(c, "split_lock_detect").as_deref(),
            Some("fatal")
        );
        // This machine's command line has none.
        let here = "mitigations=auto console=ttyS0 quiet reboot=k -- --addr 0.0.0.0:2024";
        assert_eq!(cmdline_value(here, "split_lock_detect"), None);
        assert_eq!(cmdline_value("a=1 a=2", "a").as_deref(), Some("2"));
    }

    #[test]
    fn guest_without_detection_flags_is_not_detected() {
        // This machine: no flags, no cmdline value, sysctl present and 1.
        let s = split_lock_state(false, false, None, Some(1));
        assert_eq!(s.effective, "not_detected");
    }

    #[test]
    fn bare_metal_default_is_warn_with_sleep() {
        let s = split_lock_state(true, true, None, Some(1));
        assert_eq!(s.effective, "warn+sleep");
        let s = split_lock_state(true, false, None, Some(0));
        assert_eq!(s.effective, "warn");
    }

    #[test]
    fn bus_lock_detection_alone_only_warns() {
        // Regression: kernel.split_lock_mitigate applies to #AC split-lock traps, not to the
        // #DB raised after a bus lock.
        assert_eq!(
            split_lock_state(false, true, None, Some(1)).effective,
            "warn"
        );
    }

    #[test]
    fn explicit_modes() {
        assert_eq!(
            split_lock_state(true, true, Some("off".into()), Some(1)).effective,
            "off"
        );
        assert_eq!(
            split_lock_state(true, true, Some("fatal".into()), None).effective,
            "fatal"
        );
        assert_eq!(
            split_lock_state(false, true, Some("ratelimit:10".into()), None).effective,
            "ratelimit:10"
        );
    }
}
