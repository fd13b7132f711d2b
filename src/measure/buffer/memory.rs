//! Checks made before mapping anything: enough available memory, enough free hugetlbfs pages.

use super::{BufferError, PageKind};
use crate::machine::meminfo::{HugePagePool, MemoryBound, MemoryRoom};

/// Refuses a buffer larger than `MemAvailable`.
pub fn check_available(len: u64, available: u64) -> Result<(), BufferError> {
    check_room(
        len,
        &MemoryRoom {
            bound: MemoryBound::Available,
            limit_bytes: available,
            room_bytes: available,
        },
    )
}

/// Refuses a buffer larger than the room left (`MemAvailable`, or what a cgroup limit or
/// `RLIMIT_AS` leaves).
pub fn check_room(len: u64, room: &MemoryRoom) -> Result<(), BufferError> {
    if len > room.room_bytes {
        Err(BufferError::NotEnoughMemory {
            requested: len,
            available: room.room_bytes,
            bound: room.bound,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::buffer::{Buffer, HUGE_2M};

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
}
