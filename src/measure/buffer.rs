//! Buffers with a requested page size that report the page size they actually got.
//!
//! Four kinds: plain 4 KiB pages (with `MADV_NOHUGEPAGE`, so THP in `always` mode cannot
//! quietly promote them), transparent huge pages (`MADV_HUGEPAGE` on a 2 MiB-aligned region),
//! and hugetlbfs pages of 2 MiB or 1 GiB (`MAP_HUGETLB`, only when the pool has enough free
//! pages). Every page is touched when the buffer is made, then the mapping's entry in
//! `/proc/self/smaps` says what the kernel did: `AnonHugePages` for THP, `KernelPageSize` and
//! `Private_Hugetlb` for hugetlbfs. A request that did not take is reported as not taken
//! ([`PageBacking::took`]), so a probe never measures 4 KiB pages under a huge-page label.

use crate::format::human_bytes;
use crate::machine::meminfo::{self, HugePagePool};
use crate::machine::smaps::{self, Mapping};
use serde::{Deserialize, Serialize};
use std::fmt;

/// 2 MiB, the x86-64 huge page (PMD) size.
pub const HUGE_2M: u64 = 2 << 20;
/// 1 GiB, the x86-64 gigantic page (PUD) size.
pub const HUGE_1G: u64 = 1 << 30;

/// Share of a THP buffer that must be backed by huge pages for the request to count as taken.
/// A fully touched, 2 MiB-aligned madvised region gets 100% when memory is not fragmented;
/// below 90% the figures would mix page sizes too much to carry a huge-page label.
pub const THP_TOOK_FRACTION: f64 = 0.9;

/// The page size a buffer asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PageKind {
    /// 4 KiB pages, THP explicitly refused.
    #[serde(rename = "4k")]
    Base4k,
    /// Transparent huge pages via `madvise(MADV_HUGEPAGE)`.
    Thp,
    /// hugetlbfs 2 MiB pages (`MAP_HUGETLB | MAP_HUGE_2MB`).
    #[serde(rename = "hugetlb_2m")]
    Hugetlb2m,
    /// hugetlbfs 1 GiB pages (`MAP_HUGETLB | MAP_HUGE_1GB`).
    #[serde(rename = "hugetlb_1g")]
    Hugetlb1g,
}

impl PageKind {
    /// Every kind, smallest page first.
    pub const ALL: [PageKind; 4] = [
        PageKind::Base4k,
        PageKind::Thp,
        PageKind::Hugetlb2m,
        PageKind::Hugetlb1g,
    ];

    /// Name on the command line and in the fingerprint (`4k`, `thp`, `hugetlb_2m`, ...).
    pub fn name(self) -> &'static str {
        match self {
            PageKind::Base4k => "4k",
            PageKind::Thp => "thp",
            PageKind::Hugetlb2m => "hugetlb_2m",
            PageKind::Hugetlb1g => "hugetlb_1g",
        }
    }

    /// Parses a name as [`PageKind::name`] prints it (a `-` may stand for the `_`).
    pub fn parse(s: &str) -> Option<PageKind> {
        let s = s.trim().to_ascii_lowercase().replace('-', "_");
        PageKind::ALL.into_iter().find(|k| k.name() == s)
    }

    /// The page size asked for, in bytes.
    pub fn page_bytes(self) -> u64 {
        match self {
            PageKind::Base4k => 4096,
            PageKind::Thp | PageKind::Hugetlb2m => HUGE_2M,
            PageKind::Hugetlb1g => HUGE_1G,
        }
    }

    /// True for every kind but 4 KiB.
    pub fn is_huge(self) -> bool {
        self != PageKind::Base4k
    }
}

impl fmt::Display for PageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a buffer actually got, read back from `/proc/self/smaps` after touching it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PageBacking {
    /// The kind asked for.
    pub requested: PageKind,
    /// True when the pages are the size asked for.
    pub took: bool,
    /// The page size the buffer is (mostly) backed by, in bytes.
    pub page_bytes: u64,
    /// Size of the mapping holding the buffer, in bytes.
    pub mapping_bytes: u64,
    /// Resident bytes of the mapping (`Rss`, or `Private_Hugetlb` + `Shared_Hugetlb`).
    pub resident_bytes: u64,
    /// Bytes backed by transparent huge pages (`AnonHugePages`).
    pub anon_huge_bytes: u64,
    /// `KernelPageSize` of the mapping, in bytes (2 MiB or 1 GiB for hugetlbfs).
    pub kernel_page_bytes: u64,
    /// Share of the resident bytes on pages of the requested size.
    pub huge_fraction: f64,
    /// One sentence on what happened, for a reader.
    pub note: String,
}

/// What became of one page kind a probe asked for: the record in `effects.page_kinds`.
/// In the JSON, a buffer that was made is its [`PageBacking`] with `"allocated": true`; one that
/// could not be made (too little memory, no hugetlbfs pages) is `{"requested", "allocated":
/// false, "note"}` and carries no `took`: a failed allocation says nothing about whether the
/// page size would have taken. Files from before `allocated` existed read as made.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PageKindOutcome {
    /// The buffer was made; what it got.
    Made {
        /// What the buffer got.
        #[serde(flatten)]
        backing: PageBacking,
        /// Always true here.
        #[serde(default = "yes")]
        allocated: bool,
    },
    /// The buffer could not be made.
    NotMade {
        /// The kind asked for.
        requested: PageKind,
        /// Always false here.
        allocated: bool,
        /// Why not.
        note: String,
    },
    /// A record from a fingerprint of an earlier version, which kept only whether the
    /// request took (a kind that could not be made also read `took: false` then).
    Brief {
        /// The kind asked for.
        requested: PageKind,
        /// Whether the pages are the size asked for.
        took: bool,
        /// What happened.
        #[serde(default)]
        note: String,
    },
}

fn yes() -> bool {
    true
}

impl PageKindOutcome {
    /// The kind asked for.
    pub fn requested(&self) -> PageKind {
        match self {
            PageKindOutcome::Made { backing, .. } => backing.requested,
            PageKindOutcome::NotMade { requested, .. }
            | PageKindOutcome::Brief { requested, .. } => *requested,
        }
    }

    /// What the buffer got, when it was made and the record kept it.
    pub fn backing(&self) -> Option<&PageBacking> {
        match self {
            PageKindOutcome::Made { backing, .. } => Some(backing),
            PageKindOutcome::NotMade { .. } | PageKindOutcome::Brief { .. } => None,
        }
    }

    /// Whether the request took; `None` when the buffer could not be made.
    pub fn took(&self) -> Option<bool> {
        match self {
            PageKindOutcome::Made { backing, .. } => Some(backing.took),
            PageKindOutcome::NotMade { .. } => None,
            PageKindOutcome::Brief { took, .. } => Some(*took),
        }
    }

    /// The sentence for a reader.
    pub fn note(&self) -> &str {
        match self {
            PageKindOutcome::Made { backing, .. } => &backing.note,
            PageKindOutcome::NotMade { note, .. } | PageKindOutcome::Brief { note, .. } => note,
        }
    }
}

/// Judges a mapping's smaps entry against the request. Pure, so fixtures test it.
pub fn judge_backing(requested: PageKind, m: &Mapping) -> PageBacking {
    let kb = |name: &str| m.kb(name) * 1024;
    let kernel_page_bytes = kb("KernelPageSize");
    let anon_huge_bytes = kb("AnonHugePages");
    let hugetlb_bytes = kb("Private_Hugetlb") + kb("Shared_Hugetlb");
    let resident_bytes = kb("Rss").max(hugetlb_bytes);
    let mapping_bytes = m.end - m.start;
    let share = |part: u64| {
        if resident_bytes == 0 {
            0.0
        } else {
            part as f64 / resident_bytes as f64
        }
    };
    let (took, page_bytes, huge_fraction, note) = match requested {
        PageKind::Base4k => {
            let took = anon_huge_bytes == 0 && kernel_page_bytes == 4096;
            let note = if took {
                "4 KiB pages, no transparent huge pages".to_string()
            } else {
                format!(
                    "asked for 4 KiB pages but {} of the mapping is on transparent huge pages",
                    human_bytes(anon_huge_bytes)
                )
            };
            (took, 4096, 1.0 - share(anon_huge_bytes), note)
        }
        PageKind::Thp => {
            let f = share(anon_huge_bytes);
            let took = f >= THP_TOOK_FRACTION;
            let note = if took {
                format!("{:.0}% on 2 MiB transparent huge pages", f * 100.0)
            } else if m.thp_eligible == Some(false) {
                "madvise(MADV_HUGEPAGE) did not take: the kernel says this mapping is not \
                 eligible for transparent huge pages (THP mode never, or disabled for the \
                 process)"
                    .to_string()
            } else {
                format!(
                    "madvise(MADV_HUGEPAGE) did not take: only {:.0}% on huge pages \
                     (memory fragmented, or THP defrag off)",
                    f * 100.0
                )
            };
            (took, if took { HUGE_2M } else { 4096 }, f, note)
        }
        PageKind::Hugetlb2m | PageKind::Hugetlb1g => {
            let want = requested.page_bytes();
            let took = kernel_page_bytes == want && hugetlb_bytes > 0;
            let note = if took {
                format!("hugetlbfs pages of {}", human_bytes(want))
            } else {
                format!(
                    "asked for {} hugetlbfs pages, the mapping has {} pages",
                    human_bytes(want),
                    human_bytes(kernel_page_bytes)
                )
            };
            (took, kernel_page_bytes, share(hugetlb_bytes), note)
        }
    };
    PageBacking {
        requested,
        took,
        page_bytes,
        mapping_bytes,
        resident_bytes,
        anon_huge_bytes,
        kernel_page_bytes,
        huge_fraction,
        note,
    }
}

/// Why a buffer could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BufferError {
    /// More than the kernel could hand out without swapping.
    #[error(
        "a {} buffer is more than the {} of memory available (MemAvailable)",
        human_bytes(*requested),
        human_bytes(*available)
    )]
    NotEnoughMemory {
        /// Bytes asked for.
        requested: u64,
        /// `MemAvailable` in bytes.
        available: u64,
    },
    /// hugetlbfs pages of this size are not reserved, or too few are free.
    #[error(
        "{kind} needs {needed} free hugetlbfs page(s) of {}, {available} available \
         (reserve with `sysctl vm.nr_hugepages` or /sys/kernel/mm/hugepages)",
        human_bytes(kind.page_bytes())
    )]
    NoHugePages {
        /// The kind asked for.
        kind: PageKind,
        /// Pages the buffer needs.
        needed: u64,
        /// Pages the pool can give.
        available: u64,
    },
    /// A system call failed.
    #[error("{call} for a {kind} buffer failed: {errno}")]
    Syscall {
        /// `mmap`, `madvise`, ...
        call: &'static str,
        /// The kind asked for.
        kind: PageKind,
        /// What the kernel said.
        errno: nix::errno::Errno,
    },
    /// The buffer's mapping is not in /proc/self/smaps (no procfs?).
    #[error("cannot find the buffer's mapping in /proc/self/smaps")]
    NoSmaps,
    /// A thread that was to fault in part of the buffer could not be pinned.
    #[error("cannot fault in a {kind} buffer from CPU {cpu}: {reason}")]
    NotPinned {
        /// The kind asked for.
        kind: PageKind,
        /// The CPU the thread was to run on.
        cpu: usize,
        /// Why pinning failed.
        reason: String,
    },
}

/// A page-aligned anonymous buffer of one [`PageKind`], unmapped on drop.
#[derive(Debug)]
pub struct Buffer {
    map_base: *mut u8,
    map_len: usize,
    ptr: *mut u8,
    len: usize,
    kind: PageKind,
}

// SAFETY: the buffer owns its mapping; sharing it between threads is as safe as sharing a
// `Vec<u8>`'s storage, and the probes only read it from several threads.
unsafe impl Send for Buffer {}
// SAFETY: see above; shared access hands out only `*const` pointers.
unsafe impl Sync for Buffer {}

impl Buffer {
    /// Maps at least `len` bytes of `kind`, touches every page, and returns the buffer. The
    /// length is rounded up to a whole number of requested pages. Fails, before mapping
    /// anything, when the memory is not there.
    ///
    /// Linux places a page on the NUMA node of the CPU that first touches it, so pin the
    /// calling thread to the CPU that will read the buffer before calling this (or use
    /// [`Buffer::allocate_touched_by`] for a buffer that several CPUs read in slices).
    pub fn allocate(len: u64, kind: PageKind) -> Result<Buffer, BufferError> {
        let buf = Buffer::map_checked(len, kind)?;
        buf.touch(0..buf.len);
        Ok(buf)
    }

    /// Like [`Buffer::allocate`], but slice `i` (`slice_bytes` from `i * slice_bytes`) is
    /// faulted in by a thread pinned to `cpus[i]`, and anything past the last slice by
    /// `cpus[0]`: on a NUMA machine each reader then finds its slice on its own node.
    pub fn allocate_touched_by(
        len: u64,
        kind: PageKind,
        cpus: &[usize],
        slice_bytes: usize,
    ) -> Result<Buffer, BufferError> {
        let buf = Buffer::map_checked(len, kind)?;
        let n = cpus.len();
        let tail = (slice_bytes * n).min(buf.len);
        std::thread::scope(|s| {
            let handles: Vec<_> = cpus
                .iter()
                .enumerate()
                .map(|(i, &cpu)| {
                    let buf = &buf;
                    s.spawn(move || {
                        let _pin = crate::measure::pin_to_cpu(cpu).map_err(|e| {
                            BufferError::NotPinned {
                                kind,
                                cpu,
                                reason: e.to_string(),
                            }
                        })?;
                        let start = (i * slice_bytes).min(buf.len);
                        buf.touch(start..(start + slice_bytes).min(buf.len));
                        if i == 0 {
                            buf.touch(tail..buf.len);
                        }
                        Ok(())
                    })
                })
                .collect();
            handles
                .into_iter()
                .try_for_each(|h| h.join().expect("toucher thread panicked"))
        })?;
        Ok(buf)
    }

    /// Maps `len` bytes (rounded up to whole pages of `kind`) after checking that the memory
    /// is there, without touching them.
    fn map_checked(len: u64, kind: PageKind) -> Result<Buffer, BufferError> {
        let len = len.max(1).next_multiple_of(kind.page_bytes());
        match kind {
            PageKind::Base4k | PageKind::Thp => {
                if let Some(available) = meminfo::read_mem_available_bytes() {
                    check_available(len, available)?;
                }
            }
            PageKind::Hugetlb2m | PageKind::Hugetlb1g => {
                let pools = meminfo::hugepage_pools();
                check_pool(len, kind, &pools)?;
            }
        }
        Buffer::map(len as usize, kind)
    }

    fn map(len: usize, kind: PageKind) -> Result<Buffer, BufferError> {
        let syscall = |call| move |errno| BufferError::Syscall { call, kind, errno };
        let prot = libc::PROT_READ | libc::PROT_WRITE;
        let anon = libc::MAP_PRIVATE | libc::MAP_ANONYMOUS;
        // THP needs a 2 MiB-aligned region: over-allocate by one huge page and trim.
        let map_len = if kind == PageKind::Thp {
            len + HUGE_2M as usize
        } else {
            len
        };
        let flags = match kind {
            PageKind::Base4k | PageKind::Thp => anon,
            PageKind::Hugetlb2m => anon | libc::MAP_HUGETLB | libc::MAP_HUGE_2MB,
            PageKind::Hugetlb1g => anon | libc::MAP_HUGETLB | libc::MAP_HUGE_1GB,
        };
        // SAFETY: a fresh anonymous mapping; no existing memory is touched.
        let base = unsafe { libc::mmap(std::ptr::null_mut(), map_len, prot, flags, -1, 0) };
        if base == libc::MAP_FAILED {
            return Err(syscall("mmap")(nix::errno::Errno::last()));
        }
        let base = base as *mut u8;
        let mut buf = Buffer {
            map_base: base,
            map_len,
            ptr: base,
            len,
            kind,
        };
        match kind {
            PageKind::Thp => {
                let offset = base.align_offset(HUGE_2M as usize);
                buf.ptr = base.wrapping_add(offset);
                advise(buf.ptr, len, libc::MADV_HUGEPAGE).map_err(syscall("madvise"))?;
            }
            PageKind::Base4k => {
                // Fails with EINVAL on kernels built without THP, where 4 KiB is all there is.
                let _ = advise(buf.ptr, len, libc::MADV_NOHUGEPAGE);
            }
            _ => {}
        }
        Ok(buf)
    }

    /// Writes one byte per 4 KiB of `range` so every page is faulted in before anyone times
    /// it.
    fn touch(&self, range: std::ops::Range<usize>) {
        for off in range.step_by(4096) {
            // SAFETY: `off` is inside the buffer, which is writable.
            unsafe { self.ptr.add(off).write_volatile(0) };
        }
    }

    /// Reads what the buffer got from /proc/self/smaps.
    pub fn backing(&self) -> Result<PageBacking, BufferError> {
        let text = std::fs::read_to_string("/proc/self/smaps").map_err(|_| BufferError::NoSmaps)?;
        let maps = smaps::parse_smaps(&text);
        let m = smaps::mapping_containing(&maps, self.ptr as u64).ok_or(BufferError::NoSmaps)?;
        Ok(judge_backing(self.kind, m))
    }

    /// Start of the buffer (aligned to the requested page size).
    pub fn as_ptr(&self) -> *const u8 {
        self.ptr
    }

    /// Start of the buffer, writable.
    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.ptr
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never true: a buffer holds at least one page.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The kind asked for.
    pub fn kind(&self) -> PageKind {
        self.kind
    }
}

impl Drop for Buffer {
    fn drop(&mut self) {
        // SAFETY: unmapping exactly the mapping this buffer made.
        unsafe { libc::munmap(self.map_base as *mut libc::c_void, self.map_len) };
    }
}

/// One buffer per page kind, for probes that compare kinds.
#[derive(Debug, Default)]
pub struct KindBuffers {
    /// The buffers whose request took, in the order asked.
    pub buffers: Vec<Buffer>,
    /// What happened to every kind asked for, for `effects.page_kinds`.
    pub records: Vec<PageKindOutcome>,
}

impl KindBuffers {
    /// The notes of the kinds that could not be allocated, for a skip reason.
    pub fn failures(&self) -> String {
        self.records
            .iter()
            .filter(|r| r.took().is_none())
            .map(|r| r.note().to_string())
            .collect::<Vec<_>>()
            .join("; ")
    }
}

/// Maps a buffer of `len` bytes for each of `kinds` with `make` (which faults it in), reads
/// back what each got, and keeps the buffers whose request took: a request that did not take
/// would be 4 KiB pages measured under a huge-page label. Fails only when smaps cannot be read.
pub fn allocate_kinds(
    kinds: &[PageKind],
    mut make: impl FnMut(PageKind) -> Result<Buffer, BufferError>,
) -> Result<KindBuffers, BufferError> {
    let mut out = KindBuffers::default();
    for &kind in kinds {
        match make(kind) {
            Ok(buf) => {
                let backing = buf.backing()?;
                if backing.took {
                    out.buffers.push(buf);
                }
                out.records.push(PageKindOutcome::Made {
                    backing,
                    allocated: true,
                });
            }
            Err(e) => out.records.push(PageKindOutcome::NotMade {
                requested: kind,
                allocated: false,
                note: e.to_string(),
            }),
        }
    }
    Ok(out)
}

/// Page kinds whose buffers count against `MemAvailable` (4 KiB and THP; hugetlbfs pages come
/// from their own reserved pool).
pub fn kinds_using_mem_available(kinds: &[PageKind]) -> usize {
    kinds
        .iter()
        .filter(|k| matches!(k, PageKind::Base4k | PageKind::Thp))
        .count()
}

fn advise(ptr: *mut u8, len: usize, advice: libc::c_int) -> Result<(), nix::errno::Errno> {
    // SAFETY: the range is inside a mapping this process owns.
    let rc = unsafe { libc::madvise(ptr as *mut libc::c_void, len, advice) };
    if rc == 0 {
        Ok(())
    } else {
        Err(nix::errno::Errno::last())
    }
}

/// Refuses a buffer larger than `MemAvailable`.
pub fn check_available(len: u64, available: u64) -> Result<(), BufferError> {
    if len > available {
        Err(BufferError::NotEnoughMemory {
            requested: len,
            available,
        })
    } else {
        Ok(())
    }
}

/// Refuses a hugetlbfs buffer the pool cannot fill.
pub fn check_pool(len: u64, kind: PageKind, pools: &[HugePagePool]) -> Result<(), BufferError> {
    let needed = len.div_ceil(kind.page_bytes());
    let available = pools
        .iter()
        .find(|p| p.page_bytes == kind.page_bytes())
        .map(HugePagePool::available)
        .unwrap_or(0);
    if needed > available {
        Err(BufferError::NoHugePages {
            kind,
            needed,
            available,
        })
    } else {
        Ok(())
    }
}

/// Parses a size: a number of bytes, or with a binary suffix `K`, `M`, `G`, `T` (also `KB`,
/// `KiB`, ...; case-insensitive). `16K` is 16384. `None` for anything else or zero.
pub fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim().to_ascii_lowercase();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(digits);
    let n: u64 = num.parse().ok()?;
    let shift = match unit.trim() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        _ => return None,
    };
    n.checked_mul(1u64 << shift).filter(|&v| v > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SMAPS_THP: &str = include_str!("../../tests/fixtures/proc/smaps-thp-madvise.txt");
    // A process that mapped 4 x 2 MiB hugetlbfs pages at 0x7fd515000000 (touching two) and a
    // 4 MiB MADV_NOHUGEPAGE region at 0x7fd514c00000 (touching all), on the Zen 4 guest.
    const SMAPS_HUGETLB: &str =
        include_str!("../../tests/fixtures/proc/smaps-hugetlb-2m-and-nohugepage.txt");

    fn mapping(text: &str, addr: u64) -> Mapping {
        smaps::mapping_containing(&smaps::parse_smaps(text), addr)
            .unwrap()
            .clone()
    }

    #[test]
    fn madvised_thp_region_took() {
        let b = judge_backing(PageKind::Thp, &mapping(SMAPS_THP, 0x7fbb_c080_0000));
        assert!(b.took, "{b:?}");
        assert_eq!(b.page_bytes, HUGE_2M);
        assert_eq!(b.anon_huge_bytes, 8 << 20);
        assert_eq!(b.huge_fraction, 1.0);
    }

    #[test]
    fn thp_request_on_a_4k_region_is_reported_as_not_taken() {
        // The NOHUGEPAGE region stands in for a THP request the kernel ignored.
        let b = judge_backing(PageKind::Thp, &mapping(SMAPS_HUGETLB, 0x7fd5_14c0_0000));
        assert!(!b.took);
        assert_eq!(b.page_bytes, 4096);
        assert!(b.note.contains("did not take"), "{}", b.note);
    }

    #[test]
    fn nohugepage_region_is_4k() {
        let b = judge_backing(PageKind::Base4k, &mapping(SMAPS_HUGETLB, 0x7fd5_14c0_0000));
        assert!(b.took, "{b:?}");
        assert_eq!((b.page_bytes, b.resident_bytes), (4096, 4 << 20));
        // And a 4k request that landed on THP is caught.
        let b = judge_backing(PageKind::Base4k, &mapping(SMAPS_THP, 0x7fbb_c080_0000));
        assert!(!b.took);
    }

    #[test]
    fn hugetlb_2m_mapping_is_recognised_and_1g_request_is_not_taken() {
        let m = mapping(SMAPS_HUGETLB, 0x7fd5_1500_0000);
        let b = judge_backing(PageKind::Hugetlb2m, &m);
        assert!(b.took, "{b:?}");
        assert_eq!(b.kernel_page_bytes, HUGE_2M);
        assert_eq!(b.resident_bytes, 4 << 20);
        let b = judge_backing(PageKind::Hugetlb1g, &m);
        assert!(!b.took);
    }

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_size("16K"), Some(16384));
        assert_eq!(parse_size("16KiB"), Some(16384));
        assert_eq!(parse_size("1g"), Some(1 << 30));
        assert_eq!(parse_size("512MB"), Some(512 << 20));
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("0"), None);
        assert_eq!(parse_size("1.5G"), None);
        assert_eq!(parse_size("12 parsecs"), None);
        assert_eq!(parse_size("99999999999T"), None);
    }

    #[test]
    fn sizes_format_with_binary_units() {
        assert_eq!(human_bytes(16384), "16 KiB");
        assert_eq!(human_bytes(3 << 19), "1.50 MiB");
        assert_eq!(human_bytes(1 << 30), "1 GiB");
        assert_eq!(human_bytes(100), "100 B");
    }

    #[test]
    fn page_kinds_round_trip_their_names() {
        for k in PageKind::ALL {
            assert_eq!(PageKind::parse(k.name()), Some(k));
        }
        assert_eq!(PageKind::parse("hugetlb-1g"), Some(PageKind::Hugetlb1g));
        assert_eq!(PageKind::parse("8k"), None);
    }

    #[test]
    fn too_large_a_buffer_is_refused_before_mapping() {
        let err = check_available(2 << 30, 1 << 30).unwrap_err();
        assert_eq!(
            err.to_string(),
            "a 2 GiB buffer is more than the 1 GiB of memory available (MemAvailable)"
        );
        // And through allocate: far more than any machine has.
        let err = Buffer::allocate(1 << 60, PageKind::Base4k).unwrap_err();
        assert!(matches!(err, BufferError::NotEnoughMemory { .. }), "{err}");
    }

    #[test]
    fn hugetlb_without_a_pool_is_refused() {
        let err = check_pool(HUGE_2M * 3, PageKind::Hugetlb2m, &[]).unwrap_err();
        assert!(
            err.to_string()
                .contains("needs 3 free hugetlbfs page(s) of 2 MiB, 0 available")
        );
        let pool = HugePagePool {
            page_bytes: HUGE_2M,
            total: 8,
            free: 6,
            reserved: 2,
        };
        assert!(
            check_pool(
                HUGE_2M * 4,
                PageKind::Hugetlb2m,
                std::slice::from_ref(&pool)
            )
            .is_ok()
        );
        assert!(check_pool(HUGE_2M * 5, PageKind::Hugetlb2m, &[pool]).is_err());
    }

    #[test]
    fn a_4k_buffer_reports_4k_pages() {
        let buf = Buffer::allocate(1 << 20, PageKind::Base4k).unwrap();
        let b = buf.backing().unwrap();
        assert!(b.took, "{b:?}");
        assert_eq!(b.page_bytes, 4096);
        assert_eq!(buf.len(), 1 << 20);
    }

    #[test]
    fn a_buffer_touched_by_several_cpus_is_whole_and_resident() {
        let cpus = crate::measure::allowed_cpus();
        let cpus = &cpus[..cpus.len().min(2)];
        let buf = Buffer::allocate_touched_by(3 << 20, PageKind::Base4k, cpus, 1 << 20).unwrap();
        let b = buf.backing().unwrap();
        assert!(b.took, "{b:?}");
        // Every page faulted in, the tail past the slices included (the kernel may merge the
        // mapping with a neighbouring one, so at least).
        assert!(b.resident_bytes >= 3 << 20, "{b:?}");
        let err = Buffer::allocate_touched_by(1 << 20, PageKind::Base4k, &[1 << 20], 4096);
        assert!(matches!(err, Err(BufferError::NotPinned { .. })), "{err:?}");
    }

    #[test]
    fn a_kind_that_cannot_be_allocated_is_recorded_without_took() {
        // Regression: a THP buffer refused for lack of memory (the 4 KiB one took it) was
        // recorded as {"took": false}, which the huge-pages verdict read as THP not taking.
        let kb = allocate_kinds(&[PageKind::Base4k, PageKind::Thp], |kind| match kind {
            PageKind::Base4k => Buffer::allocate(1 << 20, kind),
            _ => Err(BufferError::NotEnoughMemory {
                requested: 16 << 30,
                available: 1 << 30,
            }),
        })
        .unwrap();
        assert_eq!(kb.buffers.len(), 1);
        let json = serde_json::to_value(&kb.records).unwrap();
        assert_eq!(json[0]["allocated"], true);
        assert_eq!(json[0]["took"], true);
        assert_eq!(json[1]["allocated"], false);
        assert_eq!(json[1]["requested"], "thp");
        assert!(json[1].get("took").is_none(), "{}", json[1]);
        // The JSON reads back as the same outcomes.
        let back: Vec<PageKindOutcome> = serde_json::from_value(json).unwrap();
        assert_eq!(back, kb.records);
        assert!(kb.failures().contains("MemAvailable"), "{}", kb.failures());
        assert_eq!(
            kinds_using_mem_available(&PageKind::ALL),
            2,
            "hugetlbfs pages come from their pool"
        );
    }

    #[test]
    fn a_thp_buffer_is_aligned_and_reports_what_it_got() {
        let buf = Buffer::allocate(4 << 20, PageKind::Thp).unwrap();
        assert!((buf.as_ptr() as usize).is_multiple_of(HUGE_2M as usize));
        let b = buf.backing().unwrap();
        // Whatever the THP mode, the report must match the smaps truth.
        assert_eq!(b.took, b.huge_fraction >= THP_TOOK_FRACTION);
        assert_eq!(b.page_bytes, if b.took { HUGE_2M } else { 4096 });
        let thp_never = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled")
            .map(|t| t.contains("[never]"))
            .unwrap_or(true);
        if thp_never {
            assert!(!b.took);
        }
    }
}
