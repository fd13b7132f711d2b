//! Microarchitecture names from vendor, family, model and stepping: Intel Haswell to Granite
//! Rapids, AMD Zen 1 to Zen 5. A CPU outside the table is `unknown`, never a guess.
//!
//! Sources: Intel SDM vol. 4 table 2-1 ("CPUID signature values of DisplayFamily_DisplayModel")
//! and the kernel's `arch/x86/include/asm/intel-family.h`; AMD's model ranges from the kernel's
//! `arch/x86/kernel/cpu/amd.c` (Zen generation checks) and AMD's revision guides.

/// The name of the microarchitecture, or `"unknown"`.
pub fn microarchitecture(vendor_id: &str, family: u32, model: u32, stepping: u32) -> &'static str {
    match vendor_id {
        "GenuineIntel" if family == 6 => intel_family6(model, stepping),
        "AuthenticAMD" | "HygonGenuine" => amd(family, model),
        _ => "unknown",
    }
}

fn intel_family6(model: u32, stepping: u32) -> &'static str {
    match model {
        0x3C | 0x45 | 0x46 => "Haswell",
        0x3F => "Haswell-EP",
        0x3D | 0x47 => "Broadwell",
        0x4F | 0x56 => "Broadwell-EP",
        0x4E | 0x5E => "Skylake",
        // One model number for three server generations; the stepping tells them apart.
        0x55 => match stepping {
            0..=4 => "Skylake-SP",
            5..=7 => "Cascade Lake",
            _ => "Cooper Lake",
        },
        0x8E | 0x9E => "Kaby Lake / Coffee Lake",
        0xA5 | 0xA6 => "Comet Lake",
        0x66 => "Cannon Lake",
        0x7D | 0x7E => "Ice Lake",
        0x6A | 0x6C => "Ice Lake-SP",
        0xA7 => "Rocket Lake",
        0x8C | 0x8D => "Tiger Lake",
        0x97 | 0x9A => "Alder Lake",
        0xB7 | 0xBA | 0xBF => "Raptor Lake",
        0xAA | 0xAC => "Meteor Lake",
        0xBD => "Lunar Lake",
        0xC5 | 0xC6 => "Arrow Lake",
        0x8F => "Sapphire Rapids",
        0xCF => "Emerald Rapids",
        0xAF => "Sierra Forest",
        0xAD | 0xAE => "Granite Rapids",
        _ => "unknown",
    }
}

fn amd(family: u32, model: u32) -> &'static str {
    match (family, model) {
        (0x17, 0x00..=0x07 | 0x10..=0x17 | 0x20..=0x2F) => "Zen",
        (0x17, 0x08..=0x0F | 0x18..=0x1F) => "Zen+",
        (0x17, 0x30..=0xAF) => "Zen 2",
        (0x18, _) => "Zen (Hygon Dhyana)",
        (0x19, 0x00..=0x0F | 0x20..=0x3F | 0x50..=0x5F) => "Zen 3",
        (0x19, 0x40..=0x4F) => "Zen 3+",
        (0x19, 0x10..=0x1F | 0x60..=0x7F) => "Zen 4",
        (0x19, 0xA0..=0xAF) => "Zen 4c",
        (0x1A, 0x00..=0x7F) => "Zen 5",
        _ => "unknown",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_seed_cpus() {
        // Xeon E5-1620 v3 (old machine of the PAUSE seed) and Xeon Gold 6126 (new machine).
        assert_eq!(microarchitecture("GenuineIntel", 6, 0x3F, 2), "Haswell-EP");
        assert_eq!(microarchitecture("GenuineIntel", 6, 0x55, 4), "Skylake-SP");
        assert_eq!(
            microarchitecture("GenuineIntel", 6, 0x55, 7),
            "Cascade Lake"
        );
    }

    #[test]
    fn fixture_cpus() {
        assert_eq!(microarchitecture("AuthenticAMD", 25, 17, 1), "Zen 4");
        assert_eq!(microarchitecture("GenuineIntel", 6, 60, 3), "Haswell");
    }

    #[test]
    fn newest_generations() {
        assert_eq!(
            microarchitecture("GenuineIntel", 6, 0xAD, 1),
            "Granite Rapids"
        );
        assert_eq!(microarchitecture("GenuineIntel", 6, 0xB7, 1), "Raptor Lake");
        assert_eq!(microarchitecture("AuthenticAMD", 0x1A, 0x02, 0), "Zen 5");
        assert_eq!(microarchitecture("AuthenticAMD", 0x17, 0x31, 0), "Zen 2");
        assert_eq!(microarchitecture("AuthenticAMD", 0x17, 0x08, 2), "Zen+");
    }

    #[test]
    fn outside_the_table_is_unknown() {
        assert_eq!(microarchitecture("GenuineIntel", 6, 0x1A, 5), "unknown");
        assert_eq!(microarchitecture("GenuineIntel", 19, 1, 0), "unknown");
        assert_eq!(microarchitecture("CentaurHauls", 6, 0x0F, 0), "unknown");
    }
}
