//! Buffers with a requested page size that report the page size they actually got.
//!
//! Four kinds: plain 4 KiB pages (with `MADV_NOHUGEPAGE`, so THP in `always` mode cannot
//! quietly promote them), transparent huge pages (`MADV_HUGEPAGE` on a 2 MiB-aligned region),
//! and hugetlbfs pages of 2 MiB or 1 GiB (`MAP_HUGETLB`, only when the pool has enough free
//! pages). Every page is touched when the buffer is made, then the mapping's entry in
//! `/proc/self/smaps` says what the kernel did: `AnonHugePages` for THP, `KernelPageSize` and
//! `Private_Hugetlb` for hugetlbfs. A request that did not take is reported as not taken
//! ([`PageBacking::took`]), so a probe never measures 4 KiB pages under a huge-page label.
//!
//! This file maps, faults in and reads back a buffer ([`Buffer`]); the page-size vocabulary
//! and its judge are in [`pages`], the checks before mapping in [`memory`], the one-buffer-
//! per-kind policy of comparing probes in [`kinds`].

mod kinds;
mod memory;
mod pages;

pub use kinds::{KindBuffers, allocate_kinds, kinds_using_mem_available};
pub use memory::{check_available, check_pool, check_room};
pub use pages::{
    HUGE_1G, HUGE_2M, PageBacking, PageKind, PageKindOutcome, THP_TOOK_FRACTION, judge_backing,
};

use crate::format::human_bytes;
use crate::machine::meminfo::{self, MemoryBound};

/// Where the memory a buffer may take comes from, after its size: `of memory available
/// (MemAvailable)`, `that the cgroup memory limit leaves`.
pub fn room_words(bound: MemoryBound) -> &'static str {
    match bound {
        MemoryBound::Available => "of memory available (MemAvailable)",
        MemoryBound::CgroupLimit => "that the cgroup memory limit leaves",
        MemoryBound::AddressSpace => "that the address-space limit (RLIMIT_AS) leaves",
    }
}
use crate::machine::smaps;

/// Why a buffer could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BufferError {
    /// More than the kernel could hand out without swapping, or than a limit leaves.
    #[error(
        "a {} buffer is more than the {} {}",
        human_bytes(*requested),
        human_bytes(*available),
        room_words(*bound)
    )]
    NotEnoughMemory {
        /// Bytes asked for.
        requested: u64,
        /// `MemAvailable`, or what the limit leaves, in bytes.
        available: u64,
        /// What bounds it.
        bound: MemoryBound,
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
    /// A thread that was to fault in part of the buffer could not start.
    #[error("cannot fault in a {kind} buffer: {reason}")]
    NoThread {
        /// The kind asked for.
        kind: PageKind,
        /// Why (a pids limit, RLIMIT_NPROC).
        reason: String,
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
                    crate::measure::threads::spawn_scoped(s, move || {
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
            // Every thread that started is joined, also when a later one was refused.
            let ends: Vec<Result<(), BufferError>> = handles
                .into_iter()
                .map(|h| match h {
                    Ok(h) => h.join().expect("toucher thread panicked"),
                    Err(e) => Err(BufferError::NoThread {
                        kind,
                        reason: e.to_string(),
                    }),
                })
                .collect();
            ends.into_iter().collect::<Result<(), BufferError>>()
        })?;
        Ok(buf)
    }

    /// Maps `len` bytes (rounded up to whole pages of `kind`) after checking that the memory
    /// is there, without touching them.
    fn map_checked(len: u64, kind: PageKind) -> Result<Buffer, BufferError> {
        let len = len.max(1).next_multiple_of(kind.page_bytes());
        match kind {
            PageKind::Base4k | PageKind::Thp => {
                if let Some(room) = meminfo::read_memory_room() {
                    check_room(len, &room)?;
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

fn advise(ptr: *mut u8, len: usize, advice: libc::c_int) -> Result<(), nix::errno::Errno> {
    // SAFETY: the range is inside a mapping this process owns.
    let rc = unsafe { libc::madvise(ptr as *mut libc::c_void, len, advice) };
    if rc == 0 {
        Ok(())
    } else {
        Err(nix::errno::Errno::last())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
