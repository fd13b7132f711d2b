//! Vendor events, as data: which raw PMU event counts bus locks, memory-ordering machine
//! clears, cross-core HITM transfers and page walks on which CPU. Encodings move between
//! models, so they live in this table keyed by vendor, family and model, never inline.
//!
//! Sources: the kernel's `tools/perf/pmu-events/arch/x86/*/` JSON (Intel perfmon and AMD PPR
//! derived): `SQ_MISC.SPLIT_LOCK` F4.10 (Haswell..Skylake), `SQ_MISC.BUS_LOCK` F4.10 (Ice Lake,
//! Tiger Lake) and 2C.10 (Golden Cove and later), `MACHINE_CLEARS.MEMORY_ORDERING` C3.02,
//! `MEM_LOAD_*L3_HIT_RETIRED.XSNP_HITM` D2.04 (named `XSNP_FWD` from Golden Cove),
//! `DTLB_LOAD_MISSES.WALK_COMPLETED` 08.0E (12.0E from Golden Cove),
//! `CPU_CLK_UNHALTED.PAUSE` EC.40 (Golden Cove); AMD `ls_locks.bus_lock` PMCx025 umask 01
//! (Zen 1..5), `ls_l1_d_tlb_miss.all` PMCx045 umask FF, `ls_misal_loads.ma64` PMCx047 umask
//! 01 and `ls_dmnd_fills_from_sys.near_cache|far_cache` PMCx043 umask 04|10 (Zen 4/5).

use serde::{Deserialize, Serialize};

/// What a vendor event measures, in cpudoctor's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Signal {
    /// Locked operations that took a bus lock (split or uncacheable).
    BusLocks,
    /// Machine clears caused by memory-ordering conflicts (another core wrote a line this
    /// core had speculatively read): the false/true sharing signal of the Netflix seed.
    MemoryOrderingClears,
    /// Loads served by a modified line in another core's cache (HITM / cross-CCX fills).
    CrossCoreHitm,
    /// Data-TLB misses that walked the page tables.
    DtlbWalks,
    /// Cycles spent in PAUSE.
    PauseCycles,
    /// Loads that crossed a 64-byte line.
    MisalignedLoads,
}

/// A raw event encoding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawEvent {
    /// What it measures.
    pub signal: Signal,
    /// The vendor's name.
    pub name: &'static str,
    /// Event select (12 bits on AMD).
    pub event: u16,
    /// Unit mask.
    pub umask: u8,
    /// Counter mask (0 = none).
    pub cmask: u8,
    /// Edge detect.
    pub edge: bool,
}

impl RawEvent {
    const fn new(signal: Signal, name: &'static str, event: u16, umask: u8) -> RawEvent {
        RawEvent {
            signal,
            name,
            event,
            umask,
            cmask: 0,
            edge: false,
        }
    }

    /// The `perf_event_attr.config` of a `PERF_TYPE_RAW` event, laid out as the core PMU
    /// expects: event[7:0], umask[15:8], edge bit 18, cmask[31:24]; AMD puts event[11:8] in
    /// bits 35:32.
    pub fn config(&self) -> u64 {
        let e = u64::from(self.event);
        (e & 0xff)
            | (u64::from(self.umask) << 8)
            | (u64::from(self.edge) << 18)
            | (u64::from(self.cmask) << 24)
            | ((e >> 8) << 32)
    }
}

/// CPUs sharing one set of encodings.
pub struct EventSet {
    /// Microarchitecture label (for the report).
    pub label: &'static str,
    /// `GenuineIntel` or `AuthenticAMD`.
    pub vendor: &'static str,
    /// Family.
    pub family: u32,
    /// Models, as inclusive ranges.
    pub models: &'static [(u32, u32)],
    /// Its events.
    pub events: &'static [RawEvent],
}

use Signal::*;

const HSW_SKL_CLIENT: &[RawEvent] = &[
    RawEvent::new(BusLocks, "SQ_MISC.SPLIT_LOCK", 0xF4, 0x10),
    RawEvent::new(
        MemoryOrderingClears,
        "MACHINE_CLEARS.MEMORY_ORDERING",
        0xC3,
        0x02,
    ),
    RawEvent::new(
        CrossCoreHitm,
        "MEM_LOAD_L3_HIT_RETIRED.XSNP_HITM",
        0xD2,
        0x04,
    ),
    RawEvent::new(DtlbWalks, "DTLB_LOAD_MISSES.WALK_COMPLETED", 0x08, 0x0E),
];

const ICELAKE: &[RawEvent] = &[
    RawEvent::new(BusLocks, "SQ_MISC.BUS_LOCK", 0xF4, 0x10),
    RawEvent::new(
        MemoryOrderingClears,
        "MACHINE_CLEARS.MEMORY_ORDERING",
        0xC3,
        0x02,
    ),
    RawEvent::new(
        CrossCoreHitm,
        "MEM_LOAD_L3_HIT_RETIRED.XSNP_HITM",
        0xD2,
        0x04,
    ),
    RawEvent::new(DtlbWalks, "DTLB_LOAD_MISSES.WALK_COMPLETED", 0x08, 0x0E),
];

const GOLDEN_COVE: &[RawEvent] = &[
    RawEvent::new(BusLocks, "SQ_MISC.BUS_LOCK", 0x2C, 0x10),
    RawEvent::new(
        MemoryOrderingClears,
        "MACHINE_CLEARS.MEMORY_ORDERING",
        0xC3,
        0x02,
    ),
    RawEvent::new(
        CrossCoreHitm,
        "MEM_LOAD_L3_HIT_RETIRED.XSNP_FWD",
        0xD2,
        0x04,
    ),
    RawEvent::new(DtlbWalks, "DTLB_LOAD_MISSES.WALK_COMPLETED", 0x12, 0x0E),
    RawEvent::new(PauseCycles, "CPU_CLK_UNHALTED.PAUSE", 0xEC, 0x40),
];

const ZEN_1_3: &[RawEvent] = &[
    RawEvent::new(BusLocks, "ls_locks.bus_lock", 0x025, 0x01),
    RawEvent::new(DtlbWalks, "ls_l1_d_tlb_miss.all", 0x045, 0xFF),
];

const ZEN_4_5: &[RawEvent] = &[
    RawEvent::new(BusLocks, "ls_locks.bus_lock", 0x025, 0x01),
    RawEvent::new(
        CrossCoreHitm,
        "ls_dmnd_fills_from_sys.near_cache",
        0x043,
        0x04,
    ),
    RawEvent::new(
        CrossCoreHitm,
        "ls_dmnd_fills_from_sys.far_cache",
        0x043,
        0x10,
    ),
    RawEvent::new(DtlbWalks, "ls_l1_d_tlb_miss.all", 0x045, 0xFF),
    RawEvent::new(MisalignedLoads, "ls_misal_loads.ma64", 0x047, 0x01),
];

/// The table. Models from the kernel's `arch/x86/include/asm/intel-family.h` and
/// `tools/perf/pmu-events/arch/x86/mapfile.csv`.
pub const TABLE: &[EventSet] = &[
    EventSet {
        label: "Haswell/Broadwell/Skylake",
        vendor: "GenuineIntel",
        family: 6,
        models: &[
            (0x3C, 0x3C),
            (0x3F, 0x3F),
            (0x45, 0x47),
            (0x4E, 0x4F),
            (0x55, 0x56),
            (0x5E, 0x5E),
            (0x8E, 0x8E),
            (0x9E, 0x9E),
            (0xA5, 0xA6),
        ],
        events: HSW_SKL_CLIENT,
    },
    EventSet {
        label: "Ice Lake/Tiger Lake",
        vendor: "GenuineIntel",
        family: 6,
        models: &[
            (0x6A, 0x6A),
            (0x6C, 0x6C),
            (0x7D, 0x7E),
            (0x8C, 0x8D),
            (0xA7, 0xA7),
        ],
        events: ICELAKE,
    },
    EventSet {
        label: "Golden Cove and later (Alder Lake P-cores, Sapphire Rapids, ...)",
        vendor: "GenuineIntel",
        family: 6,
        models: &[
            (0x8F, 0x8F),
            (0x97, 0x97),
            (0x9A, 0x9A),
            (0xAD, 0xAE),
            (0xB7, 0xB7),
            (0xBA, 0xBA),
            (0xBF, 0xBF),
            (0xCF, 0xCF),
        ],
        events: GOLDEN_COVE,
    },
    EventSet {
        label: "Zen 1/Zen+/Zen 2",
        vendor: "AuthenticAMD",
        family: 0x17,
        models: &[(0x00, 0xFF)],
        events: ZEN_1_3,
    },
    EventSet {
        label: "Zen 3",
        vendor: "AuthenticAMD",
        family: 0x19,
        models: &[(0x00, 0x0F), (0x20, 0x5F)],
        events: ZEN_1_3,
    },
    EventSet {
        label: "Zen 4",
        vendor: "AuthenticAMD",
        family: 0x19,
        models: &[(0x10, 0x1F), (0x60, 0x7F), (0xA0, 0xAF)],
        events: ZEN_4_5,
    },
    EventSet {
        label: "Zen 5",
        vendor: "AuthenticAMD",
        family: 0x1A,
        models: &[(0x00, 0x7F)],
        events: ZEN_4_5,
    },
];

/// The event set for a CPU, if the table knows it.
pub fn events_for(vendor: &str, family: u32, model: u32) -> Option<&'static EventSet> {
    TABLE.iter().find(|s| {
        s.vendor == vendor
            && s.family == family
            && s.models.iter().any(|&(lo, hi)| (lo..=hi).contains(&model))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::cpuinfo::parse_cpuinfo;

    fn set_of_fixture(text: &str) -> Option<&'static EventSet> {
        let c = parse_cpuinfo(text).unwrap();
        events_for(&c.vendor_id, c.family, c.model)
    }

    #[test]
    fn zen4_fixture_gets_pmcx025_bus_locks() {
        let s = set_of_fixture(include_str!(
            "../../../tests/fixtures/cpuinfo/amd-zen4-epyc-kvm.txt"
        ))
        .unwrap();
        assert_eq!(s.label, "Zen 4");
        let bus = s.events.iter().find(|e| e.signal == BusLocks).unwrap();
        assert_eq!(bus.name, "ls_locks.bus_lock");
        assert_eq!(bus.config(), 0x0125);
    }

    #[test]
    fn haswell_fixture_gets_the_split_lock_and_clears_events() {
        let s = set_of_fixture(include_str!(
            "../../../tests/fixtures/cpuinfo/intel-haswell-i7-4790k.txt"
        ))
        .unwrap();
        let get = |sig| s.events.iter().find(|e| e.signal == sig).unwrap().config();
        assert_eq!(get(BusLocks), 0x10F4);
        assert_eq!(get(MemoryOrderingClears), 0x02C3);
        assert_eq!(get(DtlbWalks), 0x0E08);
    }

    #[test]
    fn golden_cove_moved_bus_lock_and_page_walk_encodings() {
        let s = events_for("GenuineIntel", 6, 0x8F).unwrap(); // Sapphire Rapids
        let get = |sig| s.events.iter().find(|e| e.signal == sig).unwrap();
        assert_eq!(get(BusLocks).config(), 0x102C);
        assert_eq!(get(DtlbWalks).config(), 0x0E12);
        assert_eq!(get(CrossCoreHitm).name, "MEM_LOAD_L3_HIT_RETIRED.XSNP_FWD");
        assert_eq!(get(PauseCycles).config(), 0x40EC);
    }

    #[test]
    fn amd_extended_event_bits_go_to_bits_32_to_35() {
        let e = RawEvent::new(BusLocks, "x", 0x1C0, 0x02);
        assert_eq!(e.config(), (1 << 32) | 0x02C0);
    }

    #[test]
    fn unknown_cpus_get_no_events_rather_than_a_guess() {
        assert!(events_for("GenuineIntel", 6, 0x01).is_none());
        assert!(events_for("HygonGenuine", 0x18, 0).is_none());
        assert!(events_for("AuthenticAMD", 0x15, 0x02).is_none());
    }

    #[test]
    fn every_set_is_reachable_and_models_do_not_overlap() {
        for (i, a) in TABLE.iter().enumerate() {
            for b in &TABLE[i + 1..] {
                if a.vendor == b.vendor && a.family == b.family {
                    for &(lo, hi) in a.models {
                        for &(lo2, hi2) in b.models {
                            assert!(hi < lo2 || hi2 < lo, "{} overlaps {}", a.label, b.label);
                        }
                    }
                }
            }
        }
    }
}
