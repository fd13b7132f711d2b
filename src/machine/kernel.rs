//! Kernel facts that change what a probe measures: release, transparent huge page mode,
//! `perf_event_paranoid`, and how the kernel treats split locks. Each comes from a small
//! parser over the text of its /proc or /sys file, tested on fixtures.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Which anonymous memory the kernel backs with transparent huge pages
/// (`/sys/kernel/mm/transparent_hugepage/enabled`, Documentation/admin-guide/mm/transhuge.rst).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ThpEnabled {
    /// Every large enough anonymous mapping.
    Always,
    /// Only regions a program marks with `madvise(MADV_HUGEPAGE)`.
    Madvise,
    /// None.
    Never,
}

impl ThpEnabled {
    /// The word sysfs uses.
    pub fn as_str(self) -> &'static str {
        match self {
            ThpEnabled::Always => "always",
            ThpEnabled::Madvise => "madvise",
            ThpEnabled::Never => "never",
        }
    }

    /// The mode a sysfs word names.
    pub fn from_word(word: &str) -> Option<ThpEnabled> {
        [ThpEnabled::Always, ThpEnabled::Madvise, ThpEnabled::Never]
            .into_iter()
            .find(|m| m.as_str() == word)
    }
}

impl fmt::Display for ThpEnabled {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Transparent huge page setting (`/sys/kernel/mm/transparent_hugepage/enabled`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThpMode {
    /// The selected mode.
    pub enabled: ThpEnabled,
    /// The selected defrag mode, when readable.
    pub defrag: Option<String>,
}

/// The bracketed choice of a sysfs multiple-choice file: `always [madvise] never` -> `madvise`.
pub fn parse_bracketed_choice(text: &str) -> Option<String> {
    let start = text.find('[')?;
    let end = start + text[start..].find(']')?;
    Some(text[start + 1..end].to_string())
}

/// How split locks are handled, from what the kernel exposes: facts only. What they add up to
/// in words is `words::machine::split_lock_summary` of [`SplitLockState::effective`]; files
/// saved before issue 32 also carry that sentence as `summary`, which is ignored on reading
/// (it told a guest its split locks "run at full hardware cost" before issue 19, which a
/// guest cannot know: the Emerald Rapids host traps them).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SplitLockState {
    /// cpuinfo flag `split_lock_detect`: #AC on split locks is available and the kernel uses it.
    pub cpu_split_lock_detect: bool,
    /// cpuinfo flag `bus_lock_detect`: #DB after a bus lock is available.
    pub cpu_bus_lock_detect: bool,
    /// Value of `split_lock_detect=` on the kernel command line, if given.
    pub cmdline: Option<String>,
    /// `kernel.split_lock_mitigate` (1: a trapping task sleeps
    /// [`crate::reference::SPLIT_LOCK_MITIGATE_SLEEP_MS`] per split lock), if present.
    pub mitigate: Option<u32>,
    /// What that adds up to.
    pub effective: SplitLockMode,
}

/// What the kernel does when a program takes a split lock (Documentation/admin-guide/
/// kernel-parameters.txt, `split_lock_detect`). In the JSON as the kernel's words: `off`,
/// `warn`, `warn+sleep`, `fatal`, `ratelimit:N`, and `not_detected`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum SplitLockMode {
    /// The CPU (or the hypervisor) offers no detection: split locks run unreported.
    NotDetected,
    /// Detection switched off on the command line.
    Off,
    /// A warning per task, then hardware cost.
    Warn,
    /// A warning and a sleep per trapped split lock (`kernel.split_lock_mitigate=1`;
    /// [`crate::reference::SPLIT_LOCK_MITIGATE_SLEEP_MS`]).
    WarnSleep,
    /// SIGBUS.
    Fatal,
    /// Bus locks limited to this many per second system-wide; excess lockers are slowed.
    Ratelimit(u32),
}

impl SplitLockMode {
    /// Whether the kernel may act on a split lock (trap, warn, sleep, rate-limit or kill):
    /// then split locks must run in a child process, and what they cost is the mitigation.
    pub fn kernel_acts(self) -> bool {
        !matches!(self, SplitLockMode::NotDetected | SplitLockMode::Off)
    }

    /// Whether the kernel slows or kills a program that splits a lock.
    pub fn penalises(self) -> bool {
        matches!(
            self,
            SplitLockMode::WarnSleep | SplitLockMode::Fatal | SplitLockMode::Ratelimit(_)
        )
    }
}

impl fmt::Display for SplitLockMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SplitLockMode::NotDetected => f.write_str("not_detected"),
            SplitLockMode::Off => f.write_str("off"),
            SplitLockMode::Warn => f.write_str("warn"),
            SplitLockMode::WarnSleep => f.write_str("warn+sleep"),
            SplitLockMode::Fatal => f.write_str("fatal"),
            SplitLockMode::Ratelimit(n) => write!(f, "ratelimit:{n}"),
        }
    }
}

impl From<SplitLockMode> for String {
    fn from(m: SplitLockMode) -> String {
        m.to_string()
    }
}

impl TryFrom<String> for SplitLockMode {
    type Error = String;

    fn try_from(word: String) -> Result<SplitLockMode, String> {
        Ok(match word.as_str() {
            "not_detected" => SplitLockMode::NotDetected,
            "off" => SplitLockMode::Off,
            "warn" => SplitLockMode::Warn,
            "warn+sleep" => SplitLockMode::WarnSleep,
            "fatal" => SplitLockMode::Fatal,
            other => match other.strip_prefix("ratelimit:").map(str::parse) {
                Some(Ok(n)) => SplitLockMode::Ratelimit(n),
                _ => return Err(format!("unknown split-lock mode `{other}`")),
            },
        })
    }
}

/// The exception a kernel takes a split lock in, where it detects them
/// (Documentation/arch/x86/buslock.rst): seen in a diagnosis as kernel samples in its
/// handler, entered from the locking function.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SplitLockTrap {
    /// `#DB` after the locked instruction: bus-lock detection (`handle_bus_lock`).
    BusLockDebug,
    /// `#AC` before it: split-lock detection (`handle_user_split_lock`).
    SplitLockAlignmentCheck,
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
    let asked = cmdline.as_deref().unwrap_or("warn");
    // `ratelimit:N` takes N from 1 to 1000; anything else leaves the kernel at its default.
    let ratelimit = asked
        .strip_prefix("ratelimit:")
        .and_then(|n| n.parse::<u32>().ok())
        .filter(|n| (1..=1000).contains(n));
    let effective = if !detectable {
        SplitLockMode::NotDetected
    } else if asked == "off" {
        SplitLockMode::Off
    } else if asked == "fatal" {
        SplitLockMode::Fatal
    } else if let Some(n) = ratelimit {
        SplitLockMode::Ratelimit(n)
    } else if cpu_split_lock_detect && mitigate.unwrap_or(1) == 1 {
        // The mitigation's sleep is on the #AC split-lock path only; #DB bus-lock detection
        // (a CPU with bus_lock_detect alone) just warns.
        SplitLockMode::WarnSleep
    } else {
        SplitLockMode::Warn
    };
    SplitLockState {
        cpu_split_lock_detect,
        cpu_bus_lock_detect,
        cmdline,
        mitigate,
        effective,
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
        assert_eq!(s.effective, SplitLockMode::NotDetected);
    }

    #[test]
    fn a_guest_is_not_told_its_split_locks_run_at_hardware_cost() {
        // The Emerald Rapids guest: no detection flag (no guest gets one), yet its host traps
        // split locks at 100-500 us each. The kernel cannot know either way.
        let s = split_lock_state(false, false, None, Some(1));
        assert_eq!(s.effective, SplitLockMode::NotDetected);
        // A file saved before carries the old words; reading it keeps the facts only (the
        // words are this build's: `words::machine::split_lock_summary`).
        let old = r#"{"cpu_split_lock_detect": false, "cpu_bus_lock_detect": false,
            "cmdline": null, "mitigate": 1, "effective": "not_detected",
            "summary": "they run at full hardware cost, unreported"}"#;
        let read: SplitLockState = serde_json::from_str(old).unwrap();
        assert_eq!(read, s);
        assert!(!serde_json::to_string(&read).unwrap().contains("summary"));
    }

    #[test]
    fn bare_metal_default_is_warn_with_sleep() {
        let s = split_lock_state(true, true, None, Some(1));
        assert_eq!(s.effective, SplitLockMode::WarnSleep);
        let s = split_lock_state(true, false, None, Some(0));
        assert_eq!(s.effective, SplitLockMode::Warn);
    }

    #[test]
    fn bus_lock_detection_alone_only_warns() {
        // Regression: kernel.split_lock_mitigate applies to #AC split-lock traps, not to the
        // #DB raised after a bus lock.
        assert_eq!(
            split_lock_state(false, true, None, Some(1)).effective,
            SplitLockMode::Warn
        );
    }

    #[test]
    fn explicit_modes() {
        assert_eq!(
            split_lock_state(true, true, Some("off".into()), Some(1)).effective,
            SplitLockMode::Off
        );
        assert_eq!(
            split_lock_state(true, true, Some("fatal".into()), None).effective,
            SplitLockMode::Fatal
        );
        assert_eq!(
            split_lock_state(false, true, Some("ratelimit:10".into()), None).effective,
            SplitLockMode::Ratelimit(10)
        );
    }

    #[test]
    fn split_lock_modes_keep_the_kernels_words_in_json_and_bad_ratelimits_fall_back() {
        for word in [
            "not_detected",
            "off",
            "warn",
            "warn+sleep",
            "fatal",
            "ratelimit:10",
        ] {
            let json = format!("\"{word}\"");
            let mode: SplitLockMode = serde_json::from_str(&json).unwrap();
            assert_eq!(serde_json::to_string(&mode).unwrap(), json);
        }
        assert!(serde_json::from_str::<SplitLockMode>("\"sometimes\"").is_err());
        // The kernel takes 1 to 1000 per second; anything else leaves its default.
        for bad in ["ratelimit:0", "ratelimit:1001", "ratelimit:x"] {
            let s = split_lock_state(true, true, Some(bad.into()), Some(0));
            assert_eq!(s.effective, SplitLockMode::Warn, "{bad}");
        }
    }

    #[test]
    fn only_undetected_or_off_leave_split_locks_to_the_hardware() {
        assert!(!SplitLockMode::NotDetected.kernel_acts());
        assert!(!SplitLockMode::Off.kernel_acts());
        for m in [
            SplitLockMode::Warn,
            SplitLockMode::WarnSleep,
            SplitLockMode::Fatal,
            SplitLockMode::Ratelimit(10),
        ] {
            assert!(m.kernel_acts(), "{m}");
        }
    }

    #[test]
    fn thp_modes_are_the_sysfs_words() {
        for word in ["always", "madvise", "never"] {
            let mode = ThpEnabled::from_word(word).unwrap();
            assert_eq!(mode.to_string(), word);
            assert_eq!(serde_json::to_string(&mode).unwrap(), format!("\"{word}\""));
        }
        assert_eq!(ThpEnabled::from_word("[madvise]"), None);
    }
}
