//! Hypervisor detection from CPUID: leaf 1 ECX bit 31 ("hypervisor present", set by every
//! mainstream hypervisor) and the vendor signature of leaf 0x40000000.

use serde::{Deserialize, Serialize};

/// The hypervisor this guest runs under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hypervisor {
    /// Vendor as identified from the CPUID signature (`KVM`, `Hyper-V`, `VMware`, `Xen`, ...),
    /// or the raw 12-byte signature when it is not a known one.
    pub vendor: String,
}

/// The hypervisor, or `None` on bare metal (and off x86-64, where CPUID does not exist).
#[cfg(target_arch = "x86_64")]
pub fn detect_hypervisor() -> Option<Hypervisor> {
    use raw_cpuid::{CpuId, Hypervisor as H};
    let cpuid = CpuId::new();
    let present = cpuid.get_feature_info().is_some_and(|f| f.has_hypervisor());
    if !present {
        return None;
    }
    let vendor = match cpuid.get_hypervisor_info().map(|h| h.identify()) {
        Some(H::KVM) => "KVM".to_string(),
        Some(H::HyperV) => "Hyper-V".to_string(),
        Some(H::VMware) => "VMware".to_string(),
        Some(H::Xen) => "Xen".to_string(),
        Some(H::QEMU) => "QEMU (TCG)".to_string(),
        Some(H::Bhyve) => "bhyve".to_string(),
        Some(H::QNX) => "QNX".to_string(),
        Some(H::ACRN) => "ACRN".to_string(),
        Some(H::Unknown(b, c, d)) => signature_text(b, c, d),
        None => "unknown".to_string(),
    };
    Some(Hypervisor { vendor })
}

/// The 12-byte signature in EBX, ECX, EDX as text (non-printable bytes dropped).
#[cfg(target_arch = "x86_64")]
fn signature_text(ebx: u32, ecx: u32, edx: u32) -> String {
    [ebx, ecx, edx]
        .iter()
        .flat_map(|r| r.to_le_bytes())
        .filter(|b| b.is_ascii_graphic() || *b == b' ')
        .map(char::from)
        .collect::<String>()
        .trim()
        .to_string()
}

/// Off x86-64 there is no CPUID: report none rather than guess.
#[cfg(not(target_arch = "x86_64"))]
pub fn detect_hypervisor() -> Option<Hypervisor> {
    None
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    use super::*;

    #[test]
    fn unknown_signatures_become_text() {
        // "Linux KVM Hv" as EBX/ECX/EDX little-endian words.
        let (b, c, d) = (
            u32::from_le_bytes(*b"Linu"),
            u32::from_le_bytes(*b"x KV"),
            u32::from_le_bytes(*b"M Hv"),
        );
        assert_eq!(signature_text(b, c, d), "Linux KVM Hv");
    }
}
